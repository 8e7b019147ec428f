/* views.c -- the Default-key view kernels (em_kv_*): thin wrappers over
 * core's view functions, shared by every backend. Each result records
 * whether grad mode was off when it was made (PyTorch's creation meta;
 * see Note [View history] in runtime/autograd/em_autograd.h).
 */
#include "kernels/cpu/em_cpu.h"
#include "dispatch/em_dispatch.h" /* em_disp_tls_keys: the grad mode a view is made in */

/* Tags a new view v of self with the grad mode it was made in. */
static em_tensor *made(em_tensor *v, const em_tensor *self) {
    if (v && v->view_base)
        v->view_no_grad = (em_disp_tls_keys.exclude & EM_KS(EM_KEY_AUTOGRAD)) != 0 ||
                          (self->view_base && self->view_no_grad);
    return v;
}

em_tensor *em_kv_view(em_keyset ks, em_tensor *self, em_intlist size) {
    (void)ks;
    return made(em_core_view(self, size.n < 0 ? 0 : size.n, size.data, "view"), self);
}

em_tensor *em_kv_reshape(em_keyset ks, em_tensor *self, em_intlist shape) {
    (void)ks;
    return made(em_core_reshape(self, shape.n < 0 ? 0 : shape.n, shape.data), self);
}

em_tensor *em_kv_transpose(em_keyset ks, em_tensor *self, int64_t dim0, int64_t dim1) {
    (void)ks;
    return made(em_core_transpose(self, dim0, dim1), self);
}

em_tensor *em_kv_t(em_keyset ks, em_tensor *self) {
    (void)ks;
    if (self->ndim > 2) {
        em_set_error(EM_ESHAPE, "t: expects a tensor with <= 2 dims, but self is %d-d", self->ndim);
        return NULL;
    }
    if (self->ndim < 2) return made(em_core_alias_view(self), self);
    return made(em_core_transpose(self, 0, 1), self);
}

em_tensor *em_kv_permute(em_keyset ks, em_tensor *self, em_intlist dims) {
    (void)ks;
    return made(em_core_permute(self, dims.n < 0 ? 0 : dims.n, dims.data), self);
}

em_tensor *em_kv_expand(em_keyset ks, em_tensor *self, em_intlist size) {
    (void)ks;
    return made(em_core_expand(self, size.n < 0 ? 0 : size.n, size.data), self);
}

em_tensor *em_kv_narrow(em_keyset ks, em_tensor *self, int64_t dim, int64_t start, int64_t length) {
    (void)ks;
    return made(em_core_narrow(self, dim, start, length), self);
}

em_tensor *em_kv_select(em_keyset ks, em_tensor *self, int64_t dim, int64_t index) {
    (void)ks;
    return made(em_core_select(self, dim, index), self);
}

/* start NULL: from the beginning; end NULL: to the end (core clamps). */
em_tensor *em_kv_slice(em_keyset ks, em_tensor *self, int64_t dim, const int64_t *start, const int64_t *end,
                       int64_t step) {
    (void)ks;
    return made(em_core_slice(self, dim, start ? *start : 0, end ? *end : INT64_MAX, step), self);
}

em_tensor *em_kv_squeeze(em_keyset ks, em_tensor *self, const int64_t *dim) {
    (void)ks;
    return made(em_core_squeeze(self, dim), self);
}

em_tensor *em_kv_unsqueeze(em_keyset ks, em_tensor *self, int64_t dim) {
    (void)ks;
    return made(em_core_unsqueeze(self, dim), self);
}

/* storage_offset NULL: self's own offset. */
em_tensor *em_kv_as_strided(em_keyset ks, em_tensor *self, em_intlist size, em_intlist stride,
                            const int64_t *storage_offset) {
    (void)ks;
    if (size.n != stride.n) {
        em_set_error(EM_ESHAPE, "as_strided: size has %d entries but stride has %d", size.n, stride.n);
        return NULL;
    }
    return made(em_core_as_strided(self, size.n, size.data, stride.data,
                              storage_offset ? *storage_offset : self->offset), self);
}
