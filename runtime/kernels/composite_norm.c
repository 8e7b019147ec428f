/* composite_norm.c -- the normalisation family's nn.functional entry points
 * (layer_norm, ...), written with public ops only as composite.c explains
 * (Note [Composite ops] in codegen/codegen.h): each checks its arguments
 * (so errors name the op the user called) and calls the family's fused
 * native_* op, whose formula gives autograd. */
#include "autograd/em_autograd.h"
#include "em_ops.h"
#include "em_kernels_decl.h"
#include "kernels/norm_check.h"

em_tensor *em_comp_layer_norm(em_keyset ks, em_tensor *input, em_intlist normalized_shape, em_tensor *weight,
                              em_tensor *bias, double eps) {
    (void)ks;
    int64_t M, N;
    if (!em_norm_check_layer_norm(input, normalized_shape, weight, bias, "layer_norm", &M, &N)) return NULL;
    em_tensor *mean = NULL, *rstd = NULL;
    em_tensor *y = em_native_layer_norm(input, normalized_shape, weight, bias, eps, &mean, &rstd);
    em_tensor_release(mean);
    em_tensor_release(rstd);
    return y;
}

/* F.batch_norm: the training check of torch's functional batch_norm, then
 * native_batch_norm (which updates the running statistics in place). */
em_tensor *em_comp_batch_norm(em_keyset ks, em_tensor *input, em_tensor *running_mean, em_tensor *running_var,
                              em_tensor *weight, em_tensor *bias, bool training, double momentum, double eps) {
    (void)ks;
    const char *op = "batch_norm";
    if (!em_norm_check_batch_norm(input, weight, bias, op)) return NULL;
    if (training) {
        int64_t n = input->sizes[0];
        for (int d = 2; d < input->ndim; d++) n *= input->sizes[d];
        if (n == 1) {
            char b[EM_SHAPE_STR_MAX];
            em_set_error(EM_EVALUE, "%s: expected more than 1 value per channel when training, got input of shape %s",
                         op, em_shape_str(input->ndim, input->sizes, b, sizeof b));
            return NULL;
        }
    } else if (!running_mean || !running_var) {
        em_set_error(EM_EVALUE, "%s: running_mean and running_var must be given in evaluation mode (training=false)",
                     op);
        return NULL;
    }
    em_tensor *sm = NULL, *si = NULL;
    em_tensor *y = em_native_batch_norm(input, weight, bias, running_mean, running_var, training, momentum, eps, &sm, &si);
    em_tensor_release(sm);
    em_tensor_release(si);
    return y;
}

em_tensor *em_comp_group_norm(em_keyset ks, em_tensor *input, int64_t num_groups, em_tensor *weight, em_tensor *bias,
                              double eps) {
    (void)ks;
    if (!em_norm_check_group_norm(input, num_groups, weight, bias, "group_norm")) return NULL;
    /* torch's F.group_norm: _verify_batch_size of (N*C/G, G, spatial...) */
    int64_t n = input->ndim >= 2 ? input->sizes[0] * input->sizes[1] / num_groups : 0;
    for (int d = 2; d < input->ndim; d++) n *= input->sizes[d];
    if (n == 1) {
        char b[EM_SHAPE_STR_MAX];
        em_set_error(EM_EVALUE, "group_norm: expected more than 1 value per group, got input of shape %s with "
                     "%lld groups", em_shape_str(input->ndim, input->sizes, b, sizeof b), (long long)num_groups);
        return NULL;
    }
    em_tensor *mean = NULL, *rstd = NULL;
    em_tensor *y = em_native_group_norm(input, weight, bias, num_groups, eps, &mean, &rstd);
    em_tensor_release(mean);
    em_tensor_release(rstd);
    return y;
}

/* ---- composites of ops: rms_norm, instance_norm, local_response_norm ----
 * Temporaries go into a small scope (ns_*): every tensor made on the way is
 * released at the end; a NULL (failed part, error set) makes every later
 * step NULL, so one check at the end suffices. */

#define NS_MAX 48
typedef struct {
    em_tensor *t[NS_MAX];
    int n;
    bool failed;
} ns_scope;

static em_tensor *ns_keep(ns_scope *s, em_tensor *t) {
    if (!t || s->failed || s->n == NS_MAX) {
        if (t) {
            em_tensor_release(t);
            if (!s->failed) em_set_error(EM_EINTERNAL, "norm composite: too many temporaries");
        }
        s->failed = true;
        return NULL;
    }
    return s->t[s->n++] = t;
}

/* Releases every temporary but keep, which is returned owned (NULL when the
 * scope failed). */
static em_tensor *ns_finish(ns_scope *s, em_tensor *keep) {
    em_tensor *r = NULL;
    for (int i = 0; i < s->n; i++) {
        if (s->t[i] == keep && !s->failed && !r) r = s->t[i];
        else em_tensor_release(s->t[i]);
    }
    return r;
}

