/* bench_ref.c -- the machine's own limits, measured the same way ember is:
 * cblas_sgemm called directly (1024x1024 float32) and STREAM-style add
 * bandwidth on 1e7 floats with 1 and 2 threads. Prints `name median unit best=X n=R`. */
#include <cblas.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}
static int cmp(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}
static void report(const char *name, double work, const char *unit, double *t, int n) {
    qsort(t, n, sizeof *t, cmp);
    printf("%-28s %10.2f %s best=%.2f n=%d\n", name, work / t[n / 2], unit, work / t[0], n);
}

enum { N = 10000000, REPS = 9 };
static float *A, *B, *C;
typedef struct { long lo, hi; } range;
static void *add_part(void *p) {
    range *r = p;
    for (long i = r->lo; i < r->hi; i++) C[i] = A[i] + B[i];
    return NULL;
}
static void add_threads(int nt) {
    pthread_t th[8];
    range r[8];
    for (int i = 0; i < nt; i++) {
        r[i].lo = (long)N * i / nt; r[i].hi = (long)N * (i + 1) / nt;
        if (i) pthread_create(&th[i], NULL, add_part, &r[i]);
    }
    add_part(&r[0]);
    for (int i = 1; i < nt; i++) pthread_join(th[i], NULL);
}

int main(int argc, char **argv) {
    const char *what = argc > 1 ? argv[1] : "all";
    double t[REPS];
    if (!strcmp(what, "all") || !strcmp(what, "sgemm")) {
        int n = 1024;
        float *a = malloc(sizeof(float) * n * n), *b = malloc(sizeof(float) * n * n), *c = malloc(sizeof(float) * n * n);
        for (int i = 0; i < n * n; i++) { a[i] = (float)(i % 7) * 0.1f; b[i] = (float)(i % 5) * 0.2f; }
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, n, n, 1, a, n, b, n, 0, c, n);
        for (int r = 0; r < REPS; r++) {
            double t0 = now();
            for (int k = 0; k < 5; k++)
                cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, n, n, 1, a, n, b, n, 0, c, n);
            t[r] = (now() - t0) / 5;
        }
        report("ref_cblas_sgemm_n1024", 2.0 * n * n * n / 1e9, "GFLOP/s", t, REPS);
        free(a); free(b); free(c);
    }
    if (!strcmp(what, "all") || !strcmp(what, "stream")) {
        A = malloc(sizeof(float) * N); B = malloc(sizeof(float) * N); C = malloc(sizeof(float) * N);
        for (long i = 0; i < N; i++) { A[i] = 1; B[i] = 2; C[i] = 0; }
        for (int nt = 1; nt <= 2; nt++) {
            add_threads(nt);
            for (int r = 0; r < REPS; r++) {
                double t0 = now();
                for (int k = 0; k < 5; k++) add_threads(nt);
                t[r] = (now() - t0) / 5;
            }
            char name[64];
            snprintf(name, sizeof name, "ref_stream_add_1e7_t%d", nt);
            report(name, 12.0 * N / 1e9, "GB/s", t, REPS);
        }
        free(A); free(B); free(C);
    }
    return 0;
}
