/* view.c -- views with PyTorch semantics: view, reshape, transpose,
 * permute, expand, narrow, select, slice, squeeze, unsqueeze, alias.
 * Core copies nothing: a reshape that needs a copy is reported to the
 * caller (Note [Reshape copies outside core] in em_core.h), and the
 * copying lives in the backend's kernels (runtime/kernels/cpu/copy.c). */
#include <string.h>

#include "core/em_core_int.h"

/* Every function here returns a new header over t's storage (retained)
 * that shares t's version counter (Note [Version counter sharing]) and has
 * wrapped_number = false, or NULL with the error slot set. t is borrowed. */

static em_tensor *make_view(const em_tensor *t, int64_t offset, int ndim, const int64_t *sizes,
                            const int64_t *strides)
{
    /* Note [View base]: the view owns its root base and carries the
     * Autograd key; autograd adds the meta when it records the view */
    em_tensor *v = em_tensor_new_view(t->storage, offset, ndim, sizes, strides, t->dtype, t->version);
    if (!v) return NULL;
    em_tensor *root = t->view_base ? t->view_base : (em_tensor *)t;
    v->view_base = em_tensor_retain(root);
    v->view_version = em_tensor_version(t);
    v->keyset |= EM_KS(EM_KEY_AUTOGRAD);
    return v;
}

#define SHAPE(name, t) char name[EM_SHAPE_STR_MAX]; em_shape_str((t)->ndim, (t)->sizes, name, sizeof name)

/* ---- view and reshape ---- */

/* PyTorch's infer_size: replaces one -1 and checks the element count.
 * Writes the sizes to out; returns false with an error set. */
static bool infer_size(const em_tensor *t, int n, const int64_t *sizes, int64_t *out, const char *op)
{
    char want[EM_SHAPE_STR_MAX];
    if (n < 0 || n > EM_MAX_DIMS) {
        em_set_error(EM_EVALUE, "%s: %d dims is out of range (at most %d)", op, n, EM_MAX_DIMS);
        return false;
    }
    int infer = -1;
    int64_t prod = 1;
    bool overflow = false;
    for (int i = 0; i < n; i++) {
        if (sizes[i] == -1) {
            if (infer >= 0) {
                em_set_error(EM_EVALUE, "%s: only one dimension can be -1 in shape %s", op,
                             em_shape_str(n, sizes, want, sizeof want));
                return false;
            }
            infer = i;
        } else if (sizes[i] < 0) {
            em_set_error(EM_EVALUE, "%s: invalid size %lld in shape %s", op, (long long)sizes[i],
                         em_shape_str(n, sizes, want, sizeof want));
            return false;
        } else if (!overflow) {
            overflow = __builtin_mul_overflow(prod, sizes[i], &prod);
        }
        out[i] = sizes[i];
    }
    for (int i = 0; i < n && overflow; i++)
        if (sizes[i] == 0) overflow = false, prod = 0;
    if (overflow) prod = -1; /* cannot match any real numel */
    if (infer >= 0) {
        if (prod == 0) {
            SHAPE(have, t);
            em_set_error(EM_ESHAPE,
                         "%s: cannot reshape a tensor of shape %s into %s: the -1 is ambiguous when "
                         "the other sizes multiply to 0",
                         op, have, em_shape_str(n, sizes, want, sizeof want));
            return false;
        }
        if (prod > 0 && t->numel % prod == 0) {
            out[infer] = t->numel / prod;
            return true;
        }
    } else if (prod == t->numel) {
        return true;
    }
    SHAPE(have, t);
    em_set_error(EM_ESHAPE, "%s: shape %s is invalid for a tensor of shape %s (%lld elements)", op,
                 em_shape_str(n, sizes, want, sizeof want), have, (long long)t->numel);
    return false;
}

/* PyTorch's computeStride: the strides that let newshape view a tensor of
 * oldshape/oldstride without copying, or false when a dimension of the
 * view would span two non-contiguous chunks of the original. */
