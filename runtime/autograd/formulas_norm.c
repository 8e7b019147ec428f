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
#include <string.h>

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

/* ---- the first-order gradients: one backward kernel for all three ----
 * Note [Norm gradient memo]: a node's formulas for input, weight and bias
 * run one after the other (in that order) with the same arguments, and one
 * run of a fused backward kernel gives all three results for about the cost
 * of one (each run reads all of input and grad_out). So the first formula
 * that runs asks the kernel also for each later result whose tensor
 * requires grad, hands out its own, and keeps the others in a per-thread
 * memo (one per norm kind) keyed by the formula's tensor arguments; the
 * later formulas take theirs from it. The memo holds references to its key
 * tensors, so no key address can be reused by another tensor while it is
 * cached (an old entry can never match new arguments); a formula that
 * misses drops the old entry and runs the kernel itself. An entry whose
 * formula never comes (the tensor got requires_grad after the forward)
 * stays until the next norm gradient of its kind on that thread. */

enum { NM_LAYER, NM_BATCH, NM_GROUP, NM_KINDS };
#define NM_KEYS 8

typedef struct {
    em_tensor *key[NM_KEYS]; /* held references (NULL entries allowed) */
    em_tensor *res[3];       /* results not handed out yet */
    double d;                /* the non-tensor arguments that matter: eps */
    int64_t i;               /* group, or training */
} nm_memo;
static _Thread_local nm_memo nm_memos[NM_KINDS];

static void nm_clear(nm_memo *m) {
    for (int k = 0; k < NM_KEYS; k++) em_tensor_release(m->key[k]);
    for (int k = 0; k < 3; k++) em_tensor_release(m->res[k]);
    memset(m, 0, sizeof *m);
}

/* Runs a backward op with the flags mask; NULL (error set) or grad_input
 * with *gw, *gb (new references each). */
typedef em_tensor *(*nm_run_fn)(const void *args, const bool *mask, em_tensor **gw, em_tensor **gb);

/* Result `which` of the kind's backward for these arguments (key, d, i),
 * from the memo or from one run of the op (Note [Norm gradient memo]);
 * wants[k]: whether result k > which will be asked for. */
static em_tensor *nm_grad(int kind, em_tensor *const *key, double d, int64_t i, int64_t which, const bool *wants,
                          nm_run_fn run, const void *args) {
    nm_memo *m = &nm_memos[kind];
    if (m->res[which] && m->d == d && m->i == i && memcmp(m->key, key, sizeof m->key) == 0) {
        em_tensor *r = m->res[which];
        m->res[which] = NULL;
        if (!m->res[0] && !m->res[1] && !m->res[2]) nm_clear(m);
        return r;
    }
    nm_clear(m);
    bool mask[3];
    for (int k = 0; k < 3; k++) mask[k] = k == which || (k > which && wants[k]);
    em_tensor *res[3] = { NULL, NULL, NULL };
    res[0] = run(args, mask, &res[1], &res[2]);
    if (!res[0]) return NULL;
    em_tensor *r = res[which];
    bool kept = false;
    for (int k = 0; k < 3; k++) {
        if (k == which) continue;
        if (k > which && mask[k]) {
            m->res[k] = res[k];
            kept = true;
        } else {
            em_tensor_release(res[k]);
        }
    }
    if (kept) {
        for (int k = 0; k < NM_KEYS; k++) m->key[k] = em_tensor_retain(key[k]);
        m->d = d;
        m->i = i;
    }
    return r;
}

static bool wants_grad(const em_tensor *t) { return t && em_requires_grad(t); }

/* ---- layer_norm ---- */

typedef struct {
    em_tensor *grad, *input, *mean, *rstd, *weight, *bias;
    em_intlist ns;
} ln_args;

static em_tensor *ln_run(const void *args, const bool *mask, em_tensor **gw, em_tensor **gb) {
    const ln_args *a = args;
    return em_native_layer_norm_backward(a->grad, a->input, a->ns, a->mean, a->rstd, a->weight, a->bias, mask[0],
                                         mask[1], mask[2], gw, gb);
}

