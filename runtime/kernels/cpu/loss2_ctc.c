/* loss2_ctc.c -- connectionist temporal classification (family loss2):
 * _ctc_loss (the alpha recursion) and _ctc_loss_backward (alpha/beta),
 * PyTorch's ctc_loss_cpu_template and ctc_loss_backward_cpu_template.
 *
 * Note [CTC]
 * log_probs is (T, N, C) (the composite ctc_loss adds N = 1 for unbatched
 * input), float32 or float64. targets hold 1-based labels, either padded
 * (N, S) -- sample b's labels are targets[b][1..target_lengths[b]] -- or
 * 1-d with the samples' labels concatenated (its size must be the sum of
 * target_lengths). blank is a 1-based class too; a label equal to blank or
 * outside 1..C is an error (PyTorch does not check and reads whatever
 * lies there). For sample b with L labels l_1..l_L and input length Ti,
 * the extended sequence l' = (blank, l_1, blank, ..., l_L, blank) has 2L+1
 * states and, in log space,
 *   alpha_0(0) = lp_0(blank), alpha_0(1) = lp_0(l_1),
 *   alpha_t(s) = lse(alpha_{t-1}(s), alpha_{t-1}(s-1), alpha_{t-1}(s-2)
 *                    [only when l'(s) != blank and l'(s) != l'(s-2)]) + lp_t(l'(s)),
 *   loss = -lse(alpha_{Ti-1}(2L), alpha_{Ti-1}(2L-1))  (only the first for L = 0);
 * Ti = 0 gives 0 for L = 0 and inf otherwise (PyTorch reads out of bounds
 * there). beta is the same recursion from the end, and the gradient is
 * PyTorch's: grad_b * (exp(lp_t(c)) - exp(lse_{s: l'(s) = c}(alpha_t(s) +
 * beta_t(s)) + loss - lp_t(c))) for t < Ti, else 0 -- the gradient with
 * respect to logits whose log_softmax is log_probs, which log_softmax's
 * backward passes through unchanged (so it is the true gradient when
 * log_probs come from log_softmax). zero_infinity zeroes the gradient of
 * an infinite loss (the composite zeroes the loss). Samples run in
 * parallel, each in double; log_alpha (N, T, 2 max L + 1) holds -inf
 * where the recursion did not reach.
 */
#pragma GCC optimize("O3", "no-trapping-math", "no-math-errno")
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/cpu/em_cpu.h"

typedef struct {
    const char *op;
    int64_t T, N, C, blank; /* blank 0-based here */
    const int64_t *il, *tl; /* input / target lengths (N each) */
    const int64_t *tg;      /* targets, int64, contiguous, 1-based */
    int64_t *toff;          /* sample b's first label in tg */
    int64_t maxL;           /* max target length */
    const void *lp;         /* log_probs, contiguous (T, N, C) */
    bool f64;
    /* backward */
    const void *gout, *nll, *la;
    void *out;
    bool zero_inf;
    int fail;               /* a sample's scratch allocation failed */
} ctc_ctx;

static inline double lp_at(const ctc_ctx *c, int64_t t, int64_t b, int64_t k) {
    int64_t i = (t * c->N + b) * c->C + k;
    return c->f64 ? ((const double *)c->lp)[i] : (double)((const float *)c->lp)[i];
}

/* l'(s) of sample b, 0-based class */
static inline int64_t ext_label(const ctc_ctx *c, int64_t b, int64_t s) {
    return s % 2 == 0 ? c->blank : c->tg[c->toff[b] + s / 2] - 1;
}

static inline double lse3(double a, double b, double d) {
    double m = a > b ? a : b;
    m = m > d ? m : d;
    if (m == -INFINITY) return -INFINITY;
    return log(exp(a - m) + exp(b - m) + exp(d - m)) + m;
}

static inline double lse2(double a, double b) { return lse3(a, b, -INFINITY); }

