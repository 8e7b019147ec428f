/* pool_max.c -- max pooling over 1, 2 or 3 spatial dims (schema/ops/pool.yaml):
 * the forward with its 1-based plane indices and the backward's scatter-add.
 *
 * Every rank runs as three spatial dims (depth, height, width), the missing
 * leading ones of size 1 with kernel 1, stride 1, no padding or dilation, so
 * one loop serves max_pool1d/2d/3d. The input is made contiguous and seen as
 * `planes` (N * C, or C unbatched) planes of in[0] * in[1] * in[2] values;
 * the work is split over planes through the intra-op pool. Indices are the
 * 1-based flat positions in the plane (Note [Pooling indices] in
 * schema/ops/pool.yaml). NaN wins a window, and among equal maxima the first
 * position (row-major) is kept, as in PyTorch's CPU kernel. A window that
 * covers no input position (possible only when dilation steps over the
 * whole input from the padding) gives -inf and index 0, "no position": the
 * backward gives it no gradient (PyTorch returns a position past the plane
 * there and its backward writes into the next plane).
 */
/* O3: max_fwd_f32_2x2's selects vectorise (see there) */
#pragma GCC optimize("O3", "no-trapping-math", "no-math-errno")
#include <math.h>
#include <stdatomic.h>
#include <string.h>

#include "kernels/cpu/em_cpu.h"

/* ---- geometry and argument checks ---- */

/* Parses one size list (1 value for every spatial dim, or nsp values) into
 * out[3] (spatial dims right-aligned, the unused leading ones set to fill).
 * n == 0 (or -1, absent) gives dflt when dflt is not NULL. */
static em_status size_arg(em_intlist l, int nsp, const int64_t *dflt, int64_t fill, int64_t *out,
                          const char *op, const char *arg) {
    for (int i = 0; i < 3; i++) out[i] = fill;
    if (l.n <= 0 && dflt) {
        memcpy(out, dflt, 3 * sizeof *out);
        return EM_OK;
    }
    if (l.n < 0) return EM_OK; /* absent (average pooling has no dilation): fill */
    if (l.n != 1 && l.n != nsp) {
        em_set_error(EM_EVALUE, "%s: %s must be a single integer or %d integers (one per spatial dim), got %d",
                     op, arg, nsp, l.n < 0 ? 0 : l.n);
        return EM_EVALUE;
    }
    for (int i = 0; i < nsp; i++) out[3 - nsp + i] = l.data[l.n == 1 ? 0 : i];
    return EM_OK;
}

/* PyTorch's pooling_output_shape: floor (or ceil) of the window count, a
 * last window starting past the input and the left padding dropped. */
static int64_t pool_out_size(int64_t in, int64_t k, int64_t pad, int64_t stride, int64_t dil, bool ceil_mode) {
    int64_t num = in + 2 * pad - dil * (k - 1) - 1 + (ceil_mode ? stride - 1 : 0);
    int64_t q = num >= 0 ? num / stride : -((-num + stride - 1) / stride); /* floor division */
    int64_t out = q + 1;
    if (ceil_mode && (out - 1) * stride >= in + pad) out--;
    return out;
}

