/* composite_index_put.c -- index_put / index_put_ (schema/ops/index_put.yaml)
 * and the advanced-indexing helpers (em_advindex.h) that the Lua indexing
 * x[key] / x[key] = v shares (Note [Advanced indexing] in lua/lua_index.c).
 * Composite (Note [Composite ops]): written with public ops only
 * (index_select, index_copy_, index_fill_, index_add_, ...), so autograd
 * records the parts; a write into a view keeps the base's history through
 * CopySlices (Note [View history]). */
#include <string.h>

#include "dispatch/em_dispatch.h"
#include "em_kernels_decl.h"
#include "em_ops.h"
#include "kernels/em_advindex.h"

/* ---- temporaries ---- */

em_tensor *em_adv_keep(em_adv_scope *s, em_tensor *t) {
    if (t && s->n < EM_ADV_MAX) s->t[s->n++] = t;
    else if (t) { /* more temporaries than any key can need: fail cleanly */
        em_tensor_release(t);
        em_set_error(EM_EINTERNAL, "index: too many temporaries");
        return NULL;
    }
    return t;
}

void em_adv_release(em_adv_scope *s) {
    for (int i = 0; i < s->n; i++) em_tensor_release(s->t[i]);
    s->n = 0;
}

#define keep em_adv_keep

/* ---- the key ---- */

/* t's values on the host: t itself for a cpu tensor, else a cpu copy. */
static em_tensor *host_copy(em_tensor *t) {
    if (t->device.type == EM_CPU) return em_tensor_retain(t);
    em_keyset ks = (t->keyset | EM_KS(EM_KEY_CPU)) & em_keys_below(EM_KEY_AUTOGRAD);
    return em_redispatch_to_device(ks, t, em_cpu_device());
}

/* An integer index tensor checked against a dim of size n (on a host
 * copy), as int64 with negative values mapped to 1-based ones. */
static em_tensor *normalise(em_adv_scope *s, em_tensor *idx, int dim, int64_t n, const char *op) {
    if (idx->dtype != EM_INT64 && idx->dtype != EM_INT32) {
        em_set_error(EM_ETYPE, "%s: tensors used as indices must be int64, int32 or bool, got %s", op,
                     em_dtype_name(idx->dtype));
        return NULL;
    }
    em_tensor *i64 = idx->dtype == EM_INT64 ? idx : keep(s, em_to(idx, EM_INT64));
    em_tensor *h = i64 ? keep(s, host_copy(i64)) : NULL;
    em_tensor *hc = h ? keep(s, em_contiguous(h)) : NULL;
    if (!hc) return NULL;
    const int64_t *v = (const int64_t *)em_tensor_data(hc);
    bool neg = false;
    for (int64_t k = 0; k < hc->numel; k++) {
        if (v[k] == 0 || v[k] > n || v[k] < -n) {
            em_set_error(EM_EINDEX, "%s: index %lld is out of bounds for dim %d with size %lld (indices are "
                         "1-based); valid: 1..%lld or -%lld..-1", op, (long long)v[k], dim + 1, (long long)n,
                         (long long)n, (long long)n);
            return NULL;
        }
        neg |= v[k] < 0;
    }
    if (!neg) return i64;
    em_tensor *zero = keep(s, em_tensor_wrapped_scalar(em_scalar_int(0)));
    em_tensor *wrap = keep(s, em_tensor_wrapped_scalar(em_scalar_int(n + 1)));
    em_tensor *isneg = zero && wrap ? keep(s, em_lt(i64, zero)) : NULL;
    em_tensor *shifted = isneg ? keep(s, em_add(i64, wrap, em_scalar_int(1))) : NULL;
    return shifted ? keep(s, em_where(isneg, shifted, i64)) : NULL;
}

/* A bool mask over dims [dim, dim + mask->ndim) of cur, as mask->ndim int64
 * 1-based index tensors (through nonzero). */
