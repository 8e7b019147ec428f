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
