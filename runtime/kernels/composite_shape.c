/* composite_shape.c -- the shape family's composite ops (schema/ops/shape.yaml,
 * `kernels: {Composite: em_comp_NAME}`; see Note [Composite ops] in
 * codegen/codegen.h): reshaping views, aliases, fliplr/flipud and tile over
 * the kernels, repeat_interleave, diagonals, stacking and splitting.
 *
 * Each function checks what it can name better than its parts, then calls
 * ops through the public API (em_ops.h), never a kernel, so autograd records
 * the parts and views stay views (Note [View base]): flatten, unflatten,
 * movedim, swapaxes, broadcast_to, diagonal, unfold, meshgrid and the splits
 * return views of self. Dims arrive 0-based (negative from the end), as the
 * binding converts them.
 */
#include <stdlib.h>
#include <string.h>

#include "autograd/em_autograd.h"
#include "em_ops.h"
#include "em_kernels_decl.h"
#include "kernels/cpu/em_cpu.h" /* em_cpu_diagonal_geometry */

/* ---- small helpers ---- */

static em_intlist il(const int64_t *data, int n) { return (em_intlist){ data, n }; }

/* An owned array for n results (at least one slot, so n == 0 is not NULL). */
static em_tensor **result_array(int n, const char *op) {
    em_tensor **r = calloc((size_t)(n > 0 ? n : 1), sizeof *r);
    if (!r) em_set_error(EM_ENOMEM, "%s: out of memory for %d results", op, n);
    return r;
}

/* The error of a shape-family op whose argument needs at least min_dims dims. */
static bool need_dims(const em_tensor *t, int min_dims, const char *op, const char *what) {
    if (t->ndim >= min_dims) return true;
    em_set_error(EM_ESHAPE, "%s: %s must have at least %d dim%s, got a %d-dim tensor", op, what, min_dims,
                 min_dims == 1 ? "" : "s", t->ndim);
    return false;
}

/* ---- reshaping views ---- */

/* flatten(start_dim, end_dim): reshape merging dims start..end; self itself
 * when they are one dim (PyTorch returns self), {1} for a 0-dim tensor. */
em_tensor *em_comp_flatten(em_keyset ks, em_tensor *self, int64_t start_dim, int64_t end_dim) {
    int s = em_wrap_dim(start_dim, self->ndim, "flatten");
    if (s < 0) return NULL;
    int e = em_wrap_dim(end_dim, self->ndim, "flatten");
    if (e < 0) return NULL;
    if (s > e) {
        em_set_error(EM_EVALUE, "flatten: start_dim (%d) cannot come after end_dim (%d)", s + 1, e + 1);
        return NULL;
    }
    if (self->ndim == 0) {
        int64_t one = 1;
        return em_reshape(self, il(&one, 1));
    }
    if (s == e) return em_tensor_retain(self);
    int64_t sizes[EM_MAX_DIMS];
    int n = 0;
    for (int d = 0; d < s; d++) sizes[n++] = self->sizes[d];
    int64_t merged = 1;
    for (int d = s; d <= e; d++) merged *= self->sizes[d];
    sizes[n++] = merged;
    for (int d = e + 1; d < self->ndim; d++) sizes[n++] = self->sizes[d];
    return em_reshape(self, il(sizes, n));
}

/* unflatten(dim, sizes): view splitting dim into sizes (one may be -1);
 * splitting one dim is always possible without copying. */
