/* shape_ops.c -- CPU kernels of the shape family (schema/ops/shape.yaml):
 * flip, rot90, roll, repeat, repeat_interleave(repeats), tril/triu, diag_embed.
 *
 * They move elements without computing on them, so they work on every
 * dtype by copying elements of the dtype's size (Note [Index-map copy]);
 * tril/triu and diag_embed write zeros as all-zero bytes, which is 0 (or
 * false) in every ember dtype.
 */
#include <stdlib.h>
#include <string.h>

#include "kernels/cpu/em_cpu.h"

/* Note [Index-map copy]
 * flip, roll and repeat are one loop: out (a new contiguous tensor) at
 * index (i_0, ..., i_k) takes the element of the source at
 * (map_0(i_0), ..., map_k(i_k)); each dim's map is precomputed as a table
 * of byte offsets into the source (map_d(j) * stride_d * element size), so
 * the loop adds k + 1 table entries per element and copies the element's
 * bytes. Rows (the last dim) run in parallel through the pool. */

typedef struct {
    const char *src;      /* the source's first element */
    char *dst;            /* out's data (contiguous) */
    int nd;               /* dims (>= 1) */
    const int64_t *sizes; /* out's sizes */
    int64_t *const *offs; /* offs[d][j]: byte offset of index j of dim d in the source */
    size_t es;            /* element size in bytes */
} imap_ctx;

#define IMAP_ROW(T)                                                           \
    for (int64_t j = 0; j < inner; j++) {                                     \
        T v;                                                                  \
        memcpy(&v, src + last[j], sizeof v);                                  \
        memcpy(dst + j * (int64_t)sizeof v, &v, sizeof v);                    \
    }

static void imap_rows(int64_t begin, int64_t end, void *vctx) {
    const imap_ctx *c = vctx;
    int64_t inner = c->sizes[c->nd - 1];
    const int64_t *last = c->offs[c->nd - 1];
    for (int64_t row = begin; row < end; row++) {
        int64_t base = 0, rest = row;
        for (int d = c->nd - 2; d >= 0; d--) {
            base += c->offs[d][rest % c->sizes[d]];
            rest /= c->sizes[d];
        }
        const char *src = c->src + base;
        char *dst = c->dst + row * inner * (int64_t)c->es;
        switch (c->es) {
        case 1: IMAP_ROW(uint8_t) break;
        case 2: IMAP_ROW(uint16_t) break;
        case 4: IMAP_ROW(uint32_t) break;
        default: IMAP_ROW(uint64_t) break;
        }
    }
}

/* Allocates the offset tables for out sizes (nd dims): offs[d] has
 * sizes[d] entries; returns one block to free, or NULL with the error set. */
static int64_t *imap_alloc(int nd, const int64_t *sizes, int64_t **offs, const char *op) {
    int64_t total = 0;
    for (int d = 0; d < nd; d++) total += sizes[d];
    int64_t *block = malloc(sizeof *block * (size_t)(total > 0 ? total : 1));
    if (!block) {
        em_set_error(EM_ENOMEM, "%s: out of memory", op);
        return NULL;
    }
    int64_t at = 0;
    for (int d = 0; d < nd; d++) {
        offs[d] = block + at;
        at += sizes[d];
    }
    return block;
}

/* Runs the index-map copy into out, whose memory holds nd >= 1 dims of
 * sizes in row-major order (out's own dims may be a permutation of them). */
static void imap_run(em_tensor *out, const em_tensor *src, int nd, const int64_t *sizes, int64_t *const *offs) {
    if (out->numel == 0) return;
    imap_ctx c = { (const char *)em_tensor_data(src), (char *)em_tensor_data(out), nd, sizes, offs,
                   em_dtype_size_fast(out->dtype) };
    int64_t inner = sizes[nd - 1], rows = out->numel / inner;
    int64_t grain = inner >= EM_CPU_GRAIN ? 1 : EM_CPU_GRAIN / inner;
    em_cpu_parallel_for(rows, grain, imap_rows, &c);
}

