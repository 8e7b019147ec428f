/* unary_math.c -- the structured impls of the unary family (schema/ops/unary.yaml):
 * trigonometric and hyperbolic functions, logarithms, rounding, reciprocal, ...
 *
 * Each op is one line of UM_OPS plus its element function UM_<name>(x, c)
 * (x of the compute type: float for float16/bfloat16/float32, double for
 * float64, uint64_t for integers, wrapping; c the op's parameters). The line
 * makes the per-dtype loops, the row of the loop table and the impl
 * em_cpu_<name>_impl. Dtypes are decided by the meta functions
 * (Note [Unary dtypes] in kernels/meta_unary.c).
 * The float32/float64 contiguous loops carry one clone per ISA; the
 * arithmetic ones (reciprocal, rsqrt, rounding, deg2rad, ...) vectorise;
 * float32 sin, cos and expm1 use em_vmath.h (Note [Vector math]), the other
 * transcendental ones call libm per element.
 */
/* See unary.c: O3 vectorises; no-trapping-math and no-math-errno change no
 * computed value (only errno and FP exception flags). */
#pragma GCC optimize("O3", "no-trapping-math", "no-math-errno")
#include "kernels/cpu/em_cpu.h"
#include "kernels/cpu/em_vmath.h"
#include "kernels/em_structured.h"

#include <float.h>
#include <math.h>
#include <string.h>

/* ---- element functions ---- */

static inline float signf_(float x) { return (float)((x > 0) - (x < 0)); }
static inline double signd_(double x) { return (double)((x > 0) - (x < 0)); }
static inline uint64_t signu_(uint64_t x) { return (int64_t)x > 0 ? 1 : (int64_t)x < 0 ? (uint64_t)-1 : 0; }
static inline float lgammaf_(float x) { int s; return lgammaf_r(x, &s); }
static inline double lgamma_(double x) { int s; return lgamma_r(x, &s); }

/* negative x gives NaN without sqrt's errno path (a libm call per element:
 * the pragma's no-math-errno does not reach target_clones functions) */
static inline float rsqrtf_(float x) { return x < 0 ? NAN : 1.0f / sqrtf(x); }
static inline double rsqrt_(double x) { return x < 0 ? NAN : 1.0 / sqrt(x); }
#define UM_rsqrt(x, c) _Generic((x), float: rsqrtf_, default: rsqrt_)(x)
#define UM_expm1(x, c) _Generic((x), float: em_vm_expm1f(x), default: expm1(x))
#define UM_log1p(x, c) _Generic((x), float: log1pf(x), default: log1p(x))
#define UM_log2(x, c) _Generic((x), float: log2f(x), default: log2(x))
#define UM_log10(x, c) _Generic((x), float: log10f(x), default: log10(x))
#define UM_sin(x, c) _Generic((x), float: sinf(x), default: sin(x))
#define UM_cos(x, c) _Generic((x), float: cosf(x), default: cos(x))
#define UM_tan(x, c) _Generic((x), float: tanf(x), default: tan(x))
#define UM_asin(x, c) _Generic((x), float: asinf(x), default: asin(x))
#define UM_acos(x, c) _Generic((x), float: acosf(x), default: acos(x))
#define UM_atan(x, c) _Generic((x), float: atanf(x), default: atan(x))
#define UM_sinh(x, c) _Generic((x), float: sinhf(x), default: sinh(x))
#define UM_cosh(x, c) _Generic((x), float: coshf(x), default: cosh(x))
#define UM_asinh(x, c) _Generic((x), float: asinhf(x), default: asinh(x))
#define UM_acosh(x, c) _Generic((x), float: acoshf(x), default: acosh(x))
#define UM_atanh(x, c) _Generic((x), float: atanhf(x), default: atanh(x))
#define UM_reciprocal(x, c) _Generic((x), float: 1.0f / (x), default: 1.0 / (x))
/* x * (pi/180) and x * (180/pi): c.scale is the constant rounded to the
 * tensor's dtype, as PyTorch's multiplication by a number rounds it
 * (rad2deg of 2.75 in bfloat16 is 157, not 158) */
#define UM_deg2rad(x, c) _Generic((x), float: (x) * (float)(c).scale, default: (x) * (c).scale)
#define UM_rad2deg(x, c) UM_deg2rad(x, c)
#define UM_square(x, c) ((x) * (x))
#define UM_sgn(x, c) _Generic((x), float: signf_, double: signd_, default: signu_)(x)
/* integers are their own floor, ceil, ...; round halves to even: PyTorch's
 * nearbyint in the default rounding mode (nearbyint vectorises, gcc 12's
 * __builtin_roundeven does not) */
