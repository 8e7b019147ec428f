/* spatial_pad.c -- CPU kernels of F.pad (schema/ops/spatial.yaml):
 * constant_pad_nd (any dims, negative pads crop), pad_mode (reflect,
 * replicate) and pad_circular over the last 1-3 dims, and their backwards.
 *
 * Note [Pad index maps]
 * A reflect/replicate/circular pad is an index map per padded dim: output
 * position o of a dim with input size W and pads (l, r) reads input
 * position map(o), with j = o - l:
 *   reflect:   j < 0 -> -j, j >= W -> 2(W-1) - j   (needs l < W, r < W)
 *   replicate: j clamped to [0, W-1]
 *   circular:  the input first cropped by the negative pads, to the core
 *              [c0, c0 + C) with c0 = max(-l, 0), C = W + min(l,0) + min(r,0);
 *              then c0 + ((o - max(l,0)) mod C)  (needs l, r <= C)
 * (circular wraps around the cropped core, as PyTorch 1.13's _pad_circular
 * copies do). The forward copies elements through the map (any dtype, by
 * element size); the backward adds each output gradient into the input
 * position it came from, one plane (the leading dims) per task, so the sums
 * need no atomics and do not depend on the thread count.
 */
#include <stdlib.h>
#include <string.h>

#include "kernels/cpu/em_cpu.h"

/* ---- constant_pad_nd ---- */

/* Checks pad (pairs, last dim first) against self; fills out_sizes. As in
 * PyTorch 1.13, pads that are all <= 0 may crop a dim to size 0; once any
 * pad is positive every padded dim must keep a size > 0. Errors name op
 * and the offending pair. */
static em_status constant_geometry(const em_tensor *self, em_intlist pad, int64_t *out_sizes, const char *op) {
    if (pad.n % 2 != 0) {
        return em_set_error(EM_EVALUE, "%s: argument 'pad' must have an even length (pairs, last dim first), got %d entries",
                            op, pad.n);
    }
    if (pad.n / 2 > self->ndim) {
        char b[128];
        return em_set_error(EM_EVALUE, "%s: argument 'pad' has %d entries (%d dims) but input %s has %d dims",
                            op, pad.n, pad.n / 2, em_shape_str(self->ndim, self->sizes, b, sizeof b), self->ndim);
    }
    for (int d = 0; d < self->ndim; d++) out_sizes[d] = self->sizes[d];
    bool grows = false;
    for (int i = 0; i < pad.n; i++) grows = grows || pad.data[i] > 0;
    for (int k = 0; k < pad.n / 2; k++) {
        int d = self->ndim - 1 - k;
        int64_t l = pad.data[2 * k], r = pad.data[2 * k + 1];
        int64_t s = self->sizes[d] + l + r;
        if (s < 0 || self->sizes[d] + l < 0 || self->sizes[d] + r < 0) {
            char b[128];
            return em_set_error(EM_EVALUE, "%s: padding (%lld, %lld) of dim %d of input %s crops more than its size %lld",
                                op, (long long)l, (long long)r, d + 1,
                                em_shape_str(self->ndim, self->sizes, b, sizeof b), (long long)self->sizes[d]);
        }
        if (grows && s == 0) {
            char b[128];
            return em_set_error(EM_EVALUE, "%s: padding (%lld, %lld) leaves dim %d of input %s empty while other pads "
                                "are positive (PyTorch allows an empty dim only when every pad is <= 0)",
                                op, (long long)l, (long long)r, d + 1, em_shape_str(self->ndim, self->sizes, b, sizeof b));
        }
        out_sizes[d] = s;
    }
    return EM_OK;
}

/* The region of t (a view) that the other side's kept part maps to: per
 * padded dim, narrow by max(pad, 0) on each side of t when t is the output
 * (positive pads), or by max(-pad, 0) when t is the input (negative pads). */
static em_tensor *inner_region(const em_tensor *t, em_intlist pad, bool output) {
    em_tensor *v = em_core_alias_view(t);
    for (int k = 0; k < pad.n / 2 && v; k++) {
        int d = t->ndim - 1 - k;
        int64_t l = pad.data[2 * k], r = pad.data[2 * k + 1];
        int64_t a = output ? (l > 0 ? l : 0) : (l < 0 ? -l : 0);
        int64_t b = output ? (r > 0 ? r : 0) : (r < 0 ? -r : 0);
        em_tensor *n = em_core_narrow(v, d, a, v->sizes[d] - a - b);
        em_tensor_release(v);
        v = n;
    }
    return v;
}

