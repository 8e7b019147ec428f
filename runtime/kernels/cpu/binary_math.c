/* binary_math.c -- the CPU kernels of the binary family (schema/ops/binary.yaml):
 * maximum minimum fmax fmin atan2 fmod hypot copysign xlogy, the logical and
 * bitwise ops and shifts, div with a rounding mode, and the ternary lerp,
 * addcmul and addcdiv -- the impls of their structured families (metas in
 * kernels/meta_binary.c) -- and isclose.
 *
 * A meta has already checked the operands and chosen m->compute (the
 * dtype every input is cast to) and m->dtype (the result's: m->compute,
 * or bool for the logical ops). Integers and bool compute in int64_t
 * (uint64_t where products may wrap), float16/bfloat16 in float.
 */
#pragma GCC optimize("O3", "no-trapping-math", "no-math-errno")
#include "kernels/cpu/em_cpu.h"
#include "kernels/em_structured.h"

#include <math.h>
#include <string.h>

/* ---- element functions ---- */

typedef struct {
    double vd;        /* value/alpha for floating compute */
    int64_t vi;       /* value for integral compute */
    atomic_int err;   /* set by a loop that met an integer division by zero */
} bm_ctx;

/* PyTorch's maximum/minimum: NaN propagates; otherwise std::max/std::min
 * (which return the first operand on a tie: maximum(-0, 0) is -0). */
#define MAXMIN_FNS(T, SUF)                                                                     \
    static inline T max_##SUF(T a, T b) { return a != a ? a : b != b ? b : a < b ? b : a; }   \
    static inline T min_##SUF(T a, T b) { return a != a ? a : b != b ? b : b < a ? b : a; }
MAXMIN_FNS(float, f)
MAXMIN_FNS(double, d)
static inline int64_t max_i(int64_t a, int64_t b) { return a < b ? b : a; }
static inline int64_t min_i(int64_t a, int64_t b) { return b < a ? b : a; }

/* xlogy: NaN where other is NaN, else 0 where self is 0, else self * log(other) */
static inline float xlogy_f(float x, float y) { return y != y ? y : x == 0 ? 0.0f : x * logf(y); }
static inline double xlogy_d(double x, double y) { return y != y ? y : x == 0 ? 0.0 : x * log(y); }

/* integer fmod and divisions (C's truncating % and /; b == 0 sets ctx->err;
 * b == -1 avoids INT64_MIN / -1, wrapping as PyTorch does) */
static inline int64_t fmod_i(int64_t a, int64_t b, bm_ctx *c) {
    if (b == 0) { atomic_store_explicit(&c->err, 1, memory_order_relaxed); return 0; }
    return b == -1 ? 0 : a % b;
}
static inline int64_t divt_i(int64_t a, int64_t b, bm_ctx *c) {
    if (b == 0) { atomic_store_explicit(&c->err, 1, memory_order_relaxed); return 0; }
    return b == -1 ? (int64_t)(0 - (uint64_t)a) : a / b;
}
static inline int64_t divf_i(int64_t a, int64_t b, bm_ctx *c) {
    if (b == 0) { atomic_store_explicit(&c->err, 1, memory_order_relaxed); return 0; }
    if (b == -1) return (int64_t)(0 - (uint64_t)a);
    int64_t q = a / b;
    if (a % b != 0 && ((a < 0) != (b < 0))) q -= 1;
    return q;
}

/* Note [Shift counts]
 * PyTorch 1.13 shifts with C++'s << and >> on the (promoted) element type,
 * whose result for a count outside [0, width) is undefined; on x86 the
 * hardware masks the count: to 5 bits for uint8/int8/int32 (promoted to
 * int) and 6 bits for int64 -- what 1.13 computes, and what we compute
 * (MASK is 31 or 63). Left shifts wrap in the element's width. */
static inline int64_t shl_i(int64_t a, int64_t b, int mask) { return (int64_t)((uint64_t)a << (b & mask)); }
static inline int64_t shr_i(int64_t a, int64_t b, int mask) { return a >> (b & mask); }

