/* embed.c -- CPU kernels of the embed family (schema/ops/embed.yaml):
 * embedding's row gather, its dense backward, embedding_renorm_.
 *
 * Note [Embedding indices] (schema/ops/embed.yaml): ids are 1-based int64
 * or int32 row numbers; every kernel converts them to 0-based positions
 * (checking the range) before it reads or writes a row.
 *
 * Note [Deterministic embedding backward]: the backward kernels group the
 * positions of each row with a counting sort (stable, so a row's positions
 * stay in index order) and then sum row by row, the rows split over the
 * pool. Every row is summed by one thread in index order, so the gradient
 * is bit-identical for any thread count (no atomics, no per-thread
 * partial sums).
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/cpu/em_cpu.h"
#include "em_kernels_decl.h"

#pragma GCC optimize("O3")

/* ---- ids ---- */

/* The 0-based rows of the 1-based ids in indices (int64 or int32, any
 * layout) in a new malloc'd array of indices->numel entries (never NULL on
 * success); NULL with the error set for another dtype or an id outside
 * 1..rows. what names the argument in messages. */
EM_HIDDEN int64_t *em_cpu_embed_rows(const em_tensor *indices, int64_t rows, const char *op, const char *what) {
    if (indices->dtype != EM_INT64 && indices->dtype != EM_INT32) {
        em_set_error(EM_ETYPE, "%s: %s must be an int64 or int32 tensor of 1-based ids, got %s", op, what,
                     em_dtype_name(indices->dtype));
        return NULL;
    }
    int64_t n = indices->numel;
    int64_t *p = malloc(sizeof *p * (size_t)(n ? n : 1));
    if (!p) {
        em_set_error(EM_ENOMEM, "%s: out of memory", op);
        return NULL;
    }
    em_tensor *c = NULL;
    if (!indices->is_contiguous || indices->dtype != EM_INT64) {
        c = em_cpu_to_dtype(indices, EM_INT64, op);
        if (!c) {
            free(p);
            return NULL;
        }
    }
    const int64_t *v = n ? em_tensor_data(c ? c : indices) : NULL;
    /* (uint64)(v - 1) >= rows exactly when v is not in 1..rows */
    uint64_t bad = 0;
    for (int64_t i = 0; i < n; i++) {
        uint64_t q = (uint64_t)v[i] - 1;
        p[i] = (int64_t)q;
        bad |= q >= (uint64_t)rows;
    }
    if (bad) {
        for (int64_t i = 0; i < n; i++)
            if ((uint64_t)v[i] - 1 >= (uint64_t)rows) {
                if (rows == 0)
                    em_set_error(EM_EINDEX, "%s: id %lld in %s is out of range: weight has 0 rows", op,
                                 (long long)v[i], what);
                else
                    em_set_error(EM_EINDEX, "%s: id %lld in %s is out of range for weight with %lld rows "
                                 "(ids are 1-based); valid: 1..%lld", op, (long long)v[i], what, (long long)rows,
                                 (long long)rows);
                break;
            }
        free(p);
        em_tensor_release(c);
        return NULL;
    }
    em_tensor_release(c);
    return p;
}

/* Checks a resolved padding_idx (1-based, 1..rows) and returns it 0-based,
 * -1 when absent; -2 with the error set when out of range. */
static int64_t pad_row(const int64_t *padding_idx, int64_t rows, const char *op) {
    if (!padding_idx) return -1;
    if (*padding_idx < 1 || *padding_idx > rows) {
        em_set_error(EM_EINDEX, "%s: padding_idx %lld is out of range for weight with %lld rows (1-based); "
                     "valid: 1..%lld", op, (long long)*padding_idx, (long long)rows, (long long)rows);
        return -2;
    }
    return *padding_idx - 1;
}

/* ---- forward: the row gather ---- */

