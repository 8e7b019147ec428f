/* conv_winograd.c -- Winograd F(2x2, 3x3) for conv.c's three products of
 * a 3x3 stride-1 convolution: the forward, the input gradient and the
 * weight gradient (conv_wino.h).
 *
 * Note [Winograd convolution]
 * A 3x3 stride-1 correlation computes each 2x2 block of outputs from the
 * 4x4 block of inputs under it; Winograd's F(2x2, 3x3) writes it as
 *   Y = A^T [ (G g G^T) .* (B^T d B) ] A
 * (g the 3x3 kernel, d the 4x4 input tile, .* elementwise), so that summed
 * over input channels it becomes 16 independent matrix products, one per
 * position p of the 4x4 transformed tile:
 *   M_p (C_out x tiles) = U_p (C_out x C_in) @ V_p (C_in x tiles)
 * with 16 * C_in * C_out multiplies per 2x2 outputs against im2col's
 * 36 * C_in * C_out: 2.25 times fewer. On a CNN's middle layers (conv
 * 64x16x16x16 -> 32) the im2col gemms were ~60% of a forward+backward step
 * and ran near the core's peak, so fewer multiplies was the one large gain
 * left (measured: below).
 * The input gradient of such a convolution is itself a 3x3 stride-1
 * correlation of grad_output with the flipped kernel, input and output
 * channels swapped, and padding 2 - pad (negative: a crop; the transform
 * reads zeros outside the plane either way). The weight gradient is the
 * adjoint of the forward: dU_p = sum over tiles of Q_p V_p^T with
 * Q = A dY A^T (dY: a tile's 2x2 output gradient, zero past the output's
 * edge), then dg = G^T dU G per kernel.
 * When: float32 compute (float32, float16, bfloat16 tensors; float64 keeps
 * the exact im2col path), groups 1, a 3x3 kernel with stride 1 and
 * dilation 1 over a 2-d plane (conv2d, conv_transpose2d, a conv3d whose
 * kernel and planes are 1 deep), at least WINO_MIN_C channels on both
 * sides (with fewer the 16 products are too thin to repay the
 * transforms; a first layer's 3 input channels stay on im2col) and at
 * most WINO_MAX_C, and output planes at most WINO_MAX_W wide (the scratch
 * holds whole tile rows).
 * Accuracy: the transforms add and subtract inputs (V's entries are sums
 * of up to 4 inputs, U's of up to 9 weights / 4), so the result differs
 * from the direct sum by float32 rounding of those sums (measured on the
 * bench's layer against float64: max error 1.1e-5 forward, 2.0e-5 input
 * gradient, 1.8e-5 weight gradient at values up to 45, 74 and 79;
 * im2col's 1.6e-5, 1.0e-5 and 4.1e-5);
 * tests/lua/test_conv_winograd.lua checks it against float64.
 * Work: the output is cut into chunks of whole tile rows (about
 * WINO_TILES tiles; a chunk's V and M stay in L2), each transformed into V
 * (16 x C_in x tiles), multiplied into M by small_gemm and transformed
 * back into the output; the weight gradient transforms the chunk's input
 * into V and its output gradient into Q and adds Q_p V_p^T into per-lane
 * sums (small_gemm_nt). Both products are register-blocked FMA loops, not
 * BLAS: with one side a layer's channel count they are too thin, and
 * OpenBLAS's packing made them slower. With T threads the chunks split
 * into T runs, one pool job each with its own scratch (and weight-gradient
 * partial sums, added in job order: the result depends on T only by
 * rounding), as Note [Sample-parallel products] in conv.c.
 * Measured (forward + backward, CPU time per step at 1 thread, on a
 * loaded 2-core host; im2col path / this one / PyTorch 1.13 in the same
 * minutes): conv2d 64x16x16x16 -> 32 3x3 pad 1: 8.9-10.3 / 5.5-5.8 /
 * 11.3-11.5 ms; 64x16x14x14 -> 32 (the CNN step's second conv):
 * 7.9 / 6.2-6.3 / 8.5-8.6 ms. Wall time at 2 threads (best of 9):
 * 17.2 / 11.2 ms. The forward alone: 3.4 / 2.2 ms.
 */
#pragma GCC optimize("O3", "no-trapping-math", "no-math-errno", "no-tree-loop-distribute-patterns")
#include "kernels/cpu/conv_wino.h"
#include "kernels/cpu/em_cpu.h"

#include <string.h>

