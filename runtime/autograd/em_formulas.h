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
/* fmod's gradient for other: -grad * trunc(self / other) (PyTorch 1.13) */
EM_HIDDEN em_tensor *em_ag_fn_fmod_other_backward(em_tensor *grad, em_tensor *self, em_tensor *other);

/* ---- family: reduce (formulas_reduce.c) ---- */
/* cumsum: grad summed from the back along dim (PyTorch's reversed_cumsum). */
EM_HIDDEN em_tensor *em_ag_fn_cumsum_backward(em_tensor *grad, int64_t dim);
/* cumprod: the kernel op cumprod_backward when grad mode is off (no double
 * backward recorded), else PyTorch's differentiable formulas (O(n^2) when
 * self holds a zero). */
EM_HIDDEN em_tensor *em_ag_fn_cumprod_grad(em_tensor *grad, em_tensor *self, int64_t dim, em_tensor *result);
/* logcumsumexp: PyTorch's stable formula (grad split by sign, in log space). */
EM_HIDDEN em_tensor *em_ag_fn_logcumsumexp_backward(em_tensor *grad, em_tensor *self, em_tensor *result,
                                                   int64_t dim);

/* ---- family: shape (formulas_shape.c) ---- */
/* roll: roll grad back by the negated shifts. */
EM_HIDDEN em_tensor *em_ag_fn_roll_backward(em_tensor *grad, em_intlist shifts, em_intlist dims);
/* rot90: grad turned back k quarter turns. */
EM_HIDDEN em_tensor *em_ag_fn_rot90_backward(em_tensor *grad, int64_t k, em_intlist dims);
/* repeat: the tiles of grad summed onto self's shape. */
EM_HIDDEN em_tensor *em_ag_fn_repeat_backward(em_tensor *grad, em_intlist repeats, const em_input_meta *self_meta);

/* ---- family: index (formulas_index.c) ---- */
/* index_select: zeros of self's shape with grad added at index along dim. */
EM_HIDDEN em_tensor *em_ag_fn_index_select_backward(em_tensor *grad, const em_input_meta *self_meta, int64_t dim,
                                                    em_tensor *index);
/* index_add/index_copy source: grad's slices at index along dim. */
EM_HIDDEN em_tensor *em_ag_fn_index_source_grad(em_tensor *grad, int64_t dim, em_tensor *index,
                                                const em_input_meta *source_meta);
/* masked_select: grad scattered where mask is true into zeros of the
 * broadcast shape (the caller sums it down to self). */
EM_HIDDEN em_tensor *em_ag_fn_masked_select_backward(em_tensor *grad, const em_input_meta *self_meta,
                                                     em_tensor *mask);
/* masked_scatter source: grad where mask is true, zero-padded to source. */
EM_HIDDEN em_tensor *em_ag_fn_masked_scatter_source_grad(em_tensor *grad, em_tensor *mask,
                                                         const em_input_meta *source_meta);
/* scatter/scatter_add src: gather(grad, dim, index) zero-padded to src. */
EM_HIDDEN em_tensor *em_ag_fn_scatter_src_grad(em_tensor *grad, int64_t dim, em_tensor *index,
                                               const em_input_meta *src_meta);
/* take: grad added at the flat positions of index into zeros of self. */
EM_HIDDEN em_tensor *em_ag_fn_take_backward(em_tensor *grad, const em_input_meta *self_meta, em_tensor *index);
/* scatter_reduce (sum, mean, amax, amin; prod refused, Note [scatter_reduce prod]) */
EM_HIDDEN em_tensor *em_ag_fn_scatter_reduce_self_grad(em_tensor *grad, em_tensor *self, int64_t dim,
                                                       em_tensor *index, em_tensor *src, const char *reduce,
                                                       bool include_self, em_tensor *result);
EM_HIDDEN em_tensor *em_ag_fn_scatter_reduce_src_grad(em_tensor *grad, em_tensor *self, int64_t dim,
                                                      em_tensor *index, em_tensor *src, const char *reduce,
                                                      bool include_self, em_tensor *result);

