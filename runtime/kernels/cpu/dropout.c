/* dropout.c -- the fused dropout kernels (schema/ops/activation.yaml):
 * native_dropout draws the keep mask from the Philox stream and scales the
 * kept elements in one pass; native_dropout_backward multiplies by the
 * saved mask and the scale (the mask is never drawn twice).
 *
 * As PyTorch 1.13's CPU kernel: the mask is bool (all true when not
 * training; an empty input gets an empty mask of its own dtype) and the
 * output is literally input * mask * scale (NaN * 0 stays NaN, scale 0 for
 * p = 1).
 * Element i keeps its value when word i of the call's reservation (Note
 * [Random numbers] in core/em_core.h), read as u = word / 2^32, is below
 * 1 - p: one word an element whatever the dtype, so the mask depends only
 * on (seed, offset, i) and not on the thread count; ember.manual_seed
 * reproduces it. The masks differ from PyTorch's (another generator); their
 * distribution is the same.
 */
#pragma GCC optimize("O3", "no-trapping-math", "no-math-errno")
#include "kernels/cpu/em_cpu.h"

#include <string.h>

typedef struct {
    const char *x;     /* input, contiguous, dtype dt */
    char *out;         /* output, contiguous, dtype dt */
    bool *mask;        /* keep mask, contiguous */
    em_dtype dt;
    double keep_below; /* (1 - p) * 2^32 */
    double scale;      /* 1 / (1 - p), 0 when p == 1 */
    uint64_t seed, block0;
} nd_ctx;

/* elements [b, e): the mask drawn 4 words (one Philox block) at a time,
 * then out = x * mask * scale */
#define ND_APPLY(T, LD, ST)                                                                   \
    do {                                                                                      \
        const T *x = (const T *)c->x;                                                         \
        T *o = (T *)c->out;                                                                   \
        bool *m = c->mask;                                                                    \
        uint32_t w[4];                                                                        \
        for (int64_t i = b; i < e;) {                                                         \
            em_philox_word_block(c->seed, c->block0 + (uint64_t)(i >> 2), w);                 \
            for (int64_t j = i & 3; j < 4 && i < e; j++, i++)                                 \
                m[i] = (double)w[j] < c->keep_below;                                          \
        }                                                                                     \
        for (int64_t i = b; i < e; i++) o[i] = ST(LD(x[i]) * (float)m[i] * sc);               \
    } while (0)

static void nd_range(int64_t b, int64_t e, void *arg) {
    const nd_ctx *c = arg;
    switch (c->dt) {
    case EM_FLOAT32: { const float sc = (float)c->scale; ND_APPLY(float, , ); break; }
    case EM_FLOAT64: { const double sc = c->scale; ND_APPLY(double, , ); break; }
    case EM_FLOAT16: { const float sc = (float)c->scale; ND_APPLY(em_half, em_half_to_float, em_float_to_half); break; }
    case EM_BFLOAT16: { const float sc = (float)c->scale; ND_APPLY(em_bfloat16, em_bf16_to_float, em_float_to_bf16); break; }
    default: break;
    }
}

/* Contract: p in [0, 1], input floating when training (both checked). Not
 * training: the output is a copy of input (any dtype) and the mask all true
 * (as PyTorch). Returns the
 * output and sets *mask (bool, input's shape); NULL with the error set. */
em_tensor *em_cpu_native_dropout(em_keyset ks, em_tensor *input, double p, bool train, em_tensor **mask) {
    (void)ks;
    *mask = NULL;
    if (!(p >= 0 && p <= 1)) {
        em_set_error(EM_EVALUE, "native_dropout: argument 'p': dropout probability has to be between 0 and 1, "
                                "but got %g", p);
        return NULL;
    }
    /* PyTorch returns at once for no elements: any dtype, a mask like input */
    bool training = train || input->numel == 0;
    if (training && input->numel && !em_dtype_is_floating(input->dtype)) {
        em_set_error(EM_ETYPE, "native_dropout: argument 'input' must be a floating tensor when training (got %s)",
                     em_dtype_name(input->dtype));
        return NULL;
    }
    em_tensor *x = input->is_contiguous ? em_tensor_retain(input)
                                        : em_cpu_to_dtype(input, input->dtype, "native_dropout");
    if (!x) return NULL;
    em_tensor *out = em_tensor_new(x->ndim, x->sizes, x->dtype, em_cpu_dev());
    em_tensor *m = out ? em_tensor_new(x->ndim, x->sizes, x->numel ? EM_BOOL : x->dtype, em_cpu_dev()) : NULL;
    if (!m) {
        em_tensor_release(out);
        em_tensor_release(x);
        return NULL;
    }
    int64_t n = x->numel;
    if (!training) {
        if (n) memcpy(em_tensor_data(out), em_tensor_data(x), (size_t)n * em_dtype_size(x->dtype));
        if (n) memset(em_tensor_data(m), 1, (size_t)n);
    } else {
        nd_ctx c = { .x = em_tensor_data(x), .out = em_tensor_data(out), .mask = em_tensor_data(m), .dt = x->dtype,
                     .keep_below = (1 - p) * 4294967296.0, .scale = p == 1 ? 0 : 1 / (1 - p) };
        c.block0 = em_generator_reserve(em_default_generator(), (uint64_t)n, &c.seed) / 4;
        if (n) em_cpu_parallel_for(n, EM_CPU_GRAIN / 4, nd_range, &c);
    }
    em_tensor_release(x);
    *mask = m;
    return out;
}

