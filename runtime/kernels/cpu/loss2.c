/* loss2.c -- binary losses (family loss2): binary_cross_entropy,
 * binary_cross_entropy_with_logits and their fused backward ops.
 *
 * Note [Binary losses]
 * target must have input's shape (PyTorch refuses other shapes too);
 * weight, pos_weight and (backward) grad_output broadcast to it. Operands
 * are brought to the compute dtype (float32, or float64 for float64) as
 * dense tensors of input's shape -- a no-op for the usual contiguous
 * operands, one copy for a broadcast weight -- and one fused loop per
 * element computes the term (forward) or the gradient (backward); a
 * grad_output of one element is read as a number. The terms, with
 * x = input, t = target, w = weight (1 when absent), p = pos_weight:
 *   bce:    -w (t max(log x, -100) + (1 - t) max(log(1 - x), -100)),
 *           x outside [0, 1] (or NaN) is an error, as PyTorch;
 *           d/dx = w (x - t) / max(x (1 - x), 1e-12)
 *   logits: PyTorch's stable form with m = max(-x, 0) and
 *           l = (p - 1) t + 1 (1 without p):
 *           w ((1 - t) x + l (log(exp(-m) + exp(-x - m)) + m));
 *           d/dx = w ((p t + 1 - t) sigmoid(x) - p t)
 * none returns the terms; sum and mean add them in double over fixed
 * blocks of BL_BLOCK elements whose partial sums are then added in order,
 * so values never depend on the thread count (mean of nothing is NaN, as
 * PyTorch); the backward ops scale by 1/n for mean. The result dtype is
 * input's for bce (target and weight must be floating; bce has float32
 * and float64 only, as PyTorch's CPU kernels) and target's for the logits
 * form (PyTorch computes it in place in (1 - target)); float16 and
 * bfloat16 compute in float32.
 */
#pragma GCC optimize("O3", "no-trapping-math", "no-math-errno")
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/cpu/em_cpu.h"
#include "kernels/cpu/em_vmath.h"

#define BL_BLOCK 8192 /* elements per partial sum */
#define BL_SUB 512    /* elements per stack buffer inside a block */

typedef enum { BL_BCE, BL_LOGITS } bl_kind;

/* The operands of one call, dense in input's shape and the compute dtype
 * (owned references; w, p and g NULL when absent or, for g, a number). */
typedef struct {
    bl_kind kind;
    bool f64;           /* compute in double (else float) */
    int red;            /* 0 none, 1 sum, 2 mean */
    int64_t n;          /* input's element count */
    em_tensor *x, *t, *w, *p, *g;
    double gs;          /* backward: the number grad_output (when g is NULL) times the mean's 1/n */
    void *out;          /* terms / gradient (none, backward), or NULL */
    double *partial;    /* forward sum/mean: one per block */
    int bad;            /* bce forward: some x outside [0, 1] */
} bl_ctx;

static int red_of(const char *reduction) {
    return strcmp(reduction, "none") == 0 ? 0 : strcmp(reduction, "sum") == 0 ? 1 : 2;
}

/* ---- per-element loops over [i0, i1) ---- */

/* PyTorch's log clamp: max(log v, -100), NaN kept. */
EM_VM_INLINE float clog_f32(float v) {
    float l = em_vm_logf(v);
    return l < -100 ? -100.0f : l;
}
EM_VM_INLINE double clog_f64(double v) {
    double l = log(v);
    return l < -100 ? -100.0 : l;
}

/* The loop bodies take their optional operands' presence as constants
 * (hw: weight, hp: pos_weight, hg: a grad_output tensor rather than the
 * number gs); each kernel calls its body once per combination, so that
 * every inlined copy is a branch-free loop the vectoriser takes. */
