/* em_advindex.h -- advanced indexing with index tensors, shared by the
 * composite index_put / index_put_ (composite_index_put.c) and the Lua
 * indexing x[key] / x[key] = v (lua/lua_index.c); see Note [Advanced
 * indexing] in lua/lua_index.c. Every function returns NULL (or -1) with
 * the thread's error set, its messages starting with `op`; every tensor it
 * makes is kept in the scope (released by em_adv_release), so callers
 * release nothing else. */
#ifndef EM_ADVINDEX_H
#define EM_ADVINDEX_H

#include <stdbool.h>
#include <stdint.h>

#include "core/em_core.h"

/* ---- temporaries ---- */

#define EM_ADV_MAX 96
typedef struct {
    em_tensor *t[EM_ADV_MAX];
    int n;
} em_adv_scope;

/* Keeps t (a new reference) until em_adv_release; NULL passes through (a
 * full scope releases t and fails with EM_EINTERNAL). */
EM_HIDDEN em_tensor *em_adv_keep(em_adv_scope *s, em_tensor *t);
EM_HIDDEN void em_adv_release(em_adv_scope *s);

/* ---- the key ---- */

typedef struct {
    int dim;        /* the dim of cur it indexes */
    em_tensor *idx; /* int64, 1-based, positive (normalised); kept in the scope */
} em_adv_index;

typedef struct {
    em_tensor *cur; /* the tensor the index tensors index (kept in the scope) */
    em_adv_index adv[EM_MAX_DIMS];
    int nadv;
} em_adv_key;

/* Adds the index tensor x at dim of key->cur to key: an int64/int32 tensor
 * indexes that dim (1-based values, negative from the end; checked against
 * the size), a bool mask the mask->ndim dims from dim (through nonzero).
 * Returns the number of dims x covers, or -1 on error. */
EM_HIDDEN int em_adv_add(em_adv_scope *s, em_adv_key *key, em_tensor *x, int dim, const char *op);

/* Broadcasts the key's index tensors together: their shape into B (returns
 * its ndim, -1 on error), each replaced by its expansion to B. */
EM_HIDDEN int em_adv_broadcast(em_adv_scope *s, em_adv_key *key, int64_t *B, const char *op);

/* The 1-based row-major position over the indexed dims (in key order) of
 * every index entry, flattened to 1-d: sum_j (idx_j - 1) * stride_j + 1. */
EM_HIDDEN em_tensor *em_adv_linear(em_adv_scope *s, const em_adv_key *key);

/* Whether the indexed dims are adjacent and in order (PyTorch keeps B in
 * their place then). */
EM_HIDDEN bool em_adv_adjacent(const em_adv_key *key);

/* key->cur with the indexed dims first (in key order), the others after. */
EM_HIDDEN em_tensor *em_adv_dims_first(em_adv_scope *s, const em_adv_key *key);

/* v in dtype, expanded to shape (n dims) and reshaped to out (no dims; a
 * copy when needed): the values a write puts in, cast as PyTorch's setitem
 * casts (the value's leading size-1 dims dropped first, as setitem does). */
EM_HIDDEN em_tensor *em_adv_values_as(em_adv_scope *s, em_tensor *v, em_dtype dtype, const int64_t *shape, int n,
                                      const int64_t *out, int no);

/* Writes v (a tensor; 0-dim fills) into key->cur at the key's positions
 * (after em_adv_broadcast: B, nb; lin = em_adv_linear, p =
 * em_adv_dims_first), in place; adds instead (repeats included) when
 * accumulate. Returns the written tensor (kept), NULL on error. */
EM_HIDDEN em_tensor *em_adv_write(em_adv_scope *s, const em_adv_key *key, em_tensor *v, const int64_t *B, int nb,
                                  em_tensor *lin, em_tensor *p, bool accumulate);

#endif
