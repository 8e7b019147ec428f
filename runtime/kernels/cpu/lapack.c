/* lapack.c -- torch.linalg's LAPACK ops on the CPU: det, slogdet, inv,
 * solve, cholesky, qr, eigh, eigvalsh, svd, svdvals, pinv, lstsq, matrix_exp.
 *
 * Note [LAPACK kernels]
 * Every op takes float32 or float64 matrices batched over leading dims
 * (other dtypes are refused, naming the op and the dtype, as torch does).
 * Each matrix is copied into a column-major float64 buffer (LAPACK's
 * Fortran layout; ember's tensors are row-major), the Fortran routine of
 * Debian's libopenblas runs on it (dgetrf_, dpotrf_, dgeqrf_, ... -- the
 * prototypes are declared below; every argument by pointer, workspace
 * sizes by a query with lwork = -1), and the results are written back in
 * the input's dtype. float32 inputs are thus computed in float64 and
 * rounded once: at least as accurate as torch's s* routines, and the same
 * algorithms (so the same signs of singular vectors, eigenvectors and
 * Householder reflections as torch). LAPACK integers are 32-bit: a matrix
 * dimension past INT_MAX is refused. A failed factorization (singular,
 * not positive-definite, no convergence) is an error with torch's message,
 * prefixed "(Batch element k): " (0-based, as torch) for batched inputs.
 */
#include "kernels/cpu/em_cpu.h"

#include <cblas.h>
#include <float.h>
#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

/* ---- LAPACK (Fortran ABI; trailing size_t: hidden lengths of char args) ---- */

extern void dgetrf_(const int *m, const int *n, double *a, const int *lda, int *ipiv, int *info);
extern void dgetri_(const int *n, double *a, const int *lda, const int *ipiv, double *work, const int *lwork,
                    int *info);
extern void dgetrs_(const char *trans, const int *n, const int *nrhs, const double *a, const int *lda,
                    const int *ipiv, double *b, const int *ldb, int *info, size_t);
extern void dpotrf_(const char *uplo, const int *n, double *a, const int *lda, int *info, size_t);
extern void dgeqrf_(const int *m, const int *n, double *a, const int *lda, double *tau, double *work,
                    const int *lwork, int *info);
extern void dorgqr_(const int *m, const int *n, const int *k, double *a, const int *lda, const double *tau,
                    double *work, const int *lwork, int *info);
extern void dsyevd_(const char *jobz, const char *uplo, const int *n, double *a, const int *lda, double *w,
                    double *work, const int *lwork, int *iwork, const int *liwork, int *info, size_t, size_t);
extern void dgesdd_(const char *jobz, const int *m, const int *n, double *a, const int *lda, double *s, double *u,
                    const int *ldu, double *vt, const int *ldvt, double *work, const int *lwork, int *iwork,
                    int *info, size_t);
extern void dgels_(const char *trans, const int *m, const int *n, const int *nrhs, double *a, const int *lda,
                   double *b, const int *ldb, double *work, const int *lwork, int *info, size_t);
extern void dgelsy_(const int *m, const int *n, const int *nrhs, double *a, const int *lda, double *b,
                    const int *ldb, int *jpvt, const double *rcond, int *rank, double *work, const int *lwork,
                    int *info);
extern void dgelsd_(const int *m, const int *n, const int *nrhs, double *a, const int *lda, double *b,
                    const int *ldb, double *s, const double *rcond, int *rank, double *work, const int *lwork,
                    int *iwork, int *info);
extern void dgelss_(const int *m, const int *n, const int *nrhs, double *a, const int *lda, double *b,
                    const int *ldb, double *s, const double *rcond, int *rank, double *work, const int *lwork,
                    int *info);

/* ---- checks ---- */

static bool oom(const char *op) {
    em_set_error(EM_ENOMEM, "%s: out of memory", op);
    return false;
}

/* A float32/float64 tensor of >= 2 dims (square when asked), as torch checks. */
static bool check_matrix(const em_tensor *A, const char *op, const char *arg, bool square) {
    char b[EM_SHAPE_STR_MAX];
    if (A->dtype != EM_FLOAT32 && A->dtype != EM_FLOAT64) {
        em_set_error(EM_ETYPE, "%s: expected argument '%s' to be a float32 or float64 tensor, got %s", op, arg,
                     em_dtype_name(A->dtype));
        return false;
    }
    if (A->ndim < 2) {
        em_set_error(EM_ESHAPE, "%s: argument '%s' must have at least 2 dimensions, got shape %s", op, arg,
                     em_shape_str(A->ndim, A->sizes, b, sizeof b));
        return false;
    }
    int64_t m = A->sizes[A->ndim - 2], n = A->sizes[A->ndim - 1];
    if (square && m != n) {
        em_set_error(EM_ESHAPE, "%s: argument '%s' must be batches of square matrices, but they are %lld by %lld "
                     "matrices", op, arg, (long long)m, (long long)n);
        return false;
    }
    if (m > INT_MAX / 2 || n > INT_MAX / 2) {
        em_set_error(EM_EVALUE, "%s: argument '%s' is too large for LAPACK (%lld by %lld)", op, arg, (long long)m,
                     (long long)n);
        return false;
    }
    return true;
}

/* "(Batch element k): " for a batched input (torch's prefix), else "". */
static const char *batch_prefix(const em_tensor *A, int64_t b, char *buf, size_t n) {
    if (A->ndim <= 2) return "";
    snprintf(buf, n, "(Batch element %lld): ", (long long)b);
    return buf;
}

static int ld_of(int64_t m) { return m > 1 ? (int)m : 1; }

/* ---- moving matrices between tensors and column-major buffers ---- */

/* The batch of a matrix tensor: its leading dims (all but the last two). */
typedef struct {
    int nb;                      /* batch dims */
    int64_t sizes[EM_MAX_DIMS];  /* batch shape */
    int64_t count;               /* matrices */
} batch_t;

static batch_t batch_of(const em_tensor *A) {
    batch_t bt = { A->ndim - 2, { 0 }, 1 };
    for (int d = 0; d < bt.nb; d++) {
        bt.sizes[d] = A->sizes[d];
        bt.count *= A->sizes[d];
    }
    return bt;
}

/* Element offset of matrix number b of t (batch dims of t right-aligned to
 * bt's shape and broadcast where t's size is 1 or missing). */
static int64_t batch_offset(const em_tensor *t, const batch_t *bt, int64_t b) {
    int tb = t->ndim - 2;
    int64_t off = t->offset, lin = b;
    for (int d = bt->nb - 1; d >= 0; d--) {
        int64_t ix = lin % bt->sizes[d];
        lin /= bt->sizes[d];
        int td = d - (bt->nb - tb);
        if (td >= 0 && t->sizes[td] != 1) off += ix * t->strides[td];
    }
    return off;
}

/* Loads matrix b of t (rows x cols = t's last two dims) into dst as
 * column-major float64 with leading dimension ld: dst[j*ld + i] = t[.., i, j].
 * trans: load the transpose instead (dst[j*ld + i] = t[.., j, i]). */
