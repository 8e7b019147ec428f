/* check_dispatch.c -- Check suite for runtime/dispatch: key selection,
 * registration from outside runtime/, fallthrough, boxed fallbacks, TLS sets. */
#include <check.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "dispatch/em_dispatch.h"
#include "em_ops.h"

static em_tensor *vec(int n, float v) {
    int64_t sizes[1] = { n };
    em_tensor *t = em_tensor_new(1, sizes, EM_FLOAT32, em_cpu_device());
    ck_assert_ptr_nonnull(t);
    float *d = em_tensor_data(t);
    for (int i = 0; i < n; i++) d[i] = v;
    return t;
}

/* ---- an out-of-tree backend: registered here, not in runtime/ ---- */

static int extra_calls;
static em_keyset extra_seen_ks;

static em_tensor *extra_add(em_keyset ks, em_tensor *self, em_tensor *other, em_scalar alpha) {
    extra_calls++;
    extra_seen_ks = ks;
    return em_tensor_retain(self);
}

/* A backend kernel that does its bookkeeping and then redispatches below. */
static em_tensor *extra_add_below(em_keyset ks, em_tensor *self, em_tensor *other, em_scalar alpha) {
    extra_calls++;
    return em_redispatch_add(ks & em_keys_below(EM_KEY_PRIVATEUSE1), self, other, alpha);
}

static void register_extra(void *fn) {
    em_op *add = em_disp_find_op("add");
    ck_assert_ptr_nonnull(add);
    ck_assert_int_eq(em_disp_register_kernel(add, EM_KEY_PRIVATEUSE1, fn), EM_OK);
}

START_TEST(test_dispatch_find_op) {
    em_op *add = em_disp_find_op("add");
    ck_assert_ptr_nonnull(add);
    ck_assert_int_eq(add->id, EM_OP_add);
    ck_assert_ptr_eq(em_disp_op(EM_OP_add), add);
    ck_assert_int_eq(em_disp_op_count(), EM_OP_COUNT);
    ck_assert_ptr_null(em_disp_find_op("no_such_op"));
    ck_assert_int_eq(em_error_kind(), EM_EVALUE);
    ck_assert_ptr_null(em_disp_op(EM_OP_COUNT));
}
END_TEST

START_TEST(test_dispatch_cpu_route) {
    em_tensor *a = vec(3, 1.0f), *b = vec(3, 2.0f);
    em_tensor *c = em_add(a, b, em_scalar_int(1));
    ck_assert_ptr_nonnull(c);
    ck_assert_float_eq(((float *)em_tensor_data(c))[2], 3.0f);
    em_tensor_release(a); em_tensor_release(b); em_tensor_release(c);
}
END_TEST

START_TEST(test_dispatch_extra_backend) {
    register_extra((void *)extra_add);
    em_tensor *a = vec(3, 1.0f), *b = vec(3, 2.0f);
    /* plain CPU tensors still go to the CPU kernel */
    em_tensor *c = em_add(a, b, em_scalar_int(1));
    ck_assert_int_eq(extra_calls, 0);
    em_tensor_release(c);
    /* a tensor carrying the extra backend's key routes there */
    a->keyset |= EM_KS(EM_KEY_PRIVATEUSE1);
    c = em_add(a, b, em_scalar_int(1));
    ck_assert_int_eq(extra_calls, 1);
    ck_assert_ptr_eq(c, a);
    ck_assert(extra_seen_ks & EM_KS(EM_KEY_PRIVATEUSE1));
    ck_assert(extra_seen_ks & EM_KS(EM_KEY_CPU));
    em_tensor_release(c);
    /* the other argument's key set counts too */
    c = em_add(b, a, em_scalar_int(1));
    ck_assert_int_eq(extra_calls, 2);
    em_tensor_release(c);
    /* after deregistering, the key has nothing and the call falls to CPU */
    em_disp_deregister_kernel(em_disp_find_op("add"), EM_KEY_PRIVATEUSE1);
    c = em_add(a, b, em_scalar_int(1));
    ck_assert_int_eq(extra_calls, 2);
    ck_assert_float_eq(((float *)em_tensor_data(c))[0], 3.0f);
    em_tensor_release(a); em_tensor_release(b); em_tensor_release(c);
}
END_TEST

START_TEST(test_dispatch_tls_include_exclude) {
    register_extra((void *)extra_add);
    em_tensor *a = vec(2, 1.0f), *b = vec(2, 2.0f);
    em_disp_tls_keys.include = EM_KS(EM_KEY_PRIVATEUSE1);
    em_tensor *c = em_add(a, b, em_scalar_int(1));
    ck_assert_int_eq(extra_calls, 1);
    em_tensor_release(c);
    em_disp_tls_keys.exclude = EM_KS(EM_KEY_PRIVATEUSE1);
    c = em_add(a, b, em_scalar_int(1));
    ck_assert_int_eq(extra_calls, 1); /* excluded wins over included */
    em_tensor_release(c);
    em_disp_tls_keys.include = em_disp_tls_keys.exclude = 0;
    em_tensor_release(a); em_tensor_release(b);
}
END_TEST

