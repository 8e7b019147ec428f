/* composite_loss2.c -- composite ops of the loss2 family (kl_div, ctc_loss): written
 * with the public ops, so autograd, double backward and every backend come
 * from their parts (Note [Composite ops] in codegen/codegen.h). The key set
 * argument is unused.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "autograd/em_autograd.h"
#include "em_ops.h"
#include "em_kernels_decl.h"

/* kl_div as PyTorch 1.13's composite: xlogy(target, target) - target *
 * input, or exp(target) * (target - input) for log_target (input and
 * target broadcast), then the reduction; batchmean is the sum divided by
 * input's first size (the sum itself for a 0-dim input; 0/0 = NaN for an
 * empty batch), as torch.nn.functional.kl_div. */
em_tensor *em_comp_kl_div(em_keyset ks, em_tensor *input, em_tensor *target, const char *reduction,
                          bool log_target) {
    (void)ks;
    if (!em_dtype_is_floating(input->dtype) || !em_dtype_is_floating(target->dtype)) {
        em_set_error(EM_ETYPE, "kl_div: expected floating input and target (integral inputs not supported), got %s and %s",
                     em_dtype_name(input->dtype), em_dtype_name(target->dtype));
        return NULL;
    }
    em_tensor *a = NULL, *b = NULL, *out = NULL;
    if (log_target) {
        a = em_exp(target);
        b = a ? em_sub(target, input, em_scalar_int(1)) : NULL;
        out = b ? em_mul(a, b) : NULL;
    } else {
        a = em_xlogy(target, target);
        b = a ? em_mul(target, input) : NULL;
        out = b ? em_sub(a, b, em_scalar_int(1)) : NULL;
    }
    em_tensor_release(a);
    em_tensor_release(b);
    if (!out || strcmp(reduction, "none") == 0) return out;
    em_intlist all = { NULL, -1 };
    em_tensor *r;
    if (strcmp(reduction, "mean") == 0) {
        r = em_mean(out, all, false, EM_DTYPE_NONE);
    } else {
        r = em_sum(out, all, false, EM_DTYPE_NONE);
        if (r && strcmp(reduction, "batchmean") == 0 && input->ndim > 0) {
            em_tensor *n = em_tensor_wrapped_scalar(em_scalar_int(input->sizes[0]));
            em_tensor *q = n ? em_div(r, n) : NULL;
            em_tensor_release(n);
            em_tensor_release(r);
            r = q;
        }
    }
    em_tensor_release(out);
    return r;
}

/* ctc_loss (Note [CTC] in runtime/kernels/cpu/loss2_ctc.c): unbatched
 * log_probs (T, C) get N = 1 (and the result loses it); their targets are
 * read as for N = 1, so 1-d ones hold exactly target_lengths[1] labels
 * and (1, S) ones are padded, as PyTorch 1.13;
 * _ctc_loss gives the per-sample losses, zero_infinity replaces infinite
 * ones by 0, and mean divides each by max(target length, 1) before the
 * mean over samples, as PyTorch 1.13's ctc_loss. */