static void get_mat(const em_tensor *t, const batch_t *bt, int64_t b, double *dst, int64_t ld, bool trans) {
    int64_t r = t->sizes[t->ndim - 2], c = t->sizes[t->ndim - 1];
    int64_t s0 = t->strides[t->ndim - 2], s1 = t->strides[t->ndim - 1];
    int64_t off = batch_offset(t, bt, b);
    if (trans) { /* the transpose: rows and cols swap */
        int64_t tmp = r; r = c; c = tmp;
        tmp = s0; s0 = s1; s1 = tmp;
    }
    if (t->dtype == EM_FLOAT64) {
        const double *p = (const double *)t->storage->data + off;
        for (int64_t j = 0; j < c; j++)
            for (int64_t i = 0; i < r; i++) dst[j * ld + i] = p[i * s0 + j * s1];
    } else {
        const float *p = (const float *)t->storage->data + off;
        for (int64_t j = 0; j < c; j++)
            for (int64_t i = 0; i < r; i++) dst[j * ld + i] = p[i * s0 + j * s1];
    }
}

/* Stores a column-major rows x cols matrix (leading dimension ld) as matrix
 * b of the contiguous tensor out (whose last two dims are rows, cols). */
static void put_mat(em_tensor *out, int64_t b, const double *src, int64_t ld) {
    int64_t r = out->sizes[out->ndim - 2], c = out->sizes[out->ndim - 1];
    if (out->dtype == EM_FLOAT64) {
        double *p = (double *)em_tensor_data(out) + b * r * c;
        for (int64_t i = 0; i < r; i++)
            for (int64_t j = 0; j < c; j++) p[i * c + j] = src[j * ld + i];
    } else {
        float *p = (float *)em_tensor_data(out) + b * r * c;
        for (int64_t i = 0; i < r; i++)
            for (int64_t j = 0; j < c; j++) p[i * c + j] = (float)src[j * ld + i];
    }
}

/* Element k of the contiguous out (any float dtype or int64) set to v. */
static void put_val(em_tensor *out, int64_t k, double v) {
    char *p = (char *)em_tensor_data(out) + (size_t)k * em_dtype_size(out->dtype);
    if (out->dtype == EM_INT64) *(int64_t *)p = (int64_t)v;
    else em_store_from_double(p, out->dtype, v);
}

/* A new contiguous tensor: the batch shape followed by up to two sizes. */
static em_tensor *new_batched(const batch_t *bt, int nextra, int64_t s0, int64_t s1, em_dtype dt) {
    int64_t sz[EM_MAX_DIMS];
    for (int d = 0; d < bt->nb; d++) sz[d] = bt->sizes[d];
    if (nextra > 0) sz[bt->nb] = s0;
    if (nextra > 1) sz[bt->nb + 1] = s1;
    return em_tensor_new(bt->nb + nextra, sz, dt, em_cpu_dev());
}

/* A float64 buffer of n elements (at least one), NULL with the error set. */
static double *dbuf(int64_t n, const char *op) {
    double *p = malloc((size_t)(n > 0 ? n : 1) * sizeof(double));
    if (!p) oom(op);
    return p;
}

/* ---- LU: det, slogdet, inv ---- */

/* LU-factors the n x n column-major a in place; *sign: the permutation's
 * sign. Returns LAPACK's info (> 0: U[info-1][info-1] is exactly zero). */
static int lu(double *a, int n, int *ipiv, double *sign) {
    int info = 0, ld = ld_of(n);
    *sign = 1.0;
    if (n == 0) return 0;
    dgetrf_(&n, &n, a, &ld, ipiv, &info);
    for (int i = 0; i < n; i++)
        if (ipiv[i] != i + 1) *sign = -*sign;
    return info;
}

/* det (want_log false) or slogdet (true: *out the sign, *out2 logabsdet). */
static em_tensor *det_common(em_tensor *A, bool want_log, em_tensor **logabsdet, const char *op) {
    if (!check_matrix(A, op, "A", true)) return NULL;
    batch_t bt = batch_of(A);
    int n = (int)A->sizes[A->ndim - 1];
    em_tensor *out = new_batched(&bt, 0, 0, 0, A->dtype);
    em_tensor *lad = want_log ? new_batched(&bt, 0, 0, 0, A->dtype) : NULL;
    double *a = dbuf((int64_t)n * n, op);
    int *ipiv = malloc(sizeof(int) * (size_t)(n + 1));
    if (!out || (want_log && !lad) || !a || !ipiv) {
        if (out && (!want_log || lad) && a && !ipiv) oom(op);
        goto fail;
    }
    for (int64_t b = 0; b < bt.count; b++) {
        get_mat(A, &bt, b, a, ld_of(n), false);
        double sign;
        lu(a, n, ipiv, &sign);
        if (!want_log) {
            double d = sign;
            for (int i = 0; i < n; i++) d *= a[(size_t)i * (size_t)ld_of(n) + (size_t)i];
            put_val(out, b, d);
        } else {
            double l = 0.0;
            for (int i = 0; i < n; i++) {
                double u = a[(size_t)i * (size_t)ld_of(n) + (size_t)i];
                if (u < 0) sign = -sign;
                else if (u == 0) sign = 0.0;
                else if (u != u) sign = u; /* NaN */
                l += log(fabs(u));
            }
            put_val(out, b, sign);
            put_val(lad, b, l);
        }
    }
    free(a);
    free(ipiv);
    if (want_log) *logabsdet = lad;
    return out;
fail:
    free(a);
    free(ipiv);
    em_tensor_release(out);
    em_tensor_release(lad);
    return NULL;
}

em_tensor *em_cpu_det(em_keyset ks, em_tensor *A) {
    (void)ks;
    return det_common(A, false, NULL, "linalg.det");
}

em_tensor *em_cpu_slogdet(em_keyset ks, em_tensor *A, em_tensor **logabsdet) {
    (void)ks;
    return det_common(A, true, logabsdet, "linalg.slogdet");
}

em_tensor *em_cpu_inv(em_keyset ks, em_tensor *A) {
    (void)ks;
    const char *op = "linalg.inv";
    if (!check_matrix(A, op, "A", true)) return NULL;
    batch_t bt = batch_of(A);
    int n = (int)A->sizes[A->ndim - 1], ld = ld_of(n), info = 0, lwork = -1;
    em_tensor *out = new_batched(&bt, 2, n, n, A->dtype);
    if (!out) return NULL;
    if (n == 0 || bt.count == 0) return out;
    double q = 0;
    dgetri_(&n, NULL, &ld, NULL, &q, &lwork, &info);
    lwork = q > n ? (int)q : n;
    double *a = dbuf((int64_t)n * n, op), *work = dbuf(lwork, op);
    int *ipiv = malloc(sizeof(int) * (size_t)n);
    if (!a || !work || !ipiv) {
        if (a && work) oom(op);
        goto fail;
    }
    for (int64_t b = 0; b < bt.count; b++) {
        get_mat(A, &bt, b, a, ld, false);
        double sign;
        info = lu(a, n, ipiv, &sign);
        if (info > 0) {
            char pb[48];
            em_set_error(EM_EVALUE, "%s: %sThe diagonal element %d is zero, the inversion could not be completed "
                         "because the input matrix is singular.", op, batch_prefix(A, b, pb, sizeof pb), info);
            goto fail;
        }
        dgetri_(&n, a, &ld, ipiv, work, &lwork, &info);
        put_mat(out, b, a, ld);
    }
    free(a);
    free(work);
    free(ipiv);
    return out;
fail:
    free(a);
    free(work);
    free(ipiv);
    em_tensor_release(out);
    return NULL;
}