em_status em_cpu_pool_geom_init(em_cpu_pool_geom *g, const em_tensor *self, int nsp, em_intlist kernel_size,
                                em_intlist stride, em_intlist padding, em_intlist dilation, bool ceil_mode,
                                bool allow_int64, const char *op) {
    memset(g, 0, sizeof *g);
    g->nsp = nsp;
    g->op = op;
    if (self->ndim != nsp + 1 && self->ndim != nsp + 2) {
        char s[EM_SHAPE_STR_MAX];
        em_set_error(EM_ESHAPE, "%s: argument 'input' must have %d or %d dims (unbatched or batched), got shape %s",
                     op, nsp + 1, nsp + 2, em_shape_str(self->ndim, self->sizes, s, sizeof s));
        return EM_ESHAPE;
    }
    g->batched = self->ndim == nsp + 2;
    for (int d = self->ndim - nsp - 1; d < self->ndim; d++) /* the batch alone may be empty */
        if (self->sizes[d] == 0) {
            char s[EM_SHAPE_STR_MAX];
            em_set_error(EM_ESHAPE, "%s: argument 'input' of shape %s has an empty dim %d (only the batch dim may be 0)",
                         op, em_shape_str(self->ndim, self->sizes, s, sizeof s), d + 1);
            return EM_ESHAPE;
        }
    if ((!em_cpu_is_float(self->dtype) || self->dtype == EM_FLOAT16) && !(allow_int64 && self->dtype == EM_INT64)) {
        em_set_error(EM_ETYPE, "%s: argument 'input' must be float32, float64%s or bfloat16, got %s", op,
                     allow_int64 ? ", int64" : "", em_dtype_name(self->dtype));
        return EM_ETYPE;
    }
    if (size_arg(kernel_size, nsp, NULL, 1, g->k, op, "kernel_size") != EM_OK ||
        size_arg(stride, nsp, g->k, 1, g->s, op, "stride") != EM_OK ||
        size_arg(padding, nsp, NULL, 0, g->p, op, "padding") != EM_OK ||
        size_arg(dilation, nsp, NULL, 1, g->d, op, "dilation") != EM_OK)
        return EM_EVALUE;
    for (int i = 3 - nsp; i < 3; i++) {
        const char *bad = g->k[i] <= 0 ? "kernel_size" : g->s[i] <= 0 ? "stride" : g->d[i] <= 0 ? "dilation" : NULL;
        if (bad) {
            int64_t v = g->k[i] <= 0 ? g->k[i] : g->s[i] <= 0 ? g->s[i] : g->d[i];
            em_set_error(EM_EVALUE, "%s: %s must be positive, got %lld", op, bad, (long long)v);
            return EM_EVALUE;
        }
        /* below 2^31 each (padding is at most half the kernel), pool_out_size's
         * sums and products stay inside int64 */
        bad = g->k[i] > INT32_MAX ? "kernel_size" : g->s[i] > INT32_MAX ? "stride" : g->d[i] > INT32_MAX ? "dilation" : NULL;
        if (bad) {
            int64_t v = g->k[i] > INT32_MAX ? g->k[i] : g->s[i] > INT32_MAX ? g->s[i] : g->d[i];
            em_set_error(EM_EVALUE, "%s: %s must be at most %d, got %lld", op, bad, INT32_MAX, (long long)v);
            return EM_EVALUE;
        }
        if (g->p[i] < 0 || g->p[i] > g->k[i] / 2) {
            em_set_error(EM_EVALUE, "%s: padding must be between 0 and half of kernel_size, got padding %lld for kernel_size %lld",
                         op, (long long)g->p[i], (long long)g->k[i]);
            return EM_EVALUE;
        }
    }
    g->planes = 1;
    for (int d = 0; d < self->ndim - nsp; d++) g->planes *= self->sizes[d];
    bool small = false;
    for (int i = 0; i < 3; i++) {
        g->in[i] = i < 3 - nsp ? 1 : self->sizes[self->ndim - 3 + i];
        g->out[i] = pool_out_size(g->in[i], g->k[i], g->p[i], g->s[i], g->d[i], ceil_mode);
        if (g->out[i] < 1) small = true;
    }
    if (small) {
        char a[EM_SHAPE_STR_MAX], b[EM_SHAPE_STR_MAX];
        int64_t os[EM_MAX_DIMS];
        memcpy(os, self->sizes, sizeof(int64_t) * (size_t)self->ndim);
        for (int i = 0; i < nsp; i++) os[self->ndim - nsp + i] = g->out[3 - nsp + i];
        em_set_error(EM_ESHAPE, "%s: input of shape %s gives an output of shape %s: the output is too small", op,
                     em_shape_str(self->ndim, self->sizes, a, sizeof a), em_shape_str(self->ndim, os, b, sizeof b));
        return EM_ESHAPE;
    }
    g->in_numel = g->in[0] * g->in[1] * g->in[2];
    g->out_numel = g->out[0] * g->out[1] * g->out[2];
    g->ndim = self->ndim;
    memcpy(g->out_sizes, self->sizes, sizeof(int64_t) * (size_t)self->ndim);
    for (int i = 0; i < nsp; i++) g->out_sizes[self->ndim - nsp + i] = g->out[3 - nsp + i];
    return EM_OK;
}

