/* lua_autograd.c -- the autograd API in Lua: tensor properties and methods
 * (requires_grad, grad, grad_fn, backward, hooks), graph nodes as userdata,
 * ember.autograd.grad, custom Functions, grad modes, anomaly traces, dot.
 *
 * Note [Lua callbacks from the engine]
 * Hooks and custom Functions are C callbacks whose ud holds registry refs.
 * The engine runs such nodes (owner_thread) on the thread that called
 * em_backward, which for them is always a Lua binding (backward, grad) that
 * records its lua_State in the thread-local cur_L; a callback runs its Lua
 * code under lua_pcall of a C body on cur_L, so no Lua error ever unwinds
 * through engine frames: an error becomes the backward's error (message
 * kept). A callback with no cur_L (a backward started from C) fails.
 *
 * Note [Deferred unref]
 * A callback's ud may be freed (free_ud) wherever the last reference to its
 * node or tensor goes, in principle on a thread that does not own the Lua
 * state. free_ud therefore never touches Lua: it queues its refs on a
 * mutex-protected pending list, which the Lua thread drains at the next
 * binding call (em_lua_push_tensor, backward, grad, register_hook). A ref
 * belongs to a state token; a closed state marks its token dead, and refs
 * of a dead state are dropped without touching Lua.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "autograd/em_autograd.h"
#include "lua/em_lua_int.h"
#include "em_ops.h"

#define NODE_MT "ember.Node"
#define HANDLE_MT "ember.HookHandle"
#define CTX_MT "ember.FunctionCtx"
#define TOKEN_KEY "ember.StateToken"

/* ---- state tokens and deferred unrefs (Note [Deferred unref]) ---- */

typedef struct {
    atomic_int refs;
    atomic_bool alive;
} state_token;

typedef struct {
    state_token *tok;
    int ref;
} pending_ref;

static pthread_mutex_t pending_lock = PTHREAD_MUTEX_INITIALIZER;
static pending_ref *pending;
static size_t pending_n, pending_cap;
atomic_int em_lua_pending_count;

static void token_release(state_token *tok) {
    if (tok && atomic_fetch_sub(&tok->refs, 1) == 1) free(tok);
}

static int token_gc(lua_State *L) {
    state_token **p = lua_touserdata(L, 1);
    if (p && *p) {
        atomic_store(&(*p)->alive, false);
        token_release(*p);
        *p = NULL;
    }
    return 0;
}

/* This state's token (made once per state; a new reference). */
static state_token *get_token(lua_State *L) {
    state_token *tok = NULL;
    if (lua_getfield(L, LUA_REGISTRYINDEX, TOKEN_KEY) == LUA_TUSERDATA) {
        tok = *(state_token **)lua_touserdata(L, -1);
        lua_pop(L, 1);
    } else {
        lua_pop(L, 1);
        state_token **p = lua_newuserdatauv(L, sizeof *p, 0);
        *p = NULL;
        lua_createtable(L, 0, 1);
        lua_pushcfunction(L, token_gc);
        lua_setfield(L, -2, "__gc");
        lua_setmetatable(L, -2);
        tok = malloc(sizeof *tok);
        if (!tok) luaL_error(L, "autograd: out of memory");
        atomic_init(&tok->refs, 1);
        atomic_init(&tok->alive, true);
        *p = tok;
        lua_setfield(L, LUA_REGISTRYINDEX, TOKEN_KEY);
    }
    atomic_fetch_add(&tok->refs, 1);
    return tok;
}

/* Queues ref for unref by tok's state (or drops it when the state is gone).
 * Takes over one reference to tok. Never touches Lua. */