#define UM_floor(x, c) _Generic((x), float: floorf(x), double: floor(x), default: (x))
#define UM_ceil(x, c) _Generic((x), float: ceilf(x), double: ceil(x), default: (x))
#define UM_round(x, c) _Generic((x), float: nearbyintf(x), double: nearbyint(x), default: (x))
#define UM_trunc(x, c) _Generic((x), float: truncf(x), double: trunc(x), default: (x))
#define UM_frac(x, c) _Generic((x), float: (x) - truncf(x), default: (x) - trunc(x))
#define UM_erf(x, c) _Generic((x), float: erff(x), default: erf(x))
#define UM_erfc(x, c) _Generic((x), float: erfcf(x), default: erfc(x))
#define UM_lgamma(x, c) _Generic((x), float: lgammaf_(x), default: lgamma_(x))
#define UM_erfinv(x, c) _Generic((x), float: erfinv_f, default: erfinv_d)(x)
#define UM_digamma(x, c) _Generic((x), float: digamma_f, default: digamma_d)(x)
#define UM_polygamma(x, c) _Generic((x), float: polygamma_f, default: polygamma_d)((c).n, x)
/* integers (and bool, copy_b) are unchanged */
#define UM_nan_to_num(x, c) _Generic((x), float: nan_to_num_f(x, c), double: nan_to_num_d(x, c), default: (x))
/* integers only (bool: not_b) */
#define UM_bitwise_not(x, c) (~(x))
/* round(x, decimals): PyTorch's formula, in the compute type */
#define UM_round_decimals(x, c) _Generic((x), float: round_dec_f(x, c), default: round_dec_d(x, c))

/* Parameters of the ops that take some (read once per loop call). */
typedef struct {
    double scale; /* round(decimals): 10^|decimals| */
    bool neg;     /* decimals < 0 */
    double nan, posinf, neginf; /* nan_to_num: the replacements */
    int64_t n;                  /* polygamma's order */
} um_ctx;

/* nan_to_num: replacements in the compute type (float for float16 and
 * bfloat16, whose stores round them) */
static inline float nan_to_num_f(float x, um_ctx c) {
    return x != x ? (float)c.nan : x == INFINITY ? (float)c.posinf : x == -INFINITY ? (float)c.neginf : x;
}
static inline double nan_to_num_d(double x, um_ctx c) {
    return x != x ? c.nan : x == INFINITY ? c.posinf : x == -INFINITY ? c.neginf : x;
}

static inline float round_dec_f(float x, um_ctx c) {
    float s = (float)c.scale;
    return c.neg ? nearbyintf(x / s) * s : nearbyintf(x * s) / s;
}
static inline double round_dec_d(double x, um_ctx c) {
    return c.neg ? nearbyint(x / c.scale) * c.scale : nearbyint(x * c.scale) / c.scale;
}

/* ---- special functions ----
 * PyTorch's Cephes-derived algorithms, written once for float (suffix f,
 * float32 and the float16/bfloat16 loops) and double (d), computing in the
 * type itself as PyTorch does: near poles and at the ends of erfinv's
 * domain the float results differ from rounded double ones. */

static const double UM_PI = 3.14159265358979323846;