/* ---- forward ---- */

typedef struct {
    const em_cpu_pool_geom *g;
    const char *in;  /* contiguous input */
    char *out;       /* contiguous values */
    int64_t *idx;    /* contiguous 1-based indices */
} max_fwd_ctx;

/* One plane range of the forward for element type T computed as A (LD loads,
 * ST stores). The window of output o along a dim starts at o * s - p and
 * takes k positions d apart; positions outside the input are skipped (the
 * first one inside it is where the window's index starts, as in PyTorch). */
#define MAX_FWD(NAME, T, A, LD, ST)                                                                   \
    static void NAME(int64_t begin, int64_t end, void *vctx) {                                        \
        const max_fwd_ctx *c = vctx;                                                                  \
        const em_cpu_pool_geom *g = c->g;                                                             \
        const int64_t ID = g->in[0], IH = g->in[1], IW = g->in[2];                                    \
        for (int64_t pl = begin; pl < end; pl++) {                                                    \
            const T *x = (const T *)c->in + pl * g->in_numel;                                         \
            T *y = (T *)c->out + pl * g->out_numel;                                                   \
            int64_t *yi = c->idx + pl * g->out_numel;                                                 \
            for (int64_t od = 0; od < g->out[0]; od++) {                                              \
                int64_t d0 = od * g->s[0] - g->p[0], d1 = d0 + (g->k[0] - 1) * g->d[0] + 1;           \
                if (d1 > ID) d1 = ID;                                                                 \
                while (d0 < 0) d0 += g->d[0];                                                         \
                for (int64_t oh = 0; oh < g->out[1]; oh++) {                                          \
                    int64_t h0 = oh * g->s[1] - g->p[1], h1 = h0 + (g->k[1] - 1) * g->d[1] + 1;       \
                    if (h1 > IH) h1 = IH;                                                             \
                    while (h0 < 0) h0 += g->d[1];                                                     \
                    for (int64_t ow = 0; ow < g->out[2]; ow++) {                                      \
                        int64_t w0 = ow * g->s[2] - g->p[2], w1 = w0 + (g->k[2] - 1) * g->d[2] + 1;   \
                        if (w1 > IW) w1 = IW;                                                         \
                        while (w0 < 0) w0 += g->d[2];                                                 \
                        int64_t best = (d0 * IH + h0) * IW + w0;                                      \
                        A m = -(A)INFINITY;                                                           \
                        for (int64_t id = d0; id < d1; id += g->d[0])                                 \
                            for (int64_t ih = h0; ih < h1; ih += g->d[1]) {                           \
                                const T *row = x + (id * IH + ih) * IW;                               \
                                for (int64_t iw = w0; iw < w1; iw += g->d[2]) {                       \
                                    A v = LD(row[iw]);                                                \
                                    if (v > m || isnan(v)) {                                          \
                                        m = v;                                                        \
                                        best = (id * IH + ih) * IW + iw;                              \
                                    }                                                                 \
                                }                                                                     \
                            }                                                                         \
                        int64_t o = (od * g->out[1] + oh) * g->out[2] + ow;                           \
                        y[o] = ST(m);                                                                 \
                        yi[o] = d0 < d1 && h0 < h1 && w0 < w1 ? best + 1 : 0;                         \
                    }                                                                                 \
                }                                                                                     \
            }                                                                                         \
        }                                                                                             \
    }

#define ID_LD(x) (x)
MAX_FWD(max_fwd_f32, float, float, ID_LD, ID_LD)
MAX_FWD(max_fwd_f64, double, double, ID_LD, ID_LD)
MAX_FWD(max_fwd_bf16, em_bfloat16, float, em_bf16_to_float, em_float_to_bf16)

/* The common 2x2, stride 2, unpadded float32 window of a CNN (no bounds to
 * clamp: floor mode keeps every window inside the plane). */