/* E_<name>(x, y): the element function of op <name> in the compute type CT
 * (ctx and mask are in scope: see BM_FN). */
#define E_maximum(x, y) _Generic((x), float: max_f, double: max_d, default: max_i)((x), (y))
#define E_minimum(x, y) _Generic((x), float: min_f, double: min_d, default: min_i)((x), (y))
#define E_fmax(x, y) _Generic((x), float: fmaxf, double: fmax, default: max_i)((x), (y))
#define E_fmin(x, y) _Generic((x), float: fminf, double: fmin, default: min_i)((x), (y))
#define E_atan2(x, y) _Generic((x), float: atan2f, double: atan2)((x), (y))
#define E_hypot(x, y) _Generic((x), float: hypotf, double: hypot)((x), (y))
#define E_copysign(x, y) _Generic((x), float: copysignf, double: copysign)((x), (y))
#define E_xlogy(x, y) _Generic((x), float: xlogy_f, double: xlogy_d)((x), (y))
#define E_fmod(x, y) _Generic((x), float: fmodf(x, y), double: fmod(x, y), default: fmod_i(x, y, ctx))
#define E_div_trunc(x, y) _Generic((x), float: truncf((x) / (y)), double: trunc((x) / (y)), default: divt_i(x, y, ctx))
#define E_div_floor(x, y)                                                                   \
    _Generic((x), float: em_cpu_floordivf(x, y), double: em_cpu_floordivd(x, y), default: divf_i(x, y, ctx))
#define E_logical_and(x, y) ((x) != 0 && (y) != 0)
#define E_logical_or(x, y) ((x) != 0 || (y) != 0)
#define E_logical_xor(x, y) (((x) != 0) != ((y) != 0))
#define E_bitwise_and(x, y) ((x) & (y))
#define E_bitwise_or(x, y) ((x) | (y))
#define E_bitwise_xor(x, y) ((x) ^ (y))
#define E_bitwise_left_shift(x, y) shl_i(x, y, mask)
#define E_bitwise_right_shift(x, y) shr_i(x, y, mask)

/* Ternary: PyTorch 1.13's lerp (two forms, exact at both ends), addcmul and
 * addcdiv as (value * t1) op t2; v is the value in the compute type. */
#define E_lerp(x, y, w) ((w) < 0.5 ? (x) + (w) * ((y) - (x)) : (y) - ((y) - (x)) * (1 - (w)))
#define E_addcmul(x, y, z) ((x) + v * (y) * (z))
#define E_addcdiv(x, y, z) ((x) + v * (y) / (z))

/* loads into the compute type: int64_t for bool and integers, float for
 * float16/bfloat16 */
#define LD_b(x) ((int64_t)(x))
#define LD_u8(x) ((int64_t)(x))
#define LD_i8(x) ((int64_t)(x))
#define LD_i32(x) ((int64_t)(x))
#define LD_i64(x) ((int64_t)(x))
#define LD_f16(x) em_half_to_float(x)
#define LD_bf16(x) em_bf16_to_float(x)
#define LD_f32(x) (x)
#define LD_f64(x) (x)
#define ST_bool(v) ((bool)(v))