typedef struct {
    const char *w;       /* weight's first element */
    int64_t wrow;        /* bytes between weight rows */
    char *out;           /* contiguous (n, D) */
    size_t rowbytes;     /* D * element size */
    const int64_t *pos;  /* 0-based rows */
} gather_ctx;

/* Rows are fetched a few positions ahead (as Note [Row prefetch] in
 * embed_bag.c): the gather is bound by scattered reads of weight. */
static void gather_range(int64_t b, int64_t e, void *vc) {
    gather_ctx *c = vc;
    for (int64_t i = b; i < e; i++) {
        if (i + 8 < e)
            for (size_t k = 0; k < c->rowbytes; k += 64) __builtin_prefetch(c->w + c->pos[i + 8] * c->wrow + k, 0, 1);
        memcpy(c->out + (size_t)i * c->rowbytes, c->w + c->pos[i] * c->wrow, c->rowbytes);
    }
}

em_tensor *em_cpu_embedding_dense(em_keyset ks, em_tensor *weight, em_tensor *indices, const int64_t *padding_idx,
                                  bool scale_grad_by_freq) {
    (void)ks;
    (void)scale_grad_by_freq;
    const char *op = "embedding";
    if (weight->ndim != 2) {
        char a[EM_SHAPE_STR_MAX];
        em_set_error(EM_ESHAPE, "%s: weight must be 2-d (num_embeddings, embedding_dim), got shape %s", op,
                     em_shape_str(weight->ndim, weight->sizes, a, sizeof a));
        return NULL;
    }
    int64_t rows = weight->sizes[0], D = weight->sizes[1];
    if (pad_row(padding_idx, rows, op) == -2) return NULL;
    if (indices->ndim + 1 > EM_MAX_DIMS) {
        em_set_error(EM_ESHAPE, "%s: input has %d dims; the result would have more than %d", op, indices->ndim,
                     EM_MAX_DIMS);
        return NULL;
    }
    int64_t *pos = em_cpu_embed_rows(indices, rows, op, "input");
    if (!pos) return NULL;
    int64_t sizes[EM_MAX_DIMS];
    for (int k = 0; k < indices->ndim; k++) sizes[k] = indices->sizes[k];
    sizes[indices->ndim] = D;
    em_tensor *out = em_tensor_new(indices->ndim + 1, sizes, weight->dtype, weight->device);
    em_tensor *w = NULL;
    if (out && out->numel) {
        /* rows must be contiguous for memcpy; any row stride works */
        w = weight->strides[1] == 1 || D == 1 ? em_tensor_retain(weight) : em_cpu_to_dtype(weight, weight->dtype, op);
        if (w) {
            size_t esz = em_dtype_size(w->dtype);
            gather_ctx c = { em_tensor_data(w), w->strides[0] * (int64_t)esz, em_tensor_data(out), (size_t)D * esz,
                             pos };
            int64_t grain = (int64_t)EM_CPU_GRAIN / (D > 0 ? D : 1);
            em_cpu_parallel_for_stoppable(indices->numel, grain > 0 ? grain : 1, gather_range, &c);
            if (em_cpu_interrupted(op)) { /* Note [Interrupts in kernels], way (b) */
                em_tensor_release(out);
                out = NULL;
            }
        } else {
            em_tensor_release(out);
            out = NULL;
        }
    }
    em_tensor_release(w);
    free(pos);
    return out;
}

/* ---- backward: per-row sums (Note [Deterministic embedding backward]) ---- */

/* The positions of each row, grouped: pos[start[r] .. start[r+1]) are the
 * indices i (ascending) with rows_of[i] == r. */
typedef struct {
    int64_t *start; /* rows + 1 entries */
    int64_t *pos;   /* n entries */
} em_embed_groups;

