/* elu-bench: GPU throughput of elu_run and elu_run_backward against a
 * device-to-device copy of the same bytes, measured in the same run.
 * Each figure is the median over REPS batches of BATCH calls, timed on the
 * host around a synchronize (the batch hides the synchronize's cost).
 *   elu-bench [log2 of the largest size, default 28]                      */
#include "devmem.h"
#include "elu.h"
#include "timing.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define REPS 15
#define BATCH 10

/* Real data, not zeros: values of both signs in [-32, 32), through both
 * branches. Half types are built from their bits: sign, an exponent from
 * 2^-5 to 2^4, a random mantissa. */
static void fill(elu_dtype t, void *buf, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        const unsigned r = (unsigned)rand();
        const double v = ((double)(r % 64000) - 32000) / 1000.0;
        switch (t) {
        case ELU_F32: ((float *)buf)[i] = (float)v; break;
        case ELU_F64: ((double *)buf)[i] = v; break;
        case ELU_F16:
            ((unsigned short *)buf)[i] =
                (unsigned short)((r & 0x8000) | (10 + r % 10) << 10 | (r >> 8 & 0x3ff));
            break;
        case ELU_BF16:
            ((unsigned short *)buf)[i] =
                (unsigned short)((r & 0x8000) | (122 + r % 10) << 7 | (r >> 8 & 0x7f));
            break;
        }
    }
}

enum op { COPY, FORWARD, BACKWARD };

struct bufs {
    void *a, *b, *out;
};

static bool run_once(enum op op, elu_ctx *ctx, const elu_params *p,
                     const struct bufs *d, size_t n)
{
    const size_t bytes = n * elu_dtype_size(p->dtype);
    switch (op) {
    case COPY: return dev_copy_async(d->out, d->a, bytes);
    case FORWARD: return elu_run(ctx, p, d->a, d->out, n, NULL) == ELU_OK;
    case BACKWARD:
        return elu_run_backward(ctx, p, d->b, d->a, false, d->out, n, NULL) == ELU_OK;
    }
    return false;
}

/* Median seconds per call. */
static double time_op(enum op op, elu_ctx *ctx, const elu_params *p,
                      const struct bufs *d, size_t n)
{
    double t[REPS];
    run_once(op, ctx, p, d, n);
    dev_sync();
    for (int r = 0; r < REPS; r++) {
        const double t0 = now_s();
        for (int i = 0; i < BATCH; i++)
            if (!run_once(op, ctx, p, d, n))
                return -1;
        dev_sync();
        t[r] = (now_s() - t0) / BATCH;
    }
    return median(t, REPS);
}

int main(int argc, char **argv)
{
    const int max_log2 = argc > 1 ? atoi(argv[1]) : 28;
    elu_options o;
    elu_options_default(&o);
    o.backend = ELU_BACKEND_CUDA;
    elu_ctx *ctx;
    if (elu_ctx_create(&ctx, &o) != ELU_OK || !dev_init(0)) {
        fprintf(stderr, "elu-bench needs a CUDA device\n");
        return 1;
    }
    elu_ctx_info info;
    elu_ctx_get_info(ctx, &info);
    printf("%s sm_%d, driver %d, NVRTC %d; median of %d batches of %d\n",
           info.device_name, info.sm, info.driver_version, info.nvrtc_version,
           REPS, BATCH);
    printf("%-5s %-6s %10s %10s %8s %10s %8s\n", "dtype", "n", "copy GB/s",
           "fwd GB/s", "fwd/cp", "bwd GB/s", "bwd/cp");
    const char *names[] = {"f32", "f64", "f16", "bf16"};
    const size_t max_bytes = ((size_t)1 << max_log2) * 8;
    void *host = malloc(max_bytes);
    struct bufs d = {NULL, NULL, dev_alloc(max_bytes)};
    for (int t = 0; t < 4; t++) {
        const elu_params p = elu_params_elu((elu_dtype)t, 1.0);
        fill((elu_dtype)t, host, max_bytes / elu_dtype_size(p.dtype));
        dev_free(d.a);
        dev_free(d.b);
        d.a = dev_upload(host, max_bytes);
        d.b = dev_upload(host, max_bytes);
        if (!host || !d.a || !d.b || !d.out || elu_prepare(ctx, &p) != ELU_OK)
            return 1;
        for (int lg = 16; lg <= max_log2; lg += 4) {
            const size_t n = (size_t)1 << lg, bytes = n * elu_dtype_size(p.dtype);
            const double c = time_op(COPY, ctx, &p, &d, n);
            const double f = time_op(FORWARD, ctx, &p, &d, n);
            const double b = time_op(BACKWARD, ctx, &p, &d, n);
            /* Bytes moved: copy and forward 2 per element, backward 3. */
            const double cg = 2 * bytes / c / 1e9, fg = 2 * bytes / f / 1e9,
                         bg = 3 * bytes / b / 1e9;
            printf("%-5s 2^%-4d %10.1f %10.1f %8.3f %10.1f %8.3f\n", names[t],
                   lg, cg, fg, fg / cg, bg, bg / cg);
        }
    }
    free(host);
    dev_free(d.a);
    dev_free(d.b);
    dev_free(d.out);
    elu_ctx_destroy(ctx);
    return 0;
}
