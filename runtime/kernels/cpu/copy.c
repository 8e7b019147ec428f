/* copy.c -- dtype conversion loops and the copy/fill kernels:
 * copy_, fill_, zero_, clone, contiguous, to.
 * cast_table is the tree's one dtype-cast table: core has no copy loops
 * (a reshape that must copy runs contiguous through the dispatcher; Note
 * [Reshape copies outside core] in core/em_core.h).
 */
/* O3 vectorizes the loops; no-trapping-math lets selects (clamps, relu,
 * comparisons) be if-converted; no-math-errno lets sqrt vectorize. None
 * changes a computed value (only errno and FP exception flags). */
#pragma GCC optimize("O3", "no-trapping-math", "no-math-errno")
#include "kernels/cpu/em_cpu.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

/* ---- cast loops: one per (dst, src) dtype pair ---- */

#define CAST_FN(DN, DT, SN, ST)                                                         \
    static void cast_##SN##_to_##DN(char **d, const int64_t *s, int64_t n, void *ctx) { \
        (void)ctx;                                                                      \
        char *o = d[0];                                                                 \
        const char *a = d[1];                                                           \
        if (s[0] == (int64_t)sizeof(DT) && s[1] == (int64_t)sizeof(ST)) {               \
            DT *restrict op = (DT *)o;                                                  \
            const ST *restrict ap = (const ST *)a;                                      \
            for (int64_t i = 0; i < n; i++) op[i] = EM_ST_##DN(EM_LDW_##SN(ap[i]));     \
        } else if (s[0] == (int64_t)sizeof(DT) && s[1] == 0) {                          \
            DT *restrict op = (DT *)o;                                                  \
            DT v = EM_ST_##DN(EM_LDW_##SN(*(const ST *)a));                             \
            for (int64_t i = 0; i < n; i++) op[i] = v;                                  \
        } else {                                                                        \
            for (int64_t i = 0; i < n; i++)                                             \
                *(DT *)(o + i * s[0]) = EM_ST_##DN(EM_LDW_##SN(*(const ST *)(a + i * s[1]))); \
        }                                                                               \
    }
#define CAST_ROW(DN, DT, DE) EM_CPU_FOR_SRC(CAST_FN, DN, DT)
EM_CPU_TYPES(CAST_ROW)

#define CAST_NAME(DN, DT, SN, ST) cast_##SN##_to_##DN,
#define CAST_TABLE_ROW(DN, DT, DE) {EM_CPU_FOR_SRC(CAST_NAME, DN, DT)},
static const em_cpu_loop cast_table[EM_DTYPE_COUNT][EM_DTYPE_COUNT] = {EM_CPU_TYPES(CAST_TABLE_ROW)};

em_cpu_loop em_cpu_cast_loop(em_dtype dst, em_dtype src) { return cast_table[dst][src]; }

/* ---- copy into ---- */

typedef struct { char *dst; const char *src; } memcpy_ctx;

static void memcpy_range(int64_t b, int64_t e, void *arg) {
    const memcpy_ctx *c = arg;
    memcpy(c->dst + b, c->src + b, (size_t)(e - b));
}

/* True when a and b may touch the same bytes (same storage, overlapping
 * byte ranges) without being the very same view. */
static bool overlaps(const em_tensor *a, const em_tensor *b) {
    if (a->storage != b->storage || a->numel == 0 || b->numel == 0) return false;
    int64_t lo[2], hi[2];
    const em_tensor *t[2] = {a, b};
    for (int k = 0; k < 2; k++) {
        int64_t es = (int64_t)em_dtype_size(t[k]->dtype);
        int64_t l = t[k]->offset * es, h = l;
        for (int d = 0; d < t[k]->ndim; d++) {
            int64_t ext = (t[k]->sizes[d] - 1) * t[k]->strides[d] * es;
            if (ext < 0) l += ext; else h += ext;
        }
        lo[k] = l;
        hi[k] = h + es;
    }
    return lo[0] < hi[1] && lo[1] < hi[0];
}

