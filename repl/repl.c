/* repl.c -- ember's interactive loop: readline with prompts "> " and ">> ",
 * history in ~/.ember_history (at most HISTORY_MAX lines), tab completion
 * of globals, fields, methods and file names inside strings.
 *
 * Each input is first tried as "return <line>" so expressions print their
 * values (through ember.shell.show: tables as Lua literals, tensors
 * through __tostring) and the first becomes the global _; otherwise it
 * runs as a statement, reading continuation lines while the parser reports
 * an incomplete chunk (its message ends in "<eof>"), as lua.c does. A line
 * starting with % is a shell command (ember.shell.magic: %time, %timing).
 * The Lua side of all this is lua/stdlib/shell.lua.
 *
 * Lines come from readline (a terminal), stdin (no terminal) or a buffer
 * (em_repl_feed, the seam of Note [Shell line seam] in repl.h); everything
 * after reading a line is the same code for all three.
 */
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <readline/history.h>
#include <readline/readline.h>

#include <lauxlib.h>
#include <lua.h>

#include "lua/em_lua.h"
#include "repl.h"

#define PROMPT1 "> "
#define PROMPT2 ">> "
#define EOFMARK "<eof>"
#define HISTORY_MAX 1000

static bool use_readline;
static char history_path[4096];
/* em_repl_feed's buffer: the unread bytes are feed_at .. feed_end; lines
 * come from here instead of readline or stdin while feeding is set */
static bool feeding;
static const char *feed_at, *feed_end;

/* ---- reading lines ---- */

/* Ctrl-C at a prompt drops the line being typed and shows a fresh prompt
 * (Ctrl-C while code runs raises "interrupted!", see main.c). */
static void prompt_sigint(int sig) {
    (void)sig;
    if (write(STDOUT_FILENO, "\n", 1) < 0) return;
    rl_on_new_line();
    rl_replace_line("", 0);
    rl_redisplay();
}

/* The next line of em_repl_feed's buffer (without its newline) as a new
 * malloc'd, NUL-terminated string; NULL at the end (or out of memory). */
static char *feed_line(size_t *len) {
    if (feed_at >= feed_end) return NULL;
    const char *nl = memchr(feed_at, '\n', (size_t)(feed_end - feed_at));
    size_t n = (size_t)((nl ? nl : feed_end) - feed_at);
    char *line = malloc(n + 1);
    if (!line) return NULL;
    memcpy(line, feed_at, n);
    line[n] = '\0';
    feed_at += n + (nl != NULL);
    *len = n;
    return line;
}

/* Pushes the next line (without its newline); false at end of input. */
static bool pushline(lua_State *L, bool firstline) {
    char *line = NULL;
    size_t len;
    if (feeding) {
        line = feed_line(&len);
        if (!line) return false;
    } else if (use_readline) {
        struct sigaction sa, old;
        memset(&sa, 0, sizeof sa);
        sa.sa_handler = prompt_sigint;
        sa.sa_flags = SA_RESTART;
        sigemptyset(&sa.sa_mask);
        sigaction(SIGINT, &sa, &old);
        line = readline(firstline ? PROMPT1 : PROMPT2);
        sigaction(SIGINT, &old, NULL);
        if (!line) return false;
        len = strlen(line);
    } else {
        size_t cap = 0;
        ssize_t n = getline(&line, &cap, stdin);
        if (n < 0) {
            free(line);
            return false;
        }
        len = (size_t)n;
        if (len > 0 && line[len - 1] == '\n') line[--len] = '\0';
    }
    if (firstline && line[0] == '=') /* "=expr", as in Lua 5.1..5.3 */
        lua_pushfstring(L, "return %s", line + 1);
    else
        lua_pushlstring(L, line, len);
    free(line);
    return true;
}

static void saveline(const char *line) {
    if (feeding || !use_readline || line[0] == '\0') return;
    add_history(line);
    if (history_path[0] && append_history(1, history_path) != 0)
        write_history(history_path); /* the file did not exist yet */
}

static bool incomplete(lua_State *L, int status) {
    if (status == LUA_ERRSYNTAX) {
        size_t lmsg;
        const char *msg = lua_tolstring(L, -1, &lmsg);
        size_t mark = sizeof(EOFMARK) - 1;
        if (lmsg >= mark && strcmp(msg + lmsg - mark, EOFMARK) == 0) return true; /* message kept */
    }
    return false;
}