/* ---- solve ---- */

/* torch's rule: B is a (batch of) vector(s) when it is 1-d, or when its
 * shape is A's without the last dim. */
static bool vector_rhs(const em_tensor *A, const em_tensor *B) {
    if (B->ndim == 1) return true;
    if (A->ndim - 1 != B->ndim) return false;
    for (int d = 0; d < B->ndim; d++)
        if (B->sizes[d] != A->sizes[d]) return false;
    return true;
}

/* Solves A X = B (left) or X A = B (left false: A^T X^T = B^T), broadcasting
 * the batch dims of A and B; B may be a vector (see vector_rhs). */
em_tensor *em_cpu_solve(em_keyset ks, em_tensor *A, em_tensor *B, bool left) {
    (void)ks;
    const char *op = "linalg.solve";
    char b1[EM_SHAPE_STR_MAX], b2[EM_SHAPE_STR_MAX];
    if (!check_matrix(A, op, "A", true)) return NULL;
    if (B->dtype != A->dtype) {
        em_set_error(EM_ETYPE, "%s: expected A and B to have the same dtype, but found A of dtype %s and B of "
                     "dtype %s", op, em_dtype_name(A->dtype), em_dtype_name(B->dtype));
        return NULL;
    }
    if (B->ndim < 1) {
        em_set_error(EM_ESHAPE, "%s: argument 'B' must have at least 1 dimension, got a 0-dim tensor", op);
        return NULL;
    }
    int n = (int)A->sizes[A->ndim - 1], ld = ld_of(n);
    bool vec = vector_rhs(A, B);
    /* B as a matrix view (n x k, or k x n when !left) */
    em_tensor *Bm = vec ? em_core_unsqueeze(B, B->ndim) : em_tensor_retain(B);
    if (!Bm) return NULL;
    int64_t br = Bm->sizes[Bm->ndim - 2], bc = Bm->sizes[Bm->ndim - 1];
    int64_t rows = left ? br : bc, k = left ? bc : br;
    if (rows != n) {
        em_set_error(EM_ESHAPE, "%s: incompatible shapes of A and B for the equation %s (%s and %s)", op,
                     left ? "AX = B" : "XA = B", em_shape_str(A->ndim, A->sizes, b1, sizeof b1),
                     em_shape_str(B->ndim, B->sizes, b2, sizeof b2));
        em_tensor_release(Bm);
        return NULL;
    }
    if (k > INT_MAX / 2) {
        em_tensor_release(Bm);
        em_set_error(EM_EVALUE, "%s: B is too large for LAPACK", op);
        return NULL;
    }
    batch_t bt = { 0, { 0 }, 1 };
    bt.nb = em_broadcast_shapes(A->ndim - 2, A->sizes, Bm->ndim - 2, Bm->sizes, bt.sizes, op);
    if (bt.nb < 0) {
        em_clear_error();
        em_set_error(EM_ESHAPE, "%s: the batch dimensions of A %s and B %s cannot broadcast", op,
                     em_shape_str(A->ndim, A->sizes, b1, sizeof b1), em_shape_str(B->ndim, B->sizes, b2, sizeof b2));
        em_tensor_release(Bm);
        return NULL;
    }
    for (int d = 0; d < bt.nb; d++) bt.count *= bt.sizes[d];
    em_tensor *out = new_batched(&bt, 2, left ? n : k, left ? k : n, A->dtype);
    double *a = dbuf((int64_t)n * n, op), *x = dbuf((int64_t)n * k, op);
    int *ipiv = malloc(sizeof(int) * (size_t)(n + 1));
    if (!out || !a || !x || !ipiv) {
        if (out && a && x) oom(op);
        goto fail;
    }
    int ni = n, ki = (int)k, info = 0;
    for (int64_t b = 0; b < bt.count && n > 0 && k > 0; b++) {
        get_mat(A, &bt, b, a, ld, false);
        double sign;
        if (lu(a, n, ipiv, &sign) > 0) {
            char pb[48];
            em_set_error(EM_EVALUE, "%s: %sThe solver failed because the input matrix is singular.", op,
                         bt.nb > 0 ? batch_prefix(A->ndim > 2 ? A : Bm, b, pb, sizeof pb) : "");
            goto fail;
        }
        get_mat(Bm, &bt, b, x, ld, !left);       /* n x k */
        dgetrs_(left ? "N" : "T", &ni, &ki, a, &ld, ipiv, x, &ld, &info, 1);
        if (left) {
            put_mat(out, b, x, ld);
        } else { /* X^T (n x k) is in x: out holds X (k x n) */
            double *p64 = (double *)em_tensor_data(out);
            float *p32 = (float *)em_tensor_data(out);
            for (int64_t i = 0; i < k; i++)
                for (int64_t j = 0; j < n; j++) {
                    double v = x[i * ld + j];
                    if (out->dtype == EM_FLOAT64) p64[b * n * k + i * n + j] = v;
                    else p32[b * n * k + i * n + j] = (float)v;
                }
        }
    }
    if (k == 0 || n == 0) memset(em_tensor_data(out), 0, (size_t)out->numel * em_dtype_size(out->dtype));
    free(a);
    free(x);
    free(ipiv);
    em_tensor_release(Bm);
    if (vec) { /* drop the trailing 1 of the vector case */
        em_tensor *c = em_tensor_new(out->ndim - 1, out->sizes, out->dtype, out->device);
        if (c) memcpy(em_tensor_data(c), em_tensor_data(out), (size_t)out->numel * em_dtype_size(out->dtype));
        em_tensor_release(out);
        return c;
    }
    return out;
fail:
    free(a);
    free(x);
    free(ipiv);
    em_tensor_release(Bm);
    em_tensor_release(out);
    return NULL;
}

/* ---- cholesky ---- */

em_tensor *em_cpu_cholesky(em_keyset ks, em_tensor *A, bool upper) {
    (void)ks;
    const char *op = "linalg.cholesky";
    if (!check_matrix(A, op, "A", true)) return NULL;
    batch_t bt = batch_of(A);
    int n = (int)A->sizes[A->ndim - 1], ld = ld_of(n), info = 0;
    em_tensor *out = new_batched(&bt, 2, n, n, A->dtype);
    double *a = dbuf((int64_t)n * n, op);
    if (!out || !a) goto fail;
    for (int64_t b = 0; b < bt.count && n > 0; b++) {
        get_mat(A, &bt, b, a, ld, false);
        dpotrf_(upper ? "U" : "L", &n, a, &ld, &info, 1);
        if (info > 0) {
            char pb[48];
            em_set_error(EM_EVALUE, "%s: %sThe factorization could not be completed because the input is not "
                         "positive-definite (the leading minor of order %d is not positive-definite).", op,
                         batch_prefix(A, b, pb, sizeof pb), info);
            goto fail;
        }
        for (int j = 0; j < n; j++) /* zero the other triangle */
            for (int i = 0; i < n; i++)
                if (upper ? i > j : i < j) a[j * ld + i] = 0.0;
        put_mat(out, b, a, ld);
    }
    free(a);
    return out;
fail:
    free(a);
    em_tensor_release(out);
    return NULL;
}