static int add_mask(em_adv_scope *s, em_adv_key *key, em_tensor *mask, int dim, const char *op) {
    em_tensor *cur = key->cur;
    if (dim + mask->ndim > cur->ndim) {
        em_set_error(EM_EINDEX, "%s: too many indices for a tensor of %d dims (a mask of %d dims at dim %d)", op,
                     cur->ndim, mask->ndim, dim + 1);
        return -1;
    }
    for (int k = 0; k < mask->ndim; k++)
        if (mask->sizes[k] != cur->sizes[dim + k]) {
            char a[EM_SHAPE_STR_MAX], b[EM_SHAPE_STR_MAX];
            em_set_error(EM_ESHAPE, "%s: the mask's shape %s does not match the indexed tensor's %s at dim %d", op,
                         em_shape_str(mask->ndim, mask->sizes, a, sizeof a),
                         em_shape_str(cur->ndim, cur->sizes, b, sizeof b), dim + k + 1);
            return -1;
        }
    if (mask->ndim == 0) { /* a 0-dim mask adds a dim of size 1 (kept) or 0 (dropped) */
        em_set_error(EM_EINDEX, "%s: a 0-dim bool mask is supported only as the whole key (x[mask])", op);
        return -1;
    }
    em_tensor *nz = keep(s, em_nonzero(mask));
    if (!nz) return -1;
    for (int k = 0; k < mask->ndim; k++) {
        em_tensor *col = keep(s, em_select(nz, 1, k));
        if (!col) return -1;
        key->adv[key->nadv].dim = dim + k;
        key->adv[key->nadv].idx = col;
        key->nadv++;
    }
    return mask->ndim;
}

int em_adv_add(em_adv_scope *s, em_adv_key *key, em_tensor *x, int dim, const char *op) {
    if (x->dtype == EM_BOOL) return add_mask(s, key, x, dim, op);
    if (dim >= key->cur->ndim) {
        em_set_error(EM_EINDEX, "%s: too many indices for a tensor of %d dims", op, key->cur->ndim);
        return -1;
    }
    em_tensor *idx = normalise(s, x, dim, key->cur->sizes[dim], op);
    if (!idx) return -1;
    key->adv[key->nadv].dim = dim;
    key->adv[key->nadv].idx = idx;
    key->nadv++;
    return 1;
}

/* ---- the indexed positions ---- */

int em_adv_broadcast(em_adv_scope *s, em_adv_key *key, int64_t *B, const char *op) {
    int nb = key->adv[0].idx->ndim;
    for (int k = 0; k < nb; k++) B[k] = key->adv[0].idx->sizes[k];
    for (int j = 1; j < key->nadv; j++) {
        int64_t out[EM_MAX_DIMS];
        const em_tensor *x = key->adv[j].idx;
        nb = em_broadcast_shapes(nb, B, x->ndim, x->sizes, out, op);
        if (nb < 0) return -1;
        memcpy(B, out, sizeof(int64_t) * (size_t)nb);
    }
    for (int j = 0; j < key->nadv; j++) {
        em_tensor *e = keep(s, em_expand(key->adv[j].idx, (em_intlist){ B, nb }));
        if (!e) return -1;
        key->adv[j].idx = e;
    }
    return nb;
}

em_tensor *em_adv_linear(em_adv_scope *s, const em_adv_key *key) {
    em_tensor *lin = NULL;
    int64_t stride = 1;
    for (int j = key->nadv - 1; j >= 0; j--) {
        em_tensor *st = keep(s, em_tensor_wrapped_scalar(em_scalar_int(stride)));
        em_tensor *one = keep(s, em_tensor_wrapped_scalar(em_scalar_int(1)));
        em_tensor *z = st && one ? keep(s, em_sub(key->adv[j].idx, one, em_scalar_int(1))) : NULL;
        em_tensor *term = z ? keep(s, em_mul(z, st)) : NULL;
        lin = term ? (lin ? keep(s, em_add(lin, term, em_scalar_int(1))) : term) : NULL;
        if (!lin) return NULL;
        stride *= key->cur->sizes[key->adv[j].dim];
    }
    int64_t minus1 = -1;
    em_tensor *one = keep(s, em_tensor_wrapped_scalar(em_scalar_int(1)));
    em_tensor *r = one ? keep(s, em_add(lin, one, em_scalar_int(1))) : NULL;
    return r ? keep(s, em_reshape(r, (em_intlist){ &minus1, 1 })) : NULL;
}

bool em_adv_adjacent(const em_adv_key *key) {
    for (int j = 1; j < key->nadv; j++)
        if (key->adv[j].dim != key->adv[j - 1].dim + 1) return false;
    return true;
}

