/* reduce_ops.c -- the reduction kernels: sum mean prod amax amin all any
 * var std norm over the framework of reduce.c (Note [Reduction framework]),
 * and the arg-reductions argmax argmin, max/min over a dim (values and
 * indices) and over all elements.
 *
 * Dtype rules follow PyTorch 1.13: sum and prod of bool/integers give
 * int64, floats keep their dtype, `dtype` overrides (the input is cast to
 * an integral or bool dtype first); mean, var, std and norm need floating
 * dtypes; amax/amin/max/min keep the input's dtype; all/any give bool
 * (uint8 for uint8 input); indices are int64.
 */
#pragma GCC optimize("O3", "no-trapping-math", "no-math-errno")
#include "kernels/cpu/reduce_int.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* ---- helpers ---- */

/* self as a contiguous tensor of dtype S (a new reference); the copy stops
 * at an interrupt (NULL, "name: interrupted"): nothing is written yet. */
static em_tensor *as_source(em_tensor *self, em_dtype S, const char *name) {
    if (self->dtype == S && self->is_contiguous) return em_tensor_retain(self);
    return em_cpu_to_dtype_stoppable(self, S, name);
}

/* The source dtype of a max-like fold: float64, float32 (other floats, which
 * it holds exactly) or int64 (integers and bool, exactly). */
static em_dtype exact_source(em_dtype t) {
    return t == EM_FLOAT64 ? EM_FLOAT64 : em_dtype_is_floating(t) ? EM_FLOAT32 : EM_INT64;
}

/* Folds src (contiguous) over rs: a new float64 or int64 accumulator tensor
 * shaped like the output, or NULL with the error set. */
static em_tensor *fold(em_tensor *src, const em_cpu_rshape *rs, em_cpu_rop op, const double *mus, double p,
                       const char *name) {
    em_dtype A = em_dtype_is_floating(src->dtype) ? EM_FLOAT64 : EM_INT64;
    em_tensor *acc = em_tensor_new(rs->ond, rs->osz, A, em_cpu_dev());
    if (!acc) return NULL;
    em_cpu_rplan_in in = { op, src, rs, mus, p, name };
    if (em_cpu_reduce_run(&in, acc) != EM_OK) {
        em_tensor_release(acc);
        return NULL;
    }
    return acc;
}

/* acc (owned) converted to dtype: acc itself when it already is. */
static em_tensor *finish(em_tensor *acc, em_dtype dtype, const char *name) {
    if (!acc || acc->dtype == dtype) return acc;
    em_tensor *out = em_cpu_to_dtype(acc, dtype, name);
    em_tensor_release(acc);
    return out;
}

static em_intlist optdim(const int64_t *dim) {
    em_intlist l = { dim, dim ? 1 : -1 };
    return l;
}

static bool dtype_ok(em_dtype dtype, const char *name) {
    if (dtype != EM_DTYPE_NONE && (dtype < 0 || dtype >= EM_DTYPE_COUNT)) {
        em_set_error(EM_ETYPE, "%s: bad dtype %d", name, (int)dtype);
        return false;
    }
    return true;
}

/* ---- sum, mean, prod ---- */

typedef enum { K_SUM, K_MEAN, K_PROD } sumkind;

/* sum/mean/prod of self; into out when given (retained and returned; its
 * shape is the result's and its dtype one the result casts to), else into
 * a new tensor. */
