/* formulas_shape.c -- formula helpers of the shape family
 * (schema/derivatives/shape.yaml), declared in em_formulas.h. Like
 * formulas.c, written with the public ops only, so that create_graph records
 * them (double backward). */
#include "autograd/em_formulas.h"
#include "em_ops.h"

/* roll: grad rolled back by each shift taken modulo its dim's size (grad
 * has self's shape), so that negating never overflows. */
em_tensor *em_ag_fn_roll_backward(em_tensor *grad, em_intlist shifts, em_intlist dims) {
    int64_t neg[EM_MAX_DIMS];
    int n = shifts.n < 0 ? 0 : shifts.n;
    for (int i = 0; i < n && i < EM_MAX_DIMS; i++) {
        int64_t size = grad->numel;
        if (dims.n > 0 && i < dims.n) {
            int d = em_wrap_dim(dims.data[i], grad->ndim, "roll backward");
            if (d < 0) return NULL;
            size = grad->ndim ? grad->sizes[d] : 1;
        }
        neg[i] = size > 0 ? -(shifts.data[i] % size) : 0;
    }
    return em_roll(grad, (em_intlist){ neg, n }, dims);
}

em_tensor *em_ag_fn_rot90_backward(em_tensor *grad, int64_t k, em_intlist dims) {
    return em_rot90(grad, -(k % 4), dims);
}

/* grad has the repeated shape: per dim d with repeats r > 1, view dim d as
 * (r, size) and sum the r tiles; one dim at a time, so the view never has
 * more than one extra dim. Finally drop the leading dims repeat added. */
em_tensor *em_ag_fn_repeat_backward(em_tensor *grad, em_intlist repeats, const em_input_meta *self_meta) {
    int nr = repeats.n < 0 ? 0 : repeats.n, pad = nr - self_meta->ndim;
    em_tensor *g = em_tensor_retain(grad);
    for (int d = 0; d < nr && g; d++) {
        int64_t r = repeats.data[d];
        if (r == 1) continue;
        int64_t size = d < pad ? 1 : self_meta->sizes[d - pad];
        int64_t shape[EM_MAX_DIMS + 1];
        int n = 0;
        for (int k = 0; k < d; k++) shape[n++] = g->sizes[k];
        shape[n++] = r;
        shape[n++] = size;
        for (int k = d + 1; k < g->ndim; k++) shape[n++] = g->sizes[k];
        em_tensor *v = n <= EM_MAX_DIMS ? em_reshape(g, (em_intlist){ shape, n }) : NULL;
        if (n > EM_MAX_DIMS) em_set_error(EM_ESHAPE, "repeat backward: too many dims");
        int64_t dd = d;
        em_tensor *s = v ? em_sum(v, (em_intlist){ &dd, 1 }, false, EM_DTYPE_NONE) : NULL;
        em_tensor_release(v);
        em_tensor_release(g);
        g = s;
    }
    if (!g) return NULL;
    em_tensor *r = em_reshape(g, (em_intlist){ self_meta->sizes, self_meta->ndim });
    em_tensor_release(g);
    return r;
}
