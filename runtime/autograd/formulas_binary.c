/* formulas_binary.c -- formula helpers of the binary family
 * (schema/derivatives/binary.yaml), declared in em_formulas.h. */
#include "autograd/em_formulas.h"
#include "em_ops.h"

/* fmod(self, other)'s gradient for other: -grad * trunc(self / other), the
 * quotient in the operands' common dtype (self may be an integer or bool
 * tensor), so that other = 0 gives an infinite quotient as in PyTorch. */
em_tensor *em_ag_fn_fmod_other_backward(em_tensor *grad, em_tensor *self, em_tensor *other) {
    em_tensor *q = em_div_Tensor_mode(self, other, "trunc");
    em_tensor *g = q ? em_mul(grad, q) : NULL;
    em_tensor *r = g ? em_neg(g) : NULL;
    em_tensor_release(q);
    em_tensor_release(g);
    return r;
}

/* div with a rounding mode: zero gradients for self and other (piecewise
 * constant). The helpers take the tensors they do not read so that the
 * node saves what PyTorch 1.13's DivBackward2 saves: other for self's
 * formula (div_tensor_self_backward(grad, other, ...)), self and other for
 * other's. An in-place write to a saved one before backward is then the
 * same "modified by an in-place operation" error in both
 * (`t:div_(t, {rounding_mode = "floor"})`), and a write to self when only
 * self needs a gradient is no error in either (difftest seed 598 of the
 * binary ops). */
em_tensor *em_ag_fn_div_mode_backward(em_tensor *grad, em_tensor *self, em_tensor *other) {
    (void)self;
    (void)other;
    return em_zeros_like(grad, EM_DTYPE_NONE);
}

em_tensor *em_ag_fn_div_mode_self_backward(em_tensor *grad, em_tensor *other) {
    (void)other;
    return em_zeros_like(grad, EM_DTYPE_NONE);
}
