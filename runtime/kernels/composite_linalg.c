/* composite_linalg.c -- the linalg family's composite ops (Note [Composite
 * ops] in codegen/codegen.h): outer/ger, addmv, baddbmm, addbmm, kron,
 * cross, tensordot, einsum, the linalg norms and matrix_power.
 *
 * As in composite.c, each function calls ops through the public API only,
 * so autograd records the parts (their gradients, double backward and every
 * backend come from them), and checks first what it can name better than
 * its parts. Dims in messages are 1-based, as the Lua user wrote them.
 * Temporaries go through a scope (ls_*): everything made on the way is
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

/* Note [Temporaries scopes]; einsum: up to 64 operands, about 10
 * temporaries each. */
EM_TMP_SCOPE_KEEP(ls, 768, "linalg composite")

/* Releases every temporary except keep (returned owned; retained when it is
 * not one of the scope's); NULL when the scope failed. */
static em_tensor *ls_finish(ls_scope *s, em_tensor *keep) {
    em_tensor *r = em_tmp_finish(s->t, &s->n, s->failed, keep);
    if (!r && keep && !s->failed) r = em_tensor_retain(keep);
    return r;
}

static em_tensor *ls_fail(ls_scope *s) {
    s->failed = true;
    return ls_finish(s, NULL);
}

static em_intlist il(const int64_t *d, int n) { return (em_intlist){ d, n }; }
static bool scalar_is(em_scalar v, double x) { return em_scalar_to_double(v) == x; }

static const char *shp(const em_tensor *t, char *buf) { return em_shape_str(t->ndim, t->sizes, buf, EM_SHAPE_STR_MAX); }

/* ---- outer, ger ---- */

em_tensor *em_comp_outer(em_keyset ks, em_tensor *self, em_tensor *vec2) {
    if (self->ndim != 1 || vec2->ndim != 1) {
        em_set_error(EM_ESHAPE, "outer: expected 1-d %s, got %d-d", self->ndim != 1 ? "self" : "vec2",
                     (self->ndim != 1 ? self : vec2)->ndim);
        return NULL;
    }
    ls_scope s = { .n = 0 };
    int64_t col[2] = { self->sizes[0], 1 };
    em_tensor *c = ls_keep(&s, em_reshape(self, il(col, 2)));
    em_tensor *r = c ? ls_keep(&s, em_mul(c, vec2)) : NULL;
    return ls_finish(&s, r);
}

em_tensor *em_comp_ger(em_keyset ks, em_tensor *self, em_tensor *vec2) { return em_outer(self, vec2); }

/* ---- addmv, baddbmm, addbmm: beta * self + alpha * product ---- */

/* The shared tail: prod (the product, of the operands' dtype) scaled by
 * alpha plus self scaled by beta. self must broadcast to prod's shape
 * without growing it; self of another dtype is converted to prod's (as
 * PyTorch's in-place add into the product does). beta == 0 ignores self's
 * values and alpha == 0 the product's (NaN and inf do not propagate), as
 * BLAS does -- unless alpha_reads: PyTorch's baddbmm multiplies the
 * product by alpha in its own loop at the sizes tests use (its BLAS path
 * for large ones does not). Integer products truncate beta and alpha, bool
 * ones take them as bools. Owns nothing. */
static em_tensor *axpby(ls_scope *s, em_tensor *self, em_tensor *prod, em_scalar beta, em_scalar alpha,
                        bool alpha_reads, const char *op) {
    char b1[EM_SHAPE_STR_MAX], b2[EM_SHAPE_STR_MAX];
    int64_t bc[EM_MAX_DIMS];
    int nb = em_broadcast_shapes(self->ndim, self->sizes, prod->ndim, prod->sizes, bc, op);
    if (nb != prod->ndim || memcmp(bc, prod->sizes, sizeof(int64_t) * (size_t)nb) != 0) {
        em_clear_error();
        em_set_error(EM_ESHAPE, "%s: self of shape %s does not broadcast to the product's shape %s", op,
                     shp(self, b1), shp(prod, b2));
        return NULL;
    }
    if (prod->dtype == EM_BOOL) {
        alpha = em_scalar_bool(!scalar_is(alpha, 0));
        beta = em_scalar_bool(!scalar_is(beta, 0));
    } else if (!em_dtype_is_floating(prod->dtype)) {
        alpha = em_scalar_int(em_scalar_to_int(alpha));
        beta = em_scalar_int(em_scalar_to_int(beta));
    }
    em_tensor *x = self;
    if (self->dtype != prod->dtype && !self->wrapped_number) x = ls_keep(s, em_to(self, prod->dtype));
    if (!x) return NULL;
    /* a zero of prod's dtype that does not promote, and a true condition:
     * where(yes, zero, t) is zeros that keep t's history (a zero gradient,
     * as PyTorch gives self when beta = 0 and the product when alpha = 0) */
    em_tensor *zero = ls_keep(s, em_tensor_wrapped_scalar(prod->dtype == EM_BOOL ? em_scalar_bool(false)
                                                          : em_dtype_is_floating(prod->dtype) ? em_scalar_float(0)
                                                          : em_scalar_int(0)));
    em_tensor *yes = zero ? ls_keep(s, em_tensor_wrapped_scalar(em_scalar_bool(true))) : NULL;
    if (!yes) return NULL;
    em_tensor *r;
    if (scalar_is(alpha, 0) && !alpha_reads) {
        r = ls_keep(s, em_where(yes, zero, prod));
    } else if (scalar_is(alpha, 1)) {
        r = prod;
    } else {
        em_tensor *a = ls_keep(s, em_tensor_wrapped_scalar(alpha));
        r = a ? ls_keep(s, em_mul(prod, a)) : NULL;
    }
    if (r && !scalar_is(beta, 0)) {
        r = ls_keep(s, em_add(r, x, beta));
    } else if (r && em_requires_grad(x)) {
        em_tensor *z = ls_keep(s, em_where(yes, zero, x));
        r = z ? ls_keep(s, em_add(r, z, em_scalar_int(1))) : NULL;
    }
    return r;
}

static bool want_nd(const em_tensor *t, int nd, const char *op, const char *name) {
    if (t->ndim == nd) return true;
    em_set_error(EM_ESHAPE, "%s: %s must be a %d-d tensor, got %d-d", op, name, nd, t->ndim);
    return false;
}

static bool same_dtype(const em_tensor *a, const em_tensor *b, const char *op, const char *an, const char *bn) {
    if (a->dtype == b->dtype) return true;
    em_set_error(EM_ETYPE, "%s: expected %s and %s to have the same dtype, got %s and %s", op, an, bn,
                 em_dtype_name(a->dtype), em_dtype_name(b->dtype));
    return false;
}

static bool inner_sizes(const em_tensor *a, const em_tensor *b, int64_t ka, int64_t kb, const char *op) {
    if (ka == kb) return true;
    char b1[EM_SHAPE_STR_MAX], b2[EM_SHAPE_STR_MAX];
    em_set_error(EM_ESHAPE, "%s: shapes %s and %s cannot be multiplied (%lld != %lld)", op, shp(a, b1), shp(b, b2),
                 (long long)ka, (long long)kb);
    return false;
}