em_tensor *em_comp_ctc_loss(em_keyset ks, em_tensor *log_probs, em_tensor *targets, em_intlist input_lengths,
                            em_intlist target_lengths, int64_t blank, const char *reduction, bool zero_infinity) {
    (void)ks;
    char a[EM_SHAPE_STR_MAX];
    if (log_probs->ndim != 2 && log_probs->ndim != 3) {
        em_set_error(EM_ESHAPE, "ctc_loss: log_probs must have shape (T, N, C) or unbatched (T, C), got %s",
                     em_shape_str(log_probs->ndim, log_probs->sizes, a, sizeof a));
        return NULL;
    }
    bool batched = log_probs->ndim == 3;
    em_tensor *lp = batched ? em_tensor_retain(log_probs) : em_unsqueeze(log_probs, 1);
    em_tensor *alpha = NULL, *res = NULL, *r = NULL;
    if (lp) res = em__ctc_loss(lp, targets, input_lengths, target_lengths, blank, zero_infinity, &alpha);
    em_tensor_release(alpha);
    em_tensor_release(lp);
    if (!res) return NULL;
    if (zero_infinity) {
        em_tensor *inf = em_tensor_wrapped_scalar(em_scalar_float(INFINITY));
        em_tensor *zero = inf ? em_tensor_wrapped_scalar(em_scalar_float(0.0)) : NULL;
        em_tensor *isinf = zero ? em_eq(res, inf) : NULL;
        em_tensor *z = isinf ? em_where(isinf, zero, res) : NULL;
        em_tensor_release(inf);
        em_tensor_release(zero);
        em_tensor_release(isinf);
        em_tensor_release(res);
        if (!(res = z)) return NULL;
    }
    em_intlist all = { NULL, -1 };
    if (strcmp(reduction, "mean") == 0) {
        int64_t n = target_lengths.n;
        em_tensor *len = em_tensor_new(1, &n, res->dtype, em_cpu_device());
        if (len) {
            for (int64_t i = 0; i < n; i++)
                em_store_from_double((char *)em_tensor_data(len) + i * (int64_t)em_dtype_size(res->dtype), res->dtype,
                                     (double)(target_lengths.data[i] > 1 ? target_lengths.data[i] : 1));
        }
        em_tensor *q = len ? em_div(res, len) : NULL;
        r = q ? em_mean(q, all, false, EM_DTYPE_NONE) : NULL;
        em_tensor_release(len);
        em_tensor_release(q);
    } else if (strcmp(reduction, "sum") == 0) {
        r = em_sum(res, all, false, EM_DTYPE_NONE);
    } else if (!batched) {
        int64_t d0 = 0;
        r = em_squeeze(res, &d0);
    } else {
        r = em_tensor_retain(res);
    }
    em_tensor_release(res);
    return r;
}

/* v (argument `name`: a 1-d, or for unbatched input 0-dim, integer
 * tensor) copied into a malloc'ed int64 array (*n entries; free it). */
static int64_t *ctc_lengths(em_tensor *v, const char *name, int64_t *n) {
    char a[EM_SHAPE_STR_MAX];
    if (!em_dtype_is_integral(v->dtype)) {
        em_set_error(EM_ETYPE, "ctc_loss: %s must be integral, got %s", name, em_dtype_name(v->dtype));
        return NULL;
    }
    if (v->ndim > 1) {
        em_set_error(EM_ESHAPE, "ctc_loss: %s must be 1-d (or 0-dim), got %s", name,
                     em_shape_str(v->ndim, v->sizes, a, sizeof a));
        return NULL;
    }
    em_tensor *c = em_to(v, EM_INT64);
    em_tensor *cc = c ? em_contiguous(c) : NULL;
    em_tensor_release(c);
    if (!cc) return NULL;
    *n = cc->numel;
    int64_t *p = malloc(sizeof(int64_t) * (size_t)(*n > 0 ? *n : 1));
    if (!p) em_set_error(EM_ENOMEM, "ctc_loss: out of memory");
    else if (*n > 0) memcpy(p, em_tensor_data(cc), sizeof(int64_t) * (size_t)*n);
    em_tensor_release(cc);
    return p;
}

/* ctc_loss with the lengths as integer tensors (torch's ctc_loss.Tensor). */
em_tensor *em_comp_ctc_loss_Tensor(em_keyset ks, em_tensor *log_probs, em_tensor *targets, em_tensor *input_lengths,
                                   em_tensor *target_lengths, int64_t blank, const char *reduction,
                                   bool zero_infinity) {
    (void)ks;
    int64_t ni = 0, nt = 0;
    int64_t *il = ctc_lengths(input_lengths, "input_lengths", &ni);
    int64_t *tl = il ? ctc_lengths(target_lengths, "target_lengths", &nt) : NULL;
    em_tensor *r = tl ? em_ctc_loss(log_probs, targets, (em_intlist){ il, ni }, (em_intlist){ tl, nt }, blank,
                                    reduction, zero_infinity)
                      : NULL;
    free(il);
    free(tl);
    return r;
}
