/* norm.c -- the normalisation family's fused CPU kernels (schema/ops/norm.yaml):
 * forward and backward of layer_norm, batch_norm and group_norm
 * (native_*_norm, native_*_norm_backward). Argument checks shared with the
 * composites are in runtime/kernels/norm_check.h.
 *
 * Every kernel computes in float64 for float64 tensors and in float32 for
 * float32 and bfloat16 ones (PyTorch 1.13's CPU dtypes; float16 and
 * integers are refused as there). Inputs are first made contiguous in the
 * compute dtype (a no-op for a contiguous float32/float64 tensor); bfloat16
 * results are computed in float32 and rounded once at the end. Rows are
 * spread over the intra-op pool; each row's sums use 8 independent lanes so
 * that the float32 loops vectorise without -ffast-math.
 *
 * Note [Norm statistics]: the forward kernels return, besides the output,
 * the mean and rstd = 1/sqrt(var + eps) of every normalised group, with the
 * biased variance (divide by the group's element count), in the input's
 * dtype; the backward kernels take them back instead of recomputing them,
 * and the double-backward formulas (formulas_norm.c) use them likewise.
 */
#pragma GCC optimize("O3", "no-trapping-math", "no-math-errno")

#include "kernels/cpu/em_cpu.h"
#include "kernels/norm_check.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* ---- shared ---- */

static em_dtype compute_of(em_dtype dt) { return dt == EM_FLOAT64 ? EM_FLOAT64 : EM_FLOAT32; }

/* t as a contiguous tensor of dtype ct (t itself, retained, when it is
 * one already); NULL when t is NULL or on error (then *failed). */
static em_tensor *as_compute(em_tensor *t, em_dtype ct, const char *op, bool *failed) {
    if (!t) return NULL;
    em_tensor *r = t->dtype == ct && t->is_contiguous ? em_tensor_retain(t) : em_cpu_to_dtype(t, ct, op);
    if (!r) *failed = true;
    return r;
}

/* A contiguous tensor of shape (ndim, sizes) and dtype ct. */
static em_tensor *new_compute(int ndim, const int64_t *sizes, em_dtype ct) {
    return em_tensor_new(ndim, sizes, ct, em_cpu_dev());
}

/* r (compute dtype, owned) converted to dt: r itself when dt is its dtype. */
static em_tensor *to_result(em_tensor *r, em_dtype dt, const char *op) {
    if (!r || r->dtype == dt) return r;
    em_tensor *c = em_cpu_to_dtype(r, dt, op);
    em_tensor_release(r);
    return c;
}

/* An empty (0-element, 1-d) tensor: a masked-out result. */
static em_tensor *empty_result(em_dtype dt) {
    int64_t z = 0;
    return em_tensor_new(1, &z, dt, em_cpu_dev());
}

static void release_all(em_tensor **t, int n) {
    for (int i = 0; i < n; i++) {
        em_tensor_release(t[i]);
        t[i] = NULL;
    }
}

/* A backward's results: dx returned, dw and db through grad_weight and
 * grad_bias; when any is NULL (its error set) all three are released and
 * NULL is returned. */
static em_tensor *three_results(em_tensor *dx, em_tensor *dw, em_tensor *db, em_tensor **grad_weight,
                                em_tensor **grad_bias) {
    if (!dx || !dw || !db) {
        em_tensor_release(dx);
        em_tensor_release(dw);
        em_tensor_release(db);
        return NULL;
    }
    *grad_weight = dw;
    *grad_bias = db;
    return dx;
}

/* Rows per parallel chunk for rows of n elements: about EM_CPU_GRAIN. */
static int64_t row_grain(int64_t n) { return n >= EM_CPU_GRAIN ? 1 : EM_CPU_GRAIN / (n > 0 ? n : 1); }

/* Note [Norm lanes]: every row sum runs in 8 lanes (lane k adds the
 * elements j = k mod 8, in order), the lanes are added as
 * ((l0 + l1) + (l2 + l3)) + ((l4 + l5) + (l6 + l7)), then the tail in
 * order -- one fixed order, whatever the ISA clone. The lanes are GCC
 * vector types (NV_float, NV_double: 8 elements, unaligned loads), so each
 * clone adds whole vectors: the same sums written as arrays of 8 lanes
 * vectorised into shuffles and scalar adds (batch_norm's backward ran at a
 * third of the memory speed). */
typedef float NV_float __attribute__((vector_size(32), aligned(4), may_alias));
typedef double NV_double __attribute__((vector_size(64), aligned(8), may_alias));
#define NV_LOAD(T, p) (*(const NV_##T *)(p))
#define NV_LANES(v) ((((v)[0] + (v)[1]) + ((v)[2] + (v)[3])) + (((v)[4] + (v)[5]) + ((v)[6] + (v)[7])))

/* Sums over a row in 8 lanes (Note [Norm lanes]); SFX f32 / f64. */
#define NORM_SUMS(SFX, T)                                                          \
    static inline T sum_##SFX(const T *x, int64_t n) {                             \
        NV_##T a = { 0 };                                                          \
        int64_t i = 0;                                                             \
        for (; i + 8 <= n; i += 8) a += NV_LOAD(T, x + i);                         \
        T s = NV_LANES(a);                                                         \
        for (; i < n; i++) s += x[i];                                              \
        return s;                                                                  \
    }                                                                              \
    /* sum of (x - m)^2 */                                                         \
    static inline T sqdev_##SFX(const T *x, int64_t n, T m) {                      \
        NV_##T a = { 0 };                                                          \
        int64_t i = 0;                                                             \
        for (; i + 8 <= n; i += 8) {                                               \
            NV_##T d = NV_LOAD(T, x + i) - m;                                      \
            a += d * d;                                                            \
        }                                                                          \
        T s = NV_LANES(a);                                                         \
        for (; i < n; i++) s += (x[i] - m) * (x[i] - m);                           \
        return s;                                                                  \
    }
NORM_SUMS(f32, float)
NORM_SUMS(f64, double)

/* ---- layer_norm ---- */

/* Rows per block of layer_norm's weight sums (Note [Layer norm weight
 * sums]): fixed, so the sums do not depend on the thread count; the
 * partials take 1/16 of the input's size (two sums per block). */
#define LN_BLOCK_ROWS 32

