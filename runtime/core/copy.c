/* copy.c -- serial elementwise copy with broadcasting and dtype
 * conversion between every pair of dtypes; contiguous(). */
#include <string.h>

#include "core/em_core_int.h"

/* ---- per-dtype load and store ---- */

/* Integers and bool load as int64_t, floating types as double; the store
 * is chosen by _Generic on that type, so int -> int copies stay exact and
 * int64 -> float32 rounds once. Floating -> integer truncates toward zero
 * (NaN gives 0, out of range saturates to int64 then wraps to the width,
 * as em_store_from_double does); anything -> bool is v != 0. */
static inline int64_t f2i(double v)
{
    if (v != v) return 0;
    if (v >= 9223372036854775808.0) return INT64_MAX;
    if (v < -9223372036854775808.0) return INT64_MIN;
    return (int64_t)v;
}

static inline int64_t ld_b1(const char *p) { return *(const uint8_t *)p != 0; }
static inline int64_t ld_u1(const char *p) { return *(const uint8_t *)p; }
static inline int64_t ld_i1(const char *p) { return *(const int8_t *)p; }
static inline int64_t ld_i4(const char *p) { int32_t v; memcpy(&v, p, 4); return v; }
static inline int64_t ld_i8(const char *p) { int64_t v; memcpy(&v, p, 8); return v; }
static inline double ld_f2(const char *p) { em_half v; memcpy(&v, p, 2); return em_half_to_float(v); }
static inline double ld_bf(const char *p) { em_bfloat16 v; memcpy(&v, p, 2); return em_bf16_to_float(v); }
static inline double ld_f4(const char *p) { float v; memcpy(&v, p, 4); return v; }
static inline double ld_f8(const char *p) { double v; memcpy(&v, p, 8); return v; }

static inline void sti_b1(char *p, int64_t v) { *(uint8_t *)p = v != 0; }
static inline void sti_u1(char *p, int64_t v) { *(uint8_t *)p = (uint8_t)v; }
static inline void sti_i1(char *p, int64_t v) { *(int8_t *)p = (int8_t)v; }
static inline void sti_i4(char *p, int64_t v) { int32_t x = (int32_t)v; memcpy(p, &x, 4); }
static inline void sti_i8(char *p, int64_t v) { memcpy(p, &v, 8); }
static inline void sti_f2(char *p, int64_t v) { em_half x = em_float_to_half((float)v); memcpy(p, &x, 2); }
static inline void sti_bf(char *p, int64_t v) { em_bfloat16 x = em_float_to_bf16((float)v); memcpy(p, &x, 2); }
static inline void sti_f4(char *p, int64_t v) { float x = (float)v; memcpy(p, &x, 4); }
static inline void sti_f8(char *p, int64_t v) { double x = (double)v; memcpy(p, &x, 8); }

static inline void stf_b1(char *p, double v) { *(uint8_t *)p = v != 0; }
static inline void stf_u1(char *p, double v) { *(uint8_t *)p = (uint8_t)f2i(v); }
static inline void stf_i1(char *p, double v) { *(int8_t *)p = (int8_t)f2i(v); }
static inline void stf_i4(char *p, double v) { int32_t x = (int32_t)f2i(v); memcpy(p, &x, 4); }
static inline void stf_i8(char *p, double v) { int64_t x = f2i(v); memcpy(p, &x, 8); }
static inline void stf_f2(char *p, double v) { em_half x = em_float_to_half((float)v); memcpy(p, &x, 2); }
static inline void stf_bf(char *p, double v) { em_bfloat16 x = em_float_to_bf16((float)v); memcpy(p, &x, 2); }
static inline void stf_f4(char *p, double v) { float x = (float)v; memcpy(p, &x, 4); }
static inline void stf_f8(char *p, double v) { memcpy(p, &v, 8); }

#define STORE(D, p, v) _Generic((v), int64_t: sti_##D, double: stf_##D)(p, v)

typedef void (*conv_loop)(char *d, int64_t ds, const char *s, int64_t ss, int64_t n);

