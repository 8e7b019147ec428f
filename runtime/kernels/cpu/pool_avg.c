/* pool_avg.c -- average pooling over 2 or 3 spatial dims (avg_pool1d is a
 * composite over avg_pool2d) and its backward (schema/ops/pool.yaml).
 *
 * Same layout as pool_max.c (every rank as three spatial dims over
 * contiguous planes, parallel over planes). PyTorch's CPU divisor: a
 * window's size counted up to the padded input's end (count_include_pad),
 * or the input positions it covers (count_include_pad false), or
 * divisor_override; a window over padding alone gives 0. int64 inputs sum
 * in int64 and divide truncating, as PyTorch's kernel does. The same loops
 * serve adaptive average pooling (pool_adaptive.c), whose geometry has
 * adaptive windows (em_cpu_pool_geom.adaptive) each divided by its size.
 */
#include <string.h>

#include "kernels/cpu/em_cpu.h"

typedef struct {
    const em_cpu_pool_geom *g;
    bool count_include_pad;
    int64_t divisor;  /* divisor_override, 0 when absent */
    const char *in;   /* contiguous input (forward) or grad_output (backward) */
    char *out;        /* contiguous output (forward) or zeroed grad_input (backward) */
} avg_ctx;

/* Two kinds of windows, each a pair KIND_window / KIND_divisor:
 * KIND_window(g, i, o, &lo, &hi): the window of output o along dim i,
 * [lo, hi) within the input, returning its size counted up to the padded
 * input's end (PyTorch's pool_size factor); KIND_divisor(c, padded, d0,
 * d1, h0, h1, w0, w1): the divisor of the window [d0,d1) x [h0,h1) x
 * [w0,w1) (0: it covers no input).
 * kernel: avg_pool's windows (k, s, p; count_include_pad,
 * divisor_override); adaptive: PyTorch's adaptive windows (g->adaptive),
 * never empty nor padded, each divided by its size. */
static inline int64_t kernel_window(const em_cpu_pool_geom *g, int i, int64_t o, int64_t *lo, int64_t *hi) {
    int64_t a = o * g->s[i] - g->p[i];
    int64_t b = a + g->k[i];
    if (b > g->in[i] + g->p[i]) b = g->in[i] + g->p[i];
    int64_t padded = b - a;
    *lo = a < 0 ? 0 : a;
    *hi = b > g->in[i] ? g->in[i] : b;
    return padded;
}

static inline int64_t kernel_divisor(const avg_ctx *c, int64_t padded, int64_t d0, int64_t d1, int64_t h0,
                                     int64_t h1, int64_t w0, int64_t w1) {
    int64_t covered = d1 > d0 && h1 > h0 && w1 > w0 ? (d1 - d0) * (h1 - h0) * (w1 - w0) : 0;
    if (covered == 0) return 0;
    return c->divisor ? c->divisor : c->count_include_pad ? padded : covered;
}

static inline int64_t adaptive_window(const em_cpu_pool_geom *g, int i, int64_t o, int64_t *lo, int64_t *hi) {
    em_cpu_adaptive_window(o, g->in[i], g->out[i], lo, hi);
    return *hi - *lo;
}

static inline int64_t adaptive_divisor(const avg_ctx *c, int64_t padded, int64_t d0, int64_t d1, int64_t h0,
                                       int64_t h1, int64_t w0, int64_t w1) {
    (void)c, (void)padded;
    return (d1 - d0) * (h1 - h0) * (w1 - w0);
}

/* The loops over one plane's output positions, shared by the forward and
 * the backward (g: the geometry, c: the avg_ctx, KIND: kernel or adaptive,
 * fixed per instantiated kernel): for each, __VA_ARGS__ runs with the
 * window [d0,d1) x [h0,h1) x [w0,w1), its divisor div (0: no input
 * covered) and AVG_OUT(g), the output's offset in the plane (an expression
 * evaluated where it is used: after the forward's sum). */
#define AVG_OUT(g) ((od * (g)->out[1] + oh) * (g)->out[2] + ow)
#define AVG_WINDOWS(g, c, KIND, ...)                                                                \
    for (int64_t od = 0; od < (g)->out[0]; od++) {                                                  \
        int64_t d0, d1, pd = KIND##_window(g, 0, od, &d0, &d1);                                     \
        for (int64_t oh = 0; oh < (g)->out[1]; oh++) {                                              \
            int64_t h0, h1, ph = KIND##_window(g, 1, oh, &h0, &h1);                                 \
            for (int64_t ow = 0; ow < (g)->out[2]; ow++) {                                          \
                int64_t w0, w1, pw = KIND##_window(g, 2, ow, &w0, &w1);                             \
                int64_t div = KIND##_divisor(c, pd * ph * pw, d0, d1, h0, h1, w0, w1);              \
                __VA_ARGS__                                                                         \
            }                                                                                       \
        }                                                                                           \
    }

