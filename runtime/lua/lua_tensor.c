/* lua_tensor.c -- the tensor userdata: its metatable (indexing, slicing,
 * assignment through indices, arithmetic metamethods, __gc/__close) and
 * the hand-written tensor methods (item, tolist, size, float, ...).
 *
 * See Note [Tensor userdata] in em_lua_int.h and Note [GC pressure] below.
 */
#include <limits.h>
#include <stdatomic.h>
#include <string.h>

#include "autograd/em_autograd.h"
#include "lua/em_lua_bind.h"
#include "lua/em_lua_int.h"
#include "em_ops.h"

/* ---- pushing tensors ---- */

/* Note [GC pressure]
 * A tensor userdata is a few bytes to Lua's collector, but may own
 * megabytes. em_lua_push_tensor adds the bytes this thread allocated since
 * the last push (em_memory_take_thread_allocated) to a pending count; past
 * GC_PRESSURE_BYTES (512 KiB: about a thousand 1-element tensors, a batch
 * the header cache absorbs) it asks the collector for one basic step (in
 * generational mode a minor collection; it adds no fake debt, which would
 * make a small heap look grown and run a major collection each time), so
 * a loop allocating tensors stays flat without collectgarbage(). A step is
 * not enough in generational mode: a tensor alive across two minor
 * collections turns old and is only freed by a major one, which Lua's own
 * accounting (a few bytes per userdata) rarely triggers. So once the bytes
 * allocated since the last full collection pass max(GC_MAJOR_MIN, the live
 * bytes after it) -- a 100% pause measured in tensor bytes -- a full
 * collection runs instead. A stopped collector (collectgarbage("stop")) is
 * left stopped. The count includes the tensor, storage and version headers
 * (~500 bytes a tensor), not only the data: otherwise 1-element tensors
 * add almost nothing, the collector runs only as Lua's own accounting of
 * the userdata asks -- every 20 % growth of the whole Lua heap -- and the
 * finalizers free tensors in batches that grow with the heap (12k+ at a
 * few MB), overflowing the header cache into malloc: a 1-element add went
 * from 390 to 1600 ns with 5000 live tables in the heap. */
#define GC_PRESSURE_BYTES ((size_t)1 << 19)
#define GC_MAJOR_MIN ((size_t)64 << 20)
static _Thread_local size_t gc_pending, gc_since_full, gc_full_threshold = GC_MAJOR_MIN;
static _Thread_local bool gc_due; /* a collection is owed (Note [GC pressure]: deferred step) */

/* Runs the owed collection: a basic step, or a full one past the pause. */
static void gc_run(lua_State *L) {
    gc_due = false;
    if (!lua_gc(L, LUA_GCISRUNNING)) return;
    if (gc_since_full >= gc_full_threshold) {
        em_memory_stats st;
        lua_gc(L, LUA_GCCOLLECT);
        em_memory_get_stats(&st);
        gc_since_full = 0;
        gc_full_threshold = st.allocated > GC_MAJOR_MIN ? st.allocated : GC_MAJOR_MIN;
    } else {
        lua_gc(L, LUA_GCSTEP, 0);
    }
}

/* Note [GC pressure] (deferred step): the step a push owes runs at the
 * start of the next generated binding (em_lua_gc_entry, from
 * em_lua_options_index_req), before that op allocates: the previous
 * call's output, garbage by then in a loop like `local y = x:gather(2, i)`,
 * is freed first and its block is handed to the new output, so a loop
 * reuses one block instead of rotating through two (a 4 MB output then
 * stays in cache: index_select and index_add at 1e6 elements). The
 * arithmetic metamethods (`c = a + b`) run it the same way when they read
 * their first operand (em_lua_mm_operand), before any temporary exists;
 * only a metamethod that raises before its push leaves it to the next
 * push. In-place bindings push no new tensor and owe nothing, so a loop
 * `zeros(n):index_add_(...)` still alternates two blocks. */
void em_lua_gc_entry(lua_State *L) {
    if (gc_due) gc_run(L);
}

static void gc_pressure(lua_State *L, size_t nbytes) {
    if (gc_due) gc_run(L); /* no binding ran since the step was owed */
    gc_pending += nbytes;
    if (gc_pending < GC_PRESSURE_BYTES) return;
    gc_since_full += gc_pending;
    gc_pending = 0;
    gc_due = true;
}