/* Tries "return <line>;": an expression. */
static int addreturn(lua_State *L) {
    const char *line = lua_tostring(L, -1);
    const char *retline = lua_pushfstring(L, "return %s;", line);
    int status = luaL_loadbuffer(L, retline, strlen(retline), "=stdin");
    if (status == LUA_OK) {
        lua_remove(L, -2); /* the modified line */
        saveline(line);
    } else {
        lua_pop(L, 2); /* error message and modified line */
    }
    return status;
}

/* A statement, with continuation lines while the chunk is incomplete.
 * Leaves the line and then the function or the error message (also when
 * the input ends inside an incomplete chunk: the message, "'end' expected
 * near <eof>", is kept until a continuation line has been read; the shell
 * used to drop it first and then report, and pop, a value below its stack
 * frame; found by the shell fuzz target; newer versions of lua.c keep it
 * the same way). */
static int multiline(lua_State *L) {
    for (;;) {
        size_t len;
        const char *line = lua_tolstring(L, 1, &len);
        int status = luaL_loadbuffer(L, line, len, "=stdin");
        if (!incomplete(L, status) || !pushline(L, false)) {
            saveline(line);
            return status;
        }
        lua_remove(L, -2); /* the incomplete chunk's message */
        lua_pushliteral(L, "\n");
        lua_insert(L, -2);
        lua_concat(L, 3);
    }
}

/* ---- the shell's Lua side ---- */

/* Note [Shell outside pcall]
 * Between the calls of a line (em_repl_docall and the pcalls of show,
 * magic and after) the shell touches the user's globals and tables from C
 * outside any protected call of its own: setting _ and help, finding
 * ember.shell's functions, walking tables for completion. Those accesses
 * are raw (no metamethods): a metamethod that raises there would escape to
 * main.c's pmain and end the shell (setmetatable(_G, {__newindex = error})
 * followed by any expression did), and one that loops would hang it.
 * Completion also runs under lua_pcall (collect_safely). */

/* Pushes t[key] without metamethods (t at idx); returns its type. */
static int rawgetfield(lua_State *L, int idx, const char *key) {
    idx = lua_absindex(L, idx);
    lua_pushstring(L, key);
    return lua_rawget(L, idx);
}

/* Pushes function fn of module ember.shell; false (nothing pushed) when
 * the module or the function is missing. Raw (Note [Shell outside pcall]). */
static bool push_shell(lua_State *L, const char *fn) {
    lua_getfield(L, LUA_REGISTRYINDEX, LUA_LOADED_TABLE);
    if (lua_istable(L, -1)) rawgetfield(L, -1, "ember.shell");
    else lua_pushnil(L);
    lua_remove(L, -2);
    if (lua_istable(L, -1)) {
        rawgetfield(L, -1, fn);
        lua_remove(L, -2);
        if (lua_isfunction(L, -1)) return true;
    }
    lua_pop(L, 1);
    return false;
}

/* A % line: its Lua code from ember.shell.magic, loaded (an empty chunk
 * when it printed a message instead). */
static int loadmagic(lua_State *L) {
    const char *line = lua_tostring(L, 1);
    saveline(line);
    const char *code = "";
    if (push_shell(L, "magic")) {
        lua_pushvalue(L, 1);
        if (lua_pcall(L, 1, 1, 0) != LUA_OK) return LUA_ERRRUN; /* the message is the error */
        if (lua_isstring(L, -1)) code = lua_tostring(L, -1);
    }
    return luaL_loadbuffer(L, code, strlen(code), "=stdin");
}

/* Loads the next input as a function; -1 at end of input. */
static int loadline(lua_State *L) {
    lua_settop(L, 0);
    if (!pushline(L, true)) return -1;
    if (lua_tostring(L, 1)[0] == '%') {
        int status = loadmagic(L);
        lua_replace(L, 1); /* the function or the error over the line */
        lua_settop(L, 1);
        return status;
    }
    int status = addreturn(L);
    if (status != LUA_OK) status = multiline(L);
    lua_remove(L, 1); /* the line */
    return status;
}

/* ---- completion ---- */

static lua_State *complete_L;
static char **matches;
static int nmatches, capmatches;

static const char *const keywords[] = {
    "and", "break", "do", "else", "elseif", "end", "false", "for", "function", "goto", "if",
    "in", "local", "nil", "not", "or", "repeat", "return", "then", "true", "until", "while", NULL
};

