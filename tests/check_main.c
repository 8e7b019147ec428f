/* check_main.c -- runs every Check suite of ember (one per module).
 * Each tests/check_<module>.c exports make_<module>_suite(). */
#include <check.h>
#include <stdlib.h>

Suite *make_core_suite(void);
Suite *make_dispatch_suite(void);
Suite *make_kernels_suite(void);
Suite *make_codegen_suite(void);
Suite *make_autograd_suite(void);
Suite *make_device_suite(void);
Suite *make_vmath_suite(void);
Suite *make_shell_suite(void);
Suite *make_embed_suite(void);
Suite *make_random_suite(void);
Suite *make_faults_suite(void);

int main(void) {
    SRunner *sr = srunner_create(make_core_suite());
    srunner_add_suite(sr, make_dispatch_suite());
    srunner_add_suite(sr, make_kernels_suite());
    srunner_add_suite(sr, make_codegen_suite());
    srunner_add_suite(sr, make_autograd_suite());
    srunner_add_suite(sr, make_device_suite());
    srunner_add_suite(sr, make_vmath_suite());
    srunner_add_suite(sr, make_shell_suite());
    srunner_add_suite(sr, make_embed_suite());
    srunner_add_suite(sr, make_random_suite());
    srunner_add_suite(sr, make_faults_suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
