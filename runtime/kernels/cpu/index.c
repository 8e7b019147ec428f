/* index.c -- CPU kernels of the index family (schema/ops/index.yaml):
 * index_select/add/copy/fill, masked_fill/select/scatter, scatter and
 * scatter_add, nonzero, take, one_hot.
 *
 * Note [Index family] (schema/ops/index.yaml): index values are 1-based
 * int64 (int32 also for the index_* ops, as in PyTorch); a value out of
 * range is an EM_EINDEX error naming the op, the value and the valid range,
 * raised before an in-place op writes anything. Masks are bool tensors.
 * The out-of-place ops copy self and run the in-place walk on the copy; the
 * in-place ones refuse a self whose elements share memory (an expanded
 * tensor), as PyTorch does, except the fills (masked_fill_, index_fill_),
 * which PyTorch 1.13 still allows there.
 *
 * Two walks do the work: dim_walk (the index_* ops: a 1-d index along one
 * dim, whole slices moved; the trailing dims that are contiguous for both
 * tensors merge into one inner row, so a contiguous problem runs as
 * memcpy or one tight loop per row) and scatter_walk (scatter/scatter_add:
 * an index of the data's rank, one element per index element).
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/cpu/em_cpu.h"
#include "em_kernels_decl.h"

/* O3 vectorizes the row loops (index_add's rows, the range checks), as in binary.c. */
#pragma GCC optimize("O3")

/* ---- index values ---- */

/* Maps a 1-based value (negative from the end when allow_neg) into [0, n);
 * false when out of range. */
static inline bool pos_of(int64_t v, int64_t n, bool allow_neg, int64_t *out) {
    int64_t p = v > 0 ? v - 1 : (allow_neg && v < 0 ? v + n : -1);
    if (p < 0 || p >= n) return false;
    *out = p;
    return true;
}

/* The message of sort.c's gather before it, so one voice for every index
 * op: "op: index V is out of bounds for dim D with size N (indices are
 * 1-based); valid: 1..N" (and -N..-1 where negative values count from the end). */
static em_status range_error(const char *op, int64_t v, int dim, int64_t n, bool allow_neg) {
    if (n == 0)
        return em_set_error(EM_EINDEX, "%s: index %lld is out of bounds for dim %d with size 0 (it has no elements)",
                            op, (long long)v, dim + 1);
    if (allow_neg)
        return em_set_error(EM_EINDEX, "%s: index %lld is out of bounds for dim %d with size %lld (indices are "
                            "1-based); valid: 1..%lld or -%lld..-1", op, (long long)v, dim + 1, (long long)n,
                            (long long)n, (long long)n);
    return em_set_error(EM_EINDEX, "%s: index %lld is out of bounds for dim %d with size %lld (indices are 1-based); "
                        "valid: 1..%lld", op, (long long)v, dim + 1, (long long)n, (long long)n);
}

/* index as a contiguous int64 tensor (a new reference): itself when it is
 * one, else a converted copy. Refuses other dtypes than int64 (and int32
 * when int32_ok). */
static em_tensor *index_as_i64(const em_tensor *index, bool int32_ok, const char *op, const char *what) {
    if (index->dtype != EM_INT64 && !(int32_ok && index->dtype == EM_INT32)) {
        em_set_error(EM_ETYPE, "%s: %s must be an int64%s tensor, got %s", op, what, int32_ok ? " or int32" : "",
                     em_dtype_name(index->dtype));
        return NULL;
    }
    if (index->dtype == EM_INT64 && index->is_contiguous) return em_tensor_retain((em_tensor *)index);
    return em_cpu_to_dtype(index, EM_INT64, op);
}

/* The 0-based positions of index's values into a dim of size n, in a new
 * malloc'd array of index->numel entries (never NULL on success, even when
 * empty); NULL with the error set on a bad value (see range_error). */
static int64_t *positions(const em_tensor *index, int64_t n, bool allow_neg, int dim, bool int32_ok,
                          const char *op, const char *what) {
    em_tensor *c = index_as_i64(index, int32_ok, op, what);
    if (!c) return NULL;
    int64_t *p = malloc(sizeof *p * (size_t)(index->numel ? index->numel : 1));
    if (!p) {
        em_tensor_release(c);
        em_set_error(EM_ENOMEM, "%s: out of memory", op);
        return NULL;
    }
    const int64_t *v = em_tensor_data(c);
    for (int64_t i = 0; i < index->numel; i++)
        if (!pos_of(v[i], n, allow_neg, &p[i])) {
            range_error(op, v[i], dim, n, allow_neg);
            free(p);
            em_tensor_release(c);
            return NULL;
        }
    em_tensor_release(c);
    return p;
}

/* A new contiguous copy of t with t's shape (or the given shape, to which t
 * broadcasts). */
static em_tensor *copy_of(const em_tensor *t, int ndim, const int64_t *sizes, const char *op) {
    em_tensor *r = em_tensor_new(ndim, sizes, t->dtype, t->device);
    if (r && em_cpu_copy_into(r, t, op) != EM_OK) {
        em_tensor_release(r);
        return NULL;
    }
    return r;
}

/* The value of a 0-dim tensor converted to dtype, as bytes in buf. */
static em_status value_bytes(const em_tensor *value, em_dtype dtype, char *buf, const char *op) {
    if (value->ndim != 0)
        return em_set_error(EM_ESHAPE, "%s: value must be a number or a 0-dim tensor, got a tensor with %d dim%s",
                            op, value->ndim, value->ndim == 1 ? "" : "s");
    const void *p = em_tensor_data(value);
    if (em_dtype_is_floating(value->dtype))
        em_store_from_double(buf, dtype, em_load_as_double(p, value->dtype));
    else
        em_store_from_int64(buf, dtype, em_load_as_int64(p, value->dtype));
    return EM_OK;
}

static em_status check_same_dtype(const em_tensor *self, const em_tensor *other, const char *op, const char *what) {
    if (self->dtype == other->dtype) return EM_OK;
    return em_set_error(EM_ETYPE, "%s: self (%s) and %s (%s) must have the same dtype", op,
                        em_dtype_name(self->dtype), what, em_dtype_name(other->dtype));
}

/* ---- dim_walk: slices along one dim ---- */

typedef enum { DW_SELECT, DW_COPY, DW_ADD, DW_FILL } dw_kind;

/* t: the tensor indexed along dim (self); o: the other one (index_select's
 * result, index_add/index_copy's source; unused by fill), whose size in dim
 * is n = the number of positions. Strides in elements. */
typedef struct {
    dw_kind kind;
    em_dtype dtype;
    int64_t es;
    char *t, *o;
    int nd, dim;
    int64_t sizes[EM_MAX_DIMS]; /* the iteration shape: t's with n in dim */
    int64_t tst[EM_MAX_DIMS], ost[EM_MAX_DIMS];
    const int64_t *pos;
    int64_t n;
    int nouter;                 /* outer dims (all but dim and the inner row) */
    int outer[EM_MAX_DIMS];
    int64_t L, ti, oi;          /* the inner row: length, strides */
    double alpha_f;
    uint64_t alpha_i;
    _Alignas(16) char value[16];
} dim_walk;

#define ALPHA_b(w) ((w)->alpha_i)
#define ALPHA_u8(w) ((w)->alpha_i)
#define ALPHA_i8(w) ((w)->alpha_i)
#define ALPHA_i32(w) ((w)->alpha_i)
#define ALPHA_i64(w) ((w)->alpha_i)
#define ALPHA_f16(w) ((float)(w)->alpha_f)
#define ALPHA_bf16(w) ((float)(w)->alpha_f)
#define ALPHA_f32(w) ((float)(w)->alpha_f)
#define ALPHA_f64(w) ((w)->alpha_f)

/* Copies L elements of es bytes from s (stride si) to d (stride di). */
static inline void copy_row(char *d, int64_t di, const char *s, int64_t si, int64_t L, int64_t es) {
    if (di == 1 && si == 1) {
        memcpy(d, s, (size_t)(L * es));
        return;
    }
    switch (es) {
    case 1: for (int64_t k = 0; k < L; k++) d[k * di] = s[k * si]; break;
    case 2: for (int64_t k = 0; k < L; k++) ((uint16_t *)d)[k * di] = ((const uint16_t *)s)[k * si]; break;
    case 4: for (int64_t k = 0; k < L; k++) ((uint32_t *)d)[k * di] = ((const uint32_t *)s)[k * si]; break;
    default: for (int64_t k = 0; k < L; k++) ((uint64_t *)d)[k * di] = ((const uint64_t *)s)[k * si]; break;
    }
}

