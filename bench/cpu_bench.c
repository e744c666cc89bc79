/* elu-cpu-bench: the CPU path against memcpy of the same bytes, medians of
 * several runs, all in one process so the ratios share its conditions.
 *   elu-cpu-bench [log2 n, 10..30, default 26] [repetitions, 1..16, default 5]
 *
 * Rows: memcpy; a glibc expm1f loop and, where the build found SLEEF, a
 * loop over SLEEF's 1-ulp AVX-512 expm1f (what PyTorch's CPU kernel uses);
 * the f32 and the f64 forward kernel of each instruction set this
 * processor has, one thread, on this data (f32 also with every element
 * below zero, each computing an exponential) and on data whose every element
 * the fast evaluation leaves in doubt (the slow path's worst case; f64
 * against memcpy of f64 arrays); the same for f16 and bf16, whose worst
 * case is data that their computed evaluation leaves to be settled; then elu_run and elu_run_backward for
 * every dtype, on 1 thread and on all; last, where n >= 2^16, 200 calls
 * of 2^16 elements with a new alpha each against 200 with alpha 1, us a
 * call (ratio: new over one). "ratio" is otherwise bandwidth over
 * memcpy's: for the backward, which moves three arrays to memcpy's two,
 * the bytes it moves per second over memcpy's. The data mixes both
 * branches: x uniform in [-16, 16]. A path whose first call takes over a
 * second is timed by that call alone. */
#include "cpu_fast.h"
#include "cpu_isa.h"
#include "elu_forward_f32.h"
#include "elu_forward_f64.h"
#include "elu.h"
#include "scalar.h"
#include "timing.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#if defined(ELU_BENCH_SLEEF)
void sleef_elu_f32(const float *x, float *y, size_t n); /* sleef_loop.c */
#endif

#define MAX_REPS 16

static size_t n;
static int reps;
static void *x, *g, *y; /* n doubles each: room for any dtype */

/* Median seconds of reps calls of fn. */
static double timed(void (*fn)(void *), void *arg)
{
    double t[MAX_REPS];
    for (int r = 0; r < reps; r++) {
        const double t0 = now_s();
        fn(arg);
        t[r] = now_s() - t0;
    }
    return median(t, reps);
}

static size_t copy_bytes;
static void run_memcpy(void *arg)
{
    (void)arg;
    memcpy(y, x, copy_bytes);
}

static void run_glibc(void *arg)
{
    (void)arg;
    const float *xf = x;
    float *yf = y;
    for (size_t i = 0; i < n; i++)
        yf[i] = xf[i] > 0 ? xf[i] : expm1f(xf[i]);
}

#if defined(ELU_BENCH_SLEEF)
static void run_sleef(void *arg)
{
    (void)arg;
    sleef_elu_f32(x, y, n);
}
#endif

static const struct elu_cpu_isa *kernel_isa;
static struct elu_coef kernel_coef;
static void run_kernel(void *arg)
{
    (void)arg;
    if (kernel_coef.dtype == ELU_F32)
        kernel_isa->forward_f32(&kernel_coef, x, y, n);
    else if (kernel_coef.dtype == ELU_F64)
        kernel_isa->forward_f64(&kernel_coef, x, y, n);
    else
        kernel_isa->forward_half(&kernel_coef, x, y, n);
}

struct api_call {
    elu_ctx *ctx;
    elu_params p;
    int kernel; /* 0 forward, 1 backward from input, 2 from output */
};

static void run_api(void *arg)
{
    const struct api_call *a = arg;
    elu_status s = a->kernel == 0 ? elu_run(a->ctx, &a->p, x, y, n, NULL)
                                  : elu_run_backward(a->ctx, &a->p, g, x, a->kernel == 2, y,
                                                     n, NULL);
    if (s != ELU_OK) {
        fprintf(stderr, "elu-cpu-bench: %s\n", elu_ctx_last_error(a->ctx));
        exit(1);
    }
}

static double copy_time(size_t size)
{
    copy_bytes = n * size;
    return timed(run_memcpy, NULL);
}

static void row(const char *label, size_t size, int arrays, double t, double t_copy)
{
    const double bytes = (double)n * (double)size * arrays;
    printf("%-34s %8.3f %8.1f %7.3f\n", label, (double)n / t / 1e9, bytes / t / 1e9,
           bytes / t / ((double)n * (double)size * 2 / t_copy));
}

static void fill(elu_dtype t)
{
    for (size_t i = 0; i < n; i++) {
        const double v = (double)(i * 2654435761u % 64001) / 2000.0 - 16.0;
        const double w = (double)(i * 40503u % 1009) / 500.0 - 1.0;
        switch (t) {
        case ELU_F32: ((float *)x)[i] = (float)v; ((float *)g)[i] = (float)w; break;
        case ELU_F64: ((double *)x)[i] = v; ((double *)g)[i] = w; break;
        case ELU_F16:
            ((uint16_t *)x)[i] = elu_f16_from(v);
            ((uint16_t *)g)[i] = elu_f16_from(w);
            break;
        case ELU_BF16:
            ((uint16_t *)x)[i] = elu_bf16_from(v);
            ((uint16_t *)g)[i] = elu_bf16_from(w);
            break;
        }
    }
}

