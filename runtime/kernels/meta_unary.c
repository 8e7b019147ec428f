/* meta_unary.c -- the meta functions of the unary family (schema/ops/unary.yaml):
 * the result's shape, dtype and device of sin, floor, clamp, ... for every
 * backend and for the functional, in-place and out= variants
 * (Note [Structured kernels] in em_structured.h). Errors name m->op.
 *
 * Note [Unary dtypes]
 * m->dtype is the result's dtype, m->compute the dtype the impl's loop
 * reads (its input is cast to it by the iterator), as PyTorch 1.13:
 *   float ops (sin, rsqrt, reciprocal, ...): floating dtypes are kept,
 *     integers and bool give float32;
 *   floor ceil round trunc: every dtype kept (integers unchanged), bool
 *     refused; frac and round(decimals): floating dtypes only;
 *   square: bool gives int64; sgn, nan_to_num: every dtype kept;
 *   logical_not: bool result, computed from the input's own dtype;
 *   bitwise_not: bool and integers only;
 *   clamp: the promoted dtype of self and the bounds (a number bound
 *     promotes like a Lua number in a + b).
 * An out= tensor may have any dtype the result casts to for the float ops
 * and logical_not, exactly the result's dtype for the others (PyTorch's
 * "Found dtype Float but expected Int").
 */
#include "kernels/em_structured.h"
#include "em_kernels_decl.h"

#include <string.h>

typedef enum {
    UM_FLOAT,      /* floating kept, integers and bool -> float32 */
    UM_KEEP,       /* any dtype kept */
    UM_KEEP_NOBOOL,/* any dtype kept but bool */
    UM_FLOAT_ONLY, /* floating dtypes only */
    UM_SQUARE,     /* bool -> int64, others kept */
    UM_TO_BOOL,    /* bool result, computed in the input's dtype */
    UM_INTEGRAL    /* bool and integers only */
} um_kind;

/* Fills m with self's shape and device and the dtypes of kind k. */
static em_status meta_unary(em_meta *m, const em_tensor *self, um_kind k) {
    em_dtype dt = self->dtype, res = dt;
    bool fl = em_dtype_is_floating(dt);
    switch (k) {
    case UM_FLOAT: res = fl ? dt : EM_FLOAT32; break;
    case UM_KEEP: break;
    case UM_KEEP_NOBOOL:
        if (dt == EM_BOOL) return em_set_error(EM_ETYPE, "%s: not supported for dtype bool", m->op);
        break;
    case UM_FLOAT_ONLY:
        if (!fl)
            return em_set_error(EM_ETYPE, "%s: not supported for dtype %s (needs a floating dtype)", m->op,
                                em_dtype_name(dt));
        break;
    case UM_SQUARE: res = dt == EM_BOOL ? EM_INT64 : dt; break;
    case UM_TO_BOOL: res = EM_BOOL; break;
    case UM_INTEGRAL:
        if (fl)
            return em_set_error(EM_ETYPE, "%s: not supported for dtype %s (needs an integer or bool dtype)",
                                m->op, em_dtype_name(dt));
        break;
    }
    m->ndim = self->ndim;
    memcpy(m->sizes, self->sizes, sizeof(int64_t) * (size_t)self->ndim);
    m->dtype = res;
    /* square of bool computes in int64; logical_not reads its input as is */
    m->compute = k == UM_TO_BOOL ? dt : res;
    m->device = self->device;
    if (k != UM_FLOAT && k != UM_TO_BOOL) m->out_dtype = EM_META_OUT_EXACT;
    return EM_OK;
}

/* X(name, kind) for every one-argument op of the family. */
#define UM_META_OPS(X)                                                                      \
    X(rsqrt, UM_FLOAT) X(expm1, UM_FLOAT) X(log1p, UM_FLOAT) X(log2, UM_FLOAT)             \
    X(log10, UM_FLOAT) X(sin, UM_FLOAT) X(cos, UM_FLOAT) X(tan, UM_FLOAT) X(asin, UM_FLOAT) \
    X(acos, UM_FLOAT) X(atan, UM_FLOAT) X(sinh, UM_FLOAT) X(cosh, UM_FLOAT)                \
    X(asinh, UM_FLOAT) X(acosh, UM_FLOAT) X(atanh, UM_FLOAT) X(reciprocal, UM_FLOAT)       \
    X(deg2rad, UM_FLOAT) X(rad2deg, UM_FLOAT) X(square, UM_SQUARE) X(sgn, UM_KEEP)         \
    X(floor, UM_KEEP_NOBOOL) X(ceil, UM_KEEP_NOBOOL) X(round, UM_KEEP_NOBOOL)              \
    X(trunc, UM_KEEP_NOBOOL) X(frac, UM_FLOAT_ONLY)

#define X_META(name, kind) \
    em_status em_meta_##name(em_meta *m, em_tensor *self) { return meta_unary(m, self, kind); }
UM_META_OPS(X_META)
#undef X_META

em_status em_meta_round_decimals(em_meta *m, em_tensor *self, int64_t decimals) {
    (void)decimals;
    return meta_unary(m, self, UM_FLOAT_ONLY);
}
