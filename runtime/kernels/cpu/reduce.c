/* reduce.c -- the reduction framework: one plan and three parallel
 * strategies for every fold (sum, prod, max, min, sums of squares, ...);
 * the kernels built on it are in reduce_ops.c.
 *
 * Note [Reduction framework]
 * A reduction folds the elements of each output position with one
 * associative operation (EM_CPU_R_SUM, EM_CPU_R_PROD, EM_CPU_R_MAX, ...; see
 * em_cpu_rop in reduce_int.h) after an optional element map (square, |x|, |x|^p,
 * (x - mean)^2, x != 0). em_cpu_reduce_run():
 *   1. makes the input contiguous in the source dtype S (float32, float64,
 *      int64, or uint8 for bool folds), chosen by the kernel;
 *   2. merges adjacent dims that are both reduced or both kept (size-1 dims
 *      dropped), so the innermost group is either reduced ("runs": each
 *      output folds contiguous runs) or kept ("columns": a block of COLS
 *      adjacent outputs folds whole rows elementwise);
 *   3. picks a strategy:
 *        runs, many outputs    parallel over outputs (each folds its runs)
 *        runs, few outputs     each run cut into a fixed number of parts,
 *                              parallel over (output, part), parts folded
 *                              in order ("over the reduced dim")
 *        columns, many blocks  parallel over (outer position, column block)
 *        columns, few blocks   blocks widened to WIDE columns (whole rows,
 *                              read sequentially), the rows cut into fixed
 *                              parts, parallel over (block, part), partial
 *                              columns folded in order ("over the reduced dim")
 *   4. leaves one accumulator per output (double for S float, int64
 *      otherwise) in a contiguous buffer shaped like the output; the kernel
 *      finishes it (divide, sqrt, ...) and casts it into the result.
 * Determinism: the cuts (BLOCK, lanes, parts, column blocks) depend only on
 * the shape, never on the thread count, and partial results are folded in
 * a fixed order, so 1 and 2 threads give the same bits.
 * Vectorisation: a run is folded in LANES independent lanes of the compute
 * type (float for float32, folded into double every BLOCK elements), which
 * the compiler turns into SIMD; NaN is sticky in max/min lanes. Columns fold
 * eight rows at a time per column (in float for float32 sums, in double for
 * max-like folds), then into the column's accumulator.
 */
/* O3 vectorizes the loops; no-trapping-math lets selects (clamps, relu,
 * comparisons) be if-converted; no-math-errno lets sqrt vectorize. None
 * changes a computed value (only errno and FP exception flags). */
#pragma GCC optimize("O3", "no-trapping-math", "no-math-errno")
#include "kernels/cpu/reduce_int.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* ---- element maps and folds ---- */

#define EL_ID(x) (x)
#define EL_SQ(x) ((x) * (x))
#define EL_DEV(x) (((x) - mu) * ((x) - mu))
#define EL_ABS(x) _Generic((x), float: fabsf, default: fabs)(x)
#define EL_POW(x) _Generic((x), float: powf, default: pow)(EL_ABS(x), p)
#define EL_NZ(x) ((x) != 0 ? 1 : 0)
#define C_ADD(a, b) ((a) + (b))
#define C_MUL(a, b) ((a) * (b))
/* b is the new value: NaN wins and stays (NaN > a is false, a != a keeps it) */
#define C_MAX(a, b) ((((b) > (a)) | ((b) != (b))) ? (b) : (a))
#define C_MIN(a, b) ((((b) < (a)) | ((b) != (b))) ? (b) : (a))

#define BLOCK 4096
#define COLS 2048
#define WIDE 16384 /* columns of a split column block */

/* run: fold n contiguous elements: LANES lanes of LT, refolded into AT every
 * BLK elements. cols: fold nrows rows (rs elements apart) of m columns into
 * m accumulators (AT), eight rows at a time in CLT first.
 * mu: the run's mean (EM_CPU_R_SQDEV), mus[j] the column's; p: the exponent. */
