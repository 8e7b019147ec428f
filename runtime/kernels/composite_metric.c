/* composite_metric.c -- the metric family's composite ops (Note [Composite
 * ops] in codegen/codegen.h): bilinear, cosine_similarity,
 * pairwise_distance, pdist, cdist, normalize, and the losses built on them.
 *
 * As in composite.c, each function calls ops through the public API only,
 * so autograd records the parts, and checks first what it can name better
 * than its parts (messages say the op the user called, dims 1-based).
 * Temporaries go through a scope (ms_*): everything made on the way is
 * released at the end, and a NULL (a failed part, error set) short-circuits
 * what follows.
 */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "autograd/em_autograd.h"
#include "em_ops.h"
#include "em_kernels_decl.h"
#include "kernels/em_tmp_scope.h"

/* ---- temporaries ---- */

/* Note [Temporaries scopes] */
EM_TMP_SCOPE(ms, 64, "metric composite")

/* Fails the scope with an error already set (returns NULL). */
static em_tensor *ms_fail(ms_scope *s) {
    s->failed = true;
    return NULL;
}

static em_tensor *ms_num(ms_scope *s, double v) { return ms_keep(s, em_tensor_wrapped_scalar(em_scalar_float(v))); }

#define MS_OK(s) (!(s)->failed)

static em_intlist one_dim(int64_t *d) { return (em_intlist){ d, 1 }; }

/* ---- bilinear ---- */

/* bilinear: out[..., o] = sum_ij input1[..., i] weight[o, i, j] input2[..., j]
 * + bias[o], as PyTorch's _trilinear: one product of input1 with weight
 * reshaped {in1, out * in2}, then a batched product with input2. */
em_tensor *em_comp_bilinear(em_keyset ks, em_tensor *input1, em_tensor *input2, em_tensor *weight,
                            em_tensor *bias) {
    (void)ks;
    char b1[EM_SHAPE_STR_MAX];
    if (weight->ndim != 3) {
        em_set_error(EM_ESHAPE, "bilinear: weight must be 3-d {out, in1, in2} (got %s)",
                     em_shape_str(weight->ndim, weight->sizes, b1, sizeof b1));
        return NULL;
    }
    if (input1->ndim != input2->ndim || input1->ndim < 1) {
        em_set_error(EM_ESHAPE, "bilinear: input1 and input2 must have one number of dims, at least 1 (got %d and %d)",
                     input1->ndim, input2->ndim);
        return NULL;
    }
    int nd = input1->ndim;
    for (int d = 0; d < nd - 1; d++)
        if (input1->sizes[d] != input2->sizes[d]) {
            em_set_error(EM_ESHAPE, "bilinear: input batch dims do not match at dim %d: got %lld and %lld", d + 1,
                         (long long)input1->sizes[d], (long long)input2->sizes[d]);
            return NULL;
        }
    int64_t O = weight->sizes[0], I1 = weight->sizes[1], I2 = weight->sizes[2];
    if (input1->sizes[nd - 1] != I1 || input2->sizes[nd - 1] != I2) {
        bool first = input1->sizes[nd - 1] != I1;
        em_set_error(EM_ESHAPE, "bilinear: %s's last dim does not match weight: got %lld but expected %lld",
                     first ? "input1" : "input2", (long long)(first ? input1 : input2)->sizes[nd - 1],
                     (long long)(first ? I1 : I2));
        return NULL;
    }
    if (bias && (bias->ndim != 1 || bias->sizes[0] != O)) {
        em_set_error(EM_ESHAPE, "bilinear: bias must be {%lld}, weight's out features (got %s)", (long long)O,
                     em_shape_str(bias->ndim, bias->sizes, b1, sizeof b1));
        return NULL;
    }
    ms_scope s = { .n = 0 };
    int64_t M = 1;
    for (int d = 0; d < nd - 1; d++) M *= input1->sizes[d];
    int64_t s1[2] = { M, I1 }, s2[3] = { M, I2, 1 }, sw[2] = { I1, O * I2 }, st[3] = { M, O, I2 };
    int64_t perm[3] = { 1, 0, 2 };
    em_tensor *a = ms_keep(&s, em_reshape(input1, (em_intlist){ s1, 2 }));
    em_tensor *w = MS_OK(&s) ? ms_keep(&s, em_permute(weight, (em_intlist){ perm, 3 })) : NULL;
    w = MS_OK(&s) ? ms_keep(&s, em_reshape(w, (em_intlist){ sw, 2 })) : NULL;
    em_tensor *t = MS_OK(&s) ? ms_keep(&s, em_matmul(a, w)) : NULL;              /* {M, out * in2} */
    t = MS_OK(&s) ? ms_keep(&s, em_reshape(t, (em_intlist){ st, 3 })) : NULL;    /* {M, out, in2} */
    em_tensor *b = MS_OK(&s) ? ms_keep(&s, em_reshape(input2, (em_intlist){ s2, 3 })) : NULL;
    em_tensor *r = MS_OK(&s) ? ms_keep(&s, em_matmul(t, b)) : NULL;              /* {M, out, 1} */
    int64_t os[EM_MAX_DIMS];
    for (int d = 0; d < nd - 1; d++) os[d] = input1->sizes[d];
    os[nd - 1] = O;
    r = MS_OK(&s) ? ms_keep(&s, em_reshape(r, (em_intlist){ os, nd })) : NULL;
    if (MS_OK(&s) && bias) r = ms_keep(&s, em_add(r, bias, em_scalar_int(1)));
    return ms_finish(&s, r);
}

