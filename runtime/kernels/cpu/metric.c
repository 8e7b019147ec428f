/* metric.c -- the metric family's kernels: pairwise p-norm distances
 * (_pdist_forward, _cdist_forward, the matrix-product path _euclidean_dist)
 * and the backward ops of the first two.
 *
 * Note [Distance kernels]
 * The composites pdist and cdist (composite_metric.c) check the arguments,
 * broadcast cdist's batch dims and pick the path as PyTorch 1.13 does; the
 * kernels here take x1 {*, r1, m} and x2 {*, r2, m} with equal batch dims
 * (pdist: one {n, m} matrix), float32 or float64 (PyTorch's CPU kernels
 * have no half types either). The distance and its gradient follow
 * PyTorch's five cases of p: 0 (count of differing coordinates, zero
 * gradient), 1, p < 2, 2, inf, and the general p; a gradient is 0 where the
 * distance is 0. Every kernel works row by row (one output row, or one
 * gradient row summed over the other side's rows), so the rows run in
 * parallel through the pool without write races.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/cpu/em_cpu.h"

/* O3: the coordinate loops (the gradient terms' selects, the 8-lane sums)
 * vectorise, as in norm.c and index.c. */
#pragma GCC optimize("O3")

/* ---- the five cases of p ---- */

enum { PM_ZERO, PM_ONE, PM_LT2, PM_TWO, PM_INF, PM_GEN };

static int p_mode(double p) {
    return p == 0 ? PM_ZERO : p == 1 ? PM_ONE : p < 2 ? PM_LT2 : p == 2 ? PM_TWO : isinf(p) ? PM_INF : PM_GEN;
}

static double sgn(double d) { return isnan(d) ? d : (d > 0) - (d < 0); } /* NaN stays NaN, as PyTorch's */

/* The distance between rows a and b (m coordinates), accumulated in T.
 * p = inf: a NaN difference is skipped by cdist's max (PyTorch's scalar
 * max(agg, d)) and kept by pdist's (its vector maximum): nanmax. */
#define ABS_f32(x) fabsf(x)
#define ABS_f64(x) fabs(x)
#define DEF_DIST(SUF, T)                                                                            \
    static T dist_##SUF(const T *a, const T *b, int64_t m, int mode, double p, bool nanmax) {                    \
        T acc = 0;                                                                                  \
        switch (mode) {                                                                             \
        case PM_ZERO:                                                                               \
            for (int64_t k = 0; k < m; k++) acc += a[k] - b[k] != a[k] - b[k] ? (T)NAN : (T)(a[k] != b[k]); \
            return acc;                                                                             \
        case PM_ONE: { /* 8 lanes (as PyTorch's vectorised sum), then the tail */                 \
            T l[8] = { 0 };                                                                         \
            int64_t k = 0;                                                                          \
            for (; k + 8 <= m; k += 8)                                                              \
                for (int q = 0; q < 8; q++) l[q] += ABS_##SUF(a[k + q] - b[k + q]);                 \
            acc = ((l[0] + l[1]) + (l[2] + l[3])) + ((l[4] + l[5]) + (l[6] + l[7]));                \
            for (; k < m; k++) acc += ABS_##SUF(a[k] - b[k]);                                       \
            return acc;                                                                             \
        }                                                                                           \
        case PM_TWO:                                                                                \
            for (int64_t k = 0; k < m; k++) { T d = a[k] - b[k]; acc += d * d; }                    \
            return (T)sqrt((double)acc);                                                            \
        case PM_INF:                                                                                \
            for (int64_t k = 0; k < m; k++) {                                                       \
                T d = (T)fabs((double)(a[k] - b[k]));                                               \
                if (d > acc || (nanmax && isnan(d))) acc = d;                                       \
            }                                                                                       \
            return acc;                                                                             \
        default:                                                                                    \
            for (int64_t k = 0; k < m; k++) acc += (T)pow(fabs((double)(a[k] - b[k])), p);         \
            return (T)pow((double)acc, 1.0 / p);                                                    \
        }                                                                                           \
    }
DEF_DIST(f32, float)
DEF_DIST(f64, double)

/* d(dist)/d(a_k) * g for one coordinate difference d = a_k - b_k, as
 * PyTorch's backward calculators (zero where the distance is 0). */
