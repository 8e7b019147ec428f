/* meta.c -- the meta functions of the structured op families: the
 * argument checks and the result's shape, dtype and device, computed once
 * for every backend and for the functional, in-place and out= variants
 * (Note [Structured kernels] in em_structured.h). Errors name m->op. */
#include "kernels/em_structured.h"
#include "em_kernels_decl.h"

#include <string.h>

/* the device of an elementwise result: the first operand that is not a
 * wrapped number (numbers from Lua live on the CPU) */
static em_device device2(const em_tensor *a, const em_tensor *b) {
    return a->wrapped_number && !b->wrapped_number ? b->device : a->device;
}

/* ---- elementwise binary: add sub mul div ---- */

enum { MB_ALPHA = 1, MB_FLOAT = 2, MB_SUB = 4 };

/* The binary family's checks (PyTorch's refusals of bool subtraction and of
 * alphas the result dtype cannot hold), the common dtype (float32 for
 * integer operands of MB_FLOAT ops) and the broadcast shape. */
static em_status meta_binary(em_meta *m, const em_tensor *a, const em_tensor *b, em_scalar alpha, int flags) {
    /* one dtype promotes to itself (wrapped numbers included): the hot case
     * skips the category walk of em_result_type2 */
    em_dtype compute = a->dtype == b->dtype ? a->dtype : em_result_type2(a, b);
    if ((flags & MB_FLOAT) && !em_dtype_is_floating(compute)) compute = EM_FLOAT32;
    if ((flags & MB_SUB) && (a->dtype == EM_BOOL || b->dtype == EM_BOOL))
        return em_set_error(EM_ETYPE, "%s: subtraction, the `-` operator, with a bool tensor is not supported; "
                                      "to invert a mask use logical_not()", m->op);
    if (flags & MB_ALPHA) {
        if (alpha.kind == EM_SCALAR_FLOAT && !em_dtype_is_floating(compute))
            return em_set_error(EM_ETYPE, "%s: for integral input tensors, argument alpha must not be a floating "
                                          "point number", m->op);
        if (alpha.kind == EM_SCALAR_BOOL && compute != EM_BOOL)
            return em_set_error(EM_ETYPE, "%s: a boolean alpha is only supported for bool results", m->op);
    }
    int nd;
    bool same = a->ndim == b->ndim;
    for (int d = 0; same && d < a->ndim; d++) same = a->sizes[d] == b->sizes[d]; /* no memcmp call: mostly 0-2 dims */
    if (same) {
        nd = a->ndim; /* the common case, without the general broadcast */
        memcpy(m->sizes, a->sizes, sizeof(int64_t) * (size_t)nd);
    } else if (a->ndim == 0 || b->ndim == 0) {
        const em_tensor *t = a->ndim ? a : b; /* a 0-dim operand (y * 0.999) takes the other's shape */
        nd = t->ndim;
        memcpy(m->sizes, t->sizes, sizeof(int64_t) * (size_t)nd);
    } else {
        nd = em_broadcast_shapes(a->ndim, a->sizes, b->ndim, b->sizes, m->sizes, m->op);
        if (nd < 0) return em_error_kind();
    }
    m->ndim = nd;
    m->dtype = compute;
    m->compute = compute;
    m->device = device2(a, b);
    return EM_OK;
}

em_status em_meta_add(em_meta *m, em_tensor *self, em_tensor *other, em_scalar alpha) {
    return meta_binary(m, self, other, alpha, MB_ALPHA);
}
em_status em_meta_sub(em_meta *m, em_tensor *self, em_tensor *other, em_scalar alpha) {
    return meta_binary(m, self, other, alpha, MB_ALPHA | MB_SUB);
}
em_status em_meta_mul(em_meta *m, em_tensor *self, em_tensor *other) {
    return meta_binary(m, self, other, em_scalar_int(1), 0);
}
em_status em_meta_div(em_meta *m, em_tensor *self, em_tensor *other) {
    return meta_binary(m, self, other, em_scalar_int(1), MB_FLOAT);
}

/* ---- sum ---- */

/* PyTorch's sum: bool and integers sum as int64, floats keep their dtype,
 * dtype overrides (an out= tensor's dtype does when dtype is absent); dims wrap (1-based in messages) and may not repeat; no
 * dim (or an empty list, or a 0-dim input) reduces every dim. */