#define CONV(D, S)                                                                        \
    static void conv_##D##_##S(char *d, int64_t ds, const char *s, int64_t ss, int64_t n) \
    {                                                                                     \
        for (int64_t i = 0; i < n; i++, d += ds, s += ss) STORE(D, d, ld_##S(s));         \
    }
#define CONV_ROW(D) CONV(D, b1) CONV(D, u1) CONV(D, i1) CONV(D, i4) CONV(D, i8) \
                    CONV(D, f2) CONV(D, bf) CONV(D, f4) CONV(D, f8)
CONV_ROW(b1) CONV_ROW(u1) CONV_ROW(i1) CONV_ROW(i4) CONV_ROW(i8)
CONV_ROW(f2) CONV_ROW(bf) CONV_ROW(f4) CONV_ROW(f8)

#define ROW(D) { conv_##D##_b1, conv_##D##_u1, conv_##D##_i1, conv_##D##_i4, conv_##D##_i8, \
                 conv_##D##_f2, conv_##D##_bf, conv_##D##_f4, conv_##D##_f8 }
/* conv_table[dst][src], in em_dtype order */
static const conv_loop conv_table[EM_DTYPE_COUNT][EM_DTYPE_COUNT] = {
    ROW(b1), ROW(u1), ROW(i1), ROW(i4), ROW(i8), ROW(f2), ROW(bf), ROW(f4), ROW(f8),
};
_Static_assert(EM_DTYPE_COUNT == 9, "update conv_table");

/* Same-dtype strided copy. */
static void copy_same(char *d, int64_t ds, const char *s, int64_t ss, int64_t n, size_t esz)
{
    if (ds == (int64_t)esz && ss == (int64_t)esz) {
        memcpy(d, s, (size_t)n * esz);
        return;
    }
    switch (esz) {
    case 1: for (int64_t i = 0; i < n; i++) d[i * ds] = s[i * ss]; break;
    case 2: for (int64_t i = 0; i < n; i++) memcpy(d + i * ds, s + i * ss, 2); break;
    case 4: for (int64_t i = 0; i < n; i++) memcpy(d + i * ds, s + i * ss, 4); break;
    default: for (int64_t i = 0; i < n; i++) memcpy(d + i * ds, s + i * ss, 8); break;
    }
}

/* ---- copy ---- */

static bool ranges_overlap(const em_tensor *a, const em_tensor *b)
{
    if (a->storage != b->storage || a->numel == 0 || b->numel == 0) return false;
    int64_t alo = a->offset * (int64_t)em_dtype_size(a->dtype), ahi = alo;
    int64_t blo = b->offset * (int64_t)em_dtype_size(b->dtype), bhi = blo;
    for (int i = 0; i < a->ndim; i++) ahi += (a->sizes[i] - 1) * a->strides[i] * (int64_t)em_dtype_size(a->dtype);
    for (int i = 0; i < b->ndim; i++) bhi += (b->sizes[i] - 1) * b->strides[i] * (int64_t)em_dtype_size(b->dtype);
    ahi += (int64_t)em_dtype_size(a->dtype);
    bhi += (int64_t)em_dtype_size(b->dtype);
    return alo < bhi && blo < ahi;
}

/* Copies src into dst elementwise: src must broadcast to dst's shape
 * (expand rules); values convert to dst's dtype. Overlapping src and dst
 * (one storage) are handled by copying src out first. dst must not have
 * several elements at one address (an expanded tensor). Returns EM_OK or
 * an error status with the slot set. */
em_status em_core_copy(em_tensor *dst, const em_tensor *src)
{
    if (dst->device.type != EM_CPU || src->device.type != EM_CPU)
        return em_set_error(EM_EDEVICE, "copy: from %s to %s is not supported",
                            em_device_name(src->device), em_device_name(dst->device));
    int n = dst->ndim;
    int64_t sizes[EM_MAX_DIMS], ds[EM_MAX_DIMS], ss[EM_MAX_DIMS];
    size_t desz = em_dtype_size(dst->dtype), sesz = em_dtype_size(src->dtype);
    if (src->ndim > n) goto bad_shape;
    for (int i = 0; i < n; i++) {
        int j = src->ndim - n + i;
        sizes[i] = dst->sizes[i];
        ds[i] = dst->strides[i] * (int64_t)desz;
        if (dst->strides[i] == 0 && sizes[i] > 1)
            return em_set_error(EM_EVALUE,
                                "copy: more than one element of the written-to tensor refers to a "
                                "single memory location; clone() it first");
        if (j < 0 || src->sizes[j] == 1) {
            ss[i] = 0;
        } else if (src->sizes[j] == sizes[i]) {
            ss[i] = src->strides[j] * (int64_t)sesz;
        } else {
            goto bad_shape;
        }
    }
    if (dst->numel == 0) return EM_OK;
    if (ranges_overlap(dst, src)) {
        if (dst->dtype == src->dtype && dst->offset == src->offset && dst->ndim == src->ndim &&
            memcmp(dst->sizes, src->sizes, (size_t)n * sizeof(int64_t)) == 0 &&
            memcmp(dst->strides, src->strides, (size_t)n * sizeof(int64_t)) == 0)
            return EM_OK; /* a copy onto itself */
        em_tensor *tmp = em_tensor_new(src->ndim, src->sizes, src->dtype, src->device);
        if (!tmp) return em_error_kind();
        em_status st = em_core_copy(tmp, src);
        if (st == EM_OK) st = em_core_copy(dst, tmp);
        em_tensor_release(tmp);
        return st;
    }

    /* drop size-1 dims, then merge dims that are contiguous in both */
    int m = 0;
    for (int i = 0; i < n; i++) {
        if (sizes[i] == 1) continue;
        if (m > 0 && ds[m - 1] == ds[i] * sizes[i] && ss[m - 1] == ss[i] * sizes[i]) {
            sizes[m - 1] *= sizes[i];
            ds[m - 1] = ds[i];
            ss[m - 1] = ss[i];
            continue;
        }
        sizes[m] = sizes[i];
        ds[m] = ds[i];
        ss[m] = ss[i];
        m++;
    }
    int64_t inner = m ? sizes[m - 1] : 1, ids = m ? ds[m - 1] : 0, iss = m ? ss[m - 1] : 0;
    int outer_n = m ? m - 1 : 0;
    int64_t idx[EM_MAX_DIMS] = { 0 };
    char *d = em_tensor_data(dst);
    const char *s = em_tensor_data(src);
    conv_loop loop = dst->dtype == src->dtype ? NULL : conv_table[dst->dtype][src->dtype];
    for (;;) {
        if (loop) loop(d, ids, s, iss, inner);
        else copy_same(d, ids, s, iss, inner, desz);
        int k = outer_n - 1;
        for (; k >= 0; k--) {
            d += ds[k];
            s += ss[k];
            if (++idx[k] < sizes[k]) break;
            d -= ds[k] * sizes[k];
            s -= ss[k] * sizes[k];
            idx[k] = 0;
        }
        if (k < 0) break;
    }
    return EM_OK;

bad_shape: {
        char a[EM_SHAPE_STR_MAX], b[EM_SHAPE_STR_MAX];
        return em_set_error(EM_ESHAPE, "copy: source shape %s cannot broadcast to %s",
                            em_shape_str(src->ndim, src->sizes, a, sizeof a),
                            em_shape_str(dst->ndim, dst->sizes, b, sizeof b));
    }
}

/* A contiguous tensor with t's values: t's alias when t already is
 * contiguous (sharing data and version), else a fresh copy. */
em_tensor *em_core_contiguous(const em_tensor *t)
{
    if (t->is_contiguous) return em_core_alias(t);
    em_tensor *r = em_tensor_new(t->ndim, t->sizes, t->dtype, t->device);
    if (!r) return NULL;
    if (em_core_copy(r, t) != EM_OK) {
        em_tensor_release(r);
        return NULL;
    }
    return r;
}