static em_tensor *sumlike_into(em_tensor *self, em_intlist dim, bool keepdim, em_dtype dtype, sumkind kind,
                               const char *name, em_tensor *out) {
    if (!dtype_ok(dtype, name)) return NULL;
    em_dtype out_dt = dtype;
    if (kind == K_MEAN) {
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
    em_cpu_rshape rs;
    if (em_cpu_reduce_dims(self, dim, keepdim, name, &rs) != EM_OK) return NULL;
    /* source: contiguous, dtype S */
    em_dtype S = out_dt == EM_FLOAT64 ? EM_FLOAT64 : em_dtype_is_floating(out_dt) ? EM_FLOAT32 : EM_INT64;
    em_tensor *src;
    if (!em_dtype_is_floating(out_dt) && self->dtype != out_dt &&
        (em_dtype_is_floating(self->dtype) || out_dt != EM_INT64)) {
        /* PyTorch casts the input to an integral or bool dtype first:
         * sum(-0.5, dtype=bool) is true, not bool(int64(-0.5)) */
        em_tensor *pre = em_cpu_to_dtype(self, out_dt, name);
        if (!pre) return NULL;
        src = em_cpu_to_dtype(pre, S, name);
        em_tensor_release(pre);
    } else {
        src = as_source(self, S, name);
    }
    if (!src) return NULL;
    em_tensor *acc = fold(src, &rs, kind == K_PROD ? EM_CPU_R_PROD : EM_CPU_R_SUM, NULL, 0, name);
    em_tensor_release(src);
    if (acc && kind == K_MEAN) {
        double *a = em_tensor_data(acc);
        for (int64_t i = 0; i < acc->numel; i++) a[i] /= (double)rs.count;
    }
    if (!out) return finish(acc, out_dt, name);
    /* the result rounds to its dtype first when out's differs */
    em_tensor *r = out->dtype == out_dt ? acc : finish(acc, out_dt, name);
    em_status st = r ? em_cpu_copy_into(out, r, name) : em_error_kind();
    em_tensor_release(r);
    return st == EM_OK ? em_tensor_retain(out) : NULL;
}

static em_tensor *sumlike(em_tensor *self, em_intlist dim, bool keepdim, em_dtype dtype, sumkind kind,
                          const char *name) {
    return sumlike_into(self, dim, keepdim, dtype, kind, name, NULL);
}

/* The structured impl of sum (meta: em_meta_sum in kernels/meta.c). */
em_status em_cpu_sum_impl(em_keyset ks, const em_meta *m, em_tensor *self, em_intlist dim, bool keepdim,
                          em_dtype dtype, em_tensor *out) {
    (void)ks;
    /* without dtype the sum is computed in out's dtype (em_meta_sum) */
    em_dtype dt = dtype == EM_DTYPE_NONE && out->dtype != m->dtype ? out->dtype : dtype;
    em_tensor *r = sumlike_into(self, dim, keepdim, dt, K_SUM, m->op, out);
    if (!r) return em_error_kind();
    em_tensor_release(r);
    return EM_OK;
}

em_tensor *em_cpu_mean(em_keyset ks, em_tensor *self, em_intlist dim, bool keepdim, em_dtype dtype) {
    (void)ks;
    return sumlike(self, dim, keepdim, dtype, K_MEAN, "mean");
}

em_tensor *em_cpu_prod(em_keyset ks, em_tensor *self, const int64_t *dim, bool keepdim, em_dtype dtype) {
    (void)ks;
    return sumlike(self, optdim(dim), keepdim, dtype, K_PROD, "prod");
}

/* ---- amax, amin, all, any ---- */

static em_tensor *maxlike(em_tensor *self, em_intlist dim, bool keepdim, bool is_max, const char *name) {
    em_cpu_rshape rs;
    if (em_cpu_reduce_dims(self, dim, keepdim, name, &rs) != EM_OK) return NULL;
    if (em_cpu_reduce_nonempty(self, &rs, dim.n <= 0, name) != EM_OK) return NULL;
    em_tensor *src = as_source(self, exact_source(self->dtype), name);
    if (!src) return NULL;
    em_tensor *acc = fold(src, &rs, is_max ? EM_CPU_R_MAX : EM_CPU_R_MIN, NULL, 0, name);
    em_tensor_release(src);
    return finish(acc, self->dtype, name);
}

em_tensor *em_cpu_amax(em_keyset ks, em_tensor *self, em_intlist dim, bool keepdim) {
    (void)ks;
    return maxlike(self, dim, keepdim, true, "amax");
}

em_tensor *em_cpu_amin(em_keyset ks, em_tensor *self, em_intlist dim, bool keepdim) {
    (void)ks;
    return maxlike(self, dim, keepdim, false, "amin");
}

/* all = min and any = max of the input converted to bool (NaN is true) */
static em_tensor *boollike(em_tensor *self, const int64_t *dim, bool keepdim, bool is_all, const char *name) {
    em_cpu_rshape rs;
    if (em_cpu_reduce_dims(self, optdim(dim), keepdim, name, &rs) != EM_OK) return NULL;
    em_tensor *src = as_source(self, EM_BOOL, name);
    if (!src) return NULL;
    em_tensor *acc = fold(src, &rs, is_all ? EM_CPU_R_MIN : EM_CPU_R_MAX, NULL, 0, name);
    em_tensor_release(src);
    return finish(acc, self->dtype == EM_UINT8 ? EM_UINT8 : EM_BOOL, name);
}

em_tensor *em_cpu_all(em_keyset ks, em_tensor *self, const int64_t *dim, bool keepdim) {
    (void)ks;
    return boollike(self, dim, keepdim, true, "all");
}

em_tensor *em_cpu_any(em_keyset ks, em_tensor *self, const int64_t *dim, bool keepdim) {
    (void)ks;
    return boollike(self, dim, keepdim, false, "any");
}

/* ---- var, std ---- */

/* Two passes (numerically stable): the mean of each output, then the sum
 * of squared deviations from it, divided by max(0, N - correction) as in
 * PyTorch 1.13 (so correction >= N gives inf, or nan for no spread). */
static em_tensor *varlike(em_tensor *self, em_intlist dim, int64_t correction, bool keepdim, bool is_std,
                          const char *name) {
    if (!em_dtype_is_floating(self->dtype)) {
        em_set_error(EM_ETYPE, "%s: std and var only support floating point dtypes, got %s", name,
                     em_dtype_name(self->dtype));
        return NULL;
    }
    em_cpu_rshape rs;
    if (em_cpu_reduce_dims(self, dim, keepdim, name, &rs) != EM_OK) return NULL;
    em_tensor *src = as_source(self, self->dtype == EM_FLOAT64 ? EM_FLOAT64 : EM_FLOAT32, name);
    if (!src) return NULL;
    em_tensor *mean = fold(src, &rs, EM_CPU_R_SUM, NULL, 0, name);
    em_tensor *acc = NULL;
    if (mean) {
        double *m = em_tensor_data(mean);
        for (int64_t i = 0; i < mean->numel; i++) m[i] /= (double)rs.count;
        acc = fold(src, &rs, EM_CPU_R_SQDEV, m, 0, name);
    }
    em_tensor_release(mean);
    em_tensor_release(src);
    if (acc) {
        double div = (double)rs.count - (double)correction;
        if (div < 0) div = 0;
        double *a = em_tensor_data(acc);
        for (int64_t i = 0; i < acc->numel; i++) {
            a[i] /= div;
            if (is_std) a[i] = sqrt(a[i]);
        }
    }
    return finish(acc, self->dtype, name);
}

em_tensor *em_cpu_var(em_keyset ks, em_tensor *self, em_intlist dim, int64_t correction, bool keepdim) {
    (void)ks;
    return varlike(self, dim, correction, keepdim, false, "var");
}

em_tensor *em_cpu_std(em_keyset ks, em_tensor *self, em_intlist dim, int64_t correction, bool keepdim) {
    (void)ks;
    return varlike(self, dim, correction, keepdim, true, "std");
}

/* ---- norm ---- */

/* p = 2: sqrt(sum x^2); 1: sum |x|; inf / -inf: max / min |x|; 0: the count
 * of nonzeros; other p: (sum |x|^p)^(1/p). An empty reduction gives 0. */
em_tensor *em_cpu_norm(em_keyset ks, em_tensor *self, em_scalar p, em_intlist dim, bool keepdim, em_dtype dtype) {
    (void)ks;
    const char *name = "norm";
    if (!dtype_ok(dtype, name)) return NULL;
    if (p.kind == EM_SCALAR_BOOL) { /* as torch's norm kernel */
        em_set_error(EM_ETYPE, "%s: p must be a number, got a boolean", name);
        return NULL;
    }
    /* with a dtype the input is converted first (PyTorch accepts integers then) */
    if (dtype == EM_DTYPE_NONE && !em_dtype_is_floating(self->dtype)) {
        em_set_error(EM_ETYPE, "%s: input dtype should be floating point, got %s (or give a floating dtype)",
                     name, em_dtype_name(self->dtype));
        return NULL;
    }
    if (dtype != EM_DTYPE_NONE && !em_dtype_is_floating(dtype)) {
        em_set_error(EM_ETYPE, "%s: the desired output dtype should be floating point, got %s", name,
                     em_dtype_name(dtype));
        return NULL;
    }
    em_dtype out_dt = dtype == EM_DTYPE_NONE ? self->dtype : dtype;
    double pv = em_scalar_to_double(p);
    em_cpu_rshape rs;
    if (em_cpu_reduce_dims(self, dim, keepdim, name, &rs) != EM_OK) return NULL;
    em_cpu_rop op = pv == 2 ? EM_CPU_R_SQ : pv == 1 ? EM_CPU_R_ASUM : pv == INFINITY ? EM_CPU_R_AMAX
                  : pv == -INFINITY ? EM_CPU_R_AMIN : pv == 0 ? EM_CPU_R_NNZ : EM_CPU_R_PSUM;
    em_tensor *src = as_source(self, out_dt == EM_FLOAT64 ? EM_FLOAT64 : EM_FLOAT32, name);
    if (!src) return NULL;
    em_tensor *acc = fold(src, &rs, op, NULL, pv, name);
    em_tensor_release(src);
    if (acc) {
        double *a = em_tensor_data(acc);
        for (int64_t i = 0; i < acc->numel; i++) {
            if (rs.count == 0) a[i] = 0;
            else if (op == EM_CPU_R_SQ) a[i] = sqrt(a[i]);
            else if (op == EM_CPU_R_PSUM) a[i] = pow(a[i], 1.0 / pv);
        }
    }
    return finish(acc, out_dt, name);
}

/* ---- arg-reductions ---- */

/* Note [Arg-reductions]
 * argmax/argmin and max/min over a dim return the first index (1-based, as
 * every index a user sees) of the extreme value, and NaN counts as the
 * extreme (the first NaN wins), as in PyTorch. A dim whose slices are
 * contiguous runs folds each run with the vectorised max/min loop, then scans for the first index holding that
 * value; a long run with few outputs is cut into fixed parts whose
 * (value, index) pairs are combined in order. Otherwise (the dim has a
 * stride) blocks of COLS adjacent outputs scan the rows. Same bits on any
 * number of threads. */

#define ACOLS 256
#define AGRAIN EM_CPU_GRAIN

typedef struct {
    em_dtype S;
    bool is_max;
    const char *src;
    int64_t outer, R, inner;  /* src viewed as {outer, R, inner}, R reduced */
    char *val;                /* outer * inner values, dtype S */
    int64_t *idx;             /* outer * inner indices */
    int64_t nparts;           /* split runs: parts per output */
    char *pval;               /* split runs: values and indices per (output, part) */
    int64_t *pidx;
} arg_t;

/* b better than a: NaN first, then strictly greater (max) or smaller */
#define BETTER(a, b, is_max) ((b) != (b) ? (a) == (a) : (is_max) ? (b) > (a) : (b) < (a))

#define ARG_FNS(N, T)                                                                          \
    static void arg_run_##N(const arg_t *p, const T *x, int64_t n, T *v, int64_t *i) {         \
        union { double d; int64_t l; } r;                                                      \
        em_cpu_reduce_fold_run(p->is_max ? EM_CPU_R_MAX : EM_CPU_R_MIN, p->S, x, n, &r);       \
        T best = _Generic((T)0, int64_t: (T)r.l, default: (T)r.d);                             \
        int64_t k = 0;                                                                         \
        if (best != best) {                                                                    \
            while (k < n && x[k] == x[k]) k++;                                                 \
        } else {                                                                               \
            while (k < n && x[k] != best) k++;                                                 \
        }                                                                                      \
        *v = best;                                                                             \
        *i = k;                                                                                \
    }                                                                                          \
    static void arg_cols_##N(const arg_t *p, int64_t o, int64_t j0, int64_t m) {               \
        const T *x = (const T *)p->src + o * p->R * p->inner + j0;                             \
        T best[ACOLS];                                                                         \
        int64_t bi[ACOLS];                                                                     \
        for (int64_t j = 0; j < m; j++) { best[j] = x[j]; bi[j] = 0; }                         \
        for (int64_t r = 1; r < p->R; r++) {                                                   \
            const T *row = x + r * p->inner;                                                   \
            if (p->is_max) {                                                                   \
                for (int64_t j = 0; j < m; j++) {                                              \
                    bool b = BETTER(best[j], row[j], true);                                    \
                    best[j] = b ? row[j] : best[j];                                            \
                    bi[j] = b ? r : bi[j];                                                     \
                }                                                                              \
            } else {                                                                           \
                for (int64_t j = 0; j < m; j++) {                                              \
                    bool b = BETTER(best[j], row[j], false);                                   \
                    best[j] = b ? row[j] : best[j];                                            \
                    bi[j] = b ? r : bi[j];                                                     \
                }                                                                              \
            }                                                                                  \
        }                                                                                      \
        T *ov = (T *)p->val + o * p->inner + j0;                                               \
        int64_t *oi = p->idx + o * p->inner + j0;                                              \
        memcpy(ov, best, (size_t)m * sizeof(T));                                               \
        memcpy(oi, bi, (size_t)m * sizeof(int64_t));                                           \
    }                                                                                          \
    static void arg_combine_##N(const arg_t *p, int64_t o) {                                   \
        const T *pv = (const T *)p->pval + o * p->nparts;                                      \
        const int64_t *pi = p->pidx + o * p->nparts;                                           \
        T best = pv[0];                                                                        \
        int64_t bi = pi[0];                                                                    \
        for (int64_t k = 1; k < p->nparts; k++)                                                \
            if (BETTER(best, pv[k], p->is_max)) { best = pv[k]; bi = pi[k]; }                  \
        ((T *)p->val)[o] = best;                                                               \
        p->idx[o] = bi;                                                                        \
    }