/* ---- qr ---- */

/* Q (m x m, or m x k) from geqrf's reflectors: copies the first
 * min(cols, qcols) columns of a (m x cols, ld m) into q (m x qcols) and runs
 * orgqr. */
static void qr_form_q(const double *a, int m, int cols, int k, const double *tau, double *q, int qcols,
                      double *work, int lwork) {
    int ld = ld_of(m), info = 0;
    int c = cols < qcols ? cols : qcols;
    memcpy(q, a, sizeof(double) * (size_t)ld * (size_t)c);
    if (qcols > c) memset(q + (size_t)ld * (size_t)c, 0, sizeof(double) * (size_t)ld * (size_t)(qcols - c));
    if (m > 0 && qcols > 0) dorgqr_(&m, &qcols, &k, q, &ld, tau, work, &lwork, &info);
}

em_tensor *em_cpu_qr(em_keyset ks, em_tensor *A, const char *mode, em_tensor **R) {
    (void)ks;
    const char *op = "linalg.qr";
    if (!check_matrix(A, op, "A", false)) return NULL;
    bool complete = strcmp(mode, "complete") == 0, want_q = strcmp(mode, "r") != 0;
    batch_t bt = batch_of(A);
    int m = (int)A->sizes[A->ndim - 2], n = (int)A->sizes[A->ndim - 1], k = m < n ? m : n;
    int ld = ld_of(m), info = 0, qcols = complete ? m : k, rrows = complete ? m : k;
    em_tensor *Q = want_q ? new_batched(&bt, 2, m, qcols, A->dtype) : em_tensor_new(1, (int64_t[]){ 0 }, A->dtype,
                                                                                     em_cpu_dev());
    em_tensor *Rt = new_batched(&bt, 2, rrows, n, A->dtype);
    double *a = NULL, *tau = NULL, *work = NULL, *q = NULL, *r = NULL;
    if (!Q || !Rt) goto fail;
    int lwork = 1, lw = -1;
    double w1 = 0, w2 = 0;
    if (m > 0 && n > 0) {
        dgeqrf_(&m, &n, NULL, &ld, NULL, &w1, &lw, &info);
        int qc = qcols > 0 ? qcols : 1;
        dorgqr_(&m, &qc, &k, NULL, &ld, NULL, &w2, &lw, &info);
        lwork = (int)(w1 > w2 ? w1 : w2);
        if (lwork < (n > m ? n : m)) lwork = n > m ? n : m;
    }
    a = dbuf((int64_t)ld * n, op);
    tau = dbuf(k, op);
    work = dbuf(lwork, op);
    q = dbuf((int64_t)ld * (qcols > n ? qcols : n), op);
    r = dbuf((int64_t)ld_of(rrows) * n, op);
    if (!a || !tau || !work || !q || !r) goto fail;
    for (int64_t b = 0; b < bt.count; b++) {
        get_mat(A, &bt, b, a, ld, false);
        if (m > 0 && n > 0) dgeqrf_(&m, &n, a, &ld, tau, work, &lwork, &info);
        int lr = ld_of(rrows);
        for (int j = 0; j < n; j++)
            for (int i = 0; i < rrows; i++) r[j * lr + i] = i <= j && i < m ? a[j * ld + i] : 0.0;
        put_mat(Rt, b, r, lr);
        if (want_q) {
            qr_form_q(a, m, n, k, tau, q, qcols, work, lwork);
            put_mat(Q, b, q, ld);
        }
    }
    free(a); free(tau); free(work); free(q); free(r);
    *R = Rt;
    return Q;
fail:
    free(a); free(tau); free(work); free(q); free(r);
    em_tensor_release(Q);
    em_tensor_release(Rt);
    return NULL;
}

/* ---- eigh, eigvalsh ---- */

/* Eigenvalues (ascending) and, when V is given, eigenvectors (columns). */
static em_tensor *eigh_common(em_tensor *A, const char *uplo, em_tensor **V, const char *op) {
    if (!check_matrix(A, op, "A", true)) return NULL;
    batch_t bt = batch_of(A);
    int n = (int)A->sizes[A->ndim - 1], ld = ld_of(n), info = 0, lwork = -1, liwork = -1;
    const char *jobz = V ? "V" : "N";
    em_tensor *L = new_batched(&bt, 1, n, 0, A->dtype);
    em_tensor *Vt = V ? new_batched(&bt, 2, n, n, A->dtype) : NULL;
    double *a = NULL, *w = NULL, *work = NULL;
    int *iwork = NULL;
    if (!L || (V && !Vt)) goto fail;
    double q = 0;
    int iq = 0;
    if (n > 0) dsyevd_(jobz, uplo, &n, NULL, &ld, NULL, &q, &lwork, &iq, &liwork, &info, 1, 1);
    lwork = q > 1 ? (int)q : 1;
    liwork = iq > 1 ? iq : 1;
    a = dbuf((int64_t)n * n, op);
    w = dbuf(n, op);
    work = dbuf(lwork, op);
    iwork = malloc(sizeof(int) * (size_t)liwork);
    if (!a || !w || !work || !iwork) {
        if (a && w && work) oom(op);
        goto fail;
    }
    for (int64_t b = 0; b < bt.count && n > 0; b++) {
        get_mat(A, &bt, b, a, ld, false);
        dsyevd_(jobz, uplo, &n, a, &ld, w, work, &lwork, iwork, &liwork, &info, 1, 1);
        if (info > 0) {
            char pb[48];
            em_set_error(EM_EVALUE, "%s: %sThe algorithm failed to converge because the input matrix is "
                         "ill-conditioned or has too many repeated eigenvalues (error code: %d).", op,
                         batch_prefix(A, b, pb, sizeof pb), info);
            goto fail;
        }
        for (int i = 0; i < n; i++) put_val(L, b * n + i, w[i]);
        if (Vt) put_mat(Vt, b, a, ld);
    }
    free(a); free(w); free(work); free(iwork);
    if (V) *V = Vt;
    return L;
fail:
    free(a); free(w); free(work); free(iwork);
    em_tensor_release(L);
    em_tensor_release(Vt);
    return NULL;
}

em_tensor *em_cpu_eigh(em_keyset ks, em_tensor *A, const char *UPLO, em_tensor **eigenvectors) {
    (void)ks;
    return eigh_common(A, UPLO, eigenvectors, "linalg.eigh");
}

em_tensor *em_cpu_eigvalsh(em_keyset ks, em_tensor *A, const char *UPLO) {
    (void)ks;
    return eigh_common(A, UPLO, NULL, "linalg.eigvalsh");
}