/* The shape of mean/rstd: input's leading dims, then ns.n ones. */
static void stat_shape(const em_tensor *input, int nn, int64_t *sizes) {
    for (int d = 0; d < input->ndim; d++) sizes[d] = d < input->ndim - nn ? input->sizes[d] : 1;
}

/* The row kernels serve layer_norm (every row scaled by the same weight
 * and bias: wrows = 1) and group_norm (per-element weight/bias expanded to
 * wrows = G rows of N: row r uses row r % G). */
typedef struct {
    const void *x, *w, *b, *go, *mean, *rstd;
    void *y, *m, *r, *dx, *dw, *db;
    void *pw, *pb;  /* layer_norm backward: per row block partial sums (Note [Layer norm weight sums]) */
    int64_t M, N, wrows, rb;
    double eps;
} ln_ctx;

/* layer_norm's grad_input row with the row's weight sums (Note [Layer norm
 * weight sums]); distinct buffers (restrict), so the loop vectorises. */
#define LN_ROW_FUSED(SFX, T)                                                                   \
    static inline void ln_row_fused_##SFX(T *restrict dx, T *restrict pw, T *restrict pb,      \
                                          const T *restrict go, const T *restrict x,           \
                                          const T *restrict w, int64_t N, T rstd, T bb, T cc,  \
                                          T mean) {                                            \
        for (int64_t j = 0; j < N; j++) {                                                      \
            dx[j] = rstd * go[j] * w[j] + bb * x[j] + cc;                                      \
            pw[j] += go[j] * (x[j] - mean) * rstd;                                             \
            pb[j] += go[j];                                                                    \
        }                                                                                      \
    }
LN_ROW_FUSED(f32, float)
LN_ROW_FUSED(f64, double)

#define LN_KERNELS(SFX, T, SQRT)                                                               \
    EM_CPU_CLONES static void ln_fwd_##SFX(int64_t begin, int64_t end, void *vc) {            \
        const ln_ctx *c = vc;                                                                  \
        const int64_t N = c->N;                                                                \
        for (int64_t r = begin; r < end; r++) {                                                \
            const T *w = c->w ? (const T *)c->w + (r % c->wrows) * N : NULL;                   \
            const T *b = c->b ? (const T *)c->b + (r % c->wrows) * N : NULL;                   \
            const T *x = (const T *)c->x + r * N;                                              \
            T *y = (T *)c->y + r * N;                                                          \
            /* an empty group has mean 0 (and rstd NaN), as in torch */                     \
            T mean = N ? sum_##SFX(x, N) / (T)N : (T)0;                                        \
            T rstd = (T)1 / SQRT(sqdev_##SFX(x, N, mean) / (T)N + (T)c->eps);                  \
            ((T *)c->m)[r] = mean;                                                             \
            ((T *)c->r)[r] = rstd;                                                             \
            /* torch's arrangement: (x rstd - mean rstd) w + b */                              \
            T shift = -mean * rstd;                                                            \
            if (w && b)                                                                        \
                for (int64_t j = 0; j < N; j++) y[j] = (x[j] * rstd + shift) * w[j] + b[j];    \
            else if (w)                                                                        \
                for (int64_t j = 0; j < N; j++) y[j] = (x[j] * rstd + shift) * w[j];           \
            else if (b)                                                                        \
                for (int64_t j = 0; j < N; j++) y[j] = x[j] * rstd + shift + b[j];             \
            else                                                                               \
                for (int64_t j = 0; j < N; j++) y[j] = x[j] * rstd + shift;                    \
        }                                                                                      \
    }                                                                                          \
    /* grad_input, row by row, in torch's arrangement: with g = go w,                        \
     * ds = sum(g x), db = sum(g): dx = rstd g + bb x + cc where                                \
     * bb = (db mean - ds) rstd^3 / N and cc = -bb mean - db rstd / N */                        \
    EM_CPU_CLONES static void ln_bwd_dx_##SFX(int64_t begin, int64_t end, void *vc) {         \
        const ln_ctx *c = vc;                                                                  \
        const int64_t N = c->N;                                                                \
        for (int64_t r = begin; r < end; r++) {                                                \
            const T *w = c->w ? (const T *)c->w + (r % c->wrows) * N : NULL;                   \
            const T *x = (const T *)c->x + r * N, *go = (const T *)c->go + r * N;              \
            T *dx = (T *)c->dx + r * N;                                                        \
            T mean = ((const T *)c->mean)[r], rstd = ((const T *)c->rstd)[r];                  \
            NV_##T a = { 0 }, s = { 0 };                                                       \
            int64_t j = 0;                                                                     \
            if (w)                                                                             \
                for (; j + 8 <= N; j += 8) {                                                   \
                    NV_##T g = NV_LOAD(T, go + j) * NV_LOAD(T, w + j);                         \
                    a += g;                                                                    \
                    s += g * NV_LOAD(T, x + j);                                                \
                }                                                                              \
            else                                                                               \
                for (; j + 8 <= N; j += 8) {                                                   \
                    NV_##T g = NV_LOAD(T, go + j);                                             \
                    a += g;                                                                    \
                    s += g * NV_LOAD(T, x + j);                                                \
                }                                                                              \
            T db = NV_LANES(a);                                                                \
            T ds = NV_LANES(s);                                                                \
            for (; j < N; j++) {                                                               \
                T g = w ? go[j] * w[j] : go[j];                                                \
                db += g;                                                                       \
                ds += g * x[j];                                                                \
            }                                                                                  \
            T scale = (T)1 / (T)N;                                                             \
            T bb = (db * mean - ds) * rstd * rstd * rstd * scale;                              \
            T cc = -bb * mean - db * rstd * scale;                                             \
            /* layer_norm with weight and bias: the row's weight sums too, while it is in cache */ \
            T *pw = c->pw ? (T *)c->pw + (r / c->rb) * N : NULL;                               \
            T *pb = c->pb ? (T *)c->pb + (r / c->rb) * N : NULL;                               \
            if (w && pw && pb) {                                                               \
                ln_row_fused_##SFX(dx, pw, pb, go, x, w, N, rstd, bb, cc, mean);               \
                continue;                                                                      \
            }                                                                                  \
            if (w)                                                                             \
                for (j = 0; j < N; j++) dx[j] = rstd * go[j] * w[j] + bb * x[j] + cc;          \
            else                                                                               \
                for (j = 0; j < N; j++) dx[j] = rstd * go[j] + bb * x[j] + cc;                 \
            if (pw)                                                                            \
                for (j = 0; j < N; j++) pw[j] += go[j] * (x[j] - mean) * rstd;                 \
            if (pb)                                                                            \
                for (j = 0; j < N; j++) pb[j] += go[j];                                        \
        }                                                                                      \
    }                                                                                          \
    /* Note [Layer norm weight sums]: grad_weight[j] = sum over rows of                       \
     * go (x - mean) rstd and grad_bias[j] = sum of go, in two stages fixed by the             \
     * shape alone (the same sums at any thread count): the rows in blocks of rb               \
     * (LN_BLOCK_ROWS), each block's partial sums in order, in grad_input's loop over the     \
     * row (ln_bwd_dx) or on their own (ln_bwd_blk), then the blocks' partials in order                   \
     * (ln_bwd_red). One pass over x and go instead of two. */                                  \
    EM_CPU_CLONES static void ln_bwd_blk_##SFX(int64_t begin, int64_t end, void *vc) {        \
        const ln_ctx *c = vc;                                                                  \
        const int64_t N = c->N;                                                                \
        for (int64_t bk = begin; bk < end; bk++) {                                             \
            int64_t r0 = bk * c->rb, r1 = r0 + c->rb < c->M ? r0 + c->rb : c->M;               \
            T *pw = c->pw ? (T *)c->pw + bk * N : NULL, *pb = c->pb ? (T *)c->pb + bk * N : NULL; \
            if (pw) memset(pw, 0, sizeof(T) * (size_t)N);                                      \
            if (pb) memset(pb, 0, sizeof(T) * (size_t)N);                                      \
            if (c->dx) { /* grad_input adds each row's terms to the partials */                \
                ln_bwd_dx_##SFX(r0, r1, vc);                                                   \
                continue;                                                                      \
            }                                                                                  \
            for (int64_t r = r0; r < r1; r++) {                                                \
                const T *x = (const T *)c->x + r * N, *go = (const T *)c->go + r * N;          \
                T mean = ((const T *)c->mean)[r], rstd = ((const T *)c->rstd)[r];              \
                if (pw)                                                                        \
                    for (int64_t j = 0; j < N; j++) pw[j] += go[j] * (x[j] - mean) * rstd;     \
                if (pb)                                                                        \
                    for (int64_t j = 0; j < N; j++) pb[j] += go[j];                            \
            }                                                                                  \
        }                                                                                      \
    }                                                                                          \
    /* the blocks' partials summed in order, columns [64 begin, 64 end) */                    \
    EM_CPU_CLONES static void ln_bwd_red_##SFX(int64_t begin, int64_t end, void *vc) {        \
        const ln_ctx *c = vc;                                                                  \
        const int64_t N = c->N, nb = (c->M + c->rb - 1) / c->rb;                               \
        const int64_t j0 = begin * 64, j1 = end * 64 < N ? end * 64 : N;                       \
        T *out[2] = { c->dw, c->db };                                                          \
        const T *part[2] = { c->pw, c->pb };                                                   \
        for (int k = 0; k < 2; k++) {                                                          \
            if (!out[k]) continue;                                                             \
            for (int64_t j = j0; j < j1; j++) out[k][j] = 0;                                   \
            for (int64_t bk = 0; bk < nb; bk++)                                                \
                for (int64_t j = j0; j < j1; j++) out[k][j] += part[k][bk * N + j];            \
        }                                                                                      \
    }
