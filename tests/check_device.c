/* check_device.c -- Check suite for devices: names and parsing, the
 * device-type <-> key table, the allocator registry, generators and the
 * thread count of core's runtime context, and a fake device backend
 * registered from here (not from runtime/) that runs factories, a binary
 * op, a reduction, printing and backward.
 *
 * The fake backend ("privateuseone", PyTorch's name for the out-of-tree
 * slot) keeps its memory in mmap'd pages that are PROT_NONE except while
 * one of its own kernels runs: any read or write of fake memory from
 * anywhere else (a CPU kernel, the Lua layer's printing, item, tolist)
 * faults, and Check (CK_FORK) reports the test as failed. So these tests
 * prove that every access goes through the backend's kernels.
 */
#include <check.h>
#include <lauxlib.h>
#include <lualib.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include "autograd/em_autograd.h"
#include "autograd/em_formulas.h"
#include "em_ops.h"
#include "kernels/cpu/em_cpu.h"
#include "lua/em_lua.h"

/* ---- the fake allocator: protected pages, counted ---- */

#define FAKE_MAX_BLOCKS 256
static struct {
    pthread_mutex_t mu; /* recursive: guards everything below */
    struct { void *p; size_t len; } blocks[FAKE_MAX_BLOCKS];
    int nblocks;
    int depth;          /* > 0 while a fake kernel runs: pages are readable */
    long allocs, frees, kernel_calls;
    bool fail_next;     /* the next allocation returns NULL (out of memory) */
} fake;

static size_t page_round(size_t n) {
    size_t ps = (size_t)sysconf(_SC_PAGESIZE);
    return (n + ps - 1) / ps * ps;
}

/* Called with fake.mu held. */
static void protect_all(int prot) {
    for (int i = 0; i < fake.nblocks; i++)
        ck_assert_int_eq(mprotect(fake.blocks[i].p, fake.blocks[i].len, prot), 0);
}

/* A fake kernel's memory window: pages are readable and writable between
 * enter and leave (nesting allowed). */
static void fake_enter(void) {
    pthread_mutex_lock(&fake.mu);
    fake.kernel_calls++;
    if (fake.depth++ == 0) protect_all(PROT_READ | PROT_WRITE);
}

static void fake_leave(void) {
    if (--fake.depth == 0) protect_all(PROT_NONE);
    pthread_mutex_unlock(&fake.mu);
}

