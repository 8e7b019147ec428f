/* fuzz_shell.c -- libFuzzer target: the shell's line handling, through the
 * seam of Note [Shell line seam] (repl/repl.h). The bytes are lines typed
 * at the shell: em_repl_feed runs them as the interactive loop would
 * ("=expr", "%" commands, expressions printed, continuation lines of
 * incomplete chunks, errors reported), then every line holding a tab is
 * completed with the cursor at its first tab (em_repl_completions).
 *
 * The state is a sandboxed one (ember_open .sandbox: no files, no
 * processes, no C modules) with an instruction budget per input; print and
 * io.write (what ember.shell prints with) write into a buffer that is
 * dropped, and error reports go to /dev/null. What must hold: no crash, no
 * sanitizer report or leak, and no error escaping the line loop (in the
 * shell it would end the session; main.c runs the loop under pcall) other
 * than Lua's "not enough memory" in the shell's own C code, which lua.c
 * shares. A self-test at start (known lines, known output and completions)
 * makes sure the seam runs the shell's code. Run from the repository root. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <lauxlib.h>
#include <lua.h>

#include "core/em_core.h"
#include "ember.h"
#include "repl.h"

#define BUDGET 2000000 /* Lua VM instructions per input */
#define STEP 1000

static ember_state *S;
static lua_State *L;
static long budget_used;
static char out[1 << 16]; /* what print/io.write printed (the start of it) */
static size_t nout;

static void budget_hook(lua_State *l, lua_Debug *ar) {
    (void)ar;
    budget_used += STEP;
    if (budget_used <= BUDGET) return;
    lua_sethook(l, budget_hook, LUA_MASKCOUNT, 1); /* pcall cannot swallow it for long */
    luaL_error(l, "instruction budget exceeded");
}

static void emit(const char *s, size_t n) {
    if (n > sizeof out - 1 - nout) n = sizeof out - 1 - nout;
    memcpy(out + nout, s, n);
    nout += n;
    out[nout] = '\0';
}

/* print(...) into the buffer, as Lua's print: tostring'ed, tabs, newline */
static int sink_print(lua_State *l) {
    int n = lua_gettop(l);
    for (int i = 1; i <= n; i++) {
        size_t len;
        const char *s = luaL_tolstring(l, i, &len);
        if (i > 1) emit("\t", 1);
        emit(s, len);
        lua_pop(l, 1);
    }
    emit("\n", 1);
    return 0;
}

/* io.write(...) into the buffer: strings and numbers only, as io.write */
static int sink_write(lua_State *l) {
    int n = lua_gettop(l);
    for (int i = 1; i <= n; i++) {
        size_t len;
        const char *s = luaL_checklstring(l, i, &len);
        emit(s, len);
    }
    return 0;
}

static void open_state(void) {
    ember_options o = { .sandbox = 1, .memory_limit = 64 << 20 };
    S = ember_open(&o);
    if (!S) {
        fprintf(stderr, "fuzz_shell: ember_open: %s\n", ember_error_message());
        abort();
    }
    L = ember_lua(S);
    lua_pushcfunction(L, sink_print);
    lua_setglobal(L, "print");
    lua_createtable(L, 0, 1);
    lua_pushcfunction(L, sink_write);
    lua_setfield(L, -2, "write");
    lua_setglobal(L, "io");
}

static int feed_k(lua_State *l) {
    em_repl_feed(l, (const char *)lua_touserdata(l, 1), (size_t)lua_tointeger(l, 2));
    return 0;
}

/* Feeds n bytes under lua_pcall, as main.c's pmain runs the loop; an
 * error that escapes the loop is a bug unless it is Lua's memory error. */
static void feed(const char *buf, size_t n) {
    budget_used = 0;
    lua_sethook(L, budget_hook, LUA_MASKCOUNT, STEP);
    lua_pushcfunction(L, feed_k);
    lua_pushlightuserdata(L, (void *)buf);
    lua_pushinteger(L, (lua_Integer)n);
    int st = lua_pcall(L, 2, 0, 0);
    lua_sethook(L, NULL, 0, 0);
    if (st != LUA_OK) {
        const char *msg = lua_tostring(L, -1);
        if (st == LUA_ERRMEM || (msg && strstr(msg, "not enough memory"))) {
            lua_settop(L, 0);
            return;
        }
        fprintf(stderr, "fuzz_shell: an error escaped the shell's line loop (the shell would exit): %s\n",
                msg ? msg : "(not a string)");
        abort();
    }
    lua_settop(L, 0);
}

