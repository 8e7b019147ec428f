/* conv.c -- the conv family's CPU kernels: convolution (1-3 spatial dims,
 * transposed or not, groups), convolution_backward, and unfold/fold
 * (im2col/col2im) -- all over the three products of Note [Convolution
 * geometry] (kernels/em_conv.h).
 *
 * Layout: channels first (NCHW); operands are made contiguous in the
 * compute dtype (float64 for float64, float32 for float32 and the half
 * types, whose results are rounded back). Each product runs on a chunk of
 * nb samples at once: im2col writes nb samples' columns side by side into
 * one (rows x nb*L) matrix and one BLAS gemm per group does the chunk.
 * With several threads the batch is split into one pool job per thread,
 * each running its samples' copies and single-threaded gemms (Note
 * [Sample-parallel products]); with one thread, or fewer samples than
 * threads, the copies around the gemms (im2col, col2im, gathering the
 * column side into the gemm's layout and scattering it back) run over the
 * intra-op pool and the gemms on OpenBLAS's threads. A 1x1 kernel
 * with stride 1 and no padding needs no im2col (one sample at a time, the
 * gemms read and write the tensors themselves); the image -> column side
 * product of a depthwise convolution (one image channel per group: conv's
 * forward, conv_transpose's input gradient) runs a direct loop over the
 * pool; its other two products use the per-group gemms. A float32 3x3
 * stride-1 convolution with at least 8 channels each side runs all three
 * products (forward, input and weight gradients; a transposed one's too)
 * through Winograd F(2x2, 3x3) instead (Note [Winograd convolution],
 * conv_winograd.c).
 */
/* O3: the copy, bias and sum loops below vectorise (the file's hot loops
 * besides BLAS; the same pragma as the elementwise kernels). */
#pragma GCC optimize("O3", "no-trapping-math", "no-math-errno", "no-tree-loop-distribute-patterns")
#include "kernels/cpu/conv_wino.h"
#include "kernels/cpu/em_cpu.h"
#include "kernels/em_conv.h"

#include <cblas.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>

/* ---- scratch and dtypes ---- */

/* The compute dtype of a floating dtype. */
static em_dtype compute_dtype(em_dtype dt) { return dt == EM_FLOAT64 ? EM_FLOAT64 : EM_FLOAT32; }

/* t as a contiguous tensor of dtype ct: t itself (retained) when it is
 * one already, else a converted copy. NULL with the error set. */
static em_tensor *as_compute(em_tensor *t, em_dtype ct, const char *op) {
    if (t->is_contiguous && t->dtype == ct) return em_tensor_retain(t);
    return em_cpu_to_dtype(t, ct, op);
}

/* r converted to dtype dt (r released), or r itself when it has it. */
static em_tensor *to_result_dtype(em_tensor *r, em_dtype dt, const char *op) {
    if (!r || r->dtype == dt) return r;
    em_tensor *c = em_cpu_to_dtype(r, dt, op);
    em_tensor_release(r);
    return c;
}

/* A scratch buffer of n elements of ct (the caching allocator's memory). */
static em_tensor *scratch(int64_t n, em_dtype ct) {
    int64_t sz = n > 0 ? n : 1;
    return em_tensor_new(1, &sz, ct, em_cpu_dev());
}

/* C (M x N, ldc) = alpha op(A) op(B) + beta C, row-major, in ct. beta 0
 * zeroes C here (a vectorised memset) and asks BLAS for beta 1: OpenBLAS's
 * own beta-0 pass stores one element at a time and cost a tenth of a conv
 * step, and its kernels then add the product to the zeroed C exactly so. */
static void gemm(em_dtype ct, bool ta, bool tb, int64_t M, int64_t N, int64_t K, const void *A, int64_t lda,
                 const void *B, int64_t ldb, double beta, void *C, int64_t ldc) {
    if (beta == 0.0 && M > 0 && N > 0) {
        size_t es = em_dtype_size(ct);
        if (ldc == N) memset(C, 0, (size_t)(M * N) * es);
        else
            for (int64_t i = 0; i < M; i++) memset((char *)C + (size_t)(i * ldc) * es, 0, (size_t)N * es);
        beta = 1.0;
    }
    if (ct == EM_FLOAT64)
        cblas_dgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans, (int)M, (int)N,
                    (int)K, 1.0, A, (int)lda, B, (int)ldb, beta, C, (int)ldc);
    else
        cblas_sgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans, (int)M, (int)N,
                    (int)K, 1.0f, A, (int)lda, B, (int)ldb, (float)beta, C, (int)ldc);
}

/* ---- im2col, col2im (one channel plane of one sample) ---- */

/* The o range [lo, hi) of a dim whose position o reads o * s + off, inside [0, I). */
static inline void valid_range(int64_t n_out, int64_t n_in, int64_t s, int64_t off, int64_t *lo, int64_t *hi) {
    int64_t a = off >= 0 ? 0 : (-off + s - 1) / s;
    int64_t b = n_in - 1 - off < 0 ? 0 : (n_in - 1 - off) / s + 1;
    if (b > n_out) b = n_out;
    if (a > b) a = b;
    *lo = a;
    *hi = b;
}

/* im2col: the k0*k1*k2 rows (ld elements apart, L = col plane columns each)
 * of one image plane; col2im: those rows added back into the plane
 * (which the caller zeroed). */
#define CONV_PLANE_FNS(T, SFX)                                                                                   \
    static void im2col_##SFX(const T *img, const em_conv_geom *g, T *row, int64_t ld) {                          \
        const int64_t I0 = g->img[0], I1 = g->img[1], I2 = g->img[2];                                           \
        const int64_t O0 = g->col[0], O1 = g->col[1], O2 = g->col[2];                                           \
        for (int64_t k0 = 0; k0 < g->k[0]; k0++)                                                                 \
            for (int64_t k1 = 0; k1 < g->k[1]; k1++)                                                             \
                for (int64_t k2 = 0; k2 < g->k[2]; k2++, row += ld) {                                            \
                    int64_t off2 = k2 * g->dil[2] - g->pad[2], s2 = g->stride[2], lo, hi;                        \
                    valid_range(O2, I2, s2, off2, &lo, &hi);                                                     \
                    for (int64_t o0 = 0; o0 < O0; o0++) {                                                        \
                        int64_t i0 = o0 * g->stride[0] - g->pad[0] + k0 * g->dil[0];                             \
                        for (int64_t o1 = 0; o1 < O1; o1++) {                                                    \
                            int64_t i1 = o1 * g->stride[1] - g->pad[1] + k1 * g->dil[1];                         \
                            T *dst = row + (o0 * O1 + o1) * O2;                                                  \
                            if (i0 < 0 || i0 >= I0 || i1 < 0 || i1 >= I1) {                                      \
                                memset(dst, 0, sizeof(T) * (size_t)O2);                                          \
                                continue;                                                                        \
                            }                                                                                    \
                            const T *src = img + (i0 * I1 + i1) * I2 + off2;                                     \
                            for (int64_t o2 = 0; o2 < lo; o2++) dst[o2] = 0;                                     \
                            if (s2 == 1) /* rows are short (a CNN's 7..32): a loop, not a libc call */          \
                                for (int64_t o2 = lo; o2 < hi; o2++) dst[o2] = src[o2];                          \
                            else                                                                                 \
                                for (int64_t o2 = lo; o2 < hi; o2++) dst[o2] = src[o2 * s2];                     \
                            for (int64_t o2 = hi; o2 < O2; o2++) dst[o2] = 0;                                    \
                        }                                                                                        \
                    }                                                                                            \
                }                                                                                                \
    }                                                                                                            \
    static void col2im_##SFX(T *img, const em_conv_geom *g, const T *row, int64_t ld) {                          \
        const int64_t I0 = g->img[0], I1 = g->img[1], I2 = g->img[2];                                           \
        const int64_t O0 = g->col[0], O1 = g->col[1], O2 = g->col[2];                                           \
        for (int64_t k0 = 0; k0 < g->k[0]; k0++)                                                                 \
            for (int64_t k1 = 0; k1 < g->k[1]; k1++)                                                             \
                for (int64_t k2 = 0; k2 < g->k[2]; k2++, row += ld) {                                            \
                    int64_t off2 = k2 * g->dil[2] - g->pad[2], s2 = g->stride[2], lo, hi;                        \
                    valid_range(O2, I2, s2, off2, &lo, &hi);                                                     \
                    for (int64_t o0 = 0; o0 < O0; o0++) {                                                        \
                        int64_t i0 = o0 * g->stride[0] - g->pad[0] + k0 * g->dil[0];                             \
                        if (i0 < 0 || i0 >= I0) continue;                                                        \
                        for (int64_t o1 = 0; o1 < O1; o1++) {                                                    \
                            int64_t i1 = o1 * g->stride[1] - g->pad[1] + k1 * g->dil[1];                         \
                            if (i1 < 0 || i1 >= I1) continue;                                                    \
                            const T *src = row + (o0 * O1 + o1) * O2;                                            \
                            T *dst = img + (i0 * I1 + i1) * I2 + off2;                                           \
                            if (s2 == 1)                                                                         \
                                for (int64_t o2 = lo; o2 < hi; o2++) dst[o2] += src[o2];                         \
                            else                                                                                 \
                                for (int64_t o2 = lo; o2 < hi; o2++) dst[o2 * s2] += src[o2];                    \
                        }                                                                                        \
                    }                                                                                            \
                }                                                                                                \
    }
