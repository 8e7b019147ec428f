/* lua_module.c -- luaopen_ember and the hand-written module functions:
 * ember.tensor, manual_seed, threads, memory_stats, is_tensor, help.
 *
 * The module is built once per lua_State and kept in the registry under
 * EM_LUA_MODULE_KEY, so `require "ember"`, the shell's global and a second
 * luaopen_ember all return the same table.
 */
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "lua/em_lua_int.h"
#include "autograd/em_autograd.h"
#include "em_ops.h"

/* ---- ember.tensor ---- */

enum { K_NONE = 0, K_BOOL, K_INT, K_FLOAT };

typedef struct {
    int ndim;
    int64_t sizes[EM_MAX_DIMS];
    int kind;           /* the widest element kind seen */
    int path[EM_MAX_DIMS];
    /* fill pass */
    char *data;
    em_dtype dtype;
    size_t esize;
    int64_t pos;
} nested;

static const char *path_str(const nested *nt, int depth, char *buf, size_t n) {
    size_t off = 0;
    buf[0] = '\0';
    for (int i = 0; i < depth && off < n; i++)
        off += (size_t)snprintf(buf + off, n - off, "[%d]", nt->path[i]);
    return buf;
}

/* Checks (fill == false) or writes (fill == true) the nested table at the
 * top of the stack, which sits at depth. Raises on ragged input naming the
 * position. */
static void walk(lua_State *L, nested *nt, int depth, bool fill) {
    char where[EM_MAX_DIMS * 24];
    int idx = lua_gettop(L);
    int64_t n = nt->sizes[depth];
    for (int64_t i = 1; i <= n; i++) {
        nt->path[depth] = (int)i;
        int tp = lua_rawgeti(L, idx, (lua_Integer)i);
        if (depth + 1 < nt->ndim) {
            if (tp != LUA_TTABLE)
                em_lua_raise(L, "tensor: ragged nested table at %s: expected a table of %I "
                                "elements, got %s", path_str(nt, depth + 1, where, sizeof where),
                             (lua_Integer)nt->sizes[depth + 1], luaL_typename(L, -1));
            lua_Unsigned m = lua_rawlen(L, -1);
            if ((int64_t)m != nt->sizes[depth + 1])
                em_lua_raise(L, "tensor: ragged nested table at %s: expected %I elements, got %I",
                             path_str(nt, depth + 1, where, sizeof where),
                             (lua_Integer)nt->sizes[depth + 1], (lua_Integer)m);
            walk(L, nt, depth + 1, fill);
        } else if (!fill) {
            if (tp == LUA_TNUMBER) {
                int k = lua_isinteger(L, -1) ? K_INT : K_FLOAT;
                if (k > nt->kind) nt->kind = k;
            } else if (tp == LUA_TBOOLEAN) {
                if (nt->kind < K_BOOL) nt->kind = K_BOOL;
            } else if (tp == LUA_TTABLE) {
                em_lua_raise(L, "tensor: ragged nested table at %s: expected a number, got a table",
                             path_str(nt, depth + 1, where, sizeof where));
            } else {
                em_lua_raise(L, "tensor: element %s is a %s (number or boolean expected)",
                             path_str(nt, depth + 1, where, sizeof where), luaL_typename(L, -1));
            }
        } else {
            char *p = nt->data + nt->pos++ * (int64_t)nt->esize;
            if (tp == LUA_TBOOLEAN)
                em_store_from_int64(p, nt->dtype, lua_toboolean(L, -1));
            else if (lua_isinteger(L, -1))
                em_store_from_int64(p, nt->dtype, (int64_t)lua_tointeger(L, -1));
            else
                em_store_from_double(p, nt->dtype, (double)lua_tonumber(L, -1));
        }
        lua_pop(L, 1);
    }
}

/* dtype from the options table at opt (EM_DTYPE_NONE when absent). */
static em_dtype opt_dtype(lua_State *L, int opt, const char *op) {
    if (!opt) return EM_DTYPE_NONE;
    em_dtype dt = EM_DTYPE_NONE;
    if (lua_getfield(L, opt, "dtype") != LUA_TNIL) {
        const char *s = lua_type(L, -1) == LUA_TSTRING ? lua_tostring(L, -1) : NULL;
        dt = s ? em_dtype_from_name(s) : EM_DTYPE_NONE;
        if (dt == EM_DTYPE_NONE)
            em_lua_raise(L, "bad option 'dtype' to '%s' (unknown dtype %s)", op,
                         s ? s : luaL_typename(L, -1));
    }
    lua_pop(L, 1);
    return dt;
}