em_tensor *em_cpu_constant_pad_nd(em_keyset ks, em_tensor *self, em_intlist pad, em_scalar value) {
    (void)ks;
    int64_t sizes[EM_MAX_DIMS];
    if (constant_geometry(self, pad, sizes, "constant_pad_nd") != EM_OK) return NULL;
    em_tensor *out = em_tensor_new(self->ndim, sizes, self->dtype, em_cpu_device());
    if (!out) return NULL;
    em_tensor *filled = em_cpu_fill_scalar_(out, value, "constant_pad_nd");
    if (!filled) {
        em_tensor_release(out);
        return NULL;
    }
    em_tensor_release(filled); /* out itself, retained */
    /* A dim padded to size 0, or an input with no elements: nothing to copy. */
    bool empty = self->numel == 0 || out->numel == 0;
    for (int k = 0; k < pad.n / 2 && !empty; k++) {
        int d = self->ndim - 1 - k;
        if (self->sizes[d] + (pad.data[2 * k] < 0 ? pad.data[2 * k] : 0) +
                (pad.data[2 * k + 1] < 0 ? pad.data[2 * k + 1] : 0) <= 0)
            empty = true;
    }
    if (empty) return out;
    em_tensor *dst = inner_region(out, pad, true), *src = dst ? inner_region(self, pad, false) : NULL;
    em_status st = dst && src ? em_cpu_copy_into(dst, src, "constant_pad_nd") : EM_EINTERNAL;
    em_tensor_release(dst);
    em_tensor_release(src);
    if (st != EM_OK) {
        em_tensor_release(out);
        return NULL;
    }
    return out;
}

/* ---- pad_mode: reflect, replicate, circular ---- */

enum { PAD_REFLECT, PAD_REPLICATE, PAD_CIRCULAR };

static int mode_of(const char *mode) { return strcmp(mode, "reflect") == 0 ? PAD_REFLECT : PAD_REPLICATE; }

/* The geometry of a mode pad: k padded dims (the last ones), checked as
 * PyTorch 1.13 does; out_sizes gets the result's sizes. in_sizes/ndim
 * describe the input (for the backward, its input_sizes). */
static em_status mode_geometry(int ndim, const int64_t *in_sizes, em_intlist pad, int mode, int64_t *out_sizes,
                               const char *op) {
    char b[128];
    int k = pad.n / 2;
    if (pad.n % 2 != 0 || k < 1 || k > 3) {
        return em_set_error(EM_EVALUE, "%s: argument 'pad' must have 2, 4 or 6 entries for mode '%s', got %d",
                            op, mode == PAD_REFLECT ? "reflect" : mode == PAD_REPLICATE ? "replicate" : "circular", pad.n);
    }
    bool ok = mode == PAD_CIRCULAR ? ndim == k + 2 : (ndim == k + 1 || ndim == k + 2);
    if (!ok) {
        if (mode == PAD_CIRCULAR)
            return em_set_error(EM_ESHAPE, "%s: circular padding of %d dim%s needs a %d-dim input (batch, channels, "
                                "then the padded dims), got input %s", op, k, k == 1 ? "" : "s", k + 2,
                                em_shape_str(ndim, in_sizes, b, sizeof b));
        return em_set_error(EM_ESHAPE, "%s: %s padding of %d dim%s needs a %d-dim or %d-dim (batched) input, got input %s",
                            op, mode == PAD_REFLECT ? "reflect" : "replicate", k, k == 1 ? "" : "s", k + 1, k + 2,
                            em_shape_str(ndim, in_sizes, b, sizeof b));
    }
    for (int d = 0; d < ndim; d++) out_sizes[d] = in_sizes[d];
    if (mode != PAD_CIRCULAR) {
        /* every dim but the batch dim must be non-empty; reflect over 1 or 2
         * dims also lets an unbatched input's first dim be empty (PyTorch's checks) */
        int first = (mode == PAD_REFLECT && k <= 2) || ndim == k + 2 ? 1 : 0;
        for (int d = first; d < ndim; d++) {
            if (in_sizes[d] == 0)
                return em_set_error(EM_ESHAPE, "%s: %s padding needs non-empty dims (except the batch dim), got input %s",
                                    op, mode == PAD_REFLECT ? "reflect" : "replicate",
                                    em_shape_str(ndim, in_sizes, b, sizeof b));
        }
    }
    for (int i = 0; i < k; i++) {
        int d = ndim - 1 - i;
        int64_t w = in_sizes[d], l = pad.data[2 * i], r = pad.data[2 * i + 1];
        if (mode == PAD_REFLECT && (l >= w || r >= w))
            return em_set_error(EM_EVALUE, "%s: reflect padding (%lld, %lld) of dim %d must be less than its size in input %s",
                                op, (long long)l, (long long)r, d + 1, em_shape_str(ndim, in_sizes, b, sizeof b));
        int64_t s = w + l + r;
        if (mode == PAD_CIRCULAR) {
            int64_t core = w + (l < 0 ? l : 0) + (r < 0 ? r : 0);
            if (s < 0 || core < 0)
                return em_set_error(EM_EVALUE, "%s: padding (%lld, %lld) of dim %d crops more than its size in input %s",
                                    op, (long long)l, (long long)r, d + 1, em_shape_str(ndim, in_sizes, b, sizeof b));
            if (l > core || r > core)
                return em_set_error(EM_EVALUE, "%s: circular padding (%lld, %lld) of dim %d wraps around more than once "
                                    "(the dim keeps %lld of its elements) in input %s", op, (long long)l, (long long)r,
                                    d + 1, (long long)core, em_shape_str(ndim, in_sizes, b, sizeof b));
        } else if (s < 0) {
            return em_set_error(EM_EVALUE, "%s: padding (%lld, %lld) leaves dim %d of input %s with size %lld",
                                op, (long long)l, (long long)r, d + 1, em_shape_str(ndim, in_sizes, b, sizeof b),
                                (long long)s);
        }
        out_sizes[d] = s;
    }
    if (mode != PAD_CIRCULAR) {
        /* PyTorch's "input is too small": every padded dim of the output empty */
        bool any = false;
        for (int i = 0; i < k; i++) any = any || out_sizes[ndim - 1 - i] >= 1;
        if (!any) {
            char pb[128], ob[128];
            return em_set_error(EM_EVALUE, "%s: padding %s leaves every padded dim of input %s empty (output %s)", op,
                                em_shape_str(pad.n, pad.data, pb, sizeof pb), em_shape_str(ndim, in_sizes, b, sizeof b),
                                em_shape_str(ndim, out_sizes, ob, sizeof ob));
        }
    }
    return EM_OK;
}