static inline double grad_term(double d, double g, double dist, int mode, double p) {
    switch (mode) {
    case PM_ZERO: return 0;
    case PM_ONE: return g * sgn(d);
    case PM_LT2:
        if (dist == 0 || (d == 0 && p < 1)) return 0;
        return sgn(d) * pow(fabs(d), p - 1) * g / pow(dist, p - 1);
    case PM_TWO: return dist == 0 ? 0 : g * d / dist;
    case PM_INF: { /* PyTorch: 1 - min(1, ceil(||d| - dist|)), NaN where that is NaN */
        double t = fabs(fabs(d) - dist);
        return isnan(t) ? NAN : t == 0 ? g * sgn(d) : 0;
    }
    default: return dist == 0 ? 0 : d * pow(fabs(d), p - 2) * g / pow(dist, p - 1);
    }
}

/* ---- argument checks ---- */

static bool check_float(const char *op, const char *arg, const em_tensor *t) {
    if (t->dtype == EM_FLOAT32 || t->dtype == EM_FLOAT64) return true;
    em_set_error(EM_ETYPE, "%s: %s must be float32 or float64 (got %s)", op, arg, em_dtype_name(t->dtype));
    return false;
}

static bool check_p(const char *op, double p) {
    if (p >= 0) return true;
    em_set_error(EM_EVALUE, "%s: p must be non-negative (got %g)", op, p);
    return false;
}

/* x1 {*, r1, m} and x2 {*, r2, m}: the same dtype, batch dims and m. */
static bool check_pair(const char *op, const em_tensor *x1, const em_tensor *x2) {
    char b1[EM_SHAPE_STR_MAX], b2[EM_SHAPE_STR_MAX];
    if (!check_float(op, "x1", x1) || !check_float(op, "x2", x2)) return false;
    if (x1->dtype != x2->dtype) {
        em_set_error(EM_ETYPE, "%s: x1 and x2 must have one dtype (got %s and %s)", op,
                     em_dtype_name(x1->dtype), em_dtype_name(x2->dtype));
        return false;
    }
    bool ok = x1->ndim >= 2 && x1->ndim == x2->ndim && x1->sizes[x1->ndim - 1] == x2->sizes[x2->ndim - 1];
    for (int d = 0; ok && d < x1->ndim - 2; d++) ok = x1->sizes[d] == x2->sizes[d];
    if (!ok) {
        em_set_error(EM_ESHAPE, "%s: x1 %s and x2 %s must be {*, r1, m} and {*, r2, m} with the same batch dims",
                     op, em_shape_str(x1->ndim, x1->sizes, b1, sizeof b1),
                     em_shape_str(x2->ndim, x2->sizes, b2, sizeof b2));
        return false;
    }
    return true;
}

/* t itself (retained) when contiguous, else a contiguous copy. */
static em_tensor *dense(em_tensor *t, const char *op) {
    return t->is_contiguous ? em_tensor_retain(t) : em_cpu_to_dtype(t, t->dtype, op);
}

static int64_t grain_for(int64_t work_per_item) {
    int64_t g = EM_CPU_GRAIN / (work_per_item > 0 ? work_per_item : 1);
    return g > 0 ? g : 1;
}

/* ---- cdist: x1 {B, r1, m}, x2 {B, r2, m} as flat arrays ---- */

typedef struct {
    const char *a, *b, *g, *dist;   /* a: the side whose gradient is made */
    char *out;
    int64_t r1, r2, m;
    int mode;
    double p;
    em_dtype dt;
} cd_ctx;

/* out row (batch, i) = distances from a's row i to every row of b. */
static void cdist_rows(int64_t begin, int64_t end, void *vctx) {
    cd_ctx *c = vctx;
    for (int64_t row = begin; row < end; row++) {
        int64_t bi = row / c->r1;
        if (c->dt == EM_FLOAT32) {
            const float *a = (const float *)c->a + row * c->m, *b = (const float *)c->b + bi * c->r2 * c->m;
            float *o = (float *)c->out + row * c->r2;
            for (int64_t j = 0; j < c->r2; j++) o[j] = dist_f32(a, b + j * c->m, c->m, c->mode, c->p, false);
        } else {
            const double *a = (const double *)c->a + row * c->m, *b = (const double *)c->b + bi * c->r2 * c->m;
            double *o = (double *)c->out + row * c->r2;
            for (int64_t j = 0; j < c->r2; j++) o[j] = dist_f64(a, b + j * c->m, c->m, c->mode, c->p, false);
        }
    }
}

