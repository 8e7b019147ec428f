/* strided.c -- the gradients of as_strided: as_strided_backward and its
 * adjoint as_strided_double_backward.
 *
 * Both move values between two geometries over one imagined storage: the
 * input's (input_sizes, input_strides, input_offset) and the view's (size,
 * stride, storage_offset). With pos_in(i) and pos_out(j) the storage
 * locations of input element i and view element j, and cnt(p) the number
 * of input elements at location p:
 *   as_strided_backward(G)[i]        = S[pos_in(i)] / cnt(pos_in(i)),
 *                                      S[p] = sum over j with pos_out(j) = p of G[j]
 *   as_strided_double_backward(X)[j] = M[pos_out(j)],
 *                                      M[p] = sum over i with pos_in(i) = p of X[i] / cnt(p)
 * Each is the other's adjoint, so each is the other's gradient. A storage
 * location the input does not reach gets no gradient. They accumulate in
 * double and run serially: they only run in backward passes through views
 * written in place, on the views' sizes.
 */
#include "kernels/cpu/em_cpu.h"

#include <stdlib.h>
#include <string.h>

typedef struct {
    int n;
    const int64_t *sizes, *strides;
    int64_t offset, numel;
} geom;

/* Checks a geometry; returns false with the error set. */
static bool geom_check(const geom *g, const char *op, const char *what) {
    if (g->n > EM_MAX_DIMS) {
        em_set_error(EM_EVALUE, "%s: %s has %d dims (at most %d)", op, what, g->n, EM_MAX_DIMS);
        return false;
    }
    if (g->offset < 0) {
        em_set_error(EM_EVALUE, "%s: %s has a negative storage offset %lld", op, what, (long long)g->offset);
        return false;
    }
    for (int d = 0; d < g->n; d++) {
        if (g->sizes[d] < 0 || g->strides[d] < 0) {
            em_set_error(EM_EVALUE, "%s: %s has a negative %s (%lld at dim %d)", op, what,
                         g->sizes[d] < 0 ? "size" : "stride",
                         (long long)(g->sizes[d] < 0 ? g->sizes[d] : g->strides[d]), d + 1);
            return false;
        }
    }
    return true;
}

/* The last storage location g reaches (g->offset when it is empty), or -1
 * on overflow. Sets g->numel. */
static int64_t geom_last(geom *g) {
    int64_t last = g->offset, numel = 1;
    for (int d = 0; d < g->n; d++) {
        if (__builtin_mul_overflow(numel, g->sizes[d], &numel)) return -1;
        if (g->sizes[d] == 0) continue;
        int64_t step;
        if (__builtin_mul_overflow(g->sizes[d] - 1, g->strides[d], &step) ||
            __builtin_add_overflow(last, step, &last))
            return -1;
    }
    g->numel = numel;
    return numel == 0 ? g->offset : last;
}

/* Calls visit(k, pos) for every element k (row-major) of g with its
 * storage location pos - base. */
#define FOR_EACH_POS(g, base, k, pos, BODY)                                      \
    do {                                                                         \
        int64_t idx_[EM_MAX_DIMS] = { 0 };                                       \
        int64_t pos = (g)->offset - (base);                                      \
        for (int64_t k = 0; k < (g)->numel; k++) {                               \
            BODY;                                                                \
            for (int d_ = (g)->n - 1; d_ >= 0; d_--) {                           \
                if (++idx_[d_] < (g)->sizes[d_]) { pos += (g)->strides[d_]; break; } \
                pos -= (g)->strides[d_] * (idx_[d_] - 1);                        \
                idx_[d_] = 0;                                                    \
            }                                                                    \
        }                                                                        \
    } while (0)

