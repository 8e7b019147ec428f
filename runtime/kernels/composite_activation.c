/* composite_activation.c -- the activation family's composite ops (Note
 * [Composite ops] in codegen/codegen.h): relu6, softsign and tanhshrink,
 * written with public ops as PyTorch 1.13 writes them, so autograd and
 * every backend come from their parts. */
#include "em_ops.h"
#include "em_kernels_decl.h"

#include <math.h>

em_tensor *em_comp_relu6(em_keyset ks, em_tensor *self) {
    (void)ks;
    return em_hardtanh(self, em_scalar_int(0), em_scalar_int(6));
}

/* input / (|input| + 1): integers give float32 through true division */
em_tensor *em_comp_softsign(em_keyset ks, em_tensor *self) {
    (void)ks;
    em_tensor *a = em_abs(self);
    em_tensor *one = a ? em_tensor_wrapped_scalar(em_scalar_int(1)) : NULL;
    em_tensor *d = one ? em_add(a, one, em_scalar_int(1)) : NULL;
    em_tensor *r = d ? em_div(self, d) : NULL;
    em_tensor_release(a);
    em_tensor_release(one);
    em_tensor_release(d);
    return r;
}

/* input - tanh(input) */
em_tensor *em_comp_tanhshrink(em_keyset ks, em_tensor *self) {
    (void)ks;
    em_tensor *t = em_tanh(self);
    em_tensor *r = t ? em_sub(self, t, em_scalar_int(1)) : NULL;
    em_tensor_release(t);
    return r;
}

/* prelu and glu refuse what PyTorch's CPU kernels refuse: non-floating
 * input (the composites would otherwise compute in integers or promote). */
static em_status need_floating(const em_tensor *t, const char *op, const char *arg) {
    if (!em_dtype_is_floating(t->dtype))
        return em_set_error(EM_ETYPE, "%s: argument '%s' must be a floating tensor (got %s)", op, arg,
                            em_dtype_name(t->dtype));
    return EM_OK;
}

/* prelu: self where self > 0, else weight * self; weight has 1 element or
 * one per channel (dim 2 of self, which needs 2+ dims), broadcast over the
 * other dims as [C, 1, ...]. */
em_tensor *em_comp_prelu(em_keyset ks, em_tensor *self, em_tensor *weight) {
    (void)ks;
    if (need_floating(self, "prelu", "self") != EM_OK) return NULL;
    if (weight->ndim > 1) {
        em_set_error(EM_ESHAPE, "prelu: argument 'weight' must be a number-like or 1-d tensor, got %d dims",
                     weight->ndim);
        return NULL;
    }
    int64_t channels = self->ndim > 1 ? self->sizes[1] : 1;
    if (weight->numel != 1 && weight->numel != channels) {
        em_set_error(EM_ESHAPE, "prelu: argument 'weight' has %lld elements, expected 1 or the channel size "
                                "%lld (dim 2 of self)", (long long)weight->numel, (long long)channels);
        return NULL;
    }
    /* weight in self's dtype (PyTorch's kernel reads it so); one element
     * as a 0-dim tensor (no broadcasting of a 0-dim self), C as [C, 1, ...] */
    em_tensor *wt = em_to(weight, self->dtype), *w;
    if (!wt) return NULL;
    if (weight->numel == 1) {
        w = em_reshape(wt, (em_intlist){ NULL, 0 });
    } else if (self->ndim <= 2) {
        w = em_tensor_retain(wt);
    } else {
        int64_t shape[EM_MAX_DIMS];
        shape[0] = channels;
        for (int i = 1; i < self->ndim - 1; i++) shape[i] = 1;
        w = em_reshape(wt, (em_intlist){ shape, self->ndim - 1 });
    }
    em_tensor_release(wt);
    if (!w) return NULL;
    em_tensor *zero = em_tensor_wrapped_scalar(em_scalar_int(0));
    em_tensor *pos = zero ? em_gt(self, zero) : NULL;
    em_tensor *neg = pos ? em_mul(w, self) : NULL;
    em_tensor *r = neg ? em_where(pos, self, neg) : NULL;
    em_tensor_release(w);
    em_tensor_release(zero);
    em_tensor_release(pos);
    em_tensor_release(neg);
    return r;
}

