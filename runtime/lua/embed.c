/* embed.c -- the public C API of ember.h: states (with the sandbox and the
 * memory, instruction and time budgets), tensors over host memory with a
 * deleter, globals and calls, DLPack. Written over the runtime's own
 * headers and the Lua C API; see ember.h for every function's contract.
 */
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <lauxlib.h>
#include <lualib.h>

#include "ember.h"
#include "autograd/em_autograd.h"
#include "em_ops.h"
#include "lua/em_lua_int.h"

_Static_assert((int)EMBER_FLOAT64 == (int)EM_FLOAT64 && (int)EMBER_BOOL == (int)EM_BOOL &&
                   (int)EMBER_BFLOAT16 == (int)EM_BFLOAT16,
               "ember_dtype mirrors em_dtype");

struct ember_state {
    lua_State *L;
    char *err;               /* the last error (malloc'd), or NULL */
    ember_options opts;
    size_t lua_bytes;        /* the Lua heap, for memory_limit */
    uint64_t budget_used;    /* instructions of the running call */
    double deadline;         /* of the running call (0: none) */
};

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void set_err(ember_state *S, const char *msg) {
    free(S->err);
    S->err = msg ? strdup(msg) : NULL;
}

const char *ember_last_error(const ember_state *S) { return S && S->err ? S->err : ""; }
const char *ember_error_message(void) { return em_error_message(); }
struct lua_State *ember_lua(ember_state *S) { return S->L; }

/* ---- the Lua heap, with memory_limit ---- */

static void *limited_alloc(void *ud, void *ptr, size_t osize, size_t nsize) {
    ember_state *S = ud;
    size_t old = ptr ? osize : 0;
    if (nsize == 0) {
        free(ptr);
        S->lua_bytes -= old;
        return NULL;
    }
    if (S->opts.memory_limit && nsize > old && S->lua_bytes - old + nsize > S->opts.memory_limit) return NULL;
    void *p = realloc(ptr, nsize);
    if (p) S->lua_bytes = S->lua_bytes - old + nsize;
    return p;
}

/* ---- budgets: a count hook every 1000 instructions ---- */

#define BUDGET_STEP 1000

/* Once a budget is spent the hook fires at every instruction: a script
 * that catches the error (pcall) raises it again at its next instruction,
 * so it reaches the host's call. */
static void budget_hook(lua_State *L, lua_Debug *ar) {
    (void)ar;
    ember_state *S;
    lua_getallocf(L, (void **)&S);
    S->budget_used += BUDGET_STEP;
    bool out = S->opts.instruction_limit && S->budget_used > S->opts.instruction_limit;
    bool late = S->deadline > 0 && now() > S->deadline;
    if (!out && !late) return;
    lua_sethook(L, budget_hook, LUA_MASKCOUNT, 1);
    if (out) luaL_error(L, "instruction budget exceeded (%I instructions)", (lua_Integer)S->opts.instruction_limit);
    luaL_error(L, "time budget exceeded (%f s)", S->opts.time_limit);
}

static void budget_start(ember_state *S) {
    S->budget_used = 0;
    S->deadline = S->opts.time_limit > 0 ? now() + S->opts.time_limit : 0;
}

/* ---- the sandbox ---- */

/* load() that refuses binary chunks. */
static int text_load(lua_State *L) {
    int n = lua_gettop(L);
    lua_pushvalue(L, lua_upvalueindex(1)); /* the real load */
    for (int i = 1; i <= 4; i++) {
        if (i == 3) lua_pushliteral(L, "t");
        else if (i <= n) lua_pushvalue(L, i);
        else lua_pushnil(L);
    }
    lua_call(L, 4, LUA_MULTRET);
    return lua_gettop(L) - n;
}

/* setmetatable that refuses a metatable with a __gc field. Lua runs
 * finalizers with hooks off (lgc.c, GCTM), so a __gc that loops would run
 * outside the instruction and time budgets, during any later allocation or
 * in ember_close. Lua marks an object for finalization only when its
 * metatable has __gc at setmetatable time, so checking here is enough
 * (docs/SANDBOX.md). */
