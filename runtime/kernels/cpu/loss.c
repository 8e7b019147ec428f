/* loss.c -- classification losses (family loss): cross_entropy fused with
 * its log_softmax, its fused backward, nll_loss and nll_loss_backward.
 *
 * Note [Class losses]
 * input has its classes in dim 2 ((N, C), (N, C, d1, ...)) or is (C); it is
 * viewed as [N, C, inner] and a sample is one (n, j) pair: its C logits
 * sit at stride inner. target is either int64 1-based class indices of
 * input's shape without the class dim (an entry equal to ignore_index is
 * skipped: it adds 0 and weighs 0), or, for cross_entropy, floating class
 * probabilities of input's shape. Every loss here is a linear map of the
 * log-probabilities lp (for nll_loss: of input itself):
 *   loss_s = sum_k B_sk * (-lp_sk),
 *   index targets c: B_sk = (1 - ls) w_c [k = c] + (ls / C) w_k,
 *   probabilities q: B_sk = w_k ((1 - ls) q_sk + ls / C),
 * (w the class weights, 1 without weight; ls the label smoothing), and the
 * reductions are none (loss_s per sample), sum, and mean: the sum divided
 * by D = sum of w_c over the kept samples (index targets; 0/0 = NaN when
 * every sample is ignored, as PyTorch) or by the number of samples
 * (probabilities). The gradient with respect to the logits is then
 * coef_s (p_sk a_s - B_sk) with p = softmax, a_s = sum_k B_sk and coef_s
 * the reduction's factor (grad_s, grad, grad / D). Per-sample values are
 * summed in double in sample order, so results never depend on the thread
 * count. float16/bfloat16 compute in float32.
 */
#pragma GCC optimize("O3", "no-trapping-math", "no-math-errno")
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/cpu/em_cpu.h"
#include "kernels/cpu/em_vmath.h"

/* ---- checks and geometry ---- */

typedef struct {
    const char *op;
    int64_t N, C, inner; /* input as [N, C, inner] */
    int cd;              /* input's class dim (0-based) */
    bool prob;           /* target holds probabilities */
    int red;             /* 0 none, 1 sum, 2 mean */
} cl_geom;

static int red_of(const char *reduction) {
    return strcmp(reduction, "none") == 0 ? 0 : strcmp(reduction, "sum") == 0 ? 1 : 2;
}

/* Checks input, target and weight for op (Note [Class losses]) and fills g.
 * allow_prob: a floating target is a probability target (cross_entropy). */
