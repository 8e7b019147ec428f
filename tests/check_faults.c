/* check_faults.c -- behaviour under faults (issue: hardening): every
 * allocation site failing in turn (em_memory_fail_after: tensor storage and
 * headers, autograd nodes, saved variables, hooks and the engine's buffers),
 * the memory cap (em_memory_set_limit), an address-space limit (ulimit -v),
 * and interrupts between ops, in backward and inside a long kernel. Each
 * failure must reach Lua as a catchable error, the state must stay usable,
 * and when the state closes every storage must be back (the allocator's live
 * bytes return to where they were: a leaked tensor keeps its storage). */
#include <check.h>
#include <lauxlib.h>
#include <lualib.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/time.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "core/em_core.h"
#include "kernels/cpu/em_cpu.h"
#include "lua/em_lua.h"

/* Scripts covering the paths a training script takes: forward, backward,
 * double backward, views and in-place writes, indexing, sorting,
 * printing, linear algebra, files. Each is deterministic. */
static const char *const scripts[] = {
    "local x = ember.randn(4, 5, {requires_grad = true})\n"
    "local y = (x * 2 + 1):tanh():sum(); y:backward(); assert(x.grad)",
    "local a = ember.arange(12.0):reshape(3, 4); local b = a:t():contiguous(); a[{2}] = 5\n"
    "local c = a:narrow(2, 1, 2):clone(); c:add_(1); return c:sum():item() + b:sum():item()",
    "local a = ember.randn(6, 3, {requires_grad = true}); local m = a:gt(0); local s = a[m]\n"
    "local g = a:index_select(1, ember.tensor({1, 3})); (s:sum() + g:sum()):backward()",
    "local a = ember.randn(8, 8, {requires_grad = true})\n"
    "local l = ember.log_softmax(a:matmul(a:t()), 2):mean()\n"
    "local g = ember.autograd.grad({l}, {a}, {create_graph = true})[1]; g:sum():backward()",
    "local a = ember.randn(50); local v, i = a:sort(); local t = ember.cat({a, v}); return a:topk(3), t:cumsum(1)",
    "local s = tostring(ember.randn(3, 3)) .. tostring(ember.arange(5)) .. tostring(ember.ones(2, {requires_grad = true}) * 2)",
    "local a = ember.randn(4, 4, {dtype = 'float64', requires_grad = true}); local q, r = ember.linalg.qr(a)\n"
    "local d = ember.linalg.det(a); (q:sum() + d):backward()",
    "local p = os.tmpname(); ember.save(p, {w = ember.randn(3, 2), b = {ember.ones(2)}}); local t = ember.load(p)\n"
    "os.remove(p); assert(t.b[1])",
    /* hooks, a custom Function, retain_graph, autograd.grad with
     * create_graph: the autograd allocations of Note [Autograd allocation
     * faults] (nodes, saved variables, hooks, the engine's buffers) */
    "local x = ember.randn(3, {requires_grad = true}); local h = x:register_hook(function(g) return g * 2 end)\n"
    "local Sq = ember.autograd.Function { forward = function(ctx, a) ctx:save_for_backward(a); return a * a end,\n"
    "  backward = function(ctx, g) return g * 2 * ctx.saved_tensors[1] end }\n"
    "local y = (Sq(x) + x:sin()):sum(); y:backward({retain_graph = true}); y:backward(); h:remove()\n"
    "local z = (x:exp() * x):sum(); z.grad_fn:register_hook(function(gi, go) return gi end)\n"
    "local g = ember.autograd.grad({z}, {x}, {create_graph = true})[1]; g:sum():backward()",
    /* tensors of more than 5 dims: their shapes live in a spill block
     * (Note [Inline shapes]), made by new tensors, views, out= resizing
     * and empty_strided */
    "local a = ember.randn(2, 1, 3, 1, 2, 2, {requires_grad = true})\n"
    "local b = a:permute(6, 5, 4, 3, 2, 1):contiguous():view(2, 2, 1, 3, 1, 2, 1)\n"
    "local o = ember.zeros(2); ember.add(b:detach(), 1, {out = o}); local e = ember.empty_strided({1, 2, 1, 2, 1, 2}, {8, 4, 4, 2, 2, 1})\n"
    "e:fill_(1); ((b * b):sum() + o:sum() + e:sum()):backward(); assert(a.grad:dim() == 6)",
};