#define UM_SPECIAL(T, S, SIN, TAN, LOG, EXP, ERF, SQRT, POW, FLOOR, TRUNC, LGAMMA, COPYSIGN, FABS)      \
    /* erfinv: a rational first guess, two Newton steps (calc_erfinv) */                               \
    static T erfinv_##S(T y) {                                                                         \
        static const T a[4] = { 0.886226899, -1.645349621, 0.914624893, -0.140543331 };                \
        static const T b[4] = { -2.118377725, 1.442710462, -0.329097515, 0.012229801 };                \
        static const T c[4] = { -1.970840454, -1.624906493, 3.429567803, 1.641345311 };                \
        static const T d[2] = { 3.543889200, 1.637067800 };                                            \
        T ya = FABS(y), x, z, num, dem;                                                                \
        if (ya > 1) return (T)NAN;                                                                     \
        if (ya == 1) return COPYSIGN((T)INFINITY, y);                                                  \
        if (ya <= (T)0.7) {                                                                            \
            z = y * y;                                                                                 \
            num = ((a[3] * z + a[2]) * z + a[1]) * z + a[0];                                           \
            dem = (((b[3] * z + b[2]) * z + b[1]) * z + b[0]) * z + 1;                                 \
            x = y * num / dem;                                                                         \
        } else {                                                                                       \
            z = SQRT(-LOG((1 - ya) / 2));                                                              \
            num = ((c[3] * z + c[2]) * z + c[1]) * z + c[0];                                           \
            dem = (d[1] * z + d[0]) * z + 1;                                                           \
            x = COPYSIGN(num, y) / dem;                                                                \
        }                                                                                              \
        x = x - (ERF(x) - y) / (((T)2 / SQRT((T)UM_PI)) * EXP(-x * x));                                \
        x = x - (ERF(x) - y) / (((T)2 / SQRT((T)UM_PI)) * EXP(-x * x));                                \
        return x;                                                                                      \
    }                                                                                                  \
    /* digamma: +-inf at -+0, NaN at the negative integers, reflection below 0                         \
     * (pi / tan(pi r) in double), recurrence to 10, asymptotic series */                              \
    static T digamma_##S(T x) {                                                                        \
        static const T PSI_10 = 2.25175258906672110764;                                                \
        static const T A[] = { 8.33333333333333333333E-2, -2.10927960927960927961E-2,                  \
                               7.57575757575757575758E-3, -4.16666666666666666667E-3,                  \
                               3.96825396825396825397E-3, -8.33333333333333333333E-3,                  \
                               8.33333333333333333333E-2 };                                            \
        if (x == 0) return COPYSIGN((T)INFINITY, -x);                                                  \
        if (x < 0) {                                                                                   \
            if (x == TRUNC(x)) return (T)NAN;                                                          \
            double q, r = modf((double)x, &q);                                                         \
            return digamma_##S(1 - x) - (T)(UM_PI / tan(UM_PI * r));                                   \
        }                                                                                              \
        T result = 0;                                                                                  \
        while (x < 10) {                                                                               \
            result -= 1 / x;                                                                           \
            x += 1;                                                                                    \
        }                                                                                              \
        if (x == 10) return result + PSI_10;                                                           \
        T y = 0;                                                                                       \
        if (x < (T)1.0e17) {                                                                           \
            T z = 1 / (x * x), p = A[0];                                                               \
            for (int i = 1; i < 7; i++) p = p * z + A[i];                                              \
            y = z * p;                                                                                 \
        }                                                                                              \
        return result + LOG(x) - ((T)0.5 / x) - y;                                                     \
    }                                                                                                  \
    /* trigamma = polygamma(1, x): reflection below 1/2, six recurrence steps,                         \
     * the asymptotic series (calc_trigamma) */                                                        \
    static T trigamma_##S(T x) {                                                                       \
        T sign = 1, result = 0;                                                                        \
        if (x < (T)0.5) {                                                                              \
            sign = -1;                                                                                 \
            T sp = SIN((T)UM_PI * x);                                                                  \
            result -= ((T)UM_PI * (T)UM_PI) / (sp * sp);                                               \
            x = 1 - x;                                                                                 \
        }                                                                                              \
        for (int i = 0; i < 6; ++i) {                                                                  \
            result += 1 / (x * x);                                                                     \
            x += 1;                                                                                    \
        }                                                                                              \
        T ixx = 1 / (x * x);                                                                           \
        result += (1 + 1 / (2 * x) + ixx * ((T)1 / 6 - ixx * ((T)1 / 30 - ixx * ((T)1 / 42)))) / x;    \
        return sign * result;                                                                          \
    }                                                                                                  \
    /* Hurwitz zeta(x, q) = sum over k >= 0 of (k + q)^-x (Cephes) */                                  \
    static T zeta_##S(T x, T q) {                                                                      \
        static const T MACHEP = 1.11022302462515654042E-16;                                            \
        static const T A[] = { 12.0, -720.0, 30240.0, -1209600.0, 47900160.0, -1.8924375803183791606e9, \
                               7.47242496e10, -2.950130727918164224e12, 1.1646782814350067249e14,      \
                               -4.5979787224074726105e15, 1.8152105401943546773e17,                    \
                               -7.1661652561756670113e18 };                                            \
        if (x == 1) return (T)INFINITY;                                                                \
        if (x < 1) return (T)NAN;                                                                      \
        if (q <= 0) {                                                                                  \
            if (q == FLOOR(q)) return (T)INFINITY;                                                     \
            if (x != FLOOR(x)) return (T)NAN;                                                          \
        }                                                                                              \
        T s = POW(q, -x), a = q, b = 0;                                                                \
        int i = 0;                                                                                     \
        while (i < 9 || a <= 9) {                                                                      \
            i += 1;                                                                                    \
            a += 1;                                                                                    \
            b = POW(a, -x);                                                                            \
            s += b;                                                                                    \
            if (-MACHEP * s < b && b < MACHEP * s) return s;                                           \
        }                                                                                              \
        T w = a, k = 0, t;                                                                             \
        s += b * w / (x - 1);                                                                          \
        s -= (T)0.5 * b;                                                                               \
        a = 1;                                                                                         \
        for (int j = 0; j < 12; j++) {                                                                 \
            a *= x + k;                                                                                \
            b /= w;                                                                                    \
            t = a * b / A[j];                                                                          \
            s = s + t;                                                                                 \
            t = FABS(t / s);                                                                           \
            if (t < MACHEP) return s;                                                                  \
            k += 1;                                                                                    \
            a *= x + k;                                                                                \
            b /= w;                                                                                    \
            k += 1;                                                                                    \
        }                                                                                              \
        return s;                                                                                      \
    }                                                                                                  \
    /* polygamma(n, x), n >= 0 (the meta refuses n < 0) */                                             \
    static T polygamma_##S(int64_t n, T x) {                                                           \
        if (n == 0) return digamma_##S(x);                                                             \
        if (n == 1) return trigamma_##S(x);                                                            \
        return ((n % 2) ? (T)1 : (T)-1) * EXP(LGAMMA((T)n + 1)) * zeta_##S((T)n + 1, x); /* n + 1 in T: n may be INT64_MAX */ \
    }

