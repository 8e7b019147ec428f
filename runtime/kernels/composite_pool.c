/* composite_pool.c -- the pool family's composite ops (schema/ops/pool.yaml,
 * `kernels: {Composite: em_comp_NAME}`; Note [Composite ops] in
 * codegen/codegen.h): the nn.functional spellings over the kernels.
 *
 * Note [Optional results]: max_pool1d/2d/3d return (values, indices) with
 * indices NULL unless return_indices is true; the Lua binding pushes nil for
 * a NULL further result (em_lua_push_results), so `F.max_pool2d(x, 2)` gives
 * the values alone, as torch.nn.functional does.
 */
#include <string.h>

#include "autograd/em_autograd.h"
#include "em_ops.h"
#include "em_kernels_decl.h"
#include "kernels/cpu/em_cpu.h" /* em_cpu_pool_geom_init: the argument checks */

/* ---- 1-d pooling as 2-d pooling over a height of 1 ---- */

/* values of op(...) and, with return_indices, its indices (else NULL). */
static em_tensor *keep_indices(em_tensor *values, em_tensor *ix, bool return_indices, em_tensor **indices) {
    if (!values || !return_indices) {
        em_tensor_release(ix);
        ix = NULL;
    }
    *indices = ix;
    return values;
}

/* A 1-d max/avg pooling's arguments, checked under op's name (so errors
 * name it rather than the 2-d op underneath), as the 2-d pooling's over a
 * height of 1: kernel 1, stride 1, no padding, dilation 1 in the height. */
typedef struct {
    int64_t k[2], s[2], p[2], d[2];
} height1_args;

static em_status height1(height1_args *a, em_tensor *input, em_intlist kernel_size, em_intlist stride,
                         em_intlist padding, em_intlist dilation, bool ceil_mode, bool avg, const char *op) {
    em_cpu_pool_geom g;
    if (em_cpu_pool_geom_init(&g, input, 1, kernel_size, stride, padding, dilation, ceil_mode, avg, op) != EM_OK)
        return EM_EVALUE;
    *a = (height1_args){ { 1, g.k[2] }, { 1, g.s[2] }, { 0, g.p[2] }, { 1, g.d[2] } };
    return EM_OK;
}

/* The result of a 2-d pooling over a height of 1 back in 1-d: dim -2
 * squeezed out of v and, with ix, of *ix. Releases v (and *ix); returns the
 * squeezed values, *ix the squeezed indices; NULL (nothing left) when
 * either is missing. */
static em_tensor *drop_height(em_tensor *v, em_tensor **ix) {
    int64_t h = -2;
    em_tensor *vs = v ? em_squeeze(v, &h) : NULL;
    em_tensor_release(v);
    if (ix) {
        em_tensor *is = vs ? em_squeeze(*ix, &h) : NULL;
        em_tensor_release(*ix);
        *ix = is;
        if (!is) {
            em_tensor_release(vs);
            vs = NULL;
        }
    }
    return vs;
}

/* ---- max pooling ---- */

/* max_pool1d as max_pool2d over a height of 1: (N, C, L) -> (N, C, 1, L);
 * a 1-d index is then the flat position in the 1 x L plane. The arguments
 * are checked here first, so errors name max_pool1d_with_indices. */
em_tensor *em_comp_max_pool1d_with_indices(em_keyset ks, em_tensor *self, em_intlist kernel_size, em_intlist stride,
                                           em_intlist padding, em_intlist dilation, bool ceil_mode,
                                           em_tensor **indices) {
    (void)ks;
    height1_args a;
    if (height1(&a, self, kernel_size, stride, padding, dilation, ceil_mode, false, "max_pool1d_with_indices") !=
        EM_OK)
        return NULL;
    em_tensor *x = em_unsqueeze(self, -2);
    if (!x) return NULL;
    em_tensor *ix = NULL;
    em_tensor *v = em_max_pool2d_with_indices(x, (em_intlist){ a.k, 2 }, (em_intlist){ a.s, 2 },
                                              (em_intlist){ a.p, 2 }, (em_intlist){ a.d, 2 }, ceil_mode, &ix);
    em_tensor_release(x);
    v = drop_height(v, &ix);
    if (v) *indices = ix;
    return v;
}

