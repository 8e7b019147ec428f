/* unary.c -- elementwise unary kernels: neg abs relu sign exp log sqrt tanh sigmoid.
 * Floating functions of integer or bool input compute in float32.
 */
/* O3 vectorizes the loops; no-trapping-math lets selects (clamps, relu,
 * comparisons) be if-converted; no-math-errno lets sqrt vectorize. None
 * changes a computed value (only errno and FP exception flags). */
#pragma GCC optimize("O3", "no-trapping-math", "no-math-errno")
#include "kernels/cpu/em_cpu.h"
#include "kernels/cpu/em_vmath.h"

#include <math.h>

/* ---- element functions ---- */

/* float32 exp/log/tanh/sigmoid: em_vmath.h's vectorisable versions (within
 * 2 ulp; Note [Vector math]); float64 calls libm. */
/* Element functions are always inlined: the float32 loops carry
 * EM_VM_CLONES, whose optimize("fp-contract=fast") attribute otherwise
 * stops GCC from inlining a plain static inline callee, leaving relu, abs
 * and sign as one call per element in the FMA clone (unvectorised). */
#define U_INLINE static inline __attribute__((always_inline))
U_INLINE double sigmoid_(double x) { return 1.0 / (1.0 + exp(-x)); }

#define U_neg(x) (-(x))
U_INLINE float absf_(float x) { return __builtin_fabsf(x); }
U_INLINE double absd_(double x) { return __builtin_fabs(x); }
U_INLINE uint64_t absu_(uint64_t x) { return (int64_t)x < 0 ? -x : x; }
U_INLINE float reluf_(float x) { return x < 0 ? 0.0f : x; }
U_INLINE double relud_(double x) { return x < 0 ? 0.0 : x; }
U_INLINE uint64_t reluu_(uint64_t x) { return (int64_t)x < 0 ? 0 : x; }
/* sign: (x > 0) - (x < 0), so NaN and -0 give 0, as in PyTorch */
U_INLINE float signf_(float x) { return (float)((x > 0) - (x < 0)); }
U_INLINE double signd_(double x) { return (double)((x > 0) - (x < 0)); }
U_INLINE uint64_t signu_(uint64_t x) { return (int64_t)x > 0 ? 1 : (int64_t)x < 0 ? (uint64_t)-1 : 0; }
#define U_abs(x) _Generic((x), float: absf_, double: absd_, default: absu_)(x)
#define U_sign(x) _Generic((x), float: signf_, double: signd_, default: signu_)(x)
#define U_relu(x) _Generic((x), float: reluf_, double: relud_, default: reluu_)(x)
#define U_exp(x) _Generic((x), float: em_vm_expf(x), default: exp(x))
#define U_log(x) _Generic((x), float: em_vm_logf(x), default: log(x))
#define U_sqrt(x) _Generic((x), float: sqrtf(x), default: sqrt(x))
#define U_tanh(x) _Generic((x), float: em_vm_tanhf(x), default: tanh(x))
#define U_sigmoid(x) _Generic((x), float: em_vm_sigmoidf(x), default: sigmoid_(x))



#define UN_FN(FN, T, CT, LD, ST, EXPR, ATTR)                                            \
    ATTR static void FN(char **d, const int64_t *s, int64_t n, void *ctx) {             \
        (void)ctx;                                                                      \
        if (s[0] == (int64_t)sizeof(T) && s[1] == (int64_t)sizeof(T)) {                 \
            T *restrict op = (T *)d[0];                                                 \
            const T *restrict ap = (const T *)d[1];                                     \
            for (int64_t i = 0; i < n; i++) {                                           \
                CT x = LD(ap[i]);                                                       \
                op[i] = ST(EXPR(x));                                                    \
            }                                                                           \
        } else {                                                                        \
            for (int64_t i = 0; i < n; i++) {                                           \
                CT x = LD(*(const T *)(d[1] + i * s[1]));                               \
                *(T *)(d[0] + i * s[0]) = ST(EXPR(x));                                  \
            }                                                                           \
        }                                                                               \
    }

