/* reduce.c -- sum and mean over all elements or a list of dims.
 * float32 accumulates in float lanes per block and double across blocks.
 *
 * The input is first made contiguous in the source dtype S (float32,
 * float64 or int64, chosen from the output dtype). Adjacent dims that are
 * both reduced or both kept are then merged, so the innermost group is
 * either reduced (case "runs": each output sums contiguous runs) or kept
 * (case "columns": blocks of adjacent outputs accumulate whole rows). The
 * results land in an accumulator of float64 or int64 shaped like the
 * output, which is divided (mean) and converted to the output dtype.
 * Partial sums are combined in a fixed order: results do not depend on
 * the number of threads.
 */
/* O3 vectorizes the loops; no-trapping-math lets selects (clamps, relu,
 * comparisons) be if-converted; no-math-errno lets sqrt vectorize. None
 * changes a computed value (only errno and FP exception flags). */
#pragma GCC optimize("O3", "no-trapping-math", "no-math-errno")
#include "kernels/cpu/em_cpu.h"

#include <math.h>
#include <string.h>

/* ---- contiguous run sums ---- */

#define BLOCK 4096

EM_CPU_CLONES static double run_f32(const float *restrict x, int64_t n) {
    double total = 0;
    for (int64_t i = 0; i < n; i += BLOCK) {
        int64_t m = n - i < BLOCK ? n - i : BLOCK;
        const float *restrict p = x + i;
        float acc[32] = {0};
        int64_t j = 0;
        for (; j + 32 <= m; j += 32)
            for (int k = 0; k < 32; k++) acc[k] += p[j + k];
        double bs = 0;
        for (int k = 0; k < 32; k++) bs += acc[k];
        for (; j < m; j++) bs += p[j];
        total += bs;
    }
    return total;
}

EM_CPU_CLONES static double run_f64(const double *restrict x, int64_t n) {
    double acc[16] = {0};
    int64_t j = 0;
    for (; j + 16 <= n; j += 16)
        for (int k = 0; k < 16; k++) acc[k] += x[j + k];
    double s = 0;
    for (int k = 0; k < 16; k++) s += acc[k];
    for (; j < n; j++) s += x[j];
    return s;
}

EM_CPU_CLONES static int64_t run_i64(const int64_t *restrict x, int64_t n) {
    uint64_t s = 0;
    for (int64_t j = 0; j < n; j++) s += (uint64_t)x[j];
    return (int64_t)s;
}

/* ---- the plan ---- */

typedef struct {
    em_dtype S;              /* source dtype: f32, f64 or i64 */
    const char *src;         /* contiguous source data */
    int nk, nr;              /* kept / outer reduced groups (outermost first) */
    int64_t ksz[EM_MAX_DIMS], kst[EM_MAX_DIMS];
    int64_t rsz[EM_MAX_DIMS], rst[EM_MAX_DIMS];
    int64_t nred;            /* product of rsz */
    int64_t inner;           /* run length (runs) or column count (columns) */
    bool runs;               /* innermost group reduced */
    int64_t nouter;          /* outputs (runs) or outer kept positions (columns) */
    char *acc;               /* float64 or int64 accumulator, contiguous */
    /* parallel full reduction */
    int64_t nparts;
    double *part_d;
    int64_t *part_i;
} plan_t;

static int64_t offset_of(int64_t lin, int n, const int64_t *sz, const int64_t *st) {
    int64_t off = 0;
    for (int d = n - 1; d >= 0; d--) {
        off += (lin % sz[d]) * st[d];
        lin /= sz[d];
    }
    return off;
}

/* case runs: outputs [b, e) */
static void runs_range(int64_t b, int64_t e, void *arg) {
    const plan_t *p = arg;
    size_t es = em_dtype_size(p->S);
    for (int64_t o = b; o < e; o++) {
        int64_t base = offset_of(o, p->nk, p->ksz, p->kst);
        double sd = 0;
        uint64_t si = 0;
        for (int64_t r = 0; r < p->nred; r++) {
            const char *x = p->src + (size_t)(base + offset_of(r, p->nr, p->rsz, p->rst)) * es;
            if (p->S == EM_FLOAT32) sd += run_f32((const float *)x, p->inner);
            else if (p->S == EM_FLOAT64) sd += run_f64((const double *)x, p->inner);
            else si += (uint64_t)run_i64((const int64_t *)x, p->inner);
        }
        if (p->S == EM_INT64) ((int64_t *)p->acc)[o] = (int64_t)si;
        else ((double *)p->acc)[o] = sd;
    }
}