#define K(call) (s.failed ? NULL : ns_keep(&s, (call)))
#define NUM(v) em_tensor_wrapped_scalar(em_scalar_float(v))

/* rms_norm (torch 2.4's F.rms_norm): x rsqrt(mean(x^2) + eps) w over the
 * trailing normalized_shape dims, computed in float32 for bfloat16/float16
 * (torch's opmath upcast); eps None is the machine epsilon of input's
 * dtype (torch.finfo(dtype).eps). */
em_tensor *em_comp_rms_norm(em_keyset ks, em_tensor *input, em_intlist normalized_shape, em_tensor *weight,
                            const em_scalar *eps) {
    (void)ks;
    const char *op = "rms_norm";
    char b1[EM_SHAPE_STR_MAX], b2[EM_SHAPE_STR_MAX];
    if (!em_dtype_is_floating(input->dtype)) {
        em_set_error(EM_ETYPE, "%s: argument 'input' must be a floating tensor, got %s", op,
                     em_dtype_name(input->dtype));
        return NULL;
    }
    int lead = input->ndim - normalized_shape.n;
    bool ok = normalized_shape.n >= 1 && lead >= 0;
    for (int i = 0; ok && i < normalized_shape.n; i++) ok = input->sizes[lead + i] == normalized_shape.data[i];
    if (!ok) {
        em_set_error(EM_ESHAPE, "%s: input of shape %s does not end in normalized_shape %s", op,
                     em_shape_str(input->ndim, input->sizes, b1, sizeof b1),
                     em_shape_str(normalized_shape.n, normalized_shape.data, b2, sizeof b2));
        return NULL;
    }
    if (weight) {
        bool same = weight->ndim == normalized_shape.n;
        for (int i = 0; same && i < normalized_shape.n; i++) same = weight->sizes[i] == normalized_shape.data[i];
        if (!same) {
            em_set_error(EM_ESHAPE, "%s: weight of shape %s must have normalized_shape %s", op,
                         em_shape_str(weight->ndim, weight->sizes, b1, sizeof b1),
                         em_shape_str(normalized_shape.n, normalized_shape.data, b2, sizeof b2));
            return NULL;
        }
    }
    double e = eps ? em_scalar_to_double(*eps)
               : input->dtype == EM_FLOAT64  ? 2.220446049250313e-16
               : input->dtype == EM_FLOAT32  ? 1.1920928955078125e-07
               : input->dtype == EM_BFLOAT16 ? 0.0078125
                                             : 0.0009765625; /* float16 */
    int64_t dims[EM_MAX_DIMS];
    for (int i = 0; i < normalized_shape.n; i++) dims[i] = lead + i;
    ns_scope s = { .n = 0 };
    bool low = input->dtype == EM_FLOAT16 || input->dtype == EM_BFLOAT16;
    em_tensor *x = low ? K(em_to(input, EM_FLOAT32)) : input;
    em_tensor *ms = K(em_mean(K(em_mul(x, x)), (em_intlist){ dims, normalized_shape.n }, true, EM_DTYPE_NONE));
    em_tensor *y = K(em_mul(x, K(em_rsqrt(K(em_add(ms, K(NUM(e)), em_scalar_int(1)))))));
    if (low) y = K(em_to(y, input->dtype));
    if (weight) y = K(em_mul(y, weight));
    return ns_finish(&s, y);
}

/* instance_norm as torch composes it: batch_norm of input viewed as
 * (1, N*C, ...) with weight, bias and the running statistics repeated N
 * times; with use_input_stats the running statistics then take the mean
 * over the batch of the N updated copies. */