/* ---- cosine_similarity, pairwise_distance, normalize ---- */

/* x1 and x2 broadcast to one shape (new references in *o1, *o2 kept by s). */
static bool broadcast_pair(ms_scope *s, const char *op, em_tensor *x1, em_tensor *x2, em_tensor **o1,
                           em_tensor **o2) {
    int64_t bs[EM_MAX_DIMS];
    int nb = em_broadcast_shapes(x1->ndim, x1->sizes, x2->ndim, x2->sizes, bs, op);
    if (nb < 0) return ms_fail(s), false;
    *o1 = ms_keep(s, em_expand(x1, (em_intlist){ bs, nb }));
    *o2 = MS_OK(s) ? ms_keep(s, em_expand(x2, (em_intlist){ bs, nb })) : NULL;
    return MS_OK(s);
}

/* Note [Clamped norms]
 * cosine_similarity and gaussian_nll_loss clamp a tensor from below with
 * autograd off, on a clone, as PyTorch 1.13 does: the value is clamped but
 * the clamp's mask is not recorded, so the gradient flows as if it were
 * not. cosine_similarity clamps the squared norms at eps^2 and then takes
 * the square root (whose gradient uses the clamped value): d|x|/dx is
 * x / max(|x|, eps). F.normalize, by contrast, uses a recorded clamp_min
 * (zero gradient to the norm below eps). */
static em_tensor *clamped_clone(ms_scope *s, em_tensor *t, double eps) {
    em_tensor *c = ms_keep(s, em_clone(t));
    if (!c) return NULL;
    em_grad_guard g = em_grad_guard_begin(false);
    em_tensor *r = em_clamp_min_(c, em_scalar_float(eps));
    em_grad_guard_end(g);
    if (!r) return ms_fail(s);
    em_tensor_release(r); /* c itself */
    return c;
}

/* sqrt(max(sum(x^2, dim), eps^2)) with keepdim (Note [Clamped norms]). */
static em_tensor *clamped_norm(ms_scope *s, em_tensor *x, int64_t *dd, double eps) {
    em_tensor *sq = ms_keep(s, em_mul(x, x));
    em_tensor *sm = MS_OK(s) ? ms_keep(s, em_sum(sq, one_dim(dd), true, EM_DTYPE_NONE)) : NULL;
    em_tensor *c = MS_OK(s) ? clamped_clone(s, sm, eps * eps) : NULL;
    return MS_OK(s) ? ms_keep(s, em_sqrt(c)) : NULL;
}

em_tensor *em_comp_cosine_similarity(em_keyset ks, em_tensor *x1, em_tensor *x2, int64_t dim, double eps) {
    (void)ks;
    const char *op = "cosine_similarity";
    em_dtype ct = em_result_type2(x1, x2);
    if (!em_dtype_is_floating(ct)) {
        em_set_error(EM_ETYPE, "%s: x1 and x2 must have a floating common dtype (got %s and %s, common %s)", op,
                     em_dtype_name(x1->dtype), em_dtype_name(x2->dtype), em_dtype_name(ct));
        return NULL;
    }
    ms_scope s = { .n = 0 };
    em_tensor *a = x1->dtype == ct ? x1 : ms_keep(&s, em_to(x1, ct));
    em_tensor *b = MS_OK(&s) ? (x2->dtype == ct ? x2 : ms_keep(&s, em_to(x2, ct))) : NULL;
    if (!MS_OK(&s) || !broadcast_pair(&s, op, a, b, &a, &b)) return ms_finish(&s, NULL);
    int d = em_wrap_dim(dim, a->ndim, op);
    if (d < 0) return ms_finish(&s, NULL);
    int64_t dd = d;
    em_tensor *n1 = clamped_norm(&s, a, &dd, eps);
    em_tensor *n2 = MS_OK(&s) ? clamped_norm(&s, b, &dd, eps) : NULL;
    em_tensor *u = MS_OK(&s) ? ms_keep(&s, em_div(a, n1)) : NULL;
    em_tensor *v = MS_OK(&s) ? ms_keep(&s, em_div(b, n2)) : NULL;
    em_tensor *p = MS_OK(&s) ? ms_keep(&s, em_mul(u, v)) : NULL;
    em_tensor *r = MS_OK(&s) ? ms_keep(&s, em_sum(p, one_dim(&dd), false, EM_DTYPE_NONE)) : NULL;
    return ms_finish(&s, r);
}