LN_KERNELS(f32, float, sqrtf)
LN_KERNELS(f64, double, sqrt)

em_tensor *em_cpu_native_layer_norm(em_keyset ks, em_tensor *input, em_intlist normalized_shape, em_tensor *weight,
                                    em_tensor *bias, double eps, em_tensor **mean, em_tensor **rstd) {
    (void)ks;
    const char *op = "native_layer_norm";
    int64_t M, N;
    if (!em_norm_check_layer_norm(input, normalized_shape, weight, bias, op, &M, &N)) return NULL;
    em_dtype ct = compute_of(input->dtype);
    bool failed = false;
    em_tensor *tmp[6] = { 0 }; /* x, w, b, y, mean, rstd */
    tmp[0] = as_compute(input, ct, op, &failed);
    tmp[1] = as_compute(weight, ct, op, &failed);
    tmp[2] = as_compute(bias, ct, op, &failed);
    int64_t ss[EM_MAX_DIMS];
    stat_shape(input, normalized_shape.n, ss);
    tmp[3] = new_compute(input->ndim, input->sizes, ct);
    tmp[4] = new_compute(input->ndim, ss, ct);
    tmp[5] = new_compute(input->ndim, ss, ct);
    if (failed || !tmp[3] || !tmp[4] || !tmp[5]) {
        release_all(tmp, 6);
        return NULL;
    }
    ln_ctx c = { .x = em_tensor_data(tmp[0]), .w = tmp[1] ? em_tensor_data(tmp[1]) : NULL,
                 .b = tmp[2] ? em_tensor_data(tmp[2]) : NULL, .y = em_tensor_data(tmp[3]),
                 .m = em_tensor_data(tmp[4]), .r = em_tensor_data(tmp[5]), .M = M, .N = N, .wrows = 1, .eps = eps };
    em_cpu_parallel_for(M, row_grain(N), ct == EM_FLOAT64 ? ln_fwd_f64 : ln_fwd_f32, &c);
    em_tensor *y = to_result(tmp[3], input->dtype, op);
    em_tensor *m = to_result(tmp[4], input->dtype, op);
    em_tensor *r = to_result(tmp[5], input->dtype, op);
    tmp[3] = tmp[4] = tmp[5] = NULL;
    release_all(tmp, 3);
    if (!y || !m || !r) {
        em_tensor_release(y);
        em_tensor_release(m);
        em_tensor_release(r);
        return NULL;
    }
    *mean = m;
    *rstd = r;
    return y;
}

/* The statistics' element count must be M (Note [Norm statistics]). */
static bool stat_ok(const em_tensor *t, int64_t M, const char *op, const char *name) {
    if (t->numel == M) return true;
    char b[EM_SHAPE_STR_MAX];
    em_set_error(EM_ESHAPE, "%s: %s of shape %s must have one value per normalised group (%lld)", op, name,
                 em_shape_str(t->ndim, t->sizes, b, sizeof b), (long long)M);
    return false;
}