START_TEST(test_dispatch_fallthrough) {
    register_extra((void *)extra_add);
    em_op *add = em_disp_find_op("add");
    ck_assert_int_eq(em_disp_register_fallthrough(add, EM_KEY_PRIVATEUSE1), EM_OK);
    em_tensor *a = vec(2, 1.0f), *b = vec(2, 2.0f);
    a->keyset |= EM_KS(EM_KEY_PRIVATEUSE1);
    em_tensor *c = em_add(a, b, em_scalar_int(1));
    ck_assert_int_eq(extra_calls, 0);
    ck_assert_float_eq(((float *)em_tensor_data(c))[1], 3.0f);
    em_tensor_release(a); em_tensor_release(b); em_tensor_release(c);
}
END_TEST

START_TEST(test_dispatch_redispatch_below) {
    register_extra((void *)extra_add_below);
    em_tensor *a = vec(2, 1.0f), *b = vec(2, 5.0f);
    a->keyset |= EM_KS(EM_KEY_PRIVATEUSE1);
    em_tensor *c = em_add(a, b, em_scalar_int(2));
    ck_assert_int_eq(extra_calls, 1);
    ck_assert_ptr_nonnull(c);
    ck_assert_float_eq(((float *)em_tensor_data(c))[1], 11.0f);
    em_tensor_release(a); em_tensor_release(b); em_tensor_release(c);
}
END_TEST

/* ---- a boxed fallback (tracing) ---- */

static char traced[8][32];
static int ntraced;

static em_status trace_fallback(const em_op *op, em_keyset ks, em_stack *st, void *ud) {
    ck_assert_ptr_eq(ud, (void *)traced);
    if (ntraced < 8) snprintf(traced[ntraced++], 32, "%s/%d", op->name, st->nargs);
    return em_disp_call_boxed(op, ks & em_keys_below(EM_KEY_TRACE), st);
}

/* Several results, Tensor[] arguments and Tensor[] results through a boxed
 * fallback: every result comes back (Note [Several results]). */
START_TEST(test_dispatch_boxed_multi_results) {
    ck_assert_int_eq(em_disp_register_fallback(EM_KEY_TRACE, trace_fallback, traced), EM_OK);
    ntraced = 0;
    em_tensor *a = vec(3, 0.0f);
    float *ad = em_tensor_data(a);
    ad[0] = 3.0f; ad[1] = 1.0f; ad[2] = 2.0f;
    em_tensor *idx = NULL;
    em_disp_tls_keys.include = EM_KS(EM_KEY_TRACE);
    em_tensor *v = em_sort(a, -1, false, false, &idx);
    em_tensor *parts[2] = { a, a };
    em_tensor *c = em_cat((em_tensorlist){ parts, 2 }, 0);
    int n = -1;
    em_tensor **pieces = em_split(a, 2, 0, &n);
    em_disp_tls_keys.include = 0;
    em_disp_register_fallback(EM_KEY_TRACE, NULL, NULL);
    ck_assert_int_eq(ntraced, 3);
    ck_assert_str_eq(traced[0], "sort/4");
    ck_assert_str_eq(traced[1], "cat/2");
    ck_assert_str_eq(traced[2], "split/3");
    ck_assert_ptr_nonnull(v);
    ck_assert_ptr_nonnull(idx);
    ck_assert_float_eq(((float *)em_tensor_data(v))[0], 1.0f);
    ck_assert_int_eq(idx->dtype, EM_INT64);
    const int64_t *id = em_tensor_data(idx);
    ck_assert(id[0] == 2 && id[1] == 3 && id[2] == 1); /* 1-based */
    ck_assert_ptr_nonnull(c);
    ck_assert_int_eq((int)c->numel, 6);
    ck_assert_ptr_nonnull(pieces);
    ck_assert_int_eq(n, 2);
    ck_assert_int_eq((int)pieces[0]->numel, 2);
    ck_assert_int_eq((int)pieces[1]->numel, 1);
    ck_assert_ptr_eq(pieces[1]->view_base, a); /* views of a */
    em_tensors_free(pieces, n);
    em_tensor_release(v); em_tensor_release(idx); em_tensor_release(c);
    em_tensor_release(a);
}
END_TEST

/* The C API of multi-result and list ops: errors leave out-parameters NULL
 * and name the op; list elements are checked. */
