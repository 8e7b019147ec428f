/* sort.c -- ordering kernels: sort, argsort, topk, and gather with its
 * adjoint gather_backward (the gradient of sort's and topk's values).
 *
 * Indices a user sees are 1-based int64 (DESIGN.md, "API conventions"):
 * sort/topk write position + 1, gather reads 1-based indices.
 * Ordering follows PyTorch 1.13 on CPU: NaN sorts above every number (last
 * ascending, first descending); the sort is always stable, so ties keep
 * their input order whether `stable` is asked for or not (PyTorch's CPU
 * sort is stable too). topk selects as PyTorch does, so that it returns
 * the same positions among ties (Note [topk ties]); with sorted=false its
 * order is PyTorch's too.
 */
#include <assert.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/cpu/em_cpu.h"
#include "kernels/cpu/stl_port.h"
#include "em_kernels_decl.h"

/* ---- rows along one dim ---- */

/* Walks every position of sizes[] except along dim (an odometer), keeping
 * the element offset of each of up to 3 tensors (strides[t][d]). */
typedef struct {
    int ndim, dim, nt;
    int64_t sizes[EM_MAX_DIMS];
    int64_t strides[3][EM_MAX_DIMS];
    int64_t pos[EM_MAX_DIMS];
    int64_t off[3];
} row_iter;

static void row_init(row_iter *it, int ndim, const int64_t *sizes, int dim, int nt,
                     const int64_t *const *strides) {
    memset(it, 0, sizeof *it);
    it->ndim = ndim;
    it->dim = dim;
    it->nt = nt;
    for (int d = 0; d < ndim; d++) it->sizes[d] = sizes[d];
    for (int t = 0; t < nt; t++)
        for (int d = 0; d < ndim; d++) it->strides[t][d] = strides[t][d];
}

/* Advances to the next row; false after the last. */
static bool row_next(row_iter *it) {
    for (int d = it->ndim - 1; d >= 0; d--) {
        if (d == it->dim) continue;
        if (++it->pos[d] < it->sizes[d]) {
            for (int t = 0; t < it->nt; t++) it->off[t] += it->strides[t][d];
            return true;
        }
        for (int t = 0; t < it->nt; t++) it->off[t] -= it->strides[t][d] * (it->sizes[d] - 1);
        it->pos[d] = 0;
    }
    return false;
}

/* ---- comparing ---- */

typedef struct {
    const char *base;    /* self's data at the row start */
    int64_t stride;      /* in bytes, along the row */
    em_dtype dtype;
    bool floating;
    bool descending;
} row_keys;

static double key_f(const row_keys *k, int64_t i) {
    return em_load_as_double(k->base + i * k->stride, k->dtype);
}
static int64_t key_i(const row_keys *k, int64_t i) {
    return em_load_as_int64(k->base + i * k->stride, k->dtype);
}

/* Whether element a comes strictly before element b (NaN above numbers). */
static bool before(const row_keys *k, int64_t a, int64_t b) {
    if (k->floating) {
        double x = key_f(k, a), y = key_f(k, b);
        bool nx = isnan(x), ny = isnan(y);
        if (k->descending) return (nx && !ny) || x > y;
        return (!nx && ny) || x < y;
    }
    int64_t x = key_i(k, a), y = key_i(k, b);
    return k->descending ? x > y : x < y;
}

/* Stable merge sort of the positions idx[0..n) (tmp: n scratch slots). */
static void merge_sort(const row_keys *k, int64_t *idx, int64_t *tmp, int64_t n) {
    if (n < 2) return;
    if (n <= 16) { /* insertion sort: stable */
        for (int64_t i = 1; i < n; i++) {
            int64_t v = idx[i], j = i;
            while (j > 0 && before(k, v, idx[j - 1])) {
                idx[j] = idx[j - 1];
                j--;
            }
            idx[j] = v;
        }
        return;
    }
    int64_t h = n / 2;
    merge_sort(k, idx, tmp, h);
    merge_sort(k, idx + h, tmp, n - h);
    int64_t i = 0, j = h, o = 0;
    while (i < h && j < n) tmp[o++] = before(k, idx[j], idx[i]) ? idx[j++] : idx[i++];
    while (i < h) tmp[o++] = idx[i++];
    while (j < n) tmp[o++] = idx[j++];
    memcpy(idx, tmp, (size_t)n * sizeof *idx);
}

