/* check_random.c -- the counter-based generator (Note [Random numbers]):
 * Philox4x32-10 against the Random123 known-answer vectors, the stream's
 * layout, and values that do not depend on the thread count. */
#include <check.h>
#include <string.h>

#include "em_ops.h"
#include "kernels/cpu/em_cpu.h"

#define IL(...) ((em_intlist){ (const int64_t[]){ __VA_ARGS__ }, \
                               (int)(sizeof((const int64_t[]){ __VA_ARGS__ }) / sizeof(int64_t)) })

/* Random123's kat_vectors for philox4x32 with 10 rounds. */
START_TEST(test_random_philox_known_answers) {
    static const struct { uint32_t ctr[4], key[2], out[4]; } kat[] = {
        { { 0, 0, 0, 0 }, { 0, 0 }, { 0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8 } },
        { { 0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff }, { 0xffffffff, 0xffffffff },
          { 0x408f276d, 0x41c83b0e, 0xa20bc7c6, 0x6d5451fd } },
        { { 0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344 }, { 0xa4093822, 0x299f31d0 },
          { 0xd16cfe09, 0x94fdcceb, 0x5001e420, 0x24126ea1 } },
    };
    for (size_t i = 0; i < sizeof kat / sizeof kat[0]; i++) {
        uint32_t out[4];
        em_philox4x32_10(kat[i].ctr, kat[i].key, out);
        for (int k = 0; k < 4; k++) ck_assert_uint_eq(out[k], kat[i].out[k]);
    }
}
END_TEST

/* The state is (seed, offset in 32-bit words); a call moves the offset by
 * the words it used, rounded up to a block of 4. */
START_TEST(test_random_offsets) {
    em_generator *g = em_generator_new();
    em_generator_manual_seed(g, 42);
    uint64_t seed, off;
    em_generator_get_state(g, &seed, &off);
    ck_assert_uint_eq(seed, 42);
    ck_assert_uint_eq(off, 0);
    em_tensor *a = em_rand(IL(5), g, EM_FLOAT32, em_no_device()); /* 5 words -> 8 */
    em_generator_get_state(g, &seed, &off);
    ck_assert_uint_eq(off, 8);
    em_tensor *b = em_rand(IL(3), g, EM_FLOAT64, em_no_device()); /* 6 words -> 8 */
    em_generator_get_state(g, &seed, &off);
    ck_assert_uint_eq(off, 16);
    /* word w of the stream is lane w%4 of philox(w/4, seed): rand's first
     * float32 is the top 24 bits of word 0 */
    uint32_t w[4];
    em_philox_word_block(42, 0, w);
    ck_assert_float_eq(((float *)em_tensor_data(a))[0], (float)(w[0] >> 8) * 0x1.0p-24f);
    ck_assert_float_eq(((float *)em_tensor_data(a))[3], (float)(w[3] >> 8) * 0x1.0p-24f);
    em_philox_word_block(42, 1, w);
    ck_assert_float_eq(((float *)em_tensor_data(a))[4], (float)(w[0] >> 8) * 0x1.0p-24f);
    /* float64: 53 bits of two words; b starts at offset 8 (block 2) */
    em_philox_word_block(42, 2, w);
    uint64_t x = (uint64_t)w[0] | (uint64_t)w[1] << 32;
    ck_assert_double_eq(((double *)em_tensor_data(b))[0], (double)(x >> 11) * 0x1.0p-53);
    /* set_state replays */
    em_generator_set_state(g, 42, 8);
    em_tensor *b2 = em_rand(IL(3), g, EM_FLOAT64, em_no_device());
    ck_assert_mem_eq(em_tensor_data(b), em_tensor_data(b2), 3 * sizeof(double));
    em_tensor_release(a);
    em_tensor_release(b);
    em_tensor_release(b2);
    em_generator_release(g);
}
END_TEST

