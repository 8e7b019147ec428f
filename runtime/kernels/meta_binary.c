/* meta_binary.c -- the meta functions of the binary family's structured ops
 * (schema/ops/binary.yaml): their dtype rules, broadcast shape and device,
 * once for every backend and for the functional, in-place and out=
 * variants (Note [Structured kernels] in em_structured.h). Errors name
 * m->op. The kernels are kernels/cpu/binary_math.c.
 */
#include "kernels/em_structured.h"
#include "em_kernels_decl.h"

#include <string.h>

/* What a binary op computes in, from the common dtype of its operands. */
typedef enum {
    BK_ANY,       /* every dtype, in the common dtype (maximum ...) */
    BK_NOBOOL,    /* every dtype but bool (fmod, div with a rounding mode) */
    BK_FLOAT,     /* integers and bool compute in float32 (atan2, copysign, xlogy) */
    BK_FLOATONLY, /* floating dtypes only (hypot) */
    BK_LOGIC,     /* any dtypes, bool result (logical_and ...) */
    BK_BITS,      /* bool and integer dtypes (bitwise_and ...) */
    BK_SHIFT      /* integer dtypes (the shifts) */
} bin_kind;

/* "op: not supported for dtype D (what)": what names the operands whose
 * dtype it is */
static em_status bad_dtype(const em_meta *m, em_dtype dt, const char *what) {
    return em_set_error(EM_ETYPE, "%s: not supported for dtype %s (%s)", m->op, em_dtype_name(dt), what);
}

/* The broadcast shape of n tensors into m, and the device of the first
 * one that is not a wrapped number (numbers from Lua live on the CPU). */
static em_status meta_shape(em_meta *m, int n, em_tensor *const *t) {
    int nd = t[0]->ndim;
    memcpy(m->sizes, t[0]->sizes, sizeof(int64_t) * (size_t)nd);
    for (int i = 1; i < n; i++) {
        nd = em_broadcast_shapes(nd, m->sizes, t[i]->ndim, t[i]->sizes, m->sizes, m->op);
        if (nd < 0) return em_error_kind();
    }
    m->ndim = nd;
    m->device = t[0]->device;
    for (int i = 0; i < n; i++)
        if (!t[i]->wrapped_number) {
            m->device = t[i]->device;
            break;
        }
    return EM_OK;
}

/* The common dtype of self and other, checked against kind; fills m. */
static em_status meta_binary(em_meta *m, em_tensor *self, em_tensor *other, bin_kind kind) {
    em_dtype dt = self->dtype == other->dtype ? self->dtype : em_result_type2(self, other);
    bool fl = em_dtype_is_floating(dt);
    switch (kind) {
    case BK_ANY: case BK_LOGIC: break;
    case BK_NOBOOL: if (dt == EM_BOOL) return bad_dtype(m, dt, "the common dtype of self and other"); break;
    case BK_FLOAT: if (!fl) dt = EM_FLOAT32; break;
    case BK_FLOATONLY: if (!fl) return bad_dtype(m, dt, "the common dtype of self and other"); break;
    case BK_BITS: if (fl) return bad_dtype(m, dt, "the common dtype of self and other"); break;
    case BK_SHIFT: if (fl || dt == EM_BOOL) return bad_dtype(m, dt, "the common dtype of self and other"); break;
    }
    em_tensor *t[2] = { self, other };
    em_status st = meta_shape(m, 2, t);
    if (st != EM_OK) return st;
    m->compute = dt;
    m->dtype = kind == BK_LOGIC ? EM_BOOL : dt;
    return EM_OK;
}

#define META2(NAME, KIND)                                                      \
    em_status em_meta_##NAME(em_meta *m, em_tensor *self, em_tensor *other) { \
        return meta_binary(m, self, other, KIND);                              \
    }
META2(maximum, BK_ANY)
META2(minimum, BK_ANY)
META2(fmax, BK_ANY)
META2(fmin, BK_ANY)
META2(atan2, BK_FLOAT)
META2(fmod, BK_NOBOOL)
META2(hypot, BK_FLOATONLY)
META2(copysign, BK_FLOAT)
META2(xlogy, BK_FLOAT)
META2(logical_and, BK_LOGIC)
META2(logical_or, BK_LOGIC)
META2(logical_xor, BK_LOGIC)
META2(bitwise_and, BK_BITS)
META2(bitwise_or, BK_BITS)
META2(bitwise_xor, BK_BITS)
META2(bitwise_left_shift, BK_SHIFT)
META2(bitwise_right_shift, BK_SHIFT)
#undef META2

/* div with rounding_mode "trunc" or "floor" (the binding has refused any
 * other value): the common dtype, integers staying integers. */
em_status em_meta_div_mode(em_meta *m, em_tensor *self, em_tensor *other, const char *rounding_mode) {
    (void)rounding_mode;
    return meta_binary(m, self, other, BK_NOBOOL);
}

/* ---- ternary ---- */

/* PyTorch's lerp: floating self, end and a tensor weight of self's dtype
 * (a number weight is converted); all three broadcast. */
em_status em_meta_lerp(em_meta *m, em_tensor *self, em_tensor *end, em_tensor *weight) {
    if (!em_dtype_is_floating(self->dtype)) return bad_dtype(m, self->dtype, "self");
    if (end->dtype != self->dtype)
        return em_set_error(EM_ETYPE, "%s: expected dtype %s for argument 'end' but got dtype %s", m->op,
                            em_dtype_name(self->dtype), em_dtype_name(end->dtype));
    if (!weight->wrapped_number && weight->dtype != self->dtype)
        return em_set_error(EM_ETYPE, "%s: expected dtype %s for argument 'weight' but got dtype %s", m->op,
                            em_dtype_name(self->dtype), em_dtype_name(weight->dtype));
    em_tensor *t[3] = { self, end, weight };
    em_status st = meta_shape(m, 3, t);
    if (st != EM_OK) return st;
    m->dtype = m->compute = self->dtype;
    return EM_OK;
}

/* addcmul/addcdiv: the common dtype of the three tensors (value is cast to
 * it, as in PyTorch); addcdiv refuses two integer (or bool) divisors. */
static em_status meta_addc(em_meta *m, em_tensor *self, em_tensor *t1, em_tensor *t2, bool div) {
    if (div && !em_dtype_is_floating(t1->dtype) && !em_dtype_is_floating(t2->dtype))
        return em_set_error(EM_ETYPE, "%s: integer division of tensor1 (%s) by tensor2 (%s) is not supported; "
                                      "use (self + value * tensor1 / tensor2) for a true division", m->op,
                            em_dtype_name(t1->dtype), em_dtype_name(t2->dtype));
    em_tensor *t[3] = { self, t1, t2 };
    em_dtype dt = em_result_type_n(3, (const em_tensor *const *)t);
    if (dt == EM_BOOL) return bad_dtype(m, dt, "the common dtype of self, tensor1 and tensor2");
    em_status st = meta_shape(m, 3, t);
    if (st != EM_OK) return st;
    m->dtype = m->compute = dt;
    return EM_OK;
}
em_status em_meta_addcmul(em_meta *m, em_tensor *self, em_tensor *tensor1, em_tensor *tensor2, em_scalar value) {
    (void)value;
    return meta_addc(m, self, tensor1, tensor2, false);
}
em_status em_meta_addcdiv(em_meta *m, em_tensor *self, em_tensor *tensor1, em_tensor *tensor2, em_scalar value) {
    (void)value;
    return meta_addc(m, self, tensor1, tensor2, true);
}
