/* spatial_upsample.c -- CPU kernels of interpolate (schema/ops/spatial.yaml):
 * upsample_nd (nearest, nearest_exact, linear, cubic over the last 1-3 dims
 * of an (N, C, ...) input) and upsample_nd_backward.
 *
 * Note [Upsample taps]
 * Every mode is separable: output index o of a spatial dim reads up to four
 * input indices ("taps") with weights, computed once per dim with PyTorch
 * 1.13's coordinate rules (aten/src/ATen/native/UpSample.h):
 *   nearest:       floorf(o * s) (s = 1/scale_factor when given, else in/out,
 *                  as float; PyTorch's CPU kernel takes no out == 2 in shortcut)
 *   nearest_exact: floorf((o + 0.5) * s)             (both capped at in - 1)
 *   linear:        x = align_corners ? o (in-1)/(out-1) : max(s (o + 0.5) - 0.5, 0);
 *                  taps floor(x) and the next (capped), weights 1 - l, l
 *   cubic:         x as linear without the clamp at 0; taps floor(x)-1..+2
 *                  clamped to the edge, Keys' weights with A = -0.75
 * out == in is the identity for nearest and linear. Coordinates are
 * computed in float for float32/bfloat16 and double for float64, as
 * PyTorch's kernels do. The output is the sum over the taps of every dim of
 * the weights' product times the input; the backward adds the same products
 * of grad_output into the input positions. Planes (N * C) run in parallel,
 * so the backward's sums need no atomics and do not depend on the thread count.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/cpu/em_cpu.h"

enum { UP_NEAREST, UP_NEAREST_EXACT, UP_LINEAR, UP_CUBIC };
#define UP_TAPS 4

static int mode_of(const char *m) {
    return strcmp(m, "nearest") == 0 ? UP_NEAREST : strcmp(m, "nearest_exact") == 0 ? UP_NEAREST_EXACT
         : strcmp(m, "linear") == 0 ? UP_LINEAR : UP_CUBIC;
}
static int ntaps(int mode) { return mode == UP_CUBIC ? 4 : mode == UP_LINEAR ? 2 : 1; }

/* One spatial dim's taps: idx[o * UP_TAPS + t], w[o * UP_TAPS + t]. */
typedef struct {
    int64_t in, out;
    int64_t *idx;
    double *w;
} up_dim;

static double cubic1(double x, double a) { return ((a + 2) * x - (a + 3)) * x * x + 1; }
static double cubic2(double x, double a) { return ((a * x - 5 * a) * x + 8 * a) * x - 4 * a; }

/* Fills d's taps for mode (scale: the user's scale factor for this dim, or
 * NULL); dbl: coordinates in double (float64) instead of float. */