/* Counting sort of rows_of (n values in 0..rows-1) into g. */
static em_status group_rows(const int64_t *rows_of, int64_t n, int64_t rows, em_embed_groups *g, const char *op) {
    g->start = calloc((size_t)rows + 1, sizeof *g->start);
    g->pos = malloc(sizeof *g->pos * (size_t)(n ? n : 1));
    if (!g->start || !g->pos) {
        free(g->start);
        free(g->pos);
        return em_set_error(EM_ENOMEM, "%s: out of memory", op);
    }
    for (int64_t i = 0; i < n; i++) g->start[rows_of[i] + 1]++;
    for (int64_t r = 0; r < rows; r++) g->start[r + 1] += g->start[r];
    int64_t *fill = malloc(sizeof *fill * (size_t)(rows ? rows : 1));
    if (!fill) {
        free(g->start);
        free(g->pos);
        return em_set_error(EM_ENOMEM, "%s: out of memory", op);
    }
    memcpy(fill, g->start, sizeof *fill * (size_t)rows);
    for (int64_t i = 0; i < n; i++) g->pos[fill[rows_of[i]]++] = i;
    free(fill);
    return EM_OK;
}

static void groups_free(em_embed_groups *g) {
    free(g->start);
    free(g->pos);
}

typedef struct {
    em_dtype dt;
    const char *g;              /* grad rows, contiguous (n, D) */
    char *out;                  /* contiguous (rows, D) */
    int64_t D;
    const em_embed_groups *grp;
    const int64_t *src;         /* grad row of position i, or NULL: row i */
    const double *fac;          /* factor of position i, or NULL: 1 */
    int64_t pad;                /* 0-based padding row or -1 */
    bool scale;                 /* scale_grad_by_freq */
} bwd_ctx;

/* acc[j] += s * src[j] over a row. */
#define ROW_ADD(NAME, T)                                                       \
    EM_CPU_CLONES static void NAME(T *restrict acc, const T *restrict src, T s, int64_t D) { \
        for (int64_t j = 0; j < D; j++) acc[j] += s * src[j];                  \
    }
ROW_ADD(row_add_f32, float)
ROW_ADD(row_add_f64, double)

static void bwd_range(int64_t b, int64_t e, void *vc) {
    const bwd_ctx *c = vc;
    int64_t D = c->D;
    size_t esz = em_dtype_size(c->dt);
    int64_t kend = c->grp->start[e]; /* positions of rows [b, e) are pos[start[b] .. kend) */
    for (int64_t r = b; r < e; r++) {
        char *o = c->out + (size_t)r * (size_t)D * esz;
        int64_t s0 = c->grp->start[r], s1 = c->grp->start[r + 1];
        memset(o, 0, (size_t)D * esz);
        if (r == c->pad || s0 == s1) continue;
        /* PyTorch's scale: 1.0 / count, in double, then the dtype */
        double sc = c->scale ? 1.0 / (double)(s1 - s0) : 1.0;
        for (int64_t k = s0; k < s1; k++) {
            int64_t i = c->grp->pos[k], gi = c->src ? c->src[i] : i;
            if (k + 8 < kend) { /* the grad rows of the positions are scattered: fetch ahead */
                int64_t pi = c->grp->pos[k + 8], pg = c->src ? c->src[pi] : pi;
                for (size_t q = 0; q < (size_t)D * esz; q += 64) __builtin_prefetch(c->g + (size_t)(pg * D) * esz + q, 0, 1);
            }
            double f = c->fac ? sc * c->fac[i] : sc;
            if (c->dt == EM_FLOAT32) row_add_f32((float *)o, (const float *)c->g + gi * D, (float)f, D);
            else row_add_f64((double *)o, (const double *)c->g + gi * D, f, D);
        }
    }
}

/* The dense weight gradient: zeros (rows, D) of grad's dtype with, for
 * each position i < n, grad's row src[i] (row i when src is NULL; grad is
 * contiguous (*, D), a floating dtype) times fac[i] (1 when NULL) added to
 * row rows_of[i] (0-based), in index order per row, scaled by 1/count with
 * scale; pad (0-based or -1) stays zero. float16/bfloat16 accumulate in
 * float32. Shared by embedding and embedding_bag's backward. */