UM_SPECIAL(float, f, sinf, tanf, logf, expf, erff, sqrtf, powf, floorf, truncf, lgammaf_, copysignf, fabsf)
UM_SPECIAL(double, d, sin, tan, log, exp, erf, sqrt, pow, floor, trunc, lgamma_, copysign, fabs)

/* ---- loops ---- */

#define UM_FN(FN, T, CT, LD, ST, EXPR, ATTR)                                            \
    ATTR static void FN(char **d, const int64_t *s, int64_t n, void *ctx) {             \
        const um_ctx c = ctx ? *(const um_ctx *)ctx : (um_ctx){ 1.0, false, 0, 0, 0, 0 };           \
        (void)c;                                                                        \
        if (s[0] == (int64_t)sizeof(T) && s[1] == (int64_t)sizeof(T)) {                 \
            T *restrict op = (T *)d[0];                                                 \
            const T *restrict ap = (const T *)d[1];                                     \
            for (int64_t i = 0; i < n; i++) {                                           \
                CT x = LD(ap[i]);                                                       \
                op[i] = ST(EXPR(x, c));                                                 \
            }                                                                           \
        } else {                                                                        \
            for (int64_t i = 0; i < n; i++) {                                           \
                CT x = LD(*(const T *)(d[1] + i * s[1]));                               \
                *(T *)(d[0] + i * s[0]) = ST(EXPR(x, c));                               \
            }                                                                           \
        }                                                                               \
    }

static void copy_b(char **d, const int64_t *s, int64_t n, void *ctx) {
    (void)ctx;
    for (int64_t i = 0; i < n; i++) *(bool *)(d[0] + i * s[0]) = *(const bool *)(d[1] + i * s[1]);
}
static void not_b(char **d, const int64_t *s, int64_t n, void *ctx) {
    (void)ctx;
    for (int64_t i = 0; i < n; i++) *(bool *)(d[0] + i * s[0]) = !*(const bool *)(d[1] + i * s[1]);
}

/* Note [Unary math op list]
 * UM_OPS is the list of this file's ops: X(ENUM, name, FAMILY, COST).
 *   FLT  floating loops only (the meta gives float32 for integer input)
 *   NUM  integer and floating loops (bool: see um_bool_loop)
 *   INT  integer loops (bool: see um_bool_loop)
 * COST: CHEAP ops run with the default parallel grain, MATH ones (libm per
 * element) with a quarter of it. */
#define UM_OPS(X)                                  \
    X(RSQRT, rsqrt, FLT, CHEAP)                    \
    X(EXPM1, expm1, FLT, MATH)                     \
    X(LOG1P, log1p, FLT, MATH)                     \
    X(LOG2, log2, FLT, MATH)                       \
    X(LOG10, log10, FLT, MATH)                     \
    X(SIN, sin, FLT, MATH)                         \
    X(COS, cos, FLT, MATH)                         \
    X(TAN, tan, FLT, MATH)                         \
    X(ASIN, asin, FLT, MATH)                       \
    X(ACOS, acos, FLT, MATH)                       \
    X(ATAN, atan, FLT, MATH)                       \
    X(SINH, sinh, FLT, MATH)                       \
    X(COSH, cosh, FLT, MATH)                       \
    X(ASINH, asinh, FLT, MATH)                     \
    X(ACOSH, acosh, FLT, MATH)                     \
    X(ATANH, atanh, FLT, MATH)                     \
    X(RECIPROCAL, reciprocal, FLT, CHEAP)          \
    X(DEG2RAD, deg2rad, FLT, CHEAP)                \
    X(RAD2DEG, rad2deg, FLT, CHEAP)                \
    X(SQUARE, square, NUM, CHEAP)                  \
    X(SGN, sgn, NUM, CHEAP)                        \
    X(FLOOR, floor, NUM, CHEAP)                    \
    X(CEIL, ceil, NUM, CHEAP)                      \
    X(ROUND, round, NUM, CHEAP)                    \
    X(TRUNC, trunc, NUM, CHEAP)                    \
    X(FRAC, frac, FLT, CHEAP)                      \
    X(ROUND_DECIMALS, round_decimals, FLT, CHEAP) \
    X(BITWISE_NOT, bitwise_not, INT, CHEAP)        \
    X(NAN_TO_NUM, nan_to_num, NUM, CHEAP)          \
    X(ERF, erf, FLT, MATH)                         \
    X(ERFC, erfc, FLT, MATH)                       \
    X(ERFINV, erfinv, FLT, MATH)                   \
    X(LGAMMA, lgamma, FLT, MATH)                   \
    X(DIGAMMA, digamma, FLT, MATH)                 \
    X(POLYGAMMA, polygamma, FLT, MATH)

