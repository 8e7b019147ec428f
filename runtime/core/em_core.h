/* em_core.h -- tensors, storages, dtypes, devices, scalars, errors.
 * The bottom layer of ember: it knows nothing of dispatch, autograd or Lua.
 *
 * Conventions used by every runtime module (see Note [Error state]):
 *   - functions that make something return it (NULL on failure);
 *   - functions that only act return an em_status (EM_OK == 0);
 *   - on failure the thread's error slot holds the kind and message.
 * Dims in the C API are 0-based; negative dims count from the end
 * (-1 is the last), as in PyTorch. The Lua layer maps 1-based dims.
 */
#ifndef EM_CORE_H
#define EM_CORE_H

#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define EM_API __attribute__((visibility("default")))
#define EM_HIDDEN __attribute__((visibility("hidden")))

#define EM_VERSION_STRING "0.1.0"
#define EM_MAX_DIMS 16

/* ---- status codes and the thread's error slot ---- */

/* Note [Error state]
 * Every runtime function that can fail on user input sets the calling
 * thread's error slot (kind + message) and returns NULL or a non-zero
 * em_status. Nothing in runtime/ aborts or exits on bad input. The Lua
 * layer turns the slot into a Lua error after releasing what it holds;
 * C hosts read it with em_error_message(). */
typedef enum {
    EM_OK = 0,
    EM_ESHAPE,    /* shapes do not match / cannot broadcast */
    EM_ETYPE,     /* dtype or argument type not supported */
    EM_EDEVICE,   /* device mismatch or unavailable */
    EM_EINDEX,    /* index or dim out of range */
    EM_EVALUE,    /* bad value (negative size, zero step, ...) */
    EM_ENOMEM,    /* allocation failed */
    EM_EINTERNAL, /* a broken invariant: a bug in ember */
    EM_EINTERRUPT, /* stopped by em_interrupt (Ctrl-C in the shell) */
    EM_STATUS_COUNT
} em_status;

/* Note [Interrupts]
 * em_interrupt() (async-signal-safe: the shell's SIGINT handler calls it)
 * asks the process to stop at the next op boundary: every op's entry (the
 * generated em_NAME) and the backward engine between nodes check the flag
 * and fail with EM_EINTERRUPT ("NAME: interrupted"), consuming it, so the
 * op after that runs normally. Tensors, graphs and the allocator are left
 * as after any failed op. Long loops of ember's own kernels stop early
 * too (Note [Interrupts in kernels] in runtime/kernels/cpu/em_cpu.h): an op
 * that does not write into an argument checks the flag again when its
 * kernel returns and then fails, dropping its result; other kernels (and
 * BLAS calls) finish first. The flag is per process: with several threads
 * running ops, one of them stops. */
EM_API void em_interrupt(void);
EM_API void em_interrupt_clear(void);
EM_API extern atomic_int em_interrupt_flag;
static inline bool em_interrupt_pending(void) {
    return __builtin_expect(atomic_load_explicit(&em_interrupt_flag, memory_order_relaxed) != 0, 0);
}
/* Consumes a pending interrupt: sets "op: interrupted" and returns
 * EM_EINTERRUPT; EM_OK when none was pending. */
EM_API em_status em_take_interrupt(const char *op);

