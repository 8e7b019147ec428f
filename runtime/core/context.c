/* context.c -- devices (names, parsing, the device-type <-> dispatch key
 * table), the allocator registry and the runtime context: generators and
 * the thread count. See Notes [Devices], [Allocator registry] and
 * [Runtime context] in em_core.h. */
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "core/em_core_int.h"

/* ---- devices ---- */

/* The one table of device types: name and backend key, in enum order. */
static const struct {
    const char *name;
    em_dispatch_key key;
} device_types[EM_DEVICE_COUNT] = {
    [EM_CPU] = { "cpu", EM_KEY_CPU },
    [EM_CUDA] = { "cuda", EM_KEY_CUDA },
    [EM_PRIVATEUSE1] = { "privateuseone", EM_KEY_PRIVATEUSE1 },
};
_Static_assert(EM_DEVICE_COUNT == 3, "add the new device type to device_types");

const char *em_device_name(em_device d)
{
    return d.type >= 0 && d.type < EM_DEVICE_COUNT ? device_types[d.type].name : "unknown";
}

char *em_device_str(em_device d, char *buf, size_t n)
{
    if (d.index < 0) snprintf(buf, n, "%s", em_device_name(d));
    else snprintf(buf, n, "%s:%d", em_device_name(d), (int)d.index);
    return buf;
}

em_dispatch_key em_backend_key(em_device d)
{
    return d.type >= 0 && d.type < EM_DEVICE_COUNT ? device_types[d.type].key : EM_KEY_CPU;
}

em_device_type em_key_device_type(em_dispatch_key k)
{
    for (int t = 0; t < EM_DEVICE_COUNT; t++)
        if (device_types[t].key == k) return (em_device_type)t;
    return EM_DEVICE_NONE;
}

/* PyTorch's device string grammar: TYPE or TYPE:INDEX, INDEX a
 * non-negative decimal without sign or leading zeros (torch refuses
 * "cuda:01"), at most 127 here (the index is an int8_t). */
em_status em_device_parse(const char *s, em_device *out, const char *op)
{
    const char *colon = strchr(s, ':');
    size_t tlen = colon ? (size_t)(colon - s) : strlen(s);
    int type = -1;
    for (int t = 0; t < EM_DEVICE_COUNT; t++)
        if (strlen(device_types[t].name) == tlen && strncmp(device_types[t].name, s, tlen) == 0)
            type = t;
    if (type < 0)
        return em_set_error(EM_EVALUE,
                            "%s: expected one of cpu, cuda, privateuseone device type at start of "
                            "device string: %s", op, s);
    int index = -1;
    if (colon) {
        const char *p = colon + 1;
        long v = 0;
        bool ok = *p != 0 && !(p[0] == '0' && p[1] != 0);
        for (; ok && *p; p++) {
            if (*p < '0' || *p > '9') ok = false;
            else if ((v = v * 10 + (*p - '0')) > 127) ok = false;
        }
        if (!ok)
            return em_set_error(EM_EVALUE, "%s: invalid device string '%s' (the index after ':' "
                                           "must be an integer 0..127)", op, s);
        index = (int)v;
    }
    out->type = (int8_t)type;
    out->index = (int8_t)index;
    return EM_OK;
}

bool em_device_resolve(em_device d, em_device *out, const char *op)
{
    if (d.type == EM_DEVICE_NONE) {
        *out = em_cpu_device();
        return true;
    }
    if (d.type < 0 || d.type >= EM_DEVICE_COUNT) {
        em_set_error(EM_EDEVICE, "%s: bad device type %d", op, (int)d.type);
        return false;
    }
    if (!em_get_allocator((em_device_type)d.type)) {
        char b[EM_DEVICE_STR_MAX];
        em_device shown = d;
        if (shown.index < 0 && shown.type != EM_CPU) shown.index = 0;
        em_set_error(EM_EDEVICE, "%s: device %s is not available: no backend registered", op,
                     em_device_str(shown, b, sizeof b));
        return false;
    }
    *out = d;
    if (d.type == EM_CPU) out->index = -1; /* "cpu:0" is the cpu */
    else if (d.index < 0) out->index = 0;
    return true;
}

