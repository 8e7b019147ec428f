/* histogram.c -- counting kernels (family reduce): bincount and histc.
 *
 * bincount counts raw values: value v lands in result element v (0-based
 * in C, so a 0 counts in Lua's slot 1), exactly PyTorch's result tensor.
 * histc bins like PyTorch 1.13's CPU histogram (linear interpolation into
 * the edges linspace(min, max, bins + 1), then a local search among the
 * neighbouring edges; the last bin includes max; NaN counts in the first
 * bin, as PyTorch 1.13's CPU kernel does).
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/cpu/em_cpu.h"

static bool is_integral(em_dtype t) { return t == EM_UINT8 || t == EM_INT8 || t == EM_INT32 || t == EM_INT64; }

em_tensor *em_cpu_bincount(em_keyset ks, em_tensor *self, em_tensor *weights, int64_t minlength) {
    (void)ks;
    const char *op = "bincount";
    if (!is_integral(self->dtype)) {
        em_set_error(EM_ETYPE, "%s: self must have an integer dtype, got %s", op, em_dtype_name(self->dtype));
        return NULL;
    }
    if (self->ndim != 1) {
        em_set_error(EM_ESHAPE, "%s: self must be 1-d, got %d dims", op, (int)self->ndim);
        return NULL;
    }
    if (minlength < 0) {
        em_set_error(EM_EVALUE, "%s: minlength must be >= 0, got %lld", op, (long long)minlength);
        return NULL;
    }
    if (weights && (weights->ndim != 1 || weights->sizes[0] != self->sizes[0])) {
        char a[EM_SHAPE_STR_MAX], b[EM_SHAPE_STR_MAX];
        em_set_error(EM_ESHAPE, "%s: weights %s must be 1-d with self's length %s", op,
                     em_shape_str(weights->ndim, weights->sizes, a, sizeof a),
                     em_shape_str(self->ndim, self->sizes, b, sizeof b));
        return NULL;
    }
    const int64_t n = self->numel;
    if (n == 0) { /* PyTorch: int64 zeros of minlength, weights or not */
        em_tensor *z = em_tensor_new(1, &minlength, EM_INT64, em_cpu_dev());
        if (z && minlength > 0) memset(em_tensor_data(z), 0, (size_t)minlength * sizeof(int64_t));
        return z;
    }
    em_tensor *x = em_cpu_to_dtype(self, EM_INT64, op);
    if (!x) return NULL;
    const int64_t *xv = em_tensor_data(x);
    int64_t len = minlength;
    for (int64_t i = 0; i < n; i++) {
        if (xv[i] < 0) {
            em_set_error(EM_EVALUE, "%s: self must hold non-negative values, got %lld at %lld", op,
                         (long long)xv[i], (long long)(i + 1));
            em_tensor_release(x);
            return NULL;
        }
        if (xv[i] + 1 > len) len = xv[i] + 1;
    }
    /* PyTorch: float32 weights give float32 counts, other weights float64 */
    em_dtype dt = !weights ? EM_INT64 : weights->dtype == EM_FLOAT32 ? EM_FLOAT32 : EM_FLOAT64;
    em_tensor *out = em_tensor_new(1, &len, dt, em_cpu_dev());
    em_tensor *w = out && weights ? em_cpu_to_dtype(weights, EM_FLOAT64, op) : NULL;
    if (!out || (weights && !w)) {
        em_tensor_release(x);
        em_tensor_release(out);
        return NULL;
    }
    if (!weights) {
        int64_t *o = em_tensor_data(out);
        if (len > 0) memset(o, 0, (size_t)len * sizeof *o);
        for (int64_t i = 0; i < n; i++) o[xv[i]]++;
    } else {
        double *acc = calloc((size_t)(len ? len : 1), sizeof *acc);
        if (!acc) {
            em_set_error(EM_ENOMEM, "%s: out of memory", op);
            em_tensor_release(x);
            em_tensor_release(out);
            em_tensor_release(w);
            return NULL;
        }
        const double *wv = em_tensor_data(w);
        if (dt == EM_FLOAT32) { /* accumulate in float, as PyTorch's float32 path */
            float *o = em_tensor_data(out);
            if (len > 0) memset(o, 0, (size_t)len * sizeof *o);
            for (int64_t i = 0; i < n; i++) o[xv[i]] += (float)wv[i];
        } else {
            for (int64_t i = 0; i < n; i++) acc[xv[i]] += wv[i];
            if (len > 0) memcpy(em_tensor_data(out), acc, (size_t)len * sizeof *acc);
        }
        free(acc);
    }
    em_tensor_release(x);
    em_tensor_release(w);
    return out;
}

/* The histogram of one floating dtype: T the element type, computing in T
 * as PyTorch does (float16/bfloat16 in float). */