static bool same_shape_as(const em_tensor *t, const em_tensor *like, const char *op, const char *name,
                          const char *like_name) {
    if (t->ndim == like->ndim && memcmp(t->sizes, like->sizes, sizeof(int64_t) * (size_t)t->ndim) == 0) return true;
    char b1[EM_SHAPE_STR_MAX], b2[EM_SHAPE_STR_MAX];
    em_set_error(EM_ESHAPE, "%s: %s of shape %s must have %s's shape %s", op, name,
                 em_shape_str(t->ndim, t->sizes, b1, sizeof b1), like_name,
                 em_shape_str(like->ndim, like->sizes, b2, sizeof b2));
    return false;
}

em_tensor *em_cpu_native_layer_norm_backward(em_keyset ks, em_tensor *grad_out, em_tensor *input,
                                             em_intlist normalized_shape, em_tensor *mean, em_tensor *rstd,
                                             em_tensor *weight, em_tensor *bias, bool input_mask, bool weight_mask,
                                             bool bias_mask, em_tensor **grad_weight, em_tensor **grad_bias) {
    (void)ks;
    const char *op = "native_layer_norm_backward";
    int64_t M, N;
    if (!em_norm_check_layer_norm(input, normalized_shape, weight, bias, op, &M, &N)) return NULL;
    if (!same_shape_as(grad_out, input, op, "grad_out", "input") || !stat_ok(mean, M, op, "mean") ||
        !stat_ok(rstd, M, op, "rstd"))
        return NULL;
    em_dtype ct = compute_of(input->dtype), dt = input->dtype;
    bool want_dw = weight_mask && weight, want_db = bias_mask && bias;
    bool failed = false;
    em_tensor *tmp[9] = { 0 }; /* x, go, mean, rstd, w, dx, dw, db */
    tmp[0] = as_compute(input, ct, op, &failed);
    tmp[1] = as_compute(grad_out, ct, op, &failed);
    tmp[2] = as_compute(mean, ct, op, &failed);
    tmp[3] = as_compute(rstd, ct, op, &failed);
    tmp[4] = as_compute(weight, ct, op, &failed);
    tmp[5] = input_mask ? new_compute(input->ndim, input->sizes, ct) : empty_result(ct);
    tmp[6] = want_dw ? new_compute(weight->ndim, weight->sizes, ct) : empty_result(ct);
    tmp[7] = want_db ? new_compute(bias->ndim, bias->sizes, ct) : empty_result(ct);
    if (failed || !tmp[5] || !tmp[6] || !tmp[7]) {
        release_all(tmp, 9);
        return NULL;
    }
    ln_ctx c = { .x = em_tensor_data(tmp[0]), .go = em_tensor_data(tmp[1]), .mean = em_tensor_data(tmp[2]),
                 .rstd = em_tensor_data(tmp[3]), .w = tmp[4] ? em_tensor_data(tmp[4]) : NULL,
                 .dx = em_tensor_data(tmp[5]), .dw = want_dw ? em_tensor_data(tmp[6]) : NULL,
                 .db = want_db ? em_tensor_data(tmp[7]) : NULL, .M = M, .N = N, .wrows = 1 };
    bool f64 = ct == EM_FLOAT64;
    if (!want_dw && !want_db) {
        if (input_mask) em_cpu_parallel_for(M, row_grain(N), f64 ? ln_bwd_dx_f64 : ln_bwd_dx_f32, &c);
    } else if (M > 0 && N > 0) {
        c.rb = LN_BLOCK_ROWS;
        int64_t nb = (M + c.rb - 1) / c.rb;
        size_t es = f64 ? sizeof(double) : sizeof(float);
        char *part = malloc((size_t)(2 * nb * N) * es);
        if (!part) {
            em_set_error(EM_ENOMEM, "%s: out of memory", op);
            release_all(tmp, 9);
            return NULL;
        }
        c.pw = want_dw ? part : NULL;
        c.pb = want_db ? part + (size_t)(nb * N) * es : NULL;
        if (!input_mask) c.dx = NULL;
        em_cpu_parallel_for(nb, 1, f64 ? ln_bwd_blk_f64 : ln_bwd_blk_f32, &c);
        int64_t cols = (N + 63) / 64, per = 64 * nb;
        em_cpu_parallel_for(cols, per >= EM_CPU_GRAIN ? 1 : EM_CPU_GRAIN / per, f64 ? ln_bwd_red_f64 : ln_bwd_red_f32,
                            &c);
        free(part);
    } else {
        /* no rows: grad_weight and grad_bias are zeros */
        if (want_dw) memset(em_tensor_data(tmp[6]), 0, (size_t)N * em_dtype_size(ct));
        if (want_db) memset(em_tensor_data(tmp[7]), 0, (size_t)N * em_dtype_size(ct));
    }
    em_tensor *dx = to_result(tmp[5], dt, op), *dw = to_result(tmp[6], dt, op), *db = to_result(tmp[7], dt, op);
    tmp[5] = tmp[6] = tmp[7] = NULL;
    release_all(tmp, 9);
    return three_results(dx, dw, db, grad_weight, grad_bias);
}

/* ---- batch_norm ----
 * input (N, C, S...) is read as N x C x S (S the product of the dims after
 * the channel dim); every channel is one task of the pool. The per-channel
 * sums accumulate in double (PyTorch's CPU acc_type), each (n, c) run of S
 * elements first in 8 lanes of the compute type. */

typedef struct {
    const void *x, *go, *w, *b;
    void *y, *dx;
    double *mean, *invstd; /* per channel: the statistics used */
    double *dw, *db;       /* per channel: grad_weight / grad_bias (or NULL) */
    int64_t N, C, S;
    bool train;
} bn_ctx;

/* sa = the sum of go[j] and sd = the sum of go[j] * (x[j] - m) over
 * j < S, for element type T: 8 lanes, then the tail in order (one fixed
 * summation order; shared by batch_norm's and group_norm's backward). */
#define GO_SUMS(T, x, go, m, S, sa, sd)                                                         \
    do {                                                                                        \
        NV_##T a_ = { 0 }, d_ = { 0 };                                                          \
        int64_t j_ = 0;                                                                         \
        for (; j_ + 8 <= (S); j_ += 8) {                                                        \
            NV_##T g_ = NV_LOAD(T, (go) + j_);                                                  \
            a_ += g_;                                                                           \
            d_ += g_ * (NV_LOAD(T, (x) + j_) - (m));                                            \
        }                                                                                       \
        (sa) = NV_LANES(a_);                                                                    \
        (sd) = NV_LANES(d_);                                                                    \
        for (; j_ < (S); j_++) {                                                                \
            (sa) += (go)[j_];                                                                   \
            (sd) += (go)[j_] * ((x)[j_] - (m));                                                 \
        }                                                                                       \
    } while (0)