static lua_State *new_state(void) {
    lua_State *L = luaL_newstate();
    luaL_openlibs(L);
    luaL_requiref(L, "ember", luaopen_ember, 1);
    lua_pop(L, 1);
    return L;
}

/* A full collection that also runs the registry unrefs that graph nodes
 * freed during it queued (Note [Deferred unref], lua_callback.c: the next
 * tensor made drains them), then collects what they held, and drops the
 * wrapped numbers this thread keeps for reuse (Note [Wrapped number cache],
 * tensor.c: their 8 bytes count as allocated while cached). */
static void collect(lua_State *L) {
    lua_gc(L, LUA_GCCOLLECT, 0);
    ck_assert_int_eq(luaL_dostring(L, "ember.empty(0)"), LUA_OK);
    lua_gc(L, LUA_GCCOLLECT, 0);
    em_memory_empty_cache();
}

START_TEST(test_faults_every_allocation_site_fails_cleanly) {
    em_memory_empty_cache();
    em_memory_stats before;
    em_memory_get_stats(&before);
    lua_State *L = new_state();
    collect(L);
    em_memory_stats base;
    em_memory_get_stats(&base);
    int total_sites = 0;
    for (size_t k = 0; k < sizeof scripts / sizeof scripts[0]; k++) {
        char seed[64];
        for (long n = 1;; n++) {
            snprintf(seed, sizeof seed, "ember.manual_seed(%d)", (int)k);
            ck_assert_int_eq(luaL_dostring(L, seed), LUA_OK);
            em_memory_fail_after(n);
            int st = luaL_dostring(L, scripts[k]);
            bool fired = em_memory_fail_remaining() == 0;
            em_memory_fail_after(0);
            if (st != LUA_OK) {
                const char *msg = lua_tostring(L, -1);
                ck_assert_msg(fired, "script %d failed without a failed allocation: %s", (int)k, msg);
                ck_assert_msg(msg && strstr(msg, "out of memory"),
                              "script %d, allocation %ld: the error does not say out of memory: %s", (int)k, n,
                              msg ? msg : "(not a string)");
            }
            lua_settop(L, 0);
            collect(L);
            em_memory_stats now;
            em_memory_get_stats(&now);
            ck_assert_msg(now.allocated == base.allocated, "script %d, allocation %ld: %zd bytes of storage leaked",
                          (int)k, n, (ssize_t)(now.allocated - base.allocated));
            /* the state still works */
            ck_assert_int_eq(luaL_dostring(L, "assert((ember.ones(2, 3) + 1):sum():item() == 12)"), LUA_OK);
            lua_settop(L, 0);
            if (!fired) {
                ck_assert_int_eq(st, LUA_OK);
                total_sites += (int)n - 1;
                break;
            }
            ck_assert_msg(n < 100000, "script %d never finishes", (int)k);
        }
    }
    ck_assert_int_gt(total_sites, 100);
    lua_close(L);
    em_memory_empty_cache(); /* the cached wrapped numbers */
    em_memory_stats after;
    em_memory_get_stats(&after);
    ck_assert_msg(after.allocated == before.allocated, "leaked %zu bytes of tensor storage",
                  after.allocated - before.allocated);
    if (getenv("EMBER_FAULT_REPORT"))
        fprintf(stderr, "faults: %d allocation sites failed in turn over %d scripts\n", total_sites,
                (int)(sizeof scripts / sizeof scripts[0]));
}
END_TEST