static void *fake_alloc(const em_allocator *self, size_t nbytes) {
    (void)self;
    size_t len = page_round(nbytes ? nbytes : 1);
    pthread_mutex_lock(&fake.mu);
    void *p = NULL;
    if (fake.fail_next) {
        fake.fail_next = false;
    } else if (fake.nblocks < FAKE_MAX_BLOCKS) {
        p = mmap(NULL, len, fake.depth > 0 ? PROT_READ | PROT_WRITE : PROT_NONE,
                 MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (p == MAP_FAILED) p = NULL;
    }
    if (p) {
        fake.blocks[fake.nblocks].p = p;
        fake.blocks[fake.nblocks].len = len;
        fake.nblocks++;
        fake.allocs++;
    }
    pthread_mutex_unlock(&fake.mu);
    return p;
}

static void fake_free(const em_allocator *self, void *ptr, size_t nbytes) {
    (void)self, (void)nbytes;
    pthread_mutex_lock(&fake.mu);
    int i = 0;
    while (i < fake.nblocks && fake.blocks[i].p != ptr) i++;
    ck_assert_msg(i < fake.nblocks, "fake_free: %p is not a fake block", ptr);
    munmap(ptr, fake.blocks[i].len);
    fake.blocks[i] = fake.blocks[--fake.nblocks];
    fake.frees++;
    pthread_mutex_unlock(&fake.mu);
}

static const em_allocator fake_allocator = { fake_alloc, fake_free, "fake device allocator" };

/* ---- fake kernels (float32 only; cpu wrapped numbers may join) ---- */

static bool fake_dtype_ok(em_dtype dt, const char *op) {
    if (dt == EM_FLOAT32) return true;
    em_set_error(EM_ETYPE, "%s: the fake device supports float32 only, got %s", op, em_dtype_name(dt));
    return false;
}

static em_tensor *fake_new(em_intlist size, em_dtype dtype, em_device device, const char *op) {
    if (dtype == EM_DTYPE_NONE) dtype = EM_FLOAT32;
    if (!fake_dtype_ok(dtype, op)) return NULL;
    ck_assert_int_eq(device.type, EM_PRIVATEUSE1); /* the entry resolved it */
    ck_assert_int_eq(device.index, 0);
    return em_tensor_new(size.n < 0 ? 0 : size.n, size.data, dtype, device);
}

static em_tensor *fake_filled(em_intlist size, em_dtype dtype, em_device device, double v, const char *op) {
    em_tensor *t = fake_new(size, dtype, device, op);
    if (!t) return NULL;
    fake_enter();
    float *p = em_tensor_data(t);
    for (int64_t i = 0; i < t->numel; i++) p[i] = (float)v;
    fake_leave();
    return t;
}

static em_tensor *fake_empty(em_keyset ks, em_intlist size, em_dtype dtype, em_device device) {
    return fake_new(size, dtype, device, "empty");
}
static em_tensor *fake_zeros(em_keyset ks, em_intlist size, em_dtype dtype, em_device device) {
    return fake_filled(size, dtype, device, 0.0, "zeros");
}
static em_tensor *fake_ones(em_keyset ks, em_intlist size, em_dtype dtype, em_device device) {
    return fake_filled(size, dtype, device, 1.0, "ones");
}
static em_tensor *fake_full(em_keyset ks, em_intlist size, em_scalar v, em_dtype dtype, em_device device) {
    return fake_filled(size, dtype, device, em_scalar_to_double(v), "full");
}

/* The elementwise ops run on the CPU tensor iterator, which allocates the
 * output on the operands' device (the fake one). */
typedef struct { float alpha; } arith_ctx;

static void add_loop(char **d, const int64_t *s, int64_t n, void *ctx) {
    float a = ((arith_ctx *)ctx)->alpha;
    for (int64_t i = 0; i < n; i++)
        *(float *)(d[0] + i * s[0]) = *(float *)(d[1] + i * s[1]) + a * *(float *)(d[2] + i * s[2]);
}

static void mul_loop(char **d, const int64_t *s, int64_t n, void *ctx) {
    (void)ctx;
    for (int64_t i = 0; i < n; i++)
        *(float *)(d[0] + i * s[0]) = *(float *)(d[1] + i * s[1]) * *(float *)(d[2] + i * s[2]);
}

static bool operand_ok(const em_tensor *t, const char *op) {
    if (t->device.type != EM_PRIVATEUSE1 && !(t->device.type == EM_CPU && t->wrapped_number)) {
        char b[EM_DEVICE_STR_MAX];
        em_set_error(EM_EDEVICE, "%s: expected tensors on privateuseone:0, got one on %s", op,
                     em_device_str(t->device, b, sizeof b));
        return false;
    }
    return t->wrapped_number || fake_dtype_ok(t->dtype, op);
}

static em_tensor *fake_binary(em_tensor *a, em_tensor *b, em_cpu_loop loop, float alpha, const char *op) {
    if (!operand_ok(a, op) || !operand_ok(b, op)) return NULL;
    em_tensor *in[2] = { a, b };
    em_cpu_iter it;
    fake_enter();
    em_tensor *out = em_cpu_iter_build(&it, NULL, EM_FLOAT32, 2, in, EM_FLOAT32, op);
    if (out) {
        arith_ctx c = { alpha };
        em_cpu_iter_run(&it, loop, &c, EM_CPU_GRAIN);
    }
    em_cpu_iter_done(&it);
    fake_leave();
    return out;
}

static em_tensor *fake_add(em_keyset ks, em_tensor *self, em_tensor *other, em_scalar alpha) {
    return fake_binary(self, other, add_loop, (float)em_scalar_to_double(alpha), "add");
}
static em_tensor *fake_mul(em_keyset ks, em_tensor *self, em_tensor *other) {
    return fake_binary(self, other, mul_loop, 1.0f, "mul");
}

/* sum over dims (all when absent or empty) with keepdim, in double:
 * enough for forward sums and autograd's reduce_to. */
static em_tensor *fake_sum(em_keyset ks, em_tensor *self, em_intlist dim, bool keepdim, em_dtype dtype) {
    if (!operand_ok(self, "sum")) return NULL;
    bool red[EM_MAX_DIMS] = { false };
    for (int i = 0; i < self->ndim; i++) red[i] = dim.n <= 0;
    for (int i = 0; i < dim.n; i++) {
        int d = em_wrap_dim(dim.data[i], self->ndim, "sum");
        if (d < 0) return NULL;
        red[d] = true;
    }
    int64_t osz[EM_MAX_DIMS], ost[EM_MAX_DIMS]; /* output sizes; strides per input dim */
    int on = 0;
    for (int d = 0; d < self->ndim; d++)
        if (!red[d] || keepdim) osz[on++] = red[d] ? 1 : self->sizes[d];
    em_tensor *out = fake_new((em_intlist){ osz, on }, dtype, self->device, "sum");
    if (!out) return NULL;
    for (int d = self->ndim - 1, o = on - 1, st = 1; d >= 0; d--) {
        if (red[d]) { ost[d] = 0; if (keepdim) o--; continue; }
        ost[d] = st;
        st *= (int)osz[o--];
    }
    fake_enter();
    double *acc = calloc((size_t)(out->numel ? out->numel : 1), sizeof(double));
    int64_t idx[EM_MAX_DIMS] = { 0 };
    const float *base = em_tensor_data(self);
    for (int64_t k = 0; k < self->numel; k++) {
        int64_t off = 0, o = 0;
        for (int d = 0; d < self->ndim; d++) off += idx[d] * self->strides[d], o += idx[d] * ost[d];
        acc[o] += base[off];
        for (int d = self->ndim - 1; d >= 0 && ++idx[d] == self->sizes[d]; d--) idx[d] = 0;
    }
    float *po = em_tensor_data(out);
    for (int64_t i = 0; i < out->numel; i++) po[i] = (float)acc[i];
    free(acc);
    fake_leave();
    return out;
}

/* copy_ in every direction (host -> fake, fake -> host, fake -> fake),
 * broadcasting src, converting dtypes: the iterator over both memories. */
static em_tensor *fake_copy_(em_keyset ks, em_tensor *self, em_tensor *src) {
    em_tensor *in[1] = { src };
    em_cpu_iter it;
    fake_enter();
    em_tensor *out = em_cpu_iter_build(&it, self, self->dtype, 1, in, EM_DTYPE_NONE, "copy_");
    if (out) em_cpu_iter_run(&it, em_cpu_cast_loop(self->dtype, src->dtype), NULL, EM_CPU_GRAIN);
    em_cpu_iter_done(&it);
    fake_leave();
    if (out) em_tensor_bump_version(self);
    return out;
}

/* fill_: copy_ of the 0-dim value (a cpu number or a fake tensor) */
static em_tensor *fake_fill_(em_keyset ks, em_tensor *self, em_tensor *value) {
    if (value->ndim != 0) {
        em_set_error(EM_EVALUE, "fill_: expected a 0-dim value, got %d dims", value->ndim);
        return NULL;
    }
    return fake_copy_(ks, self, value);
}

/* clone: empty + copy_ (AccumulateGrad clones an expanded gradient). */
static em_tensor *fake_clone(em_keyset ks, em_tensor *self) {
    em_tensor *out = fake_new((em_intlist){ self->sizes, self->ndim }, self->dtype, self->device, "clone");
    if (!out) return NULL;
    em_tensor *r = fake_copy_(ks, out, self);
    em_tensor_release(out);
    return r;
}

static const struct { const char *op; void *fn; } fake_kernels[] = {
    { "empty", (void *)(em_kfn_empty)fake_empty },
    { "zeros", (void *)(em_kfn_zeros)fake_zeros },
    { "ones", (void *)(em_kfn_ones)fake_ones },
    { "full", (void *)(em_kfn_full)fake_full },
    { "add", (void *)(em_kfn_add)fake_add },
    { "mul", (void *)(em_kfn_mul)fake_mul },
    { "sum", (void *)(em_kfn_sum)fake_sum },
    { "copy_", (void *)(em_kfn_copy_)fake_copy_ },
    { "fill_", (void *)(em_kfn_fill_)fake_fill_ },
    { "clone", (void *)(em_kfn_clone)fake_clone },
};
#define N_FAKE_KERNELS (sizeof fake_kernels / sizeof fake_kernels[0])

/* What a backend plugin's init does: its allocator and its kernels. */
static void fake_register(void) {
    pthread_mutexattr_t a;
    pthread_mutexattr_init(&a);
    pthread_mutexattr_settype(&a, PTHREAD_MUTEX_RECURSIVE);
    pthread_mutex_init(&fake.mu, &a);
    ck_assert_int_eq(em_register_allocator(EM_PRIVATEUSE1, &fake_allocator), EM_OK);
    for (size_t i = 0; i < N_FAKE_KERNELS; i++)
        ck_assert_int_eq(em_disp_register_kernel(em_disp_find_op(fake_kernels[i].op),
                                                 EM_KEY_PRIVATEUSE1, fake_kernels[i].fn), EM_OK);
}

static void fake_unregister(void) {
    for (size_t i = 0; i < N_FAKE_KERNELS; i++)
        em_disp_deregister_kernel(em_disp_find_op(fake_kernels[i].op), EM_KEY_PRIVATEUSE1);
    em_register_allocator(EM_PRIVATEUSE1, NULL);
    ck_assert_int_eq(fake.nblocks, 0); /* every fake block was freed */
    ck_assert_int_eq(fake.allocs, fake.frees);
}

static const em_device FAKE = { EM_PRIVATEUSE1, -1 }; /* "privateuseone": index 0 once resolved */

/* The values of a tensor on any device, through to_device (the only way
 * the host may read fake memory). */
static void assert_values(em_tensor *t, const float *want, int64_t n) {
    em_tensor *h = em_to_device(t, em_cpu_device());
    ck_assert_ptr_nonnull(h);
    ck_assert_int_eq(h->device.type, EM_CPU);
    ck_assert_int_eq(h->numel, n);
    em_tensor *c = em_contiguous(h);
    for (int64_t i = 0; i < n; i++) ck_assert_float_eq(((float *)em_tensor_data(c))[i], want[i]);
    em_tensor_release(c);
    em_tensor_release(h);
}

#define IL(...) ((em_intlist){ (const int64_t[]){ __VA_ARGS__ }, sizeof((int64_t[]){ __VA_ARGS__ }) / sizeof(int64_t) })

/* ---- devices: names, parsing, the key table ---- */

START_TEST(test_device_parse) {
    em_device d;
    char b[EM_DEVICE_STR_MAX];
    ck_assert_int_eq(em_device_parse("cuda:1", &d, "t"), EM_OK);
    ck_assert_int_eq(d.type, EM_CUDA);
    ck_assert_int_eq(d.index, 1);
    ck_assert_str_eq(em_device_str(d, b, sizeof b), "cuda:1");
    ck_assert_int_eq(em_device_parse("cuda", &d, "t"), EM_OK);
    ck_assert_int_eq(d.index, -1);
    ck_assert_str_eq(em_device_str(d, b, sizeof b), "cuda");
    ck_assert_int_eq(em_device_parse("cpu", &d, "t"), EM_OK);
    ck_assert(em_device_eq(d, em_cpu_device()));
    ck_assert_str_eq(em_device_str(d, b, sizeof b), "cpu");
    ck_assert_int_eq(em_device_parse("privateuseone:0", &d, "t"), EM_OK);
    ck_assert_int_eq(d.type, EM_PRIVATEUSE1);
    static const char *const bad[] = { "", "gpu", "cuda:", "cuda:-1", "cuda:01", "cuda:1x",
                                       "cuda:128", "CPU", "cpu:0:1", ":0" };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        ck_assert_msg(em_device_parse(bad[i], &d, "to") == EM_EVALUE, "accepted '%s'", bad[i]);
        ck_assert_msg(strncmp(em_error_message(), "to: ", 4) == 0, "%s", em_error_message());
        em_clear_error();
    }
}
END_TEST

