/* composite_reduce.c -- composite ops of the reduce family (nansum,
 * nanmean, count_nonzero, diff): written with the public ops, so autograd,
 * double backward and every backend come from their parts (Note [Composite
 * ops] in codegen/codegen.h). The key set argument is unused.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "autograd/em_autograd.h"
#include "em_ops.h"
#include "em_kernels_decl.h"

/* Releases the n tensors of t (NULLs allowed). */
static void release_all(int n, em_tensor **t) {
    for (int i = 0; i < n; i++) em_tensor_release(t[i]);
}

/* self with NaN replaced by 0 (self itself, retained, when not floating). */
static em_tensor *nan_to_zero(em_tensor *self) {
    if (!em_dtype_is_floating(self->dtype)) return em_tensor_retain(self);
    em_tensor *isnan = em_ne(self, self);
    em_tensor *zero = isnan ? em_tensor_wrapped_scalar(em_scalar_float(0)) : NULL;
    em_tensor *r = zero ? em_where(isnan, zero, self) : NULL;
    em_tensor_release(isnan);
    em_tensor_release(zero);
    return r;
}

em_tensor *em_comp_nansum(em_keyset ks, em_tensor *self, em_intlist dim, bool keepdim, em_dtype dtype) {
    (void)ks;
    em_tensor *x = nan_to_zero(self);
    em_tensor *r = x ? em_sum(x, dim, keepdim, dtype) : NULL;
    em_tensor_release(x);
    return r;
}

/* PyTorch's nanmean: nansum / the count of elements that are not NaN. */
em_tensor *em_comp_nanmean(em_keyset ks, em_tensor *self, em_intlist dim, bool keepdim, em_dtype dtype) {
    (void)ks;
    if (!em_dtype_is_floating(self->dtype)) {
        em_set_error(EM_ETYPE, "nanmean: self must have a floating dtype, got %s", em_dtype_name(self->dtype));
        return NULL;
    }
    enum { S, NN, C, K };
    em_tensor *t[K] = { NULL };
    em_tensor *r = NULL;
    if ((t[S] = em_comp_nansum(ks, self, dim, keepdim, dtype)) && (t[NN] = em_eq(self, self)) &&
        (t[C] = em_sum(t[NN], dim, keepdim, EM_DTYPE_NONE)))
        r = em_div(t[S], t[C]);
    release_all(K, t);
    return r;
}

em_tensor *em_comp_count_nonzero(em_keyset ks, em_tensor *self, em_intlist dim) {
    (void)ks;
    em_tensor *zero = em_tensor_wrapped_scalar(em_scalar_int(0));
    em_tensor *nz = zero ? em_ne(self, zero) : NULL;
    em_tensor *r = nz ? em_sum(nz, dim, false, EM_DTYPE_NONE) : NULL;
    em_tensor_release(zero);
    em_tensor_release(nz);
    return r;
}

/* PyTorch 1.13's diff: n == 0 copies self (prepend and append ignored);
 * otherwise prepend and append are joined to self along dim, then n rounds
 * of x[1:] - x[:-1] (x[1:] != x[:-1] for bool) run; n larger than the dim
 * leaves it empty; a negative n runs none (the join, or self itself). */
em_tensor *em_comp_diff(em_keyset ks, em_tensor *self, int64_t n, int64_t dim, em_tensor *prepend,
                        em_tensor *append) {
    (void)ks;
    if (self->ndim < 1) {
        em_set_error(EM_ESHAPE, "diff: self must have at least one dim, got a 0-dim tensor");
        return NULL;
    }
    const em_tensor *extra[2] = { prepend, append };
    const char *names[2] = { "prepend", "append" };
    for (int k = 0; k < 2; k++)
        if (extra[k] && extra[k]->ndim != self->ndim) {
            em_set_error(EM_ESHAPE, "diff: %s must have self's number of dims (%d), got %d", names[k],
                         (int)self->ndim, (int)extra[k]->ndim);
            return NULL;
        }
    int d = em_wrap_dim(dim, self->ndim, "diff");
    if (d < 0) return NULL;
    if (n == 0) return em_clone(self);
    if (n < 0 && !prepend && !append) return em_tensor_retain(self);
    em_tensor *x;
    if (prepend || append) {
        em_tensor *parts[3];
        int np = 0;
        if (prepend) parts[np++] = prepend;
        parts[np++] = self;
        if (append) parts[np++] = append;
        x = em_cat((em_tensorlist){ parts, np }, d);
    } else {
        x = em_tensor_retain(self);
    }
    if (!x) return NULL;
    if (n > x->sizes[d]) n = x->sizes[d];
    for (int64_t i = 0; i < n && x; i++) {
        int64_t len = x->sizes[d] - 1;
        em_tensor *hi = em_narrow(x, d, 1, len);
        em_tensor *lo = hi ? em_narrow(x, d, 0, len) : NULL;
        em_tensor *r = NULL;
        if (lo) r = x->dtype == EM_BOOL ? em_ne(hi, lo) : em_sub(hi, lo, em_scalar_int(1));
        em_tensor_release(hi);
        em_tensor_release(lo);
        em_tensor_release(x);
        x = r;
    }
    return x;
}

