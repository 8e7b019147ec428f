/* lua_backward.c -- the entry points into the backward engine from Lua:
 * y:backward(...), ember.autograd.grad(...) and ember.autograd.dot(...),
 * with their argument and option checks. Each runs em_backward with its
 * lua_State as the thread's callback state (Note [Lua callbacks from the
 * engine] in lua_callback.c).
 * (Split from lua_autograd.c; see the list of files in em_lua_int.h.)
 */
#include <stdlib.h>
#include <string.h>

#include "autograd/em_autograd.h"
#include "lua/em_lua_int.h"
#include "em_ops.h"

static bool opt_bool(lua_State *L, int opt, const char *key, bool dflt, const char *op) {
    if (!opt) return dflt;
    bool r = dflt;
    int tp = lua_getfield(L, opt, key);
    if (tp == LUA_TBOOLEAN) r = lua_toboolean(L, -1);
    else if (tp != LUA_TNIL)
        em_lua_raise(L, "bad option '%s' to '%s' (boolean expected, got %s)", key, op,
                     luaL_typename(L, -1));
    lua_pop(L, 1);
    return r;
}

/* Collects the tensors of the list (or single tensor) at idx into a new
 * scratch array (a userdata left on the stack; pointers borrowed from the
 * list, which the caller keeps on the stack). holes: nil/false entries up
 * to n_expected give NULL. Returns the count. */
static int collect_tensors(lua_State *L, int idx, const char *op, const char *what,
                           em_tensor ***out, bool holes, int n_expected) {
    idx = lua_absindex(L, idx);
    em_tensor *single = em_lua_totensor(L, idx);
    if (single) {
        em_tensor **a = lua_newuserdatauv(L, sizeof *a, 0);
        a[0] = single;
        *out = a;
        return 1;
    }
    if (em_lua_toslot(L, idx)) em_lua_raise(L, "%s: %s: tensor used after close", op, what);
    if (!lua_istable(L, idx))
        em_lua_raise(L, "%s: %s: a tensor or a list of tensors expected, got %s", op, what,
                     luaL_typename(L, idx));
    int n = (int)lua_rawlen(L, idx);
    if (holes && n > n_expected) {
        *out = NULL;
        return n; /* the caller reports the count mismatch */
    }
    if (holes) n = n_expected;
    if (n > 1000000) em_lua_raise(L, "%s: %s: too many tensors", op, what);
    em_tensor **a = lua_newuserdatauv(L, sizeof *a * (size_t)(n ? n : 1), 0);
    for (int i = 0; i < n; i++) {
        lua_rawgeti(L, idx, i + 1);
        em_tensor *t = em_lua_totensor(L, -1);
        if (!t && !(holes && !lua_toboolean(L, -1)))
            em_lua_raise(L, "%s: %s[%d]: tensor expected, got %s", op, what, i + 1,
                         luaL_typename(L, -1));
        a[i] = t;
        lua_pop(L, 1);
    }
    *out = a;
    return n;
}

/* Runs em_backward with L as this thread's callback state (Note [Lua
 * callbacks from the engine]), then drains the unrefs it queued. */
static em_status run_backward(lua_State *L, em_tensor **roots, em_tensor **grads, int n_roots,
                              em_tensor **inputs, int n_inputs, em_tensor **out,
                              const em_backward_opts *o) {
    lua_State *prev_L = em_lua_set_callback_state(L);
    em_status st = em_backward(roots, grads, n_roots, inputs, n_inputs, out, o);
    em_lua_set_callback_state(prev_L);
    em_lua_drain_unrefs(L);
    return st;
}

/* y:backward([grad], [{retain_graph=, create_graph=, inputs=, trace=}]) or
 * y:backward(opts); trace = true runs ember.teach.trace (lua/stdlib/teach.lua). */
