/* iter.c -- the tensor iterator: broadcasting, casting, coalescing, running.
 * See Note [Tensor iterator] in em_cpu.h.
 */
#include "kernels/cpu/em_cpu.h"

#include <string.h>

/* ---- building ---- */

/* Byte strides of t over the broadcast shape (ndim dims, outermost first),
 * written innermost first into it->strides[.][k]. */
static void set_strides(em_cpu_iter *it, int k, int ndim, const int64_t *shape,
                        int tndim, const int64_t *tsizes, const int64_t *tstrides, size_t esize) {
    for (int d = 0; d < ndim; d++) {
        int td = d - (ndim - tndim);  /* t's dim aligned to the right */
        int64_t st = 0;
        /* wrapping product: it can only overflow for an empty tensor (a
         * {0, 2^62} shape's strides), whose strides are never used */
        if (td >= 0 && tsizes[td] != 1) st = (int64_t)((uint64_t)tstrides[td] * (uint64_t)esize);
        (void)shape;
        it->strides[ndim - 1 - d][k] = st;
    }
}

/* Merge adjacent dims that are contiguous for every operand, drop size-1
 * dims. Dims are innermost first. */
static void coalesce(em_cpu_iter *it) {
    int nt = it->ntensors, out = 0;
    if (it->numel == 0) { /* nothing runs: one empty dim (an empty tensor's strides may be huge) */
        it->ndim = 1;
        it->shape[0] = 0;
        for (int k = 0; k < nt; k++) it->strides[0][k] = 0;
        return;
    }
    for (int d = 0; d < it->ndim; d++) {
        if (it->shape[d] == 1) continue;
        if (out > 0) {
            bool can = true;
            for (int k = 0; k < nt; k++)
                if (it->strides[d][k] != it->strides[out - 1][k] * it->shape[out - 1]) { can = false; break; }
            if (can) { it->shape[out - 1] *= it->shape[d]; continue; }
        }
        it->shape[out] = it->shape[d];
        for (int k = 0; k < nt; k++) it->strides[out][k] = it->strides[d][k];
        out++;
    }
    it->ndim = out;
}

/* The device a new output lives on: that of the operands. A wrapped
 * number (a 0-dim tensor made from a Lua/C number, always on the cpu)
 * does not decide it, as in PyTorch where a cpu scalar may join tensors of
 * any device. */
static em_device operand_device(int nin, em_tensor *const *in) {
    for (int i = 0; i < nin; i++)
        if (!in[i]->wrapped_number) return in[i]->device;
    return nin > 0 ? in[0]->device : em_cpu_device();
}

/* The 1-element path of em_cpu_iter_build (see the Note in em_cpu.h):
 * every input has one element and out is NULL or has one element and at
 * least as many dims as every input. The iterator gets ndim 0 (every
 * operand a scalar); inputs of another dtype than compute are cast into
 * it->scalar. A new output has the most dims of the inputs, all of size
 * 1. Returns the output (a new reference) or NULL with the error set. */
static em_tensor *build_one(em_cpu_iter *it, em_tensor *out, em_dtype out_dtype, int nin,
                            em_tensor *const *in, em_dtype compute, int ndim) {
    static const int64_t ones[EM_MAX_DIMS] = { 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1 };
    if (out) em_tensor_retain(out);
    else if (!(out = em_tensor_new(ndim, ones, out_dtype, operand_device(nin, in)))) return NULL;
    it->ndim = 0;
    it->numel = 1;
    it->data[0] = em_tensor_data(out);
    for (int i = 0; i < nin; i++) {
        const em_tensor *t = in[i];
        int k = i + 1;
        it->data[k] = em_tensor_data(t);
        if (compute != EM_DTYPE_NONE && t->dtype != compute) {
            int64_t st[2] = { 0, 0 };
            char *d2[2] = { it->scalar[k], it->data[k] };
            em_cpu_cast_loop(compute, t->dtype)(d2, st, 1, NULL);
            it->data[k] = it->scalar[k];
        }
    }
    return out;
}