START_TEST(test_faults_memory_limit) {
    lua_State *L = new_state();
    ck_assert_int_eq(luaL_dostring(L,
                                   "keep = ember.ones(1000)\n"
                                   "ember.set_memory_limit(ember.memory_stats().allocated + 100000)\n"
                                   "local ok, err = pcall(ember.zeros, 1000, 1000)\n"
                                   "assert(not ok and err:find('out of memory allocating 4000000 bytes on cpu', 1, true), err)\n"
                                   "assert(err:find('bytes in use; memory limit', 1, true), err)\n"
                                   "local x = ember.ones(100, {requires_grad = true})\n"
                                   "local ok2, err2 = pcall(function() return (x:unsqueeze(2) * x):sum() end)\n"
                                   "assert(ok2, err2)\n"
                                   "local ok3 = pcall(function() return x:unsqueeze(2):expand(100, 1000) + 1 end)\n"
                                   "assert(not ok3)\n"
                                   "ember.set_memory_limit(nil)\n"
                                   "assert(ember.zeros(1000, 1000):sum():item() == 0)"),
                     LUA_OK);
    lua_close(L);
}
END_TEST

static int l_interrupt_now(lua_State *L) {
    (void)L;
    em_interrupt();
    return 0;
}

/* Note [Interrupts]: the op after an interrupt fails, the one after that
 * works; in backward the next node stops the pass, the graph's other
 * tensors and a new backward are fine. */
START_TEST(test_faults_interrupts) {
    lua_State *L = new_state();
    lua_register(L, "interrupt_now", l_interrupt_now);
    ck_assert_int_eq(luaL_dostring(L,
                                   "local x = ember.zeros(3)\n"
                                   "local ok, err = pcall(function()\n"
                                   "  for i = 1, 1e9 do x = x + 1; if i == 100 then interrupt_now() end end\n"
                                   "end)\n"
                                   "assert(not ok and err:find('add: interrupted', 1, true), err)\n"
                                   "assert(x[1]:item() == 100)\n"
                                   "assert((x + 1)[1]:item() == 101)\n"
                                   /* in backward: a hook on an inner tensor interrupts */
                                   "local w = ember.ones(3, {requires_grad = true})\n"
                                   "local h = w * 2\n"
                                   "h:register_hook(function() interrupt_now() end)\n"
                                   "local y = (h:exp() * 3):sum()\n"
                                   "local ok2, err2 = pcall(y.backward, y)\n"
                                   "assert(not ok2 and err2:find('interrupted', 1, true), err2)\n"
                                   "assert(w.grad == nil)\n"
                                   "local z = (w * w):sum(); z:backward()\n"
                                   "assert(w.grad:sum():item() == 6)"),
                     LUA_OK);
    lua_close(L);
}
END_TEST


/* ---- an address-space limit (ulimit -v) ---- */

/* AddressSanitizer and ThreadSanitizer reserve terabytes of shadow memory
 * and report a failed mmap themselves: no address-space limit under them. */
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define FAULTS_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
#define FAULTS_ASAN 1
#endif
#endif

#ifndef FAULTS_ASAN
/* The process's address space in bytes (VmSize), or 0. */
static size_t vm_size(void) {
    FILE *f = fopen("/proc/self/status", "r");
    if (!f) return 0;
    char line[256];
    size_t kb = 0;
    while (fgets(line, sizeof line, f))
        if (sscanf(line, "VmSize: %zu kB", &kb) == 1) break;
    fclose(f);
    return kb * 1024;
}
#endif

/* ulimit -v in a child process: the limit is the child's address space plus
 * 768 MiB. A 4 GiB tensor, then 64 MiB tensors until the space is gone,
 * must each be an "out of memory allocating N bytes on cpu (M bytes in
 * use)" error; after the tensors are dropped the state works and the live
 * bytes are back where they were. (Not under AddressSanitizer or
 * ThreadSanitizer: they report a failed mmap themselves instead of
 * returning NULL.) */
