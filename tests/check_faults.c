/* check_faults.c -- behaviour under faults (issue: hardening): every
 * allocation site failing in turn (em_memory_fail_after) and the memory cap
 * (em_memory_set_limit). Each failure must reach Lua as a catchable "out of
 * memory" error, the state must stay usable, and when the state closes every
 * storage must be back (the allocator's live bytes return to where they
 * were: a leaked tensor keeps its storage). */
#include <check.h>
#include <lauxlib.h>
#include <lualib.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>

#include "core/em_core.h"
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
};

static lua_State *new_state(void) {
    lua_State *L = luaL_newstate();
    luaL_openlibs(L);
    luaL_requiref(L, "ember", luaopen_ember, 1);
    lua_pop(L, 1);
    return L;
}

START_TEST(test_faults_every_allocation_site_fails_cleanly) {
    em_memory_empty_cache();
    em_memory_stats before;
    em_memory_get_stats(&before);
    lua_State *L = new_state();
    lua_gc(L, LUA_GCCOLLECT, 0);
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
            lua_gc(L, LUA_GCCOLLECT, 0);
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

Suite *make_faults_suite(void) {
    Suite *s = suite_create("faults");
    TCase *tc = tcase_create("alloc");
    tcase_set_timeout(tc, 300);
    tcase_add_test(tc, test_faults_every_allocation_site_fails_cleanly);
    tcase_add_test(tc, test_faults_memory_limit);
    tcase_add_test(tc, test_faults_interrupts);
    suite_add_tcase(s, tc);
    return s;
}