static int sandbox_setmetatable(lua_State *L) {
    if (lua_type(L, 2) == LUA_TTABLE) {
        lua_pushliteral(L, "__gc");
        if (lua_rawget(L, 2) != LUA_TNIL)
            return luaL_error(L, "setmetatable: __gc metamethods are not allowed in the sandbox "
                                 "(finalizers would run outside the instruction and time budgets)");
        lua_pop(L, 1);
    }
    int n = lua_gettop(L);
    lua_pushvalue(L, lua_upvalueindex(1)); /* the real setmetatable */
    lua_insert(L, 1);
    lua_call(L, n, LUA_MULTRET);
    return lua_gettop(L);
}

/* Opens what an untrusted script may use (ember.h: ember_options.sandbox).
 * Runs protected (lua_pcall'd by ember_open). */
static int open_sandbox(lua_State *L) {
    static const luaL_Reg libs[] = {
        { LUA_GNAME, luaopen_base }, { LUA_LOADLIBNAME, luaopen_package }, { LUA_COLIBNAME, luaopen_coroutine },
        { LUA_TABLIBNAME, luaopen_table }, { LUA_STRLIBNAME, luaopen_string }, { LUA_MATHLIBNAME, luaopen_math },
        { LUA_UTF8LIBNAME, luaopen_utf8 }, { LUA_OSLIBNAME, luaopen_os }, { NULL, NULL }
    };
    for (const luaL_Reg *l = libs; l->func; l++) {
        luaL_requiref(L, l->name, l->func, 1);
        lua_pop(L, 1);
    }
    /* no file loading from Lua */
    lua_pushnil(L);
    lua_setglobal(L, "dofile");
    lua_pushnil(L);
    lua_setglobal(L, "loadfile");
    lua_getglobal(L, "load");
    lua_pushcclosure(L, text_load, 1);
    lua_setglobal(L, "load");
    lua_getglobal(L, "setmetatable");
    lua_pushcclosure(L, sandbox_setmetatable, 1);
    lua_setglobal(L, "setmetatable");
    /* string.dump makes binary chunks */
    lua_getglobal(L, "string");
    lua_pushnil(L);
    lua_setfield(L, -2, "dump");
    lua_pop(L, 1);
    /* os: only the clock and dates */
    lua_getglobal(L, "os");
    lua_createtable(L, 0, 4);
    static const char *const keep[] = { "clock", "time", "date", "difftime", NULL };
    for (int i = 0; keep[i]; i++) {
        lua_getfield(L, -2, keep[i]);
        lua_setfield(L, -2, keep[i]);
    }
    lua_setglobal(L, "os");
    lua_pop(L, 1);
    /* require: package.preload and package.loaded only (ember's modules) */
    lua_getglobal(L, "package");
    lua_getfield(L, -1, "searchers");
    lua_rawgeti(L, -1, 1); /* the preload searcher */
    lua_createtable(L, 1, 0);
    lua_insert(L, -2);
    lua_rawseti(L, -2, 1);
    lua_setfield(L, -3, "searchers");
    lua_pop(L, 1);
    lua_pushnil(L);
    lua_setfield(L, -2, "loadlib");
    lua_pushliteral(L, "");
    lua_setfield(L, -2, "path");
    lua_pushliteral(L, "");
    lua_setfield(L, -2, "cpath");
    lua_pop(L, 1);
    return 0;
}

static int open_all(lua_State *L) {
    luaL_openlibs(L);
    return 0;
}

/* ember as the global `ember` and package.loaded.ember / preload. */
static int open_ember(lua_State *L) {
    luaL_getsubtable(L, LUA_REGISTRYINDEX, LUA_PRELOAD_TABLE);
    lua_pushcfunction(L, luaopen_ember);
    lua_setfield(L, -2, "ember");
    lua_pop(L, 1);
    luaL_requiref(L, "ember", luaopen_ember, 1);
    return 0;
}