START_TEST(test_device_key_table) {
    for (int t = 0; t < EM_DEVICE_COUNT; t++) {
        em_device d = { (int8_t)t, 0 };
        ck_assert_int_eq(em_key_device_type(em_backend_key(d)), t);
    }
    ck_assert_int_eq(em_backend_key(em_cpu_device()), EM_KEY_CPU);
    ck_assert_int_eq(em_backend_key((em_device){ EM_PRIVATEUSE1, 0 }), EM_KEY_PRIVATEUSE1);
    ck_assert_int_eq(em_key_device_type(EM_KEY_AUTOGRAD), EM_DEVICE_NONE);
    ck_assert_str_eq(em_device_name((em_device){ EM_PRIVATEUSE1, 0 }), "privateuseone");
}
END_TEST

START_TEST(test_device_unavailable) {
    /* no backend registered: factories refuse the device by name */
    ck_assert_ptr_null(em_zeros(IL(2), EM_DTYPE_NONE, (em_device){ EM_CUDA, -1 }));
    ck_assert_int_eq(em_error_kind(), EM_EDEVICE);
    ck_assert_str_eq(em_error_message(), "zeros: device cuda:0 is not available: no backend registered");
    ck_assert_ptr_null(em_rand(IL(2), NULL, EM_DTYPE_NONE, (em_device){ EM_PRIVATEUSE1, 3 }));
    ck_assert_str_eq(em_error_message(),
                     "rand: device privateuseone:3 is not available: no backend registered");
    ck_assert_ptr_null(em_storage_new(16, (em_device){ EM_CUDA, 0 }));
    ck_assert_int_eq(em_error_kind(), EM_EDEVICE);
    em_clear_error();
    /* cpu ones land on the cpu, with no index */
    em_tensor *t = em_ones(IL(2), EM_DTYPE_NONE, (em_device){ EM_CPU, 0 });
    ck_assert_ptr_nonnull(t);
    ck_assert(em_device_eq(t->device, em_cpu_device()));
    em_tensor_release(t);
}
END_TEST