/* max_pool1d/2d/3d (nsp spatial dims): the arguments checked under op's
 * name, then max_poolNd_with_indices; the indices only with
 * return_indices (Note [Optional results]). */
static em_tensor *max_pool_nd(em_tensor *input, int nsp, em_intlist kernel_size, em_intlist stride,
                              em_intlist padding, em_intlist dilation, bool ceil_mode, bool return_indices,
                              em_tensor **indices, const char *op) {
    em_cpu_pool_geom g;
    if (em_cpu_pool_geom_init(&g, input, nsp, kernel_size, stride, padding, dilation, ceil_mode, false, op) != EM_OK)
        return NULL;
    em_tensor *(*with_indices)(em_tensor *, em_intlist, em_intlist, em_intlist, em_intlist, bool, em_tensor **) =
        nsp == 1 ? em_max_pool1d_with_indices : nsp == 2 ? em_max_pool2d_with_indices : em_max_pool3d_with_indices;
    em_tensor *ix = NULL;
    em_tensor *v = with_indices(input, kernel_size, stride, padding, dilation, ceil_mode, &ix);
    if (nsp == 1 && v && !return_indices && !em_requires_grad(input)) {
        /* PyTorch's max_pool1d returns a fresh tensor, not the squeezed
         * view of a height-1 max_pool2d, when the input does not require
         * grad and no indices are asked for: a view made under no_grad
         * would refuse a later in-place write with grad mode on. Same
         * data, a header without a base. */
        em_tensor *fresh = em_tensor_new_view(v->storage, v->offset, v->ndim, v->sizes, v->strides, v->dtype,
                                              v->version);
        em_tensor_release(v);
        v = fresh;
    }
    return keep_indices(v, ix, return_indices, indices);
}

em_tensor *em_comp_max_pool1d(em_keyset ks, em_tensor *input, em_intlist kernel_size, em_intlist stride,
                              em_intlist padding, em_intlist dilation, bool ceil_mode, bool return_indices,
                              em_tensor **indices) {
    (void)ks;
    return max_pool_nd(input, 1, kernel_size, stride, padding, dilation, ceil_mode, return_indices, indices,
                       "max_pool1d");
}

em_tensor *em_comp_max_pool2d(em_keyset ks, em_tensor *input, em_intlist kernel_size, em_intlist stride,
                              em_intlist padding, em_intlist dilation, bool ceil_mode, bool return_indices,
                              em_tensor **indices) {
    (void)ks;
    return max_pool_nd(input, 2, kernel_size, stride, padding, dilation, ceil_mode, return_indices, indices,
                       "max_pool2d");
}

em_tensor *em_comp_max_pool3d(em_keyset ks, em_tensor *input, em_intlist kernel_size, em_intlist stride,
                              em_intlist padding, em_intlist dilation, bool ceil_mode, bool return_indices,
                              em_tensor **indices) {
    (void)ks;
    return max_pool_nd(input, 3, kernel_size, stride, padding, dilation, ceil_mode, return_indices, indices,
                       "max_pool3d");
}

/* ---- average pooling ---- */

/* avg_pool1d as avg_pool2d over a height of 1 (PyTorch does the same). */
em_tensor *em_comp_avg_pool1d(em_keyset ks, em_tensor *input, em_intlist kernel_size, em_intlist stride,
                              em_intlist padding, bool ceil_mode, bool count_include_pad) {
    (void)ks;
    height1_args a;
    em_intlist none = { NULL, -1 };
    if (height1(&a, input, kernel_size, stride, padding, none, ceil_mode, true, "avg_pool1d") != EM_OK) return NULL;
    em_tensor *x = em_unsqueeze(input, -2);
    em_tensor *v = x ? em_avg_pool2d(x, (em_intlist){ a.k, 2 }, (em_intlist){ a.s, 2 }, (em_intlist){ a.p, 2 },
                                     ceil_mode, count_include_pad, NULL)
                     : NULL;
    em_tensor_release(x);
    return drop_height(v, NULL);
}

