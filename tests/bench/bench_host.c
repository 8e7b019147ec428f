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

/* The floor of a per-op cost, measured beside ember (as ../shared/bench's
 * luacall.c does): `c = a + b` through __add on a userdata with __gc that
 * allocates a new userdata and does nothing else. */
static int floor_gc(lua_State *L) { (void)L; return 0; }
static int floor_add(lua_State *L) {
    luaL_checkudata(L, 1, "bench.Floor");
    luaL_checkudata(L, 2, "bench.Floor");
    void **p = lua_newuserdatauv(L, 64, 0);
    *p = NULL;
    luaL_setmetatable(L, "bench.Floor");
    return 1;
}
static int floor_new(lua_State *L) {
    void **p = lua_newuserdatauv(L, 64, 0);
    *p = NULL;
    luaL_setmetatable(L, "bench.Floor");
    return 1;
}

int main(int argc, char **argv) {
    lua_State *L = luaL_newstate();
    luaL_openlibs(L);
    luaL_requiref(L, "ember", luaopen_ember, 1);
    lua_pop(L, 1);
    lua_register(L, "now", l_now);
    luaL_newmetatable(L, "bench.Floor");
    lua_pushcfunction(L, floor_gc);
    lua_setfield(L, -2, "__gc");
    lua_pushcfunction(L, floor_add);
    lua_setfield(L, -2, "__add");
    lua_pop(L, 1);
    lua_register(L, "floor_new", floor_new);
    lua_newtable(L);
    for (int i = 2; i < argc; i++) { lua_pushstring(L, argv[i]); lua_rawseti(L, -2, i - 1); }
    lua_setglobal(L, "arg");
    int status = luaL_dofile(L, argc > 1 ? argv[1] : "tests/bench/bench.lua");
    if (status != LUA_OK) fprintf(stderr, "bench: %s\n", lua_tostring(L, -1));
    lua_close(L);
    return status == LUA_OK ? 0 : 1;
}