ARG_FNS(f32, float)
ARG_FNS(f64, double)
ARG_FNS(i64, int64_t)

/* inner == 1: outputs [b, e), one run each */
static void arg_runs_range(int64_t b, int64_t e, void *arg) {
    const arg_t *p = arg;
    for (int64_t o = b; o < e; o++) {
        if (p->S == EM_FLOAT32)
            arg_run_f32(p, (const float *)p->src + o * p->R, p->R, (float *)p->val + o, p->idx + o);
        else if (p->S == EM_FLOAT64)
            arg_run_f64(p, (const double *)p->src + o * p->R, p->R, (double *)p->val + o, p->idx + o);
        else
            arg_run_i64(p, (const int64_t *)p->src + o * p->R, p->R, (int64_t *)p->val + o, p->idx + o);
    }
}

/* inner == 1, few long runs: items (output, part) */
static void arg_parts_range(int64_t b, int64_t e, void *arg) {
    const arg_t *p = arg;
    for (int64_t w = b; w < e; w++) {
        int64_t o = w / p->nparts, k = w % p->nparts;
        int64_t lo = p->R * k / p->nparts, hi = p->R * (k + 1) / p->nparts;
        int64_t *pi = p->pidx + w;
        if (p->S == EM_FLOAT32)
            arg_run_f32(p, (const float *)p->src + o * p->R + lo, hi - lo, (float *)p->pval + w, pi);
        else if (p->S == EM_FLOAT64)
            arg_run_f64(p, (const double *)p->src + o * p->R + lo, hi - lo, (double *)p->pval + w, pi);
        else
            arg_run_i64(p, (const int64_t *)p->src + o * p->R + lo, hi - lo, (int64_t *)p->pval + w, pi);
        *pi += lo;
    }
}

