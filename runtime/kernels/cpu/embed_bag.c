/* embed_bag.c -- CPU kernels of embedding_bag (schema/ops/embed.yaml):
 * the fused bag reduction (sum, mean, max) over gathered rows, its weight
 * gradient and the gradient of per_sample_weights.
 *
 * Note [Embedding bags]: a bag is a run of positions of the 1-d ids.
 * offsets holds the 1-based first position of each bag (the first offset
 * is 1, they never decrease, none is past n + 1); bag b runs to the next
 * offset, the last one to the end of the ids. With include_last_offset the
 * last offset only closes the bag before it (B = #offsets - 1 bags, ids
 * after it belong to no bag). Ids equal to padding_idx are left out of
 * their bag (a mean divides by the bag's other ids); an empty bag gives a
 * zero row, and in max mode a max index of 0. Max indices are 1-based rows
 * of weight, per column, the first maximum winning (PyTorch's strict >).
 * Every kernel runs through bag_layout(), so the three agree.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/cpu/em_cpu.h"
#include "em_kernels_decl.h"

#pragma GCC optimize("O3")

enum { BAG_SUM, BAG_MEAN, BAG_MAX };

static int bag_mode(const char *mode) { return !strcmp(mode, "sum") ? BAG_SUM : !strcmp(mode, "mean") ? BAG_MEAN : BAG_MAX; }

/* A checked bag layout: rows[i] the 0-based row of id i, start[b]/end[b]
 * the 0-based half-open position range of bag b; pad the 0-based padding
 * row or -1. */
typedef struct {
    int64_t n, B, pad;
    int64_t *rows;  /* n entries */
    int64_t *start; /* B + 1 entries: bag b is [start[b], start[b + 1]) */
} bag_layout;

static void layout_free(bag_layout *L) {
    free(L->rows);
    free(L->start);
}

/* Checks indices and offsets (1-d, int64/int32, Note [Embedding bags])
 * and padding_idx (1..rows or NULL) and fills L (free with layout_free).
 * Errors name op. */
static em_status bag_layout_init(bag_layout *L, const em_tensor *indices, const em_tensor *offsets, int64_t rows,
                                 const int64_t *padding_idx, bool include_last_offset, const char *op) {
    memset(L, 0, sizeof *L);
    if (indices->ndim != 1)
        return em_set_error(EM_ESHAPE, "%s: indices must be 1-d here, got %d dims", op, indices->ndim);
    if (offsets->ndim != 1)
        return em_set_error(EM_ESHAPE, "%s: offsets must be a 1-d tensor, got %d dims", op, offsets->ndim);
    if (offsets->dtype != EM_INT64 && offsets->dtype != EM_INT32)
        return em_set_error(EM_ETYPE, "%s: offsets must be an int64 or int32 tensor of 1-based positions, got %s", op,
                            em_dtype_name(offsets->dtype));
    if (include_last_offset && offsets->numel < 1)
        return em_set_error(EM_EVALUE, "%s: include_last_offset needs at least one offset", op);
    if (padding_idx && (*padding_idx < 1 || *padding_idx > rows))
        return em_set_error(EM_EINDEX, "%s: padding_idx %lld is out of range for weight with %lld rows (1-based); "
                            "valid: 1..%lld", op, (long long)*padding_idx, (long long)rows, (long long)rows);
    L->pad = padding_idx ? *padding_idx - 1 : -1;
    L->n = indices->numel;
    L->B = include_last_offset ? offsets->numel - 1 : offsets->numel;
    L->rows = em_cpu_embed_rows(indices, rows, op, "input");
    if (!L->rows) return em_error_kind();
    em_tensor *oc = em_cpu_to_dtype(offsets, EM_INT64, op);
    L->start = malloc(sizeof *L->start * (size_t)(L->B + 1));
    if (!oc || !L->start) {
        em_tensor_release(oc);
        layout_free(L);
        return oc ? em_set_error(EM_ENOMEM, "%s: out of memory", op) : em_error_kind();
    }
    const int64_t *o = offsets->numel ? em_tensor_data(oc) : NULL;
    em_status st = EM_OK;
    for (int64_t b = 0; b < offsets->numel && st == EM_OK; b++) {
        if (b == 0 && o[0] != 1)
            st = em_set_error(EM_EVALUE, "%s: offsets[1] must be 1 (the first bag starts at the first id; offsets "
                              "are 1-based), got %lld", op, (long long)o[0]);
        else if (b > 0 && o[b] < o[b - 1])
            st = em_set_error(EM_EVALUE, "%s: offsets must not decrease, got offsets[%lld] = %lld after %lld", op,
                              (long long)b + 1, (long long)o[b], (long long)o[b - 1]);
        else if (o[b] > L->n + 1)
            st = em_set_error(EM_EVALUE, "%s: offsets[%lld] = %lld is past the end of input (%lld ids; at most %lld)",
                              op, (long long)b + 1, (long long)o[b], (long long)L->n, (long long)L->n + 1);
        else if (b <= L->B)
            L->start[b] = o[b] - 1;
    }
    if (st == EM_OK && !include_last_offset) L->start[L->B] = L->n;
    em_tensor_release(oc);
    if (st != EM_OK) layout_free(L);
    return st;
}