static int tensor_make(lua_State *L) {
    static const char *const names[] = { "dtype", "device", "requires_grad", NULL };
    int opt = em_lua_options_index(L);
    if (opt == 1) opt = 0; /* ember.tensor({}) is data, not options */
    if (lua_gettop(L) > (opt ? 2 : 1))
        return em_lua_raise(L, "tensor: expected at most 2 arguments, got %d", lua_gettop(L));
    em_lua_check_option_names(L, opt, "tensor", names);
    em_dtype dt = opt_dtype(L, opt, "tensor");
    em_tensor *t;
    em_tensor **src = em_lua_toslot(L, 1);
    if (src) { /* a copy, optionally converted */
        if (!*src) return em_lua_raise(L, "tensor: tensor used after close");
        t = em_clone(*src);
        if (t && dt != EM_DTYPE_NONE && dt != t->dtype) {
            em_tensor *c = em_to(t, dt);
            em_tensor_release(t);
            t = c;
        }
        em_lua_push_tensor(L, t, "tensor");
        return 1;
    }
    int tp = lua_type(L, 1);
    if (tp == LUA_TNUMBER || tp == LUA_TBOOLEAN) {
        if (dt == EM_DTYPE_NONE)
            dt = tp == LUA_TBOOLEAN ? EM_BOOL : lua_isinteger(L, 1) ? EM_INT64 : EM_FLOAT32;
        t = em_tensor_new(0, NULL, dt, em_cpu_device());
        if (!t) return em_lua_error(L, "tensor");
        if (tp == LUA_TBOOLEAN)
            em_store_from_int64(em_tensor_data(t), dt, lua_toboolean(L, 1));
        else if (lua_isinteger(L, 1))
            em_store_from_int64(em_tensor_data(t), dt, (int64_t)lua_tointeger(L, 1));
        else
            em_store_from_double(em_tensor_data(t), dt, (double)lua_tonumber(L, 1));
        em_lua_push_tensor(L, t, "tensor");
        return 1;
    }
    if (tp != LUA_TTABLE)
        return em_lua_argerror(L, 1, "tensor", "data: table, number or boolean expected, got %s",
                               luaL_typename(L, 1));
    /* shape from the first elements, then check everything and find the kind */
    nested nt;
    memset(&nt, 0, sizeof nt);
    lua_pushvalue(L, 1);
    int base = lua_gettop(L);
    for (;;) {
        if (nt.ndim == EM_MAX_DIMS)
            return em_lua_raise(L, "tensor: nested tables deeper than %d dims", EM_MAX_DIMS);
        lua_Unsigned n = lua_rawlen(L, -1);
        nt.sizes[nt.ndim++] = (int64_t)n;
        if (n == 0 || lua_rawgeti(L, -1, 1) != LUA_TTABLE) break;
    }
    lua_settop(L, base);
    walk(L, &nt, 0, false);
    if (dt == EM_DTYPE_NONE)
        dt = nt.kind == K_FLOAT || nt.kind == K_NONE ? EM_FLOAT32
           : nt.kind == K_INT ? EM_INT64 : EM_BOOL;
    t = em_tensor_new(nt.ndim, nt.sizes, dt, em_cpu_device());
    if (!t) return em_lua_error(L, "tensor");
    nt.data = (char *)em_tensor_data(t);
    nt.dtype = dt;
    nt.esize = em_dtype_size(dt);
    em_lua_push_tensor(L, t, "tensor"); /* owned by Lua from here: errors cannot leak it */
    lua_pushvalue(L, 1);
    walk(L, &nt, 0, true);
    lua_pop(L, 1);
    return 1;
}

/* ember.tensor(data, {dtype=, device=, requires_grad=}): built on the cpu,
 * then moved to device. */