/* open_ember, then without the functions that read or write files, nor
 * the process-wide settings one state must not change for the others and
 * the host (docs/SANDBOX.md): the tensor memory cap and the thread count. */
static int open_ember_sandboxed(lua_State *L) {
    open_ember(L);
    static const char *const process_wide[] = { "set_memory_limit", "set_num_threads", NULL };
    for (int i = 0; process_wide[i]; i++) {
        lua_pushnil(L);
        lua_setfield(L, -2, process_wide[i]);
    }
    for (int i = 0; em_lua_file_functions[i]; i++) {
        const char *name = em_lua_file_functions[i], *dot = strchr(name, '.');
        if (!dot) {
            lua_pushnil(L);
            lua_setfield(L, -2, name);
        } else { /* "data.read_csv": a field of a table of the module */
            lua_pushlstring(L, name, (size_t)(dot - name));
            if (lua_rawget(L, -2) == LUA_TTABLE) {
                lua_pushnil(L);
                lua_setfield(L, -2, dot + 1);
            }
            lua_pop(L, 1);
        }
    }
    return 0;
}

/* Message handler: the message with a traceback. */
static int traceback(lua_State *L) {
    const char *msg = lua_tostring(L, 1);
    if (!msg) msg = lua_pushfstring(L, "(error object is a %s value)", luaL_typename(L, 1));
    luaL_traceback(L, L, msg, 1);
    return 1;
}

/* Calls the function below nargs arguments on the stack under the budgets
 * and the traceback handler; 0, or -1 with the error kept in S->err. */
static int pcall_budget(ember_state *S, int nargs, int nres) {
    lua_State *L = S->L;
    int base = lua_gettop(L) - nargs;
    lua_pushcfunction(L, traceback);
    lua_insert(L, base);
    bool limited = S->opts.instruction_limit || S->opts.time_limit > 0;
    if (limited) {
        budget_start(S);
        lua_sethook(L, budget_hook, LUA_MASKCOUNT, BUDGET_STEP);
    }
    int st = lua_pcall(L, nargs, nres, base);
    if (limited) lua_sethook(L, NULL, 0, 0);
    lua_remove(L, base);
    if (st != LUA_OK) {
        set_err(S, lua_tostring(L, -1) ? lua_tostring(L, -1) : "error");
        lua_pop(L, 1);
        return -1;
    }
    set_err(S, NULL);
    return 0;
}

ember_state *ember_open(const ember_options *opts) {
    ember_state *S = calloc(1, sizeof *S);
    if (!S) {
        em_set_error(EM_ENOMEM, "ember_open: out of memory");
        return NULL;
    }
    if (opts) S->opts = *opts;
    S->L = lua_newstate(limited_alloc, S);
    if (!S->L) {
        free(S);
        em_set_error(EM_ENOMEM, "ember_open: cannot create a Lua state");
        return NULL;
    }
    lua_State *L = S->L;
    lua_pushcfunction(L, S->opts.sandbox ? open_sandbox : open_all);
    int st = lua_pcall(L, 0, 0, 0);
    if (st == LUA_OK) {
        lua_pushcfunction(L, S->opts.sandbox ? open_ember_sandboxed : open_ember);
        st = lua_pcall(L, 0, 0, 0);
    }
    if (st != LUA_OK) {
        em_set_error(EM_EINTERNAL, "ember_open: %s", lua_tostring(L, -1) ? lua_tostring(L, -1) : "error");
        lua_close(L);
        free(S);
        return NULL;
    }
    return S;
}

void ember_close(ember_state *S) {
    if (!S) return;
    lua_close(S->L);
    free(S->err);
    free(S);
}

int ember_run_string(ember_state *S, const char *code, const char *chunkname) {
    lua_State *L = S->L;
    if (luaL_loadbufferx(L, code, strlen(code), chunkname ? chunkname : "=(host)", S->opts.sandbox ? "t" : NULL) !=
        LUA_OK) {
        set_err(S, lua_tostring(L, -1));
        lua_pop(L, 1);
        return -1;
    }
    int r = pcall_budget(S, 0, 0);
    lua_settop(L, 0);
    return r;
}