/* inner > 1: items (outer position, column block) */
static void arg_cols_range(int64_t b, int64_t e, void *arg) {
    const arg_t *p = arg;
    int64_t nblk = (p->inner + ACOLS - 1) / ACOLS;
    for (int64_t w = b; w < e; w++) {
        int64_t o = w / nblk, j0 = (w % nblk) * ACOLS;
        int64_t m = p->inner - j0 < ACOLS ? p->inner - j0 : ACOLS;
        if (p->S == EM_FLOAT32) arg_cols_f32(p, o, j0, m);
        else if (p->S == EM_FLOAT64) arg_cols_f64(p, o, j0, m);
        else arg_cols_i64(p, o, j0, m);
    }
}

/* The extreme values (dtype of self) and their first indices (int64,
 * 0-based here; the kernels make them 1-based) over dim (0-based, wrapped;
 * dim < 0: over all elements, flattened). values
 * or indices may be NULL when not wanted. Errors name the op. */
static em_status argreduce(em_tensor *self, int dim, bool keepdim, bool is_max, const char *name,
                           em_tensor **values, em_tensor **indices) {
    if (values) *values = NULL;
    if (indices) *indices = NULL;
    int nd = self->ndim;
    em_cpu_rshape rs;
    int64_t one = dim;
    em_intlist dl = { &one, dim < 0 ? -1 : 1 };
    em_status st = em_cpu_reduce_dims(self, dl, keepdim, name, &rs);
    if (st != EM_OK) return st;
    if ((st = em_cpu_reduce_nonempty(self, &rs, dim < 0, name)) != EM_OK) return st;
    em_dtype S = exact_source(self->dtype);
    em_tensor *src = as_source(self, S, name);
    if (!src) return em_error_kind();
    arg_t p;
    memset(&p, 0, sizeof p);
    p.S = S;
    p.is_max = is_max;
    p.src = em_tensor_data(src);
    p.outer = 1;
    p.R = 1;
    p.inner = 1;
    if (dim < 0) {
        p.R = self->numel;
    } else {
        for (int d = 0; d < nd; d++) {
            if (d < dim) p.outer *= self->sizes[d];
            else if (d == dim) p.R = self->sizes[d];
            else p.inner *= self->sizes[d];
        }
    }
    em_tensor *val = em_tensor_new(rs.ond, rs.osz, S, em_cpu_dev());
    em_tensor *idx = val ? em_tensor_new(rs.ond, rs.osz, EM_INT64, em_cpu_dev()) : NULL;
    st = EM_OK;
    if (!idx) { st = EM_ENOMEM; goto done; }
    p.val = em_tensor_data(val);
    p.idx = em_tensor_data(idx);
    if (val->numel == 0) {
        /* nothing to write */
    } else if (p.inner == 1 && p.outer < 8 && p.R >= 2 * AGRAIN) {
        p.nparts = p.R / AGRAIN;
        if (p.nparts > 64) p.nparts = 64;
        int64_t n = p.outer * p.nparts;
        p.pval = malloc((size_t)n * 8);
        p.pidx = malloc((size_t)n * 8);
        if (!p.pval || !p.pidx) {
            free(p.pval);
            free(p.pidx);
            em_set_error(EM_ENOMEM, "%s: out of memory", name);
            st = EM_ENOMEM;
            goto done;
        }
        em_cpu_parallel_for_stoppable(n, 1, arg_parts_range, &p);
        if (em_cpu_interrupted(name)) { /* Note [Interrupts in kernels], way (b) */
            free(p.pval);
            free(p.pidx);
            st = EM_EINTERRUPT;
            goto done;
        }
        for (int64_t o = 0; o < p.outer; o++) {
            if (S == EM_FLOAT32) arg_combine_f32(&p, o);
            else if (S == EM_FLOAT64) arg_combine_f64(&p, o);
            else arg_combine_i64(&p, o);
        }
        free(p.pval);
        free(p.pidx);
    } else if (p.inner == 1) {
        int64_t grain = p.R >= AGRAIN ? 1 : AGRAIN / p.R;
        em_cpu_parallel_for_stoppable(p.outer, grain, arg_runs_range, &p);
    } else {
        int64_t nblk = (p.inner + ACOLS - 1) / ACOLS;
        int64_t per = p.R * (p.inner < ACOLS ? p.inner : ACOLS);
        int64_t grain = per >= AGRAIN ? 1 : AGRAIN / per;
        em_cpu_parallel_for_stoppable(p.outer * nblk, grain, arg_cols_range, &p);
    }
    if (em_cpu_interrupted(name)) { /* values and indices partly unwritten */
        st = EM_EINTERRUPT;
        goto done;
    }
    if (values) {
        *values = finish(val, self->dtype, name);
        val = NULL;
        if (!*values) { st = EM_ENOMEM; goto done; }
    }
    if (indices) {
        *indices = idx;
        idx = NULL;
    }
done:
    em_tensor_release(val);
    em_tensor_release(idx);
    em_tensor_release(src);
    if (st != EM_OK && values && *values) {
        em_tensor_release(*values);
        *values = NULL;
    }
    return st;
}

