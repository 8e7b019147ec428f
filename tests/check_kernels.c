/* check_kernels.c -- Check suite for runtime/kernels: the tensor iterator,
 * elementwise ops, reductions, copies, factories, random, mm/matmul, views. */
#include <check.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/em_core.h"
#include "dispatch/em_dispatch.h"
#include "kernels/cpu/em_cpu.h"

#define KS EM_KS(EM_KEY_CPU)
#define SZ(...) ((const int64_t[]){ __VA_ARGS__ })
#define N(...) (int)(sizeof((int64_t[]){ __VA_ARGS__ }) / sizeof(int64_t))
#define IL(...) ((em_intlist){ (const int64_t[]){ __VA_ARGS__ }, N(__VA_ARGS__) })
#define NODIM ((em_intlist){ NULL, -1 })
#define ONE em_scalar_int(1)

/* ---- helpers ---- */

/* A tensor whose i-th element (row-major) is f(i). */
static em_tensor *mk(em_dtype dt, int n, const int64_t *sizes, double (*f)(int64_t)) {
    em_tensor *t = em_tensor_new(n, sizes, dt, em_cpu_device());
    ck_assert_ptr_nonnull(t);
    size_t es = em_dtype_size(dt);
    for (int64_t i = 0; i < t->numel; i++) em_store_from_double((char *)em_tensor_data(t) + i * es, dt, f(i));
    return t;
}

/* Element i of t in row-major order, any layout. */
static double at(const em_tensor *t, int64_t i) {
    int64_t off = 0;
    for (int d = t->ndim - 1; d >= 0; d--) {
        off += (i % t->sizes[d]) * t->strides[d];
        i /= t->sizes[d];
    }
    return em_load_as_double((const char *)em_tensor_data(t) + off * (int64_t)em_dtype_size(t->dtype), t->dtype);
}

static void assert_shape(const em_tensor *t, int n, const int64_t *sizes) {
    ck_assert_int_eq(t->ndim, n);
    for (int d = 0; d < n; d++) ck_assert_int_eq(t->sizes[d], sizes[d]);
}

static em_tensor *wrapped(em_scalar s) {
    em_tensor *t = em_tensor_new(0, NULL, em_scalar_dtype(s), em_cpu_device());
    if (s.kind == EM_SCALAR_FLOAT) em_store_from_double(em_tensor_data(t), t->dtype, s.v.d);
    else em_store_from_int64(em_tensor_data(t), t->dtype, s.kind == EM_SCALAR_INT ? s.v.i : s.v.b);
    t->wrapped_number = true;
    return t;
}

static void assert_error(em_status kind, const char *substr) {
    ck_assert_int_eq(em_error_kind(), kind);
    ck_assert_msg(strstr(em_error_message(), substr) != NULL, "message '%s' lacks '%s'", em_error_message(), substr);
    em_clear_error();
}

static double f_iota(int64_t i) { return (double)i; }
static double f_small(int64_t i) { return (double)(i % 7) + 1; }
static double f_mixed(int64_t i) { return (double)((i * 37) % 11) - 5; }
static double f_bit(int64_t i) { return (double)(i % 2); }
static double f_bit2(int64_t i) { return (double)((i / 2) % 2); }
static double f_pos(int64_t i) { return 0.25 + (double)(i % 13) * 0.5; }
static double f_ones(int64_t i) { (void)i; return 1.0; }

/* Round v the way dtype stores it. */
static double as_dtype(double v, em_dtype dt) {
    char buf[16];
    em_store_from_double(buf, dt, v);
    return em_load_as_double(buf, dt);
}

/* ---- elementwise ---- */

START_TEST(test_kernels_arith_dtypes)
{
    em_dtype dt = (em_dtype)_i;
    em_tensor *a = mk(dt, 2, SZ(2, 3), dt == EM_BOOL ? f_bit : f_small);
    em_tensor *b = mk(dt, 2, SZ(2, 3), dt == EM_BOOL ? f_bit2 : em_dtype_is_floating(dt) ? f_pos : f_small);
    em_tensor *add = em_cpu_add(KS, a, b, ONE), *mul = em_cpu_mul(KS, a, b);
    ck_assert_ptr_nonnull(add);
    ck_assert_ptr_nonnull(mul);
    ck_assert_int_eq(add->dtype, dt);
    for (int64_t i = 0; i < 6; i++) {
        double x = at(a, i), y = at(b, i);
        ck_assert_double_eq_tol(at(add, i), as_dtype(x + y, dt), 1e-2);
        ck_assert_double_eq_tol(at(mul, i), as_dtype(x * y, dt), 1e-2);
    }
    if (dt != EM_BOOL) {
        em_tensor *sub = em_cpu_sub(KS, a, b, em_scalar_int(2));
        ck_assert_ptr_nonnull(sub);
        for (int64_t i = 0; i < 6; i++)
            if (dt != EM_UINT8) ck_assert_double_eq_tol(at(sub, i), as_dtype(at(a, i) - 2 * at(b, i), dt), 1e-2);
        em_tensor_release(sub);
    } else {
        ck_assert_ptr_null(em_cpu_sub(KS, a, b, ONE));
        assert_error(EM_ETYPE, "sub");
    }
    em_tensor *dv = em_cpu_div(KS, a, b);
    if (dt == EM_BOOL) { /* division by false gives inf/nan; only dtype matters */
        ck_assert_ptr_nonnull(dv);
    } else {
        ck_assert_ptr_nonnull(dv);
        ck_assert_int_eq(dv->dtype, em_dtype_is_floating(dt) ? dt : EM_FLOAT32);
        for (int64_t i = 0; i < 6; i++)
            ck_assert_double_eq_tol(at(dv, i), at(a, i) / at(b, i), em_dtype_size(dt) == 2 ? 1e-2 : 1e-6);
    }
    em_tensor *lt = em_cpu_lt(KS, a, b), *eq = em_cpu_eq(KS, a, a);
    ck_assert_int_eq(lt->dtype, EM_BOOL);
    for (int64_t i = 0; i < 6; i++) {
        ck_assert_int_eq((int)at(lt, i), at(a, i) < at(b, i));
        ck_assert_int_eq((int)at(eq, i), 1);
    }
    em_tensor_release(dv);
    em_tensor_release(lt);
    em_tensor_release(eq);
    em_tensor_release(add);
    em_tensor_release(mul);
    em_tensor_release(a);
    em_tensor_release(b);
}
END_TEST

START_TEST(test_kernels_compare_ops)
{
    em_tensor *a = mk(EM_INT64, 1, SZ(11), f_mixed), *z = wrapped(em_scalar_int(0));
    em_tensor *r[6] = { em_cpu_eq(KS, a, z), em_cpu_ne(KS, a, z), em_cpu_lt(KS, a, z),
                        em_cpu_le(KS, a, z), em_cpu_gt(KS, a, z), em_cpu_ge(KS, a, z) };
    for (int64_t i = 0; i < 11; i++) {
        double x = at(a, i);
        ck_assert_int_eq((int)at(r[0], i), x == 0);
        ck_assert_int_eq((int)at(r[1], i), x != 0);
        ck_assert_int_eq((int)at(r[2], i), x < 0);
        ck_assert_int_eq((int)at(r[3], i), x <= 0);
        ck_assert_int_eq((int)at(r[4], i), x > 0);
        ck_assert_int_eq((int)at(r[5], i), x >= 0);
    }
    for (int k = 0; k < 6; k++) em_tensor_release(r[k]);
    em_tensor_release(a);
    em_tensor_release(z);
}
END_TEST

START_TEST(test_kernels_broadcast)
{
    em_tensor *a = mk(EM_FLOAT32, 3, SZ(2, 1, 3), f_iota), *b = mk(EM_FLOAT32, 2, SZ(4, 1), f_small);
    em_tensor *c = em_cpu_add(KS, a, b, ONE);
    ck_assert_ptr_nonnull(c);
    assert_shape(c, 3, SZ(2, 4, 3));
    for (int64_t i = 0; i < 2; i++)
        for (int64_t j = 0; j < 4; j++)
            for (int64_t k = 0; k < 3; k++)
                ck_assert_double_eq(at(c, (i * 4 + j) * 3 + k), at(a, i * 3 + k) + at(b, j));
    em_tensor *bad = mk(EM_FLOAT32, 1, SZ(5), f_iota);
    ck_assert_ptr_null(em_cpu_add(KS, a, bad, ONE));
    assert_error(EM_ESHAPE, "{2,1,3}");
    em_tensor_release(bad);
    em_tensor_release(c);
    em_tensor_release(a);
    em_tensor_release(b);
}
END_TEST

START_TEST(test_kernels_promotion)
{
    em_tensor *i64 = mk(EM_INT64, 1, SZ(3), f_iota), *f32 = mk(EM_FLOAT32, 1, SZ(3), f_pos);
    em_tensor *i32 = mk(EM_INT32, 1, SZ(3), f_small);
    em_tensor *r = em_cpu_add(KS, i64, f32, ONE);
    ck_assert_int_eq(r->dtype, EM_FLOAT32);
    ck_assert_double_eq(at(r, 2), 2 + 1.25);
    em_tensor_release(r);
    em_tensor *w = wrapped(em_scalar_float(0.5));
    r = em_cpu_add(KS, i64, w, ONE);
    ck_assert_int_eq(r->dtype, EM_FLOAT32);
    ck_assert_double_eq(at(r, 1), 1.5);
    em_tensor_release(r);
    r = em_cpu_mul(KS, w, i32); /* scalar on the left */
    ck_assert_int_eq(r->dtype, EM_FLOAT32);
    ck_assert_double_eq(at(r, 0), 0.5);
    em_tensor_release(r);
    r = em_cpu_add(KS, i32, i64, ONE);
    ck_assert_int_eq(r->dtype, EM_INT64);
    em_tensor_release(r);
    em_tensor *wi = wrapped(em_scalar_int(3));
    r = em_cpu_add(KS, i32, wi, ONE); /* int scalar keeps int32 */
    ck_assert_int_eq(r->dtype, EM_INT32);
    ck_assert_double_eq(at(r, 0), 4);
    em_tensor_release(r);
    em_tensor *d0 = em_tensor_new(0, NULL, EM_FLOAT64, em_cpu_device());
    *(double *)em_tensor_data(d0) = 2;
    r = em_cpu_add(KS, f32, d0, ONE); /* 0-dim float64 does not win over float32 */
    ck_assert_int_eq(r->dtype, EM_FLOAT32);
    em_tensor_release(r);
    r = em_cpu_div(KS, i64, wi);
    ck_assert_int_eq(r->dtype, EM_FLOAT32);
    ck_assert_double_eq_tol(at(r, 1), 1.0 / 3.0, 1e-7);
    em_tensor_release(r);
    /* float alpha with integers is an error */
    ck_assert_ptr_null(em_cpu_add(KS, i64, i64, em_scalar_float(0.5)));
    assert_error(EM_ETYPE, "alpha");
    em_tensor_release(d0);
    em_tensor_release(w);
    em_tensor_release(wi);
    em_tensor_release(i64);
    em_tensor_release(i32);
    em_tensor_release(f32);
}
END_TEST