em_tensor *em_comp_unflatten(em_keyset ks, em_tensor *self, int64_t dim, em_intlist sizes) {
    int d = em_wrap_dim(dim, self->ndim, "unflatten");
    if (d < 0) return NULL;
    if (self->ndim == 0) {
        em_set_error(EM_ESHAPE, "unflatten: self must have at least 1 dim, got a 0-dim tensor");
        return NULL;
    }
    if (sizes.n <= 0) {
        em_set_error(EM_EVALUE, "unflatten: sizes must be non-empty");
        return NULL;
    }
    if (self->ndim - 1 + sizes.n > EM_MAX_DIMS) {
        em_set_error(EM_ESHAPE, "unflatten: the result would have more than %d dims", EM_MAX_DIMS);
        return NULL;
    }
    int64_t prod = 1;
    int infer = -1;
    for (int i = 0; i < sizes.n; i++) {
        if (sizes.data[i] == -1) {
            if (infer >= 0) {
                em_set_error(EM_EVALUE, "unflatten: only one size can be -1, got -1 at [%d] and [%d]", infer + 1,
                             i + 1);
                return NULL;
            }
            infer = i;
        } else if (sizes.data[i] < 0) {
            em_set_error(EM_EVALUE, "unflatten: sizes[%d] is %lld; sizes must be non-negative or -1", i + 1,
                         (long long)sizes.data[i]);
            return NULL;
        } else if (__builtin_mul_overflow(prod, sizes.data[i], &prod)) {
            prod = -1; /* matches no size: reported below */
        }
    }
    char b1[EM_SHAPE_STR_MAX];
    if ((infer < 0 && prod != self->sizes[d]) ||
        (infer >= 0 && (prod <= 0 || self->sizes[d] % prod != 0))) {
        em_set_error(EM_ESHAPE, "unflatten: sizes %s do not multiply up to the size of dim %d (%lld)",
                     em_shape_str(sizes.n, sizes.data, b1, sizeof b1), d + 1, (long long)self->sizes[d]);
        return NULL;
    }
    int64_t out[EM_MAX_DIMS];
    int n = 0;
    for (int i = 0; i < d; i++) out[n++] = self->sizes[i];
    for (int i = 0; i < sizes.n; i++) out[n++] = i == infer ? self->sizes[d] / prod : sizes.data[i];
    for (int i = d + 1; i < self->ndim; i++) out[n++] = self->sizes[i];
    return em_view(self, il(out, n));
}

/* movedim(source, destination): the permutation that puts each source dim
 * at its destination and the other dims, in order, in the free places. */
static em_tensor *movedim(em_tensor *self, em_intlist source, em_intlist destination, const char *op) {
    int nd = self->ndim;
    if (source.n != destination.n) {
        em_set_error(EM_EVALUE, "%s: source and destination must have the same number of dims, got %d and %d",
                     op, source.n, destination.n);
        return NULL;
    }
    int64_t perm[EM_MAX_DIMS];
    bool src_used[EM_MAX_DIMS] = { false }, dst_used[EM_MAX_DIMS] = { false };
    for (int i = 0; i < EM_MAX_DIMS; i++) perm[i] = -1;
    for (int i = 0; i < source.n; i++) {
        int s = em_wrap_dim(source.data[i], nd, op);
        if (s < 0) return NULL;
        int t = em_wrap_dim(destination.data[i], nd, op);
        if (t < 0) return NULL;
        if (src_used[s] || dst_used[t]) {
            em_set_error(EM_EVALUE, "%s: dim %d appears more than once in %s", op, (src_used[s] ? s : t) + 1,
                         src_used[s] ? "source" : "destination");
            return NULL;
        }
        src_used[s] = dst_used[t] = true;
        perm[t] = s;
    }
    if (nd == 0) return em_permute(self, il(NULL, 0));
    int next_src = 0;
    for (int t = 0; t < nd; t++) {
        if (perm[t] >= 0) continue;
        while (src_used[next_src]) next_src++;
        perm[t] = next_src++;
    }
    return em_permute(self, il(perm, nd));
}

em_tensor *em_comp_movedim(em_keyset ks, em_tensor *self, em_intlist source, em_intlist destination) {
    return movedim(self, source, destination, "movedim");
}

em_tensor *em_comp_moveaxis(em_keyset ks, em_tensor *self, em_intlist source, em_intlist destination) {
    return movedim(self, source, destination, "moveaxis");
}

em_tensor *em_comp_swapaxes(em_keyset ks, em_tensor *self, int64_t axis0, int64_t axis1) {
    if (em_wrap_dim(axis0, self->ndim, "swapaxes") < 0 || em_wrap_dim(axis1, self->ndim, "swapaxes") < 0)
        return NULL;
    return em_transpose(self, axis0, axis1);
}

em_tensor *em_comp_swapdims(em_keyset ks, em_tensor *self, int64_t dim0, int64_t dim1) {
    if (em_wrap_dim(dim0, self->ndim, "swapdims") < 0 || em_wrap_dim(dim1, self->ndim, "swapdims") < 0)
        return NULL;
    return em_transpose(self, dim0, dim1);
}

/* Whether shape (n, sizes) can be expanded to size (-1 keeps a size of
 * self; leading new dims may not be -1). Sets the error naming op. */
