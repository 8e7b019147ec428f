/* lua_callback.c -- running Lua code from the backward engine: state
 * tokens, deferred registry unrefs, the thread's callback state and the
 * protected call every hook and custom Function goes through.
 * (Split from lua_autograd.c; see the list of files in em_lua_int.h.)
 *
 * Note [Lua callbacks from the engine]
 * Hooks and custom Functions are C callbacks whose ud holds registry refs.
 * The engine runs such nodes (owner_thread) on the thread that called
 * em_backward, which for them is always a Lua binding (backward, grad) that
 * records its lua_State as this thread's callback state
 * (em_lua_set_callback_state); a callback runs its Lua code under lua_pcall
 * of a C body on that state (em_lua_run_protected), so no Lua error ever
 * unwinds through engine frames: an error becomes the backward's error
 * (message kept). A callback of another state than the callback state's,
 * or with none (a backward started from C: ember_backward), runs on the
 * main thread of the state that owns it (its token's), which belongs to
 * the calling thread as every state belongs to one thread at a time
 * (ember.h).
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

#include "lua/em_lua_int.h"

#define TOKEN_KEY "ember.StateToken"

/* ---- state tokens and deferred unrefs (Note [Deferred unref]) ---- */

struct em_lua_token {
    atomic_int refs;
    atomic_bool alive;
    lua_State *main; /* the owning state's main thread (valid while alive) */
};

typedef struct {
    em_lua_token *tok;
    int ref;
} pending_ref;

static pthread_mutex_t pending_lock = PTHREAD_MUTEX_INITIALIZER;
static pending_ref *pending;
static size_t pending_n, pending_cap;
atomic_int em_lua_pending_count;

void em_lua_token_release(em_lua_token *tok) {
    if (tok && atomic_fetch_sub(&tok->refs, 1) == 1) free(tok);
}

void em_lua_token_retain(em_lua_token *tok) { atomic_fetch_add(&tok->refs, 1); }

bool em_lua_token_alive(const em_lua_token *tok) { return atomic_load(&tok->alive); }

static int token_gc(lua_State *L) {
    em_lua_token **p = lua_touserdata(L, 1);
    if (p && *p) {
        atomic_store(&(*p)->alive, false);
        em_lua_token_release(*p);
        *p = NULL;
    }
    return 0;
}

em_lua_token *em_lua_token_get(lua_State *L) {
    em_lua_token *tok = NULL;
    if (lua_getfield(L, LUA_REGISTRYINDEX, TOKEN_KEY) == LUA_TUSERDATA) {
        tok = *(em_lua_token **)lua_touserdata(L, -1);
        lua_pop(L, 1);
    } else {
        lua_pop(L, 1);
        em_lua_token **p = lua_newuserdatauv(L, sizeof *p, 0);
        *p = NULL;
        lua_createtable(L, 0, 1);
        lua_pushcfunction(L, token_gc);
        lua_setfield(L, -2, "__gc");
        lua_setmetatable(L, -2);
        tok = malloc(sizeof *tok);
        if (!tok) luaL_error(L, "autograd: out of memory");
        atomic_init(&tok->refs, 1);
        atomic_init(&tok->alive, true);
        lua_rawgeti(L, LUA_REGISTRYINDEX, LUA_RIDX_MAINTHREAD);
        tok->main = lua_tothread(L, -1);
        lua_pop(L, 1);
        *p = tok;
        lua_setfield(L, LUA_REGISTRYINDEX, TOKEN_KEY);
    }
    atomic_fetch_add(&tok->refs, 1);
    return tok;
}

void em_lua_defer_unref(em_lua_token *tok, int ref) {
    if (!tok) return;
    if (ref == LUA_NOREF || ref == LUA_REFNIL || !atomic_load(&tok->alive)) {
        em_lua_token_release(tok);
        return;
    }
    pthread_mutex_lock(&pending_lock);
    if (pending_n == pending_cap) {
        size_t cap = pending_cap ? pending_cap * 2 : 64;
        pending_ref *p = realloc(pending, cap * sizeof *p);
        if (!p) { /* cannot queue: the ref leaks (a registry slot), nothing breaks */
            pthread_mutex_unlock(&pending_lock);
            em_lua_token_release(tok);
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
    em_lua_token *mine = NULL;
    if (lua_getfield(L, LUA_REGISTRYINDEX, TOKEN_KEY) == LUA_TUSERDATA)
        mine = *(em_lua_token **)lua_touserdata(L, -1);
    lua_pop(L, 1);
    pthread_mutex_lock(&pending_lock);
    size_t keep = 0;
    for (size_t i = 0; i < pending_n; i++) {
        pending_ref p = pending[i];
        if (p.tok == mine && mine) {
            luaL_unref(L, LUA_REGISTRYINDEX, p.ref);
            em_lua_token_release(p.tok);
        } else if (!atomic_load(&p.tok->alive)) {
            em_lua_token_release(p.tok);
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

lua_State *em_lua_set_callback_state(lua_State *L) {
    lua_State *prev = cur_L;
    cur_L = L;
    return prev;
}

/* The main thread of L's state. */
static lua_State *main_of(lua_State *L) {
    lua_rawgeti(L, LUA_REGISTRYINDEX, LUA_RIDX_MAINTHREAD);
    lua_State *m = lua_tothread(L, -1);
    lua_pop(L, 1);
    return m;
}

em_status em_lua_run_protected(em_lua_token *tok, lua_CFunction body, void *ud, const char *what) {
    if (!tok || !atomic_load(&tok->alive))
        return em_set_error(EM_EVALUE, "%s: the Lua state that registered it was closed", what);
    /* the running thread of the owning state, else its main thread */
    lua_State *L = cur_L && main_of(cur_L) == tok->main ? cur_L : tok->main;
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

void em_lua_cb_free(void *p) {
    em_lua_cb *cb = p;
    if (!cb) return;
    em_lua_defer_unref(cb->tok, cb->ref);
    free(cb);
}

em_lua_cb *em_lua_cb_new(lua_State *L, int fn_idx) {
    em_lua_cb *cb = malloc(sizeof *cb);
    if (!cb) luaL_error(L, "register_hook: out of memory");
    cb->tok = em_lua_token_get(L);
    lua_pushvalue(L, fn_idx);
    cb->ref = luaL_ref(L, LUA_REGISTRYINDEX);
    return cb;
}
