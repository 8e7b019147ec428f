/* formulas.c -- helpers called by the backward formulas of
 * schema/derivatives.yaml (see em_formulas.h for the contract). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "autograd/em_formulas.h"
#include "em_ops.h"

#define NOLIST ((em_intlist){ NULL, -1 })

/* Wrapped numbers are made directly (no dispatch): they never carry
 * history, and formulas make one per literal on every backward. */
em_tensor *em_ag_scalar(double v) { return em_tensor_wrapped_scalar(em_scalar_float(v)); }

em_tensor *em_ag_scalar_s(em_scalar s) { return em_tensor_wrapped_scalar(s); }

static em_intlist meta_sizes(const em_input_meta *m) { return (em_intlist){ m->sizes, m->ndim }; }

em_tensor *em_ag_fn_zeros_like(em_tensor *t) {
    return em_zeros((em_intlist){ t->sizes, t->ndim }, t->dtype, t->device);
}

/* to_device's gradient: grad back on the input's device. */
em_tensor *em_ag_fn_to_device_backward(em_tensor *grad, const em_input_meta *self_meta) {
    return em_to_device(grad, self_meta->device);
}

/* grad has the reduced shape; unsqueeze the reduced dims (when keepdim was
 * false) and expand back to the input's shape. */
em_tensor *em_ag_fn_sum_backward(em_tensor *grad, const em_input_meta *self_meta, em_intlist dim, bool keepdim) {
    em_tensor *g = em_tensor_retain(grad);
    if (!keepdim && dim.n > 0 && self_meta->ndim > 0) {
        bool reduced[EM_MAX_DIMS] = { false };
        for (int i = 0; i < dim.n; i++) {
            int d = em_wrap_dim(dim.data[i], self_meta->ndim, "sum_backward");
            if (d < 0) { em_tensor_release(g); return NULL; }
            reduced[d] = true;
        }
        for (int d = 0; d < self_meta->ndim && g; d++) {
            if (!reduced[d]) continue;
            em_tensor *u = em_unsqueeze(g, d);
            em_tensor_release(g);
            g = u;
        }
    } /* a full reduction's 0-dim grad expands directly (strides 0, as in PyTorch) */
    if (!g) return NULL;
    em_tensor *e = em_expand(g, meta_sizes(self_meta));
    em_tensor_release(g);
    return e;
}

em_tensor *em_ag_fn_mean_backward(em_tensor *grad, const em_input_meta *self_meta, em_intlist dim, bool keepdim) {
    int64_t count = 1;
    if (dim.n < 0) {
        for (int d = 0; d < self_meta->ndim; d++) count *= self_meta->sizes[d];
    } else {
        for (int i = 0; i < dim.n; i++) {
            int d = em_wrap_dim(dim.data[i], self_meta->ndim, "mean_backward");
            if (d < 0) return NULL;
            count *= self_meta->ndim ? self_meta->sizes[d] : 1;
        }
    }
    em_tensor *s = em_ag_fn_sum_backward(grad, self_meta, dim, keepdim);
    em_tensor *c = em_ag_scalar((double)count);
    em_tensor *r = s && c ? em_div(s, c) : NULL;
    em_tensor_release(s);
    em_tensor_release(c);
    return r;
}

em_tensor *em_ag_fn_reshape_as(em_tensor *grad, const em_input_meta *self_meta) {
    return em_reshape(grad, meta_sizes(self_meta));
}

/* squeeze's gradient: grad itself when nothing was squeezed, else grad
 * with the size-1 dims put back (a view). */
em_tensor *em_ag_fn_unsqueeze_to(em_tensor *grad, const em_input_meta *self_meta) {
    if (grad->ndim == self_meta->ndim) return em_tensor_retain(grad);
    return em_reshape(grad, meta_sizes(self_meta));
}

em_tensor *em_ag_fn_permute_backward(em_tensor *grad, em_intlist dims) {
    int64_t inv[EM_MAX_DIMS];
    int n = dims.n;
    for (int i = 0; i < n; i++) {
        int d = em_wrap_dim(dims.data[i], n, "permute_backward");
        if (d < 0) return NULL;
        inv[d] = i;
    }
    return em_permute(grad, (em_intlist){ inv, n });
}

