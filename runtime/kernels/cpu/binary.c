/* binary.c -- elementwise binary kernels: add sub mul div pow remainder,
 * the comparisons, and the in-place add_ sub_ mul_ div_.
 *
 * Every op computes in the common dtype (em_result_type2; div of integers
 * in float32). Integers and bool compute in uint64_t for add/sub/mul (so
 * overflow wraps without undefined behaviour) and in int64_t elsewhere;
 * float16/bfloat16 compute in float and round on store.
 */
/* O3 vectorizes the loops; no-trapping-math lets selects (clamps, relu,
 * comparisons) be if-converted; no-math-errno lets sqrt vectorize. None
 * changes a computed value (only errno and FP exception flags). */
#pragma GCC optimize("O3", "no-trapping-math", "no-math-errno")
#include "kernels/cpu/em_cpu.h"

#include <math.h>
#include <string.h>

/* ---- element functions ---- */

typedef struct {
    double ad;        /* alpha for floating compute */
    int64_t ai;       /* alpha for integral compute */
    atomic_int err;   /* set by a loop that met a bad value (int % 0) */
} bin_ctx;

static inline int64_t ipow(int64_t b, int64_t e) {
    if (e < 0) return b == 1 ? 1 : b == -1 ? ((e & 1) ? -1 : 1) : 0;
    uint64_t r = 1, x = (uint64_t)b;
    while (e) {
        if (e & 1) r *= x;
        x *= x;
        e >>= 1;
    }
    return (int64_t)r;
}
static inline uint64_t ipow_u(uint64_t b, uint64_t e) { return (uint64_t)ipow((int64_t)b, (int64_t)e); }
static inline float remf_py(float a, float b) {
    float r = fmodf(a, b);
    if (r != 0 && ((r < 0) != (b < 0))) r += b;
    return r;
}
static inline double rem_py(double a, double b) {
    double r = fmod(a, b);
    if (r != 0 && ((r < 0) != (b < 0))) r += b;
    return r;
}
static inline uint64_t rem_i(uint64_t ua, uint64_t ub, bin_ctx *c) {
    int64_t a = (int64_t)ua, b = (int64_t)ub;
    if (b == 0) { atomic_store_explicit(&c->err, 1, memory_order_relaxed); return 0; }
    if (b == -1) return 0; /* avoids INT64_MIN % -1 */
    int64_t r = a % b;
    if (r != 0 && ((r < 0) != (b < 0))) r += b;
    return (uint64_t)r;
}

/* floor division: em_cpu_floordivf/em_cpu_floordivd (em_cpu.h) for floats;
 * for integers below (b == 0 is an error) */
static inline uint64_t floordiv_i(uint64_t ua, uint64_t ub, bin_ctx *c) {
    int64_t a = (int64_t)ua, b = (int64_t)ub;
    if (b == 0) { atomic_store_explicit(&c->err, 1, memory_order_relaxed); return 0; }
    if (b == -1) return 0 - ua; /* wraps for INT64_MIN, as in C++ PyTorch */
    int64_t q = a / b;
    if (a % b != 0 && ((a < 0) != (b < 0))) q -= 1;
    return (uint64_t)q;
}

/* E_<name>(x, y): the element function of op <name> in the compute type
 * (alpha and ctx are in scope: see BIN_FN). */
#define E_add(x, y) ((x) + alpha * (y))
#define E_sub(x, y) ((x) - alpha * (y))
#define E_mul(x, y) ((x) * (y))
#define E_div(x, y) ((x) / (y))
#define E_pow(x, y) _Generic((x), float: powf, double: pow, default: ipow_u)((x), (y))
#define E_remainder(x, y) _Generic((x), float: remf_py(x, y), double: rem_py(x, y), default: rem_i(x, y, ctx))
#define E_floor_divide(x, y) _Generic((x), float: em_cpu_floordivf(x, y), double: em_cpu_floordivd(x, y), default: floordiv_i(x, y, ctx))
#define E_tanh_backward(g, y) ((g) * (1 - (y) * (y)))
#define E_sigmoid_backward(g, y) ((g) * (y) * (1 - (y)))
/* threshold_backward: a select, not a product, so NaN grads are masked
 * and a NaN input passes the gradient (NaN <= t is false), as in PyTorch */
