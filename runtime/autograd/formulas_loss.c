/* formulas_loss.c -- formula helpers of the loss family (softmax,
 * log_softmax and their backward ops), declared in em_formulas.h. Written
 * with the public ops only, so that create_graph records them (double
 * backward at any order).
 */
#include <math.h>
#include <string.h>

#include "autograd/em_formulas.h"
#include "em_ops.h"

/* sum of t over the 0-based dim d with keepdim (a 0-dim t: itself). */
static em_tensor *sum_keep(em_tensor *t, int64_t dim) {
    if (t->ndim == 0) return em_tensor_retain(t);
    int d = em_wrap_dim(dim, t->ndim, "softmax backward");
    if (d < 0) return NULL;
    int64_t dd = d;
    return em_sum(t, (em_intlist){ &dd, 1 }, true, EM_DTYPE_NONE);
}

/* softmax's and log_softmax's gradients through their backward ops,
 * computed in result's dtype (for softmax's dtype= option, reduce_to casts
 * the gradient back to self's). */
em_tensor *em_ag_fn_softmax_backward(em_tensor *grad, em_tensor *result, int64_t dim) {
    return em__softmax_backward_data(grad, result, dim, result->dtype);
}

em_tensor *em_ag_fn_log_softmax_backward(em_tensor *grad, em_tensor *result, int64_t dim) {
    return em__log_softmax_backward_data(grad, result, dim, result->dtype);
}

/* d/d output of sum(grad * output * (grad_output - sum(grad_output * output))):
 * grad_output * grad - sum(output * grad_output) * grad - grad_output * sum(output * grad). */
em_tensor *em_ag_fn_softmax_double_backward(em_tensor *grad, em_tensor *grad_output, int64_t dim, em_tensor *output) {
    em_tensor *og = em_mul(output, grad_output);
    em_tensor *s1 = og ? sum_keep(og, dim) : NULL;
    em_tensor *ow = s1 ? em_mul(output, grad) : NULL;
    em_tensor *s2 = ow ? sum_keep(ow, dim) : NULL;
    em_tensor *a = s2 ? em_sub(grad_output, s1, em_scalar_int(1)) : NULL; /* grad_output - s1 */
    em_tensor *b = a ? em_mul(a, grad) : NULL;
    em_tensor *c = b ? em_mul(grad_output, s2) : NULL;
    em_tensor *r = c ? em_sub(b, c, em_scalar_int(1)) : NULL;
    em_tensor *tmp[] = { og, s1, ow, s2, a, b, c };
    for (int i = 0; i < 7; i++) em_tensor_release(tmp[i]);
    return r;
}

/* log_softmax's backward g - exp(output) * sum(g) is linear in g; its
 * transpose applied to grad is grad - sum(grad * exp(output)). */
em_tensor *em_ag_fn_log_softmax_double_backward_grad(em_tensor *grad, em_tensor *output, int64_t dim) {
    em_tensor *e = em_exp(output);
    em_tensor *ge = e ? em_mul(grad, e) : NULL;
    em_tensor *s = ge ? sum_keep(ge, dim) : NULL;
    em_tensor *r = s ? em_sub(grad, s, em_scalar_int(1)) : NULL;
    em_tensor_release(e);
    em_tensor_release(ge);
    em_tensor_release(s);
    return r;
}

/* d/d output of sum(grad * (grad_output - exp(output) * sum(grad_output))):
 * -grad * exp(output) * sum(grad_output). */
em_tensor *em_ag_fn_log_softmax_double_backward_output(em_tensor *grad, em_tensor *grad_output, int64_t dim,
                                                       em_tensor *output) {
    em_tensor *e = em_exp(output);
    em_tensor *s = e ? sum_keep(grad_output, dim) : NULL;
    em_tensor *ge = s ? em_mul(grad, e) : NULL;
    em_tensor *p = ge ? em_mul(ge, s) : NULL;
    em_tensor *r = p ? em_neg(p) : NULL;
    em_tensor_release(e);
    em_tensor_release(s);
    em_tensor_release(ge);
    em_tensor_release(p);
    return r;
}

/* ---- cross_entropy (Note [Class losses] in runtime/kernels/cpu/loss.c) ---- */

/* w viewed to broadcast along input's class dim cd (NULL: the number 1). */
static em_tensor *class_view(em_tensor *w, const em_tensor *input, int cd) {
    if (!w) return em_ag_scalar(1.0);
    int64_t shape[EM_MAX_DIMS];
    for (int i = 0; i < input->ndim; i++) shape[i] = i == cd ? w->numel : 1;
    return em_view(w, (em_intlist){ shape, input->ndim });
}

/* The reduction's per-sample factor coef (grad, or grad / D for mean), put
 * back into input's rank along cd for none. mean_div: D. */