#ifndef WINO_MIN_C
#define WINO_MIN_C 8
#endif
#ifndef WINO_MAX_C
#define WINO_MAX_C 4096
#endif
#ifndef WINO_MAX_W
#define WINO_MAX_W 1024
#endif
#ifndef WINO_TILES
#define WINO_TILES 128
#endif
#define WINO_MAX_JOBS 64
#define WINO_SKEW 32

/* The ISA clones of the hot loops: x86-64-v3 (AVX2 with FMA; a plain
 * "avx2" clone has no FMA) and fp-contract=fast, which -std=c11 turns off:
 * without it small_gemm ran a multiply and an add per term, at half the
 * speed. */
#if defined(__x86_64__) && !defined(__SANITIZE_ADDRESS__) && !defined(__SANITIZE_THREAD__) && !defined(EM_NO_CLONES)
#define WINO_CLONES \
    __attribute__((target_clones("avx512f", "arch=x86-64-v3", "default"), optimize("fp-contract=fast")))
#else
#define WINO_CLONES __attribute__((optimize("fp-contract=fast")))
#endif

bool em_conv_wino_applies(const em_conv_geom *g, em_dtype ct, int64_t c_in, int64_t c_out) {
    return ct == EM_FLOAT32 && g->G == 1 && g->k[0] == 1 && g->img[0] == 1 && g->col[0] == 1 && g->k[1] == 3 &&
           g->k[2] == 3 && g->stride[1] == 1 && g->stride[2] == 1 && g->dil[1] == 1 && g->dil[2] == 1 &&
           c_in >= WINO_MIN_C && c_out >= WINO_MIN_C && c_in <= WINO_MAX_C && c_out <= WINO_MAX_C &&
           g->img[2] <= WINO_MAX_W && g->col[2] <= WINO_MAX_W && g->img[1] > 0 && g->col[1] > 0 && g->N > 0;
}

typedef struct {
    int64_t N, Ci, Co, Hi, Wi, Ho, Wo, py, px; /* tap (0, 0) of output (y, x) reads input (y - py, x - px) */
    int64_t TH, TW, rows, nchunks, T;          /* tile rows per plane, tiles per row, tile rows per chunk */
    const float *in, *U;                       /* U: 16 x Co x Ci */
    const float *gout;                         /* weight gradient: the output gradient (N, Co, Ho, Wo) */
    float *out, *scratch;
    float *dU;                                 /* weight gradient: T partial sums, 16 x Co x Ci x 8 lanes each */
    int64_t per_job;                           /* scratch floats per job */
} wino_t;

/* U_p (16 x Co x Ci) = G g G^T of every kernel; the kernel of (co, ci) is
 * w[co][ci] (forward) or w[ci][co] flipped in both dims (to_image). In
 * double, rounded once. */
static void weight_transform(const float *w, float *U, int64_t Co, int64_t Ci, bool to_image) {
    for (int64_t co = 0; co < Co; co++)
        for (int64_t ci = 0; ci < Ci; ci++) {
            double k[3][3], t[4][3];
            const float *src = to_image ? w + (ci * Co + co) * 9 : w + (co * Ci + ci) * 9;
            for (int a = 0; a < 3; a++)
                for (int b = 0; b < 3; b++) k[a][b] = to_image ? src[(2 - a) * 3 + (2 - b)] : src[a * 3 + b];
            for (int b = 0; b < 3; b++) {
                t[0][b] = k[0][b];
                t[1][b] = (k[0][b] + k[1][b] + k[2][b]) * 0.5;
                t[2][b] = (k[0][b] - k[1][b] + k[2][b]) * 0.5;
                t[3][b] = k[2][b];
            }
            for (int a = 0; a < 4; a++) {
                double u[4] = { t[a][0], (t[a][0] + t[a][1] + t[a][2]) * 0.5, (t[a][0] - t[a][1] + t[a][2]) * 0.5,
                                t[a][2] };
                for (int b = 0; b < 4; b++) U[((a * 4 + b) * Co + co) * Ci + ci] = (float)u[b];
            }
        }
}

/* GCC vectors of 8 floats, moved with memcpy (any alignment); macros, not
 * functions: vectors passed by value would change the ABI of the
 * non-AVX default clone. */
typedef float wv8 __attribute__((vector_size(32)));
#define LD8(v, p) __builtin_memcpy(&(v), (p), sizeof(wv8))
#define ST8(p, v) __builtin_memcpy((p), &(v), sizeof(wv8))