/* ---- the allocator registry ---- */

START_TEST(test_device_allocator_registry) {
    ck_assert_ptr_eq(em_get_allocator(EM_CPU), em_cpu_allocator());
    ck_assert_ptr_null(em_get_allocator(EM_PRIVATEUSE1));
    ck_assert_ptr_null(em_get_allocator((em_device_type)7));
    ck_assert_int_eq(em_register_allocator((em_device_type)7, &fake_allocator), EM_EVALUE);
    em_clear_error();
    static const em_allocator broken = { NULL, fake_free, "broken" };
    ck_assert_int_eq(em_register_allocator(EM_PRIVATEUSE1, &broken), EM_EVALUE);
    em_clear_error();
    fake_register();
    ck_assert_ptr_eq(em_get_allocator(EM_PRIVATEUSE1), &fake_allocator);
    em_storage *s = em_storage_new(100, (em_device){ EM_PRIVATEUSE1, 0 });
    ck_assert_ptr_nonnull(s);
    ck_assert_ptr_eq(s->allocator, &fake_allocator);
    ck_assert_int_eq(fake.nblocks, 1);
    ck_assert_int_eq((uintptr_t)s->data % 64, 0);
    em_storage_release(s);
    ck_assert_int_eq(fake.nblocks, 0);
    /* the cpu cannot be unregistered: it falls back to the caching allocator */
    ck_assert_int_eq(em_register_allocator(EM_CPU, NULL), EM_OK);
    ck_assert_ptr_eq(em_get_allocator(EM_CPU), em_cpu_allocator());
    /* cpu storage still comes from the caching allocator */
    em_storage *c = em_storage_new(100, em_cpu_device());
    ck_assert_ptr_eq(c->allocator, em_cpu_allocator());
    em_storage_release(c);
    fake_unregister();
}
END_TEST