static inline void fill_row(char *d, int64_t di, const char *v, int64_t L, int64_t es) {
    switch (es) {
    case 1: for (int64_t k = 0; k < L; k++) d[k * di] = v[0]; break;
    case 2: { uint16_t x; memcpy(&x, v, 2); for (int64_t k = 0; k < L; k++) ((uint16_t *)d)[k * di] = x; } break;
    case 4: { uint32_t x; memcpy(&x, v, 4); for (int64_t k = 0; k < L; k++) ((uint32_t *)d)[k * di] = x; } break;
    default: { uint64_t x; memcpy(&x, v, 8); for (int64_t k = 0; k < L; k++) ((uint64_t *)d)[k * di] = x; } break;
    }
}

#define DW_ADD_ROW(n, T, E) \
    CLONE_##n static void add_row_##n(const dim_walk *w, char *d, const char *s) { \
        T *restrict dp = (T *)d; /* source never shares self's memory (index_write copies it) */ \
        const T *restrict sp = (const T *)s; \
        int64_t di = w->ti, si = w->oi; \
        if (di == 1 && si == 1) { \
            for (int64_t k = 0; k < w->L; k++) dp[k] = EM_ST_##n(LA_##n(dp[k]) + ALPHA_##n(w) * LA_##n(sp[k])); \
        } else { \
            for (int64_t k = 0; k < w->L; k++) \
                dp[k * di] = EM_ST_##n(LA_##n(dp[k * di]) + ALPHA_##n(w) * LA_##n(sp[k * si])); \
        } \
    }
EM_CPU_TYPES(DW_ADD_ROW)

typedef void (*dw_add_fn)(const dim_walk *w, char *d, const char *s);
static dw_add_fn add_row_for(em_dtype t) {
    switch (t) {
#define X(n, T, E) case E: return add_row_##n;
        EM_CPU_TYPES(X)
#undef X
    default: return NULL;
    }
}

/* Runs the j loop (positions b..e-1) at outer offsets (toff, ooff). */
#define DW_PICK(T) \
    do { \
        const T *tp = (const T *)w->t + toff; \
        T *op = (T *)w->o + ooff; \
        for (int64_t j = b; j < e; j++) op[j * osd] = tp[w->pos[j] * tsd]; \
    } while (0)

static void dw_slices(const dim_walk *w, int64_t toff, int64_t ooff, int64_t b, int64_t e, dw_add_fn add) {
    int64_t es = w->es, tsd = w->tst[w->dim], osd = w->ost[w->dim];
    if (w->kind == DW_SELECT && w->L == 1) { /* dim is the innermost: one element per position */
        switch (es) {
        case 1: DW_PICK(uint8_t); return;
        case 2: DW_PICK(uint16_t); return;
        case 4: DW_PICK(uint32_t); return;
        default: DW_PICK(uint64_t); return;
        }
    }
    for (int64_t j = b; j < e; j++) {
        char *tp = w->t + (toff + w->pos[j] * tsd) * es;
        char *op = w->o ? w->o + (ooff + j * osd) * es : NULL;
        switch (w->kind) {
        case DW_SELECT: copy_row(op, w->oi, tp, w->ti, w->L, es); break;
        case DW_COPY: copy_row(tp, w->ti, op, w->oi, w->L, es); break;
        case DW_ADD: add(w, tp, op); break;
        case DW_FILL: fill_row(tp, w->ti, w->value, w->L, es); break;
        }
    }
}

/* Offsets of outer position p (row-major over the outer dims). */
static void dw_unravel(const dim_walk *w, int64_t p, int64_t *c, int64_t *toff, int64_t *ooff) {
    *toff = *ooff = 0;
    for (int k = w->nouter - 1; k >= 0; k--) {
        int d = w->outer[k];
        c[k] = p % w->sizes[d];
        p /= w->sizes[d];
        *toff += c[k] * w->tst[d];
        *ooff += c[k] * w->ost[d];
    }
}

typedef struct {
    const dim_walk *w;
    bool over_j; /* chunks are ranges of positions j (else of outer positions) */
    int64_t nouter_pos;
} dw_ctx;

static void dw_range(int64_t b, int64_t e, void *p) {
    const dw_ctx *c = p;
    const dim_walk *w = c->w;
    dw_add_fn add = w->kind == DW_ADD ? add_row_for(w->dtype) : NULL;
    int64_t coord[EM_MAX_DIMS], toff, ooff;
    if (c->over_j) {
        dw_unravel(w, 0, coord, &toff, &ooff);
        for (int64_t q = 0; q < c->nouter_pos; q++) {
            dw_slices(w, toff, ooff, b, e, add);
            for (int k = w->nouter - 1; k >= 0; k--) { /* odometer */
                int d = w->outer[k];
                if (++coord[k] < w->sizes[d]) { toff += w->tst[d]; ooff += w->ost[d]; break; }
                toff -= w->tst[d] * (w->sizes[d] - 1);
                ooff -= w->ost[d] * (w->sizes[d] - 1);
                coord[k] = 0;
            }
        }
        return;
    }
    dw_unravel(w, b, coord, &toff, &ooff);
    for (int64_t q = b; q < e; q++) {
        dw_slices(w, toff, ooff, 0, w->n, add);
        for (int k = w->nouter - 1; k >= 0; k--) {
            int d = w->outer[k];
            if (++coord[k] < w->sizes[d]) { toff += w->tst[d]; ooff += w->ost[d]; break; }
            toff -= w->tst[d] * (w->sizes[d] - 1);
            ooff -= w->ost[d] * (w->sizes[d] - 1);
            coord[k] = 0;
        }
    }
}

/* Sets up and runs the walk. t: self (0-dim acts as 1-d of size 1); o:
 * the other tensor (t's shape with n in dim; NULL for fill); d: dim,
 * already wrapped. Parallel over outer positions, or for select (whose
 * writes never collide) over positions j when there are few outer ones.
 * Select writes a tensor its caller made and stops at an interrupt (the
 * caller then checks em_cpu_interrupted: Note [Interrupts in kernels], way
 * (b)); the in-place kinds always finish. */
static void dim_walk_run(dw_kind kind, em_tensor *t, em_tensor *o, int d, const int64_t *pos, int64_t n,
                         dim_walk *w) {
    w->kind = kind;
    w->dtype = t->dtype;
    w->es = (int64_t)em_dtype_size(t->dtype);
    w->t = em_tensor_data(t);
    w->o = o ? em_tensor_data(o) : NULL;
    w->nd = t->ndim ? t->ndim : 1;
    w->dim = d;
    w->pos = pos;
    w->n = n;
    for (int k = 0; k < w->nd; k++) {
        w->sizes[k] = t->ndim ? t->sizes[k] : 1;
        w->tst[k] = t->ndim ? t->strides[k] : 1;
        w->ost[k] = o && o->ndim ? o->strides[k] : (o ? 1 : 0);
    }
    w->sizes[d] = n;
    /* the inner row: trailing dims after dim, merged while contiguous for both */
    int start = w->nd;
    w->L = 1;
    w->ti = w->oi = 1;
    if (d < w->nd - 1) {
        start = w->nd - 1;
        w->L = w->sizes[start];
        w->ti = w->tst[start];
        w->oi = w->ost[start];
        while (start - 1 > d && w->tst[start - 1] == w->ti * w->L && w->ost[start - 1] == w->oi * w->L) {
            start--;
            w->L *= w->sizes[start];
        }
    }
    w->nouter = 0;
    int64_t nouter_pos = 1;
    for (int k = 0; k < start; k++)
        if (k != d) {
            w->outer[w->nouter++] = k;
            nouter_pos *= w->sizes[k];
        }
    if (nouter_pos == 0 || n == 0 || w->L == 0) return;
    int64_t work = nouter_pos * n * w->L;
    int64_t grain = (int64_t)EM_CPU_GRAIN / (n * w->L > 0 ? n * w->L : 1);
    dw_ctx c = { w, false, nouter_pos };
    if (kind == DW_SELECT && nouter_pos < 4 && work >= EM_CPU_GRAIN) {
        c.over_j = true;
        int64_t g = (int64_t)EM_CPU_GRAIN / (nouter_pos * w->L);
        em_cpu_parallel_for_stoppable(n, g > 0 ? g : 1, dw_range, &c);
        return;
    }
    if (kind == DW_SELECT) em_cpu_parallel_for_stoppable(nouter_pos, grain > 0 ? grain : 1, dw_range, &c);
    else em_cpu_parallel_for(nouter_pos, grain > 0 ? grain : 1, dw_range, &c);
}

