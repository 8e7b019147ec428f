/* composite.c -- composite ops: ops.yaml entries with `kernels: {Composite:
 * em_comp_NAME}` (see Note [Composite ops] in codegen/codegen.h).
 *
 * Each function here is registered at every dispatch key and computes its
 * op by calling other ops through the public API (em_ops.h) -- never a
 * kernel -- so autograd records the parts, every backend runs them and
 * double backward comes for free. The key set argument is therefore unused.
 * A composite checks the arguments it can name better than its parts would
 * (so errors name the op the user called), then builds the result.
 *
 * Temporaries go through a small scope (cs_*): every tensor made on the
 * way is released at the end, and a NULL (failed part, error already set)
 * short-circuits the rest.
 */
#include <math.h>
#include <string.h>

#include "autograd/em_autograd.h"
#include "em_ops.h"
#include "em_kernels_decl.h"
#include "kernels/em_tmp_scope.h"

/* ---- temporaries ---- */

/* Note [Temporaries scopes]; the fixed recipes below need few slots. */
EM_TMP_SCOPE(cs, 16, "composite")

/* A wrapped-number 0-dim tensor (it does not promote, like a Lua number
 * operand). */
static em_tensor *cs_scalar(cs_scope *s, em_scalar v) { return cs_keep(s, em_tensor_wrapped_scalar(v)); }

static bool scalar_is(em_scalar v, double x) { return em_scalar_to_double(v) == x; }

/* ---- linear algebra ---- */

/* addmm(self, mat1, mat2, beta, alpha) = beta * self + alpha * (mat1 @ mat2).
 * As in PyTorch, beta == 0 ignores self's values and alpha == 0 the
 * product's (NaN and inf do not propagate), and self must broadcast to the
 * product's shape (n, p). */
em_tensor *em_comp_addmm(em_keyset ks, em_tensor *self, em_tensor *mat1, em_tensor *mat2,
                         em_scalar beta, em_scalar alpha) {
    char b1[64], b2[64];
    if (mat1->ndim != 2 || mat2->ndim != 2) {
        const char *which = mat1->ndim != 2 ? "mat1" : "mat2";
        em_set_error(EM_EVALUE, "addmm: %s must be a matrix, got a %d-D tensor", which,
                     (mat1->ndim != 2 ? mat1 : mat2)->ndim);
        return NULL;
    }
    if (mat1->sizes[1] != mat2->sizes[0]) {
        em_set_error(EM_EVALUE, "addmm: mat1 and mat2 shapes cannot be multiplied (%s and %s)",
                     em_shape_str(2, mat1->sizes, b1, sizeof b1), em_shape_str(2, mat2->sizes, b2, sizeof b2));
        return NULL;
    }
    if (self->dtype != mat2->dtype && !self->wrapped_number) { /* mm checks mat1 against mat2 */
        em_set_error(EM_ETYPE, "addmm: self and mat2 must have the same dtype (%s and %s)",
                     em_dtype_name(self->dtype), em_dtype_name(mat2->dtype));
        return NULL;
    }
    int64_t out[2] = { mat1->sizes[0], mat2->sizes[1] };
    int64_t bc[EM_MAX_DIMS];
    int nb;
    if (self->ndim > 2 || (nb = em_broadcast_shapes(self->ndim, self->sizes, 2, out, bc, "addmm")) != 2 ||
        bc[0] != out[0] || bc[1] != out[1]) {
        em_clear_error();
        em_set_error(EM_EVALUE, "addmm: self of shape %s does not broadcast to the product's shape %s",
                     em_shape_str(self->ndim, self->sizes, b1, sizeof b1), em_shape_str(2, out, b2, sizeof b2));
        return NULL;
    }
    if (!em_dtype_is_floating(mat2->dtype)) { /* integer addmm truncates alpha and beta (PyTorch) */
        alpha = em_scalar_int(em_scalar_to_int(alpha));
        beta = em_scalar_int(em_scalar_to_int(beta));
    }
    cs_scope s = { .n = 0 };
    em_tensor *r;
    if (scalar_is(alpha, 0)) { /* like BLAS, alpha == 0 does not read the product (inf * 0) */
        r = cs_keep(&s, em_zeros((em_intlist){ out, 2 }, mat2->dtype, mat2->device));
        if (r && !scalar_is(beta, 0)) r = cs_keep(&s, em_add(r, self, beta));
        return cs_finish(&s, r);
    }
    r = cs_keep(&s, em_mm(mat1, mat2));
    if (r && !scalar_is(alpha, 1)) {
        em_tensor *a = cs_scalar(&s, alpha);
        r = a ? cs_keep(&s, em_mul(r, a)) : NULL;
    }
    if (r && !scalar_is(beta, 0)) r = cs_keep(&s, em_add(r, self, beta));
    return cs_finish(&s, r);
}