static void dim_taps(up_dim *d, int mode, bool align_corners, const em_scalar *scale, bool dbl) {
    int64_t in = d->in, out = d->out;
    double sc = scale ? em_scalar_to_double(*scale) : 0;
    bool has = scale && sc > 0;
    for (int64_t o = 0; o < out; o++) {
        int64_t *ix = d->idx + o * UP_TAPS;
        double *w = d->w + o * UP_TAPS;
        for (int t = 0; t < UP_TAPS; t++) ix[t] = 0, w[t] = 0;
        if (mode == UP_NEAREST || mode == UP_NEAREST_EXACT) {
            float s = has ? (float)(1.0 / sc) : (float)in / (float)out;
            int64_t j;
            if (mode == UP_NEAREST) j = (int64_t)floorf((float)o * s);
            else j = (int64_t)floorf((float)((double)o + 0.5) * s);
            ix[0] = j < in - 1 ? j : in - 1;
            w[0] = 1;
            continue;
        }
        if (mode == UP_LINEAR && out == in) {
            ix[0] = ix[1] = o;
            w[0] = 1;
            continue;
        }
        double x;
        if (dbl) {
            double s = align_corners ? (out > 1 ? (double)(in - 1) / (double)(out - 1) : 0)
                                     : has ? 1.0 / sc : (double)in / (double)out;
            x = align_corners ? s * (double)o : s * ((double)o + 0.5) - 0.5;
        } else {
            float s = align_corners ? (out > 1 ? (float)(in - 1) / (float)(out - 1) : 0.f)
                                    : has ? (float)(1.0 / sc) : (float)in / (float)out;
            x = align_corners ? (double)(s * (float)o) : (double)(s * ((float)o + 0.5f) - 0.5f);
        }
        if (mode == UP_LINEAR) {
            if (!align_corners && x < 0) x = 0;
            int64_t i0 = (int64_t)x;
            double l = x - (double)i0;
            l = l < 0 ? 0 : l > 1 ? 1 : l;
            if (!dbl) l = (float)l;
            ix[0] = i0;
            ix[1] = i0 + (i0 < in - 1 ? 1 : 0);
            w[0] = 1 - l;
            w[1] = l;
        } else {
            int64_t i0 = (int64_t)floor(x);
            if (i0 > in - 1) i0 = in - 1;
            double t = x - (double)i0;
            t = t < 0 ? 0 : t > 1 ? 1 : t;
            const double a = -0.75;
            w[0] = cubic2(t + 1, a);
            w[1] = cubic1(t, a);
            w[2] = cubic1(1 - t, a);
            w[3] = cubic2(2 - t, a);
            for (int k = 0; k < 4; k++) {
                int64_t j = i0 - 1 + k;
                ix[k] = j < 0 ? 0 : j > in - 1 ? in - 1 : j;
                if (!dbl) w[k] = (float)w[k];
            }
        }
    }
}

/* The plan: three spatial slots (leading size-1 slots when fewer dims). */
typedef struct {
    int64_t planes;
    up_dim d[3];
    int taps;  /* taps of the mode */
    int nt[3]; /* taps per slot: the mode's, 1 for a size-1 filler slot */
    void *block;
} up_plan;

static em_status plan_make(up_plan *p, int ndim, const int64_t *in_sizes, em_intlist output_size, int mode,
                           bool align_corners, const em_scalar *sd, const em_scalar *sh, const em_scalar *sw,
                           bool dbl, const char *op) {
    int k = output_size.n;
    p->planes = in_sizes[0] * in_sizes[1];
    p->taps = ntaps(mode);
    const em_scalar *sc[3] = { sd, sh, sw };
    int64_t total = 0;
    for (int i = 0; i < 3; i++) {
        int d = ndim - 3 + i;
        bool real = i >= 3 - k;
        p->d[i].in = real ? in_sizes[d] : 1;
        p->d[i].out = real ? output_size.data[k - (3 - i)] : 1;
        total += p->d[i].out;
    }
    p->block = malloc((size_t)total * UP_TAPS * (sizeof(int64_t) + sizeof(double)) + 1);
    if (!p->block) return em_set_error(EM_ENOMEM, "%s: out of memory for the interpolation taps", op);
    char *m = p->block;
    for (int i = 0; i < 3; i++) {
        p->d[i].idx = (int64_t *)m;
        m += p->d[i].out * UP_TAPS * (int64_t)sizeof(int64_t);
    }
    for (int i = 0; i < 3; i++) {
        p->d[i].w = (double *)m;
        m += p->d[i].out * UP_TAPS * (int64_t)sizeof(double);
        bool real = i >= 3 - k;
        p->nt[i] = real ? p->taps : 1;
        if (real) {
            dim_taps(&p->d[i], mode, align_corners, sc[i], dbl);
        } else {
            memset(p->d[i].idx, 0, UP_TAPS * sizeof(int64_t));
            for (int t = 0; t < UP_TAPS; t++) p->d[i].w[t] = t == 0 ? 1 : 0;
        }
    }
    return EM_OK;
}

/* The checks of both directions: an (N, C, spatial...) input with 1-3
 * spatial dims matching output_size, positive sizes, the mode's dims. */