/* ---- svd, svdvals, pinv ---- */

/* The SVD of one m x n column-major matrix a (destroyed): s (k values,
 * descending), and with jobz "S"/"A" u (m x ucols, ld m) and vt (vrows x n,
 * ld vrows). Returns false with the error set (op, batch prefix pb). */
typedef struct {
    int m, n, k;
    const char *jobz; /* "N", "S" or "A" */
    int ucols, vrows;
    double *work;
    int lwork;
    int *iwork;
} svd_ws;

static bool svd_ws_init(svd_ws *w, int m, int n, const char *jobz, const char *op) {
    int k = m < n ? m : n, info = 0, lw = -1;
    w->m = m; w->n = n; w->k = k; w->jobz = jobz;
    w->ucols = jobz[0] == 'A' ? m : k;
    w->vrows = jobz[0] == 'A' ? n : k;
    w->work = NULL; w->iwork = NULL; w->lwork = 1;
    double q = 0;
    if (k > 0) {
        int ldm = ld_of(m), ldu = ld_of(m), ldvt = ld_of(w->vrows);
        dgesdd_(jobz, &m, &n, NULL, &ldm, NULL, NULL, &ldu, NULL, &ldvt, &q, &lw, NULL, &info, 1);
        w->lwork = q > 1 ? (int)q + 1 : 1;
    }
    w->work = dbuf(w->lwork, op);
    w->iwork = malloc(sizeof(int) * (size_t)(8 * (k > 0 ? k : 1)));
    if (!w->work || !w->iwork) {
        if (w->work) oom(op);
        return false;
    }
    return true;
}

static void svd_ws_free(svd_ws *w) {
    free(w->work);
    free(w->iwork);
}

static bool svd_one(svd_ws *w, double *a, double *s, double *u, double *vt, const char *op, const char *pb) {
    int m = w->m, n = w->n, info = 0;
    if (w->k == 0) { /* nothing to factor: U and V^T are identities where full */
        if (u) {
            memset(u, 0, sizeof(double) * (size_t)ld_of(m) * (size_t)w->ucols);
            for (int i = 0; i < w->ucols && i < m; i++) u[i * ld_of(m) + i] = 1.0;
        }
        if (vt) {
            memset(vt, 0, sizeof(double) * (size_t)ld_of(w->vrows) * (size_t)n);
            for (int i = 0; i < w->vrows && i < n; i++) vt[i * ld_of(w->vrows) + i] = 1.0;
        }
        return true;
    }
    for (int64_t i = 0; i < (int64_t)m * n; i++)
        if (!isfinite(a[i])) {
            em_set_error(EM_EVALUE, "%s: %sThe algorithm failed to converge because the input matrix contained "
                         "non-finite values.", op, pb);
            return false;
        }
    int ldm = ld_of(m), ldu = ld_of(m), ldvt = ld_of(w->vrows);
    double du = 0, dv = 0;
    dgesdd_(w->jobz, &m, &n, a, &ldm, s, u ? u : &du, &ldu, vt ? vt : &dv, &ldvt, w->work, &w->lwork, w->iwork,
            &info, 1);
    if (info > 0) {
        em_set_error(EM_EVALUE, "%s: %sThe algorithm failed to converge because the input matrix is "
                     "ill-conditioned or has too many repeated singular values (error code: %d).", op, pb, info);
        return false;
    }
    return true;
}

static em_tensor *svd_common(em_tensor *A, bool full, bool want_uv, em_tensor **S, em_tensor **Vh,
                             const char *op) {
    if (!check_matrix(A, op, "A", false)) return NULL;
    batch_t bt = batch_of(A);
    int m = (int)A->sizes[A->ndim - 2], n = (int)A->sizes[A->ndim - 1];
    svd_ws w;
    bool ws_ok = svd_ws_init(&w, m, n, !want_uv ? "N" : full ? "A" : "S", op);
    em_tensor *U = NULL, *St = NULL, *Vt = NULL;
    double *a = NULL, *s = NULL, *u = NULL, *vt = NULL;
    if (!ws_ok) goto fail;
    St = new_batched(&bt, 1, w.k, 0, A->dtype);
    if (want_uv) {
        U = new_batched(&bt, 2, m, w.ucols, A->dtype);
        Vt = new_batched(&bt, 2, w.vrows, n, A->dtype);
    }
    a = dbuf((int64_t)m * n, op);
    s = dbuf(w.k, op);
    if (want_uv) {
        u = dbuf((int64_t)ld_of(m) * w.ucols, op);
        vt = dbuf((int64_t)ld_of(w.vrows) * n, op);
    }
    if (!St || !a || !s || (want_uv && (!U || !Vt || !u || !vt))) goto fail;
    for (int64_t b = 0; b < bt.count; b++) {
        char pb[48];
        get_mat(A, &bt, b, a, ld_of(m), false);
        if (!svd_one(&w, a, s, u, vt, op, batch_prefix(A, b, pb, sizeof pb))) goto fail;
        for (int i = 0; i < w.k; i++) put_val(St, b * w.k + i, s[i]);
        if (want_uv) {
            put_mat(U, b, u, ld_of(m));
            put_mat(Vt, b, vt, ld_of(w.vrows));
        }
    }
    svd_ws_free(&w);
    free(a); free(s); free(u); free(vt);
    if (!want_uv) return St;
    *S = St;
    *Vh = Vt;
    return U;
fail:
    svd_ws_free(&w);
    free(a); free(s); free(u); free(vt);
    em_tensor_release(U);
    em_tensor_release(St);
    em_tensor_release(Vt);
    return NULL;
}

em_tensor *em_cpu_svd(em_keyset ks, em_tensor *A, bool full_matrices, em_tensor **S, em_tensor **Vh) {
    (void)ks;
    return svd_common(A, full_matrices, true, S, Vh, "linalg.svd");
}

em_tensor *em_cpu_svdvals(em_keyset ks, em_tensor *A) {
    (void)ks;
    return svd_common(A, false, false, NULL, NULL, "linalg.svdvals");
}

/* torch's tolerances for pinv (matrix_rank's composite repeats them): rtol defaults to
 * eps(dtype) * max(m, n) when neither is given, to 0 when only atol is. */
static void tolerances(const em_tensor *A, const em_scalar *atol, const em_scalar *rtol, double *at,
                       double *rt) {
    int64_t m = A->sizes[A->ndim - 2], n = A->sizes[A->ndim - 1];
    double eps = A->dtype == EM_FLOAT32 ? (double)FLT_EPSILON : DBL_EPSILON;
    *at = atol ? em_scalar_to_double(*atol) : 0.0;
    *rt = rtol ? em_scalar_to_double(*rtol) : atol ? 0.0 : eps * (double)(m > n ? m : n);
}

/* pinv = V diag(1/s where s > max(atol, rtol * s_max), else 0) U^T from the
 * SVD (or, hermitian, from eigh: V diag(1/l) V^T with |l| for s). */