START_TEST(test_faults_address_space_limit) {
#ifdef FAULTS_ASAN
    return;
#else
    fflush(NULL);
    pid_t pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0) {
        lua_State *L = new_state();
        if (luaL_dostring(L, "ember.ones(10):sum()") != LUA_OK) _exit(2); /* the pool and BLAS are up */
        size_t vm = vm_size();
        struct rlimit rl = { vm + (768u << 20), vm + (768u << 20) };
        if (!vm || setrlimit(RLIMIT_AS, &rl) != 0) _exit(3);
        int st = luaL_dostring(
            L, "collectgarbage(); collectgarbage(); local base = ember.memory_stats().allocated\n"
               "local ok, err = pcall(ember.zeros, 1024, 1024, 1024)\n"
               "assert(not ok and err:find('out of memory allocating 4294967296 bytes on cpu (', 1, true)\n"
               "  and err:find('bytes in use)', 1, true), err)\n"
               "local t = {}\n"
               "local ok2, err2 = pcall(function() for i = 1, 64 do t[i] = ember.ones(16 * 1024 * 1024) end end)\n"
               "assert(not ok2 and err2:find('out of memory allocating 67108864 bytes on cpu (', 1, true), err2)\n"
               "assert(#t >= 2 and #t < 16, #t)\n"
               "t = nil; collectgarbage(); collectgarbage()\n"
               "assert(ember.memory_stats().allocated == base, ember.memory_stats().allocated .. ' bytes live, ' .. base .. ' before')\n"
               "local u = ember.ones(16 * 1024 * 1024)\n"
               "assert(u:narrow(1, 1, 1000):sum():item() == 1000)\n"
               "assert((ember.randn(30, 30):matmul(ember.eye(30)) ~= nil))\n");
        if (st != LUA_OK) {
            fprintf(stderr, "address-space limit: %s\n", lua_tostring(L, -1));
            _exit(1);
        }
        lua_close(L);
        _exit(0);
    }
    int status = 0;
    ck_assert_int_eq(waitpid(pid, &status, 0), pid);
    ck_assert_msg(WIFEXITED(status), "the child under ulimit -v crashed (signal %d)",
                  WIFSIGNALED(status) ? WTERMSIG(status) : 0);
    ck_assert_msg(WEXITSTATUS(status) == 0, "the child under ulimit -v failed (exit %d)", WEXITSTATUS(status));
#endif
}
END_TEST

/* ---- an interrupt inside a long kernel ---- */

static void on_alarm(int sig) {
    (void)sig;
    em_interrupt(); /* async-signal-safe, as the shell's SIGINT handler */
}

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* Note [Interrupts in kernels]: x:tanh() over 2^23 float64 values (unary.c's
 * contiguous loop, stoppable) is timed on 1/16 of them; SIGALRM then calls
 * em_interrupt() at 15% of the whole op's estimated time. The op must fail
 * with "tanh: interrupted" well before it could have finished (at most 60%
 * of the estimate, and 0.1 s late at most), its result must be gone (the
 * live bytes are as before), and the next op works. With the pool (2
 * threads) and serially (1 thread). Retried twice when the machine is so
 * noisy that the op finished before the alarm. */
