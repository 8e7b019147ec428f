/* loss_softmax.c -- fused softmax and log_softmax along one dim, and their
 * backward ops _softmax_backward_data / _log_softmax_backward_data (family loss).
 *
 * Every kernel works on contiguous operands viewed as [outer, n, inner]
 * (n = the size of dim). inner == 1 (the last dim, or trailing sizes of 1)
 * runs row by row: a row is n adjacent elements and gets three passes --
 * its max, the sum of exp(x - max) (softmax stores the exps on the way),
 * the write. A larger inner runs blocks of up to COLS adjacent columns,
 * one accumulator per column, reading each of the n rows of the block in
 * memory order (the strided path). Tasks (rows, or (outer, column block)
 * pairs) are split over the intra-op pool; each task's result depends only
 * on its own elements, so values never depend on the thread count.
 *
 * Numerics follow PyTorch 1.13's vectorised CPU kernels (SoftMaxKernel.cpp):
 * float32 accumulates in float lanes with the vector exp of em_vmath.h,
 * float64 in double with libm; float16/bfloat16 compute in float32 (PyTorch
 * CPU has bfloat16 and refuses float16; ember takes both). softmax is
 * exp(x - max) * (1 / sum), log_softmax is x - (max + log(sum)): a row
 * holding +inf, NaN, or only -inf gives NaN, as there.
 */
#pragma GCC optimize("O3", "no-trapping-math", "no-math-errno")
#include <math.h>
#include <string.h>

#include "kernels/cpu/em_cpu.h"
#include "kernels/cpu/em_vmath.h"

#define COLS 64   /* columns per strided task */
#define LANES 16  /* independent accumulators in a row reduction */

/* ---- geometry ---- */

typedef struct {
    int64_t outer, n, inner;
} sm_geom;

/* [outer, n, inner] of shape t along d (wrapped; a 0-dim tensor is one element). */
static sm_geom geom_of(const em_tensor *t, int d) {
    sm_geom g = { 1, 1, 1 };
    if (t->ndim == 0) return g;
    for (int i = 0; i < d; i++) g.outer *= t->sizes[i];
    g.n = t->sizes[d];
    for (int i = d + 1; i < t->ndim; i++) g.inner *= t->sizes[i];
    return g;
}

static int64_t nblocks(const sm_geom *g) { return (g->inner + COLS - 1) / COLS; }

/* Operands: x (forward input, or backward's output), g (backward's
 * grad_output, NULL forward), y (the result); all contiguous, one dtype. */
typedef struct {
    const char *x, *g;
    char *y;
    sm_geom s;
    bool log;
} sm_ctx;

/* ---- the per-dtype loops ---- */

#define MAXF(a, b) ((b) > (a) ? (b) : (a)) /* NaN in b is skipped: the row turns NaN later */

/* a row's max (MAXF over it from -inf): vectorised for float32 */
#define ROWMAX_f32(x, n) em_cpu_rowmax_f32(x, n)
static inline __attribute__((always_inline)) double rowmax_f64(const double *x, int64_t n) {
    double acc[LANES], m = -INFINITY;
    int64_t i = 0;
    for (int k = 0; k < LANES; k++) acc[k] = -INFINITY;
    for (; i + LANES <= n; i += LANES)
        for (int k = 0; k < LANES; k++) acc[k] = MAXF(acc[k], x[i + k]);
    for (int k = 0; k < LANES; k++) m = MAXF(m, acc[k]);
    for (; i < n; i++) m = MAXF(m, x[i]);
    return m;
}
#define ROWMAX_f64(x, n) rowmax_f64(x, n)

/* Note [softmax's exp]: a float32 row's exps take em_vm_expf_fast (no
 * clamps, one power-of-two factor: a quarter fewer instructions) when
 * every x - max lies in [-86, 0], which em_vm_expf_fast covers with the
 * bits of em_vm_expf (Note [exp's fast path] in em_vmath.h), so the
 * choice never shows in the values. A row whose max minus min (both
 * skipping NaN, like MAXF) exceeds 86 or is not finite -- a +-inf in it,
 * or one only of NaNs -- takes em_vm_expf; NaN elements of a fast row give
 * NaN through the polynomial as there. rowfast_N is that test (float64:
 * never, its exp is libm's). */
