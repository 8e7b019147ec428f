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
#include "kernels/em_comp_error.h"

/* ---- pad ---- */

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
        return em_comp_as_op_error(em_constant_pad_nd(input, pad, value ? *value : em_scalar_int(0)), "constant_pad_nd", "pad");
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
    if (strcmp(mode, "circular") == 0) return em_comp_as_op_error(em_pad_circular(input, pad), "pad_circular", "pad");
    return em_comp_as_op_error(em_pad_mode(input, pad, mode), "pad_mode", "pad");
}

/* ---- interpolate ---- */

/* F.interpolate as PyTorch 1.13's Python function: the argument checks in
 * its order, the output size (given, or trunc(in * scale_factor); with
 * recompute_scale_factor floor(in * scale_factor) and no scales passed on),
 * then upsample_nd with the scale factors for the coordinates; area is
 * adaptive_avg_poolNd to the output size, antialias (bilinear, bicubic)
 * upsample_aa. */
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
    if (antialias && !((mi == 2 || mi == 3) && input->ndim == 4)) {
        em_set_error(EM_EVALUE, "%s: argument 'antialias' is only supported for the bilinear and bicubic modes "
                     "(of 4-d input)", op);
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
    if (mi == 5) { /* area: adaptive average pooling to the output size, as PyTorch */
        em_intlist os = { out, dim };
        if (dim == 1) return em_comp_as_op_error(em_adaptive_avg_pool1d(input, os), "adaptive_avg_pool1d", op);
        if (dim == 2) return em_comp_as_op_error(em_adaptive_avg_pool2d(input, os), "adaptive_avg_pool2d", op);
        return em_comp_as_op_error(em_adaptive_avg_pool3d(input, os), "adaptive_avg_pool3d", op);
    }
    const em_scalar *s3[3] = { NULL, NULL, NULL };
    if (use_scales)
        for (int i = 0; i < dim; i++) s3[3 - dim + i] = &sc[i];
    if (antialias) /* the separable filters of upsample_aa (grid family; Note [Antialiased interpolation]) */
        return em_comp_as_op_error(em_upsample_aa(input, (em_intlist){ out, 2 }, mi == 2 ? "linear" : "cubic", ac, s3[1], s3[2]),
                           "upsample_aa", op);
    const char *kmode = mi == 0 ? "nearest" : mi == 6 ? "nearest_exact" : mi == 3 ? "cubic" : "linear";
    return em_comp_as_op_error(em_upsample_nd(input, (em_intlist){ out, dim }, kmode, ac, s3[0], s3[1], s3[2]), "upsample_nd", op);
}

em_tensor *em_comp_upsample(em_keyset ks, em_tensor *input, em_intlist size, em_floatlist scale_factor, const char *mode,
                            const em_scalar *align_corners) {
    (void)ks;
    return em_comp_as_op_error(em_interpolate(input, size, scale_factor, mode, align_corners, NULL, false), "interpolate",
                       "upsample");
}

em_tensor *em_comp_upsample_nearest(em_keyset ks, em_tensor *input, em_intlist size, em_floatlist scale_factor) {
    (void)ks;
    return em_comp_as_op_error(em_interpolate(input, size, scale_factor, "nearest", NULL, NULL, false), "interpolate",
                       "upsample_nearest");
}

em_tensor *em_comp_upsample_bilinear(em_keyset ks, em_tensor *input, em_intlist size, em_floatlist scale_factor) {
    (void)ks;
    em_scalar t = em_scalar_bool(true);
    return em_comp_as_op_error(em_interpolate(input, size, scale_factor, "bilinear", &t, NULL, false), "interpolate",
                       "upsample_bilinear");
}

/* ---- attention ---- */

/* Releases *t and replaces it with r (NULL on error: *t becomes NULL). */
static bool step(em_tensor **t, em_tensor *r) {
    em_tensor_release(*t);
    *t = r;
    return r != NULL;
}

/* PyTorch 2.1's documented math (F.scaled_dot_product_attention):
 * w = q @ k^T * scale; masked positions (causal: key after the query; bool
 * mask false) -> -inf, a float mask is added; softmax over the keys;
 * dropout (bernoulli keep mask / (1 - p)) when dropout_p > 0; w @ v.
 * (The argument PyTorch calls `key` is key_ here: codegen reserves `key`.) */