/* Pushes t as a tensor userdata: its metatable from upvalue 1 when uv is
 * set and that upvalue is a table (Note [Binding upvalue]; a metamethod's
 * upvalue 1 is the metatable too), else from the registry; then reports
 * the bytes this thread allocated to the collector. */
static inline void push_slot(lua_State *L, em_tensor *t, bool uv) {
    em_lua_box *b = (em_lua_box *)lua_newuserdatauv(L, sizeof *b, 0);
    b->t = t;
    b->tag = EM_LUA_TAG; /* Note [Tensor userdata] */
    if (uv && lua_type(L, lua_upvalueindex(1)) == LUA_TTABLE)
        lua_pushvalue(L, lua_upvalueindex(1));
    else
        lua_rawgetp(L, LUA_REGISTRYINDEX, &em_lua_mt_key);
    lua_setmetatable(L, -2);
    size_t took = em_memory_take_thread_allocated();
    if (took) gc_pressure(L, took);
}

void em_lua_push_tensor(lua_State *L, em_tensor *t, const char *op) {
    if (!t) em_lua_error(L, op);
    if (atomic_load_explicit(&em_lua_pending_count, memory_order_relaxed))
        em_lua_drain_unrefs(L);
    push_slot(L, t, false);
}

void em_lua_push_tensor_uv(lua_State *L, em_tensor *t, const char *op) {
    if (!t) em_lua_error(L, op);
    if (atomic_load_explicit(&em_lua_pending_count, memory_order_relaxed))
        em_lua_drain_unrefs(L);
    push_slot(L, t, true);
}

/* em_lua_push_tensor for metamethods, whose upvalue 1 is the metatable. */
void em_lua_push_result(lua_State *L, em_tensor *t, const char *op) {
    if (!t) em_lua_error(L, op);
    push_slot(L, t, true);
}

/* ---- indexing ---- */

/* Maps a 1-based (negative from the end) index to 0-based; false when out
 * of range. */
static bool norm_index(int64_t i, int64_t size, int64_t *out) {
    int64_t i0 = i > 0 ? i - 1 : size + i;
    if (i == 0 || i0 < 0 || i0 >= size) return false;
    *out = i0;
    return true;
}

static int64_t key_integer(lua_State *L, int idx, em_tensor *release, const char *what) {
    int ok = 0;
    lua_Integer v = 0;
    if (lua_type(L, idx) == LUA_TNUMBER) v = lua_tointegerx(L, idx, &ok);
    if (!ok) {
        const char *got = lua_type(L, idx) == LUA_TNUMBER ? "non-integral number"
                                                          : luaL_typename(L, idx);
        if (release) em_tensor_release(release);
        em_lua_raise(L, "index: %s: integer expected, got %s", what, got);
    }
    return (int64_t)v;
}

/* x[i]: select along dim 1. Returns a new reference. */
static em_tensor *index_number(lua_State *L, em_tensor *t, int kidx) {
    if (t->ndim == 0) em_lua_raise(L, "index: cannot index a 0-dim tensor");
    int64_t i = key_integer(L, kidx, NULL, "index"), i0 = 0;
    if (!norm_index(i, t->sizes[0], &i0))
        em_lua_raise(L, "index %I out of range for dim 1 of size %I%s", (lua_Integer)i,
                     (lua_Integer)t->sizes[0], i == 0 ? " (indices are 1-based)" : "");
    em_tensor *r = em_select(t, 0, i0);
    if (!r) em_lua_error(L, "index");
    return r;
}

/* x[{ {1,3}, {}, 2 }]: Torch7 slicing, one entry per leading dim: a
 * number selects (drops the dim), {} keeps the whole dim, {a}, {a,b} and
 * {a,b,step} take a..b inclusive. Returns a new reference (a view). */
/* for_set: the target of an assignment, where (as in PyTorch's setitem) a
 * slice covering its whole dim is the tensor itself, not a view of it:
 * x[{ {} }] = x copies nothing, and overlap checks see x. */