/* norm(x1 - x2 + eps, p) over the last dim of the broadcast shape. */
em_tensor *em_comp_pairwise_distance(em_keyset ks, em_tensor *x1, em_tensor *x2, double p, double eps,
                                     bool keepdim) {
    (void)ks;
    ms_scope s = { .n = 0 };
    em_tensor *d = ms_keep(&s, em_sub(x1, x2, em_scalar_int(1)));
    em_tensor *e = MS_OK(&s) ? ms_num(&s, eps) : NULL;
    d = MS_OK(&s) ? ms_keep(&s, em_add(d, e, em_scalar_int(1))) : NULL;
    if (!MS_OK(&s)) return ms_finish(&s, NULL);
    if (!em_dtype_is_floating(d->dtype)) { /* eps = 0 with integer inputs */
        d = ms_keep(&s, em_to(d, EM_FLOAT32));
        if (!d) return ms_finish(&s, NULL);
    }
    int64_t last = -1;
    em_tensor *r = ms_keep(&s, em_norm(d, em_scalar_float(p), one_dim(&last), keepdim, EM_DTYPE_NONE));
    return ms_finish(&s, r);
}

/* input / max(norm_p(input, dim, keepdim), eps). */
em_tensor *em_comp_normalize(em_keyset ks, em_tensor *input, double p, int64_t dim, double eps) {
    (void)ks;
    const char *op = "normalize";
    if (!em_dtype_is_floating(input->dtype)) {
        em_set_error(EM_ETYPE, "%s: input must be floating (got %s)", op, em_dtype_name(input->dtype));
        return NULL;
    }
    int d = em_wrap_dim(dim, input->ndim, op);
    if (d < 0) return NULL;
    int64_t dd = d;
    ms_scope s = { .n = 0 };
    em_tensor *n = ms_keep(&s, em_norm(input, em_scalar_float(p), one_dim(&dd), true, EM_DTYPE_NONE));
    n = MS_OK(&s) ? ms_keep(&s, em_clamp_min(n, em_scalar_float(eps))) : NULL;
    em_tensor *r = MS_OK(&s) ? ms_keep(&s, em_div(input, n)) : NULL;
    return ms_finish(&s, r);
}

/* ---- pdist, cdist ---- */

static bool dist_dtype_ok(const char *op, const char *arg, const em_tensor *t) {
    if (t->dtype == EM_FLOAT32 || t->dtype == EM_FLOAT64) return true;
    em_set_error(EM_ETYPE, "%s: %s must be float32 or float64 (got %s)", op, arg, em_dtype_name(t->dtype));
    return false;
}

static bool dist_p_ok(const char *op, double p) {
    if (p >= 0) return true;
    em_set_error(EM_EVALUE, "%s: p must be non-negative (got %g)", op, p);
    return false;
}

em_tensor *em_comp_pdist(em_keyset ks, em_tensor *input, double p) {
    (void)ks;
    if (input->ndim != 2) {
        em_set_error(EM_ESHAPE, "pdist: input must be a 2-d tensor {n, m} (got %d-d)", input->ndim);
        return NULL;
    }
    if (!dist_dtype_ok("pdist", "input", input) || !dist_p_ok("pdist", p)) return NULL;
    ms_scope s = { .n = 0 };
    em_tensor *c = ms_keep(&s, em_contiguous(input));
    em_tensor *r = c ? ms_keep(&s, em__pdist_forward(c, p)) : NULL;
    return ms_finish(&s, r);
}

/* cdist: checks, batch dims broadcast, then PyTorch 1.13's choice: p = 2
 * with compute_mode use_mm_for_euclid_dist, or the default mode and more
 * than 25 rows on either side, takes the matrix-product path
 * _euclidean_dist; everything else (and empty inputs) the direct kernel. */