#define BN_KERNELS(SFX, T)                                                                      \
    /* batch statistics of channels [begin, end): mean and biased variance (in invstd) */     \
    EM_CPU_CLONES static void bn_stats_##SFX(int64_t begin, int64_t end, void *vc) {           \
        const bn_ctx *c = vc;                                                                   \
        for (int64_t ch = begin; ch < end; ch++) {                                              \
            double s = 0, q = 0, n = (double)(c->N * c->S);                                     \
            for (int64_t i = 0; i < c->N; i++)                                                  \
                s += (double)sum_##SFX((const T *)c->x + (i * c->C + ch) * c->S, c->S);         \
            double m = n > 0 ? s / n : 0;                                                       \
            for (int64_t i = 0; i < c->N; i++)                                                  \
                q += (double)sqdev_##SFX((const T *)c->x + (i * c->C + ch) * c->S, c->S, (T)m); \
            c->mean[ch] = m;                                                                    \
            c->invstd[ch] = n > 0 ? q / n : 0; /* the variance, turned into invstd later */     \
        }                                                                                       \
    }                                                                                           \
    /* y = x alpha + beta, alpha = invstd w, beta = b - mean alpha (PyTorch's arrangement) */   \
    EM_CPU_CLONES static void bn_apply_##SFX(int64_t begin, int64_t end, void *vc) {           \
        const bn_ctx *c = vc;                                                                   \
        const T *w = c->w, *b = c->b;                                                           \
        for (int64_t ch = begin; ch < end; ch++) {                                              \
            T alpha = (T)(c->invstd[ch] * (w ? (double)w[ch] : 1.0));                           \
            T beta = (T)((b ? (double)b[ch] : 0.0) - c->mean[ch] * (double)alpha);              \
            for (int64_t i = 0; i < c->N; i++) {                                                \
                const T *x = (const T *)c->x + (i * c->C + ch) * c->S;                          \
                T *y = (T *)c->y + (i * c->C + ch) * c->S;                                      \
                for (int64_t j = 0; j < c->S; j++) y[j] = x[j] * alpha + beta;                  \
            }                                                                                   \
        }                                                                                       \
    }                                                                                           \
    /* backward of channels [begin, end): sums of go and go (x - mean); then grad_input */     \
    EM_CPU_CLONES static void bn_bwd_##SFX(int64_t begin, int64_t end, void *vc) {             \
        const bn_ctx *c = vc;                                                                   \
        const T *w = c->w;                                                                      \
        double n = (double)(c->N * c->S);                                                       \
        for (int64_t ch = begin; ch < end; ch++) {                                              \
            T m = (T)c->mean[ch];                                                               \
            double sg = 0, dot = 0;                                                             \
            for (int64_t i = 0; i < c->N; i++) {                                                \
                const T *x = (const T *)c->x + (i * c->C + ch) * c->S;                          \
                const T *go = (const T *)c->go + (i * c->C + ch) * c->S;                        \
                T sa, sd;                                                                       \
                GO_SUMS(T, x, go, m, c->S, sa, sd);                                             \
                sg += (double)sa;                                                               \
                dot += (double)sd;                                                              \
            }                                                                                   \
            double invstd = c->invstd[ch], wv = w ? (double)w[ch] : 1.0;                        \
            if (c->dw) c->dw[ch] = dot * invstd;                                                \
            if (c->db) c->db[ch] = sg;                                                          \
            if (!c->dx) continue;                                                               \
            /* train: dx = (go - mean(go) - (x - mean) dot invstd^2 / n) invstd w;             \
             * eval: dx = go invstd w */                                                        \
            T k = (T)(c->train && n > 0 ? dot * invstd * invstd / n : 0.0);                     \
            T gm = (T)(c->train && n > 0 ? sg / n : 0.0), sc = (T)(invstd * wv);                \
            for (int64_t i = 0; i < c->N; i++) {                                                \
                const T *x = (const T *)c->x + (i * c->C + ch) * c->S;                          \
                const T *go = (const T *)c->go + (i * c->C + ch) * c->S;                        \
                T *dx = (T *)c->dx + (i * c->C + ch) * c->S;                                    \
                if (c->train)                                                                   \
                    for (int64_t j = 0; j < c->S; j++) dx[j] = (go[j] - gm - (x[j] - m) * k) * sc; \
                else                                                                            \
                    for (int64_t j = 0; j < c->S; j++) dx[j] = go[j] * sc;                      \
            }                                                                                   \
        }                                                                                       \
    }
BN_KERNELS(f32, float)
BN_KERNELS(f64, double)

/* Channels per task for channels of n elements. */
static int64_t chan_grain(int64_t n) { return n >= EM_CPU_GRAIN ? 1 : EM_CPU_GRAIN / (n > 0 ? n : 1); }

/* A per-channel statistic (running_mean, ...): C elements, any float dtype
 * and stride; t NULL is fine. */
static bool bn_stat_ok(const em_tensor *t, int64_t C, const char *op, const char *name) {
    if (!t) return true;
    char b[EM_SHAPE_STR_MAX];
    if (t->ndim != 1 || t->sizes[0] != C) {
        em_set_error(EM_ESHAPE, "%s: %s must be of shape {%lld} (one value per channel), got %s", op, name,
                     (long long)C, em_shape_str(t->ndim, t->sizes, b, sizeof b));
        return false;
    }
    if (!em_cpu_is_float(t->dtype)) {
        em_set_error(EM_ETYPE, "%s: %s must be a floating tensor, got %s", op, name, em_dtype_name(t->dtype));
        return false;
    }
    return true;
}

static double load1(const em_tensor *t, int64_t i) {
    return em_load_as_double((const char *)em_tensor_data(t) + i * t->strides[0] * (int64_t)em_dtype_size(t->dtype),
                             t->dtype);
}
static void store1(em_tensor *t, int64_t i, double v) {
    em_store_from_double((char *)em_tensor_data(t) + i * t->strides[0] * (int64_t)em_dtype_size(t->dtype), t->dtype,
                         v);
}