#if defined(__x86_64__)
/* x: inputs whose ELU(1) forward the fast evaluation leaves in doubt,
 * over and over: for f32 those of [-2, -1), for f64 the first 4096 of
 * [-2, -1) from its start and on by a stride. */
static void fill_doubtful(elu_dtype t)
{
    size_t found = 0;
    float *xf = x;
    double *xd = x;
    for (uint32_t b = 0xBF800000u; t == ELU_F32 && b < 0xC0000000u && found < n; b++) {
        float v;
        memcpy(&v, &b, sizeof v);
        if (elu_f32_doubtful(elu_f32_fast(v, 1.0)))
            xf[found++] = v;
    }
    for (uint64_t b = 0xBFF0000000000000u; t == ELU_F64 && found < 4096 && found < n;
         b += 0x9E3779B1u) {
        double v, out;
        memcpy(&v, &b, sizeof v);
        if (!elu_f64_rounds(elu_f64_fast(elu_dd_of(v, 0), 1.0, false), ELU_F64_FAST_ERR, &out))
            xd[found++] = v;
    }
    for (size_t i = found; i < n && found; i++) {
        if (t == ELU_F32)
            xf[i] = xf[i % found];
        else
            xd[i] = xd[i % found];
    }
}

/* x: for f16 or bf16, the type's subnormals, whose results the computed
 * evaluation leaves to be settled apart. */
static void fill_settled(elu_dtype t)
{
    const uint16_t subnormals = t == ELU_F16 ? 0x3FF : 0x7F;
    for (size_t i = 0; i < n; i++)
        ((uint16_t *)x)[i] = (uint16_t)(0x8000u | (1 + i % subnormals));
}

/* The forward kernel of dtype t of each instruction set this processor
 * has, one thread, on x as it is, with scale*alpha neg (input_scale and
 * scale 1). */
static void kernel_rows(const char *what, elu_dtype t, double neg, double t_copy)
{
    kernel_coef = (struct elu_coef){t, neg, 1.0, 1.0};
    bool has[2];
    elu_cpu_isas_present(has);
    for (int i = 0; i < 2; i++) {
        if (!has[i])
            continue;
        kernel_isa = elu_cpu_isas[i];
        char label[64];
        snprintf(label, sizeof label, "%s, %s", what, kernel_isa->name);
        row(label, elu_dtype_size(t), 2, timed(run_kernel, NULL), t_copy);
    }
}
#endif

static elu_ctx *cpu_ctx(int threads)
{
    elu_options o;
    elu_options_default(&o);
    o.backend = ELU_BACKEND_CPU;
    o.cpu_threads = threads;
    elu_ctx *ctx = NULL;
    if (elu_ctx_create(&ctx, &o) != ELU_OK)
        exit(1);
    return ctx;
}

static void api_rows(elu_dtype t, int threads)
{
    static const char *const dtypes[] = {"f32", "f64", "f16", "bf16"};
    static const char *const kernels[] = {"forward", "backward (input)", "backward (output)"};
    const size_t size = elu_dtype_size(t);
    fill(t);
    const double t_copy = copy_time(size);
    struct api_call a = {cpu_ctx(threads), elu_params_elu(t, 1.0), 0};
    for (a.kernel = 0; a.kernel < 3; a.kernel++) {
        /* A first call builds what the context keeps; a path this slow
         * (the scalar ones) needs no median. */
        const double t0 = now_s();
        run_api(&a);
        const double first = now_s() - t0;
        char label[64];
        snprintf(label, sizeof label, "%s %s, %d thr%s", dtypes[t], kernels[a.kernel], threads,
                 first > 1.0 ? " (1 run)" : "");
        row(label, size, a.kernel ? 3 : 2, first > 1.0 ? first : timed(run_api, &a), t_copy);
    }
    elu_ctx_destroy(a.ctx);
}

/* Constants that change from call to call (a learned or scheduled alpha):
 * SWEEP_CALLS calls of SWEEP_N elements on one thread, each with an alpha
 * no call used before, against as many with alpha 1, in one context. */
#define SWEEP_N 65536
#define SWEEP_CALLS 200

struct sweep {
    elu_ctx *ctx;
    elu_dtype t;
    int kernel; /* 0 forward, 1 backward from input */
    bool fresh;
};

static void run_sweep(void *arg)
{
    const struct sweep *s = arg;
    static double k; /* steps of the golden ratio's fraction never repeat */
    for (int c = 0; c < SWEEP_CALLS; c++) {
        k += s->fresh ? 0.6180339887498949 : 0;
        const elu_params p = elu_params_elu(s->t, s->fresh ? 0.5 + (k - floor(k)) : 1.0);
        const elu_status st = s->kernel == 0 ? elu_run(s->ctx, &p, x, y, SWEEP_N, NULL)
                                             : elu_run_backward(s->ctx, &p, g, x, false, y,
                                                                SWEEP_N, NULL);
        if (st != ELU_OK) {
            fprintf(stderr, "elu-cpu-bench: %s\n", elu_ctx_last_error(s->ctx));
            exit(1);
        }
    }
}