/* ---- flip ---- */

/* The strides PyTorch's empty_like(self, MemoryFormat::Preserve) gives a
 * result of self's shape: self's own strides when self is non-overlapping
 * and dense, else dense strides in the order of self's strides (c10's
 * infer_dense_strides: an insertion sort from the innermost dim, stride-0
 * dims never moved, equal strides ordered by size). */
static void preserve_strides(const em_tensor *self, int64_t *strides) {
    int nd = self->ndim;
    if (em_core_internal_overlap(self) == EM_OVERLAP_NO) {
        memcpy(strides, self->strides, sizeof(int64_t) * (size_t)nd);
        return;
    }
    int perm[EM_MAX_DIMS]; /* perm[0] is the innermost dim */
    for (int i = 0; i < nd; i++) perm[i] = nd - 1 - i;
    for (int i = 1; i < nd; i++) {
        int d1 = i;
        for (int d0 = i - 1; d0 >= 0; d0--) {
            int64_t s0 = self->strides[perm[d0]], s1 = self->strides[perm[d1]];
            int c = s0 == 0 || s1 == 0 ? 0 : s0 < s1 ? -1 : s0 > s1 ? 1
                  : self->sizes[perm[d0]] > self->sizes[perm[d1]] ? 1 : 0;
            if (c > 0) {
                int t = perm[d0];
                perm[d0] = perm[d1], perm[d1] = t;
                d1 = d0;
            } else if (c < 0) {
                break;
            }
        }
    }
    int64_t at = 1;
    for (int i = 0; i < nd; i++) {
        strides[perm[i]] = at;
        at *= self->sizes[perm[i]] > 1 ? self->sizes[perm[i]] : 1;
    }
}

/* flip(dims): reversed along each of dims (each at most once). The result
 * keeps self's layout as PyTorch's does (preserve_strides); the copy walks
 * it in memory order, outermost dim first. */
em_tensor *em_cpu_flip(em_keyset ks, em_tensor *self, em_intlist dims) {
    bool flipped[EM_MAX_DIMS] = { false };
    for (int i = 0; i < dims.n; i++) {
        int d = em_wrap_dim(dims.data[i], self->ndim, "flip");
        if (d < 0) return NULL;
        if (flipped[d]) {
            em_set_error(EM_EVALUE, "flip: dim %d appears more than once in dims", d + 1);
            return NULL;
        }
        flipped[d] = true;
    }
    em_tensor *out = em_tensor_new(self->ndim, self->sizes, self->dtype, self->device);
    if (!out) return NULL;
    preserve_strides(self, out->strides);
    em_tensor_refresh(out);
    /* dims in out's memory order (stable by decreasing stride) */
    int order[EM_MAX_DIMS], nd = self->ndim;
    for (int i = 0; i < nd; i++) order[i] = i;
    for (int i = 1; i < nd; i++)
        for (int j = i; j > 0 && out->strides[order[j - 1]] < out->strides[order[j]]; j--) {
            int t = order[j];
            order[j] = order[j - 1], order[j - 1] = t;
        }
    int64_t sizes[EM_MAX_DIMS] = { 1 };
    int64_t *offs[EM_MAX_DIMS];
    int n = nd ? nd : 1;
    for (int k = 0; k < nd; k++) sizes[k] = self->sizes[order[k]];
    int64_t *block = imap_alloc(n, sizes, offs, "flip");
    if (!block) {
        em_tensor_release(out);
        return NULL;
    }
    int64_t es = (int64_t)em_dtype_size_fast(self->dtype);
    offs[0][0] = 0; /* a 0-dim self: one element */
    for (int k = 0; k < nd; k++) {
        int d = order[k];
        for (int64_t j = 0; j < sizes[k]; j++)
            offs[k][j] = (flipped[d] ? sizes[k] - 1 - j : j) * self->strides[d] * es;
    }
    imap_run(out, self, n, sizes, offs);
    free(block);
    return out;
}

/* ---- rot90 ---- */