START_TEST(test_kernels_noncontiguous)
{
    em_dtype dt = _i == 0 ? EM_FLOAT32 : _i == 1 ? EM_FLOAT64 : EM_INT32;
    em_tensor *base = mk(dt, 2, SZ(6, 8), f_mixed);
    em_tensor *tr = em_core_transpose(base, 0, 1);              /* {8,6} */
    em_tensor *sl = em_core_slice(base, 1, 0, 8, 2);            /* {6,4} step 2 */
    em_tensor *col = mk(dt, 2, SZ(1, 6), f_small);
    em_tensor *ex = em_core_expand(col, 2, SZ(8, 6));           /* stride 0 */
    em_tensor *r = em_cpu_add(KS, tr, ex, ONE);
    assert_shape(r, 2, SZ(8, 6));
    for (int64_t i = 0; i < 8; i++)
        for (int64_t j = 0; j < 6; j++)
            ck_assert_double_eq(at(r, i * 6 + j), at(base, j * 8 + i) + at(col, j));
    em_tensor_release(r);
    em_tensor *sq = em_core_slice(tr, 0, 0, 8, 2); /* {4,6}, strides {2,8} */
    em_tensor *sl2 = em_core_transpose(sl, 0, 1);  /* {4,6} */
    r = em_cpu_mul(KS, sq, sl2);
    for (int64_t i = 0; i < 4; i++)
        for (int64_t j = 0; j < 6; j++)
            ck_assert_double_eq(at(r, i * 6 + j), at(base, j * 8 + 2 * i) * at(base, j * 8 + 2 * i));
    em_tensor_release(r);
    r = em_cpu_neg(KS, tr);
    for (int64_t i = 0; i < 48; i++) ck_assert_double_eq(at(r, i), -at(tr, i));
    em_tensor_release(r);
    em_tensor *c = em_cpu_contiguous(KS, tr);
    ck_assert(c->is_contiguous);
    ck_assert_ptr_ne(c->storage, tr->storage);
    for (int64_t i = 0; i < 48; i++) ck_assert_double_eq(at(c, i), at(tr, i));
    em_tensor_release(c);
    em_tensor_release(sq);
    em_tensor_release(sl2);
    em_tensor_release(tr);
    em_tensor_release(sl);
    em_tensor_release(ex);
    em_tensor_release(col);
    em_tensor_release(base);
}
END_TEST

START_TEST(test_kernels_parallel_matches_serial)
{
    em_tensor *a = mk(EM_FLOAT32, 2, SZ(700, 1000), f_mixed);
    em_tensor *b = mk(EM_FLOAT32, 2, SZ(1000, 700), f_pos);
    em_tensor *bt = em_core_transpose(b, 0, 1);
    em_tensor *r[2][4];
    for (int k = 0; k < 2; k++) {
        em_set_num_threads(k == 0 ? 1 : 2);
        r[k][0] = em_cpu_add(KS, a, a, ONE);
        r[k][1] = em_cpu_mul(KS, a, bt);
        r[k][2] = em_cpu_sum(KS, a, NODIM, false, EM_DTYPE_NONE);
        r[k][3] = em_cpu_sum(KS, bt, IL(0), false, EM_DTYPE_NONE);
    }
    for (int j = 0; j < 4; j++) {
        ck_assert_int_eq(r[0][j]->numel, r[1][j]->numel);
        ck_assert(memcmp(em_tensor_data(r[0][j]), em_tensor_data(r[1][j]),
                         (size_t)r[0][j]->numel * 4) == 0);
    }
    for (int64_t i = 0; i < 700 * 1000; i += 997)
        ck_assert_double_eq(at(r[1][1], i), at(a, i) * at(bt, i));
    for (int k = 0; k < 2; k++)
        for (int j = 0; j < 4; j++) em_tensor_release(r[k][j]);
    em_tensor_release(bt);
    em_tensor_release(b);
    em_tensor_release(a);
}
END_TEST

START_TEST(test_kernels_pow_remainder)
{
    double av[] = { -7, 7, -7, 7, 5.5, -5.5 }, bv[] = { 3, -3, -3, 3, 2, 2 };
    em_tensor *a = em_tensor_new(1, SZ(6), EM_FLOAT64, em_cpu_device()), *b = em_tensor_new(1, SZ(6), EM_FLOAT64, em_cpu_device());
    memcpy(em_tensor_data(a), av, sizeof av);
    memcpy(em_tensor_data(b), bv, sizeof bv);
    em_tensor *r = em_cpu_remainder(KS, a, b);
    double want[] = { 2, -2, -1, 1, 1.5, 0.5 };
    for (int i = 0; i < 6; i++) ck_assert_double_eq(at(r, i), want[i]);
    em_tensor_release(r);
    em_tensor *ai = em_cpu_to(KS, a, EM_INT64), *bi = em_cpu_to(KS, b, EM_INT64);
    r = em_cpu_remainder(KS, ai, bi);
    ck_assert_int_eq(r->dtype, EM_INT64);
    double wanti[] = { 2, -2, -1, 1, 1, 1 };
    for (int i = 0; i < 6; i++) ck_assert_double_eq(at(r, i), wanti[i]);
    em_tensor_release(r);
    r = em_cpu_pow(KS, ai, bi);
    double wantp[] = { -343, 0, 0, 343, 25, 25 };
    for (int i = 0; i < 6; i++) ck_assert_double_eq(at(r, i), wantp[i]);
    em_tensor_release(r);
    r = em_cpu_pow(KS, a, b);
    for (int i = 0; i < 6; i++) ck_assert_double_eq_tol(at(r, i), pow(av[i], bv[i]), 1e-12);
    em_tensor_release(r);
    em_tensor *z = wrapped(em_scalar_int(0));
    ck_assert_ptr_null(em_cpu_remainder(KS, ai, z));
    assert_error(EM_EVALUE, "division by zero");
    em_tensor_release(z);
    em_tensor_release(ai);
    em_tensor_release(bi);
    em_tensor_release(a);
    em_tensor_release(b);
}
END_TEST

START_TEST(test_kernels_unary)
{
    em_tensor *x = mk(EM_FLOAT32, 1, SZ(4001), f_iota);
    float *p = em_tensor_data(x);
    for (int i = 0; i < 4001; i++) p[i] = (float)(i - 2000) * 0.01f;
    em_tensor *e = em_cpu_exp(KS, x), *t = em_cpu_tanh(KS, x), *s = em_cpu_sigmoid(KS, x);
    for (int i = 0; i < 4001; i++) {
        double v = p[i];
        ck_assert_double_le(fabs(at(e, i) - exp(v)), 4e-7 * exp(v));
        ck_assert_double_le(fabs(at(t, i) - tanh(v)), 5e-7 * fabs(tanh(v)) + 1e-30);
        ck_assert_double_le(fabs(at(s, i) - 1 / (1 + exp(-v))), 5e-7 * (1 / (1 + exp(-v))));
    }
    em_tensor_release(e);
    em_tensor_release(t);
    em_tensor_release(s);
    /* extremes */
    float ext[] = { 100.0f, -110.0f, -88.5f, NAN, 88.7f, -100.0f };
    em_tensor *xe = em_tensor_new(1, SZ(6), EM_FLOAT32, em_cpu_device());
    memcpy(em_tensor_data(xe), ext, sizeof ext);
    e = em_cpu_exp(KS, xe);
    ck_assert(isinf(at(e, 0)));
    ck_assert_double_eq(at(e, 1), 0);
    ck_assert_double_le(fabs(at(e, 2) - exp(-88.5)), 1e-6 * exp(-88.5));
    ck_assert(isnan(at(e, 3)));
    ck_assert_double_le(fabs(at(e, 4) - exp((double)88.7f)), 1e-6 * exp((double)88.7f));
    ck_assert_double_le(fabs(at(e, 5) - exp(-100.0)), 2e-45); /* subnormal */
    em_tensor_release(e);
    em_tensor_release(xe);
    /* integers give float32 */
    em_tensor *xi = mk(EM_INT64, 1, SZ(5), f_small);
    em_tensor *r = em_cpu_sqrt(KS, xi);
    ck_assert_int_eq(r->dtype, EM_FLOAT32);
    ck_assert_double_eq_tol(at(r, 3), 2.0, 1e-7);
    em_tensor_release(r);
    r = em_cpu_log(KS, xi);
    ck_assert_double_eq_tol(at(r, 1), log(2.0), 1e-7);
    em_tensor_release(r);
    em_tensor *xm = mk(EM_INT32, 1, SZ(11), f_mixed);
    em_tensor *ab = em_cpu_abs(KS, xm), *re = em_cpu_relu(KS, xm), *ng = em_cpu_neg(KS, xm);
    ck_assert_int_eq(ab->dtype, EM_INT32);
    for (int i = 0; i < 11; i++) {
        double v = at(xm, i);
        ck_assert_double_eq(at(ab, i), fabs(v));
        ck_assert_double_eq(at(re, i), v > 0 ? v : 0);
        ck_assert_double_eq(at(ng, i), -v);
    }
    em_tensor_release(ab);
    em_tensor_release(re);
    em_tensor_release(ng);
    em_tensor *xb = mk(EM_BOOL, 1, SZ(3), f_bit);
    ck_assert_ptr_null(em_cpu_neg(KS, xb));
    assert_error(EM_ETYPE, "neg");
    em_tensor *h = mk(EM_FLOAT16, 1, SZ(5), f_pos);
    r = em_cpu_exp(KS, h);
    ck_assert_int_eq(r->dtype, EM_FLOAT16);
    ck_assert_double_eq_tol(at(r, 1), exp(0.75), 3e-3 * exp(0.75));
    em_tensor_release(r);
    em_tensor_release(h);
    em_tensor_release(xb);
    em_tensor_release(xm);
    em_tensor_release(xi);
    em_tensor_release(x);
}
END_TEST

/* The structured families (Note [Structured kernels]): the meta alone, and
 * the generated out= kernels em_cpu_*_out: shape, empty out, dtype, overlap,
 * version, and that out comes back itself. */
