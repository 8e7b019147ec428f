/* grid_upsample_aa.c -- CPU kernels of interpolate's antialias=true path
 * (schema/ops/grid.yaml): upsample_aa (bilinear and bicubic over the last
 * two dims of an (N, C, H, W) input) and upsample_aa_backward.
 *
 * Note [Antialiased interpolation]
 * PyTorch 1.13's _upsample_bilinear2d_aa / _upsample_bicubic2d_aa (PIL's
 * resampling; aten/src/ATen/native/cpu/UpSampleKernel.cpp,
 * _compute_weights_aa). Per spatial dim, with scale = (in - 1)/(out - 1)
 * under align_corners (0 for out == 1), else 1/scale_factor when given, else
 * in/out, and the filter's half-width r = 1 (linear, the triangle) or 2
 * (cubic, Keys' kernel with a = -0.5, as PIL -- not interpolate's -0.75):
 *   support = scale >= 1 ? r scale : r   (downsampling widens the filter)
 *   center  = scale (o + 0.5)
 *   taps    = input indices [xmin, xmin + xsize) with
 *             xmin = max(trunc(center - support + 0.5), 0),
 *             xsize = min(trunc(center + support + 0.5), in) - xmin
 *   weight  = filter((j - center + 0.5) / max(scale, 1)), normalised to sum 1
 * computed in the tensor's dtype (float for float32) as PyTorch does. The
 * resampling is separable: along W into a (H, Wo) buffer, then along H; the
 * backward is the transpose (along H, then W). Planes (N * C) run in
 * parallel, so the backward's sums need no atomics.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/cpu/em_cpu.h"

/* one spatial dim: output o reads input xmin[o] + j (j < xsize[o]) with
 * weight w[o * k + j] (already rounded to the loop dtype) */
typedef struct {
    int64_t in, out, k;
    int64_t *xmin, *xsize;
    double *w;
} aa_dim;

static double filt(bool cubic, double x) {
    x = x < 0 ? -x : x;
    if (!cubic) return x < 1 ? 1 - x : 0;
    const double a = -0.5;
    if (x < 1) return ((a + 2) * x - (a + 3)) * x * x + 1;
    if (x < 2) return ((a * x - 5 * a) * x + 8 * a) * x - 4 * a;
    return 0;
}

/* rounds v to the loop dtype: float unless dbl */
static double rd(double v, bool dbl) { return dbl ? v : (double)(float)v; }

/* The scale, support and tap count of one dim (Note [Antialiased interpolation]). */
static void dim_geom(int64_t in, int64_t out, bool cubic, bool ac, const em_scalar *sc, bool dbl, double *scale,
                     double *support, int64_t *k) {
    double s, r = cubic ? 2 : 1;
    double f = sc ? em_scalar_to_double(*sc) : 0;
    if (ac) s = out > 1 ? rd(rd((double)(in - 1), dbl) / (double)(out - 1), dbl) : 0;
    else if (sc && f > 0) s = rd(1.0 / f, dbl);
    else s = rd(rd((double)in, dbl) / (double)out, dbl);
    *scale = s;
    *support = rd(s >= 1 ? r * s : r, dbl);
    *k = (int64_t)ceil(*support) * 2 + 1;
}

