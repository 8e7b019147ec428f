/* lua_index.c -- advanced indexing from Lua: x[mask], x[idx], x[{ ..., t, ... }]
 * and assignment through them, as PyTorch's tensor indexing.
 *
 * Note [Advanced indexing]
 * A key is advanced when it is a tensor or a table with a tensor entry.
 * Numbers and slices ({}, {a}, {a, b}, {a, b, step}) apply first, as the
 * Torch7-style slicing of lua_tensor.c (em_lua_index_table), giving `cur`;
 * the tensor entries then index dims of cur: an integer tensor one dim
 * (1-based values, negative from the end), a bool mask of k dims the k dims
 * it covers (through nonzero, k integer tensors). The index tensors
 * broadcast together to shape B; the result has B in place of the indexed
 * dims when those are adjacent, else B in front (PyTorch's rule; numbers
 * select first and do not count). Reads are ops (masked_select,
 * index_select, reshape, permute) so they are differentiable; writes are
 * in-place ops on the base or a view of it (masked_fill_, masked_scatter_,
 * index_fill_, index_copy_, or copy_ back when the indexed dims cannot be
 * flattened as a view), so on a tensor with history the gradient reaches
 * both the written values and the earlier history (Note [View history]).
 */
#include <string.h>

#include "autograd/em_autograd.h"
#include "lua/em_lua_bind.h"
#include "lua/em_lua_int.h"
#include "em_ops.h"

/* ---- temporaries ---- */

#define IX_MAX 96
typedef struct {
    em_tensor *t[IX_MAX];
    int n;
} ix_scope;

/* Keeps t (a new reference) until ix_release; NULL passes through. */
static em_tensor *keep(ix_scope *s, em_tensor *t) {
    if (t && s->n < IX_MAX) s->t[s->n++] = t;
    else if (t) { /* more temporaries than any key can need: fail cleanly */
        em_tensor_release(t);
        em_set_error(EM_EINTERNAL, "index: too many temporaries");
        return NULL;
    }
    return t;
}

static void ix_release(ix_scope *s) {
    for (int i = 0; i < s->n; i++) em_tensor_release(s->t[i]);
    s->n = 0;
}

/* Releases the scope and raises the thread's error (named "index"). */
static int fail_err(lua_State *L, ix_scope *s) {
    ix_release(s);
    return em_lua_error(L, "index");
}

#define FAILF(L, s, ...) (ix_release(s), em_lua_raise(L, __VA_ARGS__))

/* ---- parsing the key ---- */

typedef struct {
    int dim;          /* the dim of cur it indexes */
    em_tensor *idx;   /* int64, 1-based, positive (normalised); kept in the scope */
} adv_index;

typedef struct {
    em_tensor *cur;       /* t after the numbers and slices (kept in the scope) */
    adv_index adv[EM_MAX_DIMS];
    int nadv;
} adv_key;

bool em_lua_index_is_advanced(lua_State *L, int kidx) {
    if (lua_type(L, kidx) == LUA_TUSERDATA) return em_lua_toslot(L, kidx) != NULL;
    if (lua_type(L, kidx) != LUA_TTABLE) return false;
    lua_Unsigned n = lua_rawlen(L, kidx);
    for (lua_Unsigned k = 1; k <= n; k++) {
        lua_rawgeti(L, kidx, (lua_Integer)k);
        bool is = em_lua_toslot(L, -1) != NULL;
        lua_pop(L, 1);
        if (is) return true;
    }
    return false;
}

static em_tensor *tensor_at(lua_State *L, int idx, ix_scope *s) {
    em_tensor **slot = em_lua_toslot(L, idx);
    if (!*slot) FAILF(L, s, "index: tensor used after close");
    return *slot;
}

/* Checks an integer index tensor against a dim of size n (on a host copy)
 * and returns it as int64 with negative values mapped to 1-based ones. */