static bool same_view(const em_tensor *a, const em_tensor *b) {
    if (a->storage != b->storage || a->offset != b->offset || a->dtype != b->dtype || a->ndim != b->ndim)
        return false;
    for (int d = 0; d < a->ndim; d++)
        if (a->sizes[d] != b->sizes[d] || (a->sizes[d] > 1 && a->strides[d] != b->strides[d])) return false;
    return true;
}

/* em_cpu_copy_into; with stoppable, its loops may stop half-way (Note
 * [Interrupts in kernels], way (b): the caller checks em_cpu_interrupted). */
static em_status copy_into(em_tensor *dst, const em_tensor *src, const char *op, bool stoppable) {
    if (same_view(dst, src)) return EM_OK;
    em_tensor *hold = NULL;
    if (overlaps(dst, src)) {
        hold = em_cpu_to_dtype(src, src->dtype, op);
        if (!hold) return em_error_kind();
        src = hold;
    }
    if (dst->is_contiguous && src->is_contiguous && dst->dtype == src->dtype && dst->ndim == src->ndim &&
        dst->numel == src->numel && memcmp(dst->sizes, src->sizes, sizeof(int64_t) * (size_t)dst->ndim) == 0) {
        memcpy_ctx c = { em_tensor_data(dst), em_tensor_data(src) };
        int64_t nbytes = dst->numel * (int64_t)em_dtype_size(dst->dtype);
        (stoppable ? em_cpu_parallel_for_stoppable : em_cpu_parallel_for)(nbytes, (int64_t)EM_CPU_GRAIN * 8,
                                                                          memcpy_range, &c);
        em_tensor_release(hold);
        return EM_OK;
    }
    em_cpu_iter it;
    em_tensor *in = (em_tensor *)src;
    em_tensor *r = em_cpu_iter_build(&it, dst, dst->dtype, 1, &in, EM_DTYPE_NONE, op);
    if (!r) { em_cpu_iter_done(&it); em_tensor_release(hold); return em_error_kind(); }
    (stoppable ? em_cpu_iter_run_stoppable : em_cpu_iter_run)(&it, em_cpu_cast_loop(dst->dtype, src->dtype), NULL,
                                                               EM_CPU_GRAIN);
    em_cpu_iter_done(&it);
    em_tensor_release(r);
    em_tensor_release(hold);
    return EM_OK;
}

em_status em_cpu_copy_into(em_tensor *dst, const em_tensor *src, const char *op) {
    return copy_into(dst, src, op, false);
}

/* The copy of the kernels clone, contiguous and to (the kernels that call
 * em_cpu_contiguous directly never see a partial copy: it fails). */
em_tensor *em_cpu_to_dtype_stoppable(const em_tensor *t, em_dtype dtype, const char *op) {
    em_tensor *r = em_tensor_new(t->ndim, t->sizes, dtype, em_cpu_dev());
    if (!r) return NULL;
    if (copy_into(r, t, op, true) != EM_OK || em_cpu_interrupted(op)) {
        em_tensor_release(r);
        return NULL;
    }
    return r;
}

em_tensor *em_cpu_to_dtype(const em_tensor *t, em_dtype dtype, const char *op) {
    em_tensor *r = em_tensor_new(t->ndim, t->sizes, dtype, em_cpu_dev());
    if (!r) return NULL;
    if (em_cpu_copy_into(r, t, op) != EM_OK) { em_tensor_release(r); return NULL; }
    return r;
}

/* ---- fill ---- */

#define FILL_FN(NAME, T)                                                          \
    static void NAME(char **d, const int64_t *s, int64_t n, void *ctx) {          \
        const T v = *(const T *)ctx;                                              \
        if (s[0] == (int64_t)sizeof(T)) {                                         \
            T *restrict o = (T *)d[0];                                            \
            for (int64_t i = 0; i < n; i++) o[i] = v;                             \
        } else {                                                                  \
            for (int64_t i = 0; i < n; i++) *(T *)(d[0] + i * s[0]) = v;          \
        }                                                                         \
    }