static bool check_broadcast_to(const em_tensor *self, em_intlist size, const char *op) {
    char b1[EM_SHAPE_STR_MAX], b2[EM_SHAPE_STR_MAX];
    bool ok = size.n >= self->ndim;
    for (int i = 0; ok && i < size.n; i++) {
        int j = i - (size.n - self->ndim); /* self's dim, or < 0 for a new leading one */
        int64_t want = size.data[i];
        if (j < 0) ok = want >= 0;
        else ok = want == -1 || want == self->sizes[j] || (self->sizes[j] == 1 && want >= 0);
    }
    if (!ok)
        em_set_error(EM_ESHAPE, "%s: cannot broadcast a tensor of shape %s to %s", op,
                     em_shape_str(self->ndim, self->sizes, b1, sizeof b1),
                     em_shape_str(size.n, size.data, b2, sizeof b2));
    return ok;
}

em_tensor *em_comp_broadcast_to(em_keyset ks, em_tensor *self, em_intlist size) {
    if (size.n < 0) size.n = 0;
    if (!check_broadcast_to(self, size, "broadcast_to")) return NULL;
    return em_expand(self, size);
}

/* broadcast_tensors(tensors): each expanded to the common shape (a view),
 * or the tensor itself when it has that shape already (PyTorch's
 * expand_outplace). */
em_tensor **em_comp_broadcast_tensors(em_keyset ks, em_tensorlist tensors, int *nresults) {
    int64_t shape[EM_MAX_DIMS];
    int n = 0;
    for (int i = 0; i < tensors.n; i++) {
        int64_t next[EM_MAX_DIMS];
        const em_tensor *t = tensors.data[i];
        n = em_broadcast_shapes(n, shape, t->ndim, t->sizes, next, "broadcast_tensors");
        if (n < 0) return NULL;
        memcpy(shape, next, sizeof(int64_t) * (size_t)n);
    }
    em_tensor **r = result_array(tensors.n, "broadcast_tensors");
    if (!r) return NULL;
    for (int i = 0; i < tensors.n; i++) {
        em_tensor *t = tensors.data[i];
        bool same = t->ndim == n && memcmp(t->sizes, shape, sizeof(int64_t) * (size_t)n) == 0;
        r[i] = same ? em_tensor_retain(t) : em_expand(t, il(shape, n));
        if (!r[i]) {
            em_tensors_free(r, i);
            return NULL;
        }
    }
    *nresults = tensors.n;
    return r;
}

/* ---- flips and repeats over the kernels ---- */

em_tensor *em_comp_fliplr(em_keyset ks, em_tensor *self) {
    if (!need_dims(self, 2, "fliplr", "self")) return NULL;
    int64_t d = 1;
    return em_flip(self, il(&d, 1));
}

em_tensor *em_comp_flipud(em_keyset ks, em_tensor *self) {
    if (!need_dims(self, 1, "flipud", "self")) return NULL;
    int64_t d = 0;
    return em_flip(self, il(&d, 1));
}

/* tile(dims): repeat with dims padded by leading 1s to self's dims. */
em_tensor *em_comp_tile(em_keyset ks, em_tensor *self, em_intlist dims) {
    int n = dims.n < 0 ? 0 : dims.n;
    if (n >= self->ndim) return em_repeat(self, il(dims.data, n));
    int64_t reps[EM_MAX_DIMS];
    int pad = self->ndim - n;
    for (int i = 0; i < pad; i++) reps[i] = 1;
    for (int i = 0; i < n; i++) reps[pad + i] = dims.data[i];
    return em_repeat(self, il(reps, self->ndim));
}

/* repeat_interleave's input: self flattened (dim absent; *d = 0) or self
 * itself with dim wrapped into *d (a 0-dim self refused, as PyTorch). A new
 * reference, or NULL. */
static em_tensor *repeat_interleave_source(em_tensor *self, const int64_t *dim, int *d) {
    if (!dim) {
        int64_t all = -1;
        *d = 0;
        return em_reshape(self, il(&all, 1));
    }
    if (!need_dims(self, 1, "repeat_interleave", "self (given a dim)")) return NULL;
    *d = em_wrap_dim(*dim, self->ndim, "repeat_interleave");
    return *d < 0 ? NULL : em_tensor_retain(self);
}

/* repeat_interleave(repeats int, dim): each slice along dim repeated: an
 * unsqueezed, expanded view reshaped (a copy), over the flattened tensor
 * without dim. */
