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