int ember_run_file(ember_state *S, const char *path) {
    lua_State *L = S->L;
    if (luaL_loadfilex(L, path, S->opts.sandbox ? "t" : NULL) != LUA_OK) {
        set_err(S, lua_tostring(L, -1));
        lua_pop(L, 1);
        return -1;
    }
    int r = pcall_budget(S, 0, 0);
    lua_settop(L, 0);
    return r;
}

/* ---- tensors ---- */

/* A storage allocator that owns itself: freeing the storage calls the
 * host's deleter and then frees this block (ember_tensor_wrap). */
typedef struct {
    em_allocator base;
    void (*deleter)(void *data, void *ctx);
    void *ctx;
} host_allocator;

static void *host_alloc(const em_allocator *self, size_t nbytes) {
    (void)self, (void)nbytes;
    return NULL; /* never asked: the storage is made over host memory */
}

static void host_free(const em_allocator *self, void *ptr, size_t nbytes) {
    (void)nbytes;
    host_allocator *h = (host_allocator *)self;
    if (h->deleter) h->deleter(ptr, h->ctx);
    free(h);
}

ember_tensor *ember_tensor_wrap(void *data, ember_dtype dtype, int ndim, const int64_t *sizes, const int64_t *strides,
                                void (*deleter)(void *data, void *ctx), void *ctx) {
    if ((int)dtype < 0 || (int)dtype >= EM_DTYPE_COUNT) {
        em_set_error(EM_ETYPE, "ember_tensor_wrap: unknown dtype %d", (int)dtype);
        return NULL;
    }
    em_tensor *t = em_tensor_from_blob(data, ndim, sizes, strides, (em_dtype)dtype);
    if (!t || !deleter) return t;
    host_allocator *h = malloc(sizeof *h);
    if (!h) {
        em_tensor_release(t);
        em_set_error(EM_ENOMEM, "ember_tensor_wrap: out of memory");
        return NULL;
    }
    *h = (host_allocator){ { host_alloc, host_free, "host" }, deleter, ctx };
    if (t->storage->data) {
        t->storage->allocator = &h->base; /* Note: storage_release calls host_free */
    } else { /* no bytes (0 elements, NULL data): nothing will be freed */
        free(h);
        deleter(data, ctx);
    }
    return t;
}

ember_tensor *ember_tensor_zeros(ember_dtype dtype, int ndim, const int64_t *sizes) {
    if ((int)dtype < 0 || (int)dtype >= EM_DTYPE_COUNT || ndim < 0 || ndim > EM_MAX_DIMS) {
        em_set_error(EM_EVALUE, "ember_tensor_zeros: bad dtype %d or ndim %d", (int)dtype, ndim);
        return NULL;
    }
    return em_zeros((em_intlist){ sizes, ndim }, (em_dtype)dtype, em_cpu_device());
}

ember_tensor *ember_tensor_retain(ember_tensor *t) { return em_tensor_retain(t); }
void ember_tensor_release(ember_tensor *t) { em_tensor_release(t); }
ember_dtype ember_tensor_dtype(const ember_tensor *t) { return (ember_dtype)t->dtype; }
int ember_tensor_ndim(const ember_tensor *t) { return t->ndim; }
const int64_t *ember_tensor_sizes(const ember_tensor *t) { return t->sizes; }
const int64_t *ember_tensor_strides(const ember_tensor *t) { return t->strides; }
int64_t ember_tensor_numel(const ember_tensor *t) { return t->numel; }
void *ember_tensor_data(const ember_tensor *t) { return t->device.type == EM_CPU ? em_tensor_data(t) : NULL; }
ember_tensor *ember_tensor_grad(const ember_tensor *t) { return em_grad(t); }

