/* alloc.c -- the CPU caching allocator, its statistics and test hooks.
 * Freed blocks are kept per size class and handed out again. */
#include <pthread.h>
#include <stdlib.h>
#include <unistd.h>

#include "core/em_core_int.h"

/* Note [Caching allocator]
 * A fresh large buffer costs one page fault per 4 KiB on first touch
 * (a 40 MB output: ~10k faults, which halves an out-of-place add's speed).
 * So freed blocks are never returned to the OS on the hot path: each
 * request is rounded up to a size class and a freed block goes on its
 * class's free list, to be handed out again already mapped.
 *   classes: 64 B .. 1 MiB in powers of two (15 classes), then quarter
 *   steps of each power of two (1.25, 1.5, 1.75, 2 x 2^k), so a cached
 *   block wastes at most 25% of address space, and untouched pages of it
 *   cost nothing.
 * Two levels: a per-thread cache of a few small blocks (<= 64 KiB), used
 * without locks, in front of global free lists under one mutex. A thread's
 * cache goes to the global lists when the thread exits. The total cached
 * is capped (min(1 GiB, RAM / 4)); past the cap a freed block goes back
 * to the OS. em_memory_empty_cache frees the global lists and the calling
 * thread's cache (other threads' small caches stay, at most ~4 MiB each).
 * Blocks come from aligned_alloc(64, class size). The free-list link is
 * stored in the first bytes of the free block.
 * The same per-thread cache keeps up to HDR_DEPTH freed tensor, storage
 * and version headers, so that a tensor's creation and release make no
 * malloc call in a steady state. A header freed on another thread than
 * the one that made it simply joins that thread's list. Under
 * AddressSanitizer the header lists are bypassed (every header is a
 * malloc/free of its own), so that a use of a released tensor, storage
 * or version header is reported instead of reading a recycled one. */

#define SMALL_CLASSES 15           /* 64 B .. 1 MiB */
#define LOG2_BIG_MAX 48            /* largest class: 2^48 bytes */
#define NUM_CLASSES (SMALL_CLASSES + (LOG2_BIG_MAX - 20) * 4)
#define TLC_MAX_CLASS 10           /* 64 KiB */
/* Depths are sized for Lua's collector, which frees tensors in batches of
 * thousands: a shallow cache overflows to malloc on every batch. The block
 * cache keeps about 256 KiB per small class (4096 blocks of 64 B down to 8
 * of 64 KiB). */
#define TLC_DEPTH(c) ((4096 >> (c)) > 8 ? (4096 >> (c)) : 8)
#if defined(__SANITIZE_ADDRESS__)
#define HDR_DEPTH 0 /* no header cache: ASan sees every header's lifetime */
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define HDR_DEPTH 0
#endif
#endif
#ifndef HDR_DEPTH
/* about 2 MiB of headers per thread at most (a tensor header is <= 184
 * bytes, Note [Inline shapes]): the collector's batches grew when the
 * headers shrank, since its pressure counts header bytes */
#define HDR_DEPTH 8192
#endif

typedef struct block { struct block *next; } block;

/* ---- statistics and hooks ---- */

static atomic_size_t st_allocated, st_cached, st_peak;
static atomic_uint_least64_t st_allocs, st_hits;
static atomic_long fail_countdown;
static atomic_size_t mem_limit; /* 0: none (em_memory_set_limit) */
static _Thread_local size_t thread_allocated;

bool em_core_should_fail(void)
{
    if (atomic_load_explicit(&fail_countdown, memory_order_relaxed) <= 0) return false;
    /* exactly one caller sees the count go 1 -> 0 */
    return atomic_fetch_sub(&fail_countdown, 1) == 1;
}

void em_memory_fail_after(long n)
{
    atomic_store(&fail_countdown, n > 0 ? n : 0);
}

long em_memory_fail_remaining(void) { return atomic_load(&fail_countdown); }

bool em_memory_test_fail(void) { return em_core_should_fail(); }

void em_memory_set_limit(size_t bytes) { atomic_store(&mem_limit, bytes); }

size_t em_memory_get_limit(void) { return atomic_load(&mem_limit); }

size_t em_memory_take_thread_allocated(void)
{
    size_t n = thread_allocated;
    thread_allocated = 0;
    return n;
}

void em_memory_get_stats(em_memory_stats *out)
{
    out->allocated = atomic_load(&st_allocated);
    out->cached = atomic_load(&st_cached);
    out->peak = atomic_load(&st_peak);
    out->n_allocs = atomic_load(&st_allocs);
    out->n_cache_hits = atomic_load(&st_hits);
}

