/* composite_spatial.c -- the spatial family's composite ops
 * (schema/ops/spatial.yaml, `kernels: {Composite: em_comp_NAME}`; see Note
 * [Composite ops] in codegen/codegen.h): F.pad over constant_pad_nd,
 * pad_mode and pad_circular, interpolate over the upsample kernels, attention over matmul
 * and softmax. Each checks what it can name better than its parts, then
 * calls ops through the public API (em_ops.h), never a kernel.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "autograd/em_autograd.h"
#include "em_ops.h"
#include "em_kernels_decl.h"

/* ---- pad ---- */

/* r, or with r NULL the error of the kernel op `part` (its message starts
 * "part: ") renamed to the user's op: "op: ...". Returns r. */
static em_tensor *as_op_error(em_tensor *r, const char *part, const char *op) {
    if (r) return r;
    const char *msg = em_error_message();
    size_t n = strlen(part);
    if (strncmp(msg, part, n) == 0 && strncmp(msg + n, ": ", 2) == 0) {
        char *copy = strdup(msg + n + 2);
        em_status kind = em_error_kind();
        if (copy) em_set_error(kind, "%s: %s", op, copy);
        free(copy);
    }
    return NULL;
}

/* F.pad as PyTorch 1.13's C++ pad: the pad list's checks, then constant ->
 * constant_pad_nd(value or 0); other modes take no value (0 is accepted)
 * and pad the last 1, 2 or 3 dims of an input with 1 or 2 more dims. */
em_tensor *em_comp_pad(em_keyset ks, em_tensor *input, em_intlist pad, const char *mode, const em_scalar *value) {
    (void)ks;
    char b[128];
    if (pad.n % 2 != 0) {
        em_set_error(EM_EVALUE, "pad: argument 'pad' must have an even length ((left, right) pairs, last dim first), "
                     "got %d entries", pad.n);
        return NULL;
    }
    if (pad.n / 2 > input->ndim) {
        em_set_error(EM_EVALUE, "pad: argument 'pad' pads %d dims but input %s has %d", pad.n / 2,
                     em_shape_str(input->ndim, input->sizes, b, sizeof b), input->ndim);
        return NULL;
    }
    if (strcmp(mode, "constant") == 0)
        return as_op_error(em_constant_pad_nd(input, pad, value ? *value : em_scalar_int(0)), "constant_pad_nd", "pad");
    if (value && em_scalar_to_double(*value) != 0) {
        em_set_error(EM_EVALUE, "pad: mode '%s' takes no argument 'value' (got %g)", mode, em_scalar_to_double(*value));
        return NULL;
    }
    int k = pad.n / 2;
    if (k < 1 || k > 3 || input->ndim < k + 1 || input->ndim > k + 2) {
        em_set_error(EM_ESHAPE, "pad: mode '%s' pads the last 1, 2 or 3 dims of an input with 1 or 2 more dims "
                     "(2 pad entries for 2-d/3-d input, 4 for 3-d/4-d, 6 for 4-d/5-d), got %d pad entries for input %s",
                     mode, pad.n, em_shape_str(input->ndim, input->sizes, b, sizeof b));
        return NULL;
    }
    if (strcmp(mode, "circular") == 0) return as_op_error(em_pad_circular(input, pad), "pad_circular", "pad");
    return as_op_error(em_pad_mode(input, pad, mode), "pad_mode", "pad");
}

/* ---- interpolate ---- */

/* F.interpolate as PyTorch 1.13's Python function: the argument checks in
 * its order, the output size (given, or trunc(in * scale_factor); with
 * recompute_scale_factor floor(in * scale_factor) and no scales passed on),
 * then upsample_nd with the scale factors for the coordinates. area and
 * antialias are refused (not implemented here). */