/* glu: the first half of self along dim times the sigmoid of the second. */
em_tensor *em_comp_glu(em_keyset ks, em_tensor *self, int64_t dim) {
    (void)ks;
    if (need_floating(self, "glu", "self") != EM_OK) return NULL;
    if (self->ndim == 0) {
        em_set_error(EM_ESHAPE, "glu: does not support 0-dim tensors (the halved dim must have an even size)");
        return NULL;
    }
    int d = em_wrap_dim(dim, self->ndim, "glu");
    if (d < 0) return NULL;
    int64_t n = self->sizes[d];
    if (n % 2 != 0) {
        em_set_error(EM_ESHAPE, "glu: the halved dim %d must have an even size, got %lld", d + 1, (long long)n);
        return NULL;
    }
    em_tensor *a = em_narrow(self, d, 0, n / 2);
    em_tensor *b = a ? em_narrow(self, d, n / 2, n / 2) : NULL;
    em_tensor *sb = b ? em_sigmoid(b) : NULL;
    em_tensor *r = sb ? em_mul(a, sb) : NULL;
    em_tensor_release(a);
    em_tensor_release(b);
    em_tensor_release(sb);
    return r;
}

/* ---- dropout ---- */

static em_status check_p(double p, const char *op) {
    if (!(p >= 0 && p <= 1))
        return em_set_error(EM_EVALUE, "%s: argument 'p': dropout probability has to be between 0 and 1, but got %g",
                            op, p);
    return EM_OK;
}

/* input * 0, the 0 a 0-dim tensor of input's dtype (keeps the dtype, bool
 * included, and the graph, as PyTorch's input.mul(at::zeros({}, ...))) */
static em_tensor *times_zero(em_tensor *input) {
    em_tensor *z = em_zeros((em_intlist){ NULL, 0 }, input->dtype, input->device);
    em_tensor *r = z ? em_mul(input, z) : NULL;
    em_tensor_release(z);
    return r;
}

/* The end of an F dropout: r (owned) is the result; inplace writes it into
 * input (copy_, so autograd sees an in-place op on input) and returns input. */
static em_tensor *finish_dropout(em_tensor *input, em_tensor *r, bool inplace) {
    if (!r || !inplace) return r;
    em_tensor *w = em_copy_(input, r);
    em_tensor_release(r);
    return w;
}

/* F.dropout: PyTorch's _dropout_impl shortcuts (input itself for p = 0,
 * not training or no elements; input * 0 for p = 1, any dtype), else the
 * fused native_dropout. */
em_tensor *em_comp_dropout(em_keyset ks, em_tensor *input, double p, bool training, bool inplace) {
    (void)ks;
    if (check_p(p, "dropout") != EM_OK) return NULL;
    if (p == 0 || !training || input->numel == 0) return em_tensor_retain(input);
    if (p == 1) return finish_dropout(input, times_zero(input), inplace);
    if (!em_dtype_is_floating(input->dtype)) {
        em_set_error(EM_ETYPE, "dropout: argument 'input' must be a floating tensor (got %s)",
                     em_dtype_name(input->dtype));
        return NULL;
    }
    em_tensor *mask = NULL;
    em_tensor *r = em_native_dropout(input, p, true, &mask);
    em_tensor_release(mask);
    return finish_dropout(input, r, inplace);
}

/* PyTorch's _dropout_impl for the feature and alpha forms: one noise tensor
 * (input's shape, or (N, C, 1, ...) when feature) of Bernoulli(1 - p)
 * draws, then input * noise / (1 - p), or for alpha the affine map of
 * Klambauer et al. that keeps SELU's mean and variance. */