/* Adds to o (m coordinates) the gradient term of every coordinate of
 * a - b for one pair with gradient g and distance dist (PyTorch's backward
 * calculators, zero where the distance is 0); the per-pair factors are
 * taken out of the coordinate loop, which the simple cases vectorise. */
#define DEF_PAIR_GRAD(SUF, T)                                                                       \
    static inline void pair_grad_##SUF(T *restrict o, const T *restrict a, const T *restrict b, int64_t m, \
                                       double g, double dist,                                       \
                                       int mode, double p) {                                        \
        switch (mode) {                                                                             \
        case PM_ZERO: return;                                                                       \
        case PM_ONE: {                                                                              \
            T gg = (T)g;                                                                            \
            for (int64_t k = 0; k < m; k++) {                                                       \
                T d = a[k] - b[k];                                                                  \
                T sg = (T)((d > 0) - (d < 0));                                                      \
                o[k] += gg * (d != d ? d : sg);                                                     \
            }                                                                                       \
            return;                                                                                 \
        }                                                                                           \
        case PM_TWO: {                                                                              \
            if (dist == 0) return;                                                                  \
            T gg = (T)g, dd = (T)dist; /* PyTorch's grad * diff / dist, in T */                     \
            for (int64_t k = 0; k < m; k++) o[k] += gg * (a[k] - b[k]) / dd;                        \
            return;                                                                                 \
        }                                                                                           \
        default:                                                                                    \
            for (int64_t k = 0; k < m; k++) o[k] += (T)grad_term((T)(a[k] - b[k]), g, dist, mode, p); \
        }                                                                                           \
    }
DEF_PAIR_GRAD(f32, float)
DEF_PAIR_GRAD(f64, double)

/* gradient row (batch, i) of a: sum over b's rows j of the pair terms of
 * (a_i - b_j, g[i, j], dist[i, j]); g and dist are {B, r1, r2} contiguous. */
#define DEF_CDIST_GRAD(SUF, T)                                                                      \
    static void cdist_grad_row_##SUF(const cd_ctx *c, int64_t row) {                                \
        int64_t bi = row / c->r1;                                                                   \
        const T *a = (const T *)c->a + row * c->m, *b = (const T *)c->b + bi * c->r2 * c->m;        \
        const T *g = (const T *)c->g + row * c->r2, *dist = (const T *)c->dist + row * c->r2;       \
        T *o = (T *)c->out + row * c->m;                                                            \
        for (int64_t k = 0; k < c->m; k++) o[k] = 0;                                                \
        for (int64_t j = 0; j < c->r2; j++)                                                         \
            pair_grad_##SUF(o, a, b + j * c->m, c->m, g[j], dist[j], c->mode, c->p);                \
    }
DEF_CDIST_GRAD(f32, float)
DEF_CDIST_GRAD(f64, double)

static void cdist_grad_rows(int64_t begin, int64_t end, void *vctx) {
    cd_ctx *c = vctx;
    for (int64_t row = begin; row < end; row++) {
        if (c->dt == EM_FLOAT32) cdist_grad_row_f32(c, row);
        else cdist_grad_row_f64(c, row);
    }
}

/* Batch count and the output sizes {*, r1, r2} of a checked pair. */
static int64_t pair_sizes(const em_tensor *x1, const em_tensor *x2, int64_t *sizes) {
    int64_t B = 1;
    for (int d = 0; d < x1->ndim - 2; d++) B *= (sizes[d] = x1->sizes[d]);
    sizes[x1->ndim - 2] = x1->sizes[x1->ndim - 2];
    sizes[x1->ndim - 1] = x2->sizes[x2->ndim - 2];
    return B;
}

