/* call.c -- how the ember shell calls Lua: tracebacks (short ones in the
 * interactive loop), SIGINT raising "interrupted!", error reports and
 * printing of results. Used by main.c (scripts, -e, stdin) and repl.c (the
 * interactive loop and its line-feeding seam). */
#include <signal.h>
#include <stdio.h>
#include <string.h>

#include <lauxlib.h>
#include <lua.h>

#include "lua/em_lua.h"
#include "repl.h"

bool em_repl_color = false;
bool em_repl_short_traceback = false;
FILE *em_repl_errors = NULL;

static lua_State *globalL = NULL;

/* ---- calls with tracebacks and SIGINT ---- */

/* Hook set by the SIGINT handler: raises at the next safe point. */
static void lstop(lua_State *L, lua_Debug *ar) {
    (void)ar;
    lua_sethook(L, NULL, 0, 0);
    luaL_error(L, "interrupted!");
}

static volatile sig_atomic_t got_sigint;

static void laction(int sig) {
    got_sigint = 1;
    int flag = LUA_MASKCALL | LUA_MASKRET | LUA_MASKLINE | LUA_MASKCOUNT;
    signal(sig, SIG_DFL); /* a second Ctrl-C kills the process */
    lua_sethook(globalL, lstop, flag, 1);
    em_interrupt(); /* and at the next op or backward node (Note [Interrupts]) */
}

/* The traceback on the stack top without the shell's own frames: the C
 * caller at the bottom ("[C]: in ?") and lua/stdlib/shell.lua's; at most
 * 12 frames; no "stack traceback:" line when no frame is left. */
static void short_traceback(lua_State *L) {
    const char *tb = lua_tostring(L, -1);
    static const char mark[] = "\nstack traceback:\n";
    const char *head = strstr(tb, mark);
    if (!head) return;
    luaL_Buffer b;
    luaL_buffinit(L, &b);
    luaL_addlstring(&b, tb, (size_t)(head - tb));
    int kept = 0, dropped = 0;
    for (const char *p = head + sizeof mark - 1; *p;) {
        const char *e = strchr(p, '\n');
        size_t n = e ? (size_t)(e - p) : strlen(p);
        bool shell = (n >= 10 && strncmp(p, "\t[C]: in ?", n) == 0) ||
                     memmem(p, n, "lua/stdlib/shell.lua", 20) != NULL;
        if (!shell && kept < 12) {
            luaL_addstring(&b, kept ? "\n" : "\nstack traceback:\n");
            luaL_addlstring(&b, p, n);
            kept++;
        } else if (!shell) {
            dropped++;
        }
        p += n + (e != NULL);
    }
    if (dropped) {
        lua_pushfstring(L, "\n\t(%d more)", dropped);
        luaL_addvalue(&b);
    }
    luaL_pushresult(&b);
    lua_replace(L, -2);
}

static int msghandler(lua_State *L) {
    const char *msg = lua_tostring(L, 1);
    if (msg == NULL) {
        if (luaL_callmeta(L, 1, "__tostring") && lua_type(L, -1) == LUA_TSTRING) return 1;
        msg = lua_pushfstring(L, "(error object is a %s value)", luaL_typename(L, 1));
    }
    luaL_traceback(L, L, msg, 1);
    if (em_repl_short_traceback) short_traceback(L);
    return 1;
}

int em_repl_docall(lua_State *L, int narg, int nres) {
    int base = lua_gettop(L) - narg;
    lua_pushcfunction(L, msghandler);
    lua_insert(L, base);
    globalL = L;
    signal(SIGINT, laction);
    got_sigint = 0;
    int status = lua_pcall(L, narg, nres, base);
    signal(SIGINT, SIG_DFL);
    if (got_sigint) { /* whichever of the two stopped the call, the other must not fire later */
        lua_sethook(L, NULL, 0, 0);
        em_interrupt_clear();
    }
    lua_remove(L, base);
    return status;
}

int em_repl_report(lua_State *L, int status, const char *prog) {
    if (status != LUA_OK) {
        const char *msg = lua_tostring(L, -1);
        if (!msg) msg = "(error object is not a string)";
        FILE *err = em_repl_errors ? em_repl_errors : stderr;
        fflush(stdout); /* what the line printed comes first */
        if (prog) fprintf(err, "%s: ", prog);
        if (em_repl_color) fprintf(err, "\033[31m%s\033[0m\n", msg);
        else fprintf(err, "%s\n", msg);
        fflush(err);
        lua_pop(L, 1);
    }
    return status;
}

void em_repl_print(lua_State *L) {
    int n = lua_gettop(L);
    if (n > 0) {
        luaL_checkstack(L, LUA_MINSTACK, "too many results to print");
        lua_pushglobaltable(L); /* raw: Note [Shell outside pcall] (repl.c) */
        lua_pushliteral(L, "print");
        lua_rawget(L, -2);
        lua_remove(L, -2);
        lua_insert(L, 1);
        if (lua_pcall(L, n, 0, 0) != LUA_OK)
            em_repl_report(L, LUA_ERRRUN, NULL);
    }
    lua_settop(L, 0);
}
