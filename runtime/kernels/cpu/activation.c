/* activation.c -- the pointwise activations of ember.nn.functional and their
 * backward ops (schema/ops/activation.yaml): leaky_relu, elu/selu/celu, gelu,
 * silu, mish, softplus, hardtanh, hardsigmoid, hardswish, logsigmoid,
 * softshrink, hardshrink, threshold and the in-place forms.
 *
 * Each op is one fused loop per dtype: a forward F_<name>(x, p) or a backward
 * B_<name>(g, x, p) element function (p: the op's numbers, in the compute
 * type) and one line of ACT_OPS. float16/bfloat16 compute in float32; the
 * float32 functions use em_vmath.h (Note [Vector math]) so the contiguous
 * loops vectorise (one clone per ISA); float64 calls libm. Formulas follow
 * PyTorch 1.13's CPU kernels element by element (same comparisons, so NaN
 * and the points where a branch switches behave as in PyTorch). Where
 * PyTorch's vectorised body and its scalar loop disagree (NaN in the
 * backward of hardtanh, elu, hardswish and the shrinks; hardswish_backward
 * at 3), ember follows the scalar loop: it is the one that does not depend
 * on the tensor's length and the machine's vector width.
 */
/* See unary.c: O3 vectorises; no-trapping-math and no-math-errno change no
 * computed value (only errno and FP exception flags). */
#pragma GCC optimize("O3", "no-trapping-math", "no-math-errno")
#include "kernels/cpu/em_cpu.h"
#include "kernels/cpu/em_vmath.h"

#include <math.h>
#include <string.h>

/* ---- element functions ---- */

/* log1p(u) for u >= 0 without a libm call: log(1 + u) corrected by the
 * rounding of 1 + u (Goldberg's trick); exact enough for float32. */
static inline __attribute__((always_inline)) float log1pf_v(float u) {
    float w = 1.0f + u;
    float l = em_vm_logf(w);
    float d = w - 1.0f;
    return d == 0.0f ? u : (w == INFINITY ? w : l * (u / d));
}
static inline double sigmoid_d(double x) { return 1.0 / (1.0 + exp(-x)); }
/* erf for float32 without a libm call: Abramowitz & Stegun 7.1.26,
 * sign(x) (1 - t (p1 + t (p2 + ...)) exp(-x^2)), t = 1 / (1 + p |x|), the
 * formula and constants of PyTorch's vectorised erf (absolute error below
 * 1.5e-7, so gelu's 1 + erf(x) is within a few ulp where it matters);
 * NaN stays NaN. */
static inline __attribute__((always_inline)) float erff_v(float x) {
    float ax = __builtin_fabsf(x);
    float t = 1.0f / (0.3275911f * ax + 1.0f);
    float r = (((1.061405429f * t - 1.453152027f) * t + 1.421413741f) * t - 0.284496736f) * t + 0.254829592f;
    float e = 1.0f - r * t * em_vm_expf(-x * x);
    return x < 0 ? -e : (x != x ? x : e);
}

#define A_EXP(x) _Generic((x), float: em_vm_expf((float)(x)), default: exp(x))
#define A_EXPM1(x) _Generic((x), float: em_vm_expm1f((float)(x)), default: expm1(x))
#define A_TANH(x) _Generic((x), float: em_vm_tanhf((float)(x)), default: tanh(x))
#define A_SIG(x) _Generic((x), float: em_vm_sigmoidf((float)(x)), default: sigmoid_d(x))
#define A_LOG1P(x) _Generic((x), float: log1pf_v((float)(x)), default: log1p(x))
#define A_ERF(x) _Generic((x), float: erff_v((float)(x)), default: erf(x))
#define A_ABS(x) _Generic((x), float: __builtin_fabsf((float)(x)), default: __builtin_fabs(x))

/* p[0..3]: the op's numbers (see each op's kernel below) */
#define K(T, v) ((T)(v))
#define F_leaky_relu(T, x, p) ((x) > 0 ? (x) : (x) * p[0])
#define B_leaky_relu(T, g, x, p) ((x) > 0 ? (g) : (g) * p[0])
/* elu: p = alpha, scale, input_scale (selu and celu are elu with fixed ones).
 * The + 0 makes expm1's -0 (at x = -0) a +0, as torch's exp(x) - 1 gives. */
#define F_elu(T, x, p) ((x) <= 0 ? (A_EXPM1((x) * p[2]) + (T)0) * (p[0] * p[1]) : (x) * p[1])
/* p[3] != 0: x is the forward's result (the in-place forms) */
#define B_elu(T, g, x, p)                                                                   \
    ((x) <= 0 ? (p[3] != 0 ? (g) * p[2] * ((x) + p[0] * p[1])                               \
                           : (g) * p[2] * (p[0] * p[1]) * A_EXP((x) * p[2]))                \
              : (g) * p[1])
#define GELU_BETA 0.7978845608028654  /* sqrt(2 / pi) */
#define GELU_KAPPA 0.044715
#define GELU_PDF 0.3989422804014327   /* 1 / sqrt(2 pi) */
#define GELU_SQRT1_2 0.7071067811865476 /* 1 / sqrt(2) */
#define F_gelu(T, x, p) ((x) * K(T, 0.5) * (K(T, 1) + A_ERF((x) * K(T, GELU_SQRT1_2))))
#define B_gelu(T, g, x, p)                                                                  \
    ((g) * (K(T, 0.5) * (K(T, 1) + A_ERF((x) * K(T, GELU_SQRT1_2))) +                          \
            (x) * (A_EXP(K(T, -0.5) * (x) * (x)) * K(T, GELU_PDF))))
