/* composite_loss.c -- composite ops of the loss family (softmin, l1_loss): written
 * with the public ops, so autograd, double backward and every backend come
 * from their parts (Note [Composite ops] in codegen/codegen.h). The key set
 * argument is unused.
 */
#include <string.h>

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

/* l1_loss(input, target, reduction) = |input - target| reduced (PyTorch
 * 1.13's composite: the gradient is sign(input - target)). */
em_tensor *em_comp_l1_loss(em_keyset ks, em_tensor *input, em_tensor *target, const char *reduction) {
    (void)ks;
    /* promoted as tensors of one shape: PyTorch broadcasts them first */
    em_dtype dt = em_promote_types(input->dtype, target->dtype);
    if (!em_dtype_is_floating(dt)) {
        em_set_error(EM_ETYPE, "l1_loss: expected floating input and target, got %s and %s",
                     em_dtype_name(input->dtype), em_dtype_name(target->dtype));
        return NULL;
    }
    em_tensor *a0 = input->dtype == dt ? em_tensor_retain(input) : em_to(input, dt);
    em_tensor *b0 = !a0 ? NULL : target->dtype == dt ? em_tensor_retain(target) : em_to(target, dt);
    em_tensor *d = b0 ? em_sub(a0, b0, em_scalar_int(1)) : NULL;
    em_tensor_release(a0);
    em_tensor_release(b0);
    em_tensor *a = d ? em_abs(d) : NULL;
    em_tensor_release(d);
    if (!a || strcmp(reduction, "none") == 0) return a;
    em_intlist all = { NULL, -1 };
    em_tensor *r = strcmp(reduction, "sum") == 0 ? em_sum(a, all, false, EM_DTYPE_NONE)
                                                 : em_mean(a, all, false, EM_DTYPE_NONE);
    em_tensor_release(a);
    return r;
}