/* alpha of sample b into a (Ti x (2L+1), row-major); returns the loss. */
static double ctc_alpha(const ctc_ctx *c, int64_t b, double *a) {
    int64_t Ti = c->il[b], L = c->tl[b], S2 = 2 * L + 1;
    if (Ti == 0) return L == 0 ? 0.0 : INFINITY;
    for (int64_t s = 0; s < S2; s++) a[s] = -INFINITY;
    a[0] = lp_at(c, 0, b, c->blank);
    if (L > 0) a[1] = lp_at(c, 0, b, ext_label(c, b, 1));
    for (int64_t t = 1; t < Ti; t++) {
        const double *p = a + (t - 1) * S2;
        double *q = a + t * S2;
        for (int64_t s = 0; s < S2; s++) {
            int64_t l = ext_label(c, b, s);
            double a1 = p[s], a2 = s > 0 ? p[s - 1] : -INFINITY;
            double a3 = s > 1 && l != c->blank && l != ext_label(c, b, s - 2) ? p[s - 2] : -INFINITY;
            q[s] = lse3(a1, a2, a3) + lp_at(c, t, b, l);
        }
    }
    const double *last = a + (Ti - 1) * S2;
    return L == 0 ? -last[0] : -lse2(last[S2 - 1], last[S2 - 2]);
}

/* ---- forward ---- */

static void ctc_fwd_range(int64_t b0, int64_t b1, void *ctx_) {
    ctc_ctx *c = ctx_;
    int64_t W = 2 * c->maxL + 1;
    for (int64_t b = b0; b < b1; b++) {
        int64_t Ti = c->il[b], S2 = 2 * c->tl[b] + 1;
        double *a = malloc(sizeof(double) * (size_t)(Ti * S2 > 0 ? Ti * S2 : 1));
        if (!a) {
            __atomic_store_n(&c->fail, 1, __ATOMIC_RELAXED);
            return;
        }
        double nll = ctc_alpha(c, b, a);
        for (int64_t t = 0; t < c->T; t++)
            for (int64_t s = 0; s < W; s++) {
                double v = t < Ti && s < S2 ? a[t * S2 + s] : -INFINITY;
                int64_t i = (b * c->T + t) * W + s;
                if (c->f64) ((double *)c->la)[i] = v;
                else ((float *)c->la)[i] = (float)v;
            }
        if (c->f64) ((double *)c->out)[b] = nll;
        else ((float *)c->out)[b] = (float)nll;
        free(a);
    }
}

/* ---- checks ---- */

/* Checks the arguments of op (Note [CTC]) and fills c; *tg_out is the
 * targets as a contiguous int64 tensor and *lp_out log_probs as a
 * contiguous one (new references), c->toff is malloc'ed (free it). */
