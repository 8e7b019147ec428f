/* unary_clamp.c -- the structured impls of clamp, clamp_min and clamp_max
 * (number and tensor bounds) of the unary family (schema/ops/unary.yaml).
 *
 * NaN follows PyTorch 1.13 exactly (its kernels differ by overload):
 *   number bounds: clamp with both bounds, clamp_min and clamp_max give
 *     all-NaN when a bound is NaN; clamp with one bound compares
 *     (x < min ? min : x, max < x ? max : x), so a NaN bound leaves x and a
 *     NaN x stays NaN;
 *   tensor bounds: a NaN bound gives NaN where it is used, and a NaN x
 *     stays NaN (maximum/minimum semantics).
 * Integer bounds that the dtype cannot hold are refused as PyTorch's
 * checked conversion does (-1 is allowed for uint8 and wraps to 255).
 */
#pragma GCC optimize("O3", "no-trapping-math", "no-math-errno")
#include "kernels/cpu/em_cpu.h"
#include "kernels/em_structured.h"

#include <math.h>
#include <stdio.h>

/* the bounds of the number overloads, in the compute type's terms */
typedef struct {
    double lo, hi;     /* floating compute */
    int64_t ilo, ihi;  /* integer compute (cast to the dtype, wrapping) */
} cl_ctx;

#define CL_BOUND(CT, d, i) _Generic((CT)0, float: (float)(d), double: (d), default: (CT)(i))

/* number bounds: MODE 0 both, 1 min only, 2 max only */
#define CL_MIN_MAX(a, lo, hi) ((hi) < ((a) < (lo) ? (lo) : (a)) ? (hi) : ((a) < (lo) ? (lo) : (a)))
#define CL_MIN(a, lo, hi) ((a) < (lo) ? (lo) : (a))
#define CL_MAX(a, lo, hi) ((hi) < (a) ? (hi) : (a))

#define CL_SCALAR_FN(FN, T, CT, LD, ST, EXPR, ATTR)                                        \
    ATTR static void FN(char **d, const int64_t *s, int64_t n, void *ctx) {                \
        const cl_ctx *c = ctx;                                                             \
        const CT lo = CL_BOUND(CT, c->lo, c->ilo), hi = CL_BOUND(CT, c->hi, c->ihi);       \
        (void)lo;                                                                          \
        (void)hi;                                                                          \
        if (s[0] == (int64_t)sizeof(T) && s[1] == (int64_t)sizeof(T)) {                    \
            T *restrict op = (T *)d[0];                                                    \
            const T *restrict ap = (const T *)d[1];                                        \
            for (int64_t i = 0; i < n; i++) {                                              \
                CT a = LD(ap[i]);                                                          \
                op[i] = ST(EXPR(a, lo, hi));                                               \
            }                                                                              \
        } else {                                                                           \
            for (int64_t i = 0; i < n; i++) {                                              \
                CT a = LD(*(const T *)(d[1] + i * s[1]));                                  \
                *(T *)(d[0] + i * s[0]) = ST(EXPR(a, lo, hi));                             \
            }                                                                              \
        }                                                                                  \
    }

/* tensor bounds: NaN-propagating max/min (floating), plain ones otherwise */
#define CL_ISNAN(x) _Generic((x), float: (x) != (x), double: (x) != (x), default: false)
#define CL_TMAX(a, b) (CL_ISNAN(a) || CL_ISNAN(b) ? (a) + (b) : (a) < (b) ? (b) : (a))
#define CL_TMIN(a, b) (CL_ISNAN(a) || CL_ISNAN(b) ? (a) + (b) : (b) < (a) ? (b) : (a))
/* both bounds: NaN where a bound is NaN, else min(max(a, lo), hi) as std::min/max */
#define CL_TBOTH(a, lo, hi) (CL_ISNAN(lo) || CL_ISNAN(hi) ? (lo) + (hi) : CL_MIN_MAX(a, lo, hi))

#define CL_TENSOR2_FN(FN, T, CT, LD, ST, EXPR)                                             \
    static void FN(char **d, const int64_t *s, int64_t n, void *ctx) {                     \
        (void)ctx;                                                                         \
        for (int64_t i = 0; i < n; i++) {                                                  \
            CT a = LD(*(const T *)(d[1] + i * s[1])), b = LD(*(const T *)(d[2] + i * s[2])); \
            *(T *)(d[0] + i * s[0]) = ST(EXPR(a, b));                                      \
        }                                                                                  \
    }
