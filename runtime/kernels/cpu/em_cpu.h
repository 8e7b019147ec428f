/* em_cpu.h -- the CPU kernel module: thread pool, tensor iterator, loops.
 * Public: seeding and thread count. Hidden: what the kernel files share.
 *
 * Note [Tensor iterator]
 * An elementwise kernel hands em_cpu_iter_build() its output (or NULL to
 * allocate one) and its inputs. The builder broadcasts the shapes, casts
 * inputs whose dtype differs from the compute dtype (a 1-element input
 * into a small buffer inside the iterator, a larger one into a temporary),
 * converts every operand's strides to byte strides over the broadcast
 * shape (0 for broadcast dims), orders dims innermost first and merges
 * dims that are contiguous for every operand. A fully mergeable problem
 * has ndim <= 1 and runs as one flat loop. em_cpu_iter_run() calls the
 * 1-d loop `fn(data, strides, n, ctx)` (data[k] and strides[k] for
 * operand k, outputs first, strides in bytes) over chunks of the index
 * space, in parallel through the pool when the work is large.
 * When every operand (the given output too) has one element the builder
 * takes a short path: no broadcasting, stride or coalescing work, ndim 0,
 * and the run is one call of the loop with n = 1 (the small graphs of the
 * shell and of scalar autograd chains live on this path). Its result is
 * the one the general path gives; errors (an output of fewer dims than the
 * inputs) are left to the general path.
 */
#ifndef EM_CPU_H
#define EM_CPU_H

#include "core/em_core.h"
#include "em_kernels_decl.h" /* generated: every kernel's prototype */

#include <math.h>

/* Seeding (em_manual_seed) and the thread count (em_set_num_threads) live
 * in core's runtime context (Note [Runtime context] in em_core.h); the
 * pool follows the thread count through a hook. */

/* ---- thread pool (pool.c) ---- */

/* Runs fn(begin, end, ctx) over a partition of [0, n). Serial when
 * n < grain, with one thread, from inside a parallel region (nesting) or
 * when another thread holds the pool; otherwise the caller runs the first
 * chunk and sleeping workers the others. Returns when all chunks are done.
 * Never call BLAS from fn (Note: DESIGN decision 9). */
typedef void (*em_cpu_range_fn)(int64_t begin, int64_t end, void *ctx);
EM_HIDDEN void em_cpu_parallel_for(int64_t n, int64_t grain, em_cpu_range_fn fn, void *ctx);
EM_HIDDEN bool em_cpu_in_parallel(void);

/* Note [Interrupts in kernels]
 * em_cpu_parallel_for_stoppable is em_cpu_parallel_for for a long loop
 * that may stop half-way: each thread runs its chunk in pieces (about 1024,
 * each at least grain; also when the job runs serially) and, once an
 * interrupt is pending (Note [Interrupts] in em_core.h), runs no further
 * piece and returns with some items never visited. A loop may be made
 * stoppable in one of two ways:
 *  (a) It writes a tensor the kernel allocated and returns, and no later
 *      step of the kernel reads it. The flag stays set: the generated
 *      entry of every op that does not write into an argument checks it
 *      again when its kernel returns, drops the result and fails with
 *      "NAME: interrupted". Only for kernels no other kernel calls
 *      directly. Today: the contiguous paths of unary.c and binary.c when
 *      they allocate the result.
 *  (b) Anything else: right after the loop the kernel calls
 *      em_cpu_interrupted(op) and, when it is true, frees what it made and
 *      fails before any later step reads the partial output (as values,
 *      sizes or addresses) and before it writes any argument. No caller,
 *      not even a kernel calling this one directly, then sees a partial
 *      result, and an out= target is left as it was. Today: the reduction
 *      framework (reduce.c: sum, mean, prod, amax, amin, norms, ... fold
 *      into an accumulator the kernel owns), the arg-reductions (max/min
 *      along a dim, argmax, argmin), the copy kernels clone, contiguous
 *      and to and the reductions' copy of a non-contiguous input
 *      (em_cpu_to_dtype_stoppable), conv's im2col/gemm chunks
 *      (forward and backward), sort's rows (sort, argsort), the matrix
 *      products in panels (mm, functional matmul, bmm, mv, cdist: Note
 *      [Stoppable products] in linalg.c), max/avg/adaptive pooling
 *      forward and backward, max_unpool, interpolate and pad (forward
 *      and backward), index_select, gather and embedding.
 * In-place ops, out= copies and every loop not listed above always finish
 * (their target is never half-written by an interrupt); the next op
 * boundary reports it. A single BLAS or LAPACK call finishes too (a
 * product's panel; a whole solve or decomposition). */
