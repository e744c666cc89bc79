/* elu-concurrency: what sharing costs.
 *   1. The host cost of the launch fast path on a small, compiled
 *      specialization, from 1 thread and from 16 threads sharing one
 *      context, each thread with its own stream: libelu's own lookup alone
 *      (elu_prepare of a loaded kernel), and a whole elu_run (which adds
 *      two pointer queries and cuLaunchKernel: the driver's share). Batches
 *      stay well under the stream's queue depth, so the GPU's speed does
 *      not enter.
 *   2. With two or more GPUs: one context and one thread per device, large
 *      runs on all at once, against one device alone; results checked.
 * Medians of 15 repetitions.                                               */
#include "devmem.h"
#include <elu.h>
#include "timing.h"

#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

#define REPS 15
#define SMALL 1024
#define CALLS 200
#define LARGE ((size_t)1 << 28)
#define LARGE_ITERS 20

static elu_ctx *cuda_ctx(int device)
{
    elu_options o;
    elu_options_default(&o);
    o.backend = ELU_BACKEND_CUDA;
    o.device = device;
    elu_ctx *ctx = NULL;
    return elu_ctx_create(&ctx, &o) == ELU_OK ? ctx : NULL;
}

/* ---- 1. the fast path ---- */

struct caller {
    elu_ctx *ctx;
    int device;
    pthread_barrier_t *start;
    double lookup_ns, run_ns; /* per call, median over REPS */
};

static void *call_small(void *arg)
{
    struct caller *c = arg;
    const elu_params p = elu_params_elu(ELU_F32, 1.0);
    float host[SMALL];
    for (int i = 0; i < SMALL; i++)
        host[i] = (float)(i - SMALL / 2) / 64;
    dev_init(c->device);
    void *x = dev_upload(host, sizeof host), *y = dev_alloc(sizeof host);
    elu_stream stream = NULL; /* each thread: its own non-blocking stream */
    dev_stream_create(&stream);
    pthread_barrier_wait(c->start);
    double t[REPS], u[REPS];
    for (int r = 0; r < REPS; r++) {
        double t0 = now_s();
        for (int i = 0; i < CALLS; i++)
            elu_prepare(c->ctx, &p);
        t[r] = (now_s() - t0) / CALLS * 1e9;
        t0 = now_s();
        for (int i = 0; i < CALLS; i++)
            elu_run(c->ctx, &p, x, y, SMALL, stream);
        u[r] = (now_s() - t0) / CALLS * 1e9;
        dev_stream_sync(stream);
    }
    c->lookup_ns = median(t, REPS);
    c->run_ns = median(u, REPS);
    dev_stream_destroy(stream);
    dev_free(x);
    dev_free(y);
    return NULL;
}

static void fast_path(elu_ctx *ctx, int threads)
{
    pthread_t tid[16];
    struct caller c[16];
    pthread_barrier_t start;
    pthread_barrier_init(&start, NULL, (unsigned)threads);
    for (int i = 0; i < threads; i++) {
        c[i] = (struct caller){ctx, 0, &start, 0, 0};
        pthread_create(&tid[i], NULL, call_small, &c[i]);
    }
    double lookup[16], run[16], rate = 0;
    for (int i = 0; i < threads; i++) {
        pthread_join(tid[i], NULL);
        lookup[i] = c[i].lookup_ns;
        run[i] = c[i].run_ns;
        rate += 1e9 / c[i].run_ns;
    }
    pthread_barrier_destroy(&start);
    printf("%2d thread(s): lookup %6.0f ns, elu_run %7.0f ns per call per thread "
           "(median thread); %5.2f M elu_run/s in all\n", threads,
           median(lookup, threads), median(run, threads), rate / 1e6);
}

/* ---- 2. several GPUs ---- */

struct device_run {
    int device;
    pthread_barrier_t *start;
    double gbps;
    int wrong;
};

static void *run_large(void *arg)
{
    struct device_run *d = arg;
    elu_ctx *ctx = cuda_ctx(d->device);
    const elu_params p = elu_params_elu(ELU_F32, 1.0);
    float *host = malloc(LARGE * sizeof *host);
    for (size_t i = 0; i < LARGE; i++)
        host[i] = (float)((double)(i % 4001) / 125.0 - 16.0);
    if (!ctx || !dev_init(d->device))
        return NULL;
    void *x = dev_upload(host, LARGE * 4), *y = dev_alloc(LARGE * 4);
    elu_run(ctx, &p, x, y, LARGE, NULL); /* compile and warm up */
    dev_sync();
    pthread_barrier_wait(d->start);
    const double t0 = now_s();
    for (int i = 0; i < LARGE_ITERS; i++)
        elu_run(ctx, &p, x, y, LARGE, NULL);
    dev_sync();
    d->gbps = 2.0 * LARGE * 4 * LARGE_ITERS / (now_s() - t0) / 1e9;
    float *out = malloc(LARGE * sizeof *out);
    dev_download(out, y, LARGE * 4);
    for (size_t i = 0; i < LARGE; i += 997) {
        const double ref = host[i] > 0 ? host[i] : expm1((double)host[i]);
        d->wrong += !(fabs(out[i] - ref) <= 4e-7 * fabs(ref) + 1e-30);
    }
    free(out);
    free(host);
    dev_free(x);
    dev_free(y);
    elu_ctx_destroy(ctx);
    return NULL;
}

static double devices_at_once(int count, int *wrong)
{
    pthread_t tid[8];
    struct device_run d[8];
    pthread_barrier_t start;
    pthread_barrier_init(&start, NULL, (unsigned)count);
    double total = 0;
    for (int i = 0; i < count; i++) {
        d[i] = (struct device_run){i, &start, 0, 0};
        pthread_create(&tid[i], NULL, run_large, &d[i]);
    }
    for (int i = 0; i < count; i++) {
        pthread_join(tid[i], NULL);
        total += d[i].gbps;
        *wrong += d[i].wrong;
        printf("   device %d: %.0f GB/s\n", i, d[i].gbps);
    }
    pthread_barrier_destroy(&start);
    return total;
}

int main(void)
{
    elu_ctx *ctx = cuda_ctx(0);
    if (!ctx) {
        fprintf(stderr, "elu-concurrency needs a CUDA device\n");
        return 1;
    }
    const elu_params p = elu_params_elu(ELU_F32, 1.0);
    elu_prepare(ctx, &p);
    printf("launch fast path, f32 n=%d, %d calls per repetition:\n", SMALL, CALLS);
    fast_path(ctx, 1);
    fast_path(ctx, 16);
    elu_ctx_stats s;
    elu_ctx_get_stats(ctx, &s);
    printf("   compiles %llu, launches %llu\n", (unsigned long long)s.compiles,
           (unsigned long long)s.gpu_launches);
    elu_ctx_destroy(ctx);

    const int devices = dev_count() < 8 ? dev_count() : 8;
    if (devices < 2) {
        printf("one device: no multi-GPU measurement\n");
        return 0;
    }
    int wrong = 0;
    printf("f32 forward, 2^28 elements, %d runs per device:\n one device alone:\n",
           LARGE_ITERS);
    const double one = devices_at_once(1, &wrong);
    printf(" %d devices at once:\n", devices);
    const double all = devices_at_once(devices, &wrong);
    printf("aggregate %.0f GB/s = %.2f x one device; %d wrong samples\n", all,
           all / one, wrong);
    return wrong ? 1 : 0;
}