static em_tensor *normalise(lua_State *L, ix_scope *s, em_tensor *idx, int dim, int64_t n) {
    if (idx->dtype != EM_INT64 && idx->dtype != EM_INT32)
        FAILF(L, s, "index: tensors used as indices must be int64, int32 or bool, got %s", em_dtype_name(idx->dtype));
    em_tensor *i64 = idx->dtype == EM_INT64 ? idx : keep(s, em_to(idx, EM_INT64));
    if (!i64) fail_err(L, s);
    em_tensor *h = keep(s, em_lua_host_tensor(i64));
    em_tensor *hc = h ? keep(s, em_contiguous(h)) : NULL;
    if (!hc) fail_err(L, s);
    const int64_t *v = (const int64_t *)em_tensor_data(hc);
    bool neg = false;
    for (int64_t k = 0; k < hc->numel; k++) {
        if (v[k] == 0 || v[k] > n || v[k] < -n)
            FAILF(L, s, "index: index %I is out of bounds for dim %d with size %I (indices are 1-based); valid: "
                  "1..%I or -%I..-1", (lua_Integer)v[k], dim + 1, (lua_Integer)n, (lua_Integer)n, (lua_Integer)n);
        neg |= v[k] < 0;
    }
    if (!neg) return i64;
    em_tensor *zero = keep(s, em_tensor_wrapped_scalar(em_scalar_int(0)));
    em_tensor *wrap = keep(s, em_tensor_wrapped_scalar(em_scalar_int(n + 1)));
    em_tensor *isneg = zero && wrap ? keep(s, em_lt(i64, zero)) : NULL;
    em_tensor *shifted = isneg ? keep(s, em_add(i64, wrap, em_scalar_int(1))) : NULL;
    em_tensor *r = shifted ? keep(s, em_where(isneg, shifted, i64)) : NULL;
    if (!r) fail_err(L, s);
    return r;
}

/* A bool mask over dims [dim, dim + mask->ndim) of cur, as mask->ndim int64
 * 1-based index tensors (through nonzero). */
static void mask_indices(lua_State *L, ix_scope *s, adv_key *key, em_tensor *mask, int dim) {
    em_tensor *cur = key->cur;
    if (dim + mask->ndim > cur->ndim)
        FAILF(L, s, "index: too many indices for a tensor of %d dims (a mask of %d dims at dim %d)", cur->ndim,
              mask->ndim, dim + 1);
    for (int k = 0; k < mask->ndim; k++)
        if (mask->sizes[k] != cur->sizes[dim + k]) {
            char a[EM_SHAPE_STR_MAX], b[EM_SHAPE_STR_MAX];
            FAILF(L, s, "index: the mask's shape %s does not match the indexed tensor's %s at dim %d",
                  em_shape_str(mask->ndim, mask->sizes, a, sizeof a), em_shape_str(cur->ndim, cur->sizes, b, sizeof b),
                  dim + k + 1);
        }
    if (mask->ndim == 0) { /* a 0-dim mask adds a dim of size 1 (kept) or 0 (dropped) */
        FAILF(L, s, "index: a 0-dim bool mask is supported only as the whole key (x[mask])");
    }
    em_tensor *nz = keep(s, em_nonzero(mask));
    if (!nz) fail_err(L, s);
    for (int k = 0; k < mask->ndim; k++) {
        em_tensor *col = keep(s, em_select(nz, 1, k));
        if (!col) fail_err(L, s);
        key->adv[key->nadv].dim = dim + k;
        key->adv[key->nadv].idx = col;
        key->nadv++;
    }
}

/* Applies the numbers and slices of the key at kidx (a table, or a lone
 * tensor) to t and collects the tensor entries (see the Note). */