#define E_threshold_backward(g, y) ((y) <= alpha ? 0 : (g))
#define E_eq(x, y) ((x) == (y))
#define E_ne(x, y) ((x) != (y))
#define E_lt(x, y) ((x) < (y))
#define E_le(x, y) ((x) <= (y))
#define E_gt(x, y) ((x) > (y))
#define E_ge(x, y) ((x) >= (y))

/* comparison loads: signed */
#define LC_b(x) ((int64_t)(x))
#define LC_u8(x) ((int64_t)(x))
#define LC_i8(x) ((int64_t)(x))
#define LC_i32(x) ((int64_t)(x))
#define LC_i64(x) ((int64_t)(x))
#define LC_f16(x) em_half_to_float(x)
#define LC_bf16(x) em_bf16_to_float(x)
#define LC_f32(x) (x)
#define LC_f64(x) (x)
#define SB(v) ((bool)(v))


/* One loop: operand types T (inputs) and OT (output), compute type CT. */
#define BIN_FN(FN, T, OT, CT, LD, ST, EXPR, ATTR)                                           \
    ATTR static void FN(char **d, const int64_t *s, int64_t n, void *ctx_) {                \
        bin_ctx *ctx = ctx_;                                                                \
        const CT alpha = _Generic((CT)0, float: (CT)ctx->ad, double: (CT)ctx->ad,           \
                                  default: (CT)ctx->ai);                                    \
        (void)alpha;                                                                        \
        char *o = d[0];                                                                     \
        const char *a = d[1], *b = d[2];                                                    \
        if (s[0] == (int64_t)sizeof(OT) && s[1] == (int64_t)sizeof(T) && s[2] == (int64_t)sizeof(T)) { \
            OT *restrict op = (OT *)o;                                                      \
            const T *restrict ap = (const T *)a, *restrict bp = (const T *)b;               \
            for (int64_t i = 0; i < n; i++) {                                               \
                CT x = LD(ap[i]), y = LD(bp[i]);                                            \
                op[i] = ST(EXPR(x, y));                                                     \
            }                                                                               \
        } else if (s[0] == (int64_t)sizeof(OT) && s[1] == (int64_t)sizeof(T) && s[2] == 0) { \
            OT *restrict op = (OT *)o;                                                      \
            const T *restrict ap = (const T *)a;                                            \
            const CT y = LD(*(const T *)b);                                                 \
            for (int64_t i = 0; i < n; i++) {                                               \
                CT x = LD(ap[i]);                                                           \
                op[i] = ST(EXPR(x, y));                                                     \
            }                                                                               \
        } else if (s[0] == (int64_t)sizeof(OT) && s[1] == 0 && s[2] == (int64_t)sizeof(T)) { \
            OT *restrict op = (OT *)o;                                                      \
            const T *restrict bp = (const T *)b;                                            \
            const CT x = LD(*(const T *)a);                                                 \
            for (int64_t i = 0; i < n; i++) {                                               \
                CT y = LD(bp[i]);                                                           \
                op[i] = ST(EXPR(x, y));                                                     \
            }                                                                               \
        } else {                                                                            \
            for (int64_t i = 0; i < n; i++) {                                               \
                CT x = LD(*(const T *)(a + i * s[1])), y = LD(*(const T *)(b + i * s[2]));  \
                *(OT *)(o + i * s[0]) = ST(EXPR(x, y));                                     \
            }                                                                               \
        }                                                                                   \
    }