START_TEST(test_kernels_structured_out)
{
    em_tensor *a = mk(EM_FLOAT32, 2, SZ(2, 3), f_iota), *b = mk(EM_FLOAT32, 1, SZ(3), f_small);
    em_meta m;
    m.op = "add";
    m.out_dtype = EM_META_OUT_CAST;
    m.out_is_new = false;
    ck_assert_int_eq(em_meta_add(&m, a, b, ONE), EM_OK);
    ck_assert_int_eq(m.ndim, 2);
    ck_assert_int_eq(m.sizes[0], 2);
    ck_assert_int_eq(m.sizes[1], 3);
    ck_assert_int_eq(m.dtype, EM_FLOAT32);
    ck_assert_int_eq(m.device.type, EM_CPU);
    em_tensor *i64 = mk(EM_INT64, 1, SZ(3), f_iota);
    m.op = "div";
    ck_assert_int_eq(em_meta_div(&m, i64, i64), EM_OK);
    ck_assert_int_eq(m.dtype, EM_FLOAT32);
    /* out= of the right shape: written, returned itself, version bumped */
    em_tensor *out = em_tensor_new(2, SZ(2, 3), EM_FLOAT64, em_cpu_device());
    uint32_t v0 = em_tensor_version(out);
    em_tensor *r = em_cpu_add_out(KS, a, b, em_scalar_int(2), out);
    ck_assert_ptr_eq(r, out);
    em_tensor_release(r);
    ck_assert_uint_eq(em_tensor_version(out), v0 + 1);
    for (int64_t i = 0; i < 6; i++) ck_assert_double_eq(at(out, i), (double)i + 2 * f_small(i % 3));
    /* another shape: resized as PyTorch's resize_output (shrinking keeps the storage) */
    em_tensor *bad = em_tensor_new(1, SZ(7), EM_FLOAT32, em_cpu_device());
    em_storage *bst = bad->storage;
    r = em_cpu_mul_out(KS, a, b, bad);
    ck_assert_ptr_eq(r, bad);
    em_tensor_release(r);
    assert_shape(bad, 2, SZ(2, 3));
    ck_assert_ptr_eq(bad->storage, bst);
    ck_assert(bad->is_contiguous);
    ck_assert_double_eq(at(bad, 4), 4 * f_small(1));
    /* an empty out grows */
    em_tensor *empty = em_tensor_new(1, SZ(0), EM_FLOAT32, em_cpu_device());
    r = em_cpu_sub_out(KS, a, b, ONE, empty);
    ck_assert_ptr_eq(r, empty);
    em_tensor_release(r);
    assert_shape(empty, 2, SZ(2, 3));
    ck_assert(empty->is_contiguous);
    ck_assert_uint_ge(empty->storage->nbytes, 6 * sizeof(float));
    ck_assert_double_eq(at(empty, 5), 5 - f_small(2));
    /* borrowed memory cannot grow */
    float blob[2] = { 0, 0 };
    em_tensor *bl = em_tensor_from_blob(blob, 1, SZ(2), SZ(1), EM_FLOAT32);
    ck_assert_ptr_null(em_cpu_add_out(KS, a, b, ONE, bl));
    assert_error(EM_EVALUE, "add: out= tensor with shape {2} cannot grow to the result's shape {2,3}");
    em_tensor_release(bl);
    /* float result into an integer out: refused */
    em_tensor *iout = em_tensor_new(1, SZ(3), EM_INT64, em_cpu_device());
    ck_assert_ptr_null(em_cpu_div_out(KS, i64, i64, iout));
    assert_error(EM_ETYPE, "div: result type float32 can't be cast to the desired output type int64");
    /* partial overlap with an input: refused */
    em_tensor *big = mk(EM_FLOAT32, 1, SZ(4), f_iota);
    em_tensor *lo = em_core_narrow(big, 0, 0, 3), *hi = em_core_narrow(big, 0, 1, 3);
    ck_assert_ptr_null(em_cpu_add_out(KS, lo, b, ONE, hi));
    ck_assert_int_eq(em_error_kind(), EM_EVALUE);
    em_clear_error();
    /* sum.out with keepdim; matmul.out */
    em_tensor *s = em_tensor_new(2, SZ(2, 1), EM_FLOAT32, em_cpu_device());
    r = em_cpu_sum_out(KS, a, IL(1), true, EM_DTYPE_NONE, s);
    ck_assert_ptr_eq(r, s);
    em_tensor_release(r);
    ck_assert_double_eq(at(s, 0), 0 + 1 + 2);
    ck_assert_double_eq(at(s, 1), 3 + 4 + 5);
    em_tensor *mo = em_tensor_new(1, SZ(2), EM_FLOAT32, em_cpu_device());
    r = em_cpu_matmul_out(KS, a, b, mo);
    ck_assert_ptr_eq(r, mo);
    em_tensor_release(r);
    ck_assert_double_eq(at(mo, 0), 0 * 1 + 1 * 2 + 2 * 3);
    ck_assert_ptr_null(em_cpu_matmul_out(KS, a, b, out));
    assert_error(EM_ETYPE, "matmul: expected the out= tensor to have dtype float32, but it has float64");
    em_tensor *objs[] = { a, b, i64, out, bad, empty, iout, big, lo, hi, s, mo };
    for (size_t k = 0; k < sizeof objs / sizeof objs[0]; k++) em_tensor_release(objs[k]);
}
END_TEST

START_TEST(test_kernels_inplace)
{
    em_tensor *a = mk(EM_FLOAT32, 2, SZ(2, 3), f_iota), *b = mk(EM_FLOAT32, 1, SZ(3), f_small);
    uint32_t v0 = em_tensor_version(a);
    em_tensor *r = em_cpu_add_(KS, a, b, em_scalar_int(2));
    ck_assert_ptr_eq(r, a);
    ck_assert_int_eq(atomic_load(&a->refcount), 2);
    em_tensor_release(r);
    ck_assert_uint_eq(em_tensor_version(a), v0 + 1);
    ck_assert_double_eq(at(a, 4), 4 + 2 * 2);
    r = em_cpu_mul_(KS, a, b);
    em_tensor_release(r);
    ck_assert_double_eq(at(a, 4), 8 * 2);
    r = em_cpu_div_(KS, a, b);
    em_tensor_release(r);
    ck_assert_double_eq(at(a, 4), 8);
    r = em_cpu_sub_(KS, a, a, ONE);
    em_tensor_release(r);
    ck_assert_double_eq(at(a, 4), 0);
    /* self's shape must not grow */
    ck_assert_ptr_null(em_cpu_add_(KS, b, a, ONE));
    assert_error(EM_ESHAPE, "add_");
    /* int += float is an error; int /= int too */
    em_tensor *ai = mk(EM_INT64, 1, SZ(3), f_iota), *w = wrapped(em_scalar_float(0.5));
    ck_assert_ptr_null(em_cpu_add_(KS, ai, w, ONE));
    assert_error(EM_ETYPE, "add_: result type float32 can't be cast to the desired output type int64");
    ck_assert_ptr_null(em_cpu_div_(KS, ai, ai));
    assert_error(EM_ETYPE, "div_: result type float32 can't be cast to the desired output type int64");
    /* float32 += float64 tensor computes wider, stores float32 */
    em_tensor *d = mk(EM_FLOAT64, 1, SZ(3), f_pos);
    r = em_cpu_add_(KS, b, d, ONE);
    ck_assert_ptr_eq(r, b);
    ck_assert_int_eq(b->dtype, EM_FLOAT32);
    ck_assert_double_eq(at(b, 1), 2 + 0.75);
    em_tensor_release(r);
    /* an input that partly overlaps self is refused, as in PyTorch
     * (x.add_(x.t())); a transposed self with a separate input works */
    em_tensor *sq = mk(EM_INT64, 2, SZ(3, 3), f_iota), *st = em_core_transpose(sq, 0, 1);
    ck_assert_ptr_null(em_cpu_add_(KS, st, sq, ONE));
    ck_assert_int_eq(em_error_kind(), EM_EVALUE);
    em_clear_error();
    em_tensor *sq2 = mk(EM_INT64, 2, SZ(3, 3), f_iota);
    r = em_cpu_add_(KS, st, sq2, ONE);
    em_tensor_release(r);
    em_tensor_release(sq2);
    for (int64_t i = 0; i < 3; i++)
        for (int64_t j = 0; j < 3; j++) ck_assert_double_eq(at(sq, i * 3 + j), (double)(i * 3 + j + j * 3 + i));
    em_tensor_release(st);
    em_tensor_release(sq);
    em_tensor_release(d);
    em_tensor_release(w);
    em_tensor_release(ai);
    em_tensor_release(a);
    em_tensor_release(b);
}
END_TEST

/* ---- reductions ---- */

START_TEST(test_kernels_sum_dims)
{
    em_dtype dt = _i == 0 ? EM_FLOAT32 : _i == 1 ? EM_FLOAT64 : _i == 2 ? EM_INT32 : EM_BOOL;
    em_tensor *base = mk(dt, 3, SZ(3, 4, 5), dt == EM_BOOL ? f_bit : f_mixed);
    for (int nc = 0; nc < 2; nc++) {
        em_tensor *x = nc ? em_core_permute(base, 3, SZ(2, 0, 1)) : em_tensor_retain(base); /* {5,3,4} */
        for (int d = 0; d < 3; d++) {
            for (int kd = 0; kd < 2; kd++) {
                em_tensor *s = em_cpu_sum(KS, x, IL(d), kd, EM_DTYPE_NONE);
                ck_assert_ptr_nonnull(s);
                ck_assert_int_eq(s->dtype, em_dtype_is_floating(dt) ? dt : EM_INT64);
                ck_assert_int_eq(s->ndim, kd ? 3 : 2);
                if (kd) ck_assert_int_eq(s->sizes[d], 1);
                int64_t sz[3] = { x->sizes[0], x->sizes[1], x->sizes[2] };
                int64_t o = 0;
                for (int64_t i = 0; i < (d == 0 ? 1 : sz[0]); i++)
                    for (int64_t j = 0; j < (d == 1 ? 1 : sz[1]); j++)
                        for (int64_t k = 0; k < (d == 2 ? 1 : sz[2]); k++, o++) {
                            double want = 0;
                            for (int64_t r = 0; r < sz[d]; r++) {
                                int64_t ii = d == 0 ? r : i, jj = d == 1 ? r : j, kk = d == 2 ? r : k;
                                want += at(x, (ii * sz[1] + jj) * sz[2] + kk);
                            }
                            ck_assert_double_eq_tol(at(s, o), want, 1e-4);
                        }
                em_tensor_release(s);
            }
        }
        /* two dims, negative */
        em_tensor *s = em_cpu_sum(KS, x, IL(-1, 0), true, EM_DTYPE_NONE);
        assert_shape(s, 3, SZ(1, x->sizes[1], 1));
        double tot = 0, all = 0;
        for (int64_t i = 0; i < s->numel; i++) tot += at(s, i);
        for (int64_t i = 0; i < x->numel; i++) all += at(x, i);
        ck_assert_double_eq_tol(tot, all, 1e-4);
        em_tensor_release(s);
        s = em_cpu_sum(KS, x, NODIM, false, EM_DTYPE_NONE);
        ck_assert_int_eq(s->ndim, 0);
        ck_assert_double_eq_tol(at(s, 0), all, 1e-4);
        em_tensor_release(s);
        em_tensor_release(x);
    }
    em_tensor_release(base);
}
END_TEST

