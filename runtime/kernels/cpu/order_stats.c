/* order_stats.c -- order statistics (family reduce): median and nanmedian
 * (of all elements, or along a dim with indices), kthvalue and mode.
 *
 * Indices are 1-based int64 (DESIGN.md, API conventions). Which of several
 * equal values' index is returned follows PyTorch 1.13's CPU kernels, so
 * the selections are ported step for step (Note [Order statistic ties]).
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/cpu/em_cpu.h"
#include "kernels/cpu/stl_port.h"

/* Note [Order statistic ties]
 * PyTorch picks the index of a median, kth value or mode with library
 * algorithms whose result among equal values depends on their steps:
 * median.dim/nanmedian.dim run libstdc++'s std::nth_element over positions
 * ordered by (value, position), NaN last for nanmedian (a total order, so
 * only rows of NaNs depend on the algorithm); kthvalue runs TH's
 * quick_select (Sedgewick's partition) over (value, position) pairs
 * compared by value only, NaN largest; mode runs std::sort by value only
 * and reports the last position of the longest run (ember orders NaN
 * above numbers there, where PyTorch's comparison is undefined; each NaN
 * is a run of its own in both). The ports below keep
 * those steps; changing them changes which tied index is returned. */

/* ---- one row: values loaded wide ---- */

typedef struct {
    double f;    /* floating rows */
    int64_t i;   /* integer and bool rows */
    int64_t idx; /* 0-based position in the row */
} os_elem;

typedef enum {
    OS_LESS,      /* a.value < b.value (mode; NaN above numbers) */
    OS_MEDIAN,    /* (value, position), no NaN in the row */
    OS_NANMEDIAN, /* (value, position), NaN after every number */
} os_order;

typedef struct {
    os_order order;
    bool floating;
} os_cmp;

static bool os_less(const os_cmp *c, const os_elem *a, const os_elem *b) {
    if (!c->floating) {
        if (c->order == OS_LESS) return a->i < b->i;
        return a->i < b->i || (a->i == b->i && a->idx < b->idx);
    }
    /* mode: NaN above numbers (PyTorch compares with < alone, which is not
     * an ordering with NaN and lets std::sort read out of bounds) */
    if (c->order == OS_LESS) return (!isnan(a->f) && isnan(b->f)) || a->f < b->f;
    bool r = a->f < b->f || (a->f == b->f && a->idx < b->idx);
    if (c->order == OS_NANMEDIAN) r = r || (isnan(b->f) && !isnan(a->f));
    return r;
}

/* libstdc++'s sort and nth_element (introsort / introselect): os_sort,
 * os_nth_element, os_swap, ... (kernels/cpu/stl_port.h) */
EM_STL_PORT(os_, os_elem, os_cmp, os_less)

/* ---- TH's quick_select (kthvalue) ---- */

/* a > b, NaN largest (kthvalue's gt_or_nan) */
static bool gt_or_nan(bool floating, const os_elem *a, const os_elem *b) {
    if (!floating) return a->i > b->i;
    return (isnan(a->f) && !isnan(b->f)) || a->f > b->f;
}

/* Moves the k-th smallest (0-based) of arr[0..n) to arr[k]. */
static void quick_select(bool fl, os_elem *arr, int64_t n, int64_t k) {
    int64_t L = 0, R = n - 1, P, i, j;
    for (;;) {
        if (R <= L) return;
        if (R == L + 1) {
            if (gt_or_nan(fl, &arr[L], &arr[R])) os_swap(&arr[L], &arr[R]);
            return;
        }
        P = (L + R) >> 1;
        os_swap(&arr[P], &arr[L + 1]);
        if (gt_or_nan(fl, &arr[L + 1], &arr[R])) os_swap(&arr[L + 1], &arr[R]);
        if (gt_or_nan(fl, &arr[L], &arr[R])) os_swap(&arr[L], &arr[R]);
        if (gt_or_nan(fl, &arr[L + 1], &arr[L])) os_swap(&arr[L + 1], &arr[L]);
        i = L + 1;
        j = R;
        os_elem piv = arr[L];
        for (;;) {
            do i++;
            while (gt_or_nan(fl, &piv, &arr[i]));
            do j--;
            while (gt_or_nan(fl, &arr[j], &piv));
            if (j < i) break;
            os_swap(&arr[i], &arr[j]);
        }
        os_swap(&arr[L], &arr[j]);
        if (j <= k) L = i;
        if (j >= k) R = j - 1;
    }
}