/* One binary loop: inputs T, output OT, compute CT; MASK the shift mask. */
#define BM_FN(FN, T, OT, CT, LD, ST, EXPR, ATTR)                                              \
    ATTR static void FN(char **d, const int64_t *s, int64_t n, void *ctx_) {                  \
        bm_ctx *ctx = ctx_;                                                                   \
        const int mask = sizeof(T) == 8 ? 63 : 31;                                            \
        (void)ctx; (void)mask;                                                                \
        if (s[0] == (int64_t)sizeof(OT) && s[1] == (int64_t)sizeof(T) && s[2] == (int64_t)sizeof(T)) { \
            OT *restrict op = (OT *)d[0];                                                     \
            const T *restrict ap = (const T *)d[1], *restrict bp = (const T *)d[2];           \
            for (int64_t i = 0; i < n; i++) {                                                 \
                CT x = LD(ap[i]), y = LD(bp[i]);                                              \
                op[i] = ST(EXPR(x, y));                                                       \
            }                                                                                 \
        } else if (s[0] == (int64_t)sizeof(OT) && s[1] == (int64_t)sizeof(T) && s[2] == 0) {  \
            OT *restrict op = (OT *)d[0];                                                     \
            const T *restrict ap = (const T *)d[1];                                           \
            const CT y = LD(*(const T *)d[2]);                                                \
            for (int64_t i = 0; i < n; i++) {                                                 \
                CT x = LD(ap[i]);                                                             \
                op[i] = ST(EXPR(x, y));                                                       \
            }                                                                                 \
        } else {                                                                              \
            for (int64_t i = 0; i < n; i++) {                                                 \
                CT x = LD(*(const T *)(d[1] + i * s[1])), y = LD(*(const T *)(d[2] + i * s[2])); \
                *(OT *)(d[0] + i * s[0]) = ST(EXPR(x, y));                                    \
            }                                                                                 \
        }                                                                                     \
    }

/* One ternary loop (out, then three inputs of type T). Integers compute in
 * uint64_t (LA_*: wrapping products), floats as above. All contiguous (the
 * optimizers' addcdiv_/addcmul_) and a scalar third input (lerp's weight)
 * get loops the compiler vectorises; out may be the first input (in place),
 * so no restrict. */
#define BM3_FN(FN, T, CT, LD, ST, EXPR, ATTR)                                                  \
    ATTR static void FN(char **d, const int64_t *s, int64_t n, void *ctx_) {                  \
        bm_ctx *ctx = ctx_;                                                                   \
        const CT v = _Generic((CT)0, float: (CT)ctx->vd, double: (CT)ctx->vd, default: (CT)ctx->vi); \
        const int64_t es = (int64_t)sizeof(T);                                                \
        (void)v;                                                                              \
        if (s[0] == es && s[1] == es && s[2] == es && (s[3] == es || s[3] == 0)) {            \
            T *op = (T *)d[0];                                                                \
            const T *ap = (const T *)d[1], *bp = (const T *)d[2], *cp = (const T *)d[3];      \
            if (s[3] == 0) {                                                                  \
                const CT z = LD(*cp);                                                         \
                for (int64_t i = 0; i < n; i++) op[i] = ST(EXPR(LD(ap[i]), LD(bp[i]), z));    \
            } else {                                                                          \
                for (int64_t i = 0; i < n; i++) op[i] = ST(EXPR(LD(ap[i]), LD(bp[i]), LD(cp[i]))); \
            }                                                                                 \
            return;                                                                           \
        }                                                                                     \
        for (int64_t i = 0; i < n; i++) {                                                     \
            CT x = LD(*(const T *)(d[1] + i * s[1])), y = LD(*(const T *)(d[2] + i * s[2]));  \
            CT z = LD(*(const T *)(d[3] + i * s[3]));                                         \
            *(T *)(d[0] + i * s[0]) = ST(EXPR(x, y, z));                                      \
        }                                                                                     \
    }

/* Note [Binary math op list]
 * BM_OPS is the one list of this file's ops: X(ENUM, name, FAMILY). A new op
 * is one line here, its element function E_<name> above, its meta (a line
 * in meta_binary.c) and its impl (a line below). FAMILY says which dtypes
 * have a loop (the meta refuses the others first, naming the op):
 *   ALL    every dtype, result in the compute dtype
 *   NUM    every dtype but bool
 *   FLT    floating dtypes (the meta computes integers in float32 or refuses them)
 *   BITS   bool and integer dtypes
 *   INT    integer dtypes
 *   LOGIC  every dtype, bool result
 *   T_NUM, T_FLT  ternary (three inputs), dtypes as NUM / FLT */