EM_CPU_CLONES static void max_fwd_f32_2x2(int64_t begin, int64_t end, void *vctx) {
    const max_fwd_ctx *c = vctx;
    const em_cpu_pool_geom *g = c->g;
    const int64_t IW = g->in[2], OH = g->out[1], OW = g->out[2];
    for (int64_t pl = begin; pl < end; pl++) {
        const float *x = (const float *)c->in + pl * g->in_numel;
        float *y = (float *)c->out + pl * g->out_numel;
        int64_t *yi = c->idx + pl * g->out_numel;
        for (int64_t oh = 0; oh < OH; oh++) {
            const float *r0 = x + 2 * oh * IW, *r1 = r0 + IW;
            int64_t base = 2 * oh * IW + 1;
            /* branch-free selects (random data mispredicts half the
             * branches of the general loop); same order and NaN rule */
            for (int64_t ow = 0; ow < OW; ow++) {
                float a = r0[2 * ow], b = r0[2 * ow + 1], cc = r1[2 * ow], d = r1[2 * ow + 1];
                float m = a;
                int64_t bi = 0;
                bool t = (b > m) | (b != b);
                m = t ? b : m;
                bi = t ? 1 : bi;
                t = (cc > m) | (cc != cc);
                m = t ? cc : m;
                bi = t ? IW : bi;
                t = (d > m) | (d != d);
                m = t ? d : m;
                bi = t ? IW + 1 : bi;
                y[oh * OW + ow] = m;
                yi[oh * OW + ow] = base + 2 * ow + bi;
            }
        }
    }
}

/* The forward for nsp spatial dims: values (self's dtype) and 1-based
 * indices (int64), both of the output shape. */
static em_tensor *max_pool_forward(em_tensor *self, int nsp, em_intlist kernel_size, em_intlist stride,
                                   em_intlist padding, em_intlist dilation, bool ceil_mode, em_tensor **indices,
                                   const char *op) {
    em_cpu_pool_geom g;
    if (em_cpu_pool_geom_init(&g, self, nsp, kernel_size, stride, padding, dilation, ceil_mode, false, op) != EM_OK)
        return NULL;
    em_tensor *x = em_cpu_contiguous(EM_KS(EM_KEY_CPU), self);
    em_tensor *y = x ? em_tensor_new(g.ndim, g.out_sizes, self->dtype, self->device) : NULL;
    em_tensor *yi = y ? em_tensor_new(g.ndim, g.out_sizes, EM_INT64, self->device) : NULL;
    if (!yi) {
        em_tensor_release(x);
        em_tensor_release(y);
        return NULL;
    }
    if (y->numel > 0) {
        max_fwd_ctx c = { &g, (const char *)em_tensor_data(x), (char *)em_tensor_data(y),
                          (int64_t *)em_tensor_data(yi) };
        em_cpu_range_fn fn = self->dtype == EM_FLOAT64 ? max_fwd_f64
                             : self->dtype == EM_BFLOAT16 ? max_fwd_bf16
                                                          : max_fwd_f32;
        if (fn == max_fwd_f32 && g.k[0] == 1 && g.k[1] == 2 && g.k[2] == 2 && g.s[1] == 2 && g.s[2] == 2 &&
            g.p[1] == 0 && g.p[2] == 0 && g.d[1] == 1 && g.d[2] == 1 && g.in[0] == 1 && g.out[1] * 2 <= g.in[1] &&
            g.out[2] * 2 <= g.in[2])
            fn = max_fwd_f32_2x2;
        return em_cpu_pool_run_pair(&g, g.out_numel * g.k[0] * g.k[1] * g.k[2], fn, &c, x, y, yi, indices);
    }
    return em_cpu_pool_run_pair(&g, 0, NULL, NULL, x, y, yi, indices);
}

/* See em_cpu.h (family pool). */
em_tensor *em_cpu_pool_run_pair(const em_cpu_pool_geom *g, int64_t work, em_cpu_range_fn fn, void *ctx,
                                em_tensor *x, em_tensor *y, em_tensor *yi, em_tensor **indices) {
    if (fn) {
        em_cpu_parallel_for_stoppable(g->planes, work >= EM_CPU_GRAIN ? 1 : EM_CPU_GRAIN / (work ? work : 1), fn,
                                      ctx);
        if (em_cpu_interrupted(g->op)) { /* Note [Interrupts in kernels], way (b) */
            em_tensor_release(x);
            em_tensor_release(y);
            em_tensor_release(yi);
            return NULL;
        }
    }
    em_tensor_release(x);
    *indices = yi;
    return y;
}

