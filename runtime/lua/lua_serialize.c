/* lua_serialize.c -- tensors to and from files other tools read:
 *   ember.save(path, obj, [{metadata=}]) / ember.load(path)      safetensors
 *   ember.save_npy(path, t) / ember.load_npy(path)               NumPy .npy
 *   ember.savez(path, tbl) / ember.savez_compressed / ember.load_npz   .npz
 *   ember.data.read_csv(path, opts) / ember.data.read_lines(path)  text, .gz too
 *
 * Note [Serialized files]
 * - Every write goes to a temporary file beside the target, is fsync'd and
 *   renamed over it: a failed write (full disk, a file size limit) leaves
 *   the previous file intact and raises the error.
 * - Every read takes the whole file into memory (a Lua userdata) and checks
 *   every length, offset and size against it before a tensor is made: a
 *   truncated or hostile file is a Lua error naming the file and the
 *   problem, never a crash or a partial result.
 * - Nothing here allocates C memory across a call that may raise a Lua
 *   error: buffers are userdata, jansson values are released before any
 *   error is raised, and the writer raises only after closing its file.
 * - A bool element is read as a byte and must be 0 or 1 (a _Bool holding
 *   another byte is undefined behaviour in every kernel that reads it).
 * - Tensors are written row-major and little-endian whatever their
 *   strides; a tensor on another device is copied to the cpu first.
 * - A table of tensors is written under dotted names ("fc.weight"). When
 *   the table nests tables, the safetensors __metadata__ has
 *   "ember.nested": "1" and ember.load rebuilds the nesting (all-digit
 *   components become integer keys). A single tensor is saved under the
 *   name "tensor" with "ember.type": "tensor" and loads as that tensor.
 *   Files of other tools (no ember.* keys) load as a flat table
 *   name -> tensor; ember.load's second result is the user's metadata.
 */
#include "lua/em_lua.h"
#include "lua/em_lua_int.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <fcntl.h>
#include <jansson.h>
#include <lauxlib.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#define SAFETENSORS_MAX_HEADER 100000000u /* the spec's limit: 100 MB */

/* luaL_error with the C library's formats (%llu, %zu); never returns. */
__attribute__((noreturn, format(printf, 2, 3))) static void raisef(lua_State *L, const char *fmt, ...) {
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    luaL_error(L, "%s", msg);
    __builtin_unreachable(); /* luaL_error longjmps */
}

/* ---- dtypes ---- */

static const struct {
    em_dtype dtype;
    const char *st;  /* safetensors */
    const char *npy; /* NumPy descr without the byte order; NULL: NumPy has none */
} dtype_names[] = {
    { EM_BOOL, "BOOL", "b1" },     { EM_UINT8, "U8", "u1" },    { EM_INT8, "I8", "i1" },
    { EM_INT32, "I32", "i4" },     { EM_INT64, "I64", "i8" },   { EM_FLOAT16, "F16", "f2" },
    { EM_BFLOAT16, "BF16", NULL }, { EM_FLOAT32, "F32", "f4" }, { EM_FLOAT64, "F64", "f8" },
};
#define NDTYPES (sizeof dtype_names / sizeof dtype_names[0])

static const char *st_name(em_dtype t) {
    for (size_t i = 0; i < NDTYPES; i++)
        if (dtype_names[i].dtype == t) return dtype_names[i].st;
    return NULL;
}

static em_dtype st_dtype(const char *s) {
    for (size_t i = 0; i < NDTYPES; i++)
        if (strcmp(dtype_names[i].st, s) == 0) return dtype_names[i].dtype;
    return EM_DTYPE_NONE;
}

/* Bytes of numel(sizes) elements of es bytes in *out, or false on a
 * negative size or overflow. */
static bool nbytes_of(int ndim, const int64_t *sizes, size_t es, uint64_t *out) {
    uint64_t n = es;
    for (int d = 0; d < ndim; d++) {
        if (sizes[d] < 0) return false;
        if (sizes[d] && n > (uint64_t)INT64_MAX / (uint64_t)sizes[d]) return false;
        n *= (uint64_t)sizes[d];
    }
    *out = n;
    return true;
}

/* ---- C memory owned by the Lua stack ---- */

/* A userdata whose __gc frees p with fr: C memory held across calls that
 * may raise a Lua error (Note [Serialized files]) is put in one first. */
typedef struct {
    void *p;
    void (*fr)(void *);
} cbox;

static int cbox_gc(lua_State *L) {
    cbox *b = lua_touserdata(L, 1);
    if (b->p) b->fr(b->p);
    b->p = NULL;
    return 0;
}

/* Pushes an empty box freeing with fr. */
static cbox *push_cbox(lua_State *L, void (*fr)(void *)) {
    cbox *b = lua_newuserdatauv(L, sizeof *b, 0);
    b->p = NULL;
    b->fr = fr;
    if (luaL_newmetatable(L, "ember.serialize.cbox")) {
        lua_pushcfunction(L, cbox_gc);
        lua_setfield(L, -2, "__gc");
    }
    lua_setmetatable(L, -2);
    return b;
}

static void json_free(void *p) { json_decref((json_t *)p); }

/* Frees the box's memory now (it stays on the stack, empty). */
static void cbox_release(cbox *b) {
    if (b->p) b->fr(b->p);
    b->p = NULL;
}

/* ---- writing ---- */

/* Copies t's elements (cpu) row-major into dst. */
static void pack(const em_tensor *t, unsigned char *dst) {
    size_t es = em_dtype_size(t->dtype);
    if (t->numel == 0) return;
    const unsigned char *base = (const unsigned char *)t->storage->data + t->offset * (int64_t)es;
    if (t->is_contiguous) {
        memcpy(dst, base, (size_t)t->numel * es);
        return;
    }
    int64_t idx[EM_MAX_DIMS] = { 0 };
    for (int64_t k = 0; k < t->numel; k++) {
        int64_t off = 0;
        for (int d = 0; d < t->ndim; d++) off += idx[d] * t->strides[d];
        memcpy(dst + (size_t)k * es, base + off * (int64_t)es, es);
        for (int d = t->ndim - 1; d >= 0; d--) {
            if (++idx[d] < t->sizes[d]) break;
            idx[d] = 0;
        }
    }
}

/* One piece of a file being written: bytes, or a tensor's elements. */
typedef struct {
    const void *bytes;
    const em_tensor *t;
    size_t n;
} piece;

static int write_full(int fd, const void *p, size_t n) {
    const char *c = p;
    while (n > 0) {
        ssize_t w = write(fd, c, n);
        if (w < 0) {
            if (errno == EINTR) continue;
            return errno;
        }
        c += w;
        n -= (size_t)w;
    }
    return 0;
}

/* Writes the pieces to path atomically (Note [Serialized files]). scratch
 * holds max_tensor_bytes for packing strided tensors. Raises on failure
 * after removing the temporary file. */
static void write_atomic(lua_State *L, const char *op, const char *path, const piece *ps, int np,
                         unsigned char *scratch) {
    char tmpl[4096];
    if ((size_t)snprintf(tmpl, sizeof tmpl, "%s.tmp.XXXXXX", path) >= sizeof tmpl)
        raisef(L, "%s: '%s': path too long", op, path);
    int fd = mkstemp(tmpl);
    if (fd < 0) raisef(L, "%s: '%s': cannot create a temporary file beside it: %s", op, path, strerror(errno));
    int e = 0;
    for (int i = 0; i < np && !e; i++) {
        if (ps[i].t && !ps[i].t->is_contiguous) {
            pack(ps[i].t, scratch);
            e = write_full(fd, scratch, ps[i].n);
        } else if (ps[i].t) {
            const em_tensor *t = ps[i].t;
            if (ps[i].n)
                e = write_full(fd, (const char *)t->storage->data + t->offset * (int64_t)em_dtype_size(t->dtype), ps[i].n);
        } else {
            e = write_full(fd, ps[i].bytes, ps[i].n);
        }
    }
    if (!e && fsync(fd) != 0) e = errno;
    if (close(fd) != 0 && !e) e = errno;
    if (!e) { /* mkstemp made it 0600: give it the mode a new file gets */
        mode_t m = umask(0);
        umask(m);
        if (chmod(tmpl, 0666 & ~m) != 0) e = errno;
    }
    if (!e && rename(tmpl, path) != 0) e = errno;
    if (e) {
        unlink(tmpl);
        raisef(L, "%s: '%s': write failed, the previous file is unchanged: %s", op, path, strerror(e));
    }
}