em_tensor *em_comp_cdist(em_keyset ks, em_tensor *x1, em_tensor *x2, double p, const char *compute_mode) {
    (void)ks;
    const char *op = "cdist";
    char b1[EM_SHAPE_STR_MAX], b2[EM_SHAPE_STR_MAX];
    if (x1->ndim < 2 || x2->ndim < 2) {
        em_set_error(EM_ESHAPE, "%s: %s must have at least 2 dims {*, r, m} (got %d-d)", op,
                     x1->ndim < 2 ? "x1" : "x2", (x1->ndim < 2 ? x1 : x2)->ndim);
        return NULL;
    }
    int64_t m = x1->sizes[x1->ndim - 1];
    if (x2->sizes[x2->ndim - 1] != m) {
        em_set_error(EM_ESHAPE, "%s: x1 %s and x2 %s must have the same number of columns", op,
                     em_shape_str(x1->ndim, x1->sizes, b1, sizeof b1), em_shape_str(x2->ndim, x2->sizes, b2, sizeof b2));
        return NULL;
    }
    if (!dist_dtype_ok(op, "x1", x1) || !dist_dtype_ok(op, "x2", x2) || !dist_p_ok(op, p)) return NULL;
    if (x1->dtype != x2->dtype) {
        em_set_error(EM_ETYPE, "%s: x1 and x2 must have one dtype (got %s and %s)", op, em_dtype_name(x1->dtype),
                     em_dtype_name(x2->dtype));
        return NULL;
    }
    int64_t r1 = x1->sizes[x1->ndim - 2], r2 = x2->sizes[x2->ndim - 2];
    int64_t batch[EM_MAX_DIMS];
    int nb = em_broadcast_shapes(x1->ndim - 2, x1->sizes, x2->ndim - 2, x2->sizes, batch, op);
    if (nb < 0 || nb + 2 > EM_MAX_DIMS) {
        if (nb >= 0) em_set_error(EM_ESHAPE, "%s: too many dims", op);
        return NULL;
    }
    int mode = strcmp(compute_mode, "use_mm_for_euclid_dist") == 0          ? 1
               : strcmp(compute_mode, "donot_use_mm_for_euclid_dist") == 0 ? 2
                                                                           : 0;
    bool mm = x1->numel > 0 && x2->numel > 0 && p == 2 && (mode == 1 || (mode == 0 && (r1 > 25 || r2 > 25)));
    int64_t e1[EM_MAX_DIMS], e2[EM_MAX_DIMS];
    memcpy(e1, batch, sizeof(int64_t) * (size_t)nb);
    memcpy(e2, batch, sizeof(int64_t) * (size_t)nb);
    e1[nb] = r1, e2[nb] = r2, e1[nb + 1] = e2[nb + 1] = m;
    ms_scope s = { .n = 0 };
    em_tensor *a = ms_keep(&s, em_expand(x1, (em_intlist){ e1, nb + 2 }));
    em_tensor *b = MS_OK(&s) ? ms_keep(&s, em_expand(x2, (em_intlist){ e2, nb + 2 })) : NULL;
    em_tensor *r = NULL;
    if (MS_OK(&s)) r = ms_keep(&s, mm ? em__euclidean_dist(a, b) : em__cdist_forward(a, b, p));
    return ms_finish(&s, r);
}

/* ---- losses ---- */

/* loss reduced as PyTorch's apply_loss_reduction: mean or sum of every
 * element, or loss itself (kept by s in every case). */
static em_tensor *reduce_loss(ms_scope *s, em_tensor *loss, const char *reduction) {
    if (!loss) return NULL;
    em_intlist all = { NULL, -1 };
    if (strcmp(reduction, "mean") == 0) return ms_keep(s, em_mean(loss, all, false, EM_DTYPE_NONE));
    if (strcmp(reduction, "sum") == 0) return ms_keep(s, em_sum(loss, all, false, EM_DTYPE_NONE));
    return loss;
}

static em_tensor *ms_int(ms_scope *s, int64_t v) { return ms_keep(s, em_tensor_wrapped_scalar(em_scalar_int(v))); }

/* Ops on temporaries of s, as functions so that nested calls evaluate
 * their arguments first: a failed argument (NULL, scope failed, error set)
 * skips the call and keeps the first error's message. */
typedef em_tensor *(*ms_fn1)(em_tensor *);
typedef em_tensor *(*ms_fn2)(em_tensor *, em_tensor *);
typedef em_tensor *(*ms_fn3)(em_tensor *, em_tensor *, em_tensor *);
static em_tensor *ms_un(ms_scope *s, ms_fn1 f, em_tensor *a) { return MS_OK(s) ? ms_keep(s, f(a)) : NULL; }
static em_tensor *ms_bin(ms_scope *s, ms_fn2 f, em_tensor *a, em_tensor *b) {
    return MS_OK(s) ? ms_keep(s, f(a, b)) : NULL;
}
static em_tensor *ms_tri(ms_scope *s, ms_fn3 f, em_tensor *a, em_tensor *b, em_tensor *c) {
    return MS_OK(s) ? ms_keep(s, f(a, b, c)) : NULL;
}
static em_tensor *ms_add(ms_scope *s, em_tensor *a, em_tensor *b) {
    return MS_OK(s) ? ms_keep(s, em_add(a, b, em_scalar_int(1))) : NULL;
}
static em_tensor *ms_sub(ms_scope *s, em_tensor *a, em_tensor *b) {
    return MS_OK(s) ? ms_keep(s, em_sub(a, b, em_scalar_int(1))) : NULL;
}
static em_tensor *ms_sum_dim(ms_scope *s, em_tensor *a, int64_t d) {
    return MS_OK(s) ? ms_keep(s, em_sum(a, one_dim(&d), false, EM_DTYPE_NONE)) : NULL;
}
static em_tensor *ms_relu0(ms_scope *s, em_tensor *a) { /* clamp_min(a, 0) */
    return MS_OK(s) ? ms_keep(s, em_clamp_min(a, em_scalar_int(0))) : NULL;
}
#define MS_ADD(s, a, b) ms_add((s), (a), (b))
#define MS_SUB(s, a, b) ms_sub((s), (a), (b))
#define MS_MUL(s, a, b) ms_bin((s), em_mul, (a), (b))
#define MS_DIV(s, a, b) ms_bin((s), em_div, (a), (b))
/* Only with arguments already evaluated (variables): */
#define MS_DO(s, expr) (MS_OK(s) ? ms_keep((s), (expr)) : NULL)

