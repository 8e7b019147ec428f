/* repl.h -- private interface between the files of the ember shell:
 * main.c (options, scripts) and repl.c (the interactive loop). */
#ifndef EM_REPL_H
#define EM_REPL_H

#include <lua.h>
#include <stdbool.h>

/* Runs the function on the stack top with narg arguments below it, under
 * a traceback message handler and with SIGINT raising "interrupted!".
 * Returns the lua_pcall status; results (nres) are left on the stack, or
 * the error message on failure. */
int em_repl_docall(lua_State *L, int narg, int nres);
/* Prints the message on the stack top (if any) to stderr, prefixed with
 * progname when it is not NULL, and pops it. Returns status. */
int em_repl_report(lua_State *L, int status, const char *progname);
/* Prints the values on the stack with the global print; clears the stack. */
void em_repl_print(lua_State *L);

/* The read-eval-print loop on stdin. With tty, readline with prompts,
 * history (~/.ember_history) and tab completion; without, plain lines and
 * no prompts. Sets the global help, runs ~/.emberrc.lua first when
 * startup. Returns the number of inputs that raised errors. */
int em_repl_loop(lua_State *L, bool tty, bool startup);

/* Errors print in red (a terminal without NO_COLOR); set by em_repl_loop. */
extern bool em_repl_color;
/* Tracebacks keep only the user's frames (the shell's are dropped). */
extern bool em_repl_short_traceback;

#endif
