/* tensor.c -- tensor headers: creation, refcounting, version counters,
 * shapes (printing, dim wrapping, broadcasting). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/em_core_int.h"

/* Invariants kept here (see Note [Version counter sharing]):
 *   - t->storage and t->version are never NULL; t->storage holds one
 *     reference per tensor header pointing at it, and so does t->version
 *     unless it is t->storage's own counter (version_retain/_release);
 *   - numel == product(sizes[0..ndim)), is_contiguous matches the strides;
 *   - every element the sizes/strides/offset address lies inside the
 *     storage (checked by em_tensor_new_view);
 *   - keyset starts as the backend key of the device; autograd adds its key.
 * sizes[i] and strides[i] for i >= ndim are not initialised;
 *   - sizes/strides point at inline_shape when ndim <= EM_INLINE_DIMS and
 *     at a spill block the header owns otherwise (Note [Inline shapes]). */

static void (*autograd_meta_free)(void *meta);

void em_core_set_autograd_meta_free(void (*fn)(void *meta)) { autograd_meta_free = fn; }

/* ---- shapes ---- */

char *em_shape_str(int ndim, const int64_t *sizes, char *buf, size_t n)
{
    size_t at = 0;
    if (!buf || n == 0) return buf;
    if (ndim > EM_MAX_DIMS) ndim = EM_MAX_DIMS;
    buf[0] = '\0';
    int w = snprintf(buf, n, "{");
    at = w > 0 ? (size_t)w : 0;
    for (int i = 0; i < ndim && at < n; i++) {
        w = snprintf(buf + at, n - at, i ? ",%lld" : "%lld", (long long)sizes[i]);
        if (w < 0) break;
        at += (size_t)w;
    }
    if (at < n) snprintf(buf + at, n - at, "}");
    return buf;
}

bool em_core_compute_contiguous(int ndim, const int64_t *sizes, const int64_t *strides)
{
    int64_t expected = 1;
    for (int i = ndim - 1; i >= 0; i--) {
        if (sizes[i] == 0) return true;
        if (sizes[i] == 1) continue;
        if (strides[i] != expected) {
            /* keep scanning: a later zero size still makes it contiguous */
            for (int j = i - 1; j >= 0; j--)
                if (sizes[j] == 0) return true;
            return false;
        }
        expected *= sizes[i];
    }
    return true;
}

void em_tensor_refresh(em_tensor *t)
{
    int64_t n = 1;
    for (int i = 0; i < t->ndim; i++) n *= t->sizes[i];
    t->numel = n;
    t->is_contiguous = em_core_compute_contiguous(t->ndim, t->sizes, t->strides);
}

/* Messages speak 1-based for dims >= 0 (C's 0 is the user's 1) and quote
 * negative dims as given. */
int em_core_wrap_dim_range(int64_t dim, int64_t range, int ndim, const char *op)
{
    if (dim < -range || dim >= range) {
        em_set_error(EM_EINDEX,
                     "%s: dim %lld out of range for a tensor of %d dims (expected %lld..%lld, not 0)",
                     op ? op : "dim", (long long)(dim >= 0 ? dim + 1 : dim), ndim,
                     (long long)-range, (long long)range);
        return -1;
    }
    return (int)(dim < 0 ? dim + range : dim);
}

int em_wrap_dim(int64_t dim, int ndim, const char *op)
{
    return em_core_wrap_dim_range(dim, ndim > 0 ? ndim : 1, ndim, op);
}

int em_broadcast_shapes(int na, const int64_t *a, int nb, const int64_t *b, int64_t *out,
                        const char *op)
{
    int n = na > nb ? na : nb;
    int64_t res[EM_MAX_DIMS];
    if (n > EM_MAX_DIMS) {
        em_set_error(EM_ESHAPE, "%s: too many dims (%d > %d)", op ? op : "broadcast", n,
                     EM_MAX_DIMS);
        return -1;
    }
    for (int i = 0; i < n; i++) {
        int ia = na - n + i, ib = nb - n + i;
        int64_t sa = ia >= 0 ? a[ia] : 1, sb = ib >= 0 ? b[ib] : 1;
        if (sa == sb || sb == 1) {
            res[i] = sa;
        } else if (sa == 1) {
            res[i] = sb;
        } else {
            char s1[EM_SHAPE_STR_MAX], s2[EM_SHAPE_STR_MAX];
            em_set_error(EM_ESHAPE, "%s: shapes %s and %s cannot broadcast", op ? op : "broadcast",
                         em_shape_str(na, a, s1, sizeof s1), em_shape_str(nb, b, s2, sizeof s2));
            return -1;
        }
    }
    memcpy(out, res, (size_t)n * sizeof(int64_t));
    return n;
}