static void interrupt_inside_kernel(lua_State *L, int threads) {
    char setup[128];
    snprintf(setup, sizeof setup, "ember.set_num_threads(%d)", threads);
    ck_assert_int_eq(luaL_dostring(L, setup), LUA_OK);
    ck_assert_int_eq(luaL_dostring(L, "x = ember.rand(8388608, {dtype = 'float64'})\n"
                                      "small = x:narrow(1, 1, 524288):contiguous(); small:tanh()"),
                     LUA_OK);
    struct sigaction sa, old;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_alarm;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = SA_RESTART;
    ck_assert_int_eq(sigaction(SIGALRM, &sa, &old), 0);
    bool stopped = false;
    for (int attempt = 0; attempt < 3 && !stopped; attempt++) {
        double t0 = now_s();
        ck_assert_int_eq(luaL_dostring(L, "small:tanh()"), LUA_OK);
        double est = 16 * (now_s() - t0);
        ck_assert_int_eq(luaL_dostring(L, "collectgarbage(); collectgarbage(); base = ember.memory_stats().allocated"),
                         LUA_OK);
        double fire = 0.15 * est;
        struct itimerval it = { { 0, 0 }, { (time_t)fire, (suseconds_t)((fire - (double)(time_t)fire) * 1e6) + 1 } };
        t0 = now_s();
        ck_assert_int_eq(setitimer(ITIMER_REAL, &it, NULL), 0);
        int st = luaL_dostring(L, "y = x:tanh()");
        double took = now_s() - t0;
        struct itimerval off = { { 0, 0 }, { 0, 0 } };
        setitimer(ITIMER_REAL, &off, NULL);
        if (st == LUA_OK) { /* finished before the alarm: the next op reports it */
            em_interrupt_clear();
            lua_settop(L, 0);
            ck_assert_int_eq(luaL_dostring(L, "y = nil"), LUA_OK);
            continue;
        }
        const char *msg = lua_tostring(L, -1);
        ck_assert_msg(msg && strstr(msg, "tanh: interrupted"), "threads %d: %s", threads, msg ? msg : "?");
        lua_settop(L, 0);
        ck_assert_msg(took < 0.6 * est + 0.1, "threads %d: the interrupted op took %.3f s of an estimated %.3f s",
                      threads, took, est);
        stopped = true;
        if (getenv("EMBER_FAULT_REPORT"))
            fprintf(stderr, "faults: tanh of 2^23 float64 with %d thread(s): interrupted at %.3f s, returned "
                            "at %.3f s (the whole op: about %.3f s)\n", threads, fire, took, est);
    }
    ck_assert_msg(stopped, "threads %d: the op always finished before the alarm", threads);
    sigaction(SIGALRM, &old, NULL);
    ck_assert_int_eq(luaL_dostring(L, "assert(y == nil)\n"
                                      "collectgarbage(); collectgarbage()\n"
                                      "assert(ember.memory_stats().allocated == base, 'the result was kept')\n"
                                      "local z = x:narrow(1, 1, 5):tanh()\n"
                                      "assert(math.abs(z[1]:item() - math.tanh(x[1]:item())) < 1e-15)\n"
                                      "x, small = nil, nil; collectgarbage()"),
                     LUA_OK);
}

START_TEST(test_faults_interrupt_inside_kernel) {
    lua_State *L = new_state();
    ck_assert_int_eq(luaL_dostring(L, "threads0 = ember.get_num_threads()"), LUA_OK);
    interrupt_inside_kernel(L, 2);
    interrupt_inside_kernel(L, 1);
    ck_assert_int_eq(luaL_dostring(L, "ember.set_num_threads(threads0)"), LUA_OK);
    lua_close(L);
}
END_TEST

/* Interrupts at known places inside kernels (em_cpu_interrupt_at_stop_point,
 * Note [Interrupts in kernels]): each long loop made stoppable, interrupted
 * at its 2nd stop point, must fail with "NAME: interrupted", keep no result
 * (live bytes as before), leave an out= target as it was, and the same op
 * must then give the value it gave before. With 2 threads and with 1.
 * Latencies of SIGINT in the shell: docs/RELIABILITY.md. */
typedef struct {
    const char *name;  /* in the error */
    const char *setup; /* makes the inputs and ref, the op's value */
    const char *op;    /* sets y (and yi) */
    const char *same;  /* an expression: y equals ref */
} stop_case;

