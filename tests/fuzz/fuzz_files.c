/* fuzz_files.c -- libFuzzer target: the file readers. The first byte picks
 * the reader (ember.load: safetensors, load_npy, load_npz, data.read_csv
 * with or without a header, data.read_lines), the rest is the file. Only
 * Lua errors are allowed. Seeds: tests/fuzz/corpus/files. */
#include <lauxlib.h>
#include <lualib.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "core/em_core.h"
#include "lua/em_lua.h"

static lua_State *L;
static char path[64];

static const char *const readers[] = {
    "return ember.load(...)", "return ember.load_npy(...)", "return ember.load_npz(...)",
    "return ember.data.read_csv(...)", "return ember.data.read_csv(..., {header = true, dtype = 'int64'})",
    "return ember.data.read_lines(...)",
};
#define NREADERS (int)(sizeof readers / sizeof readers[0])

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (!L) {
        L = luaL_newstate();
        luaL_openlibs(L);
        luaL_requiref(L, "ember", luaopen_ember, 1);
        lua_pop(L, 1);
        em_memory_set_limit((size_t)256 << 20);
        snprintf(path, sizeof path, "/tmp/ember-fuzz-files-%d", (int)getpid());
    }
    if (size == 0) return 0;
    FILE *f = fopen(path, "wb");
    if (!f) return 0;
    fwrite(data + 1, 1, size - 1, f);
    fclose(f);
    if (luaL_loadstring(L, readers[data[0] % NREADERS]) != LUA_OK) abort(); /* a bug in this file */
    lua_pushstring(L, path);
    lua_pcall(L, 1, LUA_MULTRET, 0); /* an error is a fine outcome */
    lua_settop(L, 0);
    lua_gc(L, LUA_GCCOLLECT, 0);
    return 0;
}