em_tensor *em_comp_instance_norm(em_keyset ks, em_tensor *input, em_tensor *running_mean, em_tensor *running_var,
                                 em_tensor *weight, em_tensor *bias, bool use_input_stats, double momentum,
                                 double eps) {
    (void)ks;
    const char *op = "instance_norm";
    char b[EM_SHAPE_STR_MAX];
    if (input->ndim < 3) {
        em_set_error(EM_ESHAPE, "%s: input must have at least 3 dims (N, C, ...), got shape %s", op,
                     em_shape_str(input->ndim, input->sizes, b, sizeof b));
        return NULL;
    }
    if (!em_norm_check_batch_norm(input, weight, bias, op)) return NULL;
    int64_t N = input->sizes[0], C = input->sizes[1], S = 1;
    for (int d = 2; d < input->ndim; d++) S *= input->sizes[d];
    const em_tensor *st[2] = { running_mean, running_var };
    const char *sn[2] = { "running_mean", "running_var" };
    for (int k = 0; k < 2; k++)
        if (st[k] && (st[k]->ndim != 1 || st[k]->sizes[0] != C)) {
            em_set_error(EM_ESHAPE, "%s: %s must be of shape {%lld} (one value per channel), got %s", op, sn[k],
                         (long long)C, em_shape_str(st[k]->ndim, st[k]->sizes, b, sizeof b));
            return NULL;
        }
    if (use_input_stats && S == 1) {
        em_set_error(EM_EVALUE, "%s: expected more than 1 spatial element when training, got input of shape %s", op,
                     em_shape_str(input->ndim, input->sizes, b, sizeof b));
        return NULL;
    }
    if (!use_input_stats && (!running_mean || !running_var)) {
        em_set_error(EM_EVALUE, "%s: running_mean and running_var must be given when use_input_stats is false", op);
        return NULL;
    }
    ns_scope s = { .n = 0 };
    int64_t rep = N, shp[EM_MAX_DIMS];
    em_intlist reps = { &rep, 1 };
    shp[0] = 1;
    shp[1] = N * C;
    for (int d = 2; d < input->ndim; d++) shp[d] = input->sizes[d];
    em_tensor *x = K(em_reshape(input, (em_intlist){ shp, input->ndim }));
    em_tensor *w = weight ? K(em_repeat(weight, reps)) : NULL;
    em_tensor *bb = bias ? K(em_repeat(bias, reps)) : NULL;
    em_tensor *rm = running_mean ? K(em_repeat(running_mean, reps)) : NULL;
    em_tensor *rv = running_var ? K(em_repeat(running_var, reps)) : NULL;
    em_tensor *sm = NULL, *si = NULL;
    em_tensor *y = s.failed ? NULL : K(em_native_batch_norm(x, w, bb, rm, rv, use_input_stats, momentum, eps, &sm, &si));
    if (sm) ns_keep(&s, sm);
    if (si) ns_keep(&s, si);
    if (use_input_stats && !s.failed) {
        int64_t nc[2] = { N, C }, zero = 0;
        em_tensor *pairs[2][2] = { { running_mean, rm }, { running_var, rv } };
        for (int k = 0; k < 2 && !s.failed; k++) {
            if (!pairs[k][0]) continue;
            em_tensor *m = K(em_mean(K(em_reshape(pairs[k][1], (em_intlist){ nc, 2 })), (em_intlist){ &zero, 1 },
                                     false, EM_DTYPE_NONE));
            if (m) { /* a plain data update, as torch's running_mean.copy_ (no history) */
                em_grad_guard g = em_grad_guard_begin(false);
                em_tensor *c = em_copy_(pairs[k][0], m);
                em_grad_guard_end(g);
                if (c) em_tensor_release(c);
                else s.failed = true;
            }
        }
    }
    y = y ? K(em_reshape(y, (em_intlist){ input->sizes, input->ndim })) : NULL;
    return ns_finish(&s, y);
}

/* local_response_norm, torch's composite: input / (k + alpha * mean of the
 * squares over a window of `size` channels around each one, zero padded:
 * size/2 before, (size-1)/2 after)^beta. */
em_tensor *em_comp_local_response_norm(em_keyset ks, em_tensor *input, int64_t size, double alpha, double beta,
                                       double k) {
    (void)ks;
    const char *op = "local_response_norm";
    if (input->ndim < 3) {
        em_set_error(EM_ESHAPE, "%s: expected an input of 3 or more dims, got %d", op, input->ndim);
        return NULL;
    }
    if (size < 1) {
        em_set_error(EM_EVALUE, "%s: size must be positive, got %lld", op, (long long)size);
        return NULL;
    }
    if (input->numel == 0) return em_tensor_retain(input); /* torch returns input itself */
    ns_scope s = { .n = 0 };
    int64_t C = input->sizes[1], before = size / 2, after = (size - 1) / 2;
    em_tensor *sq = K(em_mul(input, input));
    em_tensor *parts[3] = { NULL, sq, NULL };
    int np = 0;
    em_tensor *list[3];
    int64_t zs[EM_MAX_DIMS];
    for (int d = 0; d < input->ndim; d++) zs[d] = input->sizes[d];
    if (before > 0) {
        zs[1] = before;
        parts[0] = K(em_zeros((em_intlist){ zs, input->ndim }, sq ? sq->dtype : input->dtype, input->device));
    }
    if (after > 0) {
        zs[1] = after;
        parts[2] = K(em_zeros((em_intlist){ zs, input->ndim }, sq ? sq->dtype : input->dtype, input->device));
    }
    for (int i = 0; i < 3; i++)
        if (parts[i] || i == 1) list[np++] = parts[i];
    em_tensor *padded = np > 1 && !s.failed ? K(em_cat((em_tensorlist){ list, np }, 1)) : sq;
    em_tensor *acc = NULL;
    for (int64_t j = 0; j < size && !s.failed; j++) {
        em_tensor *win = K(em_narrow(padded, 1, j, C));
        acc = acc ? K(em_add(acc, win, em_scalar_int(1))) : win;
    }
    em_tensor *div = K(em_mul(acc, K(NUM(alpha / (double)size))));
    div = K(em_pow(K(em_add(div, K(NUM(k)), em_scalar_int(1))), K(NUM(beta))));
    return ns_finish(&s, K(em_div(input, div)));
}
#undef K
#undef NUM