/* The gradients of the views that pick part of a tensor are ops of their
 * own (narrow_backward, ...), so a create_graph backward records them. */
em_tensor *em_ag_fn_narrow_grad(em_tensor *grad, const em_input_meta *self_meta, int64_t dim, int64_t start,
                                    int64_t length) {
    return em_narrow_backward(grad, meta_sizes(self_meta), dim, start, length);
}

em_tensor *em_ag_fn_select_grad(em_tensor *grad, const em_input_meta *self_meta, int64_t dim, int64_t index) {
    return em_select_backward(grad, meta_sizes(self_meta), dim, index);
}

em_tensor *em_ag_fn_slice_grad(em_tensor *grad, const em_input_meta *self_meta, int64_t dim, const int64_t *start,
                                   const int64_t *end, int64_t step) {
    return em_slice_backward(grad, meta_sizes(self_meta), dim, start, end, step);
}

/* d(self^e)/dself = e * self^(e - 1), taken as 0 where e == 0 even where
 * self^-1 is infinite (PyTorch's pow_backward). A bool exponent (x ^ true)
 * computes as a number of self's dtype. */
em_tensor *em_ag_fn_pow_backward_self(em_tensor *grad, em_tensor *self, em_tensor *exponent) {
    if (exponent->wrapped_number && em_load_as_double(em_tensor_data(exponent), exponent->dtype) == 0)
        return em_ag_fn_zeros_like(self); /* PyTorch's pow_backward: no graph for x^0 */
    em_tensor *e = exponent->dtype == EM_BOOL ? em_to(exponent, self->dtype) : em_tensor_retain(exponent);
    if (e && e != exponent) e->wrapped_number = exponent->wrapped_number;
    em_tensor *zero = e ? em_ag_scalar(0) : NULL, *one = zero ? em_ag_scalar(1) : NULL;
    em_tensor *isz = one ? em_eq(e, zero) : NULL;
    em_tensor *em1 = isz ? em_sub(e, one, em_scalar_int(1)) : NULL;
    /* a number's e - 1 is a number too: x^0.5's gradient takes x^-0.5 as
     * 1 / sqrt(x), -inf at -0, as PyTorch's Scalar pow does (pow_by_sqrt) */
    if (em1 && e->wrapped_number && em1->ndim == 0 && !em_requires_grad(em1)) em1->wrapped_number = true;
    em_tensor *p = em1 ? em_pow(self, em1) : NULL;
    em_tensor *ep = p ? em_mul(e, p) : NULL;
    em_tensor *g = ep ? em_mul(grad, ep) : NULL;
    em_tensor *r = g ? em_where(isz, zero, g) : NULL;
    em_tensor_release(e); em_tensor_release(zero); em_tensor_release(one); em_tensor_release(isz);
    em_tensor_release(em1); em_tensor_release(p); em_tensor_release(ep); em_tensor_release(g);
    return r;
}

/* d(self^e)/de = self^e * log(self), taken as 0 where self == 0 and e >= 0
 * (PyTorch's limit; a negative e keeps the infinity). */
em_tensor *em_ag_fn_pow_exponent_backward(em_tensor *grad, em_tensor *self, em_tensor *exponent,
                                          em_tensor *result) {
    em_tensor *zero = em_ag_scalar(0);
    em_tensor *lg = zero ? em_log(self) : NULL;
    em_tensor *rl = lg ? em_mul(result, lg) : NULL;
    em_tensor *sz = rl ? em_eq(self, zero) : NULL;
    em_tensor *ep = sz ? em_ge(exponent, zero) : NULL;
    em_tensor *inner = ep ? em_where(ep, zero, rl) : NULL;
    em_tensor *masked = inner ? em_where(sz, inner, rl) : NULL;
    em_tensor *r = masked ? em_mul(grad, masked) : NULL;
    em_tensor_release(zero); em_tensor_release(lg); em_tensor_release(rl); em_tensor_release(sz);
    em_tensor_release(ep); em_tensor_release(inner); em_tensor_release(masked);
    return r;
}

/* ---- matmul: NumPy rules for 1-d operands, batched otherwise ---- */