em_tensor *em_comp_addmv(em_keyset ks, em_tensor *self, em_tensor *mat, em_tensor *vec, em_scalar beta,
                         em_scalar alpha) {
    if (!want_nd(mat, 2, "addmv", "mat") || !want_nd(vec, 1, "addmv", "vec") ||
        !same_dtype(mat, vec, "addmv", "mat", "vec") || !inner_sizes(mat, vec, mat->sizes[1], vec->sizes[0], "addmv"))
        return NULL;
    ls_scope s = { .n = 0 };
    em_tensor *p = ls_keep(&s, em_mv(mat, vec));
    em_tensor *r = p ? axpby(&s, self, p, beta, alpha, false, "addmv") : NULL;
    return r ? ls_finish(&s, r) : ls_fail(&s);
}

/* Checks of baddbmm/addbmm's batches; op names the op. */
static bool check_batches(const em_tensor *b1, const em_tensor *b2, const char *op) {
    char s1[EM_SHAPE_STR_MAX], s2[EM_SHAPE_STR_MAX];
    if (!want_nd(b1, 3, op, "batch1") || !want_nd(b2, 3, op, "batch2") ||
        !same_dtype(b1, b2, op, "batch1", "batch2"))
        return false;
    if (b1->sizes[0] != b2->sizes[0]) {
        em_set_error(EM_ESHAPE, "%s: batch1 %s and batch2 %s have different batch sizes (%lld != %lld)", op,
                     shp(b1, s1), shp(b2, s2), (long long)b1->sizes[0], (long long)b2->sizes[0]);
        return false;
    }
    return inner_sizes(b1, b2, b1->sizes[2], b2->sizes[1], op);
}

em_tensor *em_comp_baddbmm(em_keyset ks, em_tensor *self, em_tensor *batch1, em_tensor *batch2, em_scalar beta,
                           em_scalar alpha) {
    if (!check_batches(batch1, batch2, "baddbmm")) return NULL;
    ls_scope s = { .n = 0 };
    em_tensor *p = ls_keep(&s, em_bmm(batch1, batch2));
    em_tensor *r = p ? axpby(&s, self, p, beta, alpha, true, "baddbmm") : NULL;
    return r ? ls_finish(&s, r) : ls_fail(&s);
}

em_tensor *em_comp_addbmm(em_keyset ks, em_tensor *self, em_tensor *batch1, em_tensor *batch2, em_scalar beta,
                          em_scalar alpha) {
    if (!check_batches(batch1, batch2, "addbmm")) return NULL;
    ls_scope s = { .n = 0 };
    int64_t d0 = 0;
    em_tensor *p = ls_keep(&s, em_bmm(batch1, batch2));
    em_tensor *sum = p ? ls_keep(&s, em_sum(p, il(&d0, 1), false, p->dtype)) : NULL; /* integers stay */
    em_tensor *r = sum ? axpby(&s, self, sum, beta, alpha, false, "addbmm") : NULL;
    return r ? ls_finish(&s, r) : ls_fail(&s);
}

/* ---- kron ---- */

/* kron(a, b) with n = max dims (the fewer padded with leading 1s): a as
 * {a1,1,a2,1,...} times b as {1,b1,1,b2,...} gives {a1,b1,a2,b2,...}, which
 * reshapes to {a1*b1, a2*b2, ...}. */
em_tensor *em_comp_kron(em_keyset ks, em_tensor *self, em_tensor *other) {
    int n = self->ndim > other->ndim ? self->ndim : other->ndim;
    if (2 * n > EM_MAX_DIMS) {
        em_set_error(EM_ESHAPE, "kron: at most %d dims are supported, got %d", EM_MAX_DIMS / 2, n);
        return NULL;
    }
    int64_t sa[EM_MAX_DIMS], sb[EM_MAX_DIMS], out[EM_MAX_DIMS];
    for (int d = 0; d < n; d++) {
        int ia = d - (n - self->ndim), ib = d - (n - other->ndim);
        int64_t x = ia >= 0 ? self->sizes[ia] : 1, y = ib >= 0 ? other->sizes[ib] : 1;
        sa[2 * d] = x; sa[2 * d + 1] = 1;
        sb[2 * d] = 1; sb[2 * d + 1] = y;
        out[d] = x * y;
    }
    ls_scope s = { .n = 0 };
    em_tensor *a = ls_keep(&s, em_reshape(self, il(sa, 2 * n)));
    em_tensor *b = a ? ls_keep(&s, em_reshape(other, il(sb, 2 * n))) : NULL;
    em_tensor *p = b ? ls_keep(&s, em_mul(a, b)) : NULL;
    em_tensor *v = p ? ls_keep(&s, em_reshape(p, il(out, n))) : NULL;
    /* a tensor of its own, not a view of the product (PyTorch's _unsafe_view):
     * an in-place write to the result moves its history as for any result */
    em_tensor *r = v ? ls_keep(&s, em_clone(v)) : NULL;
    return ls_finish(&s, r);
}

/* ---- cross ---- */

/* a x b along dim d (0-based, valid for both), both with the same number of
 * dims and size 3 there, the other dims broadcasting: the three components
 * a2 b3 - a3 b2, a3 b1 - a1 b3, a1 b2 - a2 b1 joined along d. */
static em_tensor *cross_at(em_tensor *a, em_tensor *b, int d) {
    ls_scope s = { .n = 0 };
    em_tensor *pa[3], *pb[3], *c[3];
    for (int i = 0; i < 3; i++) {
        pa[i] = ls_keep(&s, em_narrow(a, d, i, 1));
        pb[i] = ls_keep(&s, em_narrow(b, d, i, 1));
    }
    for (int i = 0; i < 3 && !s.failed; i++) {
        int j = (i + 1) % 3, k = (i + 2) % 3;
        em_tensor *x = ls_keep(&s, em_mul(pa[j], pb[k]));
        em_tensor *y = x ? ls_keep(&s, em_mul(pa[k], pb[j])) : NULL;
        c[i] = y ? ls_keep(&s, em_sub(x, y, em_scalar_int(1))) : NULL;
    }
    em_tensor *r = s.failed ? NULL : ls_keep(&s, em_cat((em_tensorlist){ c, 3 }, d));
    return ls_finish(&s, r);
}

/* The checks both cross ops share; op is "cross" or "linalg.cross". */
static bool cross_check(const em_tensor *a, const em_tensor *b, const char *op) {
    char b1[EM_SHAPE_STR_MAX], b2[EM_SHAPE_STR_MAX];
    if (a->ndim != b->ndim) {
        em_set_error(EM_ESHAPE, "%s: self %s and other %s must have the same number of dims", op, shp(a, b1),
                     shp(b, b2));
        return false;
    }
    if (!same_dtype(a, b, op, "self", "other")) return false;
    if (a->dtype == EM_BOOL) {
        em_set_error(EM_ETYPE, "%s: not supported for dtype bool", op);
        return false;
    }
    int64_t bc[EM_MAX_DIMS];
    if (em_broadcast_shapes(a->ndim, a->sizes, b->ndim, b->sizes, bc, op) < 0) return false;
    return true;
}