EM_HIDDEN void em_cpu_parallel_for_stoppable(int64_t n, int64_t grain, em_cpu_range_fn fn, void *ctx);
/* A stop point (each piece of a stoppable loop is one; so is each call
 * of em_cpu_interrupted): true when an interrupt is pending. Counts down
 * the test hook below. */
EM_HIDDEN bool em_cpu_stop_point(void);
/* Way (b) of Note [Interrupts in kernels]: a stop point; true, with
 * "op: interrupted" set and the interrupt consumed, when an interrupt is
 * pending. */
static inline bool em_cpu_interrupted(const char *op) {
    return em_cpu_stop_point() && em_take_interrupt(op) != EM_OK;
}
/* Test hook (tests/check_faults.c): the n-th stop point from now (n > 0)
 * calls em_interrupt() first, as if Ctrl-C came just then: an interrupt at
 * a known place inside a kernel, without timing. n = 0 turns it off. */
EM_HIDDEN void em_cpu_interrupt_at_stop_point(int64_t n);

#define EM_CPU_GRAIN 32768

/* ---- tensor iterator (iter.c) ---- */

#define EM_CPU_ITER_MAX 4

/* The 1-d inner loop: n elements; data[k] points at operand k's first
 * element, strides[k] is its step in bytes (0 = broadcast scalar). */
typedef void (*em_cpu_loop)(char **data, const int64_t *strides, int64_t n, void *ctx);

typedef struct em_cpu_iter {
    int ntensors;                 /* operands, outputs first */
    int ndim;                     /* after coalescing; innermost first */
    int64_t numel;                /* elements in the iteration space */
    int64_t shape[EM_MAX_DIMS];   /* sizes, innermost first */
    int64_t strides[EM_MAX_DIMS][EM_CPU_ITER_MAX]; /* bytes, [dim][operand] */
    char *data[EM_CPU_ITER_MAX];  /* first element of each operand */
    em_tensor *tmp[EM_CPU_ITER_MAX]; /* cast temporaries (owned) or NULL */
    _Alignas(16) char scalar[EM_CPU_ITER_MAX][16]; /* cast 1-element inputs */
} em_cpu_iter;

/* Builds the iterator for one output and nin inputs (see the Note).
 * out == NULL: allocate an output of out_dtype over the broadcast shape;
 * otherwise write into out, whose shape must equal the broadcast shape.
 * compute: inputs of another dtype are cast to it; EM_DTYPE_NONE: never
 * cast (the loop converts). Returns the output as a new reference (out
 * retained when given), or NULL with the error set (op names the op).
 * Call em_cpu_iter_done() after running it, also when it failed. */
EM_HIDDEN em_tensor *em_cpu_iter_build(em_cpu_iter *it, em_tensor *out, em_dtype out_dtype,
                                       int nin, em_tensor *const *in, em_dtype compute,
                                       const char *op);
EM_HIDDEN void em_cpu_iter_run(em_cpu_iter *it, em_cpu_loop fn, void *ctx, int64_t grain);
/* em_cpu_iter_run over em_cpu_parallel_for_stoppable: may stop with some
 * elements not visited (Note [Interrupts in kernels]). */
EM_HIDDEN void em_cpu_iter_run_stoppable(em_cpu_iter *it, em_cpu_loop fn, void *ctx, int64_t grain);
EM_HIDDEN void em_cpu_iter_done(em_cpu_iter *it);

/* ---- copying and casting (copy.c) ---- */

/* The loop converting operand 1 (src dtype) into operand 0 (dst dtype). */
EM_HIDDEN em_cpu_loop em_cpu_cast_loop(em_dtype dst, em_dtype src);
/* dst[...] = src broadcast to dst's shape, any dtypes, parallel. Does not
 * bump dst's version. Safe when src overlaps dst. */
EM_HIDDEN em_status em_cpu_copy_into(em_tensor *dst, const em_tensor *src, const char *op);
/* A new contiguous tensor holding t converted to dtype. */
EM_HIDDEN em_tensor *em_cpu_to_dtype(const em_tensor *t, em_dtype dtype, const char *op);
/* em_cpu_to_dtype whose copy stops at an interrupt and then returns NULL
 * with "op: interrupted" (Note [Interrupts in kernels], way (b)): for the
 * copy kernels, and for a kernel's own temporary made before it writes
 * anything (the reductions' contiguous copy of their input). */
