/* conv_wino.h -- the Winograd F(2x2, 3x3) path of conv.c's products
 * (conv_winograd.c), private to the conv family's CPU kernels. Note
 * [Winograd convolution] in conv_winograd.c says when it runs and why.
 */
#ifndef EM_CONV_WINO_H
#define EM_CONV_WINO_H

#include "core/em_core.h"
#include "kernels/em_conv.h"

/* Whether the Winograd path takes the product of g in compute dtype ct
 * whose input has c_in channels and whose output has c_out (the image and
 * column side's channels, in the product's direction). */
EM_HIDDEN bool em_conv_wino_applies(const em_conv_geom *g, em_dtype ct, int64_t c_in, int64_t c_out);

/* The image -> column side product of g (to_image false: conv's forward,
 * out (N, C_col, col...) from in (N, C_img, img...)) or the column side ->
 * image one (to_image true: conv's input gradient, out (N, C_img, img...)
 * from in (N, C_col, col...)), float32, contiguous, for a g that
 * em_conv_wino_applies accepts; w is the weight {C_col, C_img, 3, 3}. out
 * is overwritten. EM_OK, or an error status with the error set (out of
 * memory, interrupted). */
EM_HIDDEN em_status em_conv_wino(const em_conv_geom *g, bool to_image, const float *in, const float *w, float *out,
                                 const char *op);

/* The weight gradient of g: gw {C_col, C_img, 3, 3} = the sum over
 * samples and positions of cs (N, C_col, col...) times the image (N, C_img,
 * img...) under each tap (conv's weight gradient with cs = grad_output,
 * img = input; a transposed one's with cs = input, img = grad_output),
 * float32, contiguous, for a g that em_conv_wino_applies accepts (with
 * C_img in, C_col out). gw is overwritten. EM_OK or an error status. */
EM_HIDDEN em_status em_conv_wino_weight(const em_conv_geom *g, const float *cs, const float *img, float *gw,
                                        const char *op);

#endif