/* (vectors as em_cpu_rowmax_f32: the plain loop did not vectorise) */
static inline __attribute__((always_inline)) bool rowfast_f32(const float *x, int64_t n, float m) {
    em_cpu_v8f a0, a1;
    for (int k = 0; k < 8; k++) a0[k] = a1[k] = __builtin_inff();
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) {
        em_cpu_v8f v0, v1;
        __builtin_memcpy(&v0, x + i, sizeof v0);
        __builtin_memcpy(&v1, x + i + 8, sizeof v1);
        em_cpu_v8i l0 = v0 < a0, l1 = v1 < a1; /* NaN: false, a kept */
        a0 = (em_cpu_v8f)((l0 & (em_cpu_v8i)v0) | (~l0 & (em_cpu_v8i)a0));
        a1 = (em_cpu_v8f)((l1 & (em_cpu_v8i)v1) | (~l1 & (em_cpu_v8i)a1));
    }
    float mn = __builtin_inff();
    for (int k = 0; k < 8; k++) mn = a0[k] < mn ? a0[k] : mn;
    for (int k = 0; k < 8; k++) mn = a1[k] < mn ? a1[k] : mn;
    for (; i < n; i++) mn = x[i] < mn ? x[i] : mn;
    return m - mn <= 86.0f; /* false for inf - inf, inf, NaN */
}
#define ROWFAST_f32(x, n, m) rowfast_f32(x, n, m)
#define ROWFAST_f64(x, n, m) false
#define EXPFAST_f32 em_vm_expf_fast
#define EXPFAST_f64 exp

/* The float32 loops carry EM_VM_CLONES (an x86-64-v3 clone with FMA and
 * contraction, Note [Vector math]): em_vm_expf then runs as fused
 * multiply-adds. The optimisation options are repeated: a function's
 * optimize attribute replaces the #pragma GCC optimize above for it (the
 * loops would drop to the command line's -O2 and its cheap vectoriser). */
#define SM_CLONES_f32 EM_VM_CLONES __attribute__((optimize("O3", "no-trapping-math", "no-math-errno", "fp-contract=fast")))
#define SM_CLONES_f64 CLONE_f64

/* DEF_SM(N, T, EXP, LOG): forward and backward loops of dtype N (C type
 * T) over rows (sm_fwd_rows_N, sm_bwd_rows_N) and column blocks
 * (sm_fwd_cols_N, sm_bwd_cols_N), each an em_cpu_range_fn over tasks. */