/* Tile rows [ty0, ty1) of one input plane: the input rows they read
 * (2 ty0 - py .. 2 ty1 + 1 - py) are first copied into pb, rows of PW =
 * 2 E floats (E = TW rounded up to 8, plus 8) with column j holding input
 * column j - px and zeros outside the plane; then V_p[tx] = (B^T d B)_p of
 * each tile, tile row ty's at v + (ty - ty0) * TW + p * ldv, 8 tiles at a
 * time: up to 7 floats past a row's TW are written too (the caller's
 * order overwrites them later, Note in run_chunk). The copy first, the
 * vector reads after: reading a row back right after writing it stalled
 * on store forwarding. */
WINO_CLONES static void input_rows(const wino_t *k, const float *plane, int64_t ty0, int64_t ty1, float *restrict pb,
                                 float *restrict v, int64_t ldv) {
    const int64_t TW = k->TW, Wi = k->Wi, E = (TW + 7) / 8 * 8 + 8, PW = 2 * E, px = k->px;
    const int64_t nrow = 2 * (ty1 - ty0) + 2, y0 = 2 * ty0 - k->py;
    int64_t jlo = px > 0 ? px : 0, jhi = Wi + px < PW ? Wi + px : PW;
    memset(pb, 0, sizeof(float) * (size_t)(nrow * PW));
    for (int64_t i = 0; i < nrow && jhi > jlo; i++) {
        int64_t y = y0 + i;
        if (y < 0 || y >= k->Hi) continue;
        float *restrict d = pb + i * PW; /* a loop: short rows (as output_row) */
        const float *restrict sr = plane + y * Wi;
        for (int64_t j = jlo; j < jhi; j++) d[j] = sr[j - px];
    }
    for (int64_t ty = ty0; ty < ty1; ty++) {
        const float *rows = pb + 2 * (ty - ty0) * PW;
        float *vt = v + (ty - ty0) * TW;
        for (int64_t tx = 0; tx < TW; tx += 8) {
            wv8 t[4][4];
            for (int i = 0; i < 4; i++) {
                /* d B along x: columns 2tx .. 2tx+3 of the tiles are e[tx], o[tx], e[tx+1], o[tx+1]
                 * (e, o: the row's even and odd columns) */
                const float *r = rows + i * PW + 2 * tx;
                wv8 a, b, c, d;
                LD8(a, r);
                LD8(b, r + 8);
                LD8(c, r + 2);
                LD8(d, r + 10);
                wv8 e0 = __builtin_shufflevector(a, b, 0, 2, 4, 6, 8, 10, 12, 14);
                wv8 o0 = __builtin_shufflevector(a, b, 1, 3, 5, 7, 9, 11, 13, 15);
                wv8 e1 = __builtin_shufflevector(c, d, 0, 2, 4, 6, 8, 10, 12, 14);
                wv8 o1 = __builtin_shufflevector(c, d, 1, 3, 5, 7, 9, 11, 13, 15);
                t[i][0] = e0 - e1;
                t[i][1] = o0 + e1;
                t[i][2] = e1 - o0;
                t[i][3] = o0 - o1;
            }
            for (int j = 0; j < 4; j++) { /* B^T along y */
                wv8 r0 = t[0][j] - t[2][j], r1 = t[1][j] + t[2][j], r2 = t[2][j] - t[1][j], r3 = t[1][j] - t[3][j];
                ST8(vt + (0 + j) * ldv + tx, r0);
                ST8(vt + (4 + j) * ldv + tx, r1);
                ST8(vt + (8 + j) * ldv + tx, r2);
                ST8(vt + (12 + j) * ldv + tx, r3);
            }
        }
    }
}

/* One tile row of one output plane: Y = A^T m A of every tile (m_p[tx] at
 * m + p * ldm + tx, read 8 tiles at a time: up to 7 past TW, which the
 * scratch holds) into output rows 2 ty and 2 ty + 1 (those below Ho),
 * columns below Wo; rr: 2 x 2 E floats (E = TW rounded up to 8). */
