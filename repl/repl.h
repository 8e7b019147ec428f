/* repl.h -- private interface between the files of the ember shell:
 * main.c (options, scripts), call.c (calls, tracebacks, reports) and
 * repl.c (the interactive loop, and its seam for feeding lines without a
 * terminal: tests/fuzz/fuzz_shell.c). */
#ifndef EM_REPL_H
#define EM_REPL_H

#include <lua.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

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

/* Note [Shell line seam]
 * em_repl_feed runs a buffer of lines through exactly the code that
 * handles a line typed at the shell (repl.c: loadline with "=expr", "%"
 * commands, "return <line>" first, continuation lines while the chunk is
 * incomplete; then the call, _, ember.shell.show and ember.shell.after),
 * with the buffer in place of readline/stdin: no terminal, no prompts, no
 * history. em_repl_completions lists what Tab offers at a cursor position
 * through the shell's own completion code (collect, in_string); only the
 * word boundaries are found here rather than by readline (the same break
 * characters; readline's quote handling is not enabled in the shell).
 * There is no history expansion in the shell. tests/fuzz/fuzz_shell.c
 * drives both against a sandboxed state. */

/* Runs the lines of buf (n bytes; lines end at '\n', a last line without
 * one counts; other bytes, NUL included, are kept) as the interactive loop
 * would run them typed one by one, results and errors printed as there
 * (errors to em_repl_errors). The loop's globals (help) are set as by
 * em_repl_loop; ~/.emberrc.lua is not run. Returns the number of inputs
 * that raised errors. */
int em_repl_feed(lua_State *L, const char *buf, size_t n);
/* Calls each(ctx, candidate) for every completion that Tab offers with
 * the cursor at byte point of line (point clamped to the line's length):
 * globals and keywords, fields and methods along a dotted path, tensor
 * methods and properties. Returns the number of candidates, or -1 when the
 * cursor is inside a string literal (the shell then completes file names
 * with readline's own function; not listed here). Runs protected: a Lua
 * error while collecting (out of memory) ends the list early. */
int em_repl_completions(lua_State *L, const char *line, size_t point,
                        void (*each)(void *ctx, const char *candidate), void *ctx);

/* Errors print in red (a terminal without NO_COLOR); set by em_repl_loop. */
extern bool em_repl_color;
/* Tracebacks keep only the user's frames (the shell's are dropped). */
extern bool em_repl_short_traceback;
/* Where em_repl_report writes (NULL: stderr). */
extern FILE *em_repl_errors;

#endif