em_tensor *em_comp_repeat_interleave_self_int(em_keyset ks, em_tensor *self, int64_t repeats, const int64_t *dim,
                                              const int64_t *output_size) {
    if (repeats < 0) {
        em_set_error(EM_EVALUE, "repeat_interleave: repeats must be non-negative, got %lld", (long long)repeats);
        return NULL;
    }
    int d;
    em_tensor *src = repeat_interleave_source(self, dim, &d);
    if (!src) return NULL;
    int64_t total;
    if (__builtin_mul_overflow(src->sizes[d], repeats, &total)) {
        em_set_error(EM_EVALUE, "repeat_interleave: repeats %lld makes dim %d too large", (long long)repeats, d + 1);
        em_tensor_release(src);
        return NULL;
    }
    if (output_size && *output_size != total) {
        em_set_error(EM_EVALUE, "repeat_interleave: output_size is %lld but the result has %lld elements along "
                     "dim %d", (long long)*output_size, (long long)total, d + 1);
        em_tensor_release(src);
        return NULL;
    }
    em_tensor *u = em_unsqueeze(src, d + 1);
    int64_t sizes[EM_MAX_DIMS];
    int nd = src->ndim;
    em_tensor_release(src);
    if (!u) return NULL;
    memcpy(sizes, u->sizes, sizeof(int64_t) * (size_t)u->ndim);
    sizes[d + 1] = repeats;
    em_tensor *e = em_expand(u, il(sizes, nd + 1));
    em_tensor_release(u);
    if (!e) return NULL;
    int64_t out[EM_MAX_DIMS];
    for (int i = 0; i < nd; i++) out[i] = e->sizes[i < d ? i : i + 1];
    out[d] = total;
    em_tensor *r = em_reshape(e, il(out, nd));
    em_tensor_release(e);
    if (r && r->storage == self->storage) { /* repeats <= 1 reshaped without copying: PyTorch copies */
        em_tensor *c = em_clone(r);
        em_tensor_release(r);
        r = c;
    }
    return r;
}

/* repeat_interleave(repeats tensor, dim): gather along dim with the 1-based
 * positions repeat_interleave(repeats) gives, expanded over the other dims
 * (gather's gradient sums the copies back). */
em_tensor *em_comp_repeat_interleave_self_Tensor(em_keyset ks, em_tensor *self, em_tensor *repeats,
                                                 const int64_t *dim, const int64_t *output_size) {
    if (repeats->ndim > 1) {
        em_set_error(EM_ESHAPE, "repeat_interleave: repeats must be 0-d or 1-d, got a %d-dim tensor", repeats->ndim);
        return NULL;
    }
    int d;
    em_tensor *src = repeat_interleave_source(self, dim, &d);
    if (!src) return NULL;
    int64_t n = src->sizes[d];
    em_tensor *reps = NULL;
    if (repeats->numel == 1 && n != 1) { /* one count for every slice */
        reps = em_expand(repeats, il(&n, 1));
    } else if (repeats->numel != n) {
        em_set_error(EM_ESHAPE, "repeat_interleave: repeats must have one element or %lld (the size of dim %d), "
                     "got %lld", (long long)n, d + 1, (long long)repeats->numel);
    } else {
        reps = em_reshape(repeats, il(&n, 1));
    }
    em_tensor *idx = reps ? em_repeat_interleave_Tensor(reps, output_size) : NULL;
    em_tensor_release(reps);
    if (!idx) {
        em_tensor_release(src);
        return NULL;
    }
    int64_t shape[EM_MAX_DIMS], full[EM_MAX_DIMS];
    for (int i = 0; i < src->ndim; i++) {
        shape[i] = i == d ? idx->numel : 1;
        full[i] = i == d ? idx->numel : src->sizes[i];
    }
    em_tensor *v = em_view(idx, il(shape, src->ndim));
    em_tensor_release(idx);
    em_tensor *e = v ? em_expand(v, il(full, src->ndim)) : NULL;
    em_tensor_release(v);
    em_tensor *r = e ? em_gather(src, d, e) : NULL;
    em_tensor_release(e);
    em_tensor_release(src);
    return r;
}

/* ---- diagonals and trace ---- */

/* diagonal(offset, dim1, dim2): an as_strided view over self's storage (its
 * gradient is as_strided's, which places grad back on the diagonal). */
