/* composite_binary.c -- the binary family's composite ops (schema/ops/binary.yaml,
 * Note [Composite ops] in codegen/codegen.h): written with other ops through
 * the public API, so autograd and every backend come from their parts. */
#include "autograd/em_autograd.h"
#include "em_ops.h"
#include "em_kernels_decl.h"

/* arctan2, arctan2_: PyTorch's aliases of atan2, atan2_ */
em_tensor *em_comp_arctan2(em_keyset ks, em_tensor *self, em_tensor *other) {
    (void)ks;
    return em_atan2(self, other);
}
em_tensor *em_comp_arctan2_(em_keyset ks, em_tensor *self, em_tensor *other) {
    (void)ks;
    return em_atan2_(self, other);
}

/* allclose: every element of isclose(...) (which checks the operands,
 * named as allclose here), as a 0-dim bool tensor; Lua gets a boolean
 * (Note [Boolean results] in codegen/emit_lua.c). */
em_tensor *em_comp_allclose(em_keyset ks, em_tensor *self, em_tensor *other, double rtol, double atol,
                            bool equal_nan) {
    (void)ks;
    if (self->dtype != other->dtype) {
        em_set_error(EM_ETYPE, "allclose: self (%s) and other (%s) must have the same dtype",
                     em_dtype_name(self->dtype), em_dtype_name(other->dtype));
        return NULL;
    }
    em_tensor *c = em_isclose(self, other, rtol, atol, equal_nan);
    em_tensor *r = c ? em_all(c, NULL, false) : NULL;
    em_tensor_release(c);
    return r;
}

/* equal: same shape and every element equal (after promotion, as PyTorch
 * 1.13 compares an int64 and a float32 tensor), as a 0-dim bool tensor. */
em_tensor *em_comp_equal(em_keyset ks, em_tensor *self, em_tensor *other) {
    (void)ks;
    bool same = self->ndim == other->ndim;
    for (int d = 0; same && d < self->ndim; d++) same = self->sizes[d] == other->sizes[d];
    if (!same) return em_zeros((em_intlist){ NULL, 0 }, EM_BOOL, self->device);
    em_tensor *c = em_eq(self, other);
    em_tensor *r = c ? em_all(c, NULL, false) : NULL;
    em_tensor_release(c);
    return r;
}