em_status em_meta_sum(em_meta *m, em_tensor *self, em_intlist dim, bool keepdim, em_dtype dtype) {
    if (dtype != EM_DTYPE_NONE && (dtype < 0 || dtype >= EM_DTYPE_COUNT))
        return em_set_error(EM_ETYPE, "%s: bad dtype %d", m->op, (int)dtype);
    int nd = self->ndim;
    bool red[EM_MAX_DIMS] = { false };
    if (dim.n <= 0 || nd == 0) {
        for (int i = 0; i < dim.n; i++)
            if (em_wrap_dim(dim.data[i], nd, m->op) < 0) return EM_EINDEX;
        for (int d = 0; d < nd; d++) red[d] = true;
    } else {
        for (int i = 0; i < dim.n; i++) {
            int d = em_wrap_dim(dim.data[i], nd, m->op);
            if (d < 0) return EM_EINDEX;
            if (red[d])
                return em_set_error(EM_EVALUE, "%s: dim %d appears multiple times in the list of dims", m->op,
                                    d + 1);
            red[d] = true;
        }
    }
    m->ndim = 0;
    for (int d = 0; d < nd; d++)
        if (!red[d]) m->sizes[m->ndim++] = self->sizes[d];
        else if (keepdim) m->sizes[m->ndim++] = 1;
    m->dtype = dtype != EM_DTYPE_NONE ? dtype : em_dtype_is_floating(self->dtype) ? self->dtype : EM_INT64;
    /* PyTorch: without dtype the sum is computed in out's dtype, whatever it
     * is; with one, out must have it */
    m->out_dtype = dtype != EM_DTYPE_NONE ? EM_META_OUT_EXACT : EM_META_OUT_ANY;
    m->compute = m->dtype;
    m->device = self->device;
    return EM_OK;
}

/* ---- matmul ---- */

/* NumPy's matmul shapes: a 1-d left operand is a row, a 1-d right one a
 * column (both dropped from the result); batch dims broadcast. Both
 * operands have one dtype; bool only when no product has to run. */
em_status em_meta_matmul(em_meta *m, em_tensor *self, em_tensor *other) {
    const em_tensor *a = self, *b = other;
    int da = a->ndim, db = b->ndim;
    if (da == 0 || db == 0)
        return em_set_error(EM_ESHAPE, "%s: both arguments need at least 1 dim, got %d-d and %d-d", m->op, da, db);
    if (a->dtype != b->dtype)
        return em_set_error(EM_ETYPE, "%s: expected both tensors to have the same dtype, got %s and %s", m->op,
                            em_dtype_name(a->dtype), em_dtype_name(b->dtype));
    int64_t M = da >= 2 ? a->sizes[da - 2] : 1, K = a->sizes[da - 1];
    int64_t K2 = db >= 2 ? b->sizes[db - 2] : b->sizes[0], N = db >= 2 ? b->sizes[db - 1] : 1;
    if (K != K2) {
        char b1[EM_SHAPE_STR_MAX], b2[EM_SHAPE_STR_MAX];
        return em_set_error(EM_ESHAPE, "%s: shapes %s and %s cannot be multiplied (%lld != %lld)", m->op,
                            em_shape_str(a->ndim, a->sizes, b1, sizeof b1),
                            em_shape_str(b->ndim, b->sizes, b2, sizeof b2), (long long)K, (long long)K2);
    }
    int nba = da > 2 ? da - 2 : 0, nbb = db > 2 ? db - 2 : 0;
    int64_t bshape[EM_MAX_DIMS];
    int nb = em_broadcast_shapes(nba, a->sizes, nbb, b->sizes, bshape, m->op);
    if (nb < 0) return em_error_kind();
    int ond = nb + (da >= 2) + (db >= 2);
    if (ond > EM_MAX_DIMS) return em_set_error(EM_ESHAPE, "%s: too many dims", m->op);
    m->ndim = 0;
    for (int d = 0; d < nb; d++) m->sizes[m->ndim++] = bshape[d];
    if (da >= 2) m->sizes[m->ndim++] = M;
    if (db >= 2) m->sizes[m->ndim++] = N;
    if (a->dtype == EM_BOOL) {
        int64_t n = 1;
        for (int d = 0; d < m->ndim; d++) n *= m->sizes[d];
        if ((da == 1 && db == 1) || (n != 0 && K != 0))
            return em_set_error(EM_ETYPE, "%s: not supported for dtype bool", m->op);
    }
    m->dtype = a->dtype;
    m->compute = a->dtype;
    m->device = a->device;
    m->out_dtype = EM_META_OUT_EXACT; /* PyTorch: matmul's out has the operands' dtype */
    return EM_OK;
}
