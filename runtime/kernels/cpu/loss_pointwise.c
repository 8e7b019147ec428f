/* loss_pointwise.c -- regression losses of one elementwise term (family
 * loss): mse_loss, smooth_l1_loss, huber_loss and their backward ops.
 *
 * input and target broadcast (PyTorch's F.* broadcast them too, with a
 * warning ember does not print); the result dtype is pw_dtype's, computed
 * in float32 for float16/bfloat16. The forward writes each term
 * f(input - target) through the tensor iterator; none returns them, sum
 * and mean add them in double in element order (so values never depend on
 * the thread count; mean of nothing is NaN, as PyTorch). The backward ops
 * write grad_output * f'(input - target) (/ n for mean) in one iterator
 * pass over grad_output, input and target broadcast together.
 * Terms (d = input - target, z = |d|):
 *   mse:       d^2                                  f' = 2 d
 *   smooth_l1: z < beta ? d^2 / (2 beta) : z - beta / 2    f' = clamp(d / beta, -1, 1) (d <= -beta: -1 first,
 *              so beta = 0 gives sign(d) and -1 at d = 0, as PyTorch)
 *   huber:     z < delta ? d^2 / 2 : delta (z - delta / 2)  f' = clamp(d, -delta, delta)
 */
#pragma GCC optimize("O3", "no-trapping-math", "no-math-errno")
#include <math.h>
#include <string.h>

#include "kernels/cpu/em_cpu.h"

typedef enum { PW_MSE, PW_SMOOTH_L1, PW_HUBER } pw_kind;

typedef struct {
    pw_kind kind;
    double p;     /* beta or delta */
    double scale; /* backward: 1/n for mean, else 1 */
} pw_ctx;

static inline double pw_term(pw_kind k, double d, double p) {
    double z = fabs(d);
    switch (k) {
    case PW_MSE: return d * d;
    case PW_SMOOTH_L1: return z < p ? 0.5 * d * d / p : z - 0.5 * p;
    default: return z < p ? 0.5 * d * d : p * (z - 0.5 * p);
    }
}

static inline double pw_deriv(pw_kind k, double d, double p) {
    switch (k) {
    case PW_MSE: return 2.0 * d;
    case PW_SMOOTH_L1: /* PyTorch's order of tests: d = 0 with beta = 0 gives -1 */
        return d <= -p ? -1.0 : d >= p ? 1.0 : d / p;
    default: return d < -p ? -p : d > p ? p : d;
    }
}

/* forward loops: out = term(x - t); backward: out = g * deriv(x - t) * scale */
#define DEF_PW(N, T, A)                                                                            \
    CLONE_##N static void pw_fwd_##N(char **data, const int64_t *st, int64_t n, void *ctx_) {      \
        const pw_ctx *c = ctx_;                                                                    \
        for (int64_t i = 0; i < n; i++) {                                                          \
            A x = (A) * (const T *)(data[1] + i * st[1]), t = (A) * (const T *)(data[2] + i * st[2]); \
            *(T *)(data[0] + i * st[0]) = (T)pw_term(c->kind, (double)(x - t), c->p);              \
        }                                                                                          \
    }                                                                                              \
    CLONE_##N static void pw_bwd_##N(char **data, const int64_t *st, int64_t n, void *ctx_) {      \
        const pw_ctx *c = ctx_;                                                                    \
        for (int64_t i = 0; i < n; i++) {                                                          \
            A g = (A) * (const T *)(data[1] + i * st[1]);                                          \
            A x = (A) * (const T *)(data[2] + i * st[2]), t = (A) * (const T *)(data[3] + i * st[3]); \
            *(T *)(data[0] + i * st[0]) = (T)((double)g * pw_deriv(c->kind, (double)(x - t), c->p) * c->scale); \
        }                                                                                          \
    }
DEF_PW(f32, float, float)
DEF_PW(f64, double, double)

static int red_of(const char *reduction) {
    return strcmp(reduction, "none") == 0 ? 0 : strcmp(reduction, "sum") == 0 ? 1 : 2;
}

/* The result dtype: input's for huber_loss, else input's and target's
 * promoted as tensors of one shape (PyTorch broadcasts them first, so a
 * 0-dim target promotes like any other); EM_DTYPE_NONE with an error
 * naming op for integers and bool, and for mse_loss in bfloat16 (PyTorch
 * has no kernels there either). */
static em_dtype pw_dtype(const char *op, pw_kind kind, const em_tensor *input, const em_tensor *target) {
    em_dtype dt = kind == PW_HUBER ? input->dtype : em_promote_types(input->dtype, target->dtype);
    if (!em_dtype_is_floating(dt) || !em_dtype_is_floating(target->dtype)) {
        em_set_error(EM_ETYPE, "%s: expected floating input and target, got %s and %s", op,
                     em_dtype_name(input->dtype), em_dtype_name(target->dtype));
        return EM_DTYPE_NONE;
    }
    if (kind == PW_MSE && dt == EM_BFLOAT16) {
        em_set_error(EM_ETYPE, "%s: not implemented for bfloat16 (as in PyTorch)", op);
        return EM_DTYPE_NONE;
    }
    return dt;
}

static em_status pw_param(const char *op, const char *name, double p, bool positive) {
    if (!(positive ? p > 0 : p >= 0)) {
        em_set_error(EM_EVALUE, "%s: %s must be %s, got %g", op, name, positive ? "positive" : "non-negative", p);
        return EM_EVALUE;
    }
    return EM_OK;
}

