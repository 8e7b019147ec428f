/* linalg.c -- mm and matmul: OpenBLAS for float32/float64, float32 for
 * half types, a plain loop for integers.
 *
 * Operands are described as matrices (data, rows, cols, element strides).
 * A matrix that is row-major with unit column stride goes to BLAS as is;
 * one that is column-major (a transpose) goes as CblasTrans; anything else
 * is copied to a contiguous buffer first. The output is always a new
 * contiguous tensor written by gemm with beta = 0 (no zero-fill).
 * Long products stop at an interrupt (Note [Stoppable products]).
 */
#include "kernels/cpu/em_cpu.h"

#include <cblas.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>

/* ---- matrices ---- */

typedef struct {
    const char *data; /* first element */
    int64_t r, c;     /* rows, cols */
    int64_t s0, s1;   /* element strides of rows and cols */
} mat_t;

static mat_t mat_of(const em_tensor *t) {
    mat_t m = { em_tensor_data(t), t->sizes[0], t->sizes[1], t->strides[0], t->strides[1] };
    return m;
}

/* Can m go to BLAS directly? Sets *trans and *ld. */
static bool blas_layout(const mat_t *m, bool *trans, int64_t *ld) {
    int64_t c1 = m->c > 1 ? m->c : 1, r1 = m->r > 1 ? m->r : 1;
    if ((m->c == 1 || m->s1 == 1) && (m->r == 1 || m->s0 >= c1)) {
        *trans = false;
        *ld = m->r == 1 ? c1 : m->s0;
        return *ld <= INT_MAX;
    }
    if ((m->r == 1 || m->s0 == 1) && (m->c == 1 || m->s1 >= r1)) {
        *trans = true;
        *ld = m->c == 1 ? r1 : m->s1;
        return *ld <= INT_MAX;
    }
    return false;
}

/* A contiguous float32/float64 copy of m (malloc'd), converting from dt;
 * to: EM_FLOAT32 or EM_FLOAT64. */
static void *dense_copy(const mat_t *m, em_dtype dt, em_dtype to) {
    size_t es = em_dtype_size(dt), os = em_dtype_size(to);
    char *buf = malloc((size_t)(m->r * m->c) * os + 1);
    if (!buf) return NULL;
    for (int64_t i = 0; i < m->r; i++)
        for (int64_t j = 0; j < m->c; j++) {
            const char *src = m->data + (size_t)((i * m->s0 + j * m->s1) * (int64_t)es);
            char *dst = buf + (size_t)(i * m->c + j) * os;
            if (dt == to) memcpy(dst, src, es);
            else em_store_from_double(dst, to, em_load_as_double(src, dt));
        }
    return buf;
}

/* Note [Small gemms on one thread]: OpenBLAS 0.3.21 splits every product
 * above 256K multiply-adds over its threads, which then spin in
 * sched_yield for about 0.1 s waiting for more work, on the cores the
 * intra-op pool's workers need next (DESIGN decision 9). A product below
 * GEMM_ONE_THREAD_MACS gains little from two threads (a CNN's classifier,
 * 64x1568 by 1568x10, is 1M) but woke them for a whole training step:
 * it runs with OpenBLAS set to one thread, set back to ember's count
 * after (pool.c keeps the two equal otherwise; conv.c does the same around
 * its sample-parallel products, Note [Sample-parallel products]). */
#define GEMM_ONE_THREAD_MACS ((double)(1 << 22))

