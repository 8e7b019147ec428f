/* em_lua_int.h -- private helpers shared by the files of runtime/lua.
 * Not installed, not included outside runtime/lua. */
#ifndef EM_LUA_INT_H
#define EM_LUA_INT_H

#include "lua/em_lua.h"

/* Registry keys (strings, like luaL_newmetatable's). */
#define EM_LUA_MODULE_KEY "ember.module"          /* the module table */
#define EM_LUA_METHODS_KEY "ember.Tensor.methods" /* methods table, also ember.Tensor */

/* Note [Tensor userdata]
 * A tensor is a full userdata whose block is an em_lua_box: one
 * em_tensor* (one reference) and a tag word, with the metatable
 * EM_LUA_TENSOR_MT. __gc and __close release the reference and store NULL,
 * so a closed tensor is still recognisably an ember tensor and every use
 * of it raises "tensor used after close". A value is recognised by its
 * block, not its metatable: a full userdata of exactly sizeof(em_lua_box)
 * bytes (lua_rawlen; a light userdata has length 0, so a shorter block is
 * never read past its end) whose tag is EM_LUA_TAG, the address of a
 * hidden symbol of this library scrambled by a constant. Only C code
 * writes userdata blocks and none but push_slot (lua_tensor.c) writes
 * that value, so the test is exact; it costs two API calls where the
 * metatable's identity took five (lua_getmetatable, two lua_topointer,
 * the pop, lua_touserdata), on every operand of every op and in every
 * __gc. A tensor given another metatable by debug.setmetatable is still a
 * tensor to the bindings. */
typedef struct em_lua_box {
    em_tensor *t;  /* the reference; NULL once closed or collected */
    uintptr_t tag; /* EM_LUA_TAG */
} em_lua_box;

/* Its address is the registry key of the tensor metatable (also stored
 * under EM_LUA_TENSOR_MT): a light-userdata lookup, no string hashing. */
EM_HIDDEN extern const char em_lua_mt_key;
#define EM_LUA_TAG ((uintptr_t)&em_lua_mt_key ^ (uintptr_t)0x9e3779b97f4a7c15u)

/* The slot of an ember tensor userdata at idx, or NULL when the value is
 * not one. The slot may hold NULL (closed). Note [Tensor userdata]. */
static inline em_tensor **em_lua_toslot(lua_State *L, int idx) {
    em_lua_box *b = (em_lua_box *)lua_touserdata(L, idx);
    if (!b || lua_rawlen(L, idx) != sizeof *b || b->tag != EM_LUA_TAG) return NULL;
    return &b->t;
}
/* Like em_lua_totensor, but raises "bad argument #idx to 'op' (tensor
 * expected, got TYPE)" for non-tensors and "tensor used after close". */
EM_HIDDEN em_tensor *em_lua_checkself(lua_State *L, int idx, const char *op);
/* Raises "bad argument #idx to 'op' (msg)" with the caller's position,
 * after releasing the pending wrapped numbers (see Note [Pending
 * temporaries] in lua_args.c). Never returns. */
EM_HIDDEN int em_lua_argerror(lua_State *L, int idx, const char *op, const char *fmt, ...);
/* Raises "msg" with the caller's position, after releasing the pending
 * temporaries. Never returns. */
EM_HIDDEN int em_lua_raise(lua_State *L, const char *fmt, ...);
/* A wrapped-number 0-dim tensor for the Lua number/boolean at idx (float64
 * for floats, int64 for integers, bool for booleans), or NULL when the
 * value is none of these or allocation failed (error slot set then). */
EM_HIDDEN em_tensor *em_lua_wrap_number(lua_State *L, int idx);

/* x[{ {1,3}, {}, 2 }]: Torch7 slicing of t by the table at kidx (numbers
 * select, tables slice); a new reference. for_set: the target of an
 * assignment (a whole-dim slice is t itself). Raises on a bad key. */