em_tensor *em_cpu_pinv(em_keyset ks, em_tensor *A, const em_scalar *atol, const em_scalar *rtol, bool hermitian) {
    (void)ks;
    const char *op = "linalg.pinv";
    if (!check_matrix(A, op, "A", hermitian)) return NULL;
    batch_t bt = batch_of(A);
    int m = (int)A->sizes[A->ndim - 2], n = (int)A->sizes[A->ndim - 1], k = m < n ? m : n;
    double at, rt;
    tolerances(A, atol, rtol, &at, &rt);
    em_tensor *out = new_batched(&bt, 2, n, m, A->dtype);
    svd_ws w = { 0 };
    bool ws_ok = !hermitian ? svd_ws_init(&w, m, n, "S", op) : true;
    double *a = dbuf((int64_t)m * n, op), *s = dbuf(k, op), *u = dbuf((int64_t)ld_of(m) * k, op);
    double *vt = dbuf((int64_t)ld_of(k) * n, op), *p = dbuf((int64_t)n * m, op);
    em_tensor *L = NULL, *V = NULL;
    if (!out || !ws_ok || !a || !s || !u || !vt || !p) goto fail;
    if (hermitian) { /* eigh of the whole batch (lower triangle, as torch) */
        L = eigh_common(A, "L", &V, op);
        if (!L) goto fail;
    }
    for (int64_t b = 0; b < bt.count; b++) {
        if (hermitian) { /* u = V, vt = V^T, s = l (signed) */
            for (int i = 0; i < n; i++) s[i] = em_load_as_double((char *)em_tensor_data(L) +
                                                                 (size_t)(b * n + i) * em_dtype_size(L->dtype),
                                                                 L->dtype);
            get_mat(V, &bt, b, u, ld_of(m), false);
            get_mat(V, &bt, b, vt, ld_of(k), true);
        } else {
            char pb[48];
            get_mat(A, &bt, b, a, ld_of(m), false);
            if (!svd_one(&w, a, s, u, vt, op, batch_prefix(A, b, pb, sizeof pb))) goto fail;
        }
        double smax = 0;
        for (int i = 0; i < k; i++) smax = fabs(s[i]) > smax ? fabs(s[i]) : smax;
        double tol = at > rt * smax ? at : rt * smax;
        /* p (n x m, column-major, ld n) = sum_i vt[i, :]^T u[:, i]^T / s_i */
        memset(p, 0, sizeof(double) * (size_t)n * (size_t)m);
        for (int i = 0; i < k; i++) {
            if (!(fabs(s[i]) > tol)) continue;
            double inv = 1.0 / s[i];
            for (int c = 0; c < m; c++) {
                double uc = u[i * ld_of(m) + c] * inv;
                for (int r = 0; r < n; r++) p[c * n + r] += vt[r * ld_of(k) + i] * uc;
            }
        }
        put_mat(out, b, p, n > 0 ? n : 1);
    }
    if (!hermitian) svd_ws_free(&w);
    free(a); free(s); free(u); free(vt); free(p);
    em_tensor_release(L);
    em_tensor_release(V);
    return out;
fail:
    if (!hermitian && ws_ok) svd_ws_free(&w);
    free(a); free(s); free(u); free(vt); free(p);
    em_tensor_release(L);
    em_tensor_release(V);
    em_tensor_release(out);
    return NULL;
}

/* matrix_rank: the singular values (|eigenvalues| when hermitian) above
 * max(atol, rtol * largest) per matrix, as int64 (0 for an empty matrix). */
em_tensor *em_cpu_matrix_rank(em_keyset ks, em_tensor *A, const em_scalar *atol, const em_scalar *rtol,
                              bool hermitian) {
    const char *op = "linalg.matrix_rank";
    if (!check_matrix(A, op, "A", hermitian)) return NULL;
    batch_t bt = batch_of(A);
    double at, rt;
    tolerances(A, atol, rtol, &at, &rt);
    em_tensor *s = hermitian ? eigh_common(A, "L", NULL, op) : svd_common(A, false, false, NULL, NULL, op);
    em_tensor *out = s ? new_batched(&bt, 0, 0, 0, EM_INT64) : NULL;
    if (!out) {
        em_tensor_release(s);
        return NULL;
    }
    (void)ks;
    int64_t k = s->sizes[s->ndim - 1];
    for (int64_t b = 0; b < bt.count; b++) {
        double smax = 0;
        for (int64_t i = 0; i < k; i++) {
            double v = fabs(em_load_as_double((char *)em_tensor_data(s) + (size_t)(b * k + i) * em_dtype_size(s->dtype),
                                              s->dtype));
            smax = v > smax ? v : smax;
        }
        double tol = at > rt * smax ? at : rt * smax;
        int64_t r = 0;
        for (int64_t i = 0; i < k; i++)
            r += fabs(em_load_as_double((char *)em_tensor_data(s) + (size_t)(b * k + i) * em_dtype_size(s->dtype),
                                        s->dtype)) > tol;
        ((int64_t *)em_tensor_data(out))[b] = r;
    }
    em_tensor_release(s);
    return out;
}

/* ---- lstsq ---- */

/* min ||A X - B|| per matrix with LAPACK's driver (torch's: gels, gelsy
 * (default), gelsd, gelss). Results as torch: solution (n x k); residuals
 * (squared column norms of A X - B) only when m > n, every A has full rank
 * and the driver is not gelsy, else empty; rank (int64, per matrix) except
 * for gels (empty); singular_values for gelsd/gelss, else empty. */