static em_status check_geometry(int ndim, const int64_t *in_sizes, em_intlist output_size, int mode, const char *op) {
    char a[128], b[128];
    int k = output_size.n;
    if (k < 1 || k > 3 || ndim != k + 2)
        return em_set_error(EM_ESHAPE, "%s: output_size %s must give one size per spatial dim of the (N, C, ...) input %s "
                            "(1 to 3 spatial dims)", op, em_shape_str(k < 0 ? 0 : k, output_size.data, a, sizeof a),
                            em_shape_str(ndim, in_sizes, b, sizeof b));
    if (mode == UP_CUBIC && k != 2)
        return em_set_error(EM_ESHAPE, "%s: bicubic interpolation needs a 4-d (N, C, H, W) input, got %s", op,
                            em_shape_str(ndim, in_sizes, b, sizeof b));
    for (int i = 0; i < k; i++) {
        if (in_sizes[2 + i] <= 0 || output_size.data[i] <= 0)
            return em_set_error(EM_EVALUE, "%s: input and output sizes should be greater than 0, got input %s and "
                                "output_size %s", op, em_shape_str(ndim, in_sizes, b, sizeof b),
                                em_shape_str(k, output_size.data, a, sizeof a));
    }
    if (in_sizes[1] == 0)
        return em_set_error(EM_ESHAPE, "%s: the input's channel dim is empty: %s", op, em_shape_str(ndim, in_sizes, b, sizeof b));
    return EM_OK;
}

typedef struct {
    const up_plan *p;
    const char *src;
    char *dst;
    em_dtype dt; /* the loop dtype: float32 (also for bfloat16 and uint8), float64 */
    void *wt;    /* bilinear: the weight table (bil_table), else NULL */
} up_ctx;

static bool is_bilinear(const up_plan *p) { return p->nt[0] == 1 && p->nt[1] == 2 && p->nt[2] == 2 && p->d[0].out == 1; }

/* The bilinear weight table of c (four products per output position, in
 * the loop dtype), or NULL (not bilinear, or out of memory: the general
 * loops then run, with the same results). */
static void *bil_table(const up_plan *p, em_dtype dt) {
    if (!is_bilinear(p)) return NULL;
    int64_t n = p->d[1].out * p->d[2].out * 4;
    void *t = malloc((size_t)n * (dt == EM_FLOAT64 ? sizeof(double) : sizeof(float)));
    if (!t) return NULL;
    double wa = p->d[0].w[0];
    for (int64_t b = 0, q = 0; b < p->d[1].out; b++)
        for (int64_t k = 0; k < p->d[2].out; k++)
            for (int tb = 0; tb < 2; tb++)
                for (int tc = 0; tc < 2; tc++, q++) {
                    double w = (wa * p->d[1].w[b * UP_TAPS + tb]) * p->d[2].w[k * UP_TAPS + tc];
                    if (dt == EM_FLOAT64) ((double *)t)[q] = w;
                    else ((float *)t)[q] = (float)w;
                }
    return t;
}

/* One output element of plane-local input `s` (row-major in0 x in1 x in2). */
#define UP_GATHER(T, ACC)                                                                      \
    for (int64_t a = 0; a < p->d[0].out; a++)                                                  \
        for (int64_t b = 0; b < p->d[1].out; b++)                                              \
            for (int64_t c = 0; c < p->d[2].out; c++) {                                        \
                ACC acc = 0;                                                                   \
                for (int ta = 0; ta < p->nt[0]; ta++) {                                       \
                    double wa = p->d[0].w[a * UP_TAPS + ta];                                   \
                    int64_t ia = p->d[0].idx[a * UP_TAPS + ta] * p->d[1].in;                   \
                    for (int tb = 0; tb < p->nt[1]; tb++) {                                   \
                        double wb = wa * p->d[1].w[b * UP_TAPS + tb];                          \
                        const T *row = s + (ia + p->d[1].idx[b * UP_TAPS + tb]) * p->d[2].in;  \
                        for (int tc = 0; tc < p->nt[2]; tc++) {                               \
                            double wc = p->d[2].w[c * UP_TAPS + tc];                           \
                            acc += (ACC)(wb * wc) * (ACC)row[p->d[2].idx[c * UP_TAPS + tc]];   \
                        }                                                                      \
                    }                                                                          \
                }                                                                              \
                *o++ = (T)acc;                                                                 \
            }