em_tensor *em_comp_poisson_nll_loss(em_keyset ks, em_tensor *input, em_tensor *target, bool log_input, bool full,
                                    double eps, const char *reduction) {
    (void)ks;
    ms_scope s = { .n = 0 };
    em_tensor *loss;
    if (log_input) { /* exp(input) - target * input */
        em_tensor *e = ms_un(&s, em_exp, input);
        loss = MS_SUB(&s, e, MS_MUL(&s, target, input));
    } else { /* input - target * log(input + eps) */
        em_tensor *l = ms_un(&s, em_log, MS_ADD(&s, input, ms_num(&s, eps)));
        loss = MS_SUB(&s, input, MS_MUL(&s, target, l));
    }
    if (full) { /* target log(target) - target + 0.5 log(2 pi target), 0 where target <= 1 */
        em_tensor *tl = MS_MUL(&s, target, ms_un(&s, em_log, target));
        em_tensor *st = MS_SUB(&s, tl, target);
        em_tensor *lp = ms_un(&s, em_log, MS_MUL(&s, ms_num(&s, 2 * M_PI), target));
        st = MS_ADD(&s, st, MS_MUL(&s, ms_num(&s, 0.5), lp));
        em_tensor *le1 = ms_bin(&s, em_le, target, ms_int(&s, 1));
        st = ms_tri(&s, em_masked_fill, st, le1, ms_int(&s, 0));
        loss = MS_ADD(&s, loss, st);
    }
    return ms_finish(&s, reduce_loss(&s, loss, reduction));
}

/* Whether t (a 0-dim bool tensor) is true; false with the scope failed
 * when t is NULL. */
static bool ms_true(ms_scope *s, em_tensor *t) {
    if (!t) return false;
    em_tensor *c = ms_keep(s, em_to_device(t, em_cpu_device()));
    return c && *(const bool *)em_tensor_data(c);
}

em_tensor *em_comp_gaussian_nll_loss(em_keyset ks, em_tensor *input, em_tensor *target, em_tensor *var, bool full,
                                     double eps, const char *reduction) {
    (void)ks;
    const char *op = "gaussian_nll_loss";
    char b1[EM_SHAPE_STR_MAX], b2[EM_SHAPE_STR_MAX];
    ms_scope s = { .n = 0 };
    bool same = var->ndim == input->ndim && memcmp(var->sizes, input->sizes, sizeof(int64_t) * (size_t)var->ndim) == 0;
    if (!same) {
        int n = input->ndim > 0 ? input->ndim - 1 : 0; /* input's shape without its last dim */
        if (var->ndim == n && memcmp(var->sizes, input->sizes, sizeof(int64_t) * (size_t)n) == 0)
            var = ms_keep(&s, em_unsqueeze(var, -1)); /* homoscedastic: one variance per row */
        else if (!(var->ndim == input->ndim && n == input->ndim - 1 && var->ndim > 0 &&
                   memcmp(var->sizes, input->sizes, sizeof(int64_t) * (size_t)n) == 0 && var->sizes[n] == 1)) {
            em_set_error(EM_ESHAPE, "%s: var of shape %s does not fit input %s (input's shape, or it with the "
                         "last dim 1 or dropped)", op, em_shape_str(var->ndim, var->sizes, b1, sizeof b1),
                         em_shape_str(input->ndim, input->sizes, b2, sizeof b2));
            return NULL;
        }
    }
    em_tensor *neg = ms_bin(&s, em_lt, var, ms_int(&s, 0));
    neg = MS_DO(&s, em_any(neg, NULL, false));
    if (ms_true(&s, neg)) {
        em_set_error(EM_EVALUE, "%s: var has negative entries", op);
        return ms_finish(&s, ms_fail(&s));
    }
    em_tensor *vc = MS_OK(&s) ? clamped_clone(&s, var, eps) : NULL; /* Note [Clamped norms] */
    em_tensor *d = MS_SUB(&s, input, target);
    em_tensor *q = MS_DIV(&s, MS_MUL(&s, d, d), vc);
    em_tensor *loss = MS_MUL(&s, ms_num(&s, 0.5), MS_ADD(&s, ms_un(&s, em_log, vc), q));
    if (full) loss = MS_ADD(&s, loss, ms_num(&s, 0.5 * log(2 * M_PI)));
    return ms_finish(&s, reduce_loss(&s, loss, reduction));
}