static void defer_unref(state_token *tok, int ref) {
    if (!tok) return;
    if (ref == LUA_NOREF || ref == LUA_REFNIL || !atomic_load(&tok->alive)) {
        token_release(tok);
        return;
    }
    pthread_mutex_lock(&pending_lock);
    if (pending_n == pending_cap) {
        size_t cap = pending_cap ? pending_cap * 2 : 64;
        pending_ref *p = realloc(pending, cap * sizeof *p);
        if (!p) { /* cannot queue: the ref leaks (a registry slot), nothing breaks */
            pthread_mutex_unlock(&pending_lock);
            token_release(tok);
            return;
        }
        pending = p;
        pending_cap = cap;
    }
    pending[pending_n++] = (pending_ref){ tok, ref };
    atomic_fetch_add(&em_lua_pending_count, 1);
    pthread_mutex_unlock(&pending_lock);
}

void em_lua_drain_unrefs(lua_State *L) {
    if (!atomic_load_explicit(&em_lua_pending_count, memory_order_relaxed)) return;
    state_token *mine = NULL;
    if (lua_getfield(L, LUA_REGISTRYINDEX, TOKEN_KEY) == LUA_TUSERDATA)
        mine = *(state_token **)lua_touserdata(L, -1);
    lua_pop(L, 1);
    pthread_mutex_lock(&pending_lock);
    size_t keep = 0;
    for (size_t i = 0; i < pending_n; i++) {
        pending_ref p = pending[i];
        if (p.tok == mine && mine) {
            luaL_unref(L, LUA_REGISTRYINDEX, p.ref);
            token_release(p.tok);
        } else if (!atomic_load(&p.tok->alive)) {
            token_release(p.tok);
        } else {
            pending[keep++] = p;
            continue;
        }
        atomic_fetch_sub(&em_lua_pending_count, 1);
    }
    pending_n = keep;
    pthread_mutex_unlock(&pending_lock);
}

/* ---- the Lua thread that runs callbacks (Note [Lua callbacks from the engine]) ---- */

static _Thread_local lua_State *cur_L;
static _Thread_local bool cur_keep_graph;

/* Runs body(L) with ud under lua_pcall on cur_L. On a Lua error sets the
 * thread's error slot to the message (prefixed by what) and returns its
 * status; EM_OK otherwise. */
static em_status run_protected(state_token *tok, lua_CFunction body, void *ud, const char *what) {
    lua_State *L = cur_L;
    if (!L || !tok || !atomic_load(&tok->alive))
        return em_set_error(EM_EVALUE, "%s: Lua code can only run in a backward started from Lua "
                                       "(its state)", what);
    int top = lua_gettop(L);
    if (!lua_checkstack(L, 8)) return em_set_error(EM_ENOMEM, "%s: Lua stack overflow", what);
    lua_pushcfunction(L, body);
    lua_pushlightuserdata(L, ud);
    int st = lua_pcall(L, 1, 0, 0);
    if (st != LUA_OK) {
        const char *msg = lua_tostring(L, -1);
        em_set_error(EM_EVALUE, "%s", msg ? msg : "(error object is not a string)");
        lua_settop(L, top);
        return EM_EVALUE;
    }
    lua_settop(L, top);
    em_clear_error();
    return EM_OK;
}

/* A registry value pushed and checked to be ours. */
typedef struct {
    state_token *tok;
    int ref;
} lua_cb;

static void lua_cb_free(void *p) {
    lua_cb *cb = p;
    if (!cb) return;
    defer_unref(cb->tok, cb->ref);
    free(cb);
}

static lua_cb *lua_cb_new(lua_State *L, int fn_idx) {
    lua_cb *cb = malloc(sizeof *cb);
    if (!cb) luaL_error(L, "register_hook: out of memory");
    cb->tok = get_token(L);
    lua_pushvalue(L, fn_idx);
    cb->ref = luaL_ref(L, LUA_REGISTRYINDEX);
    return cb;
}

static void push_maybe_tensor(lua_State *L, em_tensor *t) {
    if (t) em_lua_push_tensor(L, em_tensor_retain(t), "autograd");
    else lua_pushboolean(L, 0);
}

/* ---- graph nodes as userdata ---- */