static const stop_case stop_cases[] = {
    { "sum", "x = ember.randn(512, 4096, {dtype = 'float64'}); ref = x:sum(2)", "y = x:sum(2)", "ember.equal(y, ref)" },
    { "sum", "x = ember.randn(4194304, {dtype = 'float64'}); ref = x:sum()", "y = x:sum()", "ember.equal(y, ref)" },
    { "sum", "x = ember.randn(1024, 2048, {dtype = 'float64'}):t(); ref = x:sum(2)", "y = x:sum(2)",
      "ember.equal(y, ref)" }, /* the copy of the transposed input */
    { "mean", "x = ember.randn(4096, 512); ref = x:mean(1)", "y = x:mean(1)", "ember.equal(y, ref)" },
    { "prod", "x = ember.rand(512, 4096, {dtype = 'float64'}) + 0.5; ref = x:prod(2)", "y = x:prod(2)",
      "ember.equal(y, ref)" },
    { "amax", "x = ember.randn(4096, 512); ref = x:amax(1)", "y = x:amax(1)", "ember.equal(y, ref)" },
    { "max", "x = ember.randn(512, 4096); ref, refi = x:max(2)", "y, yi = x:max(2)",
      "ember.equal(y, ref) and ember.equal(yi, refi)" },
    { "argmax", "x = ember.randn(4096, 512); ref = x:argmax(1)", "y = x:argmax(1)", "ember.equal(y, ref)" },
    { "clone", "x = ember.randn(2048, 1024):t(); ref = x + 0", "y = x:clone()", "ember.equal(y, ref)" },
    { "contiguous", "x = ember.randn(2048, 1024):t(); ref = x + 0", "y = x:contiguous()", "ember.equal(y, ref)" },
    { "to", "x = ember.randn(2048, 1024, {dtype = 'float64'}):t(); ref = x:to('float32')", "y = x:to('float32')",
      "ember.equal(y, ref)" },
    { "sort", "x = ember.randn(256, 1024); ref, refi = x:sort(2)", "y, yi = x:sort(2)",
      "ember.equal(y, ref) and ember.equal(yi, refi)" },
    { "argsort", "x = ember.randn(256, 1024); ref = x:argsort(2)", "y = x:argsort(2)", "ember.equal(y, ref)" },
    { "convolution",
      "x = ember.randn(8, 4, 64, 64); w = ember.randn(8, 4, 3, 3); ref = ember.nn.functional.conv2d(x, w)",
      "y = ember.nn.functional.conv2d(x, w)", "ember.equal(y, ref)" },
    { "convolution_backward",
      "x = ember.randn(8, 4, 64, 64, {requires_grad = true}); w = ember.randn(8, 4, 3, 3)\n"
      "out = ember.nn.functional.conv2d(x, w):sum()\n"
      "ref = ember.autograd.grad({out}, {x}, {retain_graph = true})[1]",
      "y = ember.autograd.grad({out}, {x}, {retain_graph = true})[1]", "ember.equal(y, ref)" },
    /* Note [Stoppable products]: panels of rows, of columns, the half and
     * integer paths, a folded batch, batches */
    { "mm", "x = ember.randn(1024, 512); w = ember.randn(512, 1024); ref = x:mm(w)", "y = x:mm(w)",
      "ember.equal(y, ref)" },
    { "mm", "x = ember.randn(64, 2048, {dtype = 'float64'}); w = ember.randn(4096, 2048, {dtype = 'float64'}):t()\n"
            "ref = x:mm(w)",
      "y = x:mm(w)", "ember.equal(y, ref)" },
    { "mm", "x = ember.randn(1024, 512):to('bfloat16'); w = ember.randn(512, 1024):to('bfloat16'); ref = x:mm(w)",
      "y = x:mm(w)", "ember.equal(y, ref)" },
    { "mm", "x = ember.randint(-5, 5, {512, 256}); w = ember.randint(-5, 5, {256, 256}); ref = x:mm(w)",
      "y = x:mm(w)", "ember.equal(y, ref)" },
    { "matmul", "x = ember.randn(4, 512, 512); w = ember.randn(512, 512); ref = x:matmul(w)", "y = x:matmul(w)",
      "ember.equal(y, ref)" },
    { "bmm", "x = ember.randn(8, 128, 256); w = ember.randn(8, 256, 128); ref = x:bmm(w)", "y = x:bmm(w)",
      "ember.equal(y, ref)" },
    /* pooling, resampling, padding, index gathers (fresh results) */
    { "max_pool2d_with_indices", "F = ember.nn.functional; x = ember.randn(8, 16, 128, 128); ref, refi = F.max_pool2d(x, 2, {return_indices = true})",
      "y, yi = F.max_pool2d(x, 2, {return_indices = true})", "ember.equal(y, ref) and ember.equal(yi, refi)" },
    { "max_pool2d_with_indices_backward",
      "x = ember.randn(8, 16, 128, 128, {requires_grad = true}); out = (F.max_pool2d(x, 2) * ember.randn(8, 16, 64, 64)):sum()\n"
      "ref = ember.autograd.grad({out}, {x}, {retain_graph = true})[1]",
      "y = ember.autograd.grad({out}, {x}, {retain_graph = true})[1]", "ember.equal(y, ref)" },
    { "avg_pool2d", "x = ember.randn(8, 16, 128, 128); ref = F.avg_pool2d(x, 2)", "y = F.avg_pool2d(x, 2)",
      "ember.equal(y, ref)" },
    { "adaptive_max_pool2d_with_indices", "x = ember.randn(8, 16, 128, 128); ref = F.adaptive_max_pool2d(x, 5)",
      "y = F.adaptive_max_pool2d(x, 5)", "ember.equal(y, ref)" },
    { "interpolate", "x = ember.randn(8, 16, 64, 64); ref = F.interpolate(x, {scale_factor = 2, mode = 'bilinear'})",
      "y = F.interpolate(x, {scale_factor = 2, mode = 'bilinear'})", "ember.equal(y, ref)" },
    { "pad", "x = ember.randn(8, 16, 128, 128); ref = F.pad(x, {2, 2, 2, 2}, 'reflect')",
      "y = F.pad(x, {2, 2, 2, 2}, 'reflect')", "ember.equal(y, ref)" },
    { "index_select", "x = ember.randn(4096, 512); i = ember.randint(1, 4097, {4096}); ref = x:index_select(1, i)",
      "y = x:index_select(1, i)", "ember.equal(y, ref)" },
    { "gather", "x = ember.randn(2048, 1024); i = ember.randint(1, 1025, {2048, 1024}); ref = x:gather(2, i)",
      "y = x:gather(2, i)", "ember.equal(y, ref)" },
    { "embedding", "w = ember.randn(1000, 64); i = ember.randint(1, 1001, {65536}); ref = F.embedding(i, w)",
      "y = F.embedding(i, w)", "ember.equal(y, ref)" },
};