/* map[o] for o < out: the input position output o reads (Note [Pad index maps]). */
static void fill_map(int64_t *map, int64_t out, int64_t w, int64_t l, int64_t r, int mode) {
    if (mode == PAD_CIRCULAR) {
        int64_t c0 = l < 0 ? -l : 0, core = w + (l < 0 ? l : 0) + (r < 0 ? r : 0), lp = l > 0 ? l : 0;
        for (int64_t o = 0; o < out; o++) {
            int64_t j = (o - lp) % core;
            map[o] = c0 + (j < 0 ? j + core : j);
        }
        return;
    }
    for (int64_t o = 0; o < out; o++) {
        int64_t j = o - l;
        if (mode == PAD_REFLECT) map[o] = j < 0 ? -j : j >= w ? 2 * (w - 1) - j : j;
        else map[o] = j < 0 ? 0 : j >= w ? w - 1 : j;
    }
}

/* The padded dims, always three (leading size-1 dims added when fewer):
 * sizes of input and output and the maps (one block: maps[0..2]). The
 * planes are the product of the unpadded leading dims. */
typedef struct {
    int64_t planes;
    int64_t in[3], out[3];
    int64_t *map[3];
    void *block;
} pad_plan;

static em_status plan_make(pad_plan *p, int ndim, const int64_t *in_sizes, const int64_t *out_sizes, em_intlist pad,
                           int mode, const char *op) {
    int k = pad.n / 2;
    p->planes = 1;
    for (int d = 0; d < ndim - k; d++) p->planes *= in_sizes[d];
    int64_t total = 0;
    for (int i = 0; i < 3; i++) {
        int d = ndim - 3 + i; /* dim of slot i, < ndim - k: a size-1 slot */
        bool padded = d >= ndim - k;
        p->in[i] = padded ? in_sizes[d] : 1;
        p->out[i] = padded ? out_sizes[d] : 1;
        total += p->out[i];
    }
    p->block = malloc((size_t)total * sizeof(int64_t) + 1);
    if (!p->block) return em_set_error(EM_ENOMEM, "%s: out of memory for the index maps", op);
    int64_t *m = p->block;
    for (int i = 0; i < 3; i++) {
        p->map[i] = m;
        int d = ndim - 3 + i;
        if (d >= ndim - k) {
            int pi = ndim - 1 - d; /* pair index: last dim first */
            fill_map(m, p->out[i], p->in[i], pad.data[2 * pi], pad.data[2 * pi + 1], mode);
        } else {
            m[0] = 0;
        }
        m += p->out[i];
    }
    return EM_OK;
}

