/* lua_register.c -- helpers the generated registration code
 * (build/gen/em_lua_ops.c, em_lua_register_ops) calls: namespaces of
 * function variants (ops.yaml `namespace:`). */
#include <string.h>

#include "lua/em_lua.h"

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