/* case runs with a single output and one run: parts [b, e) of the run */
static void parts_range(int64_t b, int64_t e, void *arg) {
    const plan_t *p = arg;
    for (int64_t i = b; i < e; i++) {
        int64_t lo = p->inner * i / p->nparts, hi = p->inner * (i + 1) / p->nparts;
        if (p->S == EM_FLOAT32) p->part_d[i] = run_f32((const float *)p->src + lo, hi - lo);
        else if (p->S == EM_FLOAT64) p->part_d[i] = run_f64((const double *)p->src + lo, hi - lo);
        else p->part_i[i] = run_i64((const int64_t *)p->src + lo, hi - lo);
    }
}

#define COLS 256

EM_CPU_CLONES static void cols_f32(double *restrict acc, const float *restrict x, int64_t m) {
    for (int64_t j = 0; j < m; j++) acc[j] += (double)x[j];
}
EM_CPU_CLONES static void cols_f64(double *restrict acc, const double *restrict x, int64_t m) {
    for (int64_t j = 0; j < m; j++) acc[j] += x[j];
}
EM_CPU_CLONES static void cols_i64(uint64_t *restrict acc, const int64_t *restrict x, int64_t m) {
    for (int64_t j = 0; j < m; j++) acc[j] += (uint64_t)x[j];
}

/* case columns: work items [b, e), item = outer position x column block */
static void cols_range(int64_t b, int64_t e, void *arg) {
    const plan_t *p = arg;
    size_t es = em_dtype_size(p->S);
    int64_t nblk = (p->inner + COLS - 1) / COLS;
    for (int64_t w = b; w < e; w++) {
        int64_t ok = w / nblk, j0 = (w % nblk) * COLS;
        int64_t m = p->inner - j0 < COLS ? p->inner - j0 : COLS;
        int64_t base = offset_of(ok, p->nk, p->ksz, p->kst) + j0;
        union { double d[COLS]; uint64_t i[COLS]; } acc;
        memset(&acc, 0, sizeof acc);
        for (int64_t r = 0; r < p->nred; r++) {
            const char *x = p->src + (size_t)(base + offset_of(r, p->nr, p->rsz, p->rst)) * es;
            if (p->S == EM_FLOAT32) cols_f32(acc.d, (const float *)x, m);
            else if (p->S == EM_FLOAT64) cols_f64(acc.d, (const double *)x, m);
            else cols_i64(acc.i, (const int64_t *)x, m);
        }
        memcpy(p->acc + (size_t)(ok * p->inner + j0) * 8, &acc, (size_t)m * 8);
    }
}

/* ---- driver ---- */