em_tensor *em_lua_index_table(lua_State *L, em_tensor *t, int kidx, bool for_set) {
    lua_Unsigned n = lua_rawlen(L, kidx);
    if (n > (lua_Unsigned)t->ndim)
        em_lua_raise(L, "index: too many indices for a tensor of %d dims (got %d)", t->ndim,
                     (int)n);
    em_tensor *cur = em_tensor_retain(t);
    int dim = 0; /* the dim of cur that entry k addresses */
    for (int k = 1; k <= (int)n; k++) {
        em_tensor *next = NULL;
        int tp = lua_rawgeti(L, kidx, k);
        int64_t size = cur->sizes[dim];
        if (tp == LUA_TNUMBER) {
            int64_t i = key_integer(L, -1, cur, "index"), i0 = 0;
            if (!norm_index(i, size, &i0)) {
                em_tensor_release(cur);
                em_lua_raise(L, "index %I out of range for dim %d of size %I%s", (lua_Integer)i, k,
                             (lua_Integer)size, i == 0 ? " (indices are 1-based)" : "");
            }
            next = em_select(cur, dim, i0);
        } else if (tp == LUA_TTABLE) {
            int inner = lua_gettop(L);
            lua_Unsigned m = lua_rawlen(L, inner);
            if (m == 0 && for_set) { /* {}: the whole dim */
                lua_pop(L, 1);
                dim++;
                continue;
            }
            if (m == 0) { /* {}: the whole dim, as a view (PyTorch's x[:]) */
                lua_pop(L, 1);
                next = em_slice(cur, dim, NULL, NULL, 1);
                em_tensor_release(cur);
                if (!next) em_lua_error(L, "index");
                cur = next;
                dim++;
                continue;
            }
            if (m > 3) {
                em_tensor_release(cur);
                em_lua_raise(L, "index: slice for dim %d has %d entries (expected {start, end, step})",
                             k, (int)m);
            }
            int64_t v[3] = { 0, 0, 0 };
            for (int j = 0; j < (int)m; j++) {
                lua_rawgeti(L, inner, j + 1);
                v[j] = key_integer(L, -1, cur, "slice");
                lua_pop(L, 1);
            }
            int64_t a = v[0], b = m >= 2 ? v[1] : v[0], step = m >= 3 ? v[2] : 1, a0 = 0, b0 = 0;
            if (step < 1) {
                em_tensor_release(cur);
                em_lua_raise(L, "index: slice step must be positive for dim %d (got %I)", k,
                             (lua_Integer)step);
            }
            if (!norm_index(a, size, &a0) || !norm_index(b, size, &b0)) {
                int64_t bad = !norm_index(a, size, &a0) ? a : b;
                em_tensor_release(cur);
                em_lua_raise(L, "index %I out of range for dim %d of size %I%s", (lua_Integer)bad,
                             k, (lua_Integer)size, bad == 0 ? " (indices are 1-based)" : "");
            }
            int64_t start = a0, end = b0 + 1 < a0 ? a0 : b0 + 1;
            if (for_set && start == 0 && end == size && step == 1) {
                lua_pop(L, 1);
                dim++;
                continue;
            }
            next = em_slice(cur, dim, &start, &end, step);
            dim++;
        } else {
            const char *got = luaL_typename(L, -1);
            em_tensor_release(cur);
            em_lua_raise(L, "index: entry %d: number or table expected, got %s", k, got);
        }
        lua_pop(L, 1);
        em_tensor_release(cur);
        if (!next) em_lua_error(L, "index");
        cur = next;
    }
    if (n == 0 && !for_set) { /* x[{}]: a view of the whole tensor, never x itself */
        em_tensor *v = em_view(cur, (em_intlist){ cur->sizes, cur->ndim });
        em_tensor_release(cur);
        if (!v) em_lua_error(L, "index");
        cur = v;
    }
    return cur;
}

/* ---- properties ---- */

#define EM_LUA_SIZE_MT "ember.Size"

/* x.shape: a plain Lua array of sizes whose metatable prints it as {2,3}
 * and compares shapes by value (x.shape == y.shape). */
static int push_shape(lua_State *L, const em_tensor *t) {
    lua_createtable(L, t->ndim, 0);
    for (int i = 0; i < t->ndim; i++) {
        lua_pushinteger(L, (lua_Integer)t->sizes[i]);
        lua_rawseti(L, -2, i + 1);
    }
    luaL_setmetatable(L, EM_LUA_SIZE_MT);
    return 1;
}

