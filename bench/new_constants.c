/* elu-bench's rows for constants that change from call to call (a learned
 * or scheduled alpha, a sweep): CALLS calls each with new constants
 * against CALLS calls with one prepared set, per dtype, direction and
 * size, in a context of its own on the benchmark's disk cache. */
#include "new_constants.h"

#include "devmem.h"
#include "fill.h"
#include "timing.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#define CALLS 200
#define ROUNDS 5

/* A set of ELU constants no call has used before: alpha in [0.5, 1.5),
 * the next of a sequence (steps of the golden ratio's fraction, which
 * never come back to a value) that a salt makes new for each run of the
 * benchmark. */
static elu_params fresh_params(elu_dtype t)
{
    static double salt = -1;
    static unsigned long long used = 0;
    if (salt < 0)
        salt = (double)(time(NULL) % 4099) / 4099;
    const double k = (double)used++ * 0.6180339887498949;
    return elu_params_elu(t, 0.5 + fmod(salt + k, 1.0));
}

/* Seconds for CALLS calls of direction `bwd` on n elements, synchronized;
 * new constants on each call when `new_each`, else `same`. */
static double time_calls(elu_ctx *ctx, const elu_params *same, bool new_each, bool bwd,
                         const void *a, const void *b, void *out, size_t n, bool *ok)
{
    const double t0 = now_s();
    for (int i = 0; i < CALLS && *ok; i++) {
        const elu_params p = new_each ? fresh_params(same->dtype) : *same;
        *ok = (bwd ? elu_run_backward(ctx, &p, a, b, false, out, n, NULL)
                   : elu_run(ctx, &p, a, out, n, NULL)) == ELU_OK;
    }
    *ok = *ok && dev_sync();
    return now_s() - t0;
}

/* One row: ROUNDS rounds of the two loops, interleaved, after one round
 * that warms up (loading the generic module); the medians. */
static bool measure_row(elu_ctx *ctx, elu_dtype t, bool bwd, size_t n, void *a, void *b,
                        void *out, struct new_constants_row *row)
{
    const elu_params same = elu_params_elu(t, 0.9);
    bool ok = elu_prepare(ctx, &same) == ELU_OK;
    double fresh[ROUNDS], prepared[ROUNDS];
    for (int r = -1; r < ROUNDS && ok; r++) {
        const double tf = time_calls(ctx, &same, true, bwd, a, b, out, n, &ok);
        const double tp = time_calls(ctx, &same, false, bwd, a, b, out, n, &ok);
        if (r >= 0) {
            fresh[r] = tf;
            prepared[r] = tp;
        }
    }
    if (!ok)
        return false;
    row->new_us = median(fresh, ROUNDS) / CALLS * 1e6;
    row->prepared_us = median(prepared, ROUNDS) / CALLS * 1e6;
    return true;
}

int measure_new_constants(const char *cache_dir, struct new_constants_row *rows)
{
    const size_t max_n = (size_t)1 << NEW_CONSTANTS_MAX_LOG2;
    void *host = malloc(max_n * 8), *out = dev_alloc(max_n * 8);
    elu_options o;
    elu_options_default(&o);
    o.backend = ELU_BACKEND_CUDA;
    o.cache_dir = cache_dir;
    elu_ctx *ctx = NULL;
    int count = 0;
    bool ok = host && out && elu_ctx_create(&ctx, &o) == ELU_OK;
    for (int t = 0; t < 4 && ok; t++) {
        bench_fill((elu_dtype)t, host, max_n);
        void *a = dev_upload(host, max_n * elu_dtype_size((elu_dtype)t));
        void *b = dev_upload(host, max_n * elu_dtype_size((elu_dtype)t));
        ok = a && b;
        for (int lg = NEW_CONSTANTS_MIN_LOG2; lg <= NEW_CONSTANTS_MAX_LOG2 && ok; lg += 4)
            for (int bwd = 0; bwd < 2 && ok; bwd++) {
                struct new_constants_row *row = &rows[count];
                *row = (struct new_constants_row){t, lg, bwd, 0, 0};
                ok = measure_row(ctx, (elu_dtype)t, bwd, (size_t)1 << lg, a, b, out, row);
                count += ok;
            }
        dev_free(a);
        dev_free(b);
    }
    elu_ctx_destroy(ctx);
    free(host);
    dev_free(out);
    return count;
}

static const char *const NAMES[] = {"f32", "f64", "f16", "bf16"};

void print_new_constants_text(const struct new_constants_row *rows, int count)
{
    printf("new constants on every call: %d calls, each with its own alpha, against %d with "
           "one prepared set (medians of %d rounds)\n", CALLS, CALLS, ROUNDS);
    printf("%-5s %-6s %-8s %12s %12s %8s\n", "dtype", "n", "kernel", "new us/call",
           "same us/call", "new/same");
    for (int i = 0; i < count; i++)
        printf("%-5s 2^%-4d %-8s %12.2f %12.2f %8.3f\n", NAMES[rows[i].dtype], rows[i].log2,
               rows[i].backward ? "backward" : "forward", rows[i].new_us, rows[i].prepared_us,
               rows[i].new_us / rows[i].prepared_us);
}

void print_new_constants_json(const struct new_constants_row *rows, int count)
{
    printf(" \"new_constants\": [");
    for (int i = 0; i < count; i++)
        printf("%s\n  {\"dtype\": \"%s\", \"log2\": %d, \"kernel\": \"%s\", \"new_us\": %.3f, "
               "\"prepared_us\": %.3f, \"ratio\": %.4f}",
               i ? "," : "", NAMES[rows[i].dtype], rows[i].log2,
               rows[i].backward ? "backward" : "forward", rows[i].new_us, rows[i].prepared_us,
               rows[i].new_us / rows[i].prepared_us);
    printf("]}\n");
}