static bool compute_stride(int on, const int64_t *oshape, const int64_t *ostride, int nn,
                           const int64_t *nshape, int64_t *nstride)
{
    if (on == 0) {
        for (int i = 0; i < nn; i++) nstride[i] = 1;
        return true;
    }
    int64_t numel = 1;
    for (int i = 0; i < on; i++) numel *= oshape[i];
    if (numel == 0 && on == nn && memcmp(oshape, nshape, (size_t)on * sizeof(int64_t)) == 0) {
        memcpy(nstride, ostride, (size_t)on * sizeof(int64_t));
        return true;
    }
    if (numel == 0) {
        for (int d = nn - 1; d >= 0; d--)
            nstride[d] = d == nn - 1 ? 1
                         : (int64_t)((uint64_t)(nshape[d + 1] > 1 ? nshape[d + 1] : 1) *
                                     (uint64_t)nstride[d + 1]);
        return true;
    }
    int view_d = nn - 1;
    int64_t chunk_base_stride = ostride[on - 1], tensor_numel = 1, view_numel = 1;
    for (int td = on - 1; td >= 0; td--) {
        tensor_numel *= oshape[td];
        if (td == 0 || (oshape[td - 1] != 1 && ostride[td - 1] != tensor_numel * chunk_base_stride)) {
            while (view_d >= 0 && (view_numel < tensor_numel || nshape[view_d] == 1)) {
                nstride[view_d] = view_numel * chunk_base_stride;
                view_numel *= nshape[view_d];
                view_d--;
            }
            if (view_numel != tensor_numel) return false;
            if (td > 0) {
                chunk_base_stride = ostride[td - 1];
                tensor_numel = 1;
                view_numel = 1;
            }
        }
    }
    return view_d == -1;
}

em_tensor *em_core_view(const em_tensor *t, int n, const int64_t *sizes, const char *op)
{
    int64_t shape[EM_MAX_DIMS], strides[EM_MAX_DIMS];
    if (!op) op = "view";
    if (!infer_size(t, n, sizes, shape, op)) return NULL;
    if (!compute_stride(t->ndim, t->sizes, t->strides, n, shape, strides)) {
        char want[EM_SHAPE_STR_MAX];
        SHAPE(have, t);
        em_set_error(EM_ESHAPE,
                     "%s: shape %s is not compatible with the strides of a tensor of shape %s "
                     "(a dim would span non-contiguous memory); use reshape instead",
                     op, em_shape_str(n, shape, want, sizeof want), have);
        return NULL;
    }
    return make_view(t, t->offset, n, shape, strides);
}

em_tensor *em_core_reshape_view(const em_tensor *t, int n, const int64_t *sizes, bool *needs_copy)
{
    int64_t shape[EM_MAX_DIMS], strides[EM_MAX_DIMS];
    *needs_copy = false;
    if (!infer_size(t, n, sizes, shape, "reshape")) return NULL;
    if (compute_stride(t->ndim, t->sizes, t->strides, n, shape, strides))
        return make_view(t, t->offset, n, shape, strides);
    *needs_copy = true; /* See Note [Reshape copies outside core] */
    return NULL;
}

em_tensor *em_core_reshape_copied(const em_tensor *c, int n, const int64_t *sizes)
{
    int64_t shape[EM_MAX_DIMS], strides[EM_MAX_DIMS];
    if (!c->is_contiguous) {
        em_set_error(EM_EINTERNAL, "reshape: the copy to reshape is not contiguous");
        return NULL;
    }
    if (!infer_size(c, n, sizes, shape, "reshape")) return NULL;
    int64_t st = 1;
    for (int i = n - 1; i >= 0; i--) {
        strides[i] = st;
        st = (int64_t)((uint64_t)st * (uint64_t)(shape[i] > 1 ? shape[i] : 1));
    }
    /* not a view of anything (Note [View base]): c's storage and version */
    return em_tensor_new_view(c->storage, c->offset, n, shape, strides, c->dtype, c->version);
}

/* ---- dim reordering ---- */

em_tensor *em_core_transpose(const em_tensor *t, int64_t d0, int64_t d1)
{
    int a = em_wrap_dim(d0, t->ndim, "transpose");
    if (a < 0) return NULL;
    int b = em_wrap_dim(d1, t->ndim, "transpose");
    if (b < 0) return NULL;
    int64_t sizes[EM_MAX_DIMS], strides[EM_MAX_DIMS];
    memcpy(sizes, t->sizes, (size_t)t->ndim * sizeof(int64_t));
    memcpy(strides, t->strides, (size_t)t->ndim * sizeof(int64_t));
    if (t->ndim > 0) {
        int64_t s = sizes[a]; sizes[a] = sizes[b]; sizes[b] = s;
        s = strides[a]; strides[a] = strides[b]; strides[b] = s;
    }
    return make_view(t, t->offset, t->ndim, sizes, strides);
}