/* Checks index (0/1-d) and returns the wrapped dim of self, or -1. */
static int check_dim_index(const em_tensor *self, int64_t dim, const em_tensor *index, const char *op) {
    int d = em_wrap_dim(dim, self->ndim, op);
    if (d < 0) return -1;
    if (index->ndim > 1) {
        em_set_error(EM_ESHAPE, "%s: index must be a 1-d tensor (or 0-dim), got one with %d dims", op, index->ndim);
        return -1;
    }
    return d;
}

/* source (index_add/index_copy) must be self's shape with index's length in dim. */
static em_status check_source(const em_tensor *self, int d, const em_tensor *index, const em_tensor *source,
                              const char *op) {
    if (check_same_dtype(self, source, op, "source") != EM_OK) return EM_ETYPE;
    int sn = self->ndim ? self->ndim : 1, on = source->ndim ? source->ndim : 1;
    bool ok = sn == on;
    for (int k = 0; ok && k < sn; k++) {
        int64_t a = self->ndim ? self->sizes[k] : 1, b = source->ndim ? source->sizes[k] : 1;
        ok = k == d ? b == index->numel : a == b;
    }
    if (ok) return EM_OK;
    char a[EM_SHAPE_STR_MAX], b[EM_SHAPE_STR_MAX];
    return em_set_error(EM_ESHAPE, "%s: source %s must have self's shape %s with the index's length %lld in dim %d",
                        op, em_shape_str(source->ndim, source->sizes, a, sizeof a),
                        em_shape_str(self->ndim, self->sizes, b, sizeof b), (long long)index->numel, d + 1);
}

em_tensor *em_cpu_index_select(em_keyset ks, em_tensor *self, int64_t dim, em_tensor *index) {
    (void)ks;
    const char *op = "index_select";
    int d = check_dim_index(self, dim, index, op);
    if (d < 0) return NULL;
    int64_t size = self->ndim ? self->sizes[d] : 1;
    int64_t *pos = positions(index, size, false, d, true, op, "index");
    if (!pos) return NULL;
    int64_t sizes[EM_MAX_DIMS];
    for (int k = 0; k < self->ndim; k++) sizes[k] = self->sizes[k];
    if (self->ndim) sizes[d] = index->numel;
    em_tensor *out = NULL;
    if (self->ndim == 0 && index->numel != 1)
        em_set_error(EM_ESHAPE, "%s: a 0-dim self takes an index of one element, got %lld", op,
                     (long long)index->numel);
    else
        out = em_tensor_new(self->ndim, sizes, self->dtype, self->device);
    if (out) {
        dim_walk w;
        dim_walk_run(DW_SELECT, self, out, d, pos, index->numel, &w);
        if (em_cpu_interrupted(op)) {
            em_tensor_release(out);
            out = NULL;
        }
    }
    free(pos);
    return out;
}

/* The in-place index_* ops on self (which the out-of-place ones copy first). */
static em_tensor *index_write(dw_kind kind, em_tensor *self, int64_t dim, em_tensor *index, em_tensor *source,
                              em_tensor *value, em_scalar alpha, const char *op) {
    /* fill writes one value: PyTorch allows it on an expanded self (deprecated) */
    if (kind != DW_FILL && em_core_check_no_internal_overlap(self, op) != EM_OK) return NULL;
    int d = check_dim_index(self, dim, index, op);
    if (d < 0) return NULL;
    dim_walk w;
    memset(&w, 0, sizeof w);
    if (source && check_source(self, d, index, source, op) != EM_OK) return NULL;
    if (value && value_bytes(value, self->dtype, w.value, op) != EM_OK) return NULL;
    if (kind == DW_ADD) {
        w.alpha_f = em_scalar_to_double(alpha);
        w.alpha_i = (uint64_t)em_scalar_to_int(alpha);
        if (alpha.kind == EM_SCALAR_FLOAT && !em_dtype_is_floating(self->dtype) && alpha.v.d != floor(alpha.v.d)) {
            em_set_error(EM_ETYPE, "%s: alpha %g must be an integer for an integral self (%s)", op, alpha.v.d,
                         em_dtype_name(self->dtype));
            return NULL;
        }
    }
    int64_t size = self->ndim ? self->sizes[d] : 1;
    int64_t *pos = positions(index, size, false, d, true, op, "index");
    if (!pos) return NULL;
    em_tensor *src = source;
    if (src && src->storage == self->storage) src = copy_of(source, source->ndim, source->sizes, op);
    if (src || !source) dim_walk_run(kind, self, src, d, pos, index->numel, &w);
    if (src != source) em_tensor_release(src);
    free(pos);
    if (source && !src) return NULL;
    em_tensor_bump_version(self);
    return em_tensor_retain(self);
}

/* A contiguous copy of self to write into, for the out-of-place ops. */
static em_tensor *out_copy(em_tensor *self, const char *op) { return copy_of(self, self->ndim, self->sizes, op); }

#define OUT_OF_PLACE(call) \
    do { \
        em_tensor *out = out_copy(self, op); \
        if (!out) return NULL; \
        em_tensor *r = (call); \
        em_tensor_release(out); \
        return r; \
    } while (0)

em_tensor *em_cpu_index_add_(em_keyset ks, em_tensor *self, int64_t dim, em_tensor *index, em_tensor *source,
                             em_scalar alpha) {
    (void)ks;
    return index_write(DW_ADD, self, dim, index, source, NULL, alpha, "index_add_");
}
em_tensor *em_cpu_index_add(em_keyset ks, em_tensor *self, int64_t dim, em_tensor *index, em_tensor *source,
                            em_scalar alpha) {
    (void)ks;
    const char *op = "index_add";
    OUT_OF_PLACE(index_write(DW_ADD, out, dim, index, source, NULL, alpha, op));
}
em_tensor *em_cpu_index_copy_(em_keyset ks, em_tensor *self, int64_t dim, em_tensor *index, em_tensor *source) {
    (void)ks;
    return index_write(DW_COPY, self, dim, index, source, NULL, em_scalar_int(1), "index_copy_");
}
em_tensor *em_cpu_index_copy(em_keyset ks, em_tensor *self, int64_t dim, em_tensor *index, em_tensor *source) {
    (void)ks;
    const char *op = "index_copy";
    OUT_OF_PLACE(index_write(DW_COPY, out, dim, index, source, NULL, em_scalar_int(1), op));
}
em_tensor *em_cpu_index_fill_(em_keyset ks, em_tensor *self, int64_t dim, em_tensor *index, em_tensor *value) {
    (void)ks;
    return index_write(DW_FILL, self, dim, index, NULL, value, em_scalar_int(1), "index_fill_");
}
em_tensor *em_cpu_index_fill(em_keyset ks, em_tensor *self, int64_t dim, em_tensor *index, em_tensor *value) {
    (void)ks;
    const char *op = "index_fill";
    OUT_OF_PLACE(index_write(DW_FILL, out, dim, index, NULL, value, em_scalar_int(1), op));
}

/* ---- masks ---- */

static em_status check_mask(const em_tensor *mask, const char *op) {
    if (mask->dtype == EM_BOOL) return EM_OK;
    return em_set_error(EM_ETYPE, "%s: mask must be a bool tensor, got %s", op, em_dtype_name(mask->dtype));
}

/* mask must broadcast to self's shape (an in-place op cannot grow self). */
static em_status check_mask_to_self(const em_tensor *self, const em_tensor *mask, const char *op) {
    int64_t shape[EM_MAX_DIMS];
    int n = em_broadcast_shapes(self->ndim, self->sizes, mask->ndim, mask->sizes, shape, op);
    if (n < 0) return EM_ESHAPE;
    bool same = n == self->ndim;
    for (int k = 0; same && k < n; k++) same = shape[k] == self->sizes[k];
    if (same) return EM_OK;
    char a[EM_SHAPE_STR_MAX], b[EM_SHAPE_STR_MAX];
    return em_set_error(EM_ESHAPE, "%s: mask %s does not broadcast to self's shape %s", op,
                        em_shape_str(mask->ndim, mask->sizes, a, sizeof a),
                        em_shape_str(self->ndim, self->sizes, b, sizeof b));
}

typedef struct {
    char value[16];
    size_t es;
} mfill_ctx;

static void mfill_loop(char **data, const int64_t *strides, int64_t n, void *p) {
    const mfill_ctx *c = p;
    char *d = data[0];
    const char *m = data[1];
    for (int64_t i = 0; i < n; i++)
        if (*(const bool *)(m + i * strides[1])) memcpy(d + i * strides[0], c->value, c->es);
}