START_TEST(test_kernels_sum_mean_misc)
{
    em_tensor *ones = mk(EM_FLOAT32, 1, SZ(1000000), f_ones);
    em_tensor *s = em_cpu_sum(KS, ones, NODIM, false, EM_DTYPE_NONE);
    ck_assert_double_eq(at(s, 0), 1e6);
    em_tensor_release(s);
    s = em_cpu_mean(KS, ones, NODIM, false, EM_DTYPE_NONE);
    ck_assert_double_eq(at(s, 0), 1.0);
    em_tensor_release(s);
    em_tensor *o2 = em_core_view(ones, 2, SZ(1000, 1000), "view");
    s = em_cpu_sum(KS, o2, IL(0), false, EM_DTYPE_NONE);
    for (int64_t i = 0; i < 1000; i++) ck_assert_double_eq(at(s, i), 1000);
    em_tensor_release(s);
    s = em_cpu_mean(KS, o2, IL(1), true, EM_FLOAT64);
    ck_assert_int_eq(s->dtype, EM_FLOAT64);
    assert_shape(s, 2, SZ(1000, 1));
    ck_assert_double_eq(at(s, 999), 1.0);
    em_tensor_release(s);
    em_tensor_release(o2);
    em_tensor_release(ones);
    em_tensor *xi = mk(EM_INT32, 2, SZ(2, 3), f_iota);
    s = em_cpu_sum(KS, xi, NODIM, false, EM_FLOAT64);
    ck_assert_int_eq(s->dtype, EM_FLOAT64);
    ck_assert_double_eq(at(s, 0), 15);
    em_tensor_release(s);
    ck_assert_ptr_null(em_cpu_mean(KS, xi, NODIM, false, EM_DTYPE_NONE));
    assert_error(EM_ETYPE, "int32");
    ck_assert_ptr_null(em_cpu_sum(KS, xi, IL(1, -1), false, EM_DTYPE_NONE));
    assert_error(EM_EVALUE, "multiple times");
    ck_assert_ptr_null(em_cpu_sum(KS, xi, IL(2), false, EM_DTYPE_NONE));
    ck_assert_int_eq(em_error_kind(), EM_EINDEX);
    em_clear_error();
    /* empty dims */
    em_tensor *e = em_tensor_new(2, SZ(0, 3), EM_FLOAT32, em_cpu_device());
    s = em_cpu_sum(KS, e, IL(0), false, EM_DTYPE_NONE);
    assert_shape(s, 1, SZ(3));
    ck_assert_double_eq(at(s, 2), 0);
    em_tensor_release(s);
    s = em_cpu_mean(KS, e, NODIM, false, EM_DTYPE_NONE);
    ck_assert(isnan(at(s, 0)));
    em_tensor_release(s);
    em_tensor_release(e);
    em_tensor *h = mk(EM_BFLOAT16, 1, SZ(100), f_ones);
    s = em_cpu_sum(KS, h, NODIM, false, EM_DTYPE_NONE);
    ck_assert_int_eq(s->dtype, EM_BFLOAT16);
    ck_assert_double_eq(at(s, 0), 100);
    em_tensor_release(s);
    em_tensor_release(h);
    em_tensor_release(xi);
}
END_TEST

/* ---- the reduction framework (reduce.c, reduce_ops.c) ---- */

enum { RR_SUM, RR_PROD, RR_AMAX, RR_AMIN, RR_VAR, RR_N2, RR_N1, RR_NINF, RR_NMINF, RR_N0, RR_N3, RR_ALL, RR_ANY,
       RR_COUNT };

/* Runs reduction op k over dims (bit mask; 0 = all) of x. */
static em_tensor *rr_run(int k, em_tensor *x, int mask, bool keepdim) {
    int64_t d[EM_MAX_DIMS];
    int n = 0;
    for (int i = 0; i < x->ndim; i++)
        if (mask >> i & 1) d[n++] = i;
    em_intlist dl = { d, n ? n : -1 };
    const int64_t *d1 = n == 1 ? d : NULL;
    switch (k) {
    case RR_SUM: return em_cpu_sum(KS, x, dl, keepdim, EM_DTYPE_NONE);
    case RR_PROD: return em_cpu_prod(KS, x, d1, keepdim, EM_DTYPE_NONE);
    case RR_AMAX: return em_cpu_amax(KS, x, dl, keepdim);
    case RR_AMIN: return em_cpu_amin(KS, x, dl, keepdim);
    case RR_VAR: return em_cpu_var(KS, x, dl, 1, keepdim);
    case RR_N2: return em_cpu_norm(KS, x, em_scalar_int(2), dl, keepdim, EM_DTYPE_NONE);
    case RR_N1: return em_cpu_norm(KS, x, em_scalar_int(1), dl, keepdim, EM_DTYPE_NONE);
    case RR_NINF: return em_cpu_norm(KS, x, em_scalar_float(INFINITY), dl, keepdim, EM_DTYPE_NONE);
    case RR_NMINF: return em_cpu_norm(KS, x, em_scalar_float(-INFINITY), dl, keepdim, EM_DTYPE_NONE);
    case RR_N0: return em_cpu_norm(KS, x, em_scalar_int(0), dl, keepdim, EM_DTYPE_NONE);
    case RR_N3: return em_cpu_norm(KS, x, em_scalar_float(3), dl, keepdim, EM_DTYPE_NONE);
    case RR_ALL: return em_cpu_all(KS, x, d1, keepdim);
    default: return em_cpu_any(KS, x, d1, keepdim);
    }
}

/* The reference: fold the elements of each output position naively. */
static double rr_ref(int k, const double *v, int64_t n) {
    double a = 0, m = 0;
    switch (k) {
    case RR_SUM: for (int64_t i = 0; i < n; i++) a += v[i]; return a;
    case RR_PROD: a = 1; for (int64_t i = 0; i < n; i++) a *= v[i]; return a;
    case RR_AMAX: a = -INFINITY; for (int64_t i = 0; i < n; i++) a = fmax(a, v[i]); return a;
    case RR_AMIN: a = INFINITY; for (int64_t i = 0; i < n; i++) a = fmin(a, v[i]); return a;
    case RR_VAR:
        for (int64_t i = 0; i < n; i++) m += v[i] / (double)n;
        for (int64_t i = 0; i < n; i++) a += (v[i] - m) * (v[i] - m);
        return a / (double)(n - 1);
    case RR_N2: for (int64_t i = 0; i < n; i++) a += v[i] * v[i]; return sqrt(a);
    case RR_N1: for (int64_t i = 0; i < n; i++) a += fabs(v[i]); return a;
    case RR_NINF: for (int64_t i = 0; i < n; i++) a = fmax(a, fabs(v[i])); return a;
    case RR_NMINF: a = INFINITY; for (int64_t i = 0; i < n; i++) a = fmin(a, fabs(v[i])); return a;
    case RR_N0: for (int64_t i = 0; i < n; i++) a += v[i] != 0; return a;
    case RR_N3: for (int64_t i = 0; i < n; i++) a += pow(fabs(v[i]), 3); return cbrt(a);
    case RR_ALL: a = 1; for (int64_t i = 0; i < n; i++) a = a && v[i] != 0; return a;
    default: for (int64_t i = 0; i < n; i++) a = a || v[i] != 0; return a;
    }
}

static double f_red(int64_t i) { return (double)((i * 37) % 11 - 3) * 0.25; }

/* Every op over every set of dims of a 3-d tensor (contiguous, permuted,
 * float32/float64/int64) against the naive reference. */
START_TEST(test_kernels_reduce_ops)
{
    em_dtype dt = _i == 0 ? EM_FLOAT32 : _i == 1 ? EM_FLOAT64 : EM_INT64;
    em_tensor *base = mk(dt, 3, SZ(4, 3, 5), f_red);
    double *vals = malloc(sizeof(double) * 60);
    for (int nc = 0; nc < 2; nc++) {
        em_tensor *x = nc ? em_core_permute(base, 3, SZ(2, 0, 1)) : em_tensor_retain(base);
        for (int k = 0; k < RR_COUNT; k++) {
            bool floating_only = k == RR_VAR || (k >= RR_N2 && k <= RR_N3);
            for (int mask = 0; mask < 8; mask++) {
                bool one_dim = mask == 1 || mask == 2 || mask == 4;
                if ((k == RR_PROD || k == RR_ALL || k == RR_ANY) && mask && !one_dim) continue;
                for (int kd = 0; kd < 2; kd++) {
                    em_tensor *r = rr_run(k, x, mask, kd);
                    if (floating_only && dt == EM_INT64) {
                        ck_assert_ptr_null(r);
                        assert_error(EM_ETYPE, "int64");
                        continue;
                    }
                    ck_assert_msg(r != NULL, "op %d mask %d: %s", k, mask, em_error_message());
                    em_dtype want_dt = k >= RR_ALL ? EM_BOOL : dt;
                    ck_assert_int_eq(r->dtype, want_dt);
                    int m = mask ? mask : 7;
                    /* output positions: kept coordinates, row-major */
                    int64_t osz[3], on = 1;
                    for (int d = 0; d < 3; d++) { osz[d] = (m >> d & 1) ? 1 : x->sizes[d]; on *= osz[d]; }
                    ck_assert_int_eq(r->numel, on);
                    if (kd) for (int d = 0; d < 3; d++) ck_assert_int_eq(r->sizes[d], osz[d]);
                    for (int64_t o = 0; o < on; o++) {
                        int64_t oc[3] = { o / (osz[1] * osz[2]), o / osz[2] % osz[1], o % osz[2] };
                        int64_t n = 0;
                        for (int64_t i = 0; i < x->numel; i++) {
                            int64_t c[3] = { i / (x->sizes[1] * x->sizes[2]), i / x->sizes[2] % x->sizes[1],
                                             i % x->sizes[2] };
                            bool hit = true;
                            for (int d = 0; d < 3; d++)
                                if (!(m >> d & 1) && c[d] != oc[d]) hit = false;
                            if (hit) vals[n++] = at(x, i);
                        }
                        double want = rr_ref(k, vals, n), got = at(r, o);
                        ck_assert_msg(fabs(got - want) <= 1e-5 * (1 + fabs(want)),
                                      "op %d mask %d kd %d nc %d out %lld: got %g want %g", k, mask, kd, nc,
                                      (long long)o, got, want);
                    }
                    em_tensor_release(r);
                }
            }
        }
        em_tensor_release(x);
    }
    free(vals);
    em_tensor_release(base);
}
END_TEST

static bool same_bits(const em_tensor *a, const em_tensor *b) {
    return a->numel == b->numel && a->dtype == b->dtype &&
           memcmp(em_tensor_data(a), em_tensor_data(b), (size_t)a->numel * em_dtype_size(a->dtype)) == 0;
}

static double f_noise(int64_t i) { return sin((double)i * 0.7) * 3 + 1e-3 * (double)(i % 13); }

/* Same bits on 1 and 2 threads for every strategy: many runs, few long
 * runs (parts), column blocks, few column blocks over many rows. */
