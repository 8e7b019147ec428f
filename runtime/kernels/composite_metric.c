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

/* ---- temporaries ---- */

#define MS_MAX 64
typedef struct {
    em_tensor *t[MS_MAX];
    int n;
    bool failed;
} ms_scope;

/* Takes ownership of t (NULL marks the scope failed) and returns it. */
static em_tensor *ms_keep(ms_scope *s, em_tensor *t) {
    if (!t || s->n == MS_MAX) {
        if (t) {
            em_tensor_release(t);
            em_set_error(EM_EINTERNAL, "metric composite: too many temporaries");
        }
        s->failed = true;
        return NULL;
    }
    s->t[s->n++] = t;
    return t;
}

/* Releases every temporary except keep (returned owned); NULL when the
 * scope failed. */
static em_tensor *ms_finish(ms_scope *s, em_tensor *keep) {
    em_tensor *r = NULL;
    for (int i = 0; i < s->n; i++) {
        if (s->t[i] == keep && !s->failed && !r) r = s->t[i];
        else em_tensor_release(s->t[i]);
    }
    s->n = 0;
    return r;
}

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
