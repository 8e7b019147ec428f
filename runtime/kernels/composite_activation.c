/* composite_activation.c -- the activation family's composite ops (Note
 * [Composite ops] in codegen/codegen.h): relu6, softsign and tanhshrink,
 * written with public ops as PyTorch 1.13 writes them, so autograd and
 * every backend come from their parts. */
#include "em_ops.h"
#include "em_kernels_decl.h"

em_tensor *em_comp_relu6(em_keyset ks, em_tensor *self) {
    (void)ks;
    return em_hardtanh(self, em_scalar_int(0), em_scalar_int(6));
}

/* input / (|input| + 1): integers give float32 through true division */
em_tensor *em_comp_softsign(em_keyset ks, em_tensor *self) {
    (void)ks;
    em_tensor *a = em_abs(self);
    em_tensor *one = a ? em_tensor_wrapped_scalar(em_scalar_int(1)) : NULL;
    em_tensor *d = one ? em_add(a, one, em_scalar_int(1)) : NULL;
    em_tensor *r = d ? em_div(self, d) : NULL;
    em_tensor_release(a);
    em_tensor_release(one);
    em_tensor_release(d);
    return r;
}

/* input - tanh(input) */
em_tensor *em_comp_tanhshrink(em_keyset ks, em_tensor *self) {
    (void)ks;
    em_tensor *t = em_tanh(self);
    em_tensor *r = t ? em_sub(self, t, em_scalar_int(1)) : NULL;
    em_tensor_release(t);
    return r;
}