static em_tensor *masked_fill_into(em_tensor *self, em_tensor *mask, em_tensor *value, const char *op) {
    if (check_mask(mask, op) != EM_OK || check_mask_to_self(self, mask, op) != EM_OK) return NULL;
    mfill_ctx c;
    c.es = em_dtype_size(self->dtype);
    if (value_bytes(value, self->dtype, c.value, op) != EM_OK) return NULL;
    em_cpu_iter it;
    em_tensor *in[1] = { mask };
    em_tensor *r = em_cpu_iter_build(&it, self, self->dtype, 1, in, EM_DTYPE_NONE, op);
    if (r) em_cpu_iter_run(&it, mfill_loop, &c, EM_CPU_GRAIN);
    em_cpu_iter_done(&it);
    if (!r) return NULL;
    em_tensor_bump_version(self);
    return r;
}

em_tensor *em_cpu_masked_fill_(em_keyset ks, em_tensor *self, em_tensor *mask, em_tensor *value) {
    (void)ks;
    return masked_fill_into(self, mask, value, "masked_fill_");
}

/* A contiguous copy of self broadcast with mask (checked): what the
 * out-of-place masked ops write into. NULL on error. */
static em_tensor *copy_broadcast_with_mask(em_tensor *self, em_tensor *mask, const char *op) {
    if (check_mask(mask, op) != EM_OK) return NULL;
    int64_t shape[EM_MAX_DIMS];
    int n = em_broadcast_shapes(self->ndim, self->sizes, mask->ndim, mask->sizes, shape, op);
    return n < 0 ? NULL : copy_of(self, n, shape, op);
}

em_tensor *em_cpu_masked_fill(em_keyset ks, em_tensor *self, em_tensor *mask, em_tensor *value) {
    (void)ks;
    em_tensor *out = copy_broadcast_with_mask(self, mask, "masked_fill");
    em_tensor *r = out ? masked_fill_into(out, mask, value, "masked_fill") : NULL;
    em_tensor_release(out);
    return r;
}

/* self and mask broadcast together, as contiguous copies (*s, *m); the
 * number of true elements. -1 on error. */
static int64_t broadcast_pair(em_tensor *self, em_tensor *mask, em_tensor **s, em_tensor **m, const char *op) {
    *m = NULL;
    *s = copy_broadcast_with_mask(self, mask, op);
    *m = *s ? copy_of(mask, (*s)->ndim, (*s)->sizes, op) : NULL;
    if (!*m) {
        em_tensor_release(*s);
        *s = NULL;
        return -1;
    }
    const bool *mb = em_tensor_data(*m);
    int64_t count = 0;
    for (int64_t i = 0; i < (*m)->numel; i++) count += mb[i];
    return count;
}

em_tensor *em_cpu_masked_select(em_keyset ks, em_tensor *self, em_tensor *mask) {
    (void)ks;
    const char *op = "masked_select";
    em_tensor *s, *m;
    int64_t count = broadcast_pair(self, mask, &s, &m, op);
    if (count < 0) return NULL;
    em_tensor *out = em_tensor_new(1, &count, self->dtype, self->device);
    if (out) {
        size_t es = em_dtype_size(self->dtype);
        const bool *mb = em_tensor_data(m);
        const char *sp = em_tensor_data(s);
        char *op_ = em_tensor_data(out);
        for (int64_t i = 0; i < m->numel; i++)
            if (mb[i]) {
                memcpy(op_, sp + i * (int64_t)es, es);
                op_ += es;
            }
    }
    em_tensor_release(s);
    em_tensor_release(m);
    return out;
}

/* masked_scatter into self: source's elements in row-major order go where
 * mask (broadcast to self) is true. */
static em_tensor *masked_scatter_into(em_tensor *self, em_tensor *mask, em_tensor *source, const char *op) {
    if (em_core_check_no_internal_overlap(self, op) != EM_OK) return NULL;
    if (check_mask(mask, op) != EM_OK || check_mask_to_self(self, mask, op) != EM_OK ||
        check_same_dtype(self, source, op, "source") != EM_OK)
        return NULL;
    em_tensor *m = copy_of(mask, self->ndim, self->sizes, op);
    if (!m) return NULL;
    const bool *mb = em_tensor_data(m);
    int64_t count = 0;
    for (int64_t i = 0; i < m->numel; i++) count += mb[i];
    if (count > source->numel) {
        em_tensor_release(m);
        em_set_error(EM_ESHAPE, "%s: source has %lld elements, fewer than the mask's %lld true ones", op,
                     (long long)source->numel, (long long)count);
        return NULL;
    }
    em_tensor *src = copy_of(source, source->ndim, source->sizes, op);
    em_tensor *dst = !src ? NULL : self->is_contiguous ? em_tensor_retain(self) : out_copy(self, op);
    if (dst) {
        size_t es = em_dtype_size(self->dtype);
        const char *sp = em_tensor_data(src);
        char *dp = em_tensor_data(dst);
        for (int64_t i = 0; i < m->numel; i++)
            if (mb[i]) {
                memcpy(dp + i * (int64_t)es, sp, es);
                sp += es;
            }
    }
    em_status st = dst ? EM_OK : EM_ENOMEM;
    if (dst && dst != self) st = em_cpu_copy_into(self, dst, op);
    em_tensor_release(dst);
    em_tensor_release(src);
    em_tensor_release(m);
    if (!dst || st != EM_OK) return NULL;
    em_tensor_bump_version(self);
    return em_tensor_retain(self);
}

em_tensor *em_cpu_masked_scatter_(em_keyset ks, em_tensor *self, em_tensor *mask, em_tensor *source) {
    (void)ks;
    return masked_scatter_into(self, mask, source, "masked_scatter_");
}

em_tensor *em_cpu_masked_scatter(em_keyset ks, em_tensor *self, em_tensor *mask, em_tensor *source) {
    (void)ks;
    em_tensor *out = copy_broadcast_with_mask(self, mask, "masked_scatter");
    em_tensor *r = out ? masked_scatter_into(out, mask, source, "masked_scatter") : NULL;
    em_tensor_release(out);
    return r;
}

/* ---- scatter_walk: one element per index element ---- */

typedef enum { SC_COPY, SC_ADD, SC_MUL } sc_kind;

/* Checks index against self (and src when given) as PyTorch's scatter
 * does: same number of dims (0-dim counts as 1), index no larger than src
 * in every dim and than self in every dim but dim. */
static em_status check_scatter_shapes(const em_tensor *self, int d, const em_tensor *index, const em_tensor *src,
                                      const char *op) {
    if (index->dtype != EM_INT64)
        return em_set_error(EM_ETYPE, "%s: index must be an int64 tensor, got %s", op, em_dtype_name(index->dtype));
    int sn = self->ndim ? self->ndim : 1, in = index->ndim ? index->ndim : 1;
    char a[EM_SHAPE_STR_MAX], b[EM_SHAPE_STR_MAX], c[EM_SHAPE_STR_MAX];
    if (index->numel == 0) return EM_OK;
    if (sn != in || (src && (src->ndim ? src->ndim : 1) != in)) {
        if (src)
            return em_set_error(EM_ESHAPE, "%s: index %s, self %s and src %s must have the same number of dims", op,
                                em_shape_str(index->ndim, index->sizes, a, sizeof a),
                                em_shape_str(self->ndim, self->sizes, b, sizeof b),
                                em_shape_str(src->ndim, src->sizes, c, sizeof c));
        return em_set_error(EM_ESHAPE, "%s: index %s and self %s must have the same number of dims", op,
                            em_shape_str(index->ndim, index->sizes, a, sizeof a),
                            em_shape_str(self->ndim, self->sizes, b, sizeof b));
    }
    for (int k = 0; k < in; k++) {
        int64_t i = index->ndim ? index->sizes[k] : 1;
        if (k != d && i > (self->ndim ? self->sizes[k] : 1))
            return em_set_error(EM_ESHAPE, "%s: index %s is larger than self %s in dim %d (only dim %d may be larger)",
                                op, em_shape_str(index->ndim, index->sizes, a, sizeof a),
                                em_shape_str(self->ndim, self->sizes, b, sizeof b), k + 1, d + 1);
        if (src && i > (src->ndim ? src->sizes[k] : 1))
            return em_set_error(EM_ESHAPE, "%s: index %s is larger than src %s in dim %d", op,
                                em_shape_str(index->ndim, index->sizes, a, sizeof a),
                                em_shape_str(src->ndim, src->sizes, c, sizeof c), k + 1);
    }
    return EM_OK;
}