EM_HIDDEN em_tensor *em_cpu_to_dtype_stoppable(const em_tensor *t, em_dtype dtype, const char *op);

/* Kernels other kernel files call (also in the generated em_kernels_decl.h). */
/* fill_ with a number (factories, fill_): refuses a value the dtype cannot
 * hold, as PyTorch does (op names the op in the message). */
EM_HIDDEN em_tensor *em_cpu_fill_scalar_(em_tensor *self, em_scalar value, const char *op);
/* PyTorch's c10::overflows: value is outside what dtype holds. */
EM_HIDDEN bool em_cpu_scalar_overflows(em_scalar v, em_dtype dt);
em_tensor *em_cpu_fill_(em_keyset ks, em_tensor *self, em_tensor *value);
em_tensor *em_cpu_zero_(em_keyset ks, em_tensor *self);

/* ---- per-dtype macros shared by the loop files ---- */

/* X(short name, C type, enum) in em_dtype order. */
#define EM_CPU_TYPES(X) \
    X(b, bool, EM_BOOL) X(u8, uint8_t, EM_UINT8) X(i8, int8_t, EM_INT8) \
    X(i32, int32_t, EM_INT32) X(i64, int64_t, EM_INT64) X(f16, em_half, EM_FLOAT16) \
    X(bf16, em_bfloat16, EM_BFLOAT16) X(f32, float, EM_FLOAT32) X(f64, double, EM_FLOAT64)
/* M(a, b, short name, C type) for every dtype, passing a and b through. */
#define EM_CPU_FOR_SRC(M, A, B) \
    M(A, B, b, bool) M(A, B, u8, uint8_t) M(A, B, i8, int8_t) M(A, B, i32, int32_t) \
    M(A, B, i64, int64_t) M(A, B, f16, em_half) M(A, B, bf16, em_bfloat16) \
    M(A, B, f32, float) M(A, B, f64, double)

/* Load as the wide type: int64_t for bool and integers, double for floats. */
#define EM_LDW_b(x) ((int64_t)(x))
#define EM_LDW_u8(x) ((int64_t)(x))
#define EM_LDW_i8(x) ((int64_t)(x))
#define EM_LDW_i32(x) ((int64_t)(x))
#define EM_LDW_i64(x) ((int64_t)(x))
#define EM_LDW_f16(x) ((double)em_half_to_float(x))
#define EM_LDW_bf16(x) ((double)em_bf16_to_float(x))
#define EM_LDW_f32(x) ((double)(x))
#define EM_LDW_f64(x) ((double)(x))
/* A floating value as int64 the way x86's conversion gives it (and so
 * PyTorch on x86): truncated, and INT64_MIN for NaN or a value out of
 * range -- a plain C cast of those is undefined behaviour. */
static inline int64_t em_cpu_f2i64(double v) {
    return v >= -0x1p63 && v < 0x1p63 ? (int64_t)v : INT64_MIN;
}
static inline int32_t em_cpu_f2i32(double v) {
    return v >= -0x1p31 && v < 0x1p31 ? (int32_t)v : INT32_MIN;
}
#define EM_TO_I64(v) _Generic((v), float: em_cpu_f2i64((double)(v)), double: em_cpu_f2i64((double)(v)), \
                              default: (int64_t)(v))
#define EM_TO_I32(v) _Generic((v), float: em_cpu_f2i32((double)(v)), double: em_cpu_f2i32((double)(v)), \
                              default: (int32_t)(int64_t)(v))
/* Store any arithmetic value: integers wrap; floats truncate through int32
 * (to int32, int8, uint8) or int64 as x86's conversions do; floats round. */
#define EM_ST_b(v) ((v) != 0)
#define EM_ST_u8(v) ((uint8_t)EM_TO_I32(v))
#define EM_ST_i8(v) ((int8_t)EM_TO_I32(v))
#define EM_ST_i32(v) (EM_TO_I32(v))
#define EM_ST_i64(v) (EM_TO_I64(v))
#define EM_ST_f16(v) em_float_to_half((float)(v))
#define EM_ST_bf16(v) em_float_to_bf16((float)(v))
#define EM_ST_f32(v) ((float)(v))
#define EM_ST_f64(v) ((double)(v))

/* Arithmetic loads: integers and bool compute in uint64_t (wrapping, no
 * undefined overflow), float16/bfloat16 in float. */