#define UFN(OP, N, T, CT) UM_FN(OP##_##N, T, CT, LA_##N, EM_ST_##N, UM_##OP, CLONE_##N)
#define LOOPS_FLT(OP)                                                                 \
    UFN(OP, f16, em_half, float) UFN(OP, bf16, em_bfloat16, float)                    \
    UFN(OP, f32, float, float) UFN(OP, f64, double, double)
#define LOOPS_NUM(OP)                                                                 \
    UFN(OP, u8, uint8_t, uint64_t) UFN(OP, i8, int8_t, uint64_t)                      \
    UFN(OP, i32, int32_t, uint64_t) UFN(OP, i64, int64_t, uint64_t) LOOPS_FLT(OP)
#define LOOPS_INT(OP)                                                                 \
    UFN(OP, u8, uint8_t, uint64_t) UFN(OP, i8, int8_t, uint64_t)                      \
    UFN(OP, i32, int32_t, uint64_t) UFN(OP, i64, int64_t, uint64_t)
#define TABLE_INT(OP) {NULL, OP##_u8, OP##_i8, OP##_i32, OP##_i64, NULL, NULL, NULL, NULL}
#define TABLE_NUM(OP) {NULL, OP##_u8, OP##_i8, OP##_i32, OP##_i64, OP##_f16, OP##_bf16, OP##_f32, OP##_f64}
#define TABLE_FLT(OP) {NULL, NULL, NULL, NULL, NULL, OP##_f16, OP##_bf16, OP##_f32, OP##_f64}

#define X_LOOPS(E, name, FAM, COST) LOOPS_##FAM(name)
UM_OPS(X_LOOPS)
#undef X_LOOPS

typedef enum {
#define X_ENUM(E, name, FAM, COST) UM_##E,
    UM_OPS(X_ENUM)
#undef X_ENUM
    UM_COUNT
} um_op;
static const em_cpu_loop tables[UM_COUNT][EM_DTYPE_COUNT] = {
#define X_TABLE(E, name, FAM, COST) TABLE_##FAM(name),
    UM_OPS(X_TABLE)
#undef X_TABLE
};
#define GRAIN_CHEAP EM_CPU_GRAIN
#define GRAIN_MATH (EM_CPU_GRAIN / 4)
static const int64_t grains[UM_COUNT] = {
#define X_GRAIN(E, name, FAM, COST) GRAIN_##COST,
    UM_OPS(X_GRAIN)
#undef X_GRAIN
};

/* The loop of op for bool compute (NULL: none; the meta refuses or
 * promotes bool for every op but these). */
static em_cpu_loop um_bool_loop(um_op op) {
    return op == UM_SGN || op == UM_NAN_TO_NUM ? copy_b : op == UM_BITWISE_NOT ? not_b : NULL;
}

/* ---- driver ---- */

/* Runs loop fn (reading m->compute, writing m->dtype) from self into out
 * (Note [Structured kernels]: out has m's shape and a dtype m->dtype casts
 * to; it may be self itself). An out of another dtype gets the result
 * through a temporary; a self that shares out's memory without being out
 * is copied first. */
em_status em_cpu_unary_run(const em_meta *m, em_cpu_loop fn, em_tensor *self, em_tensor *out, void *ctx,
                           int64_t grain) {
    if (!fn)
        return em_set_error(EM_ETYPE, "%s: not supported for dtype %s", m->op, em_dtype_name(m->compute));
    if (out->dtype != m->dtype) {
        em_tensor *tmp = em_tensor_new(m->ndim, m->sizes, m->dtype, out->device);
        if (!tmp) return em_error_kind();
        em_status st = em_cpu_unary_run(m, fn, self, tmp, ctx, grain);
        if (st == EM_OK) st = em_cpu_copy_into(out, tmp, m->op);
        em_tensor_release(tmp);
        return st;
    }
    em_tensor *in = self, *hold = NULL;
    if (self->storage == out->storage && self->numel > 0 &&
        !(self->offset == out->offset && self->ndim == out->ndim &&
          memcmp(self->strides, out->strides, sizeof(int64_t) * (size_t)self->ndim) == 0)) {
        hold = em_cpu_to_dtype(self, self->dtype, m->op);
        if (!hold) return em_error_kind();
        in = hold;
    }
    em_cpu_iter it;
    em_tensor *r = em_cpu_iter_build(&it, out, m->dtype, 1, &in, m->compute, m->op);
    if (r) em_cpu_iter_run(&it, fn, ctx, grain);
    em_cpu_iter_done(&it);
    em_tensor_release(hold);
    if (!r) return em_error_kind();
    em_tensor_release(r);
    return EM_OK;
}