void em_lua_push_node(lua_State *L, em_node *n) {
    if (!n) {
        lua_pushnil(L);
        return;
    }
    em_node **slot = lua_newuserdatauv(L, sizeof *slot, 0);
    *slot = NULL;
    luaL_setmetatable(L, NODE_MT);
    em_node_retain(n);
    *slot = n;
}

static em_node *check_node(lua_State *L, int idx) {
    em_node **slot = luaL_checkudata(L, idx, NODE_MT);
    if (!*slot) luaL_error(L, "node used after close");
    return *slot;
}

static int node_gc(lua_State *L) {
    em_node **slot = luaL_checkudata(L, 1, NODE_MT);
    em_node *n = *slot;
    *slot = NULL;
    em_node_release(n);
    return 0;
}

static int node_tostring(lua_State *L) {
    lua_pushfstring(L, "<%s>", em_node_name(check_node(L, 1)));
    return 1;
}

static int node_eq(lua_State *L) {
    em_node **a = luaL_testudata(L, 1, NODE_MT), **b = luaL_testudata(L, 2, NODE_MT);
    lua_pushboolean(L, a && b && *a == *b);
    return 1;
}

/* Node hooks (Lua): fn(grad_inputs, grad_outputs) as PyTorch passes them:
 * grad_inputs are the gradients the node computed for its forward inputs,
 * grad_outputs the gradients it received. A returned table replaces the
 * grad_inputs given in it. */
typedef struct {
    lua_cb *cb;
    em_tensor **gin;  /* the node's results (next edges) */
    int n_gin;
    em_tensor **gout; /* the node's incoming gradients */
    int n_gout;
} node_hook_call;

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
    lua_cb *cb = ud;
    node_hook_call c = { cb, grad_outputs, n_out, grad_inputs, n_in };
    char what[96];
    snprintf(what, sizeof what, "%s hook", em_node_name(node));
    return run_protected(cb->tok, node_hook_body, &c, what);
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

/* Registers the Lua function at stack index 2 as a hook on tensor t or
 * node n (exactly one is given) and pushes its removable handle. */
static int register_lua_hook(lua_State *L, em_tensor *t, em_node *n) {
    luaL_checktype(L, 2, LUA_TFUNCTION);
    em_lua_drain_unrefs(L);
    lua_cb *cb = lua_cb_new(L, 2);
    int id = t ? em_register_hook(t, tensor_hook_cb, cb, lua_cb_free)
               : em_node_register_hook(n, node_hook_cb, cb, lua_cb_free);
    if (id < 0) {
        lua_cb_free(cb);
        return em_lua_error(L, "register_hook");
    }
    push_handle(L, t, n, id);
    return 1;
}

static int node_register_hook(lua_State *L) {
    return register_lua_hook(L, NULL, check_node(L, 1));
}

static int node_name_method(lua_State *L) {
    lua_pushstring(L, em_node_name(check_node(L, 1)));
    return 1;
}

static int node_index(lua_State *L) {
    em_node *n = check_node(L, 1);
    const char *k = luaL_checkstring(L, 2);
    if (strcmp(k, "name") == 0) {
        lua_pushstring(L, em_node_name(n));
    } else if (strcmp(k, "next_functions") == 0) {
        lua_createtable(L, n->num_next, 0);
        for (int i = 0; i < n->num_next; i++) {
            if (n->next[i].fn) em_lua_push_node(L, n->next[i].fn);
            else lua_pushboolean(L, 0);
            lua_rawseti(L, -2, i + 1);
        }
    } else if (strcmp(k, "register_hook") == 0) {
        lua_pushcfunction(L, node_register_hook);
    } else if (strcmp(k, "getname") == 0) {
        lua_pushcfunction(L, node_name_method);
    } else if (strcmp(k, "sequence_nr") == 0) {
        lua_pushinteger(L, (lua_Integer)n->sequence_nr);
    } else if (strcmp(k, "num_inputs") == 0) {
        lua_pushinteger(L, n->num_inputs);
    } else {
        lua_pushnil(L);
    }
    return 1;
}

