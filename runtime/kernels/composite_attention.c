/* composite_attention.c -- the attention family's composite ops
 * (schema/ops/attention.yaml, `kernels: {Composite: em_comp_NAME}`; Note
 * [Composite ops] in codegen/codegen.h): F.multi_head_attention_forward
 * over linear, bmm, softmax and dropout. It checks its arguments first
 * (PyTorch 1.13's asserts, each naming the argument), then calls ops through
 * the public API (em_ops.h), never a kernel, so autograd and double backward
 * come from the parts.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "autograd/em_autograd.h"
#include "em_ops.h"
#include "em_kernels_decl.h"
#include "kernels/em_tmp_scope.h"

/* ---- temporaries ---- */

/* A scope owning the temporaries of one composite (Note [Temporaries
 * scopes]): mk_keep takes a result (NULL marks the scope failed, the error
 * stays set) and mk_finish releases everything but the tensors asked to
 * survive. */
EM_TMP_SCOPE_KEEP(mk, 96, "multi_head_attention_forward")

/* Releases every temporary; a and b (either NULL) are retained first, so
 * they survive with one reference of their own for the caller. */
static void mk_finish(mk_scope *s, em_tensor *a, em_tensor *b) {
    if (a) em_tensor_retain(a);
    if (b) em_tensor_retain(b);
    em_tmp_finish(s->t, &s->n, true, NULL);
}

static em_intlist mk_list(int64_t *v, int n) { return (em_intlist){ v, n }; }

/* ---- multi_head_attention_forward ---- */

static const char *const MHA = "multi_head_attention_forward";

static const char *shp(const em_tensor *t, char *buf, size_t n) { return em_shape_str(t->ndim, t->sizes, buf, n); }

static bool has_shape(const em_tensor *t, int ndim, const int64_t *sizes) {
    if (t->ndim != ndim) return false;
    for (int i = 0; i < ndim; i++)
        if (t->sizes[i] != sizes[i]) return false;
    return true;
}

/* "multi_head_attention_forward: argument 'arg' must have shape WANT, got GOT"
 * unless t (may be NULL: fine) has that shape. */
static bool want_shape(const em_tensor *t, const char *arg, int ndim, const int64_t *sizes) {
    char a[EM_SHAPE_STR_MAX], b[EM_SHAPE_STR_MAX];
    if (!t || has_shape(t, ndim, sizes)) return true;
    em_set_error(EM_ESHAPE, "%s: argument '%s' must have shape %s, got %s", MHA, arg, em_shape_str(ndim, sizes, a, sizeof a),
                 shp(t, b, sizeof b));
    return false;
}

/* PyTorch 1.13's _mha_shape_check plus the checks its later asserts and
 * views make (embed dims, heads, projection weights, masks, static k/v),
 * so that every bad argument is named before any op runs. Sets *batched. */
