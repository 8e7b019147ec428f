/* dot.c -- the backward graph as Graphviz DOT text, for teaching:
 * nodes named like MulBackward, leaves (AccumulateGrad) with their shapes. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "autograd/em_autograd.h"

typedef struct {
    char *s;
    size_t n, cap;
    bool oom;
} sbuf;

static void sb_printf(sbuf *b, const char *fmt, ...) {
    if (b->oom) return;
    for (;;) {
        va_list ap;
        va_start(ap, fmt);
        int k = vsnprintf(b->s + b->n, b->cap - b->n, fmt, ap);
        va_end(ap);
        if (k < 0) { b->oom = true; return; }
        if ((size_t)k < b->cap - b->n) { b->n += (size_t)k; return; }
        size_t cap = (b->cap + (size_t)k + 1) * 2;
        char *s = realloc(b->s, cap);
        if (!s) { b->oom = true; return; }
        b->s = s;
        b->cap = cap;
    }
}

/* A tiny pointer set (open addressing) for visited nodes. */
typedef struct { em_node **keys; size_t cap, n; } pset;
static bool pset_add(pset *p, em_node *k) { /* true when newly added */
    if ((p->n + 1) * 2 > p->cap) {
        size_t cap = p->cap ? p->cap * 2 : 64;
        em_node **keys = calloc(cap, sizeof *keys);
        if (!keys) return false;
        for (size_t i = 0; i < p->cap; i++) {
            if (!p->keys[i]) continue;
            size_t j = ((uintptr_t)p->keys[i] >> 4) & (cap - 1);
            while (keys[j]) j = (j + 1) & (cap - 1);
            keys[j] = p->keys[i];
        }
        free(p->keys);
        p->keys = keys;
        p->cap = cap;
    }
    size_t j = ((uintptr_t)k >> 4) & (p->cap - 1);
    while (p->keys[j]) {
        if (p->keys[j] == k) return false;
        j = (j + 1) & (p->cap - 1);
    }
    p->keys[j] = k;
    p->n++;
    return true;
}

char *em_autograd_dot(em_tensor **roots, int n_roots) {
    sbuf b = { NULL, 0, 0, false };
    pset seen = { NULL, 0, 0 };
    size_t cap = 64, sp = 0;
    em_node **stack = malloc(cap * sizeof *stack);
    sb_printf(&b, "digraph backward {\n  rankdir=BT;\n  node [shape=box, fontname=\"monospace\"];\n");
    for (int i = 0; i < n_roots; i++) {
        em_tensor *r = roots[i];
        char shape[EM_SHAPE_STR_MAX];
        em_shape_str(r->ndim, r->sizes, shape, sizeof shape);
        sb_printf(&b, "  out%d [label=\"output %d\\n%s %s\", shape=oval];\n", i + 1, i + 1, shape,
                  em_dtype_name(r->dtype));
        em_node *fn = em_grad_fn(r);
        if (fn) {
            sb_printf(&b, "  n%p -> out%d;\n", (void *)fn, i + 1);
            if (stack && pset_add(&seen, fn)) stack[sp++] = fn;
        }
    }
    while (stack && sp > 0) {
        em_node *n = stack[--sp];
        if (n->is_accumulate_grad) {
            const em_input_meta *m = &em_node_input_meta(n)[0];
            char shape[EM_SHAPE_STR_MAX];
            em_shape_str(m->ndim, m->sizes, shape, sizeof shape);
            sb_printf(&b, "  n%p [label=\"leaf %s %s\", style=filled, fillcolor=lightblue];\n",
                      (void *)n, shape, em_dtype_name(m->dtype));
        } else {
            sb_printf(&b, "  n%p [label=\"%s\"];\n", (void *)n, em_node_name(n));
        }
        for (int j = 0; j < n->num_next; j++) {
            em_node *next = n->next[j].fn;
            if (!next) continue;
            sb_printf(&b, "  n%p -> n%p;\n", (void *)next, (void *)n);
            if (pset_add(&seen, next)) {
                if (sp == cap) {
                    cap *= 2;
                    em_node **s = realloc(stack, cap * sizeof *s);
                    if (!s) { b.oom = true; break; }
                    stack = s;
                }
                stack[sp++] = next;
            }
        }
    }
    sb_printf(&b, "}\n");
    free(stack);
    free(seen.keys);
    if (b.oom || !stack) {
        free(b.s);
        em_set_error(EM_ENOMEM, "autograd.dot: out of memory");
        return NULL;
    }
    return b.s;
}