/* ---- tensor hooks ---- */

typedef struct {
    lua_cb *cb;
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
    c->result = em_tensor_retain(r);
    return 0;
}

static em_tensor *tensor_hook_cb(void *ud, em_tensor *grad) {
    tensor_hook_call c = { ud, grad, NULL };
    if (run_protected(c.cb->tok, tensor_hook_body, &c, "hook") != EM_OK) {
        em_tensor_release(c.result);
        return NULL;
    }
    return c.result; /* NULL with the slot clear: unchanged */
}

static int m_register_hook(lua_State *L) {
    return register_lua_hook(L, em_lua_checkself(L, 1, "register_hook"), NULL);
}

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

/* ---- backward and autograd.grad ---- */

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

/* Runs em_backward with cur_L set (Note [Lua callbacks from the engine]). */
static em_status run_backward(lua_State *L, em_tensor **roots, em_tensor **grads, int n_roots,
                              em_tensor **inputs, int n_inputs, em_tensor **out,
                              const em_backward_opts *o) {
    lua_State *prev_L = cur_L;
    bool prev_keep = cur_keep_graph;
    cur_L = L;
    cur_keep_graph = o->retain_graph || o->create_graph;
    em_status st = em_backward(roots, grads, n_roots, inputs, n_inputs, out, o);
    cur_L = prev_L;
    cur_keep_graph = prev_keep;
    em_lua_drain_unrefs(L);
    return st;
}