static em_status ctc_check(const char *op, ctc_ctx *c, em_tensor *log_probs, em_tensor *targets,
                           em_intlist input_lengths, em_intlist target_lengths, int64_t blank, em_tensor **lp_out,
                           em_tensor **tg_out) {
    char a[EM_SHAPE_STR_MAX];
    memset(c, 0, sizeof *c);
    c->op = op;
    *lp_out = *tg_out = NULL;
    if (log_probs->ndim != 3) {
        em_set_error(EM_ESHAPE, "%s: log_probs must have shape (T, N, C), got %s", op,
                     em_shape_str(log_probs->ndim, log_probs->sizes, a, sizeof a));
        return EM_ESHAPE;
    }
    if (log_probs->dtype != EM_FLOAT32 && log_probs->dtype != EM_FLOAT64) {
        em_set_error(EM_ETYPE, "%s: log_probs must be float32 or float64 (as PyTorch), got %s", op,
                     em_dtype_name(log_probs->dtype));
        return EM_ETYPE;
    }
    if (!em_dtype_is_integral(targets->dtype)) {
        em_set_error(EM_ETYPE, "%s: targets must hold integer labels (1-based), got %s", op,
                     em_dtype_name(targets->dtype));
        return EM_ETYPE;
    }
    c->T = log_probs->sizes[0];
    c->N = log_probs->sizes[1];
    c->C = log_probs->sizes[2];
    c->f64 = log_probs->dtype == EM_FLOAT64;
    if (blank < 1 || blank > c->C) {
        em_set_error(EM_EINDEX, "%s: blank must be a class in 1..%lld, got %lld", op, (long long)c->C, (long long)blank);
        return EM_EINDEX;
    }
    c->blank = blank - 1;
    if (input_lengths.n != c->N || target_lengths.n != c->N) {
        em_set_error(EM_ESHAPE, "%s: input_lengths and target_lengths must have one entry per sample (%lld), got %lld and %lld",
                     op, (long long)c->N, (long long)input_lengths.n, (long long)target_lengths.n);
        return EM_ESHAPE;
    }
    c->il = input_lengths.data;
    c->tl = target_lengths.data;
    int64_t total = 0;
    for (int64_t b = 0; b < c->N; b++) {
        if (c->il[b] < 0 || c->il[b] > c->T) {
            em_set_error(EM_EVALUE, "%s: input_lengths entry %lld is %lld, outside 0..T = %lld", op, (long long)(b + 1),
                         (long long)c->il[b], (long long)c->T);
            return EM_EVALUE;
        }
        if (c->tl[b] < 0) {
            em_set_error(EM_EVALUE, "%s: target_lengths entry %lld is negative (%lld)", op, (long long)(b + 1),
                         (long long)c->tl[b]);
            return EM_EVALUE;
        }
        if (c->tl[b] > c->maxL) c->maxL = c->tl[b];
        total += c->tl[b];
    }
    if (targets->ndim == 2) {
        if (targets->sizes[0] != c->N) {
            em_set_error(EM_ESHAPE, "%s: padded targets %s must have one row per sample (%lld)", op,
                         em_shape_str(targets->ndim, targets->sizes, a, sizeof a), (long long)c->N);
            return EM_ESHAPE;
        }
        if (c->maxL > targets->sizes[1]) {
            em_set_error(EM_EVALUE, "%s: target_lengths holds %lld, more than the padded targets' length S = %lld", op,
                         (long long)c->maxL, (long long)targets->sizes[1]);
            return EM_EVALUE;
        }
    } else if (targets->ndim == 1) {
        if (targets->sizes[0] != total) {
            em_set_error(EM_ESHAPE, "%s: concatenated targets %s must hold sum(target_lengths) = %lld labels", op,
                         em_shape_str(targets->ndim, targets->sizes, a, sizeof a), (long long)total);
            return EM_ESHAPE;
        }
    } else {
        em_set_error(EM_ESHAPE, "%s: targets must be padded (N, S) or concatenated 1-d, got %s", op,
                     em_shape_str(targets->ndim, targets->sizes, a, sizeof a));
        return EM_ESHAPE;
    }
    if (!(c->toff = malloc(sizeof(int64_t) * (size_t)(c->N > 0 ? c->N : 1)))) {
        em_set_error(EM_ENOMEM, "%s: out of memory", op);
        return EM_ENOMEM;
    }
    em_tensor *tg = targets->dtype == EM_INT64 && targets->is_contiguous ? em_tensor_retain(targets)
                                                                          : em_cpu_to_dtype(targets, EM_INT64, op);
    if (!tg) goto fail;
    *tg_out = tg;
    c->tg = em_tensor_data(tg);
    for (int64_t b = 0, off = 0; b < c->N; b++) {
        c->toff[b] = targets->ndim == 2 ? b * targets->sizes[1] : off;
        off += c->tl[b];
        for (int64_t j = 0; j < c->tl[b]; j++) {
            int64_t l = c->tg[c->toff[b] + j];
            if (l < 1 || l > c->C || l == blank) {
                em_set_error(EM_EVALUE, "%s: target label %lld (sample %lld, position %lld) must be a class in 1..%lld other than blank (%lld)",
                             op, (long long)l, (long long)(b + 1), (long long)(j + 1), (long long)c->C, (long long)blank);
                goto fail;
            }
        }
    }
    em_tensor *lp = log_probs->is_contiguous ? em_tensor_retain(log_probs)
                                             : em_cpu_to_dtype(log_probs, log_probs->dtype, op);
    if (!lp) goto fail;
    *lp_out = lp;
    c->lp = em_tensor_data(lp);
    return EM_OK;
fail:
    free(c->toff);
    c->toff = NULL;
    em_tensor_release(*tg_out);
    *tg_out = NULL;
    return EM_EVALUE;
}

