/* pool.c -- ember's intra-op thread pool.
 * Workers sleep on a condition variable between jobs (DESIGN decision 9).
 *
 * Invariants: one job at a time (owner_mu held by the submitting thread
 * for its whole duration; a second submitter runs serially instead); a
 * job has nchunks <= nthreads chunks, chunk 0 runs on the caller, chunk i
 * on worker i; `pending` counts workers still to finish the current job.
 * Nested calls (from inside a chunk) run serially. After fork() the child
 * has no workers: the atfork handler resets the pool so it restarts them.
 * A stoppable job (em_cpu_parallel_for_stoppable) runs each chunk in
 * pieces and stops between pieces once an interrupt is pending (Note
 * [Interrupts in kernels] in em_cpu.h).
 */
#include "kernels/cpu/em_cpu.h"

#include <cblas.h>
#include <pthread.h>
#include <stdlib.h>
#include <unistd.h>

/* ---- state ---- */

typedef struct {
    pthread_mutex_t mu;          /* guards everything below */
    pthread_cond_t work_cv;      /* workers wait for a new generation */
    pthread_cond_t done_cv;      /* the caller waits for pending == 0 */
    pthread_mutex_t owner_mu;    /* held by the thread running a job */
    int nthreads;                /* configured threads, caller included */
    int nstarted;                /* workers running (nthreads - 1 when up) */
    pthread_t *workers;
    uint64_t gen;                /* bumped once per job */
    uint64_t start_gen;          /* gen when the workers were created */
    bool quit;
    /* the current job */
    em_cpu_range_fn fn;
    void *ctx;
    int64_t n, nchunks;
    int64_t piece;               /* a stoppable job's piece; 0: whole chunks */
    atomic_int pending;
} pool_t;

static pool_t pool = {
    .mu = PTHREAD_MUTEX_INITIALIZER,
    .work_cv = PTHREAD_COND_INITIALIZER,
    .done_cv = PTHREAD_COND_INITIALIZER,
    .owner_mu = PTHREAD_MUTEX_INITIALIZER,
};
static pthread_once_t pool_once = PTHREAD_ONCE_INIT;
static _Thread_local bool in_region;

static void chunk_bounds(int64_t n, int64_t nchunks, int64_t i, int64_t *b, int64_t *e) {
    int64_t q = n / nchunks, r = n % nchunks;
    *b = i * q + (i < r ? i : r);
    *e = *b + q + (i < r ? 1 : 0);
}

/* Runs fn over [b, e): in one call, or for a stoppable job (piece > 0) in
 * pieces of at most `piece`, checking for a pending interrupt before each
 * one and returning early when there is one (the flag is left set: the
 * op's entry consumes it, Note [Interrupts in kernels]). */
static void run_chunk(int64_t b, int64_t e, int64_t piece, em_cpu_range_fn fn, void *ctx) {
    if (piece <= 0) {
        fn(b, e, ctx);
        return;
    }
    while (b < e) {
        if (em_cpu_stop_point()) return;
        int64_t m = e - b > piece ? b + piece : e;
        fn(b, m, ctx);
        b = m;
    }
}

/* em_cpu_interrupt_at_stop_point's countdown: stop points to go, 0 = off */
static atomic_llong stop_countdown;

bool em_cpu_stop_point(void) {
    if (__builtin_expect(atomic_load_explicit(&stop_countdown, memory_order_relaxed) > 0, 0) &&
        atomic_fetch_sub(&stop_countdown, 1) == 1)
        em_interrupt();
    return em_interrupt_pending();
}

void em_cpu_interrupt_at_stop_point(int64_t n) { atomic_store(&stop_countdown, n > 0 ? n : 0); }

/* The piece of a stoppable chunk of len items: at least grain, and small
 * enough that a chunk has about STOP_PIECES of them (so an interrupt is
 * seen after about 1/STOP_PIECES of the op's time). */
#define STOP_PIECES 1024
static int64_t stop_piece(int64_t len, int64_t grain) {
    int64_t p = (len + STOP_PIECES - 1) / STOP_PIECES;
    return p > grain ? p : grain;
}

static inline void cpu_relax(void) {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#endif
}

/* ---- workers ---- */

static void *worker_main(void *arg) {
    int64_t id = (int64_t)(intptr_t)arg;
    in_region = true; /* anything a worker calls is nested */
    pthread_mutex_lock(&pool.mu);
    uint64_t seen = pool.start_gen;
    for (;;) {
        while (pool.gen == seen && !pool.quit) pthread_cond_wait(&pool.work_cv, &pool.mu);
        if (pool.quit) break;
        seen = pool.gen;
        em_cpu_range_fn fn = pool.fn;
        void *ctx = pool.ctx;
        int64_t n = pool.n, nchunks = pool.nchunks, piece = pool.piece;
        pthread_mutex_unlock(&pool.mu);
        if (id < nchunks) {
            int64_t b, e;
            chunk_bounds(n, nchunks, id, &b, &e);
            if (e > b) run_chunk(b, e, piece, fn, ctx);
        }
        pthread_mutex_lock(&pool.mu);
        if (atomic_fetch_sub(&pool.pending, 1) == 1) pthread_cond_signal(&pool.done_cv);
    }
    pthread_mutex_unlock(&pool.mu);
    return NULL;
}