/* ---- long rows: a stable LSD radix sort on order-preserving keys ----
 *
 * Note [Sort keys]
 * Each element maps to an unsigned key whose unsigned order is the sort
 * order: floats by their bits (sign-flipped), with -0.0 taken as +0.0 and
 * every NaN as one key above +inf, so that exactly the elements `before`
 * calls equal share a key; integers by flipping the sign bit; descending
 * complements the key. An LSD radix sort is stable, so ties keep their
 * input order, as merge_sort and PyTorch's CPU sort do: both paths give
 * the same permutation. */

typedef struct {
    uint64_t *key, *key2; /* n keys and scratch */
    int64_t *pos, *pos2;  /* n positions and scratch */
} radix_buf;

static uint64_t fkey32(float x) {
    if (isnan(x)) return 0xFFFFFFFFu;
    if (x == 0) x = 0; /* -0.0 ties with +0.0 */
    uint32_t u;
    memcpy(&u, &x, 4);
    return (u & 0x80000000u) ? ~u : (u | 0x80000000u);
}

static uint64_t fkey64(double x) {
    if (isnan(x)) return UINT64_MAX;
    if (x == 0) x = 0;
    uint64_t u;
    memcpy(&u, &x, 8);
    return (u >> 63) ? ~u : (u | (1ull << 63));
}

/* Fills b->key/pos for one row and returns the key width in bytes (4 or 8). */
static int radix_keys(const row_keys *k, int64_t n, radix_buf *b) {
    const char *p = k->base;
    int64_t s = k->stride;
    int w = 4;
    switch (k->dtype) {
    case EM_BOOL: case EM_UINT8:
        for (int64_t i = 0; i < n; i++) b->key[i] = *(const uint8_t *)(p + i * s);
        break;
    case EM_INT8:
        for (int64_t i = 0; i < n; i++) b->key[i] = (uint8_t)(*(const int8_t *)(p + i * s) ^ 0x80);
        break;
    case EM_INT32:
        for (int64_t i = 0; i < n; i++) b->key[i] = (uint32_t)*(const int32_t *)(p + i * s) ^ 0x80000000u;
        break;
    case EM_INT64:
        for (int64_t i = 0; i < n; i++) b->key[i] = (uint64_t)*(const int64_t *)(p + i * s) ^ (1ull << 63);
        w = 8;
        break;
    case EM_FLOAT16:
        for (int64_t i = 0; i < n; i++) b->key[i] = fkey32(em_half_to_float(*(const em_half *)(p + i * s)));
        break;
    case EM_BFLOAT16:
        for (int64_t i = 0; i < n; i++) b->key[i] = fkey32(em_bf16_to_float(*(const em_bfloat16 *)(p + i * s)));
        break;
    case EM_FLOAT32:
        for (int64_t i = 0; i < n; i++) b->key[i] = fkey32(*(const float *)(p + i * s));
        break;
    default:
        for (int64_t i = 0; i < n; i++) b->key[i] = fkey64(*(const double *)(p + i * s));
        w = 8;
        break;
    }
    uint64_t flip = k->descending ? (w == 8 ? UINT64_MAX : 0xFFFFFFFFu) : 0;
    for (int64_t i = 0; i < n; i++) {
        b->key[i] ^= flip;
        b->pos[i] = i;
    }
    return w;
}

/* Sorts one row into b->pos (positions in order): byte digits from the
 * lowest, skipping digits every key shares; one counting pass for all. */