/* The 2-d linear case (taps 1 x 2 x 2: bilinear) unrolled: the weight
 * products (ACC)(wb * wc) of UP_GATHER / UP_SCATTER (whose filler weight wa
 * is 1, so wb is exact) are made once per call into a table of four per
 * output position (bil_table), shared by every plane, and added in the same
 * order, so the results are bit for bit theirs without the tap loops and
 * the double products per element. */
#define UP_BILINEAR_ROWS(T, BODY)                                                              \
    for (int64_t b = 0; b < p->d[1].out; b++) {                                                \
        const int64_t *ib = p->d[1].idx + b * UP_TAPS;                                         \
        const T *s0 = s + ib[0] * p->d[2].in, *s1 = s + ib[1] * p->d[2].in;                    \
        const T *wt = (const T *)c->wt + b * p->d[2].out * 4;                                  \
        const int64_t *ic = p->d[2].idx;                                                       \
        for (int64_t k = 0; k < p->d[2].out; k++, wt += 4) {                                   \
            const int64_t i0 = ic[k * UP_TAPS], i1 = ic[k * UP_TAPS + 1];                      \
            BODY                                                                               \
        }                                                                                      \
    }
#define UP_BIL_GATHER(T)                                                                       \
    UP_BILINEAR_ROWS(T, {                                                                      \
        T acc = 0;                                                                             \
        acc += wt[0] * s0[i0];                                                                 \
        acc += wt[1] * s0[i1];                                                                 \
        acc += wt[2] * s1[i0];                                                                 \
        acc += wt[3] * s1[i1];                                                                 \
        *o++ = acc;                                                                            \
    })
#define UP_BIL_SCATTER(T)                                                                      \
    UP_BILINEAR_ROWS(T, {                                                                      \
        T g = *o++;                                                                            \
        ((T *)s0)[i0] += wt[0] * g;                                                            \
        ((T *)s0)[i1] += wt[1] * g;                                                            \
        ((T *)s1)[i0] += wt[2] * g;                                                            \
        ((T *)s1)[i1] += wt[3] * g;                                                            \
    })

static void up_fwd_planes(int64_t begin, int64_t end, void *vctx) {
    const up_ctx *c = vctx;
    const up_plan *p = c->p;
    int64_t in_plane = p->d[0].in * p->d[1].in * p->d[2].in, out_plane = p->d[0].out * p->d[1].out * p->d[2].out;
    for (int64_t pl = begin; pl < end; pl++) {
        if (c->wt) {
            if (c->dt == EM_FLOAT64) {
                const double *s = (const double *)c->src + pl * in_plane;
                double *o = (double *)c->dst + pl * out_plane;
                UP_BIL_GATHER(double)
            } else {
                const float *s = (const float *)c->src + pl * in_plane;
                float *o = (float *)c->dst + pl * out_plane;
                UP_BIL_GATHER(float)
            }
            continue;
        }
        if (c->dt == EM_FLOAT64) {
            const double *s = (const double *)c->src + pl * in_plane;
            double *o = (double *)c->dst + pl * out_plane;
            UP_GATHER(double, double)
        } else {
            const float *s = (const float *)c->src + pl * in_plane;
            float *o = (float *)c->dst + pl * out_plane;
            UP_GATHER(float, float)
        }
    }
}

#define UP_SCATTER(T)                                                                          \
    for (int64_t a = 0; a < p->d[0].out; a++)                                                  \
        for (int64_t b = 0; b < p->d[1].out; b++)                                              \
            for (int64_t c = 0; c < p->d[2].out; c++) {                                        \
                T g = *o++;                                                                    \
                for (int ta = 0; ta < p->nt[0]; ta++) {                                       \
                    double wa = p->d[0].w[a * UP_TAPS + ta];                                   \
                    int64_t ia = p->d[0].idx[a * UP_TAPS + ta] * p->d[1].in;                   \
                    for (int tb = 0; tb < p->nt[1]; tb++) {                                   \
                        double wb = wa * p->d[1].w[b * UP_TAPS + tb];                          \
                        T *row = s + (ia + p->d[1].idx[b * UP_TAPS + tb]) * p->d[2].in;        \
                        for (int tc = 0; tc < p->nt[2]; tc++) {                               \
                            double wc = p->d[2].w[c * UP_TAPS + tc];                           \
                            row[p->d[2].idx[c * UP_TAPS + tc]] += (T)(wb * wc) * g;            \
                        }                                                                      \
                    }                                                                          \
                }                                                                              \
            }