static void add_match(const char *prefix, size_t plen, const char *key) {
    if (nmatches == capmatches) {
        int cap = capmatches ? 2 * capmatches : 64;
        char **m = realloc(matches, (size_t)cap * sizeof *m);
        if (!m) return;
        matches = m;
        capmatches = cap;
    }
    size_t klen = strlen(key);
    char *s = malloc(plen + klen + 1);
    if (!s) return;
    memcpy(s, prefix, plen);
    memcpy(s + plen, key, klen + 1);
    matches[nmatches++] = s;
}

static bool is_identifier(const char *s) {
    if (!(*s == '_' || (*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z'))) return false;
    for (s++; *s; s++)
        if (!(*s == '_' || (*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') ||
              (*s >= '0' && *s <= '9')))
            return false;
    return true;
}

/* Adds the string keys of the table on the stack top that start with
 * part (functions only when methods_only). */
static void add_keys(lua_State *L, const char *prefix, size_t plen, const char *part,
                     bool methods_only) {
    size_t partlen = strlen(part);
    int t = lua_gettop(L);
    lua_pushnil(L);
    while (lua_next(L, t)) {
        if (lua_type(L, -2) == LUA_TSTRING) {
            const char *k = lua_tostring(L, -2);
            if (strncmp(k, part, partlen) == 0 && is_identifier(k) &&
                (!methods_only || lua_type(L, -1) == LUA_TFUNCTION))
                add_match(prefix, plen, k);
        }
        lua_pop(L, 1);
    }
}

/* Replaces the value on the stack top by its field key without running
 * metamethods other than a table-valued __index (nil when absent); the
 * __index field itself is read raw (Note [Shell outside pcall]). */
static void rawfield(lua_State *L, const char *key) {
    if (luaL_testudata(L, -1, EM_LUA_TENSOR_MT)) {
        lua_pop(L, 1);
        lua_getfield(L, LUA_REGISTRYINDEX, "ember.Tensor.methods");
    }
    if (!lua_istable(L, -1)) {
        if (!lua_getmetatable(L, -1)) {
            lua_pop(L, 1);
            lua_pushnil(L);
            return;
        }
        rawgetfield(L, -1, "__index");
        lua_remove(L, -2);
        lua_remove(L, -2);
        if (!lua_istable(L, -1)) {
            lua_pop(L, 1);
            lua_pushnil(L);
            return;
        }
    }
    lua_pushstring(L, key);
    if (lua_rawget(L, -2) == LUA_TNIL && lua_getmetatable(L, -2)) {
        rawgetfield(L, -1, "__index");
        if (lua_istable(L, -1)) {
            lua_pushstring(L, key);
            lua_rawget(L, -2);
            lua_replace(L, -4);
        }
        lua_pop(L, 2);
    }
    lua_remove(L, -2);
}

static void collect(lua_State *L, const char *text) {
    const char *sep = strpbrk(text, ".:") ? text + strlen(text) : NULL;
    while (sep && sep > text && sep[-1] != '.' && sep[-1] != ':') sep--;
    int top = lua_gettop(L);
    if (!sep) { /* a global name or keyword */
        size_t tl = strlen(text);
        for (int i = 0; keywords[i]; i++)
            if (strncmp(keywords[i], text, tl) == 0) add_match("", 0, keywords[i]);
        lua_pushglobaltable(L);
        add_keys(L, "", 0, text, false);
        lua_settop(L, top);
        return;
    }
    bool method = sep[-1] == ':';
    /* walk the dotted path before the separator */
    lua_pushglobaltable(L);
    const char *p = text;
    char name[256];
    while (p < sep - 1) {
        const char *q = p;
        while (q < sep - 1 && *q != '.' && *q != ':') q++;
        size_t n = (size_t)(q - p);
        if (n == 0 || n >= sizeof name || (*q == ':' && q != sep - 1)) {
            lua_settop(L, top);
            return;
        }
        memcpy(name, p, n);
        name[n] = '\0';
        rawfield(L, name);
        p = q + 1;
    }
    bool tensor = luaL_testudata(L, -1, EM_LUA_TENSOR_MT) != NULL;
    size_t plen = (size_t)(sep - text);
    if (tensor) {
        if (!method) {
            static const char *const props[] = { "shape", "dtype", "device", "ndim", NULL };
            for (int i = 0; props[i]; i++)
                if (strncmp(props[i], sep, strlen(sep)) == 0) add_match(text, plen, props[i]);
        }
        lua_getfield(L, LUA_REGISTRYINDEX, "ember.Tensor.methods");
        if (lua_istable(L, -1)) add_keys(L, text, plen, sep, method);
    } else if (lua_istable(L, -1)) {
        add_keys(L, text, plen, sep, method);
        if (lua_getmetatable(L, -1)) {
            rawgetfield(L, -1, "__index");
            if (lua_istable(L, -1)) add_keys(L, text, plen, sep, method);
        }
    } else if (lua_getmetatable(L, -1)) {
        rawgetfield(L, -1, "__index");
        if (lua_istable(L, -1)) add_keys(L, text, plen, sep, method);
    }
    lua_settop(L, top);
}

static int collect_protected(lua_State *L) {
    collect(L, (const char *)lua_touserdata(L, 1));
    return 0;
}

/* collect under lua_pcall: a Lua error while collecting (a memory error
 * in lua_pushstring) ends the list where it got to, rather than reaching
 * Lua's panic handler outside any protected call. */
static void collect_safely(lua_State *L, const char *text) {
    int top = lua_gettop(L);
    if (!lua_checkstack(L, 2)) return;
    lua_pushcfunction(L, collect_protected);
    lua_pushlightuserdata(L, (void *)text);
    (void)lua_pcall(L, 1, 0, 0);
    lua_settop(L, top);
}

static char *generator(const char *text, int state) {
    static int next;
    if (state == 0) {
        for (int i = next; i < nmatches; i++) free(matches[i]);
        nmatches = 0;
        next = 0;
        collect_safely(complete_L, text);
    }
    if (next < nmatches) return matches[next++]; /* readline frees it */
    return NULL;
}

/* Whether position pos of the line is inside a string literal. */
static bool in_string(const char *line, int pos) {
    char q = 0;
    for (int i = 0; i < pos && line[i]; i++) {
        if (q && line[i] == '\\' && i + 1 < pos) i++;
        else if (q && line[i] == q) q = 0;
        else if (!q && (line[i] == '"' || line[i] == '\'')) q = line[i];
        else if (!q && line[i] == '-' && line[i + 1] == '-') return false; /* a comment */
    }
    return q != 0;
}

/* Where words break for completion: outside strings at Lua's operators
 * and punctuation; inside a string only at quotes and blanks, so that a
 * path with / completes as a whole. */
static char word_breaks[] = " \t\n\"\\'`@$><=;|&{(,+-*/%^#[]~";
static char word_breaks_in_string[] = " \t\n\"'";

static char *word_break_hook(void) {
    return in_string(rl_line_buffer, rl_point) ? word_breaks_in_string : NULL;
}

static char **complete(const char *text, int start, int end) {
    (void)end;
    rl_attempted_completion_over = 1; /* no readline default */
    rl_completion_append_character = '\0';
    if (in_string(rl_line_buffer, start)) /* io.open("da<Tab>: file names */
        return rl_completion_matches(text, rl_filename_completion_function);
    return rl_completion_matches(text, generator);
}

/* See Note [Shell line seam] (repl.h). The word before the cursor is
 * found as readline finds it with the shell's settings (no completer
 * quote characters): back from the cursor to the last break character,
 * word_break_hook's set inside a string. */
int em_repl_completions(lua_State *L, const char *line, size_t point,
                        void (*each)(void *ctx, const char *candidate), void *ctx) {
    size_t len = strlen(line);
    if (point > len) point = len;
    if (point > INT_MAX) return 0;
    const char *breaks = in_string(line, (int)point) ? word_breaks_in_string : word_breaks;
    size_t start = point;
    while (start > 0 && !strchr(breaks, line[start - 1])) start--;
    if (in_string(line, (int)start)) return -1; /* file names: readline's */
    char *text = malloc(point - start + 1);
    if (!text) return 0;
    memcpy(text, line + start, point - start);
    text[point - start] = '\0';
    for (int i = 0; i < nmatches; i++) free(matches[i]);
    nmatches = 0;
    collect_safely(L, text);
    free(text);
    int n = nmatches;
    for (int i = 0; i < n; i++) {
        each(ctx, matches[i]);
        free(matches[i]);
    }
    nmatches = 0;
    return n;
}

/* ---- the loop ---- */

static void init_readline(lua_State *L) {
    complete_L = L;
    rl_readline_name = "ember";
    rl_catch_signals = 0; /* prompt_sigint handles Ctrl-C at the prompt */
    rl_basic_word_break_characters = word_breaks;
    rl_completer_word_break_characters = rl_basic_word_break_characters;
    rl_attempted_completion_function = complete;
    rl_completion_word_break_hook = word_break_hook;
    const char *home = getenv("HOME");
    history_path[0] = '\0';
    if (home && *home &&
        snprintf(history_path, sizeof history_path, "%s/.ember_history", home) <
            (int)sizeof history_path) {
        stifle_history(HISTORY_MAX);
        read_history(history_path);
    } else {
        history_path[0] = '\0';
    }
}

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* Prints the results on the stack through ember.shell.show (the global
 * print if it is missing) and clears the stack. */
static void show(lua_State *L) {
    int n = lua_gettop(L);
    if (n == 0) return;
    if (!push_shell(L, "show")) {
        em_repl_print(L);
        return;
    }
    lua_insert(L, 1);
    if (em_repl_docall(L, n, 0) != LUA_OK) em_repl_report(L, LUA_ERRRUN, NULL);
    lua_settop(L, 0);
}

/* The shell's globals: help (ember.shell.help) unless one exists. Raw
 * (Note [Shell outside pcall]). */
static void set_globals(lua_State *L) {
    lua_pushglobaltable(L);
    if (rawgetfield(L, -1, "help") == LUA_TNIL && push_shell(L, "help")) {
        lua_pushliteral(L, "help");
        lua_insert(L, -2);
        lua_rawset(L, -4);
    }
    lua_settop(L, 0);
}

/* Runs ~/.emberrc.lua when it exists; an error in it is reported and the
 * shell goes on. */
static void run_startup_file(lua_State *L) {
    const char *home = getenv("HOME");
    char path[4096];
    if (!home || !*home || snprintf(path, sizeof path, "%s/.emberrc.lua", home) >= (int)sizeof path) return;
    FILE *f = fopen(path, "r");
    if (!f) return;
    fclose(f);
    int status = luaL_loadfile(L, path);
    if (status == LUA_OK) status = em_repl_docall(L, 0, 0);
    em_repl_report(L, status, NULL);
    lua_settop(L, 0);
}

/* Reads, runs and prints inputs until the end of input; returns the
 * number that raised errors. */
static int run_inputs(lua_State *L) {
    int status, errors = 0;
    while ((status = loadline(L)) != -1) {
        double t0 = now();
        if (status == LUA_OK) status = em_repl_docall(L, 0, LUA_MULTRET);
        double dt = now() - t0;
        if (status == LUA_OK && !lua_checkstack(L, LUA_MINSTACK)) {
            /* a call may return up to Lua's stack limit (table.unpack of
             * a million values) and leave no room for the pushes below */
            lua_settop(L, 0);
            lua_pushliteral(L, "too many results to print");
            status = LUA_ERRRUN;
        }
        if (status == LUA_OK) {
            if (lua_gettop(L) > 0 && !lua_isnil(L, 1)) { /* _ is the last result (raw) */
                lua_pushglobaltable(L);
                lua_pushliteral(L, "_");
                lua_pushvalue(L, 1);
                lua_rawset(L, -3);
                lua_pop(L, 1);
            }
            show(L);
        } else {
            errors++;
            em_repl_report(L, status, NULL);
        }
        if (push_shell(L, "after")) {
            lua_pushnumber(L, dt);
            if (lua_pcall(L, 1, 0, 0) != LUA_OK) em_repl_report(L, LUA_ERRRUN, NULL);
        }
        lua_settop(L, 0);
    }
    return errors;
}

int em_repl_loop(lua_State *L, bool tty, bool startup) {
    use_readline = tty;
    if (tty) init_readline(L);
    const char *nc = getenv("NO_COLOR");
    em_repl_color = tty && isatty(STDERR_FILENO) && !(nc && *nc);
    em_repl_short_traceback = true;
    set_globals(L);
    if (startup) run_startup_file(L);
    int errors = run_inputs(L);
    em_repl_short_traceback = false;
    lua_settop(L, 0);
    if (tty) {
        fputs("\n", stdout);
        fflush(stdout);
        if (history_path[0]) history_truncate_file(history_path, HISTORY_MAX);
    }
    return errors;
}

int em_repl_feed(lua_State *L, const char *buf, size_t n) {
    bool was_feeding = feeding, was_short = em_repl_short_traceback;
    const char *at = feed_at, *end = feed_end;
    feeding = true;
    feed_at = buf;
    feed_end = buf + n;
    em_repl_short_traceback = true;
    set_globals(L);
    int errors = run_inputs(L);
    lua_settop(L, 0);
    feeding = was_feeding;
    feed_at = at;
    feed_end = end;
    em_repl_short_traceback = was_short;
    return errors;
}
