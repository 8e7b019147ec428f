/* scan.c -- scans along one dim (family reduce): cumsum, cumprod, cummax,
 * cummin, logcumsumexp, and cumprod_backward (cumprod's gradient, exact with
 * zeros in the input; autograd uses it whenever no double backward is
 * recorded).
 *
 * Every scan works on a contiguous source viewed as [outer, n, inner]
 * (n = the scanned dim's size): an inner size of 1 scans each row on its
 * own; a larger one scans blocks of up to COLS adjacent columns at once
 * (one accumulator per column), which reads memory in order. Work is split
 * over (outer, column block) pairs, so the values never depend on the
 * thread count. Accumulation follows PyTorch 1.13's CPU kernels
 * (cpu_cum_base_kernel): float32 and float64 accumulate in double,
 * float16/bfloat16 in float, integers in int64 (wrapping) -- the same
 * order, so cumsum's results are PyTorch's bit for bit.
 * cummax/cummin indices are 1-based int64 (DESIGN.md, API conventions).
 */
#pragma GCC optimize("O3", "no-trapping-math", "no-math-errno")
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/cpu/em_cpu.h"

#define COLS 256

/* ---- geometry ---- */

typedef struct {
    int64_t outer, n, inner;
} scan_geom;

/* [outer, n, inner] of a tensor of self's shape scanned along d (wrapped;
 * a 0-dim tensor is one element). */
static scan_geom geom_of(const em_tensor *self, int d) {
    scan_geom g = { 1, 1, 1 };
    if (self->ndim == 0) return g;
    for (int i = 0; i < d; i++) g.outer *= self->sizes[i];
    g.n = self->sizes[d];
    for (int i = d + 1; i < self->ndim; i++) g.inner *= self->sizes[i];
    return g;
}

static int64_t nblocks(const scan_geom *g) { return (g->inner + COLS - 1) / COLS; }

/* self as a contiguous tensor of dtype dt (a new reference). */
static em_tensor *as_contig(em_tensor *self, em_dtype dt, const char *op) {
    if (self->dtype == dt && self->is_contiguous) return em_tensor_retain(self);
    return em_cpu_to_dtype(self, dt, op);
}

/* ---- cumsum / cumprod: typed loops ---- */

/* Loads into the accumulator type and stores back. */
#define LDA_f32(x) ((double)(x))
#define LDA_f64(x) (x)
#define LDA_f16(x) em_half_to_float(x)
#define LDA_bf16(x) em_bf16_to_float(x)
#define LDA_i(x) ((uint64_t)(int64_t)(x))
#define STA_f32(v) ((float)(v))
#define STA_f64(v) (v)
#define STA_f16(v) em_float_to_half(v)
#define STA_bf16(v) em_float_to_bf16(v)

#define ADD(a, b) ((a) + (b))
#define MUL(a, b) ((a) * (b))

typedef struct {
    const char *x;
    char *y;
    scan_geom g;
} scan_ctx;

/* One task = (outer row, column block): scans n steps of up to COLS
 * columns. FN_N: the loop of dtype N with fold OP. */
#define DEF_SCAN(OPN, OP, ID, N, T, A, LD, ST)                                                     \
    CLONE_##N static void scan_##OPN##_##N(int64_t begin, int64_t end, void *ctx_) {              \
        const scan_ctx *c = ctx_;                                                                  \
        const int64_t n = c->g.n, inner = c->g.inner, nb = nblocks(&c->g);                         \
        for (int64_t t = begin; t < end; t++) {                                                    \
            int64_t o = t / nb, j0 = (t % nb) * COLS;                                              \
            int64_t m = inner - j0 < COLS ? inner - j0 : COLS;                                     \
            const T *restrict x = (const T *)c->x + o * n * inner + j0;                            \
            T *restrict y = (T *)c->y + o * n * inner + j0;                                        \
            if (inner == 1) {                                                                      \
                A acc = (A)(ID);                                                                   \
                for (int64_t i = 0; i < n; i++) {                                                  \
                    acc = OP(acc, LD(x[i]));                                                       \
                    y[i] = ST(acc);                                                                \
                }                                                                                  \
                continue;                                                                          \
            }                                                                                      \
            A acc[COLS];                                                                           \
            for (int64_t j = 0; j < m; j++) acc[j] = (A)(ID);                                      \
            for (int64_t i = 0; i < n; i++) {                                                      \
                const T *restrict xr = x + i * inner;                                              \
                T *restrict yr = y + i * inner;                                                    \
                for (int64_t j = 0; j < m; j++) {                                                  \
                    acc[j] = OP(acc[j], LD(xr[j]));                                                \
                    yr[j] = ST(acc[j]);                                                            \
                }                                                                                  \
            }                                                                                      \
        }                                                                                          \
    }