EM_HIDDEN em_tensor *em_lua_index_table(lua_State *L, em_tensor *t, int kidx, bool for_set);
/* ---- advanced indexing (lua_index.c, Note [Advanced indexing]) ---- */
/* Whether the key at kidx is a tensor or a table with a tensor entry. */
EM_HIDDEN bool em_lua_index_is_advanced(lua_State *L, int kidx);
/* x[key]: a new tensor (a copy, recorded by autograd). Raises on error. */
EM_HIDDEN em_tensor *em_lua_index_advanced(lua_State *L, em_tensor *t, int kidx);
/* x[key] = value (at vidx): writes into t in place. Raises on error. */
EM_HIDDEN void em_lua_newindex_advanced(lua_State *L, em_tensor *t, int kidx, int vidx);
/* Makes the tensor metatable (once per state) with the methods table as
 * __index's first stop; leaves nothing on the stack. methods_idx is an
 * absolute index. */
EM_HIDDEN void em_lua_open_tensor(lua_State *L, int methods_idx);
/* Hand-written tensor methods (item, tolist, size, float, ...). */
EM_HIDDEN void em_lua_register_methods(lua_State *L, int methods_idx);
/* Runs a collection step owed by earlier pushes (Note [GC pressure]);
 * called at the start of every generated binding. */
EM_HIDDEN void em_lua_gc_entry(lua_State *L);
/* __tostring: pushes the PyTorch-style text of t. */
EM_HIDDEN void em_lua_push_tensor_string(lua_State *L, const em_tensor *t);
/* Generated (build/gen/em_formula_docs.c): {node, input, formula} rows. */
EM_HIDDEN extern const char *const em_lua_formula_docs[][3];
/* ember.set_printoptions / get_printoptions (lua_print.c) */
EM_HIDDEN int em_lua_set_printoptions(lua_State *L);
EM_HIDDEN int em_lua_get_printoptions(lua_State *L);
/* Pushes the value of the one element at p (dtype t) as a Lua value. */
EM_HIDDEN void em_lua_push_element(lua_State *L, const void *p, em_dtype t);

/* ---- devices (lua_device.c) ---- */

/* ember.device, ember.Generator, the default generator and seeding
 * functions into module_idx; x:to (wrapping the generated dtype `to`) and
 * x:cpu into methods_idx. Call after the generated ops are registered. */
EM_HIDDEN void em_lua_register_devices(lua_State *L, int module_idx, int methods_idx);
/* Pushes d as an ember.device object. */
EM_HIDDEN void em_lua_push_device(lua_State *L, em_device d);
/* THE way the Lua layer reads tensor memory (Note [Host copies]): t itself
 * (retained) when on the cpu, else a cpu copy; NULL with the error set. */
EM_HIDDEN em_tensor *em_lua_host_tensor(em_tensor *t);

/* ---- autograd (lua_autograd.c, lua_node.c, lua_callback.c) ---- */

/* Registers the autograd methods into methods_idx, ember.autograd and the
 * grad-mode queries into module_idx (absolute indices). */
EM_HIDDEN void em_lua_register_autograd(lua_State *L, int module_idx, int methods_idx);
/* lua_serialize.c: ember.save/load (safetensors), save_npy/load_npy,
 * savez/savez_compressed/load_npz (Note [Serialized files]). */
EM_HIDDEN void em_lua_register_serialize(lua_State *L, int module_idx);
/* The module's functions that touch files, NULL-terminated: a sandboxed
 * state (ember.h) removes them. */
EM_HIDDEN extern const char *const em_lua_file_functions[];
/* Pushes the autograd property k of t (requires_grad, is_leaf, grad,
 * grad_fn, retains_grad) and returns 1, or returns 0 when k is none. */
EM_HIDDEN int em_lua_tensor_property(lua_State *L, em_tensor *t, const char *k);
/* Sets property k of t (requires_grad, grad) to the value at v; false when
 * k is not a settable property. Raises on a bad value. */
EM_HIDDEN bool em_lua_set_tensor_property(lua_State *L, em_tensor *t, const char *k, int v);
struct em_node;
/* Pushes a graph node as an "ember.Node" userdata (nil for NULL). */
EM_HIDDEN void em_lua_push_node(lua_State *L, struct em_node *n);
/* See Note [Deferred unref] in lua_callback.c: registry refs freed off the
 * Lua thread wait on a list; this unrefs the ones of L's state. Cheap when
 * the list is empty (em_lua_pending_count == 0). */
