/* structured.c -- the checks and allocation every generated structured
 * wrapper runs (Note [Structured kernels] in em_structured.h). */
#include "kernels/em_structured.h"

#include <string.h>

bool em_structured_can_cast(em_dtype from, em_dtype to) {
    int cf = from == EM_BOOL ? 0 : em_dtype_is_floating(from) ? 2 : 1;
    int ct = to == EM_BOOL ? 0 : em_dtype_is_floating(to) ? 2 : 1;
    return cf <= ct;
}

static bool same_shape(const em_meta *m, const em_tensor *t) {
    return t->ndim == m->ndim && memcmp(t->sizes, m->sizes, sizeof(int64_t) * (size_t)m->ndim) == 0;
}

static em_status cast_error(const em_meta *m, em_dtype to) {
    return em_set_error(EM_ETYPE, "%s: result type %s can't be cast to the desired output type %s", m->op,
                        em_dtype_name(m->dtype), em_dtype_name(to));
}

static em_status overlaps(const em_meta *m, em_tensor *out, em_tensor *const *in, int n) {
    if (em_core_check_no_internal_overlap(out, m->op) != EM_OK) return em_error_kind();
    for (int i = 0; i < n; i++)
        if (in[i] && em_core_check_no_partial_overlap(out, in[i], m->op) != EM_OK) return em_error_kind();
    return EM_OK;
}

em_status em_structured_check_inplace(const em_meta *m, em_tensor *self, em_tensor *const *in, int n) {
    if (!same_shape(m, self)) {
        char b1[EM_SHAPE_STR_MAX], b2[EM_SHAPE_STR_MAX];
        return em_set_error(EM_ESHAPE, "%s: output with shape %s doesn't match the broadcast shape %s", m->op,
                            em_shape_str(self->ndim, self->sizes, b1, sizeof b1),
                            em_shape_str(m->ndim, m->sizes, b2, sizeof b2));
    }
    if (!em_structured_can_cast(m->dtype, self->dtype)) return cast_error(m, self->dtype);
    return overlaps(m, self, in, n);
}

/* PyTorch's resize_ of an out= tensor (Note [out= resizing]): m's sizes,
 * contiguous strides from out's storage offset; the storage grows (its
 * old bytes copied, every tensor sharing it sees the new block) when it
 * is too small. */
static em_status resize_out(const em_meta *m, em_tensor *out) {
    int64_t numel = 1;
    for (int d = 0; d < m->ndim; d++) numel *= m->sizes[d];
    size_t need = (size_t)(out->offset + numel) * em_dtype_size(out->dtype);
    em_storage *st = out->storage;
    if (need > st->nbytes) {
        char b1[EM_SHAPE_STR_MAX], b2[EM_SHAPE_STR_MAX];
        if (!st->allocator || out->device.type != EM_CPU)
            return em_set_error(EM_EVALUE, "%s: out= tensor with shape %s cannot grow to the result's shape %s (its "
                                           "memory is %s)", m->op,
                                em_shape_str(out->ndim, out->sizes, b1, sizeof b1),
                                em_shape_str(m->ndim, m->sizes, b2, sizeof b2),
                                st->allocator ? "not on the cpu" : "borrowed");
        if (em_storage_grow(st, need) != EM_OK)
            return em_set_error(EM_ENOMEM, "%s: out of memory resizing out= to %zu bytes", m->op, need);
    }
    return em_tensor_set_shape(out, m->ndim, m->sizes, NULL);
}

em_status em_structured_check_out(const em_meta *m, em_tensor *out, em_tensor *const *in, int n) {
    if (out->device.type != m->device.type || out->device.index != m->device.index)
        return em_set_error(EM_EVALUE, "%s: expected the out= tensor on device %s, but it is on %s", m->op,
                            em_device_name(m->device), em_device_name(out->device));
    if (m->out_dtype == EM_META_OUT_EXACT && out->dtype != m->dtype)
        return em_set_error(EM_ETYPE, "%s: expected the out= tensor to have dtype %s, but it has %s", m->op,
                            em_dtype_name(m->dtype), em_dtype_name(out->dtype));
    if (m->out_dtype == EM_META_OUT_CAST && !em_structured_can_cast(m->dtype, out->dtype))
        return cast_error(m, out->dtype);
    /* overlap is judged on out as given, before resizing (as PyTorch's
     * TensorIterator does): an empty out overlaps nothing */
    if (overlaps(m, out, in, n) != EM_OK) return em_error_kind();
    if (!same_shape(m, out) && resize_out(m, out) != EM_OK) return em_error_kind();
    return EM_OK;
}