/* ---- the runtime context ---- */

START_TEST(test_device_generators) {
    em_generator *g = em_generator_new(), *h = em_generator_new();
    ck_assert_uint_eq(em_generator_initial_seed(g), 67280421310721ULL);
    em_generator_manual_seed(g, 7);
    em_generator_manual_seed(h, 7);
    ck_assert_uint_eq(em_generator_initial_seed(g), 7);
    em_tensor *a = em_rand(IL(64), g, EM_DTYPE_NONE, em_no_device());
    em_tensor *d = em_rand(IL(64), NULL, EM_DTYPE_NONE, em_no_device()); /* the default: untouched g/h */
    em_tensor *b = em_rand(IL(64), h, EM_DTYPE_NONE, em_no_device());
    ck_assert_mem_eq(em_tensor_data(a), em_tensor_data(b), 64 * sizeof(float));
    ck_assert(memcmp(em_tensor_data(a), em_tensor_data(d), 64 * sizeof(float)) != 0);
    em_tensor *a2 = em_rand(IL(64), g, EM_DTYPE_NONE, em_no_device()); /* g moved on */
    ck_assert(memcmp(em_tensor_data(a), em_tensor_data(a2), 64 * sizeof(float)) != 0);
    uint64_t s = em_generator_seed(g);
    ck_assert_uint_eq(em_generator_initial_seed(g), s);
    /* the default generator is core's: manual_seed fixes rand and randn */
    em_manual_seed(11);
    ck_assert_uint_eq(em_generator_initial_seed(em_default_generator()), 11);
    em_tensor *n1 = em_randn(IL(9), NULL, EM_FLOAT64, em_no_device());
    em_manual_seed(11);
    em_tensor *n2 = em_randn(IL(9), em_default_generator(), EM_FLOAT64, em_no_device());
    ck_assert_mem_eq(em_tensor_data(n1), em_tensor_data(n2), 9 * sizeof(double));
    em_tensor *all[] = { a, b, d, a2, n1, n2 };
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) em_tensor_release(all[i]);
    em_generator_release(g);
    em_generator_release(h);
    em_generator_release(em_default_generator()); /* never freed */
    ck_assert_uint_eq(em_generator_initial_seed(em_default_generator()), 11);
    /* out of memory is an error, not a crash */
    em_memory_fail_after(1);
    ck_assert_ptr_null(em_generator_new());
    ck_assert_int_eq(em_error_kind(), EM_ENOMEM);
    em_clear_error();
}
END_TEST

static int hook_seen;
static void threads_hook(int n) { hook_seen = n; }

START_TEST(test_device_num_threads) {
    ck_assert_int_ge(em_get_num_threads(), 1);
    ck_assert_int_eq(em_context_on_num_threads(threads_hook), EM_OK);
    em_set_num_threads(3);
    ck_assert_int_eq(em_get_num_threads(), 3);
    ck_assert_int_eq(hook_seen, 3);
    em_set_num_threads(0); /* clamped */
    ck_assert_int_eq(em_get_num_threads(), 1);
    ck_assert_int_eq(hook_seen, 1);
    /* the CPU pool follows: a parallel sum gives the same bits on 1 and 2 threads */
    em_tensor *x = em_full(IL(200000), em_scalar_float(0.1), EM_DTYPE_NONE, em_no_device());
    em_tensor *s1 = em_sum(x, (em_intlist){ NULL, -1 }, false, EM_DTYPE_NONE);
    em_set_num_threads(2);
    em_tensor *s2 = em_sum(x, (em_intlist){ NULL, -1 }, false, EM_DTYPE_NONE);
    ck_assert_mem_eq(em_tensor_data(s1), em_tensor_data(s2), sizeof(float));
    em_tensor_release(x);
    em_tensor_release(s1);
    em_tensor_release(s2);
}
END_TEST

/* ---- the fake backend ---- */