static int size_tostring(lua_State *L) {
    luaL_checktype(L, 1, LUA_TTABLE);
    luaL_Buffer b;
    luaL_buffinit(L, &b);
    luaL_addchar(&b, '{');
    lua_Unsigned n = lua_rawlen(L, 1);
    for (lua_Unsigned i = 1; i <= n; i++) {
        if (i > 1) luaL_addstring(&b, ", ");
        lua_rawgeti(L, 1, (lua_Integer)i);
        luaL_addvalue(&b);
    }
    luaL_addchar(&b, '}');
    luaL_pushresult(&b);
    return 1;
}

static int size_eq(lua_State *L) {
    bool eq = lua_istable(L, 1) && lua_istable(L, 2) && lua_rawlen(L, 1) == lua_rawlen(L, 2);
    for (lua_Unsigned i = 1; eq && i <= lua_rawlen(L, 1); i++) {
        lua_rawgeti(L, 1, (lua_Integer)i);
        lua_rawgeti(L, 2, (lua_Integer)i);
        eq = lua_rawequal(L, -1, -2);
        lua_pop(L, 2);
    }
    lua_pushboolean(L, eq);
    return 1;
}

/* __index: methods first (upvalue 1), then properties; integer keys
 * select, table keys slice; anything else is nil, as in Lua tables. */
static int t_index(lua_State *L) {
    switch (lua_type(L, 2)) {
    case LUA_TSTRING: {
        lua_pushvalue(L, 2);
        if (lua_rawget(L, lua_upvalueindex(1)) != LUA_TNIL) return 1;
        lua_pop(L, 1);
        const char *k = lua_tostring(L, 2);
        em_tensor *t = em_lua_checkself(L, 1, "index");
        if (strcmp(k, "shape") == 0) return push_shape(L, t);
        if (strcmp(k, "dtype") == 0) { lua_pushstring(L, em_dtype_name(t->dtype)); return 1; }
        if (strcmp(k, "device") == 0) { em_lua_push_device(L, t->device); return 1; }
        if (strcmp(k, "ndim") == 0) { lua_pushinteger(L, t->ndim); return 1; }
        if (em_lua_tensor_property(L, t, k)) return 1;
        lua_pushnil(L);
        return 1;
    }
    case LUA_TNUMBER: {
        em_tensor *t = em_lua_checkself(L, 1, "index");
        em_lua_push_tensor(L, index_number(L, t, 2), "index");
        return 1;
    }
    case LUA_TTABLE: {
        em_tensor *t = em_lua_checkself(L, 1, "index");
        if (em_lua_index_is_advanced(L, 2)) /* Note [Advanced indexing] (lua_index.c) */
            em_lua_push_tensor(L, em_lua_index_advanced(L, t, 2), "index");
        else
            em_lua_push_tensor(L, em_lua_index_table(L, t, 2, false), "index");
        return 1;
    }
    case LUA_TUSERDATA: {
        em_tensor *t = em_lua_checkself(L, 1, "index");
        if (!em_lua_index_is_advanced(L, 2)) {
            lua_pushnil(L);
            return 1;
        }
        em_lua_push_tensor(L, em_lua_index_advanced(L, t, 2), "index");
        return 1;
    }
    default:
        lua_pushnil(L);
        return 1;
    }
}

/* __newindex: x[i] = v and x[{..}] = v write in place, as PyTorch's
 * setitem does: copy_ for a tensor of the target's shape, fill_ for a
 * 0-dim tensor (so its gradient is the sum) and for numbers and booleans
 * (which must fit the dtype), copy_ with broadcasting otherwise. */