static int l_tensor(lua_State *L) {
    int opt = em_lua_options_index(L);
    bool requires_grad = false;
    em_device dev = em_no_device();
    if (opt > 1) {
        lua_getfield(L, opt, "device");
        dev = em_lua_check_device(L, lua_gettop(L), "tensor", "device");
        lua_pop(L, 1);
        int tp = lua_getfield(L, opt, "requires_grad");
        if (tp != LUA_TNIL && tp != LUA_TBOOLEAN)
            return em_lua_raise(L, "bad option 'requires_grad' to 'tensor' (boolean expected, got %s)",
                                luaL_typename(L, -1));
        requires_grad = lua_toboolean(L, -1);
        lua_pop(L, 1);
    }
    tensor_make(L);
    if (dev.type != EM_DEVICE_NONE && dev.type != EM_CPU) {
        em_tensor *t = em_lua_totensor(L, -1);
        em_lua_push_tensor(L, em_to_device(t, dev), "tensor");
    }
    if (requires_grad && em_set_requires_grad(em_lua_totensor(L, -1), true) != EM_OK)
        return em_lua_error(L, "tensor");
    return 1;
}

/* ---- runtime settings ---- */

static int l_set_num_threads(lua_State *L) {
    int64_t n = em_lua_check_int(L, 1, "set_num_threads", "n");
    if (n < 1 || n > 1024)
        return em_lua_argerror(L, 1, "set_num_threads", "n: expected 1..1024, got %I",
                               (lua_Integer)n);
    em_set_num_threads((int)n);
    return 0;
}

static int l_get_num_threads(lua_State *L) {
    lua_pushinteger(L, em_get_num_threads());
    return 1;
}

static int l_memory_stats(lua_State *L) {
    em_memory_stats st;
    em_memory_get_stats(&st);
    lua_createtable(L, 0, 5);
    lua_pushinteger(L, (lua_Integer)st.allocated);
    lua_setfield(L, -2, "allocated");
    lua_pushinteger(L, (lua_Integer)st.cached);
    lua_setfield(L, -2, "cached");
    lua_pushinteger(L, (lua_Integer)st.peak);
    lua_setfield(L, -2, "peak");
    lua_pushinteger(L, (lua_Integer)st.n_allocs);
    lua_setfield(L, -2, "n_allocs");
    lua_pushinteger(L, (lua_Integer)st.n_cache_hits);
    lua_setfield(L, -2, "n_cache_hits");
    return 1;
}

/* ember.set_memory_limit(bytes | nil): caps live cpu tensor memory
 * (em_memory_set_limit); nil or 0 removes the cap. Returns the old cap. */
static int l_set_memory_limit(lua_State *L) {
    size_t old = em_memory_get_limit();
    lua_Integer n = 0;
    if (!lua_isnoneornil(L, 1)) {
        n = em_lua_check_int(L, 1, "set_memory_limit", "bytes");
        if (n < 0) return em_lua_argerror(L, 1, "set_memory_limit", "bytes: expected >= 0, got %I", (LUAI_UACINT)n);
    }
    em_memory_set_limit((size_t)n);
    if (old) lua_pushinteger(L, (lua_Integer)old);
    else lua_pushnil(L);
    return 1;
}

static int l_get_memory_limit(lua_State *L) {
    size_t lim = em_memory_get_limit();
    if (lim) lua_pushinteger(L, (lua_Integer)lim);
    else lua_pushnil(L);
    return 1;
}

static int l_empty_cache(lua_State *L) {
    (void)L;
    em_memory_empty_cache();
    return 0;
}

static int l_is_tensor(lua_State *L) {
    lua_pushboolean(L, em_lua_toslot(L, 1) != NULL);
    return 1;
}

/* ---- help ---- */