/* float32 sin and cos through em_vmath.h: contiguous runs as one vector
 * loop (arguments past EM_VM_TRIG_MAX redone by libm), strided ones per
 * element. */
static inline __attribute__((always_inline)) void vm_trig_f32(char **d, const int64_t *s, int64_t n, int want_cos) {
    if (s[0] == 4 && s[1] == 4) {
        em_vm_sincosf_n((float *)d[0], (const float *)d[1], n, want_cos);
        return;
    }
    for (int64_t i = 0; i < n; i++) {
        float x = *(const float *)(d[1] + i * s[1]);
        *(float *)(d[0] + i * s[0]) = want_cos ? em_vm_cosf_any(x) : em_vm_sinf_any(x);
    }
}
EM_VM_CLONES static void vm_sin_f32(char **d, const int64_t *s, int64_t n, void *ctx) {
    (void)ctx;
    vm_trig_f32(d, s, n, 0);
}
EM_VM_CLONES static void vm_cos_f32(char **d, const int64_t *s, int64_t n, void *ctx) {
    (void)ctx;
    vm_trig_f32(d, s, n, 1);
}

static em_status um_impl(um_op op, const em_meta *m, em_tensor *self, em_tensor *out, um_ctx *ctx) {
    em_cpu_loop fn = m->compute == EM_BOOL ? um_bool_loop(op) : tables[op][m->compute];
    if (m->compute == EM_FLOAT32 && (op == UM_SIN || op == UM_COS)) fn = op == UM_SIN ? vm_sin_f32 : vm_cos_f32;
    return em_cpu_unary_run(m, fn, self, out, ctx, grains[op]);
}

/* ---- impls ---- */

#define X_IMPL(E, name, FAM, COST)                                                            \
    em_status em_cpu_##name##_impl(em_keyset ks, const em_meta *m, em_tensor *self, em_tensor *out) { \
        (void)ks;                                                                             \
        return um_impl(UM_##E, m, self, out, NULL);                                           \
    }
#define UM_PLAIN_OPS(X)                                                                           \
    X(RSQRT, rsqrt, , ) X(EXPM1, expm1, , ) X(LOG1P, log1p, , ) X(LOG2, log2, , )                 \
    X(LOG10, log10, , ) X(SIN, sin, , ) X(COS, cos, , ) X(TAN, tan, , ) X(ASIN, asin, , )        \
    X(ACOS, acos, , ) X(ATAN, atan, , ) X(SINH, sinh, , ) X(COSH, cosh, , ) X(ASINH, asinh, , )  \
    X(ACOSH, acosh, , ) X(ATANH, atanh, , ) X(RECIPROCAL, reciprocal, , )                        \
    X(SQUARE, square, , ) X(SGN, sgn, , ) X(FLOOR, floor, , )                                    \
    X(CEIL, ceil, , ) X(ROUND, round, , ) X(TRUNC, trunc, , ) X(FRAC, frac, , )        \
    X(BITWISE_NOT, bitwise_not, , ) X(ERF, erf, , ) X(ERFC, erfc, , ) X(ERFINV, erfinv, , )           \
    X(LGAMMA, lgamma, , ) X(DIGAMMA, digamma, , )
UM_PLAIN_OPS(X_IMPL)
#undef X_IMPL

/* nan_to_num: NaN -> nan (default 0), +inf -> posinf, -inf -> neginf
 * (default: the largest and lowest finite value of the result's dtype) */
em_status em_cpu_nan_to_num_impl(em_keyset ks, const em_meta *m, em_tensor *self, const em_scalar *nan,
                                 const em_scalar *posinf, const em_scalar *neginf, em_tensor *out) {
    (void)ks;
    static const double fmax[EM_DTYPE_COUNT] = { [EM_FLOAT16] = 65504.0, [EM_BFLOAT16] = 3.3895313892515355e38,
                                                 [EM_FLOAT32] = FLT_MAX, [EM_FLOAT64] = DBL_MAX };
    double big = fmax[m->compute];
    um_ctx c = { 1.0, false, nan ? em_scalar_to_double(*nan) : 0.0, posinf ? em_scalar_to_double(*posinf) : big,
                 neginf ? em_scalar_to_double(*neginf) : -big, 0 };
    return um_impl(UM_NAN_TO_NUM, m, self, out, &c);
}

