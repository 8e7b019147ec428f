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

em_tensor *em_ag_fn_mm_mat1_backward(em_tensor *grad, em_tensor *mat2, const em_input_meta *self_meta) {
    if (!self_meta->col_major) {
        em_tensor *m2t = em_t(mat2);
        em_tensor *r = m2t ? em_mm(grad, m2t) : NULL;
        em_tensor_release(m2t);
        return r;
    }
    /* (grad @ mat2^T)^T = mat2 @ grad^T */
    em_tensor *gt = em_t(grad);
    em_tensor *p = gt ? em_mm(mat2, gt) : NULL;
    em_tensor *r = p ? em_t(p) : NULL;
    em_tensor_release(gt);
    em_tensor_release(p);
    return r;
}

em_tensor *em_ag_fn_mm_mat2_backward(em_tensor *grad, em_tensor *self, const em_input_meta *mat2_meta) {
    if (!mat2_meta->col_major) {
        em_tensor *st = em_t(self);
        em_tensor *r = st ? em_mm(st, grad) : NULL;
        em_tensor_release(st);
        return r;
    }
    /* (self^T @ grad)^T = grad^T @ self */
    em_tensor *gt = em_t(grad);
    em_tensor *p = gt ? em_mm(gt, self) : NULL;
    em_tensor *r = p ? em_t(p) : NULL;
    em_tensor_release(gt);
    em_tensor_release(p);
    return r;
}
