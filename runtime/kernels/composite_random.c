/* composite_random.c -- composite ops of the random family (Note [Composite
 * ops] in codegen/codegen.h): zeros_like ones_like full_like empty_like,
 * each the matching factory with self's shape and device and (unless
 * given) dtype. Their results have no history, like the factories'. */
#include "em_ops.h"
#include "em_kernels_decl.h"

static em_intlist shape_of(const em_tensor *self) { return (em_intlist){ self->sizes, self->ndim }; }
static em_dtype dtype_or(const em_tensor *self, em_dtype dtype)
{
    return dtype == EM_DTYPE_NONE ? self->dtype : dtype;
}

em_tensor *em_comp_zeros_like(em_keyset ks, em_tensor *self, em_dtype dtype)
{
    (void)ks;
    return em_zeros(shape_of(self), dtype_or(self, dtype), self->device);
}

em_tensor *em_comp_ones_like(em_keyset ks, em_tensor *self, em_dtype dtype)
{
    (void)ks;
    return em_ones(shape_of(self), dtype_or(self, dtype), self->device);
}

em_tensor *em_comp_empty_like(em_keyset ks, em_tensor *self, em_dtype dtype)
{
    (void)ks;
    return em_empty(shape_of(self), dtype_or(self, dtype), self->device);
}

/* full_like keeps self's dtype (not fill_value's, unlike full); the value
 * is converted to it (2.7 into int64 is 2), a value the dtype cannot hold
 * is refused. */
em_tensor *em_comp_full_like(em_keyset ks, em_tensor *self, em_scalar fill_value, em_dtype dtype)
{
    (void)ks;
    return em_full(shape_of(self), fill_value, dtype_or(self, dtype), self->device);
}
