/* unique.c -- unique and unique_consecutive (family reduce): the distinct
 * values of a tensor in ascending order (or the runs of equal neighbours),
 * with 1-based inverse indices and counts (PyTorch's _unique2 and
 * unique_consecutive over the flattened input, dim=None).
 *
 * The values are ordered by a sort on (value, position), so each value is
 * represented by its first occurrence (-0.0 before 0.0 keeps -0.0, as
 * PyTorch). NaN sorts last and every NaN is its own value (NaN != NaN).
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/cpu/em_cpu.h"

typedef struct {
    double f;
    int64_t i;
    int64_t idx;
} uq_elem;

static int cmp_float(const void *a_, const void *b_) {
    const uq_elem *a = a_, *b = b_;
    bool na = isnan(a->f), nb = isnan(b->f);
    if (na != nb) return na ? 1 : -1;
    if (!na && a->f != b->f) return a->f < b->f ? -1 : 1;
    return a->idx < b->idx ? -1 : a->idx > b->idx;
}

static int cmp_int(const void *a_, const void *b_) {
    const uq_elem *a = a_, *b = b_;
    if (a->i != b->i) return a->i < b->i ? -1 : 1;
    return a->idx < b->idx ? -1 : a->idx > b->idx;
}

em_tensor *em_cpu_unique(em_keyset ks, em_tensor *self, bool sorted, bool return_inverse, bool return_counts,
                         em_tensor **inverse_indices, em_tensor **counts) {
    (void)ks;
    (void)sorted; /* always sorted: PyTorch's unsorted order is its hash table's */
    const char *op = "unique";
    *inverse_indices = NULL;
    *counts = NULL;
    const int64_t n = self->numel, es = (int64_t)em_dtype_size(self->dtype);
    const bool fl = em_dtype_is_floating(self->dtype);
    em_tensor *src = self->is_contiguous ? em_tensor_retain(self) : em_cpu_to_dtype(self, self->dtype, op);
    uq_elem *q = src ? malloc((size_t)(n ? n : 1) * sizeof *q) : NULL;
    int64_t *inv = q ? malloc((size_t)(n ? n : 1) * sizeof *inv) : NULL;
    int64_t *cnt = inv ? malloc((size_t)(n ? n : 1) * sizeof *cnt) : NULL;
    em_tensor *out = NULL, *ti = NULL, *tc = NULL;
    if (!cnt) {
        if (src) em_set_error(EM_ENOMEM, "%s: out of memory", op);
        goto fail;
    }
    const char *x = em_tensor_data(src);
    for (int64_t k = 0; k < n; k++) {
        q[k].idx = k;
        if (fl) q[k].f = em_load_as_double(x + k * es, self->dtype);
        else q[k].i = em_load_as_int64(x + k * es, self->dtype);
    }
    qsort(q, (size_t)n, sizeof *q, fl ? cmp_float : cmp_int);
    int64_t nu = 0;
    for (int64_t k = 0; k < n; k++) {
        bool same = k > 0 && (fl ? q[k].f == q[k - 1].f : q[k].i == q[k - 1].i);
        if (!same) q[nu++].idx = q[k].idx, cnt[nu - 1] = 0; /* q[nu-1] keeps the run's first position */
        cnt[nu - 1]++;
        inv[q[k].idx] = nu; /* 1-based */
    }
    out = em_tensor_new(1, &nu, self->dtype, em_cpu_dev());
    if (!out) goto fail;
    for (int64_t u = 0; u < nu; u++)
        memcpy((char *)em_tensor_data(out) + u * es, x + q[u].idx * es, (size_t)es);
    int64_t zero = 0;
    /* PyTorch's _unique2 fills the inverse also when only counts are asked */
    return_inverse = return_inverse || return_counts;
    ti = return_inverse ? em_tensor_new(self->ndim, self->sizes, EM_INT64, em_cpu_dev())
                        : em_tensor_new(1, &zero, EM_INT64, em_cpu_dev());
    tc = ti ? em_tensor_new(1, return_counts ? &nu : &zero, EM_INT64, em_cpu_dev()) : NULL;
    if (!tc) goto fail;
    if (return_inverse && n > 0) memcpy(em_tensor_data(ti), inv, (size_t)n * sizeof *inv);
    if (return_counts && nu > 0) memcpy(em_tensor_data(tc), cnt, (size_t)nu * sizeof *cnt);
    free(q);
    free(inv);
    free(cnt);
    em_tensor_release(src);
    *inverse_indices = ti;
    *counts = tc;
    return out;
