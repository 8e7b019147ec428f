/* optimfused.c -- fused optimizer steps (family optimfused): _fused_adam_
 * and _fused_sgd_ update one parameter and its state in a single pass.
 *
 * lua/stdlib/optim.lua's Adam/AdamW/SGD call them (under no_grad) for a
 * float32/float64 parameter whose gradient and state tensors are
 * contiguous and of its dtype and shape; anything else takes the op-by-op
 * path there. Each element follows the op-by-op chain of PyTorch 1.13's
 * single-tensor optimizers (torch/optim/adam.py, sgd.py) in the same order,
 * every step rounded to the tensor's dtype with the scalars converted to
 * it, so results differ from that chain only by contraction into fused
 * multiply-adds (float rounding). One pass reads the parameter, gradient
 * and state once and writes the parameter and state once: Adam's chain
 * makes eight passes and a temporary.
 */
#pragma GCC optimize("O3", "no-trapping-math", "no-math-errno")
#include <math.h>

#include "kernels/cpu/em_cpu.h"
#include "kernels/cpu/em_vmath.h"

/* The float32 loops' clones: EM_VM_CLONES (an FMA clone, contraction) plus
 * this file's optimisation options again -- a function's optimize attribute
 * replaces the #pragma GCC optimize above for it, which would leave the
 * loops at the command line's -O2, whose cheap vectoriser gives up on them
 * (one sqrtss and divss per element). */
#define OF_CLONES_f32 EM_VM_CLONES __attribute__((optimize("O3", "no-trapping-math", "no-math-errno", "fp-contract=fast")))

/* ---- checks ---- */

/* t (named name) has self's dtype and shape and is contiguous; else an error naming op. */
static bool of_self(const em_tensor *self, const em_tensor *t, const char *op, const char *name) {
    char a[EM_SHAPE_STR_MAX], b[EM_SHAPE_STR_MAX];
    if (t->dtype != self->dtype) {
        em_set_error(EM_ETYPE, "%s: %s must have self's dtype %s, got %s", op, name, em_dtype_name(self->dtype),
                     em_dtype_name(t->dtype));
        return false;
    }
    bool same = t->ndim == self->ndim;
    for (int i = 0; same && i < t->ndim; i++) same = t->sizes[i] == self->sizes[i];
    if (!same) {
        em_set_error(EM_ESHAPE, "%s: %s of shape %s must have self's shape %s", op, name,
                     em_shape_str(t->ndim, t->sizes, a, sizeof a), em_shape_str(self->ndim, self->sizes, b, sizeof b));
        return false;
    }
    if (!t->is_contiguous) {
        em_set_error(EM_EVALUE, "%s: %s must be contiguous", op, name);
        return false;
    }
    return true;
}

static bool self_ok(const em_tensor *self, const char *op) {
    if (self->dtype != EM_FLOAT32 && self->dtype != EM_FLOAT64) {
        em_set_error(EM_ETYPE, "%s: expected a float32 or float64 self, got %s", op, em_dtype_name(self->dtype));
        return false;
    }
    if (!self->is_contiguous) {
        em_set_error(EM_EVALUE, "%s: self must be contiguous", op);
        return false;
    }
    return true;
}

/* Whether any two of the n tensors share memory (the update reads each
 * operand once per element, so aliasing would change its result). */
static bool overlap(em_tensor *const *t, int n, const char *op) {
    for (int i = 0; i < n; i++)
        for (int j = i + 1; j < n; j++) {
            if (!t[i] || !t[j] || t[i]->numel == 0) continue;
            const char *a = em_tensor_data(t[i]), *b = em_tensor_data(t[j]);
            size_t bytes = (size_t)t[i]->numel * em_dtype_size(t[i]->dtype);
            if (a < b + bytes && b < a + bytes) {
                em_set_error(EM_EVALUE, "%s: self, grad and the state tensors must not share memory", op);
                return true;
            }
        }
    return false;
}

/* ---- Adam ---- */

typedef struct {
    char *p, *m, *v, *mx;
    const char *g;
    double lr, b1, b2, eps, wd, step_size, bc2_sqrt;
    bool amsgrad, maximize, decoupled;
} adam_ctx;

/* NaN-propagating max, as torch.maximum */
#define OF_MAX(a, b) ((a) != (a) ? (a) : (b) != (b) ? (b) : (a) > (b) ? (a) : (b))