/* grad_self = grad @ other^T with the 1-d cases made 2-d and undone. */
em_tensor *em_ag_fn_matmul_backward_self(em_tensor *grad, const em_input_meta *self, em_tensor *other) {
    em_tensor *r = NULL;
    if (self->ndim == 1 && other->ndim == 1) {          /* dot: grad is 0-d */
        r = em_mul(grad, other);
    } else if (self->ndim == 1) {                        /* (k) @ (..., k, m) -> (..., m) */
        em_tensor *g = em_unsqueeze(grad, -2);           /* (..., 1, m) */
        em_tensor *ot = g ? em_transpose(other, -1, -2) : NULL;
        em_tensor *p = ot ? em_matmul(g, ot) : NULL;     /* (..., 1, k) */
        em_tensor *s = p ? em_squeeze(p, (int64_t[]){ -2 }) : NULL;
        r = s;
        em_tensor_release(g); em_tensor_release(ot); em_tensor_release(p);
    } else if (other->ndim == 1) {                       /* (..., n, k) @ (k) -> (..., n) */
        em_tensor *g = em_unsqueeze(grad, -1);           /* (..., n, 1) */
        em_tensor *o = g ? em_unsqueeze(other, 0) : NULL;/* (1, k) */
        r = o ? em_matmul(g, o) : NULL;                  /* (..., n, k) */
        em_tensor_release(g); em_tensor_release(o);
    } else if (self->ndim == 2 && other->ndim == 2) { /* in self's layout: Note [mm gradient layout] */
        r = em_ag_fn_mm_mat1_backward(grad, other, self);
    } else {
        em_tensor *ot = em_transpose(other, -1, -2);
        r = ot ? em_matmul(grad, ot) : NULL;
        em_tensor_release(ot);
    }
    return r; /* the engine sums broadcast batch dims (em_ag_reduce_to) */
}

/* grad_other = self^T @ grad with the same 1-d handling. */
em_tensor *em_ag_fn_matmul_backward_other(em_tensor *grad, em_tensor *self, const em_input_meta *other) {
    em_tensor *r = NULL;
    if (self->ndim == 1 && other->ndim == 1) {
        r = em_mul(grad, self);
    } else if (self->ndim == 1) {                        /* grad (..., m): other (..., k, m) */
        em_tensor *s = em_unsqueeze(self, -1);           /* (k, 1) */
        em_tensor *g = s ? em_unsqueeze(grad, -2) : NULL;/* (..., 1, m) */
        r = g ? em_matmul(s, g) : NULL;                  /* (..., k, m) */
        em_tensor_release(s); em_tensor_release(g);
    } else if (other->ndim == 1) {                       /* grad (..., n): other (k) */
        em_tensor *st = em_transpose(self, -1, -2);      /* (..., k, n) */
        em_tensor *g = st ? em_unsqueeze(grad, -1) : NULL;/* (..., n, 1) */
        em_tensor *p = g ? em_matmul(st, g) : NULL;      /* (..., k, 1) */
        em_tensor *s = p ? em_squeeze(p, (int64_t[]){ -1 }) : NULL;
        r = s;
        em_tensor_release(st); em_tensor_release(g); em_tensor_release(p);
    } else if (self->ndim == 2 && other->ndim == 2) { /* in other's layout: Note [mm gradient layout] */
        r = em_ag_fn_mm_mat2_backward(grad, self, other);
    } else {
        em_tensor *st = em_transpose(self, -1, -2);
        r = st ? em_matmul(st, grad) : NULL;
        em_tensor_release(st);
    }
    return r;
}

/* as_strided's gradient for an input of geometry g (the offset defaults to
 * the input's own, as in the forward). */
em_tensor *em_ag_fn_as_strided_grad(em_tensor *grad, const em_geometry *g, em_intlist size, em_intlist stride,
                                    const int64_t *storage_offset) {
    return em_as_strided_backward(grad, (em_intlist){ g->sizes, g->ndim }, (em_intlist){ g->strides, g->ndim },
                                  g->offset, size, stride, storage_offset ? *storage_offset : g->offset);
}

/* ---- reductions: prod, amax/amin, var/std, norm ---- */

/* t (shaped like a reduction's result) with the reduced dims put back as
 * size 1 when keepdim was false, so that it broadcasts against the input.
 * dim.n <= 0 (all dims) needs nothing: the result is 0-dim or all ones. */
