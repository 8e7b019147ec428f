/* check_vmath.c -- the vectorisable float32 functions of em_vmath.h
 * (Note [Vector math]) against double-precision libm rounded to float:
 * at most 2 ulp apart over a sweep of every float bit pattern with a
 * stride, plus the special values. The sweep runs each function twice:
 * as plain scalar calls (no fused multiply-adds) and through vector loops
 * with EM_VM_CLONES (the ISA clone this machine picks, contracting into
 * FMAs where it has them), as the kernels call them. */
#include <check.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/cpu/em_vmath.h"

/* Distance in ulps between two floats (as ordered integers); 0 when both
 * are NaN, huge when only one is. */
static int64_t ulps(float a, float b) {
    if (a != a || b != b) return (a != a && b != b) ? 0 : INT64_MAX;
    if (a == b) return 0;
    int32_t ia, ib;
    memcpy(&ia, &a, 4);
    memcpy(&ib, &b, 4);
    int64_t oa = ia < 0 ? (int64_t)INT32_MIN - ia : ia, ob = ib < 0 ? (int64_t)INT32_MIN - ib : ib;
    return oa > ob ? oa - ob : ob - oa;
}

static double sigmoid_d(double x) { return 1.0 / (1.0 + exp(-x)); }

/* out[i] = f(in[i]) as EM_VM_CLONES vector loops */
#define VEC_FN(NAME, EXPR)                                                    \
    EM_VM_CLONES static void NAME(float *restrict out, const float *restrict in, int64_t n) { \
        for (int64_t i = 0; i < n; i++) {                                     \
            float x = in[i];                                                  \
            out[i] = EXPR;                                                    \
        }                                                                     \
    }
VEC_FN(loop_exp_general, em_vm_expf(x))
VEC_FN(loop_expm1, em_vm_expm1f(x))
VEC_FN(loop_log_general, em_vm_logf(x))
VEC_FN(loop_tanh, em_vm_tanhf(x))
VEC_FN(loop_sigmoid_general, em_vm_sigmoidf(x))
VEC_FN(loop_sin_any, em_vm_sinf_any(x))
VEC_FN(loop_cos_any, em_vm_cosf_any(x))
/* the array forms (Note [Vector math blocks]), as the kernels call them;
 * out may be in */
EM_VM_CLONES static void loop_exp(float *out, const float *in, int64_t n) { em_vm_expf_n(out, in, n); }
EM_VM_CLONES static void loop_log(float *out, const float *in, int64_t n) { em_vm_logf_n(out, in, n); }
EM_VM_CLONES static void loop_sigmoid(float *out, const float *in, int64_t n) { em_vm_sigmoidf_n(out, in, n); }
EM_VM_CLONES static void loop_sin(float *out, const float *in, int64_t n) { em_vm_sincosf_n(out, in, n, 0); }
EM_VM_CLONES static void loop_cos(float *out, const float *in, int64_t n) { em_vm_sincosf_n(out, in, n, 1); }

typedef struct {
    const char *name;
    float (*fast)(float);
    void (*vec)(float *restrict, const float *restrict, int64_t);
    double (*ref)(double);
    float lo, hi; /* the sweep's range */
} fn_case;

static float sin_f(float x) { return em_vm_sinf(x); }
static float cos_f(float x) { return em_vm_cosf(x); }

/* Max ulp error over every 257th float bit pattern in [lo, hi], of the
 * scalar calls and of the vector loop (in blocks of 4096: the bit
 * patterns ascend, so an array form's blocks are mostly all fast or all
 * general, and both kinds run). */
static int64_t sweep(const fn_case *c, float *worst_x) {
    enum { B = 4096 };
    static float xs[B], ys[B];
    int64_t worst = 0, m = 0;
    for (uint64_t u = 0;; u += 257) {
        if (u < 0x100000000ull) {
            float x;
            uint32_t b = (uint32_t)u;
            memcpy(&x, &b, 4);
            if (x >= c->lo && x <= c->hi) xs[m++] = x;
        }
        if (m < B && u < 0x100000000ull) continue;
        c->vec(ys, xs, m);
        for (int64_t i = 0; i < m; i++) {
            float want = (float)c->ref((double)xs[i]);
            int64_t e = ulps(c->fast(xs[i]), want), ev = ulps(ys[i], want);
            e = ev > e ? ev : e;
            if (e > worst) {
                worst = e;
                *worst_x = xs[i];
            }
        }
        m = 0;
        if (u >= 0x100000000ull) break;
    }
    return worst;
}