#define F_gelu_tanh(T, x, p)                                                                \
    (K(T, 0.5) * (x) * (K(T, 1) + A_TANH(K(T, GELU_BETA) * ((x) + K(T, GELU_KAPPA) * (x) * (x) * (x)))))
static inline __attribute__((always_inline)) float gelu_tanh_bwf(float g, float x) {
    float t = em_vm_tanhf((float)GELU_BETA * (x + (float)GELU_KAPPA * x * x * x));
    float inner_d = (float)GELU_BETA * (1.0f + 3.0f * (float)GELU_KAPPA * x * x);
    return g * (0.5f * (1.0f + t) + 0.5f * x * (1.0f - t * t) * inner_d);
}
static inline double gelu_tanh_bwd(double g, double x) {
    double t = tanh(GELU_BETA * (x + GELU_KAPPA * x * x * x));
    double inner_d = GELU_BETA * (1.0 + 3.0 * GELU_KAPPA * x * x);
    return g * (0.5 * (1.0 + t) + 0.5 * x * (1.0 - t * t) * inner_d);
}
#define B_gelu_tanh(T, g, x, p) _Generic((x), float: gelu_tanh_bwf, default: gelu_tanh_bwd)(g, x)
#define F_silu(T, x, p) ((x) * A_SIG(x))
#define B_silu(T, g, x, p) ((g) * A_SIG(x) * (K(T, 1) + (x) * (K(T, 1) - A_SIG(x))))

/* Note [Blocked activations]
 * gelu's and silu's float32 loops (BLK in ACT_OPS) run the contiguous case
 * in blocks, as em_vmath.h's array forms do (Note [Vector math blocks]):
 * one pass computes the FAST element function and the block's largest
 * |x|; a block with an |x| past the FAST one's range (rare: |x| > 13 for
 * gelu's backward, > 87 for silu; NaN counts as large) is redone with
 * the GEN one. FAST and GEN give the same bits wherever FAST is valid
 * (em_vm_expf_fast and em_vm_expf agree there: Note [exp's fast path]),
 * so the split is invisible; strided runs use GEN. Each op has
 * <F|B>_<name>_FAST(x) / _GEN(x) (backward: (g, x)) and _MAX (the largest
 * |x| as float bits FAST takes). */

/* gelu (erf form): 0.5 x (1 + erf(x / sqrt(2))) with erff_v's formula,
 * given e^(-z^2) (ex) for z = x / sqrt(2) */
static inline __attribute__((always_inline)) float gelu_erf_f(float z, float ex) {
    float t = 1.0f / (0.3275911f * __builtin_fabsf(z) + 1.0f);
    float r = (((1.061405429f * t - 1.453152027f) * t + 1.421413741f) * t - 0.284496736f) * t + 0.254829592f;
    float e = 1.0f - r * t * ex; /* NaN z: NaN through t */
    return z < 0 ? -e : e;
}
/* The forward needs no GEN: e^(-z^2) of -z^2 clamped to -87 is
 * em_vm_expf_fast's (the same bits as em_vm_expf there), and below it
 * r t e^(-z^2) < 2e-38 leaves 1 - r t e^(-z^2) = 1 either way (the clamp
 * keeps NaN). So every x takes the one function, bit for bit erff_v's. */
static inline __attribute__((always_inline)) float gelu_fw_f(float x) {
    float z = x * (float)GELU_SQRT1_2;
    float a = -(z * z);
    a = a < -87.0f ? -87.0f : a;
    return x * 0.5f * (1.0f + gelu_erf_f(z, em_vm_expf_fast(a)));
}
/* backward: g (Phi(x) + x phi(x)), the one e^(-x^2 / 2) serving the erf
 * and the density (GEN: em_vm_expf, FAST: em_vm_expf_fast for |x| <= 13) */
#define GELU_BW_F(g, x, EXP)                                                                 \
    float ex = EXP(-0.5f * (x) * (x));                                                      \
    return (g) * (0.5f * (1.0f + gelu_erf_f((x) * (float)GELU_SQRT1_2, ex)) + (x) * (ex * (float)GELU_PDF))