#define DEF_BL(N, T, LOG, EXP, SIG)                                                                \
    EM_VM_INLINE int bce_fwd_body_##N(const T *x, const T *t, const T *w, T *o, int64_t n, const bool hw) { \
        int b = 0;                                                                                 \
        for (int64_t i = 0; i < n; i++) {                                                          \
            T xv = x[i], tv = t[i];                                                                \
            b |= !((xv >= 0) & (xv <= 1));                                                         \
            T v = (tv - 1) * clog_##N(1 - xv) - tv * clog_##N(xv);                                 \
            o[i] = hw ? v * w[i] : v;                                                              \
        }                                                                                          \
        return b;                                                                                  \
    }                                                                                              \
    CLONE_##N static void bce_fwd_##N(const T *x, const T *t, const T *w, T *o, int64_t n, int *bad) { \
        int b = w ? bce_fwd_body_##N(x, t, w, o, n, true) : bce_fwd_body_##N(x, t, w, o, n, false); \
        if (b) *bad = 1;                                                                           \
    }                                                                                              \
    EM_VM_INLINE void bce_bwd_body_##N(const T *x, const T *t, const T *w, const T *g, T gs, T *o, int64_t n, \
                                       const bool hw, const bool hg) {                             \
        for (int64_t i = 0; i < n; i++) {                                                          \
            T xv = x[i], d = (1 - xv) * xv;                                                        \
            T v = (xv - t[i]) / (d > (T)1e-12 ? d : (T)1e-12) * (hg ? g[i] * gs : gs);             \
            o[i] = hw ? v * w[i] : v;                                                              \
        }                                                                                          \
    }                                                                                              \
    CLONE_##N static void bce_bwd_##N(const T *x, const T *t, const T *w, const T *g, T gs, T *o, int64_t n) { \
        if (w) {                                                                                   \
            if (g) bce_bwd_body_##N(x, t, w, g, gs, o, n, true, true);                             \
            else bce_bwd_body_##N(x, t, w, g, gs, o, n, true, false);                              \
        } else {                                                                                   \
            if (g) bce_bwd_body_##N(x, t, w, g, gs, o, n, false, true);                            \
            else bce_bwd_body_##N(x, t, w, g, gs, o, n, false, false);                             \
        }                                                                                          \
    }                                                                                              \
    EM_VM_INLINE void bcel_fwd_body_##N(const T *x, const T *t, const T *w, const T *p, T *o, int64_t n, \
                                        const bool hw, const bool hp) {                            \
        for (int64_t i = 0; i < n; i++) {                                                          \
            T xv = x[i], tv = t[i];                                                                \
            T m = -xv < 0 ? (T)0 : -xv; /* clamp_min(-x, 0), NaN kept */                         \
            T l = hp ? (p[i] - 1) * tv + 1 : (T)1;                                                 \
            T v = (1 - tv) * xv + l * (LOG(EXP(-m) + EXP(-xv - m)) + m);                           \
            o[i] = hw ? v * w[i] : v;                                                              \
        }                                                                                          \
    }                                                                                              \
    CLONE_##N static void bcel_fwd_##N(const T *x, const T *t, const T *w, const T *p, T *o, int64_t n) { \
        if (w) {                                                                                   \
            if (p) bcel_fwd_body_##N(x, t, w, p, o, n, true, true);                                \
            else bcel_fwd_body_##N(x, t, w, p, o, n, true, false);                                 \
        } else {                                                                                   \
            if (p) bcel_fwd_body_##N(x, t, w, p, o, n, false, true);                               \
            else bcel_fwd_body_##N(x, t, w, p, o, n, false, false);                                \
        }                                                                                          \
    }                                                                                              \
    EM_VM_INLINE void bcel_bwd_body_##N(const T *x, const T *t, const T *w, const T *p, const T *g, T gs, T *o, \
                                        int64_t n, const bool hw, const bool hp, const bool hg) {  \
        for (int64_t i = 0; i < n; i++) {                                                          \
            T s = SIG(x[i]), tv = t[i];                                                            \
            T v = hp ? (p[i] * tv + 1 - tv) * s - p[i] * tv : s - tv;                              \
            v *= hg ? g[i] * gs : gs;                                                              \
            o[i] = hw ? v * w[i] : v;                                                              \
        }                                                                                          \
    }                                                                                              \
    CLONE_##N static void bcel_bwd_##N(const T *x, const T *t, const T *w, const T *p, const T *g, T gs, T *o, \
                                       int64_t n) {                                                \
        int k = (w ? 4 : 0) | (p ? 2 : 0) | (g ? 1 : 0);                                           \
        switch (k) {                                                                               \
        case 0: bcel_bwd_body_##N(x, t, w, p, g, gs, o, n, false, false, false); break;            \
        case 1: bcel_bwd_body_##N(x, t, w, p, g, gs, o, n, false, false, true); break;             \
        case 2: bcel_bwd_body_##N(x, t, w, p, g, gs, o, n, false, true, false); break;             \
        case 3: bcel_bwd_body_##N(x, t, w, p, g, gs, o, n, false, true, true); break;              \
        case 4: bcel_bwd_body_##N(x, t, w, p, g, gs, o, n, true, false, false); break;             \
        case 5: bcel_bwd_body_##N(x, t, w, p, g, gs, o, n, true, false, true); break;              \
        case 6: bcel_bwd_body_##N(x, t, w, p, g, gs, o, n, true, true, false); break;              \
        default: bcel_bwd_body_##N(x, t, w, p, g, gs, o, n, true, true, true); break;              \
        }                                                                                          \
    }