static em_tensor *unreduce(em_tensor *t, int ndim, em_intlist dim, bool keepdim) {
    if (keepdim || dim.n <= 0 || ndim == 0) return em_tensor_retain(t);
    bool red[EM_MAX_DIMS] = { false };
    for (int i = 0; i < dim.n; i++) {
        int d = em_wrap_dim(dim.data[i], ndim, "reduction backward");
        if (d < 0) return NULL;
        red[d] = true;
    }
    em_tensor *g = em_tensor_retain(t);
    for (int d = 0; d < ndim && g; d++) {
        if (!red[d]) continue;
        em_tensor *u = em_unsqueeze(g, d);
        em_tensor_release(g);
        g = u;
    }
    return g;
}

/* Releases n tensors (NULL allowed). */
static void release_all(int n, em_tensor **t) {
    for (int i = 0; i < n; i++) em_tensor_release(t[i]);
}

/* Whether t (bool) holds a true element; -1 with the error set. Reads one
 * value through a host copy when t is not on the cpu. */
static int any_true(em_tensor *t) {
    em_tensor *a = em_any(t, NULL, false);
    em_tensor *h = a && a->device.type != EM_CPU ? em_to_device(a, em_cpu_device()) : em_tensor_retain(a);
    int r = h ? *(const bool *)em_tensor_data(h) : -1;
    em_tensor_release(h);
    em_tensor_release(a);
    return r;
}

/* PyTorch's prod_backward: grad * result / self when self has no zero
 * (the same graph and the same inf/nan as PyTorch); otherwise exact at the
 * zeros: with P the product of a slice's nonzero elements and nz its count
 * of zeros, an element gets grad * P / x when nz == 0, grad * P at the
 * single zero when nz == 1, and 0 otherwise. */
em_tensor *em_ag_fn_prod_backward(em_tensor *grad, em_tensor *self, em_tensor *result, const int64_t *dim,
                                  bool keepdim) {
    if (self->ndim == 0) return em_tensor_retain(grad); /* as PyTorch: no history through self */
    em_intlist dl = { dim, dim ? 1 : -1 };
    enum { G, Z, ONE, ZERO, X1, P, NZ, A, E0, E1, B0, B1, V, RS, K };
    em_tensor *t[K] = { NULL };
    em_tensor *r = NULL;
    if (!(t[G] = unreduce(grad, self->ndim, dl, keepdim))) goto out;
    if (!(t[ONE] = em_ag_scalar(1)) || !(t[ZERO] = em_ag_scalar(0))) goto out;
    if (!(t[Z] = em_eq(self, t[ZERO]))) goto out;
    int zeros = any_true(t[Z]);
    if (zeros < 0) goto out;
    if (!zeros) {
        if (!(t[RS] = unreduce(result, self->ndim, dl, keepdim)) || !(t[A] = em_div(t[RS], self))) goto out;
        r = em_mul(t[G], t[A]);
        goto out;
    }
    if (!(t[X1] = em_where(t[Z], t[ONE], self))) goto out;
    if (!(t[P] = em_prod(t[X1], dim, true, EM_DTYPE_NONE))) goto out;
    if (!(t[NZ] = em_sum(t[Z], dl, true, EM_DTYPE_NONE))) goto out;
    if (!(t[A] = em_div(t[P], t[X1]))) goto out;
    if (!(t[E0] = em_eq(t[NZ], t[ZERO])) || !(t[E1] = em_eq(t[NZ], t[ONE]))) goto out;
    if (!(t[B0] = em_where(t[E0], t[A], t[ZERO])) || !(t[B1] = em_where(t[E1], t[P], t[ZERO]))) goto out;
    if (!(t[V] = em_where(t[Z], t[B1], t[B0]))) goto out;
    r = em_mul(t[G], t[V]);
out:
    release_all(K, t);
    return r;
}

/* amax/amin: the gradient split evenly among the elements equal to the
 * result (PyTorch's amax backward). */
