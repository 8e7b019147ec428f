/* factory_more.c -- the CPU kernels of the creation ops of the random
 * family: eye linspace logspace tril_indices triu_indices empty_strided.
 *
 * linspace and logspace follow PyTorch's kernel (Note [linspace like
 * PyTorch]).
 * tril_indices/triu_indices return 1-based indices (DESIGN: every index a
 * user gets back is 1-based).
 */
#include "kernels/cpu/em_cpu.h"

#include <math.h>
#include <string.h>

static bool check_count(int64_t v, const char *op, const char *arg)
{
    if (v >= 0) return true;
    em_set_error(EM_EVALUE, "%s: argument '%s' must be non-negative, got %lld", op, arg, (long long)v);
    return false;
}

static em_dtype default_float(em_dtype dt) { return dt == EM_DTYPE_NONE ? EM_FLOAT32 : dt; }

/* ---- eye ---- */

static em_tensor *eye_impl(int64_t n, int64_t m, em_dtype dtype)
{
    if (!check_count(n, "eye", "n") || !check_count(m, "eye", "m")) return NULL;
    int64_t sizes[2] = { n, m };
    em_tensor *t = em_tensor_new(2, sizes, default_float(dtype), em_cpu_dev());
    if (!t) return NULL;
    char *p = em_tensor_data(t);
    size_t es = em_dtype_size(t->dtype);
    if (t->numel) memset(p, 0, (size_t)t->numel * es);
    for (int64_t i = 0; i < n && i < m; i++) em_store_from_int64(p + (size_t)(i * m + i) * es, t->dtype, 1);
    return t;
}

em_tensor *em_cpu_eye(em_keyset ks, int64_t n, em_dtype dtype, em_device device)
{
    (void)ks, (void)device;
    return eye_impl(n, n, dtype);
}

em_tensor *em_cpu_eye_m(em_keyset ks, int64_t n, int64_t m, em_dtype dtype, em_device device)
{
    (void)ks, (void)device;
    return eye_impl(n, m, dtype);
}

/* ---- linspace, logspace ---- */

/* Note [linspace like PyTorch]
 * PyTorch's CPU kernel (RangeFactoriesKernel.cpp, AVX2 build) computes
 * point i as start + step*i below steps/2 and end - step*(steps-1-i) from
 * there on (fused multiply-adds), in double for integral dtypes (from the
 * ends converted to the dtype first) and in the dtype's precision for
 * floats. Its vectorised loop goes in pairs of 32-byte vectors: each
 * vector's first point (the base) is computed as above and converted to
 * the dtype, then its lanes are base + step*lane (not fused); the tail after the last
 * pair is scalar. Integral results are truncations, so ember follows the
 * same steps exactly (the same integers as PyTorch); logspace has no
 * vectorised loop there: base^(point) for every point. steps == 1 gives
 * start. */

/* Point i of the scalar formula (v: double or float precision). */
static double point(double a, double b, double step, int64_t steps, int64_t i, bool single)
{
    int64_t half = steps / 2;
    if (single) {
        float fa = (float)a, fb = (float)b, fs = (float)step;
        return i < half ? fmaf(fs, (float)i, fa) : fmaf(-fs, (float)(steps - i - 1), fb);
    }
    return i < half ? fma(step, (double)i, a) : fma(-step, (double)(steps - i - 1), b);
}

/* v rounded to dtype (as storing and loading it would). */
static double to_dtype(double v, em_dtype dt)
{
    if (em_dtype_is_integral(dt)) return fabs(v) < 9.2e18 ? trunc(v) : 0; /* C's cast is undefined past it */
    if (dt == EM_FLOAT64) return v;
    char buf[8];
    em_store_from_double(buf, dt, v);
    return em_load_as_double(buf, dt);
}