em_tensor *em_core_permute(const em_tensor *t, int n, const int64_t *dims)
{
    if (n != t->ndim) {
        SHAPE(have, t);
        em_set_error(EM_ESHAPE, "permute: %d dims given for a tensor of shape %s (%d dims)", n, have,
                     t->ndim);
        return NULL;
    }
    bool seen[EM_MAX_DIMS] = { false };
    int64_t sizes[EM_MAX_DIMS], strides[EM_MAX_DIMS];
    for (int i = 0; i < n; i++) {
        int d = em_wrap_dim(dims[i], t->ndim, "permute");
        if (d < 0) return NULL;
        if (seen[d]) {
            em_set_error(EM_EVALUE, "permute: dim %d appears twice; dims must be a permutation of 1..%d",
                         d + 1, n);
            return NULL;
        }
        seen[d] = true;
        sizes[i] = t->sizes[d];
        strides[i] = t->strides[d];
    }
    return make_view(t, t->offset, n, sizes, strides);
}

/* ---- expand ---- */

em_tensor *em_core_expand(const em_tensor *t, int n, const int64_t *sizes)
{
    char want[EM_SHAPE_STR_MAX];
    if (n < t->ndim || n > EM_MAX_DIMS) {
        SHAPE(have, t);
        em_set_error(EM_ESHAPE, "expand: cannot expand shape %s to %s (%s)", have,
                     em_shape_str(n < 0 ? 0 : n > EM_MAX_DIMS ? EM_MAX_DIMS : n, sizes, want, sizeof want),
                     n > EM_MAX_DIMS ? "too many dims" : "fewer dims than the tensor");
        return NULL;
    }
    int64_t osz[EM_MAX_DIMS], ost[EM_MAX_DIMS];
    for (int i = n - 1; i >= 0; i--) {
        int src = t->ndim - n + i;
        if (src < 0) { /* a new leading dim */
            if (sizes[i] < 0) {
                SHAPE(have, t);
                em_set_error(EM_EVALUE, "expand: cannot expand shape %s to %s: size %lld at new leading dim %d",
                             have, em_shape_str(n, sizes, want, sizeof want), (long long)sizes[i], i + 1);
                return NULL;
            }
            /* PyTorch's strides: a new dim of size 1 gets size * stride of
             * the next one (what the overlap checks compare), else 0; every
             * dim of an expanded 0-dim tensor has stride 0 */
            osz[i] = sizes[i];
            ost[i] = sizes[i] == 1 && t->ndim > 0 ? (i + 1 < n ? osz[i + 1] * ost[i + 1] : 1) : 0;
            continue;
        }
        int64_t s = sizes[i] == -1 ? t->sizes[src] : sizes[i];
        if (s < 0) {
            SHAPE(have, t);
            em_set_error(EM_EVALUE, "expand: cannot expand shape %s to %s: invalid size %lld at dim %d",
                         have, em_shape_str(n, sizes, want, sizeof want), (long long)sizes[i], i + 1);
            return NULL;
        }
        if (s == t->sizes[src]) {
            osz[i] = s;
            ost[i] = t->strides[src];
        } else if (t->sizes[src] == 1) {
            osz[i] = s;
            ost[i] = 0;
        } else {
            SHAPE(have, t);
            em_set_error(EM_ESHAPE,
                         "expand: cannot expand shape %s to %s: dim %d has size %lld, which is not 1",
                         have, em_shape_str(n, sizes, want, sizeof want), i + 1,
                         (long long)t->sizes[src]);
            return NULL;
        }
    }
    return make_view(t, t->offset, n, osz, ost);
}

/* ---- narrow, select, slice ---- */

static em_tensor *copy_shape_view(const em_tensor *t, int dim, int64_t size, int64_t stride, int64_t offset)
{
    int64_t sizes[EM_MAX_DIMS], strides[EM_MAX_DIMS];
    memcpy(sizes, t->sizes, (size_t)t->ndim * sizeof(int64_t));
    memcpy(strides, t->strides, (size_t)t->ndim * sizeof(int64_t));
    sizes[dim] = size;
    strides[dim] = stride;
    return make_view(t, offset, t->ndim, sizes, strides);
}

/* Positions in messages are 1-based for values >= 0, as the Lua user
 * wrote them. */
