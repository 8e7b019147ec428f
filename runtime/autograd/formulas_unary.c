/* formulas_unary.c -- helpers of the unary family's backward formulas
 * (schema/derivatives/unary.yaml); contracts in em_formulas.h. Written with
 * the public ops only, so create_graph records them. */
#include "autograd/em_formulas.h"
#include "em_ops.h"

/* where(mask, grad, 0); takes mask (NULL passes the failure through). */
static em_tensor *masked_grad(em_tensor *grad, em_tensor *mask) {
    if (!mask) return NULL;
    em_tensor *zero = em_ag_scalar(0), *r = zero ? em_where(mask, grad, zero) : NULL;
    em_tensor_release(zero);
    em_tensor_release(mask);
    return r;
}

/* a AND b of two bool masks (where(a, b, false)); takes both. */
static em_tensor *mask_and(em_tensor *a, em_tensor *b) {
    em_tensor *no = a && b ? em_ag_scalar_s(em_scalar_bool(false)) : NULL;
    em_tensor *r = no ? em_where(a, b, no) : NULL;
    em_tensor_release(no);
    em_tensor_release(a);
    em_tensor_release(b);
    return r;
}
/* a OR b (where(a, true, b)); takes both. */
static em_tensor *mask_or(em_tensor *a, em_tensor *b) {
    em_tensor *yes = a && b ? em_ag_scalar_s(em_scalar_bool(true)) : NULL;
    em_tensor *r = yes ? em_where(a, yes, b) : NULL;
    em_tensor_release(yes);
    em_tensor_release(a);
    em_tensor_release(b);
    return r;
}

/* self op bound, for a number bound (cmp: em_ge, em_le, ...) */
static em_tensor *cmp_scalar(em_tensor *(*cmp)(em_tensor *, em_tensor *), em_tensor *self, em_scalar s) {
    em_tensor *b = em_ag_scalar_s(s), *r = b ? cmp(self, b) : NULL;
    em_tensor_release(b);
    return r;
}

em_tensor *em_ag_fn_clamp_backward(em_tensor *grad, em_tensor *self, const em_scalar *min, const em_scalar *max) {
    em_tensor *mask;
    if (min && max) mask = mask_and(cmp_scalar(em_ge, self, *min), cmp_scalar(em_le, self, *max));
    else if (min) mask = cmp_scalar(em_ge, self, *min);
    else mask = cmp_scalar(em_le, self, *max);
    return masked_grad(grad, mask);
}

em_tensor *em_ag_fn_clamp_grad_self(em_tensor *grad, em_tensor *self, em_tensor *min, em_tensor *max) {
    em_tensor *mask;
    if (min && max) mask = mask_and(em_ge(self, min), em_le(self, max));
    else if (min) mask = em_ge(self, min);
    else mask = em_le(self, max);
    return masked_grad(grad, mask);
}

em_tensor *em_ag_fn_clamp_grad_min(em_tensor *grad, em_tensor *self, em_tensor *min, em_tensor *max) {
    if (!max) return masked_grad(grad, em_lt(self, min));
    return masked_grad(grad, mask_and(em_lt(self, min), em_lt(min, max)));
}

em_tensor *em_ag_fn_clamp_grad_max(em_tensor *grad, em_tensor *self, em_tensor *min, em_tensor *max) {
    if (!min) return masked_grad(grad, em_gt(self, max));
    return masked_grad(grad, mask_or(em_gt(self, max), em_lt(max, min)));
}

em_tensor *em_ag_fn_polygamma_backward(em_tensor *grad, em_tensor *self, int64_t n) {
    em_tensor *p = em_polygamma(n + 1, self), *r = p ? em_mul(grad, p) : NULL;
    em_tensor_release(p);
    return r;
}