static bool cross_dim3(const em_tensor *a, const em_tensor *b, int d, const char *op) {
    if (a->sizes[d] == 3 && b->sizes[d] == 3) return true;
    em_set_error(EM_ESHAPE, "%s: self and other must have size 3 in dim %d, got %lld and %lld", op, d + 1,
                 (long long)a->sizes[d], (long long)b->sizes[d]);
    return false;
}

em_tensor *em_comp_cross(em_keyset ks, em_tensor *self, em_tensor *other, const int64_t *dim) {
    if (!cross_check(self, other, "cross")) return NULL;
    int d = -1;
    if (dim) {
        if ((d = em_wrap_dim(*dim, self->ndim, "cross")) < 0) return NULL;
    } else { /* PyTorch: the first dim of self of size 3 */
        for (int i = 0; i < self->ndim && d < 0; i++)
            if (self->sizes[i] == 3) d = i;
        if (d < 0) {
            char b1[EM_SHAPE_STR_MAX];
            em_set_error(EM_ESHAPE, "cross: self %s has no dim of size 3 (pass dim)", shp(self, b1));
            return NULL;
        }
    }
    if (!cross_dim3(self, other, d, "cross")) return NULL;
    return cross_at(self, other, d);
}

em_tensor *em_comp_linalg_cross(em_keyset ks, em_tensor *self, em_tensor *other, int64_t dim) {
    if (!cross_check(self, other, "linalg.cross")) return NULL;
    int d = em_wrap_dim(dim, self->ndim, "linalg.cross");
    if (d < 0 || !cross_dim3(self, other, d, "linalg.cross")) return NULL;
    return cross_at(self, other, d);
}

/* ---- tensordot ---- */

/* Contracts dims ca[i] of a with cb[i] of b (0-based, checked): a's free
 * dims then b's, by permute + reshape + mm. */
static em_tensor *tensordot_impl(em_tensor *a, em_tensor *b, const int *ca, const int *cb, int nc) {
    bool ina[EM_MAX_DIMS] = { false }, inb[EM_MAX_DIMS] = { false };
    for (int i = 0; i < nc; i++) ina[ca[i]] = inb[cb[i]] = true;
    int64_t pa[EM_MAX_DIMS], pb[EM_MAX_DIMS], out[EM_MAX_DIMS];
    int npa = 0, npb = 0, no = 0;
    int64_t fa = 1, fb = 1, k = 1;
    for (int d = 0; d < a->ndim; d++)
        if (!ina[d]) { pa[npa++] = d; out[no++] = a->sizes[d]; fa *= a->sizes[d]; }
    for (int i = 0; i < nc; i++) { pa[npa++] = ca[i]; pb[npb++] = cb[i]; k *= a->sizes[ca[i]]; }
    for (int d = 0; d < b->ndim; d++)
        if (!inb[d]) { pb[npb++] = d; out[no++] = b->sizes[d]; fb *= b->sizes[d]; }
    if (no > EM_MAX_DIMS) {
        em_set_error(EM_ESHAPE, "tensordot: the result would have %d dims, more than %d", no, EM_MAX_DIMS);
        return NULL;
    }
    ls_scope s = { .n = 0 };
    int64_t s2a[2] = { fa, k }, s2b[2] = { k, fb };
    em_tensor *x = ls_keep(&s, em_permute(a, il(pa, npa)));
    em_tensor *xr = x ? ls_keep(&s, em_reshape(x, il(s2a, 2))) : NULL;
    em_tensor *y = xr ? ls_keep(&s, em_permute(b, il(pb, npb))) : NULL;
    em_tensor *yr = y ? ls_keep(&s, em_reshape(y, il(s2b, 2))) : NULL;
    em_tensor *p = yr ? ls_keep(&s, em_mm(xr, yr)) : NULL;
    em_tensor *r = p ? ls_keep(&s, em_reshape(p, il(out, no))) : NULL;
    return ls_finish(&s, r);
}

/* Checks the pairs and contracts; dims are 0-based (maybe negative). */
static em_tensor *tensordot_pairs(em_tensor *a, em_tensor *b, const int64_t *da, const int64_t *db, int n) {
    if (!same_dtype(a, b, "tensordot", "self", "other")) return NULL;
    int ca[EM_MAX_DIMS], cb[EM_MAX_DIMS];
    bool seena[EM_MAX_DIMS] = { false }, seenb[EM_MAX_DIMS] = { false };
    for (int i = 0; i < n; i++) {
        ca[i] = em_wrap_dim(da[i], a->ndim, "tensordot");
        cb[i] = ca[i] < 0 ? -1 : em_wrap_dim(db[i], b->ndim, "tensordot");
        if (cb[i] < 0) return NULL;
        if (seena[ca[i]] || seenb[cb[i]]) {
            em_set_error(EM_EVALUE, "tensordot: dim %d of %s is contracted twice", (seena[ca[i]] ? ca[i] : cb[i]) + 1,
                         seena[ca[i]] ? "self" : "other");
            return NULL;
        }
        seena[ca[i]] = seenb[cb[i]] = true;
        if (a->sizes[ca[i]] != b->sizes[cb[i]]) {
            em_set_error(EM_ESHAPE, "tensordot: contracted dims must have one size, but self has size %lld in dim %d "
                         "and other has size %lld in dim %d", (long long)a->sizes[ca[i]], ca[i] + 1,
                         (long long)b->sizes[cb[i]], cb[i] + 1);
            return NULL;
        }
    }
    return tensordot_impl(a, b, ca, cb, n);
}

em_tensor *em_comp_tensordot(em_keyset ks, em_tensor *self, em_tensor *other, int64_t dims) {
    if (dims < 0 || dims > self->ndim || dims > other->ndim) {
        em_set_error(EM_EVALUE, "tensordot: dims must be in 0..%d for %d-d self and %d-d other, got %lld",
                     self->ndim < other->ndim ? self->ndim : other->ndim, self->ndim, other->ndim, (long long)dims);
        return NULL;
    }
    int64_t da[EM_MAX_DIMS], db[EM_MAX_DIMS];
    for (int i = 0; i < dims; i++) {
        da[i] = self->ndim - dims + i;
        db[i] = i;
    }
    return tensordot_pairs(self, other, da, db, (int)dims);
}

em_tensor *em_comp_tensordot_dimlists(em_keyset ks, em_tensor *self, em_tensor *other, em_intlist dims_self,
                                      em_intlist dims_other) {
    if (dims_self.n != dims_other.n) {
        em_set_error(EM_EVALUE, "tensordot: dims_self and dims_other must have the same length, got %d and %d",
                     dims_self.n, dims_other.n);
        return NULL;
    }
    if (dims_self.n > EM_MAX_DIMS) {
        em_set_error(EM_EVALUE, "tensordot: dims_self has %d entries, more than %d", dims_self.n, EM_MAX_DIMS);
        return NULL;
    }
    return tensordot_pairs(self, other, dims_self.data, dims_other.data, dims_self.n);
}

/* ---- einsum ---- */