em_tensor *em_comp_cosine_embedding_loss(em_keyset ks, em_tensor *input1, em_tensor *input2, em_tensor *target,
                                         double margin, const char *reduction) {
    (void)ks;
    const char *op = "cosine_embedding_loss";
    char b1[EM_SHAPE_STR_MAX], b2[EM_SHAPE_STR_MAX];
    int td = target->ndim;
    if (td > 1) {
        em_set_error(EM_ESHAPE, "%s: target must be 0-d or 1-d (got %d-d)", op, td);
        return NULL;
    }
    if (input1->ndim != td + 1 || input2->ndim != td + 1) {
        em_set_error(EM_ESHAPE, "%s: a %d-d target expects %d-d inputs, got %s and %s", op, td, td + 1,
                     em_shape_str(input1->ndim, input1->sizes, b1, sizeof b1),
                     em_shape_str(input2->ndim, input2->sizes, b2, sizeof b2));
        return NULL;
    }
    ms_scope s = { .n = 0 };
    em_tensor *prod = ms_sum_dim(&s, MS_MUL(&s, input1, input2), td);
    em_tensor *m1 = ms_sum_dim(&s, MS_MUL(&s, input1, input1), td);
    em_tensor *m2 = ms_sum_dim(&s, MS_MUL(&s, input2, input2), td);
    m1 = MS_ADD(&s, m1, ms_num(&s, 1e-12)); /* PyTorch's EPSILON */
    m2 = MS_ADD(&s, m2, ms_num(&s, 1e-12));
    em_tensor *cs = MS_DIV(&s, prod, ms_un(&s, em_sqrt, MS_MUL(&s, m1, m2)));
    em_tensor *zeros = MS_DO(&s, em_zeros_like(cs, EM_DTYPE_NONE));
    em_tensor *pos = MS_SUB(&s, ms_int(&s, 1), cs);
    em_tensor *neg = ms_relu0(&s, MS_SUB(&s, cs, ms_num(&s, margin)));
    em_tensor *op1 = ms_tri(&s, em_where, ms_bin(&s, em_eq, target, ms_int(&s, 1)), pos, zeros);
    em_tensor *op2 = ms_tri(&s, em_where, ms_bin(&s, em_eq, target, ms_int(&s, -1)), neg, zeros);
    return ms_finish(&s, reduce_loss(&s, MS_ADD(&s, op1, op2), reduction));
}

em_tensor *em_comp_margin_ranking_loss(em_keyset ks, em_tensor *input1, em_tensor *input2, em_tensor *target,
                                       double margin, const char *reduction) {
    (void)ks;
    char b1[EM_SHAPE_STR_MAX], b2[EM_SHAPE_STR_MAX], b3[EM_SHAPE_STR_MAX];
    if (input1->ndim != input2->ndim || input1->ndim != target->ndim) {
        em_set_error(EM_ESHAPE, "margin_ranking_loss: input1 %s, input2 %s and target %s must have one number of dims",
                     em_shape_str(input1->ndim, input1->sizes, b1, sizeof b1),
                     em_shape_str(input2->ndim, input2->sizes, b2, sizeof b2),
                     em_shape_str(target->ndim, target->sizes, b3, sizeof b3));
        return NULL;
    }
    ms_scope s = { .n = 0 };
    em_tensor *nt = ms_un(&s, em_neg, target);
    em_tensor *v = MS_ADD(&s, MS_MUL(&s, nt, MS_SUB(&s, input1, input2)), ms_num(&s, margin));
    v = ms_relu0(&s, v);
    return ms_finish(&s, reduce_loss(&s, v, reduction));
}

em_tensor *em_comp_triplet_margin_loss(em_keyset ks, em_tensor *anchor, em_tensor *positive, em_tensor *negative,
                                       double margin, double p, double eps, bool swap, const char *reduction) {
    (void)ks;
    if (anchor->ndim != positive->ndim || positive->ndim != negative->ndim) {
        em_set_error(EM_ESHAPE, "triplet_margin_loss: anchor, positive and negative must have one number of dims "
                     "(got %d-d, %d-d and %d-d)", anchor->ndim, positive->ndim, negative->ndim);
        return NULL;
    }
    ms_scope s = { .n = 0 };
    em_tensor *dp = MS_DO(&s, em_pairwise_distance(anchor, positive, p, eps, false));
    em_tensor *dn = MS_DO(&s, em_pairwise_distance(anchor, negative, p, eps, false));
    if (swap) dn = ms_bin(&s, em_minimum, dn, MS_DO(&s, em_pairwise_distance(positive, negative, p, eps, false)));
    em_tensor *v = MS_SUB(&s, MS_ADD(&s, ms_num(&s, margin), dp), dn);
    v = ms_relu0(&s, v);
    return ms_finish(&s, reduce_loss(&s, v, reduction));
}

