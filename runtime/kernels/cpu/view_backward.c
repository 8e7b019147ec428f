/* view_backward.c -- the gradients of the views that pick part of a
 * tensor (narrow, select, slice): zeros of the input's shape with the
 * gradient copied into the picked region. Ops of their own (as in PyTorch)
 * so that a double backward records them and differentiates through. */
#include <string.h>

#include "kernels/cpu/em_cpu.h"

/* zeros(sizes) in grad's dtype with grad copied into region(zeros). */
static em_tensor *scatter(em_tensor *grad, em_intlist sizes, em_tensor *(*region)(em_tensor *, const void *),
                          const void *arg, const char *op) {
    if (sizes.n < 0 || sizes.n > EM_MAX_DIMS) {
        em_set_error(EM_EVALUE, "%s: input_sizes has %d entries (at most %d)", op, sizes.n, EM_MAX_DIMS);
        return NULL;
    }
    em_tensor *z = em_cpu_zeros(EM_KS(EM_KEY_CPU), sizes, grad->dtype, em_cpu_device());
    if (!z) return NULL;
    em_tensor *r = region(z, arg);
    if (!r || em_cpu_copy_into(r, grad, op) != EM_OK) {
        em_tensor_release(r);
        em_tensor_release(z);
        return NULL;
    }
    em_tensor_release(r);
    return z;
}

typedef struct { int64_t dim, a, b, step; const int64_t *pa, *pb; } region_args;

static em_tensor *narrow_region(em_tensor *z, const void *p) {
    const region_args *v = p;
    return em_core_narrow(z, v->dim, v->a, v->b);
}
static em_tensor *select_region(em_tensor *z, const void *p) {
    const region_args *v = p;
    return em_core_select(z, v->dim, v->a);
}
static em_tensor *slice_region(em_tensor *z, const void *p) {
    const region_args *v = p;
    return em_core_slice(z, v->dim, v->pa ? *v->pa : 0, v->pb ? *v->pb : INT64_MAX, v->step);
}

em_tensor *em_cpu_narrow_backward(em_keyset ks, em_tensor *grad_output, em_intlist input_sizes, int64_t dim,
                                  int64_t start, int64_t length) {
    (void)ks;
    region_args v = { dim, start, length, 1, NULL, NULL };
    return scatter(grad_output, input_sizes, narrow_region, &v, "narrow_backward");
}

em_tensor *em_cpu_select_backward(em_keyset ks, em_tensor *grad_output, em_intlist input_sizes, int64_t dim,
                                  int64_t index) {
    (void)ks;
    region_args v = { dim, index, 0, 1, NULL, NULL };
    return scatter(grad_output, input_sizes, select_region, &v, "select_backward");
}

em_tensor *em_cpu_slice_backward(em_keyset ks, em_tensor *grad_output, em_intlist input_sizes, int64_t dim,
                                 const int64_t *start, const int64_t *end, int64_t step) {
    (void)ks;
    region_args v = { dim, 0, 0, step, start, end };
    return scatter(grad_output, input_sizes, slice_region, &v, "slice_backward");
}