em_tensor *em_cpu_lstsq(em_keyset ks, em_tensor *self, em_tensor *b, const em_scalar *rcond, const char *driver,
                        em_tensor **residuals, em_tensor **rank, em_tensor **singular_values) {
    (void)ks;
    const char *op = "linalg.lstsq";
    char b1[EM_SHAPE_STR_MAX], b2[EM_SHAPE_STR_MAX];
    em_tensor *A = self;
    if (!check_matrix(A, op, "self", false)) return NULL;
    if (b->dtype != A->dtype) {
        em_set_error(EM_ETYPE, "%s: expected self and b to have the same dtype, but got self of dtype %s and b "
                     "of dtype %s", op, em_dtype_name(A->dtype), em_dtype_name(b->dtype));
        return NULL;
    }
    bool vec = b->ndim == A->ndim - 1;
    if (b->ndim < 1 || (!vec && b->ndim < 2)) {
        em_set_error(EM_ESHAPE, "%s: argument 'b' must have at least 1 dimension, got a 0-dim tensor", op);
        return NULL;
    }
    em_tensor *Bm = vec ? em_core_unsqueeze(b, b->ndim) : em_tensor_retain(b);
    if (!Bm) return NULL;
    int m = (int)A->sizes[A->ndim - 2], n = (int)A->sizes[A->ndim - 1];
    if (Bm->sizes[Bm->ndim - 2] != m) {
        em_set_error(EM_ESHAPE, "%s: self %s and b %s: self.size(-2) should match b.size(-%d)", op,
                     em_shape_str(A->ndim, A->sizes, b1, sizeof b1), em_shape_str(b->ndim, b->sizes, b2, sizeof b2),
                     vec ? 1 : 2);
        em_tensor_release(Bm);
        return NULL;
    }
    int64_t k64 = Bm->sizes[Bm->ndim - 1];
    if (k64 > INT_MAX / 2) {
        em_tensor_release(Bm);
        em_set_error(EM_EVALUE, "%s: b is too large for LAPACK", op);
        return NULL;
    }
    int k = (int)k64, mn = m > n ? m : n, kk = m < n ? m : n;
    batch_t bt = { 0, { 0 }, 1 };
    bt.nb = em_broadcast_shapes(A->ndim - 2, A->sizes, Bm->ndim - 2, Bm->sizes, bt.sizes, op);
    if (bt.nb < 0) {
        em_tensor_release(Bm);
        return NULL;
    }
    for (int d = 0; d < bt.nb; d++) bt.count *= bt.sizes[d];
    int drv = strcmp(driver, "gels") == 0 ? 0 : strcmp(driver, "gelsy") == 0 ? 1 : strcmp(driver, "gelsd") == 0 ? 2 : 3;
    double eps = A->dtype == EM_FLOAT32 ? (double)FLT_EPSILON : DBL_EPSILON;
    double rc = rcond ? em_scalar_to_double(*rcond) : eps * (double)mn;
    em_tensor *X = vec ? new_batched(&bt, 1, n, 0, A->dtype) : new_batched(&bt, 2, n, k, A->dtype);
    em_tensor *rk = drv == 0 ? em_tensor_new(1, (int64_t[]){ 0 }, EM_INT64, em_cpu_dev())
                             : new_batched(&bt, 0, 0, 0, EM_INT64);
    em_tensor *sv = drv >= 2 ? new_batched(&bt, 1, kk, 0, A->dtype)
                             : em_tensor_new(1, (int64_t[]){ 0 }, A->dtype, em_cpu_dev());
    em_tensor *res = NULL;
    double *a = dbuf((int64_t)ld_of(m) * n, op), *x = dbuf((int64_t)ld_of(mn) * k, op), *s = dbuf(kk, op);
    double *rs = dbuf((int64_t)bt.count * k, op), *work = NULL;
    int *iw = NULL, *jpvt = malloc(sizeof(int) * (size_t)(n + 1));
    bool full_rank = true;
    if (!X || !rk || !sv || !a || !x || !s || !rs || !jpvt) {
        if (X && rk && sv && a && x && s && rs) oom(op);
        goto fail;
    }
    int lda = ld_of(m), ldb = ld_of(mn), info = 0, lwork = -1, rnk = 0;
    double q = 0;
    int iq = 1;
    if (kk > 0 && k > 0) {
        if (drv == 0) dgels_("N", &m, &n, &k, NULL, &lda, NULL, &ldb, &q, &lwork, &info, 1);
        else if (drv == 1) dgelsy_(&m, &n, &k, NULL, &lda, NULL, &ldb, NULL, &rc, &rnk, &q, &lwork, &info);
        else if (drv == 2) dgelsd_(&m, &n, &k, NULL, &lda, NULL, &ldb, NULL, &rc, &rnk, &q, &lwork, &iq, &info);
        else dgelss_(&m, &n, &k, NULL, &lda, NULL, &ldb, NULL, &rc, &rnk, &q, &lwork, &info);
    }
    lwork = q > 1 ? (int)q + 1 : 1;
    work = dbuf(lwork, op);
    iw = malloc(sizeof(int) * (size_t)(iq > 1 ? iq : 1) * 2);
    if (!work || !iw) {
        if (work) oom(op);
        goto fail;
    }
    for (int64_t bi = 0; bi < bt.count; bi++) {
        get_mat(A, &bt, bi, a, lda, false);
        memset(x, 0, sizeof(double) * (size_t)ldb * (size_t)(k > 0 ? k : 1));
        get_mat(Bm, &bt, bi, x, ldb, false); /* m x k into the top of the mn x k buffer */
        rnk = kk;
        if (kk > 0 && k > 0) {
            memset(jpvt, 0, sizeof(int) * (size_t)(n + 1));
            if (drv == 0) dgels_("N", &m, &n, &k, a, &lda, x, &ldb, work, &lwork, &info, 1);
            else if (drv == 1) dgelsy_(&m, &n, &k, a, &lda, x, &ldb, jpvt, &rc, &rnk, work, &lwork, &info);
            else if (drv == 2) dgelsd_(&m, &n, &k, a, &lda, x, &ldb, s, &rc, &rnk, work, &lwork, iw, &info);
            else dgelss_(&m, &n, &k, a, &lda, x, &ldb, s, &rc, &rnk, work, &lwork, &info);
            if (info > 0) {
                char pb[48];
                if (drv == 0)
                    em_set_error(EM_EVALUE, "%s: %sThe least squares solution could not be computed because the "
                                 "input matrix does not have full rank (error code: %d).", op,
                                 batch_prefix(A->ndim > 2 ? A : Bm, bi, pb, sizeof pb), info);
                else
                    em_set_error(EM_EVALUE, "%s: %sThe algorithm failed to converge (error code: %d).", op,
                                 batch_prefix(A->ndim > 2 ? A : Bm, bi, pb, sizeof pb), info);
                goto fail;
            }
        } else if (drv >= 2) {
            rnk = 0;
        }
        if (kk == 0) rnk = 0;
        if (rnk < n) full_rank = false;
        /* solution: the first n rows */
        for (int c = 0; c < k; c++)
            for (int r = 0; r < n; r++) put_val(X, (bi * n + r) * (vec ? 1 : k) + (vec ? 0 : c), x[c * ldb + r]);
        if (kk == 0 && n > 0) /* A has no rows or no columns: X is zero */
            for (int64_t e = 0; e < (int64_t)n * k; e++) put_val(X, bi * n * k + e, 0.0);
        /* residuals: the squared norms of rows n..m-1 of the transformed b */
        for (int c = 0; c < k; c++) {
            double acc = 0;
            for (int r = n; r < m; r++) acc += x[c * ldb + r] * x[c * ldb + r];
            rs[bi * k + c] = acc;
        }
        if (drv != 0) put_val(rk, bi, rnk);
        if (drv >= 2)
            for (int i = 0; i < kk; i++) put_val(sv, bi * kk + i, s[i]);
    }
    if (m > n && drv != 1 && full_rank && bt.count > 0) {
        res = vec ? new_batched(&bt, 0, 0, 0, A->dtype) : new_batched(&bt, 1, k, 0, A->dtype);
        if (!res) goto fail;
        for (int64_t e = 0; e < bt.count * k; e++) put_val(res, e, rs[e]);
    } else {
        res = em_tensor_new(1, (int64_t[]){ 0 }, A->dtype, em_cpu_dev());
        if (!res) goto fail;
    }
    free(a); free(x); free(s); free(rs); free(work); free(iw); free(jpvt);
    em_tensor_release(Bm);
    *residuals = res;
    *rank = rk;
    *singular_values = sv;
    return X;
fail:
    free(a); free(x); free(s); free(rs); free(work); free(iw); free(jpvt);
    em_tensor_release(Bm);
    em_tensor_release(X);
    em_tensor_release(rk);
    em_tensor_release(sv);
    return NULL;
}

