/* formulas_pool.c -- helpers of the pool family's formulas
 * (schema/derivatives/pool.yaml), written with public ops only so that
 * create_graph records them. */
#include "autograd/em_formulas.h"
#include "em_ops.h"

/* See em_formulas.h. grad has the input's shape (..., plane dims), indices
 * the output's (..., output plane dims): flatten both planes, gather along
 * the flat plane (Note [Pooling indices]: 1-based, as gather takes them)
 * and give the result the indices' shape. */
em_tensor *em_ag_fn_max_pool_double_backward(em_tensor *grad, em_tensor *indices, int64_t nsp) {
    int gd = grad->ndim, id = indices->ndim;
    em_tensor *g = em_flatten(grad, gd - (int)nsp, -1);
    em_tensor *ix = g ? em_flatten(indices, id - (int)nsp, -1) : NULL;
    /* index 0 (a window over no input, see pool_max.c) reads position 1 and is then zeroed */
    em_tensor *zero = em_ag_scalar(0);
    em_tensor *none = ix && zero ? em_eq(ix, zero) : NULL;
    em_tensor *anyn = none ? em_any(none, NULL, false) : NULL;
    bool has_none = anyn && em_load_as_int64(em_tensor_data(anyn), anyn->dtype) != 0;
    em_tensor *ixc = anyn ? (has_none ? em_clamp_min(ix, em_scalar_int(1)) : em_tensor_retain(ix)) : NULL;
    em_tensor *r = ixc ? em_gather(g, -1, ixc) : NULL;
    if (r && has_none) {
        em_tensor *m = em_masked_fill(r, none, zero);
        em_tensor_release(r);
        r = m;
    }
    em_tensor *out = r ? em_reshape(r, (em_intlist){ indices->sizes, indices->ndim }) : NULL;
    em_tensor_release(g);
    em_tensor_release(ix);
    em_tensor_release(zero);
    em_tensor_release(none);
    em_tensor_release(anyn);
    em_tensor_release(ixc);
    em_tensor_release(r);
    return out;
}

/* See em_formulas.h. */
em_tensor *em_ag_fn_adaptive_avg_pool_double_backward(em_tensor *grad, const em_input_meta *grad_output_meta,
                                                      int64_t nsp) {
    em_intlist os = { grad_output_meta->sizes + grad_output_meta->ndim - nsp, (int)nsp };
    return nsp == 3 ? em_adaptive_avg_pool3d(grad, os) : em_adaptive_avg_pool2d(grad, os);
}

/* See em_formulas.h. */
em_tensor *em_ag_fn_max_unpool_backward(em_tensor *grad, em_tensor *indices, em_intlist output_size) {
    return em_ag_fn_max_pool_double_backward(grad, indices, output_size.n);
}