START_TEST(test_device_fake_factories) {
    fake_register();
    em_tensor *z = em_zeros(IL(2, 3), EM_DTYPE_NONE, FAKE);
    ck_assert_ptr_nonnull(z);
    ck_assert_int_eq(z->device.type, EM_PRIVATEUSE1);
    ck_assert_int_eq(z->device.index, 0);
    ck_assert(z->keyset & EM_KS(EM_KEY_PRIVATEUSE1));
    ck_assert_ptr_eq(z->storage->allocator, &fake_allocator);
    em_tensor *o = em_ones(IL(3), EM_DTYPE_NONE, FAKE);
    em_tensor *f = em_full(IL(2), em_scalar_float(2.5), EM_DTYPE_NONE, FAKE);
    em_tensor *e = em_empty(IL(4), EM_DTYPE_NONE, FAKE);
    ck_assert_ptr_nonnull(e);
    ck_assert_int_eq(fake.nblocks, 4);
    assert_values(z, (const float[]){ 0, 0, 0, 0, 0, 0 }, 6);
    assert_values(o, (const float[]){ 1, 1, 1 }, 3);
    assert_values(f, (const float[]){ 2.5f, 2.5f }, 2);
    /* a factory the backend lacks: a clean dispatch error */
    ck_assert_ptr_null(em_arange(em_scalar_int(3), NULL, em_scalar_int(1), EM_DTYPE_NONE, FAKE));
    ck_assert_msg(strstr(em_error_message(), "no kernel for the arguments' device") != NULL, "%s",
                  em_error_message());
    em_clear_error();
    /* the device's allocator failing: an error naming the device */
    fake.fail_next = true;
    ck_assert_ptr_null(em_ones(IL(2), EM_DTYPE_NONE, FAKE));
    ck_assert_int_eq(em_error_kind(), EM_ENOMEM);
    ck_assert_str_eq(em_error_message(), "out of memory allocating 8 bytes on privateuseone:0");
    em_clear_error();
    /* a dtype the backend refuses: its own error */
    ck_assert_ptr_null(em_zeros(IL(2), EM_FLOAT64, FAKE));
    ck_assert_int_eq(em_error_kind(), EM_ETYPE);
    em_clear_error();
    em_tensor *all[] = { z, o, f, e };
    for (size_t i = 0; i < 4; i++) em_tensor_release(all[i]);
    fake_unregister();
}
END_TEST

static void on_fault(int sig) {
    (void)sig;
    _exit(42);
}

/* The guard the other fake tests rely on: touching fake memory outside a
 * fake kernel faults (checked in a child process). */
START_TEST(test_device_fake_memory_is_guarded) {
    fake_register();
    em_tensor *z = em_zeros(IL(4), EM_DTYPE_NONE, FAKE);
    ck_assert_ptr_nonnull(z);
    fflush(NULL);
    pid_t pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0) {
        /* our handler, not a sanitizer's report: the fault is expected */
        struct sigaction sa;
        memset(&sa, 0, sizeof sa);
        sa.sa_handler = on_fault;
        sigaction(SIGSEGV, &sa, NULL);
        sigaction(SIGBUS, &sa, NULL);
        volatile float v = ((volatile float *)em_tensor_data(z))[0];
        (void)v;
        _exit(0); /* not reached when the guard works */
    }
    int status = 0;
    ck_assert_int_eq(waitpid(pid, &status, 0), pid);
    ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 42, "host read of fake memory did not fault");
    /* inside a kernel window it is readable */
    fake_enter();
    ck_assert_float_eq(((float *)em_tensor_data(z))[3], 0.0f);
    fake_leave();
    em_tensor_release(z);
    fake_unregister();
}
END_TEST

START_TEST(test_device_fake_moves) {
    fake_register();
    em_tensor *h = em_arange(em_scalar_int(6), NULL, em_scalar_int(1), EM_FLOAT32, em_no_device());
    em_tensor *h2 = em_view(h, IL(2, 3));
    em_tensor *d = em_to_device(h2, FAKE); /* host -> fake: the fake copy_ */
    ck_assert_ptr_nonnull(d);
    ck_assert_int_eq(d->device.type, EM_PRIVATEUSE1);
    ck_assert_int_eq(d->ndim, 2);
    long calls = fake.kernel_calls;
    assert_values(d, (const float[]){ 0, 1, 2, 3, 4, 5 }, 6); /* fake -> host */
    ck_assert_int_gt(fake.kernel_calls, calls);
    /* a strided fake view (a Default-key view kernel) moves back correctly */
    em_tensor *t = em_transpose(d, 0, 1);
    assert_values(t, (const float[]){ 0, 3, 1, 4, 2, 5 }, 6);
    /* a reshape that must copy: done by the device, or refused; never a
     * host access (the guard would fault) */
    em_tensor *rs = em_reshape(t, IL(6));
    if (rs) assert_values(rs, (const float[]){ 0, 3, 1, 4, 2, 5 }, 6);
    else ck_assert_int_ne(em_error_kind(), EM_OK);
    em_clear_error();
    em_tensor_release(rs);
    /* same device: the tensor itself */
    em_tensor *same = em_to_device(d, (em_device){ EM_PRIVATEUSE1, 0 });
    ck_assert_ptr_eq(same, d);
    /* a device without a backend */
    ck_assert_ptr_null(em_to_device(d, (em_device){ EM_CUDA, 1 }));
    ck_assert_str_eq(em_error_message(), "to_device: device cuda:1 is not available: no backend registered");
    em_clear_error();
    /* an op the backend lacks: a dispatch error, no touching of fake memory */
    ck_assert_ptr_null(em_exp(d));
    ck_assert_msg(strstr(em_error_message(), "no kernel for the arguments' device") != NULL, "%s",
                  em_error_message());
    em_clear_error();
    /* a cpu tensor (not a wrapped number) mixed in: the backend refuses it */
    ck_assert_ptr_null(em_add(d, h2, em_scalar_int(1)));
    ck_assert_int_eq(em_error_kind(), EM_EDEVICE);
    em_clear_error();
    em_tensor *all[] = { h, h2, d, t, same };
    for (size_t i = 0; i < 5; i++) em_tensor_release(all[i]);
    fake_unregister();
}
END_TEST