typedef struct {
    char list[4096]; /* the candidates, space-separated */
    size_t n;
} cands;

static void add_cand(void *ctx, const char *c) {
    cands *k = ctx;
    size_t len = strlen(c);
    if (k->n + len + 2 >= sizeof k->list) return;
    memcpy(k->list + k->n, c, len);
    k->n += len;
    k->list[k->n++] = ' ';
    k->list[k->n] = '\0';
}

static int complete_line(const char *line, size_t point, cands *k) {
    k->n = 0;
    k->list[0] = '\0';
    return em_repl_completions(L, line, point, add_cand, k);
}

#define SELF_CHECK(cond, ...) \
    do { \
        if (!(cond)) { \
            fprintf(stderr, "fuzz_shell: self-test failed: " __VA_ARGS__); \
            fprintf(stderr, "\noutput was:\n%s\n", out); \
            abort(); \
        } \
    } while (0)

/* Known lines, known output: the seam must run the shell's own code. */
static void self_test(void) {
    static const char script[] =
        "x = 2\n"
        "=x + 1\n"                 /* =expr */
        "x * 10\n"                 /* an expression prints, becomes _ */
        "_ + 1\n"
        "for i = 1, 2 do\n"        /* continuation lines */
        "  print('i', i)\n"
        "end\n"
        "%timing\n"                /* a shell command */
        "{a = 1, 'b'}\n"           /* tables print as Lua literals */
        "error('boom')\n"          /* an error is reported, the loop goes on */
        "setmetatable(_G, {__newindex = function() error('no globals') end, __index = function() error('no') end}) == _G\n"
        "7\n"                      /* _ is set raw: the shell survives */
        "_\n"
        "return 'end'\n";
    nout = 0;
    out[0] = '\0';
    feed(script, sizeof script - 1);
    SELF_CHECK(strcmp(out, "3\n20\n21\ni\t1\ni\t2\ntiming is off\n{\"b\", a = 1}\ntrue\n7\n7\n\"end\"\n") == 0,
               "the fed lines printed something else");
    ember_close(S); /* a fresh state without the hostile metatable */
    open_state();
    cands k;
    SELF_CHECK(complete_line("emb", 3, &k) >= 1 && strstr(k.list, "ember ") != NULL, "completion of emb: %s", k.list);
    SELF_CHECK(complete_line("y = ember.zeros_l", 17, &k) == 1 && strcmp(k.list, "ember.zeros_like ") == 0,
               "completion of ember.zeros_l: %s", k.list);
    SELF_CHECK(complete_line("x = \"da", 7, &k) == -1, "completion inside a string");
    SELF_CHECK(complete_line("whi", 3, &k) == 1 && strcmp(k.list, "while ") == 0, "keyword: %s", k.list);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    static unsigned long runs;
    if (!S) {
        em_memory_set_limit((size_t)256 << 20); /* huge tensors are errors, not the fuzzer's OOM */
        em_repl_errors = fopen("/dev/null", "w");
        open_state();
        self_test();
    } else if (runs % 64 == 0) { /* a fresh state now and then: globals pile up */
        ember_close(S);
        open_state();
    }
    runs++;
    nout = 0;
    feed((const char *)data, size);
    /* Tab at the first tab of each line (at most 16 lines) */
    const char *p = (const char *)data, *end = p + size;
    for (int lines = 0; p < end && lines < 16; lines++) {
        const char *nl = memchr(p, '\n', (size_t)(end - p));
        size_t n = (size_t)((nl ? nl : end) - p);
        const char *tab = memchr(p, '\t', n);
        if (tab) {
            char *line = malloc(n + 1);
            if (!line) return 0;
            memcpy(line, p, n);
            line[n] = '\0';
            cands k;
            complete_line(line, (size_t)(tab - p), &k);
            free(line);
        }
        p += n + 1;
    }
    return 0;
}
