/* em_conv.h -- the conv family's shared geometry: the argument checks of
 * convolution (and conv1d..conv_transpose3d) and the sizes they give,
 * backend-independent (composite_conv.c), used by every backend's kernels.
 *
 * Note [Convolution geometry]
 * A convolution relates an "image" (N, C_img, I...) and a "column side"
 * (N, C_col, O...) through a weight whose group g is a matrix
 * W_g = (C_col/G) x (C_img/G * prod(k)) (the weight {C_col, C_img/G, k...}
 * reshaped), and im2col, which turns an image into rows (c, k...) by columns
 * (o...), reading I[o * stride - pad + k * dil] (zero outside):
 *   col side = W_g @ im2col(image)           (conv forward, transposed's input grad)
 *   image    = col2im(W_g^T @ col side)      (conv input grad, transposed forward)
 *   grad W_g = col side @ im2col(image)^T    (both weight grads)
 * A regular convolution's input is the image and its output the column side
 * (weight {C_out, C_in/G, k...}); a transposed one's output is the image and
 * its input the column side (weight {C_in, C_out/G, k...}). The geometry
 * always states the image side as `img` and the column side as `col`, both
 * padded to 3 spatial dims with leading 1s (size 1, kernel 1, stride 1,
 * pad 0, dilation 1), so one kernel serves 1-d, 2-d and 3-d.
 */
#ifndef EM_CONV_H
#define EM_CONV_H

#include "core/em_core.h"

/* The largest stride, padding, dilation, output_padding or kernel size a
 * convolution, unfold or fold accepts: with every option below 2^31 the
 * geometry's sums and products (2 pad, dil (k - 1), C k k) stay inside
 * int64. Larger values are errors, not overflow. */
#define EM_CONV_OPT_MAX ((int64_t)INT32_MAX)

typedef struct em_conv_geom {
    int nsp;                 /* spatial dims of the op: 1, 2 or 3 */
    bool transposed;         /* the op's input is the column side */
    int64_t N, G;            /* batch, groups */
    int64_t C_img, C_col;    /* channels of the image and the column side */
    int64_t img[3], col[3];  /* spatial sizes (leading 1s) */
    int64_t k[3], stride[3], pad[3], dil[3]; /* per spatial dim (leading 1, 1, 0, 1) */
} em_conv_geom;

/* Checks the arguments of a convolution as PyTorch's convolution does
 * (input batched: {N, C, spatial...} with 1-3 spatial dims; every list
 * with exactly nsp values; weight of input's rank; bias 1-d of the output
 * channels; one floating dtype; positive stride, dilation and groups,
 * non-negative padding and output_padding below stride or dilation; the
 * channels and groups consistent; the dilated kernel within the padded
 * input; a positive output size) and fills *g. Messages name op and the
 * argument (conv2d's composite passes "conv2d", the kernel "convolution").
 * Returns EM_OK, or an error status with the error set. */
EM_HIDDEN em_status em_conv_check(const char *op, const em_tensor *input, const em_tensor *weight,
                                  const em_tensor *bias, em_intlist stride, em_intlist padding,
                                  em_intlist dilation, bool transposed, em_intlist output_padding,
                                  int64_t groups, em_conv_geom *g);

/* The sizes of convolution's output for a checked geometry (ndim = nsp + 2). */
EM_HIDDEN void em_conv_output_sizes(const em_conv_geom *g, int64_t *sizes);

#endif