static void parse_key(lua_State *L, ix_scope *s, em_tensor *t, int kidx, bool for_set, adv_key *key) {
    memset(key, 0, sizeof *key);
    int n = lua_type(L, kidx) == LUA_TTABLE ? (int)lua_rawlen(L, kidx) : 1;
    /* the basic key: each tensor entry replaced by {} (as many as a mask's dims) */
    lua_createtable(L, n, 0);
    int basic = lua_gettop(L), nb = 0;
    int used = 0;
    for (int k = 1; k <= n; k++) {
        if (lua_type(L, kidx) == LUA_TTABLE) lua_rawgeti(L, kidx, k);
        else lua_pushvalue(L, kidx);
        if (em_lua_toslot(L, -1)) {
            em_tensor *x = tensor_at(L, -1, s);
            int dims = x->dtype == EM_BOOL ? x->ndim : 1;
            for (int j = 0; j < dims; j++) {
                lua_newtable(L);
                lua_rawseti(L, basic, ++nb);
            }
            used += dims;
        } else {
            used += lua_type(L, -1) == LUA_TNUMBER || lua_type(L, -1) == LUA_TTABLE;
            lua_pushvalue(L, -1);
            lua_rawseti(L, basic, ++nb);
        }
        lua_pop(L, 1);
    }
    if (used > t->ndim)
        FAILF(L, s, "index: too many indices for a tensor of %d dims (got %d)", t->ndim, used);
    key->cur = keep(s, em_lua_index_table(L, t, basic, for_set));
    if (!key->cur) fail_err(L, s);
    lua_pop(L, 1);
    /* the tensor entries, with the dims of cur they index */
    int dim = 0;
    for (int k = 1; k <= n; k++) {
        if (lua_type(L, kidx) == LUA_TTABLE) lua_rawgeti(L, kidx, k);
        else lua_pushvalue(L, kidx);
        if (em_lua_toslot(L, -1)) {
            em_tensor *x = tensor_at(L, -1, s);
            if (x->dtype == EM_BOOL) {
                mask_indices(L, s, key, x, dim);
                dim += x->ndim;
            } else {
                key->adv[key->nadv].dim = dim;
                key->adv[key->nadv].idx = normalise(L, s, x, dim, key->cur->sizes[dim]);
                key->nadv++;
                dim++;
            }
        } else if (lua_type(L, -1) == LUA_TTABLE) {
            dim++;
        }
        lua_pop(L, 1);
    }
}

/* ---- the indexed positions ---- */

/* The broadcast shape of the index tensors (into B, returns its ndim) and
 * the index tensors expanded to it. */
static int broadcast_indices(lua_State *L, ix_scope *s, adv_key *key, int64_t *B) {
    int nb = key->adv[0].idx->ndim;
    for (int k = 0; k < nb; k++) B[k] = key->adv[0].idx->sizes[k];
    for (int j = 1; j < key->nadv; j++) {
        int64_t out[EM_MAX_DIMS];
        const em_tensor *x = key->adv[j].idx;
        nb = em_broadcast_shapes(nb, B, x->ndim, x->sizes, out, "index");
        if (nb < 0) fail_err(L, s);
        memcpy(B, out, sizeof(int64_t) * (size_t)nb);
    }
    for (int j = 0; j < key->nadv; j++) {
        em_tensor *e = keep(s, em_expand(key->adv[j].idx, (em_intlist){ B, nb }));
        if (!e) fail_err(L, s);
        key->adv[j].idx = e;
    }
    return nb;
}

/* The 1-based row-major position over the indexed dims (in key order) of
 * every index entry, flattened to 1-d: sum_j (idx_j - 1) * stride_j + 1. */
static em_tensor *linear_index(lua_State *L, ix_scope *s, adv_key *key) {
    em_tensor *lin = NULL;
    int64_t stride = 1;
    for (int j = key->nadv - 1; j >= 0; j--) {
        em_tensor *st = keep(s, em_tensor_wrapped_scalar(em_scalar_int(stride)));
        em_tensor *one = keep(s, em_tensor_wrapped_scalar(em_scalar_int(1)));
        em_tensor *z = st && one ? keep(s, em_sub(key->adv[j].idx, one, em_scalar_int(1))) : NULL;
        em_tensor *term = z ? keep(s, em_mul(z, st)) : NULL;
        lin = term ? (lin ? keep(s, em_add(lin, term, em_scalar_int(1))) : term) : NULL;
        if (!lin) fail_err(L, s);
        stride *= key->cur->sizes[key->adv[j].dim];
    }
    int64_t minus1 = -1;
    em_tensor *one = keep(s, em_tensor_wrapped_scalar(em_scalar_int(1)));
    em_tensor *r = one ? keep(s, em_add(lin, one, em_scalar_int(1))) : NULL;
    r = r ? keep(s, em_reshape(r, (em_intlist){ &minus1, 1 })) : NULL;
    if (!r) fail_err(L, s);
    return r;
}

/* Whether the indexed dims are adjacent and in order (PyTorch keeps B in
 * their place then). */
static bool adjacent(const adv_key *key) {
    for (int j = 1; j < key->nadv; j++)
        if (key->adv[j].dim != key->adv[j - 1].dim + 1) return false;
    return true;
}

