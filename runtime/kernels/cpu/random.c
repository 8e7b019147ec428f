/* random.c -- the CPU kernels of the random ops: rand randn randint randperm
 * bernoulli multinomial normal poisson, the *_like forms and the in-place
 * samplers (uniform_ normal_ exponential_ random_ bernoulli_ geometric_
 * cauchy_ log_normal_).
 *
 * Every value comes from the generator's Philox4x32-10 stream (Note [Random
 * numbers] in core/em_core.h): a kernel reserves its words in one step, then
 * element i reads words start + i*k .. start + i*k + k-1 (k words an element,
 * 1, 2 or 4), so the results depend on (seed, offset, i) alone and the fill
 * runs in parallel with the same values for every thread count. From the
 * words: a float32/float16/bfloat16 uniform is the top 24 bits of one word
 * (u in [0, 1) on a 2^-24 grid), a float64 uniform the top 53 bits of two;
 * normals come in Box-Muller pairs (element 2j and 2j+1 share a pair of
 * uniforms: two words for the narrower dtypes, computed in float, four for
 * float64). The numbers differ from PyTorch's (another generator); their
 * distributions are the same.
 */
#include "kernels/cpu/em_cpu.h"

#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

/* ---- the stream ---- */

typedef struct {
    uint64_t seed;   /* the Philox key */
    uint64_t block0; /* the call's first block (its start offset / 4) */
} rng_t;

/* Reserves nwords words of g's stream (NULL: the default generator). */
static void rng_reserve(rng_t *r, em_generator *g, uint64_t nwords)
{
    if (!g) g = em_default_generator();
    r->block0 = em_generator_reserve(g, nwords, &r->seed) / 4;
}

/* Reads words of one reservation, keeping the last block computed. */
typedef struct {
    const rng_t *r;
    uint64_t blk;  /* block held in w (UINT64_MAX: none) */
    uint32_t w[4];
} cursor;

static inline cursor cursor_of(const rng_t *r) { cursor c = { r, UINT64_MAX, { 0 } }; return c; }

static inline uint32_t word_at(cursor *c, uint64_t w)
{
    uint64_t b = w >> 2;
    if (b != c->blk) {
        c->blk = b;
        em_philox_word_block(c->r->seed, c->r->block0 + b, c->w);
    }
    return c->w[w & 3];
}

static inline uint64_t word64_at(cursor *c, uint64_t w)
{
    return (uint64_t)word_at(c, w) | (uint64_t)word_at(c, w + 1) << 32;
}

/* A uniform in [0, 1) from word w: 53 bits of two words when wide, else
 * 24 bits of one. */
static inline double unif_at(cursor *c, uint64_t w, bool wide)
{
    if (wide) return (double)(word64_at(c, w) >> 11) * 0x1.0p-53;
    return (double)(word_at(c, w) >> 8) * 0x1.0p-24;
}

/* Element i's own sub-stream (for a variable number of draws): block j is
 * philox({lo(b0+i), hi(b0+i), j, 1}); the call reserved 4 words an element. */
typedef struct {
    const rng_t *r;
    uint64_t elem;
    uint32_t j;    /* next block */
    int lane;      /* next uniform in w: 0 or 1 (two 53-bit uniforms a block) */
    uint32_t w[4];
} substream;

static double sub_unif(substream *s)
{
    if (s->lane == 0) {
        uint64_t c = s->r->block0 + s->elem;
        uint32_t ctr[4] = { (uint32_t)c, (uint32_t)(c >> 32), s->j++, 1 };
        uint32_t key[2] = { (uint32_t)s->r->seed, (uint32_t)(s->r->seed >> 32) };
        em_philox4x32_10(ctr, key, s->w);
    }
    uint64_t x = (uint64_t)s->w[2 * s->lane] | (uint64_t)s->w[2 * s->lane + 1] << 32;
    s->lane ^= 1;
    return (double)(x >> 11) * 0x1.0p-53;
}

/* ---- elementwise fills ---- */

typedef enum {
    D_UNIFORM,     /* a + (b - a) u, kept below b */
    D_NORMAL,      /* a + b z */
    D_LOG_NORMAL,  /* exp(a + b z) */
    D_EXPONENTIAL, /* -log(1 - u) / a */
    D_CAUCHY,      /* a + b tan(pi (u - 1/2)) */
    D_GEOMETRIC,   /* ceil(log(1 - u) / log(1 - a)) */
    D_BERNOULLI,   /* u < a (or u < p[i]) */
    D_INTEGER,     /* low + (x mod range), x 32 or 64 bits; range 0: 2^64 */
} dist_kind;

typedef struct {
    rng_t r;
    dist_kind kind;
    em_dtype dt;      /* output dtype */
    char *out;        /* contiguous output */
    bool wide;        /* 53-bit uniforms */
    int k;            /* words an element (a pair for the normals) */
    double a, b;      /* parameters */
    const double *p;  /* D_BERNOULLI: per-element probabilities, or NULL */
    int64_t low;      /* D_INTEGER */
    uint64_t range;   /* D_INTEGER */
} fill_ctx;

static inline void store_double(char *dst, em_dtype dt, double v)
{
    if (dt == EM_FLOAT32) *(float *)dst = (float)v;
    else if (dt == EM_FLOAT64) *(double *)dst = v;
    else em_store_from_double(dst, dt, v);
}