/* ---- quantile / nanquantile ---- */

/* t's values as a contiguous CPU tensor of dtype dt (a new reference): the
 * few host reads a composite needs (q, NaN counts). */
static em_tensor *on_host(em_tensor *t, em_dtype dt) {
    em_tensor *h = t->device.type == EM_CPU ? em_tensor_retain(t) : em_to_device(t, em_cpu_device());
    em_tensor *c = h ? (h->dtype == dt ? em_contiguous(h) : em_to(h, dt)) : NULL;
    em_tensor_release(h);
    em_tensor *r = c && !c->is_contiguous ? em_contiguous(c) : em_tensor_retain(c);
    em_tensor_release(c);
    return r;
}

/* An int64 (or dtype dt) tensor of the given shape on device dev from the
 * host values v (copied). */
static em_tensor *from_host(const void *v, int ndim, const int64_t *sizes, em_dtype dt, em_device dev) {
    em_tensor *h = em_tensor_new(ndim, sizes, dt, em_cpu_device());
    if (!h) return NULL;
    if (h->numel > 0) memcpy(em_tensor_data(h), v, (size_t)h->numel * em_dtype_size(dt));
    if (dev.type == EM_CPU) return h;
    em_tensor *r = em_to_device(h, dev);
    em_tensor_release(h);
    return r;
}

/* PyTorch 1.13's quantile_impl as a composite: sort the reduced values into
 * the last dim, turn q into ranks (q * (count - 1), count being the row's
 * size, or its non-NaN count for nanquantile; a row with NaN has rank
 * count - 1 in quantile), adjust them by interpolation, gather the values
 * below and above and interpolate. The gradient flows through sort and
 * gather as in PyTorch. */
