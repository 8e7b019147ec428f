/* composite_loss.c -- composite ops of the loss family (softmin): written
 * with the public ops, so autograd, double backward and every backend come
 * from their parts (Note [Composite ops] in codegen/codegen.h). The key set
 * argument is unused.
 */
#include "autograd/em_autograd.h"
#include "em_ops.h"
#include "em_kernels_decl.h"

/* softmin(x, dim, dtype) = softmax(-x, dim, dtype), negating before the
 * cast as PyTorch does; bool has no negation (PyTorch refuses it too). */
em_tensor *em_comp_softmin(em_keyset ks, em_tensor *self, int64_t dim, em_dtype dtype) {
    (void)ks;
    if (em_wrap_dim(dim, self->ndim, "softmin") < 0) return NULL;
    if (self->dtype == EM_BOOL) {
        em_set_error(EM_ETYPE, "softmin: negation of a bool tensor is not supported (pass a floating tensor)");
        return NULL;
    }
    em_tensor *n = em_neg(self);
    em_tensor *r = n ? em_softmax(n, dim, dtype) : NULL;
    em_tensor_release(n);
    return r;
}