/* ---- rows along a dim ---- */

typedef enum { SEL_MEDIAN, SEL_NANMEDIAN, SEL_KTH, SEL_MODE } sel_kind;

/* The 0-based position in the row q[0..n) (loaded, q[j].idx == j) that
 * kind selects; q is reordered. */
static int64_t select_row(sel_kind kind, bool fl, os_elem *q, int64_t n, int64_t k) {
    switch (kind) {
    case SEL_MEDIAN: {
        if (fl)
            for (int64_t j = 0; j < n; j++)
                if (isnan(q[j].f)) return j; /* the first NaN is the median */
        os_cmp c = { OS_MEDIAN, fl };
        os_nth_element(&c, q, q + (n - 1) / 2, q + n);
        return q[(n - 1) / 2].idx;
    }
    case SEL_NANMEDIAN: {
        int64_t nans = 0;
        if (fl)
            for (int64_t j = 0; j < n; j++) nans += isnan(q[j].f);
        os_cmp c = { OS_NANMEDIAN, fl };
        int64_t m = (n - nans - 1) / 2; /* C++'s division: -1 / 2 == 0 */
        os_nth_element(&c, q, q + m, q + n);
        return q[m].idx;
    }
    case SEL_KTH:
        quick_select(fl, q, n, k);
        return q[k].idx;
    case SEL_MODE: {
        os_cmp c = { OS_LESS, fl };
        os_sort(&c, q, q + n);
        int64_t best = 0, run = 0, maxrun = 0;
        for (int64_t j = 0; j < n; j++) {
            run++;
            bool end = j == n - 1 || (fl ? q[j].f != q[j + 1].f : q[j].i != q[j + 1].i);
            if (end) {
                if (run > maxrun) {
                    best = q[j].idx;
                    maxrun = run;
                }
                run = 0;
            }
        }
        return best;
    }
    }
    return 0;
}

static bool bool_refused(const em_tensor *self, const char *op) {
    if (self->dtype != EM_BOOL) return false;
    em_set_error(EM_ETYPE, "%s: bool tensors are refused (as PyTorch refuses them)", op);
    return true;
}

/* values (self's dtype) and 1-based indices (int64) of kind along dim,
 * keepdim as PyTorch. k: kthvalue's 1-based k. */
static em_tensor *select_dim(em_tensor *self, int64_t dim, bool keepdim, sel_kind kind, int64_t k,
                             em_tensor **indices, const char *op) {
    *indices = NULL;
    int d = em_wrap_dim(dim, self->ndim, op);
    if (d < 0) return NULL;
    /* PyTorch's kthvalue copies a 0-dim input whatever its dtype */
    if (kind != SEL_MODE && !(kind == SEL_KTH && self->ndim == 0) && bool_refused(self, op)) return NULL;
    int64_t n = self->ndim ? self->sizes[d] : 1;
    if (kind == SEL_KTH && (k < 1 || k > n)) {
        em_set_error(EM_EINDEX, "%s: k %lld is out of range for dim %d of size %lld", op, (long long)k, d + 1,
                     (long long)n);
        return NULL;
    }
    if (n == 0) {
        em_set_error(EM_EINDEX, "%s: expected reduction dim %d to have non-zero size", op, d + 1);
        return NULL;
    }
    int64_t osz[EM_MAX_DIMS];
    int ond = 0;
    for (int i = 0; i < self->ndim; i++) {
        if (i != d) osz[ond++] = self->sizes[i];
        else if (keepdim) osz[ond++] = 1;
    }
    em_tensor *src = self->is_contiguous ? em_tensor_retain(self) : em_cpu_to_dtype(self, self->dtype, op);
    em_tensor *v = src ? em_tensor_new(ond, osz, self->dtype, em_cpu_dev()) : NULL;
    em_tensor *ix = v ? em_tensor_new(ond, osz, EM_INT64, em_cpu_dev()) : NULL;
    os_elem *q = ix ? malloc((size_t)n * sizeof *q) : NULL;
    if (!q) {
        if (ix) em_set_error(EM_ENOMEM, "%s: out of memory", op);
        em_tensor_release(src);
        em_tensor_release(v);
        em_tensor_release(ix);
        return NULL;
    }
    int64_t outer = 1, inner = 1;
    for (int i = 0; i < d; i++) outer *= self->sizes[i];
    for (int i = d + 1; i < self->ndim; i++) inner *= self->sizes[i];
    const bool fl = em_dtype_is_floating(self->dtype);
    const int64_t es = (int64_t)em_dtype_size(self->dtype);
    const char *x = em_tensor_data(src);
    char *vd = em_tensor_data(v);
    int64_t *id = em_tensor_data(ix);
    for (int64_t o = 0; o < outer; o++)
        for (int64_t j = 0; j < inner; j++) {
            const char *row = x + (o * n * inner + j) * es;
            for (int64_t i = 0; i < n; i++) {
                q[i].idx = i;
                if (fl) q[i].f = em_load_as_double(row + i * inner * es, self->dtype);
                else q[i].i = em_load_as_int64(row + i * inner * es, self->dtype);
            }
            int64_t p = select_row(kind, fl, q, n, k - 1);
            memcpy(vd + (o * inner + j) * es, row + p * inner * es, (size_t)es);
            id[o * inner + j] = p + 1;
        }
    free(q);
    em_tensor_release(src);
    *indices = ix;
    return v;
}