static void up_bwd_planes(int64_t begin, int64_t end, void *vctx) {
    const up_ctx *c = vctx;
    const up_plan *p = c->p;
    int64_t in_plane = p->d[0].in * p->d[1].in * p->d[2].in, out_plane = p->d[0].out * p->d[1].out * p->d[2].out;
    for (int64_t pl = begin; pl < end; pl++) {
        if (c->wt) {
            if (c->dt == EM_FLOAT64) {
                double *s = (double *)c->dst + pl * in_plane;
                const double *o = (const double *)c->src + pl * out_plane;
                UP_BIL_SCATTER(double)
            } else {
                float *s = (float *)c->dst + pl * in_plane;
                const float *o = (const float *)c->src + pl * out_plane;
                UP_BIL_SCATTER(float)
            }
            continue;
        }
        if (c->dt == EM_FLOAT64) {
            double *s = (double *)c->dst + pl * in_plane;
            const double *o = (const double *)c->src + pl * out_plane;
            UP_SCATTER(double)
        } else {
            float *s = (float *)c->dst + pl * in_plane;
            const float *o = (const float *)c->src + pl * out_plane;
            UP_SCATTER(float)
        }
    }
}

static int64_t up_grain(const up_plan *p) {
    int64_t per = p->d[0].out * p->d[1].out * p->d[2].out * p->taps * (p->taps > 1 ? 2 : 1);
    return per >= EM_CPU_GRAIN ? 1 : EM_CPU_GRAIN / (per > 0 ? per : 1);
}

/* PyTorch 1.13's CPU dtypes: nearest float32/64, bfloat16, uint8;
 * nearest_exact float32/64, uint8; linear and cubic float32/64, bfloat16. */
static bool dtype_ok(em_dtype dt, int mode) {
    if (dt == EM_FLOAT32 || dt == EM_FLOAT64) return true;
    if (dt == EM_BFLOAT16) return mode != UP_NEAREST_EXACT;
    if (dt == EM_UINT8) return mode == UP_NEAREST || mode == UP_NEAREST_EXACT;
    return false;
}

em_tensor *em_cpu_upsample_nd(em_keyset ks, em_tensor *self, em_intlist output_size, const char *mode,
                              bool align_corners, const em_scalar *scales_d, const em_scalar *scales_h,
                              const em_scalar *scales_w) {
    (void)ks;
    const char *op = "upsample_nd";
    int md = mode_of(mode);
    if (!dtype_ok(self->dtype, md)) {
        em_set_error(EM_ETYPE, "%s: %s interpolation is not supported for dtype %s", op, mode, em_dtype_name(self->dtype));
        return NULL;
    }
    if (check_geometry(self->ndim, self->sizes, output_size, md, op) != EM_OK) return NULL;
    int64_t sizes[EM_MAX_DIMS] = { self->sizes[0], self->sizes[1] };
    for (int i = 0; i < output_size.n; i++) sizes[2 + i] = output_size.data[i];
    em_dtype loop = self->dtype == EM_FLOAT64 ? EM_FLOAT64 : EM_FLOAT32;
    em_tensor *out = em_tensor_new(self->ndim, sizes, loop, em_cpu_device());
    if (!out || out->numel == 0) goto cast;
    up_plan p;
    if (plan_make(&p, self->ndim, self->sizes, output_size, md, align_corners, scales_d, scales_h, scales_w,
                  loop == EM_FLOAT64, op) != EM_OK) {
        em_tensor_release(out);
        return NULL;
    }
    em_tensor *src = self->is_contiguous && self->dtype == loop ? em_tensor_retain(self) : em_cpu_to_dtype(self, loop, op);
    if (!src) {
        free(p.block);
        em_tensor_release(out);
        return NULL;
    }
    up_ctx c = { &p, em_tensor_data(src), em_tensor_data(out), loop, bil_table(&p, loop) };
    em_cpu_parallel_for_stoppable(p.planes, up_grain(&p), up_fwd_planes, &c);
    free(c.wt);
    em_tensor_release(src);
    free(p.block);
    if (em_cpu_interrupted(op)) { /* Note [Interrupts in kernels], way (b) */
        em_tensor_release(out);
        return NULL;
    }
cast:
    if (out && out->dtype != self->dtype) { /* bfloat16 / uint8: computed in float32 */
        em_tensor *r = em_cpu_to_dtype(out, self->dtype, op);
        em_tensor_release(out);
        out = r;
    }
    return out;
}

