/* em_lua_bind.h -- the helpers every generated binding file needs
 * (included only by build/gen/em_lua_ops.c, emitted by codegen/emit_lua.c):
 * argument slots (positional or from the options table), presence tests,
 * and the common argument errors. See Note [Lua argument binding] in
 * codegen/emit_lua.c. Static inline: the generated bindings inline them.
 */
#ifndef EM_LUA_BIND_H
#define EM_LUA_BIND_H

#include <stdbool.h>
#include <string.h>

#include "autograd/em_autograd.h"
#include "lua/em_lua.h"
#include "lua/em_lua_int.h"

/* ---- helpers shared by the bindings (see Note [Lua argument binding]) ---- */

/* The stack index of argument name: the next positional slot when one is
 * left (positional arguments only; advances *pos), else the options-table
 * field pushed onto the stack, else 0. Raises when given both ways. */
static inline int arg_slot(lua_State *L, int *pos, int top, int opt, const char *op,
                           const char *name, bool positional) {
    int idx = 0;
    if (positional && *pos <= top) idx = (*pos)++;
    if (opt) {
        if (lua_getfield(L, opt, name) != LUA_TNIL) {
            if (idx)
                return luaL_error(L, "%s: argument '%s' given both by position and in the options table",
                                  op, name);
            return lua_gettop(L);
        }
        lua_pop(L, 1);
    }
    return idx;
}

/* Whether slot idx holds a value (0 and nil mean absent). */
static inline bool arg_given(lua_State *L, int idx) { return idx && !lua_isnil(L, idx); }

/* Whether every key of the options table at opt is one of names. */
static inline __attribute__((unused)) bool options_known(lua_State *L, int opt, const char *const *names) {
    bool ok = true;
    lua_pushnil(L);
    while (ok && lua_next(L, opt)) {
        lua_pop(L, 1);
        bool known = false;
        if (lua_type(L, -1) == LUA_TSTRING)
            for (int i = 0; names[i]; i++)
                if (strcmp(names[i], lua_tostring(L, -1)) == 0) known = true;
        ok = known;
    }
    if (!ok) lua_pop(L, 1); /* the key lua_next left */
    return ok;
}

static inline int missing(lua_State *L, const char *op, const char *name) {
    return luaL_error(L, "%s: missing argument '%s'", op, name);
}

static inline int too_many(lua_State *L, const char *op, int most, int got) {
    return luaL_error(L, "%s: expected at most %d arguments, got %d", op, most, got);
}

/* ---- tensor arguments of generated bindings ---- */

/* em_lua_check_tensor with a fast path for an open tensor (Note [Tensor
 * userdata]: recognised by its block, without the metatable). */
static inline em_tensor *em_lua_check_tensor_fast(lua_State *L, int idx, const char *op, const char *arg,
                                                em_lua_argtmp *tmp) {
    em_tensor **slot = em_lua_toslot(L, idx);
    if (slot && *slot) return *slot;
    return em_lua_check_tensor(L, idx, op, arg, tmp); /* numbers, errors, closed tensors */
}

/* em_lua_opt_tensor with the same fast path. */
static inline em_tensor *em_lua_opt_tensor_fast(lua_State *L, int idx, const char *op, const char *arg,
                                              em_lua_argtmp *tmp) {
    if (lua_isnoneornil(L, idx)) return NULL;
    return em_lua_check_tensor_fast(L, idx, op, arg, tmp);
}

/* em_lua_push_tensor setting the metatable from upvalue 1 (the registry's
 * when the running function has no such upvalue). Defined in lua_tensor.c. */
void em_lua_push_tensor_uv(lua_State *L, em_tensor *t, const char *op);

/* Raises the conversion's own error for a value that cannot become a tensor,
 * before any temporary exists; values that can pass untouched. */
static inline void precheck_tensor(lua_State *L, int idx, const char *op, const char *name,
                                   bool optional, em_lua_argtmp *tmp) {
    int t = lua_type(L, idx);
    if (t == LUA_TNUMBER || t == LUA_TBOOLEAN || (optional && t <= LUA_TNIL))
        return;
    em_tensor **slot = em_lua_toslot(L, idx);
    if ((slot && *slot) || em_lua_totensor(L, idx))
        return;
    (void)em_lua_check_tensor(L, idx, op, name, tmp); /* raises */
}

/* Factories take requires_grad=true in their options table (PyTorch's
 * TensorOptions): the new tensor becomes a leaf that requires grad. On
 * failure releases r and returns false with the error set. */
static inline __attribute__((unused)) bool set_requires_grad(lua_State *L, int opt, em_tensor *r, const char *op) {
    int t = lua_getfield(L, opt, "requires_grad");
    bool on = lua_toboolean(L, -1);
    lua_pop(L, 1);
    if (t != LUA_TNIL && t != LUA_TBOOLEAN) {
        em_tensor_release(r);
        return luaL_error(L, "bad option 'requires_grad' to '%s' (boolean expected, got %s)", op,
                          lua_typename(L, t));
    }
    if (on && em_set_requires_grad(r, true) != EM_OK) {
        em_tensor_release(r);
        return false;
    }
    return true;
}

/* ---- metamethod entries (Note [Metamethods] in codegen/emit_lua.c) ---- */

/* Pushes t (taking the reference) as a tensor userdata whose metatable is
 * upvalue 1 of the running metamethod; t == NULL raises op's error.
 * Defined in lua_tensor.c. */
void em_lua_push_result(lua_State *L, em_tensor *t, const char *op);
/* Pushes the value of r, a one-element result, as a Lua boolean and
 * releases r; NULL raises op's error (Note [Boolean results], emit_lua.c). */
void em_lua_push_bool_result(lua_State *L, em_tensor *r, const char *op);

/* Runs the collection step earlier pushes owe (Note [GC pressure] in
 * lua_tensor.c). Defined in lua_tensor.c. */

/* Operand idx of a metamethod: the tensor directly when it is an open
 * tensor (the fast path), else what em_lua_check_tensor makes of it
 * (a Lua number becomes a wrapped number owned by tmp; others raise).
 * Reading operand 1 -- every metamethod's first step -- first runs the
 * collection step a push owes, as a generated binding's start does: a
 * loop such as `y = p / b` then frees the previous result before the op
 * allocates its output, and reuses that block (Note [GC pressure]:
 * otherwise the output alternates between two blocks, a working set too
 * large for the cache at 1e6 floats). Operands are on Lua's stack, so the
 * step cannot free them. */
static inline em_tensor *em_lua_mm_operand(lua_State *L, int idx, const char *op, const char *name,
                                           em_lua_argtmp *tmp) {
    if (idx == 1) em_lua_gc_entry(L);
    return em_lua_check_tensor_fast(L, idx, op, name, tmp);
}

#endif