em_tensor *em_cpu__ctc_loss(em_keyset ks, em_tensor *log_probs, em_tensor *targets, em_intlist input_lengths,
                            em_intlist target_lengths, int64_t blank, bool zero_infinity, em_tensor **log_alpha) {
    (void)ks;
    (void)zero_infinity; /* the composite zeroes infinite losses; the backward their gradients */
    const char *op = "ctc_loss";
    ctc_ctx c;
    em_tensor *lp, *tg, *nll = NULL, *la = NULL;
    *log_alpha = NULL;
    if (ctc_check(op, &c, log_probs, targets, input_lengths, target_lengths, blank, &lp, &tg) != EM_OK) return NULL;
    int64_t lash[3] = { c.N, c.T, 2 * c.maxL + 1 };
    if (!(nll = em_tensor_new(1, &c.N, log_probs->dtype, em_cpu_dev())) ||
        !(la = em_tensor_new(3, lash, log_probs->dtype, em_cpu_dev())))
        goto out;
    c.out = em_tensor_data(nll);
    c.la = em_tensor_data(la);
    em_cpu_parallel_for(c.N, 1, ctc_fwd_range, &c);
    if (c.fail) {
        em_set_error(EM_ENOMEM, "%s: out of memory", op);
        goto out;
    }
    *log_alpha = la;
    la = NULL;
out:
    em_tensor_release(la);
    if (!*log_alpha) {
        em_tensor_release(nll);
        nll = NULL;
    }
    em_tensor_release(lp);
    em_tensor_release(tg);
    free(c.toff);
    return nll;
}

/* ---- backward ---- */

static inline double ld(const void *p, bool f64, int64_t i) {
    return f64 ? ((const double *)p)[i] : (double)((const float *)p)[i];
}

static void ctc_bwd_range(int64_t b0, int64_t b1, void *ctx_) {
    ctc_ctx *c = ctx_;
    int64_t W = 2 * c->maxL + 1;
    for (int64_t b = b0; b < b1; b++) {
        int64_t Ti = c->il[b], L = c->tl[b], S2 = 2 * L + 1;
        double nll = ld(c->nll, c->f64, b), gr = ld(c->gout, c->f64, b);
        bool zero = c->zero_inf && nll == INFINITY;
        /* beta (Ti x S2) and the per-class log sums of alpha + beta (C) */
        double *bt = malloc(sizeof(double) * (size_t)(Ti * S2 > 0 ? Ti * S2 : 1));
        double *lcab = malloc(sizeof(double) * (size_t)(c->C > 0 ? c->C : 1));
        if (!bt || !lcab) {
            free(bt);
            free(lcab);
            __atomic_store_n(&c->fail, 1, __ATOMIC_RELAXED);
            return;
        }
        if (Ti > 0 && !zero) {
            double *last = bt + (Ti - 1) * S2;
            for (int64_t s = 0; s < S2; s++) last[s] = -INFINITY;
            last[S2 - 1] = lp_at(c, Ti - 1, b, c->blank);
            if (L > 0) last[S2 - 2] = lp_at(c, Ti - 1, b, ext_label(c, b, S2 - 2));
            for (int64_t t = Ti - 2; t >= 0; t--) {
                const double *p = bt + (t + 1) * S2;
                double *q = bt + t * S2;
                for (int64_t s = 0; s < S2; s++) {
                    int64_t l = ext_label(c, b, s);
                    double b1v = p[s], b2 = s < S2 - 1 ? p[s + 1] : -INFINITY;
                    double b3 = s < S2 - 2 && l != c->blank && l != ext_label(c, b, s + 2) ? p[s + 2] : -INFINITY;
                    q[s] = lse3(b1v, b2, b3) + lp_at(c, t, b, l);
                }
            }
        }
        for (int64_t t = 0; t < c->T; t++) {
            bool live = t < Ti && !zero;
            if (live) {
                for (int64_t k = 0; k < c->C; k++) lcab[k] = -INFINITY;
                for (int64_t s = 0; s < S2; s++) {
                    int64_t l = ext_label(c, b, s);
                    double v = ld(c->la, c->f64, (b * c->T + t) * W + s) + bt[t * S2 + s];
                    lcab[l] = lse2(lcab[l], v);
                }
            }
            for (int64_t k = 0; k < c->C; k++) {
                double g = 0;
                if (live) {
                    double lp = lp_at(c, t, b, k);
                    g = (exp(lp) - exp(lcab[k] + nll - lp)) * gr;
                }
                int64_t i = (t * c->N + b) * c->C + k;
                if (c->f64) ((double *)c->out)[i] = g;
                else ((float *)c->out)[i] = (float)g;
            }
        }
        free(bt);
        free(lcab);
    }
}