static em_status cl_check(const char *op, em_tensor *input, em_tensor *target, em_tensor *weight, bool allow_prob,
                          const char *reduction, cl_geom *g) {
    char a[EM_SHAPE_STR_MAX], b[EM_SHAPE_STR_MAX];
    memset(g, 0, sizeof *g);
    g->op = op;
    g->red = red_of(reduction);
    if (!em_dtype_is_floating(input->dtype)) {
        em_set_error(EM_ETYPE, "%s: expected a floating input, got %s", op, em_dtype_name(input->dtype));
        return EM_ETYPE;
    }
    if (input->ndim == 0) {
        em_set_error(EM_ESHAPE, "%s: input must have a class dim (shape (C), (N, C) or (N, C, d1, ...)), got a 0-dim tensor",
                     op);
        return EM_ESHAPE;
    }
    g->cd = input->ndim == 1 ? 0 : 1;
    g->C = input->sizes[g->cd];
    g->N = input->ndim == 1 ? 1 : input->sizes[0];
    g->inner = 1;
    for (int i = 2; i < input->ndim; i++) g->inner *= input->sizes[i];
    if (allow_prob && em_dtype_is_floating(target->dtype)) {
        g->prob = true;
        bool same = target->ndim == input->ndim;
        for (int i = 0; same && i < input->ndim; i++) same = target->sizes[i] == input->sizes[i];
        if (!same) {
            em_set_error(EM_ESHAPE, "%s: probability target %s must have input's shape %s", op,
                         em_shape_str(target->ndim, target->sizes, a, sizeof a),
                         em_shape_str(input->ndim, input->sizes, b, sizeof b));
            return EM_ESHAPE;
        }
        if (target->dtype != input->dtype) {
            em_set_error(EM_ETYPE, "%s: probability target dtype %s must be input's %s", op,
                         em_dtype_name(target->dtype), em_dtype_name(input->dtype));
            return EM_ETYPE;
        }
    } else {
        if (target->dtype != EM_INT64) {
            em_set_error(EM_ETYPE, "%s: target must hold int64 class indices (1-based)%s, got %s", op,
                         allow_prob ? " or floating class probabilities" : "", em_dtype_name(target->dtype));
            return EM_ETYPE;
        }
        int64_t want[EM_MAX_DIMS];
        int nw = 0;
        for (int i = 0; i < input->ndim; i++)
            if (i != g->cd) want[nw++] = input->sizes[i];
        bool same = target->ndim == nw;
        for (int i = 0; same && i < nw; i++) same = target->sizes[i] == want[i];
        if (!same) {
            char c[EM_SHAPE_STR_MAX];
            em_set_error(EM_ESHAPE, "%s: target %s must have input %s's shape without the class dim, %s", op,
                         em_shape_str(target->ndim, target->sizes, a, sizeof a),
                         em_shape_str(input->ndim, input->sizes, b, sizeof b), em_shape_str(nw, want, c, sizeof c));
            return EM_ESHAPE;
        }
    }
    if (weight) {
        if (weight->ndim != 1 || weight->sizes[0] != g->C) {
            em_set_error(EM_ESHAPE, "%s: weight %s must be 1-d with one entry per class (%lld)", op,
                         em_shape_str(weight->ndim, weight->sizes, a, sizeof a), (long long)g->C);
            return EM_ESHAPE;
        }
        if (weight->dtype != input->dtype) {
            em_set_error(EM_ETYPE, "%s: weight dtype %s must be input's %s", op, em_dtype_name(weight->dtype),
                         em_dtype_name(input->dtype));
            return EM_ETYPE;
        }
    }
    return EM_OK;
}

/* t as a contiguous tensor of dtype dt (a new reference). */
static em_tensor *as_contig(em_tensor *t, em_dtype dt, const char *op) {
    if (t->dtype == dt && t->is_contiguous) return em_tensor_retain(t);
    return em_cpu_to_dtype(t, dt, op);
}

/* n doubles (at least one), or NULL with an out-of-memory error naming op. */
static double *cl_alloc(int64_t n, const char *op) {
    double *p = malloc(sizeof(double) * (size_t)(n > 0 ? n : 1));
    if (!p) em_set_error(EM_ENOMEM, "%s: out of memory", op);
    return p;
}

static em_dtype compute_of(em_dtype dt) { return dt == EM_FLOAT64 ? EM_FLOAT64 : EM_FLOAT32; }

/* The contiguous operands of one call, in the compute dtype; wd: the
 * weights as doubles (NULL without weight; owned). */
typedef struct {
    cl_geom g;
    em_dtype cdt;
    em_tensor *x, *t, *w; /* contiguous input, target, weight (or NULL) */
    const int64_t *ti;    /* index targets */
    const char *tp;       /* probability targets (compute dtype) */
    double *wd;           /* C weights */
    double W;             /* their sum */
    double ls;            /* label smoothing */
    int64_t ignore;
} cl_ops;

static void cl_ops_free(cl_ops *o) {
    em_tensor_release(o->x);
    em_tensor_release(o->t);
    em_tensor_release(o->w);
    free(o->wd);
}

/* Fills o (the checks first); validates index targets: each in 1..C or
 * equal to ignore_index. Returns EM_OK or an error (o freed by the caller). */