em_tensor *em_ag_fn_amax_backward(em_tensor *grad, em_tensor *self, em_tensor *result, em_intlist dim,
                                  bool keepdim) {
    enum { G, R, M, C, GM, K };
    em_tensor *t[K] = { NULL };
    em_tensor *r = NULL;
    if (!(t[G] = unreduce(grad, self->ndim, dim, keepdim)) || !(t[R] = unreduce(result, self->ndim, dim, keepdim)))
        goto out;
    if (!(t[M] = em_eq(self, t[R])) || !(t[C] = em_sum(t[M], dim, true, EM_DTYPE_NONE))) goto out;
    if (!(t[GM] = em_mul(t[G], t[M]))) goto out;
    r = em_div(t[GM], t[C]);
out:
    release_all(K, t);
    return r;
}

/* PyTorch's evenly_distribute_backward: grad / count at the elements equal
 * to the result -- or, when the result is NaN, at the NaNs -- zeros elsewhere. */
em_tensor *em_ag_fn_max_all_backward(em_tensor *grad, em_tensor *self, em_tensor *result) {
    enum { NS, NR, EQ, M, C, G, Z, K };
    em_tensor *t[K] = { NULL };
    em_tensor *r = NULL;
    if (!(t[NS] = em_ne(self, self)) || !(t[NR] = em_ne(result, result)) || !(t[EQ] = em_eq(self, result)) ||
        !(t[M] = em_where(t[NR], t[NS], t[EQ])) || !(t[C] = em_sum(t[M], (em_intlist){ NULL, -1 }, false, EM_DTYPE_NONE)) ||
        !(t[G] = em_div(grad, t[C])) || !(t[Z] = em_ag_scalar(0)))
        goto out;
    r = em_where(t[M], t[G], t[Z]);
out:
    release_all(K, t);
    return r;
}

/* N: the number of elements each output of a reduction over dim folds */
static int64_t reduced_count(const em_tensor *self, em_intlist dim) {
    int64_t n = 1;
    if (dim.n <= 0 || self->ndim == 0) return self->numel;
    for (int i = 0; i < dim.n; i++) {
        int d = em_wrap_dim(dim.data[i], self->ndim, "reduction backward");
        if (d < 0) return -1;
        n *= self->sizes[d];
    }
    return n;
}

/* var: grad * 2 (x - mean) / max(0, N - correction) */
em_tensor *em_ag_fn_var_backward(em_tensor *grad, em_tensor *self, em_intlist dim, int64_t correction,
                                 bool keepdim) {
    int64_t n = reduced_count(self, dim);
    if (n < 0) return NULL;
    double div = (double)n - (double)correction;
    enum { G, MU, D, S, GD, K };
    em_tensor *t[K] = { NULL };
    em_tensor *r = NULL;
    if (!(t[G] = unreduce(grad, self->ndim, dim, keepdim))) goto out;
    if (!(t[MU] = em_mean(self, dim, true, EM_DTYPE_NONE))) goto out;
    if (!(t[D] = em_sub(self, t[MU], em_scalar_int(1)))) goto out;
    if (!(t[S] = em_ag_scalar(2.0 / (div > 0 ? div : 0)))) goto out;
    if (!(t[GD] = em_mul(t[G], t[D]))) goto out;
    r = em_mul(t[GD], t[S]);
out:
    release_all(K, t);
    return r;
}

/* std = sqrt(var): var's gradient of grad / (2 std), 0 where std is 0 */
em_tensor *em_ag_fn_std_backward(em_tensor *grad, em_tensor *self, em_tensor *result, em_intlist dim,
                                 int64_t correction, bool keepdim) {
    enum { TWO, ZERO, R2, Q, Z, G, K };
    em_tensor *t[K] = { NULL };
    em_tensor *r = NULL;
    if (!(t[TWO] = em_ag_scalar(2)) || !(t[ZERO] = em_ag_scalar(0))) goto out;
    if (!(t[R2] = em_mul(result, t[TWO])) || !(t[Q] = em_div(grad, t[R2]))) goto out;
    if (!(t[Z] = em_eq(result, t[ZERO])) || !(t[G] = em_where(t[Z], t[ZERO], t[Q]))) goto out;
    r = em_ag_fn_var_backward(t[G], self, dim, correction, keepdim);
out:
    release_all(K, t);
    return r;
}

/* norm, as PyTorch 1.13's norm_backward: p = 2: x * (grad / norm), 0 where
 * the norm is 0; 1: grad sign(x); inf/-inf: grad sign(x) split evenly among
 * the |x| equal to the norm; 0: zero; p < 1: sign(x) |x|^(p-1) (0 where x
 * is 0) * grad * norm^(1-p); 1 < p < 2: sign(x) |x|^(p-1) and p > 2:
 * x |x|^(p-2), times grad / norm^(p-1) (0 where the norm is 0). */