/* ADAM_LOOP(T, SQRT, AMS): the element loop, AMS a constant (with it a
 * loop that GCC vectorises: a conditional store of max_exp_avg_sq blocks it). */
#define ADAM_LOOP(T, SQRT, AMS)                                                                           \
    for (int64_t i = b; i < e; i++) {                                                                     \
        T gi = mxz ? -g[i] : g[i], pi = p[i];                                                             \
        pi = dec ? pi * decay : pi;                                                                       \
        gi = l2 ? gi + wd * pi : gi;                                                                      \
        T mi = m[i] * b1;                                                                                 \
        mi = mi + a1 * gi;                                                                                \
        T vi = v[i] * b2;                                                                                 \
        vi = vi + a2 * (gi * gi);                                                                         \
        m[i] = mi;                                                                                        \
        v[i] = vi;                                                                                        \
        if (AMS) {                                                                                        \
            vi = OF_MAX(mx[i], vi);                                                                       \
            mx[i] = vi;                                                                                   \
        }                                                                                                 \
        T denom = SQRT(vi) / bc2 + eps;                                                                   \
        p[i] = pi + neg_step * (mi / denom);                                                              \
    }

/* ADAM_FN(N, T, SQRT): elements [b, e) of one Adam/AdamW step in dtype T. */
#define ADAM_FN(N, T, SQRT, CLONES)                                                                       \
    CLONES static void adam_range_##N(int64_t b, int64_t e, void *vctx) {                                 \
        const adam_ctx *c = vctx;                                                                         \
        T *restrict p = (T *)c->p, *restrict m = (T *)c->m, *restrict v = (T *)c->v;                      \
        T *restrict mx = (T *)c->mx;                                                                      \
        const T *restrict g = (const T *)c->g;                                                            \
        const T decay = (T)(1 - c->lr * c->wd), wd = (T)c->wd, b1 = (T)c->b1, a1 = (T)(1 - c->b1);        \
        const T b2 = (T)c->b2, a2 = (T)(1 - c->b2), bc2 = (T)c->bc2_sqrt, eps = (T)c->eps;               \
        const T neg_step = (T)(-c->step_size);                                                            \
        const bool l2 = !c->decoupled && c->wd != 0, dec = c->decoupled, mxz = c->maximize;               \
        if (mx)                                                                                           \
            ADAM_LOOP(T, SQRT, 1)                                                                         \
        else                                                                                              \
            ADAM_LOOP(T, SQRT, 0)                                                                         \
    }
ADAM_FN(f32, float, sqrtf, OF_CLONES_f32)
ADAM_FN(f64, double, sqrt, CLONE_f64)

em_tensor *em_cpu__fused_adam_(em_keyset ks, em_tensor *self, em_tensor *grad, em_tensor *exp_avg,
                               em_tensor *exp_avg_sq, em_tensor *max_exp_avg_sq, double lr, double beta1,
                               double beta2, double eps, double weight_decay, bool amsgrad, bool maximize,
                               int64_t step, bool decoupled) {
    (void)ks;
    const char *op = "_fused_adam_";
    if (!self_ok(self, op) || !of_self(self, grad, op, "grad") || !of_self(self, exp_avg, op, "exp_avg") ||
        !of_self(self, exp_avg_sq, op, "exp_avg_sq"))
        return NULL;
    if (amsgrad && !max_exp_avg_sq) {
        em_set_error(EM_EVALUE, "%s: amsgrad needs max_exp_avg_sq", op);
        return NULL;
    }
    if (amsgrad && !of_self(self, max_exp_avg_sq, op, "max_exp_avg_sq")) return NULL;
    if (step < 1) {
        em_set_error(EM_EVALUE, "%s: step must be at least 1 (the step being taken), got %lld", op, (long long)step);
        return NULL;
    }
    em_tensor *all[5] = { self, grad, exp_avg, exp_avg_sq, amsgrad ? max_exp_avg_sq : NULL };
    if (overlap(all, 5, op)) return NULL;
    /* the scalars as PyTorch 1.13's _single_tensor_adam computes them (Python floats) */
    adam_ctx c = { em_tensor_data(self), em_tensor_data(exp_avg), em_tensor_data(exp_avg_sq),
                   amsgrad ? em_tensor_data(max_exp_avg_sq) : NULL, em_tensor_data(grad), lr, beta1, beta2, eps,
                   weight_decay, lr / (1 - pow(beta1, (double)step)), sqrt(1 - pow(beta2, (double)step)), amsgrad,
                   maximize, decoupled };
    em_cpu_parallel_for(self->numel, EM_CPU_GRAIN / 4, self->dtype == EM_FLOAT32 ? adam_range_f32 : adam_range_f64,
                        &c);
    em_tensor_bump_version(exp_avg);
    em_tensor_bump_version(exp_avg_sq);
    if (amsgrad) em_tensor_bump_version(max_exp_avg_sq);
    em_tensor_bump_version(self);
    return em_tensor_retain(self);
}