EM_VM_INLINE double sigmoid_d(double x) { return 1.0 / (1.0 + exp(-x)); }
DEF_BL(f32, float, em_vm_logf, em_vm_expf, em_vm_sigmoidf)
DEF_BL(f64, double, log, exp, sigmoid_d)

/* data pointer of an optional operand at element i0 */
#define BL_AT(T, tt, i0) ((tt) ? (const T *)em_tensor_data(tt) + (i0) : NULL)

/* sum of n values in double, four accumulators (the order is fixed) */
#define DEF_SUM(N, T)                                                                              \
    static double bl_sum_##N(const T *v, int64_t n) {                                              \
        double a0 = 0, a1 = 0, a2 = 0, a3 = 0;                                                     \
        int64_t i = 0;                                                                             \
        for (; i + 4 <= n; i += 4) {                                                               \
            a0 += v[i];                                                                            \
            a1 += v[i + 1];                                                                        \
            a2 += v[i + 2];                                                                        \
            a3 += v[i + 3];                                                                        \
        }                                                                                          \
        for (; i < n; i++) a0 += v[i];                                                             \
        return (a0 + a1) + (a2 + a3);                                                              \
    }
DEF_SUM(f32, float)
DEF_SUM(f64, double)

/* Runs the kernel over [i0, i1) writing into o (the caller's buffer). */
#define DEF_RANGE(N, T)                                                                            \
    static void bl_range_##N(bl_ctx *c, int64_t i0, int64_t i1, T *o, int *bad, bool fwd) {        \
        int64_t n = i1 - i0;                                                                       \
        const T *x = BL_AT(T, c->x, i0), *t = BL_AT(T, c->t, i0), *w = BL_AT(T, c->w, i0);         \
        const T *p = BL_AT(T, c->p, i0), *g = BL_AT(T, c->g, i0);                                  \
        if (c->kind == BL_BCE) {                                                                   \
            if (fwd) bce_fwd_##N(x, t, w, o, n, bad);                                              \
            else bce_bwd_##N(x, t, w, g, (T)c->gs, o, n);                                          \
        } else {                                                                                   \
            if (fwd) bcel_fwd_##N(x, t, w, p, o, n);                                               \
            else bcel_bwd_##N(x, t, w, p, g, (T)c->gs, o, n);                                      \
        }                                                                                          \
    }                                                                                              \
    /* blocks [b0, b1): terms into out, or partial sums */                                         \
    static void bl_fwd_blocks_##N(int64_t b0, int64_t b1, void *ctx_) {                            \
        bl_ctx *c = ctx_;                                                                          \
        int bad = 0;                                                                               \
        for (int64_t b = b0; b < b1; b++) {                                                        \
            int64_t s = b * BL_BLOCK, e = s + BL_BLOCK < c->n ? s + BL_BLOCK : c->n;               \
            if (c->out) {                                                                          \
                bl_range_##N(c, s, e, (T *)c->out + s, &bad, true);                                \
                continue;                                                                          \
            }                                                                                      \
            T buf[BL_SUB];                                                                         \
            double acc = 0;                                                                        \
            for (int64_t i = s; i < e; i += BL_SUB) {                                              \
                int64_t k = e - i < BL_SUB ? e - i : BL_SUB;                                       \
                bl_range_##N(c, i, i + k, buf, &bad, true);                                        \
                acc += bl_sum_##N(buf, k);                                                         \
            }                                                                                      \
            c->partial[b] = acc;                                                                   \
        }                                                                                          \
        if (bad) __atomic_store_n(&c->bad, 1, __ATOMIC_RELAXED);                                   \
    }                                                                                              \
    static void bl_bwd_range_##N(int64_t i0, int64_t i1, void *ctx_) {                             \
        bl_ctx *c = ctx_;                                                                          \
        bl_range_##N(c, i0, i1, (T *)c->out + i0, NULL, false);                                    \
    }