em_tensor *em_cpu_upsample_nd_backward(em_keyset ks, em_tensor *grad_output, em_intlist input_size,
                                       em_intlist output_size, const char *mode, bool align_corners,
                                       const em_scalar *scales_d, const em_scalar *scales_h, const em_scalar *scales_w) {
    (void)ks;
    const char *op = "upsample_nd_backward";
    int md = mode_of(mode);
    char a[128], b[128];
    if (!em_cpu_is_float(grad_output->dtype)) {
        em_set_error(EM_ETYPE, "%s: grad_output must be a float tensor, got %s", op, em_dtype_name(grad_output->dtype));
        return NULL;
    }
    if (input_size.n < 0 || input_size.n > EM_MAX_DIMS) {
        em_set_error(EM_EVALUE, "%s: input_size has %d entries (at most %d)", op, input_size.n, EM_MAX_DIMS);
        return NULL;
    }
    for (int d = 0; d < input_size.n; d++) {
        if (input_size.data[d] < 0) {
            em_set_error(EM_EVALUE, "%s: input_size has a negative size %lld", op, (long long)input_size.data[d]);
            return NULL;
        }
    }
    if (check_geometry(input_size.n, input_size.data, output_size, md, op) != EM_OK) return NULL;
    int64_t sizes[EM_MAX_DIMS] = { input_size.data[0], input_size.data[1] };
    for (int i = 0; i < output_size.n; i++) sizes[2 + i] = output_size.data[i];
    if (grad_output->ndim != input_size.n || memcmp(grad_output->sizes, sizes, sizeof(int64_t) * (size_t)input_size.n)) {
        em_set_error(EM_ESHAPE, "%s: grad_output has shape %s, expected %s", op,
                     em_shape_str(grad_output->ndim, grad_output->sizes, a, sizeof a),
                     em_shape_str(input_size.n, sizes, b, sizeof b));
        return NULL;
    }
    em_dtype loop = grad_output->dtype == EM_FLOAT64 ? EM_FLOAT64 : EM_FLOAT32;
    em_tensor *gi = em_cpu_zeros(EM_KS(EM_KEY_CPU), input_size, loop, em_cpu_device());
    if (!gi || grad_output->numel == 0) goto cast;
    up_plan p;
    if (plan_make(&p, input_size.n, input_size.data, output_size, md, align_corners, scales_d, scales_h, scales_w,
                  loop == EM_FLOAT64, op) != EM_OK) {
        em_tensor_release(gi);
        return NULL;
    }
    em_tensor *go = grad_output->is_contiguous && grad_output->dtype == loop ? em_tensor_retain(grad_output)
                                                                          : em_cpu_to_dtype(grad_output, loop, op);
    if (!go) {
        free(p.block);
        em_tensor_release(gi);
        return NULL;
    }
    up_ctx c = { &p, em_tensor_data(go), em_tensor_data(gi), loop, bil_table(&p, loop) };
    em_cpu_parallel_for_stoppable(p.planes, up_grain(&p), up_bwd_planes, &c);
    free(c.wt);
    em_tensor_release(go);
    free(p.block);
    if (em_cpu_interrupted(op)) { /* Note [Interrupts in kernels], way (b) */
        em_tensor_release(gi);
        return NULL;
    }
cast:
    if (gi && gi->dtype != grad_output->dtype) {
        em_tensor *r = em_cpu_to_dtype(gi, grad_output->dtype, op);
        em_tensor_release(gi);
        gi = r;
    }
    return gi;
}
