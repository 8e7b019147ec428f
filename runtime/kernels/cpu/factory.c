/* factory.c -- the CPU kernels of the tensor factories: empty zeros ones
 * full arange (the random ones are in random.c).
 *
 * The generated entry has resolved the device argument (the call reaches
 * these kernels only for the cpu).
 */
#include "kernels/cpu/em_cpu.h"

#include <math.h>
#include <string.h>

/* ---- helpers ---- */

/* Validates sizes and makes an uninitialised tensor. */
static em_tensor *new_sized(em_intlist size, em_dtype dtype, const char *op) {
    if (dtype < 0 || dtype >= EM_DTYPE_COUNT) {
        em_set_error(EM_ETYPE, "%s: bad dtype %d", op, (int)dtype);
        return NULL;
    }
    int n = size.n < 0 ? 0 : size.n;
    if (n > EM_MAX_DIMS) {
        em_set_error(EM_EVALUE, "%s: too many dims (%d, at most %d)", op, n, EM_MAX_DIMS);
        return NULL;
    }
    for (int i = 0; i < n; i++) {
        if (size.data[i] < 0) {
            char b[EM_SHAPE_STR_MAX];
            em_set_error(EM_EVALUE, "%s: negative size %lld in %s", op, (long long)size.data[i],
                         em_shape_str(n, size.data, b, sizeof b));
            return NULL;
        }
    }
    return em_tensor_new(n, size.data, dtype, em_cpu_dev());
}

static em_tensor *filled(em_intlist size, em_dtype dtype, em_scalar v, const char *op) {
    em_tensor *t = new_sized(size, dtype, op);
    if (!t) return NULL;
    em_tensor *r = em_cpu_fill_scalar_(t, v, op);
    em_tensor_release(t);
    return r;
}

/* ---- kernels ---- */

em_tensor *em_cpu_empty(em_keyset ks, em_intlist size, em_dtype dtype, em_device device) {
    (void)ks, (void)device;
    em_tensor *t = new_sized(size, dtype == EM_DTYPE_NONE ? EM_FLOAT32 : dtype, "empty");
    /* a bool byte other than 0 or 1 is undefined behaviour for every
     * kernel that loads it as C's _Bool: empty bool tensors start false */
    if (t && t->dtype == EM_BOOL && t->numel) memset(em_tensor_data(t), 0, (size_t)t->numel);
    return t;
}

em_tensor *em_cpu_zeros(em_keyset ks, em_intlist size, em_dtype dtype, em_device device) {
    (void)ks, (void)device;
    em_tensor *t = new_sized(size, dtype == EM_DTYPE_NONE ? EM_FLOAT32 : dtype, "zeros");
    if (!t) return NULL;
    em_tensor *r = em_cpu_zero_(EM_KS(EM_KEY_CPU), t);
    em_tensor_release(t);
    return r;
}

em_tensor *em_cpu_ones(em_keyset ks, em_intlist size, em_dtype dtype, em_device device) {
    (void)ks, (void)device;
    return filled(size, dtype == EM_DTYPE_NONE ? EM_FLOAT32 : dtype, em_scalar_int(1), "ones");
}

em_tensor *em_cpu_full(em_keyset ks, em_intlist size, em_scalar fill_value, em_dtype dtype,
                        em_device device) {
    (void)ks, (void)device;
    return filled(size, dtype == EM_DTYPE_NONE ? em_scalar_dtype(fill_value) : dtype, fill_value, "full");
}