CONV_PLANE_FNS(float, f32)
CONV_PLANE_FNS(double, f64)

/* Note [Padded planes]: im2col and col2im above test every row against the
 * image's bounds and copy rows of a few elements between zero runs; on a
 * CNN's small planes that bookkeeping costs more than the copy. The _pad
 * variants first place the plane in a zero-bordered copy (pad, of the
 * sizes pad_dims gives: every position the taps read lies inside it), so
 * each row of a tap is one unconditional strided copy (im2col) or add
 * (col2im, into the zeroed bordered copy, whose inside is then copied
 * out). They give the same values as the checked versions, in the same
 * order of additions (each ISA clone too: copies and one add per element).
 * Used when the bordered plane is small (pad_fits). */

/* The bordered plane's sizes: the image plus the padding before it and
 * room for the farthest tap read after it. */
static void pad_dims(const em_conv_geom *g, int64_t P[3]) {
    for (int d = 0; d < 3; d++) {
        int64_t far = (g->col[d] - 1) * g->stride[d] + (g->k[d] - 1) * g->dil[d] - g->pad[d] + 1;
        P[d] = g->pad[d] + (far > g->img[d] ? far : g->img[d]);
    }
}

#ifndef PAD_PLANE_MAX
#define PAD_PLANE_MAX ((int64_t)1 << 15)
#endif
/* Whether the bordered plane of g is at most PAD_PLANE_MAX elements. */
static bool pad_fits(const em_conv_geom *g) {
    int64_t P[3];
    pad_dims(g, P);
    return P[0] <= PAD_PLANE_MAX && P[1] <= PAD_PLANE_MAX && P[2] <= PAD_PLANE_MAX && P[0] * P[1] <= PAD_PLANE_MAX &&
           P[0] * P[1] * P[2] <= PAD_PLANE_MAX;
}

#define CONV_PAD_FNS(T, SFX)                                                                                     \
    CLONE_##SFX static void im2col_pad_##SFX(const T *restrict img, const em_conv_geom *g, T *restrict row,     \
                                             int64_t ld, T *restrict pad) {                                     \
        int64_t P[3];                                                                                            \
        pad_dims(g, P);                                                                                          \
        const int64_t I0 = g->img[0], I1 = g->img[1], I2 = g->img[2];                                           \
        const int64_t O0 = g->col[0], O1 = g->col[1], O2 = g->col[2];                                           \
        const int64_t s0 = g->stride[0], s1 = g->stride[1], s2 = g->stride[2];                                  \
        memset(pad, 0, sizeof(T) * (size_t)(P[0] * P[1] * P[2]));                                                \
        for (int64_t i0 = 0; i0 < I0; i0++)                                                                      \
            for (int64_t i1 = 0; i1 < I1; i1++) {                                                                \
                T *restrict d = pad + ((i0 + g->pad[0]) * P[1] + i1 + g->pad[1]) * P[2] + g->pad[2];             \
                const T *restrict s = img + (i0 * I1 + i1) * I2;                                                 \
                for (int64_t i2 = 0; i2 < I2; i2++) d[i2] = s[i2];                                               \
            }                                                                                                    \
        for (int64_t k0 = 0; k0 < g->k[0]; k0++)                                                                 \
            for (int64_t k1 = 0; k1 < g->k[1]; k1++)                                                             \
                for (int64_t k2 = 0; k2 < g->k[2]; k2++, row += ld) {                                            \
                    const T *base = pad + (k0 * g->dil[0] * P[1] + k1 * g->dil[1]) * P[2] + k2 * g->dil[2];      \
                    T *restrict dst = row;                                                                       \
                    for (int64_t o0 = 0; o0 < O0; o0++)                                                          \
                        for (int64_t o1 = 0; o1 < O1; o1++, dst += O2) {                                         \
                            const T *restrict src = base + (o0 * s0 * P[1] + o1 * s1) * P[2];                    \
                            if (s2 == 1)                                                                         \
                                for (int64_t o2 = 0; o2 < O2; o2++) dst[o2] = src[o2];                           \
                            else                                                                                 \
                                for (int64_t o2 = 0; o2 < O2; o2++) dst[o2] = src[o2 * s2];                      \
                        }                                                                                        \
                }                                                                                                \
    }                                                                                                            \
    CLONE_##SFX static void col2im_pad_##SFX(T *restrict img, const em_conv_geom *g, const T *restrict row,     \
                                             int64_t ld, T *restrict pad) {                                     \
        int64_t P[3];                                                                                            \
        pad_dims(g, P);                                                                                          \
        const int64_t I0 = g->img[0], I1 = g->img[1], I2 = g->img[2];                                           \
        const int64_t O0 = g->col[0], O1 = g->col[1], O2 = g->col[2];                                           \
        const int64_t s0 = g->stride[0], s1 = g->stride[1], s2 = g->stride[2];                                  \
        memset(pad, 0, sizeof(T) * (size_t)(P[0] * P[1] * P[2]));                                                \
        for (int64_t k0 = 0; k0 < g->k[0]; k0++)                                                                 \
            for (int64_t k1 = 0; k1 < g->k[1]; k1++)                                                             \
                for (int64_t k2 = 0; k2 < g->k[2]; k2++, row += ld) {                                            \
                    T *base = pad + (k0 * g->dil[0] * P[1] + k1 * g->dil[1]) * P[2] + k2 * g->dil[2];            \
                    const T *restrict src = row;                                                                 \
                    for (int64_t o0 = 0; o0 < O0; o0++)                                                          \
                        for (int64_t o1 = 0; o1 < O1; o1++, src += O2) {                                         \
                            T *restrict dst = base + (o0 * s0 * P[1] + o1 * s1) * P[2];                          \
                            if (s2 == 1)                                                                         \
                                for (int64_t o2 = 0; o2 < O2; o2++) dst[o2] += src[o2];                          \
                            else                                                                                 \
                                for (int64_t o2 = 0; o2 < O2; o2++) dst[o2 * s2] += src[o2];                     \
                        }                                                                                        \
                }                                                                                                \
        for (int64_t i0 = 0; i0 < I0; i0++)                                                                      \
            for (int64_t i1 = 0; i1 < I1; i1++) {                                                                \
                const T *restrict s = pad + ((i0 + g->pad[0]) * P[1] + i1 + g->pad[1]) * P[2] + g->pad[2];       \
                T *restrict d = img + (i0 * I1 + i1) * I2;                                                       \
                for (int64_t i2 = 0; i2 < I2; i2++) d[i2] = s[i2];                                               \
            }                                                                                                    \
    }