em_tensor *em_comp_diagonal(em_keyset ks, em_tensor *self, int64_t offset, int64_t dim1, int64_t dim2) {
    int64_t sizes[EM_MAX_DIMS], strides[EM_MAX_DIMS], storage_offset;
    if (em_cpu_diagonal_geometry(self, offset, dim1, dim2, sizes, strides, &storage_offset, "diagonal") != EM_OK)
        return NULL;
    return em_as_strided(self, il(sizes, self->ndim - 1), il(strides, self->ndim - 1), &storage_offset);
}

/* diag(diagonal): 1-d -> the matrix with self on that diagonal
 * (diag_embed); 2-d -> a copy of that diagonal. */
em_tensor *em_comp_diag(em_keyset ks, em_tensor *self, int64_t diagonal) {
    if (self->ndim == 1) return em_diag_embed(self, diagonal, 0, 1);
    if (self->ndim != 2) {
        em_set_error(EM_ESHAPE, "diag: self must be 1-d or 2-d, got a %d-dim tensor", self->ndim);
        return NULL;
    }
    em_tensor *v = em_diagonal(self, diagonal, 0, 1);
    if (!v) return NULL;
    em_tensor *r = em_clone(v);
    em_tensor_release(v);
    return r;
}

em_tensor *em_comp_trace(em_keyset ks, em_tensor *self) {
    if (self->ndim != 2) {
        em_set_error(EM_ESHAPE, "trace: self must be a matrix (2-d), got a %d-dim tensor", self->ndim);
        return NULL;
    }
    if (self->dtype == EM_BOOL) { /* as PyTorch: no bool trace */
        em_set_error(EM_ETYPE, "trace: bool tensors are refused (as PyTorch refuses them)");
        return NULL;
    }
    em_tensor *v = em_diagonal(self, 0, 0, 1);
    if (!v) return NULL;
    em_tensor *r = em_sum(v, il(NULL, -1), false, EM_DTYPE_NONE);
    em_tensor_release(v);
    return r;
}

/* ---- slicing views and copies ---- */

em_tensor *em_comp_narrow_copy(em_keyset ks, em_tensor *self, int64_t dim, int64_t start, int64_t length) {
    em_tensor *v = em_narrow(self, dim, start, length);
    if (!v) return NULL;
    em_tensor *r = em_clone(v);
    em_tensor_release(v);
    return r;
}

/* unfold(dimension, size, step): the windows as an as_strided view: dim
 * shrinks to the window count (stride * step), a new last dim of size
 * walks one window. A 0-dim self acts as a 1-element 1-d tensor. */
em_tensor *em_comp_unfold(em_keyset ks, em_tensor *self, int64_t dimension, int64_t size, int64_t step) {
    int d = em_wrap_dim(dimension, self->ndim, "unfold");
    if (d < 0) return NULL;
    int64_t dim_size = self->ndim ? self->sizes[d] : 1;
    int64_t dim_stride = self->ndim ? self->strides[d] : 1;
    if (size < 0 || size > dim_size) {
        em_set_error(EM_EVALUE, "unfold: size is %lld but must be between 0 and %lld (the size of dim %d)",
                     (long long)size, (long long)dim_size, d + 1);
        return NULL;
    }
    if (step <= 0) {
        em_set_error(EM_EVALUE, "unfold: step must be positive, got %lld", (long long)step);
        return NULL;
    }
    if (self->ndim + 1 > EM_MAX_DIMS) {
        em_set_error(EM_ESHAPE, "unfold: the result would have more than %d dims", EM_MAX_DIMS);
        return NULL;
    }
    int64_t sizes[EM_MAX_DIMS], strides[EM_MAX_DIMS];
    int n = self->ndim;
    memcpy(sizes, self->sizes, sizeof(int64_t) * (size_t)n);
    memcpy(strides, self->strides, sizeof(int64_t) * (size_t)n);
    if (n) {
        sizes[d] = (dim_size - size) / step + 1;
        /* one window: its stride is never used (and dim_stride * step may overflow) */
        strides[d] = sizes[d] > 1 ? dim_stride * step : dim_stride;
    }
    sizes[n] = size;
    strides[n] = dim_stride;
    int64_t off = self->offset;
    return em_as_strided(self, il(sizes, n + 1), il(strides, n + 1), &off);
}

/* meshgrid(tensors, indexing): tensor i (0-d or 1-d) viewed along grid dim
 * i and expanded; "xy" swaps the first two grid dims. */