/* Index results hold 1-based positions (DESIGN.md, "API conventions"; as
 * sort/topk and gather): argreduce's fresh int64 tensor i gets + 1. */
static em_tensor *one_based(em_tensor *i) {
    if (!i) return NULL;
    int64_t *p = em_tensor_data(i);
    for (int64_t k = 0; k < i->numel; k++) p[k] += 1;
    return i;
}

em_tensor *em_cpu_argmax(em_keyset ks, em_tensor *self, const int64_t *dim, bool keepdim) {
    (void)ks;
    em_tensor *i;
    int d = dim ? em_wrap_dim(*dim, self->ndim, "argmax") : -1;
    if (dim && d < 0) return NULL;
    return argreduce(self, d, keepdim, true, "argmax", NULL, &i) == EM_OK ? one_based(i) : NULL;
}

em_tensor *em_cpu_argmin(em_keyset ks, em_tensor *self, const int64_t *dim, bool keepdim) {
    (void)ks;
    em_tensor *i;
    int d = dim ? em_wrap_dim(*dim, self->ndim, "argmin") : -1;
    if (dim && d < 0) return NULL;
    return argreduce(self, d, keepdim, false, "argmin", NULL, &i) == EM_OK ? one_based(i) : NULL;
}

/* max/min over one dim (max.dim/min.dim; prototypes in em_kernels_decl.h):
 * returns the values (self's dtype) and sets *indices to an owned int64
 * tensor of the first index of each extreme (1-based; NaN counts as the
 * extreme, as in PyTorch); dim is 0-based (negative counts from the end).
 * On error returns NULL, *indices NULL. max_all/min_all reduce everything
 * (0-dim, self's dtype); an empty input errors. */