/* One row of scatter: self[k * s_k + (ix[k * i_k] - 1) * s_d] op= src[k *
 * r_k] for k < L; returns 1, or the first bad index value, the elements
 * before it written (PyTorch's kernel checks element by element too). The
 * common add row (dim last, every row contiguous) goes eight elements at
 * a time: the eight values and one range test for them first, then the
 * eight read-modify-writes in order (repeated positions add in order);
 * a block with a bad value is left to the element loop, which finds it. */
#define SC_ROW(n, T, E) \
    static int64_t sc_row_##n(sc_kind kind, char *self, int64_t s_k, int64_t s_d, const int64_t *ix, int64_t i_k, \
                              const char *src, int64_t r_k, int64_t L, int64_t size) { \
        T *sp = (T *)self; \
        const T *rp = (const T *)src; \
        const uint64_t un = (uint64_t)size; \
        int64_t k = 0; \
        switch (kind) { \
        case SC_COPY: \
            for (; k < L; k++) { \
                uint64_t p = (uint64_t)ix[k * i_k] - 1; \
                if (p >= un) return ix[k * i_k]; \
                sp[k * s_k + (int64_t)p * s_d] = rp[k * r_k]; \
            } \
            break; \
        case SC_ADD: \
            if (s_k == 0 && s_d == 1 && i_k == 1 && r_k == 1) { /* dim innermost, all contiguous */ \
                for (; k + 8 <= L; k += 8) { \
                    const int64_t *v = ix + k; \
                    uint64_t p0 = (uint64_t)v[0] - 1, p1 = (uint64_t)v[1] - 1, p2 = (uint64_t)v[2] - 1, \
                             p3 = (uint64_t)v[3] - 1, p4 = (uint64_t)v[4] - 1, p5 = (uint64_t)v[5] - 1, \
                             p6 = (uint64_t)v[6] - 1, p7 = (uint64_t)v[7] - 1; \
                    if ((p0 >= un) | (p1 >= un) | (p2 >= un) | (p3 >= un) | (p4 >= un) | (p5 >= un) | \
                        (p6 >= un) | (p7 >= un)) \
                        break; \
                    const T *r = rp + k; \
                    sp[p0] = EM_ST_##n(LA_##n(sp[p0]) + LA_##n(r[0])); \
                    sp[p1] = EM_ST_##n(LA_##n(sp[p1]) + LA_##n(r[1])); \
                    sp[p2] = EM_ST_##n(LA_##n(sp[p2]) + LA_##n(r[2])); \
                    sp[p3] = EM_ST_##n(LA_##n(sp[p3]) + LA_##n(r[3])); \
                    sp[p4] = EM_ST_##n(LA_##n(sp[p4]) + LA_##n(r[4])); \
                    sp[p5] = EM_ST_##n(LA_##n(sp[p5]) + LA_##n(r[5])); \
                    sp[p6] = EM_ST_##n(LA_##n(sp[p6]) + LA_##n(r[6])); \
                    sp[p7] = EM_ST_##n(LA_##n(sp[p7]) + LA_##n(r[7])); \
                } \
            } \
            for (; k < L; k++) { \
                uint64_t p = (uint64_t)ix[k * i_k] - 1; \
                if (p >= un) return ix[k * i_k]; \
                T *d = sp + k * s_k + (int64_t)p * s_d; \
                *d = EM_ST_##n(LA_##n(*d) + LA_##n(rp[k * r_k])); \
            } \
            break; \
        case SC_MUL: \
            for (; k < L; k++) { \
                uint64_t p = (uint64_t)ix[k * i_k] - 1; \
                if (p >= un) return ix[k * i_k]; \
                T *d = sp + k * s_k + (int64_t)p * s_d; \
                *d = EM_ST_##n(LA_##n(*d) * LA_##n(rp[k * r_k])); \
            } \
            break; \
        } \
        return 1; \
    }
EM_CPU_TYPES(SC_ROW)

typedef int64_t (*sc_row_fn)(sc_kind, char *, int64_t, int64_t, const int64_t *, int64_t, const char *, int64_t,
                             int64_t, int64_t);
static sc_row_fn sc_row_for(em_dtype t) {
    switch (t) {
#define X(n, T, E) case E: return sc_row_##n;
        EM_CPU_TYPES(X)
#undef X
    default: return NULL;
    }
}

/* Rows of an index-shaped walk: every dim of index but the last is an outer
 * row; along the last (length L) index, src/out and self advance by their
 * strides (self not at all when the last dim is dim). Strides in elements. */
typedef struct {
    int nd, d;
    int64_t isz[EM_MAX_DIMS], ist[EM_MAX_DIMS], sst[EM_MAX_DIMS], rst[EM_MAX_DIMS];
    int64_t rows, L, s_k;
} row_walk;

static void row_walk_init(row_walk *w, const em_tensor *self, int d, const em_tensor *ix, const em_tensor *other) {
    w->nd = ix->ndim ? ix->ndim : 1;
    w->d = d;
    for (int k = 0; k < w->nd; k++) {
        w->isz[k] = ix->ndim ? ix->sizes[k] : 1;
        w->ist[k] = ix->ndim ? ix->strides[k] : 1;
        w->sst[k] = self->ndim ? self->strides[k] : 1;
        w->rst[k] = other && other->ndim ? other->strides[k] : 0;
    }
    w->rows = 1;
    for (int k = 0; k < w->nd - 1; k++) w->rows *= w->isz[k];
    w->L = w->isz[w->nd - 1];
    w->s_k = w->nd - 1 == d ? 0 : w->sst[w->nd - 1];
}

/* Offsets (index, self without dim, other) of outer row r. */
static void row_offsets(const row_walk *w, int64_t r, int64_t *pos, int64_t *io, int64_t *so, int64_t *ro) {
    *io = *so = *ro = 0;
    for (int k = w->nd - 2; k >= 0; k--) {
        pos[k] = r % w->isz[k];
        r /= w->isz[k];
        *io += pos[k] * w->ist[k];
        if (k != w->d) *so += pos[k] * w->sst[k];
        *ro += pos[k] * w->rst[k];
    }
}

static void row_advance(const row_walk *w, int64_t *pos, int64_t *io, int64_t *so, int64_t *ro) {
    for (int k = w->nd - 2; k >= 0; k--) {
        if (++pos[k] < w->isz[k]) {
            *io += w->ist[k];
            if (k != w->d) *so += w->sst[k];
            *ro += w->rst[k];
            return;
        }
        *io -= w->ist[k] * (w->isz[k] - 1);
        if (k != w->d) *so -= w->sst[k] * (w->isz[k] - 1);
        *ro -= w->rst[k] * (w->isz[k] - 1);
        pos[k] = 0;
    }
}

typedef struct {
    const row_walk *w;
    sc_row_fn row;
    sc_kind kind;
    char *self;
    const char *src;
    int64_t es;
    const int64_t *iv;
    int64_t size;   /* self's size in dim: index values lie in 1..size */
    int64_t bad;    /* a bad value seen (the first one written wins), else 1 */
} sc_ctx;

static void sc_range(int64_t b, int64_t e, void *p) {
    sc_ctx *c = p;
    const row_walk *w = c->w;
    int64_t pos[EM_MAX_DIMS], io, so, ro;
    row_offsets(w, b, pos, &io, &so, &ro);
    for (int64_t r = b; r < e; r++) {
        int64_t v = c->row(c->kind, c->self ? c->self + so * c->es : c->self, w->s_k, w->sst[w->d], c->iv + io,
                           w->ist[w->nd - 1], c->src + ro * c->es, w->rst[w->nd - 1], w->L, c->size);
        if (v != 1) {
            int64_t one = 1;
            __atomic_compare_exchange_n(&c->bad, &one, v, false, __ATOMIC_RELAXED, __ATOMIC_RELAXED);
            return;
        }
        row_advance(w, pos, &io, &so, &ro);
    }
}

/* self[.. index[p] (in dim) ..] op= src[p] for every position p of index;
 * src NULL: the value of vbuf (self's dtype) everywhere. Index values are
 * checked as they are used (one pass over index, not a check pass first),
 * so a bad value stops the op with what came before it written, as
 * PyTorch's scatter, scatter_add_ and scatter_reduce_ leave their self
 * partly written (their kernel checks element by element too).
 * self's version is bumped on that error too (unless fresh: an
 * out-of-place op's copy, dropped), so a saved self that was partly
 * written is noticed by backward. Rows run in parallel when dim is the
 * last dim (each row of index then writes its own row of self); otherwise
 * in order, so repeated positions see a fixed order. */