em_tensor *em_comp_interpolate(em_keyset ks, em_tensor *input, em_intlist size, em_floatlist scale_factor,
                               const char *mode, const em_scalar *align_corners, const em_scalar *recompute_scale_factor,
                               bool antialias) {
    (void)ks;
    const char *op = "interpolate";
    char b[128];
    static const char *const modes[] = { "nearest", "linear", "bilinear", "bicubic", "trilinear", "area", "nearest-exact" };
    int mi = -1;
    for (int i = 0; i < 7; i++)
        if (strcmp(mode, modes[i]) == 0) mi = i;
    if (mi < 0) {
        em_set_error(EM_EVALUE, "%s: argument 'mode' must be one of nearest, linear, bilinear, bicubic, trilinear, area, "
                     "nearest-exact (got '%s')", op, mode);
        return NULL;
    }
    bool nearestish = mi == 0 || mi == 5 || mi == 6;
    if (nearestish && align_corners) {
        em_set_error(EM_EVALUE, "%s: argument 'align_corners' can only be set with the interpolating modes: linear | "
                     "bilinear | bicubic | trilinear (mode is '%s')", op, mode);
        return NULL;
    }
    bool ac = align_corners && em_scalar_to_double(*align_corners) != 0;
    int dim = input->ndim - 2;
    bool has_size = size.n >= 0, has_scale = scale_factor.n >= 0;
    if (has_size && has_scale) {
        em_set_error(EM_EVALUE, "%s: only one of 'size' or 'scale_factor' should be given", op);
        return NULL;
    }
    if (!has_size && !has_scale) {
        em_set_error(EM_EVALUE, "%s: either 'size' or 'scale_factor' should be given", op);
        return NULL;
    }
    int n = has_size ? size.n : scale_factor.n;
    if (dim < 1 || dim > 3 || (n != 1 && n != dim)) {
        if (dim >= 1 && dim <= 3) {
            em_set_error(EM_ESHAPE, "%s: argument '%s' has %d entries but input %s has %d spatial dims (input is (N, C, d1, ...))",
                         op, has_size ? "size" : "scale_factor", n, em_shape_str(input->ndim, input->sizes, b, sizeof b), dim);
            return NULL;
        }
    }
    bool recompute = recompute_scale_factor && em_scalar_to_double(*recompute_scale_factor) != 0;
    if (recompute && has_size) {
        em_set_error(EM_EVALUE, "%s: argument 'recompute_scale_factor' is not meaningful with an explicit size", op);
        return NULL;
    }
    if (mi == 5) {
        em_set_error(EM_EVALUE, "%s: mode 'area' is not supported (use nn.functional.adaptive_avg_pool1d/2d/3d)", op);
        return NULL;
    }
    if (antialias) {
        if (!((mi == 2 || mi == 3) && input->ndim == 4))
            em_set_error(EM_EVALUE, "%s: argument 'antialias' is only supported for the bilinear and bicubic modes "
                         "(of 4-d input)", op);
        else
            em_set_error(EM_EVALUE, "%s: argument 'antialias' = true is not supported", op);
        return NULL;
    }
    static const int need[] = { 0, 3, 4, 4, 5, 0, 0 }; /* the input dims a mode needs (0: 3, 4 or 5) */
    if (input->ndim < 3 || input->ndim > 5) {
        em_set_error(EM_ESHAPE, "%s: only 3-d, 4-d and 5-d (N, C, ...) inputs are supported, got %s (mode '%s')", op,
                     em_shape_str(input->ndim, input->sizes, b, sizeof b), mode);
        return NULL;
    }
    if (need[mi] && input->ndim != need[mi]) {
        em_set_error(EM_ESHAPE, "%s: got a %d-d input %s, but mode '%s' needs a %d-d input", op, input->ndim,
                     em_shape_str(input->ndim, input->sizes, b, sizeof b), mode, need[mi]);
        return NULL;
    }
    int64_t out[3];
    em_scalar sc[3];
    bool use_scales = has_scale && !recompute;
    for (int i = 0; i < dim; i++) {
        int64_t in = input->sizes[2 + i];
        if (has_size) {
            out[i] = size.data[n == 1 ? 0 : i];
            continue;
        }
        double f = scale_factor.data[n == 1 ? 0 : i];
        double v = recompute ? floor((double)in * f) : (double)in * f;
        if (!(v > -9.2e18 && v < 9.2e18)) {
            em_set_error(EM_EVALUE, "%s: scale_factor %g gives an output size out of range for input %s", op, f,
                         em_shape_str(input->ndim, input->sizes, b, sizeof b));
            return NULL;
        }
        out[i] = (int64_t)v;
        sc[i] = em_scalar_float(f);
    }
    const em_scalar *s3[3] = { NULL, NULL, NULL };
    if (use_scales)
        for (int i = 0; i < dim; i++) s3[3 - dim + i] = &sc[i];
    const char *kmode = mi == 0 ? "nearest" : mi == 6 ? "nearest_exact" : mi == 3 ? "cubic" : "linear";
    return as_op_error(em_upsample_nd(input, (em_intlist){ out, dim }, kmode, ac, s3[0], s3[1], s3[2]), "upsample_nd", op);
}

em_tensor *em_comp_upsample(em_keyset ks, em_tensor *input, em_intlist size, em_floatlist scale_factor, const char *mode,
                            const em_scalar *align_corners) {
    (void)ks;
    return as_op_error(em_interpolate(input, size, scale_factor, mode, align_corners, NULL, false), "interpolate",
                       "upsample");
}

em_tensor *em_comp_upsample_nearest(em_keyset ks, em_tensor *input, em_intlist size, em_floatlist scale_factor) {
    (void)ks;
    return as_op_error(em_interpolate(input, size, scale_factor, "nearest", NULL, NULL, false), "interpolate",
                       "upsample_nearest");
}

em_tensor *em_comp_upsample_bilinear(em_keyset ks, em_tensor *input, em_intlist size, em_floatlist scale_factor) {
    (void)ks;
    em_scalar t = em_scalar_bool(true);
    return as_op_error(em_interpolate(input, size, scale_factor, "bilinear", &t, NULL, false), "interpolate",
                       "upsample_bilinear");
}