/* Note [Binary op list]
 * BINARY_OPS is the one list of binary ops: X(ENUM, name, FAMILY, KERNEL).
 * Adding an op is one line here plus its element function E_<name>(x, y)
 * above (and its schema entry). The line makes the enum B_<ENUM>, the
 * per-dtype loops <name>_<dtype>, the row of the loop table, its family
 * and, for KERNEL = PLAIN, the kernel
 * em_cpu_<name>(ks, self, other); CUSTOM kernels (extra arguments, or
 * the structured impls of add sub mul div) are written below by hand.
 * FAMILY says which dtypes have a loop and what the op computes in:
 *   ARITH  every dtype, computing in the common dtype
 *   FLOAT  floating dtypes only; integer/bool operands compute in float32
 *   CMP    every dtype, bool result (compared as signed / float)
 *   THR    floating and integer dtypes, compared signed (threshold_backward)
 * B_TANH_BACKWARD / B_SIGMOID_BACKWARD are the fused gradients of tanh and
 * sigmoid given their output (grad * (1 - y^2), grad * y * (1 - y)): one
 * pass instead of three ops per backward node. */
#define BINARY_OPS(X)                                            \
    X(ADD, add, ARITH, CUSTOM)                                   \
    X(SUB, sub, ARITH, CUSTOM)                                   \
    X(MUL, mul, ARITH, CUSTOM)                                   \
    X(DIV, div, FLOAT, CUSTOM)                                   \
    X(POW, pow, ARITH, PLAIN)                                    \
    X(REM, remainder, ARITH, PLAIN)                              \
    X(FDIV, floor_divide, ARITH, PLAIN)                          \
    X(TANH_BW, tanh_backward, FLOAT, PLAIN)                      \
    X(SIGM_BW, sigmoid_backward, FLOAT, PLAIN)                   \
    X(THR_BW, threshold_backward, THR, CUSTOM)                   \
    X(EQ, eq, CMP, PLAIN)                                        \
    X(NE, ne, CMP, PLAIN)                                        \
    X(LT, lt, CMP, PLAIN)                                        \
    X(LE, le, CMP, PLAIN)                                        \
    X(GT, gt, CMP, PLAIN)                                        \
    X(GE, ge, CMP, PLAIN)

/* the loops of one op: LOOPS_<FAMILY>(name) */
#define ARITH_FN(OP, N, T, CT) BIN_FN(OP##_##N, T, T, CT, LA_##N, EM_ST_##N, E_##OP, CLONE_##N)
#define CMP_FN(OP, N, T, CT) BIN_FN(OP##_##N, T, bool, CT, LC_##N, SB, E_##OP, CLONE_##N)
#define THR_FN(OP, N, T) BIN_FN(OP##_##N, T, T, int64_t, LC_##N, EM_ST_##N, E_##OP, )
#define LOOPS_FLOAT(OP)                                                                        \
    ARITH_FN(OP, f16, em_half, float) ARITH_FN(OP, bf16, em_bfloat16, float)                   \
    ARITH_FN(OP, f32, float, float) ARITH_FN(OP, f64, double, double)
#define LOOPS_ARITH(OP)                                                                        \
    ARITH_FN(OP, b, bool, uint64_t) ARITH_FN(OP, u8, uint8_t, uint64_t)                        \
    ARITH_FN(OP, i8, int8_t, uint64_t) ARITH_FN(OP, i32, int32_t, uint64_t)                    \
    ARITH_FN(OP, i64, int64_t, uint64_t) LOOPS_FLOAT(OP)
#define LOOPS_CMP(OP)                                                                          \
    CMP_FN(OP, b, bool, int64_t) CMP_FN(OP, u8, uint8_t, int64_t)                              \
    CMP_FN(OP, i8, int8_t, int64_t) CMP_FN(OP, i32, int32_t, int64_t)                          \
    CMP_FN(OP, i64, int64_t, int64_t) CMP_FN(OP, f16, em_half, float)                          \
    CMP_FN(OP, bf16, em_bfloat16, float) CMP_FN(OP, f32, float, float)                         \
    CMP_FN(OP, f64, double, double)
/* threshold_backward keeps integer dtypes (compared signed, as in PyTorch) */
#define LOOPS_THR(OP)                                                                          \
    THR_FN(OP, u8, uint8_t) THR_FN(OP, i8, int8_t) THR_FN(OP, i32, int32_t)                    \
    THR_FN(OP, i64, int64_t) LOOPS_FLOAT(OP)