static void radix_sort_row(const row_keys *k, int64_t n, radix_buf *b) {
    int w = radix_keys(k, n, b);
    static_assert(sizeof(uint32_t) * 256 * 8 < 16384, "histograms fit the stack");
    uint32_t hist[8][256];
    memset(hist, 0, sizeof hist);
    for (int64_t i = 0; i < n; i++) {
        uint64_t x = b->key[i];
        for (int d = 0; d < w; d++) hist[d][(x >> (8 * d)) & 0xFF]++;
    }
    for (int d = 0; d < w; d++) {
        uint32_t *h = hist[d];
        if (h[(b->key[0] >> (8 * d)) & 0xFF] == (uint32_t)n) continue; /* one digit: nothing moves */
        uint32_t sum = 0;
        for (int v = 0; v < 256; v++) {
            uint32_t c = h[v];
            h[v] = sum;
            sum += c;
        }
        for (int64_t i = 0; i < n; i++) {
            uint64_t x = b->key[i];
            uint32_t o = h[(x >> (8 * d)) & 0xFF]++;
            b->key2[o] = x;
            b->pos2[o] = b->pos[i];
        }
        uint64_t *tk = b->key; b->key = b->key2; b->key2 = tk;
        int64_t *tp = b->pos; b->pos = b->pos2; b->pos2 = tp;
    }
}

/* Rows shorter than this take merge_sort (the radix passes' fixed cost). */
#define SORT_RADIX_MIN 256

/* ---- topk's selection: PyTorch's algorithm, for PyTorch's indices ----
 *
 * Note [topk ties]
 * PyTorch 1.13's CPU topk (TopKImpl.h) copies a row into (value, index)
 * pairs and runs std::partial_sort when k * 64 <= n, else std::nth_element
 * and, when sorted, std::sort of the first k - 1. Which of several equal
 * values it returns is decided by those algorithms, so they are ported here
 * step for step (libstdc++'s introselect, introsort, heap select; one
 * comparator, NaN above numbers). Changing anything below changes which
 * tied indices topk returns. */

typedef struct {
    double f;     /* floating keys */
    int64_t i;    /* integer keys */
    int64_t idx;  /* 0-based position in the row */
} tk_elem;

typedef struct {
    bool floating, largest;
} tk_cmp;

static bool tk_less(const tk_cmp *c, const tk_elem *x, const tk_elem *y) {
    if (c->floating) {
        bool nx = isnan(x->f), ny = isnan(y->f);
        return c->largest ? (nx && !ny) || x->f > y->f : (!nx && ny) || x->f < y->f;
    }
    return c->largest ? x->i > y->i : x->i < y->i;
}

EM_STL_PORT(tk_, tk_elem, tk_cmp, tk_less)

/* tk_heap_select for a row read in place (q holds only the heap, k > 0):
 * element j enters when it beats the top, exactly as heap select's
 * pop_heap would take it, so the result is the same; most elements of a
 * long row only meet one comparison with the top, on the raw float32. */
static void tk_heap_select_row(const tk_cmp *c, tk_elem *q, int64_t k, const char *row, int64_t stride,
                               em_dtype dt, int64_t n) {
    tk_make_heap(c, q, q + k);
    for (int64_t j = k; j < n; j++) {
        const char *p = row + j * stride;
        tk_elem e = { 0, 0, j };
        if (dt == EM_FLOAT32) {
            float v = *(const float *)p, top = (float)q[0].f;
            /* fast reject: a number that does not beat a number top (NaN goes the slow way) */
            if (v == v && top == top && (c->largest ? !(v > top) : !(v < top))) continue;
            e.f = v;
        } else if (c->floating) {
            e.f = em_load_as_double(p, dt);
        } else {
            e.i = em_load_as_int64(p, dt);
        }
        if (tk_less(c, &e, q)) tk_adjust_heap(c, q, 0, k, e);
    }
}