em_tensor *em_comp_scaled_dot_product_attention(em_keyset ks, em_tensor *query, em_tensor *key_, em_tensor *value,
                                                em_tensor *attn_mask, double dropout_p, bool is_causal,
                                                const em_scalar *scale) {
    (void)ks;
    const char *op = "scaled_dot_product_attention";
    char a[128], b[128], c[128];
    if (query->ndim < 2 || key_->ndim < 2 || value->ndim < 2) {
        em_set_error(EM_ESHAPE, "%s: query, key_ and value need at least 2 dims (..., L or S, E), got %s, %s and %s", op,
                     em_shape_str(query->ndim, query->sizes, a, sizeof a), em_shape_str(key_->ndim, key_->sizes, b, sizeof b),
                     em_shape_str(value->ndim, value->sizes, c, sizeof c));
        return NULL;
    }
    if (query->sizes[query->ndim - 1] != key_->sizes[key_->ndim - 1] ||
        key_->sizes[key_->ndim - 2] != value->sizes[value->ndim - 2]) {
        em_set_error(EM_ESHAPE, "%s: query %s and key_ %s need the same last dim and key_ and value %s the same "
                     "second-to-last dim", op, em_shape_str(query->ndim, query->sizes, a, sizeof a),
                     em_shape_str(key_->ndim, key_->sizes, b, sizeof b), em_shape_str(value->ndim, value->sizes, c, sizeof c));
        return NULL;
    }
    if (!(dropout_p >= 0 && dropout_p <= 1)) {
        em_set_error(EM_EVALUE, "%s: argument 'dropout_p' must be in [0, 1], got %g", op, dropout_p);
        return NULL;
    }
    if (is_causal && attn_mask) {
        em_set_error(EM_EVALUE, "%s: give either 'attn_mask' or 'is_causal', not both", op);
        return NULL;
    }
    if (!em_dtype_is_floating(query->dtype)) {
        em_set_error(EM_ETYPE, "%s: query must be a float tensor, got %s", op, em_dtype_name(query->dtype));
        return NULL;
    }
    int64_t L = query->sizes[query->ndim - 2], S = key_->sizes[key_->ndim - 2], E = query->sizes[query->ndim - 1];
    double sc = scale ? em_scalar_to_double(*scale) : 1.0 / sqrt((double)E);
    em_tensor *kt = em_transpose(key_, -2, -1);
    if (!kt) return NULL;
    em_tensor *w = em_matmul(query, kt);
    em_tensor_release(kt);
    if (!w) return em_comp_as_op_error(NULL, "matmul", op);
    em_tensor *s = em_tensor_wrapped_scalar(em_scalar_float(sc));
    bool ok = s && step(&w, em_mul(w, s));
    em_tensor_release(s);
    em_tensor *ninf = ok ? em_tensor_wrapped_scalar(em_scalar_float(-INFINITY)) : NULL;
    ok = ok && ninf;
    if (ok && is_causal) {
        int64_t ls[2] = { L, S };
        em_tensor *ones = em_ones((em_intlist){ ls, 2 }, EM_BOOL, query->device);
        em_tensor *keep = ones ? em_tril(ones, 0) : NULL;
        em_tensor *drop = keep ? em_logical_not(keep) : NULL;
        ok = drop && step(&w, em_masked_fill(w, drop, ninf));
        em_tensor_release(ones);
        em_tensor_release(keep);
        em_tensor_release(drop);
    } else if (ok && attn_mask && attn_mask->dtype == EM_BOOL) {
        em_tensor *drop = em_logical_not(attn_mask);
        ok = drop && step(&w, em_masked_fill(w, drop, ninf));
        em_tensor_release(drop);
    } else if (ok && attn_mask) {
        ok = step(&w, em_add(w, attn_mask, em_scalar_int(1)));
    }
    em_tensor_release(ninf);
    ok = ok && step(&w, em_softmax(w, -1, EM_DTYPE_NONE));
    if (ok && dropout_p > 0) {
        em_tensor *keep = dropout_p < 1 ? em_bernoulli_p(w, 1 - dropout_p, NULL) : em_zeros_like(w, EM_DTYPE_NONE);
        ok = keep && step(&w, em_mul(w, keep));
        em_tensor_release(keep);
        if (ok && dropout_p < 1) {
            em_tensor *d = em_tensor_wrapped_scalar(em_scalar_float(1 - dropout_p));
            ok = d && step(&w, em_div(w, d));
            em_tensor_release(d);
        }
    }
    ok = ok && step(&w, em_matmul(w, value));
    if (!ok) {
        em_tensor_release(w);
        return em_comp_as_op_error(NULL, "matmul", op);
    }
    return w;
}