em_tensor *em_cpu_iter_build(em_cpu_iter *it, em_tensor *out, em_dtype out_dtype,
                             int nin, em_tensor *const *in, em_dtype compute,
                             const char *op) {
    int64_t shape[EM_MAX_DIMS];
    int ndim = 0;
    it->ntensors = nin + 1;
    for (int k = 0; k < EM_CPU_ITER_MAX; k++) it->tmp[k] = NULL;
    /* the 1-element path: every operand has one element (so every size is
     * 1 and broadcasting cannot fail but for an output of too few dims) */
    {
        bool one = !out || out->numel == 1;
        for (int i = 0; one && i < nin; i++) {
            one = in[i]->numel == 1;
            if (in[i]->ndim > ndim) ndim = in[i]->ndim;
        }
        if (one && (!out || out->ndim >= ndim)) return build_one(it, out, out_dtype, nin, in, compute, ndim);
        ndim = 0;
    }
    /* broadcast the inputs */
    for (int i = 0; i < nin; i++) {
        if (i == 0) {
            ndim = in[0]->ndim;
            memcpy(shape, in[0]->sizes, sizeof(int64_t) * (size_t)ndim);
        } else {
            ndim = em_broadcast_shapes(ndim, shape, in[i]->ndim, in[i]->sizes, shape, op);
            if (ndim < 0) return NULL;
        }
    }
    if (out) {
        /* the output's shape must be the broadcast shape */
        int64_t tmp[EM_MAX_DIMS];
        int n2 = em_broadcast_shapes(out->ndim, out->sizes, ndim, shape, tmp, op);
        bool ok = n2 == out->ndim;
        for (int d = 0; ok && d < n2; d++) ok = tmp[d] == out->sizes[d];
        if (!ok) {
            char b1[EM_SHAPE_STR_MAX], b2[EM_SHAPE_STR_MAX];
            em_clear_error();
            em_set_error(EM_ESHAPE, "%s: output with shape %s doesn't match the broadcast shape %s", op,
                         em_shape_str(out->ndim, out->sizes, b1, sizeof b1),
                         em_shape_str(ndim, shape, b2, sizeof b2));
            return NULL;
        }
        ndim = out->ndim;
        memcpy(shape, out->sizes, sizeof(int64_t) * (size_t)ndim);
        em_tensor_retain(out);
    } else {
        out = em_tensor_new(ndim, shape, out_dtype, operand_device(nin, in));
        if (!out) return NULL;
    }
    /* operands */
    it->ndim = ndim;
    it->numel = out->numel;
    for (int d = 0; d < ndim; d++) it->shape[ndim - 1 - d] = shape[d];
    it->data[0] = em_tensor_data(out);
    set_strides(it, 0, ndim, shape, out->ndim, out->sizes, out->strides, em_dtype_size(out->dtype));
    for (int i = 0; i < nin; i++) {
        const em_tensor *t = in[i];
        int k = i + 1;
        if (compute != EM_DTYPE_NONE && t->dtype != compute) {
            if (t->numel == 1) {
                char *dst = it->scalar[k], *src = em_tensor_data(t);
                int64_t st[2] = {0, 0};
                char *d2[2] = {dst, src};
                em_cpu_cast_loop(compute, t->dtype)(d2, st, 1, NULL);
                it->data[k] = dst;
                for (int d = 0; d < ndim; d++) it->strides[d][k] = 0;
                continue;
            }
            em_tensor *c = em_cpu_to_dtype(t, compute, op);
            if (!c) { em_tensor_release(out); em_cpu_iter_done(it); return NULL; }
            it->tmp[k] = c;
            t = c;
        }
        it->data[k] = em_tensor_data(t);
        set_strides(it, k, ndim, shape, t->ndim, t->sizes, t->strides, em_dtype_size(t->dtype));
    }
    coalesce(it);
    return out;
}

void em_cpu_iter_done(em_cpu_iter *it) {
    for (int k = 0; k < EM_CPU_ITER_MAX; k++) {
        if (it->tmp[k]) { em_tensor_release(it->tmp[k]); it->tmp[k] = NULL; }
    }
}

/* ---- running ---- */

typedef struct {
    const em_cpu_iter *it;
    em_cpu_loop fn;
    void *ctx;
} run_ctx;

/* Runs the loop over linear indices [begin, end) of the iteration space. */
static void run_range(int64_t begin, int64_t end, void *arg) {
    const run_ctx *rc = arg;
    const em_cpu_iter *it = rc->it;
    int nt = it->ntensors;
    char *ptr[EM_CPU_ITER_MAX];
    int64_t inner[EM_CPU_ITER_MAX];
    if (it->ndim <= 1) {
        for (int k = 0; k < nt; k++) {
            inner[k] = it->ndim == 1 ? it->strides[0][k] : 0;
            ptr[k] = it->data[k] + begin * inner[k];
        }
        rc->fn(ptr, inner, end - begin, rc->ctx);
        return;
    }
    /* decompose begin into a multi-index (innermost first) */
    int64_t idx[EM_MAX_DIMS];
    int64_t rem = begin;
    for (int d = 0; d < it->ndim; d++) { idx[d] = rem % it->shape[d]; rem /= it->shape[d]; }
    for (int k = 0; k < nt; k++) {
        inner[k] = it->strides[0][k];
        int64_t off = 0;
        for (int d = 0; d < it->ndim; d++) off += idx[d] * it->strides[d][k];
        ptr[k] = it->data[k] + off;
    }
    int64_t pos = begin;
    while (pos < end) {
        int64_t n = it->shape[0] - idx[0];
        if (n > end - pos) n = end - pos;
        rc->fn(ptr, inner, n, rc->ctx);
        pos += n;
        if (pos >= end) break;
        /* the row is done: rewind to its start, then step the outer dims */
        for (int k = 0; k < nt; k++) ptr[k] -= idx[0] * inner[k];
        idx[0] = 0;
        for (int d = 1; d < it->ndim; d++) {
            idx[d]++;
            for (int k = 0; k < nt; k++) ptr[k] += it->strides[d][k];
            if (idx[d] < it->shape[d]) break;
            for (int k = 0; k < nt; k++) ptr[k] -= it->shape[d] * it->strides[d][k];
            idx[d] = 0;
        }
    }
}

void em_cpu_iter_run(em_cpu_iter *it, em_cpu_loop fn, void *ctx, int64_t grain) {
    if (it->numel == 0) return;
    if (it->ndim == 0) { /* one element (the 1-element path, or every size 1) */
        static const int64_t zero[EM_CPU_ITER_MAX] = { 0 };
        _Static_assert(EM_CPU_ITER_MAX == 4, "one initialiser per operand");
        char *ptr[EM_CPU_ITER_MAX] = { it->data[0], it->data[1], it->data[2], it->data[3] };
        fn(ptr, zero, 1, ctx);
        return;
    }
    run_ctx rc = { it, fn, ctx };
    if (it->numel < 2 * grain) run_range(0, it->numel, &rc);
    else em_cpu_parallel_for(it->numel, grain, run_range, &rc);
}

void em_cpu_iter_run_stoppable(em_cpu_iter *it, em_cpu_loop fn, void *ctx, int64_t grain) {
    if (it->numel == 0) return;
    run_ctx rc = { it, fn, ctx };
    em_cpu_parallel_for_stoppable(it->numel, grain, run_range, &rc);
}