/* Note [Unary op list]
 * UNARY_OPS is the one list of unary ops: X(ENUM, name, FAMILY, F32). Adding an
 * op is one line here plus its element function U_<name>(x) above (and its
 * schema entry): the line makes the enum U_<ENUM>_OP, the loops
 * <name>_<dtype>, the row of the loop table and the kernel
 * em_cpu_<name>(ks, self). The last column is the float32 loop's kind:
 *   ELEM   U_<name> element by element (vectorised by the compiler)
 *   ARR    contiguous runs through the array form UN_ARRAY_<name>
 *          (em_vmath.h's Note [Vector math blocks]), strided ones ELEM
 *   NUM    integer and floating dtypes, computing in the input's dtype
 *   FLT    floating dtypes; integer/bool inputs compute in float32 (and
 *          get a smaller parallel grain: transcendental loops cost more) */
#define UNARY_OPS(X)              \
    X(NEG, neg, NUM, ELEM)        \
    X(ABS, abs, NUM, ELEM)        \
    X(RELU, relu, NUM, ELEM)      \
    X(SIGN, sign, NUM, ELEM)      \
    X(EXP, exp, FLT, ARR)         \
    X(LOG, log, FLT, ARR)         \
    X(SQRT, sqrt, FLT, ELEM)      \
    X(TANH, tanh, FLT, ARR)       \
    X(SIGMOID, sigmoid, FLT, ARR)

#define UFN(OP, N, T, CT) UN_FN(OP##_##N, T, CT, LA_##N, EM_ST_##N, U_##OP, CLONE_##N)
/* the float32 loops carry EM_VM_CLONES (an FMA clone; Note [Vector math]);
 * a contiguous float32 run of exp, log, tanh and sigmoid goes to em_vmath.h's
 * array form (Note [Vector math blocks]), the others to UN_FN's loop */
#define UN_ARRAY_exp em_vm_expf_n
#define UN_ARRAY_log em_vm_logf_n
#define UN_ARRAY_tanh em_vm_tanhf_n
#define UN_ARRAY_sigmoid em_vm_sigmoidf_n
#define UN_ARRAY_FN(FN, ARRAY, EXPR)                                                    \
    EM_VM_CLONES static void FN(char **d, const int64_t *s, int64_t n, void *ctx) {     \
        (void)ctx;                                                                      \
        if (s[0] == 4 && s[1] == 4) {                                                   \
            ARRAY((float *)d[0], (const float *)d[1], n);                               \
            return;                                                                     \
        }                                                                               \
        for (int64_t i = 0; i < n; i++)                                                 \
            *(float *)(d[0] + i * s[0]) = EXPR(*(const float *)(d[1] + i * s[1]));      \
    }
#define F32_ARR(OP) UN_ARRAY_FN(OP##_f32, UN_ARRAY_##OP, U_##OP)
#define F32_ELEM(OP) UN_FN(OP##_f32, float, float, LA_f32, EM_ST_f32, U_##OP, EM_VM_CLONES)
#define LOOPS_FLT(OP, F32)                                                            \
    UFN(OP, f16, em_half, float) UFN(OP, bf16, em_bfloat16, float)                    \
    F32_##F32(OP)                                                                     \
    UFN(OP, f64, double, double)
#define LOOPS_NUM(OP, F32)                                                            \
    UFN(OP, u8, uint8_t, uint64_t) UFN(OP, i8, int8_t, uint64_t)                      \
    UFN(OP, i32, int32_t, uint64_t) UFN(OP, i64, int64_t, uint64_t) LOOPS_FLT(OP, F32)
#define TABLE_NUM(OP) {NULL, OP##_u8, OP##_i8, OP##_i32, OP##_i64, OP##_f16, OP##_bf16, OP##_f32, OP##_f64}
#define TABLE_FLT(OP) {NULL, NULL, NULL, NULL, NULL, OP##_f16, OP##_bf16, OP##_f32, OP##_f64}

