/* composite_lapack.c -- the LAPACK family's composite op (inverse), written
 * with public ops only as composite.c explains (Note [Composite ops] in
 * codegen/codegen.h). */
#include "autograd/em_autograd.h"
#include "em_ops.h"
#include "em_kernels_decl.h"

/* torch.inverse is linalg.inv. */
em_tensor *em_comp_inverse(em_keyset ks, em_tensor *self) {
    (void)ks;
    return em_inv(self);
}