static void note_alloc(size_t nbytes, bool hit)
{
    size_t now = atomic_fetch_add_explicit(&st_allocated, nbytes, memory_order_relaxed) + nbytes;
    size_t peak = atomic_load_explicit(&st_peak, memory_order_relaxed);
    while (now > peak &&
           !atomic_compare_exchange_weak_explicit(&st_peak, &peak, now, memory_order_relaxed,
                                                  memory_order_relaxed))
        ;
    atomic_fetch_add_explicit(&st_allocs, 1, memory_order_relaxed);
    if (hit) atomic_fetch_add_explicit(&st_hits, 1, memory_order_relaxed);
    thread_allocated += nbytes;
}

void em_core_note_inline(size_t nbytes, bool made)
{
    if (!made) {
        atomic_fetch_sub_explicit(&st_allocated, nbytes, memory_order_relaxed);
        return;
    }
    size_t now = atomic_fetch_add_explicit(&st_allocated, nbytes, memory_order_relaxed) + nbytes;
    size_t peak = atomic_load_explicit(&st_peak, memory_order_relaxed);
    while (now > peak &&
           !atomic_compare_exchange_weak_explicit(&st_peak, &peak, now, memory_order_relaxed,
                                                  memory_order_relaxed))
        ;
}

/* ---- size classes ---- */

static int log2_ceil(size_t n) /* n >= 2 */
{
    return 64 - __builtin_clzll((unsigned long long)(n - 1));
}

/* Class index of a request (nbytes >= 1), or -1 when it is too large. */
static int size_class(size_t n)
{
    if (n <= 64) return 0;
    if (n <= ((size_t)1 << 20)) return log2_ceil(n) - 6;
    if (n > ((size_t)1 << LOG2_BIG_MAX)) return -1;
    int k = log2_ceil(n) - 1;                  /* 2^k < n <= 2^(k+1) */
    size_t quarter = (size_t)1 << (k - 2);
    int j = (int)((n - ((size_t)1 << k) + quarter - 1) / quarter) - 1; /* 0..3 */
    return SMALL_CLASSES + (k - 20) * 4 + j;
}

static size_t class_bytes(int c)
{
    if (c < SMALL_CLASSES) return (size_t)64 << c;
    int k = 20 + (c - SMALL_CLASSES) / 4, j = (c - SMALL_CLASSES) % 4;
    return ((size_t)1 << k) + (size_t)(j + 1) * ((size_t)1 << (k - 2));
}

/* ---- the global free lists ---- */

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static block *free_lists[NUM_CLASSES];
static size_t cache_cap;
static pthread_once_t init_once = PTHREAD_ONCE_INIT;
static pthread_key_t tlc_key;

/* ---- the per-thread cache ---- */

typedef struct {
    block *head[TLC_MAX_CLASS + 1];
    int count[TLC_MAX_CLASS + 1];
    block *hdr_head[EM_HDR_KINDS];
    int hdr_count[EM_HDR_KINDS];
    bool registered;
} thread_cache;
static _Thread_local thread_cache tlc;

/* Moves a thread cache's blocks to the global lists. */
static void flush_thread_cache(thread_cache *tc)
{
    pthread_mutex_lock(&lock);
    for (int c = 0; c <= TLC_MAX_CLASS; c++) {
        while (tc->head[c]) {
            block *b = tc->head[c];
            tc->head[c] = b->next;
            b->next = free_lists[c];
            free_lists[c] = b;
        }
        tc->count[c] = 0;
    }
    pthread_mutex_unlock(&lock);
}

static void free_headers(thread_cache *tc)
{
    for (int k = 0; k < EM_HDR_KINDS; k++) {
        while (tc->hdr_head[k]) {
            block *b = tc->hdr_head[k];
            tc->hdr_head[k] = b->next;
            free(b);
        }
        tc->hdr_count[k] = 0;
    }
}

/* The pthread key destructor. Releases after it (other destructors) re-register. */
static void thread_exit(void *arg)
{
    thread_cache *tc = arg;
    em_core_wrapped_cache_drop(); /* first: its headers join the lists below */
    flush_thread_cache(tc);
    free_headers(tc);
    tc->registered = false;
}

static void init_allocator(void)
{
    long pages = sysconf(_SC_PHYS_PAGES), psize = sysconf(_SC_PAGESIZE);
    size_t cap = (size_t)1 << 30;
    if (pages > 0 && psize > 0) {
        size_t quarter = (size_t)pages * (size_t)psize / 4;
        if (quarter < cap) cap = quarter;
    }
    cache_cap = cap;
    pthread_key_create(&tlc_key, thread_exit);
}

static void register_thread(void)
{
    pthread_once(&init_once, init_allocator);
    pthread_setspecific(tlc_key, &tlc);
    tlc.registered = true;
}

void em_core_note_thread(void)
{
    if (!tlc.registered) register_thread();
}