static void fill_range(int64_t begin, int64_t end, void *arg)
{
    const fill_ctx *c = arg;
    cursor cur = cursor_of(&c->r);
    size_t es = em_dtype_size_fast(c->dt);
    int64_t pair = -1;
    double z[2] = { 0, 0 };
    for (int64_t i = begin; i < end; i++) {
        char *dst = c->out + (size_t)i * es;
        uint64_t w = (uint64_t)i * (uint64_t)c->k;
        double v;
        switch (c->kind) {
        case D_UNIFORM: {
            v = c->a + (c->b - c->a) * unif_at(&cur, w, c->wide);
            store_double(dst, c->dt, v);
            /* rounding to the dtype can reach b: keep [a, b) */
            if (c->dt != EM_FLOAT64 && c->b > c->a && em_load_as_double(dst, c->dt) >= c->b)
                store_double(dst, c->dt, c->a);
            continue;
        }
        case D_NORMAL:
        case D_LOG_NORMAL:
            if (i / 2 != pair) {
                pair = i / 2;
                uint64_t pw = (uint64_t)pair * (uint64_t)c->k;
                if (c->wide) {
                    double u1 = 1.0 - unif_at(&cur, pw, true); /* (0, 1] */
                    double u2 = unif_at(&cur, pw + 2, true);
                    double rr = sqrt(-2.0 * log(u1)), s, co;
                    sincos(6.283185307179586 * u2, &s, &co);
                    z[0] = rr * co, z[1] = rr * s;
                } else { /* float precision for the narrower dtypes */
                    /* (0, 1], down to 2^-32: tails to 6.7 sigma */
                    float u1 = ((float)word_at(&cur, pw) + 1.0f) * 0x1.0p-32f;
                    float u2 = (float)(word_at(&cur, pw + 1) >> 8) * 0x1.0p-24f;
                    float rr = sqrtf(-2.0f * logf(u1)), s, co;
                    sincosf(6.2831853f * u2, &s, &co);
                    z[0] = rr * co, z[1] = rr * s;
                }
            }
            v = c->a + c->b * z[i & 1];
            if (c->kind == D_LOG_NORMAL) v = exp(v);
            break;
        case D_EXPONENTIAL:
            v = -log1p(-unif_at(&cur, w, c->wide)) / c->a;
            break;
        case D_CAUCHY:
            v = c->a + c->b * tan(3.141592653589793 * (unif_at(&cur, w, c->wide) - 0.5));
            break;
        case D_GEOMETRIC:
            v = ceil(log1p(-unif_at(&cur, w, c->wide)) / log1p(-c->a));
            if (v < 1) v = 1;
            if (em_dtype_is_integral(c->dt) || c->dt == EM_BOOL) {
                em_store_from_int64(dst, c->dt, v > 9.2e18 ? INT64_MAX : (int64_t)v);
                continue;
            }
            break;
        case D_BERNOULLI: {
            double p = c->p ? c->p[i] : c->a;
            bool one = unif_at(&cur, w, true) < p;
            if (c->dt == EM_BOOL) *(bool *)dst = one;
            else em_store_from_int64(dst, c->dt, one);
            continue;
        }
        case D_INTEGER: {
            uint64_t x = c->k == 1 ? word_at(&cur, w) : word64_at(&cur, w);
            if (c->range) x %= c->range;
            int64_t iv = (int64_t)((uint64_t)c->low + x);
            if (em_dtype_is_floating(c->dt)) store_double(dst, c->dt, (double)iv);
            else em_store_from_int64(dst, c->dt, iv);
            continue;
        }
        default:
            v = 0;
        }
        store_double(dst, c->dt, v);
    }
}

/* Words an element takes for c's kind and dtype (sets c->wide and c->k). */
static void set_width(fill_ctx *c)
{
    c->wide = c->dt == EM_FLOAT64 || c->kind == D_BERNOULLI;
    switch (c->kind) {
    case D_NORMAL:
    case D_LOG_NORMAL: c->k = c->wide ? 4 : 2; break; /* a Box-Muller pair */
    case D_INTEGER: c->k = c->range && c->range <= ((uint64_t)1 << 32) ? 1 : 2; break;
    default: c->k = c->wide ? 2 : 1;
    }
}

/* Fills t from c's distribution (c->kind, a, b, p, low, range set; the
 * rest is set here), drawing from gen. t may be any layout: a
 * non-contiguous t is filled through a contiguous temporary. Does not bump
 * t's version. */
static em_status fill_tensor(em_tensor *t, fill_ctx *c, em_generator *gen, const char *op)
{
    c->dt = t->dtype;
    set_width(c);
    int64_t n = t->numel;
    uint64_t nwords = (uint64_t)(c->kind == D_NORMAL || c->kind == D_LOG_NORMAL ? (n + 1) / 2 : n) *
                      (uint64_t)c->k;
    rng_reserve(&c->r, gen, nwords);
    if (n == 0) return EM_OK;
    em_tensor *dst = t->is_contiguous ? em_tensor_retain(t) : em_tensor_new(t->ndim, t->sizes, t->dtype, t->device);
    if (!dst) return EM_ENOMEM;
    c->out = em_tensor_data(dst);
    em_cpu_parallel_for(n, 2048, fill_range, c);
    em_status st = EM_OK;
    if (dst != t) st = em_cpu_copy_into(t, dst, op);
    em_tensor_release(dst);
    return st;
}