em_tensor **em_comp_meshgrid(em_keyset ks, em_tensorlist tensors, const char *indexing, int *nresults) {
    int n = tensors.n;
    if (n == 0) {
        em_set_error(EM_EVALUE, "meshgrid: expects a non-empty list of tensors");
        return NULL;
    }
    if (n > EM_MAX_DIMS) {
        em_set_error(EM_ESHAPE, "meshgrid: at most %d tensors, got %d", EM_MAX_DIMS, n);
        return NULL;
    }
    for (int i = 0; i < n; i++) {
        const em_tensor *t = tensors.data[i];
        if (t->ndim > 1) {
            em_set_error(EM_ESHAPE, "meshgrid: tensors[%d] must be 0-d or 1-d, got a %d-dim tensor", i + 1, t->ndim);
            return NULL;
        }
        if (t->dtype != tensors.data[0]->dtype) {
            em_set_error(EM_ETYPE, "meshgrid: all tensors must have the same dtype, got %s (tensors[1]) and %s "
                         "(tensors[%d])", em_dtype_name(tensors.data[0]->dtype), em_dtype_name(t->dtype), i + 1);
            return NULL;
        }
    }
    bool xy = strcmp(indexing, "xy") == 0 && n >= 2;
    int64_t shape[EM_MAX_DIMS];
    int pos[EM_MAX_DIMS];
    for (int i = 0; i < n; i++) pos[i] = i;
    if (xy) pos[0] = 1, pos[1] = 0;
    for (int i = 0; i < n; i++) shape[pos[i]] = tensors.data[i]->numel;
    em_tensor **r = result_array(n, "meshgrid");
    if (!r) return NULL;
    for (int i = 0; i < n; i++) {
        int64_t vs[EM_MAX_DIMS];
        for (int j = 0; j < n; j++) vs[j] = j == pos[i] ? shape[j] : 1;
        em_tensor *v = em_reshape(tensors.data[i], il(vs, n));
        r[i] = v ? em_expand(v, il(shape, n)) : NULL;
        em_tensor_release(v);
        if (!r[i]) {
            em_tensors_free(r, i);
            return NULL;
        }
    }
    *nresults = n;
    return r;
}

/* ---- atleast_*: self itself when it has the dims (PyTorch), else a view ---- */

static em_tensor *atleast(em_tensor *self, int k) {
    if (self->ndim >= k) return em_tensor_retain(self);
    int64_t sizes[3] = { 1, 1, 1 };
    if (self->ndim == 1) {                      /* {1, n} or {1, n, 1} */
        sizes[1] = self->sizes[0];
    } else if (self->ndim == 2) {               /* k == 3: {m, n, 1} */
        sizes[0] = self->sizes[0];
        sizes[1] = self->sizes[1];
    }
    return em_reshape(self, il(sizes, k));
}

static em_tensor **atleast_list(em_tensorlist tensors, int k, int *nresults, const char *op) {
    em_tensor **r = result_array(tensors.n, op);
    if (!r) return NULL;
    for (int i = 0; i < tensors.n; i++) {
        r[i] = atleast(tensors.data[i], k);
        if (!r[i]) {
            em_tensors_free(r, i);
            return NULL;
        }
    }
    *nresults = tensors.n;
    return r;
}

em_tensor *em_comp_atleast_1d(em_keyset ks, em_tensor *self) { return atleast(self, 1); }
em_tensor *em_comp_atleast_2d(em_keyset ks, em_tensor *self) { return atleast(self, 2); }
em_tensor *em_comp_atleast_3d(em_keyset ks, em_tensor *self) { return atleast(self, 3); }

em_tensor **em_comp_atleast_1d_Sequence(em_keyset ks, em_tensorlist tensors, int *nresults) {
    return atleast_list(tensors, 1, nresults, "atleast_1d");
}
em_tensor **em_comp_atleast_2d_Sequence(em_keyset ks, em_tensorlist tensors, int *nresults) {
    return atleast_list(tensors, 2, nresults, "atleast_2d");
}
em_tensor **em_comp_atleast_3d_Sequence(em_keyset ks, em_tensorlist tensors, int *nresults) {
    return atleast_list(tensors, 3, nresults, "atleast_3d");
}

/* ---- stacking: each tensor made into at least k dims (or a column), then cat ---- */

typedef enum { STACK_H, STACK_V, STACK_D, STACK_COLUMN } stack_kind;