em_tensor *em_cpu__cdist_forward(em_keyset ks, em_tensor *x1, em_tensor *x2, double p) {
    (void)ks;
    const char *op = "_cdist_forward";
    if (!check_pair(op, x1, x2) || !check_p(op, p)) return NULL;
    int64_t sizes[EM_MAX_DIMS];
    int64_t B = pair_sizes(x1, x2, sizes);
    em_tensor *out = em_tensor_new(x1->ndim, sizes, x1->dtype, em_cpu_dev());
    em_tensor *a = out ? dense(x1, op) : NULL, *b = a ? dense(x2, op) : NULL;
    if (!b) goto fail;
    cd_ctx c = { .a = em_tensor_data(a), .b = em_tensor_data(b), .out = em_tensor_data(out),
                 .r1 = sizes[x1->ndim - 2], .r2 = sizes[x1->ndim - 1], .m = x1->sizes[x1->ndim - 1],
                 .mode = p_mode(p), .p = p, .dt = x1->dtype };
    em_cpu_parallel_for(B * c.r1, grain_for(c.r2 * c.m), cdist_rows, &c);
    em_tensor_release(a);
    em_tensor_release(b);
    return out;
fail:
    em_tensor_release(a);
    em_tensor_release(out);
    return NULL;
}

/* grad and cdist {*, r1, r2} as x1 and x2 make; the result is shaped like x1. */
em_tensor *em_cpu__cdist_backward(em_keyset ks, em_tensor *grad, em_tensor *x1, em_tensor *x2, double p,
                                  em_tensor *cdist) {
    (void)ks;
    const char *op = "_cdist_backward";
    char b1[EM_SHAPE_STR_MAX], b2[EM_SHAPE_STR_MAX];
    if (!check_pair(op, x1, x2) || !check_p(op, p)) return NULL;
    int64_t sizes[EM_MAX_DIMS];
    int64_t B = pair_sizes(x1, x2, sizes);
    const em_tensor *gd[2] = { grad, cdist };
    for (int i = 0; i < 2; i++) {
        if (gd[i]->dtype != x1->dtype || gd[i]->ndim != x1->ndim ||
            memcmp(gd[i]->sizes, sizes, sizeof(int64_t) * (size_t)x1->ndim) != 0) {
            em_set_error(EM_ESHAPE, "%s: %s must be %s %s (got %s %s)", op, i ? "cdist" : "grad",
                         em_dtype_name(x1->dtype), em_shape_str(x1->ndim, sizes, b1, sizeof b1),
                         em_dtype_name(gd[i]->dtype), em_shape_str(gd[i]->ndim, gd[i]->sizes, b2, sizeof b2));
            return NULL;
        }
    }
    em_tensor *out = em_tensor_new(x1->ndim, x1->sizes, x1->dtype, em_cpu_dev());
    em_tensor *t[4] = { NULL, NULL, NULL, NULL };
    em_tensor *src[4] = { x1, x2, grad, cdist };
    for (int i = 0; out && i < 4; i++)
        if (!(t[i] = dense(src[i], op))) {
            em_tensor_release(out);
            out = NULL;
        }
    if (out) {
        cd_ctx c = { .a = em_tensor_data(t[0]), .b = em_tensor_data(t[1]), .g = em_tensor_data(t[2]),
                     .dist = em_tensor_data(t[3]), .out = em_tensor_data(out), .r1 = sizes[x1->ndim - 2],
                     .r2 = sizes[x1->ndim - 1], .m = x1->sizes[x1->ndim - 1], .mode = p_mode(p), .p = p,
                     .dt = x1->dtype };
        em_cpu_parallel_for(B * c.r1, grain_for(c.r2 * c.m), cdist_grad_rows, &c);
    }
    for (int i = 0; i < 4; i++) em_tensor_release(t[i]);
    return out;
}

/* ---- _euclidean_dist: one GEMM per batch, as PyTorch's ---- */

/* PyTorch's formulation, for the same rounding: [-2 a, |a|^2, 1] times
 * [b, 1, |b|^2]^T (K = m + 2), then max(., 0) and the square root. */
#define DEF_ED_AUG(SUF, T)                                                                          \
    static void ed_augment_##SUF(const T *x, int64_t r, int64_t m, bool left, T *out) {             \
        for (int64_t i = 0; i < r; i++) {                                                           \
            const T *xi = x + i * m;                                                                \
            T *o = out + i * (m + 2), n = 0;                                                        \
            for (int64_t k = 0; k < m; k++) { n += xi[k] * xi[k]; o[k] = left ? -2 * xi[k] : xi[k]; } \
            o[m] = left ? n : 1;                                                                    \
            o[m + 1] = left ? 1 : n;                                                                \
        }                                                                                           \
    }                                                                                               \
    static void ed_finish_##SUF(T *o, int64_t n) {                                                  \
        for (int64_t i = 0; i < n; i++) o[i] = o[i] > 0 ? (T)sqrt((double)o[i]) : (isnan(o[i]) ? o[i] : 0); \
    }