/* ---- adaptive pooling ---- */

/* The 1-d adaptive pools as 2-d ones over a height of 1 (output 1 x n). */
static em_status adaptive_1d_args(em_tensor *input, em_intlist output_size, int64_t *os, const char *op) {
    if (input->ndim != 2 && input->ndim != 3) {
        char s[EM_SHAPE_STR_MAX];
        em_set_error(EM_ESHAPE, "%s: argument 'input' must have 2 or 3 dims (unbatched or batched), got shape %s", op,
                     em_shape_str(input->ndim, input->sizes, s, sizeof s));
        return EM_ESHAPE;
    }
    if (output_size.n != 1) {
        em_set_error(EM_EVALUE, "%s: output_size must be a single integer, got %d", op, output_size.n);
        return EM_EVALUE;
    }
    os[0] = 1;
    os[1] = output_size.data[0];
    return EM_OK;
}

/* adaptive_avg_pool2d/3d: as PyTorch's, an output of all ones is the mean
 * over the pooled dims (its node is MeanBackward, whose gradient does not
 * depend on the input: a create_graph gradient of it does not require
 * grad); other sizes, bad arguments and empty planes go to the kernel
 * _adaptive_avg_poolNd, which checks them. */
static em_tensor *adaptive_avg(em_tensor *input, em_intlist output_size, int nsp) {
    bool ones = (output_size.n == 1 || output_size.n == nsp) && em_dtype_is_floating(input->dtype) &&
                (input->ndim == nsp + 1 || input->ndim == nsp + 2);
    for (int i = 0; ones && i < output_size.n; i++) ones = output_size.data[i] == 1;
    for (int d = 1; ones && d <= nsp; d++) ones = input->sizes[input->ndim - d] > 0;
    if (ones) {
        int64_t dims[3] = { -1, -2, -3 };
        return em_mean(input, (em_intlist){ dims, nsp }, true, EM_DTYPE_NONE);
    }
    return nsp == 2 ? em__adaptive_avg_pool2d(input, output_size) : em__adaptive_avg_pool3d(input, output_size);
}

em_tensor *em_comp_adaptive_avg_pool2d(em_keyset ks, em_tensor *input, em_intlist output_size) {
    (void)ks;
    return adaptive_avg(input, output_size, 2);
}

em_tensor *em_comp_adaptive_avg_pool3d(em_keyset ks, em_tensor *input, em_intlist output_size) {
    (void)ks;
    return adaptive_avg(input, output_size, 3);
}

em_tensor *em_comp_adaptive_avg_pool1d(em_keyset ks, em_tensor *input, em_intlist output_size) {
    (void)ks;
    int64_t os[2];
    if (adaptive_1d_args(input, output_size, os, "adaptive_avg_pool1d") != EM_OK) return NULL;
    em_tensor *x = em_unsqueeze(input, -2);
    em_tensor *v = x ? em_adaptive_avg_pool2d(x, (em_intlist){ os, 2 }) : NULL;
    em_tensor_release(x);
    return drop_height(v, NULL);
}

em_tensor *em_comp_adaptive_max_pool1d(em_keyset ks, em_tensor *input, em_intlist output_size, bool return_indices,
                                       em_tensor **indices) {
    (void)ks;
    int64_t os[2];
    if (adaptive_1d_args(input, output_size, os, "adaptive_max_pool1d") != EM_OK) return NULL;
    em_tensor *x = em_unsqueeze(input, -2);
    em_tensor *ix = NULL;
    em_tensor *v = x ? em_adaptive_max_pool2d_with_indices(x, (em_intlist){ os, 2 }, &ix) : NULL;
    em_tensor_release(x);
    v = drop_height(v, return_indices ? &ix : NULL);
    return keep_indices(v, ix, return_indices, indices);
}