static int t_newindex(lua_State *L) {
    em_tensor *t = em_lua_checkself(L, 1, "index");
    em_tensor *view;
    if (em_lua_index_is_advanced(L, 2)) { /* Note [Advanced indexing] (lua_index.c) */
        em_lua_newindex_advanced(L, t, 2, 3);
        return 0;
    }
    switch (lua_type(L, 2)) {
    case LUA_TNUMBER: view = index_number(L, t, 2); break;
    case LUA_TTABLE: view = em_lua_index_table(L, t, 2, true); break;
    case LUA_TSTRING:
        if (em_lua_set_tensor_property(L, t, lua_tostring(L, 2), 3)) return 0;
        return em_lua_raise(L, "cannot set field '%s' of a tensor", lua_tostring(L, 2));
    default:
        return em_lua_raise(L, "index: number or table expected as a tensor index, got %s",
                            luaL_typename(L, 2));
    }
    em_tensor **src = em_lua_toslot(L, 3);
    em_tensor *r;
    const char *op;
    bool prev_setitem = em_ag_set_setitem(true); /* reset before any raise below */
    if (src) {
        if (!*src) {
            em_ag_set_setitem(prev_setitem);
            em_tensor_release(view);
            return em_lua_raise(L, "copy_: tensor used after close");
        }
        bool same = view->ndim == (*src)->ndim &&
                    memcmp(view->sizes, (*src)->sizes, sizeof(int64_t) * (size_t)view->ndim) == 0;
        if (!same && (*src)->ndim == 0) {
            op = "fill_";
            r = em_fill_(view, *src);
        } else if (same) {
            op = "copy_";
            r = em_copy_(view, *src);
        } else {
            /* PyTorch's copy_to: drop src's leading size-1 dims, expand it to
             * the target's shape, copy */
            op = "copy_";
            em_tensor *s = *src;
            int lead = 0;
            while (lead < s->ndim && s->sizes[lead] == 1) lead++;
            em_tensor *stripped = em_view(s, (em_intlist){ s->sizes + lead, s->ndim - lead });
            em_tensor *b = stripped ? em_expand(stripped, (em_intlist){ view->sizes, view->ndim }) : NULL;
            r = b ? em_copy_(view, b) : NULL;
            em_tensor_release(stripped);
            em_tensor_release(b);
        }
    } else if (lua_type(L, 3) == LUA_TNUMBER || lua_type(L, 3) == LUA_TBOOLEAN) {
        op = "fill_";
        /* not em_lua_check_tensor: it raises when the number's tensor cannot
         * be made, and view must be released first */
        em_tensor *value = em_lua_wrap_number(L, 3);
        r = value ? em_fill_(view, value) : NULL;
        em_tensor_release(value);
    } else {
        em_ag_set_setitem(prev_setitem);
        em_tensor_release(view);
        return em_lua_argerror(L, 3, "index", "value: tensor or number expected, got %s",
                               luaL_typename(L, 3));
    }
    em_ag_set_setitem(prev_setitem);
    em_tensor_release(view);
    if (!r) return em_lua_error(L, op);
    em_tensor_release(r);
    return 0;
}

/* ---- metamethods ---- */

/* The arithmetic metamethods (a + b, -a, ...) are generated from ops.yaml
 * (em_lua_op_metamethods, Note [Metamethods] in codegen/emit_lua.c). */

static int t_len(lua_State *L) {
    em_tensor *t = em_lua_checkself(L, 1, "len");
    if (t->ndim == 0) return em_lua_raise(L, "len: a 0-dim tensor has no length");
    lua_pushinteger(L, (lua_Integer)t->sizes[0]);
    return 1;
}

/* __gc and __close: release the reference once; the slot keeps NULL. */
static int t_release(lua_State *L) {
    em_tensor **slot = em_lua_toslot(L, 1);
    if (slot && *slot) {
        em_tensor *t = *slot;
        *slot = NULL;
        em_tensor_release(t);
    }
    return 0;
}

static int t_tostring(lua_State *L) {
    em_tensor **slot = em_lua_toslot(L, 1);
    if (!slot) return em_lua_argerror(L, 1, "tostring", "tensor expected, got %s",
                                      luaL_typename(L, 1));
    if (!*slot) {
        lua_pushliteral(L, "tensor(<closed>)");
        return 1;
    }
    em_lua_push_tensor_string(L, *slot);
    return 1;
}