/* ---- forward ---- */

typedef struct {
    const bag_layout *L;
    int mode;
    em_dtype dt;          /* float32 or float64 */
    const char *w;        /* weight's first element, rows contiguous */
    int64_t wrow;         /* elements between rows */
    int64_t D;
    const char *psw;      /* per_sample_weights (contiguous, dt) or NULL */
    char *out;            /* (B, D) */
    int64_t *maxi;        /* (B, D) 1-based rows, max mode */
} fwd_ctx;

EM_CPU_CLONES static void axpy_f32(float *restrict acc, const float *restrict x, float s, int64_t D) {
    for (int64_t j = 0; j < D; j++) acc[j] += s * x[j];
}
EM_CPU_CLONES static void axpy_f64(double *restrict acc, const double *restrict x, double s, int64_t D) {
    for (int64_t j = 0; j < D; j++) acc[j] += s * x[j];
}

/* Note [Row prefetch]: the rows a bag reads are scattered over a weight
 * far larger than the caches, so the loops ask for the row PF_AHEAD
 * positions ahead (every cache line of it) while summing this one; the
 * sum is then bound by bandwidth rather than by one miss at a time. */
#define PF_AHEAD 16
static inline void prefetch_row(const char *p, size_t bytes) {
    for (size_t k = 0; k < bytes; k += 64) __builtin_prefetch(p + k, 0, 1);
}

/* Bags [b0, b1) of a float32 or float64 weight (float16 runs as float32):
 * sums go straight into the output row, in position order. */
static void fwd_range(int64_t b0, int64_t b1, void *vc) {
    const fwd_ctx *c = vc;
    const bag_layout *L = c->L;
    int64_t D = c->D;
    bool f32 = c->dt == EM_FLOAT32;
    size_t esz = f32 ? sizeof(float) : sizeof(double);
    for (int64_t b = b0; b < b1; b++) {
        char *o = c->out + (size_t)(b * D) * esz;
        int64_t cnt = 0;
        memset(o, 0, (size_t)D * esz);
        if (c->mode == BAG_MAX) {
            int64_t *mi = c->maxi + b * D;
            for (int64_t j = 0; j < D; j++) mi[j] = 0;
            for (int64_t i = L->start[b]; i < L->start[b + 1]; i++) {
                int64_t r = L->rows[i];
                if (r == L->pad) continue;
                const char *x = c->w + (size_t)(r * c->wrow) * esz;
                for (int64_t j = 0; j < D; j++) {
                    double v = f32 ? ((const float *)x)[j] : ((const double *)x)[j];
                    double cur = f32 ? ((float *)o)[j] : ((double *)o)[j];
                    if (cnt == 0 || v > cur) {
                        if (f32) ((float *)o)[j] = (float)v;
                        else ((double *)o)[j] = v;
                        mi[j] = r + 1;
                    }
                }
                cnt++;
            }
            continue;
        }
        for (int64_t i = L->start[b]; i < L->start[b + 1]; i++) {
            int64_t r = L->rows[i];
            if (i + PF_AHEAD < L->n) prefetch_row(c->w + (size_t)(L->rows[i + PF_AHEAD] * c->wrow) * esz, (size_t)D * esz);
            if (r == L->pad) continue;
            cnt++;
            const char *x = c->w + (size_t)(r * c->wrow) * esz;
            if (f32) axpy_f32((float *)o, (const float *)x, c->psw ? ((const float *)c->psw)[i] : 1.0f, D);
            else axpy_f64((double *)o, (const double *)x, c->psw ? ((const double *)c->psw)[i] : 1.0, D);
        }
        if (c->mode == BAG_MEAN && cnt > 1)
            for (int64_t j = 0; j < D; j++) {
                if (f32) ((float *)o)[j] /= (float)cnt;
                else ((double *)o)[j] /= (double)cnt;
            }
    }
}

