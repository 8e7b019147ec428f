/* check_embed.c -- the public C API of ember.h: states, running code and
 * its errors, tensors over host memory with deleters, globals and calls,
 * the sandbox and the budgets, DLPack, several states in several threads. */
#include <check.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "ember.h"

static int deleted;
static void count_delete(void *data, void *ctx) {
    (void)data;
    deleted += *(int *)ctx;
}

START_TEST(test_embed_run_and_errors) {
    ember_state *S = ember_open(NULL);
    ck_assert_ptr_nonnull(S);
    ck_assert_int_eq(ember_run_string(S, "x = ember.ones(2) * 3", NULL), 0);
    ck_assert_str_eq(ember_last_error(S), "");
    ember_tensor *x = ember_get_global(S, "x");
    ck_assert_ptr_nonnull(x);
    ck_assert_int_eq(ember_tensor_dtype(x), EMBER_FLOAT32);
    ck_assert_int_eq(ember_tensor_ndim(x), 1);
    ck_assert_int_eq(ember_tensor_sizes(x)[0], 2);
    ck_assert_int_eq(ember_tensor_strides(x)[0], 1);
    ck_assert(((float *)ember_tensor_data(x))[1] == 3.0f);
    /* an error: message and traceback, and the state goes on */
    ck_assert_int_eq(ember_run_string(S, "local function f() error('boom') end\nf()", "=script"), -1);
    ck_assert_ptr_nonnull(strstr(ember_last_error(S), "script:1: boom"));
    ck_assert_ptr_nonnull(strstr(ember_last_error(S), "stack traceback"));
    ck_assert_int_eq(ember_run_string(S, "syntax error here", NULL), -1);
    ck_assert_ptr_nonnull(strstr(ember_last_error(S), "syntax error"));
    ck_assert_int_eq(ember_run_file(S, "/nonexistent/file.lua"), -1);
    ck_assert_ptr_nonnull(strstr(ember_last_error(S), "cannot open"));
    ck_assert_ptr_null(ember_get_global(S, "nosuch"));
    ck_assert_ptr_nonnull(strstr(ember_last_error(S), "nosuch is nil, not a tensor"));
    ck_assert_int_eq(ember_run_string(S, "y = x + 1", NULL), 0);
    /* a tensor the host holds outlives the state */
    ember_close(S);
    ck_assert(((float *)ember_tensor_data(x))[0] == 3.0f);
    ember_tensor_release(x);
    ember_close(NULL);
}
END_TEST

START_TEST(test_embed_host_buffers) {
    float *buf = malloc(4 * sizeof(float));
    for (int i = 0; i < 4; i++) buf[i] = (float)i;
    int one = 1;
    deleted = 0;
    ember_tensor *t = ember_tensor_wrap(buf, EMBER_FLOAT32, 2, (int64_t[]){ 2, 2 }, NULL, count_delete, &one);
    ck_assert_ptr_nonnull(t);
    ember_state *S = ember_open(NULL);
    ck_assert_int_eq(ember_set_global(S, "w", t), 0);
    /* Lua writes in place: the host sees it, no copy */
    ck_assert_int_eq(ember_run_string(S, "w:mul_(10); s = w:sum()", NULL), 0);
    ck_assert(buf[3] == 30.0f);
    ember_tensor *s = ember_get_global(S, "s");
    ck_assert(*(float *)ember_tensor_data(s) == 60.0f);
    ember_tensor_release(s);
    /* dotted globals into tables */
    ck_assert_int_eq(ember_run_string(S, "model = {}", NULL), 0);
    ck_assert_int_eq(ember_set_global(S, "model.w", t), 0);
    ck_assert_int_eq(ember_run_string(S, "assert(model.w[{2, 2}]:item() == 30)", NULL), 0);
    ck_assert_int_eq(ember_set_global(S, "nosuch.w", t), -1);
    ck_assert_ptr_nonnull(strstr(ember_last_error(S), "not a table"));
    ember_close(S);
    ck_assert_int_eq(deleted, 0); /* the host still holds t */
    ember_tensor_release(t);
    ck_assert_int_eq(deleted, 1); /* the last reference: the deleter ran once */
    free(buf);
    /* strides in elements, and a transposed view */
    double m[6] = { 1, 2, 3, 4, 5, 6 };
    ember_tensor *mt = ember_tensor_wrap(m, EMBER_FLOAT64, 2, (int64_t[]){ 3, 2 }, (int64_t[]){ 1, 3 }, NULL, NULL);
    S = ember_open(NULL);
    ember_set_global(S, "m", mt);
    ck_assert_int_eq(ember_run_string(S, "assert(m[{1, 2}]:item() == 4 and m:sum():item() == 21)", NULL), 0);
    ember_close(S);
    ember_tensor_release(mt);
    /* bad arguments are errors, not crashes */
    ck_assert_ptr_null(ember_tensor_wrap(m, (ember_dtype)42, 1, (int64_t[]){ 6 }, NULL, NULL, NULL));
    ck_assert_ptr_null(ember_tensor_wrap(m, EMBER_FLOAT64, 1, (int64_t[]){ -1 }, NULL, NULL, NULL));
    ck_assert_ptr_null(ember_tensor_wrap(NULL, EMBER_FLOAT64, 1, (int64_t[]){ 6 }, NULL, NULL, NULL));
    /* zero elements: the deleter still runs (at once) */
    deleted = 0;
    ember_tensor *e = ember_tensor_wrap(NULL, EMBER_FLOAT32, 1, (int64_t[]){ 0 }, NULL, count_delete, &one);
    ck_assert_ptr_nonnull(e);
    ember_tensor_release(e);
    ck_assert_int_eq(deleted, 1);
}
END_TEST