WINO_CLONES static void output_row(const wino_t *k, const float *restrict m, int64_t ldm, int64_t ty,
                                 float *restrict rr, float *plane) {
    const int64_t TW = k->TW, E = (TW + 7) / 8 * 8;
    float *y0 = rr, *y1 = rr + 2 * E;
    for (int64_t tx = 0; tx < TW; tx += 8) {
        wv8 s[2][4];
        for (int b = 0; b < 4; b++) {
            wv8 m0, m1, m2, m3;
            LD8(m0, m + b * ldm + tx);
            LD8(m1, m + (4 + b) * ldm + tx);
            LD8(m2, m + (8 + b) * ldm + tx);
            LD8(m3, m + (12 + b) * ldm + tx);
            s[0][b] = m0 + m1 + m2;
            s[1][b] = m1 - m2 - m3;
        }
        for (int a = 0; a < 2; a++) {
            wv8 c0 = s[a][0] + s[a][1] + s[a][2], c1 = s[a][1] - s[a][2] - s[a][3];
            wv8 lo = __builtin_shufflevector(c0, c1, 0, 8, 1, 9, 2, 10, 3, 11);
            wv8 hi = __builtin_shufflevector(c0, c1, 4, 12, 5, 13, 6, 14, 7, 15);
            float *dst = (a ? y1 : y0) + 2 * tx;
            ST8(dst, lo);
            ST8(dst + 8, hi);
        }
    }
    for (int a = 0; a < 2; a++) {
        int64_t y = 2 * ty + a;
        if (y >= k->Ho) break;
        float *restrict d = plane + y * k->Wo; /* a loop: these rows are short, a libc call cost more */
        const float *restrict sr = a ? y1 : y0;
        for (int64_t j = 0; j < k->Wo; j++) d[j] = sr[j];
    }
}

/* Rows [co, co + RB) of M = U @ V (below): blocks of RB rows by 16
 * columns held in registers over the whole sum, then one of 8, then the
 * last nt % 8 columns one at a time. RB is a constant at every call (the loops unroll
 * and the accumulators stay in registers). */
static inline __attribute__((always_inline)) void gemm_rows(int RB, int64_t co, int64_t nt, int64_t Ci,
                                                            const float *restrict U, const float *restrict V,
                                                            float *restrict M) {
    const float *u = U + co * Ci;
    int64_t t = 0;
    for (; t + 16 <= nt; t += 16) {
        wv8 a0[6], a1[6];
        for (int r = 0; r < RB; r++) a0[r] = a1[r] = (wv8){ 0 };
        for (int64_t ci = 0; ci < Ci; ci++) {
            wv8 b0, b1;
            LD8(b0, V + ci * nt + t);
            LD8(b1, V + ci * nt + t + 8);
            for (int r = 0; r < RB; r++) {
                float w = u[r * Ci + ci];
                a0[r] += w * b0;
                a1[r] += w * b1;
            }
        }
        for (int r = 0; r < RB; r++) {
            ST8(M + (co + r) * nt + t, a0[r]);
            ST8(M + (co + r) * nt + t + 8, a1[r]);
        }
    }
    if (t + 8 <= nt) {
        wv8 a0[6];
        for (int r = 0; r < RB; r++) a0[r] = (wv8){ 0 };
        for (int64_t ci = 0; ci < Ci; ci++) {
            wv8 b0;
            LD8(b0, V + ci * nt + t);
            for (int r = 0; r < RB; r++) a0[r] += u[r * Ci + ci] * b0;
        }
        for (int r = 0; r < RB; r++) ST8(M + (co + r) * nt + t, a0[r]);
        t += 8;
    }
    for (; t < nt; t++) {
        float c[6] = { 0, 0, 0, 0, 0, 0 };
        for (int64_t ci = 0; ci < Ci; ci++)
            for (int r = 0; r < RB; r++) c[r] += u[r * Ci + ci] * V[ci * nt + t];
        for (int r = 0; r < RB; r++) M[(co + r) * nt + t] = c[r];
    }
}

/* M (Co x nt) = U (Co x Ci) @ V (Ci x nt), all rows packed (ld Ci, nt), in
 * blocks of 6 rows (12 accumulators, 2 loads and 6 broadcasts per 12 FMAs),
 * the last Co % 6 rows in blocks of 4, 2, 1. A plain loop, not BLAS: the
 * products are too thin (K = a layer's channel count) for BLAS's packing
 * to pay (measured: sgemm took 1.6 ms of a 64x16x16x16 -> 32 forward, this
 * loop about 0.8). The sums run in ci order, as a gemm's. */
WINO_CLONES static void small_gemm(int64_t Co, int64_t nt, int64_t Ci, const float *restrict U,
                                 const float *restrict V, float *restrict M) {
    int64_t co = 0;
    for (; co + 6 <= Co; co += 6) gemm_rows(6, co, nt, Ci, U, V, M);
    if (co + 4 <= Co) gemm_rows(4, co, nt, Ci, U, V, M), co += 4;
    if (co + 2 <= Co) gemm_rows(2, co, nt, Ci, U, V, M), co += 2;
    if (co < Co) gemm_rows(1, co, nt, Ci, U, V, M);
}