/* The helpers em_cpu.h offers other families' kernels. */
em_status em_cpu_fill_uniform(em_tensor *t, double from, double to, em_generator *gen)
{
    fill_ctx c = { .kind = D_UNIFORM, .a = from, .b = to };
    return fill_tensor(t, &c, gen, "uniform_");
}

em_status em_cpu_fill_normal(em_tensor *t, double mean, double std, em_generator *gen)
{
    fill_ctx c = { .kind = D_NORMAL, .a = mean, .b = std };
    return fill_tensor(t, &c, gen, "normal_");
}

em_status em_cpu_fill_bernoulli(em_tensor *t, double p, em_generator *gen)
{
    fill_ctx c = { .kind = D_BERNOULLI, .a = p };
    return fill_tensor(t, &c, gen, "bernoulli_");
}

/* ---- argument checks ---- */

static bool check_floating(em_dtype dt, const char *op, const char *what)
{
    if (em_dtype_is_floating(dt)) return true;
    em_set_error(EM_ETYPE, "%s: %s must be floating point, got %s", op, what, em_dtype_name(dt));
    return false;
}

static em_dtype float_dtype(em_dtype dt, const char *op)
{
    if (dt == EM_DTYPE_NONE) return EM_FLOAT32;
    if (!check_floating(dt, op, "dtype")) return EM_DTYPE_NONE;
    return dt;
}

/* A new tensor of the given size, checked as the factories check it. */
static em_tensor *new_sized(em_intlist size, em_dtype dtype, const char *op)
{
    int n = size.n < 0 ? 0 : size.n;
    if (n > EM_MAX_DIMS) {
        em_set_error(EM_EVALUE, "%s: too many dims (%d, at most %d)", op, n, EM_MAX_DIMS);
        return NULL;
    }
    for (int i = 0; i < n; i++) {
        if (size.data[i] < 0) {
            char b[EM_SHAPE_STR_MAX];
            em_set_error(EM_EVALUE, "%s: argument 'size': negative size %lld in %s", op,
                         (long long)size.data[i], em_shape_str(n, size.data, b, sizeof b));
            return NULL;
        }
    }
    return em_tensor_new(n, size.data, dtype, em_cpu_dev());
}

/* Fills a fresh tensor t (consumed) and returns it, or NULL. */
static em_tensor *filled(em_tensor *t, fill_ctx *c, em_generator *gen, const char *op)
{
    if (!t) return NULL;
    if (fill_tensor(t, c, gen, op) != EM_OK) {
        em_tensor_release(t);
        return NULL;
    }
    return t;
}

/* In-place fills: bump self's version and return it retained. */
static em_tensor *filled_inplace(em_tensor *self, fill_ctx *c, em_generator *gen, const char *op)
{
    if (em_core_check_no_internal_overlap(self, op) != EM_OK) return NULL;
    if (fill_tensor(self, c, gen, op) != EM_OK) return NULL;
    em_tensor_bump_version(self);
    return em_tensor_retain(self);
}

/* The bounds [lo, hi] of the integers dtype holds exactly (floats: the
 * integers of their mantissa, as PyTorch's random_ uses). */
static void int_bounds(em_dtype dt, int64_t *lo, int64_t *hi)
{
    switch (dt) {
    case EM_BOOL: *lo = 0, *hi = 1; break;
    case EM_UINT8: *lo = 0, *hi = 255; break;
    case EM_INT8: *lo = -128, *hi = 127; break;
    case EM_INT32: *lo = INT32_MIN, *hi = INT32_MAX; break;
    case EM_INT64: *lo = INT64_MIN, *hi = INT64_MAX; break;
    case EM_FLOAT16: *lo = -(1 << 11), *hi = 1 << 11; break;
    case EM_BFLOAT16: *lo = -(1 << 8), *hi = 1 << 8; break;
    case EM_FLOAT32: *lo = -(1 << 24), *hi = 1 << 24; break;
    default: *lo = -((int64_t)1 << 53), *hi = (int64_t)1 << 53;
    }
}

/* Sets c for integers uniform in [from, to) (to_incl: [from, to]),
 * checking them against dt as PyTorch's random_ does. */
static bool set_integer_range(fill_ctx *c, int64_t from, int64_t to, bool to_incl, em_dtype dt,
                              const char *op)
{
    if (!to_incl && from >= to) {
        em_set_error(EM_EVALUE, "%s: expected 'from' to be less than 'to', but got from=%lld >= to=%lld",
                     op, (long long)from, (long long)to);
        return false;
    }
    int64_t lo, hi;
    int_bounds(dt, &lo, &hi);
    bool integral = !em_dtype_is_floating(dt);
    if (integral && (from < lo || from > hi)) {
        em_set_error(EM_EVALUE, "%s: from=%lld is out of bounds for %s", op, (long long)from,
                     em_dtype_name(dt));
        return false;
    }
    int64_t last = to_incl ? to : to - 1;
    if (integral && (last < lo || last > hi)) {
        em_set_error(EM_EVALUE, "%s: to - 1 = %lld is out of bounds for %s", op, (long long)last,
                     em_dtype_name(dt));
        return false;
    }
    c->kind = D_INTEGER;
    c->low = from;
    c->range = (uint64_t)last - (uint64_t)from + 1; /* 0 when it is 2^64 */
    return true;
}

/* ---- factories ---- */

