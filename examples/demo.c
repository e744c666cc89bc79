/* libelu in one page: create a context, see what it picked, watch the JIT
 * and its disk cache, run ELU on a few million values and check them.
 * Run it twice: the second process finds the kernel in the disk cache. */
#include "devmem.h"
#include <elu.h>
#include "timing.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static elu_ctx_stats stats_of(const elu_ctx *ctx)
{
    elu_ctx_stats s;
    elu_ctx_get_stats(ctx, &s);
    return s;
}

/* Get the kernel ready in a fresh context and say how: compiled, or loaded
 * from the disk cache. On a CPU context, precompile for sm_90 instead, to
 * show the same JIT and cache without a GPU. */
static void show_jit(const char *label, const elu_params *p, bool gpu)
{
    elu_ctx *ctx;
    if (elu_ctx_create(&ctx, NULL) != ELU_OK)
        return;
    const double t0 = (now_s() * 1e3);
    const elu_status st = gpu ? elu_prepare(ctx, p) : elu_precompile(ctx, p, 90);
    const double ms = (now_s() * 1e3) - t0;
    const elu_ctx_stats s = stats_of(ctx);
    if (st != ELU_OK)
        printf("  %-16s %s: %s\n", label, elu_status_str(st), elu_ctx_last_error(ctx));
    else
        printf("  %-16s %7.2f ms  (%s)\n", label, ms,
               s.compiles ? "compiled with NVRTC, stored in the disk cache"
               : s.disk_hits ? "loaded from the disk cache, no compile"
                             : "ready");
    elu_ctx_destroy(ctx);
}

/* Largest error in float ulps against a double reference. */
static double max_ulp(const float *x, const float *y, size_t n)
{
    double worst = 0;
    for (size_t i = 0; i < n; i++) {
        const double ref = x[i] > 0 ? x[i] : expm1((double)x[i]);
        const double ulp = fmax(nextafterf(fabsf((float)ref), INFINITY) - fabsf((float)ref),
                                0x1p-149);
        worst = fmax(worst, fabs(y[i] - ref) / ulp);
    }
    return worst;
}

int main(void)
{
    elu_ctx *ctx;
    elu_status st = elu_ctx_create(&ctx, NULL);
    if (st != ELU_OK) {
        fprintf(stderr, "elu_ctx_create: %s\n", elu_status_str(st));
        return 1;
    }
    elu_ctx_info info;
    elu_ctx_get_info(ctx, &info);
    const bool gpu = info.backend == ELU_BACKEND_CUDA;
    printf("libelu %s\n", elu_version_string());
    if (gpu)
        printf("backend: CUDA, device %d: %s (sm_%d, %d SMs), driver %d\n",
               info.device, info.device_name, info.sm, info.multiprocessors,
               info.driver_version);
    else
        printf("backend: CPU, %d threads (%s)\n", info.cpu_threads,
               elu_ctx_last_error(ctx));
    printf("CPU kernels: %s, NVRTC: %d, disk cache: %s\n", info.cpu_isa,
           info.nvrtc_version, info.disk_cache ? info.cache_dir : "off");

    const elu_params p = elu_params_elu(ELU_F32, 1.0);
    printf("%s:\n", gpu ? "kernel for f32, alpha 1" : "precompile f32 alpha 1 for sm_90");
    show_jit("first context", &p, gpu);
    show_jit("second context", &p, gpu);

    const size_t n = 4u << 20;
    float *x = malloc(n * sizeof *x), *y = malloc(n * sizeof *y);
    if (!x || !y)
        return 1;
    srand((unsigned)time(NULL));
    for (size_t i = 0; i < n; i++)
        x[i] = ((float)rand() / (float)RAND_MAX - 0.5f) * 16;

    void *dx = NULL, *dy = NULL;
    if (gpu && (!dev_init(0) || !(dx = dev_upload(x, n * 4)) || !(dy = dev_upload(y, n * 4)))) {
        fprintf(stderr, "cannot allocate device memory\n");
        return 1;
    }
    elu_run(ctx, &p, gpu ? dx : x, gpu ? dy : y, n, NULL); /* warm-up */
    const double t0 = (now_s() * 1e3);
    st = elu_run(ctx, &p, gpu ? dx : x, gpu ? dy : y, n, NULL);
    if (gpu)
        dev_sync();
    const double ms = (now_s() * 1e3) - t0;
    if (gpu)
        dev_download(y, dy, n * 4);
    const double err = max_ulp(x, y, n);
    printf("ELU over %zu floats on the %s: %s, %.3f ms, max error %.2f ulp: %s\n",
           n, gpu ? "GPU" : "CPU", elu_status_str(st), ms, err,
           st == ELU_OK && err <= 2 ? "OK" : "WRONG");
    dev_free(dx);
    dev_free(dy);
    free(x);
    free(y);
    elu_ctx_destroy(ctx);
    return st == ELU_OK && err <= 2 ? 0 : 1;
}