/* The same seed gives the same numbers with 1 thread and with several,
 * on sizes large enough to run in parallel. */
START_TEST(test_random_thread_count_independent) {
    em_tensor *r[2][4];
    int saved = em_get_num_threads();
    for (int pass = 0; pass < 2; pass++) {
        em_set_num_threads(pass == 0 ? 1 : 4);
        em_generator *g = em_generator_new();
        em_generator_manual_seed(g, 7);
        r[pass][0] = em_rand(IL(300001), g, EM_FLOAT32, em_no_device());
        r[pass][1] = em_randn(IL(300001), g, EM_FLOAT64, em_no_device());
        r[pass][2] = em_randint(1000, IL(200003), g, EM_INT64, em_no_device());
        em_tensor *z = em_zeros(IL(500, 301), EM_FLOAT32, em_no_device());
        em_tensor *zt = em_t(z);
        r[pass][3] = em_normal_(zt, 1.0, 2.0, g); /* non-contiguous */
        em_tensor_release(zt);
        em_tensor_release(r[pass][3]);
        r[pass][3] = z;
        em_generator_release(g);
    }
    em_set_num_threads(saved);
    for (int k = 0; k < 4; k++) {
        ck_assert_ptr_nonnull(r[0][k]);
        size_t nb = (size_t)r[0][k]->numel * em_dtype_size(r[0][k]->dtype);
        ck_assert_mem_eq(em_tensor_data(r[0][k]), em_tensor_data(r[1][k]), nb);
        em_tensor_release(r[0][k]);
        em_tensor_release(r[1][k]);
    }
}
END_TEST

/* The fill helpers other families' kernels use: any layout, statistics
 * right, same values as the ops with the same generator state. */
START_TEST(test_random_fill_helpers) {
    em_generator *g = em_generator_new();
    em_generator_manual_seed(g, 3);
    em_tensor *a = em_zeros(IL(400, 250), EM_FLOAT64, em_no_device());
    em_tensor *at = em_t(a);
    ck_assert_int_eq(em_cpu_fill_bernoulli(at, 0.25, g), EM_OK);
    const double *v = em_tensor_data(a);
    double sum = 0;
    for (int64_t i = 0; i < a->numel; i++) {
        ck_assert(v[i] == 0 || v[i] == 1);
        sum += v[i];
    }
    ck_assert_double_eq_tol(sum / (double)a->numel, 0.25, 0.01);
    ck_assert_int_eq(em_cpu_fill_normal(a, 2.0, 0.5, g), EM_OK);
    double m = 0;
    for (int64_t i = 0; i < a->numel; i++) m += v[i];
    ck_assert_double_eq_tol(m / (double)a->numel, 2.0, 0.01);
    /* fill_uniform = uniform_ from the same state */
    em_generator_set_state(g, 3, 1000);
    ck_assert_int_eq(em_cpu_fill_uniform(a, -1.0, 1.0, g), EM_OK);
    em_tensor *b = em_zeros(IL(400, 250), EM_FLOAT64, em_no_device());
    em_generator_set_state(g, 3, 1000);
    em_tensor *r = em_uniform_(b, -1.0, 1.0, g);
    ck_assert_ptr_eq(r, b);
    ck_assert_mem_eq(em_tensor_data(a), em_tensor_data(b), (size_t)a->numel * sizeof(double));
    em_tensor_release(r);
    em_tensor_release(b);
    em_tensor_release(at);
    em_tensor_release(a);
    em_generator_release(g);
}
END_TEST

Suite *make_random_suite(void) {
    Suite *s = suite_create("random");
    TCase *tc = tcase_create("core");
    tcase_add_test(tc, test_random_philox_known_answers);
    tcase_add_test(tc, test_random_offsets);
    tcase_add_test(tc, test_random_thread_count_independent);
    tcase_add_test(tc, test_random_fill_helpers);
    suite_add_tcase(s, tc);
    return s;
}