START_TEST(test_embed_calls) {
    ember_state *S = ember_open(NULL);
    ck_assert_int_eq(ember_run_string(S, "function f(a, b) return a + b, (a * b):sum(), nil, 7 end\n"
                                         "lib = { g = function(a) return a * 2 end }\n"
                                         "function bad() return 'text' end",
                                      NULL), 0);
    ember_tensor *a = ember_tensor_zeros(EMBER_FLOAT32, 1, (int64_t[]){ 3 });
    ember_tensor *b = ember_tensor_zeros(EMBER_FLOAT32, 1, (int64_t[]){ 3 });
    for (int i = 0; i < 3; i++) {
        ((float *)ember_tensor_data(a))[i] = (float)(i + 1);
        ((float *)ember_tensor_data(b))[i] = 2.0f;
    }
    ember_tensor *out[4];
    ck_assert_int_eq(ember_call(S, "f", 2, (ember_tensor *[]){ a, b }, 4, out), 0);
    ck_assert(((float *)ember_tensor_data(out[0]))[2] == 5.0f);
    ck_assert(*(float *)ember_tensor_data(out[1]) == 12.0f);
    ck_assert_ptr_null(out[2]);
    ck_assert_int_eq(ember_tensor_dtype(out[3]), EMBER_INT64);
    ck_assert(*(int64_t *)ember_tensor_data(out[3]) == 7);
    for (int i = 0; i < 4; i++) ember_tensor_release(out[i]);
    ck_assert_int_eq(ember_call(S, "lib.g", 1, &a, 1, out), 0);
    ck_assert(((float *)ember_tensor_data(out[0]))[0] == 2.0f);
    ember_tensor_release(out[0]);
    ck_assert_int_eq(ember_call(S, "bad", 0, NULL, 1, out), -1);
    ck_assert_ptr_nonnull(strstr(ember_last_error(S), "result 1 of bad is string"));
    ck_assert_ptr_null(out[0]);
    ck_assert_int_eq(ember_call(S, "nosuch", 0, NULL, 0, NULL), -1);
    ck_assert_ptr_nonnull(strstr(ember_last_error(S), "not a function"));
    ck_assert_int_eq(ember_call(S, "f", 2, (ember_tensor *[]){ a, NULL }, 1, out), -1);
    ck_assert_ptr_nonnull(strstr(ember_last_error(S), "argument 2 is NULL"));
    /* an error inside: its message and traceback */
    ember_tensor *z4 = ember_tensor_zeros(EMBER_FLOAT32, 1, (int64_t[]){ 4 }); /* in[] is borrowed */
    ck_assert_int_eq(ember_call(S, "f", 2, (ember_tensor *[]){ a, z4 }, 1, out), -1);
    ck_assert_ptr_nonnull(strstr(ember_last_error(S), "cannot broadcast"));
    ember_tensor_release(z4);
    /* autograd from C: a gradient read back */
    ck_assert_int_eq(ember_run_string(S, "w = ember.tensor({1.0, 2.0, 3.0}, {requires_grad = true})\n"
                                         "function step(x) local l = (w * x):sum(); l:backward(); return l end",
                                      NULL), 0);
    ck_assert_msg(ember_call(S, "step", 1, (ember_tensor *[]){ b }, 1, out) == 0, "%s", ember_last_error(S));
    ember_tensor_release(out[0]);
    ember_tensor *w = ember_get_global(S, "w");
    ember_tensor *g = ember_tensor_grad(w);
    ck_assert_ptr_nonnull(g);
    ck_assert(((float *)ember_tensor_data(g))[1] == 2.0f);
    ember_tensor_release(g);
    ember_tensor_release(w);
    ember_tensor_release(a);
    ember_tensor_release(b);
    ember_close(S);
}
END_TEST