/* Forward over a plane range for element type T summed in A. */
#define AVG_FWD(NAME, KIND, T, A, LD, ST)                                                           \
    static void NAME(int64_t begin, int64_t end, void *vctx) {                                      \
        const avg_ctx *c = vctx;                                                                    \
        const em_cpu_pool_geom *g = c->g;                                                           \
        const int64_t IH = g->in[1], IW = g->in[2];                                                 \
        for (int64_t pl = begin; pl < end; pl++) {                                                  \
            const T *x = (const T *)c->in + pl * g->in_numel;                                       \
            T *y = (T *)c->out + pl * g->out_numel;                                                 \
            AVG_WINDOWS(g, c, KIND, {                                                               \
                A sum = 0;                                                                          \
                for (int64_t id = d0; id < d1; id++)                                                \
                    for (int64_t ih = h0; ih < h1; ih++) {                                          \
                        const T *row = x + (id * IH + ih) * IW;                                     \
                        for (int64_t iw = w0; iw < w1; iw++) sum += LD(row[iw]);                    \
                    }                                                                               \
                y[AVG_OUT(g)] = div ? ST(sum / (A)div) : ST(0);                                     \
            })                                                                                      \
        }                                                                                           \
    }

/* Backward: each output's gradient / its divisor added over its window,
 * one plane per iteration (no two threads write one element; fixed order). */
#define AVG_BWD(NAME, KIND, T, A, LD, ST)                                                           \
    static void NAME(int64_t begin, int64_t end, void *vctx) {                                      \
        const avg_ctx *c = vctx;                                                                    \
        const em_cpu_pool_geom *g = c->g;                                                           \
        const int64_t IH = g->in[1], IW = g->in[2];                                                 \
        for (int64_t pl = begin; pl < end; pl++) {                                                  \
            const T *go = (const T *)c->in + pl * g->out_numel;                                     \
            T *gi = (T *)c->out + pl * g->in_numel;                                                 \
            AVG_WINDOWS(g, c, KIND, {                                                               \
                if (!div) continue;                                                                 \
                A v = (A)LD(go[AVG_OUT(g)]) / (A)div;                                               \
                for (int64_t id = d0; id < d1; id++)                                                \
                    for (int64_t ih = h0; ih < h1; ih++) {                                          \
                        T *row = gi + (id * IH + ih) * IW;                                          \
                        for (int64_t iw = w0; iw < w1; iw++) row[iw] = ST((A)LD(row[iw]) + v);      \
                    }                                                                               \
            })                                                                                      \
        }                                                                                           \
    }

/* Forward: f32, f64, bf16, i64; backward: f32, f64, bf16, f16; then the
 * same over adaptive windows (float32/float64/bfloat16 only). */
#define ID_LD(x) (x)
AVG_FWD(avg_fwd_f32, kernel, float, float, ID_LD, ID_LD)
AVG_FWD(avg_fwd_f64, kernel, double, double, ID_LD, ID_LD)
AVG_FWD(avg_fwd_bf16, kernel, em_bfloat16, float, em_bf16_to_float, em_float_to_bf16)
AVG_FWD(avg_fwd_i64, kernel, int64_t, int64_t, ID_LD, ID_LD)
AVG_BWD(avg_bwd_f32, kernel, float, float, ID_LD, ID_LD)
AVG_BWD(avg_bwd_f64, kernel, double, double, ID_LD, ID_LD)
AVG_BWD(avg_bwd_bf16, kernel, em_bfloat16, float, em_bf16_to_float, em_float_to_bf16)
AVG_BWD(avg_bwd_f16, kernel, em_half, float, em_half_to_float, em_float_to_half)
AVG_FWD(ad_fwd_f32, adaptive, float, float, ID_LD, ID_LD)
AVG_FWD(ad_fwd_f64, adaptive, double, double, ID_LD, ID_LD)
AVG_FWD(ad_fwd_bf16, adaptive, em_bfloat16, float, em_bf16_to_float, em_float_to_bf16)
AVG_BWD(ad_bwd_f32, adaptive, float, float, ID_LD, ID_LD)
AVG_BWD(ad_bwd_f64, adaptive, double, double, ID_LD, ID_LD)
AVG_BWD(ad_bwd_bf16, adaptive, em_bfloat16, float, em_bf16_to_float, em_float_to_bf16)