/* linear(input, weight, bias) = input @ weight^T + bias, over input's last
 * dim: input (*, in), weight (out, in) or (in), bias (out) or absent. */
em_tensor *em_comp_linear(em_keyset ks, em_tensor *input, em_tensor *weight, em_tensor *bias) {
    char b1[64], b2[64];
    if (weight->ndim < 1 || weight->ndim > 2) {
        em_set_error(EM_EVALUE, "linear: weight must be 1-D or 2-D (out_features, in_features), got %s",
                     em_shape_str(weight->ndim, weight->sizes, b1, sizeof b1));
        return NULL;
    }
    if (input->ndim < 1 || input->sizes[input->ndim - 1] != weight->sizes[weight->ndim - 1]) {
        em_set_error(EM_EVALUE, "linear: input %s and weight %s: input's last dim must be weight's "
                     "in_features (%lld)",
                     em_shape_str(input->ndim, input->sizes, b1, sizeof b1),
                     em_shape_str(weight->ndim, weight->sizes, b2, sizeof b2),
                     (long long)weight->sizes[weight->ndim - 1]);
        return NULL;
    }
    cs_scope s = { .n = 0 };
    em_tensor *wt = weight->ndim == 2 ? cs_keep(&s, em_t(weight)) : weight;
    em_tensor *r;
    if (wt && bias && input->ndim == 2 && weight->ndim == 2)
        r = cs_keep(&s, em_addmm(bias, input, wt, em_scalar_int(1), em_scalar_int(1)));
    else {
        r = wt ? cs_keep(&s, em_matmul(input, wt)) : NULL;
        if (r && bias) { /* added into the product as PyTorch does: bias may not grow it */
            int64_t bc[EM_MAX_DIMS];
            int nb = em_broadcast_shapes(r->ndim, r->sizes, bias->ndim, bias->sizes, bc, "linear");
            if (nb != r->ndim || memcmp(bc, r->sizes, sizeof(int64_t) * (size_t)nb) != 0) {
                em_clear_error();
                em_set_error(EM_ESHAPE, "linear: bias of shape %s does not broadcast to the output's shape %s",
                             em_shape_str(bias->ndim, bias->sizes, b1, sizeof b1),
                             em_shape_str(r->ndim, r->sizes, b2, sizeof b2));
                s.failed = true;
            } else if (bias->dtype != r->dtype && input->ndim >= 3 && input->is_contiguous) {
                /* PyTorch folds a contiguous input into one addmm, which wants one dtype */
                em_set_error(EM_ETYPE, "linear: bias (%s) must have the dtype of input and weight (%s)",
                             em_dtype_name(bias->dtype), em_dtype_name(r->dtype));
                s.failed = true;
            } else { /* PyTorch adds in place: the product keeps its dtype */
                em_tensor *bc2 = bias->dtype == r->dtype ? bias : cs_keep(&s, em_to(bias, r->dtype));
                r = bc2 ? cs_keep(&s, em_add(r, bc2, em_scalar_int(1))) : NULL;
            }
        }
    }
    return cs_finish(&s, r);
}