/* ---- headers ---- */

static const size_t hdr_size[EM_HDR_KINDS] = {
    [EM_HDR_TENSOR] = sizeof(em_tensor),
    [EM_HDR_STORAGE] = sizeof(em_storage),
    [EM_HDR_VERSION] = sizeof(em_version),
};

void *em_core_hdr_alloc(int kind)
{
    if (em_core_should_fail()) return NULL;
    thread_allocated += hdr_size[kind]; /* the collector's pressure counts headers too */
    block *b = tlc.hdr_head[kind];
    if (b) {
        tlc.hdr_head[kind] = b->next;
        tlc.hdr_count[kind]--;
        return b;
    }
    return malloc(hdr_size[kind]);
}

void em_core_hdr_free(int kind, void *p)
{
    if (tlc.hdr_count[kind] >= HDR_DEPTH) {
        free(p);
        return;
    }
    if (!tlc.registered) register_thread();
    block *b = p;
    b->next = tlc.hdr_head[kind];
    tlc.hdr_head[kind] = b;
    tlc.hdr_count[kind]++;
}

/* ---- alloc and free ---- */

static void *cpu_alloc(const em_allocator *self, size_t nbytes)
{
    (void)self;
    if (nbytes == 0) nbytes = 1;
    if (em_core_should_fail()) return NULL;
    size_t lim = atomic_load_explicit(&mem_limit, memory_order_relaxed);
    if (lim && (nbytes > lim || atomic_load_explicit(&st_allocated, memory_order_relaxed) > lim - nbytes)) return NULL;
    int c = size_class(nbytes);
    if (c < 0) return NULL;
    size_t cb = class_bytes(c);
    block *b = NULL;
    if (c <= TLC_MAX_CLASS && tlc.head[c]) {
        b = tlc.head[c];
        tlc.head[c] = b->next;
        tlc.count[c]--;
    } else {
        pthread_once(&init_once, init_allocator);
        pthread_mutex_lock(&lock);
        b = free_lists[c];
        if (b) free_lists[c] = b->next;
        pthread_mutex_unlock(&lock);
    }
    if (b) {
        atomic_fetch_sub_explicit(&st_cached, cb, memory_order_relaxed);
        note_alloc(nbytes, true);
        return b;
    }
    void *p = aligned_alloc(64, cb);
    if (!p) {
        /* memory may be tied up in the cache: give it back and retry once */
        em_memory_empty_cache();
        p = aligned_alloc(64, cb);
        if (!p) return NULL;
    }
    note_alloc(nbytes, false);
    return p;
}

static void cpu_free(const em_allocator *self, void *ptr, size_t nbytes)
{
    (void)self;
    if (!ptr) return;
    if (nbytes == 0) nbytes = 1;
    int c = size_class(nbytes);
    size_t cb = class_bytes(c);
    block *b = ptr;
    atomic_fetch_sub_explicit(&st_allocated, nbytes, memory_order_relaxed);
    if (c <= TLC_MAX_CLASS && tlc.count[c] < TLC_DEPTH(c)) {
        if (!tlc.registered) register_thread();
        b->next = tlc.head[c];
        tlc.head[c] = b;
        tlc.count[c]++;
        atomic_fetch_add_explicit(&st_cached, cb, memory_order_relaxed);
        return;
    }
    pthread_once(&init_once, init_allocator);
    if (atomic_load_explicit(&st_cached, memory_order_relaxed) + cb > cache_cap) {
        free(ptr);
        return;
    }
    atomic_fetch_add_explicit(&st_cached, cb, memory_order_relaxed);
    pthread_mutex_lock(&lock);
    b->next = free_lists[c];
    free_lists[c] = b;
    pthread_mutex_unlock(&lock);
}

void em_memory_empty_cache(void)
{
    em_core_wrapped_cache_drop();
    if (tlc.registered) flush_thread_cache(&tlc);
    free_headers(&tlc);
    block *lists[NUM_CLASSES];
    pthread_mutex_lock(&lock);
    for (int c = 0; c < NUM_CLASSES; c++) {
        lists[c] = free_lists[c];
        free_lists[c] = NULL;
    }
    pthread_mutex_unlock(&lock);
    for (int c = 0; c < NUM_CLASSES; c++) {
        size_t cb = class_bytes(c);
        while (lists[c]) {
            block *b = lists[c];
            lists[c] = b->next;
            free(b);
            atomic_fetch_sub_explicit(&st_cached, cb, memory_order_relaxed);
        }
    }
}

static const em_allocator cpu_allocator = { cpu_alloc, cpu_free, "cpu caching allocator" };

const em_allocator *em_cpu_allocator(void) { return &cpu_allocator; }
