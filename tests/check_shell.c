/* check_shell.c -- the `ember` shell driven through a real pseudo-terminal
 * (forkpty), as a person at a terminal would: the prompt, tab completion
 * (names, nested tables, methods, file names in strings), multi-line
 * input, printing of tensors and tables, _, an error and its short
 * traceback, Ctrl-C in a long loop, help(), %time, ~/.emberrc.lua and -n,
 * NO_COLOR, Ctrl-D. The binary is $EM_EMBER (build/ember by default). */

#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pty.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static const char *ember_bin(void) {
    const char *p = getenv("EM_EMBER");
    return p && *p ? p : "build/ember";
}

typedef struct {
    pid_t pid;
    int fd;
    char out[1 << 16]; /* everything read so far */
    size_t n;
    size_t mark;       /* expect() searches from here */
    char home[64];
} shell;

/* Starts the shell in a pty with HOME = a fresh directory holding rc (as
 * ~/.emberrc.lua) when rc is not NULL; extra is one more argument or NULL;
 * no_color sets NO_COLOR=1. */
static void start(shell *s, const char *rc, const char *extra, bool no_color) {
    memset(s, 0, sizeof *s);
    strcpy(s->home, "/tmp/em_check_shell_XXXXXX");
    ck_assert_ptr_nonnull(mkdtemp(s->home));
    char inputrc[128]; /* no bracketed paste: plain echo to match */
    snprintf(inputrc, sizeof inputrc, "%s/inputrc", s->home);
    FILE *ir = fopen(inputrc, "w");
    ck_assert_ptr_nonnull(ir);
    fputs("set enable-bracketed-paste off\n", ir);
    fclose(ir);
    if (rc) {
        char path[128];
        snprintf(path, sizeof path, "%s/.emberrc.lua", s->home);
        FILE *f = fopen(path, "w");
        ck_assert_ptr_nonnull(f);
        fputs(rc, f);
        fclose(f);
    }
    struct winsize ws = { .ws_row = 40, .ws_col = 100 };
    s->pid = forkpty(&s->fd, NULL, NULL, &ws);
    ck_assert_int_ge(s->pid, 0);
    if (s->pid == 0) {
        setenv("HOME", s->home, 1);
        setenv("TERM", "xterm", 1);
        char irc[128];
        snprintf(irc, sizeof irc, "%s/inputrc", s->home);
        setenv("INPUTRC", irc, 1);
        if (no_color) setenv("NO_COLOR", "1", 1);
        else unsetenv("NO_COLOR");
        execl(ember_bin(), "ember", extra, (char *)NULL);
        _exit(127);
    }
}

/* Reads what is available within ms milliseconds. */
static void pump(shell *s, int ms) {
    struct pollfd p = { .fd = s->fd, .events = POLLIN };
    while (poll(&p, 1, ms) > 0) {
        ssize_t r = read(s->fd, s->out + s->n, sizeof s->out - 1 - s->n);
        if (r <= 0) break;
        s->n += (size_t)r;
        s->out[s->n] = '\0';
        ms = 50; /* keep draining while output flows */
    }
}

/* Waits up to 20 s for needle after the mark; moves the mark past it. */
static bool expect(shell *s, const char *needle) {
    for (int i = 0; i < 400; i++) {
        char *hit = strstr(s->out + s->mark, needle);
        if (hit) {
            s->mark = (size_t)(hit - s->out) + strlen(needle);
            return true;
        }
        pump(s, 50);
    }
    return false;
}

#define EXPECT(s, needle) \
    ck_assert_msg(expect(s, needle), "expected \"%s\" after: ...%s", needle, \
                  (s)->out + ((s)->n > 1500 ? (s)->n - 1500 : 0))

static void type(shell *s, const char *keys) {
    size_t n = strlen(keys);
    ck_assert_int_eq(write(s->fd, keys, n), (ssize_t)n);
}

/* Ctrl-D at an empty prompt; the shell must exit with status 0. A Ctrl-D
 * typed before readline has the terminal (in cooked mode, between lines)
 * can be taken by the line discipline, so it is typed at the prompt and
 * again once a second. */
static void finish(shell *s) {
    int st = 0;
    for (int i = 0; i < 1000; i++) {
        if (i % 50 == 0 && i <= 200) type(s, "\004");
        pump(s, 20); /* returns at once when the pty hung up: then sleep */
        nanosleep(&(struct timespec){ 0, 20 * 1000 * 1000 }, NULL);
        pid_t w = waitpid(s->pid, &st, WNOHANG);
        if (w == s->pid) break;
        if (i == 999) {
            kill(s->pid, SIGKILL);
            waitpid(s->pid, &st, 0);
            ck_abort_msg("the shell did not exit on Ctrl-D: ...%s", s->out + (s->n > 300 ? s->n - 300 : 0));
        }
    }
    ck_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0);
    close(s->fd);
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", s->home);
    ck_assert_int_eq(system(cmd), 0);
}