#define DEF_FOLD(OP, N, T, LT, CLT, AT, LANES, BLK, ID, EL, COMB)                                   \
    CLONE_##N static void run_##OP##_##N(const void *x_, int64_t n, const double *mup,          \
                                         double p_, void *res) {                                 \
        const T *restrict x = x_;                                                               \
        const LT mu = mup ? (LT)*mup : (LT)0, p = (LT)p_;                                       \
        (void)mu; (void)p;                                                                      \
        AT total = (AT)(ID);                                                                    \
        for (int64_t i = 0; i < n; i += BLK) {                                                  \
            int64_t m = n - i < BLK ? n - i : BLK;                                              \
            const T *restrict q = x + i;                                                        \
            LT acc[LANES];                                                                      \
            for (int k = 0; k < LANES; k++) acc[k] = (LT)(ID);                                  \
            int64_t j = 0;                                                                      \
            for (; j + LANES <= m; j += LANES)                                                  \
                for (int k = 0; k < LANES; k++) {                                               \
                    LT v = (LT)q[j + k];                                                        \
                    v = EL(v);                                                                  \
                    acc[k] = COMB(acc[k], v);                                                   \
                }                                                                               \
            AT bs = (AT)(ID);                                                                   \
            for (int k = 0; k < LANES; k++) bs = COMB(bs, (AT)acc[k]);                          \
            for (; j < m; j++) {                                                                \
                LT v = (LT)q[j];                                                                \
                v = EL(v);                                                                      \
                bs = COMB(bs, (AT)v);                                                           \
            }                                                                                   \
            total = COMB(total, bs);                                                            \
        }                                                                                       \
        *(AT *)res = total;                                                                     \
    }                                                                                           \
    CLONE_##N static void cols_##OP##_##N(void *acc_, const void *x_, int64_t rs, int64_t nrows,          \
                                          int64_t m, const double *mus, double p_) {                    \
        AT *restrict acc = acc_;                                                                \
        const T *restrict x = x_;                                                               \
        int64_t r = 0;                                                                          \
        {   /* eight rows at a time folded in CLT, then into the AT accumulators */              \
            const CLT p = (CLT)p_;                                                                \
            (void)p;                                                                            \
            for (; r + 8 <= nrows; r += 8) {                                                    \
                const T *restrict q = x + r * rs;                                               \
                for (int64_t j = 0; j < m; j++) {                                               \
                    const CLT mu = mus ? (CLT)mus[j] : (CLT)0;                                     \
                    (void)mu;                                                                   \
                    CLT s = (CLT)q[j];                                                            \
                    s = EL(s);                                                                  \
                    _Pragma("GCC unroll 8")                                                     \
                    for (int k = 1; k < 8; k++) {                                               \
                        CLT v = (CLT)q[k * rs + j];                                               \
                        v = EL(v);                                                              \
                        s = COMB(s, v);                                                         \
                    }                                                                           \
                    acc[j] = COMB(acc[j], (AT)s);                                               \
                }                                                                               \
            }                                                                                   \
        }                                                                                       \
        const AT p = (AT)p_;                                                                    \
        (void)p;                                                                                \
        for (; r < nrows; r++) {                                                                \
            const T *restrict q = x + r * rs;                                                   \
            for (int64_t j = 0; j < m; j++) {                                                   \
                const AT mu = mus ? (AT)mus[j] : (AT)0;                                         \
                (void)mu;                                                                       \
                AT v = (AT)q[j];                                                                \
                v = EL(v);                                                                      \
                acc[j] = COMB(acc[j], v);                                                       \
            }                                                                                   \
        }                                                                                       \
    }                                                                                           \
    static void comb_##OP##_##N(void *a_, const void *b_) {                                     \
        AT *a = a_;                                                                             \
        const AT b = *(const AT *)b_;                                                           \
        *a = COMB(*a, b);                                                                       \
    }