em_tensor *em_cpu_rand(em_keyset ks, em_intlist size, em_generator *generator, em_dtype dtype,
                       em_device device)
{
    (void)ks, (void)device;
    em_dtype dt = float_dtype(dtype, "rand");
    if (dt == EM_DTYPE_NONE) return NULL;
    fill_ctx c = { .kind = D_UNIFORM, .a = 0, .b = 1 };
    return filled(new_sized(size, dt, "rand"), &c, generator, "rand");
}

em_tensor *em_cpu_randn(em_keyset ks, em_intlist size, em_generator *generator, em_dtype dtype,
                        em_device device)
{
    (void)ks, (void)device;
    em_dtype dt = float_dtype(dtype, "randn");
    if (dt == EM_DTYPE_NONE) return NULL;
    fill_ctx c = { .kind = D_NORMAL, .a = 0, .b = 1 };
    return filled(new_sized(size, dt, "randn"), &c, generator, "randn");
}

static em_tensor *randint_impl(int64_t low, int64_t high, em_intlist size, em_generator *gen,
                               em_dtype dtype, const char *op)
{
    em_dtype dt = dtype == EM_DTYPE_NONE ? EM_INT64 : dtype;
    fill_ctx c = { 0 };
    if (!set_integer_range(&c, low, high, false, dt, op)) return NULL;
    return filled(new_sized(size, dt, op), &c, gen, op);
}

em_tensor *em_cpu_randint(em_keyset ks, int64_t high, em_intlist size, em_generator *generator,
                          em_dtype dtype, em_device device)
{
    (void)ks, (void)device;
    return randint_impl(0, high, size, generator, dtype, "randint");
}

em_tensor *em_cpu_randint_low(em_keyset ks, int64_t low, int64_t high, em_intlist size,
                              em_generator *generator, em_dtype dtype, em_device device)
{
    (void)ks, (void)device;
    return randint_impl(low, high, size, generator, dtype, "randint");
}

/* A uniformly random permutation of 1..n (1-based: its values are
 * indices): Fisher-Yates, step i (from n-1 down to 1) swapping position i
 * with position (x_i mod (i+1)), x_i = the 64-bit word pair 2i, 2i+1. */
em_tensor *em_cpu_randperm(em_keyset ks, int64_t n, em_generator *generator, em_dtype dtype,
                           em_device device)
{
    (void)ks, (void)device;
    em_dtype dt = dtype == EM_DTYPE_NONE ? EM_INT64 : dtype;
    if (n < 0) {
        em_set_error(EM_EVALUE, "randperm: argument 'n' must be non-negative, got %lld", (long long)n);
        return NULL;
    }
    if (dt == EM_BOOL) {
        em_set_error(EM_ETYPE, "randperm: not supported for dtype bool");
        return NULL;
    }
    int64_t lo, hi;
    int_bounds(dt, &lo, &hi);
    if (n > hi) {
        em_set_error(EM_EVALUE, "randperm: n=%lld does not fit in %s (the values are 1..n)",
                     (long long)n, em_dtype_name(dt));
        return NULL;
    }
    rng_t r;
    rng_reserve(&r, generator, (uint64_t)n * 2);
    em_tensor *t = em_tensor_new(1, &n, dt, em_cpu_dev());
    if (!t || n == 0) return t;
    int64_t *perm = malloc(sizeof(int64_t) * (size_t)n);
    if (!perm) {
        em_tensor_release(t);
        em_set_error(EM_ENOMEM, "randperm: out of memory");
        return NULL;
    }
    for (int64_t i = 0; i < n; i++) perm[i] = i + 1;
    cursor cur = cursor_of(&r);
    for (int64_t i = n - 1; i > 0; i--) {
        int64_t j = (int64_t)(word64_at(&cur, (uint64_t)i * 2) % (uint64_t)(i + 1));
        int64_t tmp = perm[i];
        perm[i] = perm[j];
        perm[j] = tmp;
    }
    char *p = em_tensor_data(t);
    size_t es = em_dtype_size(dt);
    for (int64_t i = 0; i < n; i++) {
        if (em_dtype_is_floating(dt)) em_store_from_double(p + (size_t)i * es, dt, (double)perm[i]);
        else em_store_from_int64(p + (size_t)i * es, dt, perm[i]);
    }
    free(perm);
    return t;
}

em_tensor *em_cpu_normal_float_float(em_keyset ks, double mean, double std, em_intlist size,
                                     em_generator *generator, em_dtype dtype, em_device device)
{
    (void)ks, (void)device;
    if (!(std >= 0)) {
        em_set_error(EM_EVALUE, "normal: expected std >= 0, got std=%g", std);
        return NULL;
    }
    em_dtype dt = float_dtype(dtype, "normal");
    if (dt == EM_DTYPE_NONE) return NULL;
    fill_ctx c = { .kind = D_NORMAL, .a = mean, .b = std };
    return filled(new_sized(size, dt, "normal"), &c, generator, "normal");
}

/* ---- the *_like forms ---- */

static em_tensor *like(em_tensor *self, em_dtype dtype)
{
    return em_tensor_new(self->ndim, self->sizes, dtype == EM_DTYPE_NONE ? self->dtype : dtype, self->device);
}

