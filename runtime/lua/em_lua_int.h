/* em_lua_int.h -- private helpers shared by the files of runtime/lua.
 * Not installed, not included outside runtime/lua. */
#ifndef EM_LUA_INT_H
#define EM_LUA_INT_H

#include "lua/em_lua.h"

/* Registry keys (strings, like luaL_newmetatable's). */
#define EM_LUA_MODULE_KEY "ember.module"          /* the module table */
#define EM_LUA_METHODS_KEY "ember.Tensor.methods" /* methods table, also ember.Tensor */

/* Note [Tensor userdata]
 * A tensor is a full userdata of exactly one em_tensor* (one reference)
 * with the metatable EM_LUA_TENSOR_MT. __gc and __close release it and
 * store NULL, so a closed tensor is still recognisably an ember tensor and
 * every use of it raises "tensor used after close". */

/* Its address is the registry key of the tensor metatable (also stored
 * under EM_LUA_TENSOR_MT): a light-userdata lookup, no string hashing. */
EM_HIDDEN extern const char em_lua_mt_key;
/* The slot of an ember tensor userdata at idx, or NULL when the value is
 * not one. The slot may hold NULL (closed). */
EM_HIDDEN em_tensor **em_lua_toslot(lua_State *L, int idx);
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

/* Makes the tensor metatable (once per state) with the methods table as
 * __index's first stop; leaves nothing on the stack. methods_idx is an
 * absolute index. */
EM_HIDDEN void em_lua_open_tensor(lua_State *L, int methods_idx);
/* Hand-written tensor methods (item, tolist, size, float, ...). */
EM_HIDDEN void em_lua_register_methods(lua_State *L, int methods_idx);
/* __tostring: pushes the PyTorch-style text of t. */
EM_HIDDEN void em_lua_push_tensor_string(lua_State *L, const em_tensor *t);
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

/* ---- autograd (lua_autograd.c) ---- */

/* Registers the autograd methods into methods_idx, ember.autograd and the
 * grad-mode queries into module_idx (absolute indices). */
EM_HIDDEN void em_lua_register_autograd(lua_State *L, int module_idx, int methods_idx);
/* Pushes the autograd property k of t (requires_grad, is_leaf, grad,
 * grad_fn, retains_grad) and returns 1, or returns 0 when k is none. */
EM_HIDDEN int em_lua_tensor_property(lua_State *L, em_tensor *t, const char *k);
/* Sets property k of t (requires_grad, grad) to the value at v; false when
 * k is not a settable property. Raises on a bad value. */
EM_HIDDEN bool em_lua_set_tensor_property(lua_State *L, em_tensor *t, const char *k, int v);
struct em_node;
/* Pushes a graph node as an "ember.Node" userdata (nil for NULL). */
EM_HIDDEN void em_lua_push_node(lua_State *L, struct em_node *n);
/* See Note [Deferred unref] in lua_autograd.c: registry refs freed off the
 * Lua thread wait on a list; this unrefs the ones of L's state. Cheap when
 * the list is empty (em_lua_pending_count == 0). */
EM_HIDDEN void em_lua_drain_unrefs(lua_State *L);
EM_HIDDEN extern _Atomic int em_lua_pending_count;

#endif