#define BM_OPS(X)                                    \
    X(MAXIMUM, maximum, ALL)                         \
    X(MINIMUM, minimum, ALL)                         \
    X(FMAX, fmax, ALL)                               \
    X(FMIN, fmin, ALL)                               \
    X(ATAN2, atan2, FLT)                             \
    X(FMOD, fmod, NUM)                               \
    X(HYPOT, hypot, FLT)                             \
    X(COPYSIGN, copysign, FLT)                       \
    X(XLOGY, xlogy, FLT)                             \
    X(LAND, logical_and, LOGIC)                      \
    X(LOR, logical_or, LOGIC)                        \
    X(LXOR, logical_xor, LOGIC)                      \
    X(BAND, bitwise_and, BITS)                       \
    X(BOR, bitwise_or, BITS)                         \
    X(BXOR, bitwise_xor, BITS)                       \
    X(SHL, bitwise_left_shift, INT)                  \
    X(SHR, bitwise_right_shift, INT)                 \
    X(DIVT, div_trunc, NUM)                          \
    X(DIVF, div_floor, NUM)                          \
    X(LERP, lerp, T_FLT)                             \
    X(ADDCMUL, addcmul, T_NUM)                       \
    X(ADDCDIV, addcdiv, T_FLT)

#define F2(OP, N, T, CT) BM_FN(OP##_##N, T, T, CT, LD_##N, EM_ST_##N, E_##OP, CLONE_##N)
#define FB(OP, N, T, CT) BM_FN(OP##_##N, T, bool, CT, LD_##N, ST_bool, E_##OP, )
#define F3(OP, N, T, CT, LD) BM3_FN(OP##_##N, T, CT, LD, EM_ST_##N, E_##OP, CLONE_##N)
#define LOOPS_FLT(OP) F2(OP, f16, em_half, float) F2(OP, bf16, em_bfloat16, float) \
    F2(OP, f32, float, float) F2(OP, f64, double, double)
#define LOOPS_INT(OP) F2(OP, u8, uint8_t, int64_t) F2(OP, i8, int8_t, int64_t) \
    F2(OP, i32, int32_t, int64_t) F2(OP, i64, int64_t, int64_t)
#define LOOPS_NUM(OP) LOOPS_INT(OP) LOOPS_FLT(OP)
#define LOOPS_BITS(OP) F2(OP, b, bool, int64_t) LOOPS_INT(OP)
#define LOOPS_ALL(OP) F2(OP, b, bool, int64_t) LOOPS_NUM(OP)
#define LOOPS_LOGIC(OP) FB(OP, b, bool, int64_t) FB(OP, u8, uint8_t, int64_t) FB(OP, i8, int8_t, int64_t) \
    FB(OP, i32, int32_t, int64_t) FB(OP, i64, int64_t, int64_t) FB(OP, f16, em_half, float)            \
    FB(OP, bf16, em_bfloat16, float) FB(OP, f32, float, float) FB(OP, f64, double, double)
#define LOOPS_T_FLT(OP) F3(OP, f16, em_half, float, LD_f16) F3(OP, bf16, em_bfloat16, float, LD_bf16) \
    F3(OP, f32, float, float, LD_f32) F3(OP, f64, double, double, LD_f64)
#define LOOPS_T_NUM(OP) F3(OP, u8, uint8_t, uint64_t, LA_u8) F3(OP, i8, int8_t, uint64_t, LA_i8)     \
    F3(OP, i32, int32_t, uint64_t, LA_i32) F3(OP, i64, int64_t, uint64_t, LA_i64) LOOPS_T_FLT(OP)

/* table rows in em_dtype order */
#define ROW_ALL(OP) {OP##_b, OP##_u8, OP##_i8, OP##_i32, OP##_i64, OP##_f16, OP##_bf16, OP##_f32, OP##_f64}
#define ROW_LOGIC(OP) ROW_ALL(OP)
#define ROW_NUM(OP) {NULL, OP##_u8, OP##_i8, OP##_i32, OP##_i64, OP##_f16, OP##_bf16, OP##_f32, OP##_f64}
#define ROW_T_NUM(OP) ROW_NUM(OP)
#define ROW_FLT(OP) {NULL, NULL, NULL, NULL, NULL, OP##_f16, OP##_bf16, OP##_f32, OP##_f64}
#define ROW_T_FLT(OP) ROW_FLT(OP)
#define ROW_BITS(OP) {OP##_b, OP##_u8, OP##_i8, OP##_i32, OP##_i64, NULL, NULL, NULL, NULL}
#define ROW_INT(OP) {NULL, OP##_u8, OP##_i8, OP##_i32, OP##_i64, NULL, NULL, NULL, NULL}