/* the table row of one op: TABLE_<FAMILY>(name), in em_dtype order */
#define TABLE_ARITH(OP) {OP##_b, OP##_u8, OP##_i8, OP##_i32, OP##_i64, OP##_f16, OP##_bf16, OP##_f32, OP##_f64}
#define TABLE_CMP(OP) TABLE_ARITH(OP)
#define TABLE_FLOAT(OP) {NULL, NULL, NULL, NULL, NULL, OP##_f16, OP##_bf16, OP##_f32, OP##_f64}
#define TABLE_THR(OP) {NULL, OP##_u8, OP##_i8, OP##_i32, OP##_i64, OP##_f16, OP##_bf16, OP##_f32, OP##_f64}

#define X_LOOPS(E, name, FAM, K) LOOPS_##FAM(name)
BINARY_OPS(X_LOOPS)
#undef X_LOOPS

typedef enum {
#define X_ENUM(E, name, FAM, K) B_##E,
    BINARY_OPS(X_ENUM)
#undef X_ENUM
    B_COUNT
} binop;

typedef enum { F_ARITH, F_FLOAT, F_CMP, F_THR } binfam;

static const em_cpu_loop tables[B_COUNT][EM_DTYPE_COUNT] = {
#define X_TABLE(E, name, FAM, K) TABLE_##FAM(name),
    BINARY_OPS(X_TABLE)
#undef X_TABLE
};
static const binfam families[B_COUNT] = {
#define X_FAM(E, name, FAM, K) F_##FAM,
    BINARY_OPS(X_FAM)
#undef X_FAM
};
_Static_assert(sizeof tables / sizeof tables[0] == B_COUNT, "one table row per binary op");

/* ---- driver ---- */

typedef struct {
    em_cpu_loop fn;
    void *ctx;
    char *p[3];
    int64_t s[3];
} flat_ctx;

static void flat_range(int64_t b, int64_t e, void *arg) {
    const flat_ctx *c = arg;
    char *p[3];
    for (int k = 0; k < 3; k++) p[k] = c->p[k] + b * c->s[k];
    c->fn(p, c->s, e - b, c->ctx);
}

static bool same_sizes(const em_tensor *a, const em_tensor *b) {
    if (a->ndim != b->ndim) return false;
    for (int d = 0; d < a->ndim; d++)
        if (a->sizes[d] != b->sizes[d]) return false;
    return true;
}

/* The common fast case: both operands contiguous with one shape, or one
 * of them a single element with no more dims than the other. Returns the
 * output (out itself, not retained, when given: contiguous, of the
 * broadcast shape and dtype out_dtype; else a new tensor), or NULL with
 * *handled false when the general path must run. */
static inline __attribute__((always_inline)) em_tensor *
binary_fast(em_cpu_loop fn, bin_ctx *ctx, em_tensor *a, em_tensor *b, em_dtype compute, em_dtype out_dtype,
            em_tensor *out, bool *handled) {
    *handled = false;
    if (!a->is_contiguous || !b->is_contiguous || (out && !out->is_contiguous)) return NULL;
    const em_tensor *big;
    int64_t sa, sb;
    size_t es = em_dtype_size(compute);
    _Alignas(16) char buf[2][16];
    char *pa = em_tensor_data(a), *pb = em_tensor_data(b);
    if (a->dtype == compute && b->dtype == compute && same_sizes(a, b)) {
        big = a; sa = sb = (int64_t)es;
    } else if (b->numel == 1 && b->ndim <= a->ndim && a->dtype == compute) {
        big = a; sa = (int64_t)es; sb = 0;
        if (b->dtype != compute) {
            int64_t z[2] = {0, 0};
            char *dd[2] = {buf[1], pb};
            em_cpu_cast_loop(compute, b->dtype)(dd, z, 1, NULL);
            pb = buf[1];
        }
    } else if (a->numel == 1 && a->ndim <= b->ndim && b->dtype == compute) {
        big = b; sa = 0; sb = (int64_t)es;
        if (a->dtype != compute) {
            int64_t z[2] = {0, 0};
            char *dd[2] = {buf[0], pa};
            em_cpu_cast_loop(compute, a->dtype)(dd, z, 1, NULL);
            pa = buf[0];
        }
    } else {
        return NULL;
    }
    *handled = true;
    bool fresh = !out; /* Note [Interrupts in kernels]: only a fresh result may stop half-way */
    if (!out) out = em_tensor_new(big->ndim, big->sizes, out_dtype, em_cpu_dev());
    if (!out) return NULL;
    flat_ctx fc = { fn, ctx, { em_tensor_data(out), pa, pb },
                    { (int64_t)em_dtype_size(out_dtype), sa, sb } };
    int64_t n = out->numel;
    if (n < 2 * EM_CPU_GRAIN) {
        if (n > 0) fn(fc.p, fc.s, n, ctx);
    } else {
        (fresh ? em_cpu_parallel_for_stoppable : em_cpu_parallel_for)(n, EM_CPU_GRAIN, flat_range, &fc);
    }
    return out;
}