static void sweep_rows(void)
{
    static const char *const dtypes[] = {"f32", "f64", "f16", "bf16"};
    printf("\n%-34s %8s %8s %7s\n", "new alpha each call: us a call", "alpha 1", "new", "ratio");
    struct sweep s = {cpu_ctx(1), ELU_F32, 0, false};
    for (s.t = ELU_F32; s.t <= ELU_BF16; s.t++) {
        fill(s.t);
        for (s.kernel = 0; s.kernel < 2; s.kernel++) {
            s.fresh = false;
            const double one = timed(run_sweep, &s) / SWEEP_CALLS * 1e6;
            s.fresh = true;
            const double fresh = timed(run_sweep, &s) / SWEEP_CALLS * 1e6;
            char label[64];
            snprintf(label, sizeof label, "%s %s", dtypes[s.t],
                     s.kernel ? "backward (input)" : "forward");
            printf("%-34s %8.1f %8.1f %7.2f\n", label, one, fresh, fresh / one);
        }
    }
    elu_ctx_destroy(s.ctx);
}

/* Argument i as a whole number in [lo, hi]; `absent` where there is
 * none; -1 where it is anything else. */
static long argument(int argc, char **argv, int i, long absent, long lo, long hi)
{
    if (i >= argc)
        return absent;
    char *end;
    errno = 0;
    const long v = strtol(argv[i], &end, 10);
    return end != argv[i] && !*end && !errno && v >= lo && v <= hi ? v : -1;
}

int main(int argc, char **argv)
{
    const long log2_n = argument(argc, argv, 1, 26, 10, 30);
    const long repeats = argument(argc, argv, 2, 5, 1, MAX_REPS);
    if (argc > 3 || log2_n < 0 || repeats < 0) {
        fprintf(stderr, "usage: elu-cpu-bench [log2 of n, 10..30, default 26] "
                        "[repetitions, 1..%d, default 5]\n", MAX_REPS);
        return 2;
    }
    n = (size_t)1 << log2_n;
    reps = (int)repeats;
    x = malloc(n * 8);
    g = malloc(n * 8);
    y = malloc(n * 8);
    if (!x || !g || !y) {
        fprintf(stderr, "elu-cpu-bench: no memory for three arrays of %zu doubles\n", n);
        return 1;
    }
    memset(y, 1, n * 8);
    const long online = sysconf(_SC_NPROCESSORS_ONLN);
    printf("n = %zu, median of %d; kernels in use: %s; %ld cores\n", n, reps,
           elu_cpu_isa_name(), online);
    printf("%-34s %8s %8s %7s\n", "", "Gelem/s", "GB/s", "ratio");

    fill(ELU_F32);
    const double t_copy = copy_time(4);
    row("memcpy (f32 bytes)", 4, 2, t_copy, t_copy);
    row("glibc expm1f loop", 4, 2, timed(run_glibc, NULL), t_copy);
#if defined(ELU_BENCH_SLEEF)
    if (__builtin_cpu_supports("avx512f"))
        row("SLEEF expm1f_u10 AVX-512 loop", 4, 2, timed(run_sleef, NULL), t_copy);
#endif
#if defined(__x86_64__)
    kernel_rows("f32 forward kernel", ELU_F32, 1.0, t_copy);
    for (size_t i = 0; i < n; i++)
        ((float *)x)[i] = -fabsf(((float *)x)[i]);
    kernel_rows("  all below zero", ELU_F32, 1.0, t_copy);
    fill_doubtful(ELU_F32);
    kernel_rows("  all in doubt", ELU_F32, 1.0, t_copy);
    fill(ELU_F64);
    const double t_copy64 = copy_time(8);
    row("memcpy (f64 bytes)", 8, 2, t_copy64, t_copy64);
    kernel_rows("f64 forward kernel", ELU_F64, 1.0, t_copy64);
    for (size_t i = 0; i < n; i++)
        ((double *)x)[i] = -fabs(((double *)x)[i]);
    kernel_rows("  all below zero", ELU_F64, 1.0, t_copy64);
    fill_doubtful(ELU_F64);
    kernel_rows("  all in doubt", ELU_F64, 1.0, t_copy64);
    for (elu_dtype t = ELU_F16; t <= ELU_BF16; t++) {
        fill(t);
        const double t_copy16 = copy_time(2);
        row(t == ELU_F16 ? "memcpy (f16 bytes)" : "memcpy (bf16 bytes)", 2, 2, t_copy16, t_copy16);
        kernel_rows(t == ELU_F16 ? "f16 forward kernel" : "bf16 forward kernel", t, 1.0, t_copy16);
        fill_settled(t);
        kernel_rows("  all settled apart", t, 1.0, t_copy16);
    }
#endif
    for (int t = ELU_F32; t <= ELU_BF16; t++) {
        api_rows((elu_dtype)t, 1);
        if (online > 1)
            api_rows((elu_dtype)t, (int)online);
    }
    if (n >= SWEEP_N)
        sweep_rows();
    free(x);
    free(g);
    free(y);
    return 0;
}
