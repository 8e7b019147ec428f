/* composite_embed.c -- the embed family's composite ops
 * (schema/ops/embed.yaml, `kernels: {Composite: em_comp_NAME}`; Note
 * [Composite ops] in codegen/codegen.h): torch.nn.functional's embedding
 * and embedding_bag over their kernels, with PyTorch's argument checks and
 * the max_norm renormalisation done first, under no_grad, as
 * torch.nn.functional does it. */
#include "autograd/em_autograd.h"
#include "em_ops.h"
#include "em_kernels_decl.h"
#include "kernels/cpu/em_cpu.h" /* em_cpu_embed_rows: the id check under the caller's name */

#include <stdlib.h>

/* ---- shared checks ---- */

/* weight must be 2-d (num_embeddings, embedding_dim). */
static bool weight_ok(const em_tensor *weight, const char *op) {
    if (weight->ndim == 2) return true;
    char a[EM_SHAPE_STR_MAX];
    em_set_error(EM_ESHAPE, "%s: weight must be 2-d (num_embeddings, embedding_dim), got shape %s", op,
                 em_shape_str(weight->ndim, weight->sizes, a, sizeof a));
    return false;
}

static bool ids_ok(const em_tensor *t, const char *op, const char *what) {
    if (t->dtype == EM_INT64 || t->dtype == EM_INT32) return true;
    em_set_error(EM_ETYPE, "%s: %s must be an int64 or int32 tensor of 1-based ids, got %s", op, what,
                 em_dtype_name(t->dtype));
    return false;
}

/* padding_idx as PyTorch's F.embedding takes it, 1-based: 1..rows, or
 * -rows..-1 from the end. Writes the resolved 1-based row to *out; false
 * with the error set when out of range (0 included). */
static bool resolve_padding(const int64_t *padding_idx, int64_t rows, int64_t *out, const char *op) {
    if (!padding_idx) return true;
    int64_t p = *padding_idx;
    if (p >= 1 && p <= rows) *out = p;
    else if (p <= -1 && p >= -rows) *out = rows + p + 1;
    else {
        em_set_error(EM_EINDEX, "%s: padding_idx %lld must be within num_embeddings (weight has %lld rows; "
                     "1-based, valid: 1..%lld or -%lld..-1)", op, (long long)p, (long long)rows, (long long)rows,
                     (long long)rows);
        return false;
    }
    return true;
}

static bool not_sparse(bool sparse, const char *op) {
    if (!sparse) return true;
    em_set_error(EM_EVALUE, "%s: sparse=true is not supported (ember has no sparse tensors; the gradient of "
                 "weight is always dense)", op);
    return false;
}

/* PyTorch's _no_grad_embedding_renorm_: the rows of weight named in ids
 * rescaled in place to a norm of at most max_norm, with grad mode off (so
 * a leaf weight that requires grad may be written, as in PyTorch). */
static bool renorm(em_tensor *weight, em_tensor *ids, const em_scalar *max_norm, double norm_type, const char *op) {
    if (!max_norm) return true;
    int64_t *rows = em_cpu_embed_rows(ids, weight->sizes[0], op, "input"); /* errors name op */
    if (!rows) return false;
    free(rows);
    em_grad_guard g = em_grad_guard_begin(false);
    em_tensor *r = em_embedding_renorm_(weight, ids, em_scalar_to_double(*max_norm), norm_type);
    em_grad_guard_end(g);
    em_tensor_release(r);
    return r != NULL;
}

/* ---- embedding ---- */

em_tensor *em_comp_embedding(em_keyset ks, em_tensor *input, em_tensor *weight, const int64_t *padding_idx,
                             const em_scalar *max_norm, double norm_type, bool scale_grad_by_freq, bool sparse) {
    (void)ks;
    const char *op = "embedding";
    if (!not_sparse(sparse, op) || !weight_ok(weight, op) || !ids_ok(input, op, "input")) return NULL;
    int64_t pad = 0;
    if (!resolve_padding(padding_idx, weight->sizes[0], &pad, op)) return NULL;
    if (!renorm(weight, input, max_norm, norm_type, op)) return NULL;
    return em_embedding_dense(weight, input, padding_idx ? &pad : NULL, scale_grad_by_freq);
}

