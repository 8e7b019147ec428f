/* formulas_loss.c -- formula helpers of the loss family (softmax,
 * log_softmax and their backward ops), declared in em_formulas.h. Written
 * with the public ops only, so that create_graph records them (double
 * backward at any order).
 */
#include "autograd/em_formulas.h"
#include "em_ops.h"

/* sum of t over the 0-based dim d with keepdim (a 0-dim t: itself). */
static em_tensor *sum_keep(em_tensor *t, int64_t dim) {
    if (t->ndim == 0) return em_tensor_retain(t);
    int d = em_wrap_dim(dim, t->ndim, "softmax backward");
    if (d < 0) return NULL;
    int64_t dd = d;
    return em_sum(t, (em_intlist){ &dd, 1 }, true, EM_DTYPE_NONE);
}

/* softmax's and log_softmax's gradients through their backward ops,
 * computed in result's dtype (for softmax's dtype= option, reduce_to casts
 * the gradient back to self's). */
em_tensor *em_ag_fn_softmax_backward(em_tensor *grad, em_tensor *result, int64_t dim) {
    return em__softmax_backward_data(grad, result, dim, result->dtype);
}

em_tensor *em_ag_fn_log_softmax_backward(em_tensor *grad, em_tensor *result, int64_t dim) {
    return em__log_softmax_backward_data(grad, result, dim, result->dtype);
}

/* d/d output of sum(grad * output * (grad_output - sum(grad_output * output))):
 * grad_output * grad - sum(output * grad_output) * grad - grad_output * sum(output * grad). */
em_tensor *em_ag_fn_softmax_double_backward(em_tensor *grad, em_tensor *grad_output, int64_t dim, em_tensor *output) {
    em_tensor *og = em_mul(output, grad_output);
    em_tensor *s1 = og ? sum_keep(og, dim) : NULL;
    em_tensor *ow = s1 ? em_mul(output, grad) : NULL;
    em_tensor *s2 = ow ? sum_keep(ow, dim) : NULL;
    em_tensor *a = s2 ? em_sub(grad_output, s1, em_scalar_int(1)) : NULL; /* grad_output - s1 */
    em_tensor *b = a ? em_mul(a, grad) : NULL;
    em_tensor *c = b ? em_mul(grad_output, s2) : NULL;
    em_tensor *r = c ? em_sub(b, c, em_scalar_int(1)) : NULL;
    em_tensor *tmp[] = { og, s1, ow, s2, a, b, c };
    for (int i = 0; i < 7; i++) em_tensor_release(tmp[i]);
    return r;
}

/* log_softmax's backward g - exp(output) * sum(g) is linear in g; its
 * transpose applied to grad is grad - sum(grad * exp(output)). */
em_tensor *em_ag_fn_log_softmax_double_backward_grad(em_tensor *grad, em_tensor *output, int64_t dim) {
    em_tensor *e = em_exp(output);
    em_tensor *ge = e ? em_mul(grad, e) : NULL;
    em_tensor *s = ge ? sum_keep(ge, dim) : NULL;
    em_tensor *r = s ? em_sub(grad, s, em_scalar_int(1)) : NULL;
    em_tensor_release(e);
    em_tensor_release(ge);
    em_tensor_release(s);
    return r;
}

/* d/d output of sum(grad * (grad_output - exp(output) * sum(grad_output))):
 * -grad * exp(output) * sum(grad_output). */
em_tensor *em_ag_fn_log_softmax_double_backward_output(em_tensor *grad, em_tensor *grad_output, int64_t dim,
                                                       em_tensor *output) {
    em_tensor *e = em_exp(output);
    em_tensor *s = e ? sum_keep(grad_output, dim) : NULL;
    em_tensor *ge = s ? em_mul(grad, e) : NULL;
    em_tensor *p = ge ? em_mul(ge, s) : NULL;
    em_tensor *r = p ? em_neg(p) : NULL;
    em_tensor_release(e);
    em_tensor_release(s);
    em_tensor_release(ge);
    em_tensor_release(p);
    return r;
}