EM_API em_status em_set_error(em_status kind, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
EM_API em_status em_set_errorv(em_status kind, const char *fmt, va_list ap);
EM_API em_status em_error_kind(void);        /* EM_OK when the slot is clear */
EM_API const char *em_error_message(void);   /* "" when the slot is clear */
EM_API void em_clear_error(void);
EM_API const char *em_status_name(em_status s);

/* ---- dtypes ---- */

/* Ordered so that the promotion table in dtype.c reads naturally. */
typedef enum {
    EM_BOOL = 0,
    EM_UINT8,
    EM_INT8,
    EM_INT32,
    EM_INT64,
    EM_FLOAT16,
    EM_BFLOAT16,
    EM_FLOAT32,
    EM_FLOAT64,
    EM_DTYPE_COUNT,
    EM_DTYPE_NONE = -1 /* "no dtype given" in optional arguments */
} em_dtype;

EM_API const char *em_dtype_name(em_dtype t);      /* "float32", ... */
EM_API em_dtype em_dtype_from_name(const char *s); /* EM_DTYPE_NONE if unknown */
EM_API size_t em_dtype_size(em_dtype t);           /* bytes per element */
EM_API bool em_dtype_is_floating(em_dtype t);      /* f16 bf16 f32 f64 */
EM_API bool em_dtype_is_integral(em_dtype t);      /* ints, not bool */
/* PyTorch's promote_types: the smallest dtype both convert to losslessly
 * within the higher category (bool < integral < floating). */
EM_API em_dtype em_promote_types(em_dtype a, em_dtype b);

/* half and bfloat16 storage types and conversions */
typedef struct { uint16_t bits; } em_half;
typedef struct { uint16_t bits; } em_bfloat16;
EM_API float em_half_to_float(em_half h);
EM_API em_half em_float_to_half(float f);      /* round to nearest even */
static inline float em_bf16_to_float(em_bfloat16 b) {
    union { uint32_t u; float f; } v = { (uint32_t)b.bits << 16 };
    return v.f;
}
static inline em_bfloat16 em_float_to_bf16(float f) {
    union { uint32_t u; float f; } v = { .f = f };
    em_bfloat16 r;
    if ((v.u & 0x7fffffffu) > 0x7f800000u) { r.bits = (uint16_t)((v.u >> 16) | 0x40); return r; }
    uint32_t rounding = 0x7fffu + ((v.u >> 16) & 1u);
    r.bits = (uint16_t)((v.u + rounding) >> 16);
    return r;
}

/* ---- scalars ---- */

typedef enum { EM_SCALAR_BOOL, EM_SCALAR_INT, EM_SCALAR_FLOAT } em_scalar_kind;
typedef struct {
    em_scalar_kind kind;
    union { bool b; int64_t i; double d; } v;
} em_scalar;

static inline em_scalar em_scalar_float(double d) { em_scalar s; s.kind = EM_SCALAR_FLOAT; s.v.d = d; return s; }
static inline em_scalar em_scalar_int(int64_t i) { em_scalar s; s.kind = EM_SCALAR_INT; s.v.i = i; return s; }
static inline em_scalar em_scalar_bool(bool b) { em_scalar s; s.kind = EM_SCALAR_BOOL; s.v.b = b; return s; }
static inline double em_scalar_to_double(em_scalar s) {
    return s.kind == EM_SCALAR_FLOAT ? s.v.d : s.kind == EM_SCALAR_INT ? (double)s.v.i : (double)s.v.b;
}
/* Defined for every scalar: a float truncates toward zero, NaN gives 0 and
 * values past int64's range saturate (a C cast would be undefined); callers
 * that must refuse such values check them first. */
static inline int64_t em_scalar_to_int(em_scalar s) {
    if (s.kind == EM_SCALAR_FLOAT) {
        double d = s.v.d;
        return d != d ? 0 : d >= 9223372036854775807.0 ? INT64_MAX : d <= -9223372036854775808.0 ? INT64_MIN : (int64_t)d;
    }
    return s.kind == EM_SCALAR_INT ? s.v.i : (int64_t)s.v.b;
}
/* The dtype a lone scalar has: bool, int64 or float32 (the default). */
EM_API em_dtype em_scalar_dtype(em_scalar s);

/* A borrowed list of ints (sizes, dims): n == -1 means absent. */
typedef struct { const int64_t *data; int n; } em_intlist;
/* A borrowed list of tensors (a Tensor[] argument; see Note [Several
 * results] in codegen/codegen.h for the owned form of a Tensor[] result). */
typedef struct { struct em_tensor *const *data; int n; } em_tensorlist;
/* A borrowed list of floats (a float[]? argument): n == -1 means absent. */
typedef struct { const double *data; int n; } em_floatlist;
/* Frees an owned Tensor[] result: releases its n tensors (NULL entries
 * skipped), then the array itself (malloc'd). NULL is a no-op. */
EM_API void em_tensors_free(struct em_tensor **ts, int n);

/* ---- devices and dispatch keys ---- */

/* Note [Devices]
 * A device is a type and an index. The index is an id, 0-based as in
 * PyTorch ("cuda:0" is the first CUDA device), or -1 for "no index": the
 * CPU has none (it prints as "cpu"), and device("cuda") names the current
 * device of its type (a factory resolves it to index 0). Each type maps to
 * one backend dispatch key (the table in core/context.c); PrivateUse1 is
 * the slot for an out-of-tree backend, named "privateuseone" as in
 * PyTorch. A type is available once a backend registered its allocator
 * (em_register_allocator); the CPU registers the caching allocator. */
typedef enum { EM_CPU = 0, EM_CUDA, EM_PRIVATEUSE1, EM_DEVICE_COUNT,
               EM_DEVICE_NONE = -1 /* "no device given" in optional arguments */ } em_device_type;
typedef struct { int8_t type; int8_t index; } em_device; /* type: em_device_type; index -1: none */
EM_API const char *em_device_name(em_device d);          /* the type's name: "cpu", "cuda" */
static inline em_device em_cpu_device(void) { em_device d = { EM_CPU, -1 }; return d; }
static inline em_device em_no_device(void) { em_device d = { EM_DEVICE_NONE, -1 }; return d; }
static inline bool em_device_eq(em_device a, em_device b) { return a.type == b.type && a.index == b.index; }
/* Writes "cpu", "cuda:1", "privateuseone:0" into buf; returns buf. */
EM_API char *em_device_str(em_device d, char *buf, size_t n);
#define EM_DEVICE_STR_MAX 32
/* Parses "cpu", "cuda", "cuda:1", "privateuseone:0" (PyTorch's spelling).
 * EM_OK, or an EM_EVALUE error naming op and what is wrong. */
EM_API em_status em_device_parse(const char *s, em_device *out, const char *op);
/* The device a new tensor lives on when d is given to a factory: absent ->
 * cpu; no index -> index 0 (cpu keeps none). Sets an EM_EDEVICE error
 * "op: device X is not available: no backend registered" and returns false
 * when no allocator is registered for the type. */
EM_API bool em_device_resolve(em_device d, em_device *out, const char *op);

/* Note [Dispatch key order]
 * Keys are ordered by priority: a higher value wins. The dispatcher ORs
 * the key sets of a call's tensor arguments, applies the thread-local
 * include/exclude sets and calls the kernel of the highest key left.
 * Backend keys sit at the bottom, Autograd above them, then keys that
 * wrap everything (tracing, profiling via boxed fallbacks). Core knows the
 * enum only so that a tensor can carry its key set; the tables live in
 * runtime/dispatch. */
typedef enum {
    EM_KEY_CPU = 0,
    EM_KEY_CUDA,
    EM_KEY_PRIVATEUSE1,  /* an out-of-tree backend (tests register one) */
    EM_KEY_AUTOGRAD,     /* record the graph, redispatch below */
    EM_KEY_TRACE,        /* boxed fallbacks: tracing, profiling */
    EM_KEY_COUNT
} em_dispatch_key;
typedef uint64_t em_keyset;
#define EM_KS(k) ((em_keyset)1 << (k))
EM_API const char *em_key_name(em_dispatch_key k);
/* The backend key for a device (CPU -> EM_KEY_CPU, ...), from the one
 * device-type <-> key table in core/context.c. */
EM_API em_dispatch_key em_backend_key(em_device d);
/* The device type a backend key serves, or EM_DEVICE_NONE for a key that
 * is not a backend (Autograd, Trace). */
EM_API em_device_type em_key_device_type(em_dispatch_key k);

/* ---- storage and allocators ---- */

typedef struct em_allocator {
    /* Returns at least nbytes of memory aligned to 64 bytes, or NULL. */
    void *(*alloc)(const struct em_allocator *self, size_t nbytes);
    void (*free)(const struct em_allocator *self, void *ptr, size_t nbytes);
    const char *name;
} em_allocator;

/* The CPU caching allocator: 64-byte aligned; freed blocks are kept on a
 * free list per size class and reused (see Note [Caching allocator]). */
EM_API const em_allocator *em_cpu_allocator(void);

/* Note [Allocator registry]
 * One allocator per device type. Storage allocation (em_storage_new) asks
 * the registry for the device's allocator; a backend makes its device
 * type available by registering one (from its init code, without touching
 * core). The CPU entry is the caching allocator from the start (and again
 * after NULL is registered for it: the cpu is always available).
 * Registering NULL removes a backend (tests); the allocator must outlive
 * every storage made from it. Registration is not synchronised with
 * concurrent allocation: do it before using the device. */
EM_API em_status em_register_allocator(em_device_type type, const em_allocator *a);
/* The registered allocator of a device type, or NULL. */
EM_API const em_allocator *em_get_allocator(em_device_type type);
typedef struct {
    size_t allocated; /* bytes in live storages */
    size_t cached;    /* bytes held on free lists, ready for reuse */
    size_t peak;      /* high-water mark of allocated */
    uint64_t n_allocs, n_cache_hits;
} em_memory_stats;
EM_API void em_memory_get_stats(em_memory_stats *out);
EM_API void em_memory_empty_cache(void); /* return cached blocks to the OS; drops this thread's cached wrapped numbers (tensor.c) */
/* Test hook: make the n-th allocation from now fail (0 disables). Counts
 * the cpu allocator's data blocks, the tensor, storage and version
 * headers, and the sites that ask em_memory_test_fail (autograd). */
EM_API void em_memory_fail_after(long n);
/* Allocations still to go before the hook fires (0: it fired or is off). */
EM_API long em_memory_fail_remaining(void);
/* For allocation sites outside core (autograd nodes and their saved
 * variables, hooks, the backward engine's buffers: EM_TEST_MALLOC in
 * em_autograd.h): counts one allocation of the hook above and says whether
 * it is the one to fail; the site then fails as if malloc returned NULL. */
EM_API bool em_memory_test_fail(void);
/* A cap on the bytes of live cpu storages (0: none, the default): an
 * allocation that would pass it fails with EM_ENOMEM, naming the request,
 * the bytes in use and the cap. Checked per allocation, so threads
 * allocating at once may pass it by at most their requests. */
EM_API void em_memory_set_limit(size_t bytes);
EM_API size_t em_memory_get_limit(void);
/* Bytes allocated by this thread since the last call (data and tensor,
 * storage and version headers); the Lua layer feeds them to the collector
 * (see Note [GC pressure] in runtime/lua/lua_tensor.c). */
EM_API size_t em_memory_take_thread_allocated(void);

/* Note [Version counter sharing]
 * A tensor and every view of it point to one em_version. In-place ops bump
 * it; autograd saves the value when it saves a tensor and refuses to use
 * the saved tensor when the counter moved. Views made by core functions
 * share the base's counter; new tensors get a fresh one. A tensor made with
 * its storage (em_tensor_new) uses the counter inside the storage header
 * (storage->version, refcount EM_VERSION_IN_STORAGE): no allocation of its
 * own, and alive as long as the storage is. Holding such a counter means
 * holding its storage: a header whose version is its own storage's holds
 * nothing more; one holding another storage's counter holds that storage
 * (tensor.c). Other counters (em_tensor_new_view with NULL: a fresh counter
 * over a shared storage) are allocated and refcounted. */
#define EM_VERSION_IN_STORAGE (-1L)
typedef struct em_version {
    atomic_long refcount;       /* holders; EM_VERSION_IN_STORAGE: storage->version */
    atomic_uint_fast32_t value;
} em_version;

/* Note [Inline storage]
 * A CPU storage of at most EM_STORAGE_INLINE_BYTES bytes from the caching
 * allocator (a 0-dim or 1-element tensor: every wrapped Lua number, every
 * node of a scalar graph) keeps its data in the storage header itself:
 * data points at inline_data, and no data block is allocated or freed
 * (one allocation less per small tensor, and ~100 bytes less for each one
 * a graph keeps). Such data is 16-byte aligned, not 64 (the allocator's
 * alignment), which no kernel needs for 16 bytes. allocator is still the
 * cpu allocator (the storage counts as allocator-owned memory, and the
 * bytes count in em_memory_get_stats' allocated), but it never sees this
 * block: em_storage_release skips freeing it, and code that replaces a
 * storage's data (out= resizing) goes through em_storage_grow. */
#define EM_STORAGE_INLINE_BYTES 16
typedef struct em_storage {
    atomic_long refcount;
    void *data;                 /* NULL only when nbytes == 0 */
    size_t nbytes;
    const em_allocator *allocator; /* NULL: data is borrowed, not freed */
    em_device device;
    struct em_version version;  /* the counter of the tensors made on this storage
                                   (Note [Version counter sharing]) */
    _Alignas(16) unsigned char inline_data[EM_STORAGE_INLINE_BYTES]; /* Note [Inline storage] */
} em_storage;
#if UINTPTR_MAX == UINT64_MAX
_Static_assert(sizeof(em_storage) <= 80, "Note [Inline storage]: keep the storage header small");
#endif
/* Whether s keeps its data inline (Note [Inline storage]). */
static inline bool em_storage_is_inline(const em_storage *s) { return s->data == (const void *)s->inline_data; }

/* New storage of nbytes from the device's allocator (refcount 1). */
EM_API em_storage *em_storage_new(size_t nbytes, em_device device);
/* Wrap memory the caller owns; ember never frees it. */
EM_API em_storage *em_storage_wrap(void *data, size_t nbytes, em_device device);
EM_API void em_storage_retain(em_storage *s);
EM_API void em_storage_release(em_storage *s);
/* Gives an allocator-owned storage a new block of nbytes (> s->nbytes)
 * from its allocator, copying its old bytes and freeing the old block
 * (Note [Inline storage]: an inline block is not freed); every tensor
 * sharing s sees the new block. EM_ENOMEM (nothing changed) when the
 * block cannot be had; the caller words the error. */
EM_API em_status em_storage_grow(em_storage *s, size_t nbytes);

/* ---- the runtime context: generators and the thread count ---- */

/* Note [Runtime context]
 * Process-wide settings that every backend reads live in core
 * (core/context.c), not in a backend: the default random generator and
 * the intra-op thread count. A backend that keeps its own copy of a
 * setting (the CPU pool, OpenBLAS) registers a hook that is called when
 * it changes.
 *
 * A generator is counter-based (Note [Random numbers]): a refcounted
 * (seed, offset) pair with the API shape of torch.Generator: manual_seed,
 * seed (a fresh non-deterministic seed), initial_seed, get/set_state. */
typedef struct em_generator em_generator;
EM_API em_generator *em_generator_new(void);        /* refcount 1, default seed; NULL on OOM */
EM_API em_generator *em_generator_retain(em_generator *g);
EM_API void em_generator_release(em_generator *g);
EM_API em_generator *em_default_generator(void);    /* borrowed; lives forever */
EM_API void em_generator_manual_seed(em_generator *g, uint64_t seed); /* offset 0 */
EM_API uint64_t em_generator_seed(em_generator *g); /* reseeds from the OS; returns the seed */
EM_API uint64_t em_generator_initial_seed(em_generator *g);
/* The state is (seed, offset): get it, or set it back (exactly the same
 * numbers follow). */
EM_API void em_generator_get_state(em_generator *g, uint64_t *seed, uint64_t *offset);
EM_API void em_generator_set_state(em_generator *g, uint64_t seed, uint64_t offset);
/* Reserves nwords 32-bit words of g's stream for one call, atomically:
 * returns the offset of the first (a multiple of 4) and stores the key in
 * *seed; g's offset moves past them (nwords rounded up to a multiple of 4).
 * The caller then computes any word it needs with em_philox_word_block. */
EM_API uint64_t em_generator_reserve(em_generator *g, uint64_t nwords, uint64_t *seed);
EM_API void em_generator_lock(em_generator *g);
EM_API void em_generator_unlock(em_generator *g);
/* 64 fresh bits (lock held): one block of the stream, offset += 4. */
EM_API uint64_t em_generator_next_u64(em_generator *g);

/* Note [Random numbers]
 * Every generator is Philox4x32-10 (Salmon et al., "Parallel random
 * numbers: as easy as 1, 2, 3", SC'11; the Random123 reference): a keyed
 * bijection of a 128-bit counter to 128 random bits. The key is the 64-bit
 * seed; the generator's state is (seed, offset), and the offset counts the
 * 32-bit words handed out so far. Word w of the stream of seed s is lane
 * w % 4 of philox(counter = w / 4 as a 128-bit integer, key = s).
 *
 * An op reserves the words it needs in one step (em_generator_reserve:
 * offset += n rounded up to 4) and then computes each element's words from
 * (seed, start offset, element index) alone -- element i of an op that
 * takes k words an element (k = 1, 2 or 4) reads words start + i*k .. +k-1
 * -- so the values do not depend on the thread count or on how the work
 * is split, and any element can be computed without the others. Ops whose
 * draws per element vary (poisson; rejection sampling) reserve 4 words an
 * element and give element i its own sub-stream: counters
 * {lo(b+i), hi(b+i), j, 1} for j = 0, 1, ..., where b = start / 4 (the
 * plain stream's counters have a 0 there, so the two never meet).
 * The kernels' conversions are in runtime/kernels/cpu/random.c. */
static inline void em_philox4x32_10(const uint32_t ctr_in[4], const uint32_t key_in[2], uint32_t out[4])
{
    uint32_t c0 = ctr_in[0], c1 = ctr_in[1], c2 = ctr_in[2], c3 = ctr_in[3];
    uint32_t k0 = key_in[0], k1 = key_in[1];
    for (int r = 0; r < 10; r++) {
        uint64_t p0 = (uint64_t)0xD2511F53u * c0, p1 = (uint64_t)0xCD9E8D57u * c2;
        uint32_t n0 = (uint32_t)(p1 >> 32) ^ c1 ^ k0, n2 = (uint32_t)(p0 >> 32) ^ c3 ^ k1;
        c0 = n0, c1 = (uint32_t)p1, c2 = n2, c3 = (uint32_t)p0;
        k0 += 0x9E3779B9u, k1 += 0xBB67AE85u;
    }
    out[0] = c0, out[1] = c1, out[2] = c2, out[3] = c3;
}

/* Block `block` (= word offset / 4) of seed's stream: its 4 words. */
static inline void em_philox_word_block(uint64_t seed, uint64_t block, uint32_t out[4])
{
    uint32_t ctr[4] = { (uint32_t)block, (uint32_t)(block >> 32), 0, 0 };
    uint32_t key[2] = { (uint32_t)seed, (uint32_t)(seed >> 32) };
    em_philox4x32_10(ctr, key, out);
}

/* Seeds the default generator (torch.manual_seed). */
EM_API void em_manual_seed(uint64_t seed);

/* The intra-op thread count (n >= 1; clamped to 256), shared by every
 * backend; the CPU backend's hook resizes its pool and OpenBLAS. */
EM_API void em_set_num_threads(int n);
EM_API int em_get_num_threads(void);
/* Registers fn(n), called by em_set_num_threads (at most 8 hooks). */
EM_API em_status em_context_on_num_threads(void (*fn)(int n));

/* ---- tensors ---- */


/* Note [View base]
 * A view made by a view function below (view, narrow, select, expand,
 * as_strided, ...) points at its root base: the tensor that is not itself
 * a view and whose storage it shares (a view of a view points at the same
 * root). The view owns a reference to it, so the base lives as long as any
 * of its views. em_core_alias and detach make headers without a base.
 * Views carry the Autograd key so that every op on them reaches autograd,
 * which keeps their history in step with their base's (in-place writes
 * through a view, or into the base, change what the view's gradient must
 * reach; see Note [View history] in runtime/autograd/em_autograd.h). */
/* Note [Inline shapes]
 * A tensor header keeps the sizes and strides of up to EM_INLINE_DIMS dims
 * in its own inline_shape buffer; a tensor of more dims (up to EM_MAX_DIMS,
 * the limit users see) keeps them in a spill block that the header owns and
 * frees with itself. sizes and strides always point at the arrays in use
 * (inline_shape and inline_shape + EM_INLINE_DIMS, or the two halves of
 * the spill block), so readers index t->sizes[i] and t->strides[i] as
 * before. Consequences:
 *   - a header is never copied by value (a copy's pointers would still
 *     point into the original) and never built on the stack; headers come
 *     only from em_tensor_new / em_tensor_new_view (tensor.c);
 *   - the number of dims changes only through em_tensor_set_shape, which
 *     spills (allocating the block, a site fault injection reaches) or
 *     moves the shape back inline; code may rewrite sizes[i]/strides[i] for
 *     i < ndim in place (then call em_tensor_refresh);
 *   - sizes[i], strides[i] for i >= ndim are not addressable storage.
 * The sizeof pins below keep the header small (it is allocated for every
 * temporary; the autograd input meta does the same, runtime/autograd). */
#define EM_INLINE_DIMS 5

typedef struct em_tensor {
    atomic_long refcount;        /* owners: C callers, Lua userdata, graph */
    em_storage *storage;         /* shared with views; never NULL */
    int64_t offset;              /* storage offset, in elements */
    int64_t numel;               /* product of sizes (cached) */
    em_keyset keyset;            /* backend key | autograd key | ... */
    int64_t *sizes;              /* [ndim], in elements (Note [Inline shapes]) */
    int64_t *strides;            /* [ndim], in elements, may be 0 (expand) */
    em_version *version;         /* shared with views, never NULL */
    void *autograd_meta;         /* owned by runtime/autograd; NULL = none */
    struct em_tensor *view_base; /* owned: the root base of a view, NULL for
                                    a tensor that is not a view (Note [View base]) */
    int32_t ndim;                /* 0 for a scalar tensor */
    em_dtype dtype;
    uint32_t view_version;       /* autograd's: the version at which the view's
                                    history was last made (Note [View history]) */
    em_device device;
    bool view_no_grad;           /* the view (or the view it was taken from) was
                                    made with grad mode off (set by the view kernels) */
    bool is_contiguous;          /* cached row-major contiguity */
    bool wrapped_number;         /* a 0-dim tensor made from a Lua/C number:
                                    promotes like a scalar (see em_result_type2) */
    int64_t inline_shape[2 * EM_INLINE_DIMS]; /* sizes then strides, ndim <= EM_INLINE_DIMS */
} em_tensor;
#if UINTPTR_MAX == UINT64_MAX
_Static_assert(sizeof(em_tensor) <= 184, "Note [Inline shapes]: keep the tensor header small");
#endif

/* Owners call retain/release; the last release frees the tensor, its
 * autograd meta (through the hook below), and drops the storage. */
static inline em_tensor *em_tensor_retain(em_tensor *t) {
    if (t) atomic_fetch_add_explicit(&t->refcount, 1, memory_order_relaxed);
    return t;
}
EM_API void em_tensor_release(em_tensor *t);
/* Autograd installs this so that core can free meta it does not know. */
EM_API void em_core_set_autograd_meta_free(void (*fn)(void *meta));

/* A new contiguous tensor with uninitialised data (refcount 1), or NULL. */
EM_API em_tensor *em_tensor_new(int ndim, const int64_t *sizes, em_dtype dtype, em_device device);
/* A new contiguous tensor at offset 0 of st (retained), sharing st's own
 * version counter (Note [Version counter sharing]): how autograd rebuilds
 * a result it saved as its storage (Note [Saved outputs]). NULL with the
 * error set when the shape needs more bytes than st has. */
EM_API em_tensor *em_tensor_on_storage(em_storage *st, int ndim, const int64_t *sizes, em_dtype dtype);
/* A wrapped-number 0-dim CPU tensor holding s (float64 for a float, int64
 * for an integer, bool for a boolean): what a Lua number becomes as a
 * Tensor argument; it does not take part in type promotion. */
EM_API em_tensor *em_tensor_wrapped_scalar(em_scalar s);
/* A new tensor header over an existing storage (retained), sharing the
 * given version counter (retained) or making a fresh one when NULL. */
EM_API em_tensor *em_tensor_new_view(em_storage *st, int64_t offset, int ndim,
                                     const int64_t *sizes, const int64_t *strides,
                                     em_dtype dtype, em_version *version);
/* Tensor over host memory the caller owns (no copy). */
EM_API em_tensor *em_tensor_from_blob(void *data, int ndim, const int64_t *sizes,
                                      const int64_t *strides, em_dtype dtype);
/* Recompute numel and is_contiguous after editing sizes/strides. */
EM_API void em_tensor_refresh(em_tensor *t);
/* Gives t ndim dims of the given sizes and strides (strides NULL: row-major
 * contiguous), moving the shape into or out of a spill block as ndim needs
 * (Note [Inline shapes]), and refreshes numel and is_contiguous. sizes and
 * strides may point into t's own arrays. Checks neither the sizes nor the
 * storage's bounds (callers do). EM_EVALUE for ndim outside [0,
 * EM_MAX_DIMS], EM_ENOMEM when the spill block cannot be had; t is
 * unchanged on failure. */
EM_API em_status em_tensor_set_shape(em_tensor *t, int ndim, const int64_t *sizes, const int64_t *strides);

/* Element sizes in the order of em_dtype, for inline use on hot paths. */
static inline size_t em_dtype_size_fast(em_dtype t) {
    static const uint8_t sizes[EM_DTYPE_COUNT] = { 1, 1, 1, 4, 8, 2, 2, 4, 8 };
    return sizes[t];
}
/* Note [Empty tensor data]
 * A storage of 0 bytes has data == NULL (no allocation, nothing to free),
 * but em_tensor_data() never returns NULL: for such a storage it returns
 * em_core_empty_data, a read-only, 64-byte aligned block that belongs to
 * no tensor. Kernels routinely compute `data + offset` or `base + i *
 * stride` before a loop that runs 0 times; on NULL even `+ 0` is undefined
 * behaviour (clang's UBSan reports it; make fuzz found one such site after
 * another: tolist, gather/scatter, LAPACK's copies). A valid pointer makes
 * that arithmetic defined at every site at once, including the sites of
 * ops not yet written. Nothing may be read or written through it (a
 * tensor over an empty storage has no elements; a write would fault, the
 * block is const). Code that reads storage->data itself (serialization,
 * LAPACK glue, out= resizing) must still skip empty storages. Identity of
 * memory is decided by storage, never by this address: every empty tensor
 * shares it. */
EM_API extern const unsigned char em_core_empty_data[64];
/* The address of t's first element; em_core_empty_data for an empty
 * storage (Note [Empty tensor data]); never NULL. */
static inline void *em_tensor_data(const em_tensor *t) {
    char *d = (char *)t->storage->data;
    return d ? d + t->offset * (int64_t)em_dtype_size_fast(t->dtype) : (void *)em_core_empty_data;
}
static inline void em_tensor_bump_version(em_tensor *t) {
    atomic_fetch_add_explicit(&t->version->value, 1, memory_order_relaxed);
}
static inline uint32_t em_tensor_version(const em_tensor *t) {
    return (uint32_t)atomic_load_explicit(&t->version->value, memory_order_relaxed);
}

/* Writes "{2,3}" (the Lua table spelling of a shape) into buf; returns buf. */
EM_API char *em_shape_str(int ndim, const int64_t *sizes, char *buf, size_t n);
#define EM_SHAPE_STR_MAX (EM_MAX_DIMS * 21 + 4)

/* Normalises dim (negative counts from the end) to [0, ndim). On failure
 * sets an EM_EINDEX error naming op and returns -1. For ndim == 0 the
 * valid range is that of a 1-d tensor, as in PyTorch. The message speaks
 * in 1-based dims (the Lua user's view); the value is 0-based. */
EM_API int em_wrap_dim(int64_t dim, int ndim, const char *op);

/* Broadcast two shapes. Returns the result ndim, or -1 with an EM_ESHAPE
 * error "op: shapes {..} and {..} cannot broadcast". */
EM_API int em_broadcast_shapes(int na, const int64_t *a, int nb, const int64_t *b,
                               int64_t *out, const char *op);

/* Load element i-th pointer as double / store a double, any dtype. */
EM_API double em_load_as_double(const void *p, em_dtype t);
EM_API void em_store_from_double(void *p, em_dtype t, double v);
EM_API int64_t em_load_as_int64(const void *p, em_dtype t);
EM_API void em_store_from_int64(void *p, em_dtype t, int64_t v);

/* Result dtype of a binary op, PyTorch rules: tensors with dims outrank
 * 0-dim tensors, which outrank scalars, but only within a category; a
 * higher category (bool < integral < floating) always wins, and a float
 * scalar with integral tensors gives the default float (float32). */
EM_API em_dtype em_result_type2(const em_tensor *a, const em_tensor *b);
/* The same over n tensors (NULL entries skipped): addcmul, lerp, ... */
EM_API em_dtype em_result_type_n(int n, const em_tensor *const *t);
EM_API em_dtype em_result_type_scalar(const em_tensor *a, em_scalar s);

/* ---- views (no copies; share storage and version counter) ---- */
/* All return a new tensor (refcount 1) or NULL with the error set. The op
 * argument names the user-facing op in messages. Dims are 0-based,
 * negative from the end. */

/* view: sizes may contain one -1; fails when the strides do not allow a
 * view (then reshape copies). */
EM_API em_tensor *em_core_view(const em_tensor *t, int n, const int64_t *sizes, const char *op);
/* Note [Reshape copies outside core]
 * Core makes no copies (it has no dtype-cast loops; the one copy/cast
 * table is the CPU kernel module's, and other backends have their own).
 * A reshape is therefore two halves: em_core_reshape_view returns a view
 * when t's strides allow one; when they do not it returns NULL with
 * *needs_copy set and the error slot clear. The caller -- the reshape
 * kernel, em_kv_reshape -- then runs contiguous(t) through the dispatcher
 * (so the tensor's backend copies) and hands that copy to
 * em_core_reshape_copied, which gives it the new shape. A bad shape is an
 * error (NULL, *needs_copy false). */
EM_API em_tensor *em_core_reshape_view(const em_tensor *t, int n, const int64_t *sizes, bool *needs_copy);
/* The result of a reshape that copied: c (a contiguous copy) with the new
 * shape (one size may be -1), sharing c's storage and version but not a
 * view of anything (Note [View base]). */
EM_API em_tensor *em_core_reshape_copied(const em_tensor *c, int n, const int64_t *sizes);
EM_API em_tensor *em_core_transpose(const em_tensor *t, int64_t d0, int64_t d1);
EM_API em_tensor *em_core_permute(const em_tensor *t, int n, const int64_t *dims);
/* expand: -1 keeps a size; new leading dims allowed; only size-1 dims grow. */
EM_API em_tensor *em_core_expand(const em_tensor *t, int n, const int64_t *sizes);
/* narrow(dim, start, length): start 0-based, negative from the end. */
EM_API em_tensor *em_core_narrow(const em_tensor *t, int64_t dim, int64_t start, int64_t length);
/* select(dim, index): drops dim; index 0-based, negative from the end. */
EM_API em_tensor *em_core_select(const em_tensor *t, int64_t dim, int64_t index);
/* slice(dim, start, end, step): half-open [start, end), 0-based, clamped
 * like Python slices; step >= 1. */
EM_API em_tensor *em_core_slice(const em_tensor *t, int64_t dim, int64_t start, int64_t end, int64_t step);
/* squeeze: all size-1 dims (dim == NULL) or the given one (no-op if size != 1). */
EM_API em_tensor *em_core_squeeze(const em_tensor *t, const int64_t *dim);
EM_API em_tensor *em_core_unsqueeze(const em_tensor *t, int64_t dim);
/* as_strided: a view with the given geometry over t's storage; offset is
 * absolute in the storage (elements). Checks the extent against it. */
EM_API em_tensor *em_core_as_strided(const em_tensor *t, int n, const int64_t *sizes,
                                     const int64_t *strides, int64_t offset);
/* alias_view: a view with t's own geometry (t() of a 1-d tensor). */
EM_API em_tensor *em_core_alias_view(const em_tensor *t);
/* alias: a new header over the same data that is NOT a view (no base):
 * for detach() and saved outputs. Shares the version counter. */
EM_API em_tensor *em_core_alias(const em_tensor *t);
/* Internal overlap of a tensor's memory, PyTorch's has_internal_overlap:
 * EM_OVERLAP_YES when two elements share one memory location for sure (a
 * stride 0 over a size > 1), EM_OVERLAP_NO when the tensor is
 * non-overlapping and dense, EM_OVERLAP_TOO_HARD otherwise. */
typedef enum { EM_OVERLAP_NO, EM_OVERLAP_YES, EM_OVERLAP_TOO_HARD } em_overlap;
EM_API em_overlap em_core_internal_overlap(const em_tensor *t);
/* Sets an EM_EVALUE error and returns it when t has internal overlap (an
 * in-place write would write one location twice); EM_OK otherwise. */
EM_API em_status em_core_check_no_internal_overlap(const em_tensor *t, const char *op);
/* PyTorch's assert_no_partial_overlap: an in-place op refuses an input
 * that shares some, but not exactly all, of the memory it writes (same
 * start, end and strides is a full overlap, which elementwise ops handle).
 * Only dense, non-overlapping tensors are judged; others pass. */
EM_API em_status em_core_check_no_partial_overlap(const em_tensor *out, const em_tensor *in, const char *op);

#endif
