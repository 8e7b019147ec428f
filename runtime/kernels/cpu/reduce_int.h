/* reduce_int.h -- what reduce.c (the reduction framework) offers the
 * reduction kernels of reduce_ops.c. See Note [Reduction framework]. */
#ifndef EM_REDUCE_INT_H
#define EM_REDUCE_INT_H

#include "kernels/cpu/em_cpu.h"

/* The folds: an element map and an associative operation. */
typedef enum {
    EM_CPU_R_SUM,   /* x, + */
    EM_CPU_R_PROD,  /* x, * */
    EM_CPU_R_MAX,   /* x, max (NaN wins) */
    EM_CPU_R_MIN,   /* x, min (NaN wins) */
    EM_CPU_R_SQ,    /* x^2, + */
    EM_CPU_R_SQDEV, /* (x - mean)^2, + (the output's mean from mus) */
    EM_CPU_R_ASUM,  /* |x|, + */
    EM_CPU_R_PSUM,  /* |x|^p, + */
    EM_CPU_R_AMAX,  /* |x|, max */
    EM_CPU_R_AMIN,  /* |x|, min */
    EM_CPU_R_NNZ,   /* x != 0, + */
    EM_CPU_R_COUNT
} em_cpu_rop;

/* The reduced dims of an input and the output shape. */
typedef struct {
    bool red[EM_MAX_DIMS];        /* dim d of the input is reduced */
    int ond;                      /* output dims */
    int64_t osz[EM_MAX_DIMS];     /* output sizes */
    int64_t count;                /* elements folded into each output */
} em_cpu_rshape;

/* Wraps dim (0-based; n <= 0, or a 0-dim input: every dim) and fills rs.
 * Errors (a dim out of range, a dim listed twice) name the op. */
EM_HIDDEN em_status em_cpu_reduce_dims(const em_tensor *self, em_intlist dim, bool keepdim, const char *name,
                                       em_cpu_rshape *rs);
/* PyTorch's refusal of max-like folds over nothing: an empty input without
 * a dim (all), or a reduced dim of size 0. */
EM_HIDDEN em_status em_cpu_reduce_nonempty(const em_tensor *self, const em_cpu_rshape *rs, bool all,
                                           const char *name);

typedef struct {
    em_cpu_rop op;
    const em_tensor *src;         /* contiguous, dtype float32/float64/int64/bool */
    const em_cpu_rshape *rs;      /* from em_cpu_reduce_dims on src's shape */
    const double *mus;            /* EM_CPU_R_SQDEV: one mean per output */
    double p;                     /* EM_CPU_R_PSUM: the exponent */
    const char *name;             /* the op, for errors */
} em_cpu_rplan_in;

/* Folds in->src into acc, a contiguous tensor of the output's shape (any
 * keepdim) of float64 (src floating) or int64 (src int64 or bool): one
 * accumulator per output, the identity where nothing is folded. Same bits
 * on any number of threads. Stops at an interrupt and then returns
 * EM_EINTERRUPT with "name: interrupted" set, acc partly unwritten (Note
 * [Interrupts in kernels], way (b)). */
EM_HIDDEN em_status em_cpu_reduce_run(const em_cpu_rplan_in *in, em_tensor *acc);

/* Folds n contiguous elements of dtype S (see em_cpu_reduce_run) into *res
 * (a double or an int64_t): the vectorised run loop, for callers that
 * drive their own loop (arg-reductions). */
EM_HIDDEN void em_cpu_reduce_fold_run(em_cpu_rop op, em_dtype S, const void *x, int64_t n, void *res);

#endif