static inline __attribute__((always_inline)) float gelu_bw_fast(float g, float x) { GELU_BW_F(g, x, em_vm_expf_fast); }
static inline __attribute__((always_inline)) float gelu_bw_gen(float g, float x) { GELU_BW_F(g, x, em_vm_expf); }
#define F_gelu_FAST(x) gelu_fw_f(x)
#define F_gelu_GEN(x) gelu_fw_f(x)
#define F_gelu_MAX 0x7f800000u /* every x but NaN (NaN: GEN, the same function) */
#define B_gelu_FAST(g, x) gelu_bw_fast(g, x)
#define B_gelu_GEN(g, x) gelu_bw_gen(g, x)
#define B_gelu_MAX 0x41500000u /* 13: -x^2 / 2 >= -84.5 */
/* silu: x sigmoid(x); backward g s (1 + x (1 - s)), s = sigmoid(x) once */
static inline __attribute__((always_inline)) float silu_bw_f(float g, float x, float sg) {
    return g * sg * (1.0f + x * (1.0f - sg));
}
#define F_silu_FAST(x) ((x) * em_vm_sigmoidf_fast(x))
#define F_silu_GEN(x) ((x) * em_vm_sigmoidf(x))
#define F_silu_MAX EM_VM_EXP_FAST_BITS
#define B_silu_FAST(g, x) silu_bw_f(g, x, em_vm_sigmoidf_fast(x))
#define B_silu_GEN(g, x) silu_bw_f(g, x, em_vm_sigmoidf(x))
#define B_silu_MAX EM_VM_EXP_FAST_BITS
#define F_mish(T, x, p) ((x) * A_TANH(A_LOG1P(A_EXP(x))))
#define B_mish(T, g, x, p)                                                                  \
    ((g) * (A_TANH(A_LOG1P(A_EXP(x))) +                                                     \
            (x) * A_SIG(x) * (K(T, 1) - A_TANH(A_LOG1P(A_EXP(x))) * A_TANH(A_LOG1P(A_EXP(x))))))
/* softplus: p = beta, threshold */
#define F_softplus(T, x, p) ((x) * p[0] > p[1] ? (x) : A_LOG1P(A_EXP((x) * p[0])) / p[0])
#define B_softplus(T, g, x, p)                                                              \
    ((x) * p[0] > p[1] ? (g) : (g) * A_EXP((x) * p[0]) / (A_EXP((x) * p[0]) + K(T, 1)))
/* hardtanh: p = min_val, max_val; PyTorch's clamp: a NaN x stays NaN, a
 * NaN bound makes every element NaN (p[0] + p[1]) */
#define HT_ISNAN(v) _Generic((v), float: (v) != (v), double: (v) != (v), default: 0)
#define F_hardtanh(T, x, p)                                                                 \
    (HT_ISNAN(p[0]) || HT_ISNAN(p[1]) ? p[0] + p[1]                                         \
                                      : (((x) < p[0] ? p[0] : (x)) > p[1] ? p[1] : ((x) < p[0] ? p[0] : (x))))
#define B_hardtanh(T, g, x, p) ((x) <= p[0] || (x) >= p[1] ? K(T, 0) : (g))
#define HS_CLAMP(T, u) (((u) < 0 ? K(T, 0) : (u)) > 6 ? K(T, 6) : ((u) < 0 ? K(T, 0) : (u)))
#define F_hardsigmoid(T, x, p) (HS_CLAMP(T, (x) + K(T, 3)) / K(T, 6))
#define B_hardsigmoid(T, g, x, p) ((x) > -3 && (x) < 3 ? (g) * K(T, 1.0 / 6.0) : K(T, 0))
#define F_hardswish(T, x, p) ((x) * HS_CLAMP(T, (x) + K(T, 3)) / K(T, 6))
#define B_hardswish(T, g, x, p) ((x) < -3 ? K(T, 0) : (x) <= 3 ? (g) * ((x) / K(T, 3) + K(T, 0.5)) : (g))
#define F_logsigmoid(T, x, p) (((x) < 0 ? (x) : K(T, 0)) - A_LOG1P(A_EXP(-A_ABS(x))))
#define B_logsigmoid(T, g, x, p)                                                            \
    ((g) * (((x) < 0 ? K(T, 1) : K(T, 0)) -                                                 \
            ((x) < 0 ? K(T, 1) : K(T, -1)) * (A_EXP(-A_ABS(x)) / (K(T, 1) + A_EXP(-A_ABS(x))))))
/* shrinks: p = lambd */
#define F_softshrink(T, x, p) ((x) > p[0] ? (x) - p[0] : (x) < -p[0] ? (x) + p[0] : K(T, 0))
#define F_hardshrink(T, x, p) ((x) >= -p[0] && (x) <= p[0] ? K(T, 0) : (x))
#define B_softshrink(T, g, x, p) ((x) >= -p[0] && (x) <= p[0] ? K(T, 0) : (g))
#define B_hardshrink(T, g, x, p) B_softshrink(T, g, x, p)
/* threshold: p = threshold, value */
#define F_threshold(T, x, p) ((x) <= p[0] ? p[1] : (x))

/* ---- loops ---- */

/* The op's numbers: p as doubles for floating dtypes, ip as int64 for
 * integer ones (hardtanh, threshold). */
typedef struct {
    double p[4];
    int64_t ip[4];
} act_ctx;

#define ACT_PARAMS(CT, c)                                                                   \
    CT p[4];                                                                                \
    for (int k_ = 0; k_ < 4; k_++)                                                          \
        p[k_] = _Generic((CT)0, float: (CT)(c)->p[k_], double: (CT)(c)->p[k_], default: (CT)(c)->ip[k_]); \
    (void)p;

/* forward: d[0] out, d[1] x (may be the same memory: the in-place forms) */
#define FW_FN(FN, T, CT, LD, ST, EXPR, ATTR)                                                \
    ATTR static void FN(char **d, const int64_t *s, int64_t n, void *ctx) {                 \
        ACT_PARAMS(CT, (const act_ctx *)ctx)                                                \
        if (s[0] == (int64_t)sizeof(T) && s[1] == (int64_t)sizeof(T)) {                     \
            T *op = (T *)d[0];                                                              \
            const T *ap = (const T *)d[1];                                                  \
            for (int64_t i = 0; i < n; i++) {                                               \
                CT x = LD(ap[i]);                                                           \
                op[i] = ST(EXPR(CT, x, p));                                                 \
            }                                                                               \
        } else {                                                                            \
            for (int64_t i = 0; i < n; i++) {                                               \
                CT x = LD(*(const T *)(d[1] + i * s[1]));                                   \
                *(T *)(d[0] + i * s[0]) = ST(EXPR(CT, x, p));                               \
            }                                                                               \
        }                                                                                   \
    }