em_tensor *em_cpu_rand_like(em_keyset ks, em_tensor *self, em_dtype dtype)
{
    (void)ks;
    em_dtype dt = dtype == EM_DTYPE_NONE ? self->dtype : dtype;
    if (!check_floating(dt, "rand_like", "the result")) return NULL;
    fill_ctx c = { .kind = D_UNIFORM, .a = 0, .b = 1 };
    return filled(like(self, dt), &c, NULL, "rand_like");
}

em_tensor *em_cpu_randn_like(em_keyset ks, em_tensor *self, em_dtype dtype)
{
    (void)ks;
    em_dtype dt = dtype == EM_DTYPE_NONE ? self->dtype : dtype;
    if (!check_floating(dt, "randn_like", "the result")) return NULL;
    fill_ctx c = { .kind = D_NORMAL, .a = 0, .b = 1 };
    return filled(like(self, dt), &c, NULL, "randn_like");
}

em_tensor *em_cpu_randint_like(em_keyset ks, em_tensor *self, int64_t high, em_dtype dtype)
{
    (void)ks;
    em_dtype dt = dtype == EM_DTYPE_NONE ? self->dtype : dtype;
    fill_ctx c = { 0 };
    if (!set_integer_range(&c, 0, high, false, dt, "randint_like")) return NULL;
    return filled(like(self, dt), &c, NULL, "randint_like");
}

em_tensor *em_cpu_randint_like_low(em_keyset ks, em_tensor *self, int64_t low, int64_t high,
                                   em_dtype dtype)
{
    (void)ks;
    em_dtype dt = dtype == EM_DTYPE_NONE ? self->dtype : dtype;
    fill_ctx c = { 0 };
    if (!set_integer_range(&c, low, high, false, dt, "randint_like")) return NULL;
    return filled(like(self, dt), &c, NULL, "randint_like");
}

/* ---- in-place samplers ---- */

em_tensor *em_cpu_uniform_(em_keyset ks, em_tensor *self, double from, double to, em_generator *generator)
{
    (void)ks;
    if (!check_floating(self->dtype, "uniform_", "self")) return NULL;
    if (!(from <= to)) {
        em_set_error(EM_EVALUE, "uniform_: expected from <= to, got from=%g > to=%g", from, to);
        return NULL;
    }
    if (!isfinite(to - from)) {
        em_set_error(EM_EVALUE, "uniform_: the range [%g, %g) is too wide (to - from must be finite)", from, to);
        return NULL;
    }
    fill_ctx c = { .kind = D_UNIFORM, .a = from, .b = to };
    return filled_inplace(self, &c, generator, "uniform_");
}

em_tensor *em_cpu_normal_(em_keyset ks, em_tensor *self, double mean, double std, em_generator *generator)
{
    (void)ks;
    if (!check_floating(self->dtype, "normal_", "self")) return NULL;
    if (!(std >= 0)) {
        em_set_error(EM_EVALUE, "normal_: expected std >= 0, got std=%g", std);
        return NULL;
    }
    fill_ctx c = { .kind = D_NORMAL, .a = mean, .b = std };
    return filled_inplace(self, &c, generator, "normal_");
}

em_tensor *em_cpu_log_normal_(em_keyset ks, em_tensor *self, double mean, double std, em_generator *generator)
{
    (void)ks;
    if (!check_floating(self->dtype, "log_normal_", "self")) return NULL;
    if (!(std > 0)) {
        em_set_error(EM_EVALUE, "log_normal_: expected std > 0, got std=%g", std);
        return NULL;
    }
    fill_ctx c = { .kind = D_LOG_NORMAL, .a = mean, .b = std };
    return filled_inplace(self, &c, generator, "log_normal_");
}

em_tensor *em_cpu_exponential_(em_keyset ks, em_tensor *self, double lambd, em_generator *generator)
{
    (void)ks;
    if (!check_floating(self->dtype, "exponential_", "self")) return NULL;
    if (!(lambd >= 0)) {
        em_set_error(EM_EVALUE, "exponential_: expected lambd >= 0, got lambd=%g", lambd);
        return NULL;
    }
    fill_ctx c = { .kind = D_EXPONENTIAL, .a = lambd };
    return filled_inplace(self, &c, generator, "exponential_");
}

em_tensor *em_cpu_cauchy_(em_keyset ks, em_tensor *self, double median, double sigma, em_generator *generator)
{
    (void)ks;
    if (!check_floating(self->dtype, "cauchy_", "self")) return NULL;
    fill_ctx c = { .kind = D_CAUCHY, .a = median, .b = sigma };
    return filled_inplace(self, &c, generator, "cauchy_");
}

em_tensor *em_cpu_geometric_(em_keyset ks, em_tensor *self, double p, em_generator *generator)
{
    (void)ks;
    if (!(p > 0 && p < 1)) {
        em_set_error(EM_EVALUE, "geometric_: expected p in (0, 1), got p=%g", p);
        return NULL;
    }
    fill_ctx c = { .kind = D_GEOMETRIC, .a = p };
    return filled_inplace(self, &c, generator, "geometric_");
}

/* random_(): integers in [0, the largest the dtype holds] (floats: up to
 * 2^mantissa bits); random_(to): [0, to); random_(from, to): [from, to),
 * to = nil: [from, the largest]. */
em_tensor *em_cpu_random_(em_keyset ks, em_tensor *self, em_generator *generator)
{
    (void)ks;
    int64_t lo, hi;
    int_bounds(self->dtype, &lo, &hi);
    fill_ctx c = { 0 };
    if (!set_integer_range(&c, 0, hi, true, self->dtype, "random_")) return NULL;
    return filled_inplace(self, &c, generator, "random_");
}