#define X_LOOPS(E, name, FAM) LOOPS_##FAM(name)
BM_OPS(X_LOOPS)
#undef X_LOOPS

typedef enum {
#define X_ENUM(E, name, FAM) BM_##E,
    BM_OPS(X_ENUM)
#undef X_ENUM
    BM_COUNT
} bm_op;

static const em_cpu_loop tables[BM_COUNT][EM_DTYPE_COUNT] = {
#define X_ROW(E, name, FAM) ROW_##FAM(name),
    BM_OPS(X_ROW)
#undef X_ROW
};
_Static_assert(sizeof tables / sizeof tables[0] == BM_COUNT, "one table row per op");

/* ---- driver ---- */

/* Computes op over the nin inputs into out (Note [Structured kernels]):
 * out has m's shape and m->dtype or a dtype m->dtype casts to; it may be
 * an input itself (in place) but overlaps none partially. value is the
 * ternary ops' scalar. EM_OK, or the error set (naming m->op). */
static em_status bm_into(bm_op op, const em_meta *m, int nin, em_tensor **in, em_scalar value, em_tensor *out) {
    em_cpu_loop fn = tables[op][m->compute];
    if (!fn) return em_set_error(EM_ETYPE, "%s: not supported for dtype %s", m->op, em_dtype_name(m->compute));
    if (out->dtype != m->dtype) {
        /* compute in m's dtype, then cast into out */
        em_tensor *tmp = em_tensor_new(m->ndim, m->sizes, m->dtype, out->device);
        if (!tmp) return em_error_kind();
        em_status st = bm_into(op, m, nin, in, value, tmp);
        if (st == EM_OK) st = em_cpu_copy_into(out, tmp, m->op);
        em_tensor_release(tmp);
        return st;
    }
    /* an input in out's memory that is not out itself (a broadcast view of
     * it) is copied first, so that writes cannot change what is read */
    em_tensor *use[3], *hold[3] = { NULL, NULL, NULL };
    em_status st = EM_OK;
    for (int k = 0; k < nin; k++) {
        em_tensor *t = in[k];
        use[k] = t;
        if (t->storage != out->storage || t->numel == 0 ||
            (t->offset == out->offset && t->ndim == out->ndim &&
             memcmp(t->strides, out->strides, sizeof(int64_t) * (size_t)t->ndim) == 0 &&
             memcmp(t->sizes, out->sizes, sizeof(int64_t) * (size_t)t->ndim) == 0))
            continue;
        hold[k] = em_cpu_to_dtype(t, t->dtype, m->op);
        if (!hold[k]) {
            st = em_error_kind();
            break;
        }
        use[k] = hold[k];
    }
    bm_ctx ctx = { em_scalar_to_double(value), em_scalar_to_int(value), 0 };
    if (st == EM_OK) {
        em_cpu_iter it;
        em_tensor *r = em_cpu_iter_build(&it, out, m->dtype, nin, use, m->compute, m->op);
        if (r) em_cpu_iter_run(&it, fn, &ctx, EM_CPU_GRAIN);
        em_cpu_iter_done(&it);
        if (!r) st = em_error_kind();
        em_tensor_release(r);
    }
    for (int k = 0; k < nin; k++) em_tensor_release(hold[k]);
    if (st == EM_OK && atomic_load(&ctx.err))
        st = em_set_error(EM_EVALUE, "%s: integer division by zero (ZeroDivisionError)", m->op);
    return st;
}

/* ---- the impls ---- */

static const em_scalar one = { EM_SCALAR_INT, { .i = 1 } };