em_tensor *em_ag_fn_norm_backward(em_tensor *grad, em_tensor *self, em_tensor *result, em_scalar p,
                                  em_intlist dim, bool keepdim) {
    double pv = em_scalar_to_double(p);
    if (pv == 0) return em_ag_fn_zeros_like(self);
    enum { G, R, ZERO, SG, AB, M, C, Q, W, PW, E, Z, SS, K };
    em_tensor *t[K] = { NULL };
    em_tensor *r = NULL;
    if (!(t[G] = unreduce(grad, self->ndim, dim, keepdim)) || !(t[R] = unreduce(result, self->ndim, dim, keepdim)))
        goto out;
    if (!(t[ZERO] = em_ag_scalar(0))) goto out;
    if (pv == 1) {
        if (!(t[SG] = em_sign(self))) goto out;
        r = em_mul(t[G], t[SG]);
    } else if (isinf(pv)) {
        if (!(t[SG] = em_sign(self)) || !(t[AB] = em_abs(self))) goto out;
        if (!(t[M] = em_eq(t[AB], t[R])) || !(t[C] = em_sum(t[M], dim, true, EM_DTYPE_NONE))) goto out;
        /* sign(x) * (grad / count or grad * 0 outside the mask, also for a NaN
         * norm): PyTorch's signed zeros (-0 at a negative x), seen through 1 / g */
        if (!(t[Q] = em_div(t[G], t[C])) || !(t[W] = em_mul(t[G], t[ZERO])) || !(t[E] = em_where(t[M], t[Q], t[W])))
            goto out;
        r = em_mul(t[SG], t[E]);
    } else if (pv < 1) {
        /* SS = sign(x) |x|^(p-1), 0 where x is 0; times grad * norm^(1-p) */
        if (!(t[SG] = em_sign(self)) || !(t[AB] = em_abs(self)) || !(t[E] = em_ag_scalar(pv - 1))) goto out;
        if (!(t[PW] = em_pow(t[AB], t[E])) || !(t[M] = em_mul(t[SG], t[PW]))) goto out;
        if (!(t[Z] = em_eq(self, t[ZERO])) || !(t[SS] = em_where(t[Z], t[ZERO], t[M]))) goto out;
        em_tensor_release(t[E]);
        em_tensor_release(t[PW]);
        t[E] = t[PW] = NULL;
        if (!(t[E] = em_ag_scalar(1 - pv)) || !(t[PW] = em_pow(t[R], t[E]))) goto out;
        if (!(t[W] = em_mul(t[SS], t[G]))) goto out;
        r = em_mul(t[W], t[PW]);
    } else {
        /* SS times Q = grad / norm^(p-1), Q 0 where the norm is 0 */
        if (pv == 2) {
            if (!(t[W] = em_div(t[G], t[R]))) goto out;
            t[SS] = em_tensor_retain(self);
        } else {
            if (!(t[E] = em_ag_scalar(pv - 1)) || !(t[PW] = em_pow(t[R], t[E]))) goto out;
            if (!(t[W] = em_div(t[G], t[PW]))) goto out;
            em_tensor_release(t[E]);
            em_tensor_release(t[PW]);
            t[E] = t[PW] = NULL;
            if (!(t[AB] = em_abs(self))) goto out;
            if (pv < 2) {
                if (!(t[E] = em_ag_scalar(pv - 1)) || !(t[PW] = em_pow(t[AB], t[E])) || !(t[SG] = em_sign(self)))
                    goto out;
                t[SS] = em_mul(t[SG], t[PW]);
            } else {
                if (!(t[E] = em_ag_scalar(pv - 2)) || !(t[PW] = em_pow(t[AB], t[E]))) goto out;
                t[SS] = em_mul(self, t[PW]);
            }
        }
        if (!t[SS]) goto out;
        if (!(t[Z] = em_eq(t[R], t[ZERO])) || !(t[Q] = em_where(t[Z], t[ZERO], t[W]))) goto out;
        r = em_mul(t[SS], t[Q]);
    }
out:
    release_all(K, t);
    return r;
}