/* Note [einsum lowering]
 * Labels are ids: 'A'..'Z' are 0..25, 'a'..'z' 26..51 (so the implicit
 * output, the labels used once in sorted order, sorts as PyTorch's), and
 * the dims an ellipsis covers 52.. (right-aligned over the operands, so
 * they broadcast). Each operand first takes the diagonal of a repeated
 * label (an as_strided view). Then PyTorch 1.13's algorithm, so that
 * dtypes, values and errors agree: with last[l] the last operand where
 * label l is longer than 1, operand 1 drops the labels the output lacks
 * whose last operand it is (summed, or squeezed when of size 1), and each
 * further operand k is combined with the result so far by eq_contract:
 * labels it is the last operand of are summed out of it (when the result
 * has them at size 1) or contracted (permute + reshape + bmm), and without
 * labels to contract the two are multiplied with broadcasting. A lone
 * operand sums every label the output lacks. Sums promote
 * integers and bool to int64, products keep their dtype (bmm needs one)
 * or promote (mul), as in PyTorch. */
#define EQ_LETTERS 52
#define EQ_MAXL (EQ_LETTERS + EM_MAX_DIMS)

typedef struct {
    em_tensor *t;           /* the operand (owned by the scope) or an input (borrowed) */
    int n;                  /* dims = labels */
    int lab[EM_MAX_DIMS];   /* label of each dim (unique after the diagonal step) */
} eq_term;

static int eq_label(char c) {
    if (c >= 'A' && c <= 'Z') return c - 'A';
    if (c >= 'a' && c <= 'z') return 26 + (c - 'a');
    return -1;
}

static char eq_char(int id, char *buf) {
    if (id < 26) buf[0] = (char)('A' + id);
    else if (id < EQ_LETTERS) buf[0] = (char)('a' + id - 26);
    else buf[0] = '.';
    buf[1] = 0;
    return buf[0];
}

/* Parses one subscript (letters and at most one "...") from *p up to a ',',
 * '-' or the end: labels into raw (ELL = -2 marks the ellipsis). */
#define EQ_ELL (-2)
static int eq_parse_term(const char **p, const char *eq, int *raw, int max, bool *has_ell, const char *what) {
    int n = 0;
    *has_ell = false;
    while (**p && **p != ',' && **p != '-') {
        char c = **p;
        if (c == ' ') { (*p)++; continue; }
        if (c == '.') {
            if (strncmp(*p, "...", 3) != 0 || *has_ell) {
                em_set_error(EM_EVALUE, "einsum: %s at position %d of \"%s\"", *has_ell ?
                             "more than one ellipsis in a subscript" : "'.' that is not part of an ellipsis '...'",
                             (int)(*p - eq) + 1, eq);
                return -1;
            }
            *has_ell = true;
            if (n == max) goto many;
            raw[n++] = EQ_ELL;
            *p += 3;
            continue;
        }
        int id = eq_label(c);
        if (id < 0) {
            em_set_error(EM_EVALUE, "einsum: invalid subscript '%c' at position %d of \"%s\" (subscripts are "
                         "letters a-z, A-Z)", c, (int)(*p - eq) + 1, eq);
            return -1;
        }
        if (n == max) goto many;
        raw[n++] = id;
        (*p)++;
    }
    return n;
many:
    em_set_error(EM_EVALUE, "einsum: %s has more than %d subscripts", what, max);
    return -1;
}

/* The diagonal of a repeated label: one dim per distinct label (first
 * occurrence order), of the common size, with the strides summed. */
static eq_term eq_diagonal(ls_scope *s, em_tensor *t, const int *lab, int k) {
    eq_term r = { .t = t, .n = 0 };
    int64_t size[EM_MAX_DIMS], stride[EM_MAX_DIMS];
    bool repeated = false;
    for (int d = 0; d < t->ndim; d++) {
        int j = 0;
        while (j < r.n && r.lab[j] != lab[d]) j++;
        if (j < r.n) {
            repeated = true;
            if (size[j] != t->sizes[d]) {
                char c[2];
                eq_char(lab[d], c);
                em_set_error(EM_ESHAPE, "einsum: subscript %s is repeated for operand %d but the sizes differ "
                             "(%lld and %lld)", c, k + 1, (long long)size[j], (long long)t->sizes[d]);
                r.t = NULL;
                return r;
            }
            stride[j] += t->strides[d];
            continue;
        }
        r.lab[r.n] = lab[d];
        size[r.n] = t->sizes[d];
        stride[r.n++] = t->strides[d];
    }
    if (repeated) r.t = ls_keep(s, em_as_strided(t, il(size, r.n), il(stride, r.n), NULL));
    return r;
}

static int eq_find(const eq_term *t, int label) {
    for (int d = 0; d < t->n; d++)
        if (t->lab[d] == label) return d;
    return -1;
}

/* Removes the dims whose labels are marked in drop: summed (integers and
 * bool promote to int64, as PyTorch's sum) when one of them is longer than
 * 1 or force_sum (a lone operand), else squeezed (the dtype stays), as
 * PyTorch 1.13's einsum does. */
static bool eq_sum_out(ls_scope *s, eq_term *t, const bool *drop, bool force_sum) {
    int64_t dims[EM_MAX_DIMS], keep[EM_MAX_DIMS];
    int nd = 0, n = 0;
    bool sum = force_sum;
    for (int d = 0; d < t->n; d++) {
        if (drop[t->lab[d]]) {
            dims[nd++] = d;
            sum |= t->t->sizes[d] != 1;
        } else {
            keep[n] = t->t->sizes[d];
            t->lab[n++] = t->lab[d];
        }
    }
    if (nd == 0) return true;
    t->t = ls_keep(s, sum ? em_sum(t->t, il(dims, nd), false, EM_DTYPE_NONE) : em_reshape(t->t, il(keep, n)));
    t->n = n;
    return t->t != NULL;
}

/* Step k >= 1 of Note [einsum lowering]: the accumulated a with operand
 * b (consumed). last[l] is the last operand where label l is longer than
 * 1 (0 when none), out[l] whether the output has l. As PyTorch: labels
 * the output lacks whose last operand came before b are size 1 in b and
 * squeezed; those whose last operand is b are summed out of b when a has
 * them at size 1 or not at all (a's squeezed), else contracted. The
 * result's labels are {batch (in both), left (a only), right (b only)}:
 * with labels to contract, permute + reshape + bmm; without, a broadcast
 * mul (so bool and mixed dtypes work there as in PyTorch). */