DEF_RANGE(f32, float)
DEF_RANGE(f64, double)

/* ---- checks and operands ---- */

static void bl_free(bl_ctx *c) {
    em_tensor_release(c->x);
    em_tensor_release(c->t);
    em_tensor_release(c->w);
    em_tensor_release(c->p);
    em_tensor_release(c->g);
    free(c->partial);
}

/* v (argument `name`) broadcast to input's shape as a dense tensor of
 * compute dtype cdt (a new reference; v itself when it already is one),
 * or NULL with an error naming op, the argument and both shapes. */
static em_tensor *bl_dense(const char *op, const char *name, em_tensor *v, const em_tensor *input, em_dtype cdt) {
    char a[EM_SHAPE_STR_MAX], b[EM_SHAPE_STR_MAX];
    int64_t shape[EM_MAX_DIMS];
    bool ok = v->ndim <= input->ndim;
    if (ok) {
        em_status st = em_broadcast_shapes(v->ndim, v->sizes, input->ndim, input->sizes, shape, op) < 0 ? EM_ESHAPE : EM_OK;
        em_clear_error();
        for (int i = 0; ok && i < input->ndim; i++) ok = st == EM_OK && shape[i] == input->sizes[i];
    }
    if (!ok) {
        em_set_error(EM_ESHAPE, "%s: %s of shape %s cannot broadcast to input's shape %s", op, name,
                     em_shape_str(v->ndim, v->sizes, a, sizeof a), em_shape_str(input->ndim, input->sizes, b, sizeof b));
        return NULL;
    }
    if (!em_dtype_is_floating(v->dtype) && v->dtype != EM_BOOL && !em_dtype_is_integral(v->dtype)) {
        em_set_error(EM_ETYPE, "%s: %s has unsupported dtype %s", op, name, em_dtype_name(v->dtype));
        return NULL;
    }
    if (v->dtype == cdt && v->is_contiguous && v->numel == input->numel && v->ndim == input->ndim)
        return em_tensor_retain(v);
    em_tensor *e = em_core_expand(v, input->ndim, input->sizes);
    if (!e) return NULL;
    em_tensor *r = em_cpu_to_dtype(e, cdt, op);
    em_tensor_release(e);
    return r;
}

/* Checks the arguments of op and fills c with dense operands; returns the
 * result dtype, or EM_DTYPE_NONE with the error set (c freed). */