CONV_PAD_FNS(float, f32)
CONV_PAD_FNS(double, f64)

/* ---- the pool jobs: one item per (sample of the chunk, channel) ---- */

typedef enum { J_IM2COL, J_COL2IM, J_GATHER, J_SCATTER } job_kind;

typedef struct {
    job_kind kind;
    const em_conv_geom *g;
    em_dtype ct;
    int64_t n0, grp, nb; /* chunk's first sample, group, samples in the chunk */
    int64_t nc;          /* channels per item row: the group's image (im2col, col2im) or column-side channels */
    const char *src;
    char *dst;
} job_t;

static int64_t kk_of(const em_conv_geom *g) { return g->k[0] * g->k[1] * g->k[2]; }
static int64_t img_plane(const em_conv_geom *g) { return g->img[0] * g->img[1] * g->img[2]; }
static int64_t col_plane(const em_conv_geom *g) { return g->col[0] * g->col[1] * g->col[2]; }

/* im2col/col2im: src/dst the image tensor (N, C_img, IP) and the chunk's
 * column matrix (nc * kk rows, nb * L columns). gather/scatter: the column
 * side tensor (N, C_col, L) and the chunk's matrix (nc rows, nb * L). */
static void job_range(int64_t b, int64_t e, void *vctx) {
    const job_t *j = vctx;
    const em_conv_geom *g = j->g;
    size_t es = em_dtype_size(j->ct);
    int64_t L = col_plane(g), IP = img_plane(g), kk = kk_of(g), ld = j->nb * L;
    /* Note [Padded planes]: this range's bordered plane (NULL: the checked copies) */
    void *pad = NULL;
    if ((j->kind == J_IM2COL || j->kind == J_COL2IM) && pad_fits(g)) {
        int64_t P[3];
        pad_dims(g, P);
        pad = malloc((size_t)(P[0] * P[1] * P[2]) * es);
    }
    for (int64_t it = b; it < e; it++) {
        int64_t s = it / j->nc, c = it % j->nc, n = j->n0 + s;
        switch (j->kind) {
        case J_IM2COL: {
            const char *img = j->src + (size_t)(((n * g->C_img) + j->grp * j->nc + c) * IP) * es;
            char *row = j->dst + (size_t)(c * kk * ld + s * L) * es;
            if (pad && j->ct == EM_FLOAT64) im2col_pad_f64((const double *)img, g, (double *)row, ld, pad);
            else if (pad) im2col_pad_f32((const float *)img, g, (float *)row, ld, pad);
            else if (j->ct == EM_FLOAT64) im2col_f64((const double *)img, g, (double *)row, ld);
            else im2col_f32((const float *)img, g, (float *)row, ld);
            break;
        }
        case J_COL2IM: {
            char *img = j->dst + (size_t)(((n * g->C_img) + j->grp * j->nc + c) * IP) * es;
            const char *row = j->src + (size_t)(c * kk * ld + s * L) * es;
            if (pad && j->ct == EM_FLOAT64) {
                col2im_pad_f64((double *)img, g, (const double *)row, ld, pad);
            } else if (pad) {
                col2im_pad_f32((float *)img, g, (const float *)row, ld, pad);
            } else {
                memset(img, 0, (size_t)IP * es);
                if (j->ct == EM_FLOAT64) col2im_f64((double *)img, g, (const double *)row, ld);
                else col2im_f32((float *)img, g, (const float *)row, ld);
            }
            break;
        }
        case J_GATHER:
            memcpy(j->dst + (size_t)(c * ld + s * L) * es,
                   j->src + (size_t)((n * g->C_col + j->grp * j->nc + c) * L) * es, (size_t)L * es);
            break;
        case J_SCATTER:
            memcpy(j->dst + (size_t)((n * g->C_col + j->grp * j->nc + c) * L) * es,
                   j->src + (size_t)(c * ld + s * L) * es, (size_t)L * es);
            break;
        }
    }
    free(pad);
}

static void run_job(job_kind kind, const em_conv_geom *g, em_dtype ct, int64_t n0, int64_t grp, int64_t nb,
                    int64_t nc, const char *src, char *dst) {
    job_t j = { kind, g, ct, n0, grp, nb, nc, src, dst };
    int64_t work = (kind == J_IM2COL || kind == J_COL2IM) ? kk_of(g) * col_plane(g) : col_plane(g);
    int64_t grain = work >= EM_CPU_GRAIN ? 1 : EM_CPU_GRAIN / (work ? work : 1);
    em_cpu_parallel_for(nb * nc, grain, job_range, &j);
}

/* ---- the three products (Note [Convolution geometry]) ---- */

/* A 1x1 kernel, stride 1, no padding: im2col is the image itself. */
static bool is_pointwise(const em_conv_geom *g) {
    for (int d = 0; d < 3; d++)
        if (g->k[d] != 1 || g->stride[d] != 1 || g->pad[d] != 0 || g->img[d] != g->col[d]) return false;
    return true;
}

/* Samples per chunk: the column matrix stays under CHUNK_ELEMS elements
 * (128 KB of float32), at least one sample; 1 for a pointwise geometry.
 * A CNN's per-sample matrices (27..144 rows by 256..1024 columns) then go
 * one sample at a time: measured 6% less CPU time than 2 samples at once
 * (conv 64x3x32x32 -> 16, 3x3) and 15% less than 8 (64x16x16x16 -> 32),
 * the gemm's operands staying in L2. */
#ifndef CHUNK_ELEMS
#define CHUNK_ELEMS ((int64_t)1 << 15)
#endif
static int64_t chunk_samples(const em_conv_geom *g) {
    if (is_pointwise(g) || g->N <= 1) return 1;
    int64_t per = (g->C_img / g->G) * kk_of(g) * col_plane(g);
    int64_t nb = per > 0 ? CHUNK_ELEMS / per : g->N;
    if (nb < 1) nb = 1;
    return nb > g->N ? g->N : nb;
}

/* Whether the BLAS int arguments of the products fit. */
static bool blas_fits(const em_conv_geom *g, int64_t nb, const char *op) {
    int64_t R = (g->C_img / g->G) * kk_of(g), L = col_plane(g) * nb;
    if (R < INT_MAX && L < INT_MAX && g->C_col < INT_MAX) return true;
    em_set_error(EM_EVALUE, "%s: the problem is too large for one BLAS product (%lld x %lld)", op, (long long)R,
                 (long long)L);
    return false;
}

/* Scratch for a chunk: the column matrix and the gathered column side. */
typedef struct {
    em_tensor *col, *cs;
} bufs_t;