/* Chunk c: tile rows [c * rows, ...) of the N * TH rows, with scratch s.
 * input_row writes up to 7 floats past each tile row: with ci outer and
 * rows inner those land on the next row's start (written after) or, past
 * the last, in V's skew. */
static void run_chunk(const wino_t *k, int64_t c, float *s) {
    const int64_t TW = k->TW, Ci = k->Ci, Co = k->Co, E = (TW + 7) / 8 * 8 + 8;
    int64_t r0 = c * k->rows, r1 = r0 + k->rows < k->N * k->TH ? r0 + k->rows : k->N * k->TH;
    int64_t nt = (r1 - r0) * TW; /* tiles of the chunk: the products' columns */
    /* V_p and M_p WINO_SKEW floats more than a matrix apart: at the exact
     * size (a power of two here) the transforms' 16 streams fell into one
     * cache set and the transforms ran 4x slower */
    const int64_t ldv = Ci * nt + WINO_SKEW, ldm = Co * nt + WINO_SKEW;
    float *V = s, *M = V + 16 * (Ci * k->rows * TW + WINO_SKEW), *rr = M + 16 * (Co * k->rows * TW + WINO_SKEW);
    float *pb = rr + 4 * E; /* output_row's and input_rows' buffers */
    for (int64_t ci = 0; ci < Ci; ci++)
        for (int64_t r = r0; r < r1;) { /* the chunk's rows of one plane */
            int64_t n = r / k->TH, ty = r % k->TH, ty1 = k->TH < ty + (r1 - r) ? k->TH : ty + (r1 - r);
            input_rows(k, k->in + (n * Ci + ci) * k->Hi * k->Wi, ty, ty1, pb, V + ci * nt + (r - r0) * TW, ldv);
            r += ty1 - ty;
        }
    for (int p = 0; p < 16; p++) small_gemm(Co, nt, Ci, k->U + p * Co * Ci, V + p * ldv, M + p * ldm);
    for (int64_t co = 0; co < Co; co++)
        for (int64_t r = r0; r < r1; r++) {
            int64_t n = r / k->TH, ty = r % k->TH;
            output_row(k, M + co * nt + (r - r0) * TW, ldm, ty, rr, k->out + (n * Co + co) * k->Ho * k->Wo);
        }
}

/* Weight gradient: Q_p = (A dY A^T)_p of the tiles of tile row ty of one
 * output-gradient plane (dY: the 2x2 block at rows 2 ty, 2 ty + 1 and
 * columns 2 tx, 2 tx + 1, zero past Ho and Wo -- outputs that do not
 * exist have no gradient), written to q + p * ldq + tx, 8 tiles at a time
 * (up to 7 floats past TW, as input_rows). rb: 2 x 2 E floats for rows
 * whose last block would read past Wo. */
WINO_CLONES static void grad_row(const wino_t *k, const float *plane, int64_t ty, float *restrict rb,
                                 float *restrict q, int64_t ldq) {
    const int64_t TW = k->TW, Wo = k->Wo, E = (TW + 7) / 8 * 8 + 8;
    const float *row[2];
    for (int a = 0; a < 2; a++) {
        int64_t y = 2 * ty + a;
        float *b = rb + a * 2 * E;
        row[a] = b;
        if (y >= k->Ho) {
            memset(b, 0, sizeof(float) * (size_t)(2 * E));
        } else if ((TW + 7) / 8 * 16 <= Wo) {
            row[a] = plane + y * Wo; /* every block inside the row: read in place */
        } else {
            memcpy(b, plane + y * Wo, sizeof(float) * (size_t)Wo);
            memset(b + Wo, 0, sizeof(float) * (size_t)(2 * E - Wo));
        }
    }
    for (int64_t tx = 0; tx < TW; tx += 8) {
        wv8 r[2][4];
        for (int a = 0; a < 2; a++) { /* dY A^T along x */
            wv8 u, v;
            LD8(u, row[a] + 2 * tx);
            LD8(v, row[a] + 2 * tx + 8);
            wv8 d0 = __builtin_shufflevector(u, v, 0, 2, 4, 6, 8, 10, 12, 14);
            wv8 d1 = __builtin_shufflevector(u, v, 1, 3, 5, 7, 9, 11, 13, 15);
            r[a][0] = d0;
            r[a][1] = d0 + d1;
            r[a][2] = d0 - d1;
            r[a][3] = -d1;
        }
        for (int j = 0; j < 4; j++) { /* A along y */
            wv8 q0 = r[0][j], q1 = r[0][j] + r[1][j], q2 = r[0][j] - r[1][j], q3 = -r[1][j];
            ST8(q + (0 + j) * ldq + tx, q0);
            ST8(q + (4 + j) * ldq + tx, q1);
            ST8(q + (8 + j) * ldq + tx, q2);
            ST8(q + (12 + j) * ldq + tx, q3);
        }
    }
}