int em_lua_tensor_backward(lua_State *L) {
    static const char *const names[] = { "retain_graph", "create_graph", "inputs", "trace", NULL };
    em_tensor *y = em_lua_checkself(L, 1, "backward");
    em_lua_drain_unrefs(L);
    int opt = 0;
    em_tensor *g = NULL;
    if (lua_gettop(L) >= 2 && !lua_isnil(L, 2)) {
        g = em_lua_totensor(L, 2);
        if (!g) {
            if (lua_istable(L, 2) && !em_lua_toslot(L, 2) && lua_gettop(L) == 2) opt = 2;
            else if (lua_type(L, 2) == LUA_TNUMBER) {
                lua_settop(L, 3);
                em_tensor *w = em_lua_wrap_number(L, 2);
                if (!w) return em_lua_error(L, "backward");
                em_lua_push_tensor(L, w, "backward");
                lua_replace(L, 2);
                g = em_lua_totensor(L, 2);
            } else {
                return em_lua_argerror(L, 2, "backward", "gradient: tensor expected, got %s",
                                       luaL_typename(L, 2));
            }
        }
    }
    if (!opt && lua_gettop(L) >= 3 && !lua_isnil(L, 3)) {
        if (!lua_istable(L, 3) || em_lua_toslot(L, 3))
            return em_lua_argerror(L, 3, "backward", "options: table expected, got %s",
                                   luaL_typename(L, 3));
        opt = 3;
    }
    em_lua_check_option_names(L, opt, "backward", names);
    em_backward_opts o = { false, false, true, false };
    o.create_graph = opt_bool(L, opt, "create_graph", false, "backward");
    o.retain_graph = opt_bool(L, opt, "retain_graph", o.create_graph, "backward");
    if (opt_bool(L, opt, "trace", false, "backward")) {
        lua_getfield(L, LUA_REGISTRYINDEX, LUA_LOADED_TABLE);
        if (lua_getfield(L, -1, "ember.teach") != LUA_TTABLE || lua_getfield(L, -1, "trace") != LUA_TFUNCTION)
            return em_lua_raise(L, "backward: trace needs the module ember.teach");
        lua_pushvalue(L, 1);
        if (g) lua_pushvalue(L, 2);
        else lua_pushnil(L);
        lua_createtable(L, 0, 1);
        lua_pushboolean(L, o.retain_graph);
        lua_setfield(L, -2, "retain_graph");
        lua_call(L, 3, 0);
        return 0;
    }
    em_tensor **inputs = NULL;
    int n_inputs = 0;
    if (opt && lua_getfield(L, opt, "inputs") != LUA_TNIL) {
        n_inputs = collect_tensors(L, -1, "backward", "inputs", &inputs, false, 0);
        if (n_inputs == 0) return em_lua_raise(L, "backward: inputs: the list is empty");
    }
    if (g && g->ndim == 0 && y->ndim > 0 && y->numel == 1) { /* a number for a 1-element y */
        em_tensor *r = em_reshape(g, (em_intlist){ y->sizes, y->ndim });
        if (!r) return em_lua_error(L, "backward");
        em_lua_push_tensor(L, r, "backward");
        g = r;
    }
    if (g && g->dtype != y->dtype && em_dtype_is_floating(y->dtype) && !em_requires_grad(g)) {
        em_tensor *c = em_to(g, y->dtype);
        if (!c) return em_lua_error(L, "backward");
        em_lua_push_tensor(L, c, "backward");
        g = c;
    }
    em_tensor *gs[1] = { g };
    if (run_backward(L, &y, gs, 1, inputs, n_inputs, NULL, &o) != EM_OK)
        return em_lua_error(L, "backward");
    return 0;
}

/* ember.autograd.grad(outputs, inputs, {grad_outputs=, retain_graph=, create_graph=, allow_unused=}) */
int em_lua_autograd_grad(lua_State *L) {
    static const char *const names[] = { "grad_outputs", "retain_graph", "create_graph",
                                         "allow_unused", NULL };
    em_lua_drain_unrefs(L);
    int opt = lua_gettop(L) >= 3 ? 3 : 0;
    if (opt && lua_isnil(L, 3)) opt = 0;
    if (opt && (!lua_istable(L, 3) || em_lua_toslot(L, 3)))
        return em_lua_argerror(L, 3, "autograd.grad", "options: table expected, got %s",
                               luaL_typename(L, 3));
    em_lua_check_option_names(L, opt, "autograd.grad", names);
    em_tensor **outs = NULL, **ins = NULL, **gos = NULL;
    int n_out = collect_tensors(L, 1, "autograd.grad", "outputs", &outs, false, 0);
    int n_in = collect_tensors(L, 2, "autograd.grad", "inputs", &ins, false, 0);
    if (n_out == 0) return em_lua_raise(L, "autograd.grad: outputs: the list is empty");
    if (n_in == 0) return em_lua_raise(L, "autograd.grad: inputs: the list is empty");
    if (opt && lua_getfield(L, opt, "grad_outputs") != LUA_TNIL) {
        bool single = em_lua_totensor(L, -1) != NULL;
        int n = collect_tensors(L, -1, "autograd.grad", "grad_outputs", &gos, !single, n_out);
        if (n != n_out)
            return em_lua_raise(L, "autograd.grad: %d grad_outputs for %d outputs", n, n_out);
    }
    em_backward_opts o = { false, false, false, false };
    o.create_graph = opt_bool(L, opt, "create_graph", false, "autograd.grad");
    o.retain_graph = opt_bool(L, opt, "retain_graph", o.create_graph, "autograd.grad");
    o.allow_unused = opt_bool(L, opt, "allow_unused", false, "autograd.grad");
    em_tensor **res = lua_newuserdatauv(L, sizeof *res * (size_t)n_in, 0);
    memset(res, 0, sizeof *res * (size_t)n_in);
    if (run_backward(L, outs, gos, n_out, ins, n_in, res, &o) != EM_OK)
        return em_lua_error(L, "autograd.grad");
    lua_createtable(L, n_in, 0);
    int tbl = lua_gettop(L);
    for (int i = 0; i < n_in; i++) { /* hand every reference to Lua before anything can fail */
        if (!res[i]) continue;
        em_tensor *r = res[i];
        res[i] = NULL;
        em_lua_push_tensor(L, r, "autograd.grad");
        lua_rawseti(L, tbl, i + 1);
    }
    return 1;
}

int em_lua_autograd_dot(lua_State *L) {
    em_tensor **roots = NULL;
    int n = collect_tensors(L, 1, "autograd.dot", "outputs", &roots, false, 0);
    char *s = em_autograd_dot(roots, n);
    if (!s) return em_lua_error(L, "autograd.dot");
    lua_pushstring(L, s);
    free(s);
    return 1;
}