EM_HIDDEN em_tensor *em_cpu_embed_dense_grad(const em_tensor *grad, const int64_t *rows_of, const int64_t *src,
                                             const double *fac, int64_t n, int64_t rows, int64_t D, int64_t pad,
                                             bool scale, const char *op) {
    if (grad->dtype == EM_FLOAT16 || grad->dtype == EM_BFLOAT16) {
        /* the half types accumulate in float32, rounded once at the end */
        em_tensor *g32 = em_cpu_to_dtype(grad, EM_FLOAT32, op);
        em_tensor *o32 = g32 ? em_cpu_embed_dense_grad(g32, rows_of, src, fac, n, rows, D, pad, scale, op) : NULL;
        em_tensor *out = o32 ? em_cpu_to_dtype(o32, grad->dtype, op) : NULL;
        em_tensor_release(g32);
        em_tensor_release(o32);
        return out;
    }
    int64_t sizes[2] = { rows, D };
    em_tensor *out = em_tensor_new(2, sizes, grad->dtype, grad->device);
    if (!out || !out->numel) return out;
    em_embed_groups grp;
    if (group_rows(rows_of, n, rows, &grp, op) != EM_OK) {
        em_tensor_release(out);
        return NULL;
    }
    bwd_ctx c = { grad->dtype, grad->numel ? em_tensor_data(grad) : NULL, em_tensor_data(out), D, &grp, src, fac, pad, scale };
    int64_t per_row = (n / (rows ? rows : 1) + 1) * D;
    int64_t grain = (int64_t)EM_CPU_GRAIN / (per_row > 0 ? per_row : 1);
    em_cpu_parallel_for(rows, grain > 0 ? grain : 1, bwd_range, &c);
    groups_free(&grp);
    return out;
}

em_tensor *em_cpu_embedding_dense_backward(em_keyset ks, em_tensor *grad_output, em_tensor *indices,
                                           int64_t num_weights, const int64_t *padding_idx,
                                           bool scale_grad_by_freq) {
    (void)ks;
    const char *op = "embedding_dense_backward";
    if (!em_cpu_is_float(grad_output->dtype)) {
        em_set_error(EM_ETYPE, "%s: grad_output must be a floating tensor, got %s", op,
                     em_dtype_name(grad_output->dtype));
        return NULL;
    }
    bool ok = grad_output->ndim == indices->ndim + 1;
    for (int k = 0; ok && k < indices->ndim; k++) ok = grad_output->sizes[k] == indices->sizes[k];
    if (!ok) {
        char a[EM_SHAPE_STR_MAX], b[EM_SHAPE_STR_MAX];
        em_set_error(EM_ESHAPE, "%s: grad_output %s must have indices' shape %s plus a last dim", op,
                     em_shape_str(grad_output->ndim, grad_output->sizes, a, sizeof a),
                     em_shape_str(indices->ndim, indices->sizes, b, sizeof b));
        return NULL;
    }
    if (num_weights < 0) {
        em_set_error(EM_EVALUE, "%s: num_weights must be >= 0, got %lld", op, (long long)num_weights);
        return NULL;
    }
    int64_t pad = pad_row(padding_idx, num_weights, op);
    if (pad == -2) return NULL;
    int64_t *rows_of = em_cpu_embed_rows(indices, num_weights, op, "indices");
    if (!rows_of) return NULL;
    em_tensor *g = grad_output->is_contiguous ? em_tensor_retain(grad_output)
                                              : em_cpu_to_dtype(grad_output, grad_output->dtype, op);
    em_tensor *out = g ? em_cpu_embed_dense_grad(g, rows_of, NULL, NULL, indices->numel, num_weights,
                                                 grad_output->sizes[grad_output->ndim - 1], pad, scale_grad_by_freq,
                                                 op)
                       : NULL;
    em_tensor_release(g);
    free(rows_of);
    return out;
}