START_TEST(test_kernels_reduce_deterministic)
{
    em_tensor *x = mk(EM_FLOAT32, 1, SZ(600000), f_noise);
    struct { int nd; int64_t sz[2]; int64_t dim; } cases[] = {
        { 1, { 600000 }, -1 }, { 2, { 3, 200000 }, 1 }, { 2, { 600, 1000 }, 1 },
        { 2, { 600, 1000 }, 0 }, { 2, { 200000, 3 }, 0 }, { 2, { 3000, 200 }, 0 },
    };
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        em_tensor *v = em_core_view(x, cases[c].nd, cases[c].sz, "view");
        em_intlist dl = { &cases[c].dim, cases[c].dim < 0 ? -1 : 1 };
        const int64_t *d1 = cases[c].dim < 0 ? NULL : &cases[c].dim;
        em_tensor *r[2][6];
        for (int th = 0; th < 2; th++) {
            em_set_num_threads(th + 1);
            r[th][0] = em_cpu_sum(KS, v, dl, false, EM_DTYPE_NONE);
            r[th][1] = em_cpu_var(KS, v, dl, 1, false);
            r[th][2] = em_cpu_norm(KS, v, em_scalar_float(2.5), dl, false, EM_DTYPE_NONE);
            r[th][3] = em_cpu_amax(KS, v, cases[c].dim < 0 ? NODIM : dl, false);
            r[th][4] = em_cpu_argmin(KS, v, d1, false);
            r[th][5] = em_cpu_prod(KS, v, d1, false, EM_FLOAT64);
        }
        em_set_num_threads(1);
        for (int k = 0; k < 6; k++) {
            ck_assert_ptr_nonnull(r[0][k]);
            ck_assert_msg(same_bits(r[0][k], r[1][k]), "case %zu op %d differs between 1 and 2 threads", c, k);
            em_tensor_release(r[0][k]);
            em_tensor_release(r[1][k]);
        }
        /* sum against a float64 reference */
        em_tensor *s = em_cpu_sum(KS, v, dl, false, EM_DTYPE_NONE);
        em_tensor *s64 = em_cpu_sum(KS, v, dl, false, EM_FLOAT64);
        for (int64_t i = 0; i < s->numel; i++) ck_assert_double_eq_tol(at(s, i), at(s64, i), 1e-2);
        em_tensor_release(s);
        em_tensor_release(s64);
        em_tensor_release(v);
    }
    em_tensor_release(x);
}
END_TEST

/* max/min over a dim with indices, argmax/argmin: first index of ties,
 * NaN wins, strided input, integer dtype; errors. Indices are 1-based. */
START_TEST(test_kernels_max_dim)
{
    double v[] = { 1, 5, 5, 2, /* row 2 */ 3, NAN, 7, NAN, /* row 3 */ -1, -1, -4, -4 };
    em_tensor *x = em_tensor_new(2, SZ(3, 4), EM_FLOAT32, em_cpu_device());
    for (int i = 0; i < 12; i++) ((float *)em_tensor_data(x))[i] = (float)v[i];
    em_tensor *idx;
    em_tensor *m = em_cpu_max_dim(KS, x, 1, false, &idx);
    ck_assert_ptr_nonnull(m);
    assert_shape(m, 1, SZ(3));
    ck_assert_int_eq(idx->dtype, EM_INT64);
    ck_assert_double_eq(at(m, 0), 5);
    ck_assert(isnan(at(m, 1)));
    ck_assert_double_eq(at(m, 2), -1);
    ck_assert_double_eq(at(idx, 0), 2);
    ck_assert_double_eq(at(idx, 1), 2);
    ck_assert_double_eq(at(idx, 2), 1);
    em_tensor_release(m);
    em_tensor_release(idx);
    m = em_cpu_min_dim(KS, x, -1, true, &idx);
    assert_shape(m, 2, SZ(3, 1));
    ck_assert_double_eq(at(m, 0), 1);
    ck_assert_double_eq(at(idx, 1), 2);
    ck_assert_double_eq(at(m, 2), -4);
    ck_assert_double_eq(at(idx, 2), 3);
    em_tensor_release(m);
    em_tensor_release(idx);
    /* over dim 0 (strided columns) */
    m = em_cpu_max_dim(KS, x, 0, false, &idx);
    assert_shape(m, 1, SZ(4));
    ck_assert_double_eq(at(m, 0), 3);
    ck_assert_double_eq(at(idx, 0), 2);
    ck_assert(isnan(at(m, 1)));
    ck_assert_double_eq(at(idx, 1), 2);
    ck_assert_double_eq(at(m, 2), 7);
    ck_assert_double_eq(at(idx, 3), 2);
    em_tensor_release(m);
    em_tensor_release(idx);
    em_tensor *t = em_core_transpose(x, 0, 1); /* {4,3} */
    m = em_cpu_min_dim(KS, t, 0, false, &idx);
    ck_assert_double_eq(at(m, 0), 1);
    ck_assert(isnan(at(m, 1)));
    ck_assert_double_eq(at(idx, 1), 2);
    ck_assert_double_eq(at(m, 2), -4);
    ck_assert_double_eq(at(idx, 2), 3);
    em_tensor_release(m);
    em_tensor_release(idx);
    em_tensor_release(t);
    /* argmax of the flattened tensor: the first NaN */
    em_tensor *a = em_cpu_argmax(KS, x, NULL, false);
    ck_assert_int_eq(a->ndim, 0);
    ck_assert_double_eq(at(a, 0), 6);
    em_tensor_release(a);
    a = em_cpu_argmin(KS, x, SZ(-1), true);
    assert_shape(a, 2, SZ(3, 1));
    ck_assert_double_eq(at(a, 2), 3);
    em_tensor_release(a);
    /* integers, ties: the first; all-reductions keep the dtype */
    em_tensor *xi = mk(EM_INT32, 2, SZ(2, 70000), f_small);
    m = em_cpu_max_dim(KS, xi, 1, false, &idx);
    ck_assert_int_eq(m->dtype, EM_INT32);
    ck_assert_double_eq(at(m, 0), 7);
    ck_assert_double_eq(at(idx, 0), 7);
    ck_assert_double_eq(at(idx, 1), (70000 % 7 == 0 ? 6 : (7 - 70000 % 7 + 6) % 7) + 1);
    em_tensor_release(m);
    em_tensor_release(idx);
    m = em_cpu_max_all(KS, xi);
    ck_assert_int_eq(m->dtype, EM_INT32);
    ck_assert_double_eq(at(m, 0), 7);
    em_tensor_release(m);
    m = em_cpu_min_all(KS, xi);
    ck_assert_double_eq(at(m, 0), 1);
    em_tensor_release(m);
    /* errors */
    ck_assert_ptr_null(em_cpu_max_dim(KS, x, 2, false, &idx));
    ck_assert_ptr_null(idx);
    ck_assert_int_eq(em_error_kind(), EM_EINDEX);
    em_clear_error();
    em_tensor *e = em_tensor_new(2, SZ(2, 0), EM_FLOAT32, em_cpu_device());
    ck_assert_ptr_null(em_cpu_max_dim(KS, e, 1, false, &idx));
    assert_error(EM_EINDEX, "dim 2 to have non-zero size");
    m = em_cpu_max_dim(KS, e, 0, false, &idx);
    assert_shape(m, 1, SZ(0));
    assert_shape(idx, 1, SZ(0));
    em_tensor_release(m);
    em_tensor_release(idx);
    ck_assert_ptr_null(em_cpu_max_all(KS, e));
    assert_error(EM_EINDEX, "no elements");
    ck_assert_ptr_null(em_cpu_argmax(KS, e, NULL, false));
    assert_error(EM_EINDEX, "no elements");
    em_tensor_release(e);
    em_tensor_release(xi);
    em_tensor_release(x);
}
END_TEST

/* Empty inputs, NaN, dtype rules and errors of the other reductions. */
START_TEST(test_kernels_reduce_edges)
{
    em_tensor *e = em_tensor_new(2, SZ(0, 3), EM_FLOAT32, em_cpu_device());
    em_tensor *r = em_cpu_prod(KS, e, NULL, false, EM_DTYPE_NONE);
    ck_assert_double_eq(at(r, 0), 1);
    em_tensor_release(r);
    r = em_cpu_all(KS, e, NULL, false);
    ck_assert_int_eq(r->dtype, EM_BOOL);
    ck_assert_double_eq(at(r, 0), 1);
    em_tensor_release(r);
    r = em_cpu_any(KS, e, SZ(0), false);
    assert_shape(r, 1, SZ(3));
    ck_assert_double_eq(at(r, 1), 0);
    em_tensor_release(r);
    r = em_cpu_norm(KS, e, em_scalar_float(-INFINITY), NODIM, false, EM_DTYPE_NONE);
    ck_assert_double_eq(at(r, 0), 0);
    em_tensor_release(r);
    r = em_cpu_var(KS, e, NODIM, 1, false);
    ck_assert(isnan(at(r, 0)));
    em_tensor_release(r);
    r = em_cpu_amax(KS, e, IL(1), false);
    assert_shape(r, 1, SZ(0));
    em_tensor_release(r);
    ck_assert_ptr_null(em_cpu_amax(KS, e, IL(0), false));
    assert_error(EM_EINDEX, "dim 1 to have non-zero size");
    ck_assert_ptr_null(em_cpu_amin(KS, e, ((em_intlist){ NULL, 0 }), false));
    assert_error(EM_EINDEX, "no elements");
    em_tensor_release(e);
    /* var: correction >= N gives inf (spread) or nan (none) */
    em_tensor *x2 = mk(EM_FLOAT64, 1, SZ(2), f_iota);
    r = em_cpu_var(KS, x2, NODIM, 3, false);
    ck_assert(isinf(at(r, 0)));
    em_tensor_release(r);
    r = em_cpu_std(KS, x2, NODIM, 0, false);
    ck_assert_double_eq_tol(at(r, 0), 0.5, 1e-12);
    em_tensor_release(r);
    /* NaN propagates through amax, norm inf; all/any treat it as true */
    em_tensor *xn = mk(EM_FLOAT32, 1, SZ(3), f_iota);
    ((float *)em_tensor_data(xn))[1] = NAN;
    r = em_cpu_amax(KS, xn, ((em_intlist){ NULL, 0 }), false);
    ck_assert(isnan(at(r, 0)));
    em_tensor_release(r);
    r = em_cpu_amin(KS, xn, IL(0), false);
    ck_assert(isnan(at(r, 0)));
    em_tensor_release(r);
    r = em_cpu_norm(KS, xn, em_scalar_float(INFINITY), NODIM, false, EM_DTYPE_NONE);
    ck_assert(isnan(at(r, 0)));
    em_tensor_release(r);
    r = em_cpu_all(KS, xn, NULL, false);
    ck_assert_double_eq(at(r, 0), 0); /* element 0 is 0 */
    em_tensor_release(r);
    em_tensor_release(xn);
    /* dtypes: prod of int32 is int64, of uint8 all is uint8, norm dtype */
    em_tensor *xi = mk(EM_INT32, 1, SZ(5), f_small);
    r = em_cpu_prod(KS, xi, NULL, false, EM_DTYPE_NONE);
    ck_assert_int_eq(r->dtype, EM_INT64);
    ck_assert_double_eq(at(r, 0), 120);
    em_tensor_release(r);
    r = em_cpu_amax(KS, xi, ((em_intlist){ NULL, 0 }), false);
    ck_assert_int_eq(r->dtype, EM_INT32);
    ck_assert_double_eq(at(r, 0), 5);
    em_tensor_release(r);
    ck_assert_ptr_null(em_cpu_norm(KS, xi, em_scalar_int(2), NODIM, false, EM_DTYPE_NONE));
    assert_error(EM_ETYPE, "floating");
    ck_assert_ptr_null(em_cpu_var(KS, xi, NODIM, 1, false));
    assert_error(EM_ETYPE, "floating");
    em_tensor *xu = mk(EM_UINT8, 1, SZ(5), f_small);
    r = em_cpu_all(KS, xu, NULL, false);
    ck_assert_int_eq(r->dtype, EM_UINT8);
    ck_assert_double_eq(at(r, 0), 1);
    em_tensor_release(r);
    em_tensor_release(xu);
    em_tensor *xf = mk(EM_FLOAT32, 1, SZ(2), f_small);
    r = em_cpu_norm(KS, xf, em_scalar_int(2), NODIM, false, EM_FLOAT64);
    ck_assert_int_eq(r->dtype, EM_FLOAT64);
    ck_assert_double_eq_tol(at(r, 0), sqrt(5), 1e-12);
    em_tensor_release(r);
    ck_assert_ptr_null(em_cpu_norm(KS, xf, em_scalar_int(2), NODIM, false, EM_INT64));
    assert_error(EM_ETYPE, "output dtype");
    ck_assert_ptr_null(em_cpu_amax(KS, xf, IL(0, -1), false));
    assert_error(EM_EVALUE, "multiple times");
    ck_assert_ptr_null(em_cpu_prod(KS, xf, SZ(1), false, EM_DTYPE_NONE));
    ck_assert_int_eq(em_error_kind(), EM_EINDEX);
    em_clear_error();
    em_tensor_release(xf);
    em_tensor_release(xi);
    em_tensor_release(x2);
}
END_TEST

