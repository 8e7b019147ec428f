/* formulas_norm.c -- backward helpers of the normalisation family
 * (schema/derivatives/norm.yaml). The first-order helpers call the fused
 * backward ops (native_layer_norm_backward, ...) with only the result the
 * formula needs switched on; the double-backward helpers are PyTorch 1.13's
 * formulas (layer_norm_double_backward, ...) written with public ops, so
 * that create_graph records them. Statistics (mean, rstd) come from the
 * forward kernel (Note [Norm statistics] in runtime/kernels/cpu/norm.c).
 *
 * Each helper opens a temporaries scope (begin()/finish()); intermediates
 * go through em_ag_tmp and are released at its end, and a failed step
 * (NULL) short-circuits the rest of the chain: once a step fails, no other
 * op runs, so its message stays in the error slot.
 */
#include "autograd/em_formulas.h"
#include "em_ops.h"

static _Thread_local bool nf_failed;

static em_tensor *step(em_tensor *t) {
    if (!t) nf_failed = true;
    return em_ag_tmp(t);
}
#define OP(call) (nf_failed ? NULL : step(call))

typedef struct {
    int mark;
    bool failed; /* the enclosing helper's flag */
} nf_scope;

static nf_scope begin(void) {
    nf_scope sc = { em_ag_scope_begin(), nf_failed };
    nf_failed = false;
    return sc;
}

/* Ends the scope, keeping r (a new reference, or NULL with the error). */
static em_tensor *finish(nf_scope sc, em_tensor *r) {
    if (nf_failed) r = NULL;
    if (r) em_tensor_retain(r);
    em_ag_scope_end(sc.mark);
    nf_failed = sc.failed;
    return r;
}

static em_tensor *add(em_tensor *a, em_tensor *b) { return a && b ? OP(em_add(a, b, em_scalar_int(1))) : NULL; }
static em_tensor *sub(em_tensor *a, em_tensor *b) { return a && b ? OP(em_sub(a, b, em_scalar_int(1))) : NULL; }
static em_tensor *mul(em_tensor *a, em_tensor *b) { return a && b ? OP(em_mul(a, b)) : NULL; }
static em_tensor *muls(em_tensor *a, double s) { return a ? OP(em_mul(a, em_ag_tmp(em_ag_scalar(s)))) : NULL; }
static em_tensor *mean_over(em_tensor *a, em_intlist dims) {
    return a ? OP(em_mean(a, dims, true, EM_DTYPE_NONE)) : NULL;
}
static em_tensor *sum_over(em_tensor *a, em_intlist dims) {
    return a ? OP(em_sum(a, dims, true, EM_DTYPE_NONE)) : NULL;
}

/* A gradient of a result that is absent: the result was not computed (an
 * empty result), or none flowed -- the node then hands the formula zeros
 * (Note [Several results]), so an all-zero gradient without history counts
 * as absent, as in formulas_lapack.c's Note [Absent gradients of several
 * results]; torch's formulas skip an undefined one. */
static bool absent(em_tensor *g) {
    if (!g || g->numel == 0) return true;
    if (em_requires_grad(g)) return false;
    em_tensor *nz = OP(em_ne(g, em_ag_tmp(em_ag_scalar(0.0))));
    em_tensor *any = nz ? OP(em_any(nz, NULL, false)) : NULL;
    return any && !*(const bool *)em_tensor_data(any);
}

/* ---- layer_norm ---- */

em_tensor *em_ag_fn_layer_norm_grad(em_tensor *grad, em_tensor *input, em_intlist normalized_shape, em_tensor *mean,
                                    em_tensor *rstd, em_tensor *weight, em_tensor *bias, int64_t which) {
    em_tensor *gw = NULL, *gb = NULL;
    em_tensor *gi = em_native_layer_norm_backward(grad, input, normalized_shape, mean, rstd, weight, bias, which == 0,
                                                  which == 1, which == 2, &gw, &gb);
    if (!gi) return NULL;
    em_tensor *keep = which == 0 ? gi : which == 1 ? gw : gb;
    em_tensor_retain(keep);
    em_tensor_release(gi);
    em_tensor_release(gw);
    em_tensor_release(gb);
    return keep;
}