/* Planes per task: a window's elements are the work of an output (the
 * input and output elements for adaptive windows). */
static int64_t grain_for(const em_cpu_pool_geom *g) {
    int64_t work = g->adaptive ? g->in_numel + g->out_numel : g->out_numel * g->k[0] * g->k[1] * g->k[2];
    return work >= EM_CPU_GRAIN ? 1 : EM_CPU_GRAIN / (work ? work : 1);
}

/* Runs fn over g's planes from in (the input, or grad_output) into out
 * (the output, or the zeroed grad_input) unless the pooling's output is
 * empty; releases in; returns out (NULL, releasing both, when either is
 * NULL or an interrupt stopped the loop: "g->op: interrupted"). */
static em_tensor *avg_launch(const em_cpu_pool_geom *g, bool count_include_pad, int64_t divisor, em_tensor *in,
                             em_tensor *out, em_cpu_range_fn fn) {
    if (!in || !out) {
        em_tensor_release(in);
        em_tensor_release(out);
        return NULL;
    }
    if (g->planes * g->out_numel > 0) {
        avg_ctx c = { g, count_include_pad, divisor, (const char *)em_tensor_data(in), (char *)em_tensor_data(out) };
        em_cpu_parallel_for_stoppable(g->planes, grain_for(g), fn, &c);
        if (em_cpu_interrupted(g->op)) { /* Note [Interrupts in kernels], way (b) */
            em_tensor_release(out);
            out = NULL;
        }
    }
    em_tensor_release(in);
    return out;
}

em_tensor *em_cpu_avg_pool_run(const em_cpu_pool_geom *g, em_tensor *self, bool count_include_pad,
                               int64_t divisor) {
    em_tensor *x = em_cpu_contiguous(EM_KS(EM_KEY_CPU), self);
    em_tensor *y = x ? em_tensor_new(g->ndim, g->out_sizes, self->dtype, self->device) : NULL;
    bool f64 = self->dtype == EM_FLOAT64, bf16 = self->dtype == EM_BFLOAT16;
    em_cpu_range_fn fn = g->adaptive                 ? (f64 ? ad_fwd_f64 : bf16 ? ad_fwd_bf16 : ad_fwd_f32)
                         : f64                       ? avg_fwd_f64
                         : bf16                      ? avg_fwd_bf16
                         : self->dtype == EM_INT64   ? avg_fwd_i64
                                                     : avg_fwd_f32;
    return avg_launch(g, count_include_pad, divisor, x, y, fn);
}

em_tensor *em_cpu_avg_pool_backward_run(const em_cpu_pool_geom *g, em_tensor *grad_output, em_tensor *self,
                                        bool count_include_pad, int64_t divisor, const char *op) {
    em_tensor *gi = em_cpu_zeros(EM_KS(EM_KEY_CPU), (em_intlist){ self->sizes, self->ndim }, self->dtype,
                                 self->device);
    em_tensor *go = gi ? (grad_output->dtype == self->dtype ? em_cpu_contiguous(EM_KS(EM_KEY_CPU), grad_output)
                                                            : em_cpu_to_dtype(grad_output, self->dtype, op))
                       : NULL;
    bool f64 = self->dtype == EM_FLOAT64, bf16 = self->dtype == EM_BFLOAT16;
    em_cpu_range_fn fn = g->adaptive                 ? (f64 ? ad_bwd_f64 : bf16 ? ad_bwd_bf16 : ad_bwd_f32)
                         : f64                       ? avg_bwd_f64
                         : bf16                      ? avg_bwd_bf16
                         : self->dtype == EM_FLOAT16 ? avg_bwd_f16
                                                     : avg_bwd_f32;
    return avg_launch(g, count_include_pad, divisor, go, gi, fn);
}