em_tensor *em_comp_adaptive_max_pool2d(em_keyset ks, em_tensor *input, em_intlist output_size, bool return_indices,
                                       em_tensor **indices) {
    (void)ks;
    em_tensor *ix = NULL;
    em_tensor *v = em_adaptive_max_pool2d_with_indices(input, output_size, &ix);
    return keep_indices(v, ix, return_indices, indices);
}

/* ---- power-average pooling ---- */

/* PyTorch's lp_pool: out = avg_pool(x^p); (sign(out) * relu(|out|) * kernel
 * elements)^(1/p). nsp is 1 or 2. */
static em_tensor *lp_pool(em_tensor *input, double norm_type, em_intlist kernel_size, em_intlist stride,
                          bool ceil_mode, int nsp, const char *op) {
    if (kernel_size.n != 1 && kernel_size.n != nsp) {
        em_set_error(EM_EVALUE, "%s: kernel_size must be a single integer or %d integers, got %d", op, nsp,
                     kernel_size.n);
        return NULL;
    }
    /* the window's element count; a product past int64 (kernel sizes near
     * 2^63) is left at 0: avg_pool below refuses such a kernel_size */
    int64_t kn = 1;
    for (int i = 0; i < nsp; i++)
        if (__builtin_mul_overflow(kn, kernel_size.data[kernel_size.n == 1 ? 0 : i], &kn)) {
            kn = 0;
            break;
        }
    int64_t zero = 0;
    em_intlist pad = { &zero, 1 };
    em_tensor *p = em_tensor_wrapped_scalar(em_scalar_float(norm_type));
    em_tensor *rp = em_tensor_wrapped_scalar(em_scalar_float(1.0 / norm_type));
    em_tensor *kt = em_tensor_wrapped_scalar(em_scalar_int(kn));
    em_tensor *xp = p && rp && kt ? em_pow(input, p) : NULL;
    em_tensor *out = !xp ? NULL
                     : nsp == 1 ? em_avg_pool1d(xp, kernel_size, stride, pad, ceil_mode, true)
                                : em_avg_pool2d(xp, kernel_size, stride, pad, ceil_mode, true, NULL);
    em_tensor *sg = out ? em_sign(out) : NULL;
    em_tensor *ab = sg ? em_abs(out) : NULL;
    em_tensor *re = ab ? em_relu(ab) : NULL;
    em_tensor *m1 = re ? em_mul(sg, re) : NULL;
    em_tensor *m2 = m1 ? em_mul(m1, kt) : NULL;
    em_tensor *r = m2 ? em_pow(m2, rp) : NULL;
    em_tensor *tmp[] = { p, rp, kt, xp, out, sg, ab, re, m1, m2 };
    for (size_t i = 0; i < sizeof tmp / sizeof *tmp; i++) em_tensor_release(tmp[i]);
    return r;
}

em_tensor *em_comp_lp_pool1d(em_keyset ks, em_tensor *input, double norm_type, em_intlist kernel_size,
                             em_intlist stride, bool ceil_mode) {
    (void)ks;
    return lp_pool(input, norm_type, kernel_size, stride, ceil_mode, 1, "lp_pool1d");
}

em_tensor *em_comp_lp_pool2d(em_keyset ks, em_tensor *input, double norm_type, em_intlist kernel_size,
                             em_intlist stride, bool ceil_mode) {
    (void)ks;
    return lp_pool(input, norm_type, kernel_size, stride, ceil_mode, 2, "lp_pool2d");
}

/* ---- unpooling ---- */

/* PyTorch's _unpool_output_size: (in - 1) * stride - 2 * padding + kernel
 * per spatial dim, or output_size (nsp values, or nsp + 2 whose last nsp
 * count) when it lies strictly within one stride of that. Then the kernel. */