em_tensor *em_comp_hinge_embedding_loss(em_keyset ks, em_tensor *input, em_tensor *target, double margin,
                                        const char *reduction) {
    (void)ks;
    ms_scope s = { .n = 0 };
    em_tensor *zeros = MS_DO(&s, em_zeros_like(input, EM_DTYPE_NONE));
    em_tensor *mc = ms_relu0(&s, MS_SUB(&s, ms_num(&s, margin), input));
    em_tensor *om = ms_tri(&s, em_where, ms_bin(&s, em_ne, target, ms_int(&s, 1)), mc, zeros);
    em_tensor *os = ms_tri(&s, em_where, ms_bin(&s, em_ne, target, ms_int(&s, -1)), input, zeros);
    return ms_finish(&s, reduce_loss(&s, MS_ADD(&s, om, os), reduction));
}

/* multi_margin_loss: PyTorch's kernel as ops. z_j = margin - x[y] + x[j]
 * counts where it is > 0 (relu: the kernel's gradient), squared for p = 2,
 * times weight[y], summed over j ~= y and divided by C. */
em_tensor *em_comp_multi_margin_loss(em_keyset ks, em_tensor *input, em_tensor *target, int64_t p, double margin,
                                     em_tensor *weight, const char *reduction) {
    (void)ks;
    const char *op = "multi_margin_loss";
    char b1[EM_SHAPE_STR_MAX], b2[EM_SHAPE_STR_MAX];
    if (p != 1 && p != 2) {
        em_set_error(EM_EVALUE, "%s: p must be 1 or 2 (got %lld)", op, (long long)p);
        return NULL;
    }
    if (input->dtype != EM_FLOAT32 && input->dtype != EM_FLOAT64) {
        em_set_error(EM_ETYPE, "%s: input must be float32 or float64 (got %s)", op, em_dtype_name(input->dtype));
        return NULL;
    }
    int64_t C = input->ndim > 0 ? input->sizes[input->ndim - 1] : 0;
    if (input->ndim < 1 || input->ndim > 2 || C == 0) {
        em_set_error(EM_ESHAPE, "%s: input must be {C} or {N, C} with C > 0 (got %s)", op,
                     em_shape_str(input->ndim, input->sizes, b1, sizeof b1));
        return NULL;
    }
    int64_t N = input->ndim == 2 ? input->sizes[0] : 1;
    if (target->dtype != EM_INT64) {
        em_set_error(EM_ETYPE, "%s: target must be int64 class numbers (got %s)", op, em_dtype_name(target->dtype));
        return NULL;
    }
    if (target->ndim > 1 || target->numel != N || (input->ndim == 2 && target->ndim != 1)) {
        em_set_error(EM_ESHAPE, "%s: target %s must be {%lld} for input %s", op,
                     em_shape_str(target->ndim, target->sizes, b1, sizeof b1), (long long)N,
                     em_shape_str(input->ndim, input->sizes, b2, sizeof b2));
        return NULL;
    }
    if (weight && (weight->ndim != 1 || weight->sizes[0] != C || weight->dtype != input->dtype)) {
        em_set_error(EM_ESHAPE, "%s: weight must be %s {%lld}, one per class (got %s %s)", op,
                     em_dtype_name(input->dtype), (long long)C, em_dtype_name(weight->dtype),
                     em_shape_str(weight->ndim, weight->sizes, b1, sizeof b1));
        return NULL;
    }
    if (weight && em_requires_grad(weight) && em_is_grad_enabled()) { /* as PyTorch's kernel */
        em_set_error(EM_EVALUE, "%s: not differentiable with respect to weight (it cannot require grad)", op);
        return NULL;
    }
    ms_scope s = { .n = 0 };
    if (N > 0) { /* classes are 1-based: 1..C */
        em_tensor *lo = ms_un(&s, em_min, target), *hi = ms_un(&s, em_max, target);
        em_tensor *bad_lo = ms_bin(&s, em_lt, lo, ms_int(&s, 1)), *bad_hi = ms_bin(&s, em_gt, hi, ms_int(&s, C));
        bool bl = ms_true(&s, bad_lo), bh = ms_true(&s, bad_hi);
        if (bl || bh) {
            em_tensor *v = ms_keep(&s, em_to_device(bl ? lo : hi, em_cpu_device()));
            em_set_error(EM_EINDEX, "%s: target %lld is out of range for %lld classes (1-based)", op,
                         v ? (long long)*(const int64_t *)em_tensor_data(v) : 0LL, (long long)C);
            return ms_finish(&s, ms_fail(&s));
        }
    }
    int64_t s2[2] = { N, C }, s1[2] = { N, 1 };
    em_tensor *x = MS_DO(&s, em_reshape(input, (em_intlist){ s2, 2 }));
    em_tensor *y = MS_DO(&s, em_reshape(target, (em_intlist){ s1, 2 }));
    em_tensor *xy = MS_DO(&s, em_gather(x, 1, y));
    em_tensor *z = MS_ADD(&s, MS_SUB(&s, ms_num(&s, margin), xy), x);
    /* the kernel's terms: j != y with z > 0 (NaN skipped); the others are
     * never computed there, so they are masked before and after the weight
     * (an inf/NaN weight times a skipped term's 0 must give neither a value
     * nor a gradient) */
    em_scalar end = em_scalar_int(C + 1);
    em_tensor *cls = MS_DO(&s, em_arange(em_scalar_int(1), &end, em_scalar_int(1), EM_INT64, input->device));
    em_tensor *not_y = ms_bin(&s, em_ne, cls, y);
    em_tensor *keep = ms_bin(&s, em_logical_and, ms_bin(&s, em_gt, z, ms_int(&s, 0)), not_y);
    z = ms_tri(&s, em_where, keep, z, ms_int(&s, 0));
    if (p == 2) z = MS_MUL(&s, z, z);
    if (weight) {
        em_tensor *flat = MS_DO(&s, em_reshape(target, (em_intlist){ &N, 1 }));
        em_tensor *wy = MS_DO(&s, em_index_select(weight, 0, flat));
        z = MS_MUL(&s, z, MS_DO(&s, em_reshape(wy, (em_intlist){ s1, 2 })));
        z = ms_tri(&s, em_where, keep, z, ms_int(&s, 0));
    }
    em_tensor *loss = ms_sum_dim(&s, z, 1);
    loss = MS_DIV(&s, loss, ms_int(&s, C));
    if (input->ndim == 1 || (strcmp(reduction, "none") == 0 && target->ndim == 0))
        loss = MS_DO(&s, em_reshape(loss, (em_intlist){ target->sizes, target->ndim }));
    return ms_finish(&s, reduce_loss(&s, loss, reduction));
}