/* k rounded to dtype (float16/bfloat16 through their own rounding) */
static double round_to(double k, em_dtype dt) {
    switch (dt) {
    case EM_FLOAT16: return em_half_to_float(em_float_to_half((float)k));
    case EM_BFLOAT16: return em_bf16_to_float(em_float_to_bf16((float)k));
    case EM_FLOAT32: return (float)k;
    default: return k;
    }
}

em_status em_cpu_deg2rad_impl(em_keyset ks, const em_meta *m, em_tensor *self, em_tensor *out) {
    (void)ks;
    um_ctx c = { round_to(0.017453292519943295769, m->compute), false, 0, 0, 0, 0 };
    return um_impl(UM_DEG2RAD, m, self, out, &c);
}
em_status em_cpu_rad2deg_impl(em_keyset ks, const em_meta *m, em_tensor *self, em_tensor *out) {
    (void)ks;
    um_ctx c = { round_to(57.295779513082320877, m->compute), false, 0, 0, 0, 0 };
    return um_impl(UM_RAD2DEG, m, self, out, &c);
}

em_status em_cpu_polygamma_impl(em_keyset ks, const em_meta *m, int64_t n, em_tensor *self, em_tensor *out) {
    (void)ks;
    um_ctx c = { 1.0, false, 0, 0, 0, n };
    return um_impl(UM_POLYGAMMA, m, self, out, &c);
}

em_status em_cpu_round_decimals_impl(em_keyset ks, const em_meta *m, em_tensor *self, int64_t decimals,
                                     em_tensor *out) {
    (void)ks;
    um_ctx c = { pow(10.0, (double)(decimals < 0 ? -decimals : decimals)), decimals < 0, 0, 0, 0, 0 };
    return um_impl(UM_ROUND_DECIMALS, m, self, out, &c);
}

/* ---- predicates: bool results from any dtype ---- */

/* Element tests of x (float, double, or uint64_t holding an integer or
 * bool, sign-extended) giving a bool. */
static inline bool pr_nan_f(float x) { return x != x; }
static inline bool pr_nan_d(double x) { return x != x; }
static inline bool pr_inf_f(float x) { return __builtin_fabsf(x) == INFINITY; }
static inline bool pr_inf_d(double x) { return __builtin_fabs(x) == INFINITY; }
static inline bool pr_fin_f(float x) { return __builtin_fabsf(x) <= FLT_MAX; }
static inline bool pr_fin_d(double x) { return __builtin_fabs(x) <= DBL_MAX; }
static inline bool pr_pinf_f(float x) { return x == INFINITY; }
static inline bool pr_pinf_d(double x) { return x == INFINITY; }
static inline bool pr_ninf_f(float x) { return x == -INFINITY; }
static inline bool pr_ninf_d(double x) { return x == -INFINITY; }
/* the sign bit read from the bits (gcc 12 miscompiles a vectorised
 * __builtin_signbit of a bfloat16 load: an internal compiler error) */
static inline bool pr_sbit_f(float x) { uint32_t u; memcpy(&u, &x, 4); return u >> 31; }
static inline bool pr_sbit_d(double x) { uint64_t u; memcpy(&u, &x, 8); return u >> 63; }
static inline bool pr_sbit_u(uint64_t x) { return (int64_t)x < 0; }
static inline bool pr_false_u(uint64_t x) { (void)x; return false; }
static inline bool pr_true_u(uint64_t x) { (void)x; return true; }
#define PR_isnan(x) _Generic((x), float: pr_nan_f, double: pr_nan_d, default: pr_false_u)(x)
#define PR_isinf(x) _Generic((x), float: pr_inf_f, double: pr_inf_d, default: pr_false_u)(x)
#define PR_isfinite(x) _Generic((x), float: pr_fin_f, double: pr_fin_d, default: pr_true_u)(x)
#define PR_isposinf(x) _Generic((x), float: pr_pinf_f, double: pr_pinf_d, default: pr_false_u)(x)
#define PR_isneginf(x) _Generic((x), float: pr_ninf_f, double: pr_ninf_d, default: pr_false_u)(x)
#define PR_signbit(x) _Generic((x), float: pr_sbit_f, double: pr_sbit_d, default: pr_sbit_u)(x)
#define PR_logical_not(x) ((x) == 0)

