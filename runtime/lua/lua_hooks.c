/* lua_hooks.c -- hooks in Lua: tensor hooks (t:register_hook(fn)), node
 * hooks (y.grad_fn:register_hook(fn)) and their removable handles. Hook
 * code runs from the engine through em_lua_run_protected (Note [Lua
 * callbacks from the engine] in lua_callback.c).
 * (Split from lua_autograd.c; see the list of files in em_lua_int.h.)
 */
#include <stdlib.h>
#include <string.h>

#include "autograd/em_autograd.h"
#include "lua/em_lua_int.h"

#define HANDLE_MT "ember.HookHandle"

/* ---- node hooks ---- */

/* Pushes t (a new reference) or false for "no gradient". */
static void push_maybe_tensor(lua_State *L, em_tensor *t) {
    if (t) em_lua_push_tensor(L, em_tensor_retain(t), "autograd");
    else lua_pushboolean(L, 0);
}

/* Node hooks (Lua): fn(grad_inputs, grad_outputs) as PyTorch passes them:
 * grad_inputs are the gradients the node computed for its forward inputs,
 * grad_outputs the gradients it received. A returned table replaces the
 * grad_inputs given in it. */
typedef struct {
    em_lua_cb *cb;
    em_tensor **gin;  /* the node's results (next edges) */
    int n_gin;
    em_tensor **gout; /* the node's incoming gradients */
    int n_gout;
    em_node *node;
} node_hook_call;

/* A node hook's replacement t for gradient i of node (the gradient sent
 * along its next edge i) must have the shape, dtype and device that the
 * input at the other end expects (PyTorch: "hook has changed the size /
 * type of value"); raises otherwise. */
static void check_replacement(lua_State *L, em_node *node, int i, const em_tensor *t) {
    if (!node || i >= node->num_next || !node->next[i].fn) return;
    const em_node *to = node->next[i].fn;
    if (node->next[i].input_nr >= (uint32_t)to->num_inputs) return;
    const em_input_meta *m = &em_node_input_meta(to)[node->next[i].input_nr];
    if (t->ndim != m->ndim || memcmp(t->sizes, m->sizes, sizeof(int64_t) * (size_t)t->ndim) != 0) {
        char a[EM_SHAPE_STR_MAX], b[EM_SHAPE_STR_MAX];
        luaL_error(L, "node hook: gradient %d has shape %s but the input it flows to has shape %s", i + 1,
                   em_shape_str(t->ndim, t->sizes, a, sizeof a), em_shape_str(m->ndim, m->sizes, b, sizeof b));
    }
    if (t->dtype != m->dtype)
        luaL_error(L, "node hook: gradient %d has dtype %s but the input it flows to has dtype %s", i + 1,
                   em_dtype_name(t->dtype), em_dtype_name(m->dtype));
    if (!em_device_eq(t->device, m->device)) {
        char a[EM_DEVICE_STR_MAX], b[EM_DEVICE_STR_MAX];
        luaL_error(L, "node hook: gradient %d is on device %s but the input it flows to is on device %s", i + 1,
                   em_device_str(t->device, a, sizeof a), em_device_str(m->device, b, sizeof b));
    }
}

static int node_hook_body(lua_State *L) {
    node_hook_call *c = lua_touserdata(L, 1);
    lua_rawgeti(L, LUA_REGISTRYINDEX, c->cb->ref);
    lua_createtable(L, c->n_gin, 0);
    for (int i = 0; i < c->n_gin; i++) {
        push_maybe_tensor(L, c->gin[i]);
        lua_rawseti(L, -2, i + 1);
    }
    lua_createtable(L, c->n_gout, 0);
    for (int i = 0; i < c->n_gout; i++) {
        push_maybe_tensor(L, c->gout[i]);
        lua_rawseti(L, -2, i + 1);
    }
    lua_call(L, 2, 1);
    if (lua_isnil(L, -1)) return 0;
    if (!lua_istable(L, -1))
        return luaL_error(L, "node hook: must return nil or a table of gradients, got %s",
                          luaL_typename(L, -1));
    int res = lua_gettop(L);
    for (int i = 0; i < c->n_gin; i++) { /* validate first, then replace */
        lua_rawgeti(L, res, i + 1);
        if (!lua_isnil(L, -1) && lua_toboolean(L, -1) && !em_lua_totensor(L, -1))
            return luaL_error(L, "node hook: gradient %d: tensor, false or nil expected, got %s",
                              i + 1, luaL_typename(L, -1));
        em_tensor *t = em_lua_totensor(L, -1);
        if (t) check_replacement(L, c->node, i, t);
        lua_pop(L, 1);
    }
    for (int i = 0; i < c->n_gin; i++) {
        lua_rawgeti(L, res, i + 1);
        em_tensor *t = em_lua_totensor(L, -1);
        if (t) {
            em_tensor_release(c->gin[i]);
            c->gin[i] = em_tensor_retain(t);
        } else if (lua_type(L, -1) == LUA_TBOOLEAN) { /* false: no gradient */
            em_tensor_release(c->gin[i]);
            c->gin[i] = NULL;
        }
        lua_pop(L, 1);
    }
    return 0;
}

static em_status node_hook_cb(void *ud, em_node *node, em_tensor **grad_inputs, int n_in,
                              em_tensor **grad_outputs, int n_out) {
    /* the engine passes (incoming grads, num_inputs, results, num_next) */
    em_lua_cb *cb = ud;
    node_hook_call c = { cb, grad_outputs, n_out, grad_inputs, n_in, node };
    char what[96];
    snprintf(what, sizeof what, "%s hook", em_node_name(node));
    return em_lua_run_protected(cb->tok, node_hook_body, &c, what);
}

