/* formulas_activation.c -- helpers of the activation family's backward
 * formulas (schema/derivatives/activation.yaml); contracts in em_formulas.h.
 * Written with the public ops only, so create_graph records them (the
 * second derivatives here are themselves differentiable). */
#include "autograd/em_formulas.h"
#include "em_ops.h"

/* Temporaries of one helper, released together. Every op goes through the
 * macros below, which skip the op (giving NULL) once one has failed, so a
 * helper computes straight-line and checks once at the end. */
typedef struct {
    em_tensor *t[32];
    int n;
    bool bad;
} tmps;

static em_tensor *keep(tmps *k, em_tensor *t) {
    if (!t || k->n == (int)(sizeof k->t / sizeof k->t[0])) {
        em_tensor_release(t);
        k->bad = true;
        return NULL;
    }
    k->t[k->n++] = t;
    return t;
}
/* the result (a new reference, or NULL when an op failed); releases the rest */
static em_tensor *finish(tmps *k, em_tensor *r) {
    if (!k->bad && r) em_tensor_retain(r);
    else r = NULL;
    for (int i = 0; i < k->n; i++) em_tensor_release(k->t[i]);
    return r;
}
#define OK_ (!T.bad)
#define NUM(v) (OK_ ? keep(&T, em_ag_scalar(v)) : NULL)
#define MUL(a, b) (OK_ ? keep(&T, em_mul(a, b)) : NULL)
#define ADD(a, b) (OK_ ? keep(&T, em_add(a, b, em_scalar_int(1))) : NULL)
#define SUB(a, b) (OK_ ? keep(&T, em_sub(a, b, em_scalar_int(1))) : NULL)
#define WHERE(c, a, b) (OK_ ? keep(&T, em_where(c, a, b)) : NULL)
#define LT(a, b) (OK_ ? keep(&T, em_lt(a, b)) : NULL)
#define GT(a, b) (OK_ ? keep(&T, em_gt(a, b)) : NULL)
#define LE(a, b) (OK_ ? keep(&T, em_le(a, b)) : NULL)
#define AND(a, b) (OK_ ? keep(&T, em_logical_and(a, b)) : NULL)
#define SIGMOID(a) (OK_ ? keep(&T, em_sigmoid(a)) : NULL)
#define TANH(a) (OK_ ? keep(&T, em_tanh(a)) : NULL)
#define EXP(a) (OK_ ? keep(&T, em_exp(a)) : NULL)
#define SCALAR(s) (OK_ ? keep(&T, em_ag_scalar_s(s)) : NULL)

em_tensor *em_ag_fn_leaky_relu_grad(em_tensor *grad, em_tensor *x, em_scalar negative_slope, bool is_result) {
    return em_leaky_relu_backward(grad, x, negative_slope, is_result);
}

em_tensor *em_ag_fn_elu_grad(em_tensor *grad, em_tensor *x, em_scalar alpha, int64_t kind) {
    bool celu = kind >= 2, is_result = kind % 2 == 1;
    double a = em_scalar_to_double(alpha);
    if (celu && a == 0) { /* celu refused it already; no node gets here */
        em_set_error(EM_EVALUE, "celu: alpha must not be 0");
        return NULL;
    }
    return em_elu_backward(grad, alpha, em_scalar_int(1), em_scalar_float(celu ? 1.0 / a : 1.0), is_result, x);
}

em_tensor *em_ag_fn_selu_grad(em_tensor *grad, em_tensor *x, bool is_result) {
    return em_elu_backward(grad, em_scalar_float(1.6732632423543772848170429916717),
                           em_scalar_float(1.0507009873554804934193349852946), em_scalar_int(1), is_result, x);
}

em_tensor *em_ag_fn_elu_double_backward(em_tensor *grad, em_tensor *grad_output, em_scalar alpha, em_scalar scale,
                                        em_scalar input_scale, bool is_result, em_tensor *x) {
    tmps T = { .n = 0, .bad = false };
    em_tensor *is = SCALAR(input_scale), *zero = NUM(0);
    em_tensor *d;
    if (is_result) {
        /* g * input_scale * (r + alpha * scale) for r <= 0: d/dr = g * input_scale */
        d = MUL(MUL(grad, grad_output), is);
    } else {
        /* g * input_scale * alpha * scale * exp(x * input_scale): d/dx is input_scale times it */
        em_tensor *b = OK_ ? keep(&T, em_elu_backward(grad_output, alpha, scale, input_scale, false, x)) : NULL;
        d = MUL(MUL(grad, b), is);
    }
    /* PyTorch's elu_double_backward multiplies by the mask x < 0 (0 itself
     * gets nothing; a NaN factor stays NaN) */
    return finish(&T, MUL(d, LT(x, zero)));
}