#define LA_b(x) ((uint64_t)(int64_t)(x))
#define LA_u8(x) ((uint64_t)(int64_t)(x))
#define LA_i8(x) ((uint64_t)(int64_t)(x))
#define LA_i32(x) ((uint64_t)(int64_t)(x))
#define LA_i64(x) ((uint64_t)(x))
#define LA_f16(x) em_half_to_float(x)
#define LA_bf16(x) em_bf16_to_float(x)
#define LA_f32(x) (x)
#define LA_f64(x) (x)

/* Hot contiguous loops get a clone per ISA, chosen at load time. */
#if defined(__x86_64__) && !defined(__SANITIZE_ADDRESS__) && !defined(__SANITIZE_THREAD__) && !defined(EM_NO_CLONES)
#define EM_CPU_CLONES __attribute__((target_clones("avx512f", "avx2", "default")))
#else
#define EM_CPU_CLONES
#endif
/* CLONE_<dtype>: the clone attribute for a dtype's loop (only the float32
 * and float64 loops are hot enough to carry one per ISA). */
#define CLONE_b
#define CLONE_u8
#define CLONE_i8
#define CLONE_i32
#define CLONE_i64
#define CLONE_f16
#define CLONE_bf16
#define CLONE_f32 EM_CPU_CLONES
#define CLONE_f64 EM_CPU_CLONES

/* ---- per op family (Note [Schema files]): each family's shared helpers ---- */

/* ---- family: unary ---- */

struct em_meta;
/* The unary family's driver (unary_math.c): runs fn, a loop reading
 * m->compute and writing m->dtype, from self into out, a structured impl's
 * output (Note [Structured kernels]: m's shape, a dtype m->dtype casts to,
 * possibly self itself). An out of another dtype gets the result through a
 * temporary; a self sharing out's memory without being out is copied
 * first. fn NULL: an error "op: not supported for dtype ...". */
EM_HIDDEN em_status em_cpu_unary_run(const struct em_meta *m, em_cpu_loop fn, em_tensor *self, em_tensor *out,
                                     void *ctx, int64_t grain);

/* ---- family: binary ---- */

/* PyTorch's div_floor for floats (floor_divide, div(rounding_mode="floor")):
 * exact (fmod, then the quotient rounded), a / b when b is 0, a signed
 * zero for a zero quotient. binary.c and binary_math.c share it. */
#define EM_CPU_FLOORDIV_FN(NAME, T, FMOD, FLOOR, COPYSIGN)                   \
    static inline T NAME(T a, T b) {                                        \
        if (b == 0) return a / b;                                           \
        T mod = FMOD(a, b), div = (a - mod) / b;                            \
        if (mod != 0 && (b < 0) != (mod < 0)) div -= 1;                     \
        if (div == 0) return COPYSIGN(0, a / b);                            \
        T fl = FLOOR(div);                                                  \
        return div - fl > (T)0.5 ? fl + 1 : fl;                             \
    }
EM_CPU_FLOORDIV_FN(em_cpu_floordivf, float, fmodf, floorf, copysignf)
EM_CPU_FLOORDIV_FN(em_cpu_floordivd, double, fmod, floor, copysign)

/* ---- family: reduce ---- */

/* ---- family: shape ---- */
/* The geometry of t.diagonal(offset, dim1, dim2) (dims 0-based, negative
 * from the end): sizes/strides (t->ndim - 1 entries, the diagonal last) and
 * the absolute storage offset, as PyTorch's diagonal computes them. Sets
 * an error naming op for fewer than 2 dims, a bad dim or equal dims.
 * (shape_ops.c; the diagonal composite and diag_embed share it.) */
EM_HIDDEN em_status em_cpu_diagonal_geometry(const em_tensor *t, int64_t offset, int64_t dim1, int64_t dim2,
                                             int64_t *sizes, int64_t *strides, int64_t *storage_offset,
                                             const char *op);

/* ---- family: index ---- */

/* gather(self, d, index) into a new tensor of index's shape (d wrapped,
 * 1-based int64 index of self's rank; index.c); op names the caller. */
EM_HIDDEN em_tensor *em_cpu_index_gather(em_tensor *self, int d, em_tensor *index, const char *op);

/* ---- family: linalg ---- */

/* C (M x N, contiguous) = A (M x K) x B (K x N) in dtype dt (linalg.c's
 * product: BLAS for float32/float64, float32 for half types, wrapping
 * uint64 arithmetic for integers; bool is the caller's business). A and B
 * are given by their first element and element strides (rows, cols); any
 * strides work (non-BLAS layouts are copied). op: the name an interrupt
 * reports, for a c the caller frees on error, or NULL: the product then
 * always finishes (Note [Stoppable products], linalg.c). Returns EM_OK or
 * an error. */
