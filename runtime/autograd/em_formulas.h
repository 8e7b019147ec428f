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
/* div with a rounding mode: zeros; takes self and other so the node saves
 * them as PyTorch's DivBackward2 does (same in-place version errors). */
EM_HIDDEN em_tensor *em_ag_fn_div_mode_backward(em_tensor *grad, em_tensor *self, em_tensor *other);
EM_HIDDEN em_tensor *em_ag_fn_div_mode_self_backward(em_tensor *grad, em_tensor *other);

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

/* ---- family: speed (formulas_speed.c) ---- */
/* mm's gradients (PyTorch's mm_mat1_backward / mm_mat2_backward):
 * grad @ mat2^T for self, self^T @ grad for mat2, each computed transposed
 * when that operand was column-major, so the gradient has its layout
 * (Note [mm gradient layout]). */
EM_HIDDEN em_tensor *em_ag_fn_mm_mat1_backward(em_tensor *grad, em_tensor *mat2, const em_input_meta *self_meta);
EM_HIDDEN em_tensor *em_ag_fn_mm_mat2_backward(em_tensor *grad, em_tensor *self, const em_input_meta *mat2_meta);

/* ---- family: random (formulas_random.c) ---- */

/* ---- family: vmath (formulas_vmath.c) ---- */

/* ---- family: conv (formulas_conv.c) ---- */
/* convolution's gradients: convolution_backward's grad_input / grad_weight
 * / grad_bias (only that result computed). */
EM_HIDDEN em_tensor *em_ag_fn_conv_grad_input(em_tensor *grad, em_tensor *input, em_tensor *weight, em_intlist stride,
                                              em_intlist padding, em_intlist dilation, bool transposed,
                                              em_intlist output_padding, int64_t groups);
EM_HIDDEN em_tensor *em_ag_fn_conv_grad_weight(em_tensor *grad, em_tensor *input, em_tensor *weight,
                                               em_intlist stride, em_intlist padding, em_intlist dilation,
                                               bool transposed, em_intlist output_padding, int64_t groups);
EM_HIDDEN em_tensor *em_ag_fn_conv_grad_bias(em_tensor *grad, em_tensor *input, em_tensor *weight, em_intlist stride,
                                             em_intlist padding, em_intlist dilation, bool transposed,
                                             em_intlist output_padding, int64_t groups);
/* convolution_backward's gradients (double backward of convolution), given
 * the gradients ggI, ggW, ggb of its three results; a NULL one (no
 * gradient flowed: grad_output's formula takes them as 'u' parameters) or
 * a {0} one (a result its output_mask left out) counts as absent. grad_output's: convolution
 * (ggI, weight, ggb) + convolution(input, ggW); input's: the grad_input of
 * convolution_backward(grad_output, input, ggW); weight's: the grad_weight
 * of convolution_backward(grad_output, ggI, weight). Zeros when absent. */
EM_HIDDEN em_tensor *em_ag_fn_conv_dd_grad_output(em_tensor *ggI, em_tensor *ggW, em_tensor *ggb,
                                                  em_tensor *grad_output, em_tensor *input, em_tensor *weight,
                                                  em_intlist stride, em_intlist padding, em_intlist dilation,
                                                  bool transposed, em_intlist output_padding, int64_t groups);
EM_HIDDEN em_tensor *em_ag_fn_conv_dd_input(em_tensor *ggW, em_tensor *grad_output, em_tensor *input,
                                            em_intlist stride, em_intlist padding, em_intlist dilation,
                                            bool transposed, em_intlist output_padding, int64_t groups);
EM_HIDDEN em_tensor *em_ag_fn_conv_dd_weight(em_tensor *ggI, em_tensor *grad_output, em_tensor *weight,
                                             em_intlist stride, em_intlist padding, em_intlist dilation,
                                             bool transposed, em_intlist output_padding, int64_t groups);
/* unfold's gradient: fold(grad) onto input's last two sizes. */
EM_HIDDEN em_tensor *em_ag_fn_unfold_backward_fold(em_tensor *grad, const em_input_meta *input_meta,
                                                   em_intlist kernel_size, em_intlist dilation, em_intlist padding,
                                                   em_intlist stride);