/* rot90(k, dims): PyTorch's recipe and layout -- one turn is
 * flip(dims[1]) transposed in place, three turns flip(dims[0]) transposed
 * in place (so the result is a new tensor whose strides are the flip's,
 * swapped: not contiguous, not a view), two turns flip both dims, none a
 * contiguous copy. */
em_tensor *em_cpu_rot90(em_keyset ks, em_tensor *self, int64_t k, em_intlist dims) {
    if (dims.n != 2) {
        em_set_error(EM_EVALUE, "rot90: dims must name 2 dims, got %d", dims.n < 0 ? 0 : dims.n);
        return NULL;
    }
    if (self->ndim < 2) {
        em_set_error(EM_ESHAPE, "rot90: self must have at least 2 dims, got a %d-dim tensor", self->ndim);
        return NULL;
    }
    int d0 = em_wrap_dim(dims.data[0], self->ndim, "rot90");
    if (d0 < 0) return NULL;
    int d1 = em_wrap_dim(dims.data[1], self->ndim, "rot90");
    if (d1 < 0) return NULL;
    if (d0 == d1) {
        em_set_error(EM_EVALUE, "rot90: the two dims must differ, got dim %d twice", d0 + 1);
        return NULL;
    }
    int64_t turns = ((k % 4) + 4) % 4;
    int64_t both[2] = { d0, d1 };
    if (turns == 0) return em_cpu_flip(ks, self, (em_intlist){ NULL, 0 });
    if (turns == 2) return em_cpu_flip(ks, self, (em_intlist){ both, 2 });
    em_tensor *r = em_cpu_flip(ks, self, (em_intlist){ turns == 1 ? &both[1] : &both[0], 1 });
    if (!r) return NULL;
    int64_t t = r->sizes[d0]; /* r is new and ours: transpose its header in place */
    r->sizes[d0] = r->sizes[d1], r->sizes[d1] = t;
    t = r->strides[d0];
    r->strides[d0] = r->strides[d1], r->strides[d1] = t;
    em_tensor_refresh(r);
    return r;
}

/* ---- roll ---- */

/* roll(shifts, dims): out[j] = self[(j - shift) mod n] along each dim;
 * without dims one shift rolls the flattened tensor (row-major order). */
em_tensor *em_cpu_roll(em_keyset ks, em_tensor *self, em_intlist shifts, em_intlist dims) {
    int nshifts = shifts.n < 0 ? 0 : shifts.n, ndims = dims.n < 0 ? 0 : dims.n;
    bool flat = ndims == 0;
    if (flat ? nshifts != 1 : nshifts != ndims) {
        em_set_error(EM_EVALUE, "roll: shifts and dims must align, got %d shift%s and %d dim%s", nshifts,
                     nshifts == 1 ? "" : "s", ndims, ndims == 1 ? "" : "s");
        return NULL;
    }
    int64_t shift_of[EM_MAX_DIMS] = { 0 }; /* in [0, n) once the sizes are known */
    if (ndims > 0 && self->ndim == 0) { /* as PyTorch: a 0-dim tensor has no dim to roll */
        em_set_error(EM_EINDEX, "roll: dim %lld given but the tensor has no dims (0-dim)",
                     (long long)(dims.data[0] >= 0 ? dims.data[0] + 1 : dims.data[0]));
        return NULL;
    }
    for (int i = 0; i < ndims; i++) {
        int d = em_wrap_dim(dims.data[i], self->ndim, "roll");
        if (d < 0) return NULL;
        int64_t n = self->ndim ? self->sizes[d] : 1;
        if (n > 0) shift_of[d] = (shift_of[d] + shifts.data[i] % n + n) % n; /* a dim named twice rolls twice */
    }
    em_tensor *out = em_tensor_new(self->ndim, self->sizes, self->dtype, self->device);
    if (!out) return NULL;
    if (out->numel == 0) return out;
    /* the flattened case reads a contiguous copy as one dim */
    em_tensor *src = flat && !self->is_contiguous ? em_cpu_to_dtype(self, self->dtype, "roll") : em_tensor_retain(self);
    if (!src) {
        em_tensor_release(out);
        return NULL;
    }
    int nd = flat ? 1 : self->ndim;
    int64_t flat_size = self->numel, unit = 1;
    const int64_t *sizes = flat ? &flat_size : self->sizes, *strides = flat ? &unit : self->strides;
    if (flat) shift_of[0] = (shifts.data[0] % flat_size + flat_size) % flat_size; /* numel > 0 here */
    int64_t *offs[EM_MAX_DIMS];
    int64_t *block = imap_alloc(nd, sizes, offs, "roll");
    if (!block) {
        em_tensor_release(src);
        em_tensor_release(out);
        return NULL;
    }
    int64_t es = (int64_t)em_dtype_size_fast(self->dtype);
    for (int d = 0; d < nd; d++) {
        int64_t n = sizes[d], s = shift_of[d];
        for (int64_t j = 0; j < n; j++) offs[d][j] = ((j - s + n) % n) * strides[d] * es;
    }
    imap_run(out, src, nd, sizes, offs);
    free(block);
    em_tensor_release(src);
    return out;
}

