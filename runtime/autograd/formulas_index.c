/* formulas_index.c -- formula helpers of the index family (schema/ops/index.yaml),
 * declared in the index block of em_formulas.h. Written with the public ops
 * only, so that a backward run with create_graph is recorded (double backward).
 * Index tensors hold 1-based values (Note [Index family]), as the ops expect. */
#include <string.h>

#include "autograd/em_formulas.h"
#include "em_ops.h"

static em_intlist sizes_of(const em_input_meta *m) { return (em_intlist){ m->sizes, m->ndim }; }

/* grad reshaped to the meta's shape when only the number of dims differs
 * (a 0-dim input whose gradient came out with one element in 1 dim). */
static em_tensor *as_meta_shape(em_tensor *g, const em_input_meta *m) {
    if (!g || g->ndim == m->ndim) return g;
    em_tensor *r = em_reshape(g, sizes_of(m));
    em_tensor_release(g);
    return r;
}

em_tensor *em_ag_fn_index_select_backward(em_tensor *grad, const em_input_meta *self_meta, int64_t dim,
                                          em_tensor *index) {
    em_tensor *z = em_zeros(sizes_of(self_meta), grad->dtype, grad->device);
    if (!z) return NULL;
    em_tensor *g = grad;
    if (self_meta->ndim == 0 && grad->ndim == 0) { /* a 0-dim self: index has one element */
        int64_t one = 1;
        g = em_reshape(grad, (em_intlist){ &one, 1 });
        if (!g) { em_tensor_release(z); return NULL; }
    } else {
        em_tensor_retain(g);
    }
    em_tensor *r = em_index_add(z, dim, index, g, em_scalar_int(1));
    em_tensor_release(g);
    em_tensor_release(z);
    return r;
}

em_tensor *em_ag_fn_index_source_grad(em_tensor *grad, int64_t dim, em_tensor *index,
                                      const em_input_meta *source_meta) {
    return as_meta_shape(em_index_select(grad, dim, index), source_meta);
}

em_tensor *em_ag_fn_masked_select_backward(em_tensor *grad, const em_input_meta *self_meta, em_tensor *mask) {
    int64_t shape[EM_MAX_DIMS];
    int n = em_broadcast_shapes(self_meta->ndim, self_meta->sizes, mask->ndim, mask->sizes, shape,
                                "masked_select backward");
    if (n < 0) return NULL;
    em_tensor *z = em_zeros((em_intlist){ shape, n }, grad->dtype, grad->device);
    em_tensor *r = z ? em_masked_scatter(z, mask, grad) : NULL;
    em_tensor_release(z);
    return r; /* summed down to self's shape by the caller (em_ag_reduce_to) */
}

/* source's gradient: grad where mask is true, in order, then zeros for the
 * source elements masked_scatter did not use, in source's shape. */
em_tensor *em_ag_fn_masked_scatter_source_grad(em_tensor *grad, em_tensor *mask, const em_input_meta *source_meta) {
    em_tensor *sel = em_masked_select(grad, mask);
    if (!sel) return NULL;
    int64_t numel = 1;
    for (int i = 0; i < source_meta->ndim; i++) numel *= source_meta->sizes[i];
    em_tensor *flat = sel;
    if (sel->numel < numel) {
        int64_t rest = numel - sel->numel;
        em_tensor *z = em_zeros((em_intlist){ &rest, 1 }, grad->dtype, grad->device);
        em_tensor *parts[2] = { sel, z };
        flat = z ? em_cat((em_tensorlist){ parts, 2 }, 0) : NULL;
        em_tensor_release(z);
        em_tensor_release(sel);
        if (!flat) return NULL;
    }
    em_tensor *r = em_reshape(flat, sizes_of(source_meta));
    em_tensor_release(flat);
    return r;
}

/* src's gradient for scatter/scatter_add: grad gathered where index points
 * (index's shape), zero-padded to src's shape when src is larger. */