int ember_backward(ember_tensor *y, ember_tensor *grad, int retain_graph) {
    if (!y) {
        em_set_error(EM_EVALUE, "ember_backward: NULL tensor");
        return -1;
    }
    em_backward_opts o = { retain_graph != 0, false, true, false };
    return em_backward(&y, &grad, 1, NULL, 0, NULL, &o) == EM_OK ? 0 : -1;
}

/* ---- globals and calls ---- */

/* Pushes the value at a dotted global path (nil when a part is missing). */
static void get_path(lua_State *L, const char *name) {
    lua_pushglobaltable(L);
    const char *p = name;
    for (;;) {
        const char *dot = strchr(p, '.');
        size_t n = dot ? (size_t)(dot - p) : strlen(p);
        if (!lua_istable(L, -1)) {
            lua_pop(L, 1);
            lua_pushnil(L);
            return;
        }
        lua_pushlstring(L, p, n);
        lua_gettable(L, -2);
        lua_remove(L, -2);
        if (!dot) return;
        p = dot + 1;
    }
}

/* Protected body of ember_set_global: (name, tensor lightuserdata). */
static int set_global_body(lua_State *L) {
    const char *name = lua_tostring(L, 1);
    em_tensor *t = lua_touserdata(L, 2);
    const char *dot = strrchr(name, '.');
    if (dot) {
        lua_pushlstring(L, name, (size_t)(dot - name));
        get_path(L, lua_tostring(L, -1));
        if (!lua_istable(L, -1)) return luaL_error(L, "ember_set_global: %s is not a table", lua_tostring(L, -2));
    } else {
        lua_pushglobaltable(L);
    }
    em_lua_push_tensor(L, em_tensor_retain(t), "ember_set_global");
    lua_setfield(L, -2, dot ? dot + 1 : name);
    return 0;
}

int ember_set_global(ember_state *S, const char *name, ember_tensor *t) {
    lua_State *L = S->L;
    if (!t || !name) {
        set_err(S, "ember_set_global: NULL name or tensor");
        return -1;
    }
    lua_pushcfunction(L, set_global_body);
    lua_pushstring(L, name);
    lua_pushlightuserdata(L, t);
    int st = lua_pcall(L, 2, 0, 0);
    if (st != LUA_OK) {
        set_err(S, lua_tostring(L, -1));
        lua_settop(L, 0);
        return -1;
    }
    set_err(S, NULL);
    return 0;
}

ember_tensor *ember_get_global(ember_state *S, const char *name) {
    lua_State *L = S->L;
    get_path(L, name);
    em_tensor *t = em_lua_totensor(L, -1);
    if (!t) {
        char msg[256];
        snprintf(msg, sizeof msg, "ember_get_global: %s is %s, not a tensor", name, luaL_typename(L, -1));
        set_err(S, msg);
        lua_pop(L, 1);
        return NULL;
    }
    em_tensor_retain(t);
    lua_pop(L, 1);
    set_err(S, NULL);
    return t;
}

/* Protected: pushes the in[] tensors as userdata (args: count, array). */
static int push_inputs(lua_State *L) {
    int n = (int)lua_tointeger(L, 1);
    ember_tensor *const *in = lua_touserdata(L, 2);
    lua_settop(L, 0);
    luaL_checkstack(L, n, "ember_call: too many arguments");
    for (int i = 0; i < n; i++) {
        if (!in[i]) return luaL_error(L, "ember_call: argument %d is NULL", i + 1);
        em_lua_push_tensor(L, em_tensor_retain(in[i]), "ember_call");
    }
    return n;
}