static bool weight_ok(const em_tensor *weight, const char *op) {
    if (weight->ndim != 2) {
        char a[EM_SHAPE_STR_MAX];
        em_set_error(EM_ESHAPE, "%s: weight must be 2-d (num_embeddings, embedding_dim), got shape %s", op,
                     em_shape_str(weight->ndim, weight->sizes, a, sizeof a));
        return false;
    }
    if (weight->dtype != EM_FLOAT32 && weight->dtype != EM_FLOAT64 && weight->dtype != EM_FLOAT16) {
        em_set_error(EM_ETYPE, "%s: weight must be float16, float32 or float64, got %s", op,
                     em_dtype_name(weight->dtype));
        return false;
    }
    return true;
}

/* per_sample_weights: only with mode sum, indices' shape, weight's dtype. */
static bool psw_ok(const em_tensor *psw, const em_tensor *indices, const em_tensor *weight, int mode, const char *op) {
    if (!psw) return true;
    if (mode != BAG_SUM) {
        em_set_error(EM_EVALUE, "%s: per_sample_weights is only supported with mode='sum' (got mode='%s')", op,
                     mode == BAG_MEAN ? "mean" : "max");
        return false;
    }
    bool same = psw->ndim == indices->ndim;
    for (int k = 0; same && k < psw->ndim; k++) same = psw->sizes[k] == indices->sizes[k];
    if (!same) {
        char a[EM_SHAPE_STR_MAX], b[EM_SHAPE_STR_MAX];
        em_set_error(EM_ESHAPE, "%s: per_sample_weights %s must have input's shape %s", op,
                     em_shape_str(psw->ndim, psw->sizes, a, sizeof a),
                     em_shape_str(indices->ndim, indices->sizes, b, sizeof b));
        return false;
    }
    if (psw->dtype != weight->dtype) {
        em_set_error(EM_ETYPE, "%s: per_sample_weights (%s) must have weight's dtype (%s)", op,
                     em_dtype_name(psw->dtype), em_dtype_name(weight->dtype));
        return false;
    }
    return true;
}