/* cur with the indexed dims first (in key order), the others after. */
static em_tensor *indexed_dims_first(lua_State *L, ix_scope *s, const adv_key *key) {
    int64_t perm[EM_MAX_DIMS];
    bool used[EM_MAX_DIMS] = { false };
    int np = 0;
    for (int j = 0; j < key->nadv; j++) {
        perm[np++] = key->adv[j].dim;
        used[key->adv[j].dim] = true;
    }
    for (int d = 0; d < key->cur->ndim; d++)
        if (!used[d]) perm[np++] = d;
    em_tensor *p = keep(s, em_permute(key->cur, (em_intlist){ perm, np }));
    if (!p) fail_err(L, s);
    return p;
}

/* ---- reading ---- */

em_tensor *em_lua_index_advanced(lua_State *L, em_tensor *t, int kidx) {
    ix_scope s;
    s.n = 0;
    if (lua_type(L, kidx) == LUA_TUSERDATA) { /* x[mask] over all of x: masked_select */
        em_tensor *m = tensor_at(L, kidx, &s);
        if (m->dtype == EM_BOOL && m->ndim == t->ndim &&
            memcmp(m->sizes, t->sizes, sizeof(int64_t) * (size_t)t->ndim) == 0) {
            em_tensor *r = em_masked_select(t, m);
            if (!r) em_lua_error(L, "index");
            return r;
        }
    }
    adv_key key;
    parse_key(L, &s, t, kidx, false, &key);
    int64_t B[EM_MAX_DIMS];
    int nb = broadcast_indices(L, &s, &key, B);
    em_tensor *cur = key.cur, *r;
    int64_t shape[EM_MAX_DIMS];
    int ns = 0;
    int64_t minus1 = -1;
    if (key.nadv == 1) { /* one indexed dim: index_select along it */
        int d = key.adv[0].dim;
        em_tensor *flat = keep(&s, em_reshape(key.adv[0].idx, (em_intlist){ &minus1, 1 }));
        r = flat ? keep(&s, em_index_select(cur, d, flat)) : NULL;
        for (int k = 0; k < d; k++) shape[ns++] = cur->sizes[k];
        for (int k = 0; k < nb; k++) shape[ns++] = B[k];
        for (int k = d + 1; k < cur->ndim; k++) shape[ns++] = cur->sizes[k];
    } else {
        em_tensor *lin = linear_index(L, &s, &key);
        em_tensor *p = indexed_dims_first(L, &s, &key);
        int64_t fs[EM_MAX_DIMS];
        int nf = 0;
        fs[nf] = 1;
        for (int j = 0; j < key.nadv; j++) fs[nf] *= p->sizes[j];
        nf++;
        for (int k = key.nadv; k < p->ndim; k++) fs[nf++] = p->sizes[k];
        em_tensor *flat = keep(&s, em_reshape(p, (em_intlist){ fs, nf }));
        r = flat ? keep(&s, em_index_select(flat, 0, lin)) : NULL;
        for (int k = 0; k < nb; k++) shape[ns++] = B[k];
        for (int k = key.nadv; k < p->ndim; k++) shape[ns++] = p->sizes[k];
    }
    r = r ? keep(&s, em_reshape(r, (em_intlist){ shape, ns })) : NULL;
    if (r && key.nadv > 1 && adjacent(&key) && key.adv[0].dim > 0) { /* B back in place of the dims */
        int p0 = key.adv[0].dim;
        int64_t perm[EM_MAX_DIMS];
        int np = 0;
        for (int k = 0; k < p0; k++) perm[np++] = nb + k;
        for (int k = 0; k < nb; k++) perm[np++] = k;
        for (int k = nb + p0; k < r->ndim; k++) perm[np++] = k;
        r = keep(&s, em_permute(r, (em_intlist){ perm, np }));
    }
    if (!r) fail_err(L, &s);
    em_tensor_retain(r);
    ix_release(&s);
    return r;
}

/* ---- writing ---- */

/* v (a tensor) in dtype, expanded to shape and reshaped to out (a copy when
 * needed): the values a write puts in, cast as PyTorch's setitem casts. */
static em_tensor *values_as(ix_scope *s, em_tensor *v, em_dtype dtype, const int64_t *shape, int n, const int64_t *out,
                            int no) {
    if (v->dtype != dtype && !(v = keep(s, em_to(v, dtype)))) return NULL;
    /* PyTorch's setitem drops the value's leading size-1 dims before expanding */
    int lead = 0;
    while (lead < v->ndim - n && v->sizes[lead] == 1) lead++;
    em_tensor *st = lead ? keep(s, em_reshape(v, (em_intlist){ v->sizes + lead, v->ndim - lead })) : v;
    em_tensor *e = st ? keep(s, em_expand(st, (em_intlist){ shape, n })) : NULL;
    return e ? keep(s, em_reshape(e, (em_intlist){ out, no })) : NULL;
}

