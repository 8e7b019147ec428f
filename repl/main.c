/* main.c -- the `ember` executable: command-line options, scripts, -e
 * chunks, stdin; the interactive loop lives in repl.c. Modelled on lua.c.
 *
 *   ember                   REPL on a terminal; piped stdin runs as a chunk
 *   ember script.lua a b    arg = {[-1]="ember", [0]="script.lua", "a", "b"}; ... = a, b
 *   ember -e code ...       run code (several -e allowed, before a script)
 *   ember -i script.lua     interactive after the script
 *   ember -n                the shell without ~/.emberrc.lua
 *   ember -                 run stdin as a script
 * Like lua.c, all work runs inside lua_pcall (pmain), so even a memory
 * error while starting up is reported, never a crash. Calls go through
 * call.c (tracebacks, SIGINT).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <lauxlib.h>
#include <lua.h>
#include <lualib.h>

#include "lua/em_lua.h"
#include "repl.h"

static const char *progname = "ember";

/* ---- chunks ---- */

static int dochunk(lua_State *L, int status) {
    if (status == LUA_OK) status = em_repl_docall(L, 0, 0);
    return em_repl_report(L, status, progname);
}

static int dostring(lua_State *L, const char *s, const char *name) {
    return dochunk(L, luaL_loadbuffer(L, s, strlen(s), name));
}

/* Piped stdin with no script: one chunk, like lua; a lone expression
 * ("1+1") prints its value, as the REPL would. */
static int dostdin(lua_State *L) {
    luaL_Buffer b;
    char buf[4096];
    size_t n;
    luaL_buffinit(L, &b);
    while ((n = fread(buf, 1, sizeof buf, stdin)) > 0) luaL_addlstring(&b, buf, n);
    luaL_pushresult(&b);
    size_t len;
    const char *src = lua_tolstring(L, -1, &len);
    const char *body = src;
    if (len > 0 && src[0] == '#') { /* skip a #! line */
        while (*body && *body != '\n') body++;
    }
    lua_pushfstring(L, "return %s;", body);
    int status = luaL_loadbuffer(L, lua_tostring(L, -1), lua_rawlen(L, -1), "=stdin");
    if (status == LUA_OK) {
        lua_remove(L, -2); /* the return line */
        lua_remove(L, -2); /* the source */
        int base = lua_gettop(L);
        status = em_repl_docall(L, 0, LUA_MULTRET);
        if (status == LUA_OK) {
            int nres = lua_gettop(L) - base + 1;
            if (nres > 0) {
                lua_getglobal(L, "print");
                lua_insert(L, base);
                status = em_repl_docall(L, nres, 0);
            }
        }
        return em_repl_report(L, status, progname);
    }
    lua_pop(L, 2); /* error message, return line */
    status = luaL_loadbuffer(L, body, len - (size_t)(body - src), "=stdin");
    lua_remove(L, -2); /* the source */
    return dochunk(L, status);
}

static int dolibrary(lua_State *L, const char *name) {
    lua_getglobal(L, "require");
    lua_pushstring(L, name);
    int status = em_repl_docall(L, 1, 1);
    if (status == LUA_OK) lua_setglobal(L, name);
    return em_repl_report(L, status, progname);
}

/* Pushes the script's arguments (arg[1..n]) and returns n. */
static int pushargs(lua_State *L) {
    if (lua_getglobal(L, "arg") != LUA_TTABLE) luaL_error(L, "'arg' is not a table");
    int n = (int)luaL_len(L, -1);
    luaL_checkstack(L, n + 3, "too many arguments to script");
    for (int i = 1; i <= n; i++) lua_rawgeti(L, -i, i);
    lua_remove(L, -n - 1);
    return n;
}

static int handle_script(lua_State *L, char **argv) {
    const char *fname = argv[0];
    if (strcmp(fname, "-") == 0 && strcmp(argv[-1], "--") != 0) fname = NULL; /* stdin */
    int status = luaL_loadfile(L, fname);
    if (status == LUA_OK) {
        int n = pushargs(L);
        status = em_repl_docall(L, n, LUA_MULTRET);
    }
    return em_repl_report(L, status, progname);
}

/* ---- options ---- */

enum { HAS_ERROR = 1, HAS_I = 2, HAS_V = 4, HAS_E = 8, HAS_HELP = 16, HAS_N = 32 };

static void usage(FILE *f) {
    fprintf(f,
            "usage: %s [options] [script [args]]\n"
            "Available options are:\n"
            "  -e stat   execute string 'stat'\n"
            "  -i        enter interactive mode after executing 'script'\n"
            "  -l mod    require library 'mod' into global 'mod'\n"
            "  -n        do not run ~/.emberrc.lua when the shell starts\n"
            "  -v, --version  show version information\n"
            "  -h, --help     show this help\n"
            "  --        stop handling options\n"
            "  -         stop handling options and execute stdin\n"
            "With no arguments, ember starts an interactive shell on a terminal\n"
            "and runs standard input as a script otherwise. See ember(1).\n",
            progname);
}

static void print_version(void) {
    printf("ember %s (%s)\n", EM_VERSION_STRING, LUA_RELEASE);
    fflush(stdout);
}