/* ---- repeat ---- */

/* repeat(repeats): self (with leading size-1 dims up to len(repeats))
 * tiled repeats[d] times along each dim: out[j] = self[j mod size]. */
em_tensor *em_cpu_repeat(em_keyset ks, em_tensor *self, em_intlist repeats) {
    int nr = repeats.n < 0 ? 0 : repeats.n;
    if (nr < self->ndim) {
        em_set_error(EM_ESHAPE, "repeat: repeats has %d entr%s but self has %d dims; it needs at least one per dim",
                     nr, nr == 1 ? "y" : "ies", self->ndim);
        return NULL;
    }
    int64_t in_sizes[EM_MAX_DIMS], in_strides[EM_MAX_DIMS], out_sizes[EM_MAX_DIMS];
    int pad = nr - self->ndim;
    for (int d = 0; d < nr; d++) {
        if (repeats.data[d] < 0) {
            em_set_error(EM_EVALUE, "repeat: repeats[%d] is %lld; repeats must be non-negative", d + 1,
                         (long long)repeats.data[d]);
            return NULL;
        }
        in_sizes[d] = d < pad ? 1 : self->sizes[d - pad];
        in_strides[d] = d < pad ? 0 : self->strides[d - pad];
        if (__builtin_mul_overflow(in_sizes[d], repeats.data[d], &out_sizes[d])) {
            em_set_error(EM_EVALUE, "repeat: repeats[%d] = %lld makes dim %d too large", d + 1,
                         (long long)repeats.data[d], d + 1);
            return NULL;
        }
    }
    em_tensor *out = em_tensor_new(nr, out_sizes, self->dtype, self->device);
    if (!out || out->numel == 0) return out;
    int nd = nr ? nr : 1;
    int64_t one = 1, zero = 0;
    const int64_t *sizes = nr ? out_sizes : &one;
    int64_t *offs[EM_MAX_DIMS];
    int64_t *block = imap_alloc(nd, sizes, offs, "repeat");
    if (!block) {
        em_tensor_release(out);
        return NULL;
    }
    int64_t es = (int64_t)em_dtype_size_fast(self->dtype);
    for (int d = 0; d < nd; d++)
        for (int64_t j = 0; j < sizes[d]; j++)
            offs[d][j] = nr ? (j % in_sizes[d]) * in_strides[d] * es : zero;
    imap_run(out, self, nd, sizes, offs);
    free(block);
    return out;
}

/* ---- repeat_interleave(repeats) ---- */

/* The 1-based positions k repeated repeats[k] times, in repeats' dtype (an
 * integer tensor of 1 dim); output_size, when given, must be the total. */