/* Note [Stoppable products]
 * One BLAS call cannot be stopped, so a product of at least
 * GEMM_STOP_MACS multiply-adds runs as panels of about GEMM_PANEL_MACS
 * each (rows of C, or its columns when it has fewer rows than columns)
 * with a stop point (Note [Interrupts in kernels], way (b)) before each:
 * Ctrl-C then waits for one panel (a few ms) instead of the whole
 * product. The panels are fixed by the shape, so a product always gives
 * the same bits; they may differ from one whole BLAS call in the last
 * float32 bit (OpenBLAS's sgemm kernels for a panel are not those of the
 * whole; float64 matched in every shape tried), as two BLAS builds do.
 * Panels of >= 128M multiply-adds and >= 64 rows keep BLAS at full speed
 * (the 1024^3 product measured the same either way). The half types'
 * float32 product and the integer loop stop the same way. Only callers
 * that own the output pass an op name (mm, functional matmul, bmm, mv,
 * cdist); matmul's out= passes none and always finishes, so its target is
 * never half-written. gemm then returns EM_EINTERRUPT with "op:
 * interrupted", and the caller frees its output. */
#define GEMM_STOP_MACS ((double)(1 << 28))
#define GEMM_PANEL_MACS ((double)(1 << 27))

/* The panel length along a dimension of n (rows or cols), the other two
 * sizes multiplying to other: n itself for a short product or no op. */
static int64_t panel_len(int64_t n, double other, const char *op) {
    if (!op || (double)n * other < GEMM_STOP_MACS) return n;
    int64_t p = (int64_t)(GEMM_PANEL_MACS / other);
    p = p < 64 ? 64 : (p + 63) / 64 * 64;
    return p < n ? p : n;
}

/* C (r x c, contiguous, ldc = c) = A x B in float32/float64 via BLAS;
 * with op set, in panels with stop points (Note [Stoppable products]). */
static em_status gemm_float(em_dtype dt, mat_t a, mat_t b, char *c, const char *op) {
    int64_t M = a.r, K = a.c, N = b.c;
    size_t es = em_dtype_size(dt);
    if (M == 0 || N == 0) return EM_OK;
    if (K == 0) { memset(c, 0, (size_t)(M * N) * es); return EM_OK; }
    if (M > INT_MAX || N > INT_MAX || K > INT_MAX) {
        em_set_error(EM_EVALUE, "mm: sizes too large for BLAS");
        return EM_EVALUE;
    }
    bool ta, tb;
    int64_t lda, ldb;
    void *fa = NULL, *fb = NULL;
    if (!blas_layout(&a, &ta, &lda)) {
        if (!(fa = dense_copy(&a, dt, dt))) goto oom;
        a.data = fa; a.s0 = K; a.s1 = 1;
        ta = false; lda = K;
    }
    if (!blas_layout(&b, &tb, &ldb)) {
        if (!(fb = dense_copy(&b, dt, dt))) goto oom;
        b.data = fb; b.s0 = N; b.s1 = 1;
        tb = false; ldb = N;
    }
    double macs = (double)M * (double)N * (double)K; /* OpenBLAS runs <= 256K on one thread itself */
    bool one = macs > 262144.0 && macs < GEMM_ONE_THREAD_MACS && em_get_num_threads() > 1;
    if (one) openblas_set_num_threads(1);
    /* panels along C's longer side (one panel: the whole product) */
    bool by_rows = M >= N;
    int64_t len = by_rows ? panel_len(M, (double)N * (double)K, op) : panel_len(N, (double)M * (double)K, op);
    int64_t total = by_rows ? M : N;
    em_status st = EM_OK;
    for (int64_t p0 = 0; p0 < total; p0 += len) {
        if (len < total && em_cpu_interrupted(op)) {
            st = EM_EINTERRUPT;
            break;
        }
        int64_t n = total - p0 < len ? total - p0 : len;
        int64_t m = by_rows ? n : M, nn = by_rows ? N : n;
        /* the panel's first element of A (rows p0..) or B (cols p0..) and of C */
        const char *pa = a.data, *pb = b.data;
        if (by_rows) pa += (size_t)(p0 * (ta ? 1 : lda)) * es;
        else pb += (size_t)(p0 * (tb ? ldb : 1)) * es;
        char *pc = c + (size_t)(by_rows ? p0 * N : p0) * es;
        if (dt == EM_FLOAT32)
            cblas_sgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans,
                        (int)m, (int)nn, (int)K, 1.0f, (const float *)pa, (int)lda,
                        (const float *)pb, (int)ldb, 0.0f, (float *)pc, (int)N);
        else
            cblas_dgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans,
                        (int)m, (int)nn, (int)K, 1.0, (const double *)pa, (int)lda,
                        (const double *)pb, (int)ldb, 0.0, (double *)pc, (int)N);
    }
    if (one) openblas_set_num_threads(em_get_num_threads());
    free(fa);
    free(fb);
    return st;