static bool eq_contract(ls_scope *s, eq_term *a, const eq_term *bin, int k, const int *last, const bool *in_out,
                        const int *olab, int no_out, eq_term *out) {
    eq_term b = *bin;
    bool dropa[EQ_MAXL] = { false }, dropb[EQ_MAXL] = { false }, con[EQ_MAXL] = { false };
    for (int d = 0; d < b.n; d++) {
        int l = b.lab[d];
        if (in_out[l]) continue;
        if (last[l] < k) { dropb[l] = true; continue; }
        if (last[l] > k) continue;
        int ja = eq_find(a, l);
        if (ja < 0 || a->t->sizes[ja] == 1) {
            dropb[l] = true;
            if (ja >= 0) dropa[l] = true;
        } else {
            con[l] = true;
        }
    }
    if (!eq_sum_out(s, a, dropa, false) || !eq_sum_out(s, &b, dropb, false)) return false;
    int nsum = 0;
    for (int l = 0; l < EQ_MAXL; l++) nsum += con[l];
    if (nsum == 0) {
        /* a broadcast mul whose labels are the output's, in its order, then
         * the others (a's, then b's): the last step yields the output's layout
         * in a tensor of its own, as PyTorch's (which permutes first) */
        int rl[EM_MAX_DIMS], nr = 0;
        for (int i = 0; i < no_out; i++)
            if (eq_find(a, olab[i]) >= 0 || eq_find(&b, olab[i]) >= 0) rl[nr++] = olab[i];
        for (int d = 0; d < a->n; d++)
            if (!in_out[a->lab[d]]) rl[nr++] = a->lab[d];
        for (int d = 0; d < b.n; d++)
            if (!in_out[b.lab[d]] && eq_find(a, b.lab[d]) < 0) rl[nr++] = b.lab[d];
        if (nr > EM_MAX_DIMS) {
            em_set_error(EM_ESHAPE, "einsum: an intermediate would have %d dims, more than %d", nr, EM_MAX_DIMS);
            return false;
        }
        int64_t qa[EM_MAX_DIMS], qb[EM_MAX_DIMS], sa[EM_MAX_DIMS], sb[EM_MAX_DIMS];
        int nqa = 0, nqb = 0;
        for (int i = 0; i < nr; i++) {
            int ja = eq_find(a, rl[i]), jb = eq_find(&b, rl[i]);
            if (ja >= 0) qa[nqa++] = ja;
            if (jb >= 0) qb[nqb++] = jb;
            sa[i] = ja >= 0 ? a->t->sizes[ja] : 1;
            sb[i] = jb >= 0 ? b.t->sizes[jb] : 1;
            out->lab[i] = rl[i];
        }
        out->n = nr;
        em_tensor *x = ls_keep(s, em_permute(a->t, il(qa, nqa)));
        em_tensor *xr = x ? ls_keep(s, em_reshape(x, il(sa, nr))) : NULL;
        em_tensor *y = xr ? ls_keep(s, em_permute(b.t, il(qb, nqb))) : NULL;
        em_tensor *yr = y ? ls_keep(s, em_reshape(y, il(sb, nr))) : NULL;
        out->t = yr ? ls_keep(s, em_mul(xr, yr)) : NULL;
        return out->t != NULL;
    }
    /* broadcast size-1 dims of shared labels */
    int64_t ea[EM_MAX_DIMS], eb[EM_MAX_DIMS];
    bool xa = false, xb = false;
    for (int d = 0; d < a->n; d++) ea[d] = a->t->sizes[d];
    for (int d = 0; d < b.n; d++) eb[d] = b.t->sizes[d];
    for (int d = 0; d < a->n; d++) {
        int j = eq_find(&b, a->lab[d]);
        if (j < 0 || ea[d] == eb[j]) continue;
        if (ea[d] == 1) { ea[d] = eb[j]; xa = true; }
        else if (eb[j] == 1) { eb[j] = ea[d]; xb = true; }
    }
    int64_t pa[EM_MAX_DIMS], pb[EM_MAX_DIMS], osz[EM_MAX_DIMS];
    int npa = 0, npb = 0, no = 0, nbatch = 0, nleft = 0;
    int64_t B = 1, L = 1, S = 1, R = 1;
    for (int d = 0; d < a->n; d++) /* batch: in both, not contracted */
        if (!con[a->lab[d]] && eq_find(&b, a->lab[d]) >= 0) {
            pa[npa++] = d; pb[npb++] = eq_find(&b, a->lab[d]);
            out->lab[no] = a->lab[d]; osz[no++] = ea[d]; B *= ea[d]; nbatch++;
        }
    for (int d = 0; d < a->n; d++) /* left only */
        if (eq_find(&b, a->lab[d]) < 0) {
            pa[npa++] = d; out->lab[no] = a->lab[d]; osz[no++] = ea[d]; L *= ea[d]; nleft++;
        }
    for (int d = 0; d < a->n; d++) /* contracted */
        if (con[a->lab[d]]) { pa[npa++] = d; pb[npb++] = eq_find(&b, a->lab[d]); S *= ea[d]; }
    for (int d = 0; d < b.n; d++) /* right only */
        if (eq_find(a, b.lab[d]) < 0) { pb[npb++] = d; out->lab[no] = b.lab[d]; osz[no++] = eb[d]; R *= eb[d]; }
    out->n = no;
    /* bmm: the size-1 dims of shared labels expanded, then {B, L, S} x {B, S, R} */
    em_tensor *ax = xa ? ls_keep(s, em_expand(a->t, il(ea, a->n))) : a->t;
    em_tensor *bx = ax && xb ? ls_keep(s, em_expand(b.t, il(eb, b.n))) : b.t;
    if (!ax || !bx) return false;
    em_tensor *x = ls_keep(s, em_permute(ax, il(pa, npa)));
    em_tensor *y = x ? ls_keep(s, em_permute(bx, il(pb, npb))) : NULL;
    int64_t s3a[3] = { B, L, S }, s3b[3] = { B, S, R };
    em_tensor *xr = y ? ls_keep(s, em_reshape(x, il(s3a, 3))) : NULL;
    em_tensor *yr = xr ? ls_keep(s, em_reshape(y, il(s3b, 3))) : NULL;
    em_tensor *p = yr ? ls_keep(s, em_bmm(xr, yr)) : NULL;
    out->t = p ? ls_keep(s, em_reshape(p, il(osz, no))) : NULL;
    return out->t != NULL;
}

