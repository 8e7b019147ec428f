/* formulas_conv.c -- backward helpers of the conv family (schema/
 * derivatives/conv.yaml); contracts in em_formulas.h.
 *
 * convolution is bilinear in (input, weight): its gradients are
 * convolution_backward's, and the gradients of convolution_backward (given
 * ggI, ggW, ggb flowing into its grad_input, grad_weight, grad_bias) are,
 * as in PyTorch's _convolution_double_backward:
 *   grad_output: convolution(ggI, weight, ggb) + convolution(input, ggW)
 *   input:       the grad_input of convolution_backward(grad_output, input, ggW)
 *   weight:      the grad_weight of convolution_backward(grad_output, ggI, weight)
 * all written with the ops, so every further order works too. The bias's
 * gradient also comes from convolution_backward (not a sum of grad): as in
 * PyTorch it then has history whenever input or weight requires grad. A result
 * convolution_backward did not compute (its output_mask flag 0) is an empty
 * {0} tensor, and the zeros autograd makes for its gradient are {0} too:
 * such a gradient is recognised by its shape and left out.
 */
#include <string.h>

#include "autograd/em_formulas.h"
#include "autograd/em_autograd.h"
#include "em_ops.h"

static bool same_shape(const em_tensor *a, const em_tensor *b) {
    return a->ndim == b->ndim && memcmp(a->sizes, b->sizes, sizeof(int64_t) * (size_t)a->ndim) == 0;
}

/* result k of convolution_backward with only flag k set (the others released) */
static em_tensor *conv_bw_one(int k, em_tensor *grad, em_tensor *input, em_tensor *weight, em_intlist stride,
                              em_intlist padding, em_intlist dilation, bool transposed, em_intlist output_padding,
                              int64_t groups) {
    int64_t mask[3] = { k == 0, k == 1, k == 2 }, bias_size = grad->ndim > 1 ? grad->sizes[1] : 0;
    em_tensor *r[3] = { NULL, NULL, NULL };
    r[0] = em_convolution_backward(grad, input, weight, (em_intlist){ &bias_size, k == 2 ? 1 : -1 }, stride, padding, dilation, transposed,
                                   output_padding, groups, (em_intlist){ mask, 3 }, &r[1], &r[2]);
    for (int i = 0; i < 3; i++)
        if (i != k) em_tensor_release(r[i]);
    return r[0] ? r[k] : NULL;
}

em_tensor *em_ag_fn_conv_grad_input(em_tensor *grad, em_tensor *input, em_tensor *weight, em_intlist stride,
                                    em_intlist padding, em_intlist dilation, bool transposed, em_intlist output_padding,
                                    int64_t groups) {
    return conv_bw_one(0, grad, input, weight, stride, padding, dilation, transposed, output_padding, groups);
}

em_tensor *em_ag_fn_conv_grad_weight(em_tensor *grad, em_tensor *input, em_tensor *weight, em_intlist stride,
                                     em_intlist padding, em_intlist dilation, bool transposed,
                                     em_intlist output_padding, int64_t groups) {
    return conv_bw_one(1, grad, input, weight, stride, padding, dilation, transposed, output_padding, groups);
}

em_tensor *em_ag_fn_conv_grad_bias(em_tensor *grad, em_tensor *input, em_tensor *weight, em_intlist stride,
                                   em_intlist padding, em_intlist dilation, bool transposed, em_intlist output_padding,
                                   int64_t groups) {
    return conv_bw_one(2, grad, input, weight, stride, padding, dilation, transposed, output_padding, groups);
}

em_tensor *em_ag_fn_conv_dd_grad_output(em_tensor *ggI, em_tensor *ggW, em_tensor *ggb, em_tensor *grad_output,
                                        em_tensor *input, em_tensor *weight, em_intlist stride, em_intlist padding,
                                        em_intlist dilation, bool transposed, em_intlist output_padding,
                                        int64_t groups) {
    /* a gradient that did not flow is NULL ('u' parameters): its term is
     * skipped, so a missing ggI or ggW records no graph through weight or
     * input (PyTorch's _convolution_double_backward tests .defined()) */
    bool has_i = ggI && same_shape(ggI, input), has_w = ggW && same_shape(ggW, weight);
    bool has_b = ggb && ggb->ndim == 1 && grad_output->ndim >= 2 && ggb->sizes[0] == grad_output->sizes[1];
    em_tensor *r = NULL;
    if (has_i) {
        r = em_convolution(ggI, weight, has_b ? ggb : NULL, stride, padding, dilation, transposed, output_padding,
                           groups);
        if (!r) return NULL;
        has_b = false;
    }
    if (has_w) {
        em_tensor *t = em_convolution(input, ggW, has_b ? ggb : NULL, stride, padding, dilation, transposed,
                                      output_padding, groups);
        has_b = false;
        if (!t || !r) {
            em_tensor_release(r);
            return t;
        }
        em_tensor *s = em_add(r, t, em_scalar_int(1));
        em_tensor_release(r);
        em_tensor_release(t);
        r = s;
        if (!r) return NULL;
    }
    if (has_b) { /* only ggb: it broadcast over grad_output's shape */
        int64_t shape[EM_MAX_DIMS];
        for (int d = 0; d < grad_output->ndim; d++) shape[d] = d == 1 ? ggb->sizes[0] : 1;
        em_tensor *v = em_reshape(ggb, (em_intlist){ shape, grad_output->ndim });
        if (!v) return NULL;
        r = em_expand(v, (em_intlist){ grad_output->sizes, grad_output->ndim });
        em_tensor_release(v);
    }
    return r ? r : em_zeros_like(grad_output, EM_DTYPE_NONE);
}

em_tensor *em_ag_fn_conv_dd_input(em_tensor *ggW, em_tensor *grad_output, em_tensor *input, em_intlist stride,
                                  em_intlist padding, em_intlist dilation, bool transposed, em_intlist output_padding,
                                  int64_t groups) {
    if (ggW->ndim != input->ndim) return em_zeros_like(input, EM_DTYPE_NONE);
    em_tensor *x = em_detach(input); /* only its shape counts: no history through it */
    em_tensor *r = x ? conv_bw_one(0, grad_output, x, ggW, stride, padding, dilation, transposed, output_padding, groups)
                     : NULL;
    em_tensor_release(x);
    return r;
}

em_tensor *em_ag_fn_conv_dd_weight(em_tensor *ggI, em_tensor *grad_output, em_tensor *weight, em_intlist stride,
                                   em_intlist padding, em_intlist dilation, bool transposed, em_intlist output_padding,
                                   int64_t groups) {
    if (ggI->ndim != weight->ndim) return em_zeros_like(weight, EM_DTYPE_NONE);
    em_tensor *w = em_detach(weight); /* only its shape counts: no history through it */
    em_tensor *r = w ? conv_bw_one(1, grad_output, ggI, w, stride, padding, dilation, transposed, output_padding, groups)
                     : NULL;
    em_tensor_release(w);
    return r;
}

em_tensor *em_ag_fn_unfold_backward_fold(em_tensor *grad, const em_input_meta *input_meta, em_intlist kernel_size,
                                         em_intlist dilation, em_intlist padding, em_intlist stride) {
    const int64_t *os = input_meta->sizes + input_meta->ndim - 2;
    return em_fold(grad, (em_intlist){ os, 2 }, kernel_size, dilation, padding, stride);
}