em_tensor *em_cpu_embedding_bag_dense(em_keyset ks, em_tensor *weight, em_tensor *indices, em_tensor *offsets,
                                      const char *mode, em_tensor *per_sample_weights, const int64_t *padding_idx,
                                      bool include_last_offset, bool scale_grad_by_freq, em_tensor **max_indices) {
    (void)ks;
    const char *op = "embedding_bag";
    *max_indices = NULL;
    int m = bag_mode(mode);
    if (!weight_ok(weight, op) || !psw_ok(per_sample_weights, indices, weight, m, op)) return NULL;
    if (m == BAG_MAX && scale_grad_by_freq) {
        em_set_error(EM_EVALUE, "%s: mode='max' does not support scale_grad_by_freq", op);
        return NULL;
    }
    bag_layout L;
    if (bag_layout_init(&L, indices, offsets, weight->sizes[0], padding_idx, include_last_offset, op) != EM_OK)
        return NULL;
    int64_t D = weight->sizes[1];
    int64_t osz[2] = { L.B, D }, none = 0;
    em_tensor *out = em_tensor_new(2, osz, weight->dtype, weight->device);
    em_tensor *mi = m == BAG_MAX ? em_tensor_new(2, osz, EM_INT64, weight->device)
                                 : em_tensor_new(1, &none, EM_INT64, weight->device);
    /* float16 computes in float32 (exact conversions both ways for max) */
    em_dtype cdt = weight->dtype == EM_FLOAT16 ? EM_FLOAT32 : weight->dtype;
    em_tensor *w = (weight->strides[1] == 1 || D <= 1) && cdt == weight->dtype ? em_tensor_retain(weight)
                                                                             : em_cpu_to_dtype(weight, cdt, op);
    em_tensor *ps = per_sample_weights ? em_cpu_to_dtype(per_sample_weights, cdt, op) : NULL;
    em_tensor *o = cdt == weight->dtype ? em_tensor_retain(out) : em_tensor_new(2, osz, cdt, weight->device);
    bool ok = out && mi && w && o && (!per_sample_weights || ps);
    if (ok && out->numel) {
        fwd_ctx c = { &L, m, cdt, em_tensor_data(w), w->strides[0], D, ps && ps->numel ? em_tensor_data(ps) : NULL,
                      em_tensor_data(o), m == BAG_MAX ? em_tensor_data(mi) : NULL };
        int64_t per_bag = (L.n / (L.B ? L.B : 1) + 1) * D;
        int64_t grain = (int64_t)EM_CPU_GRAIN / (per_bag > 0 ? per_bag : 1);
        em_cpu_parallel_for(L.B, grain > 0 ? grain : 1, fwd_range, &c);
        if (o != out) ok = em_cpu_copy_into(out, o, op) == EM_OK;
    } else if (ok && m == BAG_MAX && mi->numel) {
        memset(em_tensor_data(mi), 0, sizeof(int64_t) * (size_t)mi->numel);
    }
    em_tensor_release(o);
    em_tensor_release(w);
    em_tensor_release(ps);
    layout_free(&L);
    if (!ok) {
        em_tensor_release(out);
        em_tensor_release(mi);
        return NULL;
    }
    *max_indices = mi;
    return out;
}

/* ---- backward ---- */

typedef struct {
    const int64_t *maxi; /* (B, D) */
    const char *g;       /* (B, D) contiguous */
    char *out;           /* (rows, D), zeroed */
    int64_t B, D;
    em_dtype dt;
} maxb_ctx;

/* Columns [j0, j1): each column's gradient goes to the rows its maxima came
 * from, bags in order (columns are disjoint, so no two threads write one
 * element, and the order does not depend on the thread count). */
static void maxb_range(int64_t j0, int64_t j1, void *vc) {
    const maxb_ctx *c = vc;
    for (int64_t b = 0; b < c->B; b++)
        for (int64_t j = j0; j < j1; j++) {
            int64_t r = c->maxi[b * c->D + j];
            if (r <= 0) continue;
            int64_t o = (r - 1) * c->D + j, k = b * c->D + j;
            if (c->dt == EM_FLOAT32) ((float *)c->out)[o] += ((const float *)c->g)[k];
            else ((double *)c->out)[o] += ((const double *)c->g)[k];
        }
}