em_tensor *em_cpu_max_pool2d_with_indices(em_keyset ks, em_tensor *self, em_intlist kernel_size, em_intlist stride,
                                          em_intlist padding, em_intlist dilation, bool ceil_mode,
                                          em_tensor **indices) {
    (void)ks;
    return max_pool_forward(self, 2, kernel_size, stride, padding, dilation, ceil_mode, indices,
                            "max_pool2d_with_indices");
}

em_tensor *em_cpu_max_pool3d_with_indices(em_keyset ks, em_tensor *self, em_intlist kernel_size, em_intlist stride,
                                          em_intlist padding, em_intlist dilation, bool ceil_mode,
                                          em_tensor **indices) {
    (void)ks;
    return max_pool_forward(self, 3, kernel_size, stride, padding, dilation, ceil_mode, indices,
                            "max_pool3d_with_indices");
}

/* ---- backward ---- */

typedef struct {
    int64_t in_numel, out_numel;
    const char *go;        /* contiguous grad_output, in the result's dtype */
    const int64_t *idx;    /* contiguous 1-based indices */
    char *gi;              /* zeroed, contiguous result */
    _Atomic int64_t bad;   /* an out-of-range index seen (0: none) */
    _Atomic bool any_bad;
} max_bwd_ctx;

/* Adds each plane's output gradients at their indices: one plane per
 * iteration, so threads never write the same element and the sums run in
 * the output's order (deterministic). */
#define MAX_BWD(NAME, T, A, LD, ST)                                                   \
    static void NAME(int64_t begin, int64_t end, void *vctx) {                        \
        max_bwd_ctx *c = vctx;                                                        \
        for (int64_t pl = begin; pl < end; pl++) {                                    \
            const T *go = (const T *)c->go + pl * c->out_numel;                       \
            const int64_t *ix = c->idx + pl * c->out_numel;                           \
            T *gi = (T *)c->gi + pl * c->in_numel;                                    \
            for (int64_t o = 0; o < c->out_numel; o++) {                              \
                int64_t j = ix[o] - 1;                                                \
                if (j == -1) continue; /* a window over no input */                 \
                if (j < 0 || j >= c->in_numel) {                                      \
                    bool no = false;                                                  \
                    if (atomic_compare_exchange_strong(&c->any_bad, &no, true))       \
                        atomic_store(&c->bad, ix[o]);                                 \
                    return;                                                           \
                }                                                                     \
                gi[j] = ST((A)LD(gi[j]) + (A)LD(go[o]));                              \
            }                                                                         \
        }                                                                             \
    }
MAX_BWD(max_bwd_f32, float, float, ID_LD, ID_LD)
MAX_BWD(max_bwd_f64, double, double, ID_LD, ID_LD)
MAX_BWD(max_bwd_bf16, em_bfloat16, float, em_bf16_to_float, em_float_to_bf16)
MAX_BWD(max_bwd_f16, em_half, float, em_half_to_float, em_float_to_half)

/* Whether a and b have one shape; else an error naming both. */
static bool same_shape(const em_tensor *a, const em_tensor *b, const char *op, const char *an, const char *bn) {
    if (a->ndim == b->ndim && memcmp(a->sizes, b->sizes, sizeof(int64_t) * (size_t)a->ndim) == 0) return true;
    char sa[EM_SHAPE_STR_MAX], sb[EM_SHAPE_STR_MAX];
    em_set_error(EM_ESHAPE, "%s: %s %s and %s %s must have one shape", op, an,
                 em_shape_str(a->ndim, a->sizes, sa, sizeof sa), bn, em_shape_str(b->ndim, b->sizes, sb, sizeof sb));
    return false;
}