/* The checks shared by native_batch_norm and its backward: sets N, C, S. */
static bool bn_check(const em_tensor *input, const em_tensor *weight, const em_tensor *bias, const em_tensor *rm,
                     const em_tensor *rv, const char *op, int64_t *N, int64_t *C, int64_t *S) {
    if (!em_norm_check_batch_norm(input, weight, bias, op)) return false;
    int64_t c = input->sizes[1], s = 1;
    for (int d = 2; d < input->ndim; d++) s *= input->sizes[d];
    if (!bn_stat_ok(rm, c, op, "running_mean") || !bn_stat_ok(rv, c, op, "running_var")) return false;
    *N = input->sizes[0];
    *C = c;
    *S = s;
    return true;
}

/* Tensor of shape {n} in dtype dt filled from v (double). */
static em_tensor *from_doubles(const double *v, int64_t n, em_dtype dt) {
    em_tensor *t = em_tensor_new(1, &n, dt, em_cpu_dev());
    if (!t) return NULL;
    for (int64_t i = 0; i < n; i++) em_store_from_double((char *)em_tensor_data(t) + i * (int64_t)em_dtype_size(dt), dt, v[i]);
    return t;
}

em_tensor *em_cpu_native_batch_norm(em_keyset ks, em_tensor *input, em_tensor *weight, em_tensor *bias,
                                    em_tensor *running_mean, em_tensor *running_var, bool training, double momentum,
                                    double eps, em_tensor **save_mean, em_tensor **save_invstd) {
    (void)ks;
    const char *op = "native_batch_norm";
    int64_t N, C, S;
    if (!bn_check(input, weight, bias, running_mean, running_var, op, &N, &C, &S)) return NULL;
    if (!training && (!running_mean || !running_var)) {
        em_set_error(EM_EVALUE, "%s: running_mean and running_var must be given in evaluation mode (training=false)",
                     op);
        return NULL;
    }
    em_dtype ct = compute_of(input->dtype), dt = input->dtype;
    bool failed = false;
    em_tensor *tmp[4] = { 0 }; /* x, w, b, y */
    tmp[0] = as_compute(input, ct, op, &failed);
    tmp[1] = as_compute(weight, ct, op, &failed);
    tmp[2] = as_compute(bias, ct, op, &failed);
    tmp[3] = new_compute(input->ndim, input->sizes, ct);
    double *stats = calloc((size_t)(2 * C + 1), sizeof(double));
    if (failed || !tmp[3] || !stats) {
        if (!stats) em_set_error(EM_ENOMEM, "%s: out of memory", op);
        release_all(tmp, 4);
        free(stats);
        return NULL;
    }
    bn_ctx c = { .x = em_tensor_data(tmp[0]), .w = tmp[1] ? em_tensor_data(tmp[1]) : NULL,
                 .b = tmp[2] ? em_tensor_data(tmp[2]) : NULL, .y = em_tensor_data(tmp[3]), .mean = stats,
                 .invstd = stats + C, .N = N, .C = C, .S = S, .train = training };
    bool f64 = ct == EM_FLOAT64;
    int64_t n = N * S;
    if (training) {
        em_cpu_parallel_for(C, chan_grain(n), f64 ? bn_stats_f64 : bn_stats_f32, &c);
        for (int64_t ch = 0; ch < C; ch++) {
            double var = c.invstd[ch];
            if (running_mean) store1(running_mean, ch, (1 - momentum) * load1(running_mean, ch) + momentum * c.mean[ch]);
            if (running_var) /* unbiased: n / (n - 1); n == 1 gives inf/NaN as in torch */
                store1(running_var, ch,
                       (1 - momentum) * load1(running_var, ch) + momentum * var * (double)n / (double)(n - 1));
            c.invstd[ch] = 1.0 / sqrt(var + eps);
        }
        /* Note [Running statistics]: as in torch 1.13, the update does not
         * bump the running statistics' versions: autograd saves them (the
         * eval-mode gradient reads them) and a training step's own update
         * must not make its node stale; training-mode gradients use only
         * save_mean/save_invstd. */
    } else {
        for (int64_t ch = 0; ch < C; ch++) {
            c.mean[ch] = load1(running_mean, ch);
            c.invstd[ch] = 1.0 / sqrt(load1(running_var, ch) + eps);
        }
    }
    em_cpu_parallel_for(C, chan_grain(n), f64 ? bn_apply_f64 : bn_apply_f32, &c);
    em_tensor *y = to_result(tmp[3], dt, op);
    tmp[3] = NULL;
    release_all(tmp, 4);
    em_tensor *sm = training ? from_doubles(c.mean, C, dt) : empty_result(dt);
    em_tensor *si = training ? from_doubles(c.invstd, C, dt) : empty_result(dt);
    free(stats);
    if (!y || !sm || !si) {
        em_tensor_release(y);
        em_tensor_release(sm);
        em_tensor_release(si);
        return NULL;
    }
    *save_mean = sm;
    *save_invstd = si;
    return y;
}