#define DEF_SCANS(OPN, OP, ID)                                                                     \
    DEF_SCAN(OPN, OP, ID, f32, float, double, LDA_f32, STA_f32)                                    \
    DEF_SCAN(OPN, OP, ID, f64, double, double, LDA_f64, STA_f64)                                   \
    DEF_SCAN(OPN, OP, ID, f16, em_half, float, LDA_f16, STA_f16)                                   \
    DEF_SCAN(OPN, OP, ID, bf16, em_bfloat16, float, LDA_bf16, STA_bf16)                            \
    DEF_SCAN(OPN, OP, ID, b, bool, uint64_t, LDA_i, EM_ST_b)                                       \
    DEF_SCAN(OPN, OP, ID, u8, uint8_t, uint64_t, LDA_i, EM_ST_u8)                                  \
    DEF_SCAN(OPN, OP, ID, i8, int8_t, uint64_t, LDA_i, EM_ST_i8)                                   \
    DEF_SCAN(OPN, OP, ID, i32, int32_t, uint64_t, LDA_i, EM_ST_i32)                                \
    DEF_SCAN(OPN, OP, ID, i64, int64_t, uint64_t, LDA_i, EM_ST_i64)

DEF_SCANS(sum, ADD, 0)
DEF_SCANS(prod, MUL, 1)