fail:
    free(q);
    free(inv);
    free(cnt);
    em_tensor_release(src);
    em_tensor_release(out);
    em_tensor_release(ti);
    em_tensor_release(tc);
    return NULL;
}

/* unique_consecutive: the first element of each run of equal neighbours
 * in the flattened self (NaN never equals its neighbour), with the 1-based
 * run of each element and the runs' lengths when asked (else empty). */
em_tensor *em_cpu_unique_consecutive(em_keyset ks, em_tensor *self, bool return_inverse, bool return_counts,
                                     em_tensor **inverse_indices, em_tensor **counts) {
    (void)ks;
    const char *op = "unique_consecutive";
    *inverse_indices = NULL;
    *counts = NULL;
    const int64_t n = self->numel, es = (int64_t)em_dtype_size(self->dtype);
    const bool fl = em_dtype_is_floating(self->dtype);
    em_tensor *src = self->is_contiguous ? em_tensor_retain(self) : em_cpu_to_dtype(self, self->dtype, op);
    int64_t *first = src ? malloc((size_t)(n ? n : 1) * sizeof *first) : NULL;
    int64_t *cnt = first ? malloc((size_t)(n ? n : 1) * sizeof *cnt) : NULL;
    em_tensor *ti = cnt && return_inverse ? em_tensor_new(self->ndim, self->sizes, EM_INT64, em_cpu_dev()) : NULL;
    em_tensor *out = NULL, *tc = NULL;
    if (!cnt || (return_inverse && !ti)) {
        if (src && !cnt) em_set_error(EM_ENOMEM, "%s: out of memory", op);
        goto fail;
    }
    const char *x = em_tensor_data(src);
    int64_t nu = 0;
    int64_t *inv = ti ? em_tensor_data(ti) : NULL;
    for (int64_t k = 0; k < n; k++) {
        bool same = false;
        if (k > 0) {
            const char *a = x + (k - 1) * es, *b = x + k * es;
            same = fl ? em_load_as_double(a, self->dtype) == em_load_as_double(b, self->dtype)
                      : em_load_as_int64(a, self->dtype) == em_load_as_int64(b, self->dtype);
        }
        if (!same) {
            first[nu] = k;
            cnt[nu++] = 0;
        }
        cnt[nu - 1]++;
        if (inv) inv[k] = nu; /* 1-based */
    }
    int64_t zero = 0;
    out = em_tensor_new(1, &nu, self->dtype, em_cpu_dev());
    tc = out ? em_tensor_new(1, return_counts ? &nu : &zero, EM_INT64, em_cpu_dev()) : NULL;
    if (!ti && tc) ti = em_tensor_new(1, &zero, EM_INT64, em_cpu_dev());
    if (!tc || !ti) goto fail;
    for (int64_t u = 0; u < nu; u++) memcpy((char *)em_tensor_data(out) + u * es, x + first[u] * es, (size_t)es);
    if (return_counts && nu > 0) memcpy(em_tensor_data(tc), cnt, (size_t)nu * sizeof *cnt);
    free(first);
    free(cnt);
    em_tensor_release(src);
    *inverse_indices = ti;
    *counts = tc;
    return out;
fail:
    free(first);
    free(cnt);
    em_tensor_release(src);
    em_tensor_release(out);
    em_tensor_release(ti);
    em_tensor_release(tc);
    return NULL;
}