START_TEST(test_vmath_within_2_ulp) {
    static const fn_case cases[] = {
        { "exp", em_vm_expf, loop_exp, exp, -INFINITY, INFINITY },
        { "expm1", em_vm_expm1f, loop_expm1, expm1, -INFINITY, INFINITY },
        { "log", em_vm_logf, loop_log, log, 0.0f, INFINITY },
        { "tanh", em_vm_tanhf, loop_tanh, tanh, -INFINITY, INFINITY },
        { "sigmoid", em_vm_sigmoidf, loop_sigmoid, sigmoid_d, -INFINITY, INFINITY },
        { "sin", sin_f, loop_sin, sin, -EM_VM_TRIG_MAX, EM_VM_TRIG_MAX },
        { "cos", cos_f, loop_cos, cos, -EM_VM_TRIG_MAX, EM_VM_TRIG_MAX },
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        float wx = 0;
        int64_t e = sweep(&cases[i], &wx);
        ck_assert_msg(e <= 2, "%s: %lld ulp at x = %.9g", cases[i].name, (long long)e, wx);
    }
}
END_TEST

/* Note [Vector math blocks]: an array form's fast blocks give the general
 * function's bits, so a result does not depend on its neighbours. Every
 * stride-th bit pattern in blocks that are all fast-path arguments,
 * through the array form and through a loop of the general function. */
typedef void (*vec_fn)(float *, const float *, int64_t);
static void same_bits(const char *name, vec_fn arr, vec_fn general, float lo, float hi, uint32_t stride) {
    enum { B = 4096 };
    static float xs[B], ya[B], yg[B];
    int64_t m = 0, checked = 0;
    for (uint64_t u = 0; u < 0x100000000ull; u += stride) {
        float x;
        uint32_t b = (uint32_t)u;
        memcpy(&x, &b, 4);
        if (x >= lo && x <= hi) xs[m++] = x;
        if (m < B && u + stride < 0x100000000ull) continue;
        arr(ya, xs, m);
        general(yg, xs, m);
        ck_assert_msg(memcmp(ya, yg, (size_t)m * 4) == 0, "%s: the array form's fast path differs from the general function", name);
        memcpy(ya, xs, (size_t)m * 4);
        arr(ya, ya, m); /* in place: the separate reduction pass */
        ck_assert_msg(memcmp(ya, yg, (size_t)m * 4) == 0, "%s: the array form in place differs from the general function", name);
        checked += m;
        m = 0;
    }
    ck_assert(checked > 1000000);
}

START_TEST(test_vmath_fast_paths_same_bits) {
    same_bits("exp", loop_exp, loop_exp_general, -EM_VM_EXP_FAST, EM_VM_EXP_FAST, 7);
    same_bits("sigmoid", loop_sigmoid, loop_sigmoid_general, -EM_VM_EXP_FAST, EM_VM_EXP_FAST, 7);
    same_bits("log", loop_log, loop_log_general, 1.17549435e-38f, 3.40282347e38f, 7);
    same_bits("sin", loop_sin, loop_sin_any, -EM_VM_TRIG_MAX, EM_VM_TRIG_MAX, 31);
    same_bits("cos", loop_cos, loop_cos_any, -EM_VM_TRIG_MAX, EM_VM_TRIG_MAX, 31);
    /* a block with one special value runs the general function on all its elements */
    float xs[1000], ya[1000], yg[1000];
    for (int i = 0; i < 1000; i++) xs[i] = (float)(i - 500) * 0.173f;
    xs[700] = NAN;
    loop_exp(ya, xs, 1000);
    loop_exp_general(yg, xs, 1000);
    ck_assert(memcmp(ya, yg, 700 * 4) == 0 && isnan(ya[700]) && memcmp(ya + 701, yg + 701, 299 * 4) == 0);
    xs[700] = -0.0f;
    loop_log(ya, xs, 1000);
    loop_log_general(yg, xs, 1000);
    for (int i = 0; i < 1000; i++) ck_assert(memcmp(&ya[i], &yg[i], 4) == 0 || (isnan(ya[i]) && isnan(yg[i])));
    ck_assert(ya[700] == -INFINITY && isnan(ya[0]));
    loop_log(xs, xs, 1000); /* in place, the same */
    for (int i = 0; i < 1000; i++) ck_assert(memcmp(&xs[i], &yg[i], 4) == 0 || (isnan(xs[i]) && isnan(yg[i])));
}
END_TEST