/* ---- family: metric (formulas_metric.c) ---- */
/* _euclidean_dist's gradient for x1 (which == 0) or x2 (which == 1), as
 * PyTorch's _euclidean_dist_backward: ratio = grad / result (0 where the
 * distance is 0); x1: x1 * sum(ratio, -1) - ratio @ x2; x2: x2 * sum(ratio,
 * -2)^T - ratio^T @ x1. */
EM_HIDDEN em_tensor *em_ag_fn_euclidean_dist_backward(em_tensor *grad, em_tensor *x1, em_tensor *x2,
                                                      em_tensor *result, int64_t which);
/* _cdist_forward's gradient for x1 (which == 0) or x2 (which == 1) and
 * _pdist_forward's for self: the kernel ops _cdist_backward /
 * _pdist_backward when grad mode is off (a plain backward), else the same
 * terms written with ops, so that a create_graph backward records them and
 * double backward works (PyTorch 1.13 has none there). */
EM_HIDDEN em_tensor *em_ag_fn_cdist_grad(em_tensor *grad, em_tensor *x1, em_tensor *x2, double p,
                                         em_tensor *result, int64_t which);
EM_HIDDEN em_tensor *em_ag_fn_pdist_grad(em_tensor *grad, em_tensor *self, double p, em_tensor *result);

/* Whether an element of a Tensor[] argument requires grad (the generated
 * Autograd kernel of an op with a Tensor[] argument asks). */
static inline __attribute__((unused)) bool em_ag_list_requires_grad(em_tensorlist l) {
    for (int i = 0; i < l.n; i++)
        if (em_requires_grad(l.data[i])) return true;
    return false;
}

/* ---- family: spatial (formulas_spatial.c) ---- */
/* constant_pad_nd: grad cropped (padded) back by the negated pads. */
EM_HIDDEN em_tensor *em_ag_fn_constant_pad_backward(em_tensor *grad, em_intlist pad);
/* pad_circular: pad_circular_backward(grad, self's sizes, pad). */
EM_HIDDEN em_tensor *em_ag_fn_pad_circular_grad(em_tensor *grad, const em_input_meta *self_meta, em_intlist pad);
/* Zeros of the input's shape, dtype and device: the gradient of an argument
 * read only for its shape (without keeping the tensor). */
EM_HIDDEN em_tensor *em_ag_fn_zeros_of_meta(const em_input_meta *m);
/* upsample_nd: upsample_nd_backward(grad, self's sizes, ...). */
EM_HIDDEN em_tensor *em_ag_fn_upsample_nd_grad(em_tensor *grad, const em_input_meta *self_meta, em_intlist output_size,
                                               const char *mode, bool align_corners, const em_scalar *scales_d,
                                               const em_scalar *scales_h, const em_scalar *scales_w);

/* ---- family: loss (formulas_loss.c) ---- */
/* softmax / log_softmax: their backward ops in result's dtype. */
EM_HIDDEN em_tensor *em_ag_fn_softmax_backward(em_tensor *grad, em_tensor *result, int64_t dim);
EM_HIDDEN em_tensor *em_ag_fn_log_softmax_backward(em_tensor *grad, em_tensor *result, int64_t dim);
/* the gradients of the backward ops (PyTorch's softmax_double_backward and
 * the two parts of _log_softmax_backward_data's entry) */
EM_HIDDEN em_tensor *em_ag_fn_softmax_double_backward(em_tensor *grad, em_tensor *grad_output, int64_t dim,
                                                      em_tensor *output);
EM_HIDDEN em_tensor *em_ag_fn_log_softmax_double_backward_grad(em_tensor *grad, em_tensor *output, int64_t dim);
EM_HIDDEN em_tensor *em_ag_fn_log_softmax_double_backward_output(em_tensor *grad, em_tensor *grad_output,
                                                                 int64_t dim, em_tensor *output);