em_tensor *em_cpu_repeat_interleave_Tensor(em_keyset ks, em_tensor *repeats, const int64_t *output_size) {
    if (repeats->ndim != 1) {
        em_set_error(EM_ESHAPE, "repeat_interleave: repeats must be a 1-d tensor, got a %d-dim tensor",
                     repeats->ndim);
        return NULL;
    }
    if (repeats->dtype != EM_INT64 && repeats->dtype != EM_INT32) {
        em_set_error(EM_ETYPE, "repeat_interleave: repeats must be an int64 or int32 tensor, got %s",
                     em_dtype_name(repeats->dtype));
        return NULL;
    }
    const char *p = em_tensor_data(repeats);
    int64_t step = repeats->strides[0] * (int64_t)em_dtype_size_fast(repeats->dtype), total = 0;
    for (int64_t i = 0; i < repeats->numel; i++) {
        int64_t r = em_load_as_int64(p + i * step, repeats->dtype);
        if (r < 0) {
            em_set_error(EM_EVALUE, "repeat_interleave: repeats[%lld] is %lld; repeats must be non-negative",
                         (long long)(i + 1), (long long)r);
            return NULL;
        }
        if (__builtin_add_overflow(total, r, &total)) {
            em_set_error(EM_EVALUE, "repeat_interleave: the repeats sum to more than %lld", (long long)INT64_MAX);
            return NULL;
        }
    }
    if (output_size && *output_size != total) {
        em_set_error(EM_EVALUE, "repeat_interleave: output_size is %lld but the repeats sum to %lld",
                     (long long)*output_size, (long long)total);
        return NULL;
    }
    em_tensor *out = em_tensor_new(1, &total, repeats->dtype, repeats->device);
    if (!out) return NULL;
    char *o = em_tensor_data(out);
    size_t es = em_dtype_size_fast(out->dtype);
    int64_t at = 0;
    for (int64_t i = 0; i < repeats->numel; i++) {
        int64_t r = em_load_as_int64(p + i * step, repeats->dtype);
        for (int64_t k = 0; k < r; k++) em_store_from_int64(o + (size_t)(at++) * es, out->dtype, i + 1);
    }
    return out;
}

/* ---- tril / triu ---- */

/* A contiguous copy of self with, in each matrix of the last two dims, the
 * columns outside the kept band of every row zeroed: lower keeps
 * j <= i + k (tril), else j >= i + k (triu). */
static em_tensor *triangle(em_tensor *self, int64_t k, bool lower, const char *op) {
    if (self->ndim < 2) {
        em_set_error(EM_ESHAPE, "%s: self must have at least 2 dims, got a %d-dim tensor", op, self->ndim);
        return NULL;
    }
    em_tensor *out = em_cpu_to_dtype(self, self->dtype, op);
    if (!out || out->numel == 0) return out;
    int64_t rows = self->sizes[self->ndim - 2], cols = self->sizes[self->ndim - 1];
    if (k > cols) k = cols + 1; /* clamp so that i + k cannot overflow */
    if (k < -rows) k = -rows - 1;
    int64_t mats = out->numel / (rows * cols);
    size_t es = em_dtype_size_fast(out->dtype);
    char *data = em_tensor_data(out);
    for (int64_t m = 0; m < mats; m++)
        for (int64_t i = 0; i < rows; i++) {
            char *row = data + (size_t)((m * rows + i) * cols) * es;
            int64_t a, b; /* zero columns [a, b) */
            if (lower) {
                a = i + k + 1 < 0 ? 0 : i + k + 1;
                b = cols;
            } else {
                a = 0;
                b = i + k < cols ? i + k : cols;
            }
            if (b > a) memset(row + (size_t)a * es, 0, (size_t)(b - a) * es);
        }
    return out;
}

em_tensor *em_cpu_tril(em_keyset ks, em_tensor *self, int64_t diagonal) {
    return triangle(self, diagonal, true, "tril");
}

em_tensor *em_cpu_triu(em_keyset ks, em_tensor *self, int64_t diagonal) {
    return triangle(self, diagonal, false, "triu");
}

/* ---- diagonals ---- */