static em_tensor *pw_forward(const char *op, pw_kind kind, em_tensor *input, em_tensor *target, const char *reduction,
                             double p) {
    em_tensor *in[2] = { input, target };
    em_dtype dt = pw_dtype(op, kind, input, target);
    if (dt == EM_DTYPE_NONE) return NULL;
    em_dtype cdt = dt == EM_FLOAT64 ? EM_FLOAT64 : EM_FLOAT32;
    pw_ctx c = { kind, p, 1.0 };
    em_cpu_iter it;
    em_tensor *terms = em_cpu_iter_build(&it, NULL, cdt, 2, in, cdt, op);
    if (terms) em_cpu_iter_run(&it, cdt == EM_FLOAT64 ? pw_fwd_f64 : pw_fwd_f32, &c, EM_CPU_GRAIN);
    em_cpu_iter_done(&it);
    if (!terms) return NULL;
    int red = red_of(reduction);
    em_tensor *r;
    if (red == 0) {
        r = terms;
    } else {
        double s = 0;
        int64_t n = terms->numel;
        if (cdt == EM_FLOAT64) {
            const double *v = em_tensor_data(terms);
            for (int64_t i = 0; i < n; i++) s += v[i];
        } else {
            const float *v = em_tensor_data(terms);
            for (int64_t i = 0; i < n; i++) s += v[i];
        }
        if (red == 2) s /= (double)n; /* 0/0 = NaN for an empty input */
        em_tensor_release(terms);
        r = em_tensor_new(0, NULL, EM_FLOAT64, em_cpu_dev());
        if (!r) return NULL;
        *(double *)em_tensor_data(r) = s;
    }
    if (r->dtype == dt) return r;
    em_tensor *o = em_cpu_to_dtype(r, dt, op);
    em_tensor_release(r);
    return o;
}

/* grad_output broadcasts with input and target (for sum and mean it is the
 * loss's 0-dim gradient); the result has their broadcast shape. */
static em_tensor *pw_backward(const char *op, pw_kind kind, em_tensor *grad_output, em_tensor *input,
                              em_tensor *target, const char *reduction, double p) {
    em_tensor *in[3] = { grad_output, input, target };
    em_dtype dt = pw_dtype(op, kind, input, target);
    if (dt == EM_DTYPE_NONE) return NULL;
    if (!em_dtype_is_floating(grad_output->dtype)) {
        em_set_error(EM_ETYPE, "%s: expected a floating grad_output, got %s", op, em_dtype_name(grad_output->dtype));
        return NULL;
    }
    em_dtype cdt = dt == EM_FLOAT64 ? EM_FLOAT64 : EM_FLOAT32;
    int64_t shape[EM_MAX_DIMS];
    int nd = em_broadcast_shapes(input->ndim, input->sizes, target->ndim, target->sizes, shape, op);
    if (nd < 0) return NULL;
    int64_t n = 1;
    for (int i = 0; i < nd; i++) n *= shape[i];
    pw_ctx c = { kind, p, red_of(reduction) == 2 ? 1.0 / (double)n : 1.0 };
    em_cpu_iter it;
    em_tensor *r = em_cpu_iter_build(&it, NULL, cdt, 3, in, cdt, op);
    if (r) em_cpu_iter_run(&it, cdt == EM_FLOAT64 ? pw_bwd_f64 : pw_bwd_f32, &c, EM_CPU_GRAIN);
    em_cpu_iter_done(&it);
    if (!r || r->dtype == dt) return r;
    em_tensor *o = em_cpu_to_dtype(r, dt, op);
    em_tensor_release(r);
    return o;
}

em_tensor *em_cpu_mse_loss(em_keyset ks, em_tensor *input, em_tensor *target, const char *reduction) {
    (void)ks;
    return pw_forward("mse_loss", PW_MSE, input, target, reduction, 0);
}

em_tensor *em_cpu_mse_loss_backward(em_keyset ks, em_tensor *grad_output, em_tensor *input, em_tensor *target,
                                    const char *reduction) {
    (void)ks;
    return pw_backward("mse_loss_backward", PW_MSE, grad_output, input, target, reduction, 0);
}

em_tensor *em_cpu_smooth_l1_loss(em_keyset ks, em_tensor *input, em_tensor *target, const char *reduction,
                                 double beta) {
    (void)ks;
    if (pw_param("smooth_l1_loss", "beta", beta, false) != EM_OK) return NULL;
    return pw_forward("smooth_l1_loss", PW_SMOOTH_L1, input, target, reduction, beta);
}

em_tensor *em_cpu_smooth_l1_loss_backward(em_keyset ks, em_tensor *grad_output, em_tensor *input, em_tensor *target,
                                          const char *reduction, double beta) {
    (void)ks;
    if (pw_param("smooth_l1_loss_backward", "beta", beta, false) != EM_OK) return NULL;
    return pw_backward("smooth_l1_loss_backward", PW_SMOOTH_L1, grad_output, input, target, reduction, beta);
}

em_tensor *em_cpu_huber_loss(em_keyset ks, em_tensor *input, em_tensor *target, const char *reduction, double delta) {
    (void)ks;
    if (pw_param("huber_loss", "delta", delta, true) != EM_OK) return NULL;
    return pw_forward("huber_loss", PW_HUBER, input, target, reduction, delta);
}

em_tensor *em_cpu_huber_loss_backward(em_keyset ks, em_tensor *grad_output, em_tensor *input, em_tensor *target,
                                      const char *reduction, double delta) {
    (void)ks;
    if (pw_param("huber_loss_backward", "delta", delta, true) != EM_OK) return NULL;
    return pw_backward("huber_loss_backward", PW_HUBER, grad_output, input, target, reduction, delta);
}