/* ---- copies ---- */

START_TEST(test_kernels_copy_fill)
{
    em_tensor *dst = em_tensor_new(2, SZ(2, 3), EM_INT32, em_cpu_device());
    em_tensor *src = mk(EM_FLOAT32, 1, SZ(3), f_pos);
    uint32_t v0 = em_tensor_version(dst);
    em_tensor *r = em_cpu_copy_(KS, dst, src);
    ck_assert_ptr_eq(r, dst);
    em_tensor_release(r);
    ck_assert_uint_eq(em_tensor_version(dst), v0 + 1);
    for (int64_t i = 0; i < 6; i++) ck_assert_double_eq(at(dst, i), (double)(int)f_pos(i % 3));
    em_tensor *bad = mk(EM_FLOAT32, 1, SZ(4), f_pos);
    ck_assert_ptr_null(em_cpu_copy_(KS, dst, bad));
    ck_assert_int_eq(em_error_kind(), EM_ESHAPE);
    em_clear_error();
    /* overlapping: x.copy_(x.t()) is refused (PyTorch: "some elements of the
     * input tensor and the written-to tensor refer to a single memory
     * location"); x.copy_(x) returns at once */
    em_tensor *sq = mk(EM_FLOAT64, 2, SZ(3, 3), f_iota), *t = em_core_transpose(sq, 0, 1);
    ck_assert_ptr_null(em_cpu_copy_(KS, sq, t));
    ck_assert_int_eq(em_error_kind(), EM_EVALUE);
    em_clear_error();
    r = em_cpu_copy_(KS, sq, sq);
    ck_assert_ptr_eq(r, sq);
    em_tensor_release(r);
    for (int64_t i = 0; i < 3; i++)
        for (int64_t j = 0; j < 3; j++) ck_assert_double_eq(at(sq, i * 3 + j), (double)(i * 3 + j));
    /* fill_ / zero_ on a non-contiguous view */
    r = em_cpu_fill_scalar_(t, em_scalar_float(2.5), "fill_");
    em_tensor_release(r);
    for (int64_t i = 0; i < 9; i++) ck_assert_double_eq(at(sq, i), 2.5);
    em_tensor *col = em_core_select(sq, 1, 1);
    r = em_cpu_zero_(KS, col);
    em_tensor_release(r);
    for (int64_t i = 0; i < 9; i++) ck_assert_double_eq(at(sq, i), i % 3 == 1 ? 0 : 2.5);
    /* all dtype pairs round-trip small integers */
    for (int a = 0; a < EM_DTYPE_COUNT; a++)
        for (int b = 0; b < EM_DTYPE_COUNT; b++) {
            em_tensor *x = mk((em_dtype)a, 1, SZ(5), a == EM_BOOL || b == EM_BOOL ? f_bit : f_small);
            em_tensor *y = em_cpu_to(KS, x, (em_dtype)b);
            ck_assert_int_eq(y->dtype, b);
            if (a == b) ck_assert_ptr_eq(y->storage, x->storage);
            for (int64_t i = 0; i < 5; i++) ck_assert_double_eq(at(y, i), at(x, i));
            em_tensor_release(y);
            em_tensor_release(x);
        }
    em_tensor *cl = em_cpu_clone(KS, t);
    ck_assert(cl->is_contiguous);
    ck_assert_ptr_ne(cl->storage, t->storage);
    for (int64_t i = 0; i < 9; i++) ck_assert_double_eq(at(cl, i), at(t, i));
    em_tensor *al = em_cpu_contiguous(KS, cl);
    ck_assert_ptr_eq(al->storage, cl->storage);
    em_tensor_release(al);
    em_tensor_release(cl);
    em_tensor_release(col);
    em_tensor_release(t);
    em_tensor_release(sq);
    em_tensor_release(bad);
    em_tensor_release(src);
    em_tensor_release(dst);
}
END_TEST

/* ---- copies (moved here from core with Note [Reshape copies outside core]) ---- */

/* dst:copy_(src) through the kernel, which must succeed; returns its
 * result (dst retained) for the caller to release. */
static em_tensor *copy_ok(em_tensor *dst, em_tensor *src) {
    em_tensor *r = em_cpu_copy_(KS, dst, src);
    ck_assert_msg(r != NULL, "copy_ failed: %s", em_error_message());
    ck_assert_ptr_eq(r, dst);
    return r;
}

START_TEST(test_kernels_copy_broadcast)
{
    em_tensor *src = em_tensor_new(1, SZ(3), EM_FLOAT64, em_cpu_device());
    double *s = em_tensor_data(src);
    s[0] = 1.5, s[1] = -2.5, s[2] = 3.0;
    em_tensor *dst = em_tensor_new(2, SZ(2, 3), EM_INT32, em_cpu_device());
    em_tensor_release(copy_ok(dst, src));
    int32_t *d = em_tensor_data(dst);
    ck_assert_int_eq(d[0], 1);
    ck_assert_int_eq(d[1], -2);
    ck_assert_int_eq(d[5], 3);
    em_tensor *bad = em_tensor_new(1, SZ(2), EM_FLOAT32, em_cpu_device());
    ck_assert_ptr_null(em_cpu_copy_(KS, dst, bad));
    assert_error(EM_ESHAPE, "{2,3}");
    /* expanded destination is refused */
    em_tensor *ex = em_core_expand(bad, 2, SZ(3, 2));
    ck_assert_ptr_null(em_cpu_copy_(KS, ex, bad));
    assert_error(EM_EVALUE, "single memory location");
    em_tensor_release(ex);
    em_tensor_release(bad);
    em_tensor_release(dst);
    em_tensor_release(src);
}
END_TEST

START_TEST(test_kernels_copy_overlap)
{
    em_tensor *t = mk(EM_FLOAT32, 1, SZ(6), f_iota);
    em_tensor *a = em_core_narrow(t, 0, 0, 5), *b = em_core_narrow(t, 0, 1, 5);
    /* copy_ refuses a partial overlap (as PyTorch does); the copy under it
     * has memmove semantics */
    ck_assert_ptr_null(em_cpu_copy_(KS, b, a));
    assert_error(EM_EVALUE, "copy_");
    ck_assert_int_eq(em_cpu_copy_into(b, a, "copy_"), EM_OK);
    float *p = em_tensor_data(t);
    for (int i = 1; i < 6; i++) ck_assert_float_eq(p[i], (float)(i - 1));
    em_tensor_release(copy_ok(a, a));
    em_tensor_release(a);
    em_tensor_release(b);
    em_tensor_release(t);
}
END_TEST

START_TEST(test_kernels_copy_scalar_and_expanded)
{
    em_tensor *a = em_tensor_new(0, NULL, EM_FLOAT64, em_cpu_device());
    *(double *)em_tensor_data(a) = 2.75;
    em_tensor *b = em_tensor_new(0, NULL, EM_BFLOAT16, em_cpu_device());
    em_tensor_release(copy_ok(b, a));
    ck_assert_double_eq(em_load_as_double(em_tensor_data(b), EM_BFLOAT16), 2.75);
    em_tensor *m = em_tensor_new(2, SZ(2, 2), EM_INT8, em_cpu_device());
    em_tensor_release(copy_ok(m, a)); /* 0-dim broadcasts to all */
    for (int i = 0; i < 4; i++) ck_assert_int_eq(((int8_t *)em_tensor_data(m))[i], 2);
    /* reshape of an expanded tensor copies (through contiguous: Note
     * [Reshape copies outside core]) and is no view */
    em_tensor *c = mk(EM_FLOAT32, 2, SZ(3, 1), f_iota);
    em_tensor *e = em_core_expand(c, 2, SZ(3, 4));
    em_tensor *r = em_kv_reshape(KS, e, IL(12));
    ck_assert_ptr_ne(r->storage, c->storage);
    ck_assert_ptr_null(r->view_base);
    ck_assert(r->is_contiguous);
    ck_assert_float_eq(((float *)em_tensor_data(r))[5], 1.0f);
    ck_assert_float_eq(((float *)em_tensor_data(r))[11], 2.0f);
    em_tensor *r2 = em_kv_reshape(KS, e, IL(3, 2, 2)); /* splitting a zero-stride dim is a view */
    ck_assert_ptr_eq(r2->storage, c->storage);
    ck_assert_ptr_eq(r2->view_base, c);
    assert_shape(r2, 3, SZ(3, 2, 2));
    ck_assert_int_eq(r2->strides[0], 1);
    ck_assert_int_eq(r2->strides[1], 0);
    ck_assert_int_eq(r2->strides[2], 0);
    /* a transposed tensor: values in row-major order of the transpose */
    em_tensor *sq = mk(EM_FLOAT32, 2, SZ(2, 3), f_iota), *tt = em_core_transpose(sq, 0, 1);
    em_tensor *r3 = em_kv_reshape(KS, tt, IL(-1));
    const float want[6] = { 0, 3, 1, 4, 2, 5 };
    for (int i = 0; i < 6; i++) ck_assert_float_eq(((float *)em_tensor_data(r3))[i], want[i]);
    ck_assert_ptr_null(em_kv_reshape(KS, tt, IL(7)));
    assert_error(EM_ESHAPE, "reshape: shape {7}");
    em_tensor_release(r3);
    em_tensor_release(tt);
    em_tensor_release(sq);
    em_tensor *a1[] = { r2, r, e, c, m, b, a };
    for (int i = 0; i < 7; i++) em_tensor_release(a1[i]);
}
END_TEST