em_tensor *em_cpu_embedding_bag_dense_backward(em_keyset ks, em_tensor *grad, em_tensor *indices, em_tensor *offsets,
                                               em_tensor *max_indices, int64_t num_weights, const char *mode,
                                               em_tensor *per_sample_weights, const int64_t *padding_idx,
                                               bool include_last_offset, bool scale_grad_by_freq) {
    (void)ks;
    const char *op = "embedding_bag_dense_backward";
    int m = bag_mode(mode);
    if (grad->dtype != EM_FLOAT32 && grad->dtype != EM_FLOAT64 && grad->dtype != EM_FLOAT16) {
        em_set_error(EM_ETYPE, "%s: grad must be float16, float32 or float64, got %s", op, em_dtype_name(grad->dtype));
        return NULL;
    }
    if (num_weights < 0) {
        em_set_error(EM_EVALUE, "%s: num_weights must be >= 0, got %lld", op, (long long)num_weights);
        return NULL;
    }
    bag_layout L;
    if (bag_layout_init(&L, indices, offsets, num_weights, padding_idx, include_last_offset, op) != EM_OK) return NULL;
    em_tensor *out = NULL;
    if (grad->ndim != 2 || grad->sizes[0] != L.B) {
        char a[EM_SHAPE_STR_MAX];
        em_set_error(EM_ESHAPE, "%s: grad %s must be (bags, embedding_dim) with %lld bags", op,
                     em_shape_str(grad->ndim, grad->sizes, a, sizeof a), (long long)L.B);
        layout_free(&L);
        return NULL;
    }
    int64_t D = grad->sizes[1];
    if (m == BAG_MAX) {
        bool shape = max_indices->ndim == 2 && max_indices->sizes[0] == L.B && max_indices->sizes[1] == D &&
                     max_indices->dtype == EM_INT64;
        em_tensor *mi = shape ? em_cpu_to_dtype(max_indices, EM_INT64, op) : NULL;
        em_tensor *g = shape ? em_cpu_to_dtype(grad, grad->dtype == EM_FLOAT16 ? EM_FLOAT32 : grad->dtype, op) : NULL;
        if (!shape) {
            char a[EM_SHAPE_STR_MAX];
            em_set_error(EM_ESHAPE, "%s: max_indices %s must be an int64 (%lld, %lld) tensor in mode='max'", op,
                         em_shape_str(max_indices->ndim, max_indices->sizes, a, sizeof a), (long long)L.B,
                         (long long)D);
        }
        const int64_t *mv = mi && mi->numel ? em_tensor_data(mi) : NULL;
        bool ok = mi && g;
        for (int64_t k = 0; ok && k < mi->numel; k++)
            if (mv[k] < 0 || mv[k] > num_weights) {
                em_set_error(EM_EINDEX, "%s: max index %lld is out of range for %lld rows", op, (long long)mv[k],
                             (long long)num_weights);
                ok = false;
            }
        int64_t wsz[2] = { num_weights, D };
        em_tensor *o = ok ? em_tensor_new(2, wsz, g->dtype, grad->device) : NULL;
        if (o && o->numel) {
            memset(em_tensor_data(o), 0, em_dtype_size(o->dtype) * (size_t)o->numel);
            maxb_ctx c = { mv, L.B ? em_tensor_data(g) : NULL, em_tensor_data(o), L.B, D, g->dtype };
            int64_t grain = (int64_t)EM_CPU_GRAIN / (L.B > 0 ? L.B : 1);
            if (L.B) em_cpu_parallel_for(D, grain > 0 ? grain : 1, maxb_range, &c);
        }
        out = o && grad->dtype == EM_FLOAT16 ? em_cpu_to_dtype(o, EM_FLOAT16, op) : em_tensor_retain(o);
        em_tensor_release(o);
        em_tensor_release(mi);
        em_tensor_release(g);
        layout_free(&L);
        return out;
    }
    /* sum/mean: position i of bag b adds grad[b] * psw[i] (/ the bag's size) */
    if (per_sample_weights && !psw_ok(per_sample_weights, indices, grad, m, op)) {
        layout_free(&L);
        return NULL;
    }
    int64_t *rows = malloc(sizeof *rows * (size_t)(L.n ? L.n : 1));
    int64_t *src = malloc(sizeof *src * (size_t)(L.n ? L.n : 1));
    double *fac = malloc(sizeof *fac * (size_t)(L.n ? L.n : 1));
    em_tensor *ps = per_sample_weights ? em_cpu_to_dtype(per_sample_weights, EM_FLOAT64, op) : NULL;
    em_tensor *g = grad->is_contiguous ? em_tensor_retain(grad) : em_cpu_to_dtype(grad, grad->dtype, op);
    if (!rows || !src || !fac) em_set_error(EM_ENOMEM, "%s: out of memory", op);
    if (rows && src && fac && g && (!per_sample_weights || ps)) {
        const double *pv = ps && ps->numel ? em_tensor_data(ps) : NULL;
        int64_t m_ = 0;
        for (int64_t b = 0; b < L.B; b++) {
            int64_t cnt = 0;
            for (int64_t i = L.start[b]; i < L.start[b + 1]; i++) cnt += L.rows[i] != L.pad;
            for (int64_t i = L.start[b]; i < L.start[b + 1]; i++) {
                if (L.rows[i] == L.pad) continue;
                rows[m_] = L.rows[i];
                src[m_] = b;
                fac[m_] = (pv ? pv[i] : 1.0) / (m == BAG_MEAN ? (double)cnt : 1.0);
                m_++;
            }
        }
        out = em_cpu_embed_dense_grad(g, rows, src, fac, m_, num_weights, D, -1, scale_grad_by_freq, op);
    }
    free(rows);
    free(src);
    free(fac);
    em_tensor_release(ps);
    em_tensor_release(g);
    layout_free(&L);
    return out;
}