/* cross_entropy's gradients: the fused kernel op cross_entropy_backward
 * unless grad mode is on (create_graph), then ops (double backward); the
 * target's, for probability targets. */
EM_HIDDEN em_tensor *em_ag_fn_cross_entropy_grad(em_tensor *grad, em_tensor *input, em_tensor *target,
                                                 em_tensor *weight, int64_t ignore_index, const char *reduction,
                                                 double label_smoothing);
EM_HIDDEN em_tensor *em_ag_fn_cross_entropy_target_grad(em_tensor *grad, em_tensor *input, em_tensor *target,
                                                        em_tensor *weight, const char *reduction,
                                                        double label_smoothing);

/* f''(input - target) * grad * grad_output of a regression loss (kind 0
 * mse, 1 smooth_l1 with beta p, 2 huber with delta p), / n for mean;
 * f'' is 0 at |d| = p, as in PyTorch. */
EM_HIDDEN em_tensor *em_ag_fn_pw_loss_double_backward(em_tensor *grad, em_tensor *grad_output, em_tensor *input,
                                                      em_tensor *target, const char *reduction, int64_t kind,
                                                      double p);

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
                                          const char *mode);
EM_HIDDEN em_tensor *em_ag_fn_eigh_backward(em_tensor *gL, em_tensor *gV, em_tensor *L, em_tensor *V);
EM_HIDDEN em_tensor *em_ag_fn_svd_backward(em_tensor *gU, em_tensor *gS, em_tensor *gVh, em_tensor *U,
                                           em_tensor *S, em_tensor *Vh, bool full_matrices);
EM_HIDDEN em_tensor *em_ag_fn_pinv_backward(em_tensor *grad, em_tensor *pinvA, em_tensor *A);
EM_HIDDEN em_tensor *em_ag_fn_lstsq_backward_self(em_tensor *grad, em_tensor *A, em_tensor *B);
EM_HIDDEN em_tensor *em_ag_fn_lstsq_backward_b(em_tensor *grad, em_tensor *A, em_tensor *B);
EM_HIDDEN em_tensor *em_ag_fn_matrix_exp_backward(em_tensor *A, em_tensor *grad);

/* ---- family: activation (formulas_activation.c) ----
 * x is the forward's input, or its result where the in-place forms pass
 * one (is_result; the numbers given as literals in the formulas). */
/* leaky_relu_backward(grad, x, negative_slope, is_result) */
EM_HIDDEN em_tensor *em_ag_fn_leaky_relu_grad(em_tensor *grad, em_tensor *x, em_scalar negative_slope,
                                              bool is_result);
/* elu (kind 0), elu_ (1), celu (2), celu_ (3): elu_backward with their
 * scale and input_scale; selu and selu_ likewise with SELU's constants. */
EM_HIDDEN em_tensor *em_ag_fn_elu_grad(em_tensor *grad, em_tensor *x, em_scalar alpha, int64_t kind);
EM_HIDDEN em_tensor *em_ag_fn_selu_grad(em_tensor *grad, em_tensor *x, bool is_result);
/* The gradients for the input (x) of the backward ops: grad * grad_output
 * times the activation's second derivative at x (where it has one). */
EM_HIDDEN em_tensor *em_ag_fn_elu_double_backward(em_tensor *grad, em_tensor *grad_output, em_scalar alpha,
                                                  em_scalar scale, em_scalar input_scale, bool is_result,
                                                  em_tensor *x);
EM_HIDDEN em_tensor *em_ag_fn_gelu_double_backward(em_tensor *grad, em_tensor *grad_output, em_tensor *x,
                                                   const char *approximate);
EM_HIDDEN em_tensor *em_ag_fn_silu_double_backward(em_tensor *grad, em_tensor *grad_output, em_tensor *x);
EM_HIDDEN em_tensor *em_ag_fn_mish_double_backward(em_tensor *grad, em_tensor *grad_output, em_tensor *x);
EM_HIDDEN em_tensor *em_ag_fn_softplus_double_backward(em_tensor *grad, em_tensor *grad_output, em_tensor *x,
                                                       em_scalar beta, em_scalar threshold);
