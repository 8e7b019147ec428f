/* composite_conv.c -- the conv family's argument checks (em_conv.h, shared
 * by every backend's convolution kernels) and its composites: conv1d/2d/3d
 * (with padding "same"/"valid") and conv_transpose1d/2d/3d over the
 * convolution op.
 *
 * The composites accept unbatched input (no N dim) as PyTorch does, expand
 * a one-value list to every spatial dim, check everything under their own
 * name and then call em_convolution through the public API, so autograd
 * records convolution (and its own backward op gives double backward).
 */
#include <stdio.h>
#include <string.h>

#include "em_kernels_decl.h"
#include "em_ops.h"
#include "kernels/em_conv.h"

static const char *shp(const em_tensor *t, char *buf) { return em_shape_str(t->ndim, t->sizes, buf, EM_SHAPE_STR_MAX); }

/* "{1,2}" for a list */
static const char *lst(em_intlist l, char *buf) { return em_shape_str(l.n, l.data, buf, EM_SHAPE_STR_MAX); }

/* ---- the checks (Note [Convolution geometry]) ---- */

static bool list_ok(const char *op, const char *name, em_intlist l, int nsp, int64_t min) {
    char b[EM_SHAPE_STR_MAX];
    if (l.n != nsp) {
        em_set_error(EM_EVALUE, "%s: argument '%s' must have %d value%s (one per spatial dim), got %s", op, name,
                     nsp, nsp == 1 ? "" : "s", l.n < 0 ? "none" : lst(l, b));
        return false;
    }
    for (int i = 0; i < l.n; i++) {
        if (l.data[i] < min) {
            em_set_error(EM_EVALUE, "%s: argument '%s' must be %s, got %s", op, name,
                         min > 0 ? "positive" : "non-negative", lst(l, b));
            return false;
        }
        if (l.data[i] > EM_CONV_OPT_MAX) { /* the geometry's products stay inside int64 */
            em_set_error(EM_EVALUE, "%s: argument '%s' must be at most %lld, got %s", op, name,
                         (long long)EM_CONV_OPT_MAX, lst(l, b));
            return false;
        }
    }
    return true;
}

