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