/* The checks avg pooling adds to the geometry's: divisor_override non-zero. */
static em_status avg_geom(em_cpu_pool_geom *g, const em_tensor *self, int nsp, em_intlist kernel_size,
                          em_intlist stride, em_intlist padding, bool ceil_mode, const int64_t *divisor_override,
                          const char *op) {
    em_intlist none = { NULL, -1 };
    if (em_cpu_pool_geom_init(g, self, nsp, kernel_size, stride, padding, none, ceil_mode, true, op) != EM_OK)
        return EM_EVALUE;
    /* PyTorch's pool3d_shape_check for average pooling: the unpadded input
     * must hold the kernel */
    if (nsp == 3 && (g->in[0] < g->k[0] || g->in[1] < g->k[1] || g->in[2] < g->k[2])) {
        em_set_error(EM_ESHAPE, "%s: input of spatial size %lldx%lldx%lld is smaller than kernel_size %lldx%lldx%lld",
                     op, (long long)g->in[0], (long long)g->in[1], (long long)g->in[2], (long long)g->k[0],
                     (long long)g->k[1], (long long)g->k[2]);
        return EM_ESHAPE;
    }
    if (divisor_override && *divisor_override == 0) {
        em_set_error(EM_EVALUE, "%s: divisor_override must not be 0", op);
        return EM_EVALUE;
    }
    return EM_OK;
}

static em_tensor *avg_pool_forward(em_tensor *self, int nsp, em_intlist kernel_size, em_intlist stride,
                                   em_intlist padding, bool ceil_mode, bool count_include_pad,
                                   const int64_t *divisor_override, const char *op) {
    em_cpu_pool_geom g;
    if (avg_geom(&g, self, nsp, kernel_size, stride, padding, ceil_mode, divisor_override, op) != EM_OK)
        return NULL;
    return em_cpu_avg_pool_run(&g, self, count_include_pad, divisor_override ? *divisor_override : 0);
}

static em_tensor *avg_pool_backward(em_tensor *grad_output, em_tensor *self, int nsp, em_intlist kernel_size,
                                    em_intlist stride, em_intlist padding, bool ceil_mode, bool count_include_pad,
                                    const int64_t *divisor_override, const char *op) {
    em_cpu_pool_geom g;
    if (avg_geom(&g, self, nsp, kernel_size, stride, padding, ceil_mode, divisor_override, op) != EM_OK)
        return NULL;
    if (!em_cpu_is_float(self->dtype)) {
        em_set_error(EM_ETYPE, "%s: argument 'self' must be floating point, got %s", op, em_dtype_name(self->dtype));
        return NULL;
    }
    if (grad_output->ndim != g.ndim || memcmp(grad_output->sizes, g.out_sizes, sizeof(int64_t) * (size_t)g.ndim)) {
        char sa[EM_SHAPE_STR_MAX], sb[EM_SHAPE_STR_MAX];
        em_set_error(EM_ESHAPE, "%s: grad_output has shape %s, the pooling's output has shape %s", op,
                     em_shape_str(grad_output->ndim, grad_output->sizes, sa, sizeof sa),
                     em_shape_str(g.ndim, g.out_sizes, sb, sizeof sb));
        return NULL;
    }
    return em_cpu_avg_pool_backward_run(&g, grad_output, self, count_include_pad,
                                        divisor_override ? *divisor_override : 0, op);
}

em_tensor *em_cpu_avg_pool2d(em_keyset ks, em_tensor *input, em_intlist kernel_size, em_intlist stride,
                             em_intlist padding, bool ceil_mode, bool count_include_pad,
                             const int64_t *divisor_override) {
    (void)ks;
    return avg_pool_forward(input, 2, kernel_size, stride, padding, ceil_mode, count_include_pad, divisor_override,
                            "avg_pool2d");
}

em_tensor *em_cpu_avg_pool3d(em_keyset ks, em_tensor *input, em_intlist kernel_size, em_intlist stride,
                             em_intlist padding, bool ceil_mode, bool count_include_pad,
                             const int64_t *divisor_override) {
    (void)ks;
    return avg_pool_forward(input, 3, kernel_size, stride, padding, ceil_mode, count_include_pad, divisor_override,
                            "avg_pool3d");
}

em_tensor *em_cpu_avg_pool2d_backward(em_keyset ks, em_tensor *grad_output, em_tensor *self, em_intlist kernel_size,
                                      em_intlist stride, em_intlist padding, bool ceil_mode, bool count_include_pad,
                                      const int64_t *divisor_override) {
    (void)ks;
    return avg_pool_backward(grad_output, self, 2, kernel_size, stride, padding, ceil_mode, count_include_pad,
                             divisor_override, "avg_pool2d_backward");
}

em_tensor *em_cpu_avg_pool3d_backward(em_keyset ks, em_tensor *grad_output, em_tensor *self, em_intlist kernel_size,
                                      em_intlist stride, em_intlist padding, bool ceil_mode, bool count_include_pad,
                                      const int64_t *divisor_override) {
    (void)ks;
    return avg_pool_backward(grad_output, self, 3, kernel_size, stride, padding, ceil_mode, count_include_pad,
                             divisor_override, "avg_pool3d_backward");
}