#define DEF_SM(N, T, EXP, LOG)                                                                     \
    SM_CLONES_##N static void sm_fwd_rows_##N(int64_t begin, int64_t end, void *ctx_) {                \
        const sm_ctx *c = ctx_;                                                                    \
        const int64_t n = c->s.n;                                                                  \
        for (int64_t r = begin; r < end; r++) {                                                    \
            const T *restrict x = (const T *)c->x + r * n;                                         \
            T *restrict y = (T *)c->y + r * n;                                                     \
            T acc[LANES];                                                                          \
            int64_t i = 0;                                                                         \
            T m = ROWMAX_##N(x, n);                                                                \
            for (int k = 0; k < LANES; k++) acc[k] = 0;                                            \
            bool fast = ROWFAST_##N(x, n, m); /* Note [softmax's exp] */                            \
            if (c->log && fast) {                                                                  \
                for (; i + LANES <= n; i += LANES)                                                 \
                    for (int k = 0; k < LANES; k++) acc[k] += EXPFAST_##N(x[i + k] - m);           \
            } else if (c->log) {                                                                   \
                for (; i + LANES <= n; i += LANES)                                                 \
                    for (int k = 0; k < LANES; k++) acc[k] += EXP(x[i + k] - m);                   \
            } else if (fast) {                                                                     \
                for (; i + LANES <= n; i += LANES)                                                 \
                    for (int k = 0; k < LANES; k++) {                                              \
                        T e = EXPFAST_##N(x[i + k] - m);                                           \
                        y[i + k] = e;                                                              \
                        acc[k] += e;                                                               \
                    }                                                                              \
            } else {                                                                               \
                for (; i + LANES <= n; i += LANES)                                                 \
                    for (int k = 0; k < LANES; k++) {                                              \
                        T e = EXP(x[i + k] - m);                                                   \
                        y[i + k] = e;                                                              \
                        acc[k] += e;                                                               \
                    }                                                                              \
            }                                                                                      \
            T s = 0;                                                                               \
            for (int k = 0; k < LANES; k++) s += acc[k];                                           \
            for (; i < n; i++) {                                                                   \
                T e = EXP(x[i] - m);                                                               \
                if (!c->log) y[i] = e;                                                             \
                s += e;                                                                            \
            }                                                                                      \
            if (c->log) {                                                                          \
                T l = m + LOG(s);                                                                  \
                for (i = 0; i < n; i++) y[i] = x[i] - l;                                           \
            } else {                                                                               \
                T inv = (T)1 / s;                                                                  \
                for (i = 0; i < n; i++) y[i] *= inv;                                               \
            }                                                                                      \
        }                                                                                          \
    }                                                                                              \
    SM_CLONES_##N static void sm_fwd_cols_##N(int64_t begin, int64_t end, void *ctx_) {                \
        const sm_ctx *c = ctx_;                                                                    \
        const int64_t n = c->s.n, inner = c->s.inner, nb = nblocks(&c->s);                         \
        T m[COLS], s[COLS];                                                                        \
        for (int64_t t = begin; t < end; t++) {                                                    \
            int64_t o = t / nb, j0 = (t % nb) * COLS;                                              \
            int64_t w = inner - j0 < COLS ? inner - j0 : COLS;                                     \
            const T *restrict x = (const T *)c->x + o * n * inner + j0;                            \
            T *restrict y = (T *)c->y + o * n * inner + j0;                                        \
            for (int64_t j = 0; j < w; j++) m[j] = -INFINITY, s[j] = 0;                            \
            for (int64_t i = 0; i < n; i++)                                                        \
                for (int64_t j = 0; j < w; j++) m[j] = MAXF(m[j], x[i * inner + j]);               \
            for (int64_t i = 0; i < n; i++)                                                        \
                for (int64_t j = 0; j < w; j++) {                                                  \
                    T e = EXP(x[i * inner + j] - m[j]);                                            \
                    if (!c->log) y[i * inner + j] = e;                                             \
                    s[j] += e;                                                                     \
                }                                                                                  \
            if (c->log) {                                                                          \
                for (int64_t j = 0; j < w; j++) m[j] += LOG(s[j]);                                 \
                for (int64_t i = 0; i < n; i++)                                                    \
                    for (int64_t j = 0; j < w; j++) y[i * inner + j] = x[i * inner + j] - m[j];    \
            } else {                                                                               \
                for (int64_t j = 0; j < w; j++) s[j] = (T)1 / s[j];                                \
                for (int64_t i = 0; i < n; i++)                                                    \
                    for (int64_t j = 0; j < w; j++) y[i * inner + j] *= s[j];                      \
            }                                                                                      \
        }                                                                                          \
    }                                                                                              \
    /* softmax: gi = y * (g - sum(g * y)); log_softmax: gi = g - exp(y) * sum(g) */                \
    SM_CLONES_##N static void sm_bwd_rows_##N(int64_t begin, int64_t end, void *ctx_) {                \
        const sm_ctx *c = ctx_;                                                                    \
        const int64_t n = c->s.n;                                                                  \
        for (int64_t r = begin; r < end; r++) {                                                    \
            const T *restrict out = (const T *)c->x + r * n;                                       \
            const T *restrict g = (const T *)c->g + r * n;                                         \
            T *restrict y = (T *)c->y + r * n;                                                     \
            T acc[LANES];                                                                          \
            for (int k = 0; k < LANES; k++) acc[k] = 0;                                            \
            int64_t i = 0;                                                                         \
            if (c->log) {                                                                          \
                for (; i + LANES <= n; i += LANES)                                                 \
                    for (int k = 0; k < LANES; k++) acc[k] += g[i + k];                            \
            } else {                                                                               \
                for (; i + LANES <= n; i += LANES)                                                 \
                    for (int k = 0; k < LANES; k++) acc[k] += g[i + k] * out[i + k];              \
            }                                                                                      \
            T s = 0;                                                                               \
            for (int k = 0; k < LANES; k++) s += acc[k];                                           \
            for (; i < n; i++) s += c->log ? g[i] : g[i] * out[i];                                 \
            if (c->log)                                                                            \
                for (i = 0; i < n; i++) y[i] = g[i] - EXP(out[i]) * s;                             \
            else                                                                                   \
                for (i = 0; i < n; i++) y[i] = (g[i] - s) * out[i];                                \
        }                                                                                          \
    }                                                                                              \
    SM_CLONES_##N static void sm_bwd_cols_##N(int64_t begin, int64_t end, void *ctx_) {                \
        const sm_ctx *c = ctx_;                                                                    \
        const int64_t n = c->s.n, inner = c->s.inner, nb = nblocks(&c->s);                         \
        T s[COLS];                                                                                 \
        for (int64_t t = begin; t < end; t++) {                                                    \
            int64_t o = t / nb, j0 = (t % nb) * COLS;                                              \
            int64_t w = inner - j0 < COLS ? inner - j0 : COLS;                                     \
            const T *restrict out = (const T *)c->x + o * n * inner + j0;                          \
            const T *restrict g = (const T *)c->g + o * n * inner + j0;                            \
            T *restrict y = (T *)c->y + o * n * inner + j0;                                        \
            for (int64_t j = 0; j < w; j++) s[j] = 0;                                              \
            for (int64_t i = 0; i < n; i++)                                                        \
                for (int64_t j = 0; j < w; j++)                                                    \
                    s[j] += c->log ? g[i * inner + j] : g[i * inner + j] * out[i * inner + j];     \
            for (int64_t i = 0; i < n; i++)                                                        \
                for (int64_t j = 0; j < w; j++) {                                                  \
                    int64_t k = i * inner + j;                                                     \
                    y[k] = c->log ? g[k] - EXP(out[k]) * s[j] : (g[k] - s[j]) * out[k];            \
                }                                                                                  \
        }                                                                                          \
    }