em_tensor *em_ag_fn_layer_norm_grad(em_tensor *grad, em_tensor *input, em_intlist normalized_shape, em_tensor *mean,
                                    em_tensor *rstd, em_tensor *weight, em_tensor *bias, int64_t which) {
    ln_args a = { grad, input, mean, rstd, weight, bias, normalized_shape };
    em_tensor *key[NM_KEYS] = { grad, input, mean, rstd, weight, bias };
    bool wants[3] = { true, wants_grad(weight), wants_grad(bias) };
    /* normalized_shape is a function of input's shape and mean's (the node's own) */
    return nm_grad(NM_LAYER, key, 0, 0, which, wants, ln_run, &a);
}

/* The normalised dims of input (the trailing ns.n), 0-based. */
static em_intlist norm_dims(const em_tensor *input, int n, int64_t *buf) {
    for (int i = 0; i < n; i++) buf[i] = input->ndim - n + i;
    return (em_intlist){ buf, n };
}

/* The double backward of a normalisation over the dims `dims` of x (N
 * elements per group), in training form: with xh = (x - mean) rstd, g = gO w
 * (gO without weight) and P(v) = v - mean(v) - xh mean(xh v) over each group
 * (P is symmetric), the first-order gradients are gI = rstd P(g),
 * gW = sum(gO xh), gB = sum(gO) (sums over everything but the weight's
 * dims). For cotangents ggI, ggW, ggB of those (NULL: absent):
 *   d/dgO = w rstd P(ggI) + ggW xh + ggB
 *   d/dw  = gO rstd P(ggI)                 (unsummed: the caller sums)
 *   d/dx  = rstd P(v) - rstd^2/N c1 xh,  v = -rstd B ggI - rstd c2/N g + ggW gO
 * with B = mean(g xh), c1 = sum(ggI (g - mean(g) - xh B)), c2 = sum(ggI xh)
 * per group -- the terms of PyTorch's layer_norm_double_backward and
 * batchnorm_double_backward, mean and rstd's dependence on x included
 * (they get no gradient of their own). mean, rstd, w, ggW and ggB are given
 * broadcastable to x; which: 0 grad_out, 1 input, 2 weight. Runs inside the
 * caller's scope (the result is a temporary of it). */
static em_tensor *norm_double_backward(em_tensor *ggI, em_tensor *ggW, em_tensor *ggB, em_tensor *gO, em_tensor *x,
                                       em_tensor *mean, em_tensor *rstd, em_tensor *w, em_intlist dims, double N,
                                       int64_t which) {
    em_tensor *xh = mul(sub(x, mean), rstd);
    em_tensor *r = NULL, *pgi = NULL; /* rstd P(ggI) */
    if (ggI && which != 1) {
        em_tensor *p = sub(sub(ggI, mean_over(ggI, dims)), mul(xh, mean_over(mul(xh, ggI), dims)));
        pgi = mul(p, rstd);
    }
    if (which == 0) { /* grad_out */
        r = ggI ? (w ? mul(pgi, w) : pgi) : OP(em_ag_fn_zeros_like(gO));
        if (ggW) r = add(r, mul(ggW, xh));
        if (ggB) r = add(r, ggB);
    } else if (which == 2) { /* weight, unsummed */
        r = ggI ? mul(gO, pgi) : OP(em_ag_fn_zeros_like(gO));
    } else { /* input */
        em_tensor *g = w ? mul(gO, w) : gO;
        em_tensor *v = ggW ? mul(ggW, gO) : NULL;
        em_tensor *t2 = NULL;
        if (ggI) {
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
            r = OP(em_ag_fn_zeros_like(x));
        }
    }
    return r;
}

em_tensor *em_ag_fn_layer_norm_double_backward(em_tensor *ggI, em_tensor *ggW, em_tensor *ggB, em_tensor *grad_out,
                                               em_tensor *input, em_intlist normalized_shape, em_tensor *mean,
                                               em_tensor *rstd, em_tensor *weight, int64_t which) {
    int64_t buf[EM_MAX_DIMS];
    em_intlist dims = norm_dims(input, normalized_shape.n, buf);
    double N = 1;
    for (int i = 0; i < normalized_shape.n; i++) N *= (double)normalized_shape.data[i];
    nf_scope sc = begin();
    /* weight and its cotangent broadcast over the leading dims as they are */
    em_tensor *gi = absent(ggI) ? NULL : ggI, *gw = weight && !absent(ggW) ? ggW : NULL;
    em_tensor *gb = absent(ggB) ? NULL : ggB;
    em_tensor *r = norm_double_backward(gi, gw, gb, grad_out, input, mean, rstd, weight, dims, N, which);
    return finish(sc, r); /* weight: summed to its shape by the node */
}