static em_tensor *max_unpool_nd(em_tensor *input, em_tensor *indices, em_intlist kernel_size, em_intlist stride,
                                em_intlist padding, em_intlist output_size, int nsp, const char *op) {
    if (input->ndim != nsp + 1 && input->ndim != nsp + 2) {
        char s[EM_SHAPE_STR_MAX];
        em_set_error(EM_ESHAPE, "%s: argument 'input' must have %d or %d dims (unbatched or batched), got shape %s",
                     op, nsp + 1, nsp + 2, em_shape_str(input->ndim, input->sizes, s, sizeof s));
        return NULL;
    }
    int64_t k[3], s[3], p[3], os[3];
    const struct { em_intlist l; int64_t *out; const char *name; } lists[] = {
        { kernel_size, k, "kernel_size" }, { stride, s, "stride" }, { padding, p, "padding" } };
    for (int j = 0; j < 3; j++) {
        em_intlist l = lists[j].l;
        if (j == 1 && l.n <= 0) l = kernel_size; /* stride None = kernel_size */
        if (l.n != 1 && l.n != nsp) {
            em_set_error(EM_EVALUE, "%s: %s must be a single integer or %d integers, got %d", op, lists[j].name, nsp,
                         l.n < 0 ? 0 : l.n);
            return NULL;
        }
        for (int i = 0; i < nsp; i++) {
            lists[j].out[i] = l.data[l.n == 1 ? 0 : i];
            if (lists[j].out[i] > INT32_MAX || lists[j].out[i] < -INT32_MAX) { /* keeps the sizes below in int64 */
                em_set_error(EM_EVALUE, "%s: %s must be between %d and %d, got %lld", op, lists[j].name, -INT32_MAX,
                             INT32_MAX, (long long)lists[j].out[i]);
                return NULL;
            }
        }
    }
    for (int i = 0; i < nsp; i++)
        os[i] = (input->sizes[input->ndim - nsp + i] - 1) * s[i] - 2 * p[i] + k[i];
    if (output_size.n >= 0) {
        int off = output_size.n == nsp + 2 ? 2 : 0;
        if (output_size.n != nsp && output_size.n != nsp + 2) {
            em_set_error(EM_EVALUE, "%s: output_size must have %d or %d values, got %d", op, nsp, nsp + 2,
                         output_size.n);
            return NULL;
        }
        for (int i = 0; i < nsp; i++) {
            int64_t v = output_size.data[off + i], lo = os[i] - s[i], hi = os[i] + s[i];
            if (!(lo < v && v < hi)) {
                em_set_error(EM_EVALUE, "%s: output_size %lld for spatial dim %d must be between %lld and %lld (exclusive)",
                             op, (long long)v, i + 1, (long long)lo, (long long)hi);
                return NULL;
            }
            os[i] = v;
        }
    }
    return em_max_unpool(input, indices, (em_intlist){ os, nsp });
}

em_tensor *em_comp_max_unpool1d(em_keyset ks, em_tensor *input, em_tensor *indices, em_intlist kernel_size,
                                em_intlist stride, em_intlist padding, em_intlist output_size) {
    (void)ks;
    return max_unpool_nd(input, indices, kernel_size, stride, padding, output_size, 1, "max_unpool1d");
}

em_tensor *em_comp_max_unpool2d(em_keyset ks, em_tensor *input, em_tensor *indices, em_intlist kernel_size,
                                em_intlist stride, em_intlist padding, em_intlist output_size) {
    (void)ks;
    return max_unpool_nd(input, indices, kernel_size, stride, padding, output_size, 2, "max_unpool2d");
}

em_tensor *em_comp_max_unpool3d(em_keyset ks, em_tensor *input, em_tensor *indices, em_intlist kernel_size,
                                em_intlist stride, em_intlist padding, em_intlist output_size) {
    (void)ks;
    return max_unpool_nd(input, indices, kernel_size, stride, padding, output_size, 3, "max_unpool3d");
}

/* ---- pixel shuffle ---- */

/* pixel_shuffle / pixel_unshuffle as PyTorch's math: a view splitting the
 * channel (or spatial) dims by r, a permute, a reshape (a copy, never a
 * view of self, as in PyTorch). */
