/* formulas_metric.c -- backward helpers of the metric family (distances);
 * contracts in em_formulas.h. Written with ops where they must differentiate
 * again. */
#include <math.h>

#include "autograd/em_formulas.h"
#include "autograd/em_autograd.h"
#include "em_ops.h"
#include "kernels/em_tmp_scope.h"

/* ---- temporaries (as the composites' scopes) ---- */

EM_TMP_SCOPE(fs, 48, "metric formula")

#define FS_OK(s) (!(s)->failed)
#define FS(s, expr) (FS_OK(s) ? fs_keep((s), (expr)) : NULL)

static em_tensor *fs_num(fs_scope *s, double v) { return FS(s, em_tensor_wrapped_scalar(em_scalar_float(v))); }

em_tensor *em_ag_fn_euclidean_dist_backward(em_tensor *grad, em_tensor *x1, em_tensor *x2, em_tensor *result,
                                            int64_t which) {
    fs_scope s = { .n = 0 };
    em_tensor *zero = fs_num(&s, 0);
    em_tensor *q = FS(&s, em_div(grad, result));
    em_tensor *at0 = FS(&s, em_eq(result, zero));
    em_tensor *ratio = FS(&s, em_masked_fill(q, at0, zero)); /* a subgradient of 0 at distance 0 */
    int64_t d = which == 0 ? -1 : -2;
    em_tensor *sm = FS(&s, em_sum(ratio, (em_intlist){ &d, 1 }, which == 0, EM_DTYPE_NONE));
    if (which == 1) sm = FS(&s, em_unsqueeze(sm, -1));
    em_tensor *self = which == 0 ? x1 : x2, *other = which == 0 ? x2 : x1;
    em_tensor *rt = which == 0 ? ratio : FS(&s, em_transpose(ratio, -1, -2));
    em_tensor *a = FS(&s, em_mul(self, sm));
    em_tensor *b = FS(&s, em_matmul(rt, other));
    em_tensor *r = FS(&s, em_sub(a, b, em_scalar_int(1)));
    return fs_finish(&s, r);
}

/* ---- pdist / cdist: the kernel ops, or ops when a graph is recorded ---- */

/* The gradient for x1 of the distances dist {*, r1, r2} between the rows of
 * x1 {*, r1, m} and x2 {*, r2, m} (equal batch dims), given grad, written
 * with ops: sum over j of term(x1_i - x2_j, grad_ij, dist_ij), the terms of
 * Note [Distance kernels] (runtime/kernels/cpu/metric.c). Where a term
 * divides, the divisor is replaced by 1 where it would be 0 (and the term
 * masked), so a second derivative sees no 0/0 either. */
/* sign(d), NaN where d is NaN (the kernels' sgn). */
static em_tensor *nan_sign(fs_scope *s, em_tensor *d) {
    em_tensor *sg = FS(s, em_sign(d));
    em_tensor *bad = FS(s, em_isnan(d));
    return FS(s, em_where(bad, d, sg));
}