DEF_SM(f32, float, em_vm_expf, logf)
DEF_SM(f64, double, exp, log)

/* ---- drivers ---- */

/* t as a contiguous tensor of dtype dt (a new reference). */
static em_tensor *as_contig(em_tensor *t, em_dtype dt, const char *op) {
    if (t->dtype == dt && t->is_contiguous) return em_tensor_retain(t);
    return em_cpu_to_dtype(t, dt, op);
}

/* Runs the forward (g NULL) or backward loops of dtype dt (float32 or
 * float64) over c, rows or column blocks as the geometry asks. */
static void sm_run(sm_ctx *c, em_dtype dt, bool backward) {
    int64_t per, tasks;
    em_cpu_range_fn fn;
    if (c->s.inner == 1) {
        tasks = c->s.outer;
        per = c->s.n;
        fn = dt == EM_FLOAT32 ? (backward ? sm_bwd_rows_f32 : sm_fwd_rows_f32)
                              : (backward ? sm_bwd_rows_f64 : sm_fwd_rows_f64);
    } else {
        tasks = c->s.outer * nblocks(&c->s);
        per = c->s.n * (c->s.inner < COLS ? c->s.inner : COLS);
        fn = dt == EM_FLOAT32 ? (backward ? sm_bwd_cols_f32 : sm_fwd_cols_f32)
                              : (backward ? sm_bwd_cols_f64 : sm_fwd_cols_f64);
    }
    int64_t grain = EM_CPU_GRAIN / (per > 0 ? per : 1);
    em_cpu_parallel_for(tasks, grain > 0 ? grain : 1, fn, c);
}

/* The compute dtype of a floating dtype: float32 for the half types. */
static em_dtype compute_of(em_dtype dt) { return dt == EM_FLOAT64 ? EM_FLOAT64 : EM_FLOAT32; }

/* The result in dtype want from r (compute dtype; consumed). */
static em_tensor *finish(em_tensor *r, em_dtype want, const char *op) {
    if (!r || r->dtype == want) return r;
    em_tensor *o = em_cpu_to_dtype(r, want, op);
    em_tensor_release(r);
    return o;
}

/* softmax / log_softmax (PyTorch's F.softmax(self, dim, dtype=)): self is
 * cast to dtype first when given; an empty non-floating tensor comes back
 * as an empty tensor of its dtype, as in PyTorch; a non-empty one is
 * refused. Returns a new contiguous tensor of self's (or dtype's) shape. */