EM_HIDDEN em_tensor *em_ag_fn_hardswish_double_backward(em_tensor *grad, em_tensor *grad_output, em_tensor *x);
EM_HIDDEN em_tensor *em_ag_fn_log_sigmoid_double_backward(em_tensor *grad, em_tensor *grad_output,
                                                          em_tensor *x);
/* native_dropout: native_dropout_backward(grad, mask, scale), scale 1 / (1 - p)
 * when training (0 for p = 1), 1 when not. */
EM_HIDDEN em_tensor *em_ag_fn_native_dropout_grad(em_tensor *grad, em_tensor *mask, double p, bool train);

/* ---- family: norm (formulas_norm.c) ----
 * layer_norm's gradients: which = 0, 1, 2 picks grad_input, grad_weight,
 * grad_bias of native_layer_norm_backward (one run for the three, Note
 * [Norm gradient memo]: weight and bias say which results are wanted);
 * the double-backward helper gives the gradient of native_layer_norm_backward
 * for grad_out (0), input (1) or weight (2) from the cotangents ggI, ggW,
 * ggB of its three results (an empty one counts as absent). */
EM_HIDDEN em_tensor *em_ag_fn_layer_norm_grad(em_tensor *grad, em_tensor *input, em_intlist normalized_shape,
                                              em_tensor *mean, em_tensor *rstd, em_tensor *weight, em_tensor *bias,
                                              int64_t which);
EM_HIDDEN em_tensor *em_ag_fn_layer_norm_double_backward(em_tensor *ggI, em_tensor *ggW, em_tensor *ggB,
                                                         em_tensor *grad_out, em_tensor *input,
                                                         em_intlist normalized_shape, em_tensor *mean,
                                                         em_tensor *rstd, em_tensor *weight, int64_t which);
/* batch_norm's likewise (native_batch_norm_backward; train picks the batch
 * statistics save_mean/save_invstd or the running ones). */
EM_HIDDEN em_tensor *em_ag_fn_batch_norm_grad(em_tensor *grad, em_tensor *input, em_tensor *weight,
                                              em_tensor *running_mean, em_tensor *running_var, em_tensor *save_mean,
                                              em_tensor *save_invstd, bool training, double eps, int64_t which);
EM_HIDDEN em_tensor *em_ag_fn_batch_norm_double_backward(em_tensor *ggI, em_tensor *ggW, em_tensor *ggB,
                                                         em_tensor *grad_out, em_tensor *input, em_tensor *weight,
                                                         em_tensor *running_mean, em_tensor *running_var,
                                                         em_tensor *save_mean, em_tensor *save_invstd, bool train,
                                                         double eps, int64_t which);
/* group_norm's likewise (native_group_norm_backward). */
EM_HIDDEN em_tensor *em_ag_fn_group_norm_grad(em_tensor *grad, em_tensor *input, em_tensor *mean, em_tensor *rstd,
                                              em_tensor *weight, int64_t group, int64_t which);
EM_HIDDEN em_tensor *em_ag_fn_group_norm_double_backward(em_tensor *ggI, em_tensor *ggW, em_tensor *ggB,
                                                         em_tensor *grad_out, em_tensor *input, em_tensor *mean,
                                                         em_tensor *rstd, em_tensor *weight, int64_t group,
                                                         int64_t which);

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

/* ---- family: embed (formulas_embed.c) ---- */
/* embedding_dense's gradient for weight: embedding_dense_backward with
 * weight's row count (weight_meta). */
EM_HIDDEN em_tensor *em_ag_fn_embedding_backward(em_tensor *grad, const em_input_meta *weight_meta,
                                                 em_tensor *indices, const int64_t *padding_idx,
                                                 bool scale_grad_by_freq);
/* The derivative of embedding_dense_backward w.r.t. grad_output: grad's
 * rows (num_weights, D) gathered at the ids, the padding row's ids zeroed
 * and, with scale_grad_by_freq, each divided by its id's count. */
