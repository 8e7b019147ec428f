/* grid_sample.c -- CPU kernels of the grid family (schema/ops/grid.yaml):
 * grid_sampler_2d, grid_sampler_3d and their backward ops.
 *
 * Note [Grid sampling]
 * Output point (n, h, w) reads input plane n at the grid's (x, y) =
 * grid[n, h, w, 1..2], normalised to [-1, 1] over the width and the height.
 * The rules are PyTorch 1.13's vectorised CPU kernel's
 * (aten/src/ATen/native/cpu/GridSamplerKernel.cpp), computed in the
 * tensor's dtype (float or double) in the same order:
 *   unnormalise: align_corners ? (c + 1) (size - 1)/2 : (c + 1) size/2 - 0.5
 *   border:      clamp to [0, size - 1], NaN -> 0
 *   reflection:  reflect at 0 and size - 1 (align_corners) or at -0.5 and
 *                size - 0.5 (|x| mod twice the span, folded), then clamp
 *   bilinear:    corners floor(x), floor(x) + 1 (and y), weights from the
 *                distances; a corner outside the input reads 0, and every
 *                corner is multiplied by its weight (a NaN coordinate under
 *                zeros padding gives NaN, as in PyTorch)
 *   nearest:     round half to even of the padded coordinate
 *   bicubic:     taps floor(x) - 1 .. + 2 of the unnormalised (unpadded)
 *                coordinate, each tap padded on its own; Keys' weights with
 *                A = -0.75; a tap outside the input reads 0
 * The backward's grid gradient multiplies by the derivative of the
 * coordinate map: (size - 1)/2 or size/2, times 0 where border/reflection
 * clamp (the edges themselves count as clamped) and times -1 where
 * reflection flips. Nearest has a zero grid gradient.
 *
 * Note [Volumetric grid sampling]
 * grid_sampler_3d (input (N, C, D, H, W), grid (N, Do, Ho, Wo, 3) holding
 * x, y, z) follows PyTorch 1.13's scalar kernel (GridSampler.cpp), whose
 * arithmetic and edge cases differ from the 2-d vectorised one:
 *   unnormalise: align_corners ? ((c + 1) / 2) (size - 1) : ((c + 1) size - 1) / 2
 *   border:      min(size - 1, max(x, 0)) -- NaN gives size - 1 in the
 *                forward (std::min/max), stays NaN in the backward
 *   reflection:  fmod-based, then clamped as border
 *   trilinear:   the 8 corners of the cell, each added only when inside the
 *                input (a NaN or infinite coordinate under zeros padding
 *                reads nothing: 0, not NaN), in PyTorch's order tnw, tne,
 *                tsw, tse, bnw, bne, bsw, bse
 *   nearest:     round half away from zero (std::round, where the 2-d
 *                kernel rounds half to even); bicubic is refused (4-d only)
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/cpu/em_cpu.h"

enum { GS_BILINEAR, GS_NEAREST, GS_BICUBIC };
enum { GS_ZEROS, GS_BORDER, GS_REFLECTION };

/* one spatial axis: its size, padding and unnormalisation scale */
typedef struct {
    int64_t size;
    double scale; /* (size - 1)/2 with align_corners, else size/2 */
    bool ac;
    int pad;
} gs_axis;

typedef struct {
    gs_axis ax, ay, az; /* width (x), height (y), depth (z; 3-d only) */
    int mode;
    int64_t C, OD, OH, OW; /* OD: 3-d only */
    const void *input, *grid, *gout; /* contiguous, the loop dtype */
    void *out, *ginp, *ggrid;         /* ginp/ggrid NULL when not computed */
} gs_ctx;

/* the template's math functions per type: GS_(floor) is floor_f32 */
#define GS_T float
#define GS_(x) x##_f32
#define floor_f32 floorf
#define trunc_f32 truncf
#define nearbyint_f32 nearbyintf
#define fmod_f32 fmodf
#define round_f32 roundf
#define fabs_f32 fabsf
#include "kernels/cpu/grid_sample_tmpl.h"
#include "kernels/cpu/grid_sample3d_tmpl.h"
#undef GS_T
#undef GS_