em_status em_conv_check(const char *op, const em_tensor *input, const em_tensor *weight, const em_tensor *bias,
                        em_intlist stride, em_intlist padding, em_intlist dilation, bool transposed,
                        em_intlist output_padding, int64_t groups, em_conv_geom *g) {
    char b1[EM_SHAPE_STR_MAX], b2[EM_SHAPE_STR_MAX], b3[EM_SHAPE_STR_MAX];
    int nsp = input->ndim - 2;
    if (nsp < 1 || nsp > 3) {
        em_set_error(EM_ESHAPE, "%s: expected input {N,C,...} with 1 to 3 spatial dims, got input of shape %s", op,
                     shp(input, b1));
        return EM_ESHAPE;
    }
    if (weight->ndim != input->ndim) {
        em_set_error(EM_ESHAPE, "%s: expected weight to be %d-d like input %s, got weight of shape %s", op,
                     input->ndim, shp(input, b1), shp(weight, b2));
        return EM_ESHAPE;
    }
    if (!em_dtype_is_floating(input->dtype)) {
        em_set_error(EM_ETYPE, "%s: expected a floating-point input, got %s", op, em_dtype_name(input->dtype));
        return EM_ETYPE;
    }
    if (weight->dtype != input->dtype || (bias && bias->dtype != input->dtype)) {
        const em_tensor *o = weight->dtype != input->dtype ? weight : bias;
        em_set_error(EM_ETYPE, "%s: expected %s of input's dtype %s, got %s", op, o == weight ? "weight" : "bias",
                     em_dtype_name(input->dtype), em_dtype_name(o->dtype));
        return EM_ETYPE;
    }
    if (!list_ok(op, "stride", stride, nsp, 1) || !list_ok(op, "padding", padding, nsp, 0) ||
        !list_ok(op, "dilation", dilation, nsp, 1))
        return EM_EVALUE;
    if (transposed && !list_ok(op, "output_padding", output_padding, nsp, 0)) return EM_EVALUE;
    if (groups < 1) {
        em_set_error(EM_EVALUE, "%s: argument 'groups' must be positive, got %lld", op, (long long)groups);
        return EM_EVALUE;
    }
    int64_t w0 = weight->sizes[0], w1 = weight->sizes[1], C = input->sizes[1];
    if (w0 < 1) {
        em_set_error(EM_ESHAPE, "%s: expected weight with at least 1 %s channel, got weight of shape %s", op,
                     transposed ? "input" : "output", shp(weight, b1));
        return EM_ESHAPE;
    }
    if (w0 % groups != 0) {
        em_set_error(EM_EVALUE, "%s: groups=%lld must divide weight's first dim, got weight of shape %s", op,
                     (long long)groups, shp(weight, b1));
        return EM_EVALUE;
    }
    int64_t want_c = transposed ? w0 : w1 * groups;
    if (C != want_c) {
        em_set_error(EM_ESHAPE, "%s: weight of shape %s with groups=%lld expects input with %lld channels, got input of shape %s",
                     op, shp(weight, b1), (long long)groups, (long long)want_c, shp(input, b2));
        return EM_ESHAPE;
    }
    int64_t C_out = transposed ? w1 * groups : w0;
    if (bias && (bias->ndim != 1 || bias->sizes[0] != C_out)) {
        em_set_error(EM_ESHAPE, "%s: expected bias of shape {%lld} (weight %s), got bias of shape %s", op,
                     (long long)C_out, shp(weight, b1), shp(bias, b2));
        return EM_ESHAPE;
    }
    memset(g, 0, sizeof *g);
    g->nsp = nsp;
    g->transposed = transposed;
    g->N = input->sizes[0];
    g->G = groups;
    g->C_img = transposed ? C_out : C;
    g->C_col = transposed ? C : C_out;
    int off = 3 - nsp;
    for (int d = 0; d < 3; d++) {
        g->img[d] = g->col[d] = g->k[d] = g->stride[d] = g->dil[d] = 1;
        g->pad[d] = 0;
    }
    int64_t in_sp[3], out_sp[3];
    for (int d = 0; d < nsp; d++) {
        int64_t I = input->sizes[d + 2], K = weight->sizes[d + 2], S = stride.data[d], P = padding.data[d];
        int64_t D = dilation.data[d], ext = D * (K - 1) + 1;
        if (transposed) {
            int64_t OP = output_padding.data[d];
            if (OP >= S && OP >= D && input->sizes[0] != 0) { /* PyTorch skips it for an empty batch */
                em_set_error(EM_EVALUE, "%s: output_padding %s must be smaller than stride %s or dilation %s", op,
                             lst(output_padding, b1), lst(stride, b2), lst(dilation, b3));
                return EM_EVALUE;
            }
            out_sp[d] = (I - 1) * S - 2 * P + ext + OP;
        } else {
            if (I + 2 * P < ext) {
                int64_t kd[3], pd[3];
                for (int e = 0; e < nsp; e++) {
                    kd[e] = dilation.data[e] * (weight->sizes[e + 2] - 1) + 1;
                    pd[e] = input->sizes[e + 2] + 2 * padding.data[e];
                }
                em_set_error(EM_ESHAPE, "%s: kernel size %s (dilated) is larger than the padded input %s (input %s, padding %s)",
                             op, em_shape_str(nsp, kd, b1, sizeof b1), em_shape_str(nsp, pd, b2, sizeof b2),
                             shp(input, b3), lst(padding, (char[EM_SHAPE_STR_MAX]){ 0 }));
                return EM_ESHAPE;
            }
            out_sp[d] = (I + 2 * P - ext) / S + 1;
        }
        in_sp[d] = I;
        g->k[off + d] = K;
        g->stride[off + d] = S;
        g->pad[off + d] = P;
        g->dil[off + d] = D;
    }
    if (transposed) {
        for (int d = 0; d < nsp; d++) {
            if (out_sp[d] < (input->sizes[0] == 0 ? 0 : 1)) { /* an empty batch may give size 0, as in PyTorch */
                em_set_error(EM_ESHAPE, "%s: the output size %s of input %s is too small (padding %s)", op,
                             em_shape_str(nsp, out_sp, b1, sizeof b1), shp(input, b2), lst(padding, b3));
                return EM_ESHAPE;
            }
        }
    }
    for (int d = 0; d < nsp; d++) {
        g->img[off + d] = transposed ? out_sp[d] : in_sp[d];
        g->col[off + d] = transposed ? in_sp[d] : out_sp[d];
    }
    return EM_OK;
}