/* median/nanmedian of all elements: a 0-dim tensor of self's dtype (NaN
 * for an empty floating tensor, as PyTorch). */
static em_tensor *median_all(em_tensor *self, bool ignore_nan, const char *op) {
    if (bool_refused(self, op)) return NULL;
    if (self->numel == 0 && !em_dtype_is_floating(self->dtype)) {
        em_set_error(EM_EVALUE, "%s: an empty %s tensor has no median", op, em_dtype_name(self->dtype));
        return NULL;
    }
    em_tensor *out = em_tensor_new(0, NULL, self->dtype, em_cpu_dev());
    if (!out) return NULL;
    const int64_t n = self->numel, es = (int64_t)em_dtype_size(self->dtype);
    if (n == 0) { /* floating: NaN */
        em_store_from_double(em_tensor_data(out), self->dtype, NAN);
        return out;
    }
    em_tensor *src = self->is_contiguous ? em_tensor_retain(self) : em_cpu_to_dtype(self, self->dtype, op);
    os_elem *q = src ? malloc((size_t)n * sizeof *q) : NULL;
    if (!q) {
        if (src) em_set_error(EM_ENOMEM, "%s: out of memory", op);
        em_tensor_release(src);
        em_tensor_release(out);
        return NULL;
    }
    const bool fl = em_dtype_is_floating(self->dtype);
    const char *x = em_tensor_data(src);
    for (int64_t i = 0; i < n; i++) {
        q[i].idx = i;
        if (fl) q[i].f = em_load_as_double(x + i * es, self->dtype);
        else q[i].i = em_load_as_int64(x + i * es, self->dtype);
    }
    int64_t p = select_row(ignore_nan ? SEL_NANMEDIAN : SEL_MEDIAN, fl, q, n, 0);
    memcpy(em_tensor_data(out), x + p * es, (size_t)es);
    free(q);
    em_tensor_release(src);
    return out;
}

em_tensor *em_cpu_median(em_keyset ks, em_tensor *self) {
    (void)ks;
    return median_all(self, false, "median");
}

em_tensor *em_cpu_nanmedian(em_keyset ks, em_tensor *self) {
    (void)ks;
    return median_all(self, true, "nanmedian");
}

em_tensor *em_cpu_median_dim(em_keyset ks, em_tensor *self, int64_t dim, bool keepdim, em_tensor **indices) {
    (void)ks;
    return select_dim(self, dim, keepdim, SEL_MEDIAN, 0, indices, "median");
}

em_tensor *em_cpu_nanmedian_dim(em_keyset ks, em_tensor *self, int64_t dim, bool keepdim, em_tensor **indices) {
    (void)ks;
    return select_dim(self, dim, keepdim, SEL_NANMEDIAN, 0, indices, "nanmedian");
}

em_tensor *em_cpu_kthvalue(em_keyset ks, em_tensor *self, int64_t k, int64_t dim, bool keepdim,
                           em_tensor **indices) {
    (void)ks;
    return select_dim(self, dim, keepdim, SEL_KTH, k, indices, "kthvalue");
}

em_tensor *em_cpu_mode(em_keyset ks, em_tensor *self, int64_t dim, bool keepdim, em_tensor **indices) {
    (void)ks;
    return select_dim(self, dim, keepdim, SEL_MODE, 0, indices, "mode");
}