/* Writes v (a number: value, else the tensor src) into target at the 1-based
 * positions idx (1-d) along dim: index_fill_ or index_copy_; index_add_ of
 * src when accumulating (index_put's accumulate=true). */
static em_tensor *write_along(ix_scope *s, em_tensor *target, int dim, em_tensor *idx, em_tensor *value,
                              em_tensor *src, bool accumulate) {
    if (accumulate) return keep(s, em_index_add_(target, dim, idx, src, em_scalar_int(1)));
    if (value) return keep(s, em_index_fill_(target, dim, idx, value));
    return keep(s, em_index_copy_(target, dim, idx, src));
}

/* The value as a tensor: a tensor argument, or a wrapped number. */
static em_tensor *value_at(lua_State *L, ix_scope *s, int vidx, bool *is_number) {
    em_tensor **slot = em_lua_toslot(L, vidx);
    *is_number = false;
    if (slot) {
        if (!*slot) FAILF(L, s, "index: tensor used after close");
        return *slot;
    }
    if (lua_type(L, vidx) != LUA_TNUMBER && lua_type(L, vidx) != LUA_TBOOLEAN) {
        ix_release(s);
        em_lua_argerror(L, 3, "index", "value: tensor or number expected, got %s", luaL_typename(L, vidx));
    }
    *is_number = true;
    em_tensor *w = keep(s, em_lua_wrap_number(L, vidx));
    if (!w) fail_err(L, s);
    return w;
}

/* The write itself (after the key and value are checked): NULL with the
 * error set on failure. Runs between em_ag_set_setitem(true) and its reset. */
