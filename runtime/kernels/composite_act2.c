/* composite_act2.c -- torch.nn.functional's activations with `inplace`
 * (schema/ops/act2.yaml): functional_X is ember.nn.functional.X (Note
 * [Shadowed names] in codegen/parse.c). inplace calls the in-place op X_
 * (which bumps input's version, refuses a leaf that requires grad and
 * records X_'s autograd node, as PyTorch's F.X(inplace=True) calls
 * torch.X_) and returns input itself; else the op X. An error of X_ or X
 * is renamed to nn.functional.X, the function the user called (whose
 * argument errors the binding names so). */
#include "em_ops.h"
#include "em_kernels_decl.h"
#include "kernels/em_comp_error.h"

/* r (the result of X_ or X), or NULL with the error renamed to F's name */
#define AS_X(r, name) em_comp_as_op_error((r), inplace ? name "_" : name, "nn.functional." name)

em_tensor *em_comp_functional_relu(em_keyset ks, em_tensor *input, bool inplace) {
    (void)ks;
    return AS_X(inplace ? em_relu_(input) : em_relu(input), "relu");
}

/* relu6 is hardtanh(x, 0, 6), in place hardtanh_ (PyTorch's F.relu6) */
em_tensor *em_comp_functional_relu6(em_keyset ks, em_tensor *input, bool inplace) {
    (void)ks;
    em_scalar lo = em_scalar_int(0), hi = em_scalar_int(6);
    return em_comp_as_op_error(inplace ? em_hardtanh_(input, lo, hi) : em_relu6(input),
                               inplace ? "hardtanh_" : "hardtanh", "nn.functional.relu6");
}

em_tensor *em_comp_functional_elu(em_keyset ks, em_tensor *input, em_scalar alpha, bool inplace) {
    (void)ks;
    return AS_X(inplace ? em_elu_(input, alpha) : em_elu(input, alpha), "elu");
}

em_tensor *em_comp_functional_leaky_relu(em_keyset ks, em_tensor *input, em_scalar negative_slope, bool inplace) {
    (void)ks;
    return AS_X(inplace ? em_leaky_relu_(input, negative_slope) : em_leaky_relu(input, negative_slope),
                "leaky_relu");
}

em_tensor *em_comp_functional_hardtanh(em_keyset ks, em_tensor *input, em_scalar min_val, em_scalar max_val,
                                       bool inplace) {
    (void)ks;
    return AS_X(inplace ? em_hardtanh_(input, min_val, max_val) : em_hardtanh(input, min_val, max_val),
                "hardtanh");
}

em_tensor *em_comp_functional_selu(em_keyset ks, em_tensor *input, bool inplace) {
    (void)ks;
    return AS_X(inplace ? em_selu_(input) : em_selu(input), "selu");
}

em_tensor *em_comp_functional_celu(em_keyset ks, em_tensor *input, em_scalar alpha, bool inplace) {
    (void)ks;
    return AS_X(inplace ? em_celu_(input, alpha) : em_celu(input, alpha), "celu");
}

em_tensor *em_comp_functional_silu(em_keyset ks, em_tensor *input, bool inplace) {
    (void)ks;
    return AS_X(inplace ? em_silu_(input) : em_silu(input), "silu");
}

em_tensor *em_comp_functional_mish(em_keyset ks, em_tensor *input, bool inplace) {
    (void)ks;
    return AS_X(inplace ? em_mish_(input) : em_mish(input), "mish");
}

em_tensor *em_comp_functional_hardsigmoid(em_keyset ks, em_tensor *input, bool inplace) {
    (void)ks;
    return AS_X(inplace ? em_hardsigmoid_(input) : em_hardsigmoid(input), "hardsigmoid");
}

em_tensor *em_comp_functional_hardswish(em_keyset ks, em_tensor *input, bool inplace) {
    (void)ks;
    return AS_X(inplace ? em_hardswish_(input) : em_hardswish(input), "hardswish");
}

em_tensor *em_comp_functional_threshold(em_keyset ks, em_tensor *input, em_scalar threshold, em_scalar value,
                                        bool inplace) {
    (void)ks;
    return AS_X(inplace ? em_threshold_(input, threshold, value) : em_threshold(input, threshold, value),
                "threshold");
}
