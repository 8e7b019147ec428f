/* formulas_speed.c -- backward helpers of the speed family (training-step
 * speed: issue 9's MLP and CNN steps); contracts in em_formulas.h.
 *
 * Note [mm gradient layout]
 * A gradient that reaches AccumulateGrad in its leaf's layout is stolen;
 * any other is copied into a fresh contiguous .grad. nn's weights are
 * contiguous (out, in) matrices that linear multiplies as t(weight), a
 * column-major (in, out) operand of mm. mm's gradient for that operand,
 * computed as self^T @ grad, is row-major (in, out); t's backward turns it
 * into a column-major (out, in) view and AccumulateGrad copied it: a
 * strided transpose of every weight gradient each step, a quarter of the
 * MLP step. As PyTorch's mm_mat1_backward / mm_mat2_backward, the gradient
 * of an operand that was column-major (em_input_meta.col_major, set by
 * em_input_meta_from) is computed transposed, (grad^T @ self)^T, which is a
 * column-major view of a row-major product: after t's backward the weight
 * gets a contiguous gradient, stolen without a copy. Both forms call mm on
 * the same operands, so values (up to BLAS summation order), double
 * backward and dtypes are as before.
 */
#include "autograd/em_formulas.h"
#include "em_ops.h"

/* op(a) @ op(b), op(x) = x^T where its flag says so, transposed again
 * (a view) when t_out: the one mm of a gradient below. New reference, or
 * NULL with the error set. */
static em_tensor *mm_t(em_tensor *a, bool ta, em_tensor *b, bool tb, bool t_out) {
    em_tensor *at = ta ? em_t(a) : a, *bt = at && tb ? em_t(b) : b;
    em_tensor *p = at && bt ? em_mm(at, bt) : NULL;
    em_tensor *r = p && t_out ? em_t(p) : p;
    if (ta) em_tensor_release(at);
    if (tb && at) em_tensor_release(bt);
    if (t_out) em_tensor_release(p);
    return r;
}

/* grad @ mat2^T, or as (mat2 @ grad^T)^T for a column-major self */
em_tensor *em_ag_fn_mm_mat1_backward(em_tensor *grad, em_tensor *mat2, const em_input_meta *self_meta) {
    return self_meta->col_major ? mm_t(mat2, false, grad, true, true) : mm_t(grad, false, mat2, true, false);
}

/* self^T @ grad, or as (grad^T @ self)^T for a column-major mat2 */
em_tensor *em_ag_fn_mm_mat2_backward(em_tensor *grad, em_tensor *self, const em_input_meta *mat2_meta) {
    return mat2_meta->col_major ? mm_t(grad, true, self, false, true) : mm_t(self, true, grad, false, false);
}
