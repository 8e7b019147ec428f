/* formulas_loss2.c -- formula helpers of the loss2 family (the binary
 * losses' target gradients and their backward ops' derivatives, PyTorch's
 * binary_cross_entropy_*_backward formulas of FunctionsManual.cpp),
 * declared in em_formulas.h. Written with the public ops only, so that
 * create_graph records them (Note [Binary losses] in
 * runtime/kernels/cpu/loss2.c has the terms).
 */
#include <math.h>
#include <string.h>

#include "autograd/em_formulas.h"
#include "em_ops.h"

/* The temporaries of one formula: every step's result is kept until fx_end;
 * after a failed step FX skips the rest (its arguments could be NULL). */
typedef struct {
    em_tensor *t[24];
    int n;
    bool fail;
} fx;

static em_tensor *fx_keep(fx *f, em_tensor *t) {
    if (!t || f->n == 24) {
        em_tensor_release(t);
        f->fail = true;
        return NULL;
    }
    return f->t[f->n++] = t;
}
#define FX(f, expr) ((f)->fail ? NULL : fx_keep((f), (expr)))

/* r retained (NULL after a failure), then every temporary released. */
static em_tensor *fx_end(fx *f, em_tensor *r) {
    r = f->fail ? NULL : em_tensor_retain(r);
    for (int i = 0; i < f->n; i++) em_tensor_release(f->t[i]);
    return r;
}

static em_tensor *fx_num(fx *f, double v) { return FX(f, em_ag_scalar(v)); }

/* k * weight (when given) / n (for mean, n = input's element count). */
static em_tensor *fx_scale(fx *f, em_tensor *k, em_tensor *weight, const char *reduction, const em_tensor *input) {
    if (weight) k = FX(f, em_mul(k, weight));
    if (strcmp(reduction, "mean") == 0) k = FX(f, em_div(k, fx_num(f, (double)input->numel)));
    return k;
}

/* binary_cross_entropy's target gradient: grad * -logit(input), as
 * log1p(-input) - log(input) (unclamped, as PyTorch), times weight, / n. */
em_tensor *em_ag_fn_bce_target_grad(em_tensor *grad, em_tensor *input, em_tensor *target, em_tensor *weight,
                                    const char *reduction) {
    (void)target;
    fx f = { 0 };
    em_tensor *l1 = FX(&f, em_log1p(FX(&f, em_neg(input))));
    em_tensor *nl = FX(&f, em_sub(l1, FX(&f, em_log(input)), em_scalar_int(1)));
    em_tensor *r = fx_scale(&f, FX(&f, em_mul(grad, nl)), weight, reduction, input);
    return fx_end(&f, r);
}

/* binary_cross_entropy_backward's gradient for input (which 0) or target
 * (which 1), k = grad * grad_output * weight (/ n):
 *   input:  k (x^2 - 2 x t + t) / ((x + eps)^2 (1 - x + eps)^2)  (PyTorch's
 *           binary_cross_entropy_double_backward, eps = 1e-12)
 *   target: -k / max(x (1 - x), eps)  (the backward op's own clamp). */
em_tensor *em_ag_fn_bce_double_backward(em_tensor *grad, em_tensor *grad_output, em_tensor *input,
                                        em_tensor *target, em_tensor *weight, const char *reduction, int64_t which) {
    fx f = { 0 };
    const double eps = 1e-12;
    em_tensor *k = fx_scale(&f, FX(&f, em_mul(grad, grad_output)), weight, reduction, input);
    em_tensor *one = fx_num(&f, 1.0);
    em_tensor *omx = FX(&f, em_sub(one, input, em_scalar_int(1))); /* 1 - x */
    em_tensor *r;
    if (which == 0) {
        em_tensor *xx = FX(&f, em_mul(input, input));
        em_tensor *xt = FX(&f, em_mul(input, target));
        em_tensor *num = FX(&f, em_add(FX(&f, em_sub(xx, xt, em_scalar_int(2))), target, em_scalar_int(1)));
        em_tensor *e = fx_num(&f, eps);
        em_tensor *a = FX(&f, em_add(input, e, em_scalar_int(1)));
        em_tensor *b = FX(&f, em_add(omx, e, em_scalar_int(1)));
        em_tensor *ab = FX(&f, em_mul(a, b));
        em_tensor *den = FX(&f, em_mul(ab, ab));
        r = FX(&f, em_mul(k, FX(&f, em_div(num, den))));
    } else {
        em_tensor *d = FX(&f, em_clamp_min(FX(&f, em_mul(input, omx)), em_scalar_float(eps)));
        r = FX(&f, em_neg(FX(&f, em_div(k, d))));
    }
    return fx_end(&f, r);
}