static bool mha_check(em_tensor *query, em_tensor *key_, em_tensor *value, int64_t embed_dim_to_check,
                      int64_t num_heads, em_tensor *in_proj_weight, em_tensor *in_proj_bias, em_tensor *bias_k,
                      em_tensor *bias_v, double dropout_p, em_tensor *out_proj_weight, em_tensor *out_proj_bias,
                      bool training, em_tensor *key_padding_mask, em_tensor *attn_mask, bool use_separate_proj_weight,
                      em_tensor *q_proj_weight, em_tensor *k_proj_weight, em_tensor *v_proj_weight,
                      em_tensor *static_k, em_tensor *static_v, bool *batched) {
    char a[EM_SHAPE_STR_MAX], b[EM_SHAPE_STR_MAX], c[EM_SHAPE_STR_MAX];
    if (query->ndim != 2 && query->ndim != 3) {
        em_set_error(EM_ESHAPE, "%s: query must be an unbatched (L, E) or batched (L, N, E) tensor, got %s", MHA,
                     shp(query, a, sizeof a));
        return false;
    }
    bool bt = *batched = query->ndim == 3;
    int qd = query->ndim;
    if (key_->ndim != qd || value->ndim != qd) {
        em_set_error(EM_ESHAPE, "%s: for %s query %s, key_ and value must be %d-d too, got %s and %s", MHA,
                     bt ? "batched" : "unbatched", shp(query, a, sizeof a), qd, shp(key_, b, sizeof b),
                     shp(value, c, sizeof c));
        return false;
    }
    if (!em_dtype_is_floating(query->dtype)) {
        em_set_error(EM_ETYPE, "%s: query must be a float tensor, got %s", MHA, em_dtype_name(query->dtype));
        return false;
    }
    int64_t L = query->sizes[0], E = query->sizes[qd - 1], S = key_->sizes[0];
    int64_t N = bt ? query->sizes[1] : 1;
    if (bt && (key_->sizes[1] != N || value->sizes[1] != N)) {
        em_set_error(EM_ESHAPE, "%s: query %s, key_ %s and value %s must have the same batch size (dim 2)", MHA,
                     shp(query, a, sizeof a), shp(key_, b, sizeof b), shp(value, c, sizeof c));
        return false;
    }
    if (E != embed_dim_to_check) {
        em_set_error(EM_ESHAPE, "%s: embed_dim_to_check is %lld but query %s has embedding dim %lld", MHA,
                     (long long)embed_dim_to_check, shp(query, a, sizeof a), (long long)E);
        return false;
    }
    if (num_heads <= 0) {
        em_set_error(EM_EVALUE, "%s: argument 'num_heads' must be positive, got %lld", MHA, (long long)num_heads);
        return false;
    }
    if (E % num_heads != 0) {
        em_set_error(EM_EVALUE, "%s: embed_dim %lld not divisible by num_heads %lld", MHA, (long long)E,
                     (long long)num_heads);
        return false;
    }
    int64_t hd = E / num_heads;
    if (use_separate_proj_weight) {
        if (key_->sizes[0] != value->sizes[0]) {
            em_set_error(EM_ESHAPE, "%s: key_ %s and value %s must have the same sequence length", MHA,
                         shp(key_, b, sizeof b), shp(value, c, sizeof c));
            return false;
        }
        const char *missing = !q_proj_weight ? "q_proj_weight" : !k_proj_weight ? "k_proj_weight"
                            : !v_proj_weight ? "v_proj_weight" : NULL;
        if (missing) {
            em_set_error(EM_EVALUE, "%s: use_separate_proj_weight is true but %s is nil", MHA, missing);
            return false;
        }
        int64_t wq[2] = { E, E }, wk[2] = { E, key_->sizes[qd - 1] }, wv[2] = { E, value->sizes[qd - 1] };
        if (!want_shape(q_proj_weight, "q_proj_weight", 2, wq) || !want_shape(k_proj_weight, "k_proj_weight", 2, wk) ||
            !want_shape(v_proj_weight, "v_proj_weight", 2, wv))
            return false;
    } else {
        if (!has_shape(key_, value->ndim, value->sizes)) {
            em_set_error(EM_ESHAPE, "%s: key_ shape %s does not match value shape %s", MHA, shp(key_, b, sizeof b),
                         shp(value, c, sizeof c));
            return false;
        }
        if (!in_proj_weight) {
            em_set_error(EM_EVALUE, "%s: use_separate_proj_weight is false but in_proj_weight is nil", MHA);
            return false;
        }
        if (key_->sizes[qd - 1] != E) {
            em_set_error(EM_ESHAPE, "%s: with the packed in_proj_weight, key_ %s and value need query's embedding dim "
                         "%lld (use separate projection weights for other dims)", MHA, shp(key_, b, sizeof b), (long long)E);
            return false;
        }
        int64_t w3[2] = { 3 * E, E };
        if (!want_shape(in_proj_weight, "in_proj_weight", 2, w3)) return false;
    }
    int64_t b3[1] = { 3 * E }, bkv[3] = { 1, 1, E };
    if (!want_shape(in_proj_bias, "in_proj_bias", 1, b3)) return false;
    if (out_proj_weight->ndim != 2 || out_proj_weight->sizes[1] != E) {
        em_set_error(EM_ESHAPE, "%s: argument 'out_proj_weight' must have shape (E_out, %lld), got %s", MHA,
                     (long long)E, shp(out_proj_weight, a, sizeof a));
        return false;
    }
    /* out_proj_bias: linear's, which broadcasts it as PyTorch's does */
    if ((bias_k == NULL) != (bias_v == NULL)) {
        em_set_error(EM_EVALUE, "%s: give both bias_k and bias_v or neither", MHA);
        return false;
    }
    if (bias_k && (static_k || static_v)) {
        em_set_error(EM_EVALUE, "%s: bias_k/bias_v cannot be added to a static key or value (static_k/static_v)", MHA);
        return false;
    }
    if (!want_shape(bias_k, "bias_k", 3, bkv) || !want_shape(bias_v, "bias_v", 3, bkv)) return false;
    if (training && !(dropout_p >= 0 && dropout_p <= 1)) {
        em_set_error(EM_EVALUE, "%s: argument 'dropout_p' must be in [0, 1], got %g", MHA, dropout_p);
        return false;
    }
    em_tensor *statics[2] = { static_k, static_v };
    for (int i = 0; i < 2; i++) {
        em_tensor *st = statics[i];
        if (st && (st->ndim != 3 || st->sizes[0] != N * num_heads || st->sizes[2] != hd)) {
            em_set_error(EM_ESHAPE, "%s: argument '%s' must have shape (N*num_heads, S, head_dim) = (%lld, S, %lld), got %s",
                         MHA, i == 0 ? "static_k" : "static_v", (long long)(N * num_heads), (long long)hd,
                         shp(st, a, sizeof a));
            return false;
        }
    }
    if (static_k && static_v && static_k->sizes[1] != static_v->sizes[1]) {
        em_set_error(EM_ESHAPE, "%s: static_k %s and static_v %s must have the same length (dim 2)", MHA,
                     shp(static_k, a, sizeof a), shp(static_v, b, sizeof b));
        return false;
    }
    /* (attn_mask is checked against key_'s length, as PyTorch does, also with
     * static_k; a length that differs then fails the later check) */
    if (key_padding_mask) {
        if (key_padding_mask->dtype != EM_BOOL && !em_dtype_is_floating(key_padding_mask->dtype)) {
            em_set_error(EM_ETYPE, "%s: key_padding_mask must be bool or float, got %s", MHA,
                         em_dtype_name(key_padding_mask->dtype));
            return false;
        }
        if (key_padding_mask->ndim != (bt ? 2 : 1)) {
            em_set_error(EM_ESHAPE, "%s: for %s query %s, key_padding_mask must be %s, got %s", MHA,
                         bt ? "batched" : "unbatched", shp(query, a, sizeof a), bt ? "(N, S), 2-d" : "(S), 1-d",
                         shp(key_padding_mask, b, sizeof b));
            return false;
        }
    }
    if (attn_mask) {
        if (attn_mask->dtype != EM_BOOL && attn_mask->dtype != EM_UINT8 && !em_dtype_is_floating(attn_mask->dtype)) {
            em_set_error(EM_ETYPE, "%s: attn_mask must be bool, uint8 or float, got %s", MHA, em_dtype_name(attn_mask->dtype));
            return false;
        }
        int64_t m2[2] = { L, S }, m3[3] = { N * num_heads, L, S };
        bool ok = attn_mask->ndim == 2 ? has_shape(attn_mask, 2, m2) : has_shape(attn_mask, 3, m3);
        if (!ok) {
            em_set_error(EM_ESHAPE, "%s: attn_mask must have shape %s or %s (L, S or N*num_heads, L, S), got %s", MHA,
                         em_shape_str(2, m2, a, sizeof a), em_shape_str(3, m3, b, sizeof b), shp(attn_mask, c, sizeof c));
            return false;
        }
    }
    return true;
}