#define GS_T double
#define GS_(x) x##_f64
#define floor_f64 floor
#define trunc_f64 trunc
#define nearbyint_f64 nearbyint
#define fmod_f64 fmod
#define round_f64 round
#define fabs_f64 fabs
#include "kernels/cpu/grid_sample_tmpl.h"
#include "kernels/cpu/grid_sample3d_tmpl.h"
#undef GS_T
#undef GS_

static int mode_of(const char *m) {
    return strcmp(m, "nearest") == 0 ? GS_NEAREST : strcmp(m, "bicubic") == 0 ? GS_BICUBIC : GS_BILINEAR;
}
static int pad_of(const char *p) {
    return strcmp(p, "border") == 0 ? GS_BORDER : strcmp(p, "reflection") == 0 ? GS_REFLECTION : GS_ZEROS;
}

static gs_axis axis_of(int64_t size, bool ac, int pad) {
    gs_axis a = { size, ac ? (double)(size - 1) / 2 : (double)size / 2, ac, pad };
    return a;
}

/* The checks shared by both directions (PyTorch's check_grid_sampler_*):
 * 4-d input and grid, one float dtype, equal batch, grid's last dim 2,
 * non-empty spatial dims of the input. */
static em_status check_args(const em_tensor *input, const em_tensor *grid, const char *op) {
    char a[128], b[128];
    if (input->ndim != 4 || grid->ndim != 4)
        return em_set_error(EM_ESHAPE, "%s: expected a 4-d input (N, C, H, W) and a 4-d grid (N, Ho, Wo, 2), got input %s "
                            "and grid %s", op, em_shape_str(input->ndim, input->sizes, a, sizeof a),
                            em_shape_str(grid->ndim, grid->sizes, b, sizeof b));
    if (grid->sizes[0] != input->sizes[0])
        return em_set_error(EM_ESHAPE, "%s: expected grid and input to have the same batch size, got input %s and grid %s",
                            op, em_shape_str(4, input->sizes, a, sizeof a), em_shape_str(4, grid->sizes, b, sizeof b));
    if (grid->sizes[3] != 2)
        return em_set_error(EM_ESHAPE, "%s: expected grid to have size 2 in its last dim (x, y), got grid %s", op,
                            em_shape_str(4, grid->sizes, b, sizeof b));
    if (input->sizes[2] <= 0 || input->sizes[3] <= 0)
        return em_set_error(EM_ESHAPE, "%s: expected input to have non-empty spatial dims, got input %s", op,
                            em_shape_str(4, input->sizes, a, sizeof a));
    if (input->dtype != EM_FLOAT32 && input->dtype != EM_FLOAT64)
        return em_set_error(EM_ETYPE, "%s: input must be float32 or float64, got %s", op, em_dtype_name(input->dtype));
    if (grid->dtype != input->dtype)
        return em_set_error(EM_ETYPE, "%s: grid must have input's dtype %s, got %s", op, em_dtype_name(input->dtype),
                            em_dtype_name(grid->dtype));
    return EM_OK;
}

/* t itself (retained) when contiguous, else a contiguous copy */
static em_tensor *dense(em_tensor *t, const char *op) {
    return t->is_contiguous ? em_tensor_retain(t) : em_cpu_to_dtype(t, t->dtype, op);
}

static void ctx_init(gs_ctx *k, const em_tensor *input, const em_tensor *grid, const char *mode, const char *pad,
                     bool ac) {
    memset(k, 0, sizeof *k);
    k->mode = mode_of(mode);
    k->ax = axis_of(input->sizes[3], ac, pad_of(pad));
    k->ay = axis_of(input->sizes[2], ac, pad_of(pad));
    k->C = input->sizes[1];
    k->OH = grid->sizes[1];
    k->OW = grid->sizes[2];
}