/* Fills d (its arrays from one malloc'd block, freed with d->xmin). */
static em_status dim_make(aa_dim *d, int64_t in, int64_t out, bool cubic, bool ac, const em_scalar *sc, bool dbl,
                          const char *op) {
    double scale, support;
    int64_t k;
    dim_geom(in, out, cubic, ac, sc, dbl, &scale, &support, &k);
    d->in = in, d->out = out, d->k = k;
    char *m = malloc((size_t)out * (2 * sizeof(int64_t) + (size_t)k * sizeof(double)) + 1);
    if (!m) return em_set_error(EM_ENOMEM, "%s: out of memory for the interpolation weights", op);
    d->xmin = (int64_t *)m;
    d->xsize = d->xmin + out;
    d->w = (double *)(d->xsize + out);
    double invscale = rd(scale >= 1 ? 1.0 / scale : 1.0, dbl);
    for (int64_t o = 0; o < out; o++) {
        double center = rd(scale * ((double)o + 0.5), dbl);
        int64_t lo = (int64_t)(rd(center - support, dbl) + 0.5);
        int64_t hi = (int64_t)(rd(center + support, dbl) + 0.5);
        lo = lo > 0 ? lo : 0;
        hi = hi < in ? hi : in;
        int64_t n = hi - lo > 0 ? hi - lo : 0;
        if (n > k) n = k;
        d->xmin[o] = lo;
        d->xsize[o] = n;
        double *w = d->w + o * k, total = 0;
        for (int64_t j = 0; j < n; j++) {
            double x = rd(rd((double)(j + lo) - center, dbl) + 0.5, dbl) * invscale;
            w[j] = rd(filt(cubic, rd(x, dbl)), dbl);
            total = rd(total + w[j], dbl);
        }
        for (int64_t j = 0; j < n; j++)
            if (total != 0) w[j] = rd(w[j] / total, dbl);
        for (int64_t j = n; j < k; j++) w[j] = 0;
    }
    return EM_OK;
}

typedef struct {
    aa_dim h, w;
    const char *src;
    char *dst;
    bool dbl;
    bool ok; /* cleared by a worker that could not allocate its buffer */
} aa_ctx;

#define AA_LOOPS(T, SFX)                                                                                      \
    static bool aa_fwd_##SFX(const aa_ctx *c, int64_t begin, int64_t end) {                                  \
        const aa_dim *dh = &c->h, *dw = &c->w;                                                               \
        int64_t IH = dh->in, IW = dw->in, OH = dh->out, OW = dw->out;                                        \
        T *tmp = malloc(sizeof(T) * (size_t)(IH * OW) + 1);                                                  \
        if (!tmp) return false;                                                                              \
        for (int64_t p = begin; p < end; p++) {                                                              \
            const T *s = (const T *)c->src + p * IH * IW;                                                    \
            T *o = (T *)c->dst + p * OH * OW;                                                                \
            for (int64_t y = 0; y < IH; y++)                                                                 \
                for (int64_t x = 0; x < OW; x++) {                                                           \
                    const T *row = s + y * IW + dw->xmin[x];                                                 \
                    const double *wt = dw->w + x * dw->k;                                                    \
                    T acc = 0;                                                                               \
                    for (int64_t j = 0; j < dw->xsize[x]; j++) acc += (T)wt[j] * row[j];                     \
                    tmp[y * OW + x] = acc;                                                                   \
                }                                                                                            \
            for (int64_t y = 0; y < OH; y++) {                                                               \
                T *orow = o + y * OW;                                                                        \
                for (int64_t x = 0; x < OW; x++) orow[x] = 0;                                                \
                for (int64_t j = 0; j < dh->xsize[y]; j++) {                                                 \
                    T wv = (T)dh->w[y * dh->k + j];                                                          \
                    const T *trow = tmp + (dh->xmin[y] + j) * OW;                                            \
                    for (int64_t x = 0; x < OW; x++) orow[x] += wv * trow[x];                                \
                }                                                                                            \
            }                                                                                                \
        }                                                                                                    \
        free(tmp);                                                                                           \
        return true;                                                                                         \
    }                                                                                                        \
    static bool aa_bwd_##SFX(const aa_ctx *c, int64_t begin, int64_t end) {                                  \
        const aa_dim *dh = &c->h, *dw = &c->w;                                                               \
        int64_t IH = dh->in, IW = dw->in, OH = dh->out, OW = dw->out;                                        \
        T *tmp = malloc(sizeof(T) * (size_t)(IH * OW) + 1);                                                  \
        if (!tmp) return false;                                                                              \
        for (int64_t p = begin; p < end; p++) {                                                              \
            const T *go = (const T *)c->src + p * OH * OW;                                                   \
            T *gi = (T *)c->dst + p * IH * IW;                                                               \
            memset(tmp, 0, sizeof(T) * (size_t)(IH * OW));                                                   \
            for (int64_t y = 0; y < OH; y++)                                                                 \
                for (int64_t j = 0; j < dh->xsize[y]; j++) {                                                 \
                    T wv = (T)dh->w[y * dh->k + j];                                                          \
                    T *trow = tmp + (dh->xmin[y] + j) * OW;                                                  \
                    for (int64_t x = 0; x < OW; x++) trow[x] += wv * go[y * OW + x];                         \
                }                                                                                            \
            for (int64_t y = 0; y < IH; y++)                                                                 \
                for (int64_t x = 0; x < OW; x++) {                                                           \
                    T g = tmp[y * OW + x];                                                                   \
                    T *row = gi + y * IW + dw->xmin[x];                                                      \
                    const double *wt = dw->w + x * dw->k;                                                    \
                    for (int64_t j = 0; j < dw->xsize[x]; j++) row[j] += (T)wt[j] * g;                       \
                }                                                                                            \
        }                                                                                                    \
        free(tmp);                                                                                           \
        return true;                                                                                         \
    }

