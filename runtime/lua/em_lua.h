/* em_lua.h -- the Lua binding layer: tensor userdata, argument conversion
 * used by the generated bindings (build/gen/em_lua_ops.c), luaopen_ember.
 * Written only against the runtime's public headers and lua.h/lauxlib.h.
 *
 * Error messages follow Lua's voice (see STYLE.md):
 *   bad argument #2 to 'add' (other: tensor expected, got string)
 *   add: shapes {2,3} and {4,5} cannot broadcast
 * Argument numbers count Lua stack positions (self is #1 for methods).
 */
#ifndef EM_LUA_H
#define EM_LUA_H

#include <lauxlib.h>
#include <lua.h>

#include "core/em_core.h"
#include "dispatch/em_dispatch.h"

#define EM_LUA_TENSOR_MT "ember.Tensor"

/* ---- tensors as userdata ---- */

/* The tensor at idx (borrowed), or NULL when the value is not an ember
 * tensor. A tensor closed by __close raises "tensor used after close". */
EM_API em_tensor *em_lua_totensor(lua_State *L, int idx);
/* Pushes t as a new userdata, taking over the caller's reference (the
 * userdata's __gc / __close releases it). t == NULL raises the thread's
 * error as a Lua error prefixed by op (see em_lua_error). */
EM_API void em_lua_push_tensor(lua_State *L, em_tensor *t, const char *op);

/* Raises the thread's error slot as a Lua error: "op: message" (the
 * message already names the op when it starts with "op:"). Never returns. */
EM_API int em_lua_error(lua_State *L, const char *op);

/* ---- argument conversion for generated bindings ----
 * Each check_ function raises a Lua error naming op, the argument's
 * position and name, and what was expected. Values that do not exist yet
 * as tensors are created as owned references that the binding releases:
 * the caller passes a em_lua_argtmp to collect them. */

typedef struct {
    em_tensor *owned[EM_STACK_MAX]; /* wrapped numbers made for Tensor args */
    int n;
    int64_t lists[EM_STACK_MAX][EM_MAX_DIMS]; /* backing for em_intlist args */
    int nlists;
} em_lua_argtmp;
/* Releases every tensor the conversions made (call before returning or
 * before raising an error once conversions are done). */
EM_API void em_lua_argtmp_release(em_lua_argtmp *tmp);

/* Tensor: an ember tensor (borrowed), or a Lua number/boolean turned into a
 * wrapped-number 0-dim tensor (float64 for floats, int64 for integers,
 * bool for booleans; owned by tmp). */
EM_API em_tensor *em_lua_check_tensor(lua_State *L, int idx, const char *op,
                                      const char *arg, em_lua_argtmp *tmp);
/* Tensor[]: a Lua array of ember tensors (borrowed; the array's storage is
 * a userdata pushed onto the stack, collected with it). An element that is
 * not a tensor raises "op: argument 'arg' element K is not a tensor (got T)"
 * (see Note [Tensor lists] in codegen/codegen.h). */
EM_API em_tensorlist em_lua_check_tensorlist(lua_State *L, int idx, const char *op,
                                             const char *arg);
/* A Tensor?[] argument (Note [Tensor lists]): an array whose entries are
 * tensors or nil (None) up to its length #t (lua_rawlen: a trailing nil is
 * not counted, so write { nil, i } or { i, nil, j }); nil entries are NULL.
 * Raises naming op, arg and the element on anything else. */
EM_API em_tensorlist em_lua_check_opt_tensorlist(lua_State *L, int idx, const char *op, const char *arg);
/* float[]?: a Lua array of numbers, or one number (a list of one); the
 * storage is a userdata pushed onto the stack (collected with it). */
EM_API em_floatlist em_lua_check_floatlist(lua_State *L, int idx, const char *op, const char *arg);
/* str{a,b,c}: a Lua string that must be one of choices (NULL-terminated);
 * returns the matching entry of choices (static), else raises "bad argument
 * #idx to 'op' (arg: expected one of "a", "b", "c", got "x")". choices NULL
 * (a plain str argument): any string, returned as Lua's (valid while the
 * value stays on the stack). */
EM_API const char *em_lua_check_choice(lua_State *L, int idx, const char *op, const char *arg,
                                       const char *const *choices);
/* Pushes the k results of a multi-result op as k values (taking over the
 * references); r == NULL raises the op's error after releasing outs; a NULL
 * further result (one the caller did not ask for, Note [Optional results]
 * in runtime/kernels/composite_pool.c) is pushed as nil. */
EM_API void em_lua_push_results(lua_State *L, em_tensor *r, em_tensor **outs, int k,
                                const char *op);
/* Pushes a Tensor[] result as a Lua array (taking over arr and its n
 * tensors); arr == NULL raises the op's error. */
EM_API void em_lua_push_tensor_array(lua_State *L, em_tensor **arr, int n, const char *op);
/* Raises "op: no overload matches the arguments (types); expected one of:
 * sig1 | sig2 ..." for an overloaded name (schemas NULL-terminated). */
EM_API int em_lua_no_overload(lua_State *L, const char *op, const char *const *schemas);