void em_lua_open_tensor(lua_State *L, int methods_idx) {
    static const luaL_Reg meta[] = {
        { "__newindex", t_newindex }, { "__len", t_len },
        { "__gc", t_release },        { "__close", t_release },   { "__tostring", t_tostring },
        { NULL, NULL }
    };
    if (luaL_newmetatable(L, EM_LUA_SIZE_MT)) {
        lua_pushcfunction(L, size_tostring);
        lua_setfield(L, -2, "__tostring");
        lua_pushcfunction(L, size_eq);
        lua_setfield(L, -2, "__eq");
    }
    lua_pop(L, 1);
    if (!luaL_newmetatable(L, EM_LUA_TENSOR_MT)) { /* made already in this state */
        lua_pop(L, 1);
        return;
    }
    lua_pushvalue(L, -1);
    luaL_setfuncs(L, meta, 1); /* upvalue 1: the metatable itself */
    lua_pushvalue(L, -1);
    luaL_setfuncs(L, em_lua_op_metamethods, 1); /* likewise */
    lua_pushvalue(L, -1);
    lua_rawsetp(L, LUA_REGISTRYINDEX, &em_lua_mt_key);
    lua_pushvalue(L, methods_idx);
    lua_pushcclosure(L, t_index, 1);
    lua_setfield(L, -2, "__index");
    lua_pop(L, 1);
}

/* ---- hand-written methods ---- */

void em_lua_push_element(lua_State *L, const void *p, em_dtype t) {
    if (t == EM_BOOL)
        lua_pushboolean(L, *(const bool *)p);
    else if (em_dtype_is_integral(t))
        lua_pushinteger(L, (lua_Integer)em_load_as_int64(p, t));
    else
        lua_pushnumber(L, (lua_Number)em_load_as_double(p, t));
}

static int m_item(lua_State *L) {
    em_tensor *t = em_lua_checkself(L, 1, "item");
    if (t->numel != 1)
        return em_lua_raise(L, "item: a tensor with %I elements cannot be converted to a number "
                               "(expected exactly one)", (lua_Integer)t->numel);
    em_tensor *h = em_lua_host_tensor(t); /* Note [Host copies] */
    if (!h) return em_lua_error(L, "item");
    em_lua_push_element(L, em_tensor_data(h), h->dtype);
    em_tensor_release(h);
    return 1;
}

/* The nested table of t's elements from dim d on, element offset off (in
 * bytes) from base. An empty tensor's data may be NULL: the offset is
 * applied only at an element, which an empty tensor never reaches. */
static void push_list(lua_State *L, const em_tensor *t, const char *base, int64_t off, int d, size_t esize) {
    if (d == t->ndim) {
        em_lua_push_element(L, base + off, t->dtype);
        return;
    }
    int64_t n = t->sizes[d];
    lua_createtable(L, n > INT_MAX ? INT_MAX : (int)n, 0);
    for (int64_t i = 0; i < n; i++) {
        push_list(L, t, base, off + i * t->strides[d] * (int64_t)esize, d + 1, esize);
        lua_rawseti(L, -2, (lua_Integer)(i + 1));
    }
}

static int m_tolist(lua_State *L) {
    em_tensor *t = em_lua_checkself(L, 1, "tolist");
    luaL_checkstack(L, t->ndim + 5, "tolist");
    em_tensor *h = em_lua_host_tensor(t); /* Note [Host copies] */
    em_lua_push_tensor(L, h, "tolist");   /* owned by Lua: errors below cannot leak it */
    push_list(L, h, (const char *)em_tensor_data(h), 0, 0, em_dtype_size(h->dtype));
    return 1;
}

static int m_numel(lua_State *L) {
    lua_pushinteger(L, (lua_Integer)em_lua_checkself(L, 1, "numel")->numel);
    return 1;
}

static int m_dim(lua_State *L) {
    lua_pushinteger(L, em_lua_checkself(L, 1, "dim")->ndim);
    return 1;
}

/* size([d]) / stride([d]): a table, or the value for one 1-based dim. */
static int size_or_stride(lua_State *L, const char *op, bool stride) {
    em_tensor *t = em_lua_checkself(L, 1, op);
    const int64_t *v = stride ? t->strides : t->sizes;
    if (lua_isnoneornil(L, 2)) {
        lua_createtable(L, t->ndim, 0);
        for (int i = 0; i < t->ndim; i++) {
            lua_pushinteger(L, (lua_Integer)v[i]);
            lua_rawseti(L, -2, i + 1);
        }
        return 1;
    }
    int64_t d = em_lua_check_dim(L, 2, op, "dim");
    if (t->ndim == 0)
        return em_lua_raise(L, "%s: dim %I out of range for a 0-dim tensor", op,
                            (lua_Integer)lua_tointeger(L, 2));
    int w = em_wrap_dim(d, t->ndim, op);
    if (w < 0) return em_lua_error(L, op);
    lua_pushinteger(L, (lua_Integer)v[w]);
    return 1;
}

