/* lua_function.c -- custom autograd.Function: _function_apply runs
 * def.forward(ctx, ...) under no_grad and attaches a custom node whose
 * apply runs def.backward(ctx, ...) from the engine (Note [Lua callbacks
 * from the engine] in lua_callback.c); the ctx userdata and its saved
 * tensors (Note [Function ctx]). The Lua side is autograd.Function in
 * lua/stdlib/autograd.lua.
 * (Split from lua_autograd.c; see the list of files in em_lua_int.h.)
 */
#include <stdlib.h>
#include <string.h>

#include "autograd/em_autograd.h"
#include "lua/em_lua_int.h"
#include "em_ops.h"

#define CTX_MT "ember.FunctionCtx"

/* Note [Function ctx]
 * ctx is a userdata (ctx_box) with two user values: 1 the table of the
 * user's fields (needs_input_grad lives there), 2 the pending list given to
 * save_for_backward during forward. After forward the pending tensors
 * become em_saved_vars (outputs saved without their history, so ctx -> an
 * output -> its node -> ctx forms no cycle), version-checked on unpack and
 * freed after a backward without retain_graph: by the node's own
 * release_saved callback (fn_release_saved), which the engine calls after
 * running the node without keep_graph -- not by apply, which cannot know
 * whether the graph is kept. A later unpack then fails with "trying to
 * backward through the graph a second time". */
typedef struct {
    em_saved_var *saved;
    int n_saved;
    em_node *node;   /* weak: the node whose ud keeps this ctx alive */
    bool finalized;
} ctx_box;

typedef struct {
    em_lua_token *tok;
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
    /* the box is Lua memory: gone with a closed state (the host may hold
     * the graph longer, ember.h) */
    if (f->box && f->tok && em_lua_token_alive(f->tok)) f->box->node = NULL;
    if (f->tok) {
        em_lua_token_retain(f->tok);
        em_lua_defer_unref(f->tok, f->def_ref);
        em_lua_defer_unref(f->tok, f->ctx_ref);
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
 * outs[0..n_outs) are the outputs (saved without history). Returns false
 * with the thread's error set when saving fails (out of memory): the caller
 * drops what it holds, then raises; the box owns what was saved so far. */
static bool ctx_finalize(lua_State *L, int idx, em_tensor **outs, int n_outs) {
    ctx_box *b = lua_touserdata(L, idx);
    b->finalized = true;
    if (lua_getiuservalue(L, idx, 2) != LUA_TTABLE) {
        lua_pop(L, 1);
        return true;
    }
    lua_getfield(L, -1, "n");
    int n = (int)lua_tointeger(L, -1);
    lua_pop(L, 1);
    if (n > 0) {
        b->saved = calloc((size_t)n, sizeof *b->saved);
        if (!b->saved) {
            lua_pop(L, 1);
            em_set_error(EM_ENOMEM, "out of memory");
            return false;
        }
        b->n_saved = n;
        for (int i = 0; i < n; i++) {
            lua_rawgeti(L, -1, i + 1);
            em_tensor *t = em_lua_totensor(L, -1);
            bool is_out = false;
            for (int j = 0; t && j < n_outs; j++) is_out = is_out || outs[j] == t;
            lua_pop(L, 1); /* the list keeps t alive */
            if (t && em_saved_save(&b->saved[i], t, is_out && b->node) != EM_OK) {
                lua_pop(L, 1);
                return false;
            }
        }
    }
    lua_pop(L, 1);
    lua_pushnil(L);
    lua_setiuservalue(L, idx, 2);
    return true;
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
            const em_input_meta *m = &em_node_input_meta(node)[i];
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
    em_status st = em_lua_run_protected(f->tok, fn_backward_body, &c, fn_label(f, who, sizeof who));
    if (st != EM_OK) {
        for (int i = 0; i < node->num_next; i++) {
            em_tensor_release(out[i]);
            out[i] = NULL;
        }
    }
    return st;
}

/* The node's release_saved callback (em_custom_node_set_release): the
 * engine calls it after running the node in a backward without
 * retain_graph, so the ctx's saved tensors go then (Note [Function ctx]). */
static void fn_release_saved(void *ud) {
    fn_ud *f = ud;
    if (f->box) release_saved(f->box);
}

static bool is_float_tensor(const em_tensor *t) { return t && em_dtype_is_floating(t->dtype); }

/* _function_apply(def, ...): runs def.forward(ctx, ...) under no_grad and
 * attaches a node to its tensor outputs (see autograd.Function in
 * lua/stdlib/autograd.lua). */
int em_lua_function_apply(lua_State *L) {
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
    em_grad_guard g = em_grad_guard_begin(false);
    int st = lua_pcall(L, nargs + 1, LUA_MULTRET, 0);
    em_grad_guard_end(g);
    if (st != LUA_OK) return lua_error(L);
    int nres = lua_gettop(L) - base;
    int n_diff = 0;
    for (int j = 0; j < nres; j++)
        if (is_float_tensor(em_lua_totensor(L, base + 1 + j))) n_diff++;
    if (!any || n_diff == 0) {
        if (!ctx_finalize(L, ctx, NULL, 0)) return em_lua_error(L, "save_for_backward");
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
        if (t && em_input_meta_from(&f->arg_meta[i], t) != EM_OK) {
            fn_ud_free(f);
            return luaL_error(L, "Function: out of memory");
        }
    }
    f->nargs = nargs;
    f->box = box;
    snprintf(f->label, sizeof f->label, "%s", label);
    f->tok = em_lua_token_get(L);
    lua_pushvalue(L, 1);
    f->def_ref = luaL_ref(L, LUA_REGISTRYINDEX);
    lua_pushvalue(L, ctx);
    f->ctx_ref = luaL_ref(L, LUA_REGISTRYINDEX);
    char name[80];
    snprintf(name, sizeof name, "%sBackward", label[0] ? label : "Function");
    em_node *node = em_custom_node_new(name, n_diff, nargs, fn_apply, f, fn_ud_free);
    if (!node) {
        /* on the Lua thread: drop the refs now rather than deferred, so
         * the ctx and what it saved go with the next collection */
        luaL_unref(L, LUA_REGISTRYINDEX, f->def_ref);
        luaL_unref(L, LUA_REGISTRYINDEX, f->ctx_ref);
        f->def_ref = f->ctx_ref = LUA_NOREF;
        fn_ud_free(f);
        return em_lua_error(L, "Function");
    }
    if (em_custom_node_set_release(node, fn_release_saved) != EM_OK) {
        em_node_release(node); /* frees f through fn_ud_free */
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
    bool saved = ctx_finalize(L, ctx, outs, k);
    em_node_release(node); /* the outputs hold it */
    if (!saved) return em_lua_error(L, "save_for_backward");
    lua_pop(L, 1);         /* the scratch array */
    return nres;
}

void em_lua_open_function(lua_State *L) {
    static const luaL_Reg ctx_meta[] = {
        { "__index", ctx_index }, { "__newindex", ctx_newindex }, { "__gc", ctx_gc },
        { NULL, NULL }
    };
    if (luaL_newmetatable(L, CTX_MT)) luaL_setfuncs(L, ctx_meta, 0);
    lua_pop(L, 1);
}