static bool bufs_get(bufs_t *b, const em_conv_geom *g, int64_t nb, em_dtype ct, bool need_col, bool need_cs) {
    int64_t R = (g->C_img / g->G) * kk_of(g), L = col_plane(g);
    b->col = need_col ? scratch(R * nb * L, ct) : NULL;
    b->cs = need_cs ? scratch((g->C_col / g->G) * nb * L, ct) : NULL;
    return (!need_col || b->col) && (!need_cs || b->cs);
}

static void bufs_free(bufs_t *b) {
    em_tensor_release(b->col);
    em_tensor_release(b->cs);
}

/* Depthwise-style geometry: one image channel per group, not transposed
 * through a 1x1 kernel (those go to the gemms). */
static bool is_depthwise(const em_conv_geom *g) { return g->C_img == g->G && g->G > 1 && !is_pointwise(g); }

static em_status depthwise_forward(const em_conv_geom *g, em_dtype ct, const char *img, const char *w, char *cs);

/* The bodies of the three products over the samples [lo, hi), in chunks of
 * nb samples, with the scratch b. Each stops early (leaving the rest
 * unwritten) when a stop point sees a pending interrupt; the caller then
 * fails through em_cpu_interrupted (Note [Interrupts in kernels], way (b)).
 * The copies run over the pool (serially when already inside a pool job,
 * Note [Sample-parallel products]). */

/* cs (N, C_col, L) = W_g @ im2col(img) for every group. */
static void col_side_samples(const em_conv_geom *g, em_dtype ct, const char *img, const char *w, char *cs, int64_t lo,
                             int64_t hi, int64_t nb, bufs_t *b) {
    size_t es = em_dtype_size(ct);
    int64_t G = g->G, Cg = g->C_img / G, Mg = g->C_col / G, R = Cg * kk_of(g), L = col_plane(g), IP = img_plane(g);
    bool pw = is_pointwise(g);
    for (int64_t n0 = lo; n0 < hi; n0 += nb) {
        int64_t cur = hi - n0 < nb ? hi - n0 : nb;
        for (int64_t grp = 0; grp < G; grp++) {
            if (em_cpu_stop_point()) return;
            const char *B;
            int64_t ldb = cur * L;
            if (pw) {
                B = img + (size_t)((n0 * g->C_img + grp * Cg) * IP) * es;
            } else {
                run_job(J_IM2COL, g, ct, n0, grp, cur, Cg, img, em_tensor_data(b->col));
                B = em_tensor_data(b->col);
            }
            const char *A = w + (size_t)(grp * Mg * R) * es;
            if (cur == 1) {
                gemm(ct, false, false, Mg, L, R, A, R, B, ldb, 0.0, cs + (size_t)((n0 * g->C_col + grp * Mg) * L) * es,
                     L);
            } else {
                gemm(ct, false, false, Mg, cur * L, R, A, R, B, ldb, 0.0, em_tensor_data(b->cs), cur * L);
                run_job(J_SCATTER, g, ct, n0, grp, cur, Mg, em_tensor_data(b->cs), cs);
            }
        }
    }
}

/* img (N, C_img, IP) = col2im(W_g^T @ cs) for every group (overwrites img). */
static void image_samples(const em_conv_geom *g, em_dtype ct, const char *cs, const char *w, char *img, int64_t lo,
                          int64_t hi, int64_t nb, bufs_t *b) {
    size_t es = em_dtype_size(ct);
    int64_t G = g->G, Cg = g->C_img / G, Mg = g->C_col / G, R = Cg * kk_of(g), L = col_plane(g), IP = img_plane(g);
    bool pw = is_pointwise(g);
    for (int64_t n0 = lo; n0 < hi; n0 += nb) {
        int64_t cur = hi - n0 < nb ? hi - n0 : nb;
        for (int64_t grp = 0; grp < G; grp++) {
            if (em_cpu_stop_point()) return;
            const char *B;
            if (cur == 1) {
                B = cs + (size_t)((n0 * g->C_col + grp * Mg) * L) * es;
            } else {
                run_job(J_GATHER, g, ct, n0, grp, cur, Mg, cs, em_tensor_data(b->cs));
                B = em_tensor_data(b->cs);
            }
            const char *A = w + (size_t)(grp * Mg * R) * es;
            if (pw) { /* cur == 1: straight into the image's planes */
                gemm(ct, true, false, R, L, Mg, A, R, B, L, 0.0, img + (size_t)((n0 * g->C_img + grp * Cg) * IP) * es,
                     L);
            } else {
                gemm(ct, true, false, R, cur * L, Mg, A, R, B, cur * L, 0.0, em_tensor_data(b->col), cur * L);
                run_job(J_COL2IM, g, ct, n0, grp, cur, Cg, em_tensor_data(b->col), img);
            }
        }
    }
}

/* gw (C_col, R) += sum over the samples of cs_g @ im2col(img)^T, per group. */
static void weight_samples(const em_conv_geom *g, em_dtype ct, const char *cs, const char *img, char *gw, int64_t lo,
                           int64_t hi, int64_t nb, bufs_t *b) {
    size_t es = em_dtype_size(ct);
    int64_t G = g->G, Cg = g->C_img / G, Mg = g->C_col / G, R = Cg * kk_of(g), L = col_plane(g), IP = img_plane(g);
    bool pw = is_pointwise(g);
    for (int64_t n0 = lo; n0 < hi; n0 += nb) {
        int64_t cur = hi - n0 < nb ? hi - n0 : nb;
        for (int64_t grp = 0; grp < G; grp++) {
            if (em_cpu_stop_point()) return;
            const char *A, *B;
            if (cur == 1) {
                A = cs + (size_t)((n0 * g->C_col + grp * Mg) * L) * es;
            } else {
                run_job(J_GATHER, g, ct, n0, grp, cur, Mg, cs, em_tensor_data(b->cs));
                A = em_tensor_data(b->cs);
            }
            if (pw) {
                B = img + (size_t)((n0 * g->C_img + grp * Cg) * IP) * es;
            } else {
                run_job(J_IM2COL, g, ct, n0, grp, cur, Cg, img, em_tensor_data(b->col));
                B = em_tensor_data(b->col);
            }
            gemm(ct, false, true, Mg, R, cur * L, A, cur * L, B, cur * L, 1.0, gw + (size_t)(grp * Mg * R) * es, R);
        }
    }
}

/* Note [Sample-parallel products]
 * With T > 1 threads and at least T samples, a product splits the batch
 * into T contiguous runs of samples, one pool job each; a job does its own
 * im2col/col2im copies (serially: nested pool calls run inline) and calls
 * BLAS single-threaded, with its own scratch. OpenBLAS is set to one
 * thread for the duration and back to ember's count after (pool.c's hook
 * keeps the two equal otherwise), so the cores run T jobs and nothing
 * else (DESIGN decision 9's "one set of threads": here the pool's threads
 * are the ones calling BLAS). The alternative -- one multithreaded gemm
 * per chunk with pool-parallel copies between them -- left OpenBLAS's
 * threads spinning in sched_yield while the pool ran the copies, and a
 * conv step barely sped up from 1 thread to 2. The weight gradient sums
 * per-job partials (job 0 into gw itself, job t > 0 into its own zeroed
 * buffer), added to gw in job order after the jobs: the result depends on
 * T only by float rounding. One thread, or fewer samples than threads:
 * one body over the whole batch, with pool-parallel copies and BLAS's own
 * threads for the gemms (the shape that suits one large image). */

typedef enum { P_COL_SIDE, P_IMAGE, P_WEIGHT } prod_kind;

#define CONV_MAX_JOBS 64 /* at most this many sample runs (their scratch lives on the stack) */