/* Docs of the hand-written functions and methods: {name, call, doc}. */
static const char *const extra_docs[][3] = {
    { "tensor", "ember.tensor(data, {dtype=, device=})",
      "A tensor from a nested table, number or boolean (Lua integers give int64, any float "
      "float32, booleans bool), or a copy of a tensor." },
    { "manual_seed", "ember.manual_seed(n)",
      "Seeds the default random generator; returns it (ember.default_generator)." },
    { "seed", "ember.seed()", "Seeds the default generator from the OS; returns the seed." },
    { "initial_seed", "ember.initial_seed()", "The seed the default generator was last given." },
    { "Generator", "ember.Generator([seed])",
      "A random generator (Philox4x32-10, counter-based: a seed fixes every value whatever the "
      "thread count) for {generator=g} of the random ops: g:manual_seed(n) (returns g), "
      "g:seed(), g:initial_seed(), g:get_state() (an int64 tensor {seed, offset}), "
      "g:set_state(state)." },
    { "device", "ember.device(\"cuda:1\") / ember.device(\"cuda\", 1)",
      "A device object: prints as cpu or cuda:1, compares with ==, has .type and .index "
      "(0-based as in PyTorch, nil when absent). Factories take {device=...} (a string or a "
      "device); x.device is one." },
    { "to", "x:to(device [, dtype]) / x:to(dtype)",
      "x on device and/or converted to dtype; x itself when nothing changes." },
    { "cpu", "x:cpu()", "x on the cpu (x itself when it is there)." },
    { "set_num_threads", "ember.set_num_threads(n)",
      "Sets the threads of ember's pool and of OpenBLAS." },
    { "get_num_threads", "ember.get_num_threads()", "The number of intra-op threads." },
    { "memory_stats", "ember.memory_stats()",
      "A table with allocated, cached and peak bytes of the CPU allocator." },
    { "empty_cache", "ember.empty_cache()", "Returns cached memory blocks to the system." },
    { "is_tensor", "ember.is_tensor(v)", "true when v is an ember tensor." },
    { "set_memory_limit", "ember.set_memory_limit(bytes | nil) -> old",
      "Caps the bytes of live cpu tensors (the whole process): an op that would pass it raises "
      "\"out of memory allocating N bytes on cpu (M bytes in use; memory limit L)\" and the state "
      "stays usable. nil or 0 removes the cap." },
    { "get_memory_limit", "ember.get_memory_limit()", "The cap of set_memory_limit, or nil." },
    /* files (lua_serialize.c) */
    { "save", "ember.save(path, tensor | table of tensors, [{metadata={k=\"v\"}}])",
      "Writes a safetensors file (atomically: a temporary file renamed over path). Nested tables are "
      "stored under dotted names (\"fc.weight\") and rebuilt by ember.load." },
    { "load", "ember.load(path) -> tensor | table, metadata",
      "Reads a safetensors file (any tool's); checks every offset and size; returns what ember.save "
      "was given (a tensor, or a table, nested as saved) and the file's metadata table." },
    { "save_npy", "ember.save_npy(path, x)", "Writes x as a NumPy .npy file (format 1.0, little-endian, C order)." },
    { "load_npy", "ember.load_npy(path) -> tensor",
      "Reads a NumPy .npy file: format 1.0/2.0/3.0, C or Fortran order, either byte order." },
    { "savez", "ember.savez(path, {name = x, ...})", "Writes a NumPy .npz archive (stored members NAME.npy)." },
    { "savez_compressed", "ember.savez_compressed(path, {name = x, ...})", "Writes a NumPy .npz archive with deflated members." },
    { "load_npz", "ember.load_npz(path) -> {name = tensor}", "Reads a NumPy .npz archive (stored or deflated members, CRC-checked)." },
    { "help", "ember.help([name])", "Lists the ops, or prints one op's signature and doc." },
    { "item", "x:item()", "The value of a one-element tensor as a Lua number or boolean." },
    { "tolist", "x:tolist()", "The values as nested Lua tables." },
    { "numel", "x:numel()", "The number of elements." },
    { "dim", "x:dim()", "The number of dims." },
    { "size", "x:size([d])", "The sizes as a table, or the size of dim d." },
    { "stride", "x:stride([d])", "The strides (in elements) as a table, or of dim d." },
    { "type", "x:type([dtype])", "The dtype name; with a dtype, x converted to it (x itself when it has it)." },
    { "element_size", "x:element_size()", "The bytes of one element." },
    { "nbytes", "x:nbytes()", "The bytes of x's elements (numel * element_size)." },
    { "float", "x:float()", "Converted to float32 (also double half bfloat16 long int byte char bool)." },
    { "is_contiguous", "x:is_contiguous()", "true when the layout is row-major contiguous." },
    /* autograd */
    { "requires_grad_", "x:requires_grad_([on=true])",
      "Makes the leaf x record operations for autograd (or stop); returns x. Also the field "
      "x.requires_grad (get and set), and the option {requires_grad=true} of ember.tensor and "
      "the factories." },
    { "backward", "y:backward([grad], [{retain_graph=, create_graph=, inputs=}])",
      "Computes the gradient of y with respect to the graph leaves, accumulating into their .grad. "
      "grad may be left out only for a one-element y." },
    { "detach", "x:detach()", "A tensor sharing x's data without its history." },
    { "retain_grad", "x:retain_grad()", "Makes the non-leaf x keep its .grad in backward()." },
    { "register_hook", "x:register_hook(fn)",
      "Calls fn(grad) with x's gradient during backward; a returned tensor replaces it. Returns a "
      "handle with :remove(). Nodes (x.grad_fn) have register_hook(fn(grad_inputs, grad_outputs))." },
    { "is_grad_enabled", "ember.is_grad_enabled()", "true unless in no_grad or inference_mode." },
    { "is_inference_mode_enabled", "ember.is_inference_mode_enabled()",
      "true inside ember.inference_mode." },
    { "no_grad", "ember.no_grad([fn])",
      "Runs fn() without recording the graph and returns its results; without fn, a guard for "
      "`local g <close> = ember.no_grad()`." },
    { "enable_grad", "ember.enable_grad([fn])",
      "Turns recording back on inside no_grad (not inside inference_mode); fn or guard form." },
    { "inference_mode", "ember.inference_mode([fn])",
      "no_grad that enable_grad cannot undo; fn or guard form." },
    { "set_grad_enabled", "ember.set_grad_enabled(on, [fn])",
      "Sets grad mode (and returns a guard restoring the previous one), or runs fn with it." },
    { "autograd.grad", "ember.autograd.grad(outputs, inputs, {grad_outputs=, retain_graph=, "
      "create_graph=, allow_unused=})",
      "The gradients of outputs with respect to inputs, as a list (nil for an unused input with "
      "allow_unused); .grad is not touched." },
    { "autograd.Function", "ember.autograd.Function{name=, forward=fn(ctx, ...), backward=fn(ctx, ...)}",
      "A custom differentiable function F; call F(...) or F.apply(...). ctx:save_for_backward(...), "
      "ctx.saved_tensors, ctx.needs_input_grad; backward returns one gradient per argument." },
    { "autograd.gradcheck", "ember.autograd.gradcheck(fn, inputs, {eps=1e-6, atol=1e-5, rtol=1e-3, raise=true})",
      "Compares the analytic gradients of fn with central finite differences in float64." },
    { "autograd.gradgradcheck", "ember.autograd.gradgradcheck(fn, inputs, {...})",
      "gradcheck of the gradient of fn (second derivatives, through create_graph)." },
    { "autograd.detect_anomaly", "ember.autograd.detect_anomaly([fn])",
      "Anomaly mode (fn or guard form): backward errors name the forward op and its traceback, and "
      "NaN gradients are errors." },
    { "autograd.dot", "ember.autograd.dot(y, [{values=, grads=, inputs={name=tensor}}])",
      "The graph behind y as Graphviz DOT text; values/grads label it (grads after a traced backward)." },
    { "autograd.draw", "ember.autograd.draw(y, \"graph.svg\", [dot options])",
      "Renders the graph with Graphviz's dot (svg, png, pdf by the extension)." },
    { "autograd.trace", "ember.autograd.trace(y, [grad], [{retain_graph=}]) / y:backward{trace=true}",
      "Runs y's backward printing each node: the gradient it receives, its formulas and what it sends." },
    { "autograd.steps", "for s in ember.autograd.steps(y, [grad], [opts]) do print(s) end",
      "The traced backward of y, one node per step." },
    { "autograd.formulas", "ember.autograd.formulas(\"MulBackward\")",
      "The node's inputs and their formulas from derivatives.yaml: {{input=, formula=}, ...}." },
    { "autograd.differentiable_ops", "ember.autograd.differentiable_ops()",
      "The names of the ops that have a backward formula." },
    { "storage_offset", "x:storage_offset()", "The offset into the storage, in elements." },
    { "set_printoptions", "ember.set_printoptions{precision=4, threshold=1000, edgeitems=3, linewidth=80, "
      "sci_mode=\"auto\", profile=}",
      "How tensors print (this Lua state), as PyTorch's: digits, the element count past which "
      "tensors are summarised, the items kept at each edge, the line width, scientific notation "
      "(true, false or \"auto\"); profile \"default\", \"short\" or \"full\" resets them first." },
    { "get_printoptions", "ember.get_printoptions()", "The print options as a table." },
    { "perf_counter", "ember.perf_counter()",
      "Seconds of a monotonic wall clock (differences only), for timing." },
    { "time", "ember.time(fn, ...)",
      "Calls fn(...), prints its wall time (\"time: 1.23 ms\") and returns fn's results." },
    { NULL, NULL, NULL }
};

