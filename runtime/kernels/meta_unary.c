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
    X(trunc, UM_KEEP_NOBOOL) X(frac, UM_FLOAT_ONLY) X(logical_not, UM_TO_BOOL)         \
    X(bitwise_not, UM_INTEGRAL) X(erf, UM_FLOAT) X(erfc, UM_FLOAT) X(erfinv, UM_FLOAT)       \
    X(lgamma, UM_FLOAT) X(digamma, UM_FLOAT)

#define X_META(name, kind) \
    em_status em_meta_##name(em_meta *m, em_tensor *self) { return meta_unary(m, self, kind); }
UM_META_OPS(X_META)
#undef X_META

em_status em_meta_nan_to_num(em_meta *m, em_tensor *self, const em_scalar *nan, const em_scalar *posinf,
                             const em_scalar *neginf) {
    (void)nan, (void)posinf, (void)neginf;
    return meta_unary(m, self, UM_KEEP);
}

/* polygamma's order is PyTorch's n (a name the generated autograd code reserves) */
em_status em_meta_polygamma(em_meta *m, int64_t order, em_tensor *self) {
    if (order < 0)
        return em_set_error(EM_EVALUE, "%s: polygamma(n, x) does not support negative n (argument 'order', got %lld)",
                            m->op, (long long)order);
    return meta_unary(m, self, UM_FLOAT);
}

em_status em_meta_round_decimals(em_meta *m, em_tensor *self, int64_t decimals) {
    (void)decimals;
    return meta_unary(m, self, UM_FLOAT_ONLY);
}

/* ---- clamp ---- */

/* PyTorch's result type of self and the given bounds (a copy of core's
 * ResultTypeState for three operands, dtype.c): tensors with dims outrank
 * 0-dim tensors, which outrank numbers (wrapped numbers and Scalars), within
 * a category; a higher category (bool < integral < floating) always wins. */
typedef struct { em_dtype dim, zero, num; } rt_state;

static void rt_add(rt_state *st, em_dtype t, int ndim, bool number) {
    if (number) st->num = em_promote_types(st->num, em_dtype_is_floating(t) ? EM_FLOAT32 : t);
    else if (ndim == 0) st->zero = em_promote_types(st->zero, t);
    else st->dim = em_promote_types(st->dim, t);
}
static void rt_add_tensor(rt_state *st, const em_tensor *t) {
    if (t) rt_add(st, t->dtype, t->ndim, t->wrapped_number);
}
static em_dtype rt_combine(em_dtype higher, em_dtype lower) {
    if (em_dtype_is_floating(higher)) return higher;
    if (higher == EM_BOOL || em_dtype_is_floating(lower)) return em_promote_types(higher, lower);
    return higher != EM_DTYPE_NONE ? higher : lower;
}
static em_dtype rt_result(const rt_state *st) { return rt_combine(st->dim, rt_combine(st->zero, st->num)); }

/* clamp, clamp_min, clamp_max with number bounds: the promoted dtype
 * (bool refused, as PyTorch's clamp_scalar_cpu), an out= of exactly it. */
static em_status meta_clamp_scalar(em_meta *m, const em_tensor *self, const em_scalar *min, const em_scalar *max) {
    if (!min && !max)
        return em_set_error(EM_EVALUE, "%s: at least one of 'min' or 'max' must not be None", m->op);
    rt_state st = { EM_DTYPE_NONE, EM_DTYPE_NONE, EM_DTYPE_NONE };
    rt_add_tensor(&st, self);
    if (min) rt_add(&st, em_scalar_dtype(*min), 0, true);
    if (max) rt_add(&st, em_scalar_dtype(*max), 0, true);
    em_dtype dt = rt_result(&st);
    if (dt == EM_BOOL) return em_set_error(EM_ETYPE, "%s: not supported for dtype bool (bool bounds)", m->op);
    m->ndim = self->ndim;
    memcpy(m->sizes, self->sizes, sizeof(int64_t) * (size_t)self->ndim);
    m->dtype = m->compute = dt;
    m->device = self->device;
    m->out_dtype = EM_META_OUT_EXACT;
    return EM_OK;
}

em_status em_meta_clamp(em_meta *m, em_tensor *self, const em_scalar *min, const em_scalar *max) {
    return meta_clamp_scalar(m, self, min, max);
}
em_status em_meta_clamp_min(em_meta *m, em_tensor *self, em_scalar min) {
    return meta_clamp_scalar(m, self, &min, NULL);
}
em_status em_meta_clamp_max(em_meta *m, em_tensor *self, em_scalar max) {
    return meta_clamp_scalar(m, self, NULL, &max);
}

/* clamp and friends with tensor bounds: the broadcast shape and the
 * promoted dtype of the three, any out= dtype the result casts to. */
static em_status meta_clamp_tensor(em_meta *m, const em_tensor *self, const em_tensor *min, const em_tensor *max) {
    if (!min && !max)
        return em_set_error(EM_EVALUE, "%s: at least one of 'min' or 'max' must not be None", m->op);
    int nd = self->ndim;
    int64_t sz[EM_MAX_DIMS];
    memcpy(sz, self->sizes, sizeof(int64_t) * (size_t)nd);
    const em_tensor *b[2] = { min, max };
    for (int k = 0; k < 2; k++) {
        if (!b[k]) continue;
        nd = em_broadcast_shapes(nd, sz, b[k]->ndim, b[k]->sizes, m->sizes, m->op);
        if (nd < 0) return em_error_kind();
        memcpy(sz, m->sizes, sizeof(int64_t) * (size_t)nd);
    }
    rt_state st = { EM_DTYPE_NONE, EM_DTYPE_NONE, EM_DTYPE_NONE };
    rt_add_tensor(&st, self);
    rt_add_tensor(&st, min);
    rt_add_tensor(&st, max);
    m->ndim = nd;
    memcpy(m->sizes, sz, sizeof(int64_t) * (size_t)nd);
    m->dtype = m->compute = rt_result(&st);
    m->device = self->device;
    return EM_OK;
}

em_status em_meta_clamp_tensor(em_meta *m, em_tensor *self, em_tensor *min, em_tensor *max) {
    return meta_clamp_tensor(m, self, min, max);
}
em_status em_meta_clamp_min_tensor(em_meta *m, em_tensor *self, em_tensor *min) {
    return meta_clamp_tensor(m, self, min, NULL);
}
em_status em_meta_clamp_max_tensor(em_meta *m, em_tensor *self, em_tensor *max) {
    return meta_clamp_tensor(m, self, NULL, max);
}