static em_tensor *scatter_into(sc_kind kind, em_tensor *self, int64_t dim, em_tensor *index, em_tensor *src,
                               const char *vbuf, bool fresh, const char *op) {
    if (em_core_check_no_internal_overlap(self, op) != EM_OK) return NULL;
    int d = em_wrap_dim(dim, self->ndim, op);
    if (d < 0 || check_scatter_shapes(self, d, index, src, op) != EM_OK) return NULL;
    if (src && check_same_dtype(self, src, op, "src") != EM_OK) return NULL;
    em_tensor *ix = index_as_i64(index, false, op, "index");
    if (!ix) return NULL;
    int64_t size = self->ndim ? self->sizes[d] : 1;
    const int64_t *iv = em_tensor_data(ix);
    em_tensor *s = src && src->storage == self->storage ? copy_of(src, src->ndim, src->sizes, op)
                                                       : em_tensor_retain(src);
    if (src && !s) {
        em_tensor_release(ix);
        return NULL;
    }
    row_walk w;
    row_walk_init(&w, self, d, ix, s);
    sc_ctx c = { &w, sc_row_for(self->dtype), kind, em_tensor_data(self), s ? em_tensor_data(s) : vbuf,
                 (int64_t)em_dtype_size(self->dtype), iv, size, 1 };
    if (ix->numel > 0) {
        if (d == w.nd - 1 && w.rows > 1) {
            int64_t grain = (int64_t)EM_CPU_GRAIN / (w.L > 0 ? w.L : 1);
            em_cpu_parallel_for(w.rows, grain > 0 ? grain : 1, sc_range, &c);
        } else {
            sc_range(0, w.rows, &c);
        }
    }
    em_tensor_release(s);
    em_tensor_release(ix);
    if (c.bad != 1) {
        if (!fresh) em_tensor_bump_version(self); /* rows before the bad one are written */
        range_error(op, c.bad, d, size, false);
        return NULL;
    }
    em_tensor_bump_version(self);
    return em_tensor_retain(self);
}

/* ---- gather (its kernel is sort.c's em_cpu_gather, which calls this) ---- */

/* One row of gather: out[k] = self[k * s_k + (ix[k * i_k] - 1) * s_d];
 * returns 1, or the first bad index value (out partly written). The
 * common row (dim last, self's and index's rows contiguous) goes eight
 * elements at a time: one range test for the eight, then the eight loads
 * before the eight stores, so no load waits behind a store to an unknown
 * address (about 1.15x over the element loop at 1e6 elements). */
#define GA_ROW(NAME, T) \
    static int64_t NAME(const char *self, int64_t s_k, int64_t s_d, const int64_t *ix, int64_t i_k, char *out, \
                        int64_t L, int64_t size) { \
        const T *sp = (const T *)self; \
        T *op = (T *)out; \
        int64_t k0 = 0; \
        if (i_k == 1 && s_k == 0 && s_d == 1) { \
            const uint64_t n = (uint64_t)size; \
            for (; k0 + 8 <= L; k0 += 8) { \
                const int64_t *v = ix + k0; \
                uint64_t p0 = (uint64_t)v[0] - 1, p1 = (uint64_t)v[1] - 1, p2 = (uint64_t)v[2] - 1, \
                         p3 = (uint64_t)v[3] - 1, p4 = (uint64_t)v[4] - 1, p5 = (uint64_t)v[5] - 1, \
                         p6 = (uint64_t)v[6] - 1, p7 = (uint64_t)v[7] - 1; \
                if ((p0 >= n) | (p1 >= n) | (p2 >= n) | (p3 >= n) | (p4 >= n) | (p5 >= n) | (p6 >= n) | \
                    (p7 >= n)) \
                    break; /* the element loop below finds it */ \
                T a0 = sp[p0], a1 = sp[p1], a2 = sp[p2], a3 = sp[p3], a4 = sp[p4], a5 = sp[p5], a6 = sp[p6], \
                  a7 = sp[p7]; \
                T *o = op + k0; \
                o[0] = a0; o[1] = a1; o[2] = a2; o[3] = a3; o[4] = a4; o[5] = a5; o[6] = a6; o[7] = a7; \
            } \
        } \
        for (int64_t k = k0; k < L; k++) { \
            int64_t v = ix[k * i_k]; \
            if ((uint64_t)v - 1 >= (uint64_t)size) return v; \
            op[k] = sp[k * s_k + (v - 1) * s_d]; \
        } \
        return 1; \
    }
GA_ROW(ga_row1, uint8_t)
GA_ROW(ga_row2, uint16_t)
GA_ROW(ga_row4, uint32_t)
GA_ROW(ga_row8, uint64_t)

typedef int64_t (*ga_row_fn)(const char *, int64_t, int64_t, const int64_t *, int64_t, char *, int64_t, int64_t);

typedef struct {
    const row_walk *w;
    ga_row_fn row;
    const char *self;
    char *out;
    int64_t es, size;
    const int64_t *iv;
    int64_t bad; /* a bad index value seen (first one written wins), else 1 */
} ga_ctx;

static void ga_range(int64_t b, int64_t e, void *p) {
    ga_ctx *c = p;
    const row_walk *w = c->w;
    int64_t pos[EM_MAX_DIMS], io, so, ro;
    row_offsets(w, b, pos, &io, &so, &ro);
    for (int64_t r = b; r < e; r++) {
        /* an empty self has NULL data: no offset may be added to it (UB) */
        int64_t v = c->row(c->self ? c->self + so * c->es : c->self, w->s_k, w->sst[w->d], c->iv + io, w->ist[w->nd - 1],
                           c->out + r * w->L * c->es, w->L, c->size);
        if (v != 1) {
            int64_t one = 1;
            __atomic_compare_exchange_n(&c->bad, &one, v, false, __ATOMIC_RELAXED, __ATOMIC_RELAXED);
            return;
        }
        row_advance(w, pos, &io, &so, &ro);
    }
}

em_tensor *em_cpu_index_gather(em_tensor *self, int d, em_tensor *index, const char *op) {
    if (check_scatter_shapes(self, d, index, NULL, op) != EM_OK) return NULL;
    em_tensor *ix = index_as_i64(index, false, op, "index");
    if (!ix) return NULL;
    em_tensor *out = em_tensor_new(index->ndim, index->sizes, self->dtype, self->device);
    if (!out || ix->numel == 0) {
        em_tensor_release(ix);
        return out;
    }
    row_walk w;
    row_walk_init(&w, self, d, ix, NULL);
    int64_t es = (int64_t)em_dtype_size(self->dtype);
    ga_ctx c = { &w, es == 1 ? ga_row1 : es == 2 ? ga_row2 : es == 4 ? ga_row4 : ga_row8, em_tensor_data(self),
                 em_tensor_data(out), es, self->ndim ? self->sizes[d] : 1, em_tensor_data(ix), 1 };
    int64_t grain = (int64_t)EM_CPU_GRAIN / (w.L > 0 ? w.L : 1);
    em_cpu_parallel_for_stoppable(w.rows, grain > 0 ? grain : 1, ga_range, &c);
    em_tensor_release(ix);
    if (em_cpu_interrupted(op)) { /* Note [Interrupts in kernels], way (b) */
        em_tensor_release(out);
        return NULL;
    }
    if (c.bad != 1) {
        range_error(op, c.bad, d, c.size, false);
        em_tensor_release(out);
        return NULL;
    }
    return out;
}

/* src as scatter takes it: a wrapped number means "the value" (PyTorch's
 * scatter.value), converted into vbuf; a tensor is returned for the walk. */
static em_tensor *scatter_run(sc_kind kind, em_tensor *self, int64_t dim, em_tensor *index, em_tensor *src,
                              bool fresh, const char *op) {
    _Alignas(16) char vbuf[16];
    if (src->wrapped_number) {
        if (value_bytes(src, self->dtype, vbuf, op) != EM_OK) return NULL;
        return scatter_into(kind, self, dim, index, NULL, vbuf, fresh, op);
    }
    return scatter_into(kind, self, dim, index, src, NULL, fresh, op);
}

static sc_kind reduce_kind(const char *reduce) { return strcmp(reduce, "add") == 0 ? SC_ADD : SC_MUL; }