int ember_call(ember_state *S, const char *name, int nin, ember_tensor *const *in, int nout, ember_tensor **out) {
    lua_State *L = S->L;
    for (int i = 0; i < nout; i++) out[i] = NULL;
    lua_settop(L, 0);
    get_path(L, name);
    if (!lua_isfunction(L, 1) && !luaL_getmetafield(L, 1, "__call")) {
        char msg[256];
        snprintf(msg, sizeof msg, "ember_call: %s is %s, not a function", name, luaL_typename(L, 1));
        set_err(S, msg);
        lua_settop(L, 0);
        return -1;
    }
    lua_settop(L, 1);
    lua_pushcfunction(L, push_inputs);
    lua_pushinteger(L, nin);
    lua_pushlightuserdata(L, (void *)in);
    if (lua_pcall(L, 2, nin, 0) != LUA_OK) {
        set_err(S, lua_tostring(L, -1));
        lua_settop(L, 0);
        return -1;
    }
    if (pcall_budget(S, nin, nout) != 0) {
        lua_settop(L, 0);
        return -1;
    }
    for (int i = 0; i < nout; i++) {
        int idx = i + 1;
        em_tensor *t = em_lua_totensor(L, idx);
        if (t) {
            out[i] = em_tensor_retain(t);
        } else if (lua_isnumber(L, idx)) {
            em_scalar s = lua_isinteger(L, idx) ? em_scalar_int(lua_tointeger(L, idx))
                                                : em_scalar_float(lua_tonumber(L, idx));
            em_tensor *w = em_tensor_wrapped_scalar(s);
            out[i] = w ? em_to(w, lua_isinteger(L, idx) ? EM_INT64 : EM_FLOAT64) : NULL;
            em_tensor_release(w);
        } else if (!lua_isnil(L, idx)) {
            char msg[256];
            snprintf(msg, sizeof msg, "ember_call: result %d of %s is %s, not a tensor", idx, name,
                     luaL_typename(L, idx));
            set_err(S, msg);
            for (int j = 0; j < nout; j++) {
                em_tensor_release(out[j]);
                out[j] = NULL;
            }
            lua_settop(L, 0);
            return -1;
        }
    }
    lua_settop(L, 0);
    return 0;
}

/* ---- DLPack ---- */

typedef struct {
    DLManagedTensor m;
    em_tensor *t;
    int64_t shape[EM_MAX_DIMS], strides[EM_MAX_DIMS];
} dl_export;

static void dl_export_delete(DLManagedTensor *m) {
    dl_export *e = (dl_export *)m;
    em_tensor_release(e->t);
    free(e);
}

static const DLDataType dl_types[EM_DTYPE_COUNT] = {
    [EM_BOOL] = { kDLBool, 8, 1 },    [EM_UINT8] = { kDLUInt, 8, 1 },    [EM_INT8] = { kDLInt, 8, 1 },
    [EM_INT32] = { kDLInt, 32, 1 },   [EM_INT64] = { kDLInt, 64, 1 },    [EM_FLOAT16] = { kDLFloat, 16, 1 },
    [EM_BFLOAT16] = { kDLBfloat, 16, 1 }, [EM_FLOAT32] = { kDLFloat, 32, 1 }, [EM_FLOAT64] = { kDLFloat, 64, 1 },
};

DLManagedTensor *ember_to_dlpack(ember_tensor *t) {
    if (!t) {
        em_set_error(EM_EVALUE, "ember_to_dlpack: NULL tensor");
        return NULL;
    }
    if (t->device.type != EM_CPU) {
        em_set_error(EM_EDEVICE, "ember_to_dlpack: only cpu tensors are exported");
        return NULL;
    }
    dl_export *e = calloc(1, sizeof *e);
    if (!e) {
        em_set_error(EM_ENOMEM, "ember_to_dlpack: out of memory");
        return NULL;
    }
    e->t = em_tensor_retain(t);
    for (int i = 0; i < t->ndim; i++) {
        e->shape[i] = t->sizes[i];
        e->strides[i] = t->strides[i];
    }
    DLTensor *d = &e->m.dl_tensor;
    d->data = t->numel ? em_tensor_data(t) : NULL;
    d->device = (DLDevice){ kDLCPU, 0 };
    d->ndim = t->ndim;
    d->dtype = dl_types[t->dtype];
    d->shape = e->shape;
    d->strides = e->strides;
    d->byte_offset = 0;
    e->m.manager_ctx = e;
    e->m.deleter = dl_export_delete;
    return &e->m;
}

typedef struct {
    DLManagedTensorVersioned m;
    DLManagedTensor *legacy; /* the export it wraps (owns t) */
} dl_export_v;