/* PyTorch's refusals of bool and integer operands that would otherwise
 * compute something surprising: any bool operand of a subtraction, pow in
 * bool, an integer raised to a negative integer number. */
static bool operands_ok(binop op, const em_tensor *a, const em_tensor *b, em_dtype compute, const char *name) {
    if (op == B_SUB && (a->dtype == EM_BOOL || b->dtype == EM_BOOL)) {
        em_set_error(EM_ETYPE, "%s: subtraction, the `-` operator, with a bool tensor is not supported; to "
                               "invert a mask use logical_not()", name);
        return false;
    }
    if (op == B_POW && compute == EM_BOOL) {
        em_set_error(EM_ETYPE, "%s: not supported for dtype bool", name);
        return false;
    }
    if (op == B_POW && em_dtype_is_integral(compute) && b->wrapped_number && em_dtype_is_integral(b->dtype) &&
        em_load_as_int64(em_tensor_data(b), b->dtype) < 0) {
        em_set_error(EM_EVALUE, "%s: integers to negative integer powers are not allowed", name);
        return false;
    }
    return true;
}

/* alpha of add/sub: a bool alpha only for bool results; in bool, any
 * nonzero alpha is true (PyTorch: a + alpha * b computed in bool). */
static bool alpha_ok(binop op, em_scalar alpha, em_dtype compute, em_scalar *out, const char *name) {
    if (op != B_ADD && op != B_SUB) return true;
    if (alpha.kind == EM_SCALAR_BOOL && compute != EM_BOOL) {
        em_set_error(EM_ETYPE, "%s: a boolean alpha is only supported for bool results", name);
        return false;
    }
    if (compute == EM_BOOL) *out = em_scalar_bool(em_scalar_to_double(alpha) != 0);
    return true;
}

/* PyTorch's pow(Tensor, Scalar) computes x^0.5 as sqrt(x) and x^-0.5 as
 * 1 / sqrt(x), so that (-inf)^0.5 is NaN and (-0)^0.5 is -0. Returns the
 * result, or NULL with *handled false when the exponent is another value. */
static em_tensor *binary(binop op, em_tensor *a, em_tensor *b, em_scalar alpha, const char *name);
static em_tensor *pow_by_sqrt(em_tensor *a, em_tensor *b, em_dtype compute, bool *handled) {
    *handled = false;
    if (!b->wrapped_number || !em_dtype_is_floating(compute) || !em_dtype_is_floating(b->dtype)) return NULL;
    double e = em_load_as_double(em_tensor_data(b), b->dtype);
    if (e != 0.5 && e != -0.5) return NULL;
    *handled = true;
    em_tensor *x = a->dtype == compute ? em_tensor_retain(a) : em_cpu_to_dtype(a, compute, "pow");
    em_tensor *r = x ? em_cpu_sqrt(EM_KS(EM_KEY_CPU), x) : NULL;
    em_tensor_release(x);
    if (r && e < 0) {
        em_tensor *one = em_tensor_new(0, NULL, compute, em_cpu_dev());
        if (one) {
            em_store_from_double(em_tensor_data(one), compute, 1.0);
            one->wrapped_number = true;
        }
        em_tensor *q = one ? binary(B_DIV, one, r, em_scalar_int(1), "pow") : NULL;
        em_tensor_release(one);
        em_tensor_release(r);
        r = q;
    }
    return r;
}

