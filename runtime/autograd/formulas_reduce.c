/* formulas_reduce.c -- formula helpers of the reduce family (scans:
 * cumsum, cumprod, logcumsumexp), declared in em_formulas.h. Written with
 * the public ops only, so that create_graph records them (double backward).
 *
 * A reversal along a dim is a gather with the index n, n-1, ..., 1: gather
 * is differentiable at any order (its gradient is gather_backward, whose
 * gradient is gather), so the reversed scans PyTorch builds from flip
 * (reversed_cumsum, reverse_logcumsumexp) keep their double backward here.
 */
#include <float.h>
#include <math.h>
#include <stdlib.h>

#include "autograd/em_ag_alloc.h"
#include "autograd/em_formulas.h"
#include "em_ops.h"

static void release_all(int n, em_tensor **t) {
    for (int i = 0; i < n; i++) em_tensor_release(t[i]);
}

/* t reversed along dim d (0-based, wrapped; t has a dim). */
static em_tensor *reverse(em_tensor *t, int d) {
    int64_t n = t->sizes[d];
    if (n <= 1) return em_tensor_retain(t);
    em_scalar end = em_scalar_int(0);
    em_tensor *r = em_arange(em_scalar_int(n), &end, em_scalar_int(-1), EM_INT64, t->device);
    if (!r) return NULL;
    int64_t shape[EM_MAX_DIMS];
    for (int i = 0; i < t->ndim; i++) shape[i] = i == d ? n : 1;
    em_tensor *v = em_view(r, (em_intlist){ shape, t->ndim });
    em_tensor *e = v ? em_expand(v, (em_intlist){ t->sizes, t->ndim }) : NULL;
    em_tensor *out = e ? em_gather(t, d, e) : NULL;
    em_tensor_release(r);
    em_tensor_release(v);
    em_tensor_release(e);
    return out;
}

/* sum over j >= k along d of t_j: flip, cumsum, flip (PyTorch's
 * reversed_cumsum, the same additions in the same order). */
static em_tensor *reversed_cumsum(em_tensor *t, int d) {
    em_tensor *a = reverse(t, d);
    em_tensor *b = a ? em_cumsum(a, d, EM_DTYPE_NONE) : NULL;
    em_tensor *r = b ? reverse(b, d) : NULL;
    em_tensor_release(a);
    em_tensor_release(b);
    return r;
}

em_tensor *em_ag_fn_cumsum_backward(em_tensor *grad, int64_t dim) {
    if (grad->ndim == 0 || grad->numel == 0) return em_tensor_retain(grad);
    int d = em_wrap_dim(dim, grad->ndim, "cumsum backward");
    if (d < 0) return NULL;
    return reversed_cumsum(grad, d);
}

/* PyTorch's O(n^2) gradient of cumprod, differentiable also where self has
 * zeros: slot k is sum(grad[k:] * (prod(self[:k]) * cumprod of self[k+1:],
 * with 1 in front)), the slots concatenated along d. */
static em_tensor *cumprod_grad_zeros(em_tensor *grad, em_tensor *self, int d) {
    int64_t n = self->sizes[d];
    em_tensor **slots = em_ag_calloc((size_t)n, sizeof *slots);
    if (!slots) {
        em_set_error(EM_ENOMEM, "cumprod backward: out of memory");
        return NULL;
    }
    int64_t one_shape[EM_MAX_DIMS];
    for (int i = 0; i < self->ndim; i++) one_shape[i] = i == d ? 1 : self->sizes[i];
    em_tensor *ones = em_ones((em_intlist){ one_shape, self->ndim }, grad->dtype, grad->device);
    em_tensor *r = NULL;
    int64_t k = 0;
    for (; ones && k < n; k++) {
        enum { BEFORE, FROM, PRODS, OM, LIST0, GS, PR, K };
        em_tensor *t[K] = { NULL };
        bool ok = true;
        if (k > 0) {
            int64_t dd = d;
            ok = (t[BEFORE] = em_narrow(self, d, 0, k)) &&
                 (t[PRODS] = em_prod(t[BEFORE], &dd, true, EM_DTYPE_NONE));
        }
        if (ok && k < n - 1) {
            ok = (t[FROM] = em_narrow(self, d, k + 1, n - k - 1)) != NULL;
            em_tensor *cp = ok ? em_cumprod(t[FROM], d, EM_DTYPE_NONE) : NULL;
            ok = cp != NULL;
            if (ok && t[PRODS]) {
                em_tensor *m = em_mul(t[PRODS], cp);
                em_tensor_release(cp);
                cp = m;
                ok = cp != NULL;
            }
            if (ok) {
                em_tensor *head = t[PRODS] ? t[PRODS] : ones;
                em_tensor *parts[2] = { head, cp };
                t[OM] = em_cat((em_tensorlist){ parts, 2 }, d);
                ok = t[OM] != NULL;
            }
            em_tensor_release(cp);
        } else if (ok) {
            t[OM] = em_tensor_retain(t[PRODS] ? t[PRODS] : ones);
        }
        if (ok) {
            int64_t dd = d;
            em_intlist dl = { &dd, 1 };
            ok = (t[GS] = em_narrow(grad, d, k, n - k)) && (t[PR] = em_mul(t[GS], t[OM])) &&
                 (slots[k] = em_sum(t[PR], dl, true, EM_DTYPE_NONE));
        }
        release_all(K, t);
        if (!ok) break;
    }
    if (ones && k == n) r = em_cat((em_tensorlist){ slots, (int)n }, d);
    for (int64_t i = 0; i < n; i++) em_tensor_release(slots[i]);
    free(slots);
    em_tensor_release(ones);
    return r;
}