/* Orders q[0..n) so that its first k are topk's, as PyTorch does. */
static void tk_select(const tk_cmp *c, tk_elem *q, int64_t n, int64_t k, bool sorted) {
    if (k == 0) return;
    if (k * 64 <= n) {
        tk_partial_sort(c, q, q + k, q + n);
    } else {
        tk_nth_element(c, q, q + k - 1, q + n);
        if (sorted) tk_sort(c, q, q + k - 1);
    }
}

/* ---- sort / topk ---- */

/* The shared body: orders self along dim and writes the first k of each
 * row into values (when wanted) and 1-based positions into indices.
 * Returns EM_OK or the error. Between rows it stops at an interrupt
 * ("op: interrupted"; values and indices then partly unwritten: Note
 * [Interrupts in kernels], way (b)). */
static em_status order_rows(const em_tensor *self, int dim, bool descending, int64_t k,
                            em_tensor *values, em_tensor *indices, const char *op) {
    int nd = self->ndim ? self->ndim : 1;
    int64_t one = 1, zero = 0;
    const int64_t *sizes = self->ndim ? self->sizes : &one;
    int64_t n = sizes[dim];
    if (self->numel == 0) return EM_OK;
    if (n > UINT32_MAX) return em_set_error(EM_EVALUE, "sort: a row of %lld elements is too long", (long long)n);
    bool radix = n >= SORT_RADIX_MIN;
    /* merge sort: positions + scratch; radix: keys, positions, and scratch of both */
    int64_t *idx = malloc(sizeof(int64_t) * (size_t)((radix ? 4 : 2) * n + 1));
    if (!idx) return em_set_error(EM_ENOMEM, "sort: out of memory for %lld positions", (long long)n);
    size_t es = em_dtype_size(self->dtype);
    /* values has indices' shape; without values its slot walks indices' strides */
    const int64_t *ist = indices->ndim ? indices->strides : &zero;
    const int64_t *st[3] = { self->ndim ? self->strides : &zero,
                             values && values->ndim ? values->strides : ist, ist };
    row_iter it;
    row_init(&it, nd, sizes, dim, 3, st);
    const char *src = (const char *)em_tensor_data(self);
    char *vd = values ? (char *)em_tensor_data(values) : NULL;
    int64_t *id = (int64_t *)em_tensor_data(indices);
    row_keys keys = { NULL, st[0][dim] * (int64_t)es, self->dtype, em_cpu_is_float(self->dtype), descending };
    do {
        if (em_cpu_interrupted(op)) {
            free(idx);
            return EM_EINTERRUPT;
        }
        keys.base = src + it.off[0] * (int64_t)es;
        const int64_t *order = idx;
        if (radix) {
            radix_buf b = { (uint64_t *)idx, (uint64_t *)idx + n, idx + 2 * n, idx + 3 * n };
            radix_sort_row(&keys, n, &b);
            order = b.pos;
        } else {
            for (int64_t i = 0; i < n; i++) idx[i] = i;
            merge_sort(&keys, idx, idx + n, n);
        }
        int64_t is = st[2][dim], vs = st[1][dim] * (int64_t)es;
        int64_t *io = id + it.off[2];
        for (int64_t j = 0; j < k; j++) io[j * is] = order[j] + 1;
        if (vd) {
            char *vo = vd + it.off[1] * (int64_t)es;
            if (es == 4)
                for (int64_t j = 0; j < k; j++) memcpy(vo + j * vs, keys.base + order[j] * keys.stride, 4);
            else
                for (int64_t j = 0; j < k; j++) memcpy(vo + j * vs, keys.base + order[j] * keys.stride, es);
        }
    } while (row_next(&it));
    free(idx);
    return EM_OK;
}

/* Allocates values (self's dtype, unless NULL is wanted) and indices
 * (int64) of self's shape with k along dim, then fills them. */