static em_status cl_prepare(cl_ops *o, const char *op, em_tensor *input, em_tensor *target, em_tensor *weight,
                            bool allow_prob, const char *reduction, int64_t ignore_index, double ls) {
    memset(o, 0, sizeof *o);
    em_status st = cl_check(op, input, target, weight, allow_prob, reduction, &o->g);
    if (st != EM_OK) return st;
    if (!(ls >= 0.0 && ls <= 1.0)) {
        em_set_error(EM_EVALUE, "%s: label_smoothing must be between 0 and 1, got %g", op, ls);
        return EM_EVALUE;
    }
    if (o->g.prob && ignore_index != -100 && ignore_index >= 1) {
        em_set_error(EM_EVALUE, "%s: ignore_index (%lld) is not supported with probability targets", op,
                     (long long)ignore_index);
        return EM_EVALUE;
    }
    o->cdt = compute_of(input->dtype);
    o->ls = ls;
    o->ignore = ignore_index;
    if (!(o->x = as_contig(input, o->cdt, op))) return em_error_kind();
    if (o->g.prob) {
        if (!(o->t = as_contig(target, o->cdt, op))) return em_error_kind();
        o->tp = em_tensor_data(o->t);
    } else {
        if (!(o->t = as_contig(target, EM_INT64, op))) return em_error_kind();
        o->ti = em_tensor_data(o->t);
        int64_t ns = o->t->numel;
        for (int64_t s = 0; s < ns; s++) {
            int64_t c = o->ti[s];
            if (c != ignore_index && (c < 1 || c > o->g.C)) {
                em_set_error(EM_EINDEX, "%s: target %lld out of range 1..%lld (ignore_index is %lld)", op,
                             (long long)c, (long long)o->g.C, (long long)ignore_index);
                return EM_EINDEX;
            }
        }
    }
    o->wd = cl_alloc(o->g.C, op);
    if (!o->wd) return EM_ENOMEM;
    o->W = 0;
    if (weight) {
        if (!(o->w = as_contig(weight, EM_FLOAT64, op))) return em_error_kind();
        const double *wv = em_tensor_data(o->w);
        for (int64_t k = 0; k < o->g.C; k++) o->wd[k] = wv[k], o->W += wv[k];
    } else {
        for (int64_t k = 0; k < o->g.C; k++) o->wd[k] = 1.0;
        o->W = (double)o->g.C;
    }
    return EM_OK;
}

/* The mean's divisor D (Note [Class losses]). */
static double cl_divisor(const cl_ops *o) {
    int64_t ns = o->g.N * o->g.inner;
    if (o->g.prob) return ns > 0 ? (double)ns : NAN;
    double d = 0;
    for (int64_t s = 0; s < ns; s++)
        if (o->ti[s] != o->ignore) d += o->wd[o->ti[s] - 1];
    return d;
}

/* ---- per-sample loops ---- */

static int64_t cl_nsamples(const cl_ops *o) { return o->g.N * o->g.inner; }

typedef struct {
    const cl_ops *o;
    bool nll;             /* nll_loss: lp is input itself */
    double *loss;         /* forward: per-sample loss */
    const double *coef;   /* backward: per-sample factor (0 for ignored) */
    char *gi;             /* backward: the gradient (compute dtype, input's layout) */
} cl_ctx;

/* DEF_CL(N, T, EXP): the forward (cl_fwd_N) and backward (cl_bwd_N) of
 * cross_entropy / nll_loss over samples [begin, end); a sample is (n, j),
 * its logits x[n*C*inner + k*inner + j]. The row max and sum of exps use
 * LANES accumulators where the logits are contiguous (inner == 1). */
#define LANES 16
#define CL_MAXF(a, b) ((b) > (a) ? (b) : (a))
/* a contiguous row's max (NaNs skipped, -inf when empty): vectorised for float32 */
static inline __attribute__((always_inline)) float cl_rowmax_f32(const float *x, int64_t C) {
    return em_cpu_rowmax_f32(x, C);
}
static inline __attribute__((always_inline)) double cl_rowmax_f64(const double *x, int64_t C) {
    double m = -INFINITY;
    for (int64_t k = 0; k < C; k++) m = x[k] > m ? x[k] : m;
    return m;
}
/* float32 loops: EM_VM_CLONES (FMA clone for em_vm_expf, Note [Vector math]),
 * with the file's optimisation options repeated (a function's optimize
 * attribute replaces the #pragma GCC optimize for it) */