oom:
    free(fa);
    free(fb);
    return em_set_error(EM_ENOMEM, "mm: out of memory");
}

/* C = A x B for any supported dtype; c is contiguous M x N of dtype dt.
 * op: the name an interrupt reports, or NULL for a product that always
 * finishes (Note [Stoppable products]). */
static em_status gemm(em_dtype dt, mat_t a, mat_t b, char *c, const char *op) {
    int64_t M = a.r, K = a.c, N = b.c;
    if (dt == EM_FLOAT32 || dt == EM_FLOAT64) return gemm_float(dt, a, b, c, op);
    if (dt == EM_FLOAT16 || dt == EM_BFLOAT16) {
        float *fa = dense_copy(&a, dt, EM_FLOAT32), *fb = dense_copy(&b, dt, EM_FLOAT32);
        float *fc = malloc((size_t)(M * N) * sizeof(float) + 1);
        em_status st = EM_OK;
        if (!fa || !fb || !fc) {
            st = em_set_error(EM_ENOMEM, "mm: out of memory");
        } else {
            mat_t a2 = { (const char *)fa, M, K, K, 1 }, b2 = { (const char *)fb, K, N, N, 1 };
            st = gemm_float(EM_FLOAT32, a2, b2, (char *)fc, op);
            for (int64_t i = 0; st == EM_OK && i < M * N; i++)
                em_store_from_double(c + (size_t)i * 2, dt, fc[i]);
        }
        free(fa);
        free(fb);
        free(fc);
        return st;
    }
    /* integers: wrap-around arithmetic in uint64 */
    size_t es = em_dtype_size(dt);
    uint64_t *row = malloc((size_t)N * sizeof(uint64_t) + 1);
    if (!row) return em_set_error(EM_ENOMEM, "mm: out of memory");
    /* a stop point every `every` rows (about 4M multiply-adds, a few ms) of
     * a product of at least 16M */
    int64_t every = M;
    if (op && (double)M * (double)N * (double)K >= GEMM_STOP_MACS / 16) {
        double rows = GEMM_PANEL_MACS / 32 / ((double)N * (double)K);
        every = rows < 1 ? 1 : (int64_t)rows;
    }
    for (int64_t i = 0; i < M; i++) {
        if (every < M && i % every == 0 && i && em_cpu_interrupted(op)) {
            free(row);
            return EM_EINTERRUPT;
        }
        memset(row, 0, (size_t)N * sizeof(uint64_t));
        for (int64_t k = 0; k < K; k++) {
            uint64_t av = (uint64_t)em_load_as_int64(a.data + (size_t)((i * a.s0 + k * a.s1) * (int64_t)es), dt);
            if (av == 0) continue;
            for (int64_t j = 0; j < N; j++)
                row[j] += av * (uint64_t)em_load_as_int64(b.data + (size_t)((k * b.s0 + j * b.s1) * (int64_t)es), dt);
        }
        for (int64_t j = 0; j < N; j++) em_store_from_int64(c + (size_t)(i * N + j) * es, dt, (int64_t)row[j]);
    }
    free(row);
    return EM_OK;
}

/* ---- checks ---- */

static bool check_dtypes(const em_tensor *a, const em_tensor *b, const char *op) {
    if (a->dtype != b->dtype) {
        em_set_error(EM_ETYPE, "%s: expected both tensors to have the same dtype, got %s and %s", op,
                     em_dtype_name(a->dtype), em_dtype_name(b->dtype));
        return false;
    }
    return true;
}