/* ---- embedding_renorm_ ---- */

/* The norm_type-norm of n values (stride st, in elements) of a floating
 * dtype, in double: PyTorch's vector norm (0: the count of non-zeros,
 * +-inf: the largest/smallest magnitude). */
static double row_norm(const char *p, em_dtype dt, int64_t n, int64_t st, double ord) {
    size_t esz = em_dtype_size(dt);
    double acc = isinf(ord) && ord < 0 ? INFINITY : 0;
    for (int64_t j = 0; j < n; j++) {
        double a = fabs(em_load_as_double(p + (size_t)(j * st) * esz, dt));
        if (ord == 2) acc += a * a;
        else if (ord == 1) acc += a;
        else if (ord == 0) acc += a != 0;
        else if (isinf(ord)) acc = ord > 0 ? (a > acc || isnan(a) ? a : acc) : (a < acc || isnan(a) ? a : acc);
        else acc += pow(a, ord);
    }
    if (ord == 2) return sqrt(acc);
    if (ord == 1 || ord == 0 || isinf(ord)) return acc;
    return pow(acc, 1.0 / ord);
}

em_tensor *em_cpu_embedding_renorm_(em_keyset ks, em_tensor *self, em_tensor *indices, double max_norm,
                                    double norm_type) {
    (void)ks;
    const char *op = "embedding_renorm_";
    if (self->ndim != 2) {
        char a[EM_SHAPE_STR_MAX];
        em_set_error(EM_ESHAPE, "%s: self must be 2-d (num_embeddings, embedding_dim), got shape %s", op,
                     em_shape_str(self->ndim, self->sizes, a, sizeof a));
        return NULL;
    }
    if (!em_cpu_is_float(self->dtype)) {
        em_set_error(EM_ETYPE, "%s: self must be a floating tensor, got %s", op, em_dtype_name(self->dtype));
        return NULL;
    }
    int64_t rows = self->sizes[0], D = self->sizes[1];
    int64_t *pos = em_cpu_embed_rows(indices, rows, op, "indices");
    if (!pos) return NULL;
    bool *seen = calloc((size_t)(rows ? rows : 1), 1);
    if (!seen) {
        free(pos);
        em_set_error(EM_ENOMEM, "%s: out of memory", op);
        return NULL;
    }
    size_t esz = em_dtype_size(self->dtype);
    char *base = self->numel ? em_tensor_data(self) : NULL;
    bool overlap_checked = false;
    for (int64_t i = 0; i < indices->numel && base; i++) {
        int64_t r = pos[i];
        if (seen[r]) continue;
        seen[r] = true;
        char *row = base + (size_t)(r * self->strides[0]) * esz;
        double norm = row_norm(row, self->dtype, D, self->strides[1], norm_type);
        if (!(norm > max_norm)) continue;
        /* a self whose elements share memory (expanded) is refused at its
         * first write, as PyTorch's row *= scale does; with nothing to
         * rescale nothing is written and nothing is refused */
        if (!overlap_checked && em_core_check_no_internal_overlap(self, op) != EM_OK) {
            free(seen);
            free(pos);
            return NULL;
        }
        overlap_checked = true;
        double scale = max_norm / (norm + 1e-7);
        for (int64_t j = 0; j < D; j++) {
            char *p = row + (size_t)(j * self->strides[1]) * esz;
            if (self->dtype == EM_FLOAT64) *(double *)p *= scale;
            else if (self->dtype == EM_FLOAT32) *(float *)p *= (float)scale;
            else em_store_from_double(p, self->dtype, (double)((float)em_load_as_double(p, self->dtype) * (float)scale));
        }
    }
    free(seen);
    free(pos);
    em_tensor_bump_version(self);
    return em_tensor_retain(self);
}
