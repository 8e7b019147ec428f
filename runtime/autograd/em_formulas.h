/* em_formulas.h -- hand-written helpers that backward formulas in
 * schema/derivatives.yaml call by name (`sum_backward(grad, self_meta, ...)`
 * becomes em_ag_fn_sum_backward(...)). Each returns a new reference or NULL
 * with the error set, never steals its arguments, and is written with the
 * public ops only, so that create_graph records it (double backward). */
#ifndef EM_FORMULAS_H
#define EM_FORMULAS_H

#include "autograd/em_autograd.h"

/* A wrapped-number 0-dim tensor (float64) for a literal or a Scalar. */
EM_HIDDEN em_tensor *em_ag_scalar(double v);
EM_HIDDEN em_tensor *em_ag_scalar_s(em_scalar s);

EM_HIDDEN em_tensor *em_ag_fn_sum_backward(em_tensor *grad, const em_input_meta *self_meta, em_intlist dim,
                                           bool keepdim);
EM_HIDDEN em_tensor *em_ag_fn_mean_backward(em_tensor *grad, const em_input_meta *self_meta, em_intlist dim,
                                            bool keepdim);
EM_HIDDEN em_tensor *em_ag_fn_reshape_as(em_tensor *grad, const em_input_meta *self_meta);
EM_HIDDEN em_tensor *em_ag_fn_unsqueeze_to(em_tensor *grad, const em_input_meta *self_meta);
EM_HIDDEN em_tensor *em_ag_fn_permute_backward(em_tensor *grad, em_intlist dims);
EM_HIDDEN em_tensor *em_ag_fn_narrow_grad(em_tensor *grad, const em_input_meta *self_meta, int64_t dim,
                                              int64_t start, int64_t length);
EM_HIDDEN em_tensor *em_ag_fn_select_grad(em_tensor *grad, const em_input_meta *self_meta, int64_t dim,
                                              int64_t index);
EM_HIDDEN em_tensor *em_ag_fn_slice_grad(em_tensor *grad, const em_input_meta *self_meta, int64_t dim,
                                             const int64_t *start, const int64_t *end, int64_t step);
EM_HIDDEN em_tensor *em_ag_fn_pow_backward_self(em_tensor *grad, em_tensor *self, em_tensor *exponent);
EM_HIDDEN em_tensor *em_ag_fn_pow_exponent_backward(em_tensor *grad, em_tensor *self, em_tensor *exponent,
                                                   em_tensor *result);
/* matmul's gradients: each needs the other operand's values and only its
 * own operand's shape (so a node keeps only what a gradient needs) */
EM_HIDDEN em_tensor *em_ag_fn_matmul_backward_self(em_tensor *grad, const em_input_meta *self, em_tensor *other);
EM_HIDDEN em_tensor *em_ag_fn_matmul_backward_other(em_tensor *grad, em_tensor *self, const em_input_meta *other);
EM_HIDDEN em_tensor *em_ag_fn_zeros_like(em_tensor *t);
EM_HIDDEN em_tensor *em_ag_fn_to_device_backward(em_tensor *grad, const em_input_meta *self_meta);
EM_HIDDEN em_tensor *em_ag_fn_as_strided_grad(em_tensor *grad, const em_geometry *self_geometry, em_intlist size,
                                              em_intlist stride, const int64_t *storage_offset);

/* reductions (prod, amax/amin, var/std, norm): see formulas.c */
EM_HIDDEN em_tensor *em_ag_fn_prod_backward(em_tensor *grad, em_tensor *self, em_tensor *result, const int64_t *dim,
                                            bool keepdim);
/* max()/min() of all elements: grad shared evenly among the ties. */
EM_HIDDEN em_tensor *em_ag_fn_max_all_backward(em_tensor *grad, em_tensor *self, em_tensor *result);
EM_HIDDEN em_tensor *em_ag_fn_amax_backward(em_tensor *grad, em_tensor *self, em_tensor *result, em_intlist dim,
                                            bool keepdim);
EM_HIDDEN em_tensor *em_ag_fn_var_backward(em_tensor *grad, em_tensor *self, em_intlist dim, int64_t correction,
                                           bool keepdim);
EM_HIDDEN em_tensor *em_ag_fn_std_backward(em_tensor *grad, em_tensor *self, em_tensor *result, em_intlist dim,
                                           int64_t correction, bool keepdim);
