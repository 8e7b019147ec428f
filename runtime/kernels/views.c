/* views.c -- the Default-key view kernels (em_kv_*): thin wrappers over
 * core's view functions, shared by every backend.
 */
#include "cpu/em_cpu.h"

em_tensor *em_kv_view(em_keyset ks, em_tensor *self, em_intlist size) {
    (void)ks;
    return em_core_view(self, size.n < 0 ? 0 : size.n, size.data, "view");
}

em_tensor *em_kv_reshape(em_keyset ks, em_tensor *self, em_intlist shape) {
    (void)ks;
    return em_core_reshape(self, shape.n < 0 ? 0 : shape.n, shape.data);
}

em_tensor *em_kv_transpose(em_keyset ks, em_tensor *self, int64_t dim0, int64_t dim1) {
    (void)ks;
    return em_core_transpose(self, dim0, dim1);
}

em_tensor *em_kv_t(em_keyset ks, em_tensor *self) {
    (void)ks;
    if (self->ndim > 2) {
        em_set_error(EM_ESHAPE, "t: expects a tensor with <= 2 dims, but self is %d-d", self->ndim);
        return NULL;
    }
    if (self->ndim < 2) return em_core_alias_view(self);
    return em_core_transpose(self, 0, 1);
}

em_tensor *em_kv_permute(em_keyset ks, em_tensor *self, em_intlist dims) {
    (void)ks;
    return em_core_permute(self, dims.n < 0 ? 0 : dims.n, dims.data);
}

em_tensor *em_kv_expand(em_keyset ks, em_tensor *self, em_intlist size) {
    (void)ks;
    return em_core_expand(self, size.n < 0 ? 0 : size.n, size.data);
}

em_tensor *em_kv_narrow(em_keyset ks, em_tensor *self, int64_t dim, int64_t start, int64_t length) {
    (void)ks;
    return em_core_narrow(self, dim, start, length);
}

em_tensor *em_kv_select(em_keyset ks, em_tensor *self, int64_t dim, int64_t index) {
    (void)ks;
    return em_core_select(self, dim, index);
}

/* start NULL: from the beginning; end NULL: to the end (core clamps). */
em_tensor *em_kv_slice(em_keyset ks, em_tensor *self, int64_t dim, const int64_t *start, const int64_t *end,
                       int64_t step) {
    (void)ks;
    return em_core_slice(self, dim, start ? *start : 0, end ? *end : INT64_MAX, step);
}

em_tensor *em_kv_squeeze(em_keyset ks, em_tensor *self, const int64_t *dim) {
    (void)ks;
    return em_core_squeeze(self, dim);
}

em_tensor *em_kv_unsqueeze(em_keyset ks, em_tensor *self, int64_t dim) {
    (void)ks;
    return em_core_unsqueeze(self, dim);
}

/* storage_offset NULL: self's own offset. */
em_tensor *em_kv_as_strided(em_keyset ks, em_tensor *self, em_intlist size, em_intlist stride,
                            const int64_t *storage_offset) {
    (void)ks;
    if (size.n != stride.n) {
        em_set_error(EM_ESHAPE, "as_strided: size has %d entries but stride has %d", size.n, stride.n);
        return NULL;
    }
    return em_core_as_strided(self, size.n, size.data, stride.data,
                              storage_offset ? *storage_offset : self->offset);
}
