/* pool_adaptive.c -- adaptive average and max pooling over 2 or 3 spatial
 * dims (the 1-d ops are composites over the 2-d ones), their backward ops
 * (schema/ops/pool.yaml).
 *
 * Output position o of a dim of input size n and output size m pools the
 * input positions [floor(o * n / m), ceil((o + 1) * n / m)), as PyTorch's
 * start_index/end_index (em_cpu_adaptive_window). Same layout as
 * pool_max.c: three spatial dims over contiguous planes, parallel over
 * planes; the average forward and backward are pool_avg.c's loops over the
 * adaptive geometry (em_cpu_avg_pool_run); max indices are 1-based plane
 * positions (Note [Pooling indices]) and the max backward is pool_max.c's
 * scatter (em_cpu_pool_scatter_backward).
 */
#include <math.h>
#include <string.h>

#include "kernels/cpu/em_cpu.h"

/* Checks input (nsp + 1 or nsp + 2 dims, only the batch may be empty,
 * float32/float64/bfloat16) and output_size (one value or nsp, >= 0) and
 * fills g (k/s/p/d unused: the windows come from in and out). */
static em_status adaptive_geom(em_cpu_pool_geom *g, const em_tensor *self, int nsp, em_intlist output_size,
                               bool max, const char *op) {
    memset(g, 0, sizeof *g);
    if (self->ndim != nsp + 1 && self->ndim != nsp + 2) {
        char s[EM_SHAPE_STR_MAX];
        em_set_error(EM_ESHAPE, "%s: argument 'input' must have %d or %d dims (unbatched or batched), got shape %s",
                     op, nsp + 1, nsp + 2, em_shape_str(self->ndim, self->sizes, s, sizeof s));
        return EM_ESHAPE;
    }
    /* PyTorch: max refuses an empty channel dim, avg allows it */
    for (int d = self->ndim - nsp - (max ? 1 : 0); d < self->ndim; d++)
        if (self->sizes[d] == 0) {
            char s[EM_SHAPE_STR_MAX];
            em_set_error(EM_ESHAPE, "%s: argument 'input' of shape %s has an empty dim %d (only the batch%s dim may be 0)",
                         op, em_shape_str(self->ndim, self->sizes, s, sizeof s), d + 1, max ? "" : " and channel");
            return EM_ESHAPE;
        }
    if (!em_cpu_is_float(self->dtype) || self->dtype == EM_FLOAT16) {
        em_set_error(EM_ETYPE, "%s: argument 'input' must be float32, float64 or bfloat16, got %s", op,
                     em_dtype_name(self->dtype));
        return EM_ETYPE;
    }
    if (output_size.n != 1 && output_size.n != nsp) {
        em_set_error(EM_EVALUE, "%s: output_size must be a single integer or %d integers, got %d", op, nsp,
                     output_size.n < 0 ? 0 : output_size.n);
        return EM_EVALUE;
    }
    g->nsp = nsp;
    g->op = op;
    g->ndim = self->ndim;
    g->batched = self->ndim == nsp + 2;
    g->planes = 1;
    for (int d = 0; d < self->ndim - nsp; d++) g->planes *= self->sizes[d];
    memcpy(g->out_sizes, self->sizes, sizeof(int64_t) * (size_t)self->ndim);
    for (int i = 0; i < 3; i++) {
        int j = i - (3 - nsp); /* index into output_size, < 0 for the unused dims */
        g->in[i] = j < 0 ? 1 : self->sizes[self->ndim - nsp + j];
        g->out[i] = j < 0 ? 1 : output_size.data[output_size.n == 1 ? 0 : j];
        if (g->out[i] < 0) {
            em_set_error(EM_EVALUE, "%s: output_size must be >= 0, got %lld", op, (long long)g->out[i]);
            return EM_EVALUE;
        }
        if (j >= 0) g->out_sizes[self->ndim - nsp + j] = g->out[i];
        g->k[i] = g->s[i] = g->d[i] = 1;
    }
    g->in_numel = g->in[0] * g->in[1] * g->in[2];
    /* a product past int64 (output_size 2^53 each side) is an error, not
     * an overflow; em_tensor_new refuses what does not fit in memory */
    int64_t plane, all;
    if (__builtin_mul_overflow(g->out[0], g->out[1], &plane) || __builtin_mul_overflow(plane, g->out[2], &plane) ||
        __builtin_mul_overflow(plane, g->planes, &all)) {
        em_set_error(EM_EVALUE, "%s: output_size has too many elements (%lld x %lld x %lld per plane)", op,
                     (long long)g->out[0], (long long)g->out[1], (long long)g->out[2]);
        return EM_EVALUE;
    }
    g->out_numel = plane;
    g->adaptive = true;
    return EM_OK;
}