/* float32: float lanes folded into double; float64: 16 lanes, no blocks */
#define F32(OP, ID, EL, COMB) DEF_FOLD(OP, f32, float, float, float, double, 32, BLOCK, ID, EL, COMB)
#define F64(OP, ID, EL, COMB) DEF_FOLD(OP, f64, double, double, double, double, 16, INT64_MAX, ID, EL, COMB)
/* max-like float32 folds: columns compare in double (exact; GCC vectorizes
 * the NaN-aware select there, not in float mixed with double) */
#define F32X(OP, ID, EL, COMB) DEF_FOLD(OP, f32, float, float, double, double, 32, BLOCK, ID, EL, COMB)
/* int64 sums and products wrap (uint64_t); max/min compare signed */
#define I64U(OP, ID, COMB) DEF_FOLD(OP, i64, int64_t, uint64_t, uint64_t, uint64_t, 8, INT64_MAX, ID, EL_ID, COMB)
#define I64S(OP, ID, COMB) DEF_FOLD(OP, i64, int64_t, int64_t, int64_t, int64_t, 8, INT64_MAX, ID, EL_ID, COMB)
#define U8(OP, ID, COMB) DEF_FOLD(OP, u8, uint8_t, uint8_t, int64_t, int64_t, 32, INT64_MAX, ID, EL_ID, COMB)

F32(sum, 0, EL_ID, C_ADD) F64(sum, 0, EL_ID, C_ADD) I64U(sum, 0, C_ADD)
F32(prod, 1, EL_ID, C_MUL) F64(prod, 1, EL_ID, C_MUL) I64U(prod, 1, C_MUL)
F32X(max, -INFINITY, EL_ID, C_MAX) F64(max, -INFINITY, EL_ID, C_MAX) I64S(max, INT64_MIN, C_MAX)
F32X(min, INFINITY, EL_ID, C_MIN) F64(min, INFINITY, EL_ID, C_MIN) I64S(min, INT64_MAX, C_MIN)
U8(max, 0, C_MAX) U8(min, 1, C_MIN)
F32(sq, 0, EL_SQ, C_ADD) F64(sq, 0, EL_SQ, C_ADD)
F32(sqdev, 0, EL_DEV, C_ADD) F64(sqdev, 0, EL_DEV, C_ADD)
F32(asum, 0, EL_ABS, C_ADD) F64(asum, 0, EL_ABS, C_ADD)
F32(psum, 0, EL_POW, C_ADD) F64(psum, 0, EL_POW, C_ADD)
F32X(amax, 0, EL_ABS, C_MAX) F64(amax, 0, EL_ABS, C_MAX)
F32X(amin, INFINITY, EL_ABS, C_MIN) F64(amin, INFINITY, EL_ABS, C_MIN)
F32(nnz, 0, EL_NZ, C_ADD) F64(nnz, 0, EL_NZ, C_ADD)

typedef void (*run_fn)(const void *x, int64_t n, const double *mu, double p, void *res);
typedef void (*cols_fn)(void *acc, const void *x, int64_t rs, int64_t nrows, int64_t m, const double *mus,
                        double p);
typedef void (*comb_fn)(void *a, const void *b);
typedef struct {
    run_fn run;
    cols_fn cols;
    comb_fn comb;
    double id_d;   /* identity, S floating */
    int64_t id_i;  /* identity, S int64 / uint8 */
} fold_t;

#define FOLD(OP, N, IDD, IDI) { run_##OP##_##N, cols_##OP##_##N, comb_##OP##_##N, IDD, IDI }
#define NOFOLD { NULL, NULL, NULL, 0, 0 }
/* [op][0 = f32, 1 = f64, 2 = i64, 3 = u8]; NULL: not supported (the kernel
 * never asks for it) */