/* ---- the allocator registry (Note [Allocator registry]) ---- */

static _Atomic(const em_allocator *) allocators[EM_DEVICE_COUNT];

em_status em_register_allocator(em_device_type type, const em_allocator *a)
{
    if ((int)type < 0 || type >= EM_DEVICE_COUNT)
        return em_set_error(EM_EVALUE, "register_allocator: bad device type %d", (int)type);
    if (a && (!a->alloc || !a->free))
        return em_set_error(EM_EVALUE, "register_allocator: allocator '%s' lacks alloc or free",
                            a->name ? a->name : "?");
    atomic_store(&allocators[type], a);
    return EM_OK;
}

const em_allocator *em_get_allocator(em_device_type type)
{
    if ((int)type < 0 || type >= EM_DEVICE_COUNT) return NULL;
    const em_allocator *a = atomic_load_explicit(&allocators[type], memory_order_acquire);
    /* the CPU is always there until someone replaces it */
    if (!a && type == EM_CPU) {
        const em_allocator *expect = NULL;
        atomic_compare_exchange_strong(&allocators[EM_CPU], &expect, em_cpu_allocator());
        a = atomic_load(&allocators[EM_CPU]);
    }
    return a;
}

/* ---- generators (Note [Runtime context]) ---- */

/* torch.Generator's default seed, so that initial_seed() reads the same */
#define DEFAULT_SEED 67280421310721ULL

struct em_generator {
    atomic_long refcount;
    pthread_mutex_t mu;
    uint64_t seed;   /* the Philox key (Note [Random numbers]); initial_seed */
    uint64_t offset; /* 32-bit words handed out since the seed was set */
};