/* Out-of-place binary op: a new tensor, or NULL with the error set. */
static em_tensor *binary(binop op, em_tensor *a, em_tensor *b, em_scalar alpha, const char *name) {
    em_dtype compute = em_result_type2(a, b);
    if (families[op] == F_FLOAT && !em_dtype_is_floating(compute)) compute = EM_FLOAT32;
    if (!operands_ok(op, a, b, compute, name)) return NULL;
    if (op == B_POW) {
        bool handled;
        em_tensor *r = pow_by_sqrt(a, b, compute, &handled);
        if (handled) return r;
    }
    if (compute == EM_BOOL && (op == B_REM || op == B_FDIV)) {
        em_set_error(EM_ETYPE, "%s: not supported for bool tensors", name);
        return NULL;
    }
    if ((op == B_ADD || op == B_SUB) && alpha.kind == EM_SCALAR_FLOAT && !em_dtype_is_floating(compute)) {
        em_set_error(EM_ETYPE, "%s: for integral input tensors, argument alpha must not be a floating point number",
                     name);
        return NULL;
    }
    em_cpu_loop fn = tables[op][compute];
    if (!fn) {
        em_set_error(EM_ETYPE, "%s: not supported for dtype %s", name, em_dtype_name(compute));
        return NULL;
    }
    em_dtype out_dtype = families[op] == F_CMP ? EM_BOOL : compute;
    if (!alpha_ok(op, alpha, compute, &alpha, name)) return NULL;
    bin_ctx ctx = { em_scalar_to_double(alpha), em_scalar_to_int(alpha), 0 };
    bool handled;
    em_tensor *out = binary_fast(fn, &ctx, a, b, compute, out_dtype, NULL, &handled);
    if (!handled) {
        em_cpu_iter it;
        em_tensor *in[2] = { a, b };
        out = em_cpu_iter_build(&it, NULL, out_dtype, 2, in, compute, name);
        if (out) em_cpu_iter_run(&it, fn, &ctx, EM_CPU_GRAIN);
        em_cpu_iter_done(&it);
    }
    if (out && atomic_load(&ctx.err)) {
        em_tensor_release(out);
        em_set_error(EM_EVALUE, "%s: integer division by zero", name);
        return NULL;
    }
    return out;
}

/* The structured impl of add sub mul div (Note [Structured kernels] in
 * kernels/em_structured.h): meta (kernels/meta.c) checked the operands and
 * gave the common dtype m->compute and the broadcast shape, which out has;
 * out's dtype is m->compute or one it casts to; out may be an input (in
 * place) but overlaps none partially. */