void em_conv_output_sizes(const em_conv_geom *g, int64_t *sizes) {
    sizes[0] = g->N;
    sizes[1] = g->transposed ? g->C_img : g->C_col;
    for (int d = 0; d < g->nsp; d++) sizes[2 + d] = (g->transposed ? g->img : g->col)[3 - g->nsp + d];
}

/* ---- conv1d/2d/3d, conv_transpose1d/2d/3d ---- */

/* A list of n values from l: l itself, or its one value repeated. */
static bool expand_list(const char *op, const char *name, em_intlist l, int n, int64_t *buf, em_intlist *out) {
    char b[EM_SHAPE_STR_MAX];
    if (l.n == n) {
        *out = l;
        return true;
    }
    if (l.n != 1) {
        em_set_error(EM_EVALUE, "%s: argument '%s' must be one value or %d, got %s", op, name, n,
                     l.n < 0 ? "none" : lst(l, b));
        return false;
    }
    for (int i = 0; i < n; i++) buf[i] = l.data[0];
    *out = (em_intlist){ buf, n };
    return true;
}

/* The shared body. same: padding="same" (padding is then ignored; stride
 * must be 1): symmetric padding of half the dilated kernel's extent, and
 * where that extent is odd one more on both sides and the first output
 * dropped (PyTorch pads the input's end instead: the same values). */
static em_tensor *conv_nd(const char *op, int nsp, em_tensor *input, em_tensor *weight, em_tensor *bias,
                          em_intlist stride, em_intlist padding, em_intlist dilation, bool transposed,
                          em_intlist output_padding, int64_t groups, bool same) {
    char b1[EM_SHAPE_STR_MAX];
    if (input->ndim != nsp + 1 && input->ndim != nsp + 2) {
        em_set_error(EM_ESHAPE, "%s: expected %d-d (unbatched) or %d-d (batched) input, got input of shape %s", op,
                     nsp + 1, nsp + 2, shp(input, b1));
        return NULL;
    }
    if (weight->ndim != nsp + 2) {
        em_set_error(EM_ESHAPE, "%s: expected %d-d weight, got weight of shape %s", op, nsp + 2, shp(weight, b1));
        return NULL;
    }
    int64_t sb[3], pb[3], db[3], ob[3];
    em_intlist st, pd, dl, op_ = { NULL, 0 };
    if (!expand_list(op, "stride", stride, nsp, sb, &st) || !expand_list(op, "dilation", dilation, nsp, db, &dl))
        return NULL;
    if (transposed && !expand_list(op, "output_padding", output_padding, nsp, ob, &op_)) return NULL;
    bool drop_first[3] = { false, false, false }, any_drop = false;
    if (same) {
        for (int d = 0; d < nsp; d++) {
            if (st.data[d] != 1) {
                em_set_error(EM_EVALUE, "%s: padding='same' needs stride 1, got stride %s", op, lst(st, b1));
                return NULL;
            }
        }
        for (int d = 0; d < nsp; d++) {
            int64_t total = dl.data[d] * (weight->sizes[d + 2] - 1);
            pb[d] = total - total / 2;
            drop_first[d] = total % 2 != 0;
            any_drop |= drop_first[d];
        }
        pd = (em_intlist){ pb, nsp };
    } else if (!expand_list(op, "padding", padding, nsp, pb, &pd)) {
        return NULL;
    }
    bool batched = input->ndim == nsp + 2;
    em_tensor *in = batched ? em_tensor_retain(input) : em_unsqueeze(input, 0);
    if (!in) return NULL;
    em_conv_geom g;
    if (em_conv_check(op, in, weight, bias, st, pd, dl, transposed, op_, groups, &g) != EM_OK) {
        em_tensor_release(in);
        return NULL;
    }
    int64_t zeros[3] = { 0, 0, 0 };
    em_tensor *r = em_convolution(in, weight, bias, st, pd, dl, transposed, transposed ? op_ : (em_intlist){ zeros, nsp },
                                  groups);
    em_tensor_release(in);
    for (int d = 0; d < nsp && r && any_drop; d++) {
        if (!drop_first[d]) continue;
        em_tensor *n = em_narrow(r, d + 2, 1, r->sizes[d + 2] - 1);
        em_tensor_release(r);
        r = n;
    }
    if (r && !batched) {
        int64_t zero = 0;
        em_tensor *s = em_squeeze(r, &zero);
        em_tensor_release(r);
        r = s;
    }
    return r;
}