START_TEST(test_dispatch_multi_result_errors) {
    em_tensor *a = vec(3, 1.0f);
    em_tensor *idx = (em_tensor *)(uintptr_t)1; /* reset by the entry */
    ck_assert_ptr_null(em_topk(a, 4, 0, true, true, &idx));
    ck_assert_ptr_null(idx);
    ck_assert_ptr_nonnull(strstr(em_error_message(), "topk: k (4) is out of range"));
    em_clear_error();
    ck_assert_ptr_null(em_sort(a, 0, false, false, NULL));
    ck_assert_ptr_nonnull(strstr(em_error_message(), "sort: out-parameter 'indices' is NULL"));
    em_clear_error();
    em_tensor *parts[2] = { a, NULL };
    ck_assert_ptr_null(em_cat((em_tensorlist){ parts, 2 }, 0));
    ck_assert_ptr_nonnull(strstr(em_error_message(), "cat: argument 'tensors' element 2 is NULL"));
    em_clear_error();
    int n = 7;
    ck_assert_ptr_null(em_split(a, -1, 0, &n));
    ck_assert_int_eq(n, 0);
    ck_assert_ptr_nonnull(strstr(em_error_message(), "split: split_size must be non-negative"));
    em_clear_error();
    ck_assert_ptr_null(em_searchsorted(a, a, "middle"));
    ck_assert_ptr_nonnull(strstr(em_error_message(), "searchsorted: argument 'side' must be one of: left, right (got 'middle')"));
    em_clear_error();
    em_tensor_release(a);
}
END_TEST

START_TEST(test_dispatch_boxed_fallback) {
    ck_assert_int_eq(em_disp_register_fallback(EM_KEY_TRACE, trace_fallback, traced), EM_OK);
    em_tensor *a = vec(4, 3.0f), *b = vec(4, 2.0f);
    em_disp_tls_keys.include = EM_KS(EM_KEY_TRACE);
    em_tensor *c = em_mul(a, b);
    em_tensor *d = em_sum(c, (em_intlist){ NULL, -1 }, false, EM_DTYPE_NONE);
    em_disp_tls_keys.include = 0;
    ck_assert_ptr_nonnull(c);
    ck_assert_ptr_nonnull(d);
    ck_assert_int_eq(ntraced, 2);
    ck_assert_str_eq(traced[0], "mul/2");
    ck_assert_str_eq(traced[1], "sum/4");
    ck_assert_float_eq(((float *)em_tensor_data(c))[0], 6.0f);
    ck_assert_float_eq(((float *)em_tensor_data(d))[0], 24.0f);
    /* without the key in the TLS include set the fallback is not involved */
    em_tensor *e = em_mul(a, b);
    ck_assert_int_eq(ntraced, 2);
    em_disp_register_fallback(EM_KEY_TRACE, NULL, NULL);
    em_tensor_release(a); em_tensor_release(b); em_tensor_release(c);
    em_tensor_release(d); em_tensor_release(e);
}
END_TEST

START_TEST(test_dispatch_no_kernel_is_error) {
    em_tensor *a = vec(2, 1.0f), *b = vec(2, 2.0f);
    a->keyset = EM_KS(EM_KEY_CUDA); /* no CUDA kernels exist yet */
    b->keyset = EM_KS(EM_KEY_CUDA);
    em_tensor *c = em_add(a, b, em_scalar_int(1));
    ck_assert_ptr_null(c);
    ck_assert_int_eq(em_error_kind(), EM_EDEVICE);
    ck_assert_ptr_nonnull(strstr(em_error_message(), "add"));
    em_tensor_release(a); em_tensor_release(b);
}
END_TEST

START_TEST(test_dispatch_bad_registration) {
    em_op *add = em_disp_find_op("add");
    ck_assert_int_ne(em_disp_register_kernel(add, EM_KEY_COUNT, (void *)extra_add), EM_OK);
    ck_assert_int_ne(em_disp_register_kernel(NULL, EM_KEY_CPU, (void *)extra_add), EM_OK);
    ck_assert_int_ne(em_disp_register_fallback((em_dispatch_key)-1, trace_fallback, NULL), EM_OK);
}
END_TEST

START_TEST(test_dispatch_null_argument) {
    em_tensor *a = vec(2, 1.0f);
    ck_assert_ptr_null(em_add(a, NULL, em_scalar_int(1)));
    ck_assert_ptr_nonnull(strstr(em_error_message(), "add"));
    em_tensor_release(a);
}
END_TEST

Suite *make_dispatch_suite(void) {
    Suite *s = suite_create("dispatch");
    TCase *tc = tcase_create("core");
    tcase_add_test(tc, test_dispatch_find_op);
    tcase_add_test(tc, test_dispatch_cpu_route);
    tcase_add_test(tc, test_dispatch_extra_backend);
    tcase_add_test(tc, test_dispatch_tls_include_exclude);
    tcase_add_test(tc, test_dispatch_fallthrough);
    tcase_add_test(tc, test_dispatch_redispatch_below);
    tcase_add_test(tc, test_dispatch_boxed_fallback);
    tcase_add_test(tc, test_dispatch_boxed_multi_results);
    tcase_add_test(tc, test_dispatch_multi_result_errors);
    suite_add_tcase(s, tc);
    TCase *te = tcase_create("errors");
    tcase_add_test(te, test_dispatch_no_kernel_is_error);
    tcase_add_test(te, test_dispatch_bad_registration);
    tcase_add_test(te, test_dispatch_null_argument);
    suite_add_tcase(s, te);
    return s;
}