/* ---- batch_norm ---- */

/* t (C) as (1, C, 1, ..., 1) of ndim dims; NULL passes through. */
static em_tensor *chan_view(em_tensor *t, int ndim) {
    if (!t) return NULL;
    int64_t sz[EM_MAX_DIMS];
    for (int d = 0; d < ndim; d++) sz[d] = d == 1 ? t->sizes[0] : 1;
    return OP(em_reshape(t, (em_intlist){ sz, ndim }));
}

/* Every dim of an ndim tensor but the channel dim 1. */
static em_intlist non_channel_dims(int ndim, int64_t *buf) {
    int n = 0;
    for (int d = 0; d < ndim; d++)
        if (d != 1) buf[n++] = d;
    return (em_intlist){ buf, n };
}

typedef struct {
    em_tensor *grad, *input, *weight, *rm, *rv, *sm, *si;
    bool training;
    double eps;
} bn_args;

static em_tensor *bn_run(const void *args, const bool *mask, em_tensor **gw, em_tensor **gb) {
    const bn_args *a = args;
    return em_native_batch_norm_backward(a->grad, a->input, a->weight, a->rm, a->rv, a->sm, a->si, a->training,
                                         a->eps, mask[0], mask[1], mask[2], gw, gb);
}

/* bias is not an argument: torch saves no bias for batch/group norm (an
 * in-place change of it after the forward must not fail the backward), so
 * the first run does not compute bias's gradient for the memo; the bias
 * formula, when it runs, misses and runs the kernel for it alone. */
em_tensor *em_ag_fn_batch_norm_grad(em_tensor *grad, em_tensor *input, em_tensor *weight,
                                    em_tensor *running_mean, em_tensor *running_var, em_tensor *save_mean,
                                    em_tensor *save_invstd, bool training, double eps, int64_t which) {
    bn_args a = { grad, input, weight, running_mean, running_var, save_mean, save_invstd, training, eps };
    em_tensor *key[NM_KEYS] = { grad, input, weight, running_mean, running_var, save_mean, save_invstd };
    bool wants[3] = { true, wants_grad(weight), false };
    return nm_grad(NM_BATCH, key, eps, training, which, wants, bn_run, &a);
}

/* Training: norm_double_backward over every dim but the channels'. Eval
 * (the running statistics, constants): gI = gO w invstd, gW = sum(gO xh),
 * so d/dgO = ggI w invstd + ggW xh + ggB, d/dw = sum(gO ggI) invstd,
 * d/dx = ggW gO invstd. */
em_tensor *em_ag_fn_batch_norm_double_backward(em_tensor *ggI, em_tensor *ggW, em_tensor *ggB, em_tensor *grad_out,
                                               em_tensor *input, em_tensor *weight, em_tensor *running_mean,
                                               em_tensor *running_var, em_tensor *save_mean, em_tensor *save_invstd,
                                               bool train, double eps, int64_t which) {
    int nd = input->ndim;
    int64_t buf[EM_MAX_DIMS];
    em_intlist dims = non_channel_dims(nd, buf);
    double N = 1;
    for (int d = 0; d < nd; d++)
        if (d != 1) N *= (double)input->sizes[d];
    nf_scope sc = begin();
    em_tensor *gi = absent(ggI) ? NULL : ggI;
    em_tensor *gw = weight && !absent(ggW) ? chan_view(ggW, nd) : NULL;
    em_tensor *gb = absent(ggB) ? NULL : chan_view(ggB, nd);
    em_tensor *w = chan_view(weight, nd), *r;
    if (train) {
        r = norm_double_backward(gi, gw, gb, grad_out, input, chan_view(save_mean, nd), chan_view(save_invstd, nd), w,
                                 dims, N, which);
    } else {
        em_tensor *m = chan_view(running_mean, nd);
        em_tensor *var = chan_view(running_var, nd);
        em_tensor *is = var ? OP(em_rsqrt(em_ag_tmp(em_add(var, em_ag_tmp(em_ag_scalar(eps)), em_scalar_int(1)))))
                            : NULL;
        if (which == 0) {
            r = gi ? mul(w ? mul(gi, w) : gi, is) : OP(em_ag_fn_zeros_like(grad_out));
            if (gw) r = add(r, mul(gw, mul(sub(input, m), is)));
            if (gb) r = add(r, gb);
        } else if (which == 2) {
            r = gi ? mul(mul(grad_out, gi), is) : OP(em_ag_fn_zeros_like(grad_out));
        } else {
            r = gw ? mul(mul(gw, grad_out), is) : OP(em_ag_fn_zeros_like(input));
        }
    }
    if (which == 2 && r) r = OP(em_reshape(sum_over(r, dims), (em_intlist){ &weight->sizes[0], 1 }));
    return finish(sc, r);
}