/* work of one output row (n, oh) in multiply-adds, for the grain */
static int64_t row_grain(const gs_ctx *k) {
    int64_t per = k->OW * (k->C > 0 ? k->C : 1) * (k->mode == GS_BICUBIC ? 20 : k->mode == GS_BILINEAR ? 4 : 1);
    return per >= EM_CPU_GRAIN ? 1 : EM_CPU_GRAIN / (per > 0 ? per : 1);
}

static em_tensor *forward_nd(int nsp, const char *op, em_tensor *input, em_tensor *grid,
                             const char *interpolation_mode, const char *padding_mode, bool align_corners);

em_tensor *em_cpu_grid_sampler_2d(em_keyset ks, em_tensor *input, em_tensor *grid, const char *interpolation_mode,
                                  const char *padding_mode, bool align_corners) {
    (void)ks;
    const char *op = "grid_sampler_2d";
    if (check_args(input, grid, op) != EM_OK) return NULL;
    return forward_nd(2, op, input, grid, interpolation_mode, padding_mode, align_corners);
}

static em_tensor *backward_nd(int nsp, const char *op, em_tensor *grad_output, em_tensor *input, em_tensor *grid,
                              const char *interpolation_mode, const char *padding_mode, bool align_corners,
                              em_intlist output_mask, em_tensor **grad_grid);

em_tensor *em_cpu_grid_sampler_2d_backward(em_keyset ks, em_tensor *grad_output, em_tensor *input, em_tensor *grid,
                                           const char *interpolation_mode, const char *padding_mode,
                                           bool align_corners, em_intlist output_mask, em_tensor **grad_grid) {
    (void)ks;
    const char *op = "grid_sampler_2d_backward";
    *grad_grid = NULL;
    if (check_args(input, grid, op) != EM_OK) return NULL;
    return backward_nd(2, op, grad_output, input, grid, interpolation_mode, padding_mode, align_corners, output_mask,
                       grad_grid);
}

/* ---- volumetric (Note [Volumetric grid sampling]) ---- */

/* grid_sampler_3d's checks (PyTorch's check_grid_sampler_common and _3d):
 * 5-d input and grid, equal batch, grid's last dim 3, non-empty spatial
 * dims, one float dtype, no bicubic. */
static em_status check_args3(const em_tensor *input, const em_tensor *grid, const char *mode, const char *op) {
    char a[128], b[128];
    if (input->ndim != 5 || grid->ndim != 5)
        return em_set_error(EM_ESHAPE, "%s: expected a 5-d input (N, C, D, H, W) and a 5-d grid (N, Do, Ho, Wo, 3), got "
                            "input %s and grid %s", op, em_shape_str(input->ndim, input->sizes, a, sizeof a),
                            em_shape_str(grid->ndim, grid->sizes, b, sizeof b));
    if (grid->sizes[0] != input->sizes[0])
        return em_set_error(EM_ESHAPE, "%s: expected grid and input to have the same batch size, got input %s and grid %s",
                            op, em_shape_str(5, input->sizes, a, sizeof a), em_shape_str(5, grid->sizes, b, sizeof b));
    if (grid->sizes[4] != 3)
        return em_set_error(EM_ESHAPE, "%s: expected grid to have size 3 in its last dim (x, y, z), got grid %s", op,
                            em_shape_str(5, grid->sizes, b, sizeof b));
    if (input->sizes[2] <= 0 || input->sizes[3] <= 0 || input->sizes[4] <= 0)
        return em_set_error(EM_ESHAPE, "%s: expected input to have non-empty spatial dims, got input %s", op,
                            em_shape_str(5, input->sizes, a, sizeof a));
    if (input->dtype != EM_FLOAT32 && input->dtype != EM_FLOAT64)
        return em_set_error(EM_ETYPE, "%s: input must be float32 or float64, got %s", op, em_dtype_name(input->dtype));
    if (grid->dtype != input->dtype)
        return em_set_error(EM_ETYPE, "%s: grid must have input's dtype %s, got %s", op, em_dtype_name(input->dtype),
                            em_dtype_name(grid->dtype));
    if (mode_of(mode) == GS_BICUBIC)
        return em_set_error(EM_EVALUE, "%s: bicubic interpolation only supports 4-d input, got input %s", op,
                            em_shape_str(5, input->sizes, a, sizeof a));
    return EM_OK;
}