EM_HIDDEN em_status em_cpu_gemm(em_dtype dt, const char *a, int64_t M, int64_t K, int64_t as0, int64_t as1,
                                const char *b, int64_t N, int64_t bs0, int64_t bs1, char *c, const char *op);

/* ---- family: random ---- */

/* Fill t (any layout, CPU) in place from gen (NULL: the default generator)
 * with values uniform in [from, to), normal (mean, std) or Bernoulli(p)
 * (1/0 in t's dtype), drawing from the counter-based stream (Note [Random
 * numbers]) so that the values do not depend on the thread count: the
 * helpers for kernels of other families (dropout, initialisers). Do not
 * bump t's version; return EM_OK or an error status with the error set. */
EM_HIDDEN em_status em_cpu_fill_uniform(em_tensor *t, double from, double to, em_generator *gen);
EM_HIDDEN em_status em_cpu_fill_normal(em_tensor *t, double mean, double std, em_generator *gen);
EM_HIDDEN em_status em_cpu_fill_bernoulli(em_tensor *t, double p, em_generator *gen);

/* ---- family: speed ---- */
/* The largest of the n contiguous floats at x, NaNs skipped (-inf when
 * there is nothing else): (b > a ? b : a) over 16 lanes of GCC vectors, which
 * the compiler turns into maxps in every ISA clone of the caller (the same
 * loop on float arrays stayed scalar). Equal to the scalar fold: max is
 * exact and the NaN rule is the same per element. For the rows of
 * softmax / log_softmax / cross_entropy; inline into CLONE'd loops. */
typedef float em_cpu_v8f __attribute__((vector_size(32)));
typedef int32_t em_cpu_v8i __attribute__((vector_size(32)));
/* a = (b > a ? b : a) per lane (a macro: vectors passed by value would
 * change the ABI of the non-AVX default clone) */
#define EM_CPU_V8F_MAX_INTO(a, b)                                                 \
    do {                                                                          \
        em_cpu_v8i m_ = (b) > (a);                                                \
        (a) = (em_cpu_v8f)((m_ & (em_cpu_v8i)(b)) | (~m_ & (em_cpu_v8i)(a)));     \
    } while (0)
static inline __attribute__((always_inline)) float em_cpu_rowmax_f32(const float *x, int64_t n) {
    em_cpu_v8f a0, a1;
    for (int k = 0; k < 8; k++) a0[k] = a1[k] = -__builtin_inff();
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) {
        em_cpu_v8f v0, v1;
        __builtin_memcpy(&v0, x + i, sizeof v0);
        __builtin_memcpy(&v1, x + i + 8, sizeof v1);
        EM_CPU_V8F_MAX_INTO(a0, v0);
        EM_CPU_V8F_MAX_INTO(a1, v1);
    }
    EM_CPU_V8F_MAX_INTO(a0, a1);
    float m = -__builtin_inff();
    for (int k = 0; k < 8; k++) m = a0[k] > m ? a0[k] : m;
    for (; i < n; i++) m = x[i] > m ? x[i] : m;
    return m;
}

/* ---- family: vmath ---- */

/* ---- family: pool ---- */

/* A pooling's geometry (pool_max.c): every rank as three spatial dims
 * (depth, height, width; the unused leading ones of size 1, kernel 1,
 * stride 1, no padding or dilation) over `planes` contiguous planes. */
typedef struct em_cpu_pool_geom {
    int nsp;                   /* spatial dims given: 1, 2 or 3 */
    bool batched;              /* input has a batch dim (nsp + 2 dims) */
    int ndim;                  /* input (and output) dims */
    int64_t planes;            /* N * C (C unbatched) */
    int64_t in[3], out[3];     /* spatial sizes of input and output */
    int64_t k[3], s[3], p[3], d[3]; /* kernel, stride, padding, dilation */
    int64_t in_numel, out_numel;    /* elements of one input / output plane */
    int64_t out_sizes[EM_MAX_DIMS]; /* the output's shape */
    bool adaptive;             /* adaptive pooling's windows (pool_adaptive.c): k/s/p/d unused */
    const char *op;            /* the op errors and interrupts name */
} em_cpu_pool_geom;