em_tensor *em_cpu_scatter_(em_keyset ks, em_tensor *self, int64_t dim, em_tensor *index, em_tensor *src) {
    (void)ks;
    return scatter_run(SC_COPY, self, dim, index, src, false, "scatter_");
}
em_tensor *em_cpu_scatter(em_keyset ks, em_tensor *self, int64_t dim, em_tensor *index, em_tensor *src) {
    (void)ks;
    const char *op = "scatter";
    OUT_OF_PLACE(scatter_run(SC_COPY, out, dim, index, src, true, op));
}
em_tensor *em_cpu_scatter__reduce(em_keyset ks, em_tensor *self, int64_t dim, em_tensor *index, em_tensor *src,
                                  const char *reduce) {
    (void)ks;
    return scatter_run(reduce_kind(reduce), self, dim, index, src, false, "scatter_");
}
em_tensor *em_cpu_scatter_reduce(em_keyset ks, em_tensor *self, int64_t dim, em_tensor *index, em_tensor *src,
                                 const char *reduce) {
    (void)ks;
    const char *op = "scatter";
    OUT_OF_PLACE(scatter_run(reduce_kind(reduce), out, dim, index, src, true, op));
}
em_tensor *em_cpu_scatter_add_(em_keyset ks, em_tensor *self, int64_t dim, em_tensor *index, em_tensor *src) {
    (void)ks;
    if (src->wrapped_number) {
        em_set_error(EM_ETYPE, "scatter_add_: src must be a tensor, got a number");
        return NULL;
    }
    return scatter_into(SC_ADD, self, dim, index, src, NULL, false, "scatter_add_");
}
em_tensor *em_cpu_scatter_add(em_keyset ks, em_tensor *self, int64_t dim, em_tensor *index, em_tensor *src) {
    (void)ks;
    const char *op = "scatter_add";
    if (src->wrapped_number) {
        em_set_error(EM_ETYPE, "scatter_add: src must be a tensor, got a number");
        return NULL;
    }
    OUT_OF_PLACE(scatter_into(SC_ADD, out, dim, index, src, NULL, true, op));
}

/* ---- nonzero, take, one_hot ---- */

/* self as a contiguous tensor (a new reference). */
static em_tensor *contig(em_tensor *self, const char *op) {
    return self->is_contiguous ? em_tensor_retain(self) : copy_of(self, self->ndim, self->sizes, op);
}

static bool is_nonzero(const char *p, em_dtype t) {
    if (em_dtype_is_floating(t)) return em_load_as_double(p, t) != 0.0; /* NaN counts */
    return em_load_as_int64(p, t) != 0;
}

/* The (count, ndim) 0-based... written 1-based coordinates of self's
 * nonzero elements, as a new int64 tensor. */
em_tensor *em_cpu_nonzero(em_keyset ks, em_tensor *self) {
    (void)ks;
    em_tensor *c = contig(self, "nonzero");
    if (!c) return NULL;
    size_t es = em_dtype_size(c->dtype);
    const char *p = em_tensor_data(c);
    int64_t count = 0;
    for (int64_t i = 0; i < c->numel; i++) count += is_nonzero(p + i * (int64_t)es, c->dtype);
    int64_t sizes[2] = { count, self->ndim };
    em_tensor *out = em_tensor_new(2, sizes, EM_INT64, self->device);
    if (out) {
        int64_t *o = em_tensor_data(out), coord[EM_MAX_DIMS] = { 0 };
        for (int64_t i = 0; i < c->numel; i++) {
            if (is_nonzero(p + i * (int64_t)es, c->dtype))
                for (int k = 0; k < self->ndim; k++) *o++ = coord[k] + 1;
            for (int k = self->ndim - 1; k >= 0; k--) {
                if (++coord[k] < self->sizes[k]) break;
                coord[k] = 0;
            }
        }
    }
    em_tensor_release(c);
    return out;
}

em_tensor **em_cpu_nonzero_tuple(em_keyset ks, em_tensor *self, int *nresults) {
    (void)ks;
    *nresults = 0;
    em_tensor *nz = em_cpu_nonzero(ks, self);
    if (!nz) return NULL;
    int n = self->ndim ? self->ndim : 1;
    em_tensor **r = calloc((size_t)n, sizeof *r);
    if (!r) {
        em_tensor_release(nz);
        em_set_error(EM_ENOMEM, "nonzero_tuple: out of memory");
        return NULL;
    }
    int64_t count = nz->sizes[0];
    const int64_t *v = em_tensor_data(nz);
    for (int k = 0; k < n; k++) {
        r[k] = em_tensor_new(1, &count, EM_INT64, self->device);
        if (!r[k]) {
            em_tensors_free(r, k);
            em_tensor_release(nz);
            return NULL;
        }
        int64_t *o = em_tensor_data(r[k]);
        for (int64_t i = 0; i < count; i++) o[i] = self->ndim ? v[i * self->ndim + k] : 1;
    }
    em_tensor_release(nz);
    *nresults = n;
    return r;
}

em_tensor *em_cpu_take(em_keyset ks, em_tensor *self, em_tensor *index) {
    (void)ks;
    const char *op = "take";
    if (index->dtype != EM_INT64) {
        em_set_error(EM_ETYPE, "%s: index must be an int64 tensor, got %s", op, em_dtype_name(index->dtype));
        return NULL;
    }
    int64_t *pos = NULL;
    if (self->numel == 0 && index->numel > 0) {
        em_set_error(EM_EINDEX, "%s: cannot take from an empty tensor (self %s)", op, "has no elements");
        return NULL;
    }
    /* positions into the flattened self; the message names the flat dim 1 */
    pos = positions(index, self->numel, true, 0, false, op, "index");
    if (!pos) return NULL;
    em_tensor *out = em_tensor_new(index->ndim, index->sizes, self->dtype, self->device);
    if (out) {
        size_t es = em_dtype_size(self->dtype);
        char *o = em_tensor_data(out);
        const char *s = em_tensor_data(self);
        for (int64_t i = 0; i < index->numel; i++) {
            int64_t p = pos[i], off = 0; /* unravel the flat position through self's strides */
            for (int k = self->ndim - 1; k >= 0; k--) {
                off += (p % self->sizes[k]) * self->strides[k];
                p /= self->sizes[k];
            }
            memcpy(o + i * (int64_t)es, s + off * (int64_t)es, es);
        }
    }
    free(pos);
    return out;
}

em_tensor *em_cpu_one_hot(em_keyset ks, em_tensor *self, int64_t num_classes) {
    (void)ks;
    const char *op = "one_hot";
    if (self->dtype != EM_INT64) {
        em_set_error(EM_ETYPE, "%s: self must be an int64 tensor of classes, got %s", op, em_dtype_name(self->dtype));
        return NULL;
    }
    if (num_classes < -1) {
        em_set_error(EM_EVALUE, "%s: num_classes must be positive or -1, got %lld", op, (long long)num_classes);
        return NULL;
    }
    em_tensor *c = contig(self, op);
    if (!c) return NULL;
    const int64_t *v = em_tensor_data(c);
    if (num_classes == -1) {
        if (c->numel == 0) {
            em_tensor_release(c);
            em_set_error(EM_EVALUE, "%s: cannot infer num_classes from an empty tensor", op);
            return NULL;
        }
        num_classes = 0;
        for (int64_t i = 0; i < c->numel; i++)
            if (v[i] > num_classes) num_classes = v[i];
    }
    for (int64_t i = 0; i < c->numel; i++)
        if (v[i] < 1 || v[i] > num_classes) {
            em_tensor_release(c);
            em_set_error(EM_EINDEX, "%s: class %lld is out of range for num_classes %lld (valid: 1..%lld; classes "
                         "are 1-based)", op, (long long)v[i], (long long)num_classes, (long long)num_classes);
            return NULL;
        }
    int64_t sizes[EM_MAX_DIMS + 1];
    if (self->ndim >= EM_MAX_DIMS) {
        em_tensor_release(c);
        em_set_error(EM_ESHAPE, "%s: self has too many dims (%d)", op, self->ndim);
        return NULL;
    }
    for (int k = 0; k < self->ndim; k++) sizes[k] = self->sizes[k];
    sizes[self->ndim] = num_classes;
    em_tensor *out = em_tensor_new(self->ndim + 1, sizes, EM_INT64, self->device);
    if (out) {
        int64_t *o = em_tensor_data(out);
        if (out->numel) memset(o, 0, sizeof *o * (size_t)out->numel);
        for (int64_t i = 0; i < c->numel; i++) o[i * num_classes + v[i] - 1] = 1;
    }
    em_tensor_release(c);
    return out;
}

/* ---- scatter_reduce ---- */