static em_tensor *transfer(em_tensor *src, em_intlist in_sizes, em_intlist in_strides, int64_t in_offset,
                           em_intlist size, em_intlist stride, int64_t storage_offset, bool adjoint,
                           const char *op) {
    geom in = { in_sizes.n, in_sizes.data, in_strides.data, in_offset, 0 };
    geom out = { size.n, size.data, stride.data, storage_offset, 0 };
    if (in_sizes.n != in_strides.n || size.n != stride.n) {
        em_set_error(EM_ESHAPE, "%s: %s has %d sizes but %d strides", op,
                     in_sizes.n != in_strides.n ? "the input" : "the view",
                     in_sizes.n != in_strides.n ? in_sizes.n : size.n,
                     in_sizes.n != in_strides.n ? in_strides.n : stride.n);
        return NULL;
    }
    if (!geom_check(&in, op, "the input") || !geom_check(&out, op, "the view")) return NULL;
    if (!em_dtype_is_floating(src->dtype)) {
        em_set_error(EM_ETYPE, "%s: expected a floating grad_output, got %s", op, em_dtype_name(src->dtype));
        return NULL;
    }
    int64_t last_in = geom_last(&in), last_out = geom_last(&out);
    if (last_in < 0 || last_out < 0) {
        em_set_error(EM_EVALUE, "%s: the geometry overflows", op);
        return NULL;
    }
    const geom *src_g = adjoint ? &in : &out, *dst_g = adjoint ? &out : &in;
    if (src->ndim != src_g->n || memcmp(src->sizes, src_g->sizes, sizeof(int64_t) * (size_t)src->ndim) != 0) {
        char a[EM_SHAPE_STR_MAX], b[EM_SHAPE_STR_MAX];
        em_set_error(EM_ESHAPE, "%s: grad_output has shape %s, expected %s", op,
                     em_shape_str(src->ndim, src->sizes, a, sizeof a), em_shape_str(src_g->n, src_g->sizes, b, sizeof b));
        return NULL;
    }
    em_tensor *res = em_tensor_new(dst_g->n, dst_g->sizes, src->dtype, em_cpu_dev());
    if (!res || res->numel == 0 || src->numel == 0) {
        if (res && res->numel) memset(em_tensor_data(res), 0, (size_t)res->numel * em_dtype_size(res->dtype));
        return res;
    }
    int64_t lo = in.offset < out.offset ? in.offset : out.offset;
    int64_t hi = last_in > last_out ? last_in : last_out;
    size_t span = (size_t)(hi - lo + 1);
    double *store = calloc(span, sizeof *store);
    int32_t *cnt = calloc(span, sizeof *cnt);
    em_tensor *sc = src->is_contiguous ? em_tensor_retain(src) : em_cpu_to_dtype(src, src->dtype, op);
    if (!store || !cnt || !sc) {
        free(store);
        free(cnt);
        em_tensor_release(sc);
        em_tensor_release(res);
        if (sc) em_set_error(EM_ENOMEM, "%s: out of memory for a storage of %zu elements", op, span);
        return NULL;
    }
    const char *sp = em_tensor_data(sc);
    char *rp = em_tensor_data(res);
    size_t es = em_dtype_size(src->dtype);
    FOR_EACH_POS(&in, lo, k, p, cnt[p]++);
    if (!adjoint) {
        FOR_EACH_POS(&out, lo, k, p, store[p] += em_load_as_double(sp + (size_t)k * es, src->dtype));
        FOR_EACH_POS(&in, lo, k, p, em_store_from_double(rp + (size_t)k * es, res->dtype, store[p] / cnt[p]));
    } else {
        FOR_EACH_POS(&in, lo, k, p, store[p] += em_load_as_double(sp + (size_t)k * es, src->dtype) / cnt[p]);
        FOR_EACH_POS(&out, lo, k, p, em_store_from_double(rp + (size_t)k * es, res->dtype, store[p]));
    }
    free(store);
    free(cnt);
    em_tensor_release(sc);
    return res;
}

em_tensor *em_cpu_as_strided_backward(em_keyset ks, em_tensor *grad_output, em_intlist input_sizes,
                                      em_intlist input_strides, int64_t input_offset, em_intlist size,
                                      em_intlist stride, int64_t storage_offset) {
    (void)ks;
    return transfer(grad_output, input_sizes, input_strides, input_offset, size, stride, storage_offset, false,
                    "as_strided_backward");
}

em_tensor *em_cpu_as_strided_double_backward(em_keyset ks, em_tensor *grad_output, em_intlist input_sizes,
                                             em_intlist input_strides, int64_t input_offset, em_intlist size,
                                             em_intlist stride, int64_t storage_offset) {
    (void)ks;
    return transfer(grad_output, input_sizes, input_strides, input_offset, size, stride, storage_offset, true,
                    "as_strided_double_backward");
}