/* ---- creation ---- */

static em_version *version_new(void)
{
    em_version *v = em_core_hdr_alloc(EM_HDR_VERSION);
    if (!v) return NULL;
    atomic_init(&v->refcount, 1);
    atomic_init(&v->value, 0);
    return v;
}

/* The storage whose header holds v (Note [Version counter sharing]), or
 * NULL for an allocated counter. */
static inline em_storage *version_owner(em_version *v)
{
    if (atomic_load_explicit(&v->refcount, memory_order_relaxed) != EM_VERSION_IN_STORAGE) return NULL;
    return (em_storage *)((char *)v - offsetof(em_storage, version));
}

/* Takes the reference a header made on st holds on counter v: none for
 * st's own counter (the storage reference covers it), the owning storage's
 * for another storage's, else one on v. */
static void version_retain(em_version *v, const em_storage *st)
{
    if (v == &st->version) return;
    em_storage *owner = version_owner(v);
    if (owner) em_storage_retain(owner);
    else atomic_fetch_add_explicit(&v->refcount, 1, memory_order_relaxed);
}

/* Drops what version_retain(v, st) took; call before releasing st. */
static void version_release(em_version *v, const em_storage *st)
{
    if (v == &st->version) return;
    em_storage *owner = version_owner(v);
    if (owner) em_storage_release(owner);
    else if (atomic_fetch_sub_explicit(&v->refcount, 1, memory_order_acq_rel) == 1)
        em_core_hdr_free(EM_HDR_VERSION, v);
}

/* ---- shape storage (Note [Inline shapes]) ---- */

static inline void shape_inline(em_tensor *t)
{
    t->sizes = t->inline_shape;
    t->strides = t->inline_shape + EM_INLINE_DIMS;
}

static inline bool shape_spilled(const em_tensor *t) { return t->sizes != t->inline_shape; }

/* Points t's sizes/strides at room for ndim dims: inline (freeing a spill
 * block) for ndim <= EM_INLINE_DIMS, else a spill block of EM_MAX_DIMS
 * (kept when t has one). The arrays' contents are not kept. Returns false
 * with EM_ENOMEM set, t unchanged, when the block cannot be had. */
static inline bool shape_room(em_tensor *t, int ndim)
{
    if (ndim <= EM_INLINE_DIMS) {
        if (__builtin_expect(shape_spilled(t), 0)) {
            free(t->sizes);
            shape_inline(t);
        }
        return true;
    }
    if (shape_spilled(t)) return true;
    int64_t *b = em_core_should_fail() ? NULL : malloc(2 * EM_MAX_DIMS * sizeof(int64_t));
    if (!b) {
        em_set_error(EM_ENOMEM, "out of memory allocating the shape of a tensor of %d dims", ndim);
        return false;
    }
    t->sizes = b;
    t->strides = b + EM_MAX_DIMS;
    return true;
}

/* A header with its shape inline and ndim 0, or NULL with EM_ENOMEM set. */
static em_tensor *header_new(void)
{
    em_tensor *t = em_core_hdr_alloc(EM_HDR_TENSOR);
    if (!t) {
        em_set_error(EM_ENOMEM, "out of memory allocating a tensor header");
        return NULL;
    }
    shape_inline(t);
    return t;
}

/* Frees a header and its spill block (not what it references). */
static void header_free(em_tensor *t)
{
    if (shape_spilled(t)) free(t->sizes);
    em_core_hdr_free(EM_HDR_TENSOR, t);
}

/* header_new with room for ndim dims (Note [Inline shapes]), or NULL with
 * the error set. */
static inline __attribute__((always_inline)) em_tensor *header_with_room(int ndim)
{
    em_tensor *t = header_new();
    if (t && !shape_room(t, ndim)) {
        header_free(t);
        return NULL;
    }
    return t;
}