em_tensor *em_cpu_arange(em_keyset ks, em_scalar start, const em_scalar *end, em_scalar step, em_dtype dtype,
                          em_device device) {
    (void)ks, (void)device;
    em_scalar s0 = start, s1;
    if (end) s1 = *end;
    else { s1 = start; s0 = em_scalar_int(0); }
    bool all_int = s0.kind != EM_SCALAR_FLOAT && s1.kind != EM_SCALAR_FLOAT && step.kind != EM_SCALAR_FLOAT;
    if (dtype == EM_DTYPE_NONE) dtype = all_int ? EM_INT64 : EM_FLOAT32;
    if (dtype < 0 || dtype >= EM_DTYPE_COUNT) {
        em_set_error(EM_ETYPE, "arange: bad dtype %d", (int)dtype);
        return NULL;
    }
    if (dtype == EM_BOOL) {
        em_set_error(EM_ETYPE, "arange: not supported for dtype bool");
        return NULL;
    }
    /* PyTorch computes in the result's accumulate type: an integral dtype
     * truncates start, end and step to integers first. The length comes
     * from those integers for int64 and from the numbers as given for the
     * smaller integer types (PyTorch's arange_cpu does exactly this). */
    bool integral = em_dtype_is_integral(dtype);
    double a = em_scalar_to_double(s0), b = em_scalar_to_double(s1), st = em_scalar_to_double(step);
    if (!isfinite(a) || !isfinite(b)) {
        em_set_error(EM_EVALUE, "arange: unsupported range %g to %g", a, b);
        return NULL;
    }
    double ta = a, tb = b, ts = st;
    if (integral) {
        if (fabs(a) > 9.0e18 || fabs(b) > 9.0e18 || fabs(st) > 9.0e18) {
            em_set_error(EM_EVALUE, "arange: range %g to %g step %g does not fit in int64", a, b, st);
            return NULL;
        }
        ta = trunc(a), tb = trunc(b), ts = trunc(st);
    }
    if (ts == 0) {
        em_set_error(EM_EVALUE, "arange: step must be nonzero");
        return NULL;
    }
    if ((ts > 0 && tb < ta) || (ts < 0 && tb > ta)) {
        em_set_error(EM_EVALUE, "arange: upper bound and lower bound inconsistent with step sign");
        return NULL;
    }
    int64_t n;
    if (all_int && integral) {
        int64_t ia = em_scalar_to_int(s0), ib = em_scalar_to_int(s1), is = em_scalar_to_int(step);
        /* in uint64: the bounds may lie 2^64 - 1 apart and the step be -2^63 */
        uint64_t span = is > 0 ? (uint64_t)ib - (uint64_t)ia : (uint64_t)ia - (uint64_t)ib;
        uint64_t mag = is > 0 ? (uint64_t)is : 0 - (uint64_t)is;
        uint64_t cnt = (ib > ia) == (is > 0) && ib != ia ? span / mag + (span % mag != 0) : 0;
        if (cnt > (uint64_t)9e15) {
            em_set_error(EM_EVALUE, "arange: too many elements");
            return NULL;
        }
        n = (int64_t)cnt;
    } else {
        double len = dtype == EM_INT64 ? ceil((tb - ta) / ts) : ceil((b - a) / st);
        if (len > 9.0e15) {
            em_set_error(EM_EVALUE, "arange: too many elements");
            return NULL;
        }
        n = (int64_t)len;
    }
    if (n < 0) n = 0;
    em_tensor *t = em_tensor_new(1, &n, dtype, em_cpu_dev());
    if (!t) return NULL;
    char *p = em_tensor_data(t);
    size_t es = em_dtype_size(dtype);
    if (integral) {
        int64_t ia = (int64_t)ta, is = (int64_t)ts;
        for (int64_t i = 0; i < n; i++)
            em_store_from_int64(p + (size_t)i * es, dtype, (int64_t)((uint64_t)ia + (uint64_t)i * (uint64_t)is));
    } else if (dtype == EM_FLOAT32) {
        float *f = (float *)p;
        for (int64_t i = 0; i < n; i++) f[i] = (float)(a + (double)i * st);
    } else {
        for (int64_t i = 0; i < n; i++) em_store_from_double(p + (size_t)i * es, dtype, a + (double)i * st);
    }
    return t;
}