EM_HIDDEN void em_lua_drain_unrefs(lua_State *L);
EM_HIDDEN extern _Atomic int em_lua_pending_count;

/* ---- autograd internals (shared by the files split from lua_autograd.c) ----
 * lua_autograd.c  tensor autograd properties and methods (requires_grad,
 *                 grad, detach, ...), grad/inference/anomaly modes,
 *                 em_lua_register_autograd (the tables of everything below)
 * lua_callback.c  state tokens, deferred unrefs, the thread's callback
 *                 state, the protected call of Lua code from the engine
 *                 (Note [Lua callbacks from the engine], Note [Deferred unref])
 * lua_hooks.c     tensor hooks, node hooks, removable hook handles
 * lua_node.c      graph nodes as "ember.Node" userdata
 * lua_backward.c  backward, autograd.grad, autograd.dot
 * lua_function.c  custom autograd.Function and its ctx (Note [Function ctx]) */

/* A Lua state's liveness token: refcounted, marked dead when the state
 * closes (Note [Deferred unref]). */
typedef struct em_lua_token em_lua_token;
/* L's token (made once per state), as a new reference. */
EM_HIDDEN em_lua_token *em_lua_token_get(lua_State *L);
/* Whether the token's state is still open (its Lua memory valid). */
EM_HIDDEN bool em_lua_token_alive(const em_lua_token *tok);
EM_HIDDEN void em_lua_token_retain(em_lua_token *tok);
EM_HIDDEN void em_lua_token_release(em_lua_token *tok);
/* Queues registry ref for unref by tok's state (dropped when that state is
 * gone). Takes over one reference to tok. Never touches Lua: callable from
 * any thread. */
EM_HIDDEN void em_lua_defer_unref(em_lua_token *tok, int ref);
/* Makes L this thread's callback state (the state engine callbacks run
 * on; NULL: none) and returns the previous one, which the caller restores
 * when its backward returns. */
EM_HIDDEN lua_State *em_lua_set_callback_state(lua_State *L);
/* Runs body(L) with ud as its one light-userdata argument under lua_pcall
 * on this thread's callback state. Returns EM_OK (slot clear), or on a Lua
 * error (or no live state) an error status with the message in the slot;
 * what names the callback in the no-state message. */
EM_HIDDEN em_status em_lua_run_protected(em_lua_token *tok, lua_CFunction body, void *ud,
                                         const char *what);
/* A Lua value (a hook function) kept in the registry for a callback. */
typedef struct {
    em_lua_token *tok;
    int ref;
} em_lua_cb;
/* Refs the value at fn_idx; raises on out of memory. */
EM_HIDDEN em_lua_cb *em_lua_cb_new(lua_State *L, int fn_idx);
/* Frees cb (a void* for use as free_ud), deferring its unref. */
EM_HIDDEN void em_lua_cb_free(void *cb);

/* Registers the Lua function at stack index 2 as a hook on tensor t or
 * node n (exactly one is given) and pushes its removable handle
 * (lua_hooks.c). */
EM_HIDDEN int em_lua_register_hook(lua_State *L, em_tensor *t, struct em_node *n);
/* t:register_hook(fn) (lua_hooks.c). */
EM_HIDDEN int em_lua_tensor_register_hook(lua_State *L);
/* Metatables, made once per state: hook handles (lua_hooks.c), nodes
 * (lua_node.c), the Function ctx (lua_function.c). Leave the stack as is. */
EM_HIDDEN void em_lua_open_hooks(lua_State *L);
EM_HIDDEN void em_lua_open_nodes(lua_State *L);
EM_HIDDEN void em_lua_open_function(lua_State *L);
/* y:backward(...), autograd.grad(...), autograd.dot(...) (lua_backward.c). */
EM_HIDDEN int em_lua_tensor_backward(lua_State *L);
EM_HIDDEN int em_lua_autograd_grad(lua_State *L);
EM_HIDDEN int em_lua_autograd_dot(lua_State *L);
/* autograd._function_apply(def, ...) (lua_function.c). */
EM_HIDDEN int em_lua_function_apply(lua_State *L);

#endif