em_tensor *em_cpu_native_batch_norm_backward(em_keyset ks, em_tensor *grad_out, em_tensor *input, em_tensor *weight,
                                             em_tensor *running_mean, em_tensor *running_var, em_tensor *save_mean,
                                             em_tensor *save_invstd, bool train, double eps, bool input_mask,
                                             bool weight_mask, bool bias_mask, em_tensor **grad_weight,
                                             em_tensor **grad_bias) {
    (void)ks;
    const char *op = "native_batch_norm_backward";
    int64_t N, C, S;
    if (!bn_check(input, weight, NULL, running_mean, running_var, op, &N, &C, &S)) return NULL;
    if (!same_shape_as(grad_out, input, op, "grad_out", "input")) return NULL;
    em_tensor *mt = train ? save_mean : running_mean, *st = train ? save_invstd : running_var;
    if (!mt || !st) {
        em_set_error(EM_EVALUE, "%s: %s must be given when train is %s", op,
                     train ? "save_mean and save_invstd" : "running_mean and running_var", train ? "true" : "false");
        return NULL;
    }
    if (!bn_stat_ok(mt, C, op, train ? "save_mean" : "running_mean") ||
        !bn_stat_ok(st, C, op, train ? "save_invstd" : "running_var"))
        return NULL;
    em_dtype ct = compute_of(input->dtype), dt = input->dtype;
    bool want_dw = weight_mask && weight;
    bool failed = false;
    em_tensor *tmp[4] = { 0 }; /* x, go, w, dx */
    tmp[0] = as_compute(input, ct, op, &failed);
    tmp[1] = as_compute(grad_out, ct, op, &failed);
    tmp[2] = as_compute(weight, ct, op, &failed);
    tmp[3] = input_mask ? new_compute(input->ndim, input->sizes, ct) : NULL;
    double *stats = calloc((size_t)(4 * C + 1), sizeof(double));
    if (failed || (input_mask && !tmp[3]) || !stats) {
        if (!stats) em_set_error(EM_ENOMEM, "%s: out of memory", op);
        release_all(tmp, 4);
        free(stats);
        return NULL;
    }
    for (int64_t ch = 0; ch < C; ch++) {
        stats[ch] = load1(mt, ch);
        stats[C + ch] = train ? load1(st, ch) : 1.0 / sqrt(load1(st, ch) + eps);
    }
    bn_ctx c = { .x = em_tensor_data(tmp[0]), .go = em_tensor_data(tmp[1]), .w = tmp[2] ? em_tensor_data(tmp[2]) : NULL,
                 .dx = tmp[3] ? em_tensor_data(tmp[3]) : NULL, .mean = stats, .invstd = stats + C,
                 .dw = want_dw ? stats + 2 * C : NULL, .db = bias_mask ? stats + 3 * C : NULL, .N = N, .C = C,
                 .S = S, .train = train };
    em_cpu_parallel_for(C, chan_grain(N * S), ct == EM_FLOAT64 ? bn_bwd_f64 : bn_bwd_f32, &c);
    em_tensor *dx = input_mask ? to_result(tmp[3], dt, op) : empty_result(dt);
    tmp[3] = NULL;
    release_all(tmp, 4);
    em_tensor *dw = want_dw ? from_doubles(c.dw, C, dt) : empty_result(dt);
    em_tensor *db = bias_mask ? from_doubles(c.db, C, dt) : empty_result(dt);
    free(stats);
    return three_results(dx, dw, db, grad_weight, grad_bias);
}

/* ---- group_norm ----
 * input (N, C, S...) contiguous is N*G rows of L = (C/G)*S elements: the
 * layer_norm row kernels run over them with weight and bias expanded to
 * G rows of L (channel g*C/G + j/S for element j of group g). The
 * backward has a row kernel of its own (gn_bwd). */

/* group_norm's backward, one task per row (n, g) of Cg = C/G channels:
 * each channel's sums sa = sum go, sd = sum go (x - mean) (GO_SUMS, stored
 * per (n, channel) in part, from which grad_weight and grad_bias follow),
 * then the row's db = sum w sa and ds = sum w (sd + mean sa) -- torch's
 * sums of g = go w and of g x -- and grad_input as in ln_bwd_dx: one pass
 * over x and go for all three results. */
typedef struct {
    const void *x, *go, *mean, *rstd, *w;
    void *dx;
    double *part; /* 2 per (n, channel): sa, sd */
    int64_t N, C, G, S;
} gnb_ctx;

#define GN_KERNELS(SFX, T)                                                                     \
    EM_CPU_CLONES static void gn_bwd_##SFX(int64_t begin, int64_t end, void *vc) {            \
        const gnb_ctx *c = vc;                                                                 \
        const int64_t Cg = c->C / c->G, S = c->S;                                              \
        const T *w = c->w;                                                                     \
        for (int64_t r = begin; r < end; r++) {                                                \
            int64_t n = r / c->G, ch0 = (r % c->G) * Cg;                                       \
            T mean = ((const T *)c->mean)[r], rstd = ((const T *)c->rstd)[r];                  \
            T db = 0, ds = 0;                                                                  \
            for (int64_t ch = ch0; ch < ch0 + Cg; ch++) {                                      \
                const T *x = (const T *)c->x + (n * c->C + ch) * S;                            \
                const T *go = (const T *)c->go + (n * c->C + ch) * S;                          \
                T sa, sd;                                                                      \
                GO_SUMS(T, x, go, mean, S, sa, sd);                                            \
                c->part[2 * (n * c->C + ch)] = (double)sa;                                     \
                c->part[2 * (n * c->C + ch) + 1] = (double)sd;                                 \
                T wv = w ? w[ch] : (T)1;                                                       \
                db += wv * sa;                                                                 \
                ds += wv * (sd + mean * sa);                                                   \
            }                                                                                  \
            if (!c->dx) continue;                                                              \
            T scale = (T)1 / (T)(Cg * S);                                                      \
            T bb = (db * mean - ds) * rstd * rstd * rstd * scale;                              \
            T cc = -bb * mean - db * rstd * scale;                                             \
            for (int64_t ch = ch0; ch < ch0 + Cg; ch++) {                                      \
                const T *x = (const T *)c->x + (n * c->C + ch) * S;                            \
                const T *go = (const T *)c->go + (n * c->C + ch) * S;                          \
                T *dx = (T *)c->dx + (n * c->C + ch) * S;                                      \
                T a = rstd * (w ? w[ch] : (T)1);                                               \
                for (int64_t j = 0; j < S; j++) dx[j] = a * go[j] + bb * x[j] + cc;            \
            }                                                                                  \
        }                                                                                      \
    }
GN_KERNELS(f32, float)
GN_KERNELS(f64, double)

/* weight or bias (C, compute dtype, contiguous) expanded to G rows of
 * L = (C/G) S elements; NULL for NULL. */
static em_tensor *gn_expand(em_tensor *t, int64_t C, int64_t S, em_dtype ct, bool *failed) {
    if (!t) return NULL;
    int64_t n = C * S;
    em_tensor *e = em_tensor_new(1, &n, ct, em_cpu_dev());
    if (!e) {
        *failed = true;
        return NULL;
    }
    size_t es = em_dtype_size(ct);
    const char *src = em_tensor_data(t);
    char *dst = em_tensor_data(e);
    for (int64_t ch = 0; ch < C; ch++)
        for (int64_t j = 0; j < S; j++) memcpy(dst + (ch * S + j) * (int64_t)es, src + ch * (int64_t)es, es);
    return e;
}