#define IMPL2(E, NAME)                                                                          \
    em_status em_cpu_##NAME##_impl(em_keyset ks, const em_meta *m, em_tensor *self, em_tensor *other, \
                                   em_tensor *out) {                                            \
        (void)ks;                                                                               \
        em_tensor *in[2] = { self, other };                                                     \
        return bm_into(BM_##E, m, 2, in, one, out);                                             \
    }
IMPL2(MAXIMUM, maximum)
IMPL2(MINIMUM, minimum)
IMPL2(FMAX, fmax)
IMPL2(FMIN, fmin)
IMPL2(ATAN2, atan2)
IMPL2(FMOD, fmod)
IMPL2(HYPOT, hypot)
IMPL2(COPYSIGN, copysign)
IMPL2(XLOGY, xlogy)
IMPL2(LAND, logical_and)
IMPL2(LOR, logical_or)
IMPL2(LXOR, logical_xor)
IMPL2(BAND, bitwise_and)
IMPL2(BOR, bitwise_or)
IMPL2(BXOR, bitwise_xor)
IMPL2(SHL, bitwise_left_shift)
IMPL2(SHR, bitwise_right_shift)
#undef IMPL2

em_status em_cpu_div_mode_impl(em_keyset ks, const em_meta *m, em_tensor *self, em_tensor *other,
                               const char *rounding_mode, em_tensor *out) {
    (void)ks;
    em_tensor *in[2] = { self, other };
    return bm_into(strcmp(rounding_mode, "trunc") == 0 ? BM_DIVT : BM_DIVF, m, 2, in, one, out);
}

em_status em_cpu_lerp_impl(em_keyset ks, const em_meta *m, em_tensor *self, em_tensor *end, em_tensor *weight,
                           em_tensor *out) {
    (void)ks;
    em_tensor *in[3] = { self, end, weight };
    return bm_into(BM_LERP, m, 3, in, one, out);
}

/* PyTorch converts value to the compute dtype with an overflow check
 * (-0.25 into uint8 is an error, 0.5 into int64 truncates to 0). */
static em_status value_ok(const em_meta *m, em_scalar value) {
    if (!em_cpu_scalar_overflows(value, m->compute)) return EM_OK;
    return em_set_error(EM_EVALUE, "%s: value %g cannot be converted to type %s without overflow", m->op,
                        em_scalar_to_double(value), em_dtype_name(m->compute));
}

em_status em_cpu_addcmul_impl(em_keyset ks, const em_meta *m, em_tensor *self, em_tensor *tensor1,
                              em_tensor *tensor2, em_scalar value, em_tensor *out) {
    (void)ks;
    em_tensor *in[3] = { self, tensor1, tensor2 };
    if (value_ok(m, value) != EM_OK) return em_error_kind();
    return bm_into(BM_ADDCMUL, m, 3, in, value, out);
}

em_status em_cpu_addcdiv_impl(em_keyset ks, const em_meta *m, em_tensor *self, em_tensor *tensor1,
                              em_tensor *tensor2, em_scalar value, em_tensor *out) {
    (void)ks;
    em_tensor *in[3] = { self, tensor1, tensor2 };
    if (value_ok(m, value) != EM_OK) return em_error_kind();
    return bm_into(BM_ADDCDIV, m, 3, in, value, out);
}

/* ---- isclose ---- */

typedef struct {
    double rtol, atol;
    bool equal_nan;
} close_ctx;

/* PyTorch 1.13's isclose, element by element: equal values (equal
 * infinities included) are close; with equal_nan two NaNs are; otherwise
 * |a - b| <= atol + |rtol * b| with a finite |a - b|. Floats compute in
 * their own precision (float16/bfloat16 in float); integers subtract in
 * their own width (wrapping, as PyTorch's integer sub) and compare in
 * float32, where PyTorch's rtol * other lands; bool computes in float32. */
#define CLOSE_FLOAT_FN(N, T, CT, LD)                                                          \
    static void close_##N(char **d, const int64_t *s, int64_t n, void *ctx_) {                \
        const close_ctx *c = ctx_;                                                            \
        const CT rtol = (CT)c->rtol, atol = (CT)c->atol;                                      \
        const bool tol = c->rtol != 0 || c->atol != 0;                                        \
        for (int64_t i = 0; i < n; i++) {                                                     \
            CT a = LD(*(const T *)(d[1] + i * s[1])), b = LD(*(const T *)(d[2] + i * s[2]));  \
            bool r = a == b || (c->equal_nan && a != a && b != b);                            \
            if (!r && tol) {                                                                  \
                CT actual = (CT)fabs((double)(a - b)), allowed = atol + (CT)fabs((double)(rtol * b)); \
                r = isfinite(actual) && actual <= allowed;                                    \
            }                                                                                 \
            *(bool *)(d[0] + i * s[0]) = r;                                                   \
        }                                                                                     \
    }
