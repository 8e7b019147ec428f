/* products.c -- the linalg family's product kernels: bmm, dot, vdot, mv.
 * The matrix products go through linalg.c's em_cpu_gemm (OpenBLAS for
 * float32/float64, float32 for the half types, wrapping integers).
 *
 * As in PyTorch, both operands have one dtype (no promotion) and bool has
 * no product: a bool product is refused unless its result is empty or has
 * nothing to sum (then it is all false, without running one).
 */
#include "kernels/cpu/em_cpu.h"

#include <cblas.h>
#include <limits.h>
#include <string.h>

/* ---- checks ---- */

static bool same_dtype(const em_tensor *a, const em_tensor *b, const char *op, const char *an, const char *bn) {
    if (a->dtype == b->dtype) return true;
    em_set_error(EM_ETYPE, "%s: expected %s and %s to have the same dtype, got %s and %s", op, an, bn,
                 em_dtype_name(a->dtype), em_dtype_name(b->dtype));
    return false;
}

static bool want_ndim(const em_tensor *t, int nd, const char *op, const char *name) {
    if (t->ndim == nd) return true;
    em_set_error(EM_ESHAPE, "%s: %s must be a %d-d tensor, got %d-d", op, name, nd, t->ndim);
    return false;
}

static void mismatch(const em_tensor *a, const em_tensor *b, int64_t k1, int64_t k2, const char *op) {
    char b1[EM_SHAPE_STR_MAX], b2[EM_SHAPE_STR_MAX];
    em_set_error(EM_ESHAPE, "%s: shapes %s and %s cannot be multiplied (%lld != %lld)", op,
                 em_shape_str(a->ndim, a->sizes, b1, sizeof b1), em_shape_str(b->ndim, b->sizes, b2, sizeof b2),
                 (long long)k1, (long long)k2);
}

/* The result of a bool product (see the file comment), or NULL with the
 * error set when one would have to run. */
static em_tensor *bool_result(int ndim, const int64_t *sizes, int64_t k, const char *op) {
    int64_t n = 1;
    for (int d = 0; d < ndim; d++) n *= sizes[d];
    if (n != 0 && k != 0) {
        em_set_error(EM_ETYPE, "%s: not supported for dtype bool", op);
        return NULL;
    }
    em_tensor *out = em_tensor_new(ndim, sizes, EM_BOOL, em_cpu_dev());
    if (out && out->numel) memset(em_tensor_data(out), 0, (size_t)out->numel);
    return out;
}

/* ---- bmm ---- */

em_tensor *em_cpu_bmm(em_keyset ks, em_tensor *self, em_tensor *mat2) {
    (void)ks;
    if (!want_ndim(self, 3, "bmm", "self") || !want_ndim(mat2, 3, "bmm", "mat2")) return NULL;
    if (!same_dtype(self, mat2, "bmm", "self", "mat2")) return NULL;
    if (self->sizes[0] != mat2->sizes[0]) {
        char b1[EM_SHAPE_STR_MAX], b2[EM_SHAPE_STR_MAX];
        em_set_error(EM_ESHAPE, "bmm: self %s and mat2 %s have different batch sizes (%lld != %lld)",
                     em_shape_str(3, self->sizes, b1, sizeof b1), em_shape_str(3, mat2->sizes, b2, sizeof b2),
                     (long long)self->sizes[0], (long long)mat2->sizes[0]);
        return NULL;
    }
    if (self->sizes[2] != mat2->sizes[1]) {
        mismatch(self, mat2, self->sizes[2], mat2->sizes[1], "bmm");
        return NULL;
    }
    int64_t B = self->sizes[0], M = self->sizes[1], K = self->sizes[2], N = mat2->sizes[2];
    int64_t sz[3] = { B, M, N };
    if (self->dtype == EM_BOOL) return bool_result(3, sz, K, "bmm");
    em_tensor *out = em_tensor_new(3, sz, self->dtype, em_cpu_dev());
    if (!out) return NULL;
    size_t es = em_dtype_size(self->dtype);
    const char *a = em_tensor_data(self), *b = em_tensor_data(mat2);
    char *c = em_tensor_data(out);
    for (int64_t i = 0; i < B; i++) {
        if (em_cpu_gemm(self->dtype, a + (size_t)(i * self->strides[0]) * es, M, K, self->strides[1],
                        self->strides[2], b + (size_t)(i * mat2->strides[0]) * es, N, mat2->strides[1],
                        mat2->strides[2], c + (size_t)(i * M * N) * es, "bmm") != EM_OK ||
            (i + 1 < B && em_cpu_interrupted("bmm"))) {
            em_tensor_release(out);
            return NULL;
        }
    }
    return out;
}

/* ---- mv ---- */