static em_tensor *ordered(const em_tensor *self, int dim, bool descending, int64_t k,
                          em_tensor **indices, bool want_values, const char *op) {
    int64_t sizes[EM_MAX_DIMS];
    memcpy(sizes, self->sizes, sizeof(int64_t) * (size_t)self->ndim);
    if (self->ndim) sizes[dim] = k;
    em_tensor *v = want_values ? em_tensor_new(self->ndim, sizes, self->dtype, self->device) : NULL;
    em_tensor *ix = em_tensor_new(self->ndim, sizes, EM_INT64, self->device);
    if ((want_values && !v) || !ix || order_rows(self, dim, descending, k, v, ix, op) != EM_OK) {
        em_tensor_release(v);
        em_tensor_release(ix);
        return NULL;
    }
    if (!want_values) return ix;
    *indices = ix;
    return v;
}

em_tensor *em_cpu_sort(em_keyset ks, em_tensor *self, int64_t dim, bool descending, bool stable,
                       em_tensor **indices) {
    (void)ks;
    (void)stable; /* always stable (see the file's header) */
    int d = em_wrap_dim(dim, self->ndim, "sort");
    if (d < 0) return NULL;
    return ordered(self, d, descending, self->ndim ? self->sizes[d] : 1, indices, true, "sort");
}

em_tensor *em_cpu_argsort(em_keyset ks, em_tensor *self, int64_t dim, bool descending, bool stable) {
    (void)ks;
    (void)stable;
    int d = em_wrap_dim(dim, self->ndim, "argsort");
    if (d < 0) return NULL;
    return ordered(self, d, descending, self->ndim ? self->sizes[d] : 1, NULL, false, "argsort");
}

em_tensor *em_cpu_topk(em_keyset ks, em_tensor *self, int64_t k, int64_t dim, bool largest, bool sorted,
                       em_tensor **indices) {
    (void)ks;
    int d = em_wrap_dim(dim, self->ndim, "topk");
    if (d < 0) return NULL;
    int64_t one = 1, zero = 0;
    int nd = self->ndim ? self->ndim : 1;
    const int64_t *sizes = self->ndim ? self->sizes : &one;
    int64_t n = sizes[d];
    if (k < 0 || k > n) {
        em_set_error(EM_EINDEX, "topk: k (%lld) is out of range for dim %d of size %lld", (long long)k,
                     d + 1, (long long)n);
        return NULL;
    }
    int64_t osz[EM_MAX_DIMS];
    memcpy(osz, self->sizes, sizeof(int64_t) * (size_t)self->ndim);
    if (self->ndim) osz[d] = k;
    em_tensor *v = em_tensor_new(self->ndim, osz, self->dtype, self->device);
    em_tensor *ix = em_tensor_new(self->ndim, osz, EM_INT64, self->device);
    tk_elem *q = v && ix ? malloc(sizeof *q * (size_t)(n ? n : 1)) : NULL;
    if (!q) {
        if (v && ix) em_set_error(EM_ENOMEM, "topk: out of memory for %lld elements", (long long)n);
        em_tensor_release(v);
        em_tensor_release(ix);
        return NULL;
    }
    if (k > 0 && v->numel > 0) {
        size_t es = em_dtype_size(self->dtype);
        const int64_t *st[3] = { self->ndim ? self->strides : &zero, v->ndim ? v->strides : &zero,
                                 ix->ndim ? ix->strides : &zero };
        row_iter it;
        row_init(&it, nd, sizes, d, 3, st);
        tk_cmp c = { em_cpu_is_float(self->dtype), largest };
        const char *src = (const char *)em_tensor_data(self);
        char *vd = (char *)em_tensor_data(v);
        int64_t *id = (int64_t *)em_tensor_data(ix);
        do {
            const char *row = src + it.off[0] * (int64_t)es;
            if (k * 64 <= n) { /* tk_select's partial sort, without copying the row */
                for (int64_t j = 0; j < k; j++) {
                    const char *e = row + j * st[0][d] * (int64_t)es;
                    q[j].idx = j;
                    if (c.floating) q[j].f = em_load_as_double(e, self->dtype);
                    else q[j].i = em_load_as_int64(e, self->dtype);
                }
                tk_heap_select_row(&c, q, k, row, st[0][d] * (int64_t)es, self->dtype, n);
                tk_sort_heap(&c, q, q + k);
                goto write;
            }
            for (int64_t j = 0; j < n; j++) {
                const char *e = row + j * st[0][d] * (int64_t)es;
                q[j].idx = j;
                if (c.floating) q[j].f = em_load_as_double(e, self->dtype);
                else q[j].i = em_load_as_int64(e, self->dtype);
            }
            tk_select(&c, q, n, k, sorted);
        write:
            for (int64_t j = 0; j < k; j++) {
                id[it.off[2] + j * st[2][d]] = q[j].idx + 1;
                memcpy(vd + (it.off[1] + j * st[1][d]) * (int64_t)es, row + q[j].idx * st[0][d] * (int64_t)es, es);
            }
        } while (row_next(&it));
    }
    free(q);
    *indices = ix;
    return v;
}