static em_tensor *quantile_common(em_tensor *self, em_tensor *q, const int64_t *dim, bool keepdim,
                                  const char *interp, bool ignore_nan, const char *op) {
    if (self->dtype != EM_FLOAT32 && self->dtype != EM_FLOAT64) {
        em_set_error(EM_ETYPE, "%s: self must be float32 or float64, got %s", op, em_dtype_name(self->dtype));
        return NULL;
    }
    if (self->numel == 0) {
        em_set_error(EM_EVALUE, "%s: self must not be empty", op);
        return NULL;
    }
    if (q->ndim > 1) {
        em_set_error(EM_ESHAPE, "%s: q must be a number, a 0-dim or a 1-d tensor, got %d dims", op, (int)q->ndim);
        return NULL;
    }
    if (q->dtype != self->dtype && !q->wrapped_number) {
        em_set_error(EM_ETYPE, "%s: q must have self's dtype %s, got %s", op, em_dtype_name(self->dtype),
                     em_dtype_name(q->dtype));
        return NULL;
    }
    int d = 0;
    if (dim && (d = em_wrap_dim(*dim, self->ndim, op)) < 0) return NULL;
    /* q in self's dtype (a number is rounded to it, as PyTorch's scalar overload) */
    em_tensor *qh = on_host(q, self->dtype);
    if (!qh) return NULL;
    const int64_t nq = qh->numel;
    double *qv = malloc((size_t)(nq ? nq : 1) * sizeof *qv);
    if (!qv) {
        em_tensor_release(qh);
        em_set_error(EM_ENOMEM, "%s: out of memory", op);
        return NULL;
    }
    for (int64_t j = 0; j < nq; j++) {
        qv[j] = em_load_as_double((char *)em_tensor_data(qh) + j * (int64_t)em_dtype_size(qh->dtype), qh->dtype);
        if (!(qv[j] >= 0 && qv[j] <= 1)) {
            em_set_error(EM_EVALUE, "%s: q values must be in [0, 1], got %g", op, qv[j]);
            free(qv);
            em_tensor_release(qh);
            return NULL;
        }
    }
    em_tensor_release(qh);

    enum { U, TR, SV, SI, NN, CNT, CH, BI, AI, W, VB, VA, DF, WD, RES, K };
    em_tensor *t[K] = { NULL };
    em_tensor *r = NULL;
    int64_t *ib = NULL, *ia = NULL;
    double *wv = NULL;
    /* sorted: the reduced values in the last dim, the other dims shaped as
     * the result without q's dim (keepdim included) */
    int64_t shp[EM_MAX_DIMS + 1];
    int nd = 0;
    if (!dim) {
        if (keepdim)
            for (int i = 0; i < self->ndim; i++) shp[nd++] = 1;
        shp[nd++] = self->numel;
        if (!(t[TR] = em_reshape(self, (em_intlist){ shp, nd }))) goto out;
    } else {
        for (int i = 0; i < self->ndim; i++)
            if (i != d) shp[nd++] = self->sizes[i];
            else if (keepdim) shp[nd++] = 1;
        shp[nd++] = self->ndim ? self->sizes[d] : 1;
        if (!(t[U] = em_unsqueeze(self, -1)) || !(t[TR] = em_transpose(t[U], d, -1))) goto out;
        em_tensor *v = em_reshape(t[TR], (em_intlist){ shp, nd });
        em_tensor_release(t[TR]);
        if (!(t[TR] = v)) goto out;
    }
    if (!(t[SV] = em_sort(t[TR], -1, false, false, &t[SI]))) goto out;
    const int64_t n = shp[nd - 1];
    int64_t rows = 1;
    for (int i = 0; i < nd - 1; i++) rows *= shp[i];
    /* NaN per row (sorted last) */
    if (!(t[NN] = em_ne(t[SV], t[SV])) || !(t[CNT] = em_sum(t[NN], (em_intlist){ (int64_t[]){ -1 }, 1 }, false,
                                                           EM_DTYPE_NONE)) ||
        !(t[CH] = on_host(t[CNT], EM_INT64)))
        goto out;
    const int64_t *nans = em_tensor_data(t[CH]);
    const int64_t nj = nq ? nq : 0;
    ib = malloc((size_t)(rows * nj + 1) * sizeof *ib);
    ia = malloc((size_t)(rows * nj + 1) * sizeof *ia);
    wv = malloc((size_t)(rows * nj + 1) * sizeof *wv);
    if (!ib || !ia || !wv) {
        em_set_error(EM_ENOMEM, "%s: out of memory", op);
        goto out;
    }
    bool lin = strcmp(interp, "linear") == 0, mid = strcmp(interp, "midpoint") == 0;
    for (int64_t row = 0; row < rows; row++)
        for (int64_t j = 0; j < nj; j++) {
            double rank;
            if (ignore_nan) {
                rank = qv[j] * (double)(n - nans[row] - 1);
                if (rank < 0) rank = 0;
            } else {
                rank = nans[row] > 0 ? (double)(n - 1) : qv[j] * (double)(n - 1);
            }
            if (self->dtype == EM_FLOAT32) rank = (float)rank; /* PyTorch computes ranks in self's dtype */
            if (strcmp(interp, "lower") == 0) rank = floor(rank);
            else if (strcmp(interp, "higher") == 0) rank = ceil(rank);
            else if (strcmp(interp, "nearest") == 0) rank = nearbyint(rank);
            int64_t k = row * nj + j;
            ib[k] = (int64_t)rank + 1; /* gather's indices are 1-based */
            ia[k] = (int64_t)ceil(rank) + 1;
            wv[k] = mid ? 0.5 : rank - floor(rank);
        }
    shp[nd - 1] = nj;
    if (!(t[BI] = from_host(ib, nd, shp, EM_INT64, self->device)) ||
        !(t[VB] = em_gather(t[SV], -1, t[BI])))
        goto out;
    if (lin || mid) {
        /* PyTorch's lerp: below + w * (above - below) for w < 0.5, else
         * above - (above - below) * (1 - w) (the same infinities and NaN) */
        if (!(t[AI] = from_host(ia, nd, shp, EM_INT64, self->device)) || !(t[VA] = em_gather(t[SV], -1, t[AI])))
            goto out;
        em_tensor *w64 = from_host(wv, nd, shp, EM_FLOAT64, self->device);
        t[W] = w64 ? em_to(w64, self->dtype) : NULL;
        em_tensor_release(w64);
        if (!t[W] || !(t[DF] = em_sub(t[VA], t[VB], em_scalar_int(1))) || !(t[WD] = em_mul(t[W], t[DF])))
            goto out;
        em_tensor *half = em_tensor_wrapped_scalar(em_scalar_float(0.5));
        em_tensor *one = half ? em_tensor_wrapped_scalar(em_scalar_float(1)) : NULL;
        em_tensor *small = one ? em_lt(t[W], half) : NULL;
        em_tensor *lo = small ? em_add(t[VB], t[WD], em_scalar_int(1)) : NULL;
        em_tensor *omw = lo ? em_sub(one, t[W], em_scalar_int(1)) : NULL;
        em_tensor *dd = omw ? em_mul(t[DF], omw) : NULL;
        em_tensor *hi = dd ? em_sub(t[VA], dd, em_scalar_int(1)) : NULL;
        t[RES] = hi ? em_where(small, lo, hi) : NULL;
        em_tensor *tmp[] = { half, one, small, lo, omw, dd, hi };
        release_all(7, tmp);
        if (!t[RES]) goto out;
    } else {
        t[RES] = em_tensor_retain(t[VB]);
    }
    /* q's dim first (or none for a 0-dim q); a new tensor, not a view */
    em_tensor *v;
    if (q->ndim == 0) {
        int64_t last = nd - 1;
        v = em_squeeze(t[RES], &last);
    } else {
        int64_t perm[EM_MAX_DIMS + 1];
        perm[0] = nd - 1;
        for (int i = 1; i < nd; i++) perm[i] = i - 1;
        v = em_permute(t[RES], (em_intlist){ perm, nd });
    }
    r = v ? em_clone(v) : NULL;
    em_tensor_release(v);
out:
    release_all(K, t);
    free(ib);
    free(ia);
    free(wv);
    free(qv);
    return r;
}