static em_tensor *do_write(ix_scope *s, adv_key *key, em_tensor *v, bool is_number, const int64_t *B, int nb,
                           em_tensor *lin, em_tensor *p, bool accumulate) {
    bool fill = !accumulate && (is_number || v->ndim == 0);
    em_tensor *cur = key->cur;
    int64_t minus1 = -1;
    /* the result shape R of a read with this key, and where B sits in it */
    int64_t R[EM_MAX_DIMS], out[EM_MAX_DIMS];
    int nr = 0, no = 0;
    if (key->nadv == 1 || adjacent(key)) {
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
                src = values_as(s, v, cur->dtype, R, nr, out, no);
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
        src = values_as(s, v, cur->dtype, R, nr, out, no);
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

/* x[key] = v, or index_put_(x, key, v, accumulate): see the Note. */
static void adv_write(lua_State *L, em_tensor *t, int kidx, int vidx, bool accumulate) {
    ix_scope s;
    s.n = 0;
    bool is_number;
    em_tensor *v = value_at(L, &s, vidx, &is_number);
    em_tensor *r = NULL;
    const char *op = "index";
    if (!accumulate && lua_type(L, kidx) == LUA_TUSERDATA) { /* x[mask] = v over all of x */
        em_tensor *m = tensor_at(L, kidx, &s);
        if (m->dtype == EM_BOOL && m->ndim == t->ndim &&
            memcmp(m->sizes, t->sizes, sizeof(int64_t) * (size_t)t->ndim) == 0) {
            em_tensor *nz = NULL, *src = NULL;
            int64_t count = 0;
            if (!(is_number || v->ndim == 0)) { /* before the setitem mark: may raise */
                nz = keep(&s, em_nonzero(m));
                if (!nz) fail_err(L, &s);
                count = nz->sizes[0];
            }
            bool prev = em_ag_set_setitem(true);
            if (!nz) {
                op = "masked_fill_";
                r = em_masked_fill_(t, m, v);
            } else {
                op = "masked_scatter_";
                src = values_as(&s, v, t->dtype, &count, 1, &count, 1);
                r = src ? em_masked_scatter_(t, m, src) : NULL;
            }
            em_ag_set_setitem(prev);
            if (!r) {
                ix_release(&s);
                em_lua_error(L, op);
            }
            em_tensor_release(r);
            ix_release(&s);
            return;
        }
    }
    adv_key key;
    parse_key(L, &s, t, kidx, true, &key);
    int64_t B[EM_MAX_DIMS];
    int nb = broadcast_indices(L, &s, &key, B);
    /* everything that may raise comes before the setitem mark */
    em_tensor *lin = linear_index(L, &s, &key);
    em_tensor *front = indexed_dims_first(L, &s, &key);
    bool prev = em_ag_set_setitem(!accumulate);
    r = do_write(&s, &key, v, is_number, B, nb, lin, front, accumulate);
    em_ag_set_setitem(prev);
    if (!r) fail_err(L, &s);
    ix_release(&s);
}

void em_lua_newindex_advanced(lua_State *L, em_tensor *t, int kidx, int vidx) { adv_write(L, t, kidx, vidx, false); }

/* ---- index_put ---- */

/* The indices argument of index_put: a non-empty Lua array of tensors. */
static void check_indices(lua_State *L, int idx, const char *op) {
    if (lua_type(L, idx) != LUA_TTABLE)
        em_lua_argerror(L, idx, op, "indices: a list of tensors expected, got %s", luaL_typename(L, idx));
    lua_Unsigned n = lua_rawlen(L, idx);
    if (n == 0) em_lua_argerror(L, idx, op, "indices: the list is empty");
    for (lua_Unsigned k = 1; k <= n; k++) {
        lua_rawgeti(L, idx, (lua_Integer)k);
        bool ok = em_lua_toslot(L, -1) != NULL;
        const char *got = luaL_typename(L, -1);
        lua_pop(L, 1);
        if (!ok) em_lua_argerror(L, idx, op, "indices: element %d is not a tensor (got %s)", (int)k, got);
    }
}

/* The accumulate option of the trailing options table at idx (absent: false). */
static bool accumulate_opt(lua_State *L, int idx, const char *op) {
    if (lua_type(L, idx) == LUA_TNONE || lua_type(L, idx) == LUA_TNIL) return false;
    if (lua_type(L, idx) != LUA_TTABLE) em_lua_argerror(L, idx, op, "options table expected, got %s", luaL_typename(L, idx));
    bool acc = false;
    lua_pushnil(L);
    while (lua_next(L, idx)) {
        const char *k = lua_type(L, -2) == LUA_TSTRING ? lua_tostring(L, -2) : NULL;
        if (!k || strcmp(k, "accumulate") != 0) {
            lua_pop(L, 2);
            em_lua_argerror(L, idx, op, "bad option '%s' (index_put takes accumulate)", k ? k : "?");
        }
        if (lua_type(L, -1) != LUA_TBOOLEAN) {
            lua_pop(L, 2);
            em_lua_argerror(L, idx, op, "accumulate: boolean expected");
        }
        acc = lua_toboolean(L, -1);
        lua_pop(L, 1);
    }
    return acc;
}

/* x:index_put_(indices, values, {accumulate = false}): x[{ indices... }] =
 * values in place (values added, repeats included, with accumulate);
 * returns x. */
static int l_index_put_(lua_State *L) {
    em_tensor *t = em_lua_checkself(L, 1, "index_put_");
    check_indices(L, 2, "index_put_");
    bool acc = accumulate_opt(L, 4, "index_put_");
    adv_write(L, t, 2, 3, acc);
    lua_settop(L, 1);
    return 1;
}

/* ember.index_put(x, indices, values, opts) / x:index_put(...): on a copy. */
static int l_index_put(lua_State *L) {
    em_tensor *t = em_lua_checkself(L, 1, "index_put");
    check_indices(L, 2, "index_put");
    bool acc = accumulate_opt(L, 4, "index_put");
    em_tensor *c = em_clone(t);
    if (!c) return em_lua_error(L, "index_put");
    em_lua_push_tensor(L, c, "index_put");
    lua_replace(L, 1);
    adv_write(L, c, 2, 3, acc);
    lua_settop(L, 1);
    return 1;
}

void em_lua_register_index(lua_State *L, int module_idx, int methods_idx) {
    module_idx = lua_absindex(L, module_idx);
    methods_idx = lua_absindex(L, methods_idx);
    lua_pushcfunction(L, l_index_put);
    lua_setfield(L, module_idx, "index_put");
    lua_pushcfunction(L, l_index_put);
    lua_setfield(L, methods_idx, "index_put");
    lua_pushcfunction(L, l_index_put_);
    lua_setfield(L, methods_idx, "index_put_");
}