static void pool_reset_after_fork(void) {
    pthread_mutex_init(&pool.mu, NULL);
    pthread_cond_init(&pool.work_cv, NULL);
    pthread_cond_init(&pool.done_cv, NULL);
    pthread_mutex_init(&pool.owner_mu, NULL);
    pool.nstarted = 0;
    pool.workers = NULL; /* the parent's array; leaked in the child, small */
    pool.quit = false;
    in_region = false;
}

static void pool_init_once(void) {
    if (pool.nthreads == 0) pool.nthreads = em_get_num_threads(); /* core's context */
    pthread_atfork(NULL, NULL, pool_reset_after_fork);
}

/* Starts nthreads - 1 workers; called with owner_mu held. False when
 * threads could not be created (the job then runs serially). */
static bool pool_start(void) {
    int want = pool.nthreads - 1;
    if (pool.nstarted == want) return true;
    pool.workers = calloc((size_t)want, sizeof(pthread_t));
    if (!pool.workers) return false;
    pthread_mutex_lock(&pool.mu);
    pool.quit = false;
    pool.start_gen = pool.gen;
    pthread_mutex_unlock(&pool.mu);
    for (int i = 0; i < want; i++) {
        if (pthread_create(&pool.workers[i], NULL, worker_main, (void *)(intptr_t)(i + 1)) != 0) {
            pool.nthreads = i + 1; /* run with the workers we have */
            break;
        }
        pool.nstarted++;
    }
    return pool.nstarted > 0;
}

/* Joins all workers; called with owner_mu held. */
static void pool_stop(void) {
    if (pool.nstarted == 0) return;
    pthread_mutex_lock(&pool.mu);
    pool.quit = true;
    pthread_cond_broadcast(&pool.work_cv);
    pthread_mutex_unlock(&pool.mu);
    for (int i = 0; i < pool.nstarted; i++) pthread_join(pool.workers[i], NULL);
    free(pool.workers);
    pool.workers = NULL;
    pool.nstarted = 0;
    pool.quit = false;
}

/* ---- public ---- */

bool em_cpu_in_parallel(void) { return in_region; }

/* The one body of em_cpu_parallel_for (stoppable false) and
 * em_cpu_parallel_for_stoppable (true). */
static void parallel_for(int64_t n, int64_t grain, em_cpu_range_fn fn, void *ctx, bool stoppable) {
    if (n <= 0) return;
    pthread_once(&pool_once, pool_init_once);
    if (grain < 1) grain = 1;
    /* nested: the outer job stops between its pieces */
    if (in_region) {
        fn(0, n, ctx);
        return;
    }
    int64_t serial_piece = stoppable && n >= 2 * grain ? stop_piece(n, grain) : 0;
    if (n < 2 * grain || pthread_mutex_trylock(&pool.owner_mu) != 0) {
        run_chunk(0, n, serial_piece, fn, ctx);
        return;
    }
    if (pool.nthreads <= 1 || !pool_start()) {
        pthread_mutex_unlock(&pool.owner_mu);
        run_chunk(0, n, serial_piece, fn, ctx);
        return;
    }
    int64_t nchunks = n / grain;
    if (nchunks > pool.nstarted + 1) nchunks = pool.nstarted + 1;
    pthread_mutex_lock(&pool.mu);
    pool.fn = fn;
    pool.ctx = ctx;
    pool.n = n;
    pool.nchunks = nchunks;
    pool.piece = stoppable ? stop_piece((n + nchunks - 1) / nchunks, grain) : 0;
    atomic_store(&pool.pending, pool.nstarted);
    pool.gen++;
    pthread_cond_broadcast(&pool.work_cv);
    pthread_mutex_unlock(&pool.mu);

    in_region = true;
    int64_t b, e;
    chunk_bounds(n, nchunks, 0, &b, &e);
    run_chunk(b, e, pool.piece, fn, ctx);
    in_region = false;

    /* workers finish soon after us: spin briefly, then sleep */
    for (int i = 0; i < 4000 && atomic_load(&pool.pending) > 0; i++) cpu_relax();
    if (atomic_load(&pool.pending) > 0) {
        pthread_mutex_lock(&pool.mu);
        while (atomic_load(&pool.pending) > 0) pthread_cond_wait(&pool.done_cv, &pool.mu);
        pthread_mutex_unlock(&pool.mu);
    }
    pthread_mutex_unlock(&pool.owner_mu);
}

void em_cpu_parallel_for(int64_t n, int64_t grain, em_cpu_range_fn fn, void *ctx) {
    parallel_for(n, grain, fn, ctx, false);
}

void em_cpu_parallel_for_stoppable(int64_t n, int64_t grain, em_cpu_range_fn fn, void *ctx) {
    parallel_for(n, grain, fn, ctx, true);
}

/* The hook em_set_num_threads (core's runtime context, Note [Runtime
 * context]) calls: resize the pool and OpenBLAS's threads together. */
static void set_threads(int n) {
    pthread_once(&pool_once, pool_init_once);
    pthread_mutex_lock(&pool.owner_mu);
    if (n != pool.nthreads) {
        pool_stop();
        pool.nthreads = n; /* workers restart lazily on the next job */
    }
    pthread_mutex_unlock(&pool.owner_mu);
    openblas_set_num_threads(n);
}

__attribute__((constructor)) static void register_thread_hook(void) {
    em_context_on_num_threads(set_threads);
}