em_tensor *em_ag_fn_scatter_src_grad(em_tensor *grad, int64_t dim, em_tensor *index,
                                     const em_input_meta *src_meta) {
    em_tensor *g = em_gather(grad, dim, index);
    if (!g) return NULL;
    bool same = g->ndim == src_meta->ndim;
    for (int i = 0; same && i < g->ndim; i++) same = g->sizes[i] == src_meta->sizes[i];
    if (same || src_meta->ndim == 0) return as_meta_shape(g, src_meta);
    /* pad one dim at a time: narrow_backward puts g at the start of zeros */
    for (int d = 0; g && d < g->ndim; d++) {
        if (g->sizes[d] == src_meta->sizes[d]) continue;
        int64_t sizes[EM_MAX_DIMS];
        for (int k = 0; k < g->ndim; k++) sizes[k] = g->sizes[k];
        sizes[d] = src_meta->sizes[d];
        em_tensor *p = em_narrow_backward(g, (em_intlist){ sizes, g->ndim }, d, 0, g->sizes[d]);
        em_tensor_release(g);
        g = p;
    }
    return g;
}

/* take's gradient: grad added at the flat 1-based positions (negative ones
 * counted from the end) of zeros shaped like self. */
em_tensor *em_ag_fn_take_backward(em_tensor *grad, const em_input_meta *self_meta, em_tensor *index) {
    int64_t numel = 1;
    for (int i = 0; i < self_meta->ndim; i++) numel *= self_meta->sizes[i];
    int64_t minus1 = -1;
    em_tensor *zero = em_tensor_wrapped_scalar(em_scalar_int(0));
    em_tensor *wrapped = em_tensor_wrapped_scalar(em_scalar_int(numel + 1));
    em_tensor *neg = zero && wrapped ? em_lt(index, zero) : NULL;
    em_tensor *shifted = neg ? em_add(index, wrapped, em_scalar_int(1)) : NULL;
    em_tensor *pos = shifted ? em_where(neg, shifted, index) : NULL;
    em_tensor *flat_i = pos ? em_reshape(pos, (em_intlist){ &minus1, 1 }) : NULL;
    em_tensor *flat_g = flat_i ? em_reshape(grad, (em_intlist){ &minus1, 1 }) : NULL;
    em_tensor *z = flat_g ? em_zeros((em_intlist){ &numel, 1 }, grad->dtype, grad->device) : NULL;
    em_tensor *acc = z ? em_index_add(z, 0, flat_i, flat_g, em_scalar_int(1)) : NULL;
    em_tensor *r = acc ? em_reshape(acc, sizes_of(self_meta)) : NULL;
    em_tensor *tmp[] = { zero, wrapped, neg, shifted, pos, flat_i, flat_g, z, acc };
    for (size_t k = 0; k < sizeof tmp / sizeof *tmp; k++) em_tensor_release(tmp[k]);
    return r;
}

/* ---- scatter_reduce ---- */

/* t narrowed to the leading corner of shape (n dims). A new reference. */
static em_tensor *corner(em_tensor *t, int n, const int64_t *shape) {
    em_tensor *c = em_tensor_retain(t);
    for (int d = 0; c && d < n && d < t->ndim; d++) {
        if (c->sizes[d] == shape[d]) continue;
        em_tensor *x = em_narrow(c, d, 0, shape[d]);
        em_tensor_release(c);
        c = x;
    }
    return c;
}

/* Note [scatter_reduce prod]
 * reduce="prod" follows PyTorch 1.13's special case for zeros: self's
 * gradient is grad * (the product with self's zeros taken as 1) / self
 * (zeros as 1), that is the product of the other factors; src's is
 * grad * result / src where src is not 0, the product of the other factors
 * where src holds the only 0 scattered to its element, and 0 where two or
 * more zeros meet (PyTorch refuses the double backward of that case; ember
 * computes it through the same ops). sum, mean,
 * amax and amin follow PyTorch's scatter_reduce_backward: mean divides by
 * the count of values reduced into each element (self included when
 * include_self), amax/amin share the gradient evenly among the values
 * equal to the result. With include_self=false self's elements that index
 * points to get no gradient. */