/* ---- family: linalg (formulas_linalg.c) ---- */
/* PyTorch's x.mT: the last two dims swapped (a view); bmm's gradients. */
EM_HIDDEN em_tensor *em_ag_fn_mT(em_tensor *t);

/* ---- family: random (formulas_random.c) ---- */

/* ---- family: vmath (formulas_vmath.c) ---- */

/* Whether an element of a Tensor[] argument requires grad (the generated
 * Autograd kernel of an op with a Tensor[] argument asks). */
static inline __attribute__((unused)) bool em_ag_list_requires_grad(em_tensorlist l) {
    for (int i = 0; i < l.n; i++)
        if (em_requires_grad(l.data[i])) return true;
    return false;
}

/* ---- family: lapack (formulas_lapack.c) ----
 * The gradients of the LAPACK ops (schema/derivatives/lapack.yaml); see
 * the contract above each in formulas_lapack.c. */
EM_HIDDEN em_tensor *em_ag_fn_det_backward(em_tensor *grad, em_tensor *A, em_tensor *det);
EM_HIDDEN em_tensor *em_ag_fn_slogdet_backward(em_tensor *grad, em_tensor *A);
EM_HIDDEN em_tensor *em_ag_fn_inv_backward(em_tensor *grad, em_tensor *inverse);
EM_HIDDEN em_tensor *em_ag_fn_solve_backward_A(em_tensor *grad, em_tensor *A, const em_input_meta *B_meta,
                                               em_tensor *X, bool left);
EM_HIDDEN em_tensor *em_ag_fn_solve_backward_B(em_tensor *grad, em_tensor *A, bool left);
EM_HIDDEN em_tensor *em_ag_fn_cholesky_backward(em_tensor *grad, em_tensor *L, bool upper);
EM_HIDDEN em_tensor *em_ag_fn_qr_backward(em_tensor *gQ, em_tensor *gR, em_tensor *Q, em_tensor *R,
                                          const char *mode, em_tensor *A);
EM_HIDDEN em_tensor *em_ag_fn_eigh_backward(em_tensor *gL, em_tensor *gV, em_tensor *L, em_tensor *V);
EM_HIDDEN em_tensor *em_ag_fn_svd_backward(em_tensor *gU, em_tensor *gS, em_tensor *gVh, em_tensor *U,
                                           em_tensor *S, em_tensor *Vh, bool full_matrices);
EM_HIDDEN em_tensor *em_ag_fn_pinv_backward(em_tensor *grad, em_tensor *pinvA, em_tensor *A);
EM_HIDDEN em_tensor *em_ag_fn_lstsq_backward_self(em_tensor *grad, em_tensor *A, em_tensor *B);
EM_HIDDEN em_tensor *em_ag_fn_lstsq_backward_b(em_tensor *grad, em_tensor *A, em_tensor *B);
EM_HIDDEN em_tensor *em_ag_fn_matrix_exp_backward(em_tensor *A, em_tensor *grad);

/* ---- family: pool (formulas_pool.c) ---- */
/* The derivative of max_poolNd_with_indices_backward w.r.t. grad_output:
 * grad (the input's shape) gathered in each plane of its last nsp dims at
 * the 1-based indices (the pooling output's shape). */
EM_HIDDEN em_tensor *em_ag_fn_max_pool_double_backward(em_tensor *grad, em_tensor *indices, int64_t nsp);
/* The derivative of adaptive_avg_poolNd_backward w.r.t. grad_output: the
 * pooling of grad to grad_output's last nsp sizes (2 or 3). */
EM_HIDDEN em_tensor *em_ag_fn_adaptive_avg_pool_double_backward(em_tensor *grad, const em_input_meta *grad_output_meta,
                                                                int64_t nsp);
/* The gradient of max_unpool w.r.t. self: grad (the output's shape)
 * gathered at indices over the last output_size.n dims. */
EM_HIDDEN em_tensor *em_ag_fn_max_unpool_backward(em_tensor *grad, em_tensor *indices, em_intlist output_size);

#endif
