/* fuzz_lua.c -- libFuzzer target: the Lua API. The bytes drive
 * tests/fuzz/driver.lua, which turns them into calls of every ember op and
 * method with odd arguments (see there). Only Lua errors are allowed.
 * Run from the repository root (make fuzz). */
#include <lauxlib.h>
#include <lualib.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "core/em_core.h"
#include "lua/em_lua.h"

static lua_State *L;
static int driver_ref;
static unsigned long runs;

static void init(void) {
    L = luaL_newstate();
    luaL_openlibs(L);
    luaL_requiref(L, "ember", luaopen_ember, 1);
    lua_pop(L, 1);
    em_memory_set_limit((size_t)256 << 20); /* huge requests are errors, not the fuzzer's OOM */
    if (luaL_dofile(L, "tests/fuzz/driver.lua") != LUA_OK) {
        fprintf(stderr, "fuzz_lua: %s\n", lua_tostring(L, -1));
        exit(1);
    }
    driver_ref = luaL_ref(L, LUA_REGISTRYINDEX);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (!L) init();
    lua_rawgeti(L, LUA_REGISTRYINDEX, driver_ref);
    lua_pushlstring(L, (const char *)data, size);
    if (lua_pcall(L, 1, 0, 0) != LUA_OK) {
        /* the driver catches every op error itself: an error here is the
         * driver's own (e.g. out of memory in Lua), not a crash */
        lua_pop(L, 1);
    }
    lua_settop(L, 0);
    if (++runs % 64 == 0) lua_gc(L, LUA_GCCOLLECT, 0);
    return 0;
}