START_TEST(test_device_fake_ops_and_backward) {
    em_autograd_init();
    fake_register();
    em_tensor *x = em_full(IL(2, 3), em_scalar_float(1.5), EM_DTYPE_NONE, FAKE);
    em_tensor *y = em_ones(IL(3), EM_DTYPE_NONE, FAKE);
    ck_assert_int_eq(em_set_requires_grad(x, true), EM_OK);
    ck_assert_int_eq(em_set_requires_grad(y, true), EM_OK);
    long before = fake.allocs;
    /* binary op with broadcasting: the iterator allocates on the fake device */
    em_tensor *s = em_add(x, y, em_scalar_float(2.0));
    ck_assert_ptr_nonnull(s);
    ck_assert_int_eq(s->device.type, EM_PRIVATEUSE1);
    ck_assert_ptr_eq(s->storage->allocator, &fake_allocator);
    ck_assert_int_gt(fake.allocs, before);
    assert_values(s, (const float[]){ 3.5f, 3.5f, 3.5f, 3.5f, 3.5f, 3.5f }, 6);
    /* with a number (a cpu wrapped number joins fake tensors) */
    em_tensor *k = em_ag_scalar(3.0);
    em_tensor *m = em_mul(s, k);
    assert_values(m, (const float[]){ 10.5f, 10.5f, 10.5f, 10.5f, 10.5f, 10.5f }, 6);
    /* reduction */
    em_tensor *r = em_sum(m, (em_intlist){ NULL, -1 }, false, EM_DTYPE_NONE);
    ck_assert_ptr_nonnull(r);
    ck_assert_int_eq(r->ndim, 0);
    assert_values(r, (const float[]){ 63.0f }, 1);
    /* backward: grads on the fake device, from fake kernels only */
    em_tensor *roots[1] = { r };
    ck_assert_msg(em_backward(roots, NULL, 1, NULL, 0, NULL, NULL) == EM_OK, "%s", em_error_message());
    em_tensor *gx = em_grad(x), *gy = em_grad(y);
    ck_assert_ptr_nonnull(gx);
    ck_assert_ptr_nonnull(gy);
    ck_assert_int_eq(gx->device.type, EM_PRIVATEUSE1);
    ck_assert_int_eq(gy->device.type, EM_PRIVATEUSE1);
    assert_values(gx, (const float[]){ 3, 3, 3, 3, 3, 3 }, 6);  /* d(3*(x+2y))/dx */
    assert_values(gy, (const float[]){ 12, 12, 12 }, 3);        /* 6, summed over 2 rows */
    /* to_device is differentiable: the gradient goes back to the device */
    em_tensor *hx = em_to_device(x, em_cpu_device());
    em_tensor *hs = em_sum(hx, (em_intlist){ NULL, -1 }, false, EM_DTYPE_NONE);
    em_tensor *roots2[1] = { hs };
    ck_assert_int_eq(em_set_grad(x, NULL), EM_OK);
    ck_assert_msg(em_backward(roots2, NULL, 1, NULL, 0, NULL, NULL) == EM_OK, "%s", em_error_message());
    em_tensor *gx2 = em_grad(x);
    ck_assert_int_eq(gx2->device.type, EM_PRIVATEUSE1);
    assert_values(gx2, (const float[]){ 1, 1, 1, 1, 1, 1 }, 6);
    em_tensor *all[] = { x, y, s, k, m, r, gx, gy, hx, hs, gx2 };
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) em_tensor_release(all[i]);
    fake_unregister();
}
END_TEST

/* ---- the fake device from Lua ---- */

/* Runs chunk in a fresh ember state; returns the string it returns (or
 * the error message) in out. */