em_tensor *em_ag_fn_cumprod_grad(em_tensor *grad, em_tensor *self, int64_t dim, em_tensor *result) {
    if (self->numel <= 1) return em_tensor_retain(grad);
    int d = em_wrap_dim(dim, self->ndim, "cumprod backward");
    if (d < 0) return NULL;
    if (self->sizes[d] == 1) return em_tensor_retain(grad);
    /* no double backward recorded: the exact O(n) kernel */
    if (!em_is_grad_enabled()) return em_cumprod_backward(grad, self, d, result);
    enum { Z, NZ, ANY, W, RC, K };
    em_tensor *t[K] = { NULL };
    em_tensor *r = NULL;
    if (!(t[Z] = em_ag_scalar(0)) || !(t[NZ] = em_eq(self, t[Z])) || !(t[ANY] = em_any(t[NZ], NULL, false)))
        goto out;
    /* the flag on the host (any's result lives on self's device) */
    em_tensor *host = t[ANY]->device.type == EM_CPU ? em_tensor_retain(t[ANY]) : em_to_device(t[ANY], em_cpu_device());
    if (!host) goto out;
    bool zeros = *(bool *)em_tensor_data(host);
    em_tensor_release(host);
    if (zeros) {
        r = cumprod_grad_zeros(grad, self, d);
        goto out;
    }
    /* no zeros: reversed_cumsum(grad * result) / self */
    if (!(t[W] = em_mul(grad, result)) || !(t[RC] = reversed_cumsum(t[W], d))) goto out;
    r = em_div(t[RC], self);
out:
    release_all(K, t);
    return r;
}

/* PyTorch's logcumsumexp_backward: the positive and negative parts of grad
 * in log space, each through a reversed logcumsumexp (stable). */
em_tensor *em_ag_fn_logcumsumexp_backward(em_tensor *grad, em_tensor *self, em_tensor *result, int64_t dim) {
    if (grad->ndim == 0 || grad->numel == 0) return em_tensor_retain(grad);
    int d = em_wrap_dim(dim, grad->ndim, "logcumsumexp backward");
    if (d < 0) return NULL;
    /* the dtype's lowest finite value stands for log(0) */
    double lowest = grad->dtype == EM_FLOAT64 ? -DBL_MAX : grad->dtype == EM_FLOAT16 ? -65504.0 : -FLT_MAX;
    enum { Z, MINV, POS, NEG, LP, NG, LN, LGP, LGN, DP, DN, RP, RN, RP2, RN2, SP, SN, EP, EN, K };
    em_tensor *t[K] = { NULL };
    em_tensor *r = NULL;
    if (!(t[Z] = em_ag_scalar(0)) || !(t[MINV] = em_ag_scalar(lowest)) || !(t[POS] = em_gt(grad, t[Z])) ||
        !(t[NEG] = em_lt(grad, t[Z])) || !(t[LP] = em_log(grad)) || !(t[NG] = em_neg(grad)) ||
        !(t[LN] = em_log(t[NG])) || !(t[LGP] = em_where(t[POS], t[LP], t[MINV])) ||
        !(t[LGN] = em_where(t[NEG], t[LN], t[MINV])) || !(t[DP] = em_sub(t[LGP], result, em_scalar_int(1))) ||
        !(t[DN] = em_sub(t[LGN], result, em_scalar_int(1))) || !(t[RP] = reverse(t[DP], d)) ||
        !(t[RN] = reverse(t[DN], d)) || !(t[RP2] = em_logcumsumexp(t[RP], d)) ||
        !(t[RN2] = em_logcumsumexp(t[RN], d)))
        goto out;
    em_tensor *bp = reverse(t[RP2], d), *bn = bp ? reverse(t[RN2], d) : NULL;
    t[SP] = bp ? em_add(bp, self, em_scalar_int(1)) : NULL;
    t[SN] = bn ? em_add(bn, self, em_scalar_int(1)) : NULL;
    em_tensor_release(bp);
    em_tensor_release(bn);
    if (!t[SP] || !t[SN] || !(t[EP] = em_exp(t[SP])) || !(t[EN] = em_exp(t[SN]))) goto out;
    r = em_sub(t[EP], t[EN], em_scalar_int(1));
out:
    release_all(K, t);
    return r;
}