em_tensor *em_cpu_mv(em_keyset ks, em_tensor *self, em_tensor *vec) {
    (void)ks;
    if (!want_ndim(self, 2, "mv", "self") || !want_ndim(vec, 1, "mv", "vec")) return NULL;
    if (!same_dtype(self, vec, "mv", "self", "vec")) return NULL;
    if (self->sizes[1] != vec->sizes[0]) {
        mismatch(self, vec, self->sizes[1], vec->sizes[0], "mv");
        return NULL;
    }
    int64_t M = self->sizes[0], K = self->sizes[1];
    if (self->dtype == EM_BOOL) return bool_result(1, &M, K, "mv");
    em_tensor *out = em_tensor_new(1, &M, self->dtype, em_cpu_dev());
    if (!out) return NULL;
    /* vec as a K x 1 matrix */
    if (em_cpu_gemm(self->dtype, em_tensor_data(self), M, K, self->strides[0], self->strides[1],
                    em_tensor_data(vec), 1, vec->strides[0], 1, em_tensor_data(out), "mv") != EM_OK) {
        em_tensor_release(out);
        return NULL;
    }
    return out;
}

/* ---- dot, vdot ---- */

/* BLAS takes a vector of n elements with a positive int stride. */
static bool blas_vec(int64_t n, int64_t s) { return n <= INT_MAX && s >= 1 && s <= INT_MAX; }

/* The inner product of two 1-d tensors (checked by the caller) into a new
 * 0-dim tensor: BLAS for float32/float64 with ordinary strides, else a loop
 * accumulating in float (half types), double or wrapping uint64. */
static em_tensor *inner(const em_tensor *a, const em_tensor *b) {
    em_tensor *out = em_tensor_new(0, NULL, a->dtype, em_cpu_dev());
    if (!out) return NULL;
    int64_t n = a->sizes[0], sa = a->strides[0], sb = b->strides[0];
    const char *pa = em_tensor_data(a), *pb = em_tensor_data(b);
    size_t es = em_dtype_size(a->dtype);
    void *r = em_tensor_data(out);
    if (a->dtype == EM_FLOAT32 && blas_vec(n, sa) && blas_vec(n, sb)) {
        *(float *)r = n ? cblas_sdot((int)n, (const float *)pa, (int)sa, (const float *)pb, (int)sb) : 0.0f;
    } else if (a->dtype == EM_FLOAT64 && blas_vec(n, sa) && blas_vec(n, sb)) {
        *(double *)r = n ? cblas_ddot((int)n, (const double *)pa, (int)sa, (const double *)pb, (int)sb) : 0.0;
    } else if (em_cpu_is_float(a->dtype)) {
        bool wide = a->dtype == EM_FLOAT64;
        double accd = 0;
        float accf = 0;
        for (int64_t i = 0; i < n; i++) {
            double x = em_load_as_double(pa + (size_t)(i * sa) * es, a->dtype);
            double y = em_load_as_double(pb + (size_t)(i * sb) * es, a->dtype);
            if (wide) accd += x * y;
            else accf += (float)x * (float)y;
        }
        em_store_from_double(r, a->dtype, wide ? accd : (double)accf);
    } else {
        uint64_t acc = 0;
        for (int64_t i = 0; i < n; i++)
            acc += (uint64_t)em_load_as_int64(pa + (size_t)(i * sa) * es, a->dtype) *
                   (uint64_t)em_load_as_int64(pb + (size_t)(i * sb) * es, a->dtype);
        em_store_from_int64(r, a->dtype, (int64_t)acc);
    }
    return out;
}

static em_tensor *dot_like(em_tensor *self, em_tensor *other, const char *op) {
    if (self->ndim != 1 || other->ndim != 1) {
        em_set_error(EM_ESHAPE, "%s: expected 1-d tensors, got %d-d and %d-d", op, self->ndim, other->ndim);
        return NULL;
    }
    if (!same_dtype(self, other, op, "self", "other")) return NULL;
    if (self->sizes[0] != other->sizes[0]) {
        em_set_error(EM_ESHAPE, "%s: self and other must have the same size, got %lld and %lld", op,
                     (long long)self->sizes[0], (long long)other->sizes[0]);
        return NULL;
    }
    if (self->dtype == EM_BOOL) {
        em_set_error(EM_ETYPE, "%s: not supported for dtype bool", op);
        return NULL;
    }
    return inner(self, other);
}

em_tensor *em_cpu_dot(em_keyset ks, em_tensor *self, em_tensor *other) {
    (void)ks;
    return dot_like(self, other, "dot");
}

/* Real dtypes only: conjugating self changes nothing. */
em_tensor *em_cpu_vdot(em_keyset ks, em_tensor *self, em_tensor *other) {
    (void)ks;
    return dot_like(self, other, "vdot");
}
