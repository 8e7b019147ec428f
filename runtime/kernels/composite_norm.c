/* composite_norm.c -- the normalisation family's nn.functional entry points
 * (layer_norm, ...), written with public ops only as composite.c explains
 * (Note [Composite ops] in codegen/codegen.h): each checks its arguments
 * (so errors name the op the user called) and calls the family's fused
 * native_* op, whose formula gives autograd. */
#include "autograd/em_autograd.h"
#include "em_ops.h"
#include "em_kernels_decl.h"
#include "kernels/norm_check.h"

em_tensor *em_comp_layer_norm(em_keyset ks, em_tensor *input, em_intlist normalized_shape, em_tensor *weight,
                              em_tensor *bias, double eps) {
    (void)ks;
    int64_t M, N;
    if (!em_norm_check_layer_norm(input, normalized_shape, weight, bias, "layer_norm", &M, &N)) return NULL;
    em_tensor *mean = NULL, *rstd = NULL;
    em_tensor *y = em_native_layer_norm(input, normalized_shape, weight, bias, eps, &mean, &rstd);
    em_tensor_release(mean);
    em_tensor_release(rstd);
    return y;
}

/* F.batch_norm: the training check of torch's functional batch_norm, then
 * native_batch_norm (which updates the running statistics in place). */
em_tensor *em_comp_batch_norm(em_keyset ks, em_tensor *input, em_tensor *running_mean, em_tensor *running_var,
                              em_tensor *weight, em_tensor *bias, bool training, double momentum, double eps) {
    (void)ks;
    const char *op = "batch_norm";
    if (!em_norm_check_batch_norm(input, weight, bias, op)) return NULL;
    if (training) {
        int64_t n = input->sizes[0];
        for (int d = 2; d < input->ndim; d++) n *= input->sizes[d];
        if (n == 1) {
            char b[EM_SHAPE_STR_MAX];
            em_set_error(EM_EVALUE, "%s: expected more than 1 value per channel when training, got input of shape %s",
                         op, em_shape_str(input->ndim, input->sizes, b, sizeof b));
            return NULL;
        }
    } else if (!running_mean || !running_var) {
        em_set_error(EM_EVALUE, "%s: running_mean and running_var must be given in evaluation mode (training=false)",
                     op);
        return NULL;
    }
    em_tensor *sm = NULL, *si = NULL;
    em_tensor *y = em_native_batch_norm(input, weight, bias, running_mean, running_var, training, momentum, eps, &sm, &si);
    em_tensor_release(sm);
    em_tensor_release(si);
    return y;
}

em_tensor *em_comp_group_norm(em_keyset ks, em_tensor *input, int64_t num_groups, em_tensor *weight, em_tensor *bias,
                              double eps) {
    (void)ks;
    if (!em_norm_check_group_norm(input, num_groups, weight, bias, "group_norm")) return NULL;
    em_tensor *mean = NULL, *rstd = NULL;
    em_tensor *y = em_native_group_norm(input, weight, bias, num_groups, eps, &mean, &rstd);
    em_tensor_release(mean);
    em_tensor_release(rstd);
    return y;
}