static int m_size(lua_State *L) { return size_or_stride(L, "size", false); }
static int m_stride(lua_State *L) { return size_or_stride(L, "stride", true); }

/* x:float() and friends: x itself (the same Lua value) when it already has
 * the dtype, as in PyTorch. */
static int convert(lua_State *L, em_dtype dt, const char *op) {
    em_tensor *t = em_lua_checkself(L, 1, op);
    em_tensor *r = em_to(t, dt);
    if (r && r == t) {
        em_tensor_release(r);
        lua_pushvalue(L, 1);
        return 1;
    }
    em_lua_push_tensor(L, r, op);
    return 1;
}

static int m_float(lua_State *L) { return convert(L, EM_FLOAT32, "float"); }
static int m_double(lua_State *L) { return convert(L, EM_FLOAT64, "double"); }
static int m_half(lua_State *L) { return convert(L, EM_FLOAT16, "half"); }
static int m_bfloat16(lua_State *L) { return convert(L, EM_BFLOAT16, "bfloat16"); }
static int m_long(lua_State *L) { return convert(L, EM_INT64, "long"); }
static int m_int(lua_State *L) { return convert(L, EM_INT32, "int"); }
static int m_byte(lua_State *L) { return convert(L, EM_UINT8, "byte"); }
static int m_char(lua_State *L) { return convert(L, EM_INT8, "char"); }
static int m_bool(lua_State *L) { return convert(L, EM_BOOL, "bool"); }

/* x:type() -> the dtype name; x:type(dtype) -> x converted (x itself when
 * it has that dtype), as PyTorch's Tensor.type(dtype). */
static int m_type(lua_State *L) {
    em_tensor *t = em_lua_checkself(L, 1, "type");
    if (!lua_isnoneornil(L, 2)) return convert(L, em_lua_check_dtype(L, 2, "type", "dtype"), "type");
    lua_pushstring(L, em_dtype_name(t->dtype));
    return 1;
}

/* x:element_size() -> bytes an element; x:nbytes() -> numel * that (the
 * elements x holds, not its storage's size), as in PyTorch. */
static int m_element_size(lua_State *L) {
    lua_pushinteger(L, (lua_Integer)em_dtype_size(em_lua_checkself(L, 1, "element_size")->dtype));
    return 1;
}

static int m_nbytes(lua_State *L) {
    em_tensor *t = em_lua_checkself(L, 1, "nbytes");
    lua_pushinteger(L, (lua_Integer)(t->numel * (int64_t)em_dtype_size(t->dtype)));
    return 1;
}

static int m_is_contiguous(lua_State *L) {
    lua_pushboolean(L, em_lua_checkself(L, 1, "is_contiguous")->is_contiguous);
    return 1;
}

static int m_storage_offset(lua_State *L) {
    lua_pushinteger(L, (lua_Integer)em_lua_checkself(L, 1, "storage_offset")->offset);
    return 1;
}

void em_lua_register_methods(lua_State *L, int methods_idx) {
    static const luaL_Reg methods[] = {
        { "item", m_item },       { "tolist", m_tolist },
        { "numel", m_numel },     { "dim", m_dim },
        { "size", m_size },       { "stride", m_stride },
        { "float", m_float },     { "double", m_double },
        { "half", m_half },       { "bfloat16", m_bfloat16 },
        { "long", m_long },       { "int", m_int },
        { "byte", m_byte },       { "char", m_char },
        { "bool", m_bool },       { "type", m_type },
        { "is_contiguous", m_is_contiguous },
        { "storage_offset", m_storage_offset },
        { "element_size", m_element_size }, { "nbytes", m_nbytes },
        { NULL, NULL }
    };
    lua_pushvalue(L, methods_idx);
    luaL_setfuncs(L, methods, 0);
    lua_pop(L, 1);
}