em_status em_tensor_set_shape(em_tensor *t, int ndim, const int64_t *sizes, const int64_t *strides)
{
    if (ndim < 0 || ndim > EM_MAX_DIMS)
        return em_set_error(EM_EVALUE, "set_shape: %d dims is out of range (at most %d)", ndim, EM_MAX_DIMS);
    int64_t sz[EM_MAX_DIMS], st[EM_MAX_DIMS]; /* the inputs may be t's own arrays */
    int64_t stride = 1;
    for (int i = ndim - 1; i >= 0; i--) {
        sz[i] = sizes[i];
        st[i] = strides ? strides[i] : stride;
        stride = (int64_t)((uint64_t)stride * (uint64_t)(sizes[i] > 1 ? sizes[i] : 1));
    }
    if (!shape_room(t, ndim)) return EM_ENOMEM;
    t->ndim = ndim;
    if (ndim > 0) {
        memcpy(t->sizes, sz, (size_t)ndim * sizeof(int64_t));
        memcpy(t->strides, st, (size_t)ndim * sizeof(int64_t));
    }
    em_tensor_refresh(t);
    return EM_OK;
}

/* Checks ndim, dtype and sizes; returns numel or -1 with the error set. */
static int64_t check_shape(int ndim, const int64_t *sizes, em_dtype dtype, const char *op)
{
    if (ndim < 0 || ndim > EM_MAX_DIMS) {
        em_set_error(EM_EVALUE, "%s: %d dims is out of range (at most %d)", op, ndim, EM_MAX_DIMS);
        return -1;
    }
    if ((unsigned)dtype >= EM_DTYPE_COUNT) {
        em_set_error(EM_ETYPE, "%s: invalid dtype %d", op, (int)dtype);
        return -1;
    }
    int64_t numel = 1;
    bool overflow = false, zero = false;
    for (int i = 0; i < ndim; i++) {
        if (sizes[i] < 0) {
            char s[EM_SHAPE_STR_MAX];
            em_set_error(EM_EVALUE, "%s: negative size %lld in shape %s", op, (long long)sizes[i],
                         em_shape_str(ndim, sizes, s, sizeof s));
            return -1;
        }
        if (sizes[i] == 0) zero = true;
        if (!overflow) overflow = __builtin_mul_overflow(numel, sizes[i], &numel);
    }
    if (zero) return 0;
    int64_t nbytes;
    if (overflow || __builtin_mul_overflow(numel, (int64_t)em_dtype_size_fast(dtype), &nbytes)) {
        char s[EM_SHAPE_STR_MAX];
        em_set_error(EM_EVALUE, "%s: shape %s has too many elements", op,
                     em_shape_str(ndim, sizes, s, sizeof s));
        return -1;
    }
    return numel;
}

/* check_shape's common case without its error paths: at most
 * EM_INLINE_DIMS dims of sizes below 2^10 (a product below 2^50 elements,
 * so no byte count overflows) and a valid dtype. Returns numel, or -1 when
 * check_shape must decide. */
static inline int64_t small_numel(int ndim, const int64_t *sizes, em_dtype dtype)
{
    if ((unsigned)ndim > EM_INLINE_DIMS || (unsigned)dtype >= EM_DTYPE_COUNT) return -1;
    int64_t numel = 1;
    for (int i = 0; i < ndim; i++) {
        if ((uint64_t)sizes[i] >= 1024) return -1;
        numel *= sizes[i];
    }
    return numel;
}

/* Fills header t (shape room made) as a contiguous tensor of ndim/sizes
 * (numel elements) and dtype at offset 0 of st, which t now owns, using
 * st's own version counter (Note [Version counter sharing]). */
static void fill_contiguous(em_tensor *t, em_storage *st, int ndim, const int64_t *sizes, int64_t numel,
                            em_dtype dtype)
{
    em_device device = st->device;
    t->storage = st;
    t->version = &st->version; /* Note [Version counter sharing] */
    atomic_init(&t->refcount, 1);
    t->offset = 0;
    t->ndim = ndim;
    t->dtype = dtype;
    t->device = device;
    t->keyset = EM_KS(device.type == EM_CPU ? EM_KEY_CPU : em_backend_key(device)); /* context.c's table */
    t->numel = numel;
    int64_t stride = 1;
    for (int i = ndim - 1; i >= 0; i--) {
        t->sizes[i] = sizes[i];
        t->strides[i] = stride;
        /* wraps only for empty tensors with huge sizes, whose strides are never used */
        stride = (int64_t)((uint64_t)stride * (uint64_t)(sizes[i] > 1 ? sizes[i] : 1));
    }
    t->autograd_meta = NULL;
    t->view_base = NULL;
    t->view_version = 0;
    t->view_no_grad = false;
    t->is_contiguous = true;
    t->wrapped_number = false;
}