static em_tensor *coef_of(em_tensor *grad, const char *reduction, double mean_div, em_tensor *mean_div_t, int cd,
                          bool per_sample) {
    if (strcmp(reduction, "mean") == 0) {
        if (mean_div_t) return em_div(grad, mean_div_t);
        em_tensor *d = em_ag_scalar(mean_div);
        em_tensor *r = d ? em_div(grad, d) : NULL;
        em_tensor_release(d);
        return r;
    }
    if (per_sample && strcmp(reduction, "none") == 0) return em_unsqueeze(grad, cd);
    return em_tensor_retain(grad);
}

/* Fused kernel when no double backward is recorded; else, with ops:
 * log_softmax's backward of G = dloss/dlogp (Note [Class losses]: -coef B),
 * G from nll_loss_backward for index targets (plus the smoothing term),
 * or -coef * weight * q for probability targets. */
em_tensor *em_ag_fn_cross_entropy_grad(em_tensor *grad, em_tensor *input, em_tensor *target, em_tensor *weight,
                                       int64_t ignore_index, const char *reduction, double label_smoothing) {
    if (!em_is_grad_enabled())
        return em_cross_entropy_backward(grad, input, target, weight, ignore_index, reduction, label_smoothing);
    if (input->ndim == 0) return em_cross_entropy_backward(grad, input, target, weight, ignore_index, reduction,
                                                           label_smoothing); /* reports the error */
    int cd = input->ndim == 1 ? 0 : 1;
    int64_t C = input->sizes[cd];
    double ls = label_smoothing, lsC = C > 0 ? ls / (double)C : 0;
    enum { LP, WV, A, B, CF, G1, G2, V, VF, IDX, ONE, WS, D, IGN, G, K };
    em_tensor *t[K] = { NULL };
    em_tensor *r = NULL;
    if (!(t[LP] = em_log_softmax(input, cd, EM_DTYPE_NONE)) || !(t[WV] = class_view(weight, input, cd))) goto out;
    if (em_dtype_is_floating(target->dtype)) {
        /* G = -coef * w * ((1 - ls) q + ls / C) */
        em_tensor *k1 = em_ag_scalar(1.0 - ls), *k2 = em_ag_scalar(lsC);
        t[A] = k1 && k2 ? em_mul(target, k1) : NULL;
        t[B] = t[A] ? em_add(t[A], k2, em_scalar_int(1)) : NULL;
        em_tensor_release(k1);
        em_tensor_release(k2);
        if (!t[B] || !(t[G1] = em_mul(t[B], t[WV]))) goto out;
        double n = C > 0 ? (double)(input->numel / C) : 0;
        if (!(t[CF] = coef_of(grad, reduction, input->numel ? n : NAN, NULL, cd, true))) goto out;
        if (!(t[G2] = em_mul(t[G1], t[CF])) || !(t[G] = em_neg(t[G2]))) goto out;
    } else {
        if (!(t[G1] = em_nll_loss_backward(grad, t[LP], target, weight, ignore_index, reduction))) goto out;
        if (ls != 0) {
            em_tensor *k = em_ag_scalar(1.0 - ls);
            em_tensor *g1 = k ? em_mul(t[G1], k) : NULL;
            em_tensor_release(k);
            em_tensor_release(t[G1]);
            if (!(t[G1] = g1)) goto out;
            /* smoothing: -(ls / C) * w_k * valid_s * coef_s */
            if (!(t[IGN] = em_tensor_wrapped_scalar(em_scalar_int(ignore_index))) ||
                !(t[V] = em_ne(target, t[IGN])) || !(t[VF] = em_to(t[V], input->dtype)))
                goto out;
            if (strcmp(reduction, "mean") == 0) {
                if (weight) {
                    if (!(t[ONE] = em_tensor_wrapped_scalar(em_scalar_int(1))) ||
                        !(t[IDX] = em_where(t[V], target, t[ONE])))
                        goto out;
                    int64_t flat = t[IDX]->numel;
                    em_tensor *fi = em_reshape(t[IDX], (em_intlist){ &flat, 1 });
                    em_tensor *ws = fi ? em_index_select(weight, 0, fi) : NULL;
                    em_tensor_release(fi);
                    em_tensor *wsv = ws ? em_reshape(ws, (em_intlist){ target->sizes, target->ndim }) : NULL;
                    em_tensor_release(ws);
                    t[WS] = wsv ? em_mul(wsv, t[VF]) : NULL;
                    em_tensor_release(wsv);
                    if (!t[WS]) goto out;
                }
                if (!(t[D] = em_sum(t[WS] ? t[WS] : t[VF], (em_intlist){ NULL, -1 }, false, EM_DTYPE_NONE))) goto out;
            }
            em_tensor *cf = coef_of(grad, reduction, 0, t[D], cd, false);
            em_tensor *cv = cf ? em_mul(cf, t[VF]) : NULL; /* per sample */
            em_tensor_release(cf);
            em_tensor *cu = cv && input->ndim > 1 ? em_unsqueeze(cv, cd) : cv ? em_tensor_retain(cv) : NULL;
            em_tensor_release(cv);
            em_tensor *k2 = cu ? em_ag_scalar(-lsC) : NULL;
            em_tensor *w2 = k2 ? em_mul(t[WV], k2) : NULL;
            t[G2] = w2 ? em_mul(w2, cu) : NULL;
            em_tensor_release(cu);
            em_tensor_release(k2);
            em_tensor_release(w2);
            if (!t[G2] || !(t[G] = em_add(t[G1], t[G2], em_scalar_int(1)))) goto out;
        } else {
            t[G] = em_tensor_retain(t[G1]);
        }
    }
    r = em__log_softmax_backward_data(t[G], t[LP], cd, t[LP]->dtype);
out:
    for (int i = 0; i < K; i++) em_tensor_release(t[i]);
    return r;
}

