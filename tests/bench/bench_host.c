/* bench_host.c -- runs tests/bench/bench.lua inside a host C program that
 * embeds libember (as a host app would), adding a wall clock `now()`. */
#include <lauxlib.h>
#include <lualib.h>
#include <stdio.h>
#include <time.h>

#include <cblas.h>
#include <stdlib.h>

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

/* sgemm_direct(n): one cblas_sgemm of two n x n float32 matrices, called
 * the way a C program would (buffers made once), so the bench can time it
 * in the same process and minute as ember's matmul. */
static float *ga, *gb, *gc;
static int gn;
static int sgemm_direct(lua_State *L) {
    int n = (int)luaL_checkinteger(L, 1);
    if (n != gn) {
        free(ga); free(gb); free(gc);
        ga = malloc(sizeof(float) * (size_t)n * n);
        gb = malloc(sizeof(float) * (size_t)n * n);
        gc = malloc(sizeof(float) * (size_t)n * n);
        if (!ga || !gb || !gc) return luaL_error(L, "sgemm_direct: out of memory");
        for (long i = 0; i < (long)n * n; i++) { ga[i] = (float)(i % 7) * 0.1f; gb[i] = (float)(i % 5) * 0.2f; }
        gn = n;
    }
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, n, n, 1, ga, n, gb, n, 0, gc, n);
    return 0;
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
    lua_register(L, "sgemm_direct", sgemm_direct);
    lua_newtable(L);
    for (int i = 2; i < argc; i++) { lua_pushstring(L, argv[i]); lua_rawseti(L, -2, i - 1); }
    lua_setglobal(L, "arg");
    int status = luaL_dofile(L, argc > 1 ? argv[1] : "tests/bench/bench.lua");
    if (status != LUA_OK) fprintf(stderr, "bench: %s\n", lua_tostring(L, -1));
    lua_close(L);
    return status == LUA_OK ? 0 : 1;
}