typedef struct {
    prod_kind kind;
    const em_conv_geom *g;
    em_dtype ct;
    const char *a, *b; /* col side: img, w; image: cs, w; weight: cs, img */
    char *out;         /* the result (weight: job 0's partial) */
    char *partial;     /* weight: jobs 1.. T-1's partials, C_col * R each */
    int64_t nb, T;
    bufs_t *bufs;      /* T sets */
} prod_t;

/* Job t of a product: samples [t*N/T, (t+1)*N/T). */
static void prod_range(int64_t b, int64_t e, void *vctx) {
    const prod_t *p = vctx;
    const em_conv_geom *g = p->g;
    size_t wsz = (size_t)(g->C_col * (g->C_img / g->G) * kk_of(g)) * em_dtype_size(p->ct);
    for (int64_t t = b; t < e; t++) {
        int64_t lo = t * g->N / p->T, hi = (t + 1) * g->N / p->T;
        switch (p->kind) {
        case P_COL_SIDE: col_side_samples(g, p->ct, p->a, p->b, p->out, lo, hi, p->nb, &p->bufs[t]); break;
        case P_IMAGE: image_samples(g, p->ct, p->a, p->b, p->out, lo, hi, p->nb, &p->bufs[t]); break;
        case P_WEIGHT:
            weight_samples(g, p->ct, p->a, p->b, t == 0 ? p->out : p->partial + (size_t)(t - 1) * wsz, lo, hi, p->nb,
                           &p->bufs[t]);
            break;
        }
    }
}

/* dst[i] += src[i] for n elements of ct. */
static void add_into(em_dtype ct, char *dst, const char *src, int64_t n) {
    if (ct == EM_FLOAT64) {
        double *restrict d = (double *)dst;
        const double *restrict s = (const double *)src;
        for (int64_t i = 0; i < n; i++) d[i] += s[i];
    } else {
        float *restrict d = (float *)dst;
        const float *restrict s = (const float *)src;
        for (int64_t i = 0; i < n; i++) d[i] += s[i];
    }
}

/* Runs product kind over the whole batch (Note [Sample-parallel
 * products]); a, b, out as prod_t. The weight product overwrites out. */
static em_status run_product(prod_kind kind, const em_conv_geom *g, em_dtype ct, const char *a, const char *b,
                             char *out, const char *op) {
    int64_t nb = chunk_samples(g);
    if (!blas_fits(g, nb, op)) return EM_EVALUE;
    int64_t T = em_get_num_threads();
    if (T > g->N) T = g->N;
    if (T < 1) T = 1;
    int64_t R = (g->C_img / g->G) * kk_of(g), wn = g->C_col * R;
    size_t es = em_dtype_size(ct);
    bufs_t bufs[CONV_MAX_JOBS];
    if (T > CONV_MAX_JOBS) T = CONV_MAX_JOBS;
    em_tensor *partial = NULL;
    em_status st = EM_OK;
    int64_t got = 0;
    for (; got < T; got++)
        if (!bufs_get(&bufs[got], g, nb, ct, !is_pointwise(g), nb > 1)) {
            bufs_free(&bufs[got]);
            st = em_error_kind();
            break;
        }
    if (st == EM_OK && kind == P_WEIGHT) {
        memset(out, 0, (size_t)wn * es);
        if (T > 1) {
            partial = scratch((T - 1) * wn, ct);
            if (!partial) st = em_error_kind();
            else memset(em_tensor_data(partial), 0, (size_t)((T - 1) * wn) * es);
        }
    }
    if (st == EM_OK) {
        prod_t p = { kind, g, ct, a, b, out, partial ? em_tensor_data(partial) : NULL, nb, T, bufs };
        if (T == 1) {
            prod_range(0, 1, &p);
        } else {
            openblas_set_num_threads(1);
            em_cpu_parallel_for(T, 1, prod_range, &p);
            openblas_set_num_threads(em_get_num_threads());
            for (int64_t t = 1; t < T && kind == P_WEIGHT; t++)
                add_into(ct, out, (const char *)em_tensor_data(partial) + (size_t)((t - 1) * wn) * es, wn);
        }
        if (em_cpu_interrupted(op)) st = EM_EINTERRUPT;
    }
    for (int64_t t = 0; t < got; t++) bufs_free(&bufs[t]);
    em_tensor_release(partial);
    return st;
}

/* cs (N, C_col, L) = W_g @ im2col(img) for every group. */
static em_status product_col_side(const em_conv_geom *g, em_dtype ct, const char *img, const char *w, char *cs,
                                  const char *op) {
    size_t es = em_dtype_size(ct);
    int64_t Mg = g->C_col / g->G, R = (g->C_img / g->G) * kk_of(g), L = col_plane(g);
    if (g->N == 0 || Mg == 0 || L == 0) return EM_OK;
    if (R == 0) {
        memset(cs, 0, (size_t)(g->N * g->C_col * L) * es);
        return EM_OK;
    }
    if (is_depthwise(g)) return depthwise_forward(g, ct, img, w, cs);
    if (em_conv_wino_applies(g, ct, g->C_img, g->C_col)) /* Note [Winograd convolution] */
        return em_conv_wino(g, false, (const float *)img, (const float *)w, (float *)cs, op);
    return run_product(P_COL_SIDE, g, ct, img, w, cs, op);
}

/* img (N, C_img, IP) = col2im(W_g^T @ cs) for every group (overwrites img). */
static em_status product_image(const em_conv_geom *g, em_dtype ct, const char *cs, const char *w, char *img,
                               const char *op) {
    size_t es = em_dtype_size(ct);
    int64_t Mg = g->C_col / g->G, R = (g->C_img / g->G) * kk_of(g), L = col_plane(g), IP = img_plane(g);
    if (g->N == 0 || R == 0 || IP == 0) return EM_OK;
    if (Mg == 0 || L == 0) {
        memset(img, 0, (size_t)(g->N * g->C_img * IP) * es);
        return EM_OK;
    }
    if (em_conv_wino_applies(g, ct, g->C_col, g->C_img)) /* Note [Winograd convolution] */
        return em_conv_wino(g, true, (const float *)cs, (const float *)w, (float *)img, op);
    return run_product(P_IMAGE, g, ct, cs, w, img, op);
}

/* gw (C_col, R) = sum over samples of cs_g @ im2col(img)^T, per group. */
static em_status product_weight(const em_conv_geom *g, em_dtype ct, const char *cs, const char *img, char *gw,
                                const char *op) {
    size_t es = em_dtype_size(ct);
    int64_t Mg = g->C_col / g->G, R = (g->C_img / g->G) * kk_of(g), L = col_plane(g);
    if (g->N == 0 || R == 0 || Mg == 0 || L == 0) {
        memset(gw, 0, (size_t)(g->C_col * R) * es);
        return EM_OK;
    }
    if (em_conv_wino_applies(g, ct, g->C_img, g->C_col)) /* Note [Winograd convolution] */
        return em_conv_wino_weight(g, (const float *)cs, (const float *)img, (float *)gw, op);
    return run_product(P_WEIGHT, g, ct, cs, img, gw, op);
}

/* ---- depthwise: a direct loop per (sample, column-side channel) ---- */

typedef struct {
    const em_conv_geom *g;
    const char *img, *w;
    char *cs;
} dw_t;