AA_LOOPS(float, f32)
AA_LOOPS(double, f64)

static void aa_fwd_planes(int64_t begin, int64_t end, void *vctx) {
    aa_ctx *c = vctx;
    if (!(c->dbl ? aa_fwd_f64(c, begin, end) : aa_fwd_f32(c, begin, end))) c->ok = false;
}

static void aa_bwd_planes(int64_t begin, int64_t end, void *vctx) {
    aa_ctx *c = vctx;
    if (!(c->dbl ? aa_bwd_f64(c, begin, end) : aa_bwd_f32(c, begin, end))) c->ok = false;
}

/* The checks of both directions: an (N, C, H, W) geometry with two positive
 * output sizes, positive spatial input sizes and a float32/float64 dtype. */
static em_status check_geometry(int ndim, const int64_t *in_sizes, em_intlist output_size, em_dtype dt, const char *op) {
    char a[128], b[128];
    if (dt != EM_FLOAT32 && dt != EM_FLOAT64)
        return em_set_error(EM_ETYPE, "%s: antialiased interpolation is not supported for dtype %s (float32 and float64 "
                            "only, as PyTorch)", op, em_dtype_name(dt));
    if (ndim != 4 || output_size.n != 2)
        return em_set_error(EM_ESHAPE, "%s: antialiased interpolation needs a 4-d (N, C, H, W) input and 2 output sizes, "
                            "got input %s and output_size %s", op, em_shape_str(ndim, in_sizes, b, sizeof b),
                            em_shape_str(output_size.n < 0 ? 0 : output_size.n, output_size.data, a, sizeof a));
    if (in_sizes[2] <= 0 || in_sizes[3] <= 0 || output_size.data[0] <= 0 || output_size.data[1] <= 0)
        return em_set_error(EM_EVALUE, "%s: input and output sizes should be greater than 0, got input %s and "
                            "output_size %s", op, em_shape_str(ndim, in_sizes, b, sizeof b),
                            em_shape_str(2, output_size.data, a, sizeof a));
    return EM_OK;
}

/* Runs the forward (fwd) or backward over src (contiguous, dt) into dst. */
static em_status aa_run(bool fwd, const int64_t *in_sizes, em_intlist output_size, const char *mode, bool ac,
                        const em_scalar *sh, const em_scalar *sw, em_dtype dt, const void *src, void *dst, const char *op) {
    bool cubic = strcmp(mode, "cubic") == 0, dbl = dt == EM_FLOAT64;
    aa_ctx c = { .src = src, .dst = dst, .dbl = dbl, .ok = true };
    if (dim_make(&c.h, in_sizes[2], output_size.data[0], cubic, ac, sh, dbl, op) != EM_OK) return EM_ENOMEM;
    if (dim_make(&c.w, in_sizes[3], output_size.data[1], cubic, ac, sw, dbl, op) != EM_OK) {
        free(c.h.xmin);
        return EM_ENOMEM;
    }
    int64_t planes = in_sizes[0] * in_sizes[1];
    int64_t per = (c.h.in * c.w.out * c.w.k + c.h.out * c.w.out * c.h.k) * 2;
    em_cpu_parallel_for(planes, per >= EM_CPU_GRAIN ? 1 : EM_CPU_GRAIN / (per > 0 ? per : 1),
                        fwd ? aa_fwd_planes : aa_bwd_planes, &c);
    free(c.h.xmin);
    free(c.w.xmin);
    if (!c.ok) return em_set_error(EM_ENOMEM, "%s: out of memory for the interpolation buffer", op);
    return EM_OK;
}