/* ---- SGD ---- */

typedef struct {
    char *p, *buf;
    const char *g;
    double lr, momentum, dampening, wd;
    bool nesterov, maximize, first;
} sgd_ctx;

/* SGD_LOOP(T, BUF, FIRST): the element loop, BUF (a momentum buffer) and
 * FIRST (its first step) constants, so that each variant vectorises. */
#define SGD_LOOP(T, BUF, FIRST)                                                                           \
    for (int64_t i = b; i < e; i++) {                                                                     \
        T d = mxz ? -g[i] : g[i], pi = p[i];                                                              \
        d = l2 ? d + wd * pi : d;                                                                         \
        if (BUF) {                                                                                        \
            T bi = FIRST ? d : buf[i] * mom + damp * d;                                                   \
            buf[i] = bi;                                                                                  \
            d = nest ? d + mom * bi : bi;                                                                 \
        }                                                                                                 \
        p[i] = pi + neg_lr * d;                                                                           \
    }

#define SGD_FN(N, T, CLONES)                                                                              \
    CLONES static void sgd_range_##N(int64_t b, int64_t e, void *vctx) {                                  \
        const sgd_ctx *c = vctx;                                                                          \
        T *restrict p = (T *)c->p, *restrict buf = (T *)c->buf;                                           \
        const T *restrict g = (const T *)c->g;                                                            \
        const T wd = (T)c->wd, mom = (T)c->momentum, damp = (T)(1 - c->dampening), neg_lr = (T)(-c->lr); \
        const bool l2 = c->wd != 0, mxz = c->maximize, nest = c->nesterov;                                \
        if (!buf)                                                                                         \
            SGD_LOOP(T, 0, 0)                                                                             \
        else if (c->first)                                                                                \
            SGD_LOOP(T, 1, 1)                                                                             \
        else                                                                                              \
            SGD_LOOP(T, 1, 0)                                                                             \
    }
SGD_FN(f32, float, OF_CLONES_f32)
SGD_FN(f64, double, CLONE_f64)

em_tensor *em_cpu__fused_sgd_(em_keyset ks, em_tensor *self, em_tensor *grad, em_tensor *momentum_buffer, double lr,
                              double momentum, double dampening, double weight_decay, bool nesterov, bool maximize,
                              bool first_step) {
    (void)ks;
    const char *op = "_fused_sgd_";
    if (!self_ok(self, op) || !of_self(self, grad, op, "grad")) return NULL;
    if (momentum != 0 && !momentum_buffer) {
        em_set_error(EM_EVALUE, "%s: a nonzero momentum needs momentum_buffer", op);
        return NULL;
    }
    if (momentum_buffer && !of_self(self, momentum_buffer, op, "momentum_buffer")) return NULL;
    if (nesterov && (momentum <= 0 || dampening != 0)) {
        em_set_error(EM_EVALUE, "%s: Nesterov momentum requires a momentum and zero dampening", op);
        return NULL;
    }
    em_tensor *buf = momentum != 0 ? momentum_buffer : NULL;
    em_tensor *all[3] = { self, grad, buf };
    if (overlap(all, 3, op)) return NULL;
    sgd_ctx c = { em_tensor_data(self), buf ? em_tensor_data(buf) : NULL, em_tensor_data(grad), lr, momentum,
                  dampening, weight_decay, nesterov, maximize, first_step };
    em_cpu_parallel_for(self->numel, EM_CPU_GRAIN / 2, self->dtype == EM_FLOAT32 ? sgd_range_f32 : sgd_range_f64, &c);
    if (buf) em_tensor_bump_version(buf);
    em_tensor_bump_version(self);
    return em_tensor_retain(self);
}