START_TEST(test_embed_sandbox_and_budgets) {
    ember_options o = { .sandbox = 1, .instruction_limit = 2000000 };
    ember_state *S = ember_open(&o);
    ck_assert_ptr_nonnull(S);
    ck_assert_int_eq(ember_run_string(S, "assert(io == nil and debug == nil and dofile == nil and loadfile == nil)\n"
                                         "assert(os.execute == nil and os.remove == nil and os.clock ~= nil)\n"
                                         "assert(string.dump == nil and package.loadlib == nil)\n"
                                         "assert(require('ember.autograd') == ember.autograd)\n"
                                         "assert(not pcall(require, 'socket'))\n"
                                         "assert(load('return 1')() == 1)\n"
                                         "assert(ember.save == nil and ember.load == nil and ember.load_npz == nil)\n"
                                         /* process-wide settings stay the host's (docs/SANDBOX.md) */
                                         "assert(ember.set_memory_limit == nil and ember.set_num_threads == nil)\n"
                                         "assert(ember.get_memory_limit ~= nil and ember.get_num_threads ~= nil)\n"
                                         /* no finalizers: they would run outside the budgets */
                                         "assert(not pcall(setmetatable, {}, {__gc = function() end}))\n"
                                         "local mt = {}; local o = setmetatable({}, mt); assert(getmetatable(o) == mt)\n"
                                         "mt.__gc = function() while true do end end; o = nil; collectgarbage()\n"
                                         "x = (ember.ones(3) * 2):sum()",
                                      NULL), 0);
    /* a binary chunk is refused by load and by ember_run_string */
    ck_assert_int_eq(ember_run_string(S, "assert(load('\\27Lua') == nil)", NULL), 0);
    ck_assert_int_eq(ember_run_string(S, "\033Lua...", NULL), -1);
    /* the instruction budget: an error, then the state works again */
    ck_assert_int_eq(ember_run_string(S, "while true do end", NULL), -1);
    ck_assert_ptr_nonnull(strstr(ember_last_error(S), "instruction budget exceeded"));
    ck_assert_int_eq(ember_run_string(S, "for i = 1, 1000 do end", NULL), 0);
    /* a script cannot catch its way past the budget for long */
    ck_assert_int_eq(ember_run_string(S, "while true do pcall(function() while true do end end) end", NULL), -1);
    ember_close(S);

    ember_options ot = { .time_limit = 0.2 };
    S = ember_open(&ot);
    ck_assert_int_eq(ember_run_string(S, "while true do end", NULL), -1);
    ck_assert_ptr_nonnull(strstr(ember_last_error(S), "time budget exceeded"));
    ember_close(S);

    ember_options om = { .memory_limit = 8u << 20 };
    S = ember_open(&om);
    ck_assert_ptr_nonnull(S);
    ck_assert_int_eq(ember_run_string(S, "local t = {} for i = 1, 1e8 do t[i] = {i} end", NULL), -1);
    ck_assert_ptr_nonnull(strstr(ember_last_error(S), "not enough memory"));
    ck_assert_int_eq(ember_run_string(S, "collectgarbage(); y = ember.ones(2):sum()", NULL), 0);
    ember_close(S);
}
END_TEST

static int dl_deleted;
static void dl_deleter(DLManagedTensor *m) {
    dl_deleted++;
    free(m);
}