#define CL_TENSOR3_FN(FN, T, CT, LD, ST)                                                   \
    static void FN(char **d, const int64_t *s, int64_t n, void *ctx) {                     \
        (void)ctx;                                                                         \
        for (int64_t i = 0; i < n; i++) {                                                  \
            CT a = LD(*(const T *)(d[1] + i * s[1])), lo = LD(*(const T *)(d[2] + i * s[2])); \
            CT hi = LD(*(const T *)(d[3] + i * s[3]));                                     \
            *(T *)(d[0] + i * s[0]) = ST(CL_TBOTH(a, lo, hi));                             \
        }                                                                                  \
    }

/* loads keeping the element type (integers compare in their own type) */
#define CL_LD_b(x) (x)
#define CL_LD_u8(x) (x)
#define CL_LD_i8(x) (x)
#define CL_LD_i32(x) (x)
#define CL_LD_i64(x) (x)
#define CL_LD_f16(x) em_half_to_float(x)
#define CL_LD_bf16(x) em_bf16_to_float(x)
#define CL_LD_f32(x) (x)
#define CL_LD_f64(x) (x)
#define CL_ST_b(v) (v)
#define CL_ST_u8(v) (v)
#define CL_ST_i8(v) (v)
#define CL_ST_i32(v) (v)
#define CL_ST_i64(v) (v)
#define CL_ST_f16(v) em_float_to_half(v)
#define CL_ST_bf16(v) em_float_to_bf16(v)
#define CL_ST_f32(v) (v)
#define CL_ST_f64(v) (v)

/* X(short name, C type, compute type) of the dtypes with clamp loops */
#define CL_TYPES(X)                                                                         \
    X(u8, uint8_t, uint8_t) X(i8, int8_t, int8_t) X(i32, int32_t, int32_t)                  \
    X(i64, int64_t, int64_t) X(f16, em_half, float) X(bf16, em_bfloat16, float)             \
    X(f32, float, float) X(f64, double, double)