typedef struct {
    const em_cpu_pool_geom *g;
    const char *in;  /* contiguous input */
    char *out;       /* contiguous values */
    int64_t *idx;    /* contiguous 1-based indices */
} ad_ctx;

/* The max forward over a plane range: NaN wins; the first of equal maxima
 * is kept (PyTorch's CPU kernel). */
#define AD_MAX_FWD(NAME, T, A, LD, ST)                                                           \
    static void NAME(int64_t begin, int64_t end, void *vctx) {                                   \
        const ad_ctx *c = vctx;                                                                  \
        const em_cpu_pool_geom *g = c->g;                                                        \
        for (int64_t pl = begin; pl < end; pl++) {                                               \
            const T *x = (const T *)c->in + pl * g->in_numel;                                    \
            T *y = (T *)c->out + pl * g->out_numel;                                              \
            int64_t *yi = c->idx + pl * g->out_numel;                                            \
            for (int64_t od = 0; od < g->out[0]; od++) {                                         \
                int64_t d0, d1, h0, h1, w0, w1;                                                  \
                em_cpu_adaptive_window(od, g->in[0], g->out[0], &d0, &d1);                       \
                for (int64_t oh = 0; oh < g->out[1]; oh++) {                                     \
                    em_cpu_adaptive_window(oh, g->in[1], g->out[1], &h0, &h1);                   \
                    for (int64_t ow = 0; ow < g->out[2]; ow++) {                                 \
                        em_cpu_adaptive_window(ow, g->in[2], g->out[2], &w0, &w1);               \
                        int64_t o = (od * g->out[1] + oh) * g->out[2] + ow;                      \
                        A m = -(A)INFINITY;                                                      \
                        int64_t best = (d0 * g->in[1] + h0) * g->in[2] + w0;                     \
                        for (int64_t id = d0; id < d1; id++)                                     \
                            for (int64_t ih = h0; ih < h1; ih++)                                 \
                                for (int64_t iw = w0; iw < w1; iw++) {                           \
                                    int64_t j = (id * g->in[1] + ih) * g->in[2] + iw;            \
                                    A v = LD(x[j]);                                              \
                                    if (v > m || isnan(v)) {                                     \
                                        m = v;                                                   \
                                        best = j;                                                \
                                    }                                                            \
                                }                                                                \
                        y[o] = ST(m);                                                            \
                        yi[o] = best + 1;                                                        \
                    }                                                                            \
                }                                                                                \
            }                                                                                    \
        }                                                                                        \
    }

#define ID_LD(x) (x)
AD_MAX_FWD(ad_max_f32, float, float, ID_LD, ID_LD)
AD_MAX_FWD(ad_max_f64, double, double, ID_LD, ID_LD)
AD_MAX_FWD(ad_max_bf16, em_bfloat16, float, em_bf16_to_float, em_float_to_bf16)

/* Forward: values (and with idx_out, 1-based indices, the max pooling) of
 * the output shape; without idx_out pool_avg.c's average. */
static em_tensor *adaptive_forward(em_tensor *self, int nsp, em_intlist output_size, em_tensor **idx_out,
                                   const char *op) {
    em_cpu_pool_geom g;
    if (adaptive_geom(&g, self, nsp, output_size, idx_out != NULL, op) != EM_OK) return NULL;
    if (!idx_out) return em_cpu_avg_pool_run(&g, self, false, 0);
    em_tensor *x = em_cpu_contiguous(EM_KS(EM_KEY_CPU), self);
    em_tensor *y = x ? em_tensor_new(g.ndim, g.out_sizes, self->dtype, self->device) : NULL;
    em_tensor *yi = y ? em_tensor_new(g.ndim, g.out_sizes, EM_INT64, self->device) : NULL;
    if (!yi) {
        em_tensor_release(x);
        em_tensor_release(y);
        return NULL;
    }
    if (y->numel > 0) {
        ad_ctx c = { &g, (const char *)em_tensor_data(x), (char *)em_tensor_data(y), (int64_t *)em_tensor_data(yi) };
        em_cpu_range_fn fn = self->dtype == EM_FLOAT64    ? ad_max_f64
                             : self->dtype == EM_BFLOAT16 ? ad_max_bf16
                                                          : ad_max_f32;
        return em_cpu_pool_run_pair(&g, g.in_numel + g.out_numel, fn, &c, x, y, yi, idx_out);
    }
    return em_cpu_pool_run_pair(&g, 0, NULL, NULL, x, y, yi, idx_out);
}