static em_tensor *reduce(em_tensor *self, em_intlist dim, bool keepdim, em_dtype dtype, bool mean,
                         const char *name) {
    int nd = self->ndim;
    /* output dtype */
    em_dtype out_dt = dtype;
    if (dtype != EM_DTYPE_NONE && (dtype < 0 || dtype >= EM_DTYPE_COUNT)) {
        em_set_error(EM_ETYPE, "%s: bad dtype %d", name, (int)dtype);
        return NULL;
    }
    if (mean) {
        if (dtype == EM_DTYPE_NONE && !em_dtype_is_floating(self->dtype)) {
            em_set_error(EM_ETYPE, "%s: could not infer the output dtype; input dtype must be floating, got %s",
                         name, em_dtype_name(self->dtype));
            return NULL;
        }
        if (dtype != EM_DTYPE_NONE && !em_dtype_is_floating(dtype)) {
            em_set_error(EM_ETYPE, "%s: dtype must be floating, got %s", name, em_dtype_name(dtype));
            return NULL;
        }
        if (dtype == EM_DTYPE_NONE) out_dt = self->dtype;
    } else if (dtype == EM_DTYPE_NONE) {
        out_dt = em_dtype_is_floating(self->dtype) ? self->dtype : EM_INT64;
    }
    /* reduced dims */
    bool red[EM_MAX_DIMS] = {false};
    if (dim.n <= 0 || nd == 0) {
        for (int d = 0; d < dim.n; d++)
            if (em_wrap_dim(dim.data[d], nd, name) < 0) return NULL;
        for (int d = 0; d < nd; d++) red[d] = true;
    } else {
        for (int i = 0; i < dim.n; i++) {
            int d = em_wrap_dim(dim.data[i], nd, name);
            if (d < 0) return NULL;
            if (red[d]) {
                em_set_error(EM_EVALUE, "%s: dim %d appears multiple times in the list of dims", name, d + 1);
                return NULL;
            }
            red[d] = true;
        }
    }
    /* output shape */
    int64_t osz[EM_MAX_DIMS];
    int ond = 0;
    int64_t count = 1;
    for (int d = 0; d < nd; d++) {
        if (red[d]) {
            count *= self->sizes[d];
            if (keepdim) osz[ond++] = 1;
        } else {
            osz[ond++] = self->sizes[d];
        }
    }
    em_tensor *out = em_tensor_new(ond, osz, out_dt, em_cpu_dev());
    if (!out) return NULL;
    /* source: contiguous, dtype S */
    em_dtype S = out_dt == EM_FLOAT64 ? EM_FLOAT64 : em_dtype_is_floating(out_dt) ? EM_FLOAT32 : EM_INT64;
    em_dtype A = S == EM_INT64 ? EM_INT64 : EM_FLOAT64;
    em_tensor *src = self, *hold = NULL, *acc = out;
    if (!em_dtype_is_floating(out_dt) && self->dtype != out_dt &&
        (em_dtype_is_floating(self->dtype) || out_dt != EM_INT64)) {
        /* PyTorch casts the input to an integral or bool dtype first:
         * sum(-0.5, dtype=bool) is true, not bool(int64(-0.5)) */
        em_tensor *pre = em_cpu_to_dtype(self, out_dt, name);
        if (!pre) goto fail;
        hold = src = em_cpu_to_dtype(pre, S, name);
        em_tensor_release(pre);
        if (!src) goto fail;
    } else if (self->dtype != S || !self->is_contiguous) {
        hold = src = em_cpu_to_dtype(self, S, name);
        if (!src) goto fail;
    }
    if (out_dt != A) {
        acc = em_tensor_new(ond, osz, A, em_cpu_dev());
        if (!acc) goto fail;
    }
    /* merge groups (outermost first), dropping size-1 dims */
    int64_t gsz[EM_MAX_DIMS], gst[EM_MAX_DIMS];
    bool gred[EM_MAX_DIMS];
    int ng = 0;
    for (int d = 0; d < nd; d++) {
        if (self->sizes[d] == 1) continue;
        if (ng > 0 && gred[ng - 1] == red[d]) {
            gsz[ng - 1] *= self->sizes[d];
            gst[ng - 1] = src->strides[d];
        } else {
            gsz[ng] = self->sizes[d];
            gst[ng] = src->strides[d];
            gred[ng] = red[d];
            ng++;
        }
    }
    plan_t p;
    memset(&p, 0, sizeof p);
    p.S = S;
    p.src = em_tensor_data(src);
    p.acc = em_tensor_data(acc);
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
    if (out->numel == 0) {
        /* nothing to write */
    } else if (count == 0) {
        memset(p.acc, 0, (size_t)acc->numel * 8);
    } else if (p.runs && p.nouter == 1 && p.nred == 1 && p.inner >= 2 * EM_CPU_GRAIN) {
        /* one long run: fixed partition, summed in order */
        double pd[64];
        int64_t pi[64];
        p.nparts = p.inner / EM_CPU_GRAIN;
        if (p.nparts > 64) p.nparts = 64;
        p.part_d = pd;
        p.part_i = pi;
        em_cpu_parallel_for(p.nparts, 1, parts_range, &p);
        double sd = 0;
        uint64_t si = 0;
        for (int64_t i = 0; i < p.nparts; i++) {
            if (S == EM_INT64) si += (uint64_t)pi[i];
            else sd += pd[i];
        }
        if (S == EM_INT64) *(int64_t *)p.acc = (int64_t)si;
        else *(double *)p.acc = sd;
    } else if (p.runs) {
        int64_t per = p.nred * p.inner;
        int64_t grain = per >= EM_CPU_GRAIN ? 1 : EM_CPU_GRAIN / (per ? per : 1);
        em_cpu_parallel_for(p.nouter, grain, runs_range, &p);
    } else {
        int64_t nblk = (p.inner + COLS - 1) / COLS;
        int64_t per = p.nred * (p.inner < COLS ? p.inner : COLS);
        int64_t grain = per >= EM_CPU_GRAIN ? 1 : EM_CPU_GRAIN / (per ? per : 1);
        em_cpu_parallel_for(p.nouter * nblk, grain, cols_range, &p);
    }
    if (mean) {
        double *a = (double *)p.acc;
        for (int64_t i = 0; i < acc->numel; i++) a[i] /= (double)count;
    }
    if (acc != out) {
        if (em_cpu_copy_into(out, acc, name) != EM_OK) goto fail;
        em_tensor_release(acc);
    }
    em_tensor_release(hold);
    return out;
fail:
    if (acc != out) em_tensor_release(acc);
    em_tensor_release(hold);
    em_tensor_release(out);
    return NULL;
}

/* ---- kernels ---- */

em_tensor *em_cpu_sum(em_keyset ks, em_tensor *self, em_intlist dim, bool keepdim, em_dtype dtype) {
    (void)ks;
    return reduce(self, dim, keepdim, dtype, false, "sum");
}

em_tensor *em_cpu_mean(em_keyset ks, em_tensor *self, em_intlist dim, bool keepdim, em_dtype dtype) {
    (void)ks;
    return reduce(self, dim, keepdim, dtype, true, "mean");
}