em_tensor *em_cpu_pool_scatter_backward(em_tensor *grad_output, em_tensor *self, const em_cpu_pool_geom *g,
                                        em_tensor *indices, const char *op) {
    if (indices->dtype != EM_INT64) {
        em_set_error(EM_ETYPE, "%s: argument 'indices' must be int64, got %s", op, em_dtype_name(indices->dtype));
        return NULL;
    }
    if (!same_shape(grad_output, indices, op, "grad_output", "indices")) return NULL;
    if (grad_output->ndim != g->ndim ||
        memcmp(grad_output->sizes, g->out_sizes, sizeof(int64_t) * (size_t)g->ndim) != 0) {
        char sa[EM_SHAPE_STR_MAX], sb[EM_SHAPE_STR_MAX];
        em_set_error(EM_ESHAPE, "%s: grad_output has shape %s, the pooling's output has shape %s", op,
                     em_shape_str(grad_output->ndim, grad_output->sizes, sa, sizeof sa),
                     em_shape_str(g->ndim, g->out_sizes, sb, sizeof sb));
        return NULL;
    }
    em_tensor *gi = em_cpu_zeros(EM_KS(EM_KEY_CPU), (em_intlist){ self->sizes, self->ndim }, self->dtype,
                                 self->device);
    em_tensor *go = gi ? (grad_output->dtype == self->dtype ? em_cpu_contiguous(EM_KS(EM_KEY_CPU), grad_output)
                                                            : em_cpu_to_dtype(grad_output, self->dtype, op))
                       : NULL;
    em_tensor *ix = go ? em_cpu_contiguous(EM_KS(EM_KEY_CPU), indices) : NULL;
    if (!ix) {
        em_tensor_release(gi);
        em_tensor_release(go);
        return NULL;
    }
    if (go->numel > 0) {
        max_bwd_ctx c = { g->in_numel, g->out_numel, (const char *)em_tensor_data(go),
                          (const int64_t *)em_tensor_data(ix), (char *)em_tensor_data(gi), 0, false };
        em_cpu_range_fn fn = self->dtype == EM_FLOAT64    ? max_bwd_f64
                             : self->dtype == EM_BFLOAT16 ? max_bwd_bf16
                             : self->dtype == EM_FLOAT16  ? max_bwd_f16
                                                          : max_bwd_f32;
        int64_t work = g->out_numel;
        em_cpu_parallel_for_stoppable(g->planes, work >= EM_CPU_GRAIN ? 1 : EM_CPU_GRAIN / (work ? work : 1), fn,
                                      &c);
        if (em_cpu_interrupted(op)) { /* Note [Interrupts in kernels], way (b) */
            em_tensor_release(gi);
            gi = NULL;
        } else if (atomic_load(&c.any_bad)) {
            em_set_error(EM_EINDEX, "%s: index %lld in 'indices' is out of range 1..%lld (the input plane; 0 for a window over no input)", op,
                         (long long)atomic_load(&c.bad), (long long)g->in_numel);
            em_tensor_release(gi);
            gi = NULL;
        }
    }
    em_tensor_release(go);
    em_tensor_release(ix);
    return gi;
}

static em_tensor *max_pool_backward(em_tensor *grad_output, em_tensor *self, int nsp, em_intlist kernel_size,
                                    em_intlist stride, em_intlist padding, em_intlist dilation, bool ceil_mode,
                                    em_tensor *indices, const char *op) {
    em_cpu_pool_geom g;
    if (em_cpu_pool_geom_init(&g, self, nsp, kernel_size, stride, padding, dilation, ceil_mode, false, op) != EM_OK)
        return NULL;
    return em_cpu_pool_scatter_backward(grad_output, self, &g, indices, op);
}

em_tensor *em_cpu_max_pool2d_with_indices_backward(em_keyset ks, em_tensor *grad_output, em_tensor *self,
                                                   em_intlist kernel_size, em_intlist stride, em_intlist padding,
                                                   em_intlist dilation, bool ceil_mode, em_tensor *indices) {
    (void)ks;
    return max_pool_backward(grad_output, self, 2, kernel_size, stride, padding, dilation, ceil_mode, indices,
                             "max_pool2d_with_indices_backward");
}

em_tensor *em_cpu_max_pool3d_with_indices_backward(em_keyset ks, em_tensor *grad_output, em_tensor *self,
                                                   em_intlist kernel_size, em_intlist stride, em_intlist padding,
                                                   em_intlist dilation, bool ceil_mode, em_tensor *indices) {
    (void)ks;
    return max_pool_backward(grad_output, self, 3, kernel_size, stride, padding, dilation, ceil_mode, indices,
                             "max_pool3d_with_indices_backward");
}