static long long user_pos(int64_t i) { return (long long)(i >= 0 ? i + 1 : i); }

em_tensor *em_core_narrow(const em_tensor *t, int64_t dim, int64_t start, int64_t length)
{
    if (t->ndim == 0) {
        em_set_error(EM_EINDEX, "narrow: cannot narrow a 0-dim tensor");
        return NULL;
    }
    int d = em_wrap_dim(dim, t->ndim, "narrow");
    if (d < 0) return NULL;
    int64_t size = t->sizes[d];
    if (start < -size || start > size) {
        SHAPE(have, t);
        em_set_error(EM_EINDEX, "narrow: start %lld out of range for dim %d of size %lld (shape %s)",
                     user_pos(start), d + 1, (long long)size, have);
        return NULL;
    }
    if (start < 0) start += size;
    if (length < 0 || length > size - start) {
        SHAPE(have, t);
        em_set_error(length < 0 ? EM_EVALUE : EM_EINDEX,
                     "narrow: start %lld and length %lld exceed dim %d of size %lld (shape %s)",
                     (long long)start + 1, (long long)length, d + 1, (long long)size, have);
        return NULL;
    }
    return copy_shape_view(t, d, length, t->strides[d], t->offset + start * t->strides[d]);
}

em_tensor *em_core_select(const em_tensor *t, int64_t dim, int64_t index)
{
    if (t->ndim == 0) {
        em_set_error(EM_EINDEX, "select: cannot select on a 0-dim tensor");
        return NULL;
    }
    int d = em_wrap_dim(dim, t->ndim, "select");
    if (d < 0) return NULL;
    int64_t size = t->sizes[d];
    if (index < -size || index >= size) {
        SHAPE(have, t);
        em_set_error(EM_EINDEX, "select: index %lld out of range for dim %d of size %lld (shape %s)",
                     user_pos(index), d + 1, (long long)size, have);
        return NULL;
    }
    if (index < 0) index += size;
    int64_t sizes[EM_MAX_DIMS], strides[EM_MAX_DIMS];
    for (int i = 0, j = 0; i < t->ndim; i++) {
        if (i == d) continue;
        sizes[j] = t->sizes[i];
        strides[j++] = t->strides[i];
    }
    return make_view(t, t->offset + index * t->strides[d], t->ndim - 1, sizes, strides);
}

em_tensor *em_core_slice(const em_tensor *t, int64_t dim, int64_t start, int64_t end, int64_t step)
{
    if (t->ndim == 0) {
        em_set_error(EM_EINDEX, "slice: cannot slice a 0-dim tensor");
        return NULL;
    }
    int d = em_wrap_dim(dim, t->ndim, "slice");
    if (d < 0) return NULL;
    if (step < 1) {
        em_set_error(EM_EVALUE, "slice: step must be positive, not %lld", (long long)step);
        return NULL;
    }
    int64_t size = t->sizes[d];
    if (start < 0) start = start < -size ? 0 : start + size;
    if (end < 0) end = end < -size ? 0 : end + size;
    if (start > size) start = size;
    if (end > size) end = size;
    if (end < start) end = start;
    /* ceil((end - start) / step) without forming end - start + step - 1 (step may be near 2^63) */
    int64_t len = (end - start) / step + ((end - start) % step != 0);
    /* one element or none: the step is never taken (step * stride could overflow) */
    int64_t stride = len > 1 ? t->strides[d] * step : t->strides[d];
    return copy_shape_view(t, d, len, stride, t->offset + start * t->strides[d]);
}

/* ---- squeeze, unsqueeze, alias ---- */

em_tensor *em_core_squeeze(const em_tensor *t, const int64_t *dim)
{
    int64_t sizes[EM_MAX_DIMS], strides[EM_MAX_DIMS];
    int only = -1, n = 0;
    if (dim) {
        only = em_wrap_dim(*dim, t->ndim, "squeeze");
        if (only < 0) return NULL;
    }
    for (int i = 0; i < t->ndim; i++) {
        bool drop = t->sizes[i] == 1 && (only < 0 || i == only);
        if (drop) continue;
        sizes[n] = t->sizes[i];
        strides[n++] = t->strides[i];
    }
    return make_view(t, t->offset, n, sizes, strides);
}

