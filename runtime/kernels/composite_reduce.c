/* composite_reduce.c -- composite ops of the reduce family (nansum,
 * nanmean, count_nonzero, diff): written with the public ops, so autograd,
 * double backward and every backend come from their parts (Note [Composite
 * ops] in codegen/codegen.h). The key set argument is unused.
 */
#include "autograd/em_autograd.h"
#include "em_ops.h"
#include "em_kernels_decl.h"

/* Releases the n tensors of t (NULLs allowed). */
static void release_all(int n, em_tensor **t) {
    for (int i = 0; i < n; i++) em_tensor_release(t[i]);
}

/* self with NaN replaced by 0 (self itself, retained, when not floating). */
static em_tensor *nan_to_zero(em_tensor *self) {
    if (!em_dtype_is_floating(self->dtype)) return em_tensor_retain(self);
    em_tensor *isnan = em_ne(self, self);
    em_tensor *zero = isnan ? em_tensor_wrapped_scalar(em_scalar_float(0)) : NULL;
    em_tensor *r = zero ? em_where(isnan, zero, self) : NULL;
    em_tensor_release(isnan);
    em_tensor_release(zero);
    return r;
}

em_tensor *em_comp_nansum(em_keyset ks, em_tensor *self, em_intlist dim, bool keepdim, em_dtype dtype) {
    (void)ks;
    em_tensor *x = nan_to_zero(self);
    em_tensor *r = x ? em_sum(x, dim, keepdim, dtype) : NULL;
    em_tensor_release(x);
    return r;
}

/* PyTorch's nanmean: nansum / the count of elements that are not NaN. */
em_tensor *em_comp_nanmean(em_keyset ks, em_tensor *self, em_intlist dim, bool keepdim, em_dtype dtype) {
    (void)ks;
    if (!em_dtype_is_floating(self->dtype)) {
        em_set_error(EM_ETYPE, "nanmean: self must have a floating dtype, got %s", em_dtype_name(self->dtype));
        return NULL;
    }
    enum { S, NN, C, K };
    em_tensor *t[K] = { NULL };
    em_tensor *r = NULL;
    if ((t[S] = em_comp_nansum(ks, self, dim, keepdim, dtype)) && (t[NN] = em_eq(self, self)) &&
        (t[C] = em_sum(t[NN], dim, keepdim, EM_DTYPE_NONE)))
        r = em_div(t[S], t[C]);
    release_all(K, t);
    return r;
}

em_tensor *em_comp_count_nonzero(em_keyset ks, em_tensor *self, em_intlist dim) {
    (void)ks;
    em_tensor *zero = em_tensor_wrapped_scalar(em_scalar_int(0));
    em_tensor *nz = zero ? em_ne(self, zero) : NULL;
    em_tensor *r = nz ? em_sum(nz, dim, false, EM_DTYPE_NONE) : NULL;
    em_tensor_release(zero);
    em_tensor_release(nz);
    return r;
}

/* PyTorch 1.13's diff: n == 0 copies self (prepend and append ignored);
 * otherwise prepend and append are joined to self along dim, then n rounds
 * of x[1:] - x[:-1] (x[1:] != x[:-1] for bool) run; n larger than the dim
 * leaves it empty; a negative n runs none (the join, or self itself). */
em_tensor *em_comp_diff(em_keyset ks, em_tensor *self, int64_t n, int64_t dim, em_tensor *prepend,
                        em_tensor *append) {
    (void)ks;
    if (self->ndim < 1) {
        em_set_error(EM_ESHAPE, "diff: self must have at least one dim, got a 0-dim tensor");
        return NULL;
    }
    const em_tensor *extra[2] = { prepend, append };
    const char *names[2] = { "prepend", "append" };
    for (int k = 0; k < 2; k++)
        if (extra[k] && extra[k]->ndim != self->ndim) {
            em_set_error(EM_ESHAPE, "diff: %s must have self's number of dims (%d), got %d", names[k],
                         (int)self->ndim, (int)extra[k]->ndim);
            return NULL;
        }
    int d = em_wrap_dim(dim, self->ndim, "diff");
    if (d < 0) return NULL;
    if (n == 0) return em_clone(self);
    if (n < 0 && !prepend && !append) return em_tensor_retain(self);
    em_tensor *x;
    if (prepend || append) {
        em_tensor *parts[3];
        int np = 0;
        if (prepend) parts[np++] = prepend;
        parts[np++] = self;
        if (append) parts[np++] = append;
        x = em_cat((em_tensorlist){ parts, np }, d);
    } else {
        x = em_tensor_retain(self);
    }
    if (!x) return NULL;
    if (n > x->sizes[d]) n = x->sizes[d];
    for (int64_t i = 0; i < n && x; i++) {
        int64_t len = x->sizes[d] - 1;
        em_tensor *hi = em_narrow(x, d, 1, len);
        em_tensor *lo = hi ? em_narrow(x, d, 0, len) : NULL;
        em_tensor *r = NULL;
        if (lo) r = x->dtype == EM_BOOL ? em_ne(hi, lo) : em_sub(hi, lo, em_scalar_int(1));
        em_tensor_release(hi);
        em_tensor_release(lo);
        em_tensor_release(x);
        x = r;
    }
    return x;
}