static em_status binary_into(binop op, const em_meta *m, em_tensor *a, em_tensor *b, em_scalar alpha,
                             em_tensor *out) {
    em_dtype compute = m->compute;
    em_cpu_loop fn = tables[op][compute];
    if (!fn) return em_set_error(EM_ETYPE, "%s: not supported for dtype %s", m->op, em_dtype_name(compute));
    if (out->dtype != compute) {
        /* compute in the common dtype, then cast into out */
        em_tensor *tmp = em_tensor_new(m->ndim, m->sizes, compute, out->device);
        if (!tmp) return em_error_kind();
        em_status st = binary_into(op, m, a, b, alpha, tmp);
        if (st == EM_OK) st = em_cpu_copy_into(out, tmp, m->op);
        em_tensor_release(tmp);
        return st;
    }
    if (compute == EM_BOOL) alpha = em_scalar_bool(em_scalar_to_double(alpha) != 0);
    bin_ctx ctx = { em_scalar_to_double(alpha), em_scalar_to_int(alpha), 0 };
    if (a->numel == 1 && b->numel == 1) {
        /* one element each (so out has one): its layout, broadcasting and
         * overlap decide nothing -- the loop reads both before it writes.
         * An operand of another dtype (a wrapped number) is cast first,
         * as binary_fast does. The common case of a scalar graph. */
        _Alignas(16) char buf[2][16];
        char *p[3] = { em_tensor_data(out), em_tensor_data(a), em_tensor_data(b) };
        for (int k = 0; k < 2; k++) {
            em_dtype dt = k ? b->dtype : a->dtype;
            if (dt == compute) continue;
            int64_t z[2] = { 0, 0 };
            char *dd[2] = { buf[k], p[k + 1] };
            em_cpu_cast_loop(compute, dt)(dd, z, 1, NULL);
            p[k + 1] = buf[k];
        }
        static const int64_t s[3] = { 0, 0, 0 };
        fn(p, s, 1, &ctx);
        if (atomic_load(&ctx.err)) return em_set_error(EM_EVALUE, "%s: integer division by zero", m->op);
        return EM_OK;
    }
    /* an input in out's memory that is not out itself (a broadcast view of
     * it) is copied first, so that writes cannot change what is read */
    em_tensor *in[2] = { a, b }, *hold[2] = { NULL, NULL };
    for (int k = 0; k < 2 && (a->storage == out->storage || b->storage == out->storage); k++) {
        em_tensor *t = in[k];
        if (t->storage != out->storage || t->numel == 0 ||
            (t->offset == out->offset && t->ndim == out->ndim &&
             memcmp(t->strides, out->strides, sizeof(int64_t) * (size_t)t->ndim) == 0 &&
             memcmp(t->sizes, out->sizes, sizeof(int64_t) * (size_t)t->ndim) == 0))
            continue;
        hold[k] = em_cpu_to_dtype(t, t->dtype, m->op);
        if (!hold[k]) {
            em_tensor_release(hold[0]);
            return em_error_kind();
        }
        in[k] = hold[k];
    }
    bool handled, ok = true;
    (void)binary_fast(fn, &ctx, in[0], in[1], compute, compute, out, &handled);
    if (!handled) {
        em_cpu_iter it;
        em_tensor *r = em_cpu_iter_build(&it, out, compute, 2, in, compute, m->op);
        if (r) em_cpu_iter_run(&it, fn, &ctx, EM_CPU_GRAIN);
        em_cpu_iter_done(&it);
        ok = r != NULL;
        em_tensor_release(r);
    }
    if (hold[0] || hold[1]) {
        em_tensor_release(hold[0]);
        em_tensor_release(hold[1]);
    }
    if (!ok) return em_error_kind();
    if (atomic_load(&ctx.err)) return em_set_error(EM_EVALUE, "%s: integer division by zero", m->op);
    return EM_OK;
}

/* ---- kernels ---- */

static const em_scalar one = { EM_SCALAR_INT, { .i = 1 } };

/* add sub mul div: the structured impls (their kernels em_cpu_add,
 * em_cpu_add_, em_cpu_add_out, ... are generated: build/gen/em_structured.c) */