START_TEST(test_embed_dlpack) {
    ember_state *S = ember_open(NULL);
    ck_assert_int_eq(ember_run_string(S, "x = ember.arange(6):view(2, 3):t()", NULL), 0);
    ember_tensor *x = ember_get_global(S, "x");
    DLManagedTensor *m = ember_to_dlpack(x);
    ck_assert_ptr_nonnull(m);
    ck_assert_int_eq(m->dl_tensor.ndim, 2);
    ck_assert_int_eq(m->dl_tensor.shape[0], 3);
    ck_assert_int_eq(m->dl_tensor.strides[0], 1);
    ck_assert_int_eq(m->dl_tensor.strides[1], 3);
    ck_assert_int_eq(m->dl_tensor.dtype.code, kDLInt);
    ck_assert_int_eq(m->dl_tensor.dtype.bits, 64);
    ck_assert_int_eq(m->dl_tensor.device.device_type, kDLCPU);
    /* back into ember: the same memory, and the export's deleter at the end */
    ember_tensor *y = ember_from_dlpack(m);
    ck_assert_ptr_nonnull(y);
    ck_assert_ptr_eq(ember_tensor_data(y), ember_tensor_data(x));
    ember_set_global(S, "y", y);
    ck_assert_int_eq(ember_run_string(S, "assert((y - x):abs():sum():item() == 0); y[{1, 2}] = 100; assert(x[{1, 2}]:item() == 100)", NULL),
                     0);
    ember_tensor_release(y);
    ember_close(S); /* Lua's reference to y goes: its deleter releases x's export */
    ember_tensor_release(x);
    /* an import with an unsupported dtype or device is refused; m stays the caller's */
    DLManagedTensor *bad = calloc(1, sizeof *bad);
    float f = 1;
    bad->dl_tensor = (DLTensor){ &f, { kDLCPU, 0 }, 0, { kDLFloat, 32, 4 }, NULL, NULL, 0 };
    bad->deleter = dl_deleter;
    dl_deleted = 0;
    ck_assert_ptr_null(ember_from_dlpack(bad));
    bad->dl_tensor.dtype.lanes = 1;
    bad->dl_tensor.device.device_type = kDLCUDA;
    ck_assert_ptr_null(ember_from_dlpack(bad));
    bad->dl_tensor.device.device_type = kDLCPU;
    ember_tensor *z = ember_from_dlpack(bad); /* a 0-dim float */
    ck_assert_ptr_nonnull(z);
    ck_assert(*(float *)ember_tensor_data(z) == 1.0f);
    ck_assert_int_eq(dl_deleted, 0);
    ember_tensor_release(z);
    ck_assert_int_eq(dl_deleted, 1);

    /* DLPack 1.0's versioned struct, both ways */
    ember_tensor *v = ember_tensor_zeros(EMBER_FLOAT64, 1, (int64_t[]){ 3 });
    DLManagedTensorVersioned *mv = ember_to_dlpack_versioned(v);
    ck_assert_ptr_nonnull(mv);
    ck_assert_int_eq(mv->version.major, 1);
    ck_assert_int_eq(mv->dl_tensor.dtype.code, kDLFloat);
    ck_assert_int_eq(mv->dl_tensor.shape[0], 3);
    ember_tensor *v2 = ember_from_dlpack_versioned(mv);
    ck_assert_ptr_eq(ember_tensor_data(v2), ember_tensor_data(v));
    ember_tensor_release(v);
    ((double *)ember_tensor_data(v2))[2] = 5; /* still alive through the export */
    ember_tensor_release(v2);
    DLManagedTensorVersioned ro = { { 1, 0 }, NULL, NULL, DLPACK_FLAG_BITMASK_READ_ONLY,
                                    { &f, { kDLCPU, 0 }, 0, { kDLFloat, 32, 1 }, NULL, NULL, 0 } };
    ck_assert_ptr_null(ember_from_dlpack_versioned(&ro));
    ro.flags = 0;
    ro.version.major = 2;
    ck_assert_ptr_null(ember_from_dlpack_versioned(&ro));
    ck_assert_ptr_nonnull(strstr(ember_error_message(), "major version 2"));
}
END_TEST

/* A backward started from C runs the Lua hooks and custom Functions of the
 * state that made them (Note [Lua callbacks from the engine]). */