em_tensor *em_comp_quantile(em_keyset ks, em_tensor *self, em_tensor *q, const int64_t *dim, bool keepdim,
                            const char *interpolation) {
    (void)ks;
    return quantile_common(self, q, dim, keepdim, interpolation, false, "quantile");
}

em_tensor *em_comp_nanquantile(em_keyset ks, em_tensor *self, em_tensor *q, const int64_t *dim, bool keepdim,
                               const char *interpolation) {
    (void)ks;
    return quantile_common(self, q, dim, keepdim, interpolation, true, "nanquantile");
}

/* ---- bucketize ---- */

/* searchsorted over the 1-d boundaries: the 1-based bucket of each value
 * (PyTorch's 0-based index + 1, as searchsorted's results). */
em_tensor *em_comp_bucketize(em_keyset ks, em_tensor *self, em_tensor *boundaries, bool out_int32, bool right) {
    (void)ks;
    if (boundaries->ndim != 1) {
        em_set_error(EM_ESHAPE, "bucketize: boundaries must be 1-d, got %d dims", (int)boundaries->ndim);
        return NULL;
    }
    /* bool values bucket as 0 and 1 */
    em_tensor *x = self->dtype == EM_BOOL ? em_to(self, EM_INT64) : em_tensor_retain(self);
    em_tensor *r = x ? em_searchsorted(boundaries, x, right ? "right" : "left") : NULL;
    em_tensor_release(x);
    if (r && out_int32) {
        em_tensor *c = em_to(r, EM_INT32);
        em_tensor_release(r);
        r = c;
    }
    return r;
}
