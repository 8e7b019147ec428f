/* pool_unpool.c -- max_unpool's kernel (schema/ops/pool.yaml): each input
 * value written at its 1-based plane position (Note [Pooling indices]) in
 * a zeroed output plane. The F spellings (max_unpool1d/2d/3d, which work
 * out the output size) are composites in composite_pool.c.
 */
#include <stdatomic.h>
#include <string.h>

#include "kernels/cpu/em_cpu.h"

typedef struct {
    int64_t in_numel, out_numel;
    size_t es;            /* element size in bytes */
    const char *x;        /* contiguous input */
    const int64_t *idx;   /* contiguous 1-based indices */
    char *out;            /* zeroed contiguous output */
    _Atomic bool any_bad;
    _Atomic int64_t bad;
} unpool_ctx;

/* One plane per iteration; within a plane in input order, so a repeated
 * index keeps the last value (PyTorch's serial order). Index 0 (a window
 * over no input, pool_max.c) writes nothing. */
static void unpool_planes(int64_t begin, int64_t end, void *vctx) {
    unpool_ctx *c = vctx;
    for (int64_t pl = begin; pl < end; pl++) {
        const char *x = c->x + pl * c->in_numel * (int64_t)c->es;
        const int64_t *ix = c->idx + pl * c->in_numel;
        char *o = c->out + pl * c->out_numel * (int64_t)c->es;
        for (int64_t j = 0; j < c->in_numel; j++) {
            int64_t k = ix[j];
            if (k == 0) continue;
            if (k < 1 || k > c->out_numel) {
                bool no = false;
                if (atomic_compare_exchange_strong(&c->any_bad, &no, true)) atomic_store(&c->bad, k);
                return;
            }
            memcpy(o + (k - 1) * (int64_t)c->es, x + j * (int64_t)c->es, c->es);
        }
    }
}

em_tensor *em_cpu_max_unpool(em_keyset ks, em_tensor *self, em_tensor *indices, em_intlist output_size) {
    (void)ks;
    const char *op = "max_unpool";
    int n = output_size.n;
    if (n < 1 || n > 3) {
        em_set_error(EM_EVALUE, "%s: output_size must have 1 to 3 values (the spatial sizes), got %d", op, n);
        return NULL;
    }
    if (self->ndim != n + 1 && self->ndim != n + 2) {
        char s[EM_SHAPE_STR_MAX];
        em_set_error(EM_ESHAPE, "%s: argument 'self' must have %d or %d dims for %d spatial dims, got shape %s", op,
                     n + 1, n + 2, n, em_shape_str(self->ndim, self->sizes, s, sizeof s));
        return NULL;
    }
    if (indices->dtype != EM_INT64) {
        em_set_error(EM_ETYPE, "%s: argument 'indices' must be int64, got %s", op, em_dtype_name(indices->dtype));
        return NULL;
    }
    if (indices->ndim != self->ndim ||
        memcmp(indices->sizes, self->sizes, sizeof(int64_t) * (size_t)self->ndim) != 0) {
        char a[EM_SHAPE_STR_MAX], b[EM_SHAPE_STR_MAX];
        em_set_error(EM_ESHAPE, "%s: self %s and indices %s must have one shape", op,
                     em_shape_str(self->ndim, self->sizes, a, sizeof a),
                     em_shape_str(indices->ndim, indices->sizes, b, sizeof b));
        return NULL;
    }
    int64_t osz[EM_MAX_DIMS], out_numel = 1, in_numel = 1, planes = 1;
    memcpy(osz, self->sizes, sizeof(int64_t) * (size_t)self->ndim);
    for (int i = 0; i < n; i++) {
        if (output_size.data[i] < 0) {
            em_set_error(EM_EVALUE, "%s: output_size must be >= 0, got %lld", op, (long long)output_size.data[i]);
            return NULL;
        }
        osz[self->ndim - n + i] = output_size.data[i];
        out_numel *= output_size.data[i];
        in_numel *= self->sizes[self->ndim - n + i];
    }
    for (int d = 0; d < self->ndim - n; d++) planes *= self->sizes[d];
    em_tensor *out = em_cpu_zeros(EM_KS(EM_KEY_CPU), (em_intlist){ osz, self->ndim }, self->dtype, self->device);
    em_tensor *x = out ? em_cpu_contiguous(EM_KS(EM_KEY_CPU), self) : NULL;
    em_tensor *ix = x ? em_cpu_contiguous(EM_KS(EM_KEY_CPU), indices) : NULL;
    if (!ix) {
        em_tensor_release(out);
        em_tensor_release(x);
        return NULL;
    }
    if (self->numel > 0) {
        unpool_ctx c = { in_numel, out_numel, em_dtype_size(self->dtype), (const char *)em_tensor_data(x),
                         (const int64_t *)em_tensor_data(ix), (char *)em_tensor_data(out), false, 0 };
        int64_t work = in_numel ? in_numel : 1;
        em_cpu_parallel_for_stoppable(planes, work >= EM_CPU_GRAIN ? 1 : EM_CPU_GRAIN / work, unpool_planes, &c);
        if (em_cpu_interrupted(op)) { /* Note [Interrupts in kernels], way (b) */
            em_tensor_release(out);
            out = NULL;
        } else if (atomic_load(&c.any_bad)) {
            em_set_error(EM_EINDEX, "%s: index %lld in 'indices' is out of range 1..%lld (the output plane)", op,
                         (long long)atomic_load(&c.bad), (long long)out_numel);
            em_tensor_release(out);
            out = NULL;
        }
    }
    em_tensor_release(x);
    em_tensor_release(ix);
    return out;
}