/* ---- reading ---- */

/* Reads the whole file into a userdata left on the stack; *n its size. */
static const unsigned char *read_all(lua_State *L, const char *op, const char *path, size_t *n) {
    int fd = open(path, O_RDONLY);
    if (fd < 0) raisef(L, "%s: '%s': cannot open: %s", op, path, strerror(errno));
    struct stat st;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        close(fd);
        raisef(L, "%s: '%s': not a regular file", op, path);
    }
    size_t size = (size_t)st.st_size;
    unsigned char *p = lua_newuserdatauv(L, size ? size : 1, 0);
    size_t got = 0;
    while (got < size) {
        ssize_t r = read(fd, p + got, size - got);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) {
            int e = r < 0 ? errno : EIO;
            close(fd);
            raisef(L, "%s: '%s': read failed: %s", op, path, strerror(e));
        }
        got += (size_t)r;
    }
    close(fd);
    *n = size;
    return p;
}

/* Pushes a new contiguous cpu tensor of sizes/dt whose elements come from
 * src: row-major, or column-major when fortran, byte-swapped when swap.
 * The caller checked that src holds numel * element size bytes. */
static void push_tensor_from(lua_State *L, const char *op, const char *path, const char *name, int ndim,
                             const int64_t *sizes, em_dtype dt, const unsigned char *src, bool fortran, bool swap) {
    size_t es = em_dtype_size(dt);
    if (dt == EM_BOOL) {
        uint64_t nb = 0;
        nbytes_of(ndim, sizes, 1, &nb);
        for (uint64_t i = 0; i < nb; i++)
            if (src[i] > 1)
                raisef(L, "%s: '%s': bool tensor '%s' holds the byte %d (not 0 or 1)", op, path, name, (int)src[i]);
    }
    em_tensor *t = em_tensor_new(ndim, sizes, dt, em_cpu_device());
    if (!t) em_lua_error(L, op);
    em_lua_push_tensor(L, t, op); /* owns t from here */
    unsigned char *dst = em_tensor_data(t);
    if (t->numel == 0) return;
    if (!fortran || ndim < 2) {
        memcpy(dst, src, (size_t)t->numel * es);
    } else {
        int64_t fstride[EM_MAX_DIMS], idx[EM_MAX_DIMS] = { 0 };
        fstride[0] = 1;
        for (int d = 1; d < ndim; d++) fstride[d] = fstride[d - 1] * sizes[d - 1];
        for (int64_t k = 0; k < t->numel; k++) {
            int64_t off = 0;
            for (int d = 0; d < ndim; d++) off += idx[d] * fstride[d];
            memcpy(dst + (size_t)k * es, src + (size_t)off * es, es);
            for (int d = ndim - 1; d >= 0; d--) {
                if (++idx[d] < sizes[d]) break;
                idx[d] = 0;
            }
        }
    }
    if (swap && es > 1) {
        size_t nb = (size_t)t->numel * es;
        for (size_t i = 0; i < nb; i += es)
            for (size_t j = 0; j < es / 2; j++) {
                unsigned char c = dst[i + j];
                dst[i + j] = dst[i + es - 1 - j];
                dst[i + es - 1 - j] = c;
            }
    }
}

/* ---- tables of tensors ---- */

/* Appends the tensors of the table at idx to the Lua array at list_idx as
 * {name, tensor} pairs (name dotted under prefix, "" at the top), copying
 * tensors on other devices to the cpu. Sets *nested when a value is a
 * table and *dotted when a key holds a '.'. */
static void collect(lua_State *L, const char *op, int idx, const char *prefix, int list_idx, bool *nested,
                    bool *dotted, int depth) {
    if (depth > 32) raisef(L, "%s: the table nests deeper than 32 levels (a cycle?)", op);
    luaL_checkstack(L, 12, op);
    lua_pushnil(L);
    while (lua_next(L, idx)) {
        int t = lua_gettop(L); /* value at t, key at t - 1 */
        if (lua_type(L, t - 1) == LUA_TSTRING) {
            const char *k = lua_tostring(L, t - 1);
            if (!*k) raisef(L, "%s: a key of the table is the empty string", op);
            if (strchr(k, '.')) *dotted = true;
            lua_pushstring(L, k);
        } else if (lua_isinteger(L, t - 1)) {
            lua_pushfstring(L, "%I", (LUAI_UACINT)lua_tointeger(L, t - 1));
        } else {
            raisef(L, "%s: a key of the table is a %s (expected strings or integers)", op, luaL_typename(L, t - 1));
        }
        const char *name = *prefix ? lua_pushfstring(L, "%s.%s", prefix, lua_tostring(L, -1)) : lua_tostring(L, -1);
        em_tensor *x = em_lua_totensor(L, t);
        if (x) {
            if (!st_name(x->dtype))
                raisef(L, "%s: tensor '%s' has dtype %s, which the format cannot hold", op, name,
                           em_dtype_name(x->dtype));
            lua_createtable(L, 2, 0);
            lua_pushstring(L, name);
            lua_rawseti(L, -2, 1);
            em_tensor *h = em_lua_host_tensor(x);
            if (!h) em_lua_error(L, op);
            em_lua_push_tensor(L, h, op);
            lua_rawseti(L, -2, 2);
            lua_rawseti(L, list_idx, (lua_Integer)lua_rawlen(L, list_idx) + 1);
        } else if (lua_istable(L, t)) {
            *nested = true;
            collect(L, op, t, name, list_idx, nested, dotted, depth + 1);
        } else {
            raisef(L, "%s: the value at '%s' is a %s (expected a tensor or a table of tensors)", op, name,
                       luaL_typename(L, t));
        }
        lua_settop(L, t - 1); /* keep the key */
    }
}