em_tensor *em_comp_einsum(em_keyset ks, const char *equation, em_tensorlist tensors) {
    const char *eq = equation;
    int nt = tensors.n;
    if (nt < 1) {
        em_set_error(EM_EVALUE, "einsum: expected at least one operand in tensors");
        return NULL;
    }
    /* parse the inputs */
    int raw[EM_MAX_DIMS + 1], nraw;
    int lab[64][EM_MAX_DIMS];
    bool has_ell;
    int ell_n[64], max_ell = 0, count[EQ_MAXL] = { 0 };
    int64_t ell_size[EM_MAX_DIMS];
    if (nt > 64) {
        em_set_error(EM_EVALUE, "einsum: at most 64 operands, got %d", nt);
        return NULL;
    }
    const char *p = eq;
    for (int k = 0; k < nt; k++) {
        if (k > 0) {
            if (*p != ',') {
                em_set_error(EM_EVALUE, "einsum: the equation \"%s\" has subscripts for %d operand%s, but %d were "
                             "given", eq, k, k == 1 ? "" : "s", nt);
                return NULL;
            }
            p++;
        }
        char what[32];
        snprintf(what, sizeof what, "operand %d", k + 1);
        if ((nraw = eq_parse_term(&p, eq, raw, EM_MAX_DIMS + 1, &has_ell, what)) < 0) return NULL;
        em_tensor *t = tensors.data[k];
        int nl = nraw - (has_ell ? 1 : 0);
        if (has_ell ? nl > t->ndim : nl != t->ndim) {
            em_set_error(EM_ESHAPE, "einsum: %d subscripts for operand %d, which has %d dims%s", nl, k + 1, t->ndim,
                         has_ell ? "" : " (and no ellipsis)");
            return NULL;
        }
        ell_n[k] = t->ndim - nl;
        if (ell_n[k] > max_ell) max_ell = ell_n[k];
        int d = 0;
        for (int i = 0; i < nraw; i++) {
            if (raw[i] != EQ_ELL) { lab[k][d++] = raw[i]; continue; }
            for (int e = 0; e < ell_n[k]; e++) lab[k][d++] = -1 - e; /* fixed below once max_ell is known */
        }
    }
    if (*p == ',') {
        em_set_error(EM_EVALUE, "einsum: the equation \"%s\" has subscripts for more operands than the %d given", eq, nt);
        return NULL;
    }
    /* ellipsis dims: right-aligned ids 52.. ; their sizes broadcast */
    for (int e = 0; e < max_ell; e++) ell_size[e] = 1;
    for (int k = 0; k < nt; k++)
        for (int d = 0; d < tensors.data[k]->ndim; d++) {
            if (lab[k][d] >= 0) { count[lab[k][d]]++; continue; }
            int e = max_ell - ell_n[k] + (-1 - lab[k][d]);
            lab[k][d] = EQ_LETTERS + e;
            int64_t sz = tensors.data[k]->sizes[d];
            if (sz != 1) {
                if (ell_size[e] != 1 && ell_size[e] != sz) {
                    em_set_error(EM_ESHAPE, "einsum: the dims under '...' do not broadcast (%lld and %lld)",
                                 (long long)ell_size[e], (long long)sz);
                    return NULL;
                }
                ell_size[e] = sz;
            }
            count[lab[k][d]]++;
        }
    /* a letter's sizes must agree across the operands, or be 1 (broadcast) */
    int64_t lsize[EQ_LETTERS];
    for (int l = 0; l < EQ_LETTERS; l++) lsize[l] = 1;
    for (int k = 0; k < nt; k++)
        for (int d = 0; d < tensors.data[k]->ndim; d++) {
            int l = lab[k][d];
            int64_t sz = tensors.data[k]->sizes[d];
            if (l >= EQ_LETTERS || sz == 1) continue;
            if (lsize[l] != 1 && lsize[l] != sz) {
                char c[2];
                eq_char(l, c);
                em_set_error(EM_ESHAPE, "einsum: subscript %s has size %lld for operand %d, which does not "
                             "broadcast with size %lld seen before", c, (long long)sz, k + 1, (long long)lsize[l]);
                return NULL;
            }
            lsize[l] = sz;
        }
    /* the output */
    int olab[EQ_MAXL], no = 0;
    bool in_out[EQ_MAXL] = { false };
    if (*p == '-') {
        if (p[1] != '>') {
            em_set_error(EM_EVALUE, "einsum: expected \"->\" at position %d of \"%s\"", (int)(p - eq) + 1, eq);
            return NULL;
        }
        p += 2;
        if ((nraw = eq_parse_term(&p, eq, raw, EM_MAX_DIMS + 1, &has_ell, "the output")) < 0) return NULL;
        if (*p) {
            em_set_error(EM_EVALUE, "einsum: unexpected '%c' at position %d of \"%s\"", *p, (int)(p - eq) + 1, eq);
            return NULL;
        }
        for (int i = 0; i < nraw; i++) {
            if (raw[i] == EQ_ELL) {
                for (int e = 0; e < max_ell; e++) { olab[no++] = EQ_LETTERS + e; in_out[EQ_LETTERS + e] = true; }
                continue;
            }
            char c[2];
            eq_char(raw[i], c);
            if (!count[raw[i]]) {
                em_set_error(EM_EVALUE, "einsum: output subscript %s does not appear in any operand", c);
                return NULL;
            }
            if (in_out[raw[i]]) {
                em_set_error(EM_EVALUE, "einsum: output subscript %s appears more than once", c);
                return NULL;
            }
            in_out[raw[i]] = true;
            olab[no++] = raw[i];
        }
    } else { /* implicit: the ellipsis dims, then the labels used once, sorted */
        for (int e = 0; e < max_ell; e++) { olab[no++] = EQ_LETTERS + e; in_out[EQ_LETTERS + e] = true; }
        for (int l = 0; l < EQ_LETTERS; l++)
            if (count[l] == 1) { olab[no++] = l; in_out[l] = true; }
    }
    if (no > EM_MAX_DIMS) {
        em_set_error(EM_ESHAPE, "einsum: the output would have %d dims, more than %d", no, EM_MAX_DIMS);
        return NULL;
    }
    /* diagonals; each label's last operand longer than 1 */
    ls_scope s = { .n = 0 };
    eq_term op[64];
    int last[EQ_MAXL] = { 0 };
    for (int k = 0; k < nt; k++) {
        op[k] = eq_diagonal(&s, tensors.data[k], lab[k], k);
        if (!op[k].t) return ls_fail(&s);
        for (int d = 0; d < op[k].n; d++) {
            int64_t sz = op[k].t->sizes[d];
            if (sz != 1) last[op[k].lab[d]] = k;
        }
    }
    /* contract left to right (Note [einsum lowering]) */
    eq_term acc = op[0];
    if (nt == 1) { /* the output's labels first, in its order (PyTorch permutes first) */
        int64_t perm[EM_MAX_DIMS];
        int lab1[EM_MAX_DIMS], n1 = 0;
        for (int i = 0; i < no; i++) { perm[n1] = eq_find(&acc, olab[i]); lab1[n1++] = olab[i]; }
        for (int d = 0; d < acc.n; d++)
            if (!in_out[acc.lab[d]]) { perm[n1] = d; lab1[n1++] = acc.lab[d]; }
        if (!(acc.t = ls_keep(&s, em_permute(acc.t, il(perm, n1))))) return ls_fail(&s);
        memcpy(acc.lab, lab1, sizeof(int) * (size_t)n1);
    }
    bool drop[EQ_MAXL];
    for (int l = 0; l < EQ_MAXL; l++) drop[l] = !in_out[l] && last[l] == 0;
    if (!eq_sum_out(&s, &acc, drop, nt == 1)) return ls_fail(&s);
    for (int k = 1; k < nt; k++) {
        eq_term c;
        if (!eq_contract(&s, &acc, &op[k], k, last, in_out, olab, no, &c)) return ls_fail(&s);
        acc = c;
    }
    /* every output label is in acc: permute into the output's order */
    int64_t perm[EM_MAX_DIMS];
    bool ident = true;
    for (int i = 0; i < no; i++) {
        perm[i] = eq_find(&acc, olab[i]);
        if (perm[i] < 0) {
            em_set_error(EM_EINTERNAL, "einsum: lost an output label");
            return ls_fail(&s);
        }
        ident &= perm[i] == i;
    }
    bool input = false; /* never an operand itself: at least a view of it, as in PyTorch */
    for (int k = 0; k < nt; k++) input |= acc.t == tensors.data[k];
    em_tensor *r = ident && !input ? acc.t : ls_keep(&s, em_permute(acc.t, il(perm, no)));
    return r ? ls_finish(&s, r) : ls_fail(&s);
}