/* ---- hook handles ---- */

typedef struct {
    em_tensor *t; /* owned: a tensor hook's tensor */
    em_node *n;   /* owned: a node hook's node */
    int id;       /* 0 once removed */
} hook_handle;

static void push_handle(lua_State *L, em_tensor *t, em_node *n, int id) {
    hook_handle *h = lua_newuserdatauv(L, sizeof *h, 0);
    h->t = NULL;
    h->n = NULL;
    h->id = 0;
    luaL_setmetatable(L, HANDLE_MT);
    h->t = t ? em_tensor_retain(t) : NULL;
    if (n) em_node_retain(n);
    h->n = n;
    h->id = id;
}

static int handle_remove(lua_State *L) {
    hook_handle *h = luaL_checkudata(L, 1, HANDLE_MT);
    if (h->id) {
        int id = h->id;
        h->id = 0;
        if (h->t) em_remove_hook(h->t, id);
        else if (h->n) em_node_remove_hook(h->n, id);
        em_clear_error(); /* removing a hook twice (or one gone with its node) is fine */
    }
    em_lua_drain_unrefs(L);
    return 0;
}

static int handle_gc(lua_State *L) {
    hook_handle *h = luaL_checkudata(L, 1, HANDLE_MT);
    em_tensor_release(h->t);
    em_node_release(h->n);
    h->t = NULL;
    h->n = NULL;
    return 0;
}

static int handle_tostring(lua_State *L) {
    hook_handle *h = luaL_checkudata(L, 1, HANDLE_MT);
    lua_pushfstring(L, "<hook handle %d%s>", h->id, h->id ? "" : " (removed)");
    return 1;
}

static em_tensor *tensor_hook_cb(void *ud, em_tensor *grad);

int em_lua_register_hook(lua_State *L, em_tensor *t, em_node *n) {
    luaL_checktype(L, 2, LUA_TFUNCTION);
    em_lua_drain_unrefs(L);
    em_lua_cb *cb = em_lua_cb_new(L, 2);
    int id = t ? em_register_hook(t, tensor_hook_cb, cb, em_lua_cb_free)
               : em_node_register_hook(n, node_hook_cb, cb, em_lua_cb_free);
    if (id < 0) {
        em_lua_cb_free(cb);
        return em_lua_error(L, "register_hook");
    }
    push_handle(L, t, n, id);
    return 1;
}

/* ---- tensor hooks ---- */

typedef struct {
    em_lua_cb *cb;
    em_tensor *grad;   /* borrowed */
    em_tensor *result; /* out: a new reference or NULL */
} tensor_hook_call;

static int tensor_hook_body(lua_State *L) {
    tensor_hook_call *c = lua_touserdata(L, 1);
    lua_rawgeti(L, LUA_REGISTRYINDEX, c->cb->ref);
    em_lua_push_tensor(L, em_tensor_retain(c->grad), "hook");
    lua_call(L, 1, 1);
    if (lua_isnil(L, -1)) return 0;
    em_tensor *r = em_lua_totensor(L, -1);
    if (!r) return luaL_error(L, "hook: must return a tensor or nil, got %s", luaL_typename(L, -1));
    if (r->ndim != c->grad->ndim ||
        memcmp(r->sizes, c->grad->sizes, sizeof(int64_t) * (size_t)r->ndim) != 0) {
        char a[EM_SHAPE_STR_MAX], b[EM_SHAPE_STR_MAX];
        return luaL_error(L, "hook: returned a gradient of shape %s for a gradient of shape %s",
                          em_shape_str(r->ndim, r->sizes, a, sizeof a),
                          em_shape_str(c->grad->ndim, c->grad->sizes, b, sizeof b));
    }
    /* PyTorch: "hook 'hook' has changed the type of value" */
    if (r->dtype != c->grad->dtype)
        return luaL_error(L, "hook: returned a gradient of dtype %s for a gradient of dtype %s",
                          em_dtype_name(r->dtype), em_dtype_name(c->grad->dtype));
    if (!em_device_eq(r->device, c->grad->device)) {
        char a[EM_DEVICE_STR_MAX], b[EM_DEVICE_STR_MAX];
        return luaL_error(L, "hook: returned a gradient on device %s for a gradient on device %s",
                          em_device_str(r->device, a, sizeof a), em_device_str(c->grad->device, b, sizeof b));
    }
    c->result = em_tensor_retain(r);
    return 0;
}

static em_tensor *tensor_hook_cb(void *ud, em_tensor *grad) {
    tensor_hook_call c = { ud, grad, NULL };
    if (em_lua_run_protected(c.cb->tok, tensor_hook_body, &c, "hook") != EM_OK) {
        em_tensor_release(c.result);
        return NULL;
    }
    return c.result; /* NULL with the slot clear: unchanged */
}

int em_lua_tensor_register_hook(lua_State *L) {
    return em_lua_register_hook(L, em_lua_checkself(L, 1, "register_hook"), NULL);
}

void em_lua_open_hooks(lua_State *L) {
    static const luaL_Reg handle_meta[] = {
        { "__gc", handle_gc }, { "__tostring", handle_tostring }, { NULL, NULL }
    };
    if (luaL_newmetatable(L, HANDLE_MT)) {
        luaL_setfuncs(L, handle_meta, 0);
        lua_createtable(L, 0, 1);
        lua_pushcfunction(L, handle_remove);
        lua_setfield(L, -2, "remove");
        lua_setfield(L, -2, "__index");
    }
    lua_pop(L, 1);
}