em_tensor *em_adv_dims_first(em_adv_scope *s, const em_adv_key *key) {
    int64_t perm[EM_MAX_DIMS];
    bool used[EM_MAX_DIMS] = { false };
    int np = 0;
    for (int j = 0; j < key->nadv; j++) {
        perm[np++] = key->adv[j].dim;
        used[key->adv[j].dim] = true;
    }
    for (int d = 0; d < key->cur->ndim; d++)
        if (!used[d]) perm[np++] = d;
    return keep(s, em_permute(key->cur, (em_intlist){ perm, np }));
}

/* ---- writing ---- */

em_tensor *em_adv_values_as(em_adv_scope *s, em_tensor *v, em_dtype dtype, const int64_t *shape, int n,
                              const int64_t *out, int no) {
    if (v->dtype != dtype && !(v = keep(s, em_to(v, dtype)))) return NULL;
    /* PyTorch's setitem drops the value's leading size-1 dims before expanding */
    int lead = 0;
    while (lead < v->ndim - n && v->sizes[lead] == 1) lead++;
    em_tensor *st = lead ? keep(s, em_reshape(v, (em_intlist){ v->sizes + lead, v->ndim - lead })) : v;
    em_tensor *e = st ? keep(s, em_expand(st, (em_intlist){ shape, n })) : NULL;
    return e ? keep(s, em_reshape(e, (em_intlist){ out, no })) : NULL;
}

/* Writes into target at the 1-based positions idx (1-d) along dim: value
 * (0-dim) by index_fill_, else src by index_copy_, or index_add_ of src
 * when accumulating. */
static em_tensor *write_along(em_adv_scope *s, em_tensor *target, int dim, em_tensor *idx, em_tensor *value,
                              em_tensor *src, bool accumulate) {
    if (accumulate) return keep(s, em_index_add_(target, dim, idx, src, em_scalar_int(1)));
    if (value) return keep(s, em_index_fill_(target, dim, idx, value));
    return keep(s, em_index_copy_(target, dim, idx, src));
}

em_tensor *em_adv_write(em_adv_scope *s, const em_adv_key *key, em_tensor *v, const int64_t *B, int nb,
                        em_tensor *lin, em_tensor *p, bool accumulate) {
    bool fill = !accumulate && v->ndim == 0;
    em_tensor *cur = key->cur;
    int64_t minus1 = -1;
    /* the result shape R of a read with this key, and where B sits in it */
    int64_t R[EM_MAX_DIMS], out[EM_MAX_DIMS];
    int nr = 0, no = 0;
    if (key->nadv == 1 || em_adv_adjacent(key)) {
        int p0 = key->adv[0].dim, k = key->nadv;
        for (int d = 0; d < p0; d++) R[nr++] = cur->sizes[d];
        for (int d = 0; d < nb; d++) R[nr++] = B[d];
        for (int d = p0 + k; d < cur->ndim; d++) R[nr++] = cur->sizes[d];
        /* target: cur with the indexed dims flattened into one at p0 */
        int64_t fs[EM_MAX_DIMS];
        int nf = 0;
        int64_t prod = 1;
        for (int d = 0; d < p0; d++) fs[nf++] = cur->sizes[d];
        for (int j = 0; j < k; j++) prod *= cur->sizes[p0 + j];
        fs[nf++] = prod;
        for (int d = p0 + k; d < cur->ndim; d++) fs[nf++] = cur->sizes[d];
        em_tensor *target = k == 1 ? cur : keep(s, em_view(cur, (em_intlist){ fs, nf }));
        if (target) {
            em_tensor *idx = k == 1 ? keep(s, em_reshape(key->adv[0].idx, (em_intlist){ &minus1, 1 })) : lin;
            if (!idx) return NULL;
            em_tensor *src = NULL;
            if (!fill) {
                for (int d = 0; d < p0; d++) out[no++] = cur->sizes[d];
                out[no++] = idx->numel;
                for (int d = p0 + k; d < cur->ndim; d++) out[no++] = cur->sizes[d];
                src = em_adv_values_as(s, v, cur->dtype, R, nr, out, no);
                if (!src) return NULL;
            }
            return write_along(s, target, p0, idx, fill ? v : NULL, src, accumulate);
        }
        em_clear_error();
    }
    /* the indexed dims in front; flattened as a view when the layout allows,
     * else written in a copy that is copied back */
    int64_t fs[EM_MAX_DIMS];
    int nf = 0;
    int64_t prod = 1;
    for (int j = 0; j < key->nadv; j++) prod *= p->sizes[j];
    fs[nf++] = prod;
    for (int d = key->nadv; d < p->ndim; d++) fs[nf++] = p->sizes[d];
    em_tensor *idx = lin;
    em_tensor *src = NULL;
    if (!fill) {
        nr = 0;
        for (int d = 0; d < nb; d++) R[nr++] = B[d];
        for (int d = key->nadv; d < p->ndim; d++) R[nr++] = p->sizes[d];
        out[no++] = idx->numel;
        for (int d = key->nadv; d < p->ndim; d++) out[no++] = p->sizes[d];
        src = em_adv_values_as(s, v, cur->dtype, R, nr, out, no);
        if (!src) return NULL;
    }
    em_tensor *target = keep(s, em_view(p, (em_intlist){ fs, nf }));
    if (target) return write_along(s, target, 0, idx, fill ? v : NULL, src, accumulate);
    em_clear_error();
    em_tensor *copy = keep(s, em_reshape(p, (em_intlist){ fs, nf }));
    em_tensor *w = copy ? write_along(s, copy, 0, idx, fill ? v : NULL, src, accumulate) : NULL;
    em_tensor *back = w ? keep(s, em_view(w, (em_intlist){ p->sizes, p->ndim })) : NULL;
    return back ? keep(s, em_copy_(p, back)) : NULL;
}