START_TEST(test_shell_session) {
    shell s;
    start(&s, NULL, NULL, true);
    EXPECT(&s, "ember ");
    EXPECT(&s, "> ");
    /* printing: tensors with their grad state, tables as literals, _ */
    type(&s, "x = ember.ones(2, 3)\r");
    EXPECT(&s, "> ");
    type(&s, "x:sum(1) * 2\r");
    EXPECT(&s, "tensor([4., 4., 4.])");
    type(&s, "ember.ones(2, {requires_grad = true})\r");
    EXPECT(&s, "tensor([1., 1.], requires_grad=True)");
    type(&s, "{1, 'a', {k = true}}\r");
    EXPECT(&s, "{1, \"a\", {k = true}}");
    type(&s, "x.shape\r");
    EXPECT(&s, "{2, 3}");
    type(&s, "40 + 2\r");
    EXPECT(&s, "\n42");
    type(&s, "_ + 1\r");
    EXPECT(&s, "\n43");
    /* completion: methods, nested tables */
    type(&s, "x:nume\t()\r");
    EXPECT(&s, "x:numel()");
    EXPECT(&s, "\n6");
    type(&s, "ember.nn.func\t.line\t ~= nil\r");
    EXPECT(&s, "ember.nn.functional.linear ~= nil");
    EXPECT(&s, "true");
    /* multi-line input */
    type(&s, "for i = 1, 2 do\r");
    EXPECT(&s, ">> ");
    type(&s, "print(i * 11)\r");
    EXPECT(&s, ">> ");
    type(&s, "end\r");
    EXPECT(&s, "\n11");
    EXPECT(&s, "\n22");
    /* an error: message and the user's frames only */
    type(&s, "local function f() error('boom') end f()\r");
    EXPECT(&s, "boom");
    EXPECT(&s, "in local 'f'");
    EXPECT(&s, "> ");
    ck_assert_ptr_null(strstr(s.out, "[C]: in ?"));
    /* Ctrl-C in a long loop: back at the prompt with the state intact */
    type(&s, "while true do end\r");
    pump(&s, 300);
    type(&s, "\003");
    EXPECT(&s, "interrupted!");
    type(&s, "x:sum()\r");
    EXPECT(&s, "tensor(6.)");
    /* help() and %time */
    type(&s, "help()\r");
    EXPECT(&s, "tensors and autodiff in Lua");
    type(&s, "help(ember.add)\r");
    EXPECT(&s, "Adds other");
    type(&s, "%time x:sum()\r");
    EXPECT(&s, "time: ");
    EXPECT(&s, "tensor(6.)");
    /* Ctrl-C at a prompt drops the typed line */
    type(&s, "this is not lua\003");
    pump(&s, 100);
    type(&s, "7 * 6\r");
    EXPECT(&s, "\n42");
    finish(&s);
}
END_TEST

/* Lines the shell's line handling once got wrong (both found while adding
 * the shell fuzz target, tests/fuzz/fuzz_shell.c): end of input inside an
 * unfinished statement reported garbage and popped below the shell's stack
 * frame; a global table whose __newindex raises made setting _ end the
 * session. */
START_TEST(test_shell_odd_lines) {
    shell s;
    start(&s, NULL, NULL, true);
    EXPECT(&s, "> ");
    type(&s, "for i = 1, 2 do\r");
    EXPECT(&s, ">> ");
    type(&s, "\004");
    EXPECT(&s, "'end' expected");
    EXPECT(&s, "> ");
    type(&s, "6 * 7\r");
    EXPECT(&s, "\n42");
    type(&s, "setmetatable(_G, {__newindex = function() error('no globals') end}) == _G\r");
    EXPECT(&s, "true");
    type(&s, "5 + 5\r");
    EXPECT(&s, "\n10");
    type(&s, "_ * 2\r");
    EXPECT(&s, "\n20");
    ck_assert_ptr_null(strstr(s.out, ": no globals")); /* never raised */
    finish(&s);
}
END_TEST

START_TEST(test_shell_file_completion) {
    shell s;
    start(&s, NULL, NULL, true);
    char path[128];
    snprintf(path, sizeof path, "%s/weights_for_completion.txt", s.home);
    FILE *f = fopen(path, "w");
    ck_assert_ptr_nonnull(f);
    fclose(f);
    EXPECT(&s, "> ");
    char line[256];
    /* readline closes the quote after a completed file name */
    snprintf(line, sizeof line, "io.open(\"%s/weights_for\t) ~= nil\r", s.home);
    type(&s, line);
    EXPECT(&s, "weights_for_completion.txt\") ~= nil");
    EXPECT(&s, "true");
    finish(&s);
}
END_TEST

START_TEST(test_shell_startup_file) {
    shell s;
    start(&s, "rc_value = 41 + 1\n", NULL, true);
    EXPECT(&s, "> ");
    type(&s, "rc_value\r");
    EXPECT(&s, "\n42");
    finish(&s);
    start(&s, "rc_value = 41 + 1\n", "-n", true);
    EXPECT(&s, "> ");
    type(&s, "rc_value == nil\r");
    EXPECT(&s, "\ntrue");
    finish(&s);
    /* an error in the startup file is reported; the shell goes on */
    start(&s, "error('bad rc')\n", NULL, true);
    EXPECT(&s, "bad rc");
    type(&s, "1 + 1\r");
    EXPECT(&s, "\n2");
    finish(&s);
}
END_TEST

START_TEST(test_shell_colors) {
    shell s;
    start(&s, NULL, NULL, false); /* a terminal without NO_COLOR: errors in red */
    EXPECT(&s, "> ");
    type(&s, "error('red')\r");
    EXPECT(&s, "\033[31m");
    finish(&s);
    start(&s, NULL, NULL, true);
    EXPECT(&s, "> ");
    type(&s, "error('plain')\r");
    EXPECT(&s, "plain");
    EXPECT(&s, "> ");
    ck_assert_ptr_null(strstr(s.out, "\033[31m"));
    finish(&s);
}
END_TEST

Suite *make_shell_suite(void) {
    Suite *s = suite_create("shell");
    TCase *tc = tcase_create("pty");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test_shell_session);
    tcase_add_test(tc, test_shell_file_completion);
    tcase_add_test(tc, test_shell_odd_lines);
    tcase_add_test(tc, test_shell_startup_file);
    tcase_add_test(tc, test_shell_colors);
    suite_add_tcase(s, tc);
    return s;
}