typedef struct {
    const pad_plan *p;
    const char *src; /* contiguous input (forward) or grad_output (backward) */
    char *dst;       /* contiguous output (forward) or grad_input (backward) */
    size_t es;
    em_dtype dt;     /* backward: the accumulation dtype (float32/float64) */
} pad_ctx;

#define PAD_FWD_PLANE(T)                                                          \
    for (int64_t a = 0; a < p->out[0]; a++)                                       \
        for (int64_t b = 0; b < p->out[1]; b++) {                                 \
            const T *s = (const T *)src + (p->map[0][a] * p->in[1] + p->map[1][b]) * p->in[2]; \
            T *o = (T *)dst + (a * p->out[1] + b) * p->out[2];                    \
            for (int64_t c = 0; c < p->out[2]; c++) o[c] = s[p->map[2][c]];       \
        }

static void pad_fwd_planes(int64_t begin, int64_t end, void *vctx) {
    const pad_ctx *c = vctx;
    const pad_plan *p = c->p;
    int64_t in_plane = p->in[0] * p->in[1] * p->in[2], out_plane = p->out[0] * p->out[1] * p->out[2];
    for (int64_t pl = begin; pl < end; pl++) {
        const char *src = c->src + pl * in_plane * (int64_t)c->es;
        char *dst = c->dst + pl * out_plane * (int64_t)c->es;
        switch (c->es) {
        case 1: PAD_FWD_PLANE(uint8_t) break;
        case 2: PAD_FWD_PLANE(uint16_t) break;
        case 4: PAD_FWD_PLANE(uint32_t) break;
        default: PAD_FWD_PLANE(uint64_t) break;
        }
    }
}

#define PAD_BWD_PLANE(T)                                                          \
    for (int64_t a = 0; a < p->out[0]; a++)                                       \
        for (int64_t b = 0; b < p->out[1]; b++) {                                 \
            T *s = (T *)dst + (p->map[0][a] * p->in[1] + p->map[1][b]) * p->in[2]; \
            const T *o = (const T *)src + (a * p->out[1] + b) * p->out[2];        \
            for (int64_t c = 0; c < p->out[2]; c++) s[p->map[2][c]] += o[c];      \
        }

static void pad_bwd_planes(int64_t begin, int64_t end, void *vctx) {
    const pad_ctx *c = vctx;
    const pad_plan *p = c->p;
    int64_t in_plane = p->in[0] * p->in[1] * p->in[2], out_plane = p->out[0] * p->out[1] * p->out[2];
    for (int64_t pl = begin; pl < end; pl++) {
        const char *src = c->src + pl * out_plane * (int64_t)c->es;
        char *dst = c->dst + pl * in_plane * (int64_t)c->es;
        if (c->dt == EM_FLOAT64) {
            PAD_BWD_PLANE(double)
        } else {
            PAD_BWD_PLANE(float)
        }
    }
}

static int64_t plane_grain(const pad_plan *p) {
    int64_t per = p->out[0] * p->out[1] * p->out[2];
    return per >= EM_CPU_GRAIN ? 1 : EM_CPU_GRAIN / (per > 0 ? per : 1);
}

/* The forward of every mode (md), for op. */
static em_tensor *pad_forward(em_tensor *self, em_intlist pad, int md, const char *op) {
    if (md != PAD_CIRCULAR && self->dtype != EM_FLOAT32 && self->dtype != EM_FLOAT64) {
        em_set_error(EM_ETYPE, "%s: %s padding is not supported for dtype %s (float32 and float64 are, as in PyTorch)",
                     op, md == PAD_REFLECT ? "reflect" : "replicate", em_dtype_name(self->dtype));
        return NULL;
    }
    int64_t sizes[EM_MAX_DIMS];
    if (mode_geometry(self->ndim, self->sizes, pad, md, sizes, op) != EM_OK) return NULL;
    em_tensor *out = em_tensor_new(self->ndim, sizes, self->dtype, em_cpu_device());
    if (!out || out->numel == 0) return out;
    pad_plan p;
    if (plan_make(&p, self->ndim, self->sizes, sizes, pad, md, op) != EM_OK) {
        em_tensor_release(out);
        return NULL;
    }
    em_tensor *src = self->is_contiguous ? em_tensor_retain(self) : em_cpu_to_dtype(self, self->dtype, op);
    if (!src) {
        free(p.block);
        em_tensor_release(out);
        return NULL;
    }
    pad_ctx c = { &p, em_tensor_data(src), em_tensor_data(out), em_dtype_size(self->dtype), self->dtype };
    em_cpu_parallel_for_stoppable(p.planes, plane_grain(&p), pad_fwd_planes, &c);
    em_tensor_release(src);
    free(p.block);
    if (em_cpu_interrupted(op)) { /* Note [Interrupts in kernels], way (b) */
        em_tensor_release(out);
        return NULL;
    }
    return out;
}

