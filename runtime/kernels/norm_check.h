/* norm_check.h -- the argument checks of the normalisation family, shared
 * by its composites (composite_norm.c, whose errors name the op the user
 * called) and its CPU kernels (cpu/norm.c, whose errors name the kernel's
 * op). Backend-independent: shapes and dtypes only. */
#ifndef EM_NORM_CHECK_H
#define EM_NORM_CHECK_H

#include "core/em_core.h"

/* float32/float64/bfloat16 (PyTorch 1.13's CPU dtypes for these ops),
 * else an EM_ETYPE error naming op and arg. */
static inline bool em_norm_dtype_ok(const em_tensor *t, const char *op, const char *arg) {
    if (t->dtype == EM_FLOAT32 || t->dtype == EM_FLOAT64 || t->dtype == EM_BFLOAT16) return true;
    em_set_error(EM_ETYPE, "%s: argument '%s' must be float32, float64 or bfloat16, got %s", op, arg,
                 em_dtype_name(t->dtype));
    return false;
}

/* t (may be NULL: no check) has dtype like's, else an error naming op/name. */
static inline bool em_norm_same_dtype(const em_tensor *t, const em_tensor *like, const char *op, const char *name) {
    if (!t || t->dtype == like->dtype) return true;
    em_set_error(EM_ETYPE, "%s: %s must have input's dtype %s, got %s", op, name, em_dtype_name(like->dtype),
                 em_dtype_name(t->dtype));
    return false;
}

/* layer_norm's arguments: normalized_shape non-empty and trailing in
 * input's shape, weight/bias (may be NULL) of normalized_shape and input's
 * dtype, a floating input. Sets the row count M and row length N. */
static inline bool em_norm_check_layer_norm(const em_tensor *input, em_intlist ns, const em_tensor *weight,
                                            const em_tensor *bias, const char *op, int64_t *M, int64_t *N) {
    char b1[EM_SHAPE_STR_MAX], b2[EM_SHAPE_STR_MAX];
    if (ns.n < 1) {
        em_set_error(EM_EVALUE, "%s: normalized_shape must have at least one element, got {}", op);
        return false;
    }
    int lead = input->ndim - ns.n;
    bool ok = lead >= 0;
    for (int i = 0; ok && i < ns.n; i++) ok = input->sizes[lead + i] == ns.data[i];
    if (!ok) {
        em_set_error(EM_ESHAPE, "%s: input of shape %s does not end in normalized_shape %s", op,
                     em_shape_str(input->ndim, input->sizes, b1, sizeof b1), em_shape_str(ns.n, ns.data, b2, sizeof b2));
        return false;
    }
    const em_tensor *wb[2] = { weight, bias };
    const char *names[2] = { "weight", "bias" };
    for (int k = 0; k < 2; k++) {
        const em_tensor *t = wb[k];
        if (!t) continue;
        bool same = t->ndim == ns.n;
        for (int i = 0; same && i < ns.n; i++) same = t->sizes[i] == ns.data[i];
        if (!same) {
            em_set_error(EM_ESHAPE, "%s: %s of shape %s must have normalized_shape %s", op, names[k],
                         em_shape_str(t->ndim, t->sizes, b1, sizeof b1), em_shape_str(ns.n, ns.data, b2, sizeof b2));
            return false;
        }
        if (!em_norm_same_dtype(t, input, op, names[k])) return false;
    }
    if (!em_norm_dtype_ok(input, op, "input")) return false;
    int64_t m = 1, n = 1;
    for (int d = 0; d < lead; d++) m *= input->sizes[d];
    for (int i = 0; i < ns.n; i++) n *= ns.data[i];
    *M = m;
    *N = n;
    return true;
}

/* batch_norm's input (N, C, ...) with at least 2 dims, floating; weight
 * and bias (may be NULL) of shape {C} and input's dtype. */
static inline bool em_norm_check_batch_norm(const em_tensor *input, const em_tensor *weight, const em_tensor *bias,
                                            const char *op) {
    char b1[EM_SHAPE_STR_MAX];
    if (input->ndim < 2) {
        em_set_error(EM_ESHAPE, "%s: input must have at least 2 dims (N, C, ...), got shape %s", op,
                     em_shape_str(input->ndim, input->sizes, b1, sizeof b1));
        return false;
    }
    if (!em_norm_dtype_ok(input, op, "input")) return false;
    const em_tensor *wb[2] = { weight, bias };
    const char *names[2] = { "weight", "bias" };
    for (int k = 0; k < 2; k++) {
        const em_tensor *t = wb[k];
        if (!t) continue;
        if (t->ndim != 1 || t->sizes[0] != input->sizes[1]) {
            em_set_error(EM_ESHAPE, "%s: %s must be of shape {%lld} (one value per channel), got %s", op, names[k],
                         (long long)input->sizes[1], em_shape_str(t->ndim, t->sizes, b1, sizeof b1));
            return false;
        }
        if (!em_norm_same_dtype(t, input, op, names[k])) return false;
    }
    return true;
}

/* group_norm's input (N, C, ...) with C divisible by group (>= 1), and
 * weight/bias of {C} (batch_norm's checks). */
static inline bool em_norm_check_group_norm(const em_tensor *input, int64_t group, const em_tensor *weight,
                                            const em_tensor *bias, const char *op) {
    if (!em_norm_check_batch_norm(input, weight, bias, op)) return false;
    if (group < 1 || input->sizes[1] % group != 0) {
        char b[EM_SHAPE_STR_MAX];
        em_set_error(EM_EVALUE, "%s: the number of channels of input (shape %s) must be divisible by num_groups, "
                     "got num_groups=%lld", op, em_shape_str(input->ndim, input->sizes, b, sizeof b), (long long)group);
        return false;
    }
    return true;
}

#endif