/* Note [Vector math prefetch]: arrays of EM_VM_PREFETCH_MIN elements or
 * more run in sub-blocks with prefetches; their results are the general
 * function's bits too, with special values at and around the (sub-)block
 * boundaries, out of place and in place, and for a length that is no
 * multiple of a block. */
EM_VM_CLONES static void loop_tanh_arr(float *out, const float *in, int64_t n) { em_vm_tanhf_n(out, in, n); }
START_TEST(test_vmath_long_arrays_same_bits) {
    enum { N = 3 * EM_VM_PREFETCH_MIN + 77 };
    static float xs[N], ya[N], yg[N];
    static const struct {
        const char *name;
        vec_fn arr, general;
        float lo, hi;
    } cases[] = {
        { "exp", loop_exp, loop_exp_general, -100.0f, 100.0f },
        { "log", loop_log, loop_log_general, -1.0f, 1e30f },
        { "sigmoid", loop_sigmoid, loop_sigmoid_general, -100.0f, 100.0f },
        { "sin", loop_sin, loop_sin_any, -1e4f, 1e4f },
        { "cos", loop_cos, loop_cos_any, -1e4f, 1e4f },
        { "tanh", loop_tanh_arr, (vec_fn)loop_tanh, -12.0f, 12.0f },
    };
    ck_assert(N >= EM_VM_PREFETCH_MIN);
    for (size_t c = 0; c < sizeof cases / sizeof *cases; c++) {
        uint32_t r = 12345;
        for (int64_t i = 0; i < N; i++) {
            r = r * 1664525u + 1013904223u;
            xs[i] = cases[c].lo + (cases[c].hi - cases[c].lo) * (float)(r >> 8) / 16777216.0f;
        }
        /* specials at a block start, a sub-block end and inside */
        xs[EM_VM_BLOCK] = NAN;
        xs[EM_VM_BLOCK * 5 + EM_VM_SUB - 1] = INFINITY;
        xs[EM_VM_BLOCK * 9 + 3] = -INFINITY;
        xs[N - 2] = 0.0f;
        cases[c].arr(ya, xs, N);
        cases[c].general(yg, xs, N);
        for (int64_t i = 0; i < N; i++)
            ck_assert_msg(memcmp(&ya[i], &yg[i], 4) == 0 || (isnan(ya[i]) && isnan(yg[i])),
                          "%s: element %lld of a long array differs from the general function", cases[c].name,
                          (long long)i);
        memcpy(ya, xs, sizeof xs);
        cases[c].arr(ya, ya, N); /* in place */
        for (int64_t i = 0; i < N; i++)
            ck_assert_msg(memcmp(&ya[i], &yg[i], 4) == 0 || (isnan(ya[i]) && isnan(yg[i])),
                          "%s in place: element %lld of a long array differs", cases[c].name, (long long)i);
    }
}
END_TEST