/* PyTorch has no bool matrix product, but returns the (empty or, for an
 * inner size of 0, all-false) result without running one. Returns that result, or NULL
 * with the error set when a product would have to run. */
static em_tensor *bool_product(int ndim, const int64_t *sizes, int64_t k, bool dot, const char *op) {
    int64_t n = 1;
    for (int d = 0; d < ndim; d++) n *= sizes[d];
    if (dot || (n != 0 && k != 0)) {
        em_set_error(EM_ETYPE, "%s: not supported for dtype bool", op);
        return NULL;
    }
    em_tensor *out = em_tensor_new(ndim, sizes, EM_BOOL, em_cpu_dev());
    if (out && out->numel) memset(em_tensor_data(out), 0, (size_t)out->numel);
    return out;
}

static void shape_error(const em_tensor *a, const em_tensor *b, int64_t k1, int64_t k2, const char *op) {
    char b1[EM_SHAPE_STR_MAX], b2[EM_SHAPE_STR_MAX];
    em_set_error(EM_ESHAPE, "%s: shapes %s and %s cannot be multiplied (%lld != %lld)", op,
                 em_shape_str(a->ndim, a->sizes, b1, sizeof b1), em_shape_str(b->ndim, b->sizes, b2, sizeof b2),
                 (long long)k1, (long long)k2);
}

/* ---- kernels ---- */

em_tensor *em_cpu_mm(em_keyset ks, em_tensor *self, em_tensor *mat2) {
    (void)ks;
    if (self->ndim != 2 || mat2->ndim != 2) {
        em_set_error(EM_ESHAPE, "mm: expected 2-d tensors, got %d-d and %d-d", self->ndim, mat2->ndim);
        return NULL;
    }
    if (!check_dtypes(self, mat2, "mm")) return NULL;
    if (self->sizes[1] != mat2->sizes[0]) {
        shape_error(self, mat2, self->sizes[1], mat2->sizes[0], "mm");
        return NULL;
    }
    int64_t sz[2] = { self->sizes[0], mat2->sizes[1] };
    if (self->dtype == EM_BOOL) return bool_product(2, sz, self->sizes[1], false, "mm");
    em_tensor *out = em_tensor_new(2, sz, self->dtype, em_cpu_dev());
    if (!out) return NULL;
    if (gemm(self->dtype, mat_of(self), mat_of(mat2), em_tensor_data(out), "mm") != EM_OK) {
        em_tensor_release(out);
        return NULL;
    }
    return out;
}

/* The structured impl of matmul: em_meta_matmul (kernels/meta.c) checked
 * the dtypes and shapes and refused bool products that would have to run.
 * The product goes straight into out when out is contiguous, of the
 * operands' dtype and shares no memory with them; else into a temporary
 * that is then copied (cast) into out. */