static em_tensor *stack_cat(em_tensorlist tensors, stack_kind kind, const char *op) {
    if (tensors.n == 0) {
        em_set_error(EM_EVALUE, "%s: expects a non-empty list of tensors", op);
        return NULL;
    }
    em_tensor **parts = result_array(tensors.n, op);
    if (!parts) return NULL;
    for (int i = 0; i < tensors.n; i++) {
        em_tensor *t = tensors.data[i];
        switch (kind) {
        case STACK_H: parts[i] = atleast(t, 1); break;
        case STACK_V: parts[i] = atleast(t, 2); break;
        case STACK_D: parts[i] = atleast(t, 3); break;
        case STACK_COLUMN:
            if (t->ndim <= 1) {
                int64_t col[2] = { t->numel, 1 };
                parts[i] = em_reshape(t, il(col, 2));
            } else {
                parts[i] = em_tensor_retain(t);
            }
            break;
        }
        if (!parts[i]) {
            em_tensors_free(parts, i);
            return NULL;
        }
    }
    int64_t dim = kind == STACK_V ? 0 : kind == STACK_D ? 2 : (kind == STACK_H && parts[0]->ndim == 1) ? 0 : 1;
    em_tensor *r = em_cat((em_tensorlist){ parts, tensors.n }, dim);
    em_tensors_free(parts, tensors.n);
    return r;
}

em_tensor *em_comp_hstack(em_keyset ks, em_tensorlist tensors) { return stack_cat(tensors, STACK_H, "hstack"); }
em_tensor *em_comp_vstack(em_keyset ks, em_tensorlist tensors) { return stack_cat(tensors, STACK_V, "vstack"); }
em_tensor *em_comp_row_stack(em_keyset ks, em_tensorlist tensors) {
    return stack_cat(tensors, STACK_V, "row_stack");
}
em_tensor *em_comp_dstack(em_keyset ks, em_tensorlist tensors) { return stack_cat(tensors, STACK_D, "dstack"); }
em_tensor *em_comp_column_stack(em_keyset ks, em_tensorlist tensors) {
    return stack_cat(tensors, STACK_COLUMN, "column_stack");
}

/* ---- splitting into views ----
 * Note [tensor_split positions]: PyTorch's tensor_split(indices) cuts before
 * 0-based element k; ember's indices are 1-based positions, so position i
 * cuts before element i (1-based) -- PyTorch's k = i - 1 -- and a negative
 * i counts from the end as in PyTorch (-1 cuts before the last element).
 * Position n + 1 is the end; positions clamp to the dim like slice bounds.
 * Piece k runs from cut k-1 to cut k, so a cut before the previous one gives
 * an empty piece and the next piece starts back at it (as in PyTorch). */

/* The pieces of self along d between the 0-based cut points (n cuts, each
 * clamped into [0, size]), as narrow views. */
static em_tensor **split_at(em_tensor *self, int d, int ncuts, const int64_t *cuts, int *nresults, const char *op) {
    em_tensor **r = result_array(ncuts + 1, op);
    if (!r) return NULL;
    int64_t size = self->sizes[d], start = 0;
    for (int i = 0; i <= ncuts; i++) {
        int64_t end = i < ncuts ? cuts[i] : size;
        if (end < 0) end = 0;
        if (end > size) end = size;
        r[i] = em_narrow(self, d, start, end > start ? end - start : 0);
        if (!r[i]) {
            em_tensors_free(r, i);
            return NULL;
        }
        start = end; /* the next piece starts at this cut, even when it lies before the previous one */
    }
    *nresults = ncuts + 1;
    return r;
}

static em_tensor **split_sections(em_tensor *self, int64_t sections, int64_t dim, int *nresults, const char *op) {
    if (!need_dims(self, 1, op, "self")) return NULL;
    int d = em_wrap_dim(dim, self->ndim, op);
    if (d < 0) return NULL;
    if (sections <= 0) {
        em_set_error(EM_EVALUE, "%s: sections must be greater than 0, got %lld", op, (long long)sections);
        return NULL;
    }
    if (sections > INT32_MAX / 2) {
        em_set_error(EM_EVALUE, "%s: %lld sections are too many", op, (long long)sections);
        return NULL;
    }
    int64_t size = self->sizes[d], base = size / sections, extra = size % sections;
    int64_t *cuts = malloc(sizeof *cuts * (size_t)(sections > 1 ? sections - 1 : 1));
    if (!cuts) {
        em_set_error(EM_ENOMEM, "%s: out of memory", op);
        return NULL;
    }
    int64_t at = 0;
    for (int64_t i = 0; i + 1 < sections; i++) {
        at += base + (i < extra ? 1 : 0);
        cuts[i] = at;
    }
    em_tensor **r = split_at(self, d, (int)(sections - 1), cuts, nresults, op);
    free(cuts);
    return r;
}