#define HISTC_LOOP(NAME, T, LD)                                                                       \
    static void NAME(const void *x_, int64_t n, int64_t bins, double lo_, double hi_, double *counts) { \
        const T *x = x_;                                                                              \
        typedef __typeof__(LD(x[0]) + 0) C; /* float or double, not const */                            \
        const C lo = (C)lo_, hi = (C)hi_;                                                             \
        C *edges = malloc((size_t)(bins + 1) * sizeof *edges);                                        \
        if (!edges) return;                                                                           \
        const C step = (hi - lo) / (C)bins; /* torch.linspace(lo, hi, bins + 1) */                   \
        const int64_t halfway = (bins + 1) / 2;                                                       \
        for (int64_t i = 0; i <= bins; i++)                                                           \
            edges[i] = i < halfway ? lo + step * (C)i : hi - step * (C)(bins - i);                    \
        const C left = edges[0], right = edges[bins];                                                 \
        for (int64_t i = 0; i < n; i++) {                                                             \
            C e = LD(x[i]);                                                                           \
            if (e != e) { /* NaN: PyTorch 1.13 counts it in the first bin */                          \
                counts[0] += 1;                                                                       \
                continue;                                                                             \
            }                                                                                         \
            if (!(e >= left && e <= right)) continue;                                                 \
            C r = (e - left) * (C)bins / (right - left);                                              \
            int64_t pos = r >= 0 && r <= (C)bins ? (int64_t)r : r > 0 ? bins : 0; /* no UB cast */    \
            int64_t pmin = pos - 1 > 0 ? pos - 1 : 0, pmax = pos + 2 < bins + 1 ? pos + 2 : bins + 1; \
            int64_t k = pmin; /* upper_bound in edges[pmin, pmax) */                                  \
            while (k < pmax && !(e < edges[k])) k++;                                                  \
            pos = k - 1;                                                                              \
            if (pos == bins) pos--;                                                                   \
            counts[pos] += 1;                                                                         \
        }                                                                                             \
        free(edges);                                                                                  \
    }
#define LD_ID(v) (v)
#define LD_H(v) em_half_to_float(v)
#define LD_B(v) em_bf16_to_float(v)
HISTC_LOOP(histc_f32, float, LD_ID)
HISTC_LOOP(histc_f64, double, LD_ID)
HISTC_LOOP(histc_f16, em_half, LD_H)
HISTC_LOOP(histc_bf16, em_bfloat16, LD_B)

em_tensor *em_cpu_histc(em_keyset ks, em_tensor *self, int64_t bins, em_scalar min, em_scalar max) {
    (void)ks;
    const char *op = "histc";
    if (!em_dtype_is_floating(self->dtype)) {
        em_set_error(EM_ETYPE, "%s: self must have a floating dtype, got %s", op, em_dtype_name(self->dtype));
        return NULL;
    }
    if (bins <= 0) {
        em_set_error(EM_EVALUE, "%s: bins must be > 0, got %lld", op, (long long)bins);
        return NULL;
    }
    double lo = em_scalar_to_double(min), hi = em_scalar_to_double(max);
    if (lo > hi) {
        em_set_error(EM_EVALUE, "%s: max must be larger than min (got min %g, max %g)", op, lo, hi);
        return NULL;
    }
    em_tensor *src = em_cpu_to_dtype(self, self->dtype, op);
    if (!src) return NULL;
    const int64_t n = src->numel, es = (int64_t)em_dtype_size(self->dtype);
    const char *x = em_tensor_data(src);
    if (lo == hi && n > 0) { /* the data's range (NaN propagates into it) */
        lo = INFINITY;
        hi = -INFINITY;
        for (int64_t i = 0; i < n; i++) {
            double v = em_load_as_double(x + i * es, self->dtype);
            if (isnan(v)) {
                lo = hi = v;
                break;
            }
            lo = v < lo ? v : lo;
            hi = v > hi ? v : hi;
        }
    }
    if (lo == hi) {
        lo -= 1;
        hi += 1;
    }
    /* the edges are computed in self's dtype: the range must be finite there */
    double big = self->dtype == EM_FLOAT16 ? 65504.0 : self->dtype == EM_FLOAT64 ? INFINITY : 3.4028234663852886e38;
    if (!isfinite(lo) || !isfinite(hi) || fabs(lo) > big || fabs(hi) > big) {
        em_set_error(EM_EVALUE, "%s: range of [%g, %g] is not finite in %s", op, lo, hi, em_dtype_name(self->dtype));
        em_tensor_release(src);
        return NULL;
    }
    /* the result first: its allocation refuses a bin count past memory (or
     * the memory limit) with the usual error, before calloc sees it */
    em_tensor *out = em_tensor_new(1, &bins, self->dtype, em_cpu_dev());
    double *counts = out ? calloc((size_t)bins, sizeof *counts) : NULL;
    if (!counts) {
        if (out) em_set_error(EM_ENOMEM, "%s: out of memory for %lld bins", op, (long long)bins);
        em_tensor_release(out);
        em_tensor_release(src);
        return NULL;
    }
    switch (self->dtype) {
    case EM_FLOAT32: histc_f32(x, n, bins, lo, hi, counts); break;
    case EM_FLOAT64: histc_f64(x, n, bins, lo, hi, counts); break;
    case EM_FLOAT16: histc_f16(x, n, bins, lo, hi, counts); break;
    default: histc_bf16(x, n, bins, lo, hi, counts); break;
    }
    char *o = em_tensor_data(out);
    for (int64_t b = 0; b < bins; b++) em_store_from_double(o + b * es, self->dtype, counts[b]);
    free(counts);
    em_tensor_release(src);
    return out;
}