static int cmp_names(const void *a, const void *b) {
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* For the value at idx (a tensor, or a table of tensors): pushes the array
 * of {name, tensor} pairs sorted by name and returns its length. */
static int collect_sorted(lua_State *L, const char *op, int idx, bool *nested, bool *single) {
    lua_newtable(L);
    int list = lua_gettop(L);
    bool dotted = false;
    *nested = *single = false;
    em_tensor *x = em_lua_totensor(L, idx);
    if (x) {
        if (!st_name(x->dtype))
            raisef(L, "%s: the tensor has dtype %s, which the format cannot hold", op, em_dtype_name(x->dtype));
        *single = true;
        lua_createtable(L, 2, 0);
        lua_pushliteral(L, "tensor");
        lua_rawseti(L, -2, 1);
        em_tensor *h = em_lua_host_tensor(x);
        if (!h) em_lua_error(L, op);
        em_lua_push_tensor(L, h, op);
        lua_rawseti(L, -2, 2);
        lua_rawseti(L, list, 1);
    } else if (lua_istable(L, idx)) {
        collect(L, op, idx, "", list, nested, &dotted, 0);
        if (*nested && dotted)
            raisef(L, "%s: a key holds '.' in a table that nests tables (its dotted name would not load back "
                          "as the same table; flatten it or rename the key)", op);
    } else {
        raisef(L, "%s: bad argument #2 (expected a tensor or a table of tensors, got %s)", op, luaL_typename(L, idx));
    }
    int n = (int)lua_rawlen(L, list);
    /* sort by name (stable output; duplicates cannot occur in one table,
     * but "1" and 1 can: refuse them) */
    const char **names = lua_newuserdatauv(L, (size_t)(n ? n : 1) * sizeof *names, 0);
    for (int i = 0; i < n; i++) {
        lua_rawgeti(L, list, i + 1);
        lua_rawgeti(L, -1, 1);
        names[i] = lua_tostring(L, -1); /* kept alive by list */
        lua_pop(L, 2);
    }
    qsort(names, (size_t)n, sizeof *names, cmp_names);
    for (int i = 1; i < n; i++)
        if (strcmp(names[i - 1], names[i]) == 0) raisef(L, "%s: two values have the name '%s'", op, names[i]);
    lua_newtable(L); /* name -> tensor */
    for (int i = 0; i < n; i++) {
        lua_rawgeti(L, list, i + 1);
        lua_rawgeti(L, -1, 1);
        lua_rawgeti(L, -2, 2);
        lua_rawset(L, -4);
        lua_pop(L, 1);
    }
    lua_createtable(L, n, 0); /* sorted pairs */
    for (int i = 0; i < n; i++) {
        lua_createtable(L, 2, 0);
        lua_pushstring(L, names[i]);
        lua_pushvalue(L, -1);
        lua_rawseti(L, -3, 1);
        lua_rawget(L, -4);
        lua_rawseti(L, -2, 2);
        lua_rawseti(L, -2, i + 1);
    }
    lua_replace(L, list);
    lua_settop(L, list);
    return n;
}

/* Stores v (top of stack, popped) in the table at tbl under the dotted
 * name: nested tables for each component when nested, all-digit
 * components as integers. Refuses a name that clashes with another. */
static void store_dotted(lua_State *L, const char *op, const char *path, int tbl, const char *name, bool nested) {
    int v = lua_gettop(L);
    if (!nested) {
        lua_pushstring(L, name);
        lua_pushvalue(L, v);
        lua_rawset(L, tbl);
        lua_settop(L, v - 1);
        return;
    }
    lua_pushvalue(L, tbl);
    const char *p = name;
    for (;;) {
        const char *dot = strchr(p, '.');
        size_t len = dot ? (size_t)(dot - p) : strlen(p);
        bool digits = len > 0 && len < 18;
        for (size_t i = 0; i < len && digits; i++) digits = p[i] >= '0' && p[i] <= '9';
        if (digits) lua_pushinteger(L, strtoll(p, NULL, 10));
        else lua_pushlstring(L, p, len);
        if (!dot) {
            lua_pushvalue(L, v);
            lua_rawset(L, -3);
            break;
        }
        lua_pushvalue(L, -1);
        int ty = lua_rawget(L, -3);
        if (ty == LUA_TNIL) {
            lua_pop(L, 1);
            lua_newtable(L);
            lua_pushvalue(L, -2);
            lua_pushvalue(L, -2);
            lua_rawset(L, -5);
        } else if (ty != LUA_TTABLE) {
            raisef(L, "%s: '%s': the name '%s' clashes with a tensor of the same prefix", op, path, name);
        }
        lua_remove(L, -2); /* key */
        lua_remove(L, -2); /* parent */
        p = dot + 1;
    }
    lua_settop(L, v - 1);
}

/* ---- safetensors ---- */

/* ember.save(path, obj, [{metadata = {key = "value"}}]) */
static int l_save(lua_State *L) {
    const char *op = "save";
    const char *path = luaL_checkstring(L, 1);
    luaL_checkany(L, 2);
    bool nested, single;
    int n = collect_sorted(L, op, 2, &nested, &single);
    int list = lua_gettop(L);
    /* the user's metadata: strings to strings */
    int meta = 0;
    if (!lua_isnoneornil(L, 3)) {
        luaL_checktype(L, 3, LUA_TTABLE);
        if (lua_getfield(L, 3, "metadata") != LUA_TNIL) {
            if (!lua_istable(L, -1)) raisef(L, "%s: option 'metadata' must be a table of strings", op);
            meta = lua_gettop(L);
            lua_pushnil(L);
            while (lua_next(L, meta)) {
                if (lua_type(L, -2) != LUA_TSTRING || lua_type(L, -1) != LUA_TSTRING)
                    raisef(L, "%s: option 'metadata' must map strings to strings (got %s -> %s)", op,
                               luaL_typename(L, -2), luaL_typename(L, -1));
                if (strncmp(lua_tostring(L, -2), "ember.", 6) == 0)
                    raisef(L, "%s: metadata key '%s' is reserved (keys starting 'ember.')", op, lua_tostring(L, -2));
                lua_pop(L, 1);
            }
        }
    }
    /* the header; jansson values are released before any Lua error */
    cbox *root_box = push_cbox(L, json_free), *md_box = push_cbox(L, json_free), *hdr_box = push_cbox(L, free);
    json_t *root = json_object(), *md = json_object();
    root_box->p = root;
    md_box->p = md;
    bool oom = !root || !md;
    uint64_t off = 0, maxb = 0;
    for (int i = 0; i < n && !oom; i++) {
        lua_rawgeti(L, list, i + 1);
        lua_rawgeti(L, -1, 1);
        lua_rawgeti(L, -2, 2);
        const char *name = lua_tostring(L, -2);
        const em_tensor *t = em_lua_totensor(L, -1);
        uint64_t nb = (uint64_t)t->numel * em_dtype_size(t->dtype);
        json_t *e = json_object(), *shape = json_array(); /* released before the next Lua call */
        oom = !e || !shape;
        for (int d = 0; d < t->ndim && !oom; d++) oom = json_array_append_new(shape, json_integer(t->sizes[d])) != 0;
        if (!oom) oom = json_object_set_new(e, "dtype", json_string(st_name(t->dtype))) != 0;
        if (!oom) {
            oom = json_object_set_new(e, "shape", shape) != 0;
            shape = NULL;
        }
        if (!oom) oom = json_object_set_new(e, "data_offsets", json_pack("[II]", (json_int_t)off, (json_int_t)(off + nb))) != 0;
        if (!oom) {
            oom = json_object_set_new(root, name, e) != 0;
            e = NULL;
        }
        json_decref(e);
        json_decref(shape);
        off += nb;
        if (!t->is_contiguous && nb > maxb) maxb = nb;
        lua_pop(L, 3);
    }
    if (meta) {
        lua_pushnil(L);
        while (!oom && lua_next(L, meta)) {
            oom = json_object_set_new(md, lua_tostring(L, -2), json_string(lua_tostring(L, -1))) != 0;
            lua_pop(L, 1);
        }
    }
    if (!oom && single) oom = json_object_set_new(md, "ember.type", json_string("tensor")) != 0;
    if (!oom && nested) oom = json_object_set_new(md, "ember.nested", json_string("1")) != 0;
    if (!oom && json_object_size(md) > 0) {
        oom = json_object_set(root, "__metadata__", md) != 0;
    }
    char *hdr = oom ? NULL : json_dumps(root, JSON_COMPACT | JSON_SORT_KEYS);
    hdr_box->p = hdr;
    cbox_release(md_box);
    cbox_release(root_box);
    if (!hdr) raisef(L, "%s: out of memory building the header", op);
    /* pad the header with spaces so the data starts 8-aligned */
    size_t hl = strlen(hdr), padded = (8 + hl + 7) / 8 * 8 - 8;
    unsigned char *head = lua_newuserdatauv(L, 8 + padded, 0);
    for (int i = 0; i < 8; i++) head[i] = (unsigned char)((uint64_t)padded >> (8 * i));
    memcpy(head + 8, hdr, hl);
    memset(head + 8 + hl, ' ', padded - hl);
    cbox_release(hdr_box);
    piece *ps = lua_newuserdatauv(L, (size_t)(n + 1) * sizeof *ps, 0);
    ps[0] = (piece){ head, NULL, 8 + padded };
    for (int i = 0; i < n; i++) {
        lua_rawgeti(L, list, i + 1);
        lua_rawgeti(L, -1, 2);
        const em_tensor *t = em_lua_totensor(L, -1); /* kept alive by list */
        ps[i + 1] = (piece){ NULL, t, (size_t)t->numel * em_dtype_size(t->dtype) };
        lua_pop(L, 2);
    }
    unsigned char *scratch = lua_newuserdatauv(L, maxb ? (size_t)maxb : 1, 0);
    write_atomic(L, op, path, ps, n + 1, scratch);
    return 0;
}

typedef struct {
    em_dtype dtype;
    int ndim;
    int64_t sizes[EM_MAX_DIMS];
    uint64_t begin, end;
} st_entry;

static int cmp_begin(const void *a, const void *b) {
    const st_entry *x = a, *y = b;
    if (x->begin != y->begin) return x->begin < y->begin ? -1 : 1;
    return x->end < y->end ? -1 : x->end > y->end;
}

/* Checks one header entry; on a problem writes it to err and returns false. */
static bool check_entry(const char *name, json_t *v, uint64_t data_size, st_entry *e, char *err, size_t errn) {
    if (!json_is_object(v)) return snprintf(err, errn, "entry '%s' is not an object", name), false;
    json_t *dt = json_object_get(v, "dtype"), *shape = json_object_get(v, "shape"),
           *offs = json_object_get(v, "data_offsets");
    if (!json_is_string(dt)) return snprintf(err, errn, "entry '%s' has no dtype string", name), false;
    e->dtype = st_dtype(json_string_value(dt));
    if (e->dtype == EM_DTYPE_NONE)
        return snprintf(err, errn, "tensor '%s' has dtype %s, which ember does not have", name, json_string_value(dt)),
               false;
    if (!json_is_array(shape)) return snprintf(err, errn, "entry '%s' has no shape array", name), false;
    if (json_array_size(shape) > EM_MAX_DIMS)
        return snprintf(err, errn, "tensor '%s' has %zu dims (at most %d)", name, json_array_size(shape), EM_MAX_DIMS),
               false;
    e->ndim = (int)json_array_size(shape);
    for (int d = 0; d < e->ndim; d++) {
        json_t *s = json_array_get(shape, (size_t)d);
        if (!json_is_integer(s) || json_integer_value(s) < 0)
            return snprintf(err, errn, "tensor '%s' has a shape entry that is not a size", name), false;
        e->sizes[d] = json_integer_value(s);
    }
    if (!json_is_array(offs) || json_array_size(offs) != 2 || !json_is_integer(json_array_get(offs, 0)) ||
        !json_is_integer(json_array_get(offs, 1)))
        return snprintf(err, errn, "entry '%s' has no data_offsets [begin, end]", name), false;
    json_int_t b = json_integer_value(json_array_get(offs, 0)), en = json_integer_value(json_array_get(offs, 1));
    if (b < 0 || en < b || (uint64_t)en > data_size)
        return snprintf(err, errn, "tensor '%s' has data_offsets [%lld, %lld] outside the data block of %llu bytes",
                        name, (long long)b, (long long)en, (unsigned long long)data_size),
               false;
    e->begin = (uint64_t)b;
    e->end = (uint64_t)en;
    uint64_t nb = 0;
    if (!nbytes_of(e->ndim, e->sizes, em_dtype_size(e->dtype), &nb) || nb != e->end - e->begin)
        return snprintf(err, errn, "tensor '%s': its shape and dtype need %llu bytes, its data_offsets span %llu", name,
                        (unsigned long long)nb, (unsigned long long)(e->end - e->begin)),
               false;
    return true;
}

/* ember.load(path) -> tensor or table, metadata */
static int l_load(lua_State *L) {
    const char *op = "load";
    const char *path = luaL_checkstring(L, 1);
    size_t size;
    const unsigned char *p = read_all(L, op, path, &size);
    if (size < 8) raisef(L, "%s: '%s': truncated (%d bytes; a safetensors file starts with an 8-byte length)", op, path, (int)size);
    uint64_t hl = 0;
    for (int i = 0; i < 8; i++) hl |= (uint64_t)p[i] << (8 * i);
    if (hl > SAFETENSORS_MAX_HEADER)
        raisef(L, "%s: '%s': header length %llu is over the 100 MB limit (not a safetensors file?)", op, path,
                   (unsigned long long)hl);
    if (hl > size - 8)
        raisef(L, "%s: '%s': truncated: the header needs %llu bytes, the file has %llu after the length", op, path,
                   (unsigned long long)hl, (unsigned long long)(size - 8));
    uint64_t data_size = size - 8 - hl;
    const unsigned char *data = p + 8 + hl;
    json_error_t jerr;
    cbox *root_box = push_cbox(L, json_free);
    json_t *root = json_loadb((const char *)p + 8, (size_t)hl, JSON_REJECT_DUPLICATES, &jerr);
    root_box->p = root;
    if (!root) raisef(L, "%s: '%s': the header is not valid JSON: %s (at byte %d)", op, path, jerr.text, jerr.position);
    char err[512] = "";
    size_t n = json_is_object(root) ? json_object_size(root) : 0;
    st_entry *es = lua_newuserdatauv(L, (n ? n : 1) * sizeof *es, 0);
    lua_newtable(L); /* index -> name, then metadata */
    int names = lua_gettop(L);
    lua_newtable(L);
    int meta = lua_gettop(L);
    bool nested = false, single = false;
    int k = 0;
    if (!json_is_object(root)) {
        snprintf(err, sizeof err, "the header is not a JSON object");
    } else {
        const char *key;
        json_t *v;
        json_object_foreach(root, key, v) {
            if (strcmp(key, "__metadata__") == 0) {
                if (!json_is_object(v)) {
                    snprintf(err, sizeof err, "__metadata__ is not an object");
                    break;
                }
                const char *mk;
                json_t *mv;
                json_object_foreach(v, mk, mv) {
                    if (!json_is_string(mv)) {
                        snprintf(err, sizeof err, "__metadata__ value of '%s' is not a string", mk);
                        break;
                    }
                    if (strcmp(mk, "ember.nested") == 0) nested = strcmp(json_string_value(mv), "1") == 0;
                    else if (strcmp(mk, "ember.type") == 0) single = strcmp(json_string_value(mv), "tensor") == 0;
                    else {
                        lua_pushstring(L, json_string_value(mv));
                        lua_setfield(L, meta, mk);
                    }
                }
                if (*err) break;
                continue;
            }
            if (!check_entry(key, v, data_size, &es[k], err, sizeof err)) break;
            lua_pushstring(L, key);
            lua_rawseti(L, names, k + 1);
            k++;
        }
    }
    cbox_release(root_box);
    if (*err) raisef(L, "%s: '%s': %s", op, path, err);
    /* the entries' data must tile the data block exactly */
    st_entry *sorted = lua_newuserdatauv(L, (size_t)(k ? k : 1) * sizeof *sorted, 0);
    memcpy(sorted, es, (size_t)k * sizeof *es);
    qsort(sorted, (size_t)k, sizeof *sorted, cmp_begin);
    uint64_t at = 0;
    for (int i = 0; i < k; i++) {
        if (sorted[i].begin != at)
            raisef(L, "%s: '%s': the tensors' data %s at byte %llu of the data block (offsets must tile it)", op,
                       path, sorted[i].begin > at ? "leaves a gap" : "overlaps", (unsigned long long)at);
        at = sorted[i].end;
    }
    if (at != data_size)
        raisef(L, "%s: '%s': %llu bytes after the last tensor's data (offsets must tile the data block)", op, path,
                   (unsigned long long)(data_size - at));
    lua_pop(L, 1);
    /* the tensors, in header order */
    lua_newtable(L);
    int result = lua_gettop(L);
    for (int i = 0; i < k; i++) {
        lua_rawgeti(L, names, i + 1);
        const char *name = lua_tostring(L, -1);
        push_tensor_from(L, op, path, name, es[i].ndim, es[i].sizes, es[i].dtype, data + es[i].begin, false, false);
        store_dotted(L, op, path, result, name, nested);
        lua_pop(L, 1);
    }
    if (single && k == 1) {
        lua_rawgeti(L, names, 1);
        lua_rawget(L, result);
    } else {
        lua_pushvalue(L, result);
    }
    lua_pushvalue(L, meta);
    return 2;
}

/* ---- .npy ---- */

/* The header of an .npy file for t (v1.0, or v2.0 past 65535 bytes), pushed
 * as a Lua string. */
static void push_npy_header(lua_State *L, const char *op, const em_tensor *t) {
    const char *descr = NULL;
    for (size_t i = 0; i < NDTYPES; i++)
        if (dtype_names[i].dtype == t->dtype) descr = dtype_names[i].npy;
    if (!descr)
        raisef(L, "%s: NumPy has no %s dtype (convert first, e.g. x:float())", op, em_dtype_name(t->dtype));
    luaL_Buffer b;
    luaL_buffinit(L, &b);
    lua_pushfstring(L, "{'descr': '%c%s', 'fortran_order': False, 'shape': (", em_dtype_size(t->dtype) == 1 ? '|' : '<', descr);
    luaL_addvalue(&b);
    for (int d = 0; d < t->ndim; d++) {
        lua_pushfstring(L, "%I,%s", (LUAI_UACINT)t->sizes[d], t->ndim == 1 || d + 1 < t->ndim ? " " : "");
        luaL_addvalue(&b);
    }
    luaL_addstring(&b, "), }");
    luaL_pushresult(&b);
    size_t dl = lua_rawlen(L, -1);
    int v2 = 10 + dl + 1 > 65535 + 10;
    size_t pre = v2 ? 12 : 10, total = (pre + dl + 1 + 63) / 64 * 64, hlen = total - pre;
    luaL_buffinit(L, &b);
    luaL_addlstring(&b, "\x93NUMPY", 6);
    luaL_addchar(&b, v2 ? 2 : 1);
    luaL_addchar(&b, 0);
    for (int i = 0; i < (v2 ? 4 : 2); i++) luaL_addchar(&b, (char)((hlen >> (8 * i)) & 0xff));
    lua_pushvalue(L, -2); /* the dict (below the buffer's box, if any) */
    luaL_addvalue(&b);
    for (size_t i = pre + dl; i < total - 1; i++) luaL_addchar(&b, ' ');
    luaL_addchar(&b, '\n');
    luaL_pushresult(&b);
    lua_remove(L, -2);
}

/* ember.save_npy(path, t) */
static int l_save_npy(lua_State *L) {
    const char *op = "save_npy";
    const char *path = luaL_checkstring(L, 1);
    em_tensor *x = em_lua_totensor(L, 2);
    if (!x) raisef(L, "%s: bad argument #2 (expected a tensor, got %s)", op, luaL_typename(L, 2));
    em_tensor *h = em_lua_host_tensor(x);
    if (!h) em_lua_error(L, op);
    em_lua_push_tensor(L, h, op);
    push_npy_header(L, op, h);
    size_t nb = (size_t)h->numel * em_dtype_size(h->dtype);
    piece ps[2] = { { lua_tostring(L, -1), NULL, lua_rawlen(L, -1) }, { NULL, h, nb } };
    unsigned char *scratch = lua_newuserdatauv(L, h->is_contiguous || !nb ? 1 : nb, 0);
    write_atomic(L, op, path, ps, 2, scratch);
    return 0;
}

/* A tiny reader for the Python literal dict of an .npy header. */
typedef struct {
    const char *p, *end;
} lex;

static void skip_ws(lex *x) {
    while (x->p < x->end && (*x->p == ' ' || *x->p == '\t' || *x->p == '\n' || *x->p == '\r')) x->p++;
}

static bool eat(lex *x, char c) {
    skip_ws(x);
    if (x->p < x->end && *x->p == c) {
        x->p++;
        return true;
    }
    return false;
}

/* A quoted string into out (at most n - 1 bytes). */
static bool read_str(lex *x, char *out, size_t n) {
    skip_ws(x);
    if (x->p >= x->end || (*x->p != '\'' && *x->p != '"')) return false;
    char q = *x->p++;
    size_t k = 0;
    while (x->p < x->end && *x->p != q) {
        if (k + 1 >= n) return false;
        out[k++] = *x->p++;
    }
    if (x->p >= x->end) return false;
    x->p++;
    out[k] = 0;
    return true;
}

typedef struct {
    em_dtype dtype;
    bool swap, fortran;
    int ndim;
    int64_t sizes[EM_MAX_DIMS];
    size_t data_off; /* from the start of the file */
} npy_info;

/* Parses an .npy image of n bytes; on a problem writes it to err. */
static bool parse_npy(const unsigned char *p, size_t n, npy_info *o, char *err, size_t errn) {
    if (n < 10 || memcmp(p, "\x93NUMPY", 6) != 0) return snprintf(err, errn, "not an .npy file (no \\x93NUMPY magic)"), false;
    int major = p[6];
    size_t hl, pre;
    if (major == 1) {
        hl = p[8] | (size_t)p[9] << 8;
        pre = 10;
    } else if (major == 2 || major == 3) {
        if (n < 12) return snprintf(err, errn, "truncated header"), false;
        hl = p[8] | (size_t)p[9] << 8 | (size_t)p[10] << 16 | (size_t)p[11] << 24;
        pre = 12;
    } else {
        return snprintf(err, errn, "format version %d.%d is not 1.0, 2.0 or 3.0", major, p[7]), false;
    }
    if (hl > n - pre) return snprintf(err, errn, "truncated: the header needs %zu bytes", hl), false;
    lex x = { (const char *)p + pre, (const char *)p + pre + hl };
    bool have_descr = false, have_fo = false, have_shape = false;
    char descr[32] = "";
    if (!eat(&x, '{')) return snprintf(err, errn, "the header is not a dict"), false;
    while (!eat(&x, '}')) {
        char key[32];
        if (!read_str(&x, key, sizeof key) || !eat(&x, ':')) return snprintf(err, errn, "malformed header dict"), false;
        if (strcmp(key, "descr") == 0) {
            if (!read_str(&x, descr, sizeof descr)) return snprintf(err, errn, "descr is not a simple type string"), false;
            have_descr = true;
        } else if (strcmp(key, "fortran_order") == 0) {
            skip_ws(&x);
            if ((size_t)(x.end - x.p) >= 4 && memcmp(x.p, "True", 4) == 0) o->fortran = true, x.p += 4;
            else if ((size_t)(x.end - x.p) >= 5 && memcmp(x.p, "False", 5) == 0) o->fortran = false, x.p += 5;
            else return snprintf(err, errn, "fortran_order is not True or False"), false;
            have_fo = true;
        } else if (strcmp(key, "shape") == 0) {
            if (!eat(&x, '(')) return snprintf(err, errn, "shape is not a tuple"), false;
            o->ndim = 0;
            while (!eat(&x, ')')) {
                skip_ws(&x);
                char *e;
                if (x.p >= x.end || *x.p < '0' || *x.p > '9') return snprintf(err, errn, "shape holds a non-size"), false;
                errno = 0;
                long long v = strtoll(x.p, &e, 10);
                if (errno || e > x.end) return snprintf(err, errn, "shape holds a size out of range"), false;
                x.p = e;
                if (e < x.end && *e == 'L') x.p++;
                if (o->ndim >= EM_MAX_DIMS) return snprintf(err, errn, "more than %d dims", EM_MAX_DIMS), false;
                o->sizes[o->ndim++] = v;
                if (!eat(&x, ',')) {
                    if (!eat(&x, ')')) return snprintf(err, errn, "malformed shape tuple"), false;
                    break;
                }
            }
            have_shape = true;
        } else {
            return snprintf(err, errn, "unknown header key '%s'", key), false;
        }
        if (!eat(&x, ',')) {
            if (!eat(&x, '}')) return snprintf(err, errn, "malformed header dict"), false;
            break;
        }
    }
    if (!have_descr || !have_fo || !have_shape)
        return snprintf(err, errn, "the header lacks descr, fortran_order or shape"), false;
    char order = descr[0];
    const char *code = descr + 1;
    if (order != '<' && order != '>' && order != '|' && order != '=')
        return snprintf(err, errn, "descr '%s' is not a simple type (structured arrays are not supported)", descr), false;
    o->dtype = EM_DTYPE_NONE;
    for (size_t i = 0; i < NDTYPES; i++)
        if (dtype_names[i].npy && strcmp(dtype_names[i].npy, code) == 0) o->dtype = dtype_names[i].dtype;
    if (strcmp(code, "?") == 0) o->dtype = EM_BOOL;
    if (o->dtype == EM_DTYPE_NONE) return snprintf(err, errn, "dtype '%s' is not one ember has", descr), false;
    o->swap = order == '>';
    o->data_off = pre + hl;
    uint64_t nb;
    if (!nbytes_of(o->ndim, o->sizes, em_dtype_size(o->dtype), &nb))
        return snprintf(err, errn, "the shape's size overflows"), false;
    if (nb != n - o->data_off)
        return snprintf(err, errn, "%s: the shape and dtype need %llu data bytes, the file has %llu",
                        nb > n - o->data_off ? "truncated" : "trailing bytes", (unsigned long long)nb,
                        (unsigned long long)(n - o->data_off)),
               false;
    return true;
}

/* ember.load_npy(path) -> tensor */
static int l_load_npy(lua_State *L) {
    const char *op = "load_npy";
    const char *path = luaL_checkstring(L, 1);
    size_t n;
    const unsigned char *p = read_all(L, op, path, &n);
    npy_info o = { 0 };
    char err[256];
    if (!parse_npy(p, n, &o, err, sizeof err)) raisef(L, "%s: '%s': %s", op, path, err);
    push_tensor_from(L, op, path, "array", o.ndim, o.sizes, o.dtype, p + o.data_off, o.fortran, o.swap);
    return 1;
}

/* ---- .npz (zip) ---- */

static uint32_t rd16(const unsigned char *p) { return p[0] | (uint32_t)p[1] << 8; }
static uint32_t rd32(const unsigned char *p) { return rd16(p) | rd16(p + 2) << 16; }
static void wr16(luaL_Buffer *b, uint32_t v) {
    luaL_addchar(b, (char)(v & 0xff));
    luaL_addchar(b, (char)(v >> 8 & 0xff));
}
static void wr32(luaL_Buffer *b, uint32_t v) {
    wr16(b, v & 0xffff);
    wr16(b, v >> 16);
}

/* savez(path, tbl) / savez_compressed(path, tbl): one NAME.npy member per
 * tensor of the flat table, stored or deflated. */
static int savez_impl(lua_State *L, const char *op, bool compress) {
    const char *path = luaL_checkstring(L, 1);
    luaL_checktype(L, 2, LUA_TTABLE);
    bool nested, single;
    int n = collect_sorted(L, op, 2, &nested, &single);
    int list = lua_gettop(L);
    if (nested) raisef(L, "%s: the table nests tables (.npz holds a flat name -> array map)", op);
    lua_newtable(L); /* member images, then the central directory pieces */
    int members = lua_gettop(L);
    uint64_t off = 0;
    luaL_Buffer cd;
    for (int i = 0; i < n; i++) {
        lua_rawgeti(L, list, i + 1);
        lua_rawgeti(L, -1, 1);
        lua_rawgeti(L, -2, 2);
        const char *name = lua_tostring(L, -2);
        const em_tensor *t = em_lua_totensor(L, -1);
        push_npy_header(L, op, t);
        size_t hl = lua_rawlen(L, -1), nb = (size_t)t->numel * em_dtype_size(t->dtype);
        if ((uint64_t)hl + nb >= 0xffffffffu || off >= 0xffffffffu)
            raisef(L, "%s: '%s' is 4 GiB or more (ZIP64 is not supported)", op, name);
        unsigned char *raw = lua_newuserdatauv(L, hl + nb ? hl + nb : 1, 0);
        memcpy(raw, lua_tostring(L, -2), hl);
        pack(t, raw + hl);
        size_t rn = hl + nb;
        uint32_t crc = (uint32_t)crc32(0L, raw, (uInt)rn);
        const unsigned char *body = raw;
        size_t bn = rn;
        if (compress) {
            uLong cap = compressBound((uLong)rn) + 64;
            unsigned char *z = lua_newuserdatauv(L, cap, 0);
            z_stream s = { 0 };
            if (deflateInit2(&s, Z_DEFAULT_COMPRESSION, Z_DEFLATED, -15, 8, Z_DEFAULT_STRATEGY) != Z_OK)
                raisef(L, "%s: zlib cannot start deflate", op);
            s.next_in = raw;
            s.avail_in = (uInt)rn;
            s.next_out = z;
            s.avail_out = (uInt)cap;
            int r = deflate(&s, Z_FINISH);
            bn = s.total_out;
            deflateEnd(&s);
            if (r != Z_STREAM_END) raisef(L, "%s: zlib deflate failed on '%s'", op, name);
            body = z;
        }
        size_t nl = strlen(name) + 4;
        luaL_Buffer b;
        luaL_buffinit(L, &b);
        wr32(&b, 0x04034b50);
        wr16(&b, 20);
        wr16(&b, 0);
        wr16(&b, compress ? 8 : 0);
        wr16(&b, 0);
        wr16(&b, 0x21);
        wr32(&b, crc);
        wr32(&b, (uint32_t)bn);
        wr32(&b, (uint32_t)rn);
        wr16(&b, (uint32_t)nl);
        wr16(&b, 0);
        luaL_addstring(&b, name);
        luaL_addstring(&b, ".npy");
        luaL_addlstring(&b, (const char *)body, bn);
        luaL_pushresult(&b);
        lua_rawseti(L, members, 2 * i + 1);
        /* its central directory record */
        luaL_buffinit(L, &b);
        wr32(&b, 0x02014b50);
        wr16(&b, 20);
        wr16(&b, 20);
        wr16(&b, 0);
        wr16(&b, compress ? 8 : 0);
        wr16(&b, 0);
        wr16(&b, 0x21);
        wr32(&b, crc);
        wr32(&b, (uint32_t)bn);
        wr32(&b, (uint32_t)rn);
        wr16(&b, (uint32_t)nl);
        wr16(&b, 0);
        wr16(&b, 0);
        wr16(&b, 0);
        wr16(&b, 0);
        wr32(&b, 0);
        wr32(&b, (uint32_t)off);
        luaL_addstring(&b, name);
        luaL_addstring(&b, ".npy");
        luaL_pushresult(&b);
        lua_rawseti(L, members, 2 * i + 2);
        off += 30 + nl + bn;
        lua_settop(L, members);
    }
    uint64_t cd_size = 0;
    for (int i = 0; i < n; i++) {
        lua_rawgeti(L, members, 2 * i + 2);
        cd_size += lua_rawlen(L, -1);
        lua_pop(L, 1);
    }
    if (off + cd_size >= 0xffffffffu || n > 0xfffe) raisef(L, "%s: the archive is too large (ZIP64 is not supported)", op);
    luaL_buffinit(L, &cd);
    wr32(&cd, 0x06054b50);
    wr16(&cd, 0);
    wr16(&cd, 0);
    wr16(&cd, (uint32_t)n);
    wr16(&cd, (uint32_t)n);
    wr32(&cd, (uint32_t)cd_size);
    wr32(&cd, (uint32_t)off);
    wr16(&cd, 0);
    luaL_pushresult(&cd);
    int eocd = lua_gettop(L);
    piece *ps = lua_newuserdatauv(L, (size_t)(2 * n + 1) * sizeof *ps, 0);
    for (int i = 0; i < n; i++) {
        lua_rawgeti(L, members, 2 * i + 1);
        ps[i] = (piece){ lua_tostring(L, -1), NULL, lua_rawlen(L, -1) };
        lua_rawgeti(L, members, 2 * i + 2);
        ps[n + i] = (piece){ lua_tostring(L, -1), NULL, lua_rawlen(L, -1) };
        lua_pop(L, 2); /* strings stay alive in members */
    }
    ps[2 * n] = (piece){ lua_tostring(L, eocd), NULL, lua_rawlen(L, eocd) };
    write_atomic(L, op, path, ps, 2 * n + 1, NULL);
    return 0;
}

static int l_savez(lua_State *L) { return savez_impl(L, "savez", false); }
static int l_savez_compressed(lua_State *L) { return savez_impl(L, "savez_compressed", true); }

/* ember.load_npz(path) -> {name = tensor}: members NAME.npy, stored or
 * deflated, CRC-checked. */
static int l_load_npz(lua_State *L) {
    const char *op = "load_npz";
    const char *path = luaL_checkstring(L, 1);
    size_t n;
    const unsigned char *p = read_all(L, op, path, &n);
    /* the end of central directory record: within the last 64 KiB + 22 */
    size_t e = SIZE_MAX;
    for (size_t i = n >= 22 ? n - 22 : SIZE_MAX; i != SIZE_MAX && n - i <= 65535 + 22; i--) {
        if (rd32(p + i) == 0x06054b50) {
            e = i;
            break;
        }
        if (i == 0) break;
    }
    if (e == SIZE_MAX) raisef(L, "%s: '%s': not a zip archive (no end of central directory)", op, path);
    uint32_t count = rd16(p + e + 10), cd_size = rd32(p + e + 12), cd_off = rd32(p + e + 16);
    if (cd_off == 0xffffffffu || count == 0xffff) raisef(L, "%s: '%s': ZIP64 archives are not supported", op, path);
    if ((uint64_t)cd_off + cd_size > e) raisef(L, "%s: '%s': the central directory lies outside the file", op, path);
    lua_newtable(L);
    int result = lua_gettop(L);
    size_t c = cd_off;
    for (uint32_t i = 0; i < count; i++) {
        if (c + 46 > (size_t)cd_off + cd_size || rd32(p + c) != 0x02014b50)
            raisef(L, "%s: '%s': central directory entry %d is malformed", op, path, (int)i + 1);
        uint32_t method = rd16(p + c + 10), crc = rd32(p + c + 16), csize = rd32(p + c + 20), usize = rd32(p + c + 24);
        uint32_t nl = rd16(p + c + 28), xl = rd16(p + c + 30), cl = rd16(p + c + 32), lho = rd32(p + c + 42);
        if (c + 46 + nl > (size_t)cd_off + cd_size) raisef(L, "%s: '%s': entry %d's name runs past the directory", op, path, (int)i + 1);
        lua_pushlstring(L, (const char *)p + c + 46, nl);
        const char *mname = lua_tostring(L, -1);
        c += 46 + (size_t)nl + xl + cl;
        if ((uint64_t)lho + 30 > n || rd32(p + lho) != 0x04034b50)
            raisef(L, "%s: '%s': member '%s' has no local header", op, path, mname);
        size_t data = (size_t)lho + 30 + rd16(p + lho + 26) + rd16(p + lho + 28);
        if (csize == 0xffffffffu || usize == 0xffffffffu)
            raisef(L, "%s: '%s': member '%s' needs ZIP64 (not supported)", op, path, mname);
        if ((uint64_t)data + csize > n) raisef(L, "%s: '%s': member '%s' is truncated", op, path, mname);
        const unsigned char *img = NULL;
        if (method == 0) {
            if (csize != usize) raisef(L, "%s: '%s': stored member '%s' has two sizes", op, path, mname);
            img = p + data;
        } else if (method == 8) {
            /* deflate expands at most 1032:1: a larger claimed size is a lie
             * that would make us allocate it (found by make fuzz) */
            if ((uint64_t)usize > (uint64_t)csize * 1032 + 64)
                raisef(L, "%s: '%s': member '%s' claims %u bytes from %u compressed (more than deflate can give)", op,
                       path, mname, (unsigned)usize, (unsigned)csize);
            unsigned char *u = lua_newuserdatauv(L, usize ? usize : 1, 0);
            z_stream s = { 0 };
            if (inflateInit2(&s, -15) != Z_OK) raisef(L, "%s: zlib cannot start inflate", op);
            s.next_in = (unsigned char *)p + data;
            s.avail_in = csize;
            s.next_out = u;
            s.avail_out = usize;
            int r = inflate(&s, Z_FINISH);
            uLong got = s.total_out;
            inflateEnd(&s);
            if (r != Z_STREAM_END || got != usize)
                raisef(L, "%s: '%s': member '%s' does not inflate to its %u bytes", op, path, mname, (unsigned)usize);
            img = u;
        } else {
            raisef(L, "%s: '%s': member '%s' uses compression method %d (only stored and deflated)", op, path,
                       mname, (int)method);
        }
        if ((uint32_t)crc32(0L, img, usize) != crc) raisef(L, "%s: '%s': member '%s' fails its CRC check", op, path, mname);
        size_t ml = strlen(mname);
        if (ml < 4 || strcmp(mname + ml - 4, ".npy") != 0) {
            lua_settop(L, result);
            continue; /* numpy.load skips nothing, but other members are not arrays */
        }
        npy_info o = { 0 };
        char err[256];
        if (!parse_npy(img, usize, &o, err, sizeof err)) raisef(L, "%s: '%s': member '%s': %s", op, path, mname, err);
        lua_pushlstring(L, mname, ml - 4);
        push_tensor_from(L, op, path, mname, o.ndim, o.sizes, o.dtype, img + o.data_off, o.fortran, o.swap);
        lua_rawset(L, result);
        lua_settop(L, result);
    }
    return 1;
}

/* ---- text: CSV and lines (ember.data.read_csv, read_lines) ---- */

static void gz_free(void *p) { gzclose((gzFile)p); }

/* Pushes the whole (gzip-transparent) file as a Lua string. */
static void push_text(lua_State *L, const char *op, const char *path) {
    struct stat st;
    if (stat(path, &st) == 0 && !S_ISREG(st.st_mode)) raisef(L, "%s: '%s': not a regular file", op, path);
    cbox *box = push_cbox(L, gz_free);
    errno = 0;
    gzFile f = gzopen(path, "rb");
    if (!f) raisef(L, "%s: '%s': cannot open: %s", op, path, errno ? strerror(errno) : "out of memory");
    box->p = f;
    luaL_Buffer b;
    luaL_buffinit(L, &b);
    for (;;) {
        char *dst = luaL_prepbuffsize(&b, 65536);
        int r = gzread(f, dst, 65536);
        if (r < 0) {
            int zerr;
            const char *m = gzerror(f, &zerr);
            raisef(L, "%s: '%s': read failed: %s", op, path, zerr == Z_ERRNO ? strerror(errno) : m);
        }
        if (r == 0) break;
        luaL_addsize(&b, (size_t)r);
    }
    luaL_pushresult(&b);
    cbox_release(box);
    lua_remove(L, -2); /* the box */
}

/* ember.data.read_lines(path) -> {line, ...} without their line ends
 * (\n or \r\n); a .gz file is inflated. */
static int l_read_lines(lua_State *L) {
    const char *op = "read_lines";
    const char *path = luaL_checkstring(L, 1);
    push_text(L, op, path);
    size_t n;
    const char *s = lua_tolstring(L, -1, &n), *end = s + n;
    lua_newtable(L);
    lua_Integer k = 0;
    while (s < end) {
        const char *nl = memchr(s, '\n', (size_t)(end - s));
        const char *e = nl ? nl : end;
        size_t len = (size_t)(e - s);
        if (len && s[len - 1] == '\r') len--;
        lua_pushlstring(L, s, len);
        lua_rawseti(L, -2, ++k);
        s = nl ? nl + 1 : end;
    }
    return 1;
}

/* ember.data.read_csv(path, [{header=false, delimiter=",", dtype="float32",
 * columns={...}}]) -> tensor {rows, columns}[, names]: numeric CSV (gzip
 * transparent); an empty field is NaN; blank lines are skipped; columns
 * picks 1-based columns in the given order. */
static int l_read_csv(lua_State *L) {
    const char *op = "read_csv";
    const char *path = luaL_checkstring(L, 1);
    bool header = false;
    char delim = ',';
    em_dtype dt = EM_FLOAT32;
    int ncols_sel = 0;
    int64_t *sel = NULL;
    if (!lua_isnoneornil(L, 2)) {
        luaL_checktype(L, 2, LUA_TTABLE);
        lua_getfield(L, 2, "header");
        header = lua_toboolean(L, -1);
        lua_getfield(L, 2, "delimiter");
        if (!lua_isnil(L, -1)) {
            size_t dl;
            const char *d = lua_tolstring(L, -1, &dl);
            if (!d || dl != 1) raisef(L, "%s: option 'delimiter' must be one character", op);
            delim = d[0];
        }
        lua_getfield(L, 2, "dtype");
        if (!lua_isnil(L, -1)) {
            const char *d = lua_tostring(L, -1);
            dt = d ? em_dtype_from_name(d) : EM_DTYPE_NONE;
            if (dt != EM_FLOAT32 && dt != EM_FLOAT64 && dt != EM_INT64 && dt != EM_INT32)
                raisef(L, "%s: option 'dtype' must be float32, float64, int32 or int64 (got %s)", op,
                       d ? d : luaL_typename(L, -1));
        }
        lua_getfield(L, 2, "columns");
        if (!lua_isnil(L, -1)) {
            if (!lua_istable(L, -1)) raisef(L, "%s: option 'columns' must be a list of 1-based column numbers", op);
            ncols_sel = (int)lua_rawlen(L, -1);
            sel = lua_newuserdatauv(L, (size_t)(ncols_sel ? ncols_sel : 1) * sizeof *sel, 0);
            for (int i = 0; i < ncols_sel; i++) {
                lua_rawgeti(L, -2, i + 1);
                if (!lua_isinteger(L, -1) || lua_tointeger(L, -1) < 1)
                    raisef(L, "%s: option 'columns' element %d is not a column number >= 1", op, i + 1);
                sel[i] = lua_tointeger(L, -1) - 1;
                lua_pop(L, 1);
            }
            lua_replace(L, 3); /* sel's userdata stays at 3 */
        }
        lua_settop(L, sel ? 3 : 2);
    }
    push_text(L, op, path);
    int text = lua_gettop(L);
    size_t n;
    const char *s = lua_tolstring(L, text, &n), *end = s + n;
    lua_newtable(L); /* header names */
    int names = lua_gettop(L);
    /* two passes: count rows and columns, then parse into the tensor */
    int64_t rows = 0, cols = -1;
    int64_t line_no = 0;
    const char *body = s;
    for (const char *p = s; p < end;) {
        const char *nl = memchr(p, '\n', (size_t)(end - p));
        const char *e = nl ? nl : end;
        line_no++;
        const char *le = e;
        if (le > p && le[-1] == '\r') le--;
        bool blank = true;
        for (const char *c = p; c < le && blank; c++) blank = *c == ' ' || *c == '\t';
        if (!blank) {
            int64_t k = 1;
            for (const char *c = p; c < le; c++) k += *c == delim;
            if (header && line_no == 1) {
                const char *f = p;
                lua_Integer idx = 0;
                for (const char *c = p; c <= le; c++)
                    if (c == le || *c == delim) {
                        const char *a = f, *z = c;
                        while (a < z && (*a == ' ' || *a == '"')) a++;
                        while (z > a && (z[-1] == ' ' || z[-1] == '"')) z--;
                        lua_pushlstring(L, a, (size_t)(z - a));
                        lua_rawseti(L, names, ++idx);
                        f = c + 1;
                    }
                cols = k;
                body = nl ? nl + 1 : end;
            } else {
                if (cols < 0) cols = k;
                else if (k != cols)
                    raisef(L, "%s: '%s': line %lld has %lld fields, expected %lld", op, path, (long long)line_no,
                           (long long)k, (long long)cols);
                rows++;
            }
        } else if (header && line_no == 1) {
            raisef(L, "%s: '%s': the header line is blank", op, path);
        }
        p = nl ? nl + 1 : end;
    }
    if (cols < 0) cols = 0;
    for (int i = 0; i < ncols_sel; i++)
        if (sel[i] >= cols)
            raisef(L, "%s: option 'columns' names column %lld, the file has %lld", op, (long long)sel[i] + 1,
                   (long long)cols);
    int64_t outc = ncols_sel ? ncols_sel : cols;
    int64_t *pos = lua_newuserdatauv(L, (size_t)(cols ? cols : 1) * sizeof *pos, 0); /* column -> output slot or -1 */
    for (int64_t c = 0; c < cols; c++) pos[c] = ncols_sel ? -1 : c;
    for (int i = 0; i < ncols_sel; i++) pos[sel[i]] = i; /* a column named twice: the last slot wins below */
    int64_t sizes[2] = { rows, outc };
    em_tensor *t = em_tensor_new(2, sizes, dt, em_cpu_device());
    if (!t) em_lua_error(L, op);
    em_lua_push_tensor(L, t, op);
    int tidx = lua_gettop(L);
    char *out = em_tensor_data(t);
    size_t es = em_dtype_size(dt);
    int64_t r = 0;
    line_no = header ? 1 : 0;
    for (const char *p = body; p < end;) {
        const char *nl = memchr(p, '\n', (size_t)(end - p));
        const char *e = nl ? nl : end;
        line_no++;
        const char *le = e;
        if (le > p && le[-1] == '\r') le--;
        bool blank = true;
        for (const char *c = p; c < le && blank; c++) blank = *c == ' ' || *c == '\t';
        if (!blank) {
            const char *f = p;
            int64_t c = 0;
            for (const char *q = p; q <= le; q++) {
                if (q != le && *q != delim) continue;
                const char *a = f, *z = q;
                while (a < z && (*a == ' ' || *a == '"')) a++;
                while (z > a && (z[-1] == ' ' || z[-1] == '"' || z[-1] == '\t')) z--;
                int64_t slot = pos[c];
                if (slot >= 0) {
                    char tmp[64];
                    size_t len = (size_t)(z - a);
                    if (len >= sizeof tmp)
                        raisef(L, "%s: '%s': line %lld, column %lld: field too long", op, path, (long long)line_no,
                               (long long)c + 1);
                    memcpy(tmp, a, len);
                    tmp[len] = 0;
                    char *stop;
                    void *dst = out + ((size_t)r * (size_t)outc + (size_t)slot) * es;
                    if (dt == EM_FLOAT32 || dt == EM_FLOAT64) {
                        double v = len ? strtod(tmp, &stop) : NAN;
                        if (len && *stop)
                            raisef(L, "%s: '%s': line %lld, column %lld: '%s' is not a number", op, path,
                                   (long long)line_no, (long long)c + 1, tmp);
                        em_store_from_double(dst, dt, v);
                    } else {
                        errno = 0;
                        long long v = strtoll(tmp, &stop, 10);
                        if (!len || *stop || errno)
                            raisef(L, "%s: '%s': line %lld, column %lld: '%s' is not an integer", op, path,
                                   (long long)line_no, (long long)c + 1, tmp);
                        em_store_from_int64(dst, dt, v);
                    }
                    if (ncols_sel)
                        for (int i = 0; i < ncols_sel; i++) /* the same column picked twice */
                            if (sel[i] == c && i != slot)
                                memcpy(out + ((size_t)r * (size_t)outc + (size_t)i) * es, dst, es);
                }
                c++;
                f = q + 1;
            }
            r++;
        }
        p = nl ? nl + 1 : end;
    }
    lua_pushvalue(L, tidx);
    if (!header) return 1;
    if (ncols_sel) {
        lua_createtable(L, ncols_sel, 0);
        for (int i = 0; i < ncols_sel; i++) {
            lua_rawgeti(L, names, sel[i] + 1);
            lua_rawseti(L, -2, i + 1);
        }
    } else {
        lua_pushvalue(L, names);
    }
    return 2;
}

/* ember.utils.isatty(f): whether f (a Lua file such as io.stderr, or a
 * descriptor number) is a terminal; the progress bar and plots ask. */
static int l_isatty(lua_State *L) {
    int fd;
    luaL_Stream *s = luaL_testudata(L, 1, LUA_FILEHANDLE);
    if (s) fd = s->f ? fileno(s->f) : -1;
    else fd = (int)luaL_checkinteger(L, 1);
    lua_pushboolean(L, fd >= 0 && isatty(fd));
    return 1;
}

/* Pushes module[name], a table made when missing. */
static void module_table(lua_State *L, int module_idx, const char *name) {
    if (lua_getfield(L, module_idx, name) != LUA_TTABLE) {
        lua_pop(L, 1);
        lua_newtable(L);
        lua_pushvalue(L, -1);
        lua_setfield(L, module_idx, name);
    }
}

/* ---- registration ---- */

const char *const em_lua_file_functions[] = { "save", "load", "save_npy", "load_npy", "savez", "savez_compressed",
                                               "load_npz", "data.read_csv", "data.read_lines", NULL };

void em_lua_register_serialize(lua_State *L, int module_idx) {
    static const luaL_Reg funcs[] = {
        { "save", l_save },         { "load", l_load },   { "save_npy", l_save_npy },
        { "load_npy", l_load_npy }, { "savez", l_savez }, { "savez_compressed", l_savez_compressed },
        { "load_npz", l_load_npz }, { NULL, NULL }
    };
    lua_pushvalue(L, module_idx);
    luaL_setfuncs(L, funcs, 0);
    lua_pop(L, 1);
    /* ember.data: its readers here, the rest in lua/stdlib/data.lua */
    static const luaL_Reg data_funcs[] = { { "read_csv", l_read_csv }, { "read_lines", l_read_lines }, { NULL, NULL } };
    module_table(L, module_idx, "data");
    luaL_setfuncs(L, data_funcs, 0);
    lua_pop(L, 1);
    /* ember.utils: isatty here, the rest in lua/stdlib/utils.lua */
    module_table(L, module_idx, "utils");
    lua_pushcfunction(L, l_isatty);
    lua_setfield(L, -2, "isatty");
    lua_pop(L, 1);
}