/* Tensor?: nil gives NULL. */
EM_API em_tensor *em_lua_opt_tensor(lua_State *L, int idx, const char *op,
                                    const char *arg, em_lua_argtmp *tmp);
/* Scalar: a Lua number (integer or float subtype kept), boolean, or a
 * one-element tensor. */
EM_API em_scalar em_lua_check_scalar(lua_State *L, int idx, const char *op, const char *arg);
EM_API int64_t em_lua_check_int(lua_State *L, int idx, const char *op, const char *arg);
EM_API double em_lua_check_float(lua_State *L, int idx, const char *op, const char *arg);
EM_API bool em_lua_check_bool(lua_State *L, int idx, const char *op, const char *arg);
/* dim / index: a Lua integer, 1-based or negative from the end; 0 is an
 * error. Returns the 0-based C value (negative values pass through). */
EM_API int64_t em_lua_check_dim(lua_State *L, int idx, const char *op, const char *arg);
/* endindex: inclusive 1-based end -> exclusive 0-based end; -1 (the last
 * element) -> INT64_MAX meaning "to the end". */
EM_API int64_t em_lua_check_endindex(lua_State *L, int idx, const char *op, const char *arg);
EM_API em_dtype em_lua_check_dtype(lua_State *L, int idx, const char *op, const char *arg);
/* Devices (lua_device.c): a device string ("cpu", "cuda:1") or an
 * ember.device object; nil gives em_no_device(). A generator: an
 * ember.Generator object (borrowed: the argument keeps it alive), or NULL
 * for nil (the default generator). Both raise on anything else. */
EM_API em_device em_lua_check_device(lua_State *L, int idx, const char *op, const char *arg);
EM_API em_generator *em_lua_check_generator(lua_State *L, int idx, const char *op, const char *arg);
/* int[] / dim[]: a table of integers, or (when varargs is true) the
 * integers from idx up to the first non-integer. *consumed is how many
 * stack slots were used. Dims (is_dim) are mapped to 0-based. The list's
 * storage lives in tmp. */
EM_API em_intlist em_lua_check_intlist(lua_State *L, int idx, const char *op, const char *arg,
                                       bool varargs, bool is_dim, int *consumed,
                                       em_lua_argtmp *tmp);

/* The index of a trailing options table ({keepdim = true}): the last value
 * on the stack when it is a plain table (not a tensor) whose [1] is nil;
 * 0 when there is none. */
EM_API int em_lua_options_index(lua_State *L);
/* The options index for an op with nreq required positional arguments: an
 * EMPTY trailing table in one of the first nreq slots is an argument (a
 * 0-dim size, ember.zeros({})), not options. */
EM_API int em_lua_options_index_req(lua_State *L, int nreq);
/* Raises "bad option 'name' to 'op' (expected one of: a, b)" when the
 * options table at opt holds a key not in the NULL-terminated names list. */
EM_API void em_lua_check_option_names(lua_State *L, int opt, const char *op,
                                      const char *const *names);

/* ---- the module ---- */

/* Generated: registers every schema op's function variants into the table
 * at module_idx and its method variants into the table at methods_idx. */
EM_API void em_lua_register_ops(lua_State *L, int module_idx, int methods_idx);
/* Pushes the table module.NS for a dotted namespace ("nn.functional"),
 * creating the missing tables on the way; ns "" pushes the module itself.
 * A new table is also stored as package.loaded["ember." .. NS], so that
 * require "ember.nn.functional" finds it. */
EM_API void em_lua_push_namespace(lua_State *L, int module_idx, const char *ns);
/* Note [Binding upvalue] (lua_register.c): em_lua_bindings_begin pushes
 * the tensor metatable and a cache table (base: the metatable's index);
 * em_lua_push_binding pushes f's closure with the metatable as upvalue 1,
 * one per function. The caller pops both when done. */
EM_API void em_lua_bindings_begin(lua_State *L);
EM_API void em_lua_push_binding(lua_State *L, int base, lua_CFunction f);
/* Generated: for help(): op name -> "signature\n  doc" pairs, NULL-ended. */
EM_API extern const char *const em_lua_op_docs[][3]; /* {name, schema, doc} */
/* Generated: the tensor metamethods (__add, ...) of ops.yaml `metamethod:`
 * entries; registered with the tensor metatable as upvalue 1 (Note
 * [Metamethods] in codegen/emit_lua.c). */
EM_API extern const luaL_Reg em_lua_op_metamethods[];

/* Generated from the files in lua/stdlib (codegen/embed_lua.sh): Lua chunks that
 * luaopen_ember runs with the module as their argument. NULL-terminated. */
typedef struct { const char *name; const char *src; size_t len; } em_lua_chunk;
EM_API extern const em_lua_chunk em_lua_stdlib[];
/* Generated (codegen): names of the ops with backward formulas, NULL-ended. */
EM_API extern const char *const em_lua_differentiable_ops[];

/* Opens the ember module (the table is left on the stack). */
EM_API int luaopen_ember(lua_State *L);

#endif