em_status em_cpu_diagonal_geometry(const em_tensor *t, int64_t offset, int64_t dim1, int64_t dim2, int64_t *sizes,
                                   int64_t *strides, int64_t *storage_offset, const char *op) {
    if (t->ndim < 2)
        return em_set_error(EM_ESHAPE, "%s: self must have at least 2 dims, got a %d-dim tensor", op, t->ndim);
    int d1 = em_wrap_dim(dim1, t->ndim, op);
    if (d1 < 0) return EM_EINDEX;
    int d2 = em_wrap_dim(dim2, t->ndim, op);
    if (d2 < 0) return EM_EINDEX;
    if (d1 == d2) return em_set_error(EM_EVALUE, "%s: dim1 and dim2 must differ, got dim %d twice", op, d1 + 1);
    int64_t s1 = t->sizes[d1], s2 = t->sizes[d2], len;
    if (offset >= 0) len = offset >= s2 ? 0 : (s1 < s2 - offset ? s1 : s2 - offset);
    else len = offset <= -s1 ? 0 : (s1 + offset < s2 ? s1 + offset : s2); /* no -offset: INT64_MIN */
    *storage_offset = t->offset;
    if (len > 0) *storage_offset += offset >= 0 ? offset * t->strides[d2] : -offset * t->strides[d1];
    int n = 0;
    for (int d = 0; d < t->ndim; d++) {
        if (d == d1 || d == d2) continue;
        sizes[n] = t->sizes[d];
        strides[n++] = t->strides[d];
    }
    sizes[n] = len;
    strides[n] = t->strides[d1] + t->strides[d2];
    return EM_OK;
}

/* diag_embed(offset, dim1, dim2): zeros with self's last dim written onto
 * the diagonal of the dim1 x dim2 planes (the other dims keep self's
 * leading sizes, in order). */
em_tensor *em_cpu_diag_embed(em_keyset ks, em_tensor *self, int64_t offset, int64_t dim1, int64_t dim2) {
    int nd = self->ndim + 1;
    if (nd > EM_MAX_DIMS) {
        em_set_error(EM_ESHAPE, "diag_embed: the result would have more than %d dims", EM_MAX_DIMS);
        return NULL;
    }
    int d1 = em_wrap_dim(dim1, nd, "diag_embed");
    if (d1 < 0) return NULL;
    int d2 = em_wrap_dim(dim2, nd, "diag_embed");
    if (d2 < 0) return NULL;
    if (d1 == d2) {
        em_set_error(EM_EVALUE, "diag_embed: dim1 and dim2 must differ, got dim %d twice", d1 + 1);
        return NULL;
    }
    if (self->ndim == 0) {
        em_set_error(EM_ESHAPE, "diag_embed: self must have at least 1 dim, got a 0-dim tensor");
        return NULL;
    }
    int64_t n = self->sizes[self->ndim - 1];
    if (offset > INT64_MAX / 4 || offset < -(INT64_MAX / 4)) {
        em_set_error(EM_EVALUE, "diag_embed: offset %lld is too large", (long long)offset);
        return NULL;
    }
    int64_t m = n + (offset < 0 ? -offset : offset);
    int64_t sizes[EM_MAX_DIMS];
    for (int d = 0, k = 0; d < nd; d++) sizes[d] = d == d1 || d == d2 ? m : self->sizes[k++];
    em_tensor *out = em_tensor_new(nd, sizes, self->dtype, self->device);
    if (!out) return NULL;
    if (out->numel) memset(em_tensor_data(out), 0, (size_t)out->numel * em_dtype_size_fast(out->dtype));
    int64_t dsz[EM_MAX_DIMS], dst[EM_MAX_DIMS], doff;
    if (em_cpu_diagonal_geometry(out, offset, d1, d2, dsz, dst, &doff, "diag_embed") != EM_OK) {
        em_tensor_release(out);
        return NULL;
    }
    em_tensor *diag = em_tensor_new_view(out->storage, doff, nd - 1, dsz, dst, out->dtype, out->version);
    if (!diag || em_cpu_copy_into(diag, self, "diag_embed") != EM_OK) {
        em_tensor_release(diag);
        em_tensor_release(out);
        return NULL;
    }
    em_tensor_release(diag);
    return out;
}