EM_HIDDEN em_tensor *em_ag_fn_norm_backward(em_tensor *grad, em_tensor *self, em_tensor *result, em_scalar p,
                                            em_intlist dim, bool keepdim);
/* ---- several results and tensor lists (formulas_list.c) ----
 * See Note [Several results] in codegen/codegen.h and the header of
 * schema/derivatives.yaml. */
/* zeros of a result's shape and dtype: the gradient of a result that got
 * none, where a formula needs one. */
EM_HIDDEN em_tensor *em_ag_zeros_from_meta(const em_input_meta *m);
/* sort/topk values: grad placed at the 1-based indices along dim of zeros
 * shaped like self (gather_backward). */
EM_HIDDEN em_tensor *em_ag_fn_value_selecting_backward(em_tensor *grad, int64_t dim, em_tensor *indices,
                                                       const em_input_meta *self_meta);
/* max.dim/min.dim: value_selecting_backward after putting back the reduced
 * dim of grad and indices when keepdim was false. */
EM_HIDDEN em_tensor *em_ag_fn_value_selecting_reduction_backward(em_tensor *grad, int64_t dim, em_tensor *indices,
                                                                 const em_input_meta *self_meta, bool keepdim);
/* cat: element i's part of grad along dim (metas: every element's shape). */
EM_HIDDEN em_tensor *em_ag_fn_cat_grad(em_tensor *grad, const em_input_meta *metas, int64_t dim, int64_t i);
/* split/chunk: the results' gradients (zeros where NULL) concatenated along
 * dim; stack_grads (unbind) stacks them. n == 0 gives zeros of self. */
EM_HIDDEN em_tensor *em_ag_fn_split_backward(em_tensor **grads, int n, const em_input_meta *metas,
                                             const em_input_meta *self_meta, int64_t dim);
EM_HIDDEN em_tensor *em_ag_fn_stack_grads(em_tensor **grads, int n, const em_input_meta *metas,
                                          const em_input_meta *self_meta, int64_t dim);

/* Note [Schema files]: each op family's helpers sit in its own block below
 * and its own runtime/autograd/formulas_FAMILY.c. */
/* ---- family: unary (formulas_unary.c) ---- */
/* clamp with number bounds: grad where min <= self <= max (either bound
 * may be NULL), else 0 -- both ends pass, as PyTorch's clamp_backward. */
EM_HIDDEN em_tensor *em_ag_fn_clamp_backward(em_tensor *grad, em_tensor *self, const em_scalar *min,
                                             const em_scalar *max);
/* clamp with tensor bounds (min or max NULL when absent), PyTorch's
 * clamp_backward_min_max: self gets grad where min <= self <= max; min
 * where self < min (and min < max); max where self > max (or max < min). */
EM_HIDDEN em_tensor *em_ag_fn_clamp_grad_self(em_tensor *grad, em_tensor *self, em_tensor *min, em_tensor *max);
EM_HIDDEN em_tensor *em_ag_fn_clamp_grad_min(em_tensor *grad, em_tensor *self, em_tensor *min, em_tensor *max);
EM_HIDDEN em_tensor *em_ag_fn_clamp_grad_max(em_tensor *grad, em_tensor *self, em_tensor *min, em_tensor *max);
/* polygamma(n, self)'s gradient: grad * polygamma(n + 1, self). */
EM_HIDDEN em_tensor *em_ag_fn_polygamma_backward(em_tensor *grad, em_tensor *self, int64_t n);

/* ---- family: binary (formulas_binary.c) ---- */

/* ---- family: reduce (formulas_reduce.c) ---- */

/* ---- family: shape (formulas_shape.c) ---- */

/* ---- family: index (formulas_index.c) ---- */

/* ---- family: linalg (formulas_linalg.c) ---- */

/* ---- family: random (formulas_random.c) ---- */

/* ---- family: vmath (formulas_vmath.c) ---- */

/* Whether an element of a Tensor[] argument requires grad (the generated
 * Autograd kernel of an op with a Tensor[] argument asks). */
static inline __attribute__((unused)) bool em_ag_list_requires_grad(em_tensorlist l) {
    for (int i = 0; i < l.n; i++)
        if (em_requires_grad(l.data[i])) return true;
    return false;
}

#endif