#define CL_CLONES_f32 EM_VM_CLONES __attribute__((optimize("O3", "no-trapping-math", "no-math-errno", "fp-contract=fast")))
#define CL_CLONES_f64 CLONE_f64
#define DEF_CL(N, T, EXP, LOG)                                                                    \
    /* log-sum-exp of the C logits at x with stride st */                                        \
    static inline __attribute__((always_inline)) T cl_lse_##N(const T *restrict x, int64_t C,    \
                                                               int64_t st) {                      \
        T acc[LANES], m = -INFINITY, s = 0;                                                       \
        int64_t k = 0;                                                                            \
        if (st == 1 && sizeof(T) == sizeof(float)) { /* float32: the vectorised row max */       \
            m = (T)em_cpu_rowmax_f32((const float *)(const void *)x, C);                          \
            k = C;                                                                                \
        } else if (st == 1) {                                                                     \
            for (int l = 0; l < LANES; l++) acc[l] = -INFINITY;                                   \
            for (; k + LANES <= C; k += LANES)                                                    \
                for (int l = 0; l < LANES; l++) acc[l] = CL_MAXF(acc[l], x[k + l]);               \
            for (int l = 0; l < LANES; l++) m = CL_MAXF(m, acc[l]);                               \
        }                                                                                         \
        for (; k < C; k++) m = CL_MAXF(m, x[k * st]);                                             \
        k = 0;                                                                                    \
        if (st == 1) {                                                                            \
            for (int l = 0; l < LANES; l++) acc[l] = 0;                                           \
            for (; k + LANES <= C; k += LANES)                                                    \
                for (int l = 0; l < LANES; l++) acc[l] += EXP(x[k + l] - m);                      \
            for (int l = 0; l < LANES; l++) s += acc[l];                                          \
        }                                                                                         \
        for (; k < C; k++) s += EXP(x[k * st] - m);                                               \
        return m + LOG(s);                                                                        \
    }                                                                                             \
    CL_CLONES_##N static void cl_fwd_##N(int64_t begin, int64_t end, void *ctx_) {                    \
        const cl_ctx *c = ctx_;                                                                   \
        const cl_ops *o = c->o;                                                                   \
        const int64_t C = o->g.C, inner = o->g.inner;                                             \
        const double ls = o->ls, lsC = C > 0 ? o->ls / (double)C : 0;                             \
        const int64_t ns = cl_nsamples(o);                                                        \
        for (int64_t s = begin; s < end; s++) {                                                   \
            int64_t n = s / inner, j = s % inner, base = n * C * inner + j;                       \
            const T *restrict x = (const T *)em_tensor_data(o->x) + base;                         \
            int64_t cls = o->ti ? o->ti[s] : 0;                                                   \
            c->loss[ns + s] = 0;                                                                  \
            if (o->ti && cls == o->ignore) {                                                      \
                c->loss[s] = 0;                                                                   \
                continue;                                                                         \
            }                                                                                     \
            double lse = c->nll ? 0 : (double)(inner == 1 ? cl_lse_##N(x, C, 1)                   \
                                                          : cl_lse_##N(x, C, inner));             \
            double l = 0;                                                                         \
            if (o->ti) {                                                                          \
                l = o->wd[cls - 1] * (lse - (double)x[(cls - 1) * inner]);                        \
                if (!c->nll && ls > 0) { /* the smoothing sum, kept apart (PyTorch's order) */    \
                    double sw = 0;                                                                \
                    for (int64_t k = 0; k < C; k++) sw += o->wd[k] * (lse - (double)x[k * inner]); \
                    c->loss[ns + s] = sw;                                                         \
                }                                                                                 \
            } else {                                                                              \
                const T *restrict q = (const T *)o->tp + base;                                    \
                for (int64_t k = 0; k < C; k++)                                                   \
                    l += o->wd[k] * ((1.0 - ls) * (double)q[k * inner] + lsC) * (lse - (double)x[k * inner]); \
            }                                                                                     \
            c->loss[s] = l;                                                                       \
        }                                                                                         \
    }                                                                                             \
    CL_CLONES_##N static void cl_bwd_##N(int64_t begin, int64_t end, void *ctx_) {                    \
        const cl_ctx *c = ctx_;                                                                   \
        const cl_ops *o = c->o;                                                                   \
        const int64_t C = o->g.C, inner = o->g.inner;                                             \
        const double ls = o->ls, lsC = C > 0 ? o->ls / (double)C : 0;                             \
        for (int64_t s = begin; s < end; s++) {                                                   \
            int64_t n = s / inner, j = s % inner, base = n * C * inner + j;                       \
            const T *restrict x = (const T *)em_tensor_data(o->x) + base;                         \
            T *restrict gi = (T *)c->gi + base;                                                   \
            double cf = c->coef[s];                                                               \
            int64_t cls = o->ti ? o->ti[s] : 0;                                                   \
            bool kept = !o->ti || cls != o->ignore;                                               \
            if (c->nll) { /* -coef * B at the target's class */                                   \
                for (int64_t k = 0; k < C; k++) gi[k * inner] = 0;                                \
                if (kept) gi[(cls - 1) * inner] = (T)(-cf * o->wd[cls - 1]);                      \
                continue;                                                                         \
            }                                                                                     \
            if (o->ti && kept && ls == 0 && inner == 1) {                                         \
                /* softmax into gi (exps stored, then scaled by a / sum): one exp per logit, \
                 * not cl_lse's and then a second (PyTorch's log_softmax backward also \
                 * computes one); NaN and inf rows come out NaN as before */                        \
                T m = cl_rowmax_##N(x, C), acc[LANES], sum = 0;                                   \
                int64_t k = 0;                                                                    \
                for (int l = 0; l < LANES; l++) acc[l] = 0;                                       \
                for (; k + LANES <= C; k += LANES)                                                \
                    for (int l = 0; l < LANES; l++) {                                             \
                        T e = EXP(x[k + l] - m);                                                  \
                        gi[k + l] = e;                                                            \
                        acc[l] += e;                                                              \
                    }                                                                             \
                for (int l = 0; l < LANES; l++) sum += acc[l];                                    \
                for (; k < C; k++) {                                                              \
                    T e = EXP(x[k] - m);                                                          \
                    gi[k] = e;                                                                    \
                    sum += e;                                                                     \
                }                                                                                 \
                double wc = o->wd[cls - 1];                                                       \
                T f = (T)(cf * wc) / sum;                                                         \
                for (k = 0; k < C; k++) gi[k] *= f;                                               \
                gi[cls - 1] -= (T)(cf * wc);                                                      \
                continue;                                                                         \
            }                                                                                     \
            T lse = inner == 1 ? cl_lse_##N(x, C, 1) : cl_lse_##N(x, C, inner);                   \
            if (o->ti && !kept) { /* p * 0: NaN where the logits make p NaN, as PyTorch */        \
                for (int64_t k = 0; k < C; k++) gi[k * inner] = EXP(x[k * inner] - lse) * (T)0;  \
            } else if (o->ti) {                                                                   \
                double wc = (1.0 - ls) * o->wd[cls - 1];                                          \
                T a = (T)(cf * (ls > 0 ? wc + lsC * o->W : wc));                                  \
                if (ls > 0) {                                                                     \
                    for (int64_t k = 0; k < C; k++)                                               \
                        gi[k * inner] = EXP(x[k * inner] - lse) * a - (T)(cf * lsC * o->wd[k]);   \
                } else if (inner == 1) {                                                          \
                    for (int64_t k = 0; k < C; k++) gi[k] = EXP(x[k] - lse) * a;                  \
                } else {                                                                          \
                    for (int64_t k = 0; k < C; k++) gi[k * inner] = EXP(x[k * inner] - lse) * a;  \
                }                                                                                 \
                gi[(cls - 1) * inner] -= (T)(cf * wc);                                            \
            } else {                                                                              \
                const T *restrict q = (const T *)o->tp + base;                                    \
                double a = 0;                                                                     \
                for (int64_t k = 0; k < C; k++) a += o->wd[k] * ((1.0 - ls) * (double)q[k * inner] + lsC); \
                for (int64_t k = 0; k < C; k++) {                                                 \
                    double b = o->wd[k] * ((1.0 - ls) * (double)q[k * inner] + lsC);              \
                    gi[k * inner] = (T)(cf * ((double)EXP(x[k * inner] - lse) * a - b));          \
                }                                                                                 \
            }                                                                                     \
        }                                                                                         \
    }