em_tensor *em_cpu_max_dim(em_keyset ks, em_tensor *self, int64_t dim, bool keepdim, em_tensor **indices) {
    (void)ks;
    em_tensor *v;
    *indices = NULL;
    int d = em_wrap_dim(dim, self->ndim, "max");
    if (d < 0) return NULL;
    if (argreduce(self, d, keepdim, true, "max", &v, indices) != EM_OK) return NULL;
    one_based(*indices);
    return v;
}

em_tensor *em_cpu_min_dim(em_keyset ks, em_tensor *self, int64_t dim, bool keepdim, em_tensor **indices) {
    (void)ks;
    em_tensor *v;
    *indices = NULL;
    int d = em_wrap_dim(dim, self->ndim, "min");
    if (d < 0) return NULL;
    if (argreduce(self, d, keepdim, false, "min", &v, indices) != EM_OK) return NULL;
    one_based(*indices);
    return v;
}

em_tensor *em_cpu_max_all(em_keyset ks, em_tensor *self) {
    (void)ks;
    em_intlist all = { NULL, -1 };
    return maxlike(self, all, false, true, "max");
}

em_tensor *em_cpu_min_all(em_keyset ks, em_tensor *self) {
    (void)ks;
    em_intlist all = { NULL, -1 };
    return maxlike(self, all, false, false, "min");
}