/* Scans options; *first is the index of the script (or argc). */
static int collectargs(char **argv, int *first) {
    int args = 0;
    int i;
    for (i = 1; argv[i] != NULL; i++) {
        *first = i;
        if (argv[i][0] != '-') return args; /* the script */
        if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
            args |= HAS_HELP;
            continue;
        }
        if (strcmp(argv[i], "--version") == 0) {
            args |= HAS_V;
            continue;
        }
        switch (argv[i][1]) {
        case '-': /* '--' */
            if (argv[i][2] != '\0') return HAS_ERROR;
            *first = i + 1;
            return args;
        case '\0': /* '-' */
            return args;
        case 'i':
            if (argv[i][2] != '\0') return HAS_ERROR;
            args |= HAS_I | HAS_V;
            break;
        case 'v':
            if (argv[i][2] != '\0') return HAS_ERROR;
            args |= HAS_V;
            break;
        case 'n':
            if (argv[i][2] != '\0') return HAS_ERROR;
            args |= HAS_N;
            break;
        case 'e':
            args |= HAS_E;
            /* fall through */
        case 'l':
            if (argv[i][2] == '\0') {
                i++;
                if (argv[i] == NULL || argv[i][0] == '-') return HAS_ERROR;
            }
            break;
        default:
            return HAS_ERROR;
        }
    }
    *first = i;
    return args;
}

/* Runs the -e and -l options in order; false on error. */
static bool runargs(lua_State *L, char **argv, int n) {
    for (int i = 1; i < n; i++) {
        int opt = argv[i][1];
        if (argv[i][0] != '-' || (opt != 'e' && opt != 'l')) continue;
        const char *extra = argv[i] + 2;
        if (*extra == '\0') extra = argv[++i];
        int status = opt == 'e' ? dostring(L, extra, "=(command line)") : dolibrary(L, extra);
        if (status != LUA_OK) return false;
    }
    return true;
}

/* arg = {[-k..-1] = interpreter and options, [0] = script, [1..] = args}. */
static void createargtable(lua_State *L, char **argv, int argc, int script) {
    if (script == argc) script = 0; /* no script: arg[0] is the program */
    int narg = argc - (script + 1);
    lua_createtable(L, narg, script + 1);
    for (int i = 0; i < argc; i++) {
        lua_pushstring(L, argv[i]);
        lua_rawseti(L, -2, i - script);
    }
    lua_setglobal(L, "arg");
}

static int handle_init(lua_State *L) {
    const char *init = getenv("EMBER_INIT");
    if (init == NULL) return LUA_OK;
    if (init[0] == '@') return dochunk(L, luaL_loadfile(L, init + 1));
    return dostring(L, init, "=EMBER_INIT");
}

/* Opens the standard libraries and ember: the global `ember`,
 * package.loaded.ember and package.preload.ember are one module. */
static void openlibs(lua_State *L) {
    luaL_openlibs(L);
    luaL_getsubtable(L, LUA_REGISTRYINDEX, LUA_PRELOAD_TABLE);
    lua_pushcfunction(L, luaopen_ember);
    lua_setfield(L, -2, "ember");
    lua_pop(L, 1);
    luaL_requiref(L, "ember", luaopen_ember, 1);
    lua_pop(L, 1);
}

static int pmain(lua_State *L) {
    int argc = (int)lua_tointeger(L, 1);
    char **argv = (char **)lua_touserdata(L, 2);
    int script = argc;
    int args = collectargs(argv, &script);
    luaL_checkversion(L);
    if (argv[0] && argv[0][0]) progname = argv[0];
    if (args == HAS_ERROR) {
        fprintf(stderr, "%s: unrecognized option or missing argument '%s'\n", progname,
                argv[script]);
        usage(stderr);
        return 0;
    }
    if (args & HAS_HELP) {
        usage(stdout);
        lua_pushboolean(L, 1);
        return 1;
    }
    if (args & HAS_V) print_version();
    openlibs(L);
    createargtable(L, argv, argc, script);
    lua_gc(L, LUA_GCRESTART);
    lua_gc(L, LUA_GCGEN, 0, 0);
    if (handle_init(L) != LUA_OK) return 0;
    if (!runargs(L, argv, script)) return 0;
    if (script < argc && handle_script(L, argv + script) != LUA_OK) return 0;
    int errors = 0;
    bool tty = isatty(0);
    if (args & HAS_I) {
        errors = em_repl_loop(L, tty, !(args & HAS_N));
        if (!tty && errors) return 0;
    } else if (script == argc && !(args & (HAS_E | HAS_V))) {
        if (tty) {
            print_version();
            em_repl_loop(L, true, !(args & HAS_N));
        } else if (dostdin(L) != LUA_OK) {
            return 0;
        }
    }
    lua_pushboolean(L, 1);
    return 1;
}

int main(int argc, char **argv) {
    lua_State *L = luaL_newstate();
    if (L == NULL) {
        fprintf(stderr, "%s: cannot create state: not enough memory\n", argv[0]);
        return EXIT_FAILURE;
    }
    lua_gc(L, LUA_GCSTOP);
    lua_pushcfunction(L, pmain);
    lua_pushinteger(L, argc);
    lua_pushlightuserdata(L, argv);
    int status = lua_pcall(L, 2, 1, 0);
    int result = lua_toboolean(L, -1);
    em_repl_report(L, status, progname);
    lua_close(L);
    return (result && status == LUA_OK) ? EXIT_SUCCESS : EXIT_FAILURE;
}