/* small_gemm_nt's blocks (below): 2 rows of Q by 4 of V, and 1 by 1. */
static inline __attribute__((always_inline)) void dot_2x4(int64_t co, int64_t ci, int64_t nt, int64_t Ci,
                                                          const float *restrict Q, const float *restrict V,
                                                          float *restrict acc) {
    float *p00 = acc + (co * Ci + ci) * 8, *p10 = p00 + Ci * 8;
    const float *q0 = Q + co * nt, *q1 = q0 + nt, *v0 = V + ci * nt, *v1 = v0 + nt, *v2 = v1 + nt, *v3 = v2 + nt;
    wv8 a00, a01, a02, a03, a10, a11, a12, a13;
    LD8(a00, p00);
    LD8(a01, p00 + 8);
    LD8(a02, p00 + 16);
    LD8(a03, p00 + 24);
    LD8(a10, p10);
    LD8(a11, p10 + 8);
    LD8(a12, p10 + 16);
    LD8(a13, p10 + 24);
    int64_t t = 0;
    for (; t + 8 <= nt; t += 8) {
        wv8 x0, x1, y0, y1, y2, y3;
        LD8(x0, q0 + t);
        LD8(x1, q1 + t);
        LD8(y0, v0 + t);
        LD8(y1, v1 + t);
        LD8(y2, v2 + t);
        LD8(y3, v3 + t);
        a00 += x0 * y0;
        a01 += x0 * y1;
        a02 += x0 * y2;
        a03 += x0 * y3;
        a10 += x1 * y0;
        a11 += x1 * y1;
        a12 += x1 * y2;
        a13 += x1 * y3;
    }
    ST8(p00, a00);
    ST8(p00 + 8, a01);
    ST8(p00 + 16, a02);
    ST8(p00 + 24, a03);
    ST8(p10, a10);
    ST8(p10 + 8, a11);
    ST8(p10 + 16, a12);
    ST8(p10 + 24, a13);
    for (; t < nt; t++) { /* after the stores: lane access would keep the accumulators in memory */
        p00[0] += q0[t] * v0[t];
        p00[8] += q0[t] * v1[t];
        p00[16] += q0[t] * v2[t];
        p00[24] += q0[t] * v3[t];
        p10[0] += q1[t] * v0[t];
        p10[8] += q1[t] * v1[t];
        p10[16] += q1[t] * v2[t];
        p10[24] += q1[t] * v3[t];
    }
}

static inline __attribute__((always_inline)) void dot_1x1(int64_t co, int64_t ci, int64_t nt, int64_t Ci,
                                                          const float *restrict Q, const float *restrict V,
                                                          float *restrict acc) {
    float *p = acc + (co * Ci + ci) * 8;
    const float *q = Q + co * nt, *v = V + ci * nt;
    wv8 a;
    LD8(a, p);
    int64_t t = 0;
    for (; t + 8 <= nt; t += 8) {
        wv8 x, y;
        LD8(x, q + t);
        LD8(y, v + t);
        a += x * y;
    }
    ST8(p, a);
    for (; t < nt; t++) p[0] += q[t] * v[t];
}

/* acc (Co x Ci x 8 lanes) += Q (Co x nt) @ V (Ci x nt)^T, lane l summing
 * the columns t = l mod 8 (the last nt % 8 into lane 0): blocks of 2 rows
 * of Q by 4 of V held in registers along the rows (the rest one by one),
 * the lanes summed once at the end of the product. A loop, not BLAS:
 * OpenBLAS spent more time packing these 32 x 16 x 128 products than
 * multiplying them. */
WINO_CLONES static void small_gemm_nt(int64_t Co, int64_t Ci, int64_t nt, const float *restrict Q,
                                      const float *restrict V, float *restrict acc) {
    int64_t co = 0;
    for (; co + 2 <= Co; co += 2) {
        int64_t ci = 0;
        for (; ci + 4 <= Ci; ci += 4) dot_2x4(co, ci, nt, Ci, Q, V, acc);
        for (; ci < Ci; ci++) {
            dot_1x1(co, ci, nt, Ci, Q, V, acc);
            dot_1x1(co + 1, ci, nt, Ci, Q, V, acc);
        }
    }
    for (; co < Co; co++)
        for (int64_t ci = 0; ci < Ci; ci++) dot_1x1(co, ci, nt, Ci, Q, V, acc);
}