/* ---- norms ---- */

/* Refuses a non-floating input (op names the linalg op). */
static bool want_floating(const em_tensor *t, const char *op) {
    if (em_dtype_is_floating(t->dtype)) return true;
    em_set_error(EM_ETYPE, "%s: expected a floating input, got %s", op, em_dtype_name(t->dtype));
    return false;
}

/* self converted to dtype when given: PyTorch's dtype= computes in it and
 * refuses an integer dtype or a narrowing one. Returns self or a temporary
 * in s; NULL with the error set. */
static em_tensor *norm_input(ls_scope *s, em_tensor *self, em_dtype dtype, const char *op) {
    if (!want_floating(self, op)) return NULL;
    if (dtype == EM_DTYPE_NONE || dtype == self->dtype) return self;
    if (!em_dtype_is_floating(dtype)) {
        em_set_error(EM_ETYPE, "%s: dtype must be floating, got %s", op, em_dtype_name(dtype));
        return NULL;
    }
    if (em_promote_types(self->dtype, dtype) != dtype) {
        em_set_error(EM_ETYPE, "%s: the input's dtype %s cannot be converted to dtype %s without narrowing", op,
                     em_dtype_name(self->dtype), em_dtype_name(dtype));
        return NULL;
    }
    return ls_keep(s, em_to(self, dtype));
}

/* The vector norm after norm_input: x's ord-norm over dim (n <= 0: all). */
static em_tensor *vector_norm(ls_scope *s, em_tensor *x, em_scalar ord, em_intlist dim, bool keepdim,
                              const char *op) {
    double o = em_scalar_to_double(ord);
    if (o < 0 || isinf(o)) { /* no identity: an empty reduction is an error, as in PyTorch */
        bool empty = dim.n <= 0 && x->numel == 0;
        for (int i = 0; i < dim.n && !empty; i++) {
            int d = em_wrap_dim(dim.data[i], x->ndim, op);
            if (d < 0) return NULL;
            empty = x->ndim > 0 && x->sizes[d] == 0;
        }
        if (empty) {
            em_set_error(EM_EVALUE, "%s: the %g norm of an empty reduction is not defined", op, o);
            return NULL;
        }
    }
    em_intlist d = dim.n <= 0 ? (em_intlist){ NULL, -1 } : dim;
    return ls_keep(s, em_norm(x, ord, d, keepdim, EM_DTYPE_NONE));
}

em_tensor *em_comp_linalg_vector_norm(em_keyset ks, em_tensor *self, em_scalar ord, em_intlist dim, bool keepdim,
                                      em_dtype dtype) {
    ls_scope s = { .n = 0 };
    em_tensor *x = norm_input(&s, self, dtype, "linalg.vector_norm");
    em_tensor *r = x ? vector_norm(&s, x, ord, dim, keepdim, "linalg.vector_norm") : NULL;
    return r ? ls_finish(&s, r) : ls_fail(&s);
}

/* Checks a matrix norm's dims: self has >= 2 dims, dim names two distinct
 * ones; sets d0, d1 (0-based). */
static bool matrix_dims(const em_tensor *self, em_intlist dim, int *d0, int *d1, const char *op) {
    if (self->ndim < 2) {
        em_set_error(EM_ESHAPE, "%s: self must have at least 2 dims, got %d", op, self->ndim);
        return false;
    }
    if (dim.n != 2) {
        em_set_error(EM_EVALUE, "%s: dim must name 2 dims, got %d", op, dim.n < 0 ? 0 : dim.n);
        return false;
    }
    if ((*d0 = em_wrap_dim(dim.data[0], self->ndim, op)) < 0 || (*d1 = em_wrap_dim(dim.data[1], self->ndim, op)) < 0)
        return false;
    if (*d0 == *d1) {
        em_set_error(EM_EVALUE, "%s: dim must name 2 different dims, got dim %d twice", op, *d0 + 1);
        return false;
    }
    return true;
}

/* ord 2 / -2 / "nuc" (kind 2, -2, 0): the largest / smallest / sum of the
 * singular values (svdvals, with its gradient) of the matrices in dims d0,
 * d1, moved last as PyTorch does; keepdim puts both dims back as 1s. */
static em_tensor *svd_norm(ls_scope *s, em_tensor *x, int kind, int d0, int d1, bool keepdim) {
    int64_t perm[EM_MAX_DIMS];
    int np = 0;
    for (int i = 0; i < x->ndim; i++)
        if (i != d0 && i != d1) perm[np++] = i;
    perm[np++] = d0;
    perm[np++] = d1;
    em_tensor *m = ls_keep(s, em_permute(x, il(perm, np)));
    em_tensor *sv = m ? ls_keep(s, em_svdvals(m)) : NULL;
    int64_t last = -1;
    em_tensor *r = !sv ? NULL
                   : kind == 2  ? ls_keep(s, em_amax(sv, il(&last, 1), false))
                   : kind == -2 ? ls_keep(s, em_amin(sv, il(&last, 1), false))
                                : ls_keep(s, em_sum(sv, il(&last, 1), false, EM_DTYPE_NONE));
    if (r && keepdim) {
        r = ls_keep(s, em_unsqueeze(r, d0 < d1 ? d0 : d1));
        r = r ? ls_keep(s, em_unsqueeze(r, d0 < d1 ? d1 : d0)) : NULL;
    }
    return r;
}

/* ord +-1: max/min over d1 of the abs-sums over d0; ord +-inf: over d0 of
 * the sums over d1; ord +-2: singular values (svd_norm). */
static em_tensor *matrix_norm(ls_scope *s, em_tensor *x, double o, int d0, int d1, bool keepdim, const char *op) {
    if (o == 2 || o == -2) return svd_norm(s, x, (int)o, d0, d1, keepdim);
    if (!(o == 1 || o == -1 || isinf(o))) {
        em_set_error(EM_EVALUE, "%s: ord %g is not supported (1, -1, 2, -2, inf, -inf, \"fro\", \"nuc\")", op, o);
        return NULL;
    }
    /* PyTorch's: the abs-sums over sd, then their max/min over md, both with
     * keepdim (so the result is a tensor of its own, not a view) */
    int64_t sd = isinf(o) ? d1 : d0, md = isinf(o) ? d0 : d1;
    if (x->sizes[md] == 0) {
        em_set_error(EM_EVALUE, "%s: the %g norm needs a non-empty dim %d", op, o, (int)md + 1);
        return NULL;
    }
    em_tensor *a = ls_keep(s, em_abs(x));
    em_tensor *sum = a ? ls_keep(s, em_sum(a, il(&sd, 1), keepdim, EM_DTYPE_NONE)) : NULL;
    if (!keepdim && sd < md) md--;
    return sum ? ls_keep(s, o > 0 ? em_amax(sum, il(&md, 1), keepdim) : em_amin(sum, il(&md, 1), keepdim)) : NULL;
}