FILL_FN(fill1, uint8_t)
FILL_FN(fill2, uint16_t)
FILL_FN(fill4, uint32_t)
FILL_FN(fill8, uint64_t)

/* Writes the scalar converted to dtype into buf (16 bytes). */
static void scalar_to_buf(em_scalar v, em_dtype dtype, void *buf) {
    if (v.kind == EM_SCALAR_FLOAT) em_store_from_double(buf, dtype, v.v.d);
    else em_store_from_int64(buf, dtype, v.kind == EM_SCALAR_INT ? v.v.i : (int64_t)v.v.b);
}

/* Fills t with the bytes in val (one element of t's dtype). */
static em_status fill_bytes(em_tensor *t, const void *val, const char *op) {
    em_cpu_iter it;
    em_tensor *r = em_cpu_iter_build(&it, t, t->dtype, 0, NULL, EM_DTYPE_NONE, op);
    if (!r) { em_cpu_iter_done(&it); return em_error_kind(); }
    size_t es = em_dtype_size(t->dtype);
    em_cpu_loop fn = es == 1 ? fill1 : es == 2 ? fill2 : es == 4 ? fill4 : fill8;
    em_cpu_iter_run(&it, fn, (void *)val, EM_CPU_GRAIN * 2);
    em_cpu_iter_done(&it);
    em_tensor_release(r);
    return EM_OK;
}

typedef struct { char *p; } zero_ctx;
static void zero_range(int64_t b, int64_t e, void *arg) {
    memset(((zero_ctx *)arg)->p + b, 0, (size_t)(e - b));
}

/* ---- kernels ---- */

em_tensor *em_cpu_copy_(em_keyset ks, em_tensor *self, em_tensor *src) {
    (void)ks;
    /* PyTorch's order: x:copy_(x) returns at once, then overlapping self is
     * refused, then a copy between two views of the same data is skipped */
    if (self == src) {
        em_tensor_bump_version(self);
        return em_tensor_retain(self);
    }
    if (em_core_check_no_internal_overlap(self, "copy_") != EM_OK) return NULL;
    bool same_data = self->storage == src->storage && self->offset == src->offset &&
                     self->dtype == src->dtype && self->ndim == src->ndim &&
                     memcmp(self->sizes, src->sizes, sizeof(int64_t) * (size_t)self->ndim) == 0 &&
                     memcmp(self->strides, src->strides, sizeof(int64_t) * (size_t)self->ndim) == 0;
    if (same_data) {
        em_tensor_bump_version(self);
        return em_tensor_retain(self);
    }
    if (em_core_check_no_partial_overlap(self, src, "copy_") != EM_OK) return NULL;
    if (em_cpu_copy_into(self, src, "copy_") != EM_OK) return NULL;
    em_tensor_bump_version(self);
    return em_tensor_retain(self);
}

/* PyTorch's c10::overflows: the value is outside what dtype holds (NaN
 * and the infinities fit floating dtypes only; an integer fits an unsigned
 * dtype when it or its negation does, so -1 fills uint8 with 255). */
bool em_cpu_scalar_overflows(em_scalar v, em_dtype dt) {
    static const double fmax[EM_DTYPE_COUNT] = {
        [EM_FLOAT16] = 65504.0, [EM_BFLOAT16] = 3.3895313892515355e38, [EM_FLOAT32] = 3.4028234663852886e38,
        [EM_FLOAT64] = 1.7976931348623157e308,
    };
    static const int64_t lo[EM_DTYPE_COUNT] = { [EM_UINT8] = 0, [EM_INT8] = -128, [EM_INT32] = INT32_MIN,
                                                [EM_INT64] = INT64_MIN };
    static const int64_t hi[EM_DTYPE_COUNT] = { [EM_UINT8] = 255, [EM_INT8] = 127, [EM_INT32] = INT32_MAX,
                                                [EM_INT64] = INT64_MAX };
    if (dt == EM_BOOL || v.kind == EM_SCALAR_BOOL) return false;
    if (em_dtype_is_floating(dt)) {
        double d = em_scalar_to_double(v);
        return isfinite(d) && (d > fmax[dt] || d < -fmax[dt]);
    }
    if (v.kind == EM_SCALAR_FLOAT) {
        double d = v.v.d;
        if (dt == EM_INT64) return !(d >= -9223372036854775808.0 && d < 9223372036854775808.0);
        return !(d >= (double)lo[dt] && d <= (double)hi[dt]);
    }
    int64_t i = v.v.i;
    if (dt == EM_UINT8) return i > hi[dt] || (i < 0 && (i == INT64_MIN || -i > hi[dt]));
    return i < lo[dt] || i > hi[dt];
}