static em_tensor *scatter_reduce_grad(bool want_self, em_tensor *grad, em_tensor *self, int64_t dim, em_tensor *index,
                                      em_tensor *src, const char *reduce, bool include_self, em_tensor *result) {
    em_tensor *tmp[40];
    int nt = 0;
#define KEEP(x) (tmp[nt++] = (x))
    em_tensor *r = NULL;
    em_tensor *no = KEEP(em_tensor_wrapped_scalar(em_scalar_bool(true)));
    em_tensor *zb = KEEP(em_zeros((em_intlist){ self->sizes, self->ndim }, EM_BOOL, self->device));
    em_tensor *mask = zb && no ? KEEP(em_scatter(zb, dim, index, no)) : NULL; /* self's scattered elements */
    em_tensor *zero = KEEP(em_tensor_wrapped_scalar(em_scalar_int(0)));
    if (!mask || !zero) goto done;
    if (strcmp(reduce, "sum") == 0) {
        r = want_self ? (include_self ? em_tensor_retain(grad) : em_masked_fill(grad, mask, zero))
                      : em_gather(grad, dim, index);
    } else if (strcmp(reduce, "mean") == 0) {
        em_tensor *ones_i = KEEP(em_ones((em_intlist){ index->sizes, index->ndim }, grad->dtype, grad->device));
        em_tensor *n0 = KEEP(include_self ? em_ones((em_intlist){ self->sizes, self->ndim }, grad->dtype, grad->device)
                                          : em_zeros((em_intlist){ self->sizes, self->ndim }, grad->dtype, grad->device));
        em_tensor *n = ones_i && n0 ? KEEP(em_scatter_add(n0, dim, index, ones_i)) : NULL;
        em_tensor *isz = n ? KEEP(em_eq(n, zero)) : NULL;
        em_tensor *one = KEEP(em_tensor_wrapped_scalar(em_scalar_int(1)));
        em_tensor *n1 = isz && one ? KEEP(em_masked_fill(n, isz, one)) : NULL;
        em_tensor *gd = n1 ? KEEP(em_div(grad, n1)) : NULL;
        if (gd)
            r = want_self ? (include_self ? em_tensor_retain(gd) : em_masked_fill(gd, mask, zero))
                          : em_gather(gd, dim, index);
    } else if (strcmp(reduce, "prod") == 0) { /* Note [scatter_reduce prod] */
        em_tensor *one = KEEP(em_tensor_wrapped_scalar(em_scalar_int(1)));
        em_tensor *src_c = KEEP(corner(src, index->ndim, index->sizes));
        if (!one || !src_c) goto done;
        if (want_self) {
            em_tensor *s0 = KEEP(em_eq(self, zero));
            em_tensor *ms = s0 ? KEEP(em_masked_fill(self, s0, one)) : NULL;
            em_tensor *msr = ms ? KEEP(em_scatter_reduce_two(ms, dim, index, src_c, "prod", include_self)) : NULL;
            em_tensor *g = msr ? KEEP(em_mul(grad, msr)) : NULL;
            em_tensor *gs = g ? KEEP(em_div(g, ms)) : NULL;
            if (gs) r = include_self ? em_tensor_retain(gs) : em_masked_fill(gs, mask, zero);
        } else {
            em_tensor *z = KEEP(em_eq(src_c, zero));
            em_tensor *zf = z ? KEEP(em_to(z, self->dtype)) : NULL;
            em_tensor *z0 = KEEP(em_zeros((em_intlist){ self->sizes, self->ndim }, self->dtype, self->device));
            em_tensor *cnt = zf && z0 ? KEEP(em_scatter_add(z0, dim, index, zf)) : NULL;
            em_tensor *nz = cnt ? KEEP(em_gather(cnt, dim, index)) : NULL;
            em_tensor *is1 = nz ? KEEP(em_eq(nz, one)) : NULL;
            em_tensor *single = is1 ? KEEP(em_logical_and(z, is1)) : NULL;
            em_tensor *msrc = single ? KEEP(em_masked_fill(src_c, single, one)) : NULL;
            em_tensor *msr = msrc ? KEEP(em_scatter_reduce_two(self, dim, index, msrc, "prod", include_self)) : NULL;
            em_tensor *a = msr ? KEEP(em_mul(grad, msr)) : NULL;
            em_tensor *ga = a ? KEEP(em_gather(a, dim, index)) : NULL;
            em_tensor *b = KEEP(em_mul(grad, result));
            em_tensor *gb = b ? KEEP(em_gather(b, dim, index)) : NULL;
            em_tensor *src1 = KEEP(em_masked_fill(src_c, z, one));
            em_tensor *q = gb && src1 ? KEEP(em_div(gb, src1)) : NULL;
            if (single && ga && q) r = em_where(single, ga, q);
        }
    } else { /* amax, amin */
        em_tensor *value = KEEP(em_gather(result, dim, index));
        em_tensor *s_is0 = KEEP(em_eq(self, result));
        em_tensor *fls = KEEP(em_tensor_wrapped_scalar(em_scalar_bool(false)));
        em_tensor *s_is = s_is0 && fls ? (include_self ? s_is0 : KEEP(em_masked_fill(s_is0, mask, fls))) : NULL;
        em_tensor *src_c = KEEP(corner(src, index->ndim, index->sizes));
        em_tensor *r_is = value && src_c ? KEEP(em_eq(src_c, value)) : NULL;
        em_tensor *s_f = s_is ? KEEP(em_to(s_is, grad->dtype)) : NULL;
        em_tensor *r_f = r_is ? KEEP(em_to(r_is, grad->dtype)) : NULL;
        /* as PyTorch: no guard for a count of 0 (a NaN self, never equal to
         * the result), whose gradient comes out NaN there as in PyTorch */
        em_tensor *n = s_f && r_f ? KEEP(em_scatter_add(s_f, dim, index, r_f)) : NULL;
        em_tensor *gd = n ? KEEP(em_div(grad, n)) : NULL;
        if (gd && want_self) {
            r = em_mul(s_f, gd);
        } else if (gd) {
            em_tensor *g = KEEP(em_gather(gd, dim, index));
            r = g ? em_mul(r_f, g) : NULL;
        }
    }
    if (r && !want_self) { /* src may be larger than index: zeros elsewhere */
        bool same = r->ndim == src->ndim;
        for (int k = 0; same && k < r->ndim; k++) same = r->sizes[k] == src->sizes[k];
        for (int d = 0; r && !same && d < r->ndim; d++) {
            if (r->sizes[d] == src->sizes[d]) continue;
            int64_t sizes[EM_MAX_DIMS];
            for (int k = 0; k < r->ndim; k++) sizes[k] = r->sizes[k];
            sizes[d] = src->sizes[d];
            em_tensor *p = em_narrow_backward(r, (em_intlist){ sizes, r->ndim }, d, 0, r->sizes[d]);
            em_tensor_release(r);
            r = p;
        }
    }
done:
    for (int i = 0; i < nt; i++) em_tensor_release(tmp[i]);
#undef KEEP
    return r;
}

em_tensor *em_ag_fn_scatter_reduce_self_grad(em_tensor *grad, em_tensor *self, int64_t dim, em_tensor *index,
                                             em_tensor *src, const char *reduce, bool include_self,
                                             em_tensor *result) {
    return scatter_reduce_grad(true, grad, self, dim, index, src, reduce, include_self, result);
}

em_tensor *em_ag_fn_scatter_reduce_src_grad(em_tensor *grad, em_tensor *self, int64_t dim, em_tensor *index,
                                            em_tensor *src, const char *reduce, bool include_self,
                                            em_tensor *result) {
    return scatter_reduce_grad(false, grad, self, dim, index, src, reduce, include_self, result);
}