/* log(1 + exp(-input * target)) in input's dtype and shape, as PyTorch's
 * kernel (which writes each step into an output like input). */
em_tensor *em_comp_soft_margin_loss(em_keyset ks, em_tensor *input, em_tensor *target, const char *reduction) {
    (void)ks;
    const char *op = "soft_margin_loss";
    char b1[EM_SHAPE_STR_MAX], b2[EM_SHAPE_STR_MAX];
    if (!em_dtype_is_floating(input->dtype)) {
        em_set_error(EM_ETYPE, "%s: input must be floating (got %s)", op, em_dtype_name(input->dtype));
        return NULL;
    }
    if (em_requires_grad(target) && em_is_grad_enabled()) { /* as PyTorch's kernel */
        em_set_error(EM_EVALUE, "%s: not differentiable with respect to target (it cannot require grad)", op);
        return NULL;
    }
    int64_t bs[EM_MAX_DIMS];
    int nb = em_broadcast_shapes(input->ndim, input->sizes, target->ndim, target->sizes, bs, op);
    if (nb < 0) return NULL;
    if (nb != input->ndim || memcmp(bs, input->sizes, sizeof(int64_t) * (size_t)nb) != 0) {
        em_set_error(EM_ESHAPE, "%s: target %s must broadcast to input's shape %s", op,
                     em_shape_str(target->ndim, target->sizes, b1, sizeof b1),
                     em_shape_str(input->ndim, input->sizes, b2, sizeof b2));
        return NULL;
    }
    ms_scope s = { .n = 0 };
    em_tensor *v = MS_MUL(&s, ms_un(&s, em_neg, input), target);
    if (MS_OK(&s) && v->dtype != input->dtype) v = ms_keep(&s, em_to(v, input->dtype));
    v = ms_un(&s, em_exp, v);
    v = ms_un(&s, em_log, MS_ADD(&s, v, ms_int(&s, 1)));
    return ms_finish(&s, reduce_loss(&s, v, reduction));
}

/* log(sigmoid(x)) = min(x, 0) - log1p(exp(-|x|)), as PyTorch's kernel. */
static em_tensor *log_sigmoid(ms_scope *s, em_tensor *x) {
    em_tensor *m = ms_bin(s, em_minimum, x, ms_int(s, 0));
    em_tensor *e = ms_un(s, em_exp, ms_un(s, em_neg, ms_un(s, em_abs, x)));
    return MS_SUB(s, m, ms_un(s, em_log1p, e));
}

em_tensor *em_comp_multilabel_soft_margin_loss(em_keyset ks, em_tensor *input, em_tensor *target, em_tensor *weight,
                                               const char *reduction) {
    (void)ks;
    if (input->ndim < 1) {
        em_set_error(EM_ESHAPE, "multilabel_soft_margin_loss: input must have a class dim (got a 0-d tensor)");
        return NULL;
    }
    ms_scope s = { .n = 0 };
    em_tensor *a = MS_MUL(&s, target, log_sigmoid(&s, input));
    em_tensor *b = MS_MUL(&s, MS_SUB(&s, ms_int(&s, 1), target), log_sigmoid(&s, ms_un(&s, em_neg, input)));
    em_tensor *loss = ms_un(&s, em_neg, MS_ADD(&s, a, b));
    if (weight) loss = MS_MUL(&s, loss, weight);
    int64_t cd = input->ndim - 1, C = input->sizes[cd];
    loss = ms_sum_dim(&s, loss, cd);
    loss = MS_DIV(&s, loss, ms_int(&s, C));
    return ms_finish(&s, reduce_loss(&s, loss, reduction));
}