DEF_CL(f32, float, em_vm_expf, logf)
DEF_CL(f64, double, exp, log)

static void cl_run(cl_ctx *c, bool backward) {
    const cl_ops *o = c->o;
    int64_t ns = o->g.N * o->g.inner;
    if (ns == 0) return;
    int64_t per = o->g.C > 0 ? o->g.C * 2 : 1;
    int64_t grain = EM_CPU_GRAIN / per;
    em_cpu_range_fn fn = o->cdt == EM_FLOAT32 ? (backward ? cl_bwd_f32 : cl_fwd_f32) : (backward ? cl_bwd_f64 : cl_fwd_f64);
    em_cpu_parallel_for(ns, grain > 0 ? grain : 1, fn, c);
}

/* ---- forward ---- */

/* The loss (Note [Class losses]) for cross_entropy (nll false) or nll_loss:
 * a 0-dim tensor of input's dtype, or per sample for reduction none. */
static em_tensor *cl_forward(const char *op, em_tensor *input, em_tensor *target, em_tensor *weight,
                             int64_t ignore_index, const char *reduction, double ls, bool nll) {
    cl_ops o;
    em_tensor *out = NULL;
    double *loss = NULL;
    if (cl_prepare(&o, op, input, target, weight, !nll, reduction, ignore_index, ls) != EM_OK) goto done;
    int64_t ns = o.g.N * o.g.inner;
    loss = cl_alloc(2 * ns, op);
    if (!loss) goto done;
    cl_ctx c = { &o, nll, loss, NULL, NULL };
    cl_run(&c, false);
    /* index targets: (1 - ls) nll + (ls / C) smoothing, each reduced on its own */
    double k1 = o.ti && !nll ? 1.0 - ls : 1.0, k2 = o.g.C > 0 ? ls / (double)o.g.C : 0;
    bool smooth = o.ti && !nll && ls > 0;
    if (o.g.red == 0) {
        for (int64_t s = 0; s < ns; s++) loss[s] = smooth ? k1 * loss[s] + k2 * loss[ns + s] : k1 * loss[s];
        int64_t shape[EM_MAX_DIMS];
        int nd = 0;
        for (int i = 0; i < input->ndim; i++)
            if (i != o.g.cd) shape[nd++] = input->sizes[i];
        em_tensor *r = em_tensor_new(nd, shape, EM_FLOAT64, em_cpu_dev());
        if (!r) goto done;
        memcpy(em_tensor_data(r), loss, sizeof(double) * (size_t)ns);
        out = input->dtype == EM_FLOAT64 ? r : em_cpu_to_dtype(r, input->dtype, op);
        if (out != r) em_tensor_release(r);
        goto done;
    }
    double sum = 0, sum_s = 0, d = o.g.red == 2 ? cl_divisor(&o) : 1.0;
    for (int64_t s = 0; s < ns; s++) sum += loss[s], sum_s += loss[ns + s];
    if (o.g.red == 2) sum /= d, sum_s /= d;
    sum = smooth ? k1 * sum + k2 * sum_s : k1 * sum;
    em_tensor *r = em_tensor_new(0, NULL, EM_FLOAT64, em_cpu_dev());
    if (!r) goto done;
    *(double *)em_tensor_data(r) = sum;
    out = input->dtype == EM_FLOAT64 ? r : em_cpu_to_dtype(r, input->dtype, op);
    if (out != r) em_tensor_release(r);
done:
    free(loss);
    cl_ops_free(&o);
    return out;
}

