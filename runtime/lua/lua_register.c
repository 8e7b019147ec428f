/* lua_register.c -- helpers the generated registration code
 * (build/gen/em_lua_ops.c, em_lua_register_ops) calls: namespaces of
 * function variants (ops.yaml `namespace:`). */
#include <string.h>

#include "lua/em_lua.h"
#include "lua/em_lua_int.h"

/* Whether lua/stdlib has a chunk for module "ember.<ns>" (it then owns
 * package.loaded's entry; see Note [Stdlib modules] in lua_module.c). */
static bool stdlib_has(const char *ns) {
    for (int i = 0; em_lua_stdlib[i].name; i++)
        if (strcmp(em_lua_stdlib[i].name, ns) == 0) return true;
    return false;
}

void em_lua_push_namespace(lua_State *L, int module_idx, const char *ns) {
    module_idx = lua_absindex(L, module_idx);
    lua_pushvalue(L, module_idx);
    const char *p = ns;
    while (*p) {
        const char *dot = strchr(p, '.');
        size_t n = dot ? (size_t)(dot - p) : strlen(p);
        lua_pushlstring(L, p, n);
        if (lua_rawget(L, -2) != LUA_TTABLE) {
            lua_pop(L, 1);
            lua_newtable(L);
            lua_pushlstring(L, p, n);
            lua_pushvalue(L, -2);
            lua_rawset(L, -4); /* parent[part] = the new table */
        }
        lua_remove(L, -2); /* the parent */
        p = dot ? dot + 1 : p + n;
    }
    if (*ns && !stdlib_has(ns)) { /* require "ember.nn.functional" */
        luaL_getsubtable(L, LUA_REGISTRYINDEX, LUA_LOADED_TABLE);
        lua_pushfstring(L, "ember.%s", ns);
        if (lua_rawget(L, -2) == LUA_TNIL) {
            lua_pushfstring(L, "ember.%s", ns);
            lua_pushvalue(L, -4);
            lua_rawset(L, -4);
        }
        lua_pop(L, 2);
    }
}

/* Note [Binding upvalue]
 * Every generated binding is a C closure whose upvalue 1 is the tensor
 * metatable, as the metamethods' is (Note [Metamethods], emit_lua.c): the
 * generated code sets a result's metatable by pushing that upvalue
 * (em_lua_push_tensor_uv) instead of looking the metatable up in the
 * registry. (Tensor arguments are recognised by their block, Note [Tensor
 * userdata], em_lua_check_tensor_fast.) One closure
 * per C function, shared by all the names it is registered under, so that
 * ember.tanh == ember.nn.functional.tanh == ember.Tensor.tanh as before.
 * A binding called without the upvalue (none is registered so) only
 * takes the registry path. */

void em_lua_bindings_begin(lua_State *L) {
    if (lua_rawgetp(L, LUA_REGISTRYINDEX, &em_lua_mt_key) != LUA_TTABLE)
        luaL_error(L, "ember: the tensor metatable must exist before the bindings are registered");
    lua_newtable(L); /* C function -> its closure */
}

void em_lua_push_binding(lua_State *L, int base, lua_CFunction f) {
    void *key;
    _Static_assert(sizeof key == sizeof f, "function pointers fit a light userdata");
    memcpy(&key, &f, sizeof key);
    if (lua_rawgetp(L, base + 1, key) != LUA_TNIL) return;
    lua_pop(L, 1);
    lua_pushvalue(L, base); /* the metatable */
    lua_pushcclosure(L, f, 1);
    lua_pushvalue(L, -1);
    lua_rawsetp(L, base + 1, key);
}