static void ctx_init3(gs_ctx *k, const em_tensor *input, const em_tensor *grid, const char *mode, const char *pad,
                      bool ac) {
    memset(k, 0, sizeof *k);
    k->mode = mode_of(mode);
    k->ax = axis_of(input->sizes[4], ac, pad_of(pad));
    k->ay = axis_of(input->sizes[3], ac, pad_of(pad));
    k->az = axis_of(input->sizes[2], ac, pad_of(pad));
    k->C = input->sizes[1];
    k->OD = grid->sizes[1];
    k->OH = grid->sizes[2];
    k->OW = grid->sizes[3];
}

em_tensor *em_cpu_grid_sampler_3d(em_keyset ks, em_tensor *input, em_tensor *grid, const char *interpolation_mode,
                                  const char *padding_mode, bool align_corners) {
    (void)ks;
    const char *op = "grid_sampler_3d";
    if (check_args3(input, grid, interpolation_mode, op) != EM_OK) return NULL;
    return forward_nd(3, op, input, grid, interpolation_mode, padding_mode, align_corners);
}

/* The body the 2-d and 3-d forward ops share (nsp = 2 or 3 spatial dims;
 * the caller has checked input and grid): the result and the parallel
 * loop over its rows. */
static em_tensor *forward_nd(int nsp, const char *op, em_tensor *input, em_tensor *grid,
                             const char *interpolation_mode, const char *padding_mode, bool align_corners) {
    int nd = nsp + 2;
    int64_t sizes[5] = { input->sizes[0], input->sizes[1] };
    for (int d = 0; d < nsp; d++) sizes[2 + d] = grid->sizes[1 + d];
    em_tensor *out = em_tensor_new(nd, sizes, input->dtype, em_cpu_device());
    if (!out || out->numel == 0) return out;
    em_tensor *in = dense(input, op), *gr = in ? dense(grid, op) : NULL;
    if (!gr) {
        em_tensor_release(in);
        em_tensor_release(out);
        return NULL;
    }
    gs_ctx k;
    if (nsp == 2)
        ctx_init(&k, input, grid, interpolation_mode, padding_mode, align_corners);
    else
        ctx_init3(&k, input, grid, interpolation_mode, padding_mode, align_corners);
    k.input = em_tensor_data(in);
    k.grid = em_tensor_data(gr);
    k.out = em_tensor_data(out);
    bool dbl = input->dtype == EM_FLOAT64;
    em_cpu_parallel_for(sizes[0] * (nsp == 3 ? k.OD : 1) * k.OH, row_grain(&k),
                        nsp == 2 ? (dbl ? fwd_rows_f64 : fwd_rows_f32) : (dbl ? fwd3_rows_f64 : fwd3_rows_f32), &k);
    em_tensor_release(in);
    em_tensor_release(gr);
    return out;
}

/* The body the 2-d and 3-d backward ops share (nsp = 2 or 3 spatial dims;
 * the caller has checked input and grid): grad_output's checks, the results
 * output_mask asks for, and the parallel loops. */