/* [dtype] in em_dtype order */
#define SCAN_TABLE(OPN)                                                                            \
    { scan_##OPN##_b, scan_##OPN##_u8, scan_##OPN##_i8, scan_##OPN##_i32, scan_##OPN##_i64,        \
      scan_##OPN##_f16, scan_##OPN##_bf16, scan_##OPN##_f32, scan_##OPN##_f64 }
static const em_cpu_range_fn sum_loops[EM_DTYPE_COUNT] = SCAN_TABLE(sum);
static const em_cpu_range_fn prod_loops[EM_DTYPE_COUNT] = SCAN_TABLE(prod);

/* Grain in tasks: about EM_CPU_GRAIN elements per chunk. */
static int64_t task_grain(const scan_geom *g) {
    int64_t per = g->n * (g->inner < COLS ? g->inner : COLS);
    int64_t gr = EM_CPU_GRAIN / (per > 0 ? per : 1);
    return gr > 0 ? gr : 1;
}

/* cumsum/cumprod: the result dtype is dtype when given, else self's for
 * floating self and int64 for integers and bool (PyTorch); self is cast
 * to it first. */
static em_tensor *cum_fold(em_tensor *self, int64_t dim, em_dtype dtype, bool prod, const char *op) {
    int d = em_wrap_dim(dim, self->ndim, op);
    if (d < 0) return NULL;
    if (dtype != EM_DTYPE_NONE && (dtype < 0 || dtype >= EM_DTYPE_COUNT)) {
        em_set_error(EM_ETYPE, "%s: bad dtype %d", op, (int)dtype);
        return NULL;
    }
    em_dtype out_dt = dtype != EM_DTYPE_NONE ? dtype : em_dtype_is_floating(self->dtype) ? self->dtype : EM_INT64;
    em_tensor *src = as_contig(self, out_dt, op);
    if (!src) return NULL;
    em_tensor *out = em_tensor_new(self->ndim, self->sizes, out_dt, em_cpu_dev());
    if (!out) {
        em_tensor_release(src);
        return NULL;
    }
    scan_ctx c = { em_tensor_data(src), em_tensor_data(out), geom_of(self, d) };
    if (self->numel > 0) {
        int64_t tasks = c.g.outer * nblocks(&c.g);
        em_cpu_parallel_for(tasks, task_grain(&c.g), (prod ? prod_loops : sum_loops)[out_dt], &c);
    }
    em_tensor_release(src);
    return out;
}

em_tensor *em_cpu_cumsum(em_keyset ks, em_tensor *self, int64_t dim, em_dtype dtype) {
    (void)ks;
    return cum_fold(self, dim, dtype, false, "cumsum");
}

em_tensor *em_cpu_cumprod(em_keyset ks, em_tensor *self, int64_t dim, em_dtype dtype) {
    (void)ks;
    return cum_fold(self, dim, dtype, true, "cumprod");
}

/* ---- cummax / cummin ---- */

/* Running max (min) with 1-based indices, PyTorch's cummax_helper: a value
 * >= (<=) the running one, or NaN, takes over (so the last of ties and the
 * last NaN win); once NaN is the running value only a NaN replaces it. */
static em_tensor *cum_ext(em_tensor *self, int64_t dim, bool max, em_tensor **indices, const char *op) {
    *indices = NULL;
    int d = em_wrap_dim(dim, self->ndim, op);
    if (d < 0) return NULL;
    em_tensor *src = as_contig(self, self->dtype, op);
    if (!src) return NULL;
    em_tensor *v = em_tensor_new(self->ndim, self->sizes, self->dtype, em_cpu_dev());
    em_tensor *ix = v ? em_tensor_new(self->ndim, self->sizes, EM_INT64, em_cpu_dev()) : NULL;
    if (!ix) {
        em_tensor_release(src);
        em_tensor_release(v);
        return NULL;
    }
    scan_geom g = geom_of(self, d);
    const char *x = em_tensor_data(src);
    char *vd = em_tensor_data(v);
    int64_t *id = em_tensor_data(ix);
    const size_t es = em_dtype_size(self->dtype);
    const bool fl = em_dtype_is_floating(self->dtype);
    for (int64_t o = 0; o < g.outer; o++)
        for (int64_t j = 0; j < g.inner; j++) {
            int64_t best = -1;
            double bf = 0;
            int64_t bi = 0;
            for (int64_t i = 0; i < g.n; i++) {
                int64_t off = (o * g.n + i) * g.inner + j;
                const char *e = x + off * (int64_t)es;
                bool take;
                if (fl) {
                    double f = em_load_as_double(e, self->dtype);
                    take = best < 0 || isnan(f) || (max ? f >= bf : f <= bf);
                    if (take) bf = f;
                } else {
                    int64_t k = em_load_as_int64(e, self->dtype);
                    take = best < 0 || (max ? k >= bi : k <= bi);
                    if (take) bi = k;
                }
                if (take) best = i;
                int64_t bo = (o * g.n + best) * g.inner + j;
                memcpy(vd + off * (int64_t)es, x + bo * (int64_t)es, es);
                id[off] = best + 1;
            }
        }
    em_tensor_release(src);
    *indices = ix;
    return v;
}

em_tensor *em_cpu_cummax(em_keyset ks, em_tensor *self, int64_t dim, em_tensor **indices) {
    (void)ks;
    return cum_ext(self, dim, true, indices, "cummax");
}

em_tensor *em_cpu_cummin(em_keyset ks, em_tensor *self, int64_t dim, em_tensor **indices) {
    (void)ks;
    return cum_ext(self, dim, false, indices, "cummin");
}

/* ---- logcumsumexp ---- */

/* log(exp(x) + exp(y)) as PyTorch's log_add_exp_helper: NaN propagates, and
 * equal infinities (inf + inf, -inf + -inf) stay as they are. */
static double log_add_exp(double x, double y) {
    double lo = isnan(y) ? y : fmin(x, y), hi = isnan(y) ? y : fmax(x, y);
    if (isnan(x)) lo = hi = x;
    if (lo != hi || isfinite(lo)) return log1p(exp(lo - hi)) + hi;
    return x;
}

em_tensor *em_cpu_logcumsumexp(em_keyset ks, em_tensor *self, int64_t dim) {
    (void)ks;
    const char *op = "logcumsumexp";
    if (!em_dtype_is_floating(self->dtype)) {
        em_set_error(EM_ETYPE, "%s: self must have a floating dtype, got %s", op, em_dtype_name(self->dtype));
        return NULL;
    }
    int d = em_wrap_dim(dim, self->ndim, op);
    if (d < 0) return NULL;
    em_tensor *src = as_contig(self, self->dtype, op);
    if (!src) return NULL;
    em_tensor *out = em_tensor_new(self->ndim, self->sizes, self->dtype, em_cpu_dev());
    if (!out) {
        em_tensor_release(src);
        return NULL;
    }
    scan_geom g = geom_of(self, d);
    const char *x = em_tensor_data(src);
    char *y = em_tensor_data(out);
    const int64_t es = (int64_t)em_dtype_size(self->dtype);
    for (int64_t o = 0; o < g.outer; o++)
        for (int64_t j = 0; j < g.inner; j++) {
            double acc = -INFINITY;
            for (int64_t i = 0; i < g.n; i++) {
                int64_t off = ((o * g.n + i) * g.inner + j) * es;
                acc = log_add_exp(em_load_as_double(x + off, self->dtype), acc);
                em_store_from_double(y + off, self->dtype, acc);
            }
        }
    em_tensor_release(src);
    return out;
}

/* ---- cumprod_backward ---- */

/* The gradient of result = cumprod(self, dim) for grad, O(n) per slice
 * and exact with zeros in self: before the slice's first zero z,
 * sum_{j>=k} grad_j result_j / self_k; at z, sum_{j>=z} grad_j times the
 * product of self_0..self_j without self_z; after z, 0. Computed in double,
 * returned in self's dtype (floating). Autograd calls it when no double
 * backward is recorded (see em_ag_fn_cumprod_backward). */
em_tensor *em_cpu_cumprod_backward(em_keyset ks, em_tensor *grad, em_tensor *self, int64_t dim, em_tensor *result) {
    (void)ks;
    const char *op = "cumprod_backward";
    if (!em_dtype_is_floating(self->dtype)) {
        em_set_error(EM_ETYPE, "%s: self must have a floating dtype, got %s", op, em_dtype_name(self->dtype));
        return NULL;
    }
    const em_tensor *others[2] = { grad, result };
    const char *names[2] = { "grad", "result" };
    for (int k = 0; k < 2; k++) {
        bool same = others[k]->ndim == self->ndim;
        for (int i = 0; same && i < self->ndim; i++) same = others[k]->sizes[i] == self->sizes[i];
        if (!same) {
            char a[EM_SHAPE_STR_MAX], b[EM_SHAPE_STR_MAX];
            em_set_error(EM_ESHAPE, "%s: %s %s must have self's shape %s", op, names[k],
                         em_shape_str(others[k]->ndim, others[k]->sizes, a, sizeof a),
                         em_shape_str(self->ndim, self->sizes, b, sizeof b));
            return NULL;
        }
    }
    int d = em_wrap_dim(dim, self->ndim, op);
    if (d < 0) return NULL;
    em_tensor *x = as_contig(self, EM_FLOAT64, op);
    em_tensor *g = x ? as_contig(grad, EM_FLOAT64, op) : NULL;
    em_tensor *r = g ? as_contig(result, EM_FLOAT64, op) : NULL;
    em_tensor *gi = r ? em_tensor_new(self->ndim, self->sizes, EM_FLOAT64, em_cpu_dev()) : NULL;
    em_tensor *out = NULL;
    if (gi) {
        scan_geom s = geom_of(self, d);
        const double *xd = em_tensor_data(x), *gd = em_tensor_data(g), *rd = em_tensor_data(r);
        double *o = em_tensor_data(gi);
        for (int64_t a = 0; a < s.outer; a++)
            for (int64_t j = 0; j < s.inner; j++) {
#define AT(i) (((a) * s.n + (i)) * s.inner + j)
                int64_t z = 0;
                while (z < s.n && xd[AT(z)] != 0) z++;
                double acc = 0; /* sum_{k<=j<z} grad_j result_j, from the back */
                for (int64_t k = z - 1; k >= 0; k--) {
                    acc += gd[AT(k)] * rd[AT(k)];
                    o[AT(k)] = acc / xd[AT(k)];
                }
                if (z < s.n) {
                    double before = z > 0 ? rd[AT(z - 1)] : 1.0, q = 1.0, sum = 0;
                    for (int64_t k = z; k < s.n; k++) {
                        if (k > z) q *= xd[AT(k)];
                        sum += gd[AT(k)] * q;
                    }
                    o[AT(z)] = before * sum;
                    for (int64_t k = z + 1; k < s.n; k++) o[AT(k)] = 0;
                }
#undef AT
            }
        out = self->dtype == EM_FLOAT64 ? em_tensor_retain(gi) : em_cpu_to_dtype(gi, self->dtype, op);
    }
    em_tensor_release(x);
    em_tensor_release(g);
    em_tensor_release(r);
    em_tensor_release(gi);
    return out;
}
