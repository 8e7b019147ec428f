/* host.c -- embedding ember in a C program: a host buffer becomes a tensor
 * without a copy, C calls an op, and Lua code sees the same memory.
 * Build against an installed ember (make install):
 *   cc host.c -I/usr/local/include/ember -I/usr/include/lua5.4 -lember -llua5.4 */
#include <lauxlib.h>
#include <lualib.h>
#include <stdio.h>

#include "em_ops.h"
#include "lua/em_lua.h"

int main(void) {
    float buf[4] = { 1, 2, 3, 4 };
    em_tensor *t = em_tensor_from_blob(buf, 1, (int64_t[]){ 4 }, NULL, EM_FLOAT32);
    em_tensor *s = t ? em_sum(t, (em_intlist){ NULL, -1 }, false, EM_DTYPE_NONE) : NULL;
    if (!s) {
        fprintf(stderr, "host: %s\n", em_error_message());
        return 1;
    }
    printf("sum from C: %g\n", *(float *)em_tensor_data(s));

    lua_State *L = luaL_newstate();
    luaL_openlibs(L);
    luaL_requiref(L, "ember", luaopen_ember, 1);
    lua_pop(L, 1);
    em_lua_push_tensor(L, em_tensor_retain(t), "host"); /* Lua gets its own reference */
    lua_setglobal(L, "host");
    int rc = luaL_dostring(L, "print('from Lua:', host * 2)");
    buf[0] = 100; /* the tensor is a view of buf: Lua sees the change */
    if (rc == LUA_OK) rc = luaL_dostring(L, "print('shared memory:', host)");
    if (rc != LUA_OK) fprintf(stderr, "host: %s\n", lua_tostring(L, -1));
    lua_close(L);
    em_tensor_release(s);
    em_tensor_release(t);
    return rc == LUA_OK ? 0 : 1;
}