/* ---- gather and its adjoint ---- */

/* Checks an index tensor for gather-like ops against the data tensor's
 * sizes (n dims; every index dim but dim no larger than the data's). */
static em_status check_index(const em_tensor *index, int n, const int64_t *sizes, int dim, const char *op,
                             const char *what) {
    if (index->dtype != EM_INT64)
        return em_set_error(EM_ETYPE, "%s: index must be an int64 tensor, got %s", op,
                            em_dtype_name(index->dtype));
    int in = index->ndim ? index->ndim : 1;
    if (in != n) {
        char a[EM_SHAPE_STR_MAX], b[EM_SHAPE_STR_MAX];
        return em_set_error(EM_ESHAPE, "%s: index %s and %s %s must have the same number of dims", op,
                            em_shape_str(index->ndim, index->sizes, a, sizeof a), what,
                            em_shape_str(n, sizes, b, sizeof b));
    }
    for (int d = 0; d < index->ndim; d++)
        if (d != dim && index->sizes[d] > sizes[d]) {
            char a[EM_SHAPE_STR_MAX], b[EM_SHAPE_STR_MAX];
            return em_set_error(EM_ESHAPE, "%s: index %s is larger than %s %s in dim %d", op,
                                em_shape_str(index->ndim, index->sizes, a, sizeof a), what,
                                em_shape_str(n, sizes, b, sizeof b), d + 1);
        }
    return EM_OK;
}

/* Visits every element of index (odometer over all its dims) with the
 * offsets of index, data (dim's stride dropped) and other (index's shape). */
typedef struct {
    const em_tensor *index;
    int dim;
    int64_t n;               /* data's size along dim */
    const int64_t *dstr;     /* data strides */
    const int64_t *ostr;     /* other strides (index-shaped) */
    const char *op;
} gather_walk;

typedef void (*gather_fn)(void *ctx, int64_t data_off, int64_t other_off);

static em_status walk(const gather_walk *w, gather_fn fn, void *ctx) {
    const em_tensor *ix = w->index;
    if (ix->numel == 0) return EM_OK;
    int nd = ix->ndim;
    int64_t pos[EM_MAX_DIMS] = { 0 };
    int64_t io = 0, doff = 0, oo = 0;
    const int64_t *idata = (const int64_t *)em_tensor_data(ix);
    for (;;) {
        int64_t v = idata[io];
        if (v < 1 || v > w->n) {
            return em_set_error(EM_EINDEX, "%s: index %lld is out of bounds for dim %d with size %lld "
                                "(indices are 1-based)", w->op, (long long)v, w->dim + 1, (long long)w->n);
        }
        fn(ctx, doff + (v - 1) * (nd ? w->dstr[w->dim] : 0), oo);
        int d = nd - 1;
        for (; d >= 0; d--) {
            if (++pos[d] < ix->sizes[d]) {
                io += ix->strides[d];
                if (d != w->dim) doff += w->dstr[d];
                oo += w->ostr[d];
                break;
            }
            io -= ix->strides[d] * (ix->sizes[d] - 1);
            if (d != w->dim) doff -= w->dstr[d] * (ix->sizes[d] - 1);
            oo -= w->ostr[d] * (ix->sizes[d] - 1);
            pos[d] = 0;
        }
        if (d < 0) return EM_OK;
    }
}