em_tensor *em_cpu_random__to(em_keyset ks, em_tensor *self, int64_t to, em_generator *generator)
{
    (void)ks;
    fill_ctx c = { 0 };
    if (!set_integer_range(&c, 0, to, false, self->dtype, "random_")) return NULL;
    return filled_inplace(self, &c, generator, "random_");
}

em_tensor *em_cpu_random__from(em_keyset ks, em_tensor *self, int64_t from, const int64_t *to,
                               em_generator *generator)
{
    (void)ks;
    int64_t lo, hi;
    int_bounds(self->dtype, &lo, &hi);
    fill_ctx c = { 0 };
    bool ok = to ? set_integer_range(&c, from, *to, false, self->dtype, "random_")
                 : set_integer_range(&c, from, hi, true, self->dtype, "random_");
    if (ok && !to && from > hi) {
        em_set_error(EM_EVALUE, "random_: from=%lld is out of bounds for %s", (long long)from,
                     em_dtype_name(self->dtype));
        ok = false;
    }
    if (!ok) return NULL;
    return filled_inplace(self, &c, generator, "random_");
}

/* ---- bernoulli ---- */

static bool check_p(double p, const char *op)
{
    if (p >= 0 && p <= 1) return true;
    em_set_error(EM_EVALUE, "%s: expected p in [0, 1], got p=%g", op, p);
    return false;
}

/* A contiguous float64 copy of p broadcast to shape (ndim, sizes), with
 * every value checked to lie in [0, 1]; NULL with the error set. */
static em_tensor *probabilities(em_tensor *p, int ndim, const int64_t *sizes, const char *op)
{
    if (!check_floating(p->dtype, op, "p")) return NULL;
    int64_t bs[EM_MAX_DIMS];
    int bn = em_broadcast_shapes(ndim, sizes, p->ndim, p->sizes, bs, op);
    if (bn < 0) return NULL;
    if (bn != ndim || memcmp(bs, sizes, sizeof(int64_t) * (size_t)ndim) != 0) {
        char b1[EM_SHAPE_STR_MAX], b2[EM_SHAPE_STR_MAX];
        em_set_error(EM_ESHAPE, "%s: p of shape %s does not broadcast to self's shape %s", op,
                     em_shape_str(p->ndim, p->sizes, b1, sizeof b1), em_shape_str(ndim, sizes, b2, sizeof b2));
        return NULL;
    }
    em_tensor *d = em_tensor_new(ndim, sizes, EM_FLOAT64, em_cpu_dev());
    if (!d) return NULL;
    if (em_cpu_copy_into(d, p, op) != EM_OK) {
        em_tensor_release(d);
        return NULL;
    }
    const double *v = em_tensor_data(d);
    for (int64_t i = 0; i < d->numel; i++) {
        if (!(v[i] >= 0 && v[i] <= 1)) {
            em_set_error(EM_EVALUE, "%s: expected every p in [0, 1], got %g", op, v[i]);
            em_tensor_release(d);
            return NULL;
        }
    }
    return d;
}

em_tensor *em_cpu_bernoulli(em_keyset ks, em_tensor *self, em_generator *generator)
{
    (void)ks;
    if (!check_floating(self->dtype, "bernoulli", "self (the probabilities)")) return NULL;
    em_tensor *p = probabilities(self, self->ndim, self->sizes, "bernoulli");
    if (!p) return NULL;
    fill_ctx c = { .kind = D_BERNOULLI, .p = em_tensor_data(p) };
    em_tensor *r = filled(like(self, EM_DTYPE_NONE), &c, generator, "bernoulli");
    em_tensor_release(p);
    return r;
}

em_tensor *em_cpu_bernoulli_p(em_keyset ks, em_tensor *self, double p, em_generator *generator)
{
    (void)ks;
    if (!check_p(p, "bernoulli")) return NULL;
    fill_ctx c = { .kind = D_BERNOULLI, .a = p };
    return filled(like(self, EM_DTYPE_NONE), &c, generator, "bernoulli");
}

em_tensor *em_cpu_bernoulli__float(em_keyset ks, em_tensor *self, double p, em_generator *generator)
{
    (void)ks;
    if (!check_p(p, "bernoulli_")) return NULL;
    fill_ctx c = { .kind = D_BERNOULLI, .a = p };
    return filled_inplace(self, &c, generator, "bernoulli_");
}

em_tensor *em_cpu_bernoulli__Tensor(em_keyset ks, em_tensor *self, em_tensor *p, em_generator *generator)
{
    (void)ks;
    em_tensor *pd = probabilities(p, self->ndim, self->sizes, "bernoulli_");
    if (!pd) return NULL;
    /* the fill goes through a contiguous temporary when self is not
     * contiguous, so element i of p (row-major) meets element i of self */
    fill_ctx c = { .kind = D_BERNOULLI, .p = em_tensor_data(pd) };
    em_tensor *r = filled_inplace(self, &c, generator, "bernoulli_");
    em_tensor_release(pd);
    return r;
}

/* ---- normal with tensor arguments ---- */

/* mean + std * z, z standard normal over the broadcast shape (the CPU
 * kernels of mul and add), in mean's dtype -- std's when mean is a number,
 * float32 when both are (ember.normal(m, s, {}) reaches here: the {} is
 * the options table) -- as PyTorch's normal allocates its result like mean. */