/* steps points from start to end into a new tensor of dtype; log: base^x. */
static em_tensor *spaced(em_scalar start, em_scalar end, int64_t steps, const double *base, em_dtype dtype,
                         const char *op)
{
    if (!check_count(steps, op, "steps")) return NULL;
    em_dtype dt = default_float(dtype);
    if (dt == EM_BOOL) {
        em_set_error(EM_ETYPE, "%s: not supported for dtype bool", op);
        return NULL;
    }
    double a = em_scalar_to_double(start), b = em_scalar_to_double(end);
    bool integral = em_dtype_is_integral(dt), single = !integral && dt != EM_FLOAT64;
    if (integral) {
        int64_t lo, hi;
        lo = dt == EM_UINT8 ? 0 : dt == EM_INT8 ? -128 : dt == EM_INT32 ? INT32_MIN : INT64_MIN;
        hi = dt == EM_UINT8 ? 255 : dt == EM_INT8 ? 127 : dt == EM_INT32 ? INT32_MAX : INT64_MAX;
        if (!(a >= (double)lo && a <= (double)hi && b >= (double)lo && b <= (double)hi)) {
            em_set_error(EM_EVALUE, "%s: start %g and end %g must fit in %s", op, a, b, em_dtype_name(dt));
            return NULL;
        }
        a = trunc(a), b = trunc(b);
    } else if (single) {
        a = (float)a, b = (float)b;
    }
    em_tensor *t = em_tensor_new(1, &steps, dt, em_cpu_dev());
    if (!t || steps == 0) return t;
    char *p = em_tensor_data(t);
    size_t es = em_dtype_size(dt);
    double step = steps == 1 ? 0 : (b - a) / (double)(steps - 1);
    if (single) step = steps == 1 ? 0 : (double)(((float)b - (float)a) / (float)(steps - 1));
    int64_t i = 0;
    if (!base && steps > 1) {
        int64_t lanes = 32 / (int64_t)es;
        for (; i + 2 * lanes <= steps; i += 2 * lanes) {
            for (int64_t j = i; j < i + 2 * lanes; j += lanes) { /* a pair of vectors */
                double v0 = to_dtype(point(a, b, step, steps, j, single), dt);
                for (int64_t l = 0; l < lanes; l++) {
                    double x = single ? (double)((float)v0 + (float)step * (float)l) : v0 + step * (double)l;
                    if (integral) em_store_from_int64(p + (size_t)(j + l) * es, dt, (int64_t)to_dtype(x, dt));
                    else em_store_from_double(p + (size_t)(j + l) * es, dt, x);
                }
            }
        }
    }
    for (; i < steps; i++) {
        double x = steps == 1 ? a : point(a, b, step, steps, i, single);
        if (base) x = pow(*base, x);
        if (integral) em_store_from_int64(p + (size_t)i * es, dt, (int64_t)to_dtype(x, dt));
        else em_store_from_double(p + (size_t)i * es, dt, x);
    }
    return t;
}

em_tensor *em_cpu_linspace(em_keyset ks, em_scalar start, em_scalar end, int64_t steps, em_dtype dtype,
                           em_device device)
{
    (void)ks, (void)device;
    return spaced(start, end, steps, NULL, dtype, "linspace");
}

em_tensor *em_cpu_logspace(em_keyset ks, em_scalar start, em_scalar end, int64_t steps, double base,
                           em_dtype dtype, em_device device)
{
    (void)ks, (void)device;
    return spaced(start, end, steps, &base, dtype, "logspace");
}

/* ---- tril_indices, triu_indices ---- */

/* The 2 x N (row, col) 1-based positions of the lower (upper) triangle of a
 * row x col matrix, diagonal offset included, in row-major order. */