/* binary_cross_entropy_with_logits's target gradient: grad * (-x), or with
 * pos_weight p grad * (logsigmoid(-x) - p logsigmoid(x)); times weight, / n. */
em_tensor *em_ag_fn_bcewl_target_grad(em_tensor *grad, em_tensor *input, em_tensor *target, em_tensor *weight,
                                      em_tensor *pos_weight, const char *reduction) {
    (void)target;
    fx f = { 0 };
    em_tensor *d;
    if (pos_weight) {
        em_tensor *a = FX(&f, em_logsigmoid(FX(&f, em_neg(input))));
        em_tensor *b = FX(&f, em_mul(pos_weight, FX(&f, em_logsigmoid(input))));
        d = FX(&f, em_sub(a, b, em_scalar_int(1)));
    } else {
        d = FX(&f, em_neg(input));
    }
    em_tensor *r = fx_scale(&f, FX(&f, em_mul(grad, d)), weight, reduction, input);
    return fx_end(&f, r);
}

/* binary_cross_entropy_with_logits_backward's gradient for input (which 0)
 * or target (which 1), k = grad * grad_output * weight (/ n), s = sigmoid(x):
 *   input:  k (p t + 1 - t) s (1 - s)   (k s (1 - s) without p)
 *   target: k ((p - 1) s - p)           (-k without p). */
em_tensor *em_ag_fn_bcewl_double_backward(em_tensor *grad, em_tensor *grad_output, em_tensor *input,
                                          em_tensor *target, em_tensor *weight, em_tensor *pos_weight,
                                          const char *reduction, int64_t which) {
    fx f = { 0 };
    em_tensor *k = fx_scale(&f, FX(&f, em_mul(grad, grad_output)), weight, reduction, input);
    em_tensor *one = fx_num(&f, 1.0);
    em_tensor *s = FX(&f, em_sigmoid(input));
    em_tensor *r;
    if (which == 0) {
        em_tensor *ds = FX(&f, em_mul(s, FX(&f, em_sub(one, s, em_scalar_int(1)))));
        if (pos_weight) {
            em_tensor *pt = FX(&f, em_mul(pos_weight, target));
            em_tensor *l = FX(&f, em_sub(FX(&f, em_add(pt, one, em_scalar_int(1))), target, em_scalar_int(1)));
            ds = FX(&f, em_mul(ds, l));
        }
        r = FX(&f, em_mul(k, ds));
    } else if (pos_weight) {
        em_tensor *pm = FX(&f, em_sub(pos_weight, one, em_scalar_int(1)));
        em_tensor *d = FX(&f, em_sub(FX(&f, em_mul(pm, s)), pos_weight, em_scalar_int(1)));
        r = FX(&f, em_mul(k, d));
    } else {
        r = FX(&f, em_neg(k));
    }
    return fx_end(&f, r);
}

/* ctc_loss has no double backward (PyTorch's _ctc_loss_backward has no
 * derivative either): a create_graph backward records the node, and
 * differentiating through it fails here with a catchable error. */
em_tensor *em_ag_fn_ctc_double_backward(em_tensor *log_probs) {
    (void)log_probs;
    em_set_error(EM_ETYPE, "_ctc_loss_backward: the derivative of ctc_loss's gradient is not implemented (as in PyTorch)");
    return NULL;
}