em_tensor *em_cpu_cross_entropy(em_keyset ks, em_tensor *input, em_tensor *target, em_tensor *weight,
                                int64_t ignore_index, const char *reduction, double label_smoothing) {
    (void)ks;
    return cl_forward("cross_entropy", input, target, weight, ignore_index, reduction, label_smoothing, false);
}

em_tensor *em_cpu_nll_loss(em_keyset ks, em_tensor *input, em_tensor *target, em_tensor *weight, int64_t ignore_index,
                           const char *reduction) {
    (void)ks;
    return cl_forward("nll_loss", input, target, weight, ignore_index, reduction, 0.0, true);
}

/* ---- backward ---- */

/* The gradient with respect to input for grad_output (the loss's shape:
 * 0-dim, or per sample for none), in input's dtype. */
static em_tensor *cl_backward(const char *op, em_tensor *grad_output, em_tensor *input, em_tensor *target,
                              em_tensor *weight, int64_t ignore_index, const char *reduction, double ls, bool nll) {
    cl_ops o;
    em_tensor *out = NULL, *g = NULL, *gi = NULL;
    double *coef = NULL;
    if (cl_prepare(&o, op, input, target, weight, !nll, reduction, ignore_index, ls) != EM_OK) goto done;
    int64_t ns = o.g.N * o.g.inner;
    int64_t want = o.g.red == 0 ? ns : 1;
    if (grad_output->numel != want || (o.g.red != 0 && grad_output->ndim != 0)) {
        char a[EM_SHAPE_STR_MAX];
        em_set_error(EM_ESHAPE, "%s: grad_output %s must have the loss's shape (%s)", op,
                     em_shape_str(grad_output->ndim, grad_output->sizes, a, sizeof a),
                     o.g.red == 0 ? "one value per sample" : "0-dim");
        goto done;
    }
    if (!em_dtype_is_floating(grad_output->dtype)) {
        em_set_error(EM_ETYPE, "%s: expected a floating grad_output, got %s", op, em_dtype_name(grad_output->dtype));
        goto done;
    }
    if (!(g = as_contig(grad_output, EM_FLOAT64, op))) goto done;
    coef = cl_alloc(ns, op);
    if (!coef) goto done;
    const double *gv = em_tensor_data(g);
    double f = o.g.red == 0 ? 1.0 : o.g.red == 1 ? gv[0] : gv[0] / cl_divisor(&o);
    for (int64_t s = 0; s < ns; s++) coef[s] = o.g.red == 0 ? gv[s] : f;
    if (!(gi = em_tensor_new(input->ndim, input->sizes, o.cdt, em_cpu_dev()))) goto done;
    cl_ctx c = { &o, nll, NULL, coef, em_tensor_data(gi) };
    cl_run(&c, true);
    out = gi->dtype == input->dtype ? em_tensor_retain(gi) : em_cpu_to_dtype(gi, input->dtype, op);
done:
    free(coef);
    em_tensor_release(g);
    em_tensor_release(gi);
    cl_ops_free(&o);
    return out;
}

em_tensor *em_cpu_cross_entropy_backward(em_keyset ks, em_tensor *grad_output, em_tensor *input, em_tensor *target,
                                         em_tensor *weight, int64_t ignore_index, const char *reduction,
                                         double label_smoothing) {
    (void)ks;
    return cl_backward("cross_entropy_backward", grad_output, input, target, weight, ignore_index, reduction,
                       label_smoothing, false);
}

em_tensor *em_cpu_nll_loss_backward(em_keyset ks, em_tensor *grad_output, em_tensor *input, em_tensor *target,
                                    em_tensor *weight, int64_t ignore_index, const char *reduction) {
    (void)ks;
    return cl_backward("nll_loss_backward", grad_output, input, target, weight, ignore_index, reduction, 0.0, true);
}