static void dl_export_v_delete(DLManagedTensorVersioned *m) {
    dl_export_v *e = (dl_export_v *)m;
    e->legacy->deleter(e->legacy);
    free(e);
}

DLManagedTensorVersioned *ember_to_dlpack_versioned(ember_tensor *t) {
    DLManagedTensor *legacy = ember_to_dlpack(t);
    if (!legacy) return NULL;
    dl_export_v *e = calloc(1, sizeof *e);
    if (!e) {
        legacy->deleter(legacy);
        em_set_error(EM_ENOMEM, "ember_to_dlpack_versioned: out of memory");
        return NULL;
    }
    e->legacy = legacy;
    e->m.version = (DLPackVersion){ 1, 0 };
    e->m.manager_ctx = e;
    e->m.deleter = dl_export_v_delete;
    e->m.flags = 0;
    e->m.dl_tensor = legacy->dl_tensor; /* shape/strides point into the legacy export */
    return &e->m;
}

static void dl_import_v_delete(void *data, void *ctx) {
    (void)data;
    DLManagedTensorVersioned *m = ctx;
    if (m->deleter) m->deleter(m);
}

static ember_tensor *from_dltensor(const DLTensor *d, void (*del)(void *, void *), void *ctx, const char *who);

ember_tensor *ember_from_dlpack_versioned(DLManagedTensorVersioned *m) {
    if (!m) {
        em_set_error(EM_EVALUE, "ember_from_dlpack_versioned: NULL tensor");
        return NULL;
    }
    if (m->version.major != 1) {
        em_set_error(EM_EVALUE, "ember_from_dlpack_versioned: DLPack major version %u is not supported (1)",
                     (unsigned)m->version.major);
        return NULL;
    }
    if (m->flags & DLPACK_FLAG_BITMASK_READ_ONLY) {
        em_set_error(EM_EVALUE, "ember_from_dlpack_versioned: the tensor is read-only (ember tensors are writable)");
        return NULL;
    }
    return from_dltensor(&m->dl_tensor, dl_import_v_delete, m, "ember_from_dlpack_versioned");
}

static void dl_import_delete(void *data, void *ctx) {
    (void)data;
    DLManagedTensor *m = ctx;
    if (m->deleter) m->deleter(m);
}

ember_tensor *ember_from_dlpack(DLManagedTensor *m) {
    if (!m) {
        em_set_error(EM_EVALUE, "ember_from_dlpack: NULL tensor");
        return NULL;
    }
    return from_dltensor(&m->dl_tensor, dl_import_delete, m, "ember_from_dlpack");
}

/* A tensor over d's memory that calls del(data, ctx) at its end. */
static ember_tensor *from_dltensor(const DLTensor *d, void (*del)(void *, void *), void *ctx, const char *who) {
    if (d->device.device_type != kDLCPU && d->device.device_type != kDLCUDAHost) {
        em_set_error(EM_EDEVICE, "%s: device type %d is not supported (cpu only)", who, (int)d->device.device_type);
        return NULL;
    }
    if (d->ndim < 0 || d->ndim > EM_MAX_DIMS) {
        em_set_error(EM_EVALUE, "%s: ndim %d is out of range [0, %d]", who, (int)d->ndim, EM_MAX_DIMS);
        return NULL;
    }
    int dt = -1;
    for (int i = 0; i < EM_DTYPE_COUNT; i++)
        if (dl_types[i].code == d->dtype.code && dl_types[i].bits == d->dtype.bits && d->dtype.lanes == 1) dt = i;
    if (dt < 0) {
        em_set_error(EM_ETYPE, "%s: dtype code %d bits %d lanes %d is not supported", who, d->dtype.code,
                     d->dtype.bits, d->dtype.lanes);
        return NULL;
    }
    char *data = d->data ? (char *)d->data + d->byte_offset : NULL;
    return ember_tensor_wrap(data, (ember_dtype)dt, d->ndim, d->shape, d->strides, del, ctx);
}