/* y:backward([grad], [{retain_graph=, create_graph=, inputs=}]) or y:backward(opts) */
static int m_backward(lua_State *L) {
    static const char *const names[] = { "retain_graph", "create_graph", "inputs", NULL };
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
static int l_grad(lua_State *L) {
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

static int l_dot(lua_State *L) {
    em_tensor **roots = NULL;
    int n = collect_tensors(L, 1, "autograd.dot", "outputs", &roots, false, 0);
    char *s = em_autograd_dot(roots, n);
    if (!s) return em_lua_error(L, "autograd.dot");
    lua_pushstring(L, s);
    free(s);
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

/* ---- custom Functions ---- */

/* Note [Function ctx]
 * ctx is a userdata (ctx_box) with two user values: 1 the table of the
 * user's fields (needs_input_grad lives there), 2 the pending list given to
 * save_for_backward during forward. After forward the pending tensors
 * become em_saved_vars (outputs saved without their history, so ctx -> an
 * output -> its node -> ctx forms no cycle), version-checked on unpack and
 * freed after a backward without retain_graph. */
typedef struct {
    em_saved_var *saved;
    int n_saved;
    em_node *node;   /* weak: the node whose ud keeps this ctx alive */
    bool finalized;
} ctx_box;

typedef struct {
    state_token *tok;
    int def_ref, ctx_ref;
    ctx_box *box;          /* kept alive by ctx_ref */
    int nargs;
    char label[64];        /* "MyFn" or "" */
    em_input_meta *arg_meta; /* [nargs]: shapes of tensor args */
    bool *arg_tensor;      /* [nargs] */
} fn_ud;

static void fn_ud_free(void *p) {
    fn_ud *f = p;
    if (!f) return;
    if (f->box) f->box->node = NULL;
    if (f->tok) {
        atomic_fetch_add(&f->tok->refs, 1);
        defer_unref(f->tok, f->def_ref);
        defer_unref(f->tok, f->ctx_ref);
    }
    free(f->arg_meta);
    free(f->arg_tensor);
    free(f);
}

static void release_saved(ctx_box *b) {
    for (int i = 0; i < b->n_saved; i++) em_saved_release(&b->saved[i]);
}

static int ctx_gc(lua_State *L) {
    ctx_box *b = luaL_checkudata(L, 1, CTX_MT);
    release_saved(b);
    free(b->saved);
    b->saved = NULL;
    b->n_saved = 0;
    return 0;
}

static int ctx_save_for_backward(lua_State *L) {
    ctx_box *b = luaL_checkudata(L, 1, CTX_MT);
    if (b->finalized)
        return luaL_error(L, "save_for_backward: can only be called in forward");
    int n = lua_gettop(L) - 1;
    lua_createtable(L, n, 1);
    for (int i = 1; i <= n; i++) {
        if (!lua_isnil(L, i + 1) && !em_lua_totensor(L, i + 1))
            return em_lua_argerror(L, i + 1, "save_for_backward", "tensor or nil expected, got %s",
                                   luaL_typename(L, i + 1));
        lua_pushvalue(L, i + 1);
        lua_rawseti(L, -2, i);
    }
    lua_pushinteger(L, n);
    lua_setfield(L, -2, "n");
    lua_setiuservalue(L, 1, 2);
    return 0;
}

static int ctx_index(lua_State *L) {
    ctx_box *b = luaL_checkudata(L, 1, CTX_MT);
    const char *k = lua_tostring(L, 2);
    if (k && strcmp(k, "save_for_backward") == 0) {
        lua_pushcfunction(L, ctx_save_for_backward);
        return 1;
    }
    if (k && strcmp(k, "saved_tensors") == 0) {
        if (!b->finalized) { /* in forward: the pending list */
            if (lua_getiuservalue(L, 1, 2) == LUA_TTABLE) return 1;
            lua_newtable(L);
            return 1;
        }
        lua_createtable(L, b->n_saved, 0);
        for (int i = 0; i < b->n_saved; i++) {
            if (!b->saved[i].was_saved) continue;
            em_tensor *t = em_saved_unpack(&b->saved[i], b->node);
            if (!t) return em_lua_error(L, "saved_tensors");
            em_lua_push_tensor(L, t, "saved_tensors");
            lua_rawseti(L, -2, i + 1);
        }
        return 1;
    }
    lua_getiuservalue(L, 1, 1);
    lua_pushvalue(L, 2);
    lua_rawget(L, -2);
    return 1;
}

static int ctx_newindex(lua_State *L) {
    luaL_checkudata(L, 1, CTX_MT);
    const char *k = lua_tostring(L, 2);
    if (k && (strcmp(k, "saved_tensors") == 0 || strcmp(k, "save_for_backward") == 0))
        return luaL_error(L, "ctx.%s cannot be assigned", k);
    lua_getiuservalue(L, 1, 1);
    lua_pushvalue(L, 2);
    lua_pushvalue(L, 3);
    lua_rawset(L, -3);
    return 0;
}

/* Turns the pending saved list of the ctx at idx into saved variables;
 * outs[0..n_outs) are the outputs (saved without history). */
static void ctx_finalize(lua_State *L, int idx, em_tensor **outs, int n_outs) {
    ctx_box *b = lua_touserdata(L, idx);
    b->finalized = true;
    if (lua_getiuservalue(L, idx, 2) != LUA_TTABLE) {
        lua_pop(L, 1);
        return;
    }
    lua_getfield(L, -1, "n");
    int n = (int)lua_tointeger(L, -1);
    lua_pop(L, 1);
    if (n > 0) {
        b->saved = calloc((size_t)n, sizeof *b->saved);
        if (!b->saved) luaL_error(L, "save_for_backward: out of memory");
        b->n_saved = n;
        for (int i = 0; i < n; i++) {
            lua_rawgeti(L, -1, i + 1);
            em_tensor *t = em_lua_totensor(L, -1);
            bool is_out = false;
            for (int j = 0; t && j < n_outs; j++) is_out = is_out || outs[j] == t;
            if (t) em_saved_save(&b->saved[i], t, is_out && b->node);
            lua_pop(L, 1);
        }
    }
    lua_pop(L, 1);
    lua_pushnil(L);
    lua_setiuservalue(L, idx, 2);
}

typedef struct {
    fn_ud *f;
    em_node *node;
    em_tensor **grads;
    em_tensor **out;
} fn_call;

static const char *fn_label(const fn_ud *f, char *buf, size_t n) {
    if (f->label[0]) snprintf(buf, n, "Function %s.backward", f->label);
    else snprintf(buf, n, "Function.backward");
    return buf;
}

static int fn_backward_body(lua_State *L) {
    fn_call *c = lua_touserdata(L, 1);
    fn_ud *f = c->f;
    em_node *node = c->node;
    char who[96];
    fn_label(f, who, sizeof who);
    int base = lua_gettop(L);
    lua_rawgeti(L, LUA_REGISTRYINDEX, f->def_ref);
    lua_getfield(L, -1, "backward");
    lua_remove(L, -2);
    lua_rawgeti(L, LUA_REGISTRYINDEX, f->ctx_ref);
    luaL_checkstack(L, node->num_inputs + 4, who);
    for (int i = 0; i < node->num_inputs; i++) {
        em_tensor *g = c->grads[i];
        if (g) {
            em_lua_push_tensor(L, em_tensor_retain(g), who);
        } else { /* materialize a zero gradient */
            const em_input_meta *m = &node->input_meta[i];
            em_lua_push_tensor(L, em_zeros((em_intlist){ m->sizes, m->ndim }, m->dtype, m->device), who);
        }
    }
    lua_call(L, node->num_inputs + 1, LUA_MULTRET);
    int nres = lua_gettop(L) - base;
    while (nres > f->nargs && lua_isnil(L, base + nres)) nres--; /* extra trailing nils */
    if (nres != f->nargs)
        return luaL_error(L, "%s returned %d gradient%s, expected %d", who, nres,
                          nres == 1 ? "" : "s", f->nargs);
    for (int i = 0; i < f->nargs; i++) { /* validate every value before keeping any */
        int idx = base + 1 + i;
        if (lua_isnil(L, idx)) continue;
        em_tensor *g = em_lua_totensor(L, idx);
        if (!g)
            return luaL_error(L, "%s: gradient %d: tensor or nil expected, got %s", who, i + 1,
                              luaL_typename(L, idx));
        if (!f->arg_tensor[i])
            return luaL_error(L, "%s: gradient %d given for argument %d, which is not a tensor "
                                 "(return nil there)", who, i + 1, i + 1);
        const em_input_meta *m = &f->arg_meta[i];
        if (g->ndim != m->ndim || memcmp(g->sizes, m->sizes, sizeof(int64_t) * (size_t)m->ndim)) {
            char a[EM_SHAPE_STR_MAX], b[EM_SHAPE_STR_MAX];
            return luaL_error(L, "%s: gradient %d has shape %s but input %d has shape %s", who,
                              i + 1, em_shape_str(g->ndim, g->sizes, a, sizeof a), i + 1,
                              em_shape_str(m->ndim, m->sizes, b, sizeof b));
        }
    }
    for (int i = 0; i < f->nargs; i++) {
        em_tensor *g = em_lua_totensor(L, base + 1 + i);
        if (!g || !node->next[i].fn) continue;
        if (g->dtype != f->arg_meta[i].dtype) {
            g = em_to(g, f->arg_meta[i].dtype);
            if (!g) return em_lua_error(L, who);
        } else {
            em_tensor_retain(g);
        }
        c->out[i] = g;
    }
    return 0;
}

static em_status fn_apply(void *ud, em_node *node, em_tensor **grads, em_tensor **out) {
    fn_ud *f = ud;
    fn_call c = { f, node, grads, out };
    char who[96];
    em_status st = run_protected(f->tok, fn_backward_body, &c, fn_label(f, who, sizeof who));
    if (st != EM_OK) {
        for (int i = 0; i < node->num_next; i++) {
            em_tensor_release(out[i]);
            out[i] = NULL;
        }
    }
    if (!cur_keep_graph && f->box) release_saved(f->box);
    return st;
}

static bool is_float_tensor(const em_tensor *t) { return t && em_dtype_is_floating(t->dtype); }

/* _function_apply(def, ...): runs def.forward(ctx, ...) under no_grad and
 * attaches a node to its tensor outputs (see autograd.Function in
 * lua/stdlib/autograd.lua). */
static int l_function_apply(lua_State *L) {
    luaL_checktype(L, 1, LUA_TTABLE);
    em_lua_drain_unrefs(L);
    int nargs = lua_gettop(L) - 1;
    char label[64] = "";
    if (lua_getfield(L, 1, "name") == LUA_TSTRING) snprintf(label, sizeof label, "%s", lua_tostring(L, -1));
    lua_pop(L, 1);
    if (lua_getfield(L, 1, "forward") != LUA_TFUNCTION)
        return luaL_error(L, "Function%s%s: forward must be a function", label[0] ? " " : "", label);
    lua_pop(L, 1);
    bool grad_on = em_is_grad_enabled();
    bool any = false;
    /* ctx */
    ctx_box *box = lua_newuserdatauv(L, sizeof *box, 2);
    memset(box, 0, sizeof *box);
    luaL_setmetatable(L, CTX_MT);
    int ctx = lua_gettop(L);
    lua_createtable(L, 0, 4);
    lua_createtable(L, nargs, 0);
    for (int i = 0; i < nargs; i++) {
        em_tensor *t = em_lua_totensor(L, 2 + i);
        bool need = grad_on && t && em_requires_grad(t);
        any = any || need;
        lua_pushboolean(L, need);
        lua_rawseti(L, -2, i + 1);
    }
    lua_setfield(L, -2, "needs_input_grad");
    lua_setiuservalue(L, ctx, 1);
    /* forward under no_grad */
    int base = lua_gettop(L);
    lua_getfield(L, 1, "forward");
    lua_pushvalue(L, ctx);
    for (int i = 0; i < nargs; i++) lua_pushvalue(L, 2 + i);
    bool prev = em_set_grad_enabled(false);
    int st = lua_pcall(L, nargs + 1, LUA_MULTRET, 0);
    em_set_grad_enabled(prev);
    if (st != LUA_OK) return lua_error(L);
    int nres = lua_gettop(L) - base;
    int n_diff = 0;
    for (int j = 0; j < nres; j++)
        if (is_float_tensor(em_lua_totensor(L, base + 1 + j))) n_diff++;
    if (!any || n_diff == 0) {
        ctx_finalize(L, ctx, NULL, 0);
        return nres;
    }
    em_tensor **outs = lua_newuserdatauv(L, sizeof *outs * (size_t)n_diff, 0);
    fn_ud *f = calloc(1, sizeof *f);
    if (!f) return luaL_error(L, "Function: out of memory");
    f->arg_meta = calloc((size_t)(nargs ? nargs : 1), sizeof *f->arg_meta);
    f->arg_tensor = calloc((size_t)(nargs ? nargs : 1), sizeof *f->arg_tensor);
    f->def_ref = f->ctx_ref = LUA_NOREF;
    if (!f->arg_meta || !f->arg_tensor) {
        fn_ud_free(f);
        return luaL_error(L, "Function: out of memory");
    }
    for (int i = 0; i < nargs; i++) {
        em_tensor *t = em_lua_totensor(L, 2 + i);
        f->arg_tensor[i] = t != NULL;
        if (t) em_input_meta_from(&f->arg_meta[i], t);
    }
    f->nargs = nargs;
    f->box = box;
    snprintf(f->label, sizeof f->label, "%s", label);
    f->tok = get_token(L);
    lua_pushvalue(L, 1);
    f->def_ref = luaL_ref(L, LUA_REGISTRYINDEX);
    lua_pushvalue(L, ctx);
    f->ctx_ref = luaL_ref(L, LUA_REGISTRYINDEX);
    char name[80];
    snprintf(name, sizeof name, "%sBackward", label[0] ? label : "Function");
    em_node *node = em_custom_node_new(name, n_diff, nargs, fn_apply, f, fn_ud_free);
    if (!node) {
        fn_ud_free(f);
        return em_lua_error(L, "Function");
    }
    for (int i = 0; i < nargs; i++) {
        em_tensor *t = em_lua_totensor(L, 2 + i);
        if (t && grad_on && em_requires_grad(t)) node->next[i] = em_gradient_edge(t);
    }
    int k = 0;
    for (int j = 0; j < nres; j++) {
        int idx = base + 1 + j;
        em_tensor *t = em_lua_totensor(L, idx);
        if (!is_float_tensor(t)) continue;
        bool alias = em_requires_grad(t);
        for (int i = 0; i < nargs && !alias; i++) alias = em_lua_totensor(L, 2 + i) == t;
        if (alias) { /* an input (or a tensor with history) returned: a fresh alias gets the node */
            em_lua_push_tensor(L, em_detach(t), "Function");
            t = em_lua_totensor(L, -1);
            lua_replace(L, idx);
        }
        if (em_set_history(t, node, (uint32_t)k) != EM_OK) {
            em_node_release(node);
            return em_lua_error(L, "Function");
        }
        outs[k++] = t;
    }
    box->node = node;
    ctx_finalize(L, ctx, outs, k);
    em_node_release(node); /* the outputs hold it */
    lua_pop(L, 1);         /* the scratch array */
    return nres;
}

/* ---- registration ---- */

void em_lua_register_autograd(lua_State *L, int mod, int methods) {
    static const luaL_Reg tensor_methods[] = {
        { "requires_grad_", m_requires_grad_ },
        { "detach", m_detach },
        { "retain_grad", m_retain_grad },
        { "backward", m_backward },
        { "register_hook", m_register_hook },
        { NULL, NULL }
    };
    static const luaL_Reg autograd_funcs[] = {
        { "grad", l_grad },
        { "dot", l_dot },
        { "differentiable_ops", l_differentiable_ops },
        { "is_anomaly_enabled", l_is_anomaly_enabled },
        { "_function_apply", l_function_apply },
        { "_set_grad_enabled", l_set_grad_raw },
        { "_set_inference_mode", l_set_inference_raw },
        { "_set_anomaly_enabled", l_set_anomaly_raw },
        { NULL, NULL }
    };
    static const luaL_Reg node_meta[] = {
        { "__index", node_index }, { "__gc", node_gc }, { "__close", node_gc },
        { "__tostring", node_tostring }, { "__eq", node_eq }, { NULL, NULL }
    };
    static const luaL_Reg handle_meta[] = {
        { "__gc", handle_gc }, { "__tostring", handle_tostring }, { NULL, NULL }
    };
    static const luaL_Reg ctx_meta[] = {
        { "__index", ctx_index }, { "__newindex", ctx_newindex }, { "__gc", ctx_gc },
        { NULL, NULL }
    };
    em_autograd_init();
    if (luaL_newmetatable(L, NODE_MT)) luaL_setfuncs(L, node_meta, 0);
    lua_pop(L, 1);
    if (luaL_newmetatable(L, HANDLE_MT)) {
        luaL_setfuncs(L, handle_meta, 0);
        lua_createtable(L, 0, 1);
        lua_pushcfunction(L, handle_remove);
        lua_setfield(L, -2, "remove");
        lua_setfield(L, -2, "__index");
    }
    lua_pop(L, 1);
    if (luaL_newmetatable(L, CTX_MT)) luaL_setfuncs(L, ctx_meta, 0);
    lua_pop(L, 1);
    token_release(get_token(L)); /* made now, so a closing state marks it dead */
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