static void stop_points(lua_State *L, int threads) {
    char buf[512];
    snprintf(buf, sizeof buf, "ember.set_num_threads(%d)", threads);
    ck_assert_int_eq(luaL_dostring(L, buf), LUA_OK);
    for (size_t c = 0; c < sizeof stop_cases / sizeof stop_cases[0]; c++) {
        const stop_case *k = &stop_cases[c];
        ck_assert_msg(luaL_dostring(L, k->setup) == LUA_OK, "%s: %s", k->name, lua_tostring(L, -1));
        ck_assert_int_eq(luaL_dostring(L, "y, yi = nil, nil; collectgarbage(); collectgarbage()\n"
                                          "base = ember.memory_stats().allocated"),
                         LUA_OK);
        em_cpu_interrupt_at_stop_point(2);
        int st = luaL_dostring(L, k->op);
        em_cpu_interrupt_at_stop_point(0);
        ck_assert_msg(st != LUA_OK, "%s (%d threads): the op was not interrupted", k->name, threads);
        const char *msg = lua_tostring(L, -1);
        snprintf(buf, sizeof buf, "%s: interrupted", k->name);
        ck_assert_msg(msg && strstr(msg, buf), "%s (%d threads): %s", k->name, threads, msg ? msg : "?");
        lua_settop(L, 0);
        ck_assert_msg(!em_interrupt_pending(), "%s: the interrupt was not consumed", k->name);
        ck_assert_msg(luaL_dostring(L, "assert(y == nil and yi == nil); collectgarbage(); collectgarbage()\n"
                                       "assert(ember.memory_stats().allocated == base, 'a partial result was kept')") ==
                          LUA_OK,
                      "%s (%d threads): %s", k->name, threads, lua_tostring(L, -1));
        snprintf(buf, sizeof buf, "%s\nassert(%s, 'another value after the interrupt')\n"
                                  "x, w, i, y, yi, ref, refi, out = nil; collectgarbage()", k->op, k->same);
        ck_assert_msg(luaL_dostring(L, buf) == LUA_OK, "%s (%d threads): %s", k->name, threads, lua_tostring(L, -1));
    }
    /* out=: the target is left as it was */
    ck_assert_int_eq(luaL_dostring(L, "x = ember.randn(512, 4096); o = ember.full({512}, 7.0)"), LUA_OK);
    em_cpu_interrupt_at_stop_point(2);
    int st = luaL_dostring(L, "ember.sum(x, 2, {out = o})");
    em_cpu_interrupt_at_stop_point(0);
    ck_assert_int_ne(st, LUA_OK);
    ck_assert_ptr_nonnull(strstr(lua_tostring(L, -1), "sum: interrupted"));
    lua_settop(L, 0);
    ck_assert_msg(luaL_dostring(L, "assert(ember.equal(o, ember.full({512}, 7.0)), 'out= was written')\n"
                                   "ember.sum(x, 2, {out = o}); assert(ember.equal(o, x:sum(2)))\n"
                                   "x, o = nil; collectgarbage()") == LUA_OK,
                  "%s", lua_tostring(L, -1));
    /* matmul's out= has no stop point: it finishes, its target whole */
    ck_assert_int_eq(luaL_dostring(L, "x = ember.randn(1024, 512); w = ember.randn(512, 1024); o = ember.empty(0)"),
                     LUA_OK);
    em_cpu_interrupt_at_stop_point(2);
    st = luaL_dostring(L, "ember.matmul(x, w, {out = o})");
    em_cpu_interrupt_at_stop_point(0);
    ck_assert_msg(st == LUA_OK, "matmul out=: %s", lua_tostring(L, -1));
    ck_assert_msg(!em_interrupt_pending(), "matmul out=: an interrupt was raised");
    ck_assert_msg(luaL_dostring(L, "assert((o - x:mm(w)):abs():max():item() < 1e-3, 'out= is not the product')\n"
                                   "x, w, o = nil; collectgarbage()") == LUA_OK,
                  "%s", lua_tostring(L, -1));
}

START_TEST(test_faults_interrupt_at_stop_points) {
    lua_State *L = new_state();
    ck_assert_int_eq(luaL_dostring(L, "threads0 = ember.get_num_threads()"), LUA_OK);
    stop_points(L, 2);
    stop_points(L, 1);
    ck_assert_int_eq(luaL_dostring(L, "ember.set_num_threads(threads0)"), LUA_OK);
    lua_close(L);
}
END_TEST

Suite *make_faults_suite(void) {
    Suite *s = suite_create("faults");
    TCase *tc = tcase_create("alloc");
    tcase_set_timeout(tc, 300);
    tcase_add_test(tc, test_faults_every_allocation_site_fails_cleanly);
    tcase_add_test(tc, test_faults_memory_limit);
    tcase_add_test(tc, test_faults_interrupts);
    tcase_add_test(tc, test_faults_address_space_limit);
    tcase_add_test(tc, test_faults_interrupt_inside_kernel);
    tcase_add_test(tc, test_faults_interrupt_at_stop_points);
    suite_add_tcase(s, tc);
    return s;
}