static const fold_t folds[EM_CPU_R_COUNT][4] = {
    [EM_CPU_R_SUM] = { FOLD(sum, f32, 0, 0), FOLD(sum, f64, 0, 0), FOLD(sum, i64, 0, 0), NOFOLD },
    [EM_CPU_R_PROD] = { FOLD(prod, f32, 1, 1), FOLD(prod, f64, 1, 1), FOLD(prod, i64, 1, 1), NOFOLD },
    [EM_CPU_R_MAX] = { FOLD(max, f32, -INFINITY, 0), FOLD(max, f64, -INFINITY, 0), FOLD(max, i64, 0, INT64_MIN),
                FOLD(max, u8, 0, 0) },
    [EM_CPU_R_MIN] = { FOLD(min, f32, INFINITY, 0), FOLD(min, f64, INFINITY, 0), FOLD(min, i64, 0, INT64_MAX),
                FOLD(min, u8, 0, 1) },
    [EM_CPU_R_SQ] = { FOLD(sq, f32, 0, 0), FOLD(sq, f64, 0, 0), NOFOLD, NOFOLD },
    [EM_CPU_R_SQDEV] = { FOLD(sqdev, f32, 0, 0), FOLD(sqdev, f64, 0, 0), NOFOLD, NOFOLD },
    [EM_CPU_R_ASUM] = { FOLD(asum, f32, 0, 0), FOLD(asum, f64, 0, 0), NOFOLD, NOFOLD },
    [EM_CPU_R_PSUM] = { FOLD(psum, f32, 0, 0), FOLD(psum, f64, 0, 0), NOFOLD, NOFOLD },
    [EM_CPU_R_AMAX] = { FOLD(amax, f32, 0, 0), FOLD(amax, f64, 0, 0), NOFOLD, NOFOLD },
    [EM_CPU_R_AMIN] = { FOLD(amin, f32, INFINITY, 0), FOLD(amin, f64, INFINITY, 0), NOFOLD, NOFOLD },
    [EM_CPU_R_NNZ] = { FOLD(nnz, f32, 0, 0), FOLD(nnz, f64, 0, 0), NOFOLD, NOFOLD },
};

static int src_slot(em_dtype S) {
    return S == EM_FLOAT32 ? 0 : S == EM_FLOAT64 ? 1 : S == EM_INT64 ? 2 : 3;
}

void em_cpu_reduce_fold_run(em_cpu_rop op, em_dtype S, const void *x, int64_t n, void *res) {
    folds[op][src_slot(S)].run(x, n, NULL, 0, res);
}

/* ---- dims and shapes ---- */

em_status em_cpu_reduce_dims(const em_tensor *self, em_intlist dim, bool keepdim, const char *name,
                             em_cpu_rshape *rs) {
    int nd = self->ndim;
    memset(rs, 0, sizeof *rs);
    if (dim.n <= 0 || nd == 0) {
        for (int d = 0; d < dim.n; d++)
            if (em_wrap_dim(dim.data[d], nd, name) < 0) return EM_EINDEX;
        for (int d = 0; d < nd; d++) rs->red[d] = true;
    } else {
        for (int i = 0; i < dim.n; i++) {
            int d = em_wrap_dim(dim.data[i], nd, name);
            if (d < 0) return EM_EINDEX;
            if (rs->red[d]) {
                em_set_error(EM_EVALUE, "%s: dim %d appears multiple times in the list of dims", name, d + 1);
                return EM_EVALUE;
            }
            rs->red[d] = true;
        }
    }
    rs->count = 1;
    for (int d = 0; d < nd; d++) {
        if (rs->red[d]) {
            rs->count *= self->sizes[d];
            if (keepdim) rs->osz[rs->ond++] = 1;
        } else {
            rs->osz[rs->ond++] = self->sizes[d];
        }
    }
    return EM_OK;
}

em_status em_cpu_reduce_nonempty(const em_tensor *self, const em_cpu_rshape *rs, bool all, const char *name) {
    if (self->numel != 0) return EM_OK;
    if (all) {
        em_set_error(EM_EINDEX, "%s: expected a reduction dim to be specified for an input with no elements; "
                                "specify the dim argument", name);
        return EM_EINDEX;
    }
    for (int d = 0; d < self->ndim; d++)
        if (rs->red[d] && self->sizes[d] == 0) {
            em_set_error(EM_EINDEX, "%s: expected reduction dim %d to have non-zero size", name, d + 1);
            return EM_EINDEX;
        }
    return EM_OK;
}