/* bool mask m (or float with add) padded with one more key column: false /
 * 0 (PyTorch's pad(mask, (0, 1)) for bias_k and add_zero_attn). */
static em_tensor *pad_key(mk_scope *s, em_tensor *m) {
    if (!m) return NULL;
    int64_t p[2] = { 0, 1 };
    return mk_keep(s, em_constant_pad_nd(m, mk_list(p, 2), em_scalar_int(0)));
}

/* x (S, N, E') -> (N*H, S, hd): PyTorch's x.contiguous().view(S, N*H, hd).transpose(0, 1). */
static em_tensor *heads(mk_scope *s, em_tensor *x, int64_t NH, int64_t hd) {
    em_tensor *c = mk_keep(s, em_contiguous(x));
    int64_t sz[3] = { c ? c->sizes[0] : 0, NH, hd };
    em_tensor *v = c ? mk_keep(s, em_view(c, mk_list(sz, 3))) : NULL;
    return v ? mk_keep(s, em_transpose(v, 0, 1)) : NULL;
}

/* Note [MHA as PyTorch]: the steps, names and rounding order are PyTorch
 * 1.13's F.multi_head_attention_forward (packed projection with the q is k
 * is v and k is v shortcuts, q / sqrt(head_dim) before the product, a bool
 * mask turned into -inf additions, key_padding_mask merged into attn_mask,
 * weights averaged as sum / num_heads), so results match it to rounding. A
 * float key_padding_mask with a float attn_mask is refused, as PyTorch 1.13
 * refuses it (masked_fill with a float mask). */
