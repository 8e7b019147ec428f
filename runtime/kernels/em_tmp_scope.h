/* em_tmp_scope.h -- scopes that own the temporaries of code written with
 * ops: the composites (composite*.c) and the backward formulas that must
 * differentiate again (autograd/formulas_metric.c).
 *
 * Note [Temporaries scopes]
 * Such code keeps every tensor it makes in a scope: P_keep(s, t) takes
 * ownership of t and returns it, and a NULL t (an op failed, its error
 * set) marks the scope failed, so a recipe can run on and check once at
 * the end; P_finish(s, keep) releases every temporary but keep, which it
 * returns owned (NULL when the scope failed). EM_TMP_SCOPE(P, CAP, WHAT)
 * defines the type P_scope (CAP slots on the stack; start one as
 * `P_scope s = { .n = 0 }`), P_keep and P_finish; EM_TMP_SCOPE_KEEP
 * defines the first two alone, for a file whose finish differs. A full
 * scope fails with "WHAT: too many temporaries" (EM_EINTERNAL), which the
 * callers' fixed recipes never reach.
 */
#ifndef EM_TMP_SCOPE_H
#define EM_TMP_SCOPE_H

#include <stdbool.h>

#include "core/em_core.h"

/* P_keep's body over a scope's slots t[cap], count *n and flag *failed. */
static inline em_tensor *em_tmp_keep(em_tensor **t, int *n, int cap, bool *failed, em_tensor *x, const char *what) {
    if (!x || *n == cap) {
        if (x) {
            em_tensor_release(x);
            em_set_error(EM_EINTERNAL, "%s: too many temporaries", what);
        }
        *failed = true;
        return NULL;
    }
    t[(*n)++] = x;
    return x;
}

/* P_finish's body: releases t[0..*n) but (the first slot holding) keep,
 * which is returned owned unless failed; empties the scope. NULL when keep
 * is NULL, not in the scope, or the scope failed. */
static inline em_tensor *em_tmp_finish(em_tensor **t, int *n, bool failed, em_tensor *keep) {
    em_tensor *r = NULL;
    for (int i = 0; i < *n; i++) {
        if (t[i] == keep && !failed && !r) r = t[i];
        else em_tensor_release(t[i]);
    }
    *n = 0;
    return r;
}

#define EM_TMP_SCOPE_KEEP(P, CAP, WHAT)                                   \
    typedef struct {                                                      \
        em_tensor *t[CAP];                                                \
        int n;                                                            \
        bool failed;                                                      \
    } P##_scope;                                                          \
    static inline em_tensor *P##_keep(P##_scope *s, em_tensor *t) {       \
        return em_tmp_keep(s->t, &s->n, (CAP), &s->failed, t, (WHAT));    \
    }

#define EM_TMP_SCOPE(P, CAP, WHAT)                                        \
    EM_TMP_SCOPE_KEEP(P, CAP, WHAT)                                       \
    static inline em_tensor *P##_finish(P##_scope *s, em_tensor *keep) {  \
        return em_tmp_finish(s->t, &s->n, s->failed, keep);               \
    }

#endif