em_tensor *em_cpu_adaptive_avg_pool2d(em_keyset ks, em_tensor *input, em_intlist output_size) {
    (void)ks;
    return adaptive_forward(input, 2, output_size, NULL, "adaptive_avg_pool2d");
}

em_tensor *em_cpu_adaptive_avg_pool3d(em_keyset ks, em_tensor *input, em_intlist output_size) {
    (void)ks;
    return adaptive_forward(input, 3, output_size, NULL, "adaptive_avg_pool3d");
}

em_tensor *em_cpu_adaptive_max_pool2d_with_indices(em_keyset ks, em_tensor *self, em_intlist output_size,
                                                   em_tensor **indices) {
    (void)ks;
    return adaptive_forward(self, 2, output_size, indices, "adaptive_max_pool2d_with_indices");
}

/* The geometry of a backward: self's input and grad_output's spatial sizes
 * as the output size. */
static em_status backward_geom(em_cpu_pool_geom *g, em_tensor *grad_output, em_tensor *self, int nsp, bool max,
                               const char *op) {
    if (grad_output->ndim != self->ndim) {
        char sa[EM_SHAPE_STR_MAX], sb[EM_SHAPE_STR_MAX];
        em_set_error(EM_ESHAPE, "%s: grad_output %s and self %s must have the same number of dims", op,
                     em_shape_str(grad_output->ndim, grad_output->sizes, sa, sizeof sa),
                     em_shape_str(self->ndim, self->sizes, sb, sizeof sb));
        return EM_ESHAPE;
    }
    em_intlist os = { grad_output->ndim >= nsp ? grad_output->sizes + grad_output->ndim - nsp : NULL, nsp };
    if (adaptive_geom(g, self, nsp, os, max, op) != EM_OK) return EM_EVALUE;
    if (memcmp(grad_output->sizes, g->out_sizes, sizeof(int64_t) * (size_t)g->ndim) != 0) {
        char sa[EM_SHAPE_STR_MAX], sb[EM_SHAPE_STR_MAX];
        em_set_error(EM_ESHAPE, "%s: grad_output %s does not fit self %s", op,
                     em_shape_str(grad_output->ndim, grad_output->sizes, sa, sizeof sa),
                     em_shape_str(self->ndim, self->sizes, sb, sizeof sb));
        return EM_ESHAPE;
    }
    return EM_OK;
}

static em_tensor *adaptive_avg_backward(em_tensor *grad_output, em_tensor *self, int nsp, const char *op) {
    em_cpu_pool_geom g;
    if (backward_geom(&g, grad_output, self, nsp, false, op) != EM_OK) return NULL;
    return em_cpu_avg_pool_backward_run(&g, grad_output, self, false, 0, op);
}

em_tensor *em_cpu_adaptive_avg_pool2d_backward(em_keyset ks, em_tensor *grad_output, em_tensor *self) {
    (void)ks;
    return adaptive_avg_backward(grad_output, self, 2, "adaptive_avg_pool2d_backward");
}

em_tensor *em_cpu_adaptive_avg_pool3d_backward(em_keyset ks, em_tensor *grad_output, em_tensor *self) {
    (void)ks;
    return adaptive_avg_backward(grad_output, self, 3, "adaptive_avg_pool3d_backward");
}

em_tensor *em_cpu_adaptive_max_pool2d_backward(em_keyset ks, em_tensor *grad_output, em_tensor *self,
                                               em_tensor *indices) {
    (void)ks;
    em_cpu_pool_geom g;
    if (backward_geom(&g, grad_output, self, 2, true, "adaptive_max_pool2d_backward") != EM_OK) return NULL;
    return em_cpu_pool_scatter_backward(grad_output, self, &g, indices, "adaptive_max_pool2d_backward");
}