#define DW_FN(T, SFX)                                                                                        \
    static void dw_range_##SFX(int64_t b, int64_t e, void *vctx) {                                           \
        const dw_t *d = vctx;                                                                                \
        const em_conv_geom *g = d->g;                                                                        \
        int64_t Mg = g->C_col / g->G, kk = kk_of(g), L = col_plane(g), IP = img_plane(g);                    \
        const int64_t I0 = g->img[0], I1 = g->img[1], I2 = g->img[2];                                       \
        const int64_t O0 = g->col[0], O1 = g->col[1], O2 = g->col[2];                                       \
        for (int64_t it = b; it < e; it++) {                                                                 \
            int64_t n = it / g->C_col, co = it % g->C_col, ci = co / Mg;                                     \
            const T *src = (const T *)d->img + (n * g->C_img + ci) * IP;                                     \
            const T *w = (const T *)d->w + co * kk;                                                          \
            T *dst = (T *)d->cs + it * L;                                                                    \
            for (int64_t l = 0; l < L; l++) dst[l] = 0;                                                      \
            for (int64_t k0 = 0; k0 < g->k[0]; k0++)                                                         \
                for (int64_t k1 = 0; k1 < g->k[1]; k1++)                                                     \
                    for (int64_t k2 = 0; k2 < g->k[2]; k2++) {                                               \
                        T wv = w[(k0 * g->k[1] + k1) * g->k[2] + k2];                                        \
                        int64_t off2 = k2 * g->dil[2] - g->pad[2], s2 = g->stride[2], lo, hi;                \
                        valid_range(O2, I2, s2, off2, &lo, &hi);                                             \
                        for (int64_t o0 = 0; o0 < O0; o0++) {                                                \
                            int64_t i0 = o0 * g->stride[0] - g->pad[0] + k0 * g->dil[0];                     \
                            if (i0 < 0 || i0 >= I0) continue;                                                \
                            for (int64_t o1 = 0; o1 < O1; o1++) {                                            \
                                int64_t i1 = o1 * g->stride[1] - g->pad[1] + k1 * g->dil[1];                 \
                                if (i1 < 0 || i1 >= I1) continue;                                            \
                                const T *s = src + (i0 * I1 + i1) * I2 + off2;                               \
                                T *o = dst + (o0 * O1 + o1) * O2;                                            \
                                if (s2 == 1)                                                                 \
                                    for (int64_t o2 = lo; o2 < hi; o2++) o[o2] += wv * s[o2];                \
                                else                                                                         \
                                    for (int64_t o2 = lo; o2 < hi; o2++) o[o2] += wv * s[o2 * s2];           \
                            }                                                                                \
                        }                                                                                    \
                    }                                                                                        \
        }                                                                                                    \
    }
DW_FN(float, f32)
DW_FN(double, f64)

static em_status depthwise_forward(const em_conv_geom *g, em_dtype ct, const char *img, const char *w, char *cs) {
    dw_t d = { g, img, w, cs };
    int64_t work = kk_of(g) * col_plane(g);
    int64_t grain = work >= EM_CPU_GRAIN ? 1 : EM_CPU_GRAIN / (work ? work : 1);
    em_cpu_parallel_for(g->N * g->C_col, grain, ct == EM_FLOAT64 ? dw_range_f64 : dw_range_f32, &d);
    return EM_OK;
}

/* ---- bias ---- */

typedef struct {
    em_dtype ct;
    int64_t C, P;
    char *data;
    const char *bias;
} bias_t;

static void bias_add_range(int64_t b, int64_t e, void *vctx) {
    const bias_t *c = vctx;
    for (int64_t it = b; it < e; it++) {
        int64_t ch = it % c->C;
        if (c->ct == EM_FLOAT64) {
            double *p = (double *)c->data + it * c->P, v = ((const double *)c->bias)[ch];
            for (int64_t i = 0; i < c->P; i++) p[i] += v;
        } else {
            float *p = (float *)c->data + it * c->P, v = ((const float *)c->bias)[ch];
            for (int64_t i = 0; i < c->P; i++) p[i] += v;
        }
    }
}

/* out (N, C, P) += bias[c] */
static void bias_add(em_dtype ct, char *out, const char *bias, int64_t N, int64_t C, int64_t P) {
    bias_t c = { ct, C, P, out, bias };
    em_cpu_parallel_for(N * C, P >= EM_CPU_GRAIN ? 1 : EM_CPU_GRAIN / (P ? P : 1), bias_add_range, &c);
}

typedef struct {
    em_dtype ct;
    int64_t N, C, P;
    const char *g;
    char *out;
} bsum_t;

/* out[c] = the sum of g[:, c, :] (in double) */
static void bias_sum_range(int64_t b, int64_t e, void *vctx) {
    const bsum_t *c = vctx;
    for (int64_t ch = b; ch < e; ch++) {
        double acc = 0;
        for (int64_t n = 0; n < c->N; n++) {
            int64_t base = (n * c->C + ch) * c->P;
            if (c->ct == EM_FLOAT64) {
                const double *p = (const double *)c->g + base;
                for (int64_t i = 0; i < c->P; i++) acc += p[i];
            } else { /* 8 float lanes (PyTorch's vectorised sums also reassociate) */
                const float *p = (const float *)c->g + base;
                float a[8] = { 0, 0, 0, 0, 0, 0, 0, 0 };
                int64_t i = 0;
                for (; i + 8 <= c->P; i += 8)
                    for (int k = 0; k < 8; k++) a[k] += p[i + k];
                for (; i < c->P; i++) a[0] += p[i];
                acc += (double)(((a[0] + a[1]) + (a[2] + a[3])) + ((a[4] + a[5]) + (a[6] + a[7])));
            }
        }
        if (c->ct == EM_FLOAT64) ((double *)c->out)[ch] = acc;
        else ((float *)c->out)[ch] = (float)acc;
    }
}

/* ---- convolution ---- */

em_tensor *em_cpu_convolution(em_keyset ks, em_tensor *input, em_tensor *weight, em_tensor *bias, em_intlist stride,
                              em_intlist padding, em_intlist dilation, bool transposed, em_intlist output_padding,
                              int64_t groups) {
    (void)ks;
    const char *op = "convolution";
    em_conv_geom g;
    if (em_conv_check(op, input, weight, bias, stride, padding, dilation, transposed, output_padding, groups, &g) !=
        EM_OK)
        return NULL;
    em_dtype ct = compute_dtype(input->dtype);
    int64_t sizes[5];
    em_conv_output_sizes(&g, sizes);
    em_tensor *out = em_tensor_new(g.nsp + 2, sizes, ct, em_cpu_dev());
    em_tensor *x = out ? as_compute(input, ct, op) : NULL;
    em_tensor *w = x ? as_compute(weight, ct, op) : NULL;
    em_tensor *bb = w && bias ? as_compute(bias, ct, op) : NULL;
    em_status st = !w || (bias && !bb) ? em_error_kind() : EM_OK;
    if (st == EM_OK && out->numel) {
        if (!transposed) st = product_col_side(&g, ct, em_tensor_data(x), em_tensor_data(w), em_tensor_data(out), op);
        else st = product_image(&g, ct, em_tensor_data(x), em_tensor_data(w), em_tensor_data(out), op);
        if (st == EM_OK && bb) {
            int64_t P = out->numel / (sizes[0] * sizes[1]);
            bias_add(ct, em_tensor_data(out), em_tensor_data(bb), sizes[0], sizes[1], P);
        }
    }
    em_tensor_release(x);
    em_tensor_release(w);
    em_tensor_release(bb);
    if (st != EM_OK) {
        em_tensor_release(out);
        return NULL;
    }
    return to_result_dtype(out, input->dtype, op);
}

/* ---- convolution_backward ---- */

static em_tensor *empty_result(em_dtype dt) {
    int64_t z = 0;
    return em_tensor_new(1, &z, dt, em_cpu_dev());
}