static const int64_t zero3[3] = { 0, 0, 0 };
#define NO_OPAD ((em_intlist){ zero3, 1 })

em_tensor *em_comp_conv1d(em_keyset ks, em_tensor *input, em_tensor *weight, em_tensor *bias, em_intlist stride,
                          em_intlist padding, em_intlist dilation, int64_t groups) {
    (void)ks;
    return conv_nd("conv1d", 1, input, weight, bias, stride, padding, dilation, false, NO_OPAD, groups, false);
}

em_tensor *em_comp_conv2d(em_keyset ks, em_tensor *input, em_tensor *weight, em_tensor *bias, em_intlist stride,
                          em_intlist padding, em_intlist dilation, int64_t groups) {
    (void)ks;
    return conv_nd("conv2d", 2, input, weight, bias, stride, padding, dilation, false, NO_OPAD, groups, false);
}

em_tensor *em_comp_conv3d(em_keyset ks, em_tensor *input, em_tensor *weight, em_tensor *bias, em_intlist stride,
                          em_intlist padding, em_intlist dilation, int64_t groups) {
    (void)ks;
    return conv_nd("conv3d", 3, input, weight, bias, stride, padding, dilation, false, NO_OPAD, groups, false);
}

/* padding is "valid" (no padding) or "same" (the binding refuses others) */
#define CONV_PADDING_STR(NAME, NSP)                                                                        \
    em_tensor *em_comp_##NAME##_padding(em_keyset ks, em_tensor *input, em_tensor *weight, em_tensor *bias, \
                                        em_intlist stride, const char *padding, em_intlist dilation,       \
                                        int64_t groups) {                                                  \
        (void)ks;                                                                                          \
        bool same = strcmp(padding, "same") == 0;                                                          \
        return conv_nd(#NAME, NSP, input, weight, bias, stride, (em_intlist){ zero3, 1 }, dilation, false,  \
                       NO_OPAD, groups, same);                                                             \
    }
CONV_PADDING_STR(conv1d, 1)
CONV_PADDING_STR(conv2d, 2)
CONV_PADDING_STR(conv3d, 3)

#define CONV_TRANSPOSE(NSP)                                                                                  \
    em_tensor *em_comp_conv_transpose##NSP##d(em_keyset ks, em_tensor *input, em_tensor *weight,             \
                                              em_tensor *bias, em_intlist stride, em_intlist padding,        \
                                              em_intlist output_padding, int64_t groups,                     \
                                              em_intlist dilation) {                                         \
        (void)ks;                                                                                            \
        return conv_nd("conv_transpose" #NSP "d", NSP, input, weight, bias, stride, padding, dilation, true, \
                       output_padding, groups, false);                                                       \
    }
CONV_TRANSPOSE(1)
CONV_TRANSPOSE(2)
CONV_TRANSPOSE(3)