/* ---- group_norm ---- */

typedef struct {
    em_tensor *grad, *input, *mean, *rstd, *weight;
    int64_t group;
} gn_args;

static em_tensor *gn_run(const void *args, const bool *mask, em_tensor **gw, em_tensor **gb) {
    const gn_args *a = args;
    return em_native_group_norm_backward(a->grad, a->input, a->mean, a->rstd, a->weight, a->group, mask[0], mask[1],
                                         mask[2], gw, gb);
}

em_tensor *em_ag_fn_group_norm_grad(em_tensor *grad, em_tensor *input, em_tensor *mean, em_tensor *rstd,
                                    em_tensor *weight, int64_t group, int64_t which) {
    gn_args a = { grad, input, mean, rstd, weight, group };
    em_tensor *key[NM_KEYS] = { grad, input, mean, rstd, weight };
    bool wants[3] = { true, wants_grad(weight), false }; /* no bias: see batch_norm_grad */
    return nm_grad(NM_GROUP, key, 0, group, which, wants, gn_run, &a);
}

/* norm_double_backward on the view (N, G, C/G, S) of input and grad_out:
 * groups are dims 2 and 3, the statistics (N, G) are (N, G, 1, 1), weight
 * and its cotangents (C) are (1, G, C/G, 1). */
em_tensor *em_ag_fn_group_norm_double_backward(em_tensor *ggI, em_tensor *ggW, em_tensor *ggB, em_tensor *grad_out,
                                               em_tensor *input, em_tensor *mean, em_tensor *rstd, em_tensor *weight,
                                               int64_t group, int64_t which) {
    int64_t N = input->sizes[0], C = input->sizes[1], S = 1;
    for (int d = 2; d < input->ndim; d++) S *= input->sizes[d];
    int64_t xs[4] = { N, group, C / group, S }, ss[4] = { N, group, 1, 1 }, ws[4] = { 1, group, C / group, 1 };
    em_intlist X = { xs, 4 }, St = { ss, 4 }, W = { ws, 4 };
    int64_t dbuf[2] = { 2, 3 };
    em_intlist dims = { dbuf, 2 };
    nf_scope sc = begin();
#define RS(t, shape) ((t) ? OP(em_reshape((t), (shape))) : NULL)
    em_tensor *gi = absent(ggI) ? NULL : RS(ggI, X);
    em_tensor *gw = weight && !absent(ggW) ? RS(ggW, W) : NULL;
    em_tensor *gb = absent(ggB) ? NULL : RS(ggB, W);
    em_tensor *r = norm_double_backward(gi, gw, gb, RS(grad_out, X), RS(input, X), RS(mean, St), RS(rstd, St),
                                        RS(weight, W), dims, (double)(C / group * S), which);
#undef RS
    if (which == 2) {
        int64_t rb[2] = { 0, 3 }, cs = C;
        r = r ? OP(em_reshape(em_ag_tmp(em_sum(r, (em_intlist){ rb, 2 }, false, EM_DTYPE_NONE)), (em_intlist){ &cs, 1 }))
              : NULL;
    } else if (r) {
        r = OP(em_reshape(r, (em_intlist){ input->sizes, input->ndim }));
    }
    return finish(sc, r);
}