static int run_lua(const char *chunk, char *out, size_t n) {
    lua_State *L = luaL_newstate();
    luaL_openlibs(L);
    luaL_requiref(L, "ember", luaopen_ember, 1);
    lua_pop(L, 1);
    int st = luaL_loadstring(L, chunk);
    if (st == LUA_OK) st = lua_pcall(L, 0, 1, 0);
    snprintf(out, n, "%s", lua_tostring(L, -1) ? lua_tostring(L, -1) : "(no string)");
    lua_close(L);
    return st;
}

START_TEST(test_device_fake_lua) {
    em_autograd_init();
    fake_register();
    char out[1024];
    int st = run_lua(
        "local x = ember.ones(2, 2, {device = 'privateuseone'})\n"
        "local lines = { tostring(x), tostring(x.device), x.device.type, tostring(x.device.index) }\n"
        "assert(x.device == ember.device('privateuseone:0'))\n"
        "assert(x.device ~= ember.device('cpu'))\n"
        "local w = ember.full({2}, 0.5, {device = ember.device('privateuseone', 0), requires_grad = true})\n"
        "local y = (x + w):sum()\n"
        "lines[#lines + 1] = tostring(y.device) .. ' ' .. tostring(y:item())\n"
        "y:backward()\n"
        "lines[#lines + 1] = tostring(w.grad)\n"
        "local t = w.grad:tolist()\n"
        "lines[#lines + 1] = t[1] .. ',' .. t[2]\n"
        "local c = w:detach():cpu()\n"
        "lines[#lines + 1] = tostring(c.device) .. ' ' .. tostring(c)\n"
        "local back = c:to('privateuseone')\n"
        "lines[#lines + 1] = tostring(back.device)\n"
        "local z = ember.zeros(2, 3, {device = 'privateuseone'})\n"
        "z[1] = 5\n"
        "z[{2, {2, 3}}] = ember.tensor(7.0, {device = 'privateuseone'})\n"
        "z[2][1] = ember.tensor(-1.0)\n"
        "lines[#lines + 1] = z[1][2]:item() .. ',' .. z[2][3]:item() .. ',' .. z[2][1]:item()\n"
        "local e = ember.tensor({1.5, 2}, {device = 'privateuseone'})\n"
        "lines[#lines + 1] = tostring(e)\n"
        "lines[#lines + 1] = tostring((e * 2)[2])\n"
        "local ok, err = pcall(function() return x:exp() end)\n"
        "lines[#lines + 1] = tostring(ok) .. ' ' .. err:gsub('^.-: ', '', 1)\n"
        "ok, err = pcall(ember.zeros, 2, {device = 'cuda:1'})\n"
        "lines[#lines + 1] = err\n"
        "return table.concat(lines, '|')\n",
        out, sizeof out);
    ck_assert_msg(st == LUA_OK, "%s", out);
    const char *want =
        "tensor([[1., 1.],\n        [1., 1.]], device='privateuseone:0')"
        "|privateuseone:0|privateuseone|0"
        "|privateuseone:0 6.0"
        "|tensor([2., 2.], device='privateuseone:0')"
        "|2.0,2.0"
        "|cpu tensor([0.5000, 0.5000])";
    ck_assert_msg(strncmp(out, want, strlen(want)) == 0, "got: %s", out);
    const char *rest = out + strlen(want);
    ck_assert_msg(strstr(rest, "|privateuseone:0|5.0,7.0,-1.0|tensor([1.5000, 2.0000], device='privateuseone:0')"
                               "|tensor(4., device='privateuseone:0')|false ") == rest, "got: %s", rest);
    ck_assert_msg(strstr(rest, "exp: no kernel for the arguments' device (exp has kernels for: CPU)") != NULL,
                  "got: %s", rest);
    ck_assert_msg(strstr(rest, "|zeros: device cuda:1 is not available: no backend registered") != NULL,
                  "got: %s", rest);
    fake_unregister();
}
END_TEST

Suite *make_device_suite(void) {
    Suite *s = suite_create("device");
    TCase *tc = tcase_create("core");
    tcase_add_test(tc, test_device_parse);
    tcase_add_test(tc, test_device_key_table);
    tcase_add_test(tc, test_device_unavailable);
    tcase_add_test(tc, test_device_allocator_registry);
    tcase_add_test(tc, test_device_generators);
    tcase_add_test(tc, test_device_num_threads);
    suite_add_tcase(s, tc);
    TCase *fk = tcase_create("fake");
    tcase_add_test(fk, test_device_fake_memory_is_guarded);
    tcase_add_test(fk, test_device_fake_factories);
    tcase_add_test(fk, test_device_fake_moves);
    tcase_add_test(fk, test_device_fake_ops_and_backward);
    tcase_add_test(fk, test_device_fake_lua);
    tcase_set_timeout(fk, 30);
    suite_add_tcase(s, fk);
    return s;
}