em_tensor *em_tensor_new(int ndim, const int64_t *sizes, em_dtype dtype, em_device device)
{
    int64_t numel = small_numel(ndim, sizes, dtype);
    if (numel < 0) numel = check_shape(ndim, sizes, dtype, "tensor");
    if (numel < 0) return NULL;
    em_tensor *t = header_with_room(ndim);
    if (!t) return NULL;
    em_storage *st = em_storage_new((size_t)numel * em_dtype_size_fast(dtype), device);
    if (!st) {
        header_free(t);
        return NULL;
    }
    fill_contiguous(t, st, ndim, sizes, numel, dtype);
    return t;
}

em_tensor *em_tensor_on_storage(em_storage *st, int ndim, const int64_t *sizes, em_dtype dtype)
{
    int64_t numel = small_numel(ndim, sizes, dtype);
    if (numel < 0) numel = check_shape(ndim, sizes, dtype, "tensor");
    if (numel < 0) return NULL;
    if ((uint64_t)numel * em_dtype_size_fast(dtype) > st->nbytes) {
        char s[EM_SHAPE_STR_MAX];
        em_set_error(EM_EVALUE, "tensor: shape %s of %s needs more than the storage's %zu bytes",
                     em_shape_str(ndim, sizes, s, sizeof s), em_dtype_name(dtype), st->nbytes);
        return NULL;
    }
    em_tensor *t = header_with_room(ndim);
    if (!t) return NULL;
    em_storage_retain(st);
    fill_contiguous(t, st, ndim, sizes, numel, dtype);
    return t;
}

em_tensor *em_core_header_alias(const em_tensor *t)
{
    em_tensor *a = header_with_room(t->ndim);
    if (!a) return NULL;
    version_retain(t->version, t->storage);
    em_storage_retain(t->storage);
    atomic_init(&a->refcount, 1);
    a->storage = t->storage;
    a->offset = t->offset;
    a->numel = t->numel;
    a->ndim = t->ndim;
    a->dtype = t->dtype;
    a->device = t->device;
    a->keyset = EM_KS(t->device.type == EM_CPU ? EM_KEY_CPU : em_backend_key(t->device));
    if (t->ndim > 0) {
        memcpy(a->sizes, t->sizes, (size_t)t->ndim * sizeof(int64_t));
        memcpy(a->strides, t->strides, (size_t)t->ndim * sizeof(int64_t));
    }
    a->version = t->version;
    a->autograd_meta = NULL;
    a->view_base = NULL;
    a->view_version = 0;
    a->view_no_grad = false;
    a->is_contiguous = t->is_contiguous;
    a->wrapped_number = false;
    return a;
}

/* Note [Wrapped number cache]
 * Every Lua number used as a Tensor argument becomes a wrapped 0-dim
 * tensor (`y * 0.999` in a loop makes one per iteration), and autograd
 * rebuilds one for each number it saved (Note [Saved numbers], node.c).
 * Each thread keeps the last few it made, one per slot of a small table
 * indexed by the value's bits, and hands one out again (retained) instead
 * of making a new one when nothing else can reach it: the cache holds the
 * only reference to the tensor and to its storage (no holder, view or
 * alias; em_core_header_alias retains the storage), and the tensor is as
 * made -- version 0 (never written in place), no autograd meta, still a
 * wrapped 0-dim CPU tensor with inline storage, holding the same bits.
 * So whoever gets it cannot tell it from a fresh one, and while anyone
 * holds it (an op's argument, a node, a result that aliases it) it is not
 * handed out again: two numbers in one call are two tensors, as before.
 * em_memory_empty_cache and thread exit (alloc.c) drop the thread's table.
 * Off under AddressSanitizer, as the header lists are (alloc.c), so that
 * ASan sees each wrapped number's lifetime. */
#if defined(__SANITIZE_ADDRESS__)
#define WRAP_SLOTS 0
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define WRAP_SLOTS 0
#endif
#endif
#ifndef WRAP_SLOTS
#define WRAP_SLOTS 8
#endif
#if WRAP_SLOTS
static _Thread_local em_tensor *wrap_cache[WRAP_SLOTS];