em_tensor *em_ag_fn_gelu_double_backward(em_tensor *grad, em_tensor *grad_output, em_tensor *x,
                                         const char *approximate) {
    tmps T = { .n = 0, .bad = false };
    em_tensor *gg = MUL(grad, grad_output), *x2 = MUL(x, x), *d;
    if (approximate[0] == 't') {
        /* y = x (1 + t) / 2, t = tanh(u), u = k (x + c x^3):
         * y'' = (1 - t^2) (u' - x t u'^2 + x u'' / 2), u' = k (1 + 3 c x^2), u'' = 6 k c x */
        const double k = 0.7978845608028654, c = 0.044715;
        em_tensor *u = MUL(ADD(x, MUL(MUL(x2, x), NUM(c))), NUM(k));
        em_tensor *t = TANH(u);
        em_tensor *u1 = MUL(ADD(MUL(x2, NUM(3 * c)), NUM(1)), NUM(k));
        em_tensor *sech2 = SUB(NUM(1), MUL(t, t));
        em_tensor *inner = ADD(SUB(u1, MUL(MUL(x, t), MUL(u1, u1))), MUL(x2, NUM(3 * k * c)));
        d = MUL(sech2, inner);
    } else {
        /* y' = Phi(x) + x phi(x): y'' = phi(x) (2 - x^2) */
        em_tensor *pdf = MUL(EXP(MUL(x2, NUM(-0.5))), NUM(0.3989422804014327));
        d = MUL(pdf, SUB(NUM(2), x2));
    }
    return finish(&T, MUL(gg, d));
}

em_tensor *em_ag_fn_silu_double_backward(em_tensor *grad, em_tensor *grad_output, em_tensor *x) {
    /* silu'' = s (1 - s) (2 + x (1 - 2 s)), s = sigmoid(x) */
    tmps T = { .n = 0, .bad = false };
    em_tensor *s = SIGMOID(x), *one = NUM(1);
    em_tensor *ds = MUL(s, SUB(one, s));
    em_tensor *d = MUL(ds, ADD(NUM(2), MUL(x, SUB(one, MUL(s, NUM(2))))));
    return finish(&T, MUL(MUL(grad, grad_output), d));
}

em_tensor *em_ag_fn_mish_double_backward(em_tensor *grad, em_tensor *grad_output, em_tensor *x) {
    /* mish' = t + x s (1 - t^2), t = tanh(softplus(x)), s = sigmoid(x):
     * mish'' = (1 - t^2) s (2 + x ((1 - s) - 2 t s)) */
    tmps T = { .n = 0, .bad = false };
    em_tensor *one = NUM(1), *s = SIGMOID(x);
    em_tensor *sp = OK_ ? keep(&T, em_softplus(x, em_scalar_int(1), em_scalar_int(20))) : NULL;
    em_tensor *t = TANH(sp);
    em_tensor *sech2 = SUB(one, MUL(t, t));
    em_tensor *inner = ADD(NUM(2), MUL(x, SUB(SUB(one, s), MUL(MUL(t, s), NUM(2)))));
    return finish(&T, MUL(MUL(grad, grad_output), MUL(MUL(sech2, s), inner)));
}

em_tensor *em_ag_fn_softplus_double_backward(em_tensor *grad, em_tensor *grad_output, em_tensor *x, em_scalar beta,
                                             em_scalar threshold) {
    /* softplus' = sigmoid(beta x) (1 where beta x > threshold):
     * softplus'' = beta s (1 - s), 0 where beta x > threshold -- as
     * PyTorch, a product with the mask (beta x <= threshold), so an
     * infinite grad there gives NaN, not 0 */
    tmps T = { .n = 0, .bad = false };
    em_tensor *b = SCALAR(beta), *bx = MUL(x, b), *s = SIGMOID(bx);
    em_tensor *d = MUL(MUL(s, SUB(NUM(1), s)), b);
    em_tensor *g = MUL(MUL(grad, grad_output), d);
    return finish(&T, MUL(g, LE(bx, SCALAR(threshold))));
}

em_tensor *em_ag_fn_hardswish_double_backward(em_tensor *grad, em_tensor *grad_output, em_tensor *x) {
    /* hardswish' = x / 3 + 1/2 on [-3, 3]: hardswish'' = 1/3 inside (PyTorch's open interval) */
    tmps T = { .n = 0, .bad = false };
    em_tensor *inside = AND(LT(NUM(-3), x), LT(x, NUM(3)));
    em_tensor *g = MUL(MUL(grad, grad_output), NUM(1.0 / 3.0));
    return finish(&T, WHERE(inside, g, NUM(0)));
}

em_tensor *em_ag_fn_log_sigmoid_double_backward(em_tensor *grad, em_tensor *grad_output, em_tensor *x) {
    /* logsigmoid' = 1 - sigmoid(x): logsigmoid'' = -s (1 - s) */
    tmps T = { .n = 0, .bad = false };
    em_tensor *s = SIGMOID(x);
    em_tensor *d = MUL(s, SUB(s, NUM(1)));
    return finish(&T, MUL(MUL(grad, grad_output), d));
}

em_tensor *em_ag_fn_native_dropout_grad(em_tensor *grad, em_tensor *mask, double p, bool train) {
    double scale = !train ? 1.0 : p == 1 ? 0.0 : 1.0 / (1.0 - p);
    return em_native_dropout_backward(grad, mask, scale);
}