/* indices are 1-based positions (Note [tensor_split positions]). */
static em_tensor **split_indices(em_tensor *self, em_intlist indices, int64_t dim, int *nresults, const char *op) {
    if (!need_dims(self, 1, op, "self")) return NULL;
    int d = em_wrap_dim(dim, self->ndim, op);
    if (d < 0) return NULL;
    int n = indices.n < 0 ? 0 : indices.n;
    int64_t cuts[EM_MAX_DIMS]; /* the binding passes at most EM_MAX_DIMS values */
    if (n > EM_MAX_DIMS) {
        em_set_error(EM_EVALUE, "%s: at most %d indices, got %d", op, EM_MAX_DIMS, n);
        return NULL;
    }
    int64_t size = self->sizes[d];
    for (int i = 0; i < n; i++) {
        int64_t p = indices.data[i];
        if (p == 0) {
            em_set_error(EM_EINDEX, "%s: indices[%d] is 0; positions are 1-based (negative from the end)", op, i + 1);
            return NULL;
        }
        cuts[i] = p > 0 ? p - 1 : p + size;
    }
    return split_at(self, d, n, cuts, nresults, op);
}

em_tensor **em_comp_tensor_split_sections(em_keyset ks, em_tensor *self, int64_t sections, int64_t dim,
                                          int *nresults) {
    return split_sections(self, sections, dim, nresults, "tensor_split");
}

em_tensor **em_comp_tensor_split_indices(em_keyset ks, em_tensor *self, em_intlist indices, int64_t dim,
                                         int *nresults) {
    return split_indices(self, indices, dim, nresults, "tensor_split");
}

/* hsplit/vsplit/dsplit: the split dim (hsplit: 2, or 1 for 1-d; vsplit: 1;
 * dsplit: 3), after checking self's dims; -1 with the error set. */
static int hvd_dim(const em_tensor *self, char which, const char *op) {
    int min = which == 'h' ? 1 : which == 'v' ? 2 : 3;
    if (!need_dims(self, min, op, "self")) return -1;
    return which == 'h' ? (self->ndim == 1 ? 0 : 1) : which == 'v' ? 0 : 2;
}

static em_tensor **hvd_sections(em_tensor *self, int64_t sections, char which, int *nresults, const char *op) {
    int d = hvd_dim(self, which, op);
    if (d < 0) return NULL;
    if (sections <= 0 || self->sizes[d] % sections != 0) { /* PyTorch refuses 0 here too */
        em_set_error(EM_EVALUE, "%s: dim %d of size %lld cannot be split into %lld equal sections", op, d + 1,
                     (long long)self->sizes[d], (long long)sections);
        return NULL;
    }
    return split_sections(self, sections, d, nresults, op);
}

static em_tensor **hvd_indices(em_tensor *self, em_intlist indices, char which, int *nresults, const char *op) {
    int d = hvd_dim(self, which, op);
    return d < 0 ? NULL : split_indices(self, indices, d, nresults, op);
}

em_tensor **em_comp_hsplit_int(em_keyset ks, em_tensor *self, int64_t sections, int *nresults) {
    return hvd_sections(self, sections, 'h', nresults, "hsplit");
}
em_tensor **em_comp_hsplit_array(em_keyset ks, em_tensor *self, em_intlist indices, int *nresults) {
    return hvd_indices(self, indices, 'h', nresults, "hsplit");
}
em_tensor **em_comp_vsplit_int(em_keyset ks, em_tensor *self, int64_t sections, int *nresults) {
    return hvd_sections(self, sections, 'v', nresults, "vsplit");
}
em_tensor **em_comp_vsplit_array(em_keyset ks, em_tensor *self, em_intlist indices, int *nresults) {
    return hvd_indices(self, indices, 'v', nresults, "vsplit");
}
em_tensor **em_comp_dsplit_int(em_keyset ks, em_tensor *self, int64_t sections, int *nresults) {
    return hvd_sections(self, sections, 'd', nresults, "dsplit");
}
em_tensor **em_comp_dsplit_array(em_keyset ks, em_tensor *self, em_intlist indices, int *nresults) {
    return hvd_indices(self, indices, 'd', nresults, "dsplit");
}
