/* util.c -- growable text buffers, escaping, file output and error exits
 * for the codegen tool (a build-time program: it may exit on error). */
#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "codegen.h"

/* ---- memory ---- */

/* Note [Codegen arena]: every block codegen allocates (cg_xmalloc,
 * cg_xrealloc) carries a header that links it into one list, and is
 * released with cg_free, never with free(). The codegen tool exits after
 * one run and never frees its schema; the fuzz target
 * (tests/fuzz/fuzz_codegen.c) parses thousands of schemas in one process,
 * and cg_release_all() frees everything the last one left behind,
 * including what an error's longjmp abandoned half-built. */
typedef union cg_block {
    struct { union cg_block *prev, *next; } l;
    max_align_t align;
} cg_block;

static cg_block cg_blocks = { .l = { &cg_blocks, &cg_blocks } };

static void *link_block(cg_block *h) {
    h->l.prev = cg_blocks.l.prev;
    h->l.next = &cg_blocks;
    cg_blocks.l.prev->l.next = h;
    cg_blocks.l.prev = h;
    return h + 1;
}

static void unlink_block(cg_block *h) {
    h->l.prev->l.next = h->l.next;
    h->l.next->l.prev = h->l.prev;
}

void *cg_xmalloc(size_t n) {
    cg_block *h = calloc(1, sizeof *h + n);
    if (!h) cg_die("out of memory");
    return link_block(h);
}

void *cg_xrealloc(void *p, size_t n) {
    if (!p) return cg_xmalloc(n);
    cg_block *h = (cg_block *)p - 1;
    unlink_block(h);
    cg_block *q = realloc(h, sizeof *q + n);
    if (!q) {
        link_block(h);
        cg_die("out of memory");
    }
    return link_block(q);
}

void cg_free(void *p) {
    if (!p) return;
    cg_block *h = (cg_block *)p - 1;
    unlink_block(h);
    free(h);
}

void cg_release_all(void) {
    cg_parse_release();
    while (cg_blocks.l.next != &cg_blocks) {
        cg_block *h = cg_blocks.l.next;
        unlink_block(h);
        free(h);
    }
}

char *cg_xstrndup(const char *s, size_t n) {
    char *p = cg_xmalloc(n + 1);
    memcpy(p, s, n);
    p[n] = '\0';
    return p;
}

char *cg_xstrdup(const char *s) { return cg_xstrndup(s, strlen(s)); }

/* ---- errors ---- */

jmp_buf *cg_error_jmp;

void cg_die(const char *fmt, ...) {
    if (cg_error_jmp) longjmp(*cg_error_jmp, 1);
    va_list ap;
    va_start(ap, fmt);
    fputs("codegen: ", stderr);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
    exit(1);
}

void cg_error_at(const char *file, int line, const char *fmt, ...) {
    if (cg_error_jmp) longjmp(*cg_error_jmp, 1);
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "%s:%d: ", file, line);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
    exit(1);
}

/* ---- buffers ---- */

static void reserve(cg_buf *b, size_t extra) {
    if (b->len + extra + 1 <= b->cap) return;
    size_t cap = b->cap ? b->cap : 4096;
    while (cap < b->len + extra + 1) cap *= 2;
    b->data = cg_xrealloc(b->data, cap);
    b->cap = cap;
}

void cg_printf(cg_buf *b, const char *fmt, ...) {
    va_list ap, ap2;
    va_start(ap, fmt);
    va_copy(ap2, ap);
    int n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    if (n < 0) cg_die("formatting failed");
    reserve(b, (size_t)n);
    vsnprintf(b->data + b->len, (size_t)n + 1, fmt, ap2);
    va_end(ap2);
    b->len += (size_t)n;
}

void cg_puts(cg_buf *b, const char *s) {
    size_t n = strlen(s);
    reserve(b, n);
    memcpy(b->data + b->len, s, n + 1);
    b->len += n;
}

void cg_c_escape(cg_buf *b, const char *s) {
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\') cg_printf(b, "\\%c", c);
        else if (c == '\n') cg_puts(b, "\\n");
        else if (c == '\t') cg_puts(b, "\\t");
        else if (c < 0x20 || c == 0x7f) cg_printf(b, "\\%03o", c);
        else if (c == '?' && s[1] == '?') cg_puts(b, "?\\"); /* no trigraphs */
        else cg_printf(b, "%c", c);
    }
}

void cg_comment_escape(cg_buf *b, const char *s) {
    for (; *s; s++) {
        if (s[0] == '*' && s[1] == '/') cg_puts(b, "* ");
        else if (s[0] == '/' && s[1] == '*') cg_puts(b, "/ ");
        else cg_printf(b, "%c", *s);
    }
}

void cg_generated_banner(cg_buf *b, const char *ops_path) {
    cg_puts(b, "/* @generated from ");
    cg_comment_escape(b, ops_path);
    cg_puts(b, " by codegen -- do not edit */\n");
}

void cg_group_banner(cg_buf *b, const cg_op *op, const char **last) {
    if (op->group && op->group != *last) {
        cg_puts(b, "/* ---- ");
        cg_comment_escape(b, op->group);
        cg_puts(b, " ---- */\n\n");
    }
    *last = op->group;
}

/* ---- files ---- */

void cg_mkdirs(const char *path) {
    char *p = cg_xstrdup(path);
    for (char *q = p + 1; ; q++) {
        if (*q == '/' || *q == '\0') {
            char c = *q;
            *q = '\0';
            if (mkdir(p, 0777) != 0 && errno != EEXIST)
                cg_die("cannot create directory %s: %s", p, strerror(errno));
            *q = c;
            if (!c) break;
        }
    }
    struct stat st;
    if (stat(p, &st) != 0 || !S_ISDIR(st.st_mode)) cg_die("%s is not a directory", p);
    cg_free(p);
}

void cg_write_file(const char *path, const cg_buf *b) {
    size_t n = strlen(path) + 16;
    char *tmp = cg_xmalloc(n);
    snprintf(tmp, n, "%s.tmp%ld", path, (long)getpid());
    FILE *f = fopen(tmp, "w");
    if (!f) cg_die("cannot write %s: %s", tmp, strerror(errno));
    if (b->len && fwrite(b->data, 1, b->len, f) != b->len) {
        fclose(f);
        remove(tmp);
        cg_die("cannot write %s: %s", tmp, strerror(errno));
    }
    if (fclose(f) != 0) {
        remove(tmp);
        cg_die("cannot write %s: %s", tmp, strerror(errno));
    }
    if (rename(tmp, path) != 0) {
        remove(tmp);
        cg_die("cannot rename %s to %s: %s", tmp, path, strerror(errno));
    }
    cg_free(tmp);
}