static em_dtype bl_prepare(const char *op, bl_kind kind, bl_ctx *c, em_tensor *input, em_tensor *target,
                           em_tensor *weight, em_tensor *pos_weight, const char *reduction) {
    char a[EM_SHAPE_STR_MAX], b[EM_SHAPE_STR_MAX];
    memset(c, 0, sizeof *c);
    c->kind = kind;
    c->red = red_of(reduction);
    c->n = input->numel;
    if (!em_dtype_is_floating(input->dtype) || !em_dtype_is_floating(target->dtype)) {
        em_set_error(EM_ETYPE, "%s: expected floating input and target, got %s and %s", op,
                     em_dtype_name(input->dtype), em_dtype_name(target->dtype));
        return EM_DTYPE_NONE;
    }
    em_dtype dt = kind == BL_BCE ? input->dtype : target->dtype;
    if (kind == BL_BCE) {
        if (input->dtype != EM_FLOAT32 && input->dtype != EM_FLOAT64) {
            em_set_error(EM_ETYPE, "%s: not implemented for %s (float32 and float64 only, as in PyTorch)", op,
                         em_dtype_name(input->dtype));
            return EM_DTYPE_NONE;
        }
        if (target->dtype != input->dtype) {
            em_set_error(EM_ETYPE, "%s: target dtype %s must be input's %s", op, em_dtype_name(target->dtype),
                         em_dtype_name(input->dtype));
            return EM_DTYPE_NONE;
        }
    }
    bool same = target->ndim == input->ndim;
    for (int i = 0; same && i < input->ndim; i++) same = target->sizes[i] == input->sizes[i];
    if (!same) {
        em_set_error(EM_ESHAPE, "%s: target of shape %s must have input's shape %s", op,
                     em_shape_str(target->ndim, target->sizes, a, sizeof a),
                     em_shape_str(input->ndim, input->sizes, b, sizeof b));
        return EM_DTYPE_NONE;
    }
    em_dtype cdt = dt == EM_FLOAT64 ? EM_FLOAT64 : EM_FLOAT32;
    c->f64 = cdt == EM_FLOAT64;
    if (!(c->x = bl_dense(op, "input", input, input, cdt)) || !(c->t = bl_dense(op, "target", target, input, cdt)) ||
        (weight && !(c->w = bl_dense(op, "weight", weight, input, cdt))) ||
        (pos_weight && !(c->p = bl_dense(op, "pos_weight", pos_weight, input, cdt)))) {
        bl_free(c);
        return EM_DTYPE_NONE;
    }
    return dt;
}

/* r (a new reference) as dtype dt; r released. */
static em_tensor *bl_to(em_tensor *r, em_dtype dt, const char *op) {
    if (!r || r->dtype == dt) return r;
    em_tensor *o = em_cpu_to_dtype(r, dt, op);
    em_tensor_release(r);
    return o;
}

static em_tensor *bl_forward(const char *op, bl_kind kind, em_tensor *input, em_tensor *target, em_tensor *weight,
                             em_tensor *pos_weight, const char *reduction) {
    bl_ctx c;
    em_dtype dt = bl_prepare(op, kind, &c, input, target, weight, pos_weight, reduction);
    if (dt == EM_DTYPE_NONE) return NULL;
    em_dtype cdt = c.f64 ? EM_FLOAT64 : EM_FLOAT32;
    em_tensor *terms = NULL, *r = NULL;
    int64_t nb = (c.n + BL_BLOCK - 1) / BL_BLOCK;
    if (c.red == 0) {
        if (!(terms = em_tensor_new(input->ndim, input->sizes, cdt, em_cpu_dev()))) goto out;
        c.out = em_tensor_data(terms);
    } else if (!(c.partial = malloc(sizeof(double) * (size_t)(nb > 0 ? nb : 1)))) {
        em_set_error(EM_ENOMEM, "%s: out of memory", op);
        goto out;
    }
    int64_t grain = EM_CPU_GRAIN / BL_BLOCK;
    em_cpu_parallel_for(nb, grain > 0 ? grain : 1, c.f64 ? bl_fwd_blocks_f64 : bl_fwd_blocks_f32, &c);
    if (c.bad) {
        em_set_error(EM_EVALUE, "%s: all elements of input should be between 0 and 1", op);
        goto out;
    }
    if (c.red == 0) {
        r = terms;
        terms = NULL;
    } else {
        double s = 0;
        for (int64_t b = 0; b < nb; b++) s += c.partial[b];
        if (c.red == 2) s /= (double)c.n; /* 0/0 = NaN for an empty input */
        if (!(r = em_tensor_new(0, NULL, EM_FLOAT64, em_cpu_dev()))) goto out;
        *(double *)em_tensor_data(r) = s;
    }
    r = bl_to(r, dt, op);
out:
    em_tensor_release(terms);
    bl_free(&c);
    return r;
}