typedef struct {
    float sf;
    double sd;
} ndb_ctx;

#define NDB_FN(FN, T, CT, LD, ST, SC, ATTR)                                                  \
    ATTR static void FN(char **d, const int64_t *s, int64_t n, void *ctx) {                 \
        const CT sc = (CT)((const ndb_ctx *)ctx)->SC;                                       \
        if (s[0] == (int64_t)sizeof(T) && s[1] == (int64_t)sizeof(T) && s[2] == 1) {         \
            T *restrict o = (T *)d[0];                                                      \
            const T *restrict g = (const T *)d[1];                                          \
            const bool *restrict m = (const bool *)d[2];                                    \
            for (int64_t i = 0; i < n; i++) o[i] = ST(LD(g[i]) * (CT)m[i] * sc);              \
        } else {                                                                            \
            for (int64_t i = 0; i < n; i++) {                                               \
                bool m = *(const bool *)(d[2] + i * s[2]);                                  \
                CT g = LD(*(const T *)(d[1] + i * s[1]));                                   \
                *(T *)(d[0] + i * s[0]) = ST(g * (CT)m * sc);                               \
            }                                                                               \
        }                                                                                   \
    }
NDB_FN(ndb_f16, em_half, float, LA_f16, EM_ST_f16, sf, )
NDB_FN(ndb_bf16, em_bfloat16, float, LA_bf16, EM_ST_bf16, sf, )
NDB_FN(ndb_f32, float, float, LA_f32, EM_ST_f32, sf, EM_CPU_CLONES)
NDB_FN(ndb_f64, double, double, LA_f64, EM_ST_f64, sd, EM_CPU_CLONES)

/* a mask of another dtype, both operands cast to the promoted dtype */
#define NDBM_FN(FN, T, CT, LD, ST, SC)                                                       \
    static void FN(char **d, const int64_t *s, int64_t n, void *ctx) {                      \
        const CT sc = (CT)((const ndb_ctx *)ctx)->SC;                                       \
        for (int64_t i = 0; i < n; i++) {                                                   \
            CT g = LD(*(const T *)(d[1] + i * s[1])), m = LD(*(const T *)(d[2] + i * s[2])); \
            *(T *)(d[0] + i * s[0]) = ST(g * m * sc);                                       \
        }                                                                                   \
    }
NDBM_FN(ndbm_f16, em_half, float, LA_f16, EM_ST_f16, sf)
NDBM_FN(ndbm_bf16, em_bfloat16, float, LA_bf16, EM_ST_bf16, sf)
NDBM_FN(ndbm_f32, float, float, LA_f32, EM_ST_f32, sf)
NDBM_FN(ndbm_f64, double, double, LA_f64, EM_ST_f64, sd)

/* grad_output * mask * scale: fused for a bool mask (native_dropout's), in
 * grad_output's floating dtype; a mask of another dtype multiplies as a
 * number (promoting, as PyTorch). */
em_tensor *em_cpu_native_dropout_backward(em_keyset ks, em_tensor *grad_output, em_tensor *mask, double scale) {
    (void)ks;
    em_dtype dt = grad_output->dtype;
    em_cpu_loop fn = dt == EM_FLOAT32 ? ndb_f32 : dt == EM_FLOAT64 ? ndb_f64 : dt == EM_FLOAT16 ? ndb_f16
                   : dt == EM_BFLOAT16 ? ndb_bf16 : NULL;
    if (!fn || mask->dtype != EM_BOOL) { /* PyTorch: grad_output * mask * scale, promoting */
        em_dtype ct = em_result_type2(grad_output, mask);
        if (!em_dtype_is_floating(ct)) ct = EM_FLOAT32; /* times a float number */
        em_cpu_loop mfn = ct == EM_FLOAT32 ? ndbm_f32 : ct == EM_FLOAT64 ? ndbm_f64 : ct == EM_FLOAT16 ? ndbm_f16
                        : ndbm_bf16;
        em_tensor *in[2] = { grad_output, mask };
        ndb_ctx c = { (float)scale, scale };
        em_cpu_iter it;
        em_tensor *out = em_cpu_iter_build(&it, NULL, ct, 2, in, ct, "native_dropout_backward");
        if (out) em_cpu_iter_run(&it, mfn, &c, EM_CPU_GRAIN);
        em_cpu_iter_done(&it);
        return out;
    }
    em_tensor *go = grad_output;
    em_tensor *in[2] = { go, mask };
    ndb_ctx c = { (float)scale, scale };
    em_cpu_iter it;
    /* compute dtype NONE: each operand keeps its dtype (the loop reads bool) */
    em_tensor *out = em_cpu_iter_build(&it, NULL, dt, 2, in, EM_DTYPE_NONE, "native_dropout_backward");
    if (out) em_cpu_iter_run(&it, fn, &c, EM_CPU_GRAIN);
    em_cpu_iter_done(&it);
    return out;
}
