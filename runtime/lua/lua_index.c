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
 * The index tensors' checks, positions and the write itself live in
 * kernels/composite_index_put.c (em_advindex.h), shared with the schema
 * ops index_put / index_put_ (their indices: a Tensor?[] of the tensor
 * entries, nil for a whole dim); this file parses Lua keys.
 */
#include <string.h>

#include "autograd/em_autograd.h"
#include "lua/em_lua_bind.h"
#include "lua/em_lua_int.h"
#include "em_ops.h"
#include "kernels/em_advindex.h"

/* ---- temporaries (em_advindex.h) ---- */

typedef em_adv_scope ix_scope;
#define keep em_adv_keep
#define ix_release em_adv_release

/* Releases the scope and raises the thread's error (named "index"). */
static int fail_err(lua_State *L, ix_scope *s) {
    ix_release(s);
    return em_lua_error(L, "index");
}

#define FAILF(L, s, ...) (ix_release(s), em_lua_raise(L, __VA_ARGS__))

/* ---- parsing the key ---- */

typedef em_adv_key adv_key;

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
            int used = em_adv_add(s, key, tensor_at(L, -1, s), dim, "index");
            if (used < 0) fail_err(L, s);
            dim += used;
        } else if (lua_type(L, -1) == LUA_TTABLE) {
            dim++;
        }
        lua_pop(L, 1);
    }
}

/* ---- the indexed positions (em_advindex.h; raising on error) ---- */

static int broadcast_indices(lua_State *L, ix_scope *s, adv_key *key, int64_t *B) {
    int nb = em_adv_broadcast(s, key, B, "index");
    if (nb < 0) fail_err(L, s);
    return nb;
}

static em_tensor *linear_index(lua_State *L, ix_scope *s, adv_key *key) {
    em_tensor *r = em_adv_linear(s, key);
    if (!r) fail_err(L, s);
    return r;
}

static em_tensor *indexed_dims_first(lua_State *L, ix_scope *s, const adv_key *key) {
    em_tensor *r = em_adv_dims_first(s, key);
    if (!r) fail_err(L, s);
    return r;
}

#define adjacent em_adv_adjacent

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

/* The value as a tensor: a tensor argument, or a wrapped number. */
static em_tensor *value_at(lua_State *L, ix_scope *s, int vidx) {
    em_tensor **slot = em_lua_toslot(L, vidx);
    if (slot) {
        if (!*slot) FAILF(L, s, "index: tensor used after close");
        return *slot;
    }
    if (lua_type(L, vidx) != LUA_TNUMBER && lua_type(L, vidx) != LUA_TBOOLEAN) {
        ix_release(s);
        em_lua_argerror(L, 3, "index", "value: tensor or number expected, got %s", luaL_typename(L, vidx));
    }
    em_tensor *w = keep(s, em_lua_wrap_number(L, vidx));
    if (!w) fail_err(L, s);
    return w;
}

/* x[key] = v: see the Note. */
void em_lua_newindex_advanced(lua_State *L, em_tensor *t, int kidx, int vidx) {
    ix_scope s;
    s.n = 0;
    em_tensor *v = value_at(L, &s, vidx);
    em_tensor *r = NULL;
    const char *op = "index";
    if (lua_type(L, kidx) == LUA_TUSERDATA) { /* x[mask] = v over all of x */
        em_tensor *m = tensor_at(L, kidx, &s);
        if (m->dtype == EM_BOOL && m->ndim == t->ndim &&
            memcmp(m->sizes, t->sizes, sizeof(int64_t) * (size_t)t->ndim) == 0) {
            em_tensor *nz = NULL, *src = NULL;
            int64_t count = 0;
            if (v->ndim != 0) { /* before the setitem mark: may raise */
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
                src = em_adv_values_as(&s, v, t->dtype, &count, 1, &count, 1);
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
    bool prev = em_ag_set_setitem(true);
    r = em_adv_write(&s, &key, v, B, nb, lin, front, false);
    em_ag_set_setitem(prev);
    if (!r) fail_err(L, &s);
    ix_release(&s);
}