em_tensor *em_cpu_convolution_backward(em_keyset ks, em_tensor *grad_output, em_tensor *input, em_tensor *weight,
                                       em_intlist bias_sizes, em_intlist stride, em_intlist padding,
                                       em_intlist dilation, bool transposed, em_intlist output_padding,
                                       int64_t groups, em_intlist output_mask, em_tensor **grad_weight,
                                       em_tensor **grad_bias) {
    (void)ks;
    const char *op = "convolution_backward";
    char b1[EM_SHAPE_STR_MAX], b2[EM_SHAPE_STR_MAX];
    em_conv_geom g;
    if (em_conv_check(op, input, weight, NULL, stride, padding, dilation, transposed, output_padding, groups, &g) !=
        EM_OK)
        return NULL;
    if (output_mask.n != 3) {
        em_set_error(EM_EVALUE, "%s: argument 'output_mask' must have 3 flags, got %d", op, output_mask.n);
        return NULL;
    }
    for (int i = 0; i < 3; i++) {
        if (output_mask.data[i] != 0 && output_mask.data[i] != 1) {
            em_set_error(EM_EVALUE, "%s: argument 'output_mask' must hold 0 or 1, got %lld", op,
                         (long long)output_mask.data[i]);
            return NULL;
        }
    }
    int64_t sizes[5];
    em_conv_output_sizes(&g, sizes);
    if (grad_output->ndim != g.nsp + 2 || memcmp(grad_output->sizes, sizes, sizeof(int64_t) * (size_t)(g.nsp + 2))) {
        em_set_error(EM_ESHAPE, "%s: expected grad_output of the output's shape %s, got %s", op,
                     em_shape_str(g.nsp + 2, sizes, b1, sizeof b1),
                     em_shape_str(grad_output->ndim, grad_output->sizes, b2, sizeof b2));
        return NULL;
    }
    if (grad_output->dtype != input->dtype) {
        em_set_error(EM_ETYPE, "%s: expected grad_output of input's dtype %s, got %s", op,
                     em_dtype_name(input->dtype), em_dtype_name(grad_output->dtype));
        return NULL;
    }
    bool want_b = output_mask.data[2] && bias_sizes.n >= 0;
    if (want_b && (bias_sizes.n != 1 || bias_sizes.data[0] != sizes[1])) {
        em_set_error(EM_ESHAPE, "%s: expected bias_sizes {%lld}, got %s", op, (long long)sizes[1],
                     em_shape_str(bias_sizes.n, bias_sizes.data, b1, sizeof b1));
        return NULL;
    }
    em_dtype dt = input->dtype, ct = compute_dtype(dt);
    em_tensor *gi = NULL, *gw = NULL, *gb = NULL, *go = NULL, *x = NULL, *w = NULL;
    em_status st = EM_OK;
    go = as_compute(grad_output, ct, op);
    if (!go) goto fail;
    if (output_mask.data[0]) {
        w = as_compute(weight, ct, op);
        gi = w ? em_tensor_new(input->ndim, input->sizes, ct, em_cpu_dev()) : NULL;
        if (!gi) goto fail;
        if (gi->numel) {
            st = transposed ? product_col_side(&g, ct, em_tensor_data(go), em_tensor_data(w), em_tensor_data(gi), op)
                            : product_image(&g, ct, em_tensor_data(go), em_tensor_data(w), em_tensor_data(gi), op);
            if (st != EM_OK) goto fail;
        }
        if (!(gi = to_result_dtype(gi, dt, op))) goto fail;
    } else if (!(gi = empty_result(dt))) {
        goto fail;
    }
    if (output_mask.data[1]) {
        x = as_compute(input, ct, op);
        gw = x ? em_tensor_new(weight->ndim, weight->sizes, ct, em_cpu_dev()) : NULL;
        if (!gw) goto fail;
        if (gw->numel) {
            st = transposed ? product_weight(&g, ct, em_tensor_data(x), em_tensor_data(go), em_tensor_data(gw), op)
                            : product_weight(&g, ct, em_tensor_data(go), em_tensor_data(x), em_tensor_data(gw), op);
            if (st != EM_OK) goto fail;
        }
        if (!(gw = to_result_dtype(gw, dt, op))) goto fail;
    } else if (!(gw = empty_result(dt))) {
        goto fail;
    }
    if (want_b) {
        gb = em_tensor_new(1, &sizes[1], ct, em_cpu_dev());
        if (!gb) goto fail;
        int64_t P = 1;
        for (int d = 0; d < g.nsp; d++) P *= sizes[2 + d];
        bsum_t c = { ct, sizes[0], sizes[1], P, em_tensor_data(go), em_tensor_data(gb) };
        if (sizes[1]) em_cpu_parallel_for(sizes[1], 1, bias_sum_range, &c);
        if (!(gb = to_result_dtype(gb, dt, op))) goto fail;
    } else if (!(gb = empty_result(dt))) {
        goto fail;
    }
    em_tensor_release(go);
    em_tensor_release(x);
    em_tensor_release(w);
    *grad_weight = gw;
    *grad_bias = gb;
    return gi;
fail:
    em_tensor_release(go);
    em_tensor_release(x);
    em_tensor_release(w);
    em_tensor_release(gi);
    em_tensor_release(gw);
    em_tensor_release(gb);
    return NULL;
}

/* ---- unfold (im2col) and fold (col2im) ---- */

/* Reads a 2-d option (one value or two) into out; refuses other counts,
 * values below min and values past EM_CONV_OPT_MAX (the geometry's
 * products then stay inside int64; messages as PyTorch's name the
 * argument). */
static bool pair_arg(const char *op, const char *name, em_intlist l, int64_t min, int64_t out[2]) {
    char b[EM_SHAPE_STR_MAX];
    if (l.n != 1 && l.n != 2) {
        em_set_error(EM_EVALUE, "%s: argument '%s' must be one value or 2, got %s", op, name,
                     em_shape_str(l.n < 0 ? 0 : l.n, l.data, b, sizeof b));
        return false;
    }
    out[0] = l.data[0];
    out[1] = l.data[l.n - 1];
    if (out[0] < min || out[1] < min) {
        em_set_error(EM_EVALUE, "%s: argument '%s' must be %s, got %s", op, name, min > 0 ? "positive" : "non-negative",
                     em_shape_str(l.n, l.data, b, sizeof b));
        return false;
    }
    if (out[0] > EM_CONV_OPT_MAX || out[1] > EM_CONV_OPT_MAX) {
        em_set_error(EM_EVALUE, "%s: argument '%s' must be at most %lld, got %s", op, name, (long long)EM_CONV_OPT_MAX,
                     em_shape_str(l.n, l.data, b, sizeof b));
        return false;
    }
    return true;
}

/* The geometry of unfold/fold over an image {H, W} (checked options):
 * one group, the image side C channels, the column side the blocks. */