/* Writes the string on the stack top (popped) through io.write when the
 * io library is open -- so io.output() redirects it -- else to stdout. */
static void emit(lua_State *L) {
    int text = lua_gettop(L);
    if (lua_getglobal(L, "io") == LUA_TTABLE && lua_getfield(L, -1, "write") == LUA_TFUNCTION) {
        lua_pushvalue(L, text);
        lua_call(L, 1, 0);
        lua_settop(L, text - 1);
        return;
    }
    lua_settop(L, text);
    size_t n;
    const char *s = lua_tolstring(L, -1, &n);
    fwrite(s, 1, n, stdout);
    fflush(stdout);
    lua_pop(L, 1);
}

/* Pushes "path.key" when the table at tbl (itself reached by path, "" at
 * the top) or a table below it, depth levels deep, holds the value at idx
 * under a string key; returns whether it did. Tensor methods come first
 * at the top level, so x.sum finds "sum". */
static bool find_function(lua_State *L, int idx, int tbl, const char *path, int depth) {
    lua_pushnil(L);
    while (lua_next(L, tbl)) {
        if (lua_type(L, -2) == LUA_TSTRING && lua_rawequal(L, -1, idx)) {
            lua_pushfstring(L, "%s%s%s", path, *path ? "." : "", lua_tostring(L, -2));
            lua_replace(L, -3);
            lua_pop(L, 1);
            return true;
        }
        lua_pop(L, 1);
    }
    if (depth == 0) return false;
    lua_pushnil(L);
    while (lua_next(L, tbl)) {
        if (lua_type(L, -2) == LUA_TSTRING && lua_type(L, -1) == LUA_TTABLE && lua_tostring(L, -2)[0] != '_') {
            const char *sub = lua_pushfstring(L, "%s%s%s", path, *path ? "." : "", lua_tostring(L, -2));
            if (find_function(L, idx, lua_gettop(L) - 1, sub, depth - 1)) {
                lua_replace(L, -4); /* the name over the key */
                lua_pop(L, 2);
                return true;
            }
            lua_pop(L, 1);
        }
        lua_pop(L, 1);
    }
    return false;
}

