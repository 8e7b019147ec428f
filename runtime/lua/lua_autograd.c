/* lua_autograd.c -- the autograd API in Lua, its small parts and its
 * registration: tensor properties and methods (requires_grad, is_leaf,
 * grad, grad_fn, retains_grad, requires_grad_, detach, retain_grad), grad,
 * inference and anomaly modes (the raw switches behind the guards in
 * lua/stdlib/autograd.lua), autograd.differentiable_ops, and
 * em_lua_register_autograd, which installs these and the parts that live
 * in their own files (listed in em_lua_int.h): lua_callback.c,
 * lua_hooks.c, lua_node.c, lua_backward.c, lua_function.c.
 */
#include <stdlib.h>
#include <string.h>

#include "autograd/em_autograd.h"
#include "lua/em_lua_int.h"

/* ---- tensor properties and methods ---- */

int em_lua_tensor_property(lua_State *L, em_tensor *t, const char *k) {
    if (strcmp(k, "requires_grad") == 0) {
        lua_pushboolean(L, em_requires_grad(t));
    } else if (strcmp(k, "is_leaf") == 0) {
        lua_pushboolean(L, em_is_leaf(t));
    } else if (strcmp(k, "grad") == 0) {
        em_tensor *g = em_grad(t);
        if (g) em_lua_push_tensor(L, g, "grad");
        else lua_pushnil(L);
    } else if (strcmp(k, "grad_fn") == 0) {
        em_lua_push_node(L, em_grad_fn(t));
    } else if (strcmp(k, "grad_accumulator") == 0) {
        /* a leaf's AccumulateGrad node (the graph's edge into x.grad) */
        if (!em_is_leaf(t) || !em_requires_grad(t)) {
            lua_pushnil(L);
        } else {
            em_edge e = em_gradient_edge(t);
            em_lua_push_node(L, e.fn);
            em_node_release(e.fn);
        }
    } else if (strcmp(k, "retains_grad") == 0) {
        const em_ag_meta *m = t->autograd_meta;
        lua_pushboolean(L, m && m->retains_grad);
    } else {
        return 0;
    }
    return 1;
}

bool em_lua_set_tensor_property(lua_State *L, em_tensor *t, const char *k, int v) {
    if (strcmp(k, "requires_grad") == 0) {
        if (lua_type(L, v) != LUA_TBOOLEAN)
            em_lua_raise(L, "requires_grad: boolean expected, got %s", luaL_typename(L, v));
        if (em_set_requires_grad(t, lua_toboolean(L, v)) != EM_OK) em_lua_error(L, "requires_grad");
        return true;
    }
    if (strcmp(k, "grad") == 0) {
        em_tensor *g = NULL;
        if (!lua_isnil(L, v)) {
            g = em_lua_totensor(L, v);
            if (!g) em_lua_raise(L, "grad: tensor or nil expected, got %s", luaL_typename(L, v));
        }
        if (em_set_grad(t, g) != EM_OK) em_lua_error(L, "grad");
        return true;
    }
    return false;
}

static int m_requires_grad_(lua_State *L) {
    em_tensor *t = em_lua_checkself(L, 1, "requires_grad_");
    bool on = lua_isnoneornil(L, 2) ? true : em_lua_check_bool(L, 2, "requires_grad_", "requires_grad");
    if (em_set_requires_grad(t, on) != EM_OK) return em_lua_error(L, "requires_grad_");
    lua_settop(L, 1);
    return 1;
}

static int m_detach(lua_State *L) {
    em_tensor *t = em_lua_checkself(L, 1, "detach");
    em_lua_push_tensor(L, em_detach(t), "detach");
    return 1;
}

static int m_retain_grad(lua_State *L) {
    em_tensor *t = em_lua_checkself(L, 1, "retain_grad");
    if (em_retain_grad(t) != EM_OK) return em_lua_error(L, "retain_grad");
    return 0;
}

/* ember.autograd.formulas(node_name): {{input=, formula=}, ...} for each
 * Tensor argument of the op behind the node (formula nil: no gradient
 * flows there), as derivatives.yaml writes them; nil for a node without
 * formulas (AccumulateGrad, custom Functions, views' nodes are listed). */
static int l_formulas(lua_State *L) {
    const char *name = luaL_checkstring(L, 1);
    int n = 0;
    for (int i = 0; em_lua_formula_docs[i][0]; i++) {
        if (strcmp(em_lua_formula_docs[i][0], name) != 0) continue;
        if (n == 0) lua_newtable(L);
        lua_createtable(L, 0, 2);
        lua_pushstring(L, em_lua_formula_docs[i][1]);
        lua_setfield(L, -2, "input");
        if (em_lua_formula_docs[i][2]) {
            lua_pushstring(L, em_lua_formula_docs[i][2]);
            lua_setfield(L, -2, "formula");
        }
        lua_rawseti(L, -2, ++n);
    }
    if (n == 0) lua_pushnil(L);
    return 1;
}