/* The end of a pooling forward with values y and indices yi made for input
 * x (contiguous): runs fn over g's planes with ctx (work: one plane's
 * cost) unless fn is NULL (an empty output), then releases x and returns y
 * with *indices = yi; when an interrupt stopped the loop, releases all
 * three and returns NULL with "g->op: interrupted" (Note [Interrupts in
 * kernels], way (b)). pool_max.c. */
EM_HIDDEN em_tensor *em_cpu_pool_run_pair(const em_cpu_pool_geom *g, int64_t work, em_cpu_range_fn fn, void *ctx,
                                          em_tensor *x, em_tensor *y, em_tensor *yi, em_tensor **indices);

/* Checks a max/avg pooling's input (nsp + 1 or nsp + 2 dims, only the batch
 * may be empty, float32/float64/bfloat16, and int64 with allow_int64) and
 * size lists (one value or nsp; stride absent or empty = kernel_size;
 * dilation absent (n == -1) = 1; positive kernel, stride, dilation;
 * 0 <= padding <= kernel / 2) and fills g with PyTorch's output sizes
 * (ceil_mode as pooling_output_shape). Errors name op. */
EM_HIDDEN em_status em_cpu_pool_geom_init(em_cpu_pool_geom *g, const em_tensor *self, int nsp,
                                          em_intlist kernel_size, em_intlist stride, em_intlist padding,
                                          em_intlist dilation, bool ceil_mode, bool allow_int64, const char *op);
/* Zeros of self's shape and dtype with grad_output added at the 1-based
 * plane positions in indices (int64, grad_output's shape = g's output);
 * deterministic. Index 0 (a window over no input) adds nothing; another
 * index outside 1..g->in_numel is an error naming op. */
EM_HIDDEN em_tensor *em_cpu_pool_scatter_backward(em_tensor *grad_output, em_tensor *self,
                                                  const em_cpu_pool_geom *g, em_tensor *indices, const char *op);
/* Adaptive pooling's window of output o along a dim of input size n and
 * output size m: PyTorch's [start_index, end_index) =
 * [floor(o * n / m), ceil((o + 1) * n / m)), never empty when n > 0. */
static inline void em_cpu_adaptive_window(int64_t o, int64_t n, int64_t m, int64_t *lo, int64_t *hi) {
    *lo = (o * n) / m;
    *hi = ((o + 1) * n + m - 1) / m;
}
/* Average pooling over g's windows (pool_avg.c; adaptive ones when
 * g->adaptive, each divided by its size): a new tensor of g's output shape
 * and self's dtype (float32/float64/bfloat16/int64); divisor is
 * divisor_override (0 when absent). g is checked; NULL on allocation failure. */
EM_HIDDEN em_tensor *em_cpu_avg_pool_run(const em_cpu_pool_geom *g, em_tensor *self, bool count_include_pad,
                                         int64_t divisor);
/* Its backward: a new gradient of self's shape and (floating) dtype with
 * grad_output (g's output shape, checked; converted to self's dtype, errors
 * naming op) spread over the windows. */
EM_HIDDEN em_tensor *em_cpu_avg_pool_backward_run(const em_cpu_pool_geom *g, em_tensor *grad_output,
                                                  em_tensor *self, bool count_include_pad, int64_t divisor,
                                                  const char *op);

/* ---- family: embed ---- */

/* The 0-based rows of the 1-based ids in indices (int64/int32, any layout;
 * Note [Embedding indices]) as a malloc'd array of indices->numel entries;
 * NULL with the error set (op, the bad id, rows) otherwise (embed.c). */
EM_HIDDEN int64_t *em_cpu_embed_rows(const em_tensor *indices, int64_t rows, const char *op, const char *what);
/* The dense (rows, D) gradient of a row gather: for each position i < n,
 * grad's row src[i] (i when NULL; grad contiguous (*, D), floating) times
 * fac[i] (1 when NULL) summed into row rows_of[i], per row in index order
 * (deterministic), scaled by 1/count with scale, row pad (0-based, -1 =
 * none) zero (embed.c). */
EM_HIDDEN em_tensor *em_cpu_embed_dense_grad(const em_tensor *grad, const int64_t *rows_of, const int64_t *src,
                                             const double *fac, int64_t n, int64_t rows, int64_t D, int64_t pad,
                                             bool scale, const char *op);

/* ---- small helpers ---- */

static inline em_device em_cpu_dev(void) { return em_cpu_device(); }
static inline bool em_cpu_is_float(em_dtype t) { return t >= EM_FLOAT16 && t <= EM_FLOAT64; }

#endif