static em_tensor *softmax_fwd(em_tensor *self, int64_t dim, em_dtype dtype, bool log, const char *op) {
    int d = em_wrap_dim(dim, self->ndim, op);
    if (d < 0) return NULL;
    if (dtype != EM_DTYPE_NONE && (dtype < 0 || dtype >= EM_DTYPE_COUNT)) {
        em_set_error(EM_ETYPE, "%s: bad dtype %d", op, (int)dtype);
        return NULL;
    }
    em_dtype out_dt = dtype != EM_DTYPE_NONE ? dtype : self->dtype;
    if (!em_dtype_is_floating(out_dt)) {
        if (self->numel == 0) return em_tensor_new(self->ndim, self->sizes, out_dt, em_cpu_dev());
        em_set_error(EM_ETYPE, "%s: expected a floating tensor, got %s (pass dtype= to convert)", op,
                     em_dtype_name(out_dt));
        return NULL;
    }
    em_dtype cdt = compute_of(out_dt);
    em_tensor *y = em_tensor_new(self->ndim, self->sizes, cdt, em_cpu_dev());
    if (!y || self->numel == 0) return finish(y, out_dt, op);
    em_tensor *x = as_contig(self, cdt, op);
    if (!x) {
        em_tensor_release(y);
        return NULL;
    }
    sm_ctx c = { em_tensor_data(x), NULL, em_tensor_data(y), geom_of(self, d), log };
    sm_run(&c, cdt, false);
    em_tensor_release(x);
    return finish(y, out_dt, op);
}

em_tensor *em_cpu_softmax(em_keyset ks, em_tensor *self, int64_t dim, em_dtype dtype) {
    (void)ks;
    return softmax_fwd(self, dim, dtype, false, "softmax");
}

em_tensor *em_cpu_log_softmax(em_keyset ks, em_tensor *self, int64_t dim, em_dtype dtype) {
    (void)ks;
    return softmax_fwd(self, dim, dtype, true, "log_softmax");
}

/* The backward ops: grad_output and output of one shape, output floating;
 * computed in output's compute dtype (grad_output is cast to it), returned
 * in input_dtype (floating). A new contiguous tensor. */
static em_tensor *softmax_bwd(em_tensor *grad_output, em_tensor *output, int64_t dim, em_dtype input_dtype, bool log,
                              const char *op) {
    bool same = grad_output->ndim == output->ndim;
    for (int i = 0; same && i < output->ndim; i++) same = grad_output->sizes[i] == output->sizes[i];
    if (!same) {
        char a[EM_SHAPE_STR_MAX], b[EM_SHAPE_STR_MAX];
        em_set_error(EM_ESHAPE, "%s: grad_output %s must have output's shape %s", op,
                     em_shape_str(grad_output->ndim, grad_output->sizes, a, sizeof a),
                     em_shape_str(output->ndim, output->sizes, b, sizeof b));
        return NULL;
    }
    if (!em_dtype_is_floating(output->dtype) || !em_dtype_is_floating(grad_output->dtype)) {
        em_set_error(EM_ETYPE, "%s: expected floating grad_output and output, got %s and %s", op,
                     em_dtype_name(grad_output->dtype), em_dtype_name(output->dtype));
        return NULL;
    }
    if (input_dtype < 0 || input_dtype >= EM_DTYPE_COUNT || !em_dtype_is_floating(input_dtype)) {
        em_set_error(EM_ETYPE, "%s: input_dtype must be a floating dtype, got %s", op,
                     input_dtype >= 0 && input_dtype < EM_DTYPE_COUNT ? em_dtype_name(input_dtype) : "none");
        return NULL;
    }
    int d = em_wrap_dim(dim, output->ndim, op);
    if (d < 0) return NULL;
    em_dtype cdt = compute_of(output->dtype);
    em_tensor *y = em_tensor_new(output->ndim, output->sizes, cdt, em_cpu_dev());
    if (!y || output->numel == 0) return finish(y, input_dtype, op);
    em_tensor *o = as_contig(output, cdt, op);
    em_tensor *g = o ? as_contig(grad_output, cdt, op) : NULL;
    if (!g) {
        em_tensor_release(o);
        em_tensor_release(y);
        return NULL;
    }
    sm_ctx c = { em_tensor_data(o), em_tensor_data(g), em_tensor_data(y), geom_of(output, d), log };
    sm_run(&c, cdt, true);
    em_tensor_release(o);
    em_tensor_release(g);
    return finish(y, input_dtype, op);
}

em_tensor *em_cpu__softmax_backward_data(em_keyset ks, em_tensor *grad_output, em_tensor *output, int64_t dim,
                                         em_dtype input_dtype) {
    (void)ks;
    return softmax_bwd(grad_output, output, dim, input_dtype, false, "_softmax_backward_data");
}

em_tensor *em_cpu__log_softmax_backward_data(em_keyset ks, em_tensor *grad_output, em_tensor *output, int64_t dim,
                                             em_dtype input_dtype) {
    (void)ks;
    return softmax_bwd(grad_output, output, dim, input_dtype, true, "_log_softmax_backward_data");
}