/* The backward of every mode (md), for op: zeros of input_sizes with
 * grad_output summed in (Note [Pad index maps]). */
static em_tensor *pad_backward(em_tensor *grad_output, em_intlist input_sizes, em_intlist pad, int md, const char *op) {
    if (!em_cpu_is_float(grad_output->dtype)) {
        em_set_error(EM_ETYPE, "%s: grad_output must be a float tensor, got %s", op, em_dtype_name(grad_output->dtype));
        return NULL;
    }
    if (input_sizes.n < 0 || input_sizes.n > EM_MAX_DIMS) {
        em_set_error(EM_EVALUE, "%s: input_sizes has %d entries (at most %d)", op, input_sizes.n, EM_MAX_DIMS);
        return NULL;
    }
    for (int d = 0; d < input_sizes.n; d++) {
        if (input_sizes.data[d] < 0) {
            em_set_error(EM_EVALUE, "%s: input_sizes has a negative size %lld", op, (long long)input_sizes.data[d]);
            return NULL;
        }
    }
    int64_t sizes[EM_MAX_DIMS];
    if (mode_geometry(input_sizes.n, input_sizes.data, pad, md, sizes, op) != EM_OK) return NULL;
    if (grad_output->ndim != input_sizes.n || memcmp(grad_output->sizes, sizes, sizeof(int64_t) * (size_t)input_sizes.n)) {
        char a[128], b[128];
        em_set_error(EM_ESHAPE, "%s: grad_output has shape %s, expected the padded shape %s", op,
                     em_shape_str(grad_output->ndim, grad_output->sizes, a, sizeof a),
                     em_shape_str(input_sizes.n, sizes, b, sizeof b));
        return NULL;
    }
    em_dtype acc = grad_output->dtype == EM_FLOAT64 ? EM_FLOAT64 : EM_FLOAT32;
    em_tensor *gi = em_cpu_zeros(EM_KS(EM_KEY_CPU), input_sizes, acc, em_cpu_device());
    if (!gi || grad_output->numel == 0) goto done;
    pad_plan p;
    if (plan_make(&p, input_sizes.n, input_sizes.data, sizes, pad, md, op) != EM_OK) {
        em_tensor_release(gi);
        return NULL;
    }
    em_tensor *go = grad_output->is_contiguous && grad_output->dtype == acc
                        ? em_tensor_retain(grad_output)
                        : em_cpu_to_dtype(grad_output, acc, op);
    if (!go) {
        free(p.block);
        em_tensor_release(gi);
        return NULL;
    }
    pad_ctx c = { &p, em_tensor_data(go), em_tensor_data(gi), em_dtype_size(acc), acc };
    em_cpu_parallel_for_stoppable(p.planes, plane_grain(&p), pad_bwd_planes, &c);
    em_tensor_release(go);
    free(p.block);
    if (em_cpu_interrupted(op)) { /* Note [Interrupts in kernels], way (b) */
        em_tensor_release(gi);
        return NULL;
    }
done:
    if (gi && gi->dtype != grad_output->dtype) { /* float16/bfloat16: summed in float32 */
        em_tensor *r = em_cpu_to_dtype(gi, grad_output->dtype, op);
        em_tensor_release(gi);
        gi = r;
    }
    return gi;
}

/* ---- the kernels ---- */

em_tensor *em_cpu_pad_mode(em_keyset ks, em_tensor *self, em_intlist pad, const char *mode) {
    (void)ks;
    return pad_forward(self, pad, mode_of(mode), "pad_mode");
}

em_tensor *em_cpu_pad_mode_backward(em_keyset ks, em_tensor *grad_output, em_tensor *self, em_intlist pad,
                                    const char *mode) {
    (void)ks;
    return pad_backward(grad_output, (em_intlist){ self->sizes, self->ndim }, pad, mode_of(mode), "pad_mode_backward");
}

em_tensor *em_cpu_pad_circular(em_keyset ks, em_tensor *self, em_intlist pad) {
    (void)ks;
    return pad_forward(self, pad, PAD_CIRCULAR, "pad_circular");
}

em_tensor *em_cpu_pad_circular_backward(em_keyset ks, em_tensor *grad_output, em_intlist input_sizes, em_intlist pad) {
    (void)ks;
    return pad_backward(grad_output, input_sizes, pad, PAD_CIRCULAR, "pad_circular_backward");
}