START_TEST(test_vmath_special_values) {
    ck_assert(em_vm_expf(-INFINITY) == 0.0f);
    ck_assert(em_vm_expf(INFINITY) == INFINITY);
    ck_assert(em_vm_expf(100.0f) == INFINITY);
    ck_assert(em_vm_expf(-200.0f) == 0.0f);
    ck_assert(isnan(em_vm_expf(NAN)));
    ck_assert(em_vm_logf(0.0f) == -INFINITY);
    ck_assert(em_vm_logf(-0.0f) == -INFINITY);
    ck_assert(isnan(em_vm_logf(-1.0f)));
    ck_assert(isnan(em_vm_logf(-INFINITY)));
    ck_assert(em_vm_logf(INFINITY) == INFINITY);
    ck_assert(em_vm_logf(1.0f) == 0.0f);
    ck_assert(ulps(em_vm_logf(1e-45f), (float)log((double)1e-45f)) <= 2); /* the smallest subnormal */
    ck_assert(isnan(em_vm_logf(NAN)));
    ck_assert(em_vm_tanhf(INFINITY) == 1.0f && em_vm_tanhf(-INFINITY) == -1.0f);
    ck_assert(signbit(em_vm_tanhf(-0.0f)));
    ck_assert(em_vm_sigmoidf(-INFINITY) == 0.0f && em_vm_sigmoidf(INFINITY) == 1.0f);
    /* sigmoid's two forms meet at -EM_VM_EXP_FAST; below it the results
     * are subnormal, not 0 */
    static const float sx[] = { -EM_VM_EXP_FAST, -87.00001f, -86.99999f, -100.0f, -103.0f, -120.0f };
    for (size_t i = 0; i < sizeof sx / sizeof *sx; i++)
        ck_assert_msg(ulps(em_vm_sigmoidf(sx[i]), (float)sigmoid_d((double)sx[i])) <= 2, "sigmoid(%g)", (double)sx[i]);
    ck_assert(em_vm_sigmoidf(-100.0f) > 0.0f);
    /* sin near its zeros (half-period reduction: r is tiny there) */
    static const float zx[] = { 3.14159274f, 6.28318548f, 9.42477798f, 8191.94629f, 3.14159250f };
    for (size_t i = 0; i < sizeof zx / sizeof *zx; i++)
        ck_assert_msg(ulps(em_vm_sinf(zx[i]), (float)sin((double)zx[i])) <= 2, "sin(%.9g)", (double)zx[i]);
    /* log near 1, where f is tiny, and at the ends of m's range */
    static const float lx[] = { 1.00000012f, 0.99999994f, 0.707106769f, 0.707106829f, 1.41421354f, 1.41421342f };
    for (size_t i = 0; i < sizeof lx / sizeof *lx; i++)
        ck_assert_msg(ulps(em_vm_logf(lx[i]), (float)log((double)lx[i])) <= 1, "log(%.9g)", (double)lx[i]);
    ck_assert(signbit(em_vm_sinf(-0.0f)) && em_vm_cosf(0.0f) == 1.0f);
    ck_assert(isnan(em_vm_sinf(NAN)) && isnan(em_vm_cosf(NAN)));
    /* the array forms: large arguments and infinities go to libm */
    float in[5] = { 1e6f, -3e7f, INFINITY, 0.5f, NAN }, out[5];
    em_vm_sincosf_n(out, in, 5, 0);
    ck_assert(out[0] == sinf(1e6f) && out[1] == sinf(-3e7f) && isnan(out[2]) && isnan(out[4]));
    ck_assert(ulps(out[3], (float)sin(0.5)) <= 2);
    em_vm_sincosf_n(in, in, 5, 1); /* in place */
    ck_assert(in[0] == cosf(1e6f) && in[1] == cosf(-3e7f) && isnan(in[2]));
    /* a block of small arguments only (the vector path), in place and not */
    float xs[600], ys[600];
    for (int i = 0; i < 600; i++) xs[i] = (float)(i - 300) * 0.37f;
    em_vm_sincosf_n(ys, xs, 600, 0);
    em_vm_sincosf_n(xs, xs, 600, 0);
    for (int i = 0; i < 600; i++) {
        ck_assert(xs[i] == ys[i]);
        ck_assert(ulps(ys[i], (float)sin((double)((float)(i - 300) * 0.37f))) <= 2);
    }
}
END_TEST

Suite *make_vmath_suite(void) {
    Suite *s = suite_create("vmath");
    TCase *tc = tcase_create("core");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test_vmath_within_2_ulp);
    tcase_add_test(tc, test_vmath_special_values);
    tcase_add_test(tc, test_vmath_fast_paths_same_bits);
    tcase_add_test(tc, test_vmath_long_arrays_same_bits);
    suite_add_tcase(s, tc);
    return s;
}