static bool fold_geometry(const char *op, int64_t N, int64_t C, int64_t H, int64_t W, em_intlist kernel_size,
                          em_intlist dilation, em_intlist padding, em_intlist stride, em_conv_geom *g) {
    int64_t k[2], d[2], p[2], s[2];
    if (!pair_arg(op, "kernel_size", kernel_size, 1, k) || !pair_arg(op, "dilation", dilation, 1, d) ||
        !pair_arg(op, "padding", padding, 0, p) || !pair_arg(op, "stride", stride, 1, s))
        return false;
    memset(g, 0, sizeof *g);
    g->nsp = 2;
    g->N = N;
    g->G = 1;
    g->C_img = C;
    if (__builtin_mul_overflow(C, k[0] * k[1], &g->C_col)) { /* k < 2^31 each: k[0] * k[1] fits */
        em_set_error(EM_EVALUE, "%s: %lld channels with kernel_size {%lld,%lld} give too many columns", op, (long long)C,
                     (long long)k[0], (long long)k[1]);
        return false;
    }
    g->img[0] = g->col[0] = g->k[0] = g->stride[0] = g->dil[0] = 1;
    int64_t in_sz[2] = { H, W }, O[2];
    for (int i = 0; i < 2; i++) {
        O[i] = (in_sz[i] + 2 * p[i] - (d[i] * (k[i] - 1) + 1)) / s[i] + 1;
        if (in_sz[i] + 2 * p[i] - (d[i] * (k[i] - 1) + 1) < 0) O[i] = 0;
        g->img[1 + i] = in_sz[i];
        g->col[1 + i] = O[i];
        g->k[1 + i] = k[i];
        g->stride[1 + i] = s[i];
        g->pad[1 + i] = p[i];
        g->dil[1 + i] = d[i];
    }
    if (O[0] < 1 || O[1] < 1) {
        em_set_error(EM_ESHAPE,
                     "%s: image {%lld,%lld} with kernel_size {%lld,%lld}, dilation {%lld,%lld} and padding {%lld,%lld} gives "
                     "{%lld,%lld} sliding blocks; each must be at least 1",
                     op, (long long)H, (long long)W, (long long)k[0], (long long)k[1], (long long)d[0], (long long)d[1],
                     (long long)p[0], (long long)p[1], (long long)O[0], (long long)O[1]);
        return false;
    }
    return true;
}

typedef struct {
    const em_conv_geom *g;
    em_dtype ct;
    const char *src;
    char *dst;
    bool fold;
} uf_t;

/* one item per (sample, channel): unfold writes its kk rows of the
 * sample's column matrix, fold zeroes its plane and adds them back. */
static void uf_range(int64_t b, int64_t e, void *vctx) {
    const uf_t *u = vctx;
    const em_conv_geom *g = u->g;
    size_t es = em_dtype_size(u->ct);
    int64_t IP = img_plane(g), L = col_plane(g), kk = kk_of(g);
    for (int64_t it = b; it < e; it++) {
        size_t img_off = (size_t)(it * IP) * es, col_off = (size_t)(it * kk * L) * es;
        if (!u->fold) {
            if (u->ct == EM_FLOAT64) im2col_f64((const double *)(u->src + img_off), g, (double *)(u->dst + col_off), L);
            else im2col_f32((const float *)(u->src + img_off), g, (float *)(u->dst + col_off), L);
        } else {
            memset(u->dst + img_off, 0, (size_t)IP * es);
            if (u->ct == EM_FLOAT64) col2im_f64((double *)(u->dst + img_off), g, (const double *)(u->src + col_off), L);
            else col2im_f32((float *)(u->dst + img_off), g, (const float *)(u->src + col_off), L);
        }
    }
}

static em_tensor *run_fold(const em_conv_geom *g, em_tensor *input, int ndim, const int64_t *sizes, bool fold,
                           const char *op) {
    em_dtype ct = compute_dtype(input->dtype);
    em_tensor *x = as_compute(input, ct, op);
    em_tensor *out = x ? em_tensor_new(ndim, sizes, ct, em_cpu_dev()) : NULL;
    if (out && out->numel) {
        uf_t u = { g, ct, em_tensor_data(x), em_tensor_data(out), fold };
        int64_t work = kk_of(g) * col_plane(g);
        em_cpu_parallel_for(g->N * g->C_img, work >= EM_CPU_GRAIN ? 1 : EM_CPU_GRAIN / work, uf_range, &u);
    }
    em_tensor_release(x);
    return to_result_dtype(out, input->dtype, op);
}

static bool fold_dtype_ok(const em_tensor *t, const char *op) {
    if (em_dtype_is_floating(t->dtype)) return true;
    em_set_error(EM_ETYPE, "%s: expected a floating-point input, got %s", op, em_dtype_name(t->dtype));
    return false;
}

em_tensor *em_cpu_functional_unfold(em_keyset ks, em_tensor *input, em_intlist kernel_size, em_intlist dilation,
                                    em_intlist padding, em_intlist stride) {
    (void)ks;
    const char *op = "unfold";
    char b[EM_SHAPE_STR_MAX];
    int nd = input->ndim;
    bool ok = nd == 3 || nd == 4;
    for (int d = nd - 3; ok && d < nd; d++) ok = input->sizes[d] > 0;
    if (!ok) {
        em_set_error(EM_ESHAPE, "%s: expected a 3-d {C,H,W} or 4-d {N,C,H,W} input with non-zero C, H and W, got input of shape %s",
                     op, em_shape_str(nd, input->sizes, b, sizeof b));
        return NULL;
    }
    if (!fold_dtype_ok(input, op)) return NULL;
    int64_t N = nd == 4 ? input->sizes[0] : 1, C = input->sizes[nd - 3];
    em_conv_geom g;
    if (!fold_geometry(op, N, C, input->sizes[nd - 2], input->sizes[nd - 1], kernel_size, dilation, padding, stride, &g))
        return NULL;
    int64_t sizes[3] = { N, g.C_col, col_plane(&g) };
    return run_fold(&g, input, nd - 1, nd == 4 ? sizes : sizes + 1, false, op);
}

em_tensor *em_cpu_fold(em_keyset ks, em_tensor *input, em_intlist output_size, em_intlist kernel_size,
                       em_intlist dilation, em_intlist padding, em_intlist stride) {
    (void)ks;
    const char *op = "fold";
    char b[EM_SHAPE_STR_MAX];
    int nd = input->ndim;
    bool ok = nd == 2 || nd == 3;
    for (int d = nd - 2; ok && d < nd; d++) ok = input->sizes[d] > 0;
    if (!ok) {
        em_set_error(EM_ESHAPE, "%s: expected a 2-d {C*kH*kW,L} or 3-d {N,C*kH*kW,L} input with non-zero sizes, got input of shape %s",
                     op, em_shape_str(nd, input->sizes, b, sizeof b));
        return NULL;
    }
    if (!fold_dtype_ok(input, op)) return NULL;
    int64_t os[2], k[2];
    if (!pair_arg(op, "output_size", output_size, 1, os) || !pair_arg(op, "kernel_size", kernel_size, 1, k)) return NULL;
    int64_t N = nd == 3 ? input->sizes[0] : 1, CK = input->sizes[nd - 2], L = input->sizes[nd - 1];
    if (CK % (k[0] * k[1]) != 0) {
        em_set_error(EM_ESHAPE, "%s: expected input's dim %d (%lld) to be divisible by the kernel's size %lld * %lld", op,
                     nd - 1, (long long)CK, (long long)k[0], (long long)k[1]);
        return NULL;
    }
    em_conv_geom g;
    if (!fold_geometry(op, N, CK / (k[0] * k[1]), os[0], os[1], kernel_size, dilation, padding, stride, &g))
        return NULL;
    if (col_plane(&g) != L) {
        em_set_error(EM_ESHAPE, "%s: output_size {%lld,%lld} gives %lld * %lld = %lld sliding blocks, but input %s has %lld",
                     op, (long long)os[0], (long long)os[1], (long long)g.col[1], (long long)g.col[2],
                     (long long)col_plane(&g), em_shape_str(nd, input->sizes, b, sizeof b), (long long)L);
        return NULL;
    }
    int64_t sizes[4] = { N, g.C_img, os[0], os[1] };
    return run_fold(&g, input, nd + 1, nd == 3 ? sizes : sizes + 1, true, op);
}
