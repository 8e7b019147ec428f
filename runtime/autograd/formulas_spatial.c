/* formulas_spatial.c -- formula helpers of the spatial family
 * (schema/derivatives/spatial.yaml), declared in em_formulas.h. Written with
 * the public ops only, so that create_graph records them (double backward). */
#include "autograd/em_formulas.h"
#include "em_ops.h"

em_tensor *em_ag_fn_constant_pad_backward(em_tensor *grad, em_intlist pad) {
    int64_t neg[2 * EM_MAX_DIMS];
    int n = pad.n < 0 ? 0 : pad.n > 2 * EM_MAX_DIMS ? 2 * EM_MAX_DIMS : pad.n;
    for (int i = 0; i < n; i++) neg[i] = -pad.data[i];
    return em_constant_pad_nd(grad, (em_intlist){ neg, n }, em_scalar_int(0));
}

em_tensor *em_ag_fn_pad_circular_grad(em_tensor *grad, const em_input_meta *self_meta, em_intlist pad) {
    return em_pad_circular_backward(grad, (em_intlist){ self_meta->sizes, self_meta->ndim }, pad);
}

em_tensor *em_ag_fn_zeros_of_meta(const em_input_meta *m) { return em_ag_zeros_from_meta(m); }

em_tensor *em_ag_fn_upsample_nd_grad(em_tensor *grad, const em_input_meta *self_meta, em_intlist output_size,
                                     const char *mode, bool align_corners, const em_scalar *scales_d,
                                     const em_scalar *scales_h, const em_scalar *scales_w) {
    return em_upsample_nd_backward(grad, (em_intlist){ self_meta->sizes, self_meta->ndim }, output_size, mode,
                                   align_corners, scales_d, scales_h, scales_w);
}