/* The name of the function at idx: its key in the tensor methods or the
 * module, or "autograd.grad" / "nn.functional.linear" for one in a table
 * of the module (two levels deep). The string is left on the stack. */
static const char *function_name(lua_State *L, int idx) {
    lua_getfield(L, LUA_REGISTRYINDEX, EM_LUA_METHODS_KEY);
    bool found = find_function(L, idx, lua_gettop(L), "", 0);
    lua_remove(L, found ? -2 : -1);
    if (found) return lua_tostring(L, -1);
    lua_getfield(L, LUA_REGISTRYINDEX, EM_LUA_MODULE_KEY);
    found = find_function(L, idx, lua_gettop(L), "", 2);
    lua_remove(L, found ? -2 : -1);
    return found ? lua_tostring(L, -1) : NULL;
}

static int l_help(lua_State *L) {
    luaL_Buffer b;
    if (lua_isnoneornil(L, 1)) {
        luaL_buffinit(L, &b);
        luaL_addstring(&b, "ember ops (ember.help(\"name\") shows one):\n");
        int col = 0;
        for (int i = 0; em_lua_op_docs[i][0]; i++) {
            bool seen = false; /* overloads share a name: list it once */
            for (int j = 0; j < i && !seen; j++) seen = strcmp(em_lua_op_docs[j][0], em_lua_op_docs[i][0]) == 0;
            if (seen) continue;
            int w = (int)strlen(em_lua_op_docs[i][0]);
            if (col && col + 1 + w > 78) { luaL_addchar(&b, '\n'); col = 0; }
            luaL_addstring(&b, col ? " " : "  ");
            luaL_addstring(&b, em_lua_op_docs[i][0]);
            col += (col ? 1 : 2) + w;
        }
        luaL_addstring(&b, "\nmore:");
        for (int i = 0; extra_docs[i][0]; i++) {
            luaL_addchar(&b, ' ');
            luaL_addstring(&b, extra_docs[i][0]);
        }
        luaL_addchar(&b, '\n');
        luaL_pushresult(&b);
        emit(L);
        return 0;
    }
    const char *name = NULL;
    if (lua_type(L, 1) == LUA_TSTRING) name = lua_tostring(L, 1);
    else if (lua_type(L, 1) == LUA_TFUNCTION) name = function_name(L, 1);
    if (!name)
        return em_lua_argerror(L, 1, "help", "name: op name or ember function expected, got %s",
                               luaL_typename(L, 1));
    int found = 0; /* every overload of the name */
    for (int i = 0; em_lua_op_docs[i][0]; i++) found += strcmp(em_lua_op_docs[i][0], name) == 0;
    const char *dot = strrchr(name, '.');
    if (!found && dot) { /* "nn.functional.linear": the op's name */
        bool extra = false;
        for (int i = 0; extra_docs[i][0]; i++) extra |= strcmp(extra_docs[i][0], name) == 0;
        if (!extra) name = dot + 1;
        for (int i = 0; em_lua_op_docs[i][0]; i++) found += strcmp(em_lua_op_docs[i][0], name) == 0;
    }
    if (found) {
        luaL_buffinit(L, &b);
        for (int i = 0; em_lua_op_docs[i][0]; i++) {
            if (strcmp(em_lua_op_docs[i][0], name) != 0) continue;
            lua_pushfstring(L, "%s\n  %s\n", em_lua_op_docs[i][1], em_lua_op_docs[i][2]);
            luaL_addvalue(&b);
        }
        luaL_pushresult(&b);
        emit(L);
        return 0;
    }
    for (int i = 0; extra_docs[i][0]; i++) {
        if (strcmp(extra_docs[i][0], name) == 0) {
            lua_pushfstring(L, "%s\n  %s\n", extra_docs[i][1], extra_docs[i][2]);
            emit(L);
            return 0;
        }
    }
    return em_lua_raise(L, "help: no op named '%s'", name);
}