/* ---- index_put ---- */

/* Writes values into self at indices (see index_put_'s doc); EM_OK or the
 * error set, named op. */
static em_status index_put_into(em_tensor *self, em_tensorlist indices, em_tensor *values, bool accumulate,
                                const char *op) {
    if (indices.n == 0)
        return em_set_error(EM_EVALUE, "%s: indices: the list is empty (give one tensor or nil per indexed dim)", op);
    if (indices.n > self->ndim)
        return em_set_error(EM_EINDEX, "%s: indices: too many indices for a tensor of %d dims (got %d)", op,
                            self->ndim, indices.n);
    em_adv_scope s;
    s.n = 0;
    em_adv_key key;
    memset(&key, 0, sizeof key);
    key.cur = self;
    int dim = 0;
    em_status st = EM_OK;
    for (int k = 0; k < indices.n && st == EM_OK; k++) {
        if (!indices.data[k]) { /* None: the whole dim */
            dim++;
            continue;
        }
        int used = em_adv_add(&s, &key, indices.data[k], dim, op);
        if (used < 0) st = em_error_kind();
        dim += used;
    }
    if (st == EM_OK && key.nadv == 0)
        st = em_set_error(EM_EVALUE, "%s: indices: every entry is nil (give at least one index tensor)", op);
    int64_t B[EM_MAX_DIMS];
    int nb = st == EM_OK ? em_adv_broadcast(&s, &key, B, op) : -1;
    em_tensor *lin = nb >= 0 ? em_adv_linear(&s, &key) : NULL;
    em_tensor *p = lin ? em_adv_dims_first(&s, &key) : NULL;
    em_tensor *r = p ? em_adv_write(&s, &key, values, B, nb, lin, p, accumulate) : NULL;
    if (!r && st == EM_OK) st = em_error_kind();
    em_adv_release(&s);
    return r ? EM_OK : (st != EM_OK ? st : EM_EINTERNAL);
}

em_tensor *em_comp_index_put_(em_keyset ks, em_tensor *self, em_tensorlist indices, em_tensor *values,
                              bool accumulate) {
    (void)ks;
    if (index_put_into(self, indices, values, accumulate, "index_put_") != EM_OK) return NULL;
    return em_tensor_retain(self);
}

em_tensor *em_comp_index_put(em_keyset ks, em_tensor *self, em_tensorlist indices, em_tensor *values,
                             bool accumulate) {
    (void)ks;
    em_tensor *c = em_clone(self);
    if (!c) return NULL;
    if (index_put_into(c, indices, values, accumulate, "index_put") != EM_OK) {
        em_tensor_release(c);
        return NULL;
    }
    return c;
}