typedef enum { SR_SUM, SR_PROD, SR_MEAN, SR_AMAX, SR_AMIN } sr_kind;

static sr_kind sr_kind_of(const char *r) {
    return strcmp(r, "sum") == 0 ? SR_SUM : strcmp(r, "prod") == 0 ? SR_PROD : strcmp(r, "mean") == 0 ? SR_MEAN
         : strcmp(r, "amax") == 0 ? SR_AMAX : SR_AMIN;
}

/* One element: the reduction's identity (init) or d = d (op) s, in the
 * dtype's arithmetic (float16/bfloat16 in float). amax/amin propagate NaN
 * as PyTorch does. */
#define SR_FNS(n, T, E) \
    static void sr_init_##n(T *d, sr_kind k) { \
        switch (k) { \
        case SR_SUM: case SR_MEAN: *d = EM_ST_##n(0); break; \
        case SR_PROD: *d = EM_ST_##n(1); break; \
        case SR_AMAX: *d = em_cpu_is_float(E) ? EM_ST_##n(-INFINITY) : EM_ST_##n(sr_lowest(E)); break; \
        case SR_AMIN: *d = em_cpu_is_float(E) ? EM_ST_##n(INFINITY) : EM_ST_##n(sr_highest(E)); break; \
        } \
    } \
    static void sr_apply_##n(T *d, T s, sr_kind k) { \
        switch (k) { \
        case SR_SUM: case SR_MEAN: *d = EM_ST_##n(LA_##n(*d) + LA_##n(s)); break; \
        case SR_PROD: *d = EM_ST_##n(LA_##n(*d) * LA_##n(s)); break; \
        case SR_AMAX: case SR_AMIN: { \
            double a = (double)EM_LDW_##n(*d), b = (double)EM_LDW_##n(s); \
            if (em_cpu_is_float(E)) { \
                if (isnan(b) || (!isnan(a) && (k == SR_AMAX ? b > a : b < a))) *d = s; \
            } else { \
                int64_t ai = (int64_t)EM_LDW_##n(*d), bi = (int64_t)EM_LDW_##n(s); \
                if (k == SR_AMAX ? bi > ai : bi < ai) *d = s; \
                (void)a; \
            } \
            break; \
        } \
        } \
    }

static double sr_lowest(em_dtype t) {
    switch (t) {
    case EM_BOOL: return 0;
    case EM_UINT8: return 0;
    case EM_INT8: return -128;
    case EM_INT32: return -2147483648.0;
    default: return (double)INT64_MIN;
    }
}
static double sr_highest(em_dtype t) {
    switch (t) {
    case EM_BOOL: return 1;
    case EM_UINT8: return 255;
    case EM_INT8: return 127;
    case EM_INT32: return 2147483647.0;
    default: return 9223372036854775807.0;
    }
}
EM_CPU_TYPES(SR_FNS)

/* Visits every index element: self element (contiguous self: offset in
 * elements) and src element offset. */
static void sr_walk(const row_walk *w, const int64_t *iv, void (*fn)(int64_t so, int64_t ro, void *ctx), void *ctx) {
    int64_t pos[EM_MAX_DIMS], io, so, ro;
    row_offsets(w, 0, pos, &io, &so, &ro);
    int last = w->nd - 1;
    for (int64_t r = 0; r < w->rows; r++) {
        for (int64_t k = 0; k < w->L; k++)
            fn(so + k * w->s_k + (iv[io + k * w->ist[last]] - 1) * w->sst[w->d], ro + k * w->rst[last], ctx);
        row_advance(w, pos, &io, &so, &ro);
    }
}

typedef struct {
    char *self;
    const char *src;
    em_dtype dtype;
    int64_t es;
    sr_kind kind;
    int64_t *count;
} sr_ctx;

static void sr_init_one(int64_t so, int64_t ro, void *p) {
    sr_ctx *c = p;
    (void)ro;
    switch (c->dtype) {
#define X(n, T, E) case E: sr_init_##n((T *)c->self + so, c->kind); break;
        EM_CPU_TYPES(X)
#undef X
    default: break;
    }
}

static void sr_apply_one(int64_t so, int64_t ro, void *p) {
    sr_ctx *c = p;
    switch (c->dtype) {
#define X(n, T, E) case E: sr_apply_##n((T *)c->self + so, ((const T *)c->src)[ro], c->kind); break;
        EM_CPU_TYPES(X)
#undef X
    default: break;
    }
    if (c->count) c->count[so]++;
}

/* scatter_reduce into self (in place). Works on a contiguous copy when self
 * is not contiguous, so that the counts of mean line up with self. */
static em_tensor *scatter_reduce_into(em_tensor *self, int64_t dim, em_tensor *index, em_tensor *src,
                                      const char *reduce, bool include_self, const char *op) {
    if (em_core_check_no_internal_overlap(self, op) != EM_OK) return NULL;
    int d = em_wrap_dim(dim, self->ndim, op);
    if (d < 0 || check_scatter_shapes(self, d, index, src, op) != EM_OK ||
        check_same_dtype(self, src, op, "src") != EM_OK)
        return NULL;
    if (self->dtype == EM_BOOL) {
        em_set_error(EM_ETYPE, "%s: self must not be bool", op);
        return NULL;
    }
    em_tensor *ix = index_as_i64(index, false, op, "index");
    if (!ix) return NULL;
    int64_t size = self->ndim ? self->sizes[d] : 1;
    const int64_t *iv = em_tensor_data(ix);
    for (int64_t i = 0; i < ix->numel; i++)
        if ((uint64_t)iv[i] - 1 >= (uint64_t)size) {
            range_error(op, iv[i], d, size, false);
            em_tensor_release(ix);
            return NULL;
        }
    em_tensor *work = self->is_contiguous ? em_tensor_retain(self) : out_copy(self, op);
    em_tensor *s = work ? copy_of(src, src->ndim, src->sizes, op) : NULL;
    sr_kind kind = sr_kind_of(reduce);
    int64_t *count = NULL;
    if (s && kind == SR_MEAN) {
        count = malloc(sizeof *count * (size_t)(work->numel ? work->numel : 1));
        if (!count) em_set_error(EM_ENOMEM, "%s: out of memory", op);
        else for (int64_t i = 0; i < work->numel; i++) count[i] = include_self ? 1 : 0;
    }
    em_status st = EM_ENOMEM;
    if (s && (kind != SR_MEAN || count)) {
        row_walk w;
        row_walk_init(&w, work, d, ix, s);
        sr_ctx c = { em_tensor_data(work), em_tensor_data(s), work->dtype, (int64_t)em_dtype_size(work->dtype), kind,
                     count };
        if (ix->numel > 0) {
            if (!include_self) sr_walk(&w, iv, sr_init_one, &c);
            sr_walk(&w, iv, sr_apply_one, &c);
        }
        if (count) { /* mean: divide by the count (floor division for integers, as PyTorch) */
            char *p = em_tensor_data(work);
            int64_t es = (int64_t)em_dtype_size(work->dtype);
            for (int64_t i = 0; i < work->numel; i++) {
                int64_t n = count[i] ? count[i] : 1;
                if (n == 1) continue;
                if (em_cpu_is_float(work->dtype)) {
                    em_store_from_double(p + i * es, work->dtype, em_load_as_double(p + i * es, work->dtype) / (double)n);
                } else {
                    int64_t v = em_load_as_int64(p + i * es, work->dtype), q = v / n;
                    if ((v % n != 0) && ((v < 0) != (n < 0))) q--;
                    em_store_from_int64(p + i * es, work->dtype, q);
                }
            }
        }
        st = work != self ? em_cpu_copy_into(self, work, op) : EM_OK;
    }
    free(count);
    em_tensor_release(s);
    em_tensor_release(work);
    em_tensor_release(ix);
    if (st != EM_OK) return NULL;
    em_tensor_bump_version(self);
    return em_tensor_retain(self);
}

em_tensor *em_cpu_scatter_reduce__two(em_keyset ks, em_tensor *self, int64_t dim, em_tensor *index, em_tensor *src,
                                      const char *reduce, bool include_self) {
    (void)ks;
    return scatter_reduce_into(self, dim, index, src, reduce, include_self, "scatter_reduce_");
}

em_tensor *em_cpu_scatter_reduce_two(em_keyset ks, em_tensor *self, int64_t dim, em_tensor *index, em_tensor *src,
                                     const char *reduce, bool include_self) {
    (void)ks;
    const char *op = "scatter_reduce";
    OUT_OF_PLACE(scatter_reduce_into(out, dim, index, src, reduce, include_self, op));
}