em_tensor *em_cpu_upsample_aa(em_keyset ks, em_tensor *self, em_intlist output_size, const char *mode,
                              bool align_corners, const em_scalar *scales_h, const em_scalar *scales_w) {
    (void)ks;
    const char *op = "upsample_aa";
    if (check_geometry(self->ndim, self->sizes, output_size, self->dtype, op) != EM_OK) return NULL;
    int64_t sizes[4] = { self->sizes[0], self->sizes[1], output_size.data[0], output_size.data[1] };
    em_tensor *out = em_tensor_new(4, sizes, self->dtype, em_cpu_device());
    if (!out || out->numel == 0) return out;
    em_tensor *src = self->is_contiguous ? em_tensor_retain(self) : em_cpu_to_dtype(self, self->dtype, op);
    if (!src || aa_run(true, self->sizes, output_size, mode, align_corners, scales_h, scales_w, self->dtype,
                       em_tensor_data(src), em_tensor_data(out), op) != EM_OK) {
        em_tensor_release(src);
        em_tensor_release(out);
        return NULL;
    }
    em_tensor_release(src);
    return out;
}

em_tensor *em_cpu_upsample_aa_backward(em_keyset ks, em_tensor *grad_output, em_intlist input_size,
                                       em_intlist output_size, const char *mode, bool align_corners,
                                       const em_scalar *scales_h, const em_scalar *scales_w) {
    (void)ks;
    const char *op = "upsample_aa_backward";
    char a[128], b[128];
    if (input_size.n != 4) {
        em_set_error(EM_ESHAPE, "%s: input_size must have 4 entries (N, C, H, W), got %d", op, input_size.n);
        return NULL;
    }
    for (int d = 0; d < 2; d++)
        if (input_size.data[d] < 0) {
            em_set_error(EM_EVALUE, "%s: input_size has a negative size %lld", op, (long long)input_size.data[d]);
            return NULL;
        }
    if (check_geometry(4, input_size.data, output_size, grad_output->dtype, op) != EM_OK) return NULL;
    int64_t sizes[4] = { input_size.data[0], input_size.data[1], output_size.data[0], output_size.data[1] };
    if (grad_output->ndim != 4 || memcmp(grad_output->sizes, sizes, sizeof sizes) != 0) {
        em_set_error(EM_ESHAPE, "%s: grad_output has shape %s, expected %s", op,
                     em_shape_str(grad_output->ndim, grad_output->sizes, a, sizeof a), em_shape_str(4, sizes, b, sizeof b));
        return NULL;
    }
    em_tensor *gi = em_cpu_zeros(EM_KS(EM_KEY_CPU), input_size, grad_output->dtype, em_cpu_device());
    if (!gi || gi->numel == 0) return gi;
    em_tensor *go = grad_output->is_contiguous ? em_tensor_retain(grad_output)
                                               : em_cpu_to_dtype(grad_output, grad_output->dtype, op);
    if (!go || aa_run(false, input_size.data, output_size, mode, align_corners, scales_h, scales_w, grad_output->dtype,
                      em_tensor_data(go), em_tensor_data(gi), op) != EM_OK) {
        em_tensor_release(go);
        em_tensor_release(gi);
        return NULL;
    }
    em_tensor_release(go);
    return gi;
}