/* every dtype pair, values that every dtype holds exactly */
START_TEST(test_kernels_copy_dtypes)
{
    em_dtype from = (em_dtype)(_i / EM_DTYPE_COUNT), to = (em_dtype)(_i % EM_DTYPE_COUNT);
    em_tensor *src = em_tensor_new(2, SZ(3, 2), from, em_cpu_device());
    for (int i = 0; i < 6; i++)
        em_store_from_double((char *)em_tensor_data(src) + i * em_dtype_size(from), from,
                             from == EM_BOOL ? i % 2 : i);
    em_tensor *srct = em_core_transpose(src, 0, 1); /* strided source */
    em_tensor *dst = em_tensor_new(2, SZ(2, 3), to, em_cpu_device());
    em_tensor_release(copy_ok(dst, srct));
    for (int r = 0; r < 2; r++)
        for (int c = 0; c < 3; c++) {
            double want = from == EM_BOOL ? (c * 2 + r) % 2 : c * 2 + r;
            if (to == EM_BOOL) want = want != 0;
            double got = em_load_as_double((char *)em_tensor_data(dst) + (r * 3 + c) * em_dtype_size(to), to);
            ck_assert_double_eq(got, want);
        }
    em_tensor_release(dst);
    em_tensor_release(srct);
    em_tensor_release(src);
}
END_TEST

START_TEST(test_kernels_copy_conversions)
{
    em_tensor *src = em_tensor_new(1, SZ(5), EM_FLOAT32, em_cpu_device());
    float *s = em_tensor_data(src);
    s[0] = -1.0f, s[1] = 0.5f, s[2] = NAN, s[3] = 300.0f, s[4] = 1e30f;
    em_tensor *u8 = em_tensor_new(1, SZ(5), EM_UINT8, em_cpu_device());
    em_tensor_release(copy_ok(u8, src));
    uint8_t *u = em_tensor_data(u8);
    ck_assert_int_eq(u[0], 255);
    ck_assert_int_eq(u[1], 0);
    ck_assert_int_eq(u[3], 44);
    em_tensor *b = em_tensor_new(1, SZ(5), EM_BOOL, em_cpu_device());
    em_tensor_release(copy_ok(b, src));
    uint8_t *bb = em_tensor_data(b);
    ck_assert_int_eq(bb[0] + bb[1] + bb[2] + bb[3] + bb[4], 5);
    em_tensor *h = em_tensor_new(1, SZ(5), EM_FLOAT16, em_cpu_device());
    em_tensor_release(copy_ok(h, src));
    em_half *hp = em_tensor_data(h);
    ck_assert(isnan(em_half_to_float(hp[2])));
    ck_assert(isinf(em_half_to_float(hp[4])));
    ck_assert_float_eq(em_half_to_float(hp[1]), 0.5f);
    em_tensor *i64 = em_tensor_new(1, SZ(1), EM_INT64, em_cpu_device());
    *(int64_t *)em_tensor_data(i64) = (1LL << 53) + 1;
    em_tensor *i32 = em_tensor_new(1, SZ(1), EM_INT64, em_cpu_device());
    em_tensor_release(copy_ok(i32, i64));
    ck_assert_int_eq(*(int64_t *)em_tensor_data(i32), (1LL << 53) + 1); /* exact, not via double */
    em_tensor_release(i32);
    em_tensor_release(i64);
    em_tensor_release(h);
    em_tensor_release(b);
    em_tensor_release(u8);
    em_tensor_release(src);
}
END_TEST

/* ---- factories and random ---- */

START_TEST(test_kernels_factories)
{
    em_tensor *t = em_cpu_full(KS, IL(2, 2), em_scalar_bool(true), EM_DTYPE_NONE, em_cpu_device());
    ck_assert_int_eq(t->dtype, EM_BOOL);
    ck_assert_double_eq(at(t, 3), 1);
    em_tensor_release(t);
    t = em_cpu_full(KS, IL(2), em_scalar_int(7), EM_DTYPE_NONE, em_cpu_device());
    ck_assert_int_eq(t->dtype, EM_INT64);
    ck_assert_double_eq(at(t, 1), 7);
    em_tensor_release(t);
    t = em_cpu_full(KS, IL(2), em_scalar_float(1.5), EM_DTYPE_NONE, em_cpu_device());
    ck_assert_int_eq(t->dtype, EM_FLOAT32);
    ck_assert_double_eq(at(t, 1), 1.5);
    em_tensor_release(t);
    t = em_cpu_zeros(KS, IL(3, 0), EM_DTYPE_NONE, em_cpu_device());
    assert_shape(t, 2, SZ(3, 0));
    em_tensor_release(t);
    t = em_cpu_ones(KS, IL(4), EM_FLOAT16, em_cpu_device());
    ck_assert_double_eq(at(t, 3), 1);
    em_tensor_release(t);
    t = em_cpu_zeros(KS, IL(5), EM_INT8, em_cpu_device());
    ck_assert_double_eq(at(t, 4), 0);
    em_tensor_release(t);
    t = em_cpu_empty(KS, IL(2, 3), EM_DTYPE_NONE, em_cpu_device());
    ck_assert_int_eq(t->dtype, EM_FLOAT32);
    em_tensor_release(t);
    ck_assert_ptr_null(em_cpu_zeros(KS, IL(2, -1), EM_DTYPE_NONE, em_cpu_device()));
    assert_error(EM_EVALUE, "zeros");
    ck_assert_ptr_null(em_cpu_empty(KS, IL(-3), EM_DTYPE_NONE, em_cpu_device()));
    assert_error(EM_EVALUE, "empty");
    /* arange */
    t = em_cpu_arange(KS, em_scalar_int(5), NULL, ONE, EM_DTYPE_NONE, em_cpu_device());
    ck_assert_int_eq(t->dtype, EM_INT64);
    assert_shape(t, 1, SZ(5));
    ck_assert_double_eq(at(t, 4), 4);
    em_tensor_release(t);
    em_scalar e = em_scalar_float(2.5);
    t = em_cpu_arange(KS, em_scalar_int(1), &e, em_scalar_float(0.5), EM_DTYPE_NONE, em_cpu_device());
    ck_assert_int_eq(t->dtype, EM_FLOAT32);
    assert_shape(t, 1, SZ(3));
    ck_assert_double_eq(at(t, 2), 2.0);
    em_tensor_release(t);
    em_scalar e10 = em_scalar_int(10), em1 = em_scalar_int(-1);
    t = em_cpu_arange(KS, em_scalar_int(0), &e10, em_scalar_int(3), EM_DTYPE_NONE, em_cpu_device());
    assert_shape(t, 1, SZ(4));
    ck_assert_double_eq(at(t, 3), 9);
    em_tensor_release(t);
    t = em_cpu_arange(KS, em_scalar_int(3), &em1, em_scalar_int(-2), EM_FLOAT64, em_cpu_device());
    ck_assert_int_eq(t->dtype, EM_FLOAT64);
    assert_shape(t, 1, SZ(2));
    ck_assert_double_eq(at(t, 1), 1);
    em_tensor_release(t);
    ck_assert_ptr_null(em_cpu_arange(KS, em_scalar_int(0), &e10, em_scalar_int(0), EM_DTYPE_NONE, em_cpu_device()));
    assert_error(EM_EVALUE, "arange");
    ck_assert_ptr_null(em_cpu_arange(KS, em_scalar_int(0), &e10, em_scalar_int(-1), EM_DTYPE_NONE, em_cpu_device()));
    assert_error(EM_EVALUE, "arange");
}
END_TEST

START_TEST(test_kernels_random)
{
    em_manual_seed(42);
    em_tensor *a = em_cpu_randn(KS, IL(100000), NULL, EM_DTYPE_NONE, em_cpu_device());
    em_manual_seed(42);
    em_tensor *b = em_cpu_randn(KS, IL(100000), NULL, EM_DTYPE_NONE, em_cpu_device());
    ck_assert_int_eq(a->dtype, EM_FLOAT32);
    ck_assert(memcmp(em_tensor_data(a), em_tensor_data(b), 400000) == 0);
    double m = 0, v = 0;
    for (int64_t i = 0; i < 100000; i++) m += at(a, i);
    m /= 1e5;
    for (int64_t i = 0; i < 100000; i++) v += (at(a, i) - m) * (at(a, i) - m);
    v = sqrt(v / 1e5);
    ck_assert_double_lt(fabs(m), 0.02);
    ck_assert_double_lt(fabs(v - 1), 0.02);
    em_tensor *c = em_cpu_randn(KS, IL(100000), NULL, EM_DTYPE_NONE, em_cpu_device());
    ck_assert(memcmp(em_tensor_data(a), em_tensor_data(c), 400000) != 0);
    em_tensor *u = em_cpu_rand(KS, IL(10000), NULL, EM_FLOAT64, em_cpu_device());
    ck_assert_int_eq(u->dtype, EM_FLOAT64);
    double um = 0;
    for (int64_t i = 0; i < 10000; i++) {
        double x = at(u, i);
        ck_assert(x >= 0 && x < 1);
        um += x;
    }
    ck_assert_double_lt(fabs(um / 1e4 - 0.5), 0.02);
    ck_assert_ptr_null(em_cpu_randn(KS, IL(3), NULL, EM_INT64, em_cpu_device()));
    assert_error(EM_ETYPE, "randn");
    ck_assert_ptr_null(em_cpu_rand(KS, IL(-3), NULL, EM_DTYPE_NONE, em_cpu_device()));
    assert_error(EM_EVALUE, "rand");
    em_tensor_release(u);
    em_tensor_release(c);
    em_tensor_release(a);
    em_tensor_release(b);
}
END_TEST

/* ---- linear algebra ---- */

static void check_matmul_naive(const em_tensor *a, const em_tensor *b, const em_tensor *c, double tol) {
    int64_t M = a->sizes[0], K = a->sizes[1], Nn = b->sizes[1];
    assert_shape(c, 2, SZ(M, Nn));
    for (int64_t i = 0; i < M; i++)
        for (int64_t j = 0; j < Nn; j++) {
            double s = 0;
            for (int64_t k = 0; k < K; k++) s += at(a, i * K + k) * at(b, k * Nn + j);
            ck_assert_double_eq_tol(at(c, i * Nn + j), s, tol * (1 + fabs(s)));
        }
}

