/* formulas_list.c -- formula helpers for ops with several results or
 * tensor lists (sort, topk, cat, split, unbind), declared in em_formulas.h.
 * Like formulas.c, written with the public ops only (double backward). */
#include <stdlib.h>

#include "autograd/em_ag_alloc.h"
#include "autograd/em_formulas.h"
#include "em_ops.h"

static em_intlist sizes_of(const em_input_meta *m) { return (em_intlist){ m->sizes, m->ndim }; }

em_tensor *em_ag_zeros_from_meta(const em_input_meta *m) { return em_zeros(sizes_of(m), m->dtype, m->device); }

em_tensor *em_ag_fn_value_selecting_backward(em_tensor *grad, int64_t dim, em_tensor *indices,
                                             const em_input_meta *self_meta) {
    return em_gather_backward(grad, sizes_of(self_meta), dim, indices);
}

em_tensor *em_ag_fn_value_selecting_reduction_backward(em_tensor *grad, int64_t dim, em_tensor *indices,
                                                       const em_input_meta *self_meta, bool keepdim) {
    if (keepdim || self_meta->ndim == 0) return em_ag_fn_value_selecting_backward(grad, dim, indices, self_meta);
    int d = em_wrap_dim(dim, self_meta->ndim, "max backward");
    if (d < 0) return NULL;
    em_tensor *g = em_unsqueeze(grad, d);
    em_tensor *i = g ? em_unsqueeze(indices, d) : NULL;
    em_tensor *r = i ? em_ag_fn_value_selecting_backward(g, d, i, self_meta) : NULL;
    em_tensor_release(g);
    em_tensor_release(i);
    return r;
}

/* cat skips 1-d empty tensors (PyTorch's legacy rule): they take no part of grad. */
static bool legacy_empty(const em_input_meta *m) { return m->ndim == 1 && m->sizes[0] == 0; }

em_tensor *em_ag_fn_cat_grad(em_tensor *grad, const em_input_meta *metas, int64_t dim, int64_t i) {
    if (legacy_empty(&metas[i])) return em_ag_zeros_from_meta(&metas[i]);
    int d = em_wrap_dim(dim, grad->ndim, "cat backward");
    if (d < 0) return NULL;
    int64_t offset = 0;
    for (int64_t j = 0; j < i; j++)
        if (!legacy_empty(&metas[j])) offset += metas[j].sizes[d];
    return em_narrow(grad, d, offset, metas[i].sizes[d]);
}

/* grads with zeros in place of the NULL ones, in a new array of new
 * references (*owned), for em_cat / em_stack. */
static em_tensor **filled(em_tensor **grads, int n, const em_input_meta *metas) {
    em_tensor **a = em_ag_calloc((size_t)(n ? n : 1), sizeof *a);
    if (!a) {
        em_set_error(EM_ENOMEM, "backward: out of memory");
        return NULL;
    }
    for (int i = 0; i < n; i++) {
        a[i] = grads[i] ? em_tensor_retain(grads[i]) : em_ag_zeros_from_meta(&metas[i]);
        if (!a[i]) {
            em_tensors_free(a, i);
            return NULL;
        }
    }
    return a;
}

static em_tensor *join(em_tensor **grads, int n, const em_input_meta *metas, const em_input_meta *self_meta,
                       int64_t dim, bool stack) {
    if (n == 0) return em_ag_zeros_from_meta(self_meta);
    em_tensor **a = filled(grads, n, metas);
    if (!a) return NULL;
    em_tensorlist l = { a, n };
    em_tensor *r = stack ? em_stack_list(l, dim) : em_cat(l, dim);
    em_tensors_free(a, n);
    return r;
}

em_tensor *em_ag_fn_split_backward(em_tensor **grads, int n, const em_input_meta *metas,
                                   const em_input_meta *self_meta, int64_t dim) {
    return join(grads, n, metas, self_meta, dim, false);
}

em_tensor *em_ag_fn_stack_grads(em_tensor **grads, int n, const em_input_meta *metas,
                                const em_input_meta *self_meta, int64_t dim) {
    return join(grads, n, metas, self_meta, dim, true);
}