static em_tensor *normal_tensors(em_tensor *mean, em_tensor *std, em_generator *gen)
{
    em_dtype dt = !mean->wrapped_number ? mean->dtype : !std->wrapped_number ? std->dtype : EM_FLOAT32;
    if (!check_floating(dt, "normal", mean->wrapped_number ? "std" : "mean")) return NULL;
    int64_t bs[EM_MAX_DIMS];
    int bn = em_broadcast_shapes(mean->ndim, mean->sizes, std->ndim, std->sizes, bs, "normal");
    if (bn < 0) return NULL;
    em_tensor *sd = em_cpu_to_dtype(std, EM_FLOAT64, "normal");
    if (!sd) return NULL;
    const double *v = em_tensor_data(sd);
    for (int64_t i = 0; i < sd->numel; i++) {
        if (!(v[i] >= 0)) {
            em_set_error(EM_EVALUE, "normal: expected every std >= 0, got %g", v[i]);
            em_tensor_release(sd);
            return NULL;
        }
    }
    em_tensor_release(sd);
    fill_ctx c = { .kind = D_NORMAL, .a = 0, .b = 1 };
    em_tensor *z = filled(em_tensor_new(bn, bs, dt, em_cpu_dev()), &c, gen, "normal");
    if (!z) return NULL;
    em_keyset cpu = EM_KS(EM_KEY_CPU);
    em_tensor *zs = em_cpu_mul(cpu, z, std);
    em_tensor_release(z);
    if (!zs) return NULL;
    em_tensor *r = em_cpu_add(cpu, zs, mean, em_scalar_int(1));
    em_tensor_release(zs);
    if (r && r->dtype != dt) { /* wrapped numbers cannot change it, but be sure */
        em_tensor *c2 = em_cpu_to_dtype(r, dt, "normal");
        em_tensor_release(r);
        r = c2;
    }
    return r;
}

em_tensor *em_cpu_normal(em_keyset ks, em_tensor *mean, double std, em_generator *generator)
{
    (void)ks;
    if (!(std >= 0)) {
        em_set_error(EM_EVALUE, "normal: expected std >= 0, got std=%g", std);
        return NULL;
    }
    if (!check_floating(mean->dtype, "normal", "mean")) return NULL;
    em_tensor *s = em_tensor_wrapped_scalar(em_scalar_float(std));
    if (!s) return NULL;
    em_tensor *r = normal_tensors(mean, s, generator);
    em_tensor_release(s);
    return r;
}

em_tensor *em_cpu_normal_Tensor_Tensor(em_keyset ks, em_tensor *mean, em_tensor *std, em_generator *generator)
{
    (void)ks;
    return normal_tensors(mean, std, generator);
}

/* ---- poisson ---- */

/* One Poisson(lam) sample from element i's sub-stream: multiplication of
 * uniforms below 10, else Hormann's transformed rejection (PTRS, as NumPy
 * and PyTorch use). */
static double poisson_one(substream *s, double lam)
{
    if (lam == 0) return 0;
    if (isinf(lam)) return INFINITY;
    if (lam < 10) {
        double lim = exp(-lam), prod = sub_unif(s);
        double k = 0;
        while (prod > lim) {
            prod *= sub_unif(s);
            k++;
        }
        return k;
    }
    double slam = sqrt(lam), loglam = log(lam), b = 0.931 + 2.53 * slam;
    double a = -0.059 + 0.02483 * b, invalpha = 1.1239 + 1.1328 / (b - 3.4), vr = 0.9277 - 3.6224 / (b - 2);
    for (;;) {
        double U = sub_unif(s) - 0.5, V = sub_unif(s);
        double us = 0.5 - fabs(U);
        double k = floor((2 * a / us + b) * U + lam + 0.43);
        if (us >= 0.07 && V <= vr) return k;
        if (k < 0 || (us < 0.013 && V > us)) continue;
        if (log(V) + log(invalpha) - log(a / (us * us) + b) <= -lam + k * loglam - lgamma(k + 1)) return k;
    }
}

typedef struct {
    rng_t r;
    const double *rate;
    char *out;
    em_dtype dt;
} poisson_ctx;

static void poisson_range(int64_t begin, int64_t end, void *arg)
{
    const poisson_ctx *c = arg;
    size_t es = em_dtype_size_fast(c->dt);
    for (int64_t i = begin; i < end; i++) {
        substream s = { &c->r, (uint64_t)i, 0, 0, { 0 } };
        store_double(c->out + (size_t)i * es, c->dt, poisson_one(&s, c->rate[i]));
    }
}

em_tensor *em_cpu_poisson(em_keyset ks, em_tensor *self, em_generator *generator)
{
    (void)ks;
    if (!check_floating(self->dtype, "poisson", "self (the rates)")) return NULL;
    em_tensor *rate = em_cpu_to_dtype(self, EM_FLOAT64, "poisson");
    if (!rate) return NULL;
    const double *v = em_tensor_data(rate);
    for (int64_t i = 0; i < rate->numel; i++) {
        if (!(v[i] >= 0)) {
            em_set_error(EM_EVALUE, "poisson: expected every rate >= 0, got %g", v[i]);
            em_tensor_release(rate);
            return NULL;
        }
    }
    poisson_ctx c = { .rate = v, .dt = self->dtype };
    rng_reserve(&c.r, generator, (uint64_t)self->numel * 4);
    em_tensor *t = like(self, EM_DTYPE_NONE);
    if (t && t->numel) {
        c.out = em_tensor_data(t);
        em_cpu_parallel_for(t->numel, 256, poisson_range, &c);
    }
    em_tensor_release(rate);
    return t;
}