START_TEST(test_kernels_mm)
{
    em_dtype dt = _i == 0 ? EM_FLOAT32 : _i == 1 ? EM_FLOAT64 : _i == 2 ? EM_INT64 : EM_FLOAT16;
    double tol = dt == EM_FLOAT16 ? 2e-3 : 1e-5;
    em_tensor *a = mk(dt, 2, SZ(5, 7), f_mixed), *b = mk(dt, 2, SZ(7, 3), f_small);
    em_tensor *c = em_cpu_mm(KS, a, b);
    check_matmul_naive(a, b, c, tol);
    em_tensor_release(c);
    /* transposed inputs (no copy), and a sliced one (copy) */
    em_tensor *at_ = mk(dt, 2, SZ(7, 5), f_mixed), *bt_ = mk(dt, 2, SZ(3, 7), f_small);
    em_tensor *ta = em_core_transpose(at_, 0, 1), *tb = em_core_transpose(bt_, 0, 1);
    c = em_cpu_mm(KS, ta, tb);
    check_matmul_naive(ta, tb, c, tol);
    em_tensor_release(c);
    em_tensor *big = mk(dt, 2, SZ(7, 6), f_mixed), *sl = em_core_slice(big, 1, 0, 6, 2); /* {7,3} */
    c = em_cpu_mm(KS, a, sl);
    check_matmul_naive(a, sl, c, tol);
    em_tensor_release(c);
    em_tensor *col = em_core_narrow(big, 1, 1, 1); /* {7,1} */
    c = em_cpu_mm(KS, ta, col);
    check_matmul_naive(ta, col, c, tol);
    em_tensor_release(c);
    em_tensor *e1 = mk(dt, 2, SZ(4, 0), f_iota), *e2 = mk(dt, 2, SZ(0, 2), f_iota);
    c = em_cpu_mm(KS, e1, e2);
    assert_shape(c, 2, SZ(4, 2));
    for (int64_t i = 0; i < 8; i++) ck_assert_double_eq(at(c, i), 0);
    em_tensor_release(c);
    em_tensor *x = mk(dt, 2, SZ(2, 3), f_iota), *y = mk(dt, 2, SZ(4, 5), f_iota);
    ck_assert_ptr_null(em_cpu_mm(KS, x, y));
    assert_error(EM_ESHAPE, "mm: shapes {2,3} and {4,5} cannot be multiplied (3 != 4)");
    em_tensor_release(x);
    em_tensor_release(y);
    em_tensor_release(e1);
    em_tensor_release(e2);
    em_tensor_release(col);
    em_tensor_release(sl);
    em_tensor_release(big);
    em_tensor_release(ta);
    em_tensor_release(tb);
    em_tensor_release(at_);
    em_tensor_release(bt_);
    em_tensor_release(a);
    em_tensor_release(b);
}
END_TEST

START_TEST(test_kernels_matmul_shapes)
{
    em_tensor *v3 = mk(EM_FLOAT32, 1, SZ(3), f_small), *w3 = mk(EM_FLOAT32, 1, SZ(3), f_mixed);
    em_tensor *m23 = mk(EM_FLOAT32, 2, SZ(2, 3), f_mixed), *m32 = mk(EM_FLOAT32, 2, SZ(3, 2), f_pos);
    em_tensor *r = em_cpu_matmul(KS, v3, w3);
    ck_assert_int_eq(r->ndim, 0);
    ck_assert_double_eq_tol(at(r, 0), at(v3, 0) * at(w3, 0) + at(v3, 1) * at(w3, 1) + at(v3, 2) * at(w3, 2), 1e-5);
    em_tensor_release(r);
    r = em_cpu_matmul(KS, m23, v3);
    assert_shape(r, 1, SZ(2));
    ck_assert_double_eq_tol(at(r, 1), at(m23, 3) * at(v3, 0) + at(m23, 4) * at(v3, 1) + at(m23, 5) * at(v3, 2), 1e-5);
    em_tensor_release(r);
    r = em_cpu_matmul(KS, v3, m32);
    assert_shape(r, 1, SZ(2));
    ck_assert_double_eq_tol(at(r, 0), at(v3, 0) * at(m32, 0) + at(v3, 1) * at(m32, 2) + at(v3, 2) * at(m32, 4), 1e-5);
    em_tensor_release(r);
    /* batched with broadcasting: {2,1,3,4} x {5,4,2} -> {2,5,3,2} */
    em_tensor *A = mk(EM_FLOAT64, 4, SZ(2, 1, 3, 4), f_mixed), *B = mk(EM_FLOAT64, 3, SZ(5, 4, 2), f_pos);
    r = em_cpu_matmul(KS, A, B);
    assert_shape(r, 4, SZ(2, 5, 3, 2));
    for (int64_t p = 0; p < 2; p++)
        for (int64_t q = 0; q < 5; q++)
            for (int64_t i = 0; i < 3; i++)
                for (int64_t j = 0; j < 2; j++) {
                    double s = 0;
                    for (int64_t k = 0; k < 4; k++) s += at(A, (p * 3 + i) * 4 + k) * at(B, (q * 4 + k) * 2 + j);
                    ck_assert_double_eq_tol(at(r, ((p * 5 + q) * 3 + i) * 2 + j), s, 1e-9);
                }
    em_tensor_release(r);
    /* 3-d x 2-d folds into one gemm; 3-d x 1-d; 1-d x 3-d */
    em_tensor *B2 = mk(EM_FLOAT64, 2, SZ(4, 2), f_pos), *A3 = em_core_view(A, 3, SZ(2, 3, 4), "view");
    r = em_cpu_matmul(KS, A3, B2);
    assert_shape(r, 3, SZ(2, 3, 2));
    double s = 0;
    for (int64_t k = 0; k < 4; k++) s += at(A3, (1 * 3 + 2) * 4 + k) * at(B2, k * 2 + 1);
    ck_assert_double_eq_tol(at(r, (1 * 3 + 2) * 2 + 1), s, 1e-9);
    em_tensor_release(r);
    em_tensor *v4 = mk(EM_FLOAT64, 1, SZ(4), f_small);
    r = em_cpu_matmul(KS, A3, v4);
    assert_shape(r, 2, SZ(2, 3));
    em_tensor_release(r);
    r = em_cpu_matmul(KS, v4, B);
    assert_shape(r, 2, SZ(5, 2));
    s = 0;
    for (int64_t k = 0; k < 4; k++) s += at(v4, k) * at(B, (3 * 4 + k) * 2 + 1);
    ck_assert_double_eq_tol(at(r, 3 * 2 + 1), s, 1e-9);
    em_tensor_release(r);
    /* errors */
    ck_assert_ptr_null(em_cpu_matmul(KS, m23, m23));
    assert_error(EM_ESHAPE, "{2,3} and {2,3} cannot be multiplied (3 != 2)");
    ck_assert_ptr_null(em_cpu_matmul(KS, m23, B2));
    assert_error(EM_ETYPE, "matmul");
    em_tensor *z = wrapped(em_scalar_float(1));
    ck_assert_ptr_null(em_cpu_matmul(KS, z, v3));
    assert_error(EM_ESHAPE, "matmul");
    em_tensor_release(z);
    em_tensor_release(v4);
    em_tensor_release(A3);
    em_tensor_release(B2);
    em_tensor_release(A);
    em_tensor_release(B);
    em_tensor_release(v3);
    em_tensor_release(w3);
    em_tensor_release(m23);
    em_tensor_release(m32);
}
END_TEST

/* ---- views (Default key) ---- */

em_tensor *em_kv_t(em_keyset ks, em_tensor *self);
em_tensor *em_kv_slice(em_keyset ks, em_tensor *self, int64_t dim, const int64_t *start, const int64_t *end,
                       int64_t step);
em_tensor *em_kv_reshape(em_keyset ks, em_tensor *self, em_intlist shape);

START_TEST(test_kernels_views)
{
    em_tensor *x = mk(EM_FLOAT32, 2, SZ(3, 4), f_iota);
    em_tensor *t = em_kv_t(KS, x);
    assert_shape(t, 2, SZ(4, 3));
    ck_assert_double_eq(at(t, 1), 4);
    ck_assert_ptr_eq(t->version, x->version);
    int64_t st = 1;
    em_tensor *s = em_kv_slice(KS, x, 1, &st, NULL, 2);
    assert_shape(s, 2, SZ(3, 2));
    ck_assert_double_eq(at(s, 1), 3);
    em_tensor *r = em_kv_reshape(KS, t, IL(12));
    ck_assert_double_eq(at(r, 1), 4);
    em_tensor *x3 = mk(EM_FLOAT32, 3, SZ(1, 2, 3), f_iota);
    ck_assert_ptr_null(em_kv_t(KS, x3));
    assert_error(EM_ESHAPE, "t:");
    em_tensor_release(x3);
    em_tensor_release(r);
    em_tensor_release(s);
    em_tensor_release(t);
    em_tensor_release(x);
}
END_TEST

START_TEST(test_kernels_threads)
{
    em_set_num_threads(3);
    ck_assert_int_eq(em_get_num_threads(), 3);
    em_tensor *a = mk(EM_FLOAT64, 1, SZ(300000), f_mixed);
    em_tensor *r = em_cpu_add(KS, a, a, ONE);
    for (int64_t i = 0; i < 300000; i += 1001) ck_assert_double_eq(at(r, i), 2 * at(a, i));
    em_tensor_release(r);
    em_set_num_threads(1);
    ck_assert_int_eq(em_get_num_threads(), 1);
    r = em_cpu_add(KS, a, a, ONE);
    ck_assert_double_eq(at(r, 5), 2 * at(a, 5));
    em_tensor_release(r);
    em_tensor_release(a);
}
END_TEST

Suite *make_kernels_suite(void) {
    Suite *s = suite_create("kernels");
    TCase *tc = tcase_create("core");
    tcase_set_timeout(tc, 60);
    tcase_add_loop_test(tc, test_kernels_arith_dtypes, 0, EM_DTYPE_COUNT);
    tcase_add_test(tc, test_kernels_compare_ops);
    tcase_add_test(tc, test_kernels_broadcast);
    tcase_add_test(tc, test_kernels_promotion);
    tcase_add_loop_test(tc, test_kernels_noncontiguous, 0, 3);
    tcase_add_test(tc, test_kernels_parallel_matches_serial);
    tcase_add_test(tc, test_kernels_pow_remainder);
    tcase_add_test(tc, test_kernels_unary);
    tcase_add_test(tc, test_kernels_inplace);
    tcase_add_loop_test(tc, test_kernels_sum_dims, 0, 4);
    tcase_add_test(tc, test_kernels_sum_mean_misc);
    tcase_add_loop_test(tc, test_kernels_reduce_ops, 0, 3);
    tcase_add_test(tc, test_kernels_reduce_deterministic);
    tcase_add_test(tc, test_kernels_max_dim);
    tcase_add_test(tc, test_kernels_reduce_edges);
    tcase_add_test(tc, test_kernels_copy_fill);
    tcase_add_test(tc, test_kernels_copy_broadcast);
    tcase_add_test(tc, test_kernels_copy_overlap);
    tcase_add_test(tc, test_kernels_copy_scalar_and_expanded);
    tcase_add_loop_test(tc, test_kernels_copy_dtypes, 0, EM_DTYPE_COUNT * EM_DTYPE_COUNT);
    tcase_add_test(tc, test_kernels_copy_conversions);
    tcase_add_test(tc, test_kernels_factories);
    tcase_add_test(tc, test_kernels_random);
    tcase_add_loop_test(tc, test_kernels_mm, 0, 4);
    tcase_add_test(tc, test_kernels_matmul_shapes);
    tcase_add_test(tc, test_kernels_views);
    tcase_add_test(tc, test_kernels_threads);
    tcase_add_test(tc, test_kernels_structured_out);
    suite_add_tcase(s, tc);
    return s;
}
