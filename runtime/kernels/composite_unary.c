/* composite_unary.c -- the unary family's composite ops (Note [Composite
 * ops] in codegen/codegen.h): the aliases clip (of clamp) and fix (of
 * trunc), which call their op through the public API, so autograd and every
 * backend come from it. */
#include "em_ops.h"
#include "em_kernels_decl.h"

em_tensor *em_comp_clip(em_keyset ks, em_tensor *self, const em_scalar *min, const em_scalar *max) {
    (void)ks;
    return em_clamp(self, min, max);
}
em_tensor *em_comp_clip_(em_keyset ks, em_tensor *self, const em_scalar *min, const em_scalar *max) {
    (void)ks;
    return em_clamp_(self, min, max);
}
em_tensor *em_comp_clip_Tensor(em_keyset ks, em_tensor *self, em_tensor *min, em_tensor *max) {
    (void)ks;
    return em_clamp_Tensor(self, min, max);
}
em_tensor *em_comp_clip__Tensor(em_keyset ks, em_tensor *self, em_tensor *min, em_tensor *max) {
    (void)ks;
    return em_clamp__Tensor(self, min, max);
}
em_tensor *em_comp_fix(em_keyset ks, em_tensor *self) {
    (void)ks;
    return em_trunc(self);
}
em_tensor *em_comp_fix_(em_keyset ks, em_tensor *self) {
    (void)ks;
    return em_trunc_(self);
}