em_status em_cpu_add_impl(em_keyset ks, const em_meta *m, em_tensor *self, em_tensor *other, em_scalar alpha,
                          em_tensor *out) {
    (void)ks;
    return binary_into(B_ADD, m, self, other, alpha, out);
}
em_status em_cpu_sub_impl(em_keyset ks, const em_meta *m, em_tensor *self, em_tensor *other, em_scalar alpha,
                          em_tensor *out) {
    (void)ks;
    return binary_into(B_SUB, m, self, other, alpha, out);
}
em_status em_cpu_mul_impl(em_keyset ks, const em_meta *m, em_tensor *self, em_tensor *other, em_tensor *out) {
    (void)ks;
    return binary_into(B_MUL, m, self, other, one, out);
}
em_status em_cpu_div_impl(em_keyset ks, const em_meta *m, em_tensor *self, em_tensor *other, em_tensor *out) {
    (void)ks;
    return binary_into(B_DIV, m, self, other, one, out);
}
em_tensor *em_cpu_threshold_backward(em_keyset ks, em_tensor *grad_output, em_tensor *self, em_scalar threshold) {
    (void)ks;
    em_dtype dt = em_result_type2(grad_output, self);
    if (em_dtype_is_integral(dt)) {
        if (em_cpu_scalar_overflows(threshold, dt)) {
            em_set_error(EM_EVALUE, "threshold_backward: threshold %g cannot be converted to type %s without "
                                    "overflow", em_scalar_to_double(threshold), em_dtype_name(dt));
            return NULL;
        }
        /* compared in the dtype: -2 is 254 for uint8, as in PyTorch */
        _Alignas(8) char buf[8];
        em_store_from_double(buf, dt, em_scalar_to_double(threshold));
        threshold = em_scalar_int(em_load_as_int64(buf, dt));
    }
    return binary(B_THR_BW, grad_output, self, threshold, "threshold_backward");
}
/* the (self, other) kernels of BINARY_OPS */
#define KERNEL_CUSTOM(E, name)
#define KERNEL_PLAIN(E, name)                                                   \
    em_tensor *em_cpu_##name(em_keyset ks, em_tensor *self, em_tensor *other) { \
        (void)ks;                                                               \
        return binary(B_##E, self, other, one, #name);                          \
    }
#define X_KERNEL(E, name, FAM, K) KERNEL_##K(E, name)
BINARY_OPS(X_KERNEL)
#undef X_KERNEL

/* ---- where (ternary) ---- */

#define WHERE_FN(NAME, T)                                                                  \
    static void NAME(char **d, const int64_t *s, int64_t n, void *ctx) {                   \
        (void)ctx;                                                                         \
        for (int64_t i = 0; i < n; i++)                                                    \
            *(T *)(d[0] + i * s[0]) = *(const uint8_t *)(d[1] + i * s[1]) != 0            \
                                          ? *(const T *)(d[2] + i * s[2])                  \
                                          : *(const T *)(d[3] + i * s[3]);                 \
    }
WHERE_FN(where1, uint8_t)
WHERE_FN(where2, uint16_t)
WHERE_FN(where4, uint32_t)
WHERE_FN(where8, uint64_t)

/* self where condition holds, else other; broadcasting all three, the
 * result in the promoted dtype of self and other (numbers, as wrapped
 * 0-dim tensors, promote like PyTorch's scalars: where(c, 1.5, int64
 * tensor) is float32). The condition is bool, or uint8 (nonzero is true),
 * which PyTorch 1.13 still takes. */
em_tensor *em_cpu_where(em_keyset ks, em_tensor *condition, em_tensor *self, em_tensor *other) {
    (void)ks;
    if (condition->dtype != EM_BOOL && condition->dtype != EM_UINT8) {
        em_set_error(EM_ETYPE, "where: expected condition to be a bool tensor, got %s",
                     em_dtype_name(condition->dtype));
        return NULL;
    }
    em_dtype dt = em_result_type2(self, other);
    em_tensor *a = self->dtype == dt ? em_tensor_retain(self) : em_cpu_to_dtype(self, dt, "where");
    em_tensor *b = !a ? NULL : other->dtype == dt ? em_tensor_retain(other) : em_cpu_to_dtype(other, dt, "where");
    em_tensor *out = NULL;
    if (a && b) {
        em_cpu_iter it;
        em_tensor *in[3] = { condition, a, b };
        out = em_cpu_iter_build(&it, NULL, dt, 3, in, EM_DTYPE_NONE, "where");
        size_t es = em_dtype_size(dt);
        if (out) em_cpu_iter_run(&it, es == 1 ? where1 : es == 2 ? where2 : es == 4 ? where4 : where8, NULL,
                                 EM_CPU_GRAIN);
        em_cpu_iter_done(&it);
    }
    em_tensor_release(a);
    em_tensor_release(b);
    return out;
}