static int l_differentiable_ops(lua_State *L) {
    lua_newtable(L);
    for (int i = 0; em_lua_differentiable_ops[i]; i++) {
        lua_pushstring(L, em_lua_differentiable_ops[i]);
        lua_rawseti(L, -2, i + 1);
    }
    return 1;
}

/* ---- grad modes and anomaly mode ---- */

static int l_is_grad_enabled(lua_State *L) {
    lua_pushboolean(L, em_is_grad_enabled());
    return 1;
}

static int l_is_inference_mode_enabled(lua_State *L) {
    lua_pushboolean(L, em_is_inference_mode());
    return 1;
}

static int l_is_anomaly_enabled(lua_State *L) {
    lua_pushboolean(L, em_is_anomaly_enabled());
    return 1;
}

/* _set_grad_enabled(b) -> previous; the guards in lua/stdlib/autograd.lua use these */
static int l_set_grad_raw(lua_State *L) {
    luaL_checktype(L, 1, LUA_TBOOLEAN);
    lua_pushboolean(L, em_set_grad_enabled(lua_toboolean(L, 1)));
    return 1;
}

static int l_set_inference_raw(lua_State *L) {
    luaL_checktype(L, 1, LUA_TBOOLEAN);
    lua_pushboolean(L, em_set_inference_mode(lua_toboolean(L, 1)));
    return 1;
}

static _Thread_local lua_State *anomaly_L;

static int traceback_body(lua_State *L) {
    char **out = lua_touserdata(L, 1);
    luaL_traceback(L, L, NULL, 2); /* skip this body: start at the binding */
    const char *s = lua_tostring(L, -1);
    *out = s ? strdup(s) : NULL;
    return 0;
}

/* The trace provider (see em_ag_set_trace_provider): the traceback of the
 * Lua thread that turned anomaly mode on in this OS thread. Nodes are made
 * by ops called from that thread's bindings, so its stack is the caller's. */
static char *anomaly_trace(void *ud) {
    (void)ud;
    lua_State *L = anomaly_L;
    if (!L || !lua_checkstack(L, 4)) return NULL;
    char *s = NULL;
    int top = lua_gettop(L);
    lua_pushcfunction(L, traceback_body);
    lua_pushlightuserdata(L, &s);
    if (lua_pcall(L, 1, 0, 0) != LUA_OK) s = NULL;
    lua_settop(L, top);
    return s;
}

static int l_set_anomaly_raw(lua_State *L) {
    luaL_checktype(L, 1, LUA_TBOOLEAN);
    bool on = lua_toboolean(L, 1);
    bool prev = em_set_anomaly_enabled(on);
    if (on) {
        anomaly_L = L;
        em_ag_set_trace_provider(anomaly_trace, NULL);
    } else {
        anomaly_L = NULL;
    }
    lua_pushboolean(L, prev);
    return 1;
}

/* ---- registration ---- */

void em_lua_register_autograd(lua_State *L, int mod, int methods) {
    static const luaL_Reg tensor_methods[] = {
        { "requires_grad_", m_requires_grad_ },
        { "detach", m_detach },
        { "retain_grad", m_retain_grad },
        { "backward", em_lua_tensor_backward },
        { "register_hook", em_lua_tensor_register_hook },
        { NULL, NULL }
    };
    static const luaL_Reg autograd_funcs[] = {
        { "grad", em_lua_autograd_grad },
        { "dot", em_lua_autograd_dot },
        { "differentiable_ops", l_differentiable_ops },
        { "formulas", l_formulas },
        { "is_anomaly_enabled", l_is_anomaly_enabled },
        { "_function_apply", em_lua_function_apply },
        { "_set_grad_enabled", l_set_grad_raw },
        { "_set_inference_mode", l_set_inference_raw },
        { "_set_anomaly_enabled", l_set_anomaly_raw },
        { NULL, NULL }
    };
    em_autograd_init();
    em_lua_open_nodes(L);
    em_lua_open_hooks(L);
    em_lua_open_function(L);
    em_lua_token_release(em_lua_token_get(L)); /* made now, so a closing state marks it dead */
    lua_pushvalue(L, methods);
    luaL_setfuncs(L, tensor_methods, 0);
    lua_pop(L, 1);
    lua_createtable(L, 0, 16);
    luaL_setfuncs(L, autograd_funcs, 0);
    lua_setfield(L, mod, "autograd");
    lua_pushcfunction(L, l_is_grad_enabled);
    lua_setfield(L, mod, "is_grad_enabled");
    lua_pushcfunction(L, l_is_inference_mode_enabled);
    lua_setfield(L, mod, "is_inference_mode_enabled");
}