static em_tensor *noise_dropout(em_tensor *input, double p, bool training, bool inplace, bool feature, bool alpha,
                                const char *op) {
    if (check_p(p, op) != EM_OK) return NULL;
    if (p == 0 || !training || input->numel == 0) return em_tensor_retain(input);
    if (p == 1) return finish_dropout(input, times_zero(input), inplace);
    if (!em_dtype_is_floating(input->dtype)) {
        em_set_error(EM_ETYPE, "%s: argument 'input' must be a floating tensor (got %s)", op,
                     em_dtype_name(input->dtype));
        return NULL;
    }
    if (feature && input->ndim < 2) {
        em_set_error(EM_ESHAPE, "%s: feature dropout needs at least 2 dims in the input (N, C, ...), got %d", op,
                     input->ndim);
        return NULL;
    }
    int64_t shape[EM_MAX_DIMS];
    for (int i = 0; i < input->ndim; i++) shape[i] = feature && i >= 2 ? 1 : input->sizes[i];
    em_tensor *noise = em_empty((em_intlist){ shape, input->ndim }, input->dtype, input->device);
    if (!noise) return NULL;
    em_tensor *drawn = em_bernoulli__float(noise, 1 - p, NULL);
    em_tensor_release(drawn);
    em_tensor *r = NULL;
    if (!drawn) {
        /* error set by bernoulli_ */
    } else if (!alpha) {
        em_tensor *s = em_tensor_wrapped_scalar(em_scalar_float(1 / (1 - p)));
        em_tensor *ns = s ? em_mul(noise, s) : NULL;
        r = ns ? em_mul(input, ns) : NULL;
        em_tensor_release(s);
        em_tensor_release(ns);
    } else {
        /* PyTorch's arithmetic, al = SELU's alpha * scale:
         * b = (noise - 1) * (al * a) + al * a * p; input * (noise * a) + b */
        const double al = 1.7580993408473766;
        double a = 1.0 / sqrt((al * al * p + 1) * (1 - p));
        em_tensor *one = em_tensor_wrapped_scalar(em_scalar_int(1));
        em_tensor *k1 = em_tensor_wrapped_scalar(em_scalar_float(al * a));
        em_tensor *k2 = em_tensor_wrapped_scalar(em_scalar_float(al * a * p));
        em_tensor *ka = em_tensor_wrapped_scalar(em_scalar_float(a));
        em_tensor *nm1 = one && k1 && k2 && ka ? em_sub(noise, one, em_scalar_int(1)) : NULL;
        em_tensor *b1 = nm1 ? em_mul(nm1, k1) : NULL;
        em_tensor *b = b1 ? em_add(b1, k2, em_scalar_int(1)) : NULL;
        em_tensor *na = b ? em_mul(noise, ka) : NULL;
        em_tensor *xn = na ? em_mul(input, na) : NULL;
        r = xn ? em_add(xn, b, em_scalar_int(1)) : NULL;
        em_tensor *tmp[] = { one, k1, k2, ka, nm1, b1, b, na, xn };
        for (size_t i = 0; i < sizeof tmp / sizeof tmp[0]; i++) em_tensor_release(tmp[i]);
    }
    em_tensor_release(noise);
    return finish_dropout(input, r, inplace);
}

em_tensor *em_comp_alpha_dropout(em_keyset ks, em_tensor *input, double p, bool training, bool inplace) {
    (void)ks;
    return noise_dropout(input, p, training, inplace, false, true, "alpha_dropout");
}
em_tensor *em_comp_feature_alpha_dropout(em_keyset ks, em_tensor *input, double p, bool training, bool inplace) {
    (void)ks;
    return noise_dropout(input, p, training, inplace, true, true, "feature_alpha_dropout");
}

/* dropout1d/2d/3d, as torch.nn.functional 1.13 writes them: dropout1d takes
 * (C, L) or (N, C, L) (others refused); dropout3d gets a batch dim of 1 for
 * any rank but 5; dropout2d never does (3-d input is (N, C, L)). Then
 * channel-wise dropout: noise of shape (N, C, 1, ...). */
static em_tensor *channel_dropout(em_tensor *input, double p, bool training, bool inplace, int batched_ndim,
                                  const char *op) {
    if (check_p(p, op) != EM_OK) return NULL;
    int nd = input->ndim;
    if (batched_ndim == 3 && nd != 3 && nd != 2) {
        em_set_error(EM_ESHAPE, "%s: expected %dD or %dD input, but received a %dD input", op, batched_ndim - 1,
                     batched_ndim, nd);
        return NULL;
    }
    bool unbatched = batched_ndim == 3 ? nd == 2 : batched_ndim == 5 ? nd != 5 : false;
    if (!unbatched) return noise_dropout(input, p, training, inplace, true, false, op);
    em_tensor *u = em_unsqueeze(input, 0);
    em_tensor *r = u ? noise_dropout(u, p, training, false, true, false, op) : NULL;
    int64_t zero = 0;
    em_tensor *s = r ? em_squeeze(r, &zero) : NULL;
    em_tensor_release(u);
    em_tensor_release(r);
    return finish_dropout(input, s, inplace);
}

em_tensor *em_comp_dropout1d(em_keyset ks, em_tensor *input, double p, bool training, bool inplace) {
    (void)ks;
    return channel_dropout(input, p, training, inplace, 3, "dropout1d");
}
em_tensor *em_comp_dropout2d(em_keyset ks, em_tensor *input, double p, bool training, bool inplace) {
    (void)ks;
    return channel_dropout(input, p, training, inplace, 4, "dropout2d");
}
em_tensor *em_comp_dropout3d(em_keyset ks, em_tensor *input, double p, bool training, bool inplace) {
    (void)ks;
    return channel_dropout(input, p, training, inplace, 5, "dropout3d");
}
