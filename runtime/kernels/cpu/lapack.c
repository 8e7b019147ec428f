/* lapack.c -- torch.linalg's LAPACK ops on the CPU: det, slogdet, inv,
 * solve, cholesky, qr, eigh, svd, pinv, matrix_rank, lstsq, matrix_exp
 * (eigvalsh, svdvals and inverse are composites: composite_lapack.c).
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

/* The routines of one precision: P the prefix (d: double, s: float), T the
 * element type; the float32 ones have the float64 ones' signatures. */
#define LAPACK_DECLS(P, T)                                                                                   \
    extern void P##getrf_(const int *m, const int *n, T *a, const int *lda, int *ipiv, int *info);          \
    extern void P##getrs_(const char *trans, const int *n, const int *nrhs, const T *a, const int *lda,      \
                          const int *ipiv, T *b, const int *ldb, int *info, size_t);                        \
    extern void P##potrf_(const char *uplo, const int *n, T *a, const int *lda, int *info, size_t);          \
    extern void P##geqrf_(const int *m, const int *n, T *a, const int *lda, T *tau, T *work, const int *lwork, \
                          int *info);                                                                       \
    extern void P##orgqr_(const int *m, const int *n, const int *k, T *a, const int *lda, const T *tau,      \
                          T *work, const int *lwork, int *info);                                            \
    extern void P##syevd_(const char *jobz, const char *uplo, const int *n, T *a, const int *lda, T *w,      \
                          T *work, const int *lwork, int *iwork, const int *liwork, int *info, size_t,      \
                          size_t);                                                                          \
    extern void P##gesdd_(const char *jobz, const int *m, const int *n, T *a, const int *lda, T *s, T *u,    \
                          const int *ldu, T *vt, const int *ldvt, T *work, const int *lwork, int *iwork,    \
                          int *info, size_t);                                                               \
    extern void P##gels_(const char *trans, const int *m, const int *n, const int *nrhs, T *a,               \
                         const int *lda, T *b, const int *ldb, T *work, const int *lwork, int *info,        \
                         size_t);                                                                           \
    extern void P##gelsy_(const int *m, const int *n, const int *nrhs, T *a, const int *lda, T *b,           \
                          const int *ldb, int *jpvt, const T *rcond, int *rank, T *work, const int *lwork,  \
                          int *info);                                                                       \
    extern void P##gelsd_(const int *m, const int *n, const int *nrhs, T *a, const int *lda, T *b,           \
                          const int *ldb, T *s, const T *rcond, int *rank, T *work, const int *lwork,       \
                          int *iwork, int *info);                                                           \
    extern void P##gelss_(const int *m, const int *n, const int *nrhs, T *a, const int *lda, T *b,           \
                          const int *ldb, T *s, const T *rcond, int *rank, T *work, const int *lwork,       \
                          int *info);

LAPACK_DECLS(d, double)
LAPACK_DECLS(s, float)

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
    if (r == 0 || c == 0) return; /* an empty matrix's data may be NULL: no offset into it */
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
 * b of out (whose last two dims are rows, cols), a tensor this file made
 * with new_batched or new_colmajor (batch dims packed, any strides of the
 * last two). */