static em_tensor *tri_indices(int64_t row, int64_t col, int64_t offset, em_dtype dtype, bool lower,
                              const char *op)
{
    if (!check_count(row, op, "row") || !check_count(col, op, "col")) return NULL;
    em_dtype dt = dtype == EM_DTYPE_NONE ? EM_INT64 : dtype;
    if (dt != EM_INT64 && dt != EM_INT32) {
        em_set_error(EM_ETYPE, "%s: dtype must be int64 or int32, got %s", op, em_dtype_name(dt));
        return NULL;
    }
    if (row > 3037000499LL || col > 3037000499LL) {
        em_set_error(EM_EVALUE, "%s: %lld x %lld is too large", op, (long long)row, (long long)col);
        return NULL;
    }
    /* column range of row i: lower [0, min(col, i+offset+1)), upper [max(0, i+offset), col) */
    int64_t n = 0;
    for (int64_t i = 0; i < row; i++) {
        int64_t lo = lower ? 0 : i + offset, hi = lower ? i + offset + 1 : col;
        if (lo < 0) lo = 0;
        if (hi > col) hi = col;
        if (hi > lo) n += hi - lo;
    }
    if (dt == EM_INT32 && (row > INT32_MAX || col > INT32_MAX)) {
        em_set_error(EM_EVALUE, "%s: indices do not fit in int32", op);
        return NULL;
    }
    int64_t sizes[2] = { 2, n };
    em_tensor *t = em_tensor_new(2, sizes, dt, em_cpu_dev());
    if (!t) return NULL;
    char *p = em_tensor_data(t);
    size_t es = em_dtype_size(dt);
    int64_t k = 0;
    for (int64_t i = 0; i < row; i++) {
        int64_t lo = lower ? 0 : i + offset, hi = lower ? i + offset + 1 : col;
        if (lo < 0) lo = 0;
        if (hi > col) hi = col;
        for (int64_t j = lo; j < hi; j++, k++) {
            em_store_from_int64(p + (size_t)k * es, dt, i + 1);
            em_store_from_int64(p + (size_t)(n + k) * es, dt, j + 1);
        }
    }
    return t;
}

em_tensor *em_cpu_tril_indices(em_keyset ks, int64_t row, int64_t col, int64_t offset, em_dtype dtype,
                               em_device device)
{
    (void)ks, (void)device;
    return tri_indices(row, col, offset, dtype, true, "tril_indices");
}

em_tensor *em_cpu_triu_indices(em_keyset ks, int64_t row, int64_t col, int64_t offset, em_dtype dtype,
                               em_device device)
{
    (void)ks, (void)device;
    return tri_indices(row, col, offset, dtype, false, "triu_indices");
}

/* ---- empty_strided ---- */

/* An uninitialised tensor with the given sizes and strides (in elements,
 * non-negative) over a storage just large enough: 1 + sum (size-1)*stride
 * elements, none when a size is 0. Not a view. */
em_tensor *em_cpu_empty_strided(em_keyset ks, em_intlist size, em_intlist stride, em_dtype dtype,
                                em_device device)
{
    (void)ks, (void)device;
    const char *op = "empty_strided";
    if (size.n != stride.n) {
        em_set_error(EM_ESHAPE, "%s: size has %d entries but stride has %d", op, size.n, stride.n);
        return NULL;
    }
    if (size.n > EM_MAX_DIMS) {
        em_set_error(EM_EVALUE, "%s: too many dims (%d, at most %d)", op, size.n, EM_MAX_DIMS);
        return NULL;
    }
    int64_t span = 1;
    bool empty = false;
    for (int i = 0; i < size.n; i++) {
        if (size.data[i] < 0 || stride.data[i] < 0) {
            em_set_error(EM_EVALUE, "%s: negative %s %lld in dim %d", op, size.data[i] < 0 ? "size" : "stride",
                         (long long)(size.data[i] < 0 ? size.data[i] : stride.data[i]), i + 1);
            return NULL;
        }
        if (size.data[i] == 0) empty = true;
        if (size.data[i] > 0 && stride.data[i] > (INT64_MAX / 16 - span) / size.data[i]) {
            em_set_error(EM_EVALUE, "%s: the storage size overflows", op);
            return NULL;
        }
        if (size.data[i] > 0) span += (size.data[i] - 1) * stride.data[i];
    }
    if (empty) span = 0;
    em_dtype dt = default_float(dtype);
    em_tensor *t = em_tensor_new(1, &span, dt, em_cpu_dev());
    if (!t) return NULL;
    if (dt == EM_BOOL && span) memset(em_tensor_data(t), 0, (size_t)span); /* as empty(): valid bools */
    if (em_tensor_set_shape(t, size.n, size.data, stride.data) != EM_OK) {
        em_tensor_release(t);
        return NULL;
    }
    return t;
}