static em_tensor *backward_nd(int nsp, const char *op, em_tensor *grad_output, em_tensor *input, em_tensor *grid,
                              const char *interpolation_mode, const char *padding_mode, bool align_corners,
                              em_intlist output_mask, em_tensor **grad_grid) {
    char a[128], b[128];
    if (output_mask.n != 2) {
        em_set_error(EM_EVALUE, "%s: output_mask must have 2 entries (grad_input, grad_grid), got %d", op, output_mask.n);
        return NULL;
    }
    int nd = nsp + 2;
    int64_t sizes[5] = { input->sizes[0], input->sizes[1] };
    for (int d = 0; d < nsp; d++) sizes[2 + d] = grid->sizes[1 + d];
    if (grad_output->ndim != nd || memcmp(grad_output->sizes, sizes, sizeof(int64_t) * (size_t)nd) != 0) {
        em_set_error(EM_ESHAPE, "%s: grad_output has shape %s, expected %s", op,
                     em_shape_str(grad_output->ndim, grad_output->sizes, a, sizeof a), em_shape_str(nd, sizes, b, sizeof b));
        return NULL;
    }
    if (grad_output->dtype != input->dtype) {
        em_set_error(EM_ETYPE, "%s: grad_output must have input's dtype %s, got %s", op, em_dtype_name(input->dtype),
                     em_dtype_name(grad_output->dtype));
        return NULL;
    }
    bool want_in = output_mask.data[0] != 0, want_grid = output_mask.data[1] != 0;
    int64_t zero = 0;
    em_intlist none = { &zero, 1 };
    em_tensor *gi = em_cpu_zeros(EM_KS(EM_KEY_CPU), want_in ? (em_intlist){ input->sizes, nd } : none, input->dtype,
                                 em_cpu_device());
    em_tensor *gg = gi ? em_cpu_zeros(EM_KS(EM_KEY_CPU), want_grid ? (em_intlist){ grid->sizes, nd } : none,
                                      grid->dtype, em_cpu_device())
                       : NULL;
    em_tensor *in = gg ? dense(input, op) : NULL, *gr = in ? dense(grid, op) : NULL;
    em_tensor *go = gr ? dense(grad_output, op) : NULL;
    if (!go) goto fail;
    if ((want_in || want_grid) && grad_output->numel > 0) {
        gs_ctx k;
        if (nsp == 2)
            ctx_init(&k, input, grid, interpolation_mode, padding_mode, align_corners);
        else
            ctx_init3(&k, input, grid, interpolation_mode, padding_mode, align_corners);
        k.input = em_tensor_data(in);
        k.grid = em_tensor_data(gr);
        k.gout = em_tensor_data(go);
        k.ginp = want_in ? em_tensor_data(gi) : NULL;
        k.ggrid = want_grid ? em_tensor_data(gg) : NULL;
        bool dbl = input->dtype == EM_FLOAT64;
        if (want_in) /* each batch element owns its grad_input slice */
            em_cpu_parallel_for(sizes[0], 1, nsp == 2 ? (dbl ? bwd_batches_f64 : bwd_batches_f32)
                                                      : (dbl ? bwd3_batches_f64 : bwd3_batches_f32), &k);
        else
            em_cpu_parallel_for(sizes[0] * (nsp == 3 ? k.OD : 1) * k.OH, row_grain(&k),
                                nsp == 2 ? (dbl ? bwd_rows_f64 : bwd_rows_f32) : (dbl ? bwd3_rows_f64 : bwd3_rows_f32), &k);
    }
    em_tensor_release(in);
    em_tensor_release(gr);
    em_tensor_release(go);
    *grad_grid = gg;
    return gi;
fail:
    em_tensor_release(in);
    em_tensor_release(gr);
    em_tensor_release(gi);
    em_tensor_release(gg);
    return NULL;
}

em_tensor *em_cpu_grid_sampler_3d_backward(em_keyset ks, em_tensor *grad_output, em_tensor *input, em_tensor *grid,
                                           const char *interpolation_mode, const char *padding_mode,
                                           bool align_corners, em_intlist output_mask, em_tensor **grad_grid) {
    (void)ks;
    const char *op = "grid_sampler_3d_backward";
    *grad_grid = NULL;
    if (check_args3(input, grid, interpolation_mode, op) != EM_OK) return NULL;
    return backward_nd(3, op, grad_output, input, grid, interpolation_mode, padding_mode, align_corners, output_mask,
                       grad_grid);
}