/* Whether c, a cached wrapped number, may be handed out as a fresh one of
 * dtype dt holding bits (Note [Wrapped number cache]). */
static bool wrap_reusable(const em_tensor *c, em_dtype dt, uint64_t bits)
{
    if (atomic_load_explicit(&c->refcount, memory_order_acquire) != 1 ||
        atomic_load_explicit(&c->storage->refcount, memory_order_acquire) != 1)
        return false;
    if (c->dtype != dt || c->ndim != 0 || !c->wrapped_number || c->autograd_meta || c->view_base ||
        c->offset != 0 || c->keyset != EM_KS(EM_KEY_CPU) || c->version != &c->storage->version ||
        em_tensor_version(c) != 0 || !em_storage_is_inline(c->storage))
        return false;
    uint64_t have = 0;
    memcpy(&have, c->storage->inline_data, em_dtype_size(dt));
    return have == bits;
}
#endif

void em_core_wrapped_cache_drop(void)
{
#if WRAP_SLOTS
    for (int i = 0; i < WRAP_SLOTS; i++) {
        em_tensor *c = wrap_cache[i];
        wrap_cache[i] = NULL;
        em_tensor_release(c);
    }
#endif
}

em_tensor *em_tensor_wrapped_scalar(em_scalar s)
{
    em_dtype dt = s.kind == EM_SCALAR_FLOAT ? EM_FLOAT64 : s.kind == EM_SCALAR_INT ? EM_INT64 : EM_BOOL;
#if WRAP_SLOTS
    /* the bits the tensor's data will hold (a bool: one byte, 0 or 1) */
    uint64_t bits;
    if (dt == EM_FLOAT64) memcpy(&bits, &s.v.d, sizeof bits);
    else if (dt == EM_INT64) bits = (uint64_t)em_scalar_to_int(s);
    else bits = em_scalar_to_int(s) != 0;
    uint64_t h = bits ^ (uint64_t)dt; /* splitmix64's finaliser: every bit counts */
    h = (h ^ (h >> 30)) * 0xbf58476d1ce4e5b9ull;
    h = (h ^ (h >> 27)) * 0x94d049bb133111ebull;
    unsigned slot = (unsigned)((h ^ (h >> 31)) % WRAP_SLOTS);
    em_tensor *c = wrap_cache[slot];
    if (c && wrap_reusable(c, dt, bits)) return em_tensor_retain(c);
#endif
    em_tensor *t = em_tensor_new(0, NULL, dt, em_cpu_device());
    if (!t) return NULL;
    if (dt == EM_FLOAT64) *(double *)em_tensor_data(t) = s.v.d;
    else em_store_from_int64(em_tensor_data(t), dt, em_scalar_to_int(s));
    t->wrapped_number = true;
#if WRAP_SLOTS
    if (em_storage_is_inline(t->storage)) {
        /* read the slot again: making t may have emptied the cache */
        em_tensor *old = wrap_cache[slot];
        wrap_cache[slot] = em_tensor_retain(t);
        em_core_note_thread();
        em_tensor_release(old);
    }
#endif
    return t;
}

/* Validates the view against the storage: strides >= 0, offset >= 0 and
 * the last addressed element inside the storage (when numel > 0). */