EM_HIDDEN em_tensor *em_ag_fn_embedding_double_backward(em_tensor *grad, em_tensor *indices,
                                                        const int64_t *padding_idx, bool scale_grad_by_freq);
/* embedding_bag_dense's gradient for weight: embedding_bag_dense_backward
 * with weight's row count (weight_meta). */
EM_HIDDEN em_tensor *em_ag_fn_embedding_bag_backward(em_tensor *grad, const em_input_meta *weight_meta,
                                                     em_tensor *indices, em_tensor *offsets, em_tensor *max_indices,
                                                     const char *mode, em_tensor *per_sample_weights,
                                                     const int64_t *padding_idx, bool include_last_offset,
                                                     bool scale_grad_by_freq);
/* ---- family: loss2 (formulas_loss2.c) ---- */
/* binary_cross_entropy's target gradient grad * -logit(input) * weight (/ n). */
EM_HIDDEN em_tensor *em_ag_fn_bce_target_grad(em_tensor *grad, em_tensor *input, em_tensor *target,
                                              em_tensor *weight, const char *reduction);
/* binary_cross_entropy_backward's gradient for input (which 0) or target (1). */
EM_HIDDEN em_tensor *em_ag_fn_bce_double_backward(em_tensor *grad, em_tensor *grad_output, em_tensor *input,
                                                  em_tensor *target, em_tensor *weight, const char *reduction,
                                                  int64_t which);
/* binary_cross_entropy_with_logits's target gradient (pos_weight may be NULL). */
EM_HIDDEN em_tensor *em_ag_fn_bcewl_target_grad(em_tensor *grad, em_tensor *input, em_tensor *target,
                                                em_tensor *weight, em_tensor *pos_weight, const char *reduction);
/* binary_cross_entropy_with_logits_backward's gradient for input (which 0) or target (1). */
EM_HIDDEN em_tensor *em_ag_fn_bcewl_double_backward(em_tensor *grad, em_tensor *grad_output, em_tensor *input,
                                                    em_tensor *target, em_tensor *weight, em_tensor *pos_weight,
                                                    const char *reduction, int64_t which);
/* _ctc_loss_backward's derivative: not implemented (as PyTorch); sets the error. */
EM_HIDDEN em_tensor *em_ag_fn_ctc_double_backward(em_tensor *log_probs);
/* ---- family: grid (formulas_grid.c) ---- */
/* grid_sampler_2d_backward's derivative: not implemented (as PyTorch);
 * sets the error. */
EM_HIDDEN em_tensor *em_ag_fn_grid_sampler_double_backward(em_tensor *ggI, em_tensor *ggG);
/* grid_sampler_3d_backward's derivative: likewise not implemented. */
EM_HIDDEN em_tensor *em_ag_fn_grid_sampler_3d_double_backward(em_tensor *ggI, em_tensor *ggG);
/* grid_sampler_3d's gradient w.r.t. input (which 0) or grid (which 1):
 * that result of grid_sampler_3d_backward, computed alone. */
EM_HIDDEN em_tensor *em_ag_fn_grid_sampler_3d_grad(em_tensor *grad, em_tensor *input, em_tensor *grid,
                                                   const char *interpolation_mode, const char *padding_mode,
                                                   bool align_corners, int64_t which);
/* grid_sampler_2d's gradient w.r.t. input (which 0) or grid (which 1):
 * that result of grid_sampler_2d_backward, computed alone. */
EM_HIDDEN em_tensor *em_ag_fn_grid_sampler_2d_grad(em_tensor *grad, em_tensor *input, em_tensor *grid,
                                                   const char *interpolation_mode, const char *padding_mode,
                                                   bool align_corners, int64_t which);
/* upsample_aa's gradient: upsample_aa_backward to self's sizes. */
EM_HIDDEN em_tensor *em_ag_fn_upsample_aa_grad(em_tensor *grad, const em_input_meta *self_meta, em_intlist output_size,
                                               const char *mode, bool align_corners, const em_scalar *scales_h,
                                               const em_scalar *scales_w);

#endif