typedef struct {
    const char *src;
    char *dst;
    size_t es;
    em_dtype dtype;
} copy_ctx;

static void scatter_add_one(void *p, int64_t data_off, int64_t other_off) {
    copy_ctx *c = p;
    void *d = c->dst + data_off * (int64_t)c->es;
    const void *s = c->src + other_off * (int64_t)c->es;
    em_store_from_double(d, c->dtype, em_load_as_double(d, c->dtype) + em_load_as_double(s, c->dtype));
}

/* gather runs on the index family's row walk (index.c: typed rows, parallel). */
em_tensor *em_cpu_gather(em_keyset ks, em_tensor *self, int64_t dim, em_tensor *index) {
    (void)ks;
    int d = em_wrap_dim(dim, self->ndim, "gather");
    if (d < 0) return NULL;
    return em_cpu_index_gather(self, d, index, "gather");
}

em_tensor *em_cpu_gather_backward(em_keyset ks, em_tensor *grad_output, em_intlist input_sizes, int64_t dim,
                                  em_tensor *index) {
    (void)ks;
    if (input_sizes.n < 0 || input_sizes.n > EM_MAX_DIMS) {
        em_set_error(EM_EVALUE, "gather_backward: input_sizes has %d entries (at most %d)", input_sizes.n,
                     EM_MAX_DIMS);
        return NULL;
    }
    int d = em_wrap_dim(dim, input_sizes.n, "gather_backward");
    if (d < 0) return NULL;
    int64_t one = 1;
    int n = input_sizes.n ? input_sizes.n : 1;
    const int64_t *sizes = input_sizes.n ? input_sizes.data : &one;
    if (check_index(index, n, sizes, d, "gather_backward", "input_sizes") != EM_OK) return NULL;
    if (grad_output->ndim != index->ndim ||
        memcmp(grad_output->sizes, index->sizes, sizeof(int64_t) * (size_t)index->ndim) != 0) {
        char a[EM_SHAPE_STR_MAX], b[EM_SHAPE_STR_MAX];
        em_set_error(EM_ESHAPE, "gather_backward: grad_output %s and index %s must have one shape",
                     em_shape_str(grad_output->ndim, grad_output->sizes, a, sizeof a),
                     em_shape_str(index->ndim, index->sizes, b, sizeof b));
        return NULL;
    }
    em_tensor *z = em_cpu_zeros(EM_KS(EM_KEY_CPU), input_sizes, grad_output->dtype, em_cpu_device());
    if (!z) return NULL;
    em_tensor *g = em_cpu_contiguous(EM_KS(EM_KEY_CPU), grad_output);
    if (!g) {
        em_tensor_release(z);
        return NULL;
    }
    int64_t zero = 0;
    gather_walk w = { index, d, sizes[d], input_sizes.n ? z->strides : &zero, g->strides, "gather_backward" };
    copy_ctx c = { (const char *)em_tensor_data(g), (char *)em_tensor_data(z), em_dtype_size(z->dtype), z->dtype };
    em_status s = walk(&w, scatter_add_one, &c);
    em_tensor_release(g);
    if (s != EM_OK) {
        em_tensor_release(z);
        return NULL;
    }
    return z;
}

/* ---- searchsorted ---- */