em_tensor *em_tensor_new_view(em_storage *st, int64_t offset, int ndim, const int64_t *sizes,
                              const int64_t *strides, em_dtype dtype, em_version *version)
{
    if (!st) {
        em_set_error(EM_EINTERNAL, "as_strided: no storage given");
        return NULL;
    }
    int64_t numel = check_shape(ndim, sizes, dtype, "as_strided");
    if (numel < 0) return NULL;
    if (offset < 0) {
        em_set_error(EM_EVALUE, "as_strided: negative storage offset %lld", (long long)offset);
        return NULL;
    }
    int64_t last = offset;
    for (int i = 0; i < ndim; i++) {
        if (strides[i] < 0) {
            em_set_error(EM_EVALUE, "as_strided: negative stride %lld at dim %d", (long long)strides[i],
                         i + 1);
            return NULL;
        }
        if (numel > 0 && sizes[i] > 1 &&
            (__builtin_mul_overflow(sizes[i] - 1, strides[i], &(int64_t){0}) ||
             __builtin_add_overflow(last, (sizes[i] - 1) * strides[i], &last))) {
            em_set_error(EM_EVALUE, "as_strided: strides overflow");
            return NULL;
        }
    }
    if (numel > 0) {
        int64_t esz = (int64_t)em_dtype_size(dtype), end;
        if (__builtin_mul_overflow(last + 1, esz, &end) || (uint64_t)end > st->nbytes) {
            char s[EM_SHAPE_STR_MAX];
            em_set_error(EM_EVALUE,
                         "as_strided: shape %s at offset %lld needs %lld bytes, storage has %zu",
                         em_shape_str(ndim, sizes, s, sizeof s), (long long)offset,
                         (long long)((last + 1) * esz), st->nbytes);
            return NULL;
        }
    }
    em_tensor *t = header_with_room(ndim);
    if (!t) return NULL;
    if (version) {
        version_retain(version, st);
    } else if (!(version = version_new())) {
        header_free(t);
        em_set_error(EM_ENOMEM, "out of memory allocating a version counter");
        return NULL;
    }
    em_storage_retain(st);
    atomic_init(&t->refcount, 1);
    t->storage = st;
    t->offset = offset;
    t->ndim = ndim;
    t->dtype = dtype;
    t->device = st->device;
    t->keyset = EM_KS(em_backend_key(st->device));
    t->numel = numel;
    if (ndim > 0) { /* sizes/strides may be NULL for a 0-dim tensor */
        memcpy(t->sizes, sizes, (size_t)ndim * sizeof(int64_t));
        memcpy(t->strides, strides, (size_t)ndim * sizeof(int64_t));
    }
    t->version = version;
    t->autograd_meta = NULL;
    t->view_base = NULL;
    t->view_version = 0;
    t->view_no_grad = false;
    t->is_contiguous = em_core_compute_contiguous(ndim, sizes, strides);
    t->wrapped_number = false;
    return t;
}

/* strides == NULL means row-major contiguous. The storage borrows data
 * (its allocator is NULL): the caller keeps it alive and frees it. */
em_tensor *em_tensor_from_blob(void *data, int ndim, const int64_t *sizes, const int64_t *strides,
                               em_dtype dtype)
{
    int64_t numel = check_shape(ndim, sizes, dtype, "from_blob");
    if (numel < 0) return NULL;
    int64_t contig[EM_MAX_DIMS];
    if (!strides) {
        int64_t s = 1;
        for (int i = ndim - 1; i >= 0; i--) {
            contig[i] = s;
            s = (int64_t)((uint64_t)s * (uint64_t)(sizes[i] > 1 ? sizes[i] : 1));
        }
        strides = contig;
    }
    int64_t last = 0;
    for (int i = 0; i < ndim; i++) {
        if (strides[i] < 0) {
            em_set_error(EM_EVALUE, "from_blob: negative stride %lld at dim %d",
                         (long long)strides[i], i + 1);
            return NULL;
        }
        if (numel > 0 && sizes[i] > 1 &&
            (__builtin_mul_overflow(sizes[i] - 1, strides[i], &(int64_t){0}) ||
             __builtin_add_overflow(last, (sizes[i] - 1) * strides[i], &last))) {
            em_set_error(EM_EVALUE, "from_blob: strides overflow");
            return NULL;
        }
    }
    size_t nbytes = numel > 0 ? (size_t)(last + 1) * em_dtype_size(dtype) : 0;
    if (numel > 0 && !data) {
        em_set_error(EM_EVALUE, "from_blob: NULL data for a tensor of %lld elements",
                     (long long)numel);
        return NULL;
    }
    em_storage *st = em_storage_wrap(data, nbytes, em_cpu_device());
    if (!st) return NULL;
    em_tensor *t = em_tensor_new_view(st, 0, ndim, sizes, strides, dtype, NULL);
    em_storage_release(st);
    return t;
}

/* ---- release ---- */

void em_tensor_release(em_tensor *t)
{
    if (!t || atomic_fetch_sub_explicit(&t->refcount, 1, memory_order_release) != 1) return;
    atomic_thread_fence(memory_order_acquire);
    if (t->autograd_meta && autograd_meta_free) autograd_meta_free(t->autograd_meta);
    em_tensor_release(t->view_base); /* a root: never a view itself, so no deep recursion */
    version_release(t->version, t->storage);
    em_storage_release(t->storage);
    header_free(t);
}

void em_tensors_free(em_tensor **ts, int n) {
    if (!ts) return;
    for (int i = 0; i < n; i++) em_tensor_release(ts[i]);
    free(ts);
}