/* Weight gradient, chunk c: V of the input, Q of the output gradient, and
 * dU_p (Co x Ci x 8 lanes) += Q_p @ V_p^T for the 16 positions. Scratch
 * as run_chunk's, Q in M's place. */
static void run_chunk_weight(const wino_t *k, int64_t c, float *s, float *dU) {
    const int64_t TW = k->TW, Ci = k->Ci, Co = k->Co, E = (TW + 7) / 8 * 8 + 8;
    int64_t r0 = c * k->rows, r1 = r0 + k->rows < k->N * k->TH ? r0 + k->rows : k->N * k->TH;
    int64_t nt = (r1 - r0) * TW;
    const int64_t ldv = Ci * nt + WINO_SKEW, ldq = Co * nt + WINO_SKEW;
    float *V = s, *Q = V + 16 * (Ci * k->rows * TW + WINO_SKEW), *rr = Q + 16 * (Co * k->rows * TW + WINO_SKEW);
    float *pb = rr + 4 * E;
    for (int64_t ci = 0; ci < Ci; ci++)
        for (int64_t r = r0; r < r1;) {
            int64_t n = r / k->TH, ty = r % k->TH, ty1 = k->TH < ty + (r1 - r) ? k->TH : ty + (r1 - r);
            input_rows(k, k->in + (n * Ci + ci) * k->Hi * k->Wi, ty, ty1, pb, V + ci * nt + (r - r0) * TW, ldv);
            r += ty1 - ty;
        }
    for (int64_t co = 0; co < Co; co++)
        for (int64_t r = r0; r < r1; r++) {
            int64_t n = r / k->TH, ty = r % k->TH;
            grad_row(k, k->gout + (n * Co + co) * k->Ho * k->Wo, ty, rr, Q + co * nt + (r - r0) * TW, ldq);
        }
    for (int p = 0; p < 16; p++) small_gemm_nt(Co, Ci, nt, Q + p * ldq, V + p * ldv, dU + p * Co * Ci * 8);
}

/* Job t: chunks [t * nchunks / T, (t + 1) * nchunks / T); stops early when
 * an interrupt is pending (the caller then fails, Note [Interrupts in
 * kernels] way (b)). */
static void wino_range(int64_t b, int64_t e, void *vctx) {
    const wino_t *k = vctx;
    for (int64_t t = b; t < e; t++) {
        float *s = k->scratch + t * k->per_job;
        for (int64_t c = t * k->nchunks / k->T; c < (t + 1) * k->nchunks / k->T; c++) {
            if (em_cpu_stop_point()) return;
            if (k->dU) run_chunk_weight(k, c, s, k->dU + t * 16 * k->Co * k->Ci * 8);
            else run_chunk(k, c, s);
        }
    }
}

/* Fills k's tiling (chunks of whole tile rows, T jobs, scratch per job)
 * for the planes k->Hi..k->Wo set by the caller. */
static void wino_plan(wino_t *k) {
    k->TH = (k->Ho + 1) / 2;
    k->TW = (k->Wo + 1) / 2;
    /* about WINO_TILES tiles, a multiple of 16 where that costs at most
     * doubling the rows (small_gemm's column blocks) */
    k->rows = WINO_TILES / k->TW > 1 ? WINO_TILES / k->TW : 1;
    int64_t m = 16;
    for (int64_t a = k->TW; a % 2 == 0 && m > 1; a /= 2) m /= 2; /* rows * TW % 16 == 0 iff m | rows */
    if (m > 1 && (k->rows + m - 1) / m * m <= 2 * k->rows) k->rows = (k->rows + m - 1) / m * m;
    if (k->rows > k->N * k->TH) k->rows = k->N * k->TH;
    k->nchunks = (k->N * k->TH + k->rows - 1) / k->rows;
    int64_t T = em_get_num_threads();
    if (T > k->nchunks) T = k->nchunks;
    if (T > WINO_MAX_JOBS) T = WINO_MAX_JOBS;
    if (T < 1) T = 1;
    k->T = T;
    int64_t nt = k->rows * k->TW;
    int64_t E = (k->TW + 7) / 8 * 8 + 8; /* the row buffers */
    k->per_job = 16 * ((k->Ci + k->Co) * nt + 2 * WINO_SKEW) + 4 * E +
                 (2 * (k->rows < k->TH ? k->rows : k->TH) + 2) * 2 * E;
    k->per_job = (k->per_job + 15) / 16 * 16; /* 64-byte multiples */
}