em_tensor *em_cpu_fill_scalar_(em_tensor *self, em_scalar value, const char *op) {
    if (em_cpu_scalar_overflows(value, self->dtype)) {
        char num[64];
        if (value.kind == EM_SCALAR_FLOAT) snprintf(num, sizeof num, "%.10g", value.v.d);
        else snprintf(num, sizeof num, "%lld", (long long)value.v.i);
        em_set_error(EM_EVALUE, "%s: value %s cannot be converted to type %s without overflow", op, num,
                     em_dtype_name(self->dtype));
        return NULL;
    }
    _Alignas(16) char buf[16];
    scalar_to_buf(value, self->dtype, buf);
    if (fill_bytes(self, buf, op) != EM_OK) return NULL;
    em_tensor_bump_version(self);
    return em_tensor_retain(self);
}

/* fill_ with a 0-dim tensor value (a Lua number arrives as one). */
em_tensor *em_cpu_fill_(em_keyset ks, em_tensor *self, em_tensor *value) {
    (void)ks;
    if (value->ndim != 0) {
        em_set_error(EM_ESHAPE, "fill_: only a 0-dim value tensor is supported, got one with %d dim%s",
                     value->ndim, value->ndim == 1 ? "" : "s");
        return NULL;
    }
    const void *p = em_tensor_data(value);
    em_scalar s = em_dtype_is_floating(value->dtype) ? em_scalar_float(em_load_as_double(p, value->dtype))
                  : value->dtype == EM_BOOL ? em_scalar_bool(em_load_as_int64(p, value->dtype) != 0)
                                            : em_scalar_int(em_load_as_int64(p, value->dtype));
    return em_cpu_fill_scalar_(self, s, "fill_");
}

em_tensor *em_cpu_zero_(em_keyset ks, em_tensor *self) {
    (void)ks;
    if (self->is_contiguous) {
        zero_ctx c = { em_tensor_data(self) };
        em_cpu_parallel_for(self->numel * (int64_t)em_dtype_size(self->dtype), (int64_t)EM_CPU_GRAIN * 8,
                            zero_range, &c);
    } else {
        _Alignas(16) char buf[16] = {0};
        if (fill_bytes(self, buf, "zero_") != EM_OK) return NULL;
    }
    em_tensor_bump_version(self);
    return em_tensor_retain(self);
}

em_tensor *em_cpu_clone(em_keyset ks, em_tensor *self) {
    (void)ks;
    return em_cpu_to_dtype_stoppable(self, self->dtype, "clone");
}

em_tensor *em_cpu_contiguous(em_keyset ks, em_tensor *self) {
    (void)ks;
    if (self->is_contiguous) return em_tensor_retain(self);
    return em_cpu_to_dtype_stoppable(self, self->dtype, "contiguous");
}

em_tensor *em_cpu_to(em_keyset ks, em_tensor *self, em_dtype dtype) {
    (void)ks;
    if (dtype < 0 || dtype >= EM_DTYPE_COUNT) {
        em_set_error(EM_ETYPE, "to: bad dtype %d", (int)dtype);
        return NULL;
    }
    if (dtype == self->dtype) return em_tensor_retain(self);
    return em_cpu_to_dtype_stoppable(self, dtype, "to");
}