/* ---- matrix_exp ---- */

/* c = a b for n x n column-major matrices. */
static void mm_n(int n, const double *a, const double *b, double *c) {
    cblas_dgemm(CblasColMajor, CblasNoTrans, CblasNoTrans, n, n, n, 1.0, a, n, b, n, 0.0, c, n);
}

/* exp(a) for one n x n column-major matrix (n > 0) by scaling and squaring
 * with a Pade approximant of degree 3, 5, 7, 9 or 13 chosen by the 1-norm
 * (Higham 2005, "The scaling and squaring method for the matrix exponential
 * revisited"; the degrees and thresholds torch uses for float64). w: 8 n^2
 * doubles of scratch; out: the result. Returns false when the final solve
 * meets a singular denominator (cannot happen for finite input). */
static bool expm_one(int n, double *a, double *w, int *ipiv, double *out) {
    static const double theta[5] = { 1.495585217958292e-2, 2.539398330063230e-1, 9.504178996162932e-1,
                                     2.097847961257068e0, 5.371920351148152e0 };
    static const double b13[14] = { 64764752532480000., 32382376266240000., 7771770303897600., 1187353796428800.,
                                    129060195264000., 10559470521600., 670442572800., 33522128640., 1323241920.,
                                    40840800., 960960., 16380., 182., 1. };
    static const double b9[10] = { 17643225600., 8821612800., 2075673600., 302702400., 30270240., 2162160., 110880.,
                                   3960., 90., 1. };
    static const double b7[8] = { 17297280., 8648640., 1995840., 277200., 25200., 1512., 56., 1. };
    static const double b5[6] = { 30240., 15120., 3360., 420., 30., 1. };
    static const double b3[4] = { 120., 60., 12., 1. };
    size_t nn = (size_t)n * (size_t)n;
    double *A2 = w, *A4 = w + nn, *A6 = w + 2 * nn, *U = w + 3 * nn, *V = w + 4 * nn, *T = w + 5 * nn,
           *T2 = w + 6 * nn;
    double norm = 0;
    for (int j = 0; j < n; j++) {
        double c = 0;
        for (int i = 0; i < n; i++) c += fabs(a[(size_t)j * n + i]);
        norm = c > norm || c != c ? c : norm;
    }
    int s = 0, deg = 13;
    for (int d = 0; d < 4; d++)
        if (norm <= theta[d]) { deg = 3 + 2 * d; break; }
    if (deg == 13 && norm > theta[4]) {
        s = (int)ceil(log2(norm / theta[4]));
        if (s < 0) s = 0;
        if (s > 1000 || norm != norm || isinf(norm)) s = norm != norm || isinf(norm) ? 0 : 1000;
        double sc = ldexp(1.0, -s);
        for (size_t i = 0; i < nn; i++) a[i] *= sc;
    }
    mm_n(n, a, a, A2);
    memset(U, 0, nn * sizeof(double));
    memset(V, 0, nn * sizeof(double));
    if (deg == 13) {
        const double *b = b13;
        mm_n(n, A2, A2, A4);
        mm_n(n, A4, A2, A6);
        /* U = A [A6 (b13 A6 + b11 A4 + b9 A2) + b7 A6 + b5 A4 + b3 A2 + b1 I] */
        for (size_t i = 0; i < nn; i++) T[i] = b[13] * A6[i] + b[11] * A4[i] + b[9] * A2[i];
        mm_n(n, A6, T, T2);
        for (size_t i = 0; i < nn; i++) T2[i] += b[7] * A6[i] + b[5] * A4[i] + b[3] * A2[i];
        for (int i = 0; i < n; i++) T2[(size_t)i * n + i] += b[1];
        mm_n(n, a, T2, U);
        /* V = A6 (b12 A6 + b10 A4 + b8 A2) + b6 A6 + b4 A4 + b2 A2 + b0 I */
        for (size_t i = 0; i < nn; i++) T[i] = b[12] * A6[i] + b[10] * A4[i] + b[8] * A2[i];
        mm_n(n, A6, T, V);
        for (size_t i = 0; i < nn; i++) V[i] += b[6] * A6[i] + b[4] * A4[i] + b[2] * A2[i];
        for (int i = 0; i < n; i++) V[(size_t)i * n + i] += b[0];
    } else {
        const double *b = deg == 3 ? b3 : deg == 5 ? b5 : deg == 7 ? b7 : b9;
        /* powers P_j = A^(2j): U = A sum_j b[2j+1] P_j, V = sum_j b[2j] P_j */
        double *P = A4, *Pn = A6;
        memset(P, 0, nn * sizeof(double));
        for (int i = 0; i < n; i++) P[(size_t)i * n + i] = 1.0;
        memset(T, 0, nn * sizeof(double));
        for (int j = 0; 2 * j + 1 <= deg; j++) {
            for (size_t i = 0; i < nn; i++) {
                T[i] += b[2 * j + 1] * P[i];
                V[i] += b[2 * j] * P[i];
            }
            if (2 * j + 3 <= deg) {
                mm_n(n, P, A2, Pn);
                double *t = P; P = Pn; Pn = t;
            }
        }
        mm_n(n, a, T, U);
    }
    /* out = (V - U)^-1 (V + U) */
    for (size_t i = 0; i < nn; i++) {
        T[i] = V[i] - U[i];
        out[i] = V[i] + U[i];
    }
    int info = 0;
    dgetrf_(&n, &n, T, &n, ipiv, &info);
    if (info == 0) dgetrs_("N", &n, &n, T, &n, ipiv, out, &n, &info, 1);
    else { /* singular denominator (non-finite input): propagate NaN as torch would */
        for (size_t i = 0; i < nn; i++) out[i] = NAN;
    }
    for (int i = 0; i < s; i++) {
        mm_n(n, out, out, T);
        memcpy(out, T, nn * sizeof(double));
    }
    return true;
}

em_tensor *em_cpu_matrix_exp(em_keyset ks, em_tensor *A) {
    (void)ks;
    const char *op = "linalg.matrix_exp";
    if (!check_matrix(A, op, "A", true)) return NULL;
    batch_t bt = batch_of(A);
    int n = (int)A->sizes[A->ndim - 1];
    em_tensor *out = new_batched(&bt, 2, n, n, A->dtype);
    double *a = dbuf((int64_t)n * n, op), *w = dbuf((int64_t)8 * n * n, op), *r = dbuf((int64_t)n * n, op);
    int *ipiv = malloc(sizeof(int) * (size_t)(n + 1));
    if (!out || !a || !w || !r || !ipiv) {
        if (out && a && w && r) oom(op);
        free(a); free(w); free(r); free(ipiv);
        em_tensor_release(out);
        return NULL;
    }
    for (int64_t b = 0; b < bt.count && n > 0; b++) {
        get_mat(A, &bt, b, a, n, false);
        expm_one(n, a, w, ipiv, r);
        put_mat(out, b, r, n);
    }
    free(a); free(w); free(r); free(ipiv);
    return out;
}