em_tensor *em_comp_multi_head_attention_forward(em_keyset ks, em_tensor *query, em_tensor *key_, em_tensor *value,
                                                int64_t embed_dim_to_check, int64_t num_heads,
                                                em_tensor *in_proj_weight, em_tensor *in_proj_bias, em_tensor *bias_k,
                                                em_tensor *bias_v, bool add_zero_attn, double dropout_p,
                                                em_tensor *out_proj_weight, em_tensor *out_proj_bias, bool training,
                                                em_tensor *key_padding_mask, bool need_weights, em_tensor *attn_mask,
                                                bool use_separate_proj_weight, em_tensor *q_proj_weight,
                                                em_tensor *k_proj_weight, em_tensor *v_proj_weight,
                                                em_tensor *static_k, em_tensor *static_v, bool average_attn_weights,
                                                em_tensor **attn_output_weights) {
    (void)ks;
    *attn_output_weights = NULL;
    bool batched;
    if (!mha_check(query, key_, value, embed_dim_to_check, num_heads, in_proj_weight, in_proj_bias, bias_k, bias_v,
                   dropout_p, out_proj_weight, out_proj_bias, training, key_padding_mask, attn_mask,
                   use_separate_proj_weight, q_proj_weight, k_proj_weight, v_proj_weight, static_k, static_v, &batched))
        return NULL;
    if (key_padding_mask && attn_mask && em_dtype_is_floating(key_padding_mask->dtype) &&
        em_dtype_is_floating(attn_mask->dtype)) {
        em_set_error(EM_ETYPE, "%s: a float key_padding_mask cannot be merged into a float attn_mask (PyTorch 1.13 "
                     "masks with key_padding_mask there; give a bool key_padding_mask)", MHA);
        return NULL;
    }
    mk_scope s = { .n = 0 };
    mk_scope *sp = &s;
    em_tensor *q = query, *k = key_, *v = value, *kpm = key_padding_mask, *mask = attn_mask;
    bool q_is_k = query == key_, k_is_v = key_ == value;
    if (!batched) {
        q = mk_keep(sp, em_unsqueeze(query, 1));
        k = q_is_k ? q : mk_keep(sp, em_unsqueeze(key_, 1));
        v = k_is_v ? k : mk_keep(sp, em_unsqueeze(value, 1));
        if (kpm) kpm = mk_keep(sp, em_unsqueeze(kpm, 0));
        if (s.failed) goto fail;
    }
    int64_t L = q->sizes[0], N = q->sizes[1], E = q->sizes[2], H = num_heads, hd = E / H, NH = N * H;

    /* in-projection */
    em_tensor *pq, *pk, *pv;
    if (!use_separate_proj_weight) {
        em_tensor *w = in_proj_weight, *b = in_proj_bias;
        if (q_is_k && k_is_v) {
            em_tensor *p = mk_keep(sp, em_linear(q, w, b));
            pq = p ? mk_keep(sp, em_narrow(p, 2, 0, E)) : NULL;
            pk = p ? mk_keep(sp, em_narrow(p, 2, E, E)) : NULL;
            pv = p ? mk_keep(sp, em_narrow(p, 2, 2 * E, E)) : NULL;
        } else if (k_is_v) {
            em_tensor *wq = mk_keep(sp, em_narrow(w, 0, 0, E)), *wkv = mk_keep(sp, em_narrow(w, 0, E, 2 * E));
            em_tensor *bq = b ? mk_keep(sp, em_narrow(b, 0, 0, E)) : NULL, *bkv = b ? mk_keep(sp, em_narrow(b, 0, E, 2 * E)) : NULL;
            if (s.failed) goto fail;
            pq = mk_keep(sp, em_linear(q, wq, bq));
            em_tensor *p = mk_keep(sp, em_linear(k, wkv, bkv));
            pk = p ? mk_keep(sp, em_narrow(p, 2, 0, E)) : NULL;
            pv = p ? mk_keep(sp, em_narrow(p, 2, E, E)) : NULL;
        } else {
            em_tensor *ws[3], *bs[3] = { NULL, NULL, NULL }, *xs[3] = { q, k, v }, *ps[3];
            for (int i = 0; i < 3; i++) {
                ws[i] = mk_keep(sp, em_narrow(w, 0, i * E, E));
                if (b) bs[i] = mk_keep(sp, em_narrow(b, 0, i * E, E));
                if (s.failed) goto fail;
                ps[i] = mk_keep(sp, em_linear(xs[i], ws[i], bs[i]));
            }
            pq = ps[0], pk = ps[1], pv = ps[2];
        }
    } else {
        em_tensor *bs[3] = { NULL, NULL, NULL };
        for (int i = 0; in_proj_bias && i < 3; i++) bs[i] = mk_keep(sp, em_narrow(in_proj_bias, 0, i * E, E));
        if (s.failed) goto fail;
        pq = mk_keep(sp, em_linear(q, q_proj_weight, bs[0]));
        pk = mk_keep(sp, em_linear(k, k_proj_weight, bs[1]));
        pv = mk_keep(sp, em_linear(v, v_proj_weight, bs[2]));
    }
    if (s.failed) goto fail;

    /* masks: uint8 -> bool; 2-d -> (1, L, S) */
    if (mask && mask->dtype == EM_UINT8) mask = mk_keep(sp, em_to(mask, EM_BOOL));
    if (mask && mask->ndim == 2) mask = mk_keep(sp, em_unsqueeze(mask, 0));
    if (s.failed) goto fail;

    /* bias_k / bias_v: one more key position */
    if (bias_k) {
        int64_t rep[3] = { 1, N, 1 };
        em_tensor *rk = mk_keep(sp, em_repeat(bias_k, mk_list(rep, 3)));
        em_tensor *rv = mk_keep(sp, em_repeat(bias_v, mk_list(rep, 3)));
        if (s.failed) goto fail;
        em_tensor *lk[2] = { pk, rk }, *lv[2] = { pv, rv };
        pk = mk_keep(sp, em_cat((em_tensorlist){ lk, 2 }, 0));
        pv = mk_keep(sp, em_cat((em_tensorlist){ lv, 2 }, 0));
        if (mask) mask = pad_key(sp, mask);
        if (kpm) kpm = pad_key(sp, kpm);
        if (s.failed) goto fail;
    }

    /* heads: (N*H, L or S, hd) */
    em_tensor *hq = heads(sp, pq, NH, hd);
    em_tensor *hk = static_k ? static_k : heads(sp, pk, NH, hd);
    em_tensor *hv = static_v ? static_v : heads(sp, pv, NH, hd);
    if (s.failed) goto fail;
    if (hk->sizes[1] != hv->sizes[1]) {
        char a[EM_SHAPE_STR_MAX], b[EM_SHAPE_STR_MAX];
        em_set_error(EM_ESHAPE, "%s: the keys %s and values %s (after static_k/static_v) need the same length", MHA,
                     shp(hk, a, sizeof a), shp(hv, b, sizeof b));
        goto fail;
    }
    if (add_zero_attn) {
        int64_t zs[3] = { NH, 1, hd };
        em_tensor *zk = mk_keep(sp, em_zeros(mk_list(zs, 3), hk->dtype, hk->device));
        em_tensor *zv = mk_keep(sp, em_zeros(mk_list(zs, 3), hv->dtype, hv->device));
        if (s.failed) goto fail;
        em_tensor *lk[2] = { hk, zk }, *lv[2] = { hv, zv };
        hk = mk_keep(sp, em_cat((em_tensorlist){ lk, 2 }, 1));
        hv = mk_keep(sp, em_cat((em_tensorlist){ lv, 2 }, 1));
        if (mask) mask = pad_key(sp, mask);
        if (kpm) kpm = pad_key(sp, kpm);
        if (s.failed) goto fail;
    }
    int64_t S = hk->sizes[1];
    if (mask && mask->sizes[2] != S) { /* static_k's length differs from key_'s */
        char a[EM_SHAPE_STR_MAX];
        em_set_error(EM_ESHAPE, "%s: attn_mask %s does not cover the %lld keys", MHA, shp(attn_mask, a, sizeof a),
                     (long long)S);
        goto fail;
    }

    /* key_padding_mask (N, S) -> (N*H, 1, S), merged into the mask */
    if (kpm) {
        int64_t want[2] = { N, S };
        if (!has_shape(kpm, 2, want)) {
            char a[EM_SHAPE_STR_MAX], b[EM_SHAPE_STR_MAX];
            em_set_error(EM_ESHAPE, "%s: key_padding_mask must have shape %s (N, S), got %s", MHA,
                         em_shape_str(batched ? 2 : 1, batched ? want : want + 1, a, sizeof a),
                         shp(key_padding_mask, b, sizeof b));
            goto fail;
        }
        int64_t v4[4] = { N, 1, 1, S }, e4[4] = { N, H, 1, S }, r3[3] = { NH, 1, S };
        em_tensor *x = mk_keep(sp, em_reshape(kpm, mk_list(v4, 4)));
        x = x ? mk_keep(sp, em_expand(x, mk_list(e4, 4))) : NULL;
        x = x ? mk_keep(sp, em_reshape(x, mk_list(r3, 3))) : NULL;
        if (!x) goto fail;
        if (!mask) {
            mask = x;
        } else if (mask->dtype == EM_BOOL) {
            mask = mk_keep(sp, em_logical_or(mask, x));
        } else {
            em_tensor *ninf = mk_keep(sp, em_tensor_wrapped_scalar(em_scalar_float(-INFINITY)));
            mask = ninf ? mk_keep(sp, em_masked_fill(mask, x, ninf)) : NULL;
        }
        if (s.failed) goto fail;
    }
    if (mask && mask->dtype == EM_BOOL) {
        em_tensor *z = mk_keep(sp, em_zeros_like(mask, hq->dtype));
        em_tensor *ninf = mk_keep(sp, em_tensor_wrapped_scalar(em_scalar_float(-INFINITY)));
        mask = z && ninf ? mk_keep(sp, em_masked_fill(z, mask, ninf)) : NULL;
        if (s.failed) goto fail;
    }
    if (!training) dropout_p = 0.0;

    /* attention: softmax(q / sqrt(hd) @ k^T + mask) @ v */
    em_tensor *sc = mk_keep(sp, em_tensor_wrapped_scalar(em_scalar_float(sqrt((double)hd))));
    em_tensor *qs = sc ? mk_keep(sp, em_div(hq, sc)) : NULL;
    em_tensor *kt = mk_keep(sp, em_transpose(hk, 1, 2));
    if (s.failed) goto fail;
    em_tensor *w = mask ? mk_keep(sp, em_baddbmm(mask, qs, kt, em_scalar_int(1), em_scalar_int(1)))
                        : mk_keep(sp, em_bmm(qs, kt));
    w = w ? mk_keep(sp, em_softmax(w, -1, EM_DTYPE_NONE)) : NULL;
    if (w && dropout_p > 0.0) w = mk_keep(sp, em_dropout(w, dropout_p, true, false));
    em_tensor *o = w ? mk_keep(sp, em_bmm(w, hv)) : NULL;
    if (!o) goto fail;

    /* (N*H, L, hd) -> (L*N, E) -> out_proj -> (L, N, E_out) */
    int64_t le[2] = { L * N, E };
    o = mk_keep(sp, em_transpose(o, 0, 1));
    o = o ? mk_keep(sp, em_contiguous(o)) : NULL;
    o = o ? mk_keep(sp, em_view(o, mk_list(le, 2))) : NULL;
    o = o ? mk_keep(sp, em_linear(o, out_proj_weight, out_proj_bias)) : NULL;
    int64_t lne[3] = { L, N, out_proj_weight->sizes[0] };
    o = o ? mk_keep(sp, em_view(o, mk_list(lne, 3))) : NULL;
    if (o && !batched) {
        int64_t one = 1;
        o = mk_keep(sp, em_squeeze(o, &one));
    }
    if (!o) goto fail;

    em_tensor *wr = NULL;
    if (need_weights) {
        int64_t w4[4] = { N, H, L, S };
        wr = mk_keep(sp, em_view(w, mk_list(w4, 4)));
        if (wr && average_attn_weights) {
            int64_t d1 = 1;
            em_tensor *hs = mk_keep(sp, em_tensor_wrapped_scalar(em_scalar_int(H)));
            wr = mk_keep(sp, em_sum(wr, mk_list(&d1, 1), false, EM_DTYPE_NONE));
            wr = wr && hs ? mk_keep(sp, em_div(wr, hs)) : NULL;
        }
        if (wr && !batched) {
            int64_t zero = 0;
            wr = mk_keep(sp, em_squeeze(wr, &zero));
        }
        if (!wr) goto fail;
    }
    mk_finish(sp, o, wr);
    *attn_output_weights = wr;
    return o;
fail:
    mk_finish(sp, NULL, NULL);
    return NULL;
}