/* ---- the plan ---- */

typedef struct {
    const fold_t *f;
    size_t es;               /* source element size */
    const char *src;         /* contiguous source data */
    int nk, nr;              /* kept / outer reduced groups (outermost first) */
    int64_t ksz[EM_MAX_DIMS], kst[EM_MAX_DIMS];
    int64_t rsz[EM_MAX_DIMS], rst[EM_MAX_DIMS];
    int64_t nred;            /* product of rsz */
    int64_t inner;           /* run length (runs) or column count (columns) */
    bool runs;               /* innermost group reduced */
    int64_t nouter;          /* outputs (runs) or outer kept positions (columns) */
    char *acc;               /* 8-byte accumulators, contiguous, like the output */
    int64_t id;              /* the identity's bits */
    const double *mus;       /* per-output means (EM_CPU_R_SQDEV) or NULL */
    double p;                /* exponent (EM_CPU_R_PSUM) */
    /* split strategies */
    int64_t nparts;
    int64_t nblk;            /* column blocks per outer position */
    int64_t bw;              /* columns per block (COLS, or wider when split) */
    char *part;              /* partial accumulators */
} plan_t;

static int64_t offset_of(int64_t lin, int n, const int64_t *sz, const int64_t *st) {
    int64_t off = 0;
    for (int d = n - 1; d >= 0; d--) {
        off += (lin % sz[d]) * st[d];
        lin /= sz[d];
    }
    return off;
}

/* runs: outputs [b, e), each folding its runs in order */
static void runs_range(int64_t b, int64_t e, void *arg) {
    const plan_t *p = arg;
    for (int64_t o = b; o < e; o++) {
        int64_t base = offset_of(o, p->nk, p->ksz, p->kst);
        int64_t st = p->id, r1;
        const double *mu = p->mus ? p->mus + o : NULL;
        for (int64_t r = 0; r < p->nred; r++) {
            const char *x = p->src + (size_t)(base + offset_of(r, p->nr, p->rsz, p->rst)) * p->es;
            p->f->run(x, p->inner, mu, p->p, &r1);
            p->f->comb(&st, &r1);
        }
        memcpy(p->acc + (size_t)o * 8, &st, 8);
    }
}

/* runs with few outputs and one long run each: item = output x part */
static void parts_range(int64_t b, int64_t e, void *arg) {
    const plan_t *p = arg;
    for (int64_t w = b; w < e; w++) {
        int64_t o = w / p->nparts, i = w % p->nparts;
        int64_t lo = p->inner * i / p->nparts, hi = p->inner * (i + 1) / p->nparts;
        int64_t base = offset_of(o, p->nk, p->ksz, p->kst);
        p->f->run(p->src + (size_t)(base + lo) * p->es, hi - lo, p->mus ? p->mus + o : NULL, p->p,
                  p->part + (size_t)w * 8);
    }
}

/* columns: fold rows [r0, r1) of column block w into acc (m columns) */
static void cols_block(const plan_t *p, int64_t w, int64_t r0, int64_t r1, char *acc, int64_t *mout) {
    int64_t ok = w / p->nblk, j0 = (w % p->nblk) * p->bw;
    int64_t m = p->inner - j0 < p->bw ? p->inner - j0 : p->bw;
    int64_t base = offset_of(ok, p->nk, p->ksz, p->kst) + j0;
    for (int64_t j = 0; j < m; j++) memcpy(acc + j * 8, &p->id, 8);
    const double *mus = p->mus ? p->mus + ok * p->inner + j0 : NULL;
    if (p->nr <= 1) {
        /* rows a constant stride apart: several at a time */
        int64_t rs = p->nr ? p->rst[0] : 0;
        p->f->cols(acc, p->src + (size_t)(base + r0 * rs) * p->es, rs, r1 - r0, m, mus, p->p);
        *mout = m;
        return;
    }
    for (int64_t r = r0; r < r1; r++) {
        const char *x = p->src + (size_t)(base + offset_of(r, p->nr, p->rsz, p->rst)) * p->es;
        p->f->cols(acc, x, 0, 1, m, mus, p->p);
    }
    *mout = m;
}