START_TEST(test_embed_backward_from_c_runs_lua) {
    ember_state *S = ember_open(NULL);
    ck_assert_int_eq(ember_run_string(S,
                                      "seen = 0\n"
                                      "w = ember.ones(2, {requires_grad = true})\n"
                                      "w:register_hook(function(g) seen = seen + 1; return g * 2 end)\n"
                                      "local Cube = ember.autograd.Function{\n"
                                      "  forward = function(ctx, a) ctx:save_for_backward(a); return a * a * a end,\n"
                                      "  backward = function(ctx, g) local a = ctx.saved_tensors[1]; return g * 3 * a * a end}\n"
                                      "y = Cube(w * 2):sum()\n"
                                      "bad = (w * ember.autograd.Function{forward = function(ctx, a) return a end,\n"
                                      "  backward = function(ctx, g) error('no way back') end}(w)):sum()",
                                      NULL), 0);
    ember_tensor *y = ember_get_global(S, "y");
    ck_assert_msg(ember_backward(y, NULL, 0) == 0, "%s", ember_error_message());
    /* d/dw sum((2w)^3) = 24 w^2 = 24, doubled by the hook */
    ck_assert_int_eq(ember_run_string(S, "assert(seen == 1, seen); assert(w.grad[1]:item() == 48, tostring(w.grad))", NULL), 0);
    ck_assert_int_eq(ember_backward(y, NULL, 0), -1); /* the graph was freed */
    ember_tensor_release(y);
    ember_tensor *bad = ember_get_global(S, "bad");
    ck_assert_int_eq(ember_backward(bad, NULL, 0), -1);
    ck_assert_ptr_nonnull(strstr(ember_error_message(), "no way back"));
    ember_close(S);
    /* the state is gone: its hooks cannot run, and say so */
    ck_assert_int_eq(ember_backward(bad, NULL, 0), -1);
    ember_tensor_release(bad);
    ck_assert_int_eq(ember_backward(NULL, NULL, 0), -1);
}
END_TEST

/* Each thread trains y = 2x + 1 in its own state. */
static void *train(void *arg) {
    (void)arg;
    ember_state *S = ember_open(NULL);
    if (!S) return (void *)"open";
    const char *code =
        "local x = ember.arange(8, {dtype = 'float64'}) / 8\n"
        "local y = x * 2 + 1\n"
        "w = ember.zeros(1, {dtype = 'float64', requires_grad = true})\n"
        "b = ember.zeros(1, {dtype = 'float64', requires_grad = true})\n"
        "for i = 1, 2000 do\n"
        "  local loss = ((x * w + b - y) ^ 2):mean()\n"
        "  loss:backward()\n"
        "  ember.no_grad(function() w:sub_(w.grad * 0.5); b:sub_(b.grad * 0.5) end)\n"
        "  w.grad:zero_(); b.grad:zero_()\n"
        "end\n"
        "assert(math.abs(w:item() - 2) < 1e-3 and math.abs(b:item() - 1) < 1e-3, tostring(w) .. tostring(b))";
    const char *r = ember_run_string(S, code, "=train") == 0 ? NULL : strdup(ember_last_error(S));
    ember_close(S);
    return (void *)r;
}

START_TEST(test_embed_states_in_threads) {
    pthread_t th[4];
    for (int i = 0; i < 4; i++) ck_assert_int_eq(pthread_create(&th[i], NULL, train, NULL), 0);
    for (int i = 0; i < 4; i++) {
        void *r;
        pthread_join(th[i], &r);
        ck_assert_msg(r == NULL, "thread %d: %s", i, r ? (const char *)r : "");
    }
}
END_TEST

Suite *make_embed_suite(void) {
    Suite *s = suite_create("embed");
    TCase *tc = tcase_create("api");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test_embed_run_and_errors);
    tcase_add_test(tc, test_embed_host_buffers);
    tcase_add_test(tc, test_embed_calls);
    tcase_add_test(tc, test_embed_sandbox_and_budgets);
    tcase_add_test(tc, test_embed_dlpack);
    tcase_add_test(tc, test_embed_states_in_threads);
    tcase_add_test(tc, test_embed_backward_from_c_runs_lua);
    suite_add_tcase(s, tc);
    return s;
}