/* ember.perf_counter(): seconds of a monotonic wall clock (for timing;
 * only differences mean anything), as Python's time.perf_counter. */
static int l_perf_counter(lua_State *L) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    lua_pushnumber(L, (lua_Number)ts.tv_sec + (lua_Number)ts.tv_nsec * 1e-9);
    return 1;
}

/* ---- the module ---- */

/* Note [Stdlib modules]
 * Each embedded chunk lua/stdlib/NAME.lua is the module "ember.NAME": its
 * loader sits in package.preload (the registry's _PRELOAD table), and a
 * chunk names what it needs with require ("ember", "ember.autograd", ...),
 * so modules load in dependency order whatever their file names. The
 * loader runs the chunk with (modname, extra) like any Lua loader; what the
 * chunk returns is package.loaded's value and, when the name is free, the
 * module field ember.NAME. luaopen_ember puts the module in package.loaded
 * first and then requires every chunk (alphabetically; a chunk already
 * loaded as a dependency is not run twice). */

/* The preload loader of stdlib chunk upvalue(1) (an index into em_lua_stdlib). */
static int stdlib_loader(lua_State *L) {
    const em_lua_chunk *c = &em_lua_stdlib[lua_tointeger(L, lua_upvalueindex(1))];
    lua_pushfstring(L, "@lua/stdlib/%s.lua", c->name);
    if (luaL_loadbuffer(L, c->src, c->len, lua_tostring(L, -1)) != LUA_OK) return lua_error(L);
    lua_insert(L, 1);
    lua_settop(L, 3); /* chunk, modname, extra */
    lua_call(L, 2, 1);
    return 1;
}

/* require(name) without the package library's globals: _LOADED[name], or
 * run _PRELOAD[name] and store its result (true for nil). Leaves the
 * module on the stack. */
static void require_preloaded(lua_State *L, const char *name) {
    luaL_getsubtable(L, LUA_REGISTRYINDEX, LUA_LOADED_TABLE);
    if (lua_getfield(L, -1, name) != LUA_TNIL) {
        lua_remove(L, -2);
        return;
    }
    lua_pop(L, 1);
    luaL_getsubtable(L, LUA_REGISTRYINDEX, LUA_PRELOAD_TABLE);
    lua_getfield(L, -1, name);
    lua_remove(L, -2);
    lua_pushstring(L, name);
    lua_pushliteral(L, ":preload:");
    lua_call(L, 2, 1);
    if (lua_isnil(L, -1)) {
        lua_pop(L, 1);
        lua_pushboolean(L, 1);
    }
    lua_pushvalue(L, -1);
    lua_setfield(L, -3, name);
    lua_remove(L, -2);
}