static em_tensor *dist_grad_ops(em_tensor *grad, em_tensor *x1, em_tensor *x2, double p, em_tensor *dist) {
    fs_scope s = { .n = 0 };
    em_tensor *u1 = FS(&s, em_unsqueeze(x1, -2)), *u2 = FS(&s, em_unsqueeze(x2, -3));
    em_tensor *d = FS(&s, em_sub(u1, u2, em_scalar_int(1)));
    em_tensor *g = FS(&s, em_unsqueeze(grad, -1));
    em_tensor *D = FS(&s, em_unsqueeze(dist, -1));
    em_tensor *zero = fs_num(&s, 0), *one = fs_num(&s, 1);
    em_tensor *term = NULL;
    if (p == 0) {
        term = FS(&s, em_mul(d, zero)); /* zeros, recorded (d * 0, NaN where d is not finite, made 0) */
        em_tensor *bad = FS(&s, em_isnan(term));
        term = FS(&s, em_where(bad, zero, term));
    } else if (p == 1) {
        em_tensor *sg = nan_sign(&s, d);
        term = FS(&s, em_mul(sg, g));
    } else if (isinf(p)) {
        /* where |d| == dist, NaN where |d| - dist is NaN (as the kernel) */
        em_tensor *ad = FS(&s, em_abs(d));
        em_tensor *gap = FS(&s, em_sub(ad, D, em_scalar_int(1)));
        em_tensor *hit = FS(&s, em_eq(gap, zero));
        em_tensor *hf = FS_OK(&s) ? FS(&s, em_to(hit, d->dtype)) : NULL;
        em_tensor *sg = nan_sign(&s, d);
        em_tensor *sgg = FS(&s, em_mul(sg, g));
        term = FS(&s, em_mul(sgg, hf));
        em_tensor *bad = FS(&s, em_isnan(gap));
        term = FS(&s, em_where(bad, fs_num(&s, NAN), term));
    } else {
        em_tensor *D0 = FS(&s, em_eq(D, zero));
        em_tensor *Ds = FS(&s, em_where(D0, one, D)); /* dist, 1 where 0 */
        em_tensor *num;
        if (p == 2) {
            num = FS(&s, em_mul(d, g));
            term = FS(&s, em_div(num, Ds));
        } else {
            em_tensor *pm1 = fs_num(&s, p - 1);
            em_tensor *den = FS(&s, em_pow(Ds, pm1));
            /* |d|, 1 where d == 0 (the term is 0 there through sign(d) or d, and
             * |d|^(p-1) or |d|^(p-2) keeps a finite derivative) */
            em_tensor *ad = FS(&s, em_abs(d));
            em_tensor *d0 = FS(&s, em_eq(d, zero));
            em_tensor *ads = FS(&s, em_where(d0, one, ad));
            if (p < 2) { /* sign(d) |d|^(p-1) g / dist^(p-1); 0 where d == 0 */
                em_tensor *sg = nan_sign(&s, d);
                em_tensor *pw = FS(&s, em_pow(ads, pm1));
                em_tensor *sp = FS(&s, em_mul(sg, pw));
                num = FS(&s, em_mul(sp, g));
            } else { /* d |d|^(p-2) g / dist^(p-1) */
                em_tensor *pm2 = fs_num(&s, p - 2);
                em_tensor *pw = FS(&s, em_pow(ads, pm2));
                em_tensor *dp = FS(&s, em_mul(d, pw));
                num = FS(&s, em_mul(dp, g));
            }
            term = FS(&s, em_div(num, den));
        }
        term = FS(&s, em_where(D0, zero, term));
    }
    int64_t rd = -2;
    em_tensor *r = FS(&s, em_sum(term, (em_intlist){ &rd, 1 }, false, EM_DTYPE_NONE));
    return fs_finish(&s, r);
}

em_tensor *em_ag_fn_cdist_grad(em_tensor *grad, em_tensor *x1, em_tensor *x2, double p, em_tensor *result,
                               int64_t which) {
    fs_scope s = { .n = 0 };
    em_tensor *g = grad, *r = result, *a = x1, *b = x2;
    if (which == 1) {
        g = FS(&s, em_transpose(grad, -1, -2));
        r = FS(&s, em_transpose(result, -1, -2));
        a = x2, b = x1;
    }
    em_tensor *out;
    if (!em_is_grad_enabled()) {
        g = FS(&s, em_contiguous(g));
        r = FS(&s, em_contiguous(r));
        out = FS(&s, em__cdist_backward(g, a, b, p, r));
    } else {
        out = FS_OK(&s) ? FS(&s, dist_grad_ops(g, a, b, p, r)) : NULL;
    }
    return fs_finish(&s, out);
}

em_tensor *em_ag_fn_pdist_grad(em_tensor *grad, em_tensor *self, double p, em_tensor *result) {
    if (!em_is_grad_enabled()) return em__pdist_backward(grad, self, p, result);
    /* the condensed vectors as symmetric {n, n} matrices with a 0 diagonal
     * (index n(n-1)/2 + 1 picks the appended 0; indices are 1-based) */
    int64_t n = self->sizes[0], np = n > 1 ? n * (n - 1) / 2 : 0, nn = n * n;
    em_tensor *idx = em_tensor_new(1, &nn, EM_INT64, em_cpu_device());
    if (!idx) return NULL;
    int64_t *ix = em_tensor_data(idx);
    for (int64_t i = 0; i < n; i++)
        for (int64_t j = 0; j < n; j++) {
            int64_t a = i < j ? i : j, b = i < j ? j : i;
            ix[i * n + j] = i == j ? np + 1 : a * (2 * n - a - 1) / 2 + (b - a - 1) + 1;
        }
    fs_scope s = { .n = 0 };
    fs_keep(&s, idx);
    int64_t sq[2] = { n, n }, one = 1;
    em_tensor *z = FS(&s, em_zeros((em_intlist){ &one, 1 }, grad->dtype, grad->device));
    em_tensor *gl[2] = { grad, z }, *rl[2] = { result, z };
    em_tensor *G = FS(&s, em_cat((em_tensorlist){ gl, 2 }, 0));
    em_tensor *R = FS(&s, em_cat((em_tensorlist){ rl, 2 }, 0));
    G = FS(&s, em_index_select(G, 0, idx));
    G = FS(&s, em_reshape(G, (em_intlist){ sq, 2 }));
    R = FS(&s, em_index_select(R, 0, idx));
    R = FS(&s, em_reshape(R, (em_intlist){ sq, 2 }));
    em_tensor *out = FS_OK(&s) ? FS(&s, dist_grad_ops(G, self, self, p, R)) : NULL;
    return fs_finish(&s, out);
}