/* probability targets: d loss / d q_sk = -(1 - ls) w_k lp_sk coef_s. */
em_tensor *em_ag_fn_cross_entropy_target_grad(em_tensor *grad, em_tensor *input, em_tensor *target, em_tensor *weight,
                                              const char *reduction, double label_smoothing) {
    if (input->ndim == 0 || !em_dtype_is_floating(target->dtype)) {
        em_set_error(EM_ETYPE, "cross_entropy: only probability targets have a gradient");
        return NULL;
    }
    int cd = input->ndim == 1 ? 0 : 1;
    int64_t C = input->sizes[cd];
    double n = C > 0 ? (double)(input->numel / C) : 0;
    em_tensor *lp = em_log_softmax(input, cd, EM_DTYPE_NONE);
    em_tensor *wv = lp ? class_view(weight, input, cd) : NULL;
    em_tensor *cf = wv ? coef_of(grad, reduction, input->numel ? n : NAN, NULL, cd, true) : NULL;
    em_tensor *k = cf ? em_ag_scalar(-(1.0 - label_smoothing)) : NULL;
    em_tensor *a = k ? em_mul(lp, wv) : NULL;
    em_tensor *b = a ? em_mul(a, cf) : NULL;
    em_tensor *r = b ? em_mul(b, k) : NULL;
    em_tensor *tmp[] = { lp, wv, cf, k, a, b };
    for (int i = 0; i < 6; i++) em_tensor_release(tmp[i]);
    return r;
}

/* ---- regression losses (runtime/kernels/cpu/loss_pointwise.c) ---- */

/* The second derivative part of a regression loss's backward op: f''(d)
 * grad grad_output (/ n for mean, n = grad's element count, the broadcast
 * shape), d = input - target. kind 0 mse (f'' = 2), 1 smooth_l1 (1 / p
 * where |d| < p, else 0; 0 for p = 0), 2 huber (1 where |d| < p): 0 at
 * |d| = p, as PyTorch's double backward. */
em_tensor *em_ag_fn_pw_loss_double_backward(em_tensor *grad, em_tensor *grad_output, em_tensor *input,
                                            em_tensor *target, const char *reduction, int64_t kind, double p) {
    double scale = strcmp(reduction, "mean") == 0 ? 1.0 / (double)grad->numel : 1.0;
    em_tensor *gg = em_mul(grad, grad_output);
    if (!gg) return NULL;
    if (kind == 1 && p == 0) { /* l1: zero, even where grad is NaN (PyTorch) */
        em_tensor *r = em_ag_fn_zeros_like(gg);
        em_tensor_release(gg);
        return r;
    }
    if (kind == 0) {
        em_tensor *k = em_ag_scalar(2.0 * scale);
        em_tensor *r = k ? em_mul(gg, k) : NULL;
        em_tensor_release(k);
        em_tensor_release(gg);
        return r;
    }
    em_tensor *d = em_sub(input, target, em_scalar_int(1));
    em_tensor *z = d ? em_abs(d) : NULL;
    em_tensor *pt = z ? em_ag_scalar(p) : NULL;
    em_tensor *m = pt ? em_lt(z, pt) : NULL;
    em_tensor *k = m ? em_ag_scalar(kind == 1 ? scale / p : scale) : NULL;
    /* times the mask (not a where): a NaN gradient stays NaN, as PyTorch */
    em_tensor *s = k ? em_mul(gg, k) : NULL;
    em_tensor *r = s ? em_mul(s, m) : NULL;
    em_tensor *tmp[] = { gg, d, z, pt, m, k, s };
    for (int i = 0; i < 7; i++) em_tensor_release(tmp[i]);
    return r;
}