#define CLOSE_INT_FN(N, T)                                                                    \
    static void close_##N(char **d, const int64_t *s, int64_t n, void *ctx_) {                \
        const close_ctx *c = ctx_;                                                            \
        const float rtol = (float)c->rtol, atol = (float)c->atol;                             \
        const bool tol = c->rtol != 0 || c->atol != 0;                                        \
        for (int64_t i = 0; i < n; i++) {                                                     \
            T a = *(const T *)(d[1] + i * s[1]), b = *(const T *)(d[2] + i * s[2]);           \
            bool r = a == b;                                                                  \
            if (!r && tol) {                                                                  \
                T diff = (T)((uint64_t)(int64_t)a - (uint64_t)(int64_t)b);                    \
                T actual = diff > 0 ? diff : (T)(0 - (uint64_t)(int64_t)diff); /* abs, wrapping */ \
                r = (float)actual <= atol + fabsf(rtol * (float)b);                           \
            }                                                                                 \
            *(bool *)(d[0] + i * s[0]) = r;                                                   \
        }                                                                                     \
    }
#define LD_bool_f(x) ((float)(x))
CLOSE_FLOAT_FN(b, bool, float, LD_bool_f)
CLOSE_INT_FN(u8, uint8_t)
CLOSE_INT_FN(i8, int8_t)
CLOSE_INT_FN(i32, int32_t)
CLOSE_INT_FN(i64, int64_t)
CLOSE_FLOAT_FN(f16, em_half, float, LD_f16)
CLOSE_FLOAT_FN(bf16, em_bfloat16, float, LD_bf16)
CLOSE_FLOAT_FN(f32, float, float, LD_f32)
CLOSE_FLOAT_FN(f64, double, double, LD_f64)
static const em_cpu_loop close_loops[EM_DTYPE_COUNT] = { close_b, close_u8, close_i8, close_i32, close_i64,
                                                         close_f16, close_bf16, close_f32, close_f64 };

/* isclose(self, other, rtol, atol, equal_nan): a new bool tensor of the
 * broadcast shape; self and other must have one dtype, rtol and atol be
 * >= 0 (PyTorch's checks). */
em_tensor *em_cpu_isclose(em_keyset ks, em_tensor *self, em_tensor *other, double rtol, double atol,
                          bool equal_nan) {
    (void)ks;
    if (self->dtype != other->dtype) {
        em_set_error(EM_ETYPE, "isclose: self (%s) and other (%s) must have the same dtype",
                     em_dtype_name(self->dtype), em_dtype_name(other->dtype));
        return NULL;
    }
    if (!(rtol >= 0)) {
        em_set_error(EM_EVALUE, "isclose: rtol must be greater than or equal to zero, but got %g", rtol);
        return NULL;
    }
    if (!(atol >= 0)) {
        em_set_error(EM_EVALUE, "isclose: atol must be greater than or equal to zero, but got %g", atol);
        return NULL;
    }
    close_ctx c = { rtol, atol, equal_nan };
    em_cpu_iter it;
    em_tensor *in[2] = { self, other };
    em_tensor *out = em_cpu_iter_build(&it, NULL, EM_BOOL, 2, in, self->dtype, "isclose");
    if (out) em_cpu_iter_run(&it, close_loops[self->dtype], &c, EM_CPU_GRAIN);
    em_cpu_iter_done(&it);
    return out;
}