/* columns: items [b, e), item = outer position x column block */
static void cols_range(int64_t b, int64_t e, void *arg) {
    const plan_t *p = arg;
    for (int64_t w = b; w < e; w++) {
        _Alignas(64) char acc[COLS * 8];
        int64_t m;
        cols_block(p, w, 0, p->nred, acc, &m);
        int64_t ok = w / p->nblk, j0 = (w % p->nblk) * p->bw;
        memcpy(p->acc + (size_t)(ok * p->inner + j0) * 8, acc, (size_t)m * 8);
    }
}

/* columns with few blocks and many rows: item = block x part of the rows,
 * each writing its partial columns to part[item] (bw columns per item) */
static void colparts_range(int64_t b, int64_t e, void *arg) {
    const plan_t *p = arg;
    for (int64_t it = b; it < e; it++) {
        int64_t w = it / p->nparts, i = it % p->nparts;
        int64_t r0 = p->nred * i / p->nparts, r1 = p->nred * (i + 1) / p->nparts;
        int64_t m;
        cols_block(p, w, r0, r1, p->part + (size_t)it * (size_t)p->bw * 8, &m);
    }
}

/* ---- driver ---- */

em_status em_cpu_reduce_run(const em_cpu_rplan_in *in, em_tensor *acc_t) {
    const em_tensor *src = in->src;
    const em_cpu_rshape *rs = in->rs;
    em_dtype S = src->dtype;
    const fold_t *f = &folds[in->op][src_slot(S)];
    if (!f->run) {
        em_set_error(EM_EINTERNAL, "%s: no fold %d for dtype %s", in->name, (int)in->op, em_dtype_name(S));
        return EM_EINTERNAL;
    }
    plan_t p;
    memset(&p, 0, sizeof p);
    p.f = f;
    p.es = em_dtype_size(S);
    p.src = em_tensor_data(src);
    p.acc = em_tensor_data(acc_t);
    p.mus = in->mus;
    p.p = in->p;
    if (S == EM_FLOAT32 || S == EM_FLOAT64) memcpy(&p.id, &f->id_d, 8);
    else p.id = f->id_i;
    int64_t nout = acc_t->numel;
    if (nout == 0) return EM_OK;
    if (rs->count == 0) {
        for (int64_t o = 0; o < nout; o++) memcpy(p.acc + (size_t)o * 8, &p.id, 8);
        return EM_OK;
    }
    /* merge groups (outermost first), dropping size-1 dims */
    int nd = src->ndim;
    int64_t gsz[EM_MAX_DIMS], gst[EM_MAX_DIMS];
    bool gred[EM_MAX_DIMS];
    int ng = 0;
    for (int d = 0; d < nd; d++) {
        if (src->sizes[d] == 1) continue;
        if (ng > 0 && gred[ng - 1] == rs->red[d]) {
            gsz[ng - 1] *= src->sizes[d];
            gst[ng - 1] = src->strides[d];
        } else {
            gsz[ng] = src->sizes[d];
            gst[ng] = src->strides[d];
            gred[ng] = rs->red[d];
            ng++;
        }
    }
    p.runs = ng > 0 && gred[ng - 1];
    p.inner = ng > 0 ? gsz[ng - 1] : 1;
    int last = ng > 0 ? ng - 1 : 0;
    for (int g = 0; g < last; g++) {
        if (gred[g]) { p.rsz[p.nr] = gsz[g]; p.rst[p.nr++] = gst[g]; }
        else { p.ksz[p.nk] = gsz[g]; p.kst[p.nk++] = gst[g]; }
    }
    p.nred = 1;
    for (int g = 0; g < p.nr; g++) p.nred *= p.rsz[g];
    p.nouter = 1;
    for (int g = 0; g < p.nk; g++) p.nouter *= p.ksz[g];
    if (ng == 0) { p.runs = true; p.inner = src->numel; } /* all sizes 1: one run */

    if (p.runs && p.nred == 1 && p.nouter < 8 && p.inner >= 2 * EM_CPU_GRAIN) {
        /* few long runs: fixed parts of each run, folded in order */
        p.nparts = p.inner / EM_CPU_GRAIN;
        if (p.nparts > 64) p.nparts = 64;
        int64_t nitems = p.nouter * p.nparts;
        p.part = malloc((size_t)nitems * 8);
        if (!p.part) { em_set_error(EM_ENOMEM, "%s: out of memory", in->name); return EM_ENOMEM; }
        em_cpu_parallel_for_stoppable(nitems, 1, parts_range, &p);
        if (em_cpu_interrupted(in->name)) { /* the parts are not all written: Note [Interrupts in kernels] */
            free(p.part);
            return EM_EINTERRUPT;
        }
        for (int64_t o = 0; o < p.nouter; o++) {
            int64_t st = p.id;
            for (int64_t i = 0; i < p.nparts; i++) f->comb(&st, p.part + (size_t)(o * p.nparts + i) * 8);
            memcpy(p.acc + (size_t)o * 8, &st, 8);
        }
        free(p.part);
    } else if (p.runs) {
        int64_t per = p.nred * p.inner;
        int64_t grain = per >= EM_CPU_GRAIN ? 1 : EM_CPU_GRAIN / (per ? per : 1);
        em_cpu_parallel_for_stoppable(p.nouter, grain, runs_range, &p);
    } else {
        p.bw = COLS;
        p.nblk = (p.inner + COLS - 1) / COLS;
        int64_t nitems = p.nouter * p.nblk;
        int64_t per = p.nred * (p.inner < COLS ? p.inner : COLS);
        if (nitems < 8 && per >= 4 * EM_CPU_GRAIN) {
            /* few column blocks, many rows: fixed parts of the rows, each
             * folding whole rows (up to WIDE columns: sequential reads) */
            p.bw = p.inner < WIDE ? p.inner : WIDE;
            p.nblk = (p.inner + p.bw - 1) / p.bw;
            nitems = p.nouter * p.nblk;
            p.nparts = p.nred * (p.inner < p.bw ? p.inner : p.bw) / (2 * EM_CPU_GRAIN);
            if (p.nparts > 16) p.nparts = 16;
            if (p.nparts > p.nred) p.nparts = p.nred;
            if (p.nparts < 1) p.nparts = 1;
            p.part = malloc((size_t)(nitems * p.nparts) * (size_t)p.bw * 8);
            if (!p.part) { em_set_error(EM_ENOMEM, "%s: out of memory", in->name); return EM_ENOMEM; }
            em_cpu_parallel_for_stoppable(nitems * p.nparts, 1, colparts_range, &p);
            if (em_cpu_interrupted(in->name)) {
                free(p.part);
                return EM_EINTERRUPT;
            }
            for (int64_t w = 0; w < nitems; w++) {
                int64_t ok = w / p.nblk, j0 = (w % p.nblk) * p.bw;
                int64_t m = p.inner - j0 < p.bw ? p.inner - j0 : p.bw;
                char *dst = p.acc + (size_t)(ok * p.inner + j0) * 8;
                memcpy(dst, p.part + (size_t)(w * p.nparts) * (size_t)p.bw * 8, (size_t)m * 8);
                for (int64_t i = 1; i < p.nparts; i++) {
                    const char *pp = p.part + (size_t)(w * p.nparts + i) * (size_t)p.bw * 8;
                    for (int64_t j = 0; j < m; j++) f->comb(dst + j * 8, pp + j * 8);
                }
            }
            free(p.part);
        } else {
            int64_t grain = per >= EM_CPU_GRAIN ? 1 : EM_CPU_GRAIN / (per ? per : 1);
            em_cpu_parallel_for_stoppable(nitems, grain, cols_range, &p);
        }
    }
    /* the accumulator may be partly unwritten (Note [Interrupts in kernels], way (b)) */
    if (em_cpu_interrupted(in->name)) return EM_EINTERRUPT;
    return EM_OK;
}
