/* formulas_grid.c -- backward helpers of the grid family (schema/
 * derivatives/grid.yaml); contracts in em_formulas.h.
 */
#include "autograd/em_formulas.h"
#include "autograd/em_autograd.h"
#include "em_ops.h"

em_tensor *em_ag_fn_grid_sampler_2d_grad(em_tensor *grad, em_tensor *input, em_tensor *grid,
                                         const char *interpolation_mode, const char *padding_mode,
                                         bool align_corners, int64_t which) {
    int64_t mask[2] = { which == 0, which == 1 };
    em_tensor *gg = NULL;
    em_tensor *gi = em_grid_sampler_2d_backward(grad, input, grid, interpolation_mode, padding_mode, align_corners,
                                                (em_intlist){ mask, 2 }, &gg);
    if (!gi) return NULL;
    em_tensor *keep = which == 0 ? gi : gg;
    em_tensor_release(which == 0 ? gg : gi);
    return keep;
}

em_tensor *em_ag_fn_grid_sampler_3d_grad(em_tensor *grad, em_tensor *input, em_tensor *grid,
                                         const char *interpolation_mode, const char *padding_mode,
                                         bool align_corners, int64_t which) {
    int64_t mask[2] = { which == 0, which == 1 };
    em_tensor *gg = NULL;
    em_tensor *gi = em_grid_sampler_3d_backward(grad, input, grid, interpolation_mode, padding_mode, align_corners,
                                                (em_intlist){ mask, 2 }, &gg);
    if (!gi) return NULL;
    em_tensor *keep = which == 0 ? gi : gg;
    em_tensor_release(which == 0 ? gg : gi);
    return keep;
}

em_tensor *em_ag_fn_upsample_aa_grad(em_tensor *grad, const em_input_meta *self_meta, em_intlist output_size,
                                     const char *mode, bool align_corners, const em_scalar *scales_h,
                                     const em_scalar *scales_w) {
    return em_upsample_aa_backward(grad, (em_intlist){ self_meta->sizes, self_meta->ndim }, output_size, mode,
                                   align_corners, scales_h, scales_w);
}

/* PyTorch 1.13 has no double backward of grid_sample: a create_graph
 * backward records grid_sampler_2d_backward's (or _3d_backward's) node, and
 * differentiating through it fails here with a catchable error. */
static em_tensor *no_double_backward(const char *op) {
    em_set_error(EM_ETYPE, "%s: the derivative of grid_sample's gradient is not implemented (as in PyTorch)", op);
    return NULL;
}

em_tensor *em_ag_fn_grid_sampler_double_backward(em_tensor *ggI, em_tensor *ggG) {
    (void)ggI;
    (void)ggG;
    return no_double_backward("grid_sampler_2d_backward");
}

em_tensor *em_ag_fn_grid_sampler_3d_double_backward(em_tensor *ggI, em_tensor *ggG) {
    (void)ggI;
    (void)ggG;
    return no_double_backward("grid_sampler_3d_backward");
}