em_tensor *em_comp_linalg_matrix_norm(em_keyset ks, em_tensor *self, em_scalar ord, em_intlist dim, bool keepdim,
                                      em_dtype dtype) {
    const char *op = "linalg.matrix_norm";
    int d0, d1;
    if (!matrix_dims(self, dim, &d0, &d1, op)) return NULL;
    ls_scope s = { .n = 0 };
    em_tensor *x = norm_input(&s, self, dtype, op);
    em_tensor *r = x ? matrix_norm(&s, x, em_scalar_to_double(ord), d0, d1, keepdim, op) : NULL;
    return r ? ls_finish(&s, r) : ls_fail(&s);
}

/* "fro": the 2-norm of the entries over the two dims. */
static em_tensor *str_norm(ls_scope *s, em_tensor *self, const char *ord, em_intlist dim, bool keepdim,
                           em_dtype dtype, const char *op) {
    int d0, d1;
    if (!matrix_dims(self, dim, &d0, &d1, op)) return NULL;
    em_tensor *x = norm_input(s, self, dtype, op);
    if (x && strcmp(ord, "nuc") == 0) return svd_norm(s, x, 0, d0, d1, keepdim);
    int64_t dd[2] = { d0, d1 };
    return x ? vector_norm(s, x, em_scalar_int(2), il(dd, 2), keepdim, op) : NULL;
}

em_tensor *em_comp_linalg_matrix_norm_str_ord(em_keyset ks, em_tensor *self, const char *ord, em_intlist dim,
                                              bool keepdim, em_dtype dtype) {
    ls_scope s = { .n = 0 };
    em_tensor *r = str_norm(&s, self, ord, dim, keepdim, dtype, "linalg.matrix_norm");
    return r ? ls_finish(&s, r) : ls_fail(&s);
}

/* torch.linalg.norm's choice: dim of 1 -> vector norm, of 2 -> matrix norm;
 * no dim: with ord, self must be 1-d (vector) or 2-d (matrix); without,
 * the 2-norm of all entries. */
em_tensor *em_comp_linalg_norm(em_keyset ks, em_tensor *self, const em_scalar *ord, em_intlist dim, bool keepdim,
                               em_dtype dtype) {
    const char *op = "linalg.norm";
    ls_scope s = { .n = 0 };
    em_tensor *x = norm_input(&s, self, dtype, op);
    em_tensor *r = NULL;
    if (!x) return ls_fail(&s);
    if (dim.n > 2 || dim.n == 0) {
        em_set_error(EM_EVALUE, "%s: dim must name 1 or 2 dims, got %d", op, dim.n);
    } else if (dim.n < 0 && !ord) {
        r = vector_norm(&s, x, em_scalar_int(2), (em_intlist){ NULL, -1 }, keepdim, op);
    } else if (dim.n < 0 && x->ndim != 1 && x->ndim != 2) {
        em_set_error(EM_ESHAPE, "%s: with ord and no dim, self must be 1-d or 2-d, got %d-d", op, x->ndim);
    } else if (dim.n == 1 || (dim.n < 0 && x->ndim == 1)) {
        r = vector_norm(&s, x, ord ? *ord : em_scalar_int(2), dim, keepdim, op);
    } else {
        int64_t dd[2] = { -2, -1 };
        int d0, d1;
        if (matrix_dims(x, dim.n == 2 ? dim : il(dd, 2), &d0, &d1, op)) {
            if (ord) r = matrix_norm(&s, x, em_scalar_to_double(*ord), d0, d1, keepdim, op);
            else r = str_norm(&s, x, "fro", il((int64_t[]){ d0, d1 }, 2), keepdim, EM_DTYPE_NONE, op);
        }
    }
    return r ? ls_finish(&s, r) : ls_fail(&s);
}

em_tensor *em_comp_linalg_norm_ord_str(em_keyset ks, em_tensor *self, const char *ord, em_intlist dim, bool keepdim,
                                       em_dtype dtype) {
    const char *op = "linalg.norm";
    int64_t dd[2] = { -2, -1 };
    if (dim.n < 0 && self->ndim != 2) {
        em_set_error(EM_ESHAPE, "%s: with ord \"%s\" and no dim, self must be 2-d, got %d-d", op, ord, self->ndim);
        return NULL;
    }
    ls_scope s = { .n = 0 };
    em_tensor *r = str_norm(&s, self, ord, dim.n < 0 ? il(dd, 2) : dim, keepdim, dtype, op);
    return r ? ls_finish(&s, r) : ls_fail(&s);
}

/* ---- matrix_power ---- */

/* PyTorch's: n = 0 is the identity written into a clone of self (so it has
 * self's history, with a zero gradient), n = 1 a clone, n = 3 (a @ a) @ a,
 * other n repeated squaring with the same association as PyTorch (so the
 * same rounding, and inf * 0 in the same places). */
em_tensor *em_comp_matrix_power(em_keyset ks, em_tensor *self, int64_t n) {
    const char *op = "matrix_power";
    char b1[EM_SHAPE_STR_MAX];
    if (self->ndim < 2) {
        em_set_error(EM_ESHAPE, "%s: self must have at least 2 dims, got %d", op, self->ndim);
        return NULL;
    }
    int64_t m = self->sizes[self->ndim - 1];
    if (self->sizes[self->ndim - 2] != m) {
        em_set_error(EM_ESHAPE, "%s: self must hold square matrices in its last 2 dims, got %s", op, shp(self, b1));
        return NULL;
    }
    ls_scope s = { .n = 0 };
    if (n < 0) { /* PyTorch: the power -n of the inverse */
        self = ls_keep(&s, em_inverse(self));
        if (!self) return ls_fail(&s);
        n = -n;
    }
    if (n == 0) {
        em_tensor *ar = ls_keep(&s, em_arange(em_scalar_int(0), &(em_scalar){ .kind = EM_SCALAR_INT, .v.i = m },
                                              em_scalar_int(1), EM_INT64, self->device));
        em_tensor *col = ar ? ls_keep(&s, em_unsqueeze(ar, 1)) : NULL;
        em_tensor *eye = col ? ls_keep(&s, em_eq(col, ar)) : NULL;
        em_tensor *c = eye ? ls_keep(&s, em_clone(self)) : NULL;
        em_tensor *r = c ? ls_keep(&s, em_copy_(c, eye)) : NULL;
        return r ? ls_finish(&s, r) : ls_fail(&s);
    }
    if (n == 1) {
        em_tensor *r = ls_keep(&s, em_clone(self));
        return r ? ls_finish(&s, r) : ls_fail(&s);
    }
    if (n == 3) { /* PyTorch: (a @ a) @ a, the order that decides where inf * 0 lands */
        em_tensor *a2 = ls_keep(&s, em_matmul(self, self));
        em_tensor *r = a2 ? ls_keep(&s, em_matmul(a2, self)) : NULL;
        return r ? ls_finish(&s, r) : ls_fail(&s);
    }
    em_tensor *result = NULL, *z = self;
    while (n > 0 && !s.failed) {
        if (n & 1) result = result ? ls_keep(&s, em_matmul(result, z)) : z;
        n >>= 1;
        if (n) z = ls_keep(&s, em_matmul(z, z));
    }
    return result && !s.failed ? ls_finish(&s, result) : ls_fail(&s);
}
