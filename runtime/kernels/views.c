/* views.c -- the Default-key view kernels (em_kv_*): thin wrappers over
 * core's view functions, shared by every backend. Each result records
 * whether grad mode was off when it was made (PyTorch's creation meta;
 * see Note [View history] in runtime/autograd/em_autograd.h).
 */
#include <stdlib.h>

#include "kernels/cpu/em_cpu.h"
#include "dispatch/em_dispatch.h" /* em_disp_tls_keys (the grad mode a view is made in), em_disp_op */
#include "em_ops.h"                 /* em_redispatch_contiguous: reshape's copy */

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

/* A view when the strides allow one; else contiguous(self) through the
 * dispatcher at ks (below Autograd when called from the autograd kernel,
 * so no second node is recorded) -- the backend's copy kernel -- with the
 * new shape, which is not a view (Note [Reshape copies outside core]). */
em_tensor *em_kv_reshape(em_keyset ks, em_tensor *self, em_intlist shape) {
    int n = shape.n < 0 ? 0 : shape.n;
    bool needs_copy;
    em_tensor *v = em_core_reshape_view(self, n, shape.data, &needs_copy);
    if (v || !needs_copy) return made(v, self);
    em_tensor *c = em_redispatch_contiguous(ks & em_disp_op(EM_OP_contiguous)->active, self);
    if (!c) return NULL;
    em_tensor *r = em_core_reshape_copied(c, n, shape.data);
    em_tensor_release(c);
    return r;
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

/* ---- views returned as a list (Tensor[] results; Note [Several results]
 * in codegen/codegen.h): each element is a view of self made by narrow or
 * select. Autograd marks them as views of one multi-output node. ---- */

/* The pieces of self along dim with the given sizes (narrow views), as an
 * owned array; NULL with the error set. */
static em_tensor **pieces(em_tensor *self, int d, int n, const int64_t *sizes, int *nresults) {
    em_tensor **r = calloc((size_t)(n ? n : 1), sizeof *r);
    if (!r) {
        em_set_error(EM_ENOMEM, "split: out of memory for %d views", n);
        return NULL;
    }
    int64_t off = 0;
    for (int i = 0; i < n; i++) {
        r[i] = made(em_core_narrow(self, d, off, sizes[i]), self);
        if (!r[i]) {
            em_tensors_free(r, i);
            return NULL;
        }
        off += sizes[i];
    }
    *nresults = n;
    return r;
}

/* The dim of a list view op: self must have dims (PyTorch). */
static int list_dim(const em_tensor *self, int64_t dim, const char *op) {
    if (self->ndim == 0) {
        em_set_error(EM_ESHAPE, "%s: expects a tensor with at least one dim, got a 0-dim tensor", op);
        return -1;
    }
    return em_wrap_dim(dim, self->ndim, op);
}

/* Sizes of pieces of split_size (the last one shorter) covering size. */
static em_tensor **split_even(em_tensor *self, int d, int64_t split_size, int *nresults, const char *op) {
    int64_t size = self->sizes[d];
    if (split_size < 0) {
        em_set_error(EM_EVALUE, "%s: split_size must be non-negative, got %lld", op, (long long)split_size);
        return NULL;
    }
    if (split_size == 0 && size != 0) {
        em_set_error(EM_EVALUE, "%s: split_size can only be 0 if the dim's size is 0, but dim %d has size %lld",
                     op, d + 1, (long long)size);
        return NULL;
    }
    /* ceil(size / split_size) without forming size + split_size (split_size may be near 2^63) */
    int64_t n = split_size ? size / split_size + (size % split_size != 0) : 1;
    if (n == 0) n = 1; /* an empty dim: one empty piece */
    if (n > INT32_MAX / 2) {
        em_set_error(EM_EVALUE, "%s: %lld pieces are too many", op, (long long)n);
        return NULL;
    }
    int64_t *sz = malloc(sizeof *sz * (size_t)n);
    if (!sz) {
        em_set_error(EM_ENOMEM, "%s: out of memory", op);
        return NULL;
    }
    for (int64_t i = 0; i < n; i++) sz[i] = i < n - 1 ? split_size : size - split_size * (n - 1);
    em_tensor **r = pieces(self, d, (int)n, sz, nresults);
    free(sz);
    return r;
}

em_tensor **em_kv_split(em_keyset ks, em_tensor *self, int64_t split_size, int64_t dim, int *nresults) {
    (void)ks;
    int d = list_dim(self, dim, "split");
    return d < 0 ? NULL : split_even(self, d, split_size, nresults, "split");
}

em_tensor **em_kv_split_sizes(em_keyset ks, em_tensor *self, em_intlist split_sizes, int64_t dim,
                              int *nresults) {
    (void)ks;
    int d = list_dim(self, dim, "split");
    if (d < 0) return NULL;
    int64_t sum = 0;
    for (int i = 0; i < split_sizes.n; i++) {
        if (split_sizes.data[i] < 0) {
            em_set_error(EM_EVALUE, "split: split_sizes[%d] is %lld; sizes must be non-negative", i + 1,
                         (long long)split_sizes.data[i]);
            return NULL;
        }
        sum += split_sizes.data[i];
    }
    if (sum != self->sizes[d]) {
        em_set_error(EM_EVALUE, "split: split_sizes must sum to %lld (the size of dim %d), but they sum to %lld",
                     (long long)self->sizes[d], d + 1, (long long)sum);
        return NULL;
    }
    return pieces(self, d, split_sizes.n, split_sizes.data, nresults);
}

em_tensor **em_kv_chunk(em_keyset ks, em_tensor *self, int64_t chunks, int64_t dim, int *nresults) {
    (void)ks;
    int d = list_dim(self, dim, "chunk");
    if (d < 0) return NULL;
    if (chunks <= 0) {
        em_set_error(EM_EVALUE, "chunk: chunks must be greater than 0, got %lld", (long long)chunks);
        return NULL;
    }
    int64_t size = self->sizes[d];
    if (size == 0) { /* PyTorch: `chunks` empty pieces */
        if (chunks > INT32_MAX / 2) {
            em_set_error(EM_EVALUE, "chunk: %lld chunks are too many", (long long)chunks);
            return NULL;
        }
        int64_t *sz = calloc((size_t)chunks, sizeof *sz);
        if (!sz) {
            em_set_error(EM_ENOMEM, "chunk: out of memory");
            return NULL;
        }
        em_tensor **r = pieces(self, d, (int)chunks, sz, nresults);
        free(sz);
        return r;
    }
    /* ceil(size / chunks) without forming size + chunks - 1 (chunks may be near 2^63) */
    return split_even(self, d, size / chunks + (size % chunks != 0), nresults, "chunk");
}

em_tensor **em_kv_unbind(em_keyset ks, em_tensor *self, int64_t dim, int *nresults) {
    (void)ks;
    int d = list_dim(self, dim, "unbind");
    if (d < 0) return NULL;
    int64_t n = self->sizes[d];
    if (n > INT32_MAX / 2) {
        em_set_error(EM_EVALUE, "unbind: %lld views are too many", (long long)n);
        return NULL;
    }
    em_tensor **r = calloc((size_t)(n ? n : 1), sizeof *r);
    if (!r) {
        em_set_error(EM_ENOMEM, "unbind: out of memory for %lld views", (long long)n);
        return NULL;
    }
    for (int64_t i = 0; i < n; i++) {
        r[i] = made(em_core_select(self, d, i), self);
        if (!r[i]) {
            em_tensors_free(r, (int)i);
            return NULL;
        }
    }
    *nresults = (int)n;
    return r;
}