em_status em_cpu_matmul_impl(em_keyset ks, const em_meta *m, em_tensor *self, em_tensor *other, em_tensor *out) {
    (void)ks;
    const em_tensor *a = self, *b = other;
    int da = a->ndim, db = b->ndim;
    if (a->dtype == EM_BOOL) { /* meta let through only products with nothing to sum */
        em_tensor *z = bool_product(m->ndim, m->sizes, da ? a->sizes[da - 1] : 0, false, m->op);
        em_status st = z ? em_cpu_copy_into(out, z, m->op) : em_error_kind();
        em_tensor_release(z);
        return st;
    }
    if (!out->is_contiguous || out->dtype != a->dtype || out->storage == a->storage ||
        out->storage == b->storage) {
        em_tensor *tmp = em_tensor_new(m->ndim, m->sizes, a->dtype, out->device);
        if (!tmp) return em_error_kind();
        em_meta mt = *m; /* tmp is ours: an interrupt leaves out as it was */
        mt.out_is_new = true;
        em_status st = em_cpu_matmul_impl(ks, &mt, self, other, tmp);
        if (st == EM_OK) st = em_cpu_copy_into(out, tmp, m->op);
        em_tensor_release(tmp);
        return st;
    }
    int64_t M = da >= 2 ? a->sizes[da - 2] : 1, K = a->sizes[da - 1];
    int64_t N = db >= 2 ? b->sizes[db - 1] : 1;
    int64_t a_s0 = da >= 2 ? a->strides[da - 2] : K, a_s1 = a->strides[da - 1];
    int64_t b_s0 = db >= 2 ? b->strides[db - 2] : b->strides[0], b_s1 = db >= 2 ? b->strides[db - 1] : 1;
    int nba = da > 2 ? da - 2 : 0, nbb = db > 2 ? db - 2 : 0;
    int64_t bshape[EM_MAX_DIMS];
    int nb = em_broadcast_shapes(nba, a->sizes, nbb, b->sizes, bshape, m->op);
    if (nb < 0) return em_error_kind();
    size_t es = em_dtype_size(a->dtype);
    char *c = em_tensor_data(out);
    em_status st = EM_OK;
    /* only a result this call allocated may be left half-written (Note [Stoppable products]) */
    const char *stop = m->out_is_new ? m->op : NULL;
    if (nb == 0 || (nbb == 0 && a->is_contiguous)) {
        /* one gemm: a's batch dims fold into its rows */
        int64_t rows = nb == 0 ? M : a->numel / (K ? K : 1);
        if (K == 0) rows = out->numel / (N ? N : 1);
        mat_t ma = { em_tensor_data(a), rows, K, nb == 0 ? a_s0 : K, nb == 0 ? a_s1 : 1 };
        mat_t mb = { em_tensor_data(b), K, N, b_s0, b_s1 };
        st = gemm(a->dtype, ma, mb, c, stop);
    } else {
        /* per batch: strides of a and b over the broadcast batch shape */
        int64_t ast[EM_MAX_DIMS], bst[EM_MAX_DIMS];
        for (int d = 0; d < nb; d++) {
            int ia = d - (nb - nba), ib = d - (nb - nbb);
            ast[d] = ia >= 0 && a->sizes[ia] != 1 ? a->strides[ia] : 0;
            bst[d] = ib >= 0 && b->sizes[ib] != 1 ? b->strides[ib] : 0;
        }
        int64_t nbatch = 1;
        for (int d = 0; d < nb; d++) nbatch *= bshape[d];
        for (int64_t i = 0; i < nbatch && st == EM_OK; i++) {
            int64_t lin = i, oa = 0, ob = 0;
            for (int d = nb - 1; d >= 0; d--) {
                int64_t ix = lin % bshape[d];
                lin /= bshape[d];
                oa += ix * ast[d];
                ob += ix * bst[d];
            }
            mat_t ma = { (const char *)em_tensor_data(a) + oa * (int64_t)es, M, K, a_s0, a_s1 };
            mat_t mb = { (const char *)em_tensor_data(b) + ob * (int64_t)es, K, N, b_s0, b_s1 };
            if (stop && i && em_cpu_interrupted(stop)) st = EM_EINTERRUPT;
            else st = gemm(a->dtype, ma, mb, c + (size_t)(i * M * N) * es, stop);
        }
    }
    return st;
}

/* ---- shared with the linalg family (products.c) ---- */

/* See em_cpu.h (family linalg). */
em_status em_cpu_gemm(em_dtype dt, const char *a, int64_t M, int64_t K, int64_t as0, int64_t as1,
                      const char *b, int64_t N, int64_t bs0, int64_t bs1, char *c, const char *op) {
    mat_t ma = { a, M, K, as0, as1 }, mb = { b, K, N, bs0, bs1 };
    return gemm(dt, ma, mb, c, op);
}