static bool gn_check(const em_tensor *input, const em_tensor *weight, const em_tensor *bias, int64_t group,
                     const char *op, int64_t *N, int64_t *C, int64_t *S) {
    if (!em_norm_check_group_norm(input, group, weight, bias, op)) return false;
    int64_t s = 1;
    for (int d = 2; d < input->ndim; d++) s *= input->sizes[d];
    *N = input->sizes[0];
    *C = input->sizes[1];
    *S = s;
    return true;
}

em_tensor *em_cpu_native_group_norm(em_keyset ks, em_tensor *input, em_tensor *weight, em_tensor *bias, int64_t group,
                                    double eps, em_tensor **mean, em_tensor **rstd) {
    (void)ks;
    const char *op = "native_group_norm";
    int64_t N, C, S;
    if (!gn_check(input, weight, bias, group, op, &N, &C, &S)) return NULL;
    em_dtype ct = compute_of(input->dtype), dt = input->dtype;
    bool failed = false;
    em_tensor *tmp[8] = { 0 }; /* x, w, b, y, mean, rstd, wexp, bexp */
    tmp[0] = as_compute(input, ct, op, &failed);
    tmp[1] = as_compute(weight, ct, op, &failed);
    tmp[2] = as_compute(bias, ct, op, &failed);
    int64_t ss[2] = { N, group };
    tmp[3] = new_compute(input->ndim, input->sizes, ct);
    tmp[4] = new_compute(2, ss, ct);
    tmp[5] = new_compute(2, ss, ct);
    if (!failed) {
        tmp[6] = gn_expand(tmp[1], C, S, ct, &failed);
        tmp[7] = gn_expand(tmp[2], C, S, ct, &failed);
    }
    if (failed || !tmp[3] || !tmp[4] || !tmp[5]) {
        release_all(tmp, 8);
        return NULL;
    }
    int64_t L = C / group * S;
    ln_ctx c = { .x = em_tensor_data(tmp[0]), .w = tmp[6] ? em_tensor_data(tmp[6]) : NULL,
                 .b = tmp[7] ? em_tensor_data(tmp[7]) : NULL, .y = em_tensor_data(tmp[3]),
                 .m = em_tensor_data(tmp[4]), .r = em_tensor_data(tmp[5]), .M = N * group, .N = L, .wrows = group,
                 .eps = eps };
    em_cpu_parallel_for(N * group, row_grain(L), ct == EM_FLOAT64 ? ln_fwd_f64 : ln_fwd_f32, &c);
    em_tensor *y = to_result(tmp[3], dt, op), *m = to_result(tmp[4], dt, op), *r = to_result(tmp[5], dt, op);
    tmp[3] = tmp[4] = tmp[5] = NULL;
    release_all(tmp, 8);
    if (!y || !m || !r) {
        em_tensor_release(y);
        em_tensor_release(m);
        em_tensor_release(r);
        return NULL;
    }
    *mean = m;
    *rstd = r;
    return y;
}

em_tensor *em_cpu_native_group_norm_backward(em_keyset ks, em_tensor *grad_out, em_tensor *input, em_tensor *mean,
                                             em_tensor *rstd, em_tensor *weight, int64_t group, bool input_mask,
                                             bool weight_mask, bool bias_mask, em_tensor **grad_weight,
                                             em_tensor **grad_bias) {
    (void)ks;
    const char *op = "native_group_norm_backward";
    int64_t N, C, S;
    if (!gn_check(input, weight, NULL, group, op, &N, &C, &S)) return NULL;
    if (!same_shape_as(grad_out, input, op, "grad_out", "input") || !stat_ok(mean, N * group, op, "mean") ||
        !stat_ok(rstd, N * group, op, "rstd"))
        return NULL;
    em_dtype ct = compute_of(input->dtype), dt = input->dtype;
    bool want_dw = weight_mask && weight;
    bool failed = false;
    em_tensor *tmp[6] = { 0 }; /* x, go, mean, rstd, w, dx */
    tmp[0] = as_compute(input, ct, op, &failed);
    tmp[1] = as_compute(grad_out, ct, op, &failed);
    tmp[2] = as_compute(mean, ct, op, &failed);
    tmp[3] = as_compute(rstd, ct, op, &failed);
    tmp[4] = as_compute(weight, ct, op, &failed);
    tmp[5] = input_mask ? new_compute(input->ndim, input->sizes, ct) : NULL;
    double *sums = calloc((size_t)(2 * C + 2 * N * C + 1), sizeof(double)); /* dw, db, then part */
    if (failed || (input_mask && !tmp[5]) || !sums) {
        if (!sums) em_set_error(EM_ENOMEM, "%s: out of memory", op);
        release_all(tmp, 6);
        free(sums);
        return NULL;
    }
    bool f64 = ct == EM_FLOAT64;
    int64_t L = C / group * S;
    gnb_ctx g = { .x = em_tensor_data(tmp[0]), .go = em_tensor_data(tmp[1]), .mean = em_tensor_data(tmp[2]),
                  .rstd = em_tensor_data(tmp[3]), .w = tmp[4] ? em_tensor_data(tmp[4]) : NULL,
                  .dx = tmp[5] ? em_tensor_data(tmp[5]) : NULL, .part = sums + 2 * C, .N = N, .C = C, .G = group,
                  .S = S };
    em_cpu_parallel_for(N * group, row_grain(L), f64 ? gn_bwd_f64 : gn_bwd_f32, &g);
    /* per channel, over the batch in order: dw = sum sd rstd, db = sum sa (in double) */
    int64_t Cg = C / group;
    for (int64_t ch = 0; ch < C; ch++) {
        double sw = 0, sb = 0;
        for (int64_t n = 0; n < N; n++) {
            int64_t row = n * group + ch / Cg;
            double rs = f64 ? ((const double *)g.rstd)[row] : (double)((const float *)g.rstd)[row];
            sb += g.part[2 * (n * C + ch)];
            sw += g.part[2 * (n * C + ch) + 1] * rs;
        }
        sums[ch] = sw;
        sums[C + ch] = sb;
    }
    em_tensor *dx = input_mask ? to_result(tmp[5], dt, op) : empty_result(dt);
    tmp[5] = NULL;
    release_all(tmp, 6);
    em_tensor *dw = want_dw ? from_doubles(sums, C, dt) : empty_result(dt);
    em_tensor *db = bias_mask ? from_doubles(sums + C, C, dt) : empty_result(dt);
    free(sums);
    return three_results(dx, dw, db, grad_weight, grad_bias);
}