static em_tensor *shuffle(em_tensor *self, int64_t r, bool up, const char *op) {
    const char *arg = up ? "upscale_factor" : "downscale_factor";
    if (self->ndim < 3) {
        char s[EM_SHAPE_STR_MAX];
        em_set_error(EM_ESHAPE, "%s: argument 'self' must have at least 3 dims (*, C, H, W), got shape %s", op,
                     em_shape_str(self->ndim, self->sizes, s, sizeof s));
        return NULL;
    }
    if (r <= 0) {
        em_set_error(EM_EVALUE, "%s: %s must be positive, got %lld", op, arg, (long long)r);
        return NULL;
    }
    int nd = self->ndim, lead = nd - 3;
    int64_t c = self->sizes[nd - 3], h = self->sizes[nd - 2], w = self->sizes[nd - 1];
    if (up && c % (r * r) != 0) {
        em_set_error(EM_EVALUE, "%s: the channel count %lld is not divisible by %s squared (%lld)", op, (long long)c,
                     arg, (long long)(r * r));
        return NULL;
    }
    if (!up && (h % r != 0 || w % r != 0)) {
        em_set_error(EM_EVALUE, "%s: height %lld and width %lld must be divisible by %s (%lld)", op, (long long)h,
                     (long long)w, arg, (long long)r);
        return NULL;
    }
    int64_t v[EM_MAX_DIMS + 3], perm[EM_MAX_DIMS + 3], out[EM_MAX_DIMS];
    if (nd + 3 > EM_MAX_DIMS) {
        em_set_error(EM_ESHAPE, "%s: at most %d dims, got %d", op, EM_MAX_DIMS - 3, nd);
        return NULL;
    }
    for (int d = 0; d < lead; d++) v[d] = out[d] = self->sizes[d], perm[d] = d;
    /* up:   (*, c', r, r, h, w) -> (*, c', h, r, w, r) -> (*, c', h*r, w*r)
     * down: (*, c, h', r, w', r) -> (*, c, r, r, h', w') -> (*, c*r*r, h', w') */
    static const int up_perm[6] = { 0, 3, 1, 4, 2, 5 }, down_perm[6] = { 0, 2, 4, 1, 3, 5 };
    int64_t six[6];
    if (up) {
        int64_t six_up[6] = { c / (r * r), r, r, h, w, 0 };
        memcpy(six, six_up, sizeof six);
    } else {
        int64_t six_dn[6] = { c, h / r, r, w / r, r, 0 };
        memcpy(six, six_dn, sizeof six);
    }
    for (int i = 0; i < 5; i++) v[lead + i] = six[i];
    const int *pp = up ? up_perm : down_perm;
    for (int i = 0; i < 5; i++) perm[lead + i] = lead + pp[i];
    if (up) {
        out[lead] = c / (r * r), out[lead + 1] = h * r, out[lead + 2] = w * r;
    } else {
        out[lead] = c * r * r, out[lead + 1] = h / r, out[lead + 2] = w / r;
    }
    em_tensor *a = em_reshape(self, (em_intlist){ v, lead + 5 });
    em_tensor *b = a ? em_permute(a, (em_intlist){ perm, lead + 5 }) : NULL;
    /* the reshape of the permuted view copies (a new tensor, not a view) */
    em_tensor *res = b ? em_reshape(b, (em_intlist){ out, nd }) : NULL;
    if (res && res->storage == self->storage) { /* r == 1: a view of self; PyTorch returns a copy */
        em_tensor *copy = em_clone(res);
        em_tensor_release(res);
        res = copy;
    }
    em_tensor_release(a);
    em_tensor_release(b);
    return res;
}

em_tensor *em_comp_pixel_shuffle(em_keyset ks, em_tensor *self, int64_t upscale_factor) {
    (void)ks;
    return shuffle(self, upscale_factor, true, "pixel_shuffle");
}

em_tensor *em_comp_pixel_unshuffle(em_keyset ks, em_tensor *self, int64_t downscale_factor) {
    (void)ks;
    return shuffle(self, downscale_factor, false, "pixel_unshuffle");
}