/* Registers the stdlib loaders and loads them (Note [Stdlib modules]).
 * Errors propagate: a broken stdlib is a bug. */
static void run_stdlib(lua_State *L, int mod) {
    luaL_getsubtable(L, LUA_REGISTRYINDEX, LUA_LOADED_TABLE);
    lua_pushvalue(L, mod);
    lua_setfield(L, -2, "ember");
    lua_pop(L, 1);
    luaL_getsubtable(L, LUA_REGISTRYINDEX, LUA_PRELOAD_TABLE);
    for (int i = 0; em_lua_stdlib[i].name; i++) {
        lua_pushinteger(L, i);
        lua_pushcclosure(L, stdlib_loader, 1);
        lua_pushfstring(L, "ember.%s", em_lua_stdlib[i].name);
        lua_insert(L, -2);
        lua_settable(L, -3);
    }
    lua_pop(L, 1);
    for (int i = 0; em_lua_stdlib[i].name; i++) {
        const char *name = em_lua_stdlib[i].name;
        lua_pushfstring(L, "ember.%s", name);
        require_preloaded(L, lua_tostring(L, -1));
        if (lua_istable(L, -1)) {
            bool taken = lua_getfield(L, mod, name) != LUA_TNIL;
            lua_pop(L, 1);
            if (!taken) lua_setfield(L, mod, name); /* pops the module */
        }
        lua_settop(L, mod);
    }
}

int luaopen_ember(lua_State *L) {
    static const luaL_Reg funcs[] = {
        { "tensor", l_tensor },
        { "set_num_threads", l_set_num_threads },
        { "get_num_threads", l_get_num_threads },
        { "memory_stats", l_memory_stats },
        { "empty_cache", l_empty_cache },
        { "set_memory_limit", l_set_memory_limit },
        { "get_memory_limit", l_get_memory_limit },
        { "is_tensor", l_is_tensor },
        { "help", l_help },
        { "set_printoptions", em_lua_set_printoptions },
        { "get_printoptions", em_lua_get_printoptions },
        { "perf_counter", l_perf_counter },
        { NULL, NULL }
    };
    if (lua_getfield(L, LUA_REGISTRYINDEX, EM_LUA_MODULE_KEY) == LUA_TTABLE) return 1;
    lua_pop(L, 1);
    lua_createtable(L, 0, 96);
    int mod = lua_gettop(L);
    lua_createtable(L, 0, 96);
    int methods = lua_gettop(L);
    em_lua_open_tensor(L, methods); /* first: the bindings take its metatable (Note [Binding upvalue]) */
    em_lua_register_ops(L, mod, methods);
    em_lua_register_methods(L, methods);
    em_lua_register_autograd(L, mod, methods);
    em_lua_register_devices(L, mod, methods);
    em_lua_register_serialize(L, mod);
    lua_pushvalue(L, mod);
    luaL_setfuncs(L, funcs, 0);
    lua_pop(L, 1);
    for (int i = 0; i < EM_DTYPE_COUNT; i++) {
        lua_pushstring(L, em_dtype_name((em_dtype)i));
        lua_setfield(L, mod, em_dtype_name((em_dtype)i));
    }
    lua_pushliteral(L, EM_VERSION_STRING);
    lua_setfield(L, mod, "__version");
    lua_pushvalue(L, methods);
    lua_setfield(L, mod, "Tensor");
    lua_pushvalue(L, methods);
    lua_setfield(L, LUA_REGISTRYINDEX, EM_LUA_METHODS_KEY);
    lua_pushvalue(L, mod);
    lua_setfield(L, LUA_REGISTRYINDEX, EM_LUA_MODULE_KEY);
    /* require "ember" works in any host that opened the package library */
    if (lua_getfield(L, LUA_REGISTRYINDEX, LUA_PRELOAD_TABLE) == LUA_TTABLE &&
        lua_getfield(L, -1, "ember") == LUA_TNIL) {
        lua_pushcfunction(L, luaopen_ember);
        lua_setfield(L, -3, "ember");
    }
    lua_settop(L, mod);
    run_stdlib(L, mod);
    /* Note [Generational collector]: tensors are many short-lived userdata
     * with finalizers; Lua's incremental mode lets thousands pile up and
     * costs ~3x per op on a 1-element add. The generational mode (the
     * default of stock lua.c) frees them young. */
    lua_gc(L, LUA_GCGEN, 0, 0);
    return 1;
}