em_tensor *em_core_unsqueeze(const em_tensor *t, int64_t dim)
{
    if (t->ndim >= EM_MAX_DIMS) {
        em_set_error(EM_EVALUE, "unsqueeze: a tensor of %d dims cannot grow (at most %d)", t->ndim,
                     EM_MAX_DIMS);
        return NULL;
    }
    int d = em_core_wrap_dim_range(dim, t->ndim + 1, t->ndim, "unsqueeze");
    if (d < 0) return NULL;
    int64_t sizes[EM_MAX_DIMS], strides[EM_MAX_DIMS];
    for (int i = 0, j = 0; i <= t->ndim; i++) {
        if (i == d) {
            sizes[i] = 1;
            strides[i] = d < t->ndim ? t->sizes[d] * t->strides[d] : 1;
        } else {
            sizes[i] = t->sizes[j];
            strides[i] = t->strides[j++];
        }
    }
    return make_view(t, t->offset, t->ndim + 1, sizes, strides);
}

em_tensor *em_core_alias(const em_tensor *t)
{
    return em_core_header_alias(t); /* t's geometry is already valid */
}

em_tensor *em_core_alias_view(const em_tensor *t)
{
    return make_view(t, t->offset, t->ndim, t->sizes, t->strides);
}

em_tensor *em_core_as_strided(const em_tensor *t, int n, const int64_t *sizes, const int64_t *strides,
                              int64_t offset)
{
    if (n < 0 || n > EM_MAX_DIMS) {
        em_set_error(EM_EVALUE, "as_strided: %d dims is out of range (at most %d)", n, EM_MAX_DIMS);
        return NULL;
    }
    /* em_tensor_new_view checks sizes, strides >= 0 and the extent */
    return make_view(t, offset, n, sizes, strides);
}

/* ---- internal overlap ---- */

em_overlap em_core_internal_overlap(const em_tensor *t)
{
    if (t->is_contiguous) return EM_OVERLAP_NO;
    for (int i = 0; i < t->ndim; i++)
        if (t->strides[i] == 0 && t->sizes[i] > 1) return EM_OVERLAP_YES;
    /* non-overlapping and dense: some permutation of the dims is contiguous */
    int order[EM_MAX_DIMS];
    int n = 0;
    for (int i = 0; i < t->ndim; i++)
        if (t->sizes[i] != 1) order[n++] = i;
    for (int i = 1; i < n; i++) /* insertion sort by stride, innermost first */
        for (int j = i; j > 0 && t->strides[order[j]] < t->strides[order[j - 1]]; j--) {
            int x = order[j]; order[j] = order[j - 1]; order[j - 1] = x;
        }
    int64_t expected = 1;
    for (int i = 0; i < n; i++) {
        if (t->strides[order[i]] != expected) return EM_OVERLAP_TOO_HARD;
        expected *= t->sizes[order[i]];
    }
    return EM_OVERLAP_NO;
}

em_status em_core_check_no_partial_overlap(const em_tensor *a, const em_tensor *b, const char *op)
{
    if (a == b || a->storage != b->storage || a->numel == 0 || b->numel == 0) return EM_OK;
    if (em_core_internal_overlap(a) != EM_OVERLAP_NO || em_core_internal_overlap(b) != EM_OVERLAP_NO)
        return EM_OK; /* too hard to tell */
    size_t ea = em_dtype_size(a->dtype), eb = em_dtype_size(b->dtype);
    uint64_t a0 = (uint64_t)a->offset * ea, a1 = a0 + (uint64_t)a->numel * ea;
    uint64_t b0 = (uint64_t)b->offset * eb, b1 = b0 + (uint64_t)b->numel * eb;
    bool partial;
    if (a0 == b0 && a1 == b1)
        partial = a->ndim != b->ndim || memcmp(a->strides, b->strides, sizeof(int64_t) * (size_t)a->ndim) != 0;
    else
        partial = a0 < b1 && b0 < a1;
    if (!partial) return EM_OK;
    return em_set_error(EM_EVALUE, "%s: unsupported operation: some elements of the input tensor and the "
                                   "written-to tensor refer to a single memory location; clone() the "
                                   "input first", op);
}

em_status em_core_check_no_internal_overlap(const em_tensor *t, const char *op)
{
    if (em_core_internal_overlap(t) != EM_OVERLAP_YES) return EM_OK;
    return em_set_error(EM_EVALUE, "%s: unsupported operation: more than one element of the written-to "
                                   "tensor refers to a single memory location; clone() the tensor "
                                   "before writing to it", op);
}