static em_tensor *bl_backward(const char *op, bl_kind kind, em_tensor *grad_output, em_tensor *input,
                              em_tensor *target, em_tensor *weight, em_tensor *pos_weight, const char *reduction) {
    if (!em_dtype_is_floating(grad_output->dtype)) {
        em_set_error(EM_ETYPE, "%s: expected a floating grad_output, got %s", op, em_dtype_name(grad_output->dtype));
        return NULL;
    }
    bl_ctx c;
    em_dtype dt = bl_prepare(op, kind, &c, input, target, weight, pos_weight, reduction);
    if (dt == EM_DTYPE_NONE) return NULL;
    em_dtype cdt = c.f64 ? EM_FLOAT64 : EM_FLOAT32;
    em_tensor *r = NULL;
    c.gs = c.red == 2 ? 1.0 / (double)c.n : 1.0;
    if (grad_output->numel == 1 && grad_output->ndim <= input->ndim) {
        c.gs *= em_load_as_double(em_tensor_data(grad_output), grad_output->dtype);
    } else if (!(c.g = bl_dense(op, "grad_output", grad_output, input, cdt))) {
        goto out;
    }
    if (!(r = em_tensor_new(input->ndim, input->sizes, cdt, em_cpu_dev()))) goto out;
    c.out = em_tensor_data(r);
    em_cpu_parallel_for(c.n, EM_CPU_GRAIN / 4, c.f64 ? bl_bwd_range_f64 : bl_bwd_range_f32, &c);
    r = bl_to(r, dt, op);
out:
    bl_free(&c);
    return r;
}

em_tensor *em_cpu_binary_cross_entropy(em_keyset ks, em_tensor *input, em_tensor *target, em_tensor *weight,
                                       const char *reduction) {
    (void)ks;
    return bl_forward("binary_cross_entropy", BL_BCE, input, target, weight, NULL, reduction);
}

em_tensor *em_cpu_binary_cross_entropy_backward(em_keyset ks, em_tensor *grad_output, em_tensor *input,
                                                em_tensor *target, em_tensor *weight, const char *reduction) {
    (void)ks;
    return bl_backward("binary_cross_entropy_backward", BL_BCE, grad_output, input, target, weight, NULL, reduction);
}

em_tensor *em_cpu_binary_cross_entropy_with_logits(em_keyset ks, em_tensor *input, em_tensor *target,
                                                   em_tensor *weight, const char *reduction, em_tensor *pos_weight) {
    (void)ks;
    return bl_forward("binary_cross_entropy_with_logits", BL_LOGITS, input, target, weight, pos_weight, reduction);
}

em_tensor *em_cpu_binary_cross_entropy_with_logits_backward(em_keyset ks, em_tensor *grad_output, em_tensor *input,
                                                            em_tensor *target, em_tensor *weight,
                                                            em_tensor *pos_weight, const char *reduction) {
    (void)ks;
    return bl_backward("binary_cross_entropy_with_logits_backward", BL_LOGITS, grad_output, input, target, weight,
                       pos_weight, reduction);
}