/* backward: d[0] out, d[1] grad_output, d[2] x */
#define BW_FN(FN, T, CT, LD, ST, EXPR, ATTR)                                                \
    ATTR static void FN(char **d, const int64_t *s, int64_t n, void *ctx) {                 \
        ACT_PARAMS(CT, (const act_ctx *)ctx)                                                \
        if (s[0] == (int64_t)sizeof(T) && s[1] == (int64_t)sizeof(T) && s[2] == (int64_t)sizeof(T)) { \
            T *restrict op = (T *)d[0];                                                     \
            const T *restrict gp = (const T *)d[1];                                         \
            const T *restrict xp = (const T *)d[2];                                         \
            for (int64_t i = 0; i < n; i++) {                                               \
                CT g = LD(gp[i]), x = LD(xp[i]);                                            \
                op[i] = ST(EXPR(CT, g, x, p));                                              \
            }                                                                               \
        } else {                                                                            \
            for (int64_t i = 0; i < n; i++) {                                               \
                CT g = LD(*(const T *)(d[1] + i * s[1])), x = LD(*(const T *)(d[2] + i * s[2])); \
                *(T *)(d[0] + i * s[0]) = ST(EXPR(CT, g, x, p));                            \
            }                                                                               \
        }                                                                                   \
    }

/* float32 loops of the BLK ops (Note [Blocked activations]); E is F_<name>
 * or B_<name>. The forward may run in place (EM_VM_BLOCKED handles it);
 * a backward whose output overlaps an input runs GEN element by element. */
