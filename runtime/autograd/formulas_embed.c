/* formulas_embed.c -- helpers of the embed family's formulas
 * (schema/derivatives/embed.yaml), written with public ops only so that
 * create_graph records them. */
#include <stdlib.h>

#include "autograd/em_formulas.h"
#include "em_ops.h"

/* See em_formulas.h. */
em_tensor *em_ag_fn_embedding_backward(em_tensor *grad, const em_input_meta *weight_meta, em_tensor *indices,
                                       const int64_t *padding_idx, bool scale_grad_by_freq) {
    return em_embedding_dense_backward(grad, indices, weight_meta->sizes[0], padding_idx, scale_grad_by_freq);
}

/* See em_formulas.h. The factor of each id (0 for the padding row, 1 or
 * 1/count) is a constant of the indices, built as a tensor of grad's dtype
 * with a trailing dim of 1 that broadcasts over the embedding dim. */
em_tensor *em_ag_fn_embedding_double_backward(em_tensor *grad, em_tensor *indices, const int64_t *padding_idx,
                                              bool scale_grad_by_freq) {
    em_tensor *rows = em_embedding_dense(grad, indices, NULL, false);
    if (!rows || (!padding_idx && !scale_grad_by_freq)) return rows;
    int64_t nw = grad->sizes[0], n = indices->numel;
    em_tensor *ix = em_to(indices, EM_INT64);
    em_tensor *ixc = ix ? em_contiguous(ix) : NULL;
    int64_t sizes[EM_MAX_DIMS];
    for (int k = 0; k < indices->ndim; k++) sizes[k] = indices->sizes[k];
    sizes[indices->ndim] = 1;
    em_tensor *f = ixc ? em_zeros((em_intlist){ sizes, indices->ndim + 1 }, EM_FLOAT64, grad->device) : NULL;
    int64_t *count = f ? calloc((size_t)(nw ? nw : 1), sizeof *count) : NULL;
    em_tensor *out = NULL;
    if (count) {
        /* the ids were checked by the forward (1..nw) */
        const int64_t *v = n ? em_tensor_data(ixc) : NULL;
        double *fv = n ? em_tensor_data(f) : NULL;
        for (int64_t i = 0; i < n; i++) count[v[i] - 1]++;
        for (int64_t i = 0; i < n; i++)
            fv[i] = padding_idx && v[i] == *padding_idx ? 0.0 : scale_grad_by_freq ? 1.0 / (double)count[v[i] - 1] : 1.0;
        em_tensor *fd = em_to(f, grad->dtype);
        out = fd ? em_mul(rows, fd) : NULL;
        em_tensor_release(fd);
    } else if (f) {
        em_set_error(EM_ENOMEM, "embedding_dense_backward: out of memory");
    }
    free(count);
    em_tensor_release(f);
    em_tensor_release(ixc);
    em_tensor_release(ix);
    em_tensor_release(rows);
    return out;
}

/* See em_formulas.h. */
em_tensor *em_ag_fn_embedding_bag_backward(em_tensor *grad, const em_input_meta *weight_meta, em_tensor *indices,
                                           em_tensor *offsets, em_tensor *max_indices, const char *mode,
                                           em_tensor *per_sample_weights, const int64_t *padding_idx,
                                           bool include_last_offset, bool scale_grad_by_freq) {
    return em_embedding_bag_dense_backward(grad, indices, offsets, max_indices, weight_meta->sizes[0], mode,
                                           per_sample_weights, padding_idx, include_last_offset, scale_grad_by_freq);
}