/* The 0-based insertion point of v in the n sorted values at p (stride st
 * elements): the first position whose value is >= v (side left) or > v
 * (side right). Floats compare as double, integers as int64. */
static int64_t insertion_point(const char *p, int64_t st, int64_t n, em_dtype dt, const char *vp, em_dtype vdt,
                               bool floating, bool right) {
    size_t es = em_dtype_size(dt);
    int64_t lo = 0, hi = n;
    double vd = floating ? em_load_as_double(vp, vdt) : 0;
    int64_t vi = floating ? 0 : em_load_as_int64(vp, vdt);
    while (lo < hi) {
        int64_t mid = lo + (hi - lo) / 2;
        const char *e = p + mid * st * (int64_t)es;
        bool go_right;
        if (floating) {
            double x = em_load_as_double(e, dt);
            go_right = right ? !(x > vd) : !(x >= vd); /* PyTorch's tests: NaN goes right */
        } else {
            int64_t x = em_load_as_int64(e, dt);
            go_right = right ? x <= vi : x < vi;
        }
        if (go_right) lo = mid + 1;
        else hi = mid;
    }
    return lo;
}

em_tensor *em_cpu_searchsorted(em_keyset ks, em_tensor *sorted_sequence, em_tensor *self, const char *side) {
    (void)ks;
    const em_tensor *seq = sorted_sequence;
    char a[EM_SHAPE_STR_MAX], b[EM_SHAPE_STR_MAX];
    if (seq->ndim == 0) {
        em_set_error(EM_ESHAPE, "searchsorted: sorted_sequence must have at least one dim, got a 0-dim tensor");
        return NULL;
    }
    bool one_d = seq->ndim == 1;
    if (!one_d && (self->ndim != seq->ndim ||
                   memcmp(self->sizes, seq->sizes, sizeof(int64_t) * (size_t)(seq->ndim - 1)) != 0)) {
        em_set_error(EM_ESHAPE, "searchsorted: sorted_sequence %s and self %s must have the same leading dims "
                     "(all but the last), or sorted_sequence must be 1-d",
                     em_shape_str(seq->ndim, seq->sizes, a, sizeof a), em_shape_str(self->ndim, self->sizes, b, sizeof b));
        return NULL;
    }
    if (seq->dtype == EM_BOOL || self->dtype == EM_BOOL) {
        em_set_error(EM_ETYPE, "searchsorted: bool tensors are not supported");
        return NULL;
    }
    em_tensor *out = em_tensor_new(self->ndim, self->sizes, EM_INT64, self->device);
    if (!out || self->numel == 0) return out;
    bool right = strcmp(side, "right") == 0;
    bool floating = em_cpu_is_float(seq->dtype) || em_cpu_is_float(self->dtype);
    int64_t n = seq->sizes[seq->ndim - 1], sst = seq->strides[seq->ndim - 1];
    const char *sd = (const char *)em_tensor_data(seq), *vd = (const char *)em_tensor_data(self);
    size_t ses = em_dtype_size(seq->dtype), ves = em_dtype_size(self->dtype);
    int64_t *od = (int64_t *)em_tensor_data(out);
    int64_t pos[EM_MAX_DIMS] = { 0 };
    for (int64_t k = 0; k < self->numel; k++) {
        /* offsets of this element of self, and of its row of seq */
        int64_t voff = 0, soff = 0;
        for (int d = 0; d < self->ndim; d++) {
            voff += pos[d] * self->strides[d];
            if (!one_d && d < seq->ndim - 1) soff += pos[d] * seq->strides[d];
        }
        od[k] = 1 + insertion_point(sd + soff * (int64_t)ses, sst, n, seq->dtype, vd + voff * (int64_t)ves,
                                    self->dtype, floating, right);
        for (int d = self->ndim - 1; d >= 0 && ++pos[d] == self->sizes[d]; d--) pos[d] = 0;
    }
    return out;
}