DEF_ED_AUG(f32, float)
DEF_ED_AUG(f64, double)

em_tensor *em_cpu__euclidean_dist(em_keyset ks, em_tensor *x1, em_tensor *x2) {
    (void)ks;
    const char *op = "_euclidean_dist";
    if (!check_pair(op, x1, x2)) return NULL;
    int64_t sizes[EM_MAX_DIMS];
    int64_t B = pair_sizes(x1, x2, sizes);
    int64_t r1 = sizes[x1->ndim - 2], r2 = sizes[x1->ndim - 1], m = x1->sizes[x1->ndim - 1], K = m + 2;
    em_dtype dt = x1->dtype;
    size_t es = em_dtype_size(dt);
    em_tensor *out = em_tensor_new(x1->ndim, sizes, dt, em_cpu_dev());
    em_tensor *a = out ? dense(x1, op) : NULL, *b = a ? dense(x2, op) : NULL;
    char *wa = b ? malloc((size_t)(r1 * K) * es + 1) : NULL, *wb = wa ? malloc((size_t)(r2 * K) * es + 1) : NULL;
    em_status st = wb ? EM_OK : EM_ENOMEM;
    if (b && !wb) em_set_error(EM_ENOMEM, "%s: out of memory", op);
    /* BLAS outside any parallel region (DESIGN decision 9) */
    for (int64_t bi = 0; bi < B && st == EM_OK; bi++) {
        const char *ab = (const char *)em_tensor_data(a) + (size_t)(bi * r1 * m) * es;
        const char *bb = (const char *)em_tensor_data(b) + (size_t)(bi * r2 * m) * es;
        char *ob = (char *)em_tensor_data(out) + (size_t)(bi * r1 * r2) * es;
        if (dt == EM_FLOAT32) {
            ed_augment_f32((const float *)ab, r1, m, true, (float *)wa);
            ed_augment_f32((const float *)bb, r2, m, false, (float *)wb);
        } else {
            ed_augment_f64((const double *)ab, r1, m, true, (double *)wa);
            ed_augment_f64((const double *)bb, r2, m, false, (double *)wb);
        }
        st = em_cpu_gemm(dt, wa, r1, K, K, 1, wb, r2, 1, K, ob, op);
    }
    if (st == EM_OK) {
        if (dt == EM_FLOAT32) ed_finish_f32(em_tensor_data(out), out->numel);
        else ed_finish_f64(em_tensor_data(out), out->numel);
    }
    free(wa);
    free(wb);
    em_tensor_release(a);
    em_tensor_release(b);
    if (st != EM_OK) {
        em_tensor_release(out);
        return NULL;
    }
    return out;
}

/* ---- pdist: the rows of one {n, m} matrix, pairs i < j in row order ---- */

typedef struct {
    const char *x, *g, *dist;
    char *out;
    int64_t n, m;
    int mode;
    double p;
    em_dtype dt;
} pd_ctx;

/* Position of pair (i, j), i < j, in pdist's output. */
static inline int64_t pair_index(int64_t i, int64_t j, int64_t n) { return i * (2 * n - i - 1) / 2 + (j - i - 1); }

static void pdist_rows(int64_t begin, int64_t end, void *vctx) {
    pd_ctx *c = vctx;
    for (int64_t i = begin; i < end; i++) {
        int64_t k0 = pair_index(i, i + 1, c->n);
        for (int64_t j = i + 1; j < c->n; j++) {
            if (c->dt == EM_FLOAT32)
                ((float *)c->out)[k0 + j - i - 1] =
                    dist_f32((const float *)c->x + i * c->m, (const float *)c->x + j * c->m, c->m, c->mode, c->p, true);
            else
                ((double *)c->out)[k0 + j - i - 1] =
                    dist_f64((const double *)c->x + i * c->m, (const double *)c->x + j * c->m, c->m, c->mode, c->p, true);
        }
    }
}