/* The normalised dims of input (the trailing ns.n), 0-based. */
static em_intlist norm_dims(const em_tensor *input, int n, int64_t *buf) {
    for (int i = 0; i < n; i++) buf[i] = input->ndim - n + i;
    return (em_intlist){ buf, n };
}

/* With xh = (x - mean) rstd, g = gO w (gO without weight), N the group size
 * and P(v) = v - mean(v) - xh mean(xh v) over each group (P is symmetric),
 * the first-order gradients are gI = rstd P(g), gW = sum_rows(gO xh),
 * gB = sum_rows(gO). For cotangents ggI, ggW, ggB of those:
 *   d/dgO = w rstd P(ggI) + ggW xh + ggB
 *   d/dw  = gO rstd P(ggI)                 (summed to w's shape by the node)
 *   d/dx  = rstd P(v) - rstd^2/N c1 xh,  v = -rstd B ggI - rstd c2/N g + ggW gO
 * with B = mean(g xh), c1 = sum(ggI (g - mean(g) - xh B)), c2 = sum(ggI xh)
 * per group -- the terms of PyTorch's layer_norm_double_backward, mean and
 * rstd's dependence on x included (they get no gradient of their own). */
em_tensor *em_ag_fn_layer_norm_double_backward(em_tensor *ggI, em_tensor *ggW, em_tensor *ggB, em_tensor *grad_out,
                                               em_tensor *input, em_intlist normalized_shape, em_tensor *mean,
                                               em_tensor *rstd, em_tensor *weight, int64_t which) {
    int64_t buf[EM_MAX_DIMS];
    em_intlist dims = norm_dims(input, normalized_shape.n, buf);
    double N = 1;
    for (int i = 0; i < normalized_shape.n; i++) N *= (double)normalized_shape.data[i];
    nf_scope sc = begin();
    bool has_w = weight != NULL, has_gw = has_w && !absent(ggW), has_gb = !absent(ggB), has_gi = !absent(ggI);
    em_tensor *xh = mul(sub(input, mean), rstd);
    em_tensor *r = NULL;
    em_tensor *pgi = NULL; /* rstd P(ggI) */
    if (has_gi && which != 1) {
        em_tensor *p = sub(sub(ggI, mean_over(ggI, dims)), mul(xh, mean_over(mul(xh, ggI), dims)));
        pgi = mul(p, rstd);
    }
    if (which == 0) { /* grad_out */
        r = has_gi ? (has_w ? mul(pgi, weight) : pgi) : OP(em_ag_fn_zeros_like(grad_out));
        if (has_gw) r = add(r, mul(ggW, xh));
        if (has_gb) r = add(r, ggB);
    } else if (which == 2) { /* weight */
        r = has_gi ? mul(grad_out, pgi) : OP(em_ag_fn_zeros_like(weight));
    } else { /* input */
        em_tensor *g = has_w ? mul(grad_out, weight) : grad_out;
        em_tensor *v = has_gw ? mul(ggW, grad_out) : NULL;
        em_tensor *t2 = NULL;
        if (has_gi) {
            em_tensor *B = mean_over(mul(g, xh), dims);
            em_tensor *c1 = sum_over(mul(ggI, sub(sub(g, mean_over(g, dims)), mul(xh, B))), dims);
            em_tensor *c2 = sum_over(mul(ggI, xh), dims);
            em_tensor *vi = add(muls(mul(mul(rstd, B), ggI), -1.0), muls(mul(mul(rstd, c2), g), -1.0 / N));
            v = v ? add(v, vi) : vi;
            t2 = muls(mul(mul(mul(rstd, rstd), c1), xh), -1.0 / N);
        }
        if (v) {
            em_tensor *pv = sub(sub(v, mean_over(v, dims)), mul(xh, mean_over(mul(xh, v), dims)));
            r = mul(rstd, pv);
            if (t2) r = add(r, t2);
        } else {
            r = OP(em_ag_fn_zeros_like(input));
        }
    }
    return finish(sc, r);
}