static uint64_t splitmix64(uint64_t *x)
{
    uint64_t z = (*x += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

static void seed_locked(em_generator *g, uint64_t seed)
{
    g->seed = seed;
    g->offset = 0;
}

static void generator_init(em_generator *g)
{
    atomic_init(&g->refcount, 1);
    pthread_mutex_init(&g->mu, NULL);
    seed_locked(g, DEFAULT_SEED);
}

em_generator *em_generator_new(void)
{
    em_generator *g = em_core_should_fail() ? NULL : malloc(sizeof *g);
    if (!g) {
        em_set_error(EM_ENOMEM, "out of memory allocating a generator");
        return NULL;
    }
    generator_init(g);
    return g;
}

static em_generator default_gen;
static pthread_once_t default_once = PTHREAD_ONCE_INIT;
static void default_init(void) { generator_init(&default_gen); }

em_generator *em_default_generator(void)
{
    pthread_once(&default_once, default_init);
    return &default_gen;
}

em_generator *em_generator_retain(em_generator *g)
{
    if (g) atomic_fetch_add_explicit(&g->refcount, 1, memory_order_relaxed);
    return g;
}

void em_generator_release(em_generator *g)
{
    if (!g || g == &default_gen) return;
    if (atomic_fetch_sub_explicit(&g->refcount, 1, memory_order_acq_rel) != 1) return;
    pthread_mutex_destroy(&g->mu);
    free(g);
}

void em_generator_lock(em_generator *g) { pthread_mutex_lock(&g->mu); }
void em_generator_unlock(em_generator *g) { pthread_mutex_unlock(&g->mu); }

/* Offsets stay multiples of 4 (one Philox block); the stream wraps after
 * 2^64 words, far beyond any run. */
static uint64_t reserve_locked(em_generator *g, uint64_t nwords)
{
    uint64_t start = g->offset;
    g->offset += (nwords + 3) & ~(uint64_t)3;
    return start;
}

uint64_t em_generator_reserve(em_generator *g, uint64_t nwords, uint64_t *seed)
{
    em_generator_lock(g);
    *seed = g->seed;
    uint64_t start = reserve_locked(g, nwords);
    em_generator_unlock(g);
    return start;
}

uint64_t em_generator_next_u64(em_generator *g)
{
    uint32_t w[4];
    em_philox_word_block(g->seed, reserve_locked(g, 4) / 4, w);
    return (uint64_t)w[0] | (uint64_t)w[1] << 32;
}

void em_generator_get_state(em_generator *g, uint64_t *seed, uint64_t *offset)
{
    em_generator_lock(g);
    *seed = g->seed;
    *offset = g->offset;
    em_generator_unlock(g);
}

void em_generator_set_state(em_generator *g, uint64_t seed, uint64_t offset)
{
    em_generator_lock(g);
    g->seed = seed;
    g->offset = (offset + 3) & ~(uint64_t)3;
    em_generator_unlock(g);
}

void em_generator_manual_seed(em_generator *g, uint64_t seed)
{
    em_generator_lock(g);
    seed_locked(g, seed);
    em_generator_unlock(g);
}

/* A seed from /dev/urandom, else from the clock and the address space. */
static uint64_t os_seed(void)
{
    uint64_t v = 0;
    int fd = open("/dev/urandom", O_RDONLY | O_CLOEXEC);
    if (fd >= 0) {
        ssize_t n = read(fd, &v, sizeof v);
        close(fd);
        if (n == (ssize_t)sizeof v) return v;
    }
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    uint64_t x = (uint64_t)ts.tv_sec * 1000000007ULL ^ (uint64_t)ts.tv_nsec ^ (uint64_t)(uintptr_t)&v;
    return splitmix64(&x);
}

uint64_t em_generator_seed(em_generator *g)
{
    uint64_t seed = os_seed();
    em_generator_manual_seed(g, seed);
    return seed;
}

uint64_t em_generator_initial_seed(em_generator *g)
{
    em_generator_lock(g);
    uint64_t s = g->seed;
    em_generator_unlock(g);
    return s;
}

void em_manual_seed(uint64_t seed) { em_generator_manual_seed(em_default_generator(), seed); }

/* ---- the thread count ---- */

#define MAX_THREAD_HOOKS 8
static pthread_mutex_t threads_mu = PTHREAD_MUTEX_INITIALIZER;
static int num_threads; /* 0: not set yet, the number of online CPUs */
static void (*thread_hooks[MAX_THREAD_HOOKS])(int);
static int n_thread_hooks;

static int clamp_threads(long n) { return n < 1 ? 1 : n > 256 ? 256 : (int)n; }

int em_get_num_threads(void)
{
    pthread_mutex_lock(&threads_mu);
    if (num_threads == 0) num_threads = clamp_threads(sysconf(_SC_NPROCESSORS_ONLN));
    int n = num_threads;
    pthread_mutex_unlock(&threads_mu);
    return n;
}

void em_set_num_threads(int n)
{
    void (*hooks[MAX_THREAD_HOOKS])(int);
    pthread_mutex_lock(&threads_mu);
    num_threads = clamp_threads(n);
    n = num_threads;
    int nh = n_thread_hooks;
    memcpy(hooks, thread_hooks, sizeof hooks);
    pthread_mutex_unlock(&threads_mu);
    for (int i = 0; i < nh; i++) hooks[i](n); /* outside the lock: a hook may ask the count */
}

em_status em_context_on_num_threads(void (*fn)(int n))
{
    pthread_mutex_lock(&threads_mu);
    if (n_thread_hooks == MAX_THREAD_HOOKS) {
        pthread_mutex_unlock(&threads_mu);
        return em_set_error(EM_EVALUE, "on_num_threads: more than %d hooks", MAX_THREAD_HOOKS);
    }
    thread_hooks[n_thread_hooks++] = fn;
    pthread_mutex_unlock(&threads_mu);
    return EM_OK;
}