#define X_SCALAR(N, T, CT)                                                                  \
    CL_SCALAR_FN(both_##N, T, CT, CL_LD_##N, CL_ST_##N, CL_MIN_MAX, CLONE_##N)              \
    CL_SCALAR_FN(min_##N, T, CT, CL_LD_##N, CL_ST_##N, CL_MIN, CLONE_##N)                   \
    CL_SCALAR_FN(max_##N, T, CT, CL_LD_##N, CL_ST_##N, CL_MAX, CLONE_##N)                   \
    CL_TENSOR2_FN(tmin_##N, T, CT, CL_LD_##N, CL_ST_##N, CL_TMAX)                           \
    CL_TENSOR2_FN(tmax_##N, T, CT, CL_LD_##N, CL_ST_##N, CL_TMIN)                           \
    CL_TENSOR3_FN(tboth_##N, T, CT, CL_LD_##N, CL_ST_##N)
CL_TYPES(X_SCALAR)
#undef X_SCALAR
/* bool: tensor bounds only (number bounds promote bool to int64 or are refused) */
CL_TENSOR2_FN(tmin_b, bool, bool, CL_LD_b, CL_ST_b, CL_TMAX)
CL_TENSOR2_FN(tmax_b, bool, bool, CL_LD_b, CL_ST_b, CL_TMIN)
CL_TENSOR3_FN(tboth_b, bool, bool, CL_LD_b, CL_ST_b)

#define CL_TABLE(P) { NULL, P##_u8, P##_i8, P##_i32, P##_i64, P##_f16, P##_bf16, P##_f32, P##_f64 }
#define CL_TABLE_B(P) { P##_b, P##_u8, P##_i8, P##_i32, P##_i64, P##_f16, P##_bf16, P##_f32, P##_f64 }
enum { CL_BOTH, CL_LO, CL_HI };
static const em_cpu_loop scalar_loops[3][EM_DTYPE_COUNT] = { CL_TABLE(both), CL_TABLE(min), CL_TABLE(max) };
static const em_cpu_loop tensor_loops[3][EM_DTYPE_COUNT] = { CL_TABLE_B(tboth), CL_TABLE_B(tmin), CL_TABLE_B(tmax) };

/* ---- number bounds ---- */

static bool is_nan_scalar(const em_scalar *s) { return s && s->kind == EM_SCALAR_FLOAT && isnan(s->v.d); }

static em_status bound_fits(const em_meta *m, const em_scalar *s) {
    if (!s || !em_cpu_scalar_overflows(*s, m->compute)) return EM_OK;
    char num[64];
    if (s->kind == EM_SCALAR_FLOAT) snprintf(num, sizeof num, "%.10g", s->v.d);
    else snprintf(num, sizeof num, "%lld", (long long)s->v.i);
    return em_set_error(EM_EVALUE, "%s: bound %s cannot be converted to type %s without overflow", m->op, num,
                        em_dtype_name(m->compute));
}

/* nan_fills: a NaN bound makes the result all NaN (clamp with both bounds,
 * clamp_min, clamp_max); otherwise the one-bound clamp keeps x. */
static em_status clamp_scalar(const em_meta *m, em_tensor *self, const em_scalar *min, const em_scalar *max,
                              bool nan_fills, em_tensor *out) {
    if (bound_fits(m, min) != EM_OK || bound_fits(m, max) != EM_OK) return em_error_kind();
    if (nan_fills && (is_nan_scalar(min) || is_nan_scalar(max))) {
        em_tensor *r = em_cpu_fill_scalar_(out, em_scalar_float(NAN), m->op);
        if (!r) return em_error_kind();
        em_tensor_release(r);
        return EM_OK;
    }
    cl_ctx c = { min ? em_scalar_to_double(*min) : 0, max ? em_scalar_to_double(*max) : 0,
                 min ? em_scalar_to_int(*min) : 0, max ? em_scalar_to_int(*max) : 0 };
    int mode = min && max ? CL_BOTH : min ? CL_LO : CL_HI;
    return em_cpu_unary_run(m, scalar_loops[mode][m->compute], self, out, &c, EM_CPU_GRAIN);
}

em_status em_cpu_clamp_impl(em_keyset ks, const em_meta *m, em_tensor *self, const em_scalar *min,
                            const em_scalar *max, em_tensor *out) {
    (void)ks;
    return clamp_scalar(m, self, min, max, min && max, out);
}
em_status em_cpu_clamp_min_impl(em_keyset ks, const em_meta *m, em_tensor *self, em_scalar min, em_tensor *out) {
    (void)ks;
    return clamp_scalar(m, self, &min, NULL, true, out);
}
em_status em_cpu_clamp_max_impl(em_keyset ks, const em_meta *m, em_tensor *self, em_scalar max, em_tensor *out) {
    (void)ks;
    return clamp_scalar(m, self, NULL, &max, true, out);
}

/* ---- tensor bounds ---- */

/* out (m's shape, a dtype m->dtype casts to) = clamp of self by the given
 * bounds, all broadcast; inputs sharing out's memory are copied first. */
static em_status clamp_tensor(const em_meta *m, em_tensor *self, em_tensor *min, em_tensor *max, em_tensor *out) {
    if (out->dtype != m->dtype) {
        em_tensor *tmp = em_tensor_new(m->ndim, m->sizes, m->dtype, out->device);
        if (!tmp) return em_error_kind();
        em_status st = clamp_tensor(m, self, min, max, tmp);
        if (st == EM_OK) st = em_cpu_copy_into(out, tmp, m->op);
        em_tensor_release(tmp);
        return st;
    }
    em_tensor *in[3], *hold[3] = { NULL, NULL, NULL };
    int nin = 0;
    in[nin++] = self;
    if (min) in[nin++] = min;
    if (max) in[nin++] = max;
    em_status st = EM_OK;
    for (int k = 0; k < nin; k++) {
        em_tensor *t = in[k];
        /* out itself (in place) is read before it is written, element by element */
        if (t->storage != out->storage || t->numel == 0 || t == out) continue;
        hold[k] = em_cpu_to_dtype(t, t->dtype, m->op);
        if (!hold[k]) {
            st = em_error_kind();
            break;
        }
        in[k] = hold[k];
    }
    if (st == EM_OK) {
        int mode = min && max ? CL_BOTH : min ? CL_LO : CL_HI;
        em_cpu_iter it;
        em_tensor *r = em_cpu_iter_build(&it, out, m->dtype, nin, in, m->compute, m->op);
        if (r) em_cpu_iter_run(&it, tensor_loops[mode][m->compute], NULL, EM_CPU_GRAIN);
        em_cpu_iter_done(&it);
        if (!r) st = em_error_kind();
        em_tensor_release(r);
    }
    for (int k = 0; k < 3; k++) em_tensor_release(hold[k]);
    return st;
}

em_status em_cpu_clamp_tensor_impl(em_keyset ks, const em_meta *m, em_tensor *self, em_tensor *min, em_tensor *max,
                                   em_tensor *out) {
    (void)ks;
    return clamp_tensor(m, self, min, max, out);
}
em_status em_cpu_clamp_min_tensor_impl(em_keyset ks, const em_meta *m, em_tensor *self, em_tensor *min,
                                       em_tensor *out) {
    (void)ks;
    return clamp_tensor(m, self, min, NULL, out);
}
em_status em_cpu_clamp_max_tensor_impl(em_keyset ks, const em_meta *m, em_tensor *self, em_tensor *max,
                                       em_tensor *out) {
    (void)ks;
    return clamp_tensor(m, self, NULL, max, out);
}
