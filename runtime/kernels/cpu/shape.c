/* shape.c -- kernels that join tensors: cat and stack (Tensor[] arguments;
 * see Note [Tensor lists] in codegen/codegen.h). The result dtype promotes
 * over every element (PyTorch's result_type over the list); each element
 * is copied into its region of the result with the parallel copy. */
#include <string.h>

#include "kernels/cpu/em_cpu.h"
#include "em_kernels_decl.h"

/* PyTorch's legacy rule: a 1-d tensor with no elements is skipped by cat
 * whatever the other shapes are. */
static bool legacy_empty(const em_tensor *t) { return t->ndim == 1 && t->sizes[0] == 0; }

/* The promoted dtype of the elements (tensors with dims outrank 0-dim
 * ones within a category, as for binary ops). */
static em_dtype list_dtype(em_tensorlist l) {
    em_dtype dt = l.data[0]->dtype;
    for (int i = 1; i < l.n; i++) dt = em_promote_types(dt, l.data[i]->dtype);
    return dt;
}

em_tensor *em_cpu_cat(em_keyset ks, em_tensorlist tensors, int64_t dim) {
    (void)ks;
    if (tensors.n == 0) {
        em_set_error(EM_EVALUE, "cat: expected a non-empty list of tensors");
        return NULL;
    }
    int ref = -1; /* the first element that takes part */
    for (int i = 0; i < tensors.n && ref < 0; i++)
        if (!legacy_empty(tensors.data[i])) ref = i;
    if (ref < 0) { /* only 1-d empty tensors: an empty 1-d result */
        int64_t z = 0;
        return em_tensor_new(1, &z, list_dtype(tensors), tensors.data[0]->device);
    }
    const em_tensor *r = tensors.data[ref];
    if (r->ndim == 0) {
        em_set_error(EM_ESHAPE, "cat: zero-dimensional tensor (element %d) cannot be concatenated", ref + 1);
        return NULL;
    }
    int d = em_wrap_dim(dim, r->ndim, "cat");
    if (d < 0) return NULL;
    int64_t sizes[EM_MAX_DIMS];
    memcpy(sizes, r->sizes, sizeof(int64_t) * (size_t)r->ndim);
    sizes[d] = 0;
    for (int i = 0; i < tensors.n; i++) {
        const em_tensor *t = tensors.data[i];
        if (legacy_empty(t)) continue;
        if (t->ndim != r->ndim) {
            em_set_error(EM_ESHAPE, "cat: tensors must have the same number of dims: element %d has %d, "
                         "element %d has %d", ref + 1, r->ndim, i + 1, t->ndim);
            return NULL;
        }
        for (int k = 0; k < r->ndim; k++)
            if (k != d && t->sizes[k] != r->sizes[k]) {
                char a[EM_SHAPE_STR_MAX], b[EM_SHAPE_STR_MAX];
                em_set_error(EM_ESHAPE, "cat: sizes must match except in dim %d: element %d is %s, "
                             "element %d is %s", d + 1, ref + 1, em_shape_str(r->ndim, r->sizes, a, sizeof a),
                             i + 1, em_shape_str(t->ndim, t->sizes, b, sizeof b));
                return NULL;
            }
        sizes[d] += t->sizes[d];
    }
    em_tensor *out = em_tensor_new(r->ndim, sizes, list_dtype(tensors), r->device);
    if (!out) return NULL;
    int64_t off = 0;
    for (int i = 0; i < tensors.n; i++) {
        const em_tensor *t = tensors.data[i];
        if (legacy_empty(t) || t->sizes[d] == 0) continue;
        em_tensor *part = em_core_narrow(out, d, off, t->sizes[d]);
        if (!part || em_cpu_copy_into(part, t, "cat") != EM_OK) {
            em_tensor_release(part);
            em_tensor_release(out);
            return NULL;
        }
        em_tensor_release(part);
        off += t->sizes[d];
    }
    return out;
}

em_tensor *em_cpu_stack_list(em_keyset ks, em_tensorlist tensors, int64_t dim) {
    (void)ks;
    if (tensors.n == 0) {
        em_set_error(EM_EVALUE, "stack: expected a non-empty list of tensors");
        return NULL;
    }
    const em_tensor *r = tensors.data[0];
    if (r->ndim + 1 > EM_MAX_DIMS) {
        em_set_error(EM_ESHAPE, "stack: the result would have more than %d dims", EM_MAX_DIMS);
        return NULL;
    }
    int d = em_wrap_dim(dim, r->ndim + 1, "stack");
    if (d < 0) return NULL;
    for (int i = 1; i < tensors.n; i++) {
        const em_tensor *t = tensors.data[i];
        if (t->ndim != r->ndim || memcmp(t->sizes, r->sizes, sizeof(int64_t) * (size_t)r->ndim) != 0) {
            char a[EM_SHAPE_STR_MAX], b[EM_SHAPE_STR_MAX];
            em_set_error(EM_ESHAPE, "stack: every tensor must have one shape, but element 1 is %s and "
                         "element %d is %s", em_shape_str(r->ndim, r->sizes, a, sizeof a), i + 1,
                         em_shape_str(t->ndim, t->sizes, b, sizeof b));
            return NULL;
        }
    }
    int64_t sizes[EM_MAX_DIMS];
    for (int k = 0, j = 0; k <= r->ndim; k++) sizes[k] = k == d ? tensors.n : r->sizes[j++];
    em_tensor *out = em_tensor_new(r->ndim + 1, sizes, list_dtype(tensors), r->device);
    if (!out) return NULL;
    for (int i = 0; i < tensors.n && out->numel; i++) {
        em_tensor *part = em_core_select(out, d, i);
        if (!part || em_cpu_copy_into(part, tensors.data[i], "stack") != EM_OK) {
            em_tensor_release(part);
            em_tensor_release(out);
            return NULL;
        }
        em_tensor_release(part);
    }
    return out;
}