static void put_mat(em_tensor *out, int64_t b, const double *src, int64_t ld) {
    int nd = out->ndim;
    int64_t r = out->sizes[nd - 2], c = out->sizes[nd - 1], s0 = out->strides[nd - 2], s1 = out->strides[nd - 1];
    int64_t off = out->offset + (nd > 2 ? b * out->strides[nd - 3] : 0);
    if (r == 0 || c == 0) return; /* an empty matrix's data may be NULL */
    if (out->dtype == EM_FLOAT64) {
        double *p = (double *)out->storage->data + off;
        for (int64_t j = 0; j < c; j++)
            for (int64_t i = 0; i < r; i++) p[i * s0 + j * s1] = src[j * ld + i];
    } else {
        float *p = (float *)out->storage->data + off;
        for (int64_t j = 0; j < c; j++)
            for (int64_t i = 0; i < r; i++) p[i * s0 + j * s1] = (float)src[j * ld + i];
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

/* A new tensor of the batch shape followed by (r, c) in LAPACK's layout,
 * as torch returns its factors: each matrix column-major (strides 1, ld)
 * in a block of ld * c elements (ld >= r; lstsq's solution is the first n
 * rows of a max(m, n)-row block), blocks in row-major batch order. */
static em_tensor *new_colmajor(const batch_t *bt, int64_t r, int64_t c, int64_t ld, em_dtype dt) {
    int64_t sz[EM_MAX_DIMS], st[EM_MAX_DIMS];
    int nd = bt->nb + 2;
    if (ld < 1) ld = 1;
    sz[nd - 2] = r;
    sz[nd - 1] = c;
    st[nd - 2] = 1;
    st[nd - 1] = ld;
    int64_t block = ld * c, count = bt->count;
    for (int d = bt->nb - 1; d >= 0; d--) {
        sz[d] = bt->sizes[d];
        st[d] = block;
        block *= bt->sizes[d];
    }
    size_t nbytes = (size_t)(count * ld * c) * em_dtype_size(dt);
    em_storage *stg = em_storage_new(nbytes, em_cpu_dev());
    if (!stg) return NULL;
    em_tensor *t = em_tensor_new_view(stg, 0, nd, sz, st, dt, NULL);
    em_storage_release(stg);
    if (t && nbytes) memset(em_tensor_data(t), 0, nbytes); /* the rows past r of a taller block */
    return t;
}

/* A float64 buffer of n elements (at least one), NULL with the error set. */
static double *dbuf(int64_t n, const char *op) {
    double *p = malloc((size_t)(n > 0 ? n : 1) * sizeof(double));
    if (!p) oom(op);
    return p;
}

/* ---- one routine, two precisions ----
 * The kernels keep matrices in float64 buffers. These wrappers run LAPACK's
 * d* routine on them for float64 and, for float32, the s* routine on float
 * copies (converted back after: exact both ways), so a float32 input gets
 * torch's float32 computation (the same rounding, the same signs of
 * eigenvectors and singular vectors). Each queries and allocates its own
 * workspace and returns LAPACK's info, or LP_ENOMEM when a buffer could
 * not be allocated. */
#define LP_ENOMEM INT_MIN

static float *to_f(const double *a, size_t n) {
    float *f = malloc((n ? n : 1) * sizeof(float));
    if (f)
        for (size_t i = 0; i < n; i++) f[i] = (float)a[i];
    return f;
}

static void from_f(double *a, const float *f, size_t n) {
    for (size_t i = 0; i < n; i++) a[i] = f[i];
}

/* A workspace of a query's size (at least min) in the dtype's precision. */
static void *work_of(em_dtype dt, double q, int min, int *lwork) {
    *lwork = q > min ? (int)q + 1 : min > 1 ? min : 1;
    return malloc((size_t)*lwork * (dt == EM_FLOAT64 ? sizeof(double) : sizeof(float)));
}

/* LU of the n x n matrix a (ld max(1, n)) in place. */
static int x_getrf(em_dtype dt, int n, double *a, int *ipiv) {
    int ld = ld_of(n), info = 0;
    size_t sz = (size_t)ld * (size_t)n;
    if (n == 0) return 0;
    if (dt == EM_FLOAT64) {
        dgetrf_(&n, &n, a, &ld, ipiv, &info);
        return info;
    }
    float *f = to_f(a, sz);
    if (!f) return LP_ENOMEM;
    sgetrf_(&n, &n, f, &ld, ipiv, &info);
    from_f(a, f, sz);
    free(f);
    return info;
}

/* Solves op(A) X = B with getrf's factors of the n x n a; b: n x nrhs. */
static int x_getrs(em_dtype dt, const char *trans, int n, int nrhs, const double *a, const int *ipiv, double *b,
                   int ldb) {
    int ld = ld_of(n), info = 0;
    if (n == 0 || nrhs == 0) return 0;
    if (dt == EM_FLOAT64) {
        dgetrs_(trans, &n, &nrhs, a, &ld, ipiv, b, &ldb, &info, 1);
        return info;
    }
    size_t sa = (size_t)ld * (size_t)n, sb = (size_t)ldb * (size_t)nrhs;
    float *fa = to_f(a, sa), *fb = to_f(b, sb);
    if (fa && fb) {
        sgetrs_(trans, &n, &nrhs, fa, &ld, ipiv, fb, &ldb, &info, 1);
        from_f(b, fb, sb);
    }
    int r = fa && fb ? info : LP_ENOMEM;
    free(fa);
    free(fb);
    return r;
}

static int x_potrf(em_dtype dt, const char *uplo, int n, double *a) {
    int ld = ld_of(n), info = 0;
    size_t sz = (size_t)ld * (size_t)n;
    if (n == 0) return 0;
    if (dt == EM_FLOAT64) {
        dpotrf_(uplo, &n, a, &ld, &info, 1);
        return info;
    }
    float *f = to_f(a, sz);
    if (!f) return LP_ENOMEM;
    spotrf_(uplo, &n, f, &ld, &info, 1);
    from_f(a, f, sz);
    free(f);
    return info;
}

/* Householder QR of the m x n a (ld max(1, m)) in place; tau: min(m, n). */
static int x_geqrf(em_dtype dt, int m, int n, double *a, double *tau) {
    int ld = ld_of(m), info = 0, lw = -1, k = m < n ? m : n;
    size_t sz = (size_t)ld * (size_t)n;
    if (m == 0 || n == 0) return 0;
    float *f = dt == EM_FLOAT64 ? NULL : to_f(a, sz), *ft = f ? to_f(tau, (size_t)k) : NULL;
    if (dt != EM_FLOAT64 && (!f || !ft)) {
        free(f);
        free(ft);
        return LP_ENOMEM;
    }
    double qd = 0;
    float qf = 0;
    if (f) sgeqrf_(&m, &n, f, &ld, ft, &qf, &lw, &info);
    else dgeqrf_(&m, &n, a, &ld, tau, &qd, &lw, &info);
    void *w = work_of(dt, f ? qf : qd, n, &lw);
    if (w && f) {
        sgeqrf_(&m, &n, f, &ld, ft, w, &lw, &info);
        from_f(a, f, sz);
        from_f(tau, ft, (size_t)k);
    } else if (w) {
        dgeqrf_(&m, &n, a, &ld, tau, w, &lw, &info);
    }
    free(f);
    free(ft);
    free(w);
    return w ? info : LP_ENOMEM;
}

/* Q's first qc columns from geqrf's k reflectors, in q (m x qc, ld max(1, m)). */
static int x_orgqr(em_dtype dt, int m, int qc, int k, double *q, const double *tau) {
    int ld = ld_of(m), info = 0, lw = -1;
    size_t sz = (size_t)ld * (size_t)qc;
    if (m == 0 || qc == 0) return 0;
    float *f = dt == EM_FLOAT64 ? NULL : to_f(q, sz), *ft = f ? to_f(tau, (size_t)k) : NULL;
    if (dt != EM_FLOAT64 && (!f || !ft)) {
        free(f);
        free(ft);
        return LP_ENOMEM;
    }
    double qd = 0;
    float qf = 0;
    if (f) sorgqr_(&m, &qc, &k, f, &ld, ft, &qf, &lw, &info);
    else dorgqr_(&m, &qc, &k, q, &ld, tau, &qd, &lw, &info);
    void *w = work_of(dt, f ? qf : qd, qc, &lw);
    if (w && f) {
        sorgqr_(&m, &qc, &k, f, &ld, ft, w, &lw, &info);
        from_f(q, f, sz);
    } else if (w) {
        dorgqr_(&m, &qc, &k, q, &ld, tau, w, &lw, &info);
    }
    free(f);
    free(ft);
    free(w);
    return w ? info : LP_ENOMEM;
}

/* Eigenvalues w (ascending) and, jobz "V", eigenvectors over a of the
 * symmetric n x n a (its uplo triangle). */
static int x_syevd(em_dtype dt, const char *jobz, const char *uplo, int n, double *a, double *w) {
    int ld = ld_of(n), info = 0, lw = -1, liw = -1, iq = 1;
    size_t sz = (size_t)ld * (size_t)n;
    if (n == 0) return 0;
    float *f = dt == EM_FLOAT64 ? NULL : to_f(a, sz), *fw = f ? to_f(w, (size_t)n) : NULL;
    if (dt != EM_FLOAT64 && (!f || !fw)) {
        free(f);
        free(fw);
        return LP_ENOMEM;
    }
    double qd = 0;
    float qf = 0;
    if (f) ssyevd_(jobz, uplo, &n, f, &ld, fw, &qf, &lw, &iq, &liw, &info, 1, 1);
    else dsyevd_(jobz, uplo, &n, a, &ld, w, &qd, &lw, &iq, &liw, &info, 1, 1);
    void *wk = work_of(dt, f ? qf : qd, 1, &lw);
    liw = iq > 1 ? iq : 1;
    int *iw = malloc(sizeof(int) * (size_t)liw);
    if (wk && iw && f) {
        ssyevd_(jobz, uplo, &n, f, &ld, fw, wk, &lw, iw, &liw, &info, 1, 1);
        from_f(a, f, sz);
        from_f(w, fw, (size_t)n);
    } else if (wk && iw) {
        dsyevd_(jobz, uplo, &n, a, &ld, w, wk, &lw, iw, &liw, &info, 1, 1);
    }
    int r = wk && iw ? info : LP_ENOMEM;
    free(f);
    free(fw);
    free(wk);
    free(iw);
    return r;
}

/* SVD of the m x n a (ld max(1, m); destroyed), k = min(m, n) > 0: s, and
 * for jobz "S"/"A" u (m x ucols, ld max(1, m)) and vt (vrows x n, ld
 * max(1, vrows)); jobz "N": u and vt unused. */
static int x_gesdd(em_dtype dt, const char *jobz, int m, int n, double *a, double *s, double *u, int ucols,
                   double *vt, int vrows) {
    int ldm = ld_of(m), ldu = ld_of(m), ldvt = ld_of(vrows), info = 0, lw = -1, k = m < n ? m : n;
    bool uv = jobz[0] != 'N';
    size_t sa = (size_t)ldm * (size_t)n, su = uv ? (size_t)ldu * (size_t)ucols : 1,
           sv = uv ? (size_t)ldvt * (size_t)n : 1;
    int *iw = malloc(sizeof(int) * (size_t)(8 * k + 1));
    double du[1] = { 0 }, dv[1] = { 0 };
    if (!uv) {
        u = du;
        vt = dv;
    }
    float *fa = NULL, *fs = NULL, *fu = NULL, *fv = NULL;
    void *wk = NULL;
    int r = LP_ENOMEM;
    if (!iw) return LP_ENOMEM;
    if (dt == EM_FLOAT64) {
        double q = 0;
        dgesdd_(jobz, &m, &n, a, &ldm, s, u, &ldu, vt, &ldvt, &q, &lw, iw, &info, 1);
        if ((wk = work_of(dt, q, 1, &lw))) {
            dgesdd_(jobz, &m, &n, a, &ldm, s, u, &ldu, vt, &ldvt, wk, &lw, iw, &info, 1);
            r = info;
        }
    } else {
        fa = to_f(a, sa);
        fs = to_f(s, (size_t)k);
        fu = to_f(u, su);
        fv = to_f(vt, sv);
        float q = 0;
        if (fa && fs && fu && fv) {
            sgesdd_(jobz, &m, &n, fa, &ldm, fs, fu, &ldu, fv, &ldvt, &q, &lw, iw, &info, 1);
            if ((wk = work_of(dt, q, 1, &lw))) {
                sgesdd_(jobz, &m, &n, fa, &ldm, fs, fu, &ldu, fv, &ldvt, wk, &lw, iw, &info, 1);
                from_f(s, fs, (size_t)k);
                if (uv) {
                    from_f(u, fu, su);
                    from_f(vt, fv, sv);
                }
                r = info;
            }
        }
    }
    free(fa); free(fs); free(fu); free(fv); free(wk); free(iw);
    return r;
}

/* Least squares by driver drv (0 gels, 1 gelsy, 2 gelsd, 3 gelss): a (m x n,
 * ld max(1, m)), b (max(m, n) x nrhs, ld ldb) overwritten by the solution in
 * its first n rows; s: min(m, n) singular values (gelsd/gelss); *rank. */
static int x_gels(em_dtype dt, int drv, int m, int n, int nrhs, double *a, double *b, int ldb, double rcond,
                  double *s, int *rank) {
    int lda = ld_of(m), info = 0, lw = -1, iq = 1, k = m < n ? m : n;
    size_t sa = (size_t)lda * (size_t)n, sb = (size_t)ldb * (size_t)nrhs;
    int *jpvt = calloc((size_t)n + 1, sizeof(int));
    if (!jpvt) return LP_ENOMEM;
    void *wk = NULL;
    int *iw = NULL, r = LP_ENOMEM;
    *rank = k;
    if (dt == EM_FLOAT64) {
        double q = 0;
        if (drv == 0) dgels_("N", &m, &n, &nrhs, a, &lda, b, &ldb, &q, &lw, &info, 1);
        else if (drv == 1) dgelsy_(&m, &n, &nrhs, a, &lda, b, &ldb, jpvt, &rcond, rank, &q, &lw, &info);
        else if (drv == 2) dgelsd_(&m, &n, &nrhs, a, &lda, b, &ldb, s, &rcond, rank, &q, &lw, &iq, &info);
        else dgelss_(&m, &n, &nrhs, a, &lda, b, &ldb, s, &rcond, rank, &q, &lw, &info);
        wk = work_of(dt, q, 1, &lw);
        iw = malloc(sizeof(int) * (size_t)(iq > 1 ? iq : 1));
        if (wk && iw) {
            if (drv == 0) dgels_("N", &m, &n, &nrhs, a, &lda, b, &ldb, wk, &lw, &info, 1);
            else if (drv == 1) dgelsy_(&m, &n, &nrhs, a, &lda, b, &ldb, jpvt, &rcond, rank, wk, &lw, &info);
            else if (drv == 2) dgelsd_(&m, &n, &nrhs, a, &lda, b, &ldb, s, &rcond, rank, wk, &lw, iw, &info);
            else dgelss_(&m, &n, &nrhs, a, &lda, b, &ldb, s, &rcond, rank, wk, &lw, &info);
            r = info;
        }
    } else {
        float *fa = to_f(a, sa), *fb = to_f(b, sb), *fs = to_f(s, (size_t)k), q = 0, rc = (float)rcond;
        if (fa && fb && fs) {
            if (drv == 0) sgels_("N", &m, &n, &nrhs, fa, &lda, fb, &ldb, &q, &lw, &info, 1);
            else if (drv == 1) sgelsy_(&m, &n, &nrhs, fa, &lda, fb, &ldb, jpvt, &rc, rank, &q, &lw, &info);
            else if (drv == 2) sgelsd_(&m, &n, &nrhs, fa, &lda, fb, &ldb, fs, &rc, rank, &q, &lw, &iq, &info);
            else sgelss_(&m, &n, &nrhs, fa, &lda, fb, &ldb, fs, &rc, rank, &q, &lw, &info);
            wk = work_of(dt, q, 1, &lw);
            iw = malloc(sizeof(int) * (size_t)(iq > 1 ? iq : 1));
            if (wk && iw) {
                if (drv == 0) sgels_("N", &m, &n, &nrhs, fa, &lda, fb, &ldb, wk, &lw, &info, 1);
                else if (drv == 1) sgelsy_(&m, &n, &nrhs, fa, &lda, fb, &ldb, jpvt, &rc, rank, wk, &lw, &info);
                else if (drv == 2) sgelsd_(&m, &n, &nrhs, fa, &lda, fb, &ldb, fs, &rc, rank, wk, &lw, iw, &info);
                else sgelss_(&m, &n, &nrhs, fa, &lda, fb, &ldb, fs, &rc, rank, wk, &lw, &info);
                from_f(b, fb, sb);
                from_f(s, fs, (size_t)k);
                r = info;
            }
        }
        free(fa); free(fb); free(fs);
    }
    free(jpvt); free(wk); free(iw);
    return r;
}

/* ---- LU: det, slogdet, inv ---- */

/* LU-factors the n x n column-major a in place; *sign: the permutation's
 * sign. Returns LAPACK's info (> 0: U[info-1][info-1] is exactly zero). */
static int lu(em_dtype dt, double *a, int n, int *ipiv, double *sign) {
    int info = x_getrf(dt, n, a, ipiv);
    *sign = 1.0;
    for (int i = 0; i < n && info != LP_ENOMEM; i++)
        if (ipiv[i] != i + 1) *sign = -*sign;
    return info;
}

/* det, or slogdet (want_log: the result is the sign, *logabsdet the log of
 * |det|; a singular matrix gives sign 0 and -inf). */
static em_tensor *det_common(em_tensor *A, bool want_log, em_tensor **logabsdet, const char *op) {
    if (!check_matrix(A, op, "A", true)) return NULL;
    batch_t bt = batch_of(A);
    int n = (int)A->sizes[A->ndim - 1], ld = ld_of(n);
    em_tensor *out = new_batched(&bt, 0, 0, 0, A->dtype);
    em_tensor *lad = want_log ? new_batched(&bt, 0, 0, 0, A->dtype) : NULL;
    double *a = dbuf((int64_t)n * n, op);
    int *ipiv = malloc(sizeof(int) * (size_t)(n + 1));
    if (!out || (want_log && !lad) || !a || !ipiv) {
        if (out && (!want_log || lad) && a) oom(op);
        goto fail;
    }
    for (int64_t b = 0; b < bt.count; b++) {
        get_mat(A, &bt, b, a, ld, false);
        double sign;
        if (lu(A->dtype, a, n, ipiv, &sign) == LP_ENOMEM) {
            oom(op);
            goto fail;
        }
        if (!want_log) {
            double d = sign;
            for (int i = 0; i < n; i++) d *= a[(size_t)i * (size_t)ld + (size_t)i];
            put_val(out, b, d);
        } else {
            double l = 0.0;
            for (int i = 0; i < n; i++) {
                double u = a[(size_t)i * (size_t)ld + (size_t)i];
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
    int n = (int)A->sizes[A->ndim - 1], ld = ld_of(n);
    em_tensor *out = new_colmajor(&bt, n, n, n, A->dtype);
    double *a = dbuf((int64_t)n * n, op), *x = dbuf((int64_t)n * n, op);
    int *ipiv = malloc(sizeof(int) * (size_t)(n + 1));
    if (!out || !a || !x || !ipiv) {
        if (out && a && x) oom(op);
        goto fail;
    }
    for (int64_t b = 0; b < bt.count && n > 0; b++) {
        get_mat(A, &bt, b, a, ld, false);
        double sign;
        int info = lu(A->dtype, a, n, ipiv, &sign);
        if (info > 0) {
            char pb[48];
            em_set_error(EM_EVALUE, "%s: %sThe diagonal element %d is zero, the inversion could not be completed "
                         "because the input matrix is singular.", op, batch_prefix(A, b, pb, sizeof pb), info);
            goto fail;
        }
        /* A^-1 = solve(A, I) from the factors (torch's route, not getri) */
        memset(x, 0, sizeof(double) * (size_t)n * (size_t)n);
        for (int i = 0; i < n; i++) x[(size_t)i * (size_t)ld + (size_t)i] = 1.0;
        if (info == LP_ENOMEM || x_getrs(A->dtype, "N", n, n, a, ipiv, x, ld) == LP_ENOMEM) {
            oom(op);
            goto fail;
        }
        put_mat(out, b, x, ld);
    }
    free(a);
    free(x);
    free(ipiv);
    return out;
fail:
    free(a);
    free(x);
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
 * the batch dims of A and B; B may be a vector (see vector_rhs) only for
 * A X = B, as in torch. */
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
    if (vec && !left) {
        em_set_error(EM_ESHAPE, "%s: vector broadcasting of the left hand side is not supported for left=false "
                     "(B %s is a vector for A %s); X A = B is then B / A", op,
                     em_shape_str(B->ndim, B->sizes, b1, sizeof b1), em_shape_str(A->ndim, A->sizes, b2, sizeof b2));
        return NULL;
    }
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
    /* torch's layouts: X column-major for A X = B; for X A = B the
     * transpose of a column-major X^T, i.e. row-major */
    em_tensor *out = left ? new_colmajor(&bt, n, k, n, A->dtype) : new_batched(&bt, 2, k, n, A->dtype);
    double *a = dbuf((int64_t)n * n, op), *x = dbuf((int64_t)ld * k, op);
    int *ipiv = malloc(sizeof(int) * (size_t)(n + 1));
    if (!out || !a || !x || !ipiv) {
        if (out && a && x) oom(op);
        goto fail;
    }
    for (int64_t b = 0; b < bt.count && n > 0 && k > 0; b++) {
        get_mat(A, &bt, b, a, ld, false);
        double sign;
        int info = lu(A->dtype, a, n, ipiv, &sign);
        if (info > 0) {
            char pb[48];
            em_set_error(EM_EVALUE, "%s: %sThe solver failed because the input matrix is singular.", op,
                         bt.nb > 0 ? batch_prefix(A->ndim > 2 ? A : Bm, b, pb, sizeof pb) : "");
            goto fail;
        }
        get_mat(Bm, &bt, b, x, ld, !left); /* n x k */
        if (info == LP_ENOMEM ||
            x_getrs(A->dtype, left ? "N" : "T", n, (int)k, a, ipiv, x, ld) == LP_ENOMEM) {
            oom(op);
            goto fail;
        }
        if (left) {
            put_mat(out, b, x, ld);
        } else { /* X^T (n x k) is in x: out holds X (k x n) */
            for (int64_t i = 0; i < k; i++)
                for (int64_t j = 0; j < n; j++) put_val(out, b * n * k + i * n + j, x[i * ld + j]);
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
    int n = (int)A->sizes[A->ndim - 1], ld = ld_of(n);
    em_tensor *out = new_colmajor(&bt, n, n, n, A->dtype);
    double *a = dbuf((int64_t)n * n, op);
    if (!out || !a) goto fail;
    for (int64_t b = 0; b < bt.count && n > 0; b++) {
        get_mat(A, &bt, b, a, ld, false);
        int info = x_potrf(A->dtype, upper ? "U" : "L", n, a);
        if (info == LP_ENOMEM) {
            oom(op);
            goto fail;
        }
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

em_tensor *em_cpu_qr(em_keyset ks, em_tensor *A, const char *mode, em_tensor **R) {
    (void)ks;
    const char *op = "linalg.qr";
    if (!check_matrix(A, op, "A", false)) return NULL;
    bool complete = strcmp(mode, "complete") == 0, want_q = strcmp(mode, "r") != 0;
    batch_t bt = batch_of(A);
    int m = (int)A->sizes[A->ndim - 2], n = (int)A->sizes[A->ndim - 1], k = m < n ? m : n;
    int ld = ld_of(m), qcols = complete ? m : k, rrows = complete ? m : k, lr = ld_of(rrows);
    em_tensor *Q = want_q ? new_colmajor(&bt, m, qcols, m, A->dtype)
                          : em_tensor_new(1, (int64_t[]){ 0 }, A->dtype, em_cpu_dev());
    em_tensor *Rt = new_colmajor(&bt, rrows, n, rrows, A->dtype);
    double *a = dbuf((int64_t)ld * n, op), *tau = dbuf(k, op), *q = dbuf((int64_t)ld * qcols, op);
    double *r = dbuf((int64_t)lr * n, op);
    if (!Q || !Rt || !a || !tau || !q || !r) goto fail;
    for (int64_t b = 0; b < bt.count; b++) {
        get_mat(A, &bt, b, a, ld, false);
        if (x_geqrf(A->dtype, m, n, a, tau) == LP_ENOMEM) goto nomem;
        for (int j = 0; j < n; j++)
            for (int i = 0; i < rrows; i++) r[j * lr + i] = i <= j && i < m ? a[j * ld + i] : 0.0;
        put_mat(Rt, b, r, lr);
        if (want_q) { /* the reflectors (first min(n, qcols) columns of a), then orgqr */
            int c = n < qcols ? n : qcols;
            memcpy(q, a, sizeof(double) * (size_t)ld * (size_t)c);
            if (qcols > c) memset(q + (size_t)ld * (size_t)c, 0, sizeof(double) * (size_t)ld * (size_t)(qcols - c));
            if (x_orgqr(A->dtype, m, qcols, k, q, tau) == LP_ENOMEM) goto nomem;
            put_mat(Q, b, q, ld);
        }
    }
    free(a); free(tau); free(q); free(r);
    *R = Rt;
    return Q;
nomem:
    oom(op);
fail:
    free(a); free(tau); free(q); free(r);
    em_tensor_release(Q);
    em_tensor_release(Rt);
    return NULL;
}

/* ---- eigh ---- */

/* Eigenvalues (ascending) and, when V is given, eigenvectors (columns). */
static em_tensor *eigh_common(em_tensor *A, const char *uplo, em_tensor **V, const char *op) {
    if (!check_matrix(A, op, "A", true)) return NULL;
    batch_t bt = batch_of(A);
    int n = (int)A->sizes[A->ndim - 1], ld = ld_of(n);
    em_tensor *L = new_batched(&bt, 1, n, 0, A->dtype);
    em_tensor *Vt = V ? new_colmajor(&bt, n, n, n, A->dtype) : NULL;
    double *a = dbuf((int64_t)n * n, op), *w = dbuf(n, op);
    if (!L || (V && !Vt) || !a || !w) goto fail;
    for (int64_t b = 0; b < bt.count && n > 0; b++) {
        get_mat(A, &bt, b, a, ld, false);
        int info = x_syevd(A->dtype, V ? "V" : "N", uplo, n, a, w);
        if (info == LP_ENOMEM) {
            oom(op);
            goto fail;
        }
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
    free(a); free(w);
    if (V) *V = Vt;
    return L;
fail:
    free(a); free(w);
    em_tensor_release(L);
    em_tensor_release(Vt);
    return NULL;
}

em_tensor *em_cpu_eigh(em_keyset ks, em_tensor *A, const char *UPLO, em_tensor **eigenvectors) {
    (void)ks;
    return eigh_common(A, UPLO, eigenvectors, "linalg.eigh");
}

/* ---- svd, svdvals, pinv, matrix_rank ---- */

/* The SVD of one m x n column-major matrix a (ld max(1, m); destroyed): s
 * (k = min(m, n) values, descending) and, jobz "S"/"A", u (m x ucols, ld
 * max(1, m)) and vt (vrows x n, ld max(1, vrows)). With k = 0 U and Vh are
 * the identities torch returns. A non-finite input is torch's error, a
 * failed iteration too (op and the batch prefix pb name it). */
static bool svd_one(em_dtype dt, const char *jobz, int m, int n, double *a, double *s, double *u, int ucols,
                    double *vt, int vrows, const char *op, const char *pb) {
    int k = m < n ? m : n;
    if (k == 0) {
        if (jobz[0] != 'N') {
            memset(u, 0, sizeof(double) * (size_t)ld_of(m) * (size_t)ucols);
            for (int i = 0; i < ucols && i < m; i++) u[i * ld_of(m) + i] = 1.0;
            memset(vt, 0, sizeof(double) * (size_t)ld_of(vrows) * (size_t)n);
            for (int i = 0; i < vrows && i < n; i++) vt[i * ld_of(vrows) + i] = 1.0;
        }
        return true;
    }
    for (int64_t i = 0; i < (int64_t)ld_of(m) * n; i++)
        if (!isfinite(a[i])) {
            em_set_error(EM_EVALUE, "%s: %sThe algorithm failed to converge because the input matrix contained "
                         "non-finite values.", op, pb);
            return false;
        }
    int info = x_gesdd(dt, jobz, m, n, a, s, u, ucols, vt, vrows);
    if (info == LP_ENOMEM) return oom(op);
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
    int m = (int)A->sizes[A->ndim - 2], n = (int)A->sizes[A->ndim - 1], k = m < n ? m : n;
    const char *jobz = !want_uv ? "N" : full ? "A" : "S";
    int ucols = full ? m : k, vrows = full ? n : k;
    em_tensor *U = NULL, *St = NULL, *Vt = NULL;
    double *a = dbuf((int64_t)ld_of(m) * n, op), *s = dbuf(k, op), *u = NULL, *vt = NULL;
    St = new_batched(&bt, 1, k, 0, A->dtype);
    if (want_uv) {
        U = new_colmajor(&bt, m, ucols, m, A->dtype);
        Vt = new_colmajor(&bt, vrows, n, vrows, A->dtype);
        u = dbuf((int64_t)ld_of(m) * ucols, op);
        vt = dbuf((int64_t)ld_of(vrows) * n, op);
    }
    if (!St || !a || !s || (want_uv && (!U || !Vt || !u || !vt))) goto fail;
    for (int64_t b = 0; b < bt.count; b++) {
        char pb[48];
        get_mat(A, &bt, b, a, ld_of(m), false);
        if (!svd_one(A->dtype, jobz, m, n, a, s, u, ucols, vt, vrows, op, batch_prefix(A, b, pb, sizeof pb)))
            goto fail;
        for (int i = 0; i < k; i++) put_val(St, b * k + i, s[i]);
        if (want_uv) {
            put_mat(U, b, u, ld_of(m));
            put_mat(Vt, b, vt, ld_of(vrows));
        }
    }
    free(a); free(s); free(u); free(vt);
    if (!want_uv) return St;
    *S = St;
    *Vh = Vt;
    return U;
fail:
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

/* torch's tolerances for pinv and matrix_rank: rtol defaults to
 * eps(dtype) * max(m, n) when neither is given, to 0 when only atol is. */
static void tolerances(const em_tensor *A, const em_scalar *atol, const em_scalar *rtol, double *at,
                       double *rt) {
    int64_t m = A->sizes[A->ndim - 2], n = A->sizes[A->ndim - 1];
    double eps = A->dtype == EM_FLOAT32 ? (double)FLT_EPSILON : DBL_EPSILON;
    *at = atol ? em_scalar_to_double(*atol) : 0.0;
    *rt = rtol ? em_scalar_to_double(*rtol) : atol ? 0.0 : eps * (double)(m > n ? m : n);
}

/* P (n x m, column-major, ld n) = Vh^T diag(1/s_i where |s_i| > tol, else 0)
 * U^T from u (m x k, ld ldu) and vt (k x n, ld ldv), in float for float32
 * (as torch: the scaled Vh^T, then one gemm). false: out of memory. */
static bool pinv_product(em_dtype dt, int m, int n, int k, const double *u, int ldu, const double *vt, int ldv,
                         const double *s, double tol, double *p) {
    size_t np = (size_t)n * (size_t)m;
    if (n == 0 || m == 0) return true;
    if (k == 0) {
        memset(p, 0, sizeof(double) * np);
        return true;
    }
    if (dt == EM_FLOAT64) {
        double *w = malloc(sizeof(double) * (size_t)n * (size_t)k);
        if (!w) return false;
        for (int i = 0; i < k; i++) {
            double si = fabs(s[i]) > tol ? 1.0 / s[i] : 0.0;
            for (int r = 0; r < n; r++) w[(size_t)i * n + r] = vt[(size_t)r * ldv + i] * si;
        }
        cblas_dgemm(CblasColMajor, CblasNoTrans, CblasTrans, n, m, k, 1.0, w, n, u, ldu, 0.0, p, n);
        free(w);
        return true;
    }
    float *w = malloc(sizeof(float) * (size_t)n * (size_t)k), *fu = to_f(u, (size_t)ldu * (size_t)k);
    float *fp = malloc(sizeof(float) * np);
    bool ok = w && fu && fp;
    if (ok) {
        for (int i = 0; i < k; i++) {
            float si = fabs(s[i]) > tol ? 1.0f / (float)s[i] : 0.0f;
            for (int r = 0; r < n; r++) w[(size_t)i * n + r] = (float)vt[(size_t)r * ldv + i] * si;
        }
        cblas_sgemm(CblasColMajor, CblasNoTrans, CblasTrans, n, m, k, 1.0f, w, n, fu, ldu, 0.0f, fp, n);
        from_f(p, fp, np);
    }
    free(w);
    free(fu);
    free(fp);
    return ok;
}

/* pinv = V diag(1/s where s > max(atol, rtol * s_max), else 0) U^T from the
 * SVD (or, hermitian, from eigh: V diag(1/l) V^T with |l| for s). */
em_tensor *em_cpu_pinv(em_keyset ks, em_tensor *A, const em_scalar *atol, const em_scalar *rtol, bool hermitian) {
    (void)ks;
    const char *op = "linalg.pinv";
    if (!check_matrix(A, op, "A", hermitian)) return NULL;
    batch_t bt = batch_of(A);
    int m = (int)A->sizes[A->ndim - 2], n = (int)A->sizes[A->ndim - 1], k = m < n ? m : n;
    int ldu = ld_of(m), ldv = ld_of(k);
    double at, rt;
    tolerances(A, atol, rtol, &at, &rt);
    em_tensor *out = new_batched(&bt, 2, n, m, A->dtype);
    double *a = dbuf((int64_t)ldu * n, op), *s = dbuf(k, op), *u = dbuf((int64_t)ldu * k, op);
    double *vt = dbuf((int64_t)ldv * n, op), *p = dbuf((int64_t)n * m, op);
    em_tensor *L = NULL, *V = NULL;
    if (!out || !a || !s || !u || !vt || !p) goto fail;
    if (hermitian) { /* eigh of the whole batch (lower triangle, as torch) */
        L = eigh_common(A, "L", &V, op);
        if (!L) goto fail;
    }
    for (int64_t b = 0; b < bt.count; b++) {
        if (hermitian) { /* u = V, vt = V^T, s = l (signed) */
            for (int i = 0; i < n; i++)
                s[i] = em_load_as_double((char *)em_tensor_data(L) + (size_t)(b * n + i) * em_dtype_size(L->dtype),
                                         L->dtype);
            get_mat(V, &bt, b, u, ldu, false);
            get_mat(V, &bt, b, vt, ldv, true);
        } else {
            char pb[48];
            get_mat(A, &bt, b, a, ldu, false);
            if (!svd_one(A->dtype, "S", m, n, a, s, u, k, vt, k, op, batch_prefix(A, b, pb, sizeof pb))) goto fail;
        }
        double smax = 0;
        for (int i = 0; i < k; i++) smax = fabs(s[i]) > smax ? fabs(s[i]) : smax;
        double tol = at > rt * smax ? at : rt * smax;
        /* torch's arithmetic: W = Vh^T diag(s+) (n x k), then P = W U^T by
         * gemm, in the input's precision */
        if (!pinv_product(A->dtype, m, n, k, u, ldu, vt, ldv, s, tol, p)) {
            oom(op);
            goto fail;
        }
        put_mat(out, b, p, n > 0 ? n : 1);
    }
    free(a); free(s); free(u); free(vt); free(p);
    em_tensor_release(L);
    em_tensor_release(V);
    return out;
fail:
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
    (void)ks;
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
    int64_t k = s->sizes[s->ndim - 1];
    size_t es = em_dtype_size(s->dtype);
    const char *sd = em_tensor_data(s);
    for (int64_t b = 0; b < bt.count; b++) {
        double smax = 0;
        for (int64_t i = 0; i < k; i++) {
            double v = fabs(em_load_as_double(sd + (size_t)(b * k + i) * es, s->dtype));
            smax = v > smax ? v : smax;
        }
        double tol = at > rt * smax ? at : rt * smax;
        int64_t r = 0;
        for (int64_t i = 0; i < k; i++) r += fabs(em_load_as_double(sd + (size_t)(b * k + i) * es, s->dtype)) > tol;
        ((int64_t *)em_tensor_data(out))[b] = r;
    }
    em_tensor_release(s);
    return out;
}

/* ---- lstsq ---- */

/* min ||A X - B|| per matrix with LAPACK's driver (torch's: gels, gelsy
 * (default), gelsd, gelss). Results as torch: solution (n x k, or n for a
 * vector b: one dim fewer than A); residuals (squared column norms of
 * A X - B, shape (..., k)) only when m > n, every A has full rank and the
 * driver is not gelsy, else empty; rank (int64, per matrix) except for gels
 * (empty); singular_values for gelsd/gelss, else empty. */
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
    if (b->ndim > A->ndim || b->ndim < A->ndim - 1) {
        em_set_error(EM_ESHAPE, "%s: self %s and b %s: self.dim() must be greater or equal to b.dim() and "
                     "(self.dim() - b.dim()) <= 1", op, em_shape_str(A->ndim, A->sizes, b1, sizeof b1),
                     em_shape_str(b->ndim, b->sizes, b2, sizeof b2));
        return NULL;
    }
    em_tensor *Bm = vec ? em_core_unsqueeze(b, b->ndim) : em_tensor_retain(b);
    if (!Bm) return NULL;
    int m = (int)A->sizes[A->ndim - 2], n = (int)A->sizes[A->ndim - 1];
    if (Bm->ndim < 2 || Bm->sizes[Bm->ndim - 2] != m) {
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
    int k = (int)k64, mn = m > n ? m : n, kk = m < n ? m : n, ldb = ld_of(mn);
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
    em_tensor *X = vec ? new_batched(&bt, 1, n, 0, A->dtype) : new_colmajor(&bt, n, k, mn, A->dtype);
    em_tensor *rk = drv == 0 ? em_tensor_new(1, (int64_t[]){ 0 }, EM_INT64, em_cpu_dev())
                             : new_batched(&bt, 0, 0, 0, EM_INT64);
    em_tensor *sv = drv >= 2 ? new_batched(&bt, 1, kk, 0, A->dtype)
                             : em_tensor_new(1, (int64_t[]){ 0 }, A->dtype, em_cpu_dev());
    em_tensor *res = NULL;
    double *a = dbuf((int64_t)ld_of(m) * n, op), *x = dbuf((int64_t)ldb * k, op), *s = dbuf(kk, op);
    double *rs = dbuf((int64_t)bt.count * k, op);
    bool full_rank = true;
    if (!X || !rk || !sv || !a || !x || !s || !rs) goto fail;
    for (int64_t bi = 0; bi < bt.count; bi++) {
        get_mat(A, &bt, bi, a, ld_of(m), false);
        memset(x, 0, sizeof(double) * (size_t)ldb * (size_t)k); /* x holds ldb * k (nothing when k = 0) */
        get_mat(Bm, &bt, bi, x, ldb, false); /* m x k into the top of the max(m, n) x k buffer */
        int rnk = 0;
        if (kk > 0 && k > 0) {
            int info = x_gels(A->dtype, drv, m, n, k, a, x, ldb, rc, s, &rnk);
            if (info == LP_ENOMEM) {
                oom(op);
                goto fail;
            }
            if (info > 0) {
                char pb[48];
                const char *p = batch_prefix(A->ndim > 2 ? A : Bm, bi, pb, sizeof pb);
                if (drv == 0)
                    em_set_error(EM_EVALUE, "%s: %sThe least squares solution could not be computed because the "
                                 "input matrix does not have full rank (error code: %d).", op, p, info);
                else
                    em_set_error(EM_EVALUE, "%s: %sThe algorithm failed to converge (error code: %d).", op, p, info);
                goto fail;
            }
        } else if (kk > 0 && drv >= 1) { /* no right-hand sides: the rank still comes from the matrix */
            double xx[1] = { 0 };
            double *a2 = dbuf((int64_t)ld_of(m) * n, op);
            if (!a2) goto fail;
            memcpy(a2, a, sizeof(double) * (size_t)ld_of(m) * (size_t)n);
            int info = x_gels(A->dtype, drv, m, n, 0, a2, xx, ldb, rc, s, &rnk);
            free(a2);
            if (info == LP_ENOMEM) {
                oom(op);
                goto fail;
            }
        }
        if (drv == 0) rnk = kk;
        if (rnk < n) full_rank = false;
        /* the solution: the first n rows (zero without equations or unknowns;
         * new_colmajor zeroed X) */
        if (vec)
            for (int r = 0; r < n; r++) put_val(X, bi * n + r, kk > 0 ? x[r] : 0.0);
        else if (kk > 0)
            put_mat(X, bi, x, ldb);
        for (int c = 0; c < k; c++) { /* residuals: squared norms of rows n..m-1 (torch: 0 for gels on an
                                         * empty matrix) */
            double acc = 0;
            for (int r = n; r < m && (kk > 0 || drv != 0); r++) acc += x[c * ldb + r] * x[c * ldb + r];
            rs[bi * k + c] = acc;
        }
        if (drv != 0) put_val(rk, bi, rnk);
        if (drv >= 2)
            for (int i = 0; i < kk; i++) put_val(sv, bi * kk + i, s[i]);
    }
    if (m > n && drv != 1 && full_rank) { /* an empty batch too: (0, k), as torch */
        res = new_batched(&bt, 1, k, 0, A->dtype); /* (k) also for a vector b, as torch */
        if (!res) goto fail;
        for (int64_t e = 0; e < bt.count * k; e++) put_val(res, e, rs[e]);
    } else {
        res = em_tensor_new(1, (int64_t[]){ 0 }, A->dtype, em_cpu_dev());
        if (!res) goto fail;
    }
    free(a); free(x); free(s); free(rs);
    em_tensor_release(Bm);
    *residuals = res;
    *rank = rk;
    *singular_values = sv;
    return X;
fail:
    free(a); free(x); free(s); free(rs);
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