#define X_LOOPS(E, name, FAM, F32) LOOPS_##FAM(name, F32)
UNARY_OPS(X_LOOPS)
#undef X_LOOPS

static void copy_b(char **d, const int64_t *s, int64_t n, void *ctx) {
    (void)ctx;
    for (int64_t i = 0; i < n; i++) *(bool *)(d[0] + i * s[0]) = *(const bool *)(d[1] + i * s[1]);
}

typedef enum {
#define X_ENUM(E, name, FAM, F32) U_##E##_OP,
    UNARY_OPS(X_ENUM)
#undef X_ENUM
    U_COUNT
} unop;
static const em_cpu_loop tables[U_COUNT][EM_DTYPE_COUNT] = {
#define X_TABLE(E, name, FAM, F32) TABLE_##FAM(name),
    UNARY_OPS(X_TABLE)
#undef X_TABLE
};
/* true for FLT ops: integer inputs compute in float32 */
#define FLOATING_NUM false
#define FLOATING_FLT true
static const bool floating_op[U_COUNT] = {
#define X_FLT(E, name, FAM, F32) FLOATING_##FAM,
    UNARY_OPS(X_FLT)
#undef X_FLT
};
/* ---- driver ---- */

typedef struct {
    em_cpu_loop fn;
    char *p[2];
    int64_t s[2];
} flat_ctx;

static void flat_range(int64_t b, int64_t e, void *arg) {
    const flat_ctx *c = arg;
    char *p[2] = { c->p[0] + b * c->s[0], c->p[1] + b * c->s[1] };
    c->fn(p, c->s, e - b, NULL);
}

static em_tensor *unary(unop op, em_tensor *self, const char *name) {
    em_dtype compute = self->dtype;
    if (floating_op[op] && !em_dtype_is_floating(compute)) compute = EM_FLOAT32;
    em_cpu_loop fn = tables[op][compute];
    if (op == U_SIGN_OP && compute == EM_BOOL) fn = copy_b;
    if (op == U_NEG_OP && compute == EM_BOOL) {
        em_set_error(EM_ETYPE, "%s: negation, the `-` operator, on a bool tensor is not supported; to invert "
                               "a mask use logical_not()", name);
        return NULL;
    }
    if (!fn) {
        em_set_error(EM_ETYPE, "%s: not supported for dtype %s", name, em_dtype_name(compute));
        return NULL;
    }
    if (self->is_contiguous && self->dtype == compute) {
        em_tensor *out = em_tensor_new(self->ndim, self->sizes, compute, em_cpu_dev());
        if (!out) return NULL;
        int64_t es = (int64_t)em_dtype_size(compute);
        flat_ctx fc = { fn, { em_tensor_data(out), em_tensor_data(self) }, { es, es } };
        /* transcendental loops are costlier per element: smaller grain */
        int64_t grain = floating_op[op] ? EM_CPU_GRAIN / 4 : EM_CPU_GRAIN;
        if (out->numel < 2 * grain) {
            if (out->numel > 0) fn(fc.p, fc.s, out->numel, NULL);
        } else {
            /* a fresh result: Note [Interrupts in kernels] */
            em_cpu_parallel_for_stoppable(out->numel, grain, flat_range, &fc);
        }
        return out;
    }
    em_cpu_iter it;
    em_tensor *out = em_cpu_iter_build(&it, NULL, compute, 1, &self, compute, name);
    if (out) em_cpu_iter_run(&it, fn, NULL, floating_op[op] ? EM_CPU_GRAIN / 4 : EM_CPU_GRAIN);
    em_cpu_iter_done(&it);
    return out;
}

/* ---- kernels ---- */

#define X_KERNEL(E, name, FAM, F32)                             \
    em_tensor *em_cpu_##name(em_keyset ks, em_tensor *self) { \
        (void)ks;                                            \
        return unary(U_##E##_OP, self, #name);               \
    }
UNARY_OPS(X_KERNEL)
#undef X_KERNEL