/* Runs k's jobs over the pool (no BLAS inside them). */
static void wino_run(wino_t *k) {
    if (k->T == 1) wino_range(0, 1, k);
    else em_cpu_parallel_for(k->T, 1, wino_range, k);
}

em_status em_conv_wino(const em_conv_geom *g, bool to_image, const float *in, const float *w, float *out,
                       const char *op) {
    wino_t k;
    memset(&k, 0, sizeof k);
    k.N = g->N;
    k.in = in;
    k.out = out;
    if (!to_image) {
        k.Ci = g->C_img, k.Co = g->C_col, k.Hi = g->img[1], k.Wi = g->img[2], k.Ho = g->col[1], k.Wo = g->col[2];
        k.py = g->pad[1], k.px = g->pad[2];
    } else {
        k.Ci = g->C_col, k.Co = g->C_img, k.Hi = g->col[1], k.Wi = g->col[2], k.Ho = g->img[1], k.Wo = g->img[2];
        k.py = 2 - g->pad[1], k.px = 2 - g->pad[2];
    }
    wino_plan(&k);
    int64_t un = 16 * k.Co * k.Ci, total = un + k.T * k.per_job;
    em_tensor *buf = em_tensor_new(1, &total, EM_FLOAT32, em_cpu_dev());
    if (!buf) return em_error_kind();
    float *U = em_tensor_data(buf);
    weight_transform(w, U, k.Co, k.Ci, to_image);
    k.U = U;
    k.scratch = U + un;
    wino_run(&k);
    em_tensor_release(buf);
    return em_cpu_interrupted(op) ? EM_EINTERRUPT : EM_OK;
}

em_status em_conv_wino_weight(const em_conv_geom *g, const float *cs, const float *img, float *gw, const char *op) {
    wino_t k;
    memset(&k, 0, sizeof k);
    k.N = g->N;
    k.in = img;
    k.gout = cs;
    k.Ci = g->C_img, k.Co = g->C_col, k.Hi = g->img[1], k.Wi = g->img[2], k.Ho = g->col[1], k.Wo = g->col[2];
    k.py = g->pad[1], k.px = g->pad[2];
    wino_plan(&k);
    int64_t un = 16 * k.Co * k.Ci * 8, total = k.T * (un + k.per_job);
    em_tensor *buf = em_tensor_new(1, &total, EM_FLOAT32, em_cpu_dev());
    if (!buf) return em_error_kind();
    k.dU = em_tensor_data(buf);
    k.scratch = k.dU + k.T * un;
    memset(k.dU, 0, sizeof(float) * (size_t)(k.T * un));
    wino_run(&k);
    /* the jobs' partial sums in job order (the result depends on T only by
     * rounding), the 8 lanes of each, then gw = G^T dU G per kernel, in
     * double */
    for (int64_t t = 1; t < k.T; t++)
        for (int64_t i = 0; i < un; i++) k.dU[i] += k.dU[t * un + i];
    for (int64_t co = 0; co < k.Co; co++)
        for (int64_t ci = 0; ci < k.Ci; ci++) {
            double x[4][4], h[3][4];
            for (int p = 0; p < 16; p++) {
                const float *l = k.dU + ((p * k.Co + co) * k.Ci + ci) * 8;
                x[p / 4][p % 4] = (double)(((l[0] + l[1]) + (l[2] + l[3])) + ((l[4] + l[5]) + (l[6] + l[7])));
            }
            for (int j = 0; j < 4; j++) {
                h[0][j] = x[0][j] + 0.5 * (x[1][j] + x[2][j]);
                h[1][j] = 0.5 * (x[1][j] - x[2][j]);
                h[2][j] = 0.5 * (x[1][j] + x[2][j]) + x[3][j];
            }
            float *dst = gw + (co * k.Ci + ci) * 9;
            for (int a = 0; a < 3; a++) {
                dst[a * 3 + 0] = (float)(h[a][0] + 0.5 * (h[a][1] + h[a][2]));
                dst[a * 3 + 1] = (float)(0.5 * (h[a][1] - h[a][2]));
                dst[a * 3 + 2] = (float)(0.5 * (h[a][1] + h[a][2]) + h[a][3]);
            }
        }
    em_tensor_release(buf);
    return em_cpu_interrupted(op) ? EM_EINTERRUPT : EM_OK;
}
