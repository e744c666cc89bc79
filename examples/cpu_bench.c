/* elu-cpu-bench: the CPU path against memcpy and a plain glibc expm1f loop,
 * f32, one run of each per repetition, medians.
 *   elu-cpu-bench [log2 n, default 26] [repetitions, default 3]          */
#include "elu.h"
#include "timing.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static double elu_rate(const float *x, float *y, size_t n, int threads, int reps)
{
    elu_options o;
    elu_options_default(&o);
    o.backend = ELU_BACKEND_CPU;
    o.cpu_threads = threads;
    elu_ctx *ctx;
    if (elu_ctx_create(&ctx, &o) != ELU_OK)
        return 0;
    const elu_params p = elu_params_elu(ELU_F32, 1.0);
    double t[16];
    for (int r = 0; r < reps; r++) {
        const double t0 = now_s();
        elu_run(ctx, &p, x, y, n, NULL);
        t[r] = now_s() - t0;
    }
    elu_ctx_destroy(ctx);
    return (double)n / median(t, reps) / 1e9;
}

int main(int argc, char **argv)
{
    const size_t n = (size_t)1 << (argc > 1 ? atoi(argv[1]) : 26);
    int reps = argc > 2 ? atoi(argv[2]) : 3;
    reps = reps < 1 ? 1 : reps > 16 ? 16 : reps;
    float *x = malloc(n * sizeof *x), *y = malloc(n * sizeof *y);
    if (!x || !y)
        return 1;
    for (size_t i = 0; i < n; i++) /* real data, both branches */
        x[i] = (float)((double)(i * 2654435761u % 64001) / 2000.0 - 16.0);
    memset(y, 1, n * sizeof *y);
    double t[16];
    for (int r = 0; r < reps; r++) {
        const double t0 = now_s();
        memcpy(y, x, n * sizeof *x);
        t[r] = now_s() - t0;
    }
    const double copy = (double)n / median(t, reps) / 1e9;
    for (int r = 0; r < reps; r++) {
        const double t0 = now_s();
        for (size_t i = 0; i < n; i++)
            y[i] = x[i] > 0 ? x[i] : expm1f(x[i]);
        t[r] = now_s() - t0;
    }
    const double glibc = (double)n / median(t, reps) / 1e9;
    const long online = sysconf(_SC_NPROCESSORS_ONLN);
    printf("f32, n = %zu, median of %d; Gelem/s and ratio to memcpy\n", n, reps);
    printf("%-26s %8.3f %8.3f\n", "memcpy", copy, 1.0);
    printf("%-26s %8.3f %8.3f\n", "glibc expm1f loop", glibc, glibc / copy);
    for (int threads = 1; threads <= online && threads <= 64; threads *= 2) {
        char label[32];
        snprintf(label, sizeof label, "elu_run, %d thread%s", threads, threads > 1 ? "s" : "");
        const double rate = elu_rate(x, y, n, threads, reps);
        printf("%-26s %8.3f %8.3f\n", label, rate, rate / copy);
    }
    free(x);
    free(y);
    return 0;
}