/* ---- embedding_bag ---- */

/* A 2-d input (B, L) is B bags of L ids: the ids flattened and offsets
 * 1, 1 + L, ..., as PyTorch's arange(0, numel, L) plus one (for L = 0 every
 * bag is empty). include_last_offset keeps PyTorch's meaning there too
 * (the last row then only closes the bag before it). */
em_tensor *em_comp_embedding_bag(em_keyset ks, em_tensor *input, em_tensor *weight, em_tensor *offsets,
                                 const em_scalar *max_norm, double norm_type, bool scale_grad_by_freq,
                                 const char *mode, bool sparse, em_tensor *per_sample_weights,
                                 bool include_last_offset, const int64_t *padding_idx) {
    (void)ks;
    const char *op = "embedding_bag";
    if (!not_sparse(sparse, op) || !weight_ok(weight, op) || !ids_ok(input, op, "input")) return NULL;
    if (input->ndim == 2 && offsets) {
        em_set_error(EM_EVALUE, "%s: offsets must be nil for a 2-d input (each row is a bag)", op);
        return NULL;
    }
    if (input->ndim == 1 && !offsets) {
        em_set_error(EM_EVALUE, "%s: a 1-d input needs offsets (the 1-based first position of each bag)", op);
        return NULL;
    }
    if (input->ndim != 1 && input->ndim != 2) {
        em_set_error(EM_ESHAPE, "%s: input must be 1-d (with offsets) or 2-d (bags, ids), got %d dims", op,
                     input->ndim);
        return NULL;
    }
    if (per_sample_weights) {
        bool same = per_sample_weights->ndim == input->ndim;
        for (int k = 0; same && k < input->ndim; k++) same = per_sample_weights->sizes[k] == input->sizes[k];
        if (!same) {
            char a[EM_SHAPE_STR_MAX], b[EM_SHAPE_STR_MAX];
            em_set_error(EM_ESHAPE, "%s: per_sample_weights %s must have input's shape %s", op,
                         em_shape_str(per_sample_weights->ndim, per_sample_weights->sizes, a, sizeof a),
                         em_shape_str(input->ndim, input->sizes, b, sizeof b));
            return NULL;
        }
    }
    int64_t pad = 0;
    if (!resolve_padding(padding_idx, weight->sizes[0], &pad, op)) return NULL;
    if (!renorm(weight, input, max_norm, norm_type, op)) return NULL;
    em_tensor *ids = NULL, *off = NULL, *psw = NULL;
    if (input->ndim == 2) {
        int64_t B = input->sizes[0], L = input->sizes[1], flat = input->numel;
        off = em_tensor_new(1, &B, EM_INT64, input->device);
        if (off)
            for (int64_t b = 0; b < B; b++) ((int64_t *)em_tensor_data(off))[b] = 1 + b * L;
        ids = off ? em_reshape(input, (em_intlist){ &flat, 1 }) : NULL;
        psw = ids && per_sample_weights ? em_reshape(per_sample_weights, (em_intlist){ &flat, 1 }) : NULL;
        if (!ids || (per_sample_weights && !psw)) {
            em_tensor_release(off);
            em_tensor_release(ids);
            return NULL;
        }
    } else {
        ids = em_tensor_retain(input);
        off = em_tensor_retain(offsets);
        psw = em_tensor_retain(per_sample_weights);
    }
    em_tensor *mi = NULL;
    em_tensor *out = em_embedding_bag_dense(weight, ids, off, mode, psw, padding_idx ? &pad : NULL,
                                            include_last_offset, scale_grad_by_freq, &mi);
    em_tensor_release(mi);
    em_tensor_release(ids);
    em_tensor_release(off);
    em_tensor_release(psw);
    return out;
}
