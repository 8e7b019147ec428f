/* composite_index.c -- composite ops of the index family (schema/ops/index.yaml;
 * Note [Composite ops] in codegen/codegen.h): written with the public ops
 * only, so autograd records their parts. */
#include "autograd/em_autograd.h"
#include "em_ops.h"
#include "em_kernels_decl.h"

/* take_along_dim(self, indices, dim?): without dim, gather over the
 * flattened self and indices; with dim, self and indices broadcast in
 * every dim but dim (as PyTorch's), then gather. Indices are 1-based. */
em_tensor *em_comp_take_along_dim(em_keyset ks, em_tensor *self, em_tensor *indices, const int64_t *dim) {
    (void)ks;
    const char *op = "take_along_dim";
    if (indices->dtype != EM_INT64) {
        em_set_error(EM_ETYPE, "%s: indices must be an int64 tensor, got %s", op, em_dtype_name(indices->dtype));
        return NULL;
    }
    if (!dim) {
        int64_t minus1 = -1;
        em_tensor *s = em_reshape(self, (em_intlist){ &minus1, 1 });
        em_tensor *i = s ? em_reshape(indices, (em_intlist){ &minus1, 1 }) : NULL;
        em_tensor *r = i ? em_gather(s, 0, i) : NULL;
        em_tensor_release(s);
        em_tensor_release(i);
        return r;
    }
    if (self->ndim != indices->ndim) {
        em_set_error(EM_ESHAPE, "%s: self and indices must have the same number of dims, got %d and %d", op,
                     self->ndim, indices->ndim);
        return NULL;
    }
    int d = em_wrap_dim(*dim, self->ndim, op);
    if (d < 0) return NULL;
    if (self->ndim == 0) return em_gather(self, d, indices);
    int64_t a[EM_MAX_DIMS], shape[EM_MAX_DIMS];
    for (int k = 0; k < self->ndim; k++) a[k] = self->sizes[k];
    a[d] = indices->sizes[d];
    int n = em_broadcast_shapes(self->ndim, a, indices->ndim, indices->sizes, shape, op);
    if (n < 0) return NULL;
    em_tensor *ib = em_expand(indices, (em_intlist){ shape, n });
    shape[d] = self->sizes[d];
    em_tensor *sb = ib ? em_expand(self, (em_intlist){ shape, n }) : NULL;
    em_tensor *r = sb ? em_gather(sb, d, ib) : NULL;
    em_tensor_release(ib);
    em_tensor_release(sb);
    return r;
}