em_tensor *em_cpu_embedding_bag_per_sample_weights_backward(em_keyset ks, em_tensor *grad, em_tensor *weight,
                                                            em_tensor *indices, em_tensor *offsets, const char *mode,
                                                            const int64_t *padding_idx, bool include_last_offset) {
    (void)ks;
    const char *op = "embedding_bag_per_sample_weights_backward";
    if (bag_mode(mode) != BAG_SUM) {
        em_set_error(EM_EVALUE, "%s: per_sample_weights have a gradient only with mode='sum' (got '%s')", op, mode);
        return NULL;
    }
    if (!weight_ok(weight, op)) return NULL;
    bag_layout L;
    if (bag_layout_init(&L, indices, offsets, weight->sizes[0], padding_idx, include_last_offset, op) != EM_OK)
        return NULL;
    int64_t D = weight->sizes[1];
    if (grad->ndim != 2 || grad->sizes[0] != L.B || grad->sizes[1] != D) {
        char a[EM_SHAPE_STR_MAX];
        em_set_error(EM_ESHAPE, "%s: grad %s must be (%lld, %lld)", op, em_shape_str(grad->ndim, grad->sizes, a, sizeof a),
                     (long long)L.B, (long long)D);
        layout_free(&L);
        return NULL;
    }
    em_tensor *g = em_cpu_to_dtype(grad, EM_FLOAT64, op);
    int64_t n = L.n;
    em_tensor *r64 = g ? em_tensor_new(1, &n, EM_FLOAT64, weight->device) : NULL;
    if (r64 && n) {
        /* each dot product in float64, reading weight's rows where they are */
        double *rv = em_tensor_data(r64);
        const double *gv = L.B && D ? em_tensor_data(g) : NULL;
        const char *wv = weight->numel ? em_tensor_data(weight) : NULL;
        size_t esz = em_dtype_size(weight->dtype);
        for (int64_t i = 0; i < n; i++) rv[i] = 0;
        for (int64_t b = 0; b < L.B; b++)
            for (int64_t i = L.start[b]; i < L.start[b + 1]; i++) {
                if (L.rows[i] == L.pad || !D) continue;
                const char *x = wv + (size_t)(L.rows[i] * weight->strides[0]) * esz;
                double s = 0;
                for (int64_t j = 0; j < D; j++)
                    s += gv[b * D + j] * em_load_as_double(x + (size_t)(j * weight->strides[1]) * esz, weight->dtype);
                rv[i] = s;
            }
    }
    em_tensor *out = r64 ? em_cpu_to_dtype(r64, weight->dtype, op) : NULL;
    em_tensor_release(g);
    em_tensor_release(r64);
    layout_free(&L);
    return out;
}
