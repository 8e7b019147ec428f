/* bench_host.c -- runs tests/bench/bench.lua inside a host C program that
 * embeds libember (as a host app would), adding a wall clock `now()`. */
#include <lauxlib.h>
#include <lualib.h>
#include <stdio.h>
#include <time.h>

#include "lua/em_lua.h"

static int l_now(lua_State *L) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    lua_pushnumber(L, ts.tv_sec + ts.tv_nsec * 1e-9);
    return 1;
}

int main(int argc, char **argv) {
    lua_State *L = luaL_newstate();
    luaL_openlibs(L);
    luaL_requiref(L, "ember", luaopen_ember, 1);
    lua_pop(L, 1);
    lua_register(L, "now", l_now);
    lua_newtable(L);
    for (int i = 2; i < argc; i++) { lua_pushstring(L, argv[i]); lua_rawseti(L, -2, i - 1); }
    lua_setglobal(L, "arg");
    int status = luaL_dofile(L, argc > 1 ? argv[1] : "tests/bench/bench.lua");
    if (status != LUA_OK) fprintf(stderr, "bench: %s\n", lua_tostring(L, -1));
    lua_close(L);
    return status == LUA_OK ? 0 : 1;
}
