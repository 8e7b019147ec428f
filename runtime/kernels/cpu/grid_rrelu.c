/* grid_rrelu.c -- the CPU kernel of rrelu_with_noise (schema/ops/grid.yaml),
 * the randomized leaky ReLU of F.rrelu and rrelu_.
 *
 * As PyTorch 1.13's rrelu_with_noise: training draws, for each element
 * x <= 0, a slope r uniform in [lower, upper) and outputs x * r; other
 * elements (x > 0, NaN) pass unchanged. Not training, the slope is
 * (lower + upper) / 2 for every x that is not > 0 (leaky_relu). The second
 * result, noise, is the factor of each element's derivative -- the drawn
 * slope or 1 when training, the mean slope or 1 when not -- so the backward
 * is grad * noise (PyTorch's rrelu_with_noise_backward: grad * noise when
 * training, leaky_relu_backward otherwise; the same values).
 * Element i's slope comes from word i of the call's reservation (Note
 * [Random numbers] in core/em_core.h): u = word / 2^32, r = lower +
 * (upper - lower) u, in double, then rounded to the dtype; the slopes do
 * not depend on the thread count. They differ from PyTorch's (another
 * generator); their distribution is the same.
 */
#include <string.h>

#include "kernels/cpu/em_cpu.h"

typedef struct {
    const char *x;
    char *out, *noise;
    em_dtype dt;
    bool training;
    double lower, upper;
    uint64_t seed, block0;
} rr_ctx;

/* the slope of element i (training) */
static inline double rr_slope(const rr_ctx *c, int64_t i, uint32_t w[4], int64_t *blk) {
    int64_t b = i >> 2;
    if (b != *blk) {
        em_philox_word_block(c->seed, c->block0 + (uint64_t)b, w);
        *blk = b;
    }
    return c->lower + (c->upper - c->lower) * ((double)w[i & 3] * (1.0 / 4294967296.0));
}

/* T: the storage type, C: the compute type */
#define RR_LOOP(T, C, LD, ST)                                                      \
    do {                                                                           \
        const T *x = (const T *)c->x;                                              \
        T *o = (T *)c->out, *nz = (T *)c->noise;                                   \
        uint32_t w[4];                                                             \
        int64_t blk = -1;                                                          \
        const C mid = (C)((c->lower + c->upper) / 2);                              \
        for (int64_t i = b; i < e; i++) {                                          \
            C v = LD(x[i]);                                                        \
            if (c->training) {                                                     \
                if (v <= 0) {                                                      \
                    C r = (C)rr_slope(c, i, w, &blk);                              \
                    o[i] = ST(v * r);                                              \
                    nz[i] = ST(r);                                                 \
                } else {                                                           \
                    o[i] = x[i];                                                   \
                    nz[i] = ST((C)1);                                              \
                }                                                                  \
            } else {                                                               \
                o[i] = v > 0 ? x[i] : ST(v * mid);                                 \
                nz[i] = ST(v > 0 ? (C)1 : mid);                                    \
            }                                                                      \
        }                                                                          \
    } while (0)

#define RR_ID(x) (x)
static void rr_range(int64_t b, int64_t e, void *arg) {
    const rr_ctx *c = arg;
    switch (c->dt) {
    case EM_FLOAT32: RR_LOOP(float, float, RR_ID, RR_ID); break;
    case EM_FLOAT64: RR_LOOP(double, double, RR_ID, RR_ID); break;
    case EM_BFLOAT16: RR_LOOP(em_bfloat16, float, em_bf16_to_float, em_float_to_bf16); break;
    default: break;
    }
}

em_tensor *em_cpu_rrelu_with_noise(em_keyset ks, em_tensor *self, em_scalar lower, em_scalar upper, bool training,
                                   em_generator *generator, em_tensor **noise) {
    (void)ks;
    const char *op = "rrelu_with_noise";
    *noise = NULL;
    double lo = em_scalar_to_double(lower), hi = em_scalar_to_double(upper);
    if (!(lo <= hi)) {
        em_set_error(EM_EVALUE, "%s: argument 'lower' (%g) must be less than or equal to 'upper' (%g)", op, lo, hi);
        return NULL;
    }
    if (self->dtype != EM_FLOAT32 && self->dtype != EM_FLOAT64 && self->dtype != EM_BFLOAT16) {
        em_set_error(EM_ETYPE, "%s: input must be float32, float64 or bfloat16, got %s", op, em_dtype_name(self->dtype));
        return NULL;
    }
    em_tensor *x = self->is_contiguous ? em_tensor_retain(self) : em_cpu_to_dtype(self, self->dtype, op);
    em_tensor *out = x ? em_tensor_new(x->ndim, x->sizes, x->dtype, em_cpu_device()) : NULL;
    em_tensor *nz = out ? em_tensor_new(x->ndim, x->sizes, x->dtype, em_cpu_device()) : NULL;
    if (!nz) {
        em_tensor_release(x);
        em_tensor_release(out);
        return NULL;
    }
    int64_t n = x->numel;
    rr_ctx c = { .x = em_tensor_data(x), .out = em_tensor_data(out), .noise = em_tensor_data(nz), .dt = x->dtype,
                 .training = training, .lower = lo, .upper = hi };
    if (training && n)
        c.block0 = em_generator_reserve(generator ? generator : em_default_generator(), (uint64_t)n, &c.seed) / 4;
    if (n) em_cpu_parallel_for(n, EM_CPU_GRAIN / 4, rr_range, &c);
    em_tensor_release(x);
    *noise = nz;
    return out;
}