/* ---- reductions and normalisations ---- */

/* Whether dims (0-based, maybe negative) are valid for t; sets *any_empty
 * when one of them has size 0. Errors name op. */
static bool check_dims(const em_tensor *t, em_intlist dim, const char *op, bool *any_empty) {
    *any_empty = false;
    for (int i = 0; i < dim.n; i++) {
        int d = em_wrap_dim(dim.data[i], t->ndim, op);
        if (d < 0) return false;
        if (t->ndim && t->sizes[d] == 0) *any_empty = true;
    }
    return true;
}

/* amax(x, dim, keepdim=true) of x detached: a constant shift for the
 * numerically stable exp-sums below (its gradient would cancel out, so
 * nothing is recorded for it). */
static em_tensor *cs_shift(cs_scope *s, em_tensor *x, em_intlist dim) {
    em_tensor *xd = cs_keep(s, em_detach(x));
    return xd ? cs_keep(s, em_amax(xd, dim, true)) : NULL;
}

/* Integer and bool inputs compute in the default float dtype (PyTorch's
 * logsumexp); floating inputs stay as they are. */
static em_tensor *cs_floating(cs_scope *s, em_tensor *x) {
    return em_dtype_is_floating(x->dtype) ? x : cs_keep(s, em_to(x, EM_FLOAT32));
}

/* logsumexp(x, dim, keepdim) = log(sum(exp(x - m), dim)) + m with m the
 * max over dim, where an infinite m is replaced by 0 (so that inf and
 * all--inf rows give inf and -inf, not NaN), as PyTorch computes it. */
em_tensor *em_comp_logsumexp(em_keyset ks, em_tensor *self, em_intlist dim, bool keepdim) {
    bool empty;
    if (dim.n <= 0) {
        em_set_error(EM_EVALUE, "logsumexp: dim must name at least one dim");
        return NULL;
    }
    if (!check_dims(self, dim, "logsumexp", &empty)) return NULL;
    cs_scope s = { .n = 0 };
    em_tensor *x = cs_floating(&s, self);
    em_tensor *r;
    if (x && (empty || x->numel == 0)) { /* log(0) = -inf over an empty dim; no max exists */
        em_tensor *e = cs_keep(&s, em_exp(x));
        em_tensor *sum = e ? cs_keep(&s, em_sum(e, dim, keepdim, EM_DTYPE_NONE)) : NULL;
        r = sum ? cs_keep(&s, em_log(sum)) : NULL;
        return cs_finish(&s, r);
    }
    em_tensor *m = x ? cs_shift(&s, x, dim) : NULL;
    em_tensor *inf = m ? cs_scalar(&s, em_scalar_float(INFINITY)) : NULL;
    em_tensor *zero = inf ? cs_scalar(&s, em_scalar_float(0)) : NULL;
    em_tensor *am = zero ? cs_keep(&s, em_abs(m)) : NULL;
    em_tensor *isinf = am ? cs_keep(&s, em_eq(am, inf)) : NULL;
    em_tensor *mf = isinf ? cs_keep(&s, em_where(isinf, zero, m)) : NULL;
    em_tensor *d = mf ? cs_keep(&s, em_sub(x, mf, em_scalar_int(1))) : NULL;
    em_tensor *e = d ? cs_keep(&s, em_exp(d)) : NULL;
    em_tensor *sum = e ? cs_keep(&s, em_sum(e, dim, keepdim, EM_DTYPE_NONE)) : NULL;
    em_tensor *l = sum ? cs_keep(&s, em_log(sum)) : NULL;
    em_tensor *mr = l ? (keepdim ? mf : cs_keep(&s, em_reshape(mf, (em_intlist){ l->sizes, l->ndim }))) : NULL;
    r = mr ? cs_keep(&s, em_add(l, mr, em_scalar_int(1))) : NULL;
    return cs_finish(&s, r);
}