/* a contiguous copy of v in dtype dt when it is not one (new reference) */
static em_tensor *ctc_dense(em_tensor *v, em_dtype dt, const char *op) {
    if (v->dtype == dt && v->is_contiguous) return em_tensor_retain(v);
    return em_cpu_to_dtype(v, dt, op);
}

em_tensor *em_cpu__ctc_loss_backward(em_keyset ks, em_tensor *grad_output, em_tensor *log_probs, em_tensor *targets,
                                     em_intlist input_lengths, em_intlist target_lengths,
                                     em_tensor *neg_log_likelihood, em_tensor *log_alpha, int64_t blank,
                                     bool zero_infinity) {
    (void)ks;
    const char *op = "ctc_loss_backward";
    char a[EM_SHAPE_STR_MAX];
    ctc_ctx c;
    em_tensor *lp, *tg, *g = NULL, *nl = NULL, *la = NULL, *r = NULL;
    if (ctc_check(op, &c, log_probs, targets, input_lengths, target_lengths, blank, &lp, &tg) != EM_OK) return NULL;
    int64_t lash[3] = { c.N, c.T, 2 * c.maxL + 1 };
    bool ok = grad_output->ndim == 1 && grad_output->sizes[0] == c.N && neg_log_likelihood->ndim == 1 &&
              neg_log_likelihood->sizes[0] == c.N && log_alpha->ndim == 3;
    for (int i = 0; ok && i < 3; i++) ok = log_alpha->sizes[i] == lash[i];
    if (!ok) {
        em_set_error(EM_ESHAPE, "%s: grad_output and neg_log_likelihood must have shape {%lld} and log_alpha {%lld,%lld,%lld}, got %s",
                     op, (long long)c.N, (long long)lash[0], (long long)lash[1], (long long)lash[2],
                     em_shape_str(log_alpha->ndim, log_alpha->sizes, a, sizeof a));
        goto out;
    }
    if (!em_dtype_is_floating(grad_output->dtype) || !em_dtype_is_floating(neg_log_likelihood->dtype) ||
        !em_dtype_is_floating(log_alpha->dtype)) {
        em_set_error(EM_ETYPE, "%s: grad_output, neg_log_likelihood and log_alpha must be floating", op);
        goto out;
    }
    if (!(g = ctc_dense(grad_output, log_probs->dtype, op)) || !(nl = ctc_dense(neg_log_likelihood, log_probs->dtype, op)) ||
        !(la = ctc_dense(log_alpha, log_probs->dtype, op)) ||
        !(r = em_tensor_new(3, log_probs->sizes, log_probs->dtype, em_cpu_dev())))
        goto out;
    c.gout = em_tensor_data(g);
    c.nll = em_tensor_data(nl);
    c.la = em_tensor_data(la);
    c.out = em_tensor_data(r);
    c.zero_inf = zero_infinity;
    em_cpu_parallel_for(c.N, 1, ctc_bwd_range, &c);
    if (c.fail) {
        em_set_error(EM_ENOMEM, "%s: out of memory", op);
        em_tensor_release(r);
        r = NULL;
    }
out:
    em_tensor_release(g);
    em_tensor_release(nl);
    em_tensor_release(la);
    em_tensor_release(lp);
    em_tensor_release(tg);
    free(c.toff);
    return r;
}