/* gradient row i: sum over j != i of the term of pair (min, max). */
#define DEF_PDIST_GRAD(SUF, T)                                                                      \
    static void pdist_grad_row_##SUF(const pd_ctx *c, int64_t i) {                                  \
        const T *x = (const T *)c->x, *g = (const T *)c->g, *dist = (const T *)c->dist;             \
        T *o = (T *)c->out + i * c->m;                                                              \
        for (int64_t k = 0; k < c->m; k++) o[k] = 0;                                                \
        for (int64_t j = 0; j < c->n; j++) {                                                        \
            if (j == i) continue;                                                                   \
            int64_t q = i < j ? pair_index(i, j, c->n) : pair_index(j, i, c->n);                    \
            pair_grad_##SUF(o, x + i * c->m, x + j * c->m, c->m, g[q], dist[q], c->mode, c->p);     \
        }                                                                                           \
    }
DEF_PDIST_GRAD(f32, float)
DEF_PDIST_GRAD(f64, double)

static void pdist_grad_rows(int64_t begin, int64_t end, void *vctx) {
    pd_ctx *c = vctx;
    for (int64_t i = begin; i < end; i++) {
        if (c->dt == EM_FLOAT32) pdist_grad_row_f32(c, i);
        else pdist_grad_row_f64(c, i);
    }
}

static bool check_pdist_input(const char *op, const em_tensor *self, double p) {
    if (self->ndim != 2) {
        em_set_error(EM_ESHAPE, "%s: self must be a 2-d tensor {n, m} (got %d-d)", op, self->ndim);
        return false;
    }
    if (!self->is_contiguous) { /* as PyTorch's; pdist passes a contiguous copy */
        em_set_error(EM_EVALUE, "%s: self must be contiguous", op);
        return false;
    }
    return check_float(op, "self", self) && check_p(op, p);
}

em_tensor *em_cpu__pdist_forward(em_keyset ks, em_tensor *self, double p) {
    (void)ks;
    const char *op = "_pdist_forward";
    if (!check_pdist_input(op, self, p)) return NULL;
    int64_t n = self->sizes[0], npairs = n > 1 ? n * (n - 1) / 2 : 0;
    em_tensor *out = em_tensor_new(1, &npairs, self->dtype, em_cpu_dev());
    em_tensor *x = out ? dense(self, op) : NULL;
    if (!x) {
        em_tensor_release(out);
        return NULL;
    }
    pd_ctx c = { .x = em_tensor_data(x), .out = em_tensor_data(out), .n = n, .m = self->sizes[1],
                 .mode = p_mode(p), .p = p, .dt = self->dtype };
    em_cpu_parallel_for(n, grain_for(n * c.m / 2 + 1), pdist_rows, &c);
    em_tensor_release(x);
    return out;
}

em_tensor *em_cpu__pdist_backward(em_keyset ks, em_tensor *grad, em_tensor *self, double p, em_tensor *pdist) {
    (void)ks;
    const char *op = "_pdist_backward";
    char b1[EM_SHAPE_STR_MAX];
    if (!check_pdist_input(op, self, p)) return NULL;
    int64_t n = self->sizes[0], npairs = n > 1 ? n * (n - 1) / 2 : 0;
    const em_tensor *gd[2] = { grad, pdist };
    for (int i = 0; i < 2; i++) {
        if (gd[i]->dtype != self->dtype || gd[i]->ndim != 1 || gd[i]->sizes[0] != npairs) {
            em_set_error(EM_ESHAPE, "%s: %s must be %s {%lld} (got %s %s)", op, i ? "pdist" : "grad",
                         em_dtype_name(self->dtype), (long long)npairs, em_dtype_name(gd[i]->dtype),
                         em_shape_str(gd[i]->ndim, gd[i]->sizes, b1, sizeof b1));
            return NULL;
        }
    }
    em_tensor *out = em_tensor_new(2, self->sizes, self->dtype, em_cpu_dev());
    em_tensor *t[3] = { NULL, NULL, NULL };
    em_tensor *src[3] = { self, grad, pdist };
    for (int i = 0; out && i < 3; i++)
        if (!(t[i] = dense(src[i], op))) {
            em_tensor_release(out);
            out = NULL;
        }
    if (out) {
        pd_ctx c = { .x = em_tensor_data(t[0]), .g = em_tensor_data(t[1]), .dist = em_tensor_data(t[2]),
                     .out = em_tensor_data(out), .n = n, .m = self->sizes[1], .mode = p_mode(p), .p = p,
                     .dt = self->dtype };
        em_cpu_parallel_for(n, grain_for(n * c.m), pdist_grad_rows, &c);
    }
    for (int i = 0; i < 3; i++) em_tensor_release(t[i]);
    return out;
}