#define PR_FN(FN, T, CT, LD, EXPR, ATTR)                                                   \
    ATTR static void FN(char **d, const int64_t *s, int64_t n, void *ctx) {                \
        (void)ctx;                                                                         \
        if (s[0] == 1 && s[1] == (int64_t)sizeof(T)) {                                     \
            bool *restrict op = (bool *)d[0];                                              \
            const T *restrict ap = (const T *)d[1];                                        \
            for (int64_t i = 0; i < n; i++) {                                              \
                CT x = LD(ap[i]);                                                          \
                op[i] = EXPR(x);                                                           \
            }                                                                              \
        } else {                                                                           \
            for (int64_t i = 0; i < n; i++) {                                              \
                CT x = LD(*(const T *)(d[1] + i * s[1]));                                  \
                *(bool *)(d[0] + i * s[0]) = EXPR(x);                                      \
            }                                                                              \
        }                                                                                  \
    }

/* X(ENUM, name): the predicates; logical_not is the structured one */
#define PR_OPS(X) \
    X(ISNAN, isnan) X(ISINF, isinf) X(ISFINITE, isfinite) X(ISPOSINF, isposinf) X(ISNEGINF, isneginf) \
    X(SIGNBIT, signbit) X(LOGICAL_NOT, logical_not)

#define PFN(OP, N, T, CT) PR_FN(pr_##OP##_##N, T, CT, LA_##N, PR_##OP, CLONE_##N)
#define X_PLOOPS(E, name)                                                                  \
    PFN(name, b, bool, uint64_t) PFN(name, u8, uint8_t, uint64_t) PFN(name, i8, int8_t, uint64_t) \
    PFN(name, i32, int32_t, uint64_t) PFN(name, i64, int64_t, uint64_t)                    \
    PFN(name, f16, em_half, float) PFN(name, bf16, em_bfloat16, float)                     \
    PFN(name, f32, float, float) PFN(name, f64, double, double)
PR_OPS(X_PLOOPS)
#undef X_PLOOPS

typedef enum {
#define X_PENUM(E, name) PR_##E,
    PR_OPS(X_PENUM)
#undef X_PENUM
    PR_COUNT
} pr_op;
static const em_cpu_loop pr_tables[PR_COUNT][EM_DTYPE_COUNT] = {
#define X_PTABLE(E, name)                                                                  \
    { pr_##name##_b, pr_##name##_u8, pr_##name##_i8, pr_##name##_i32, pr_##name##_i64,      \
      pr_##name##_f16, pr_##name##_bf16, pr_##name##_f32, pr_##name##_f64 },
    PR_OPS(X_PTABLE)
#undef X_PTABLE
};

/* A new bool tensor of self's shape holding the predicate of each element
 * (self read in its own dtype, any strides). */
static em_tensor *predicate(pr_op op, em_tensor *self, const char *name) {
    em_cpu_iter it;
    em_tensor *out = em_cpu_iter_build(&it, NULL, EM_BOOL, 1, &self, EM_DTYPE_NONE, name);
    if (out) em_cpu_iter_run(&it, pr_tables[op][self->dtype], NULL, EM_CPU_GRAIN);
    em_cpu_iter_done(&it);
    return out;
}

#define X_PKERNEL(E, name)                                              \
    em_tensor *em_cpu_##name(em_keyset ks, em_tensor *self) {           \
        (void)ks;                                                       \
        return predicate(PR_##E, self, #name);                          \
    }
X_PKERNEL(ISNAN, isnan)
X_PKERNEL(ISINF, isinf)
X_PKERNEL(ISFINITE, isfinite)
X_PKERNEL(ISPOSINF, isposinf)
X_PKERNEL(ISNEGINF, isneginf)
X_PKERNEL(SIGNBIT, signbit)
#undef X_PKERNEL

/* logical_not: m->compute is self's dtype, m->dtype bool */
em_status em_cpu_logical_not_impl(em_keyset ks, const em_meta *m, em_tensor *self, em_tensor *out) {
    (void)ks;
    return em_cpu_unary_run(m, pr_tables[PR_LOGICAL_NOT][m->compute], self, out, NULL, EM_CPU_GRAIN);
}

/* polygamma_(self, order): PyTorch's Tensor.polygamma_(n), polygamma in
 * place. Its own op (its arguments come in another order than the
 * polygamma family's), running the family's meta and impl as the
 * generated in-place kernels do. */
em_tensor *em_cpu_polygamma__(em_keyset ks, em_tensor *self, int64_t order) {
    em_meta m;
    em_tensor *in[] = { NULL };
    m.op = "polygamma_";
    m.out_is_new = false;
    m.out_dtype = EM_META_OUT_CAST;
    if (em_meta_polygamma(&m, order, self) != EM_OK) return NULL;
    if (em_structured_check_inplace(&m, self, in, 0) != EM_OK) return NULL;
    if (em_cpu_polygamma_impl(ks, &m, order, self, self) != EM_OK) return NULL;
    em_tensor_bump_version(self);
    return em_tensor_retain(self);
}