#define FW_BLK_FN(FN, E)                                                                    \
    EM_VM_CLONES static void FN(char **d, const int64_t *s, int64_t n, void *ctx) {         \
        (void)ctx;                                                                          \
        if (s[0] == 4 && s[1] == 4) {                                                       \
            EM_VM_BLOCKED((float *)d[0], (const float *)d[1], n, E##_FAST, E##_GEN, 0x7fffffffu, 0u, E##_MAX); \
            return;                                                                         \
        }                                                                                   \
        for (int64_t i = 0; i < n; i++)                                                     \
            *(float *)(d[0] + i * s[0]) = E##_GEN(*(const float *)(d[1] + i * s[1]));       \
    }
#define BW_BLK_APART(o, a, n) ((uintptr_t)((o) + (n)) <= (uintptr_t)(a) || (uintptr_t)((a) + (n)) <= (uintptr_t)(o))
#define BW_BLK_FN(FN, E)                                                                    \
    EM_VM_CLONES static void FN(char **d, const int64_t *s, int64_t n, void *ctx) {         \
        (void)ctx;                                                                          \
        float *o = (float *)d[0];                                                           \
        const float *gp = (const float *)d[1], *xp = (const float *)d[2];                   \
        if (s[0] == 4 && s[1] == 4 && s[2] == 4 && BW_BLK_APART(o, gp, n) && BW_BLK_APART(o, xp, n)) { \
            for (int64_t b = 0; b < n; b += EM_VM_BLOCK) {                                  \
                int64_t m = n - b < EM_VM_BLOCK ? n - b : EM_VM_BLOCK;                      \
                uint32_t mx = 0;                                                            \
                for (int64_t i = b; i < b + m; i++) {                                       \
                    float x = xp[i];                                                        \
                    uint32_t u = em_vm_bits(x) & 0x7fffffffu;                               \
                    mx = u > mx ? u : mx;                                                   \
                    o[i] = E##_FAST(gp[i], x);                                              \
                }                                                                           \
                if (mx > E##_MAX)                                                           \
                    for (int64_t i = b; i < b + m; i++) o[i] = E##_GEN(gp[i], xp[i]);       \
            }                                                                               \
            return;                                                                         \
        }                                                                                   \
        for (int64_t i = 0; i < n; i++)                                                     \
            *(float *)(d[0] + i * s[0]) =                                                   \
                E##_GEN(*(const float *)(d[1] + i * s[1]), *(const float *)(d[2] + i * s[2])); \
    }

/* integer dtypes load signed (uint8 as 0..255) and compare in int64 */
#define LI(x) ((int64_t)(x))
/* V: the float32 loop, VM (the generic loop, EM_VM_CLONES) or BLK (Note
 * [Blocked activations]) */
#define F32_LOOP_VM(KIND, FN, E) KIND##_FN(FN##_f32, float, float, LA_f32, EM_ST_f32, E, EM_VM_CLONES)
#define F32_LOOP_BLK(KIND, FN, E) KIND##_BLK_FN(FN##_f32, E)
#define FLOAT_LOOPS(KIND, FN, E, V)                                                         \
    KIND##_FN(FN##_f16, em_half, float, LA_f16, EM_ST_f16, E, )                             \
    KIND##_FN(FN##_bf16, em_bfloat16, float, LA_bf16, EM_ST_bf16, E, )                      \
    F32_LOOP_##V(KIND, FN, E)                                                               \
    KIND##_FN(FN##_f64, double, double, LA_f64, EM_ST_f64, E, EM_CPU_CLONES)
#define INT_LOOPS(KIND, FN, E)                                                              \
    KIND##_FN(FN##_u8, uint8_t, int64_t, LI, EM_ST_u8, E, )                                 \
    KIND##_FN(FN##_i8, int8_t, int64_t, LI, EM_ST_i8, E, )                                  \
    KIND##_FN(FN##_i32, int32_t, int64_t, LI, EM_ST_i32, E, )                               \
    KIND##_FN(FN##_i64, int64_t, int64_t, LI, EM_ST_i64, E, )
#define TABLE_FLT(FN) {NULL, NULL, NULL, NULL, NULL, FN##_f16, FN##_bf16, FN##_f32, FN##_f64}
#define TABLE_INT(FN) {NULL, FN##_u8, FN##_i8, FN##_i32, FN##_i64, FN##_f16, FN##_bf16, FN##_f32, FN##_f64}

/* Note [Activation op list]
 * ACT_OPS(X) is the list of fused activations: X(ENUM, name, DTYPES, BWD, F32)
 * makes the forward loops fw_<name>_<dtype> from F_<name>, the backward
 * loops bw_<name>_<dtype> from B_<name> (BWD = BW; NOBW: none), and their
 * tables. DTYPES: FLT (floating only, as PyTorch's CPU kernels) or INT
 * (integers too; the backward stays floating). F32: the float32 loops,
 * VM (F_/B_<name> in the generic loop) or BLK (Note [Blocked
 * activations]). threshold's backward is threshold_backward (binary.c). */
#define ACT_OPS(X)                            \
    X(LEAKY, leaky_relu, FLT, BW, VM)           \
    X(ELU, elu, FLT, BW, VM)                  \
    X(GELU, gelu, FLT, BW, BLK)               \
    X(GELU_TANH, gelu_tanh, FLT, BW, VM)          \
    X(SILU, silu, FLT, BW, BLK)               \
    X(MISH, mish, FLT, BW, VM)                \
    X(SOFTPLUS, softplus, FLT, BW, VM)            \
    X(HARDTANH, hardtanh, INT, BW, VM)            \
    X(HARDSIGMOID, hardsigmoid, FLT, BW, VM)      \
    X(HARDSWISH, hardswish, FLT, BW, VM)          \
    X(LOGSIGMOID, logsigmoid, FLT, BW, VM)        \
    X(SOFTSHRINK, softshrink, FLT, BW, VM)        \
    X(HARDSHRINK, hardshrink, FLT, BW, VM)        \
    X(THRESHOLD, threshold, INT, NOBW, VM)

#define LOOPS_FW_FLT(name, V) FLOAT_LOOPS(FW, fw_##name, F_##name, V)
#define LOOPS_FW_INT(name, V) FLOAT_LOOPS(FW, fw_##name, F_##name, V) INT_LOOPS(FW, fw_##name, F_##name)
#define LOOPS_BW_BW(name, V) FLOAT_LOOPS(BW, bw_##name, B_##name, V)
#define LOOPS_BW_NOBW(name, V)
#define TABLE_BW(FN) TABLE_FLT(FN)
#define TABLE_NOBW(FN) {NULL}
#define X_LOOPS(E, name, D, B, V) LOOPS_FW_##D(name, V) LOOPS_BW_##B(name, V)
ACT_OPS(X_LOOPS)
#undef X_LOOPS

typedef enum {
#define X_ENUM(E, name, D, B, V) A_##E,
    ACT_OPS(X_ENUM)
#undef X_ENUM
    A_COUNT
} act_op;
static const em_cpu_loop fw_tables[A_COUNT][EM_DTYPE_COUNT] = {
#define X_TABLE(E, name, D, B, V) TABLE_##D(fw_##name),
    ACT_OPS(X_TABLE)
#undef X_TABLE
};
static const em_cpu_loop bw_tables[A_COUNT][EM_DTYPE_COUNT] = {
#define X_TABLE(E, name, D, B, V) TABLE_##B(bw_##name),
    ACT_OPS(X_TABLE)
#undef X_TABLE
};

/* ---- drivers ---- */

/* Transcendental loops cost more per element: a smaller parallel grain. */
#define ACT_GRAIN (EM_CPU_GRAIN / 4)

/* Fills c->ip from c->p for an integer dtype, refusing a number the dtype
 * cannot hold (PyTorch's checked Scalar conversion); names[k] names p[k]. */
static em_status int_params(act_ctx *c, const em_scalar *s, int n, const char *const *names, em_dtype dt,
                            const char *op) {
    for (int k = 0; k < n; k++) {
        if (em_cpu_scalar_overflows(s[k], dt))
            return em_set_error(EM_EVALUE, "%s: %s %g cannot be converted to type %s without overflow", op,
                                names[k], em_scalar_to_double(s[k]), em_dtype_name(dt));
        /* kept in the dtype: -1 is 255 for uint8, as PyTorch converts it */
        _Alignas(8) char buf[8];
        em_store_from_double(buf, dt, (double)em_scalar_to_int(s[k]));
        c->ip[k] = em_load_as_int64(buf, dt);
    }
    return EM_OK;
}

typedef enum {
    ACT_NEW,            /* into a new tensor */
    ACT_INPLACE,        /* into self; an internally overlapping self refused */
    ACT_INPLACE_ANY,    /* into self, overlapping or not (threshold_ as in
                         * PyTorch: f(f(x)) = f(x), so the result is defined) */
} act_mode;

/* The forward of op on self: into a new tensor, or into self itself (self's
 * version bumped), by mode.
 * s[0..n): the op's numbers as the user gave them (checked against an
 * integer dtype), c: the same as doubles. Returns a new reference or NULL
 * with the error set. */
static em_tensor *act_forward(act_op op, em_tensor *self, act_mode mode, const em_scalar *s, int n,
                              const char *const *names, act_ctx *c, const char *name) {
    bool inplace = mode != ACT_NEW;
    em_dtype dt = self->dtype;
    em_cpu_loop fn = fw_tables[op][dt];
    if (!fn) {
        em_set_error(EM_ETYPE, "%s: not supported for dtype %s%s", name, em_dtype_name(dt),
                     fw_tables[op][EM_INT64] ? "" : " (a floating dtype is needed)");
        return NULL;
    }
    if (em_dtype_is_integral(dt) && int_params(c, s, n, names, dt, name) != EM_OK) return NULL;
    if (mode == ACT_INPLACE && em_core_check_no_internal_overlap(self, name) != EM_OK) return NULL;
    em_cpu_iter it;
    em_tensor *out = em_cpu_iter_build(&it, inplace ? self : NULL, dt, 1, &self, dt, name);
    if (out) em_cpu_iter_run(&it, fn, c, ACT_GRAIN);
    em_cpu_iter_done(&it);
    if (out && inplace) em_tensor_bump_version(self);
    return out;
}

/* The backward of op: grad_output and x (broadcast together, computing in
 * their promoted floating dtype) into a new tensor. mish_backward computes
 * in x's dtype (PyTorch's kernel allocates its result like x). */
static em_tensor *act_backward(act_op op, em_tensor *grad_output, em_tensor *x, act_ctx *c, const char *name) {
    em_dtype dt = op == A_MISH ? x->dtype : em_result_type2(grad_output, x);
    em_cpu_loop fn = bw_tables[op][dt];
    if (!fn) {
        em_set_error(EM_ETYPE, "%s: not supported for dtype %s (a floating dtype is needed)", name,
                     em_dtype_name(dt));
        return NULL;
    }
    em_tensor *in[2] = { grad_output, x };
    em_cpu_iter it;
    em_tensor *out = em_cpu_iter_build(&it, NULL, dt, 2, in, dt, name);
    if (out) em_cpu_iter_run(&it, fn, c, ACT_GRAIN);
    em_cpu_iter_done(&it);
    return out;
}

static act_ctx ctx_of(double a, double b, double c, double d) {
    act_ctx x;
    memset(&x, 0, sizeof x);
    x.p[0] = a;
    x.p[1] = b;
    x.p[2] = c;
    x.p[3] = d;
    return x;
}
#define D(s) em_scalar_to_double(s)

/* SELU's constants (PyTorch's, from Klambauer et al.) */
#define SELU_ALPHA 1.6732632423543772848170429916717
#define SELU_SCALE 1.0507009873554804934193349852946

/* ---- kernels ---- */

em_tensor *em_cpu_leaky_relu(em_keyset ks, em_tensor *self, em_scalar negative_slope) {
    (void)ks;
    act_ctx c = ctx_of(D(negative_slope), 0, 0, 0);
    return act_forward(A_LEAKY, self, ACT_NEW, NULL, 0, NULL, &c, "leaky_relu");
}
em_tensor *em_cpu_leaky_relu_(em_keyset ks, em_tensor *self, em_scalar negative_slope) {
    (void)ks;
    act_ctx c = ctx_of(D(negative_slope), 0, 0, 0);
    return act_forward(A_LEAKY, self, ACT_INPLACE, NULL, 0, NULL, &c, "leaky_relu_");
}
em_tensor *em_cpu_leaky_relu_backward(em_keyset ks, em_tensor *grad_output, em_tensor *self,
                                      em_scalar negative_slope, bool self_is_result) {
    (void)ks;
    /* from the result, the sign of x is only known for a positive slope */
    if (self_is_result && D(negative_slope) < 0) {
        em_set_error(EM_EVALUE, "leaky_relu_backward: the in-place leaky_relu_ backward (self_is_result) "
                                "needs a non-negative negative_slope (got %g); use leaky_relu instead",
                     D(negative_slope));
        return NULL;
    }
    act_ctx c = ctx_of(D(negative_slope), 0, 0, 0);
    return act_backward(A_LEAKY, grad_output, self, &c, "leaky_relu_backward");
}

em_tensor *em_cpu_elu(em_keyset ks, em_tensor *self, em_scalar alpha) {
    (void)ks;
    act_ctx c = ctx_of(D(alpha), 1, 1, 0);
    return act_forward(A_ELU, self, ACT_NEW, NULL, 0, NULL, &c, "elu");
}
em_tensor *em_cpu_elu_(em_keyset ks, em_tensor *self, em_scalar alpha) {
    (void)ks;
    act_ctx c = ctx_of(D(alpha), 1, 1, 0);
    return act_forward(A_ELU, self, ACT_INPLACE, NULL, 0, NULL, &c, "elu_");
}
em_tensor *em_cpu_selu(em_keyset ks, em_tensor *self) {
    (void)ks;
    act_ctx c = ctx_of(SELU_ALPHA, SELU_SCALE, 1, 0);
    return act_forward(A_ELU, self, ACT_NEW, NULL, 0, NULL, &c, "selu");
}
em_tensor *em_cpu_selu_(em_keyset ks, em_tensor *self) {
    (void)ks;
    act_ctx c = ctx_of(SELU_ALPHA, SELU_SCALE, 1, 0);
    return act_forward(A_ELU, self, ACT_INPLACE, NULL, 0, NULL, &c, "selu_");
}
/* celu: elu with input_scale 1 / alpha (alpha 0 refused, as PyTorch) */
static em_tensor *celu(em_tensor *self, em_scalar alpha, bool inplace, const char *name) {
    if (D(alpha) == 0) {
        em_set_error(EM_EVALUE, "%s: ZeroDivisionError: alpha must not be 0 (the input is scaled by 1/alpha)", name);
        return NULL;
    }
    act_ctx c = ctx_of(D(alpha), 1, 1.0 / D(alpha), 0);
    return act_forward(A_ELU, self, inplace ? ACT_INPLACE : ACT_NEW, NULL, 0, NULL, &c, name);
}
em_tensor *em_cpu_celu(em_keyset ks, em_tensor *self, em_scalar alpha) {
    (void)ks;
    return celu(self, alpha, false, "celu");
}
em_tensor *em_cpu_celu_(em_keyset ks, em_tensor *self, em_scalar alpha) {
    (void)ks;
    return celu(self, alpha, true, "celu_");
}
em_tensor *em_cpu_elu_backward(em_keyset ks, em_tensor *grad_output, em_scalar alpha, em_scalar scale,
                               em_scalar input_scale, bool is_result, em_tensor *self_or_result) {
    (void)ks;
    if (is_result && D(alpha) < 0) {
        em_set_error(EM_EVALUE, "elu_backward: the in-place elu_ backward (is_result) needs a non-negative "
                                "alpha (got %g); use elu instead", D(alpha));
        return NULL;
    }
    act_ctx c = ctx_of(D(alpha), D(scale), D(input_scale), is_result ? 1 : 0);
    return act_backward(A_ELU, grad_output, self_or_result, &c, "elu_backward");
}

em_tensor *em_cpu_gelu(em_keyset ks, em_tensor *self, const char *approximate) {
    (void)ks;
    act_ctx c = ctx_of(0, 0, 0, 0);
    bool tanh_ = strcmp(approximate, "tanh") == 0;
    return act_forward(tanh_ ? A_GELU_TANH : A_GELU, self, ACT_NEW, NULL, 0, NULL, &c, "gelu");
}
em_tensor *em_cpu_gelu_backward(em_keyset ks, em_tensor *grad_output, em_tensor *self, const char *approximate) {
    (void)ks;
    act_ctx c = ctx_of(0, 0, 0, 0);
    bool tanh_ = strcmp(approximate, "tanh") == 0;
    return act_backward(tanh_ ? A_GELU_TANH : A_GELU, grad_output, self, &c, "gelu_backward");
}

/* the parameterless ones: NAME, NAME_backward */
#define ACT_PLAIN(E, name, bwname)                                                           \
    em_tensor *em_cpu_##name(em_keyset ks, em_tensor *self) {                                \
        (void)ks;                                                                            \
        act_ctx c = ctx_of(0, 0, 0, 0);                                                      \
        return act_forward(A_##E, self, ACT_NEW, NULL, 0, NULL, &c, #name);                    \
    }                                                                                        \
    em_tensor *em_cpu_##bwname(em_keyset ks, em_tensor *grad_output, em_tensor *self) {      \
        (void)ks;                                                                            \
        act_ctx c = ctx_of(0, 0, 0, 0);                                                      \
        return act_backward(A_##E, grad_output, self, &c, #bwname);                          \
    }
ACT_PLAIN(SILU, silu, silu_backward)
ACT_PLAIN(MISH, mish, mish_backward)
ACT_PLAIN(HARDSIGMOID, hardsigmoid, hardsigmoid_backward)
ACT_PLAIN(HARDSWISH, hardswish, hardswish_backward)
ACT_PLAIN(LOGSIGMOID, logsigmoid, log_sigmoid_backward)

/* their in-place forms (schema/ops/act2.yaml): self written, an internally
 * overlapping self refused, as PyTorch's silu_ etc. */
#define ACT_PLAIN_INPLACE(E, name)                                                           \
    em_tensor *em_cpu_##name##_(em_keyset ks, em_tensor *self) {                             \
        (void)ks;                                                                            \
        act_ctx c = ctx_of(0, 0, 0, 0);                                                      \
        return act_forward(A_##E, self, ACT_INPLACE, NULL, 0, NULL, &c, #name "_");            \
    }
ACT_PLAIN_INPLACE(SILU, silu)
ACT_PLAIN_INPLACE(MISH, mish)
ACT_PLAIN_INPLACE(HARDSIGMOID, hardsigmoid)
ACT_PLAIN_INPLACE(HARDSWISH, hardswish)

em_tensor *em_cpu_softplus(em_keyset ks, em_tensor *self, em_scalar beta, em_scalar threshold) {
    (void)ks;
    act_ctx c = ctx_of(D(beta), D(threshold), 0, 0);
    return act_forward(A_SOFTPLUS, self, ACT_NEW, NULL, 0, NULL, &c, "softplus");
}
em_tensor *em_cpu_softplus_backward(em_keyset ks, em_tensor *grad_output, em_tensor *self, em_scalar beta,
                                    em_scalar threshold) {
    (void)ks;
    act_ctx c = ctx_of(D(beta), D(threshold), 0, 0);
    return act_backward(A_SOFTPLUS, grad_output, self, &c, "softplus_backward");
}

static const char *const hardtanh_names[] = { "min_val", "max_val" };
/* PyTorch refuses negative limits for uint8 (they would wrap) */
static em_status check_hardtanh(const em_tensor *self, em_scalar min_val, em_scalar max_val, const char *name) {
    if (self->dtype == EM_UINT8 && (D(min_val) < 0 || D(max_val) < 0))
        return em_set_error(EM_EVALUE, "%s: cannot do hardtanh on an unsigned type (uint8) with negative limits "
                                       "(min_val %g, max_val %g)", name, D(min_val), D(max_val));
    return EM_OK;
}
em_tensor *em_cpu_hardtanh(em_keyset ks, em_tensor *self, em_scalar min_val, em_scalar max_val) {
    (void)ks;
    if (check_hardtanh(self, min_val, max_val, "hardtanh") != EM_OK) return NULL;
    em_scalar s[2] = { min_val, max_val };
    act_ctx c = ctx_of(D(min_val), D(max_val), 0, 0);
    return act_forward(A_HARDTANH, self, ACT_NEW, s, 2, hardtanh_names, &c, "hardtanh");
}
em_tensor *em_cpu_hardtanh_(em_keyset ks, em_tensor *self, em_scalar min_val, em_scalar max_val) {
    (void)ks;
    if (check_hardtanh(self, min_val, max_val, "hardtanh_") != EM_OK) return NULL;
    em_scalar s[2] = { min_val, max_val };
    act_ctx c = ctx_of(D(min_val), D(max_val), 0, 0);
    return act_forward(A_HARDTANH, self, ACT_INPLACE, s, 2, hardtanh_names, &c, "hardtanh_");
}
em_tensor *em_cpu_hardtanh_backward(em_keyset ks, em_tensor *grad_output, em_tensor *self, em_scalar min_val,
                                    em_scalar max_val) {
    (void)ks;
    act_ctx c = ctx_of(D(min_val), D(max_val), 0, 0);
    return act_backward(A_HARDTANH, grad_output, self, &c, "hardtanh_backward");
}

/* softshrink: lambd >= 0 (PyTorch's check; hardshrink has none) */
static em_status check_lambd(em_scalar lambd, const char *name) {
    if (!(D(lambd) >= 0))
        return em_set_error(EM_EVALUE, "%s: lambd must be greater or equal to 0, but found to be %g", name,
                            D(lambd));
    return EM_OK;
}
#define ACT_SHRINK(E, name, CHECK)                                                           \
    em_tensor *em_cpu_##name(em_keyset ks, em_tensor *self, em_scalar lambd) {               \
        (void)ks;                                                                            \
        if (CHECK && check_lambd(lambd, #name) != EM_OK) return NULL;                        \
        act_ctx c = ctx_of(D(lambd), 0, 0, 0);                                               \
        return act_forward(A_##E, self, ACT_NEW, NULL, 0, NULL, &c, #name);                    \
    }                                                                                        \
    em_tensor *em_cpu_##name##_backward(em_keyset ks, em_tensor *grad_output, em_tensor *self, \
                                        em_scalar lambd) {                                   \
        (void)ks;                                                                            \
        act_ctx c = ctx_of(D(lambd), 0, 0, 0);                                               \
        return act_backward(A_##E, grad_output, self, &c, #name "_backward");                \
    }
ACT_SHRINK(SOFTSHRINK, softshrink, true)
ACT_SHRINK(HARDSHRINK, hardshrink, false)

static const char *const threshold_names[] = { "threshold", "value" };
em_tensor *em_cpu_threshold(em_keyset ks, em_tensor *self, em_scalar threshold, em_scalar value) {
    (void)ks;
    em_scalar s[2] = { threshold, value };
    act_ctx c = ctx_of(D(threshold), D(value), 0, 0);
    return act_forward(A_THRESHOLD, self, ACT_NEW, s, 2, threshold_names, &c, "threshold");
}
em_tensor *em_cpu_threshold_(em_keyset ks, em_tensor *self, em_scalar threshold, em_scalar value) {
    (void)ks;
    em_scalar s[2] = { threshold, value };
    act_ctx c = ctx_of(D(threshold), D(value), 0, 0);
    return act_forward(A_THRESHOLD, self, ACT_INPLACE_ANY, s, 2, threshold_names, &c, "threshold_");
}
em_tensor *em_cpu_relu_(em_keyset ks, em_tensor *self) {
    (void)ks;
    em_scalar s[2] = { em_scalar_int(0), em_scalar_int(0) };
    act_ctx c = ctx_of(0, 0, 0, 0);
    return act_forward(A_THRESHOLD, self, ACT_INPLACE, s, 2, threshold_names, &c, "relu_");
}