/* ---- multinomial ---- */

typedef struct { double key; int64_t idx; } keyed;

static int by_key_desc(const void *a, const void *b)
{
    const keyed *x = a, *y = b;
    if (x->key != y->key) return x->key > y->key ? -1 : 1;
    return x->idx < y->idx ? -1 : x->idx > y->idx;
}

/* num_samples 1-based category indices a row, drawn from the row's weights.
 * With replacement: sample s of row r inverts the row's cumulative sum at
 * the 53-bit uniform of element r*num_samples + s. Without: the
 * exponential-race trick -- category c of row r gets the key
 * log(p_c) - log(E_c), E_c = -log(u) from element r*ncat + c, and the
 * num_samples largest keys win in order (zero weights come last, by index). */
em_tensor *em_cpu_multinomial(em_keyset ks, em_tensor *self, int64_t num_samples, bool replacement,
                              em_generator *generator)
{
    (void)ks;
    const char *op = "multinomial";
    if (!check_floating(self->dtype, op, "self (the probabilities)")) return NULL;
    if (self->ndim != 1 && self->ndim != 2) {
        em_set_error(EM_ESHAPE, "%s: self must be 1-d or 2-d, got %d dims", op, (int)self->ndim);
        return NULL;
    }
    if (num_samples <= 0) {
        em_set_error(EM_EVALUE, "%s: num_samples must be positive, got %lld", op, (long long)num_samples);
        return NULL;
    }
    int64_t nrows = self->ndim == 2 ? self->sizes[0] : 1, ncat = self->sizes[self->ndim - 1];
    if (!replacement && num_samples > ncat) {
        em_set_error(EM_EVALUE, "%s: cannot draw %lld samples from %lld categories without replacement",
                     op, (long long)num_samples, (long long)ncat);
        return NULL;
    }
    em_tensor *pd = em_cpu_to_dtype(self, EM_FLOAT64, op);
    if (!pd) return NULL;
    const double *p = em_tensor_data(pd);
    for (int64_t r = 0; r < nrows; r++) {
        double sum = 0;
        for (int64_t k = 0; k < ncat; k++) {
            double v = p[r * ncat + k];
            if (!(v >= 0) || isinf(v)) {
                em_set_error(EM_EVALUE, "%s: the probabilities contain inf, nan or a negative value", op);
                em_tensor_release(pd);
                return NULL;
            }
            sum += v;
        }
        if (!(sum > 0)) {
            em_set_error(EM_EVALUE, "%s: the probabilities of row %lld sum to 0", op, (long long)r + 1);
            em_tensor_release(pd);
            return NULL;
        }
    }
    int64_t sizes[2] = { nrows, num_samples };
    em_tensor *out = self->ndim == 2 ? em_tensor_new(2, sizes, EM_INT64, em_cpu_dev())
                                     : em_tensor_new(1, &num_samples, EM_INT64, em_cpu_dev());
    rng_t rg;
    rng_reserve(&rg, generator, (uint64_t)nrows * (uint64_t)(replacement ? num_samples : ncat) * 2);
    double *cum = out ? malloc(sizeof(double) * (size_t)(ncat ? ncat : 1)) : NULL;
    keyed *keys = cum && !replacement ? malloc(sizeof(keyed) * (size_t)ncat) : NULL;
    if (!out || !cum || (!replacement && !keys)) {
        em_tensor_release(out);
        em_tensor_release(pd);
        free(cum);
        if (out) em_set_error(EM_ENOMEM, "%s: out of memory", op);
        return NULL;
    }
    int64_t *o = em_tensor_data(out);
    cursor cur = cursor_of(&rg);
    for (int64_t r = 0; r < nrows; r++) {
        const double *row = p + r * ncat;
        if (replacement) {
            double acc = 0;
            for (int64_t k = 0; k < ncat; k++) cum[k] = acc += row[k];
            for (int64_t s = 0; s < num_samples; s++) {
                double u = unif_at(&cur, (uint64_t)(r * num_samples + s) * 2, true) * acc;
                int64_t lo = 0, hi = ncat - 1; /* first k with cum[k] > u and row[k] > 0 */
                while (lo < hi) {
                    int64_t mid = lo + (hi - lo) / 2;
                    if (cum[mid] > u) hi = mid;
                    else lo = mid + 1;
                }
                while (lo > 0 && row[lo] == 0) lo--; /* rounding past the last weight */
                o[r * num_samples + s] = lo + 1;
            }
        } else {
            for (int64_t k = 0; k < ncat; k++) {
                double u = 1.0 - unif_at(&cur, (uint64_t)(r * ncat + k) * 2, true); /* (0, 1] */
                keys[k].idx = k;
                keys[k].key = row[k] > 0 ? log(row[k]) - log(-log(u) + DBL_MIN) : -INFINITY;
            }
            qsort(keys, (size_t)ncat, sizeof *keys, by_key_desc);
            for (int64_t s = 0; s < num_samples; s++) o[r * num_samples + s] = keys[s].idx + 1;
        }
    }
    free(cum);
    free(keys);
    em_tensor_release(pd);
    return out;
}
