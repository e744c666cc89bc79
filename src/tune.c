#include "tune.h"

#include "jit.h"
#include "scalar.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

unsigned elu_max_packs(enum elu_kernel kernel)
{
    return kernel == ELU_KERNEL_FORWARD ? 2 : 1;
}

unsigned elu_size_class(size_t bytes)
{
    const int log2 = 63 - __builtin_clzll((unsigned long long)bytes | 1);
    const int c = (log2 - 13) / 2;
    return c < 0 ? 0 : c >= ELU_SIZE_CLASSES ? ELU_SIZE_CLASSES - 1 : (unsigned)c;
}

static size_t class_bytes(unsigned c)
{
    return (size_t)1 << (14 + 2 * c);
}

/* Packs per thread: one while the grid would fill half the device's
 * resident threads or less, so that every thread it can hold gets work;
 * then all the kernel takes (elu_max_packs), each thread keeping more
 * loads in flight. Blocks of 128 threads, for every dtype: no other size
 * measured better (docs/DESIGN.md, "Launch geometry"). */
void elu_tune_heuristic(unsigned resident_threads, struct elu_tuning *out)
{
    for (unsigned k = 0; k < 3; k++) {
        const unsigned most = elu_max_packs((enum elu_kernel)k);
        for (unsigned c = 0; c < ELU_SIZE_CLASSES; c++) {
            const size_t packs = class_bytes(c) / 16;
            const unsigned p = 2 * packs <= resident_threads ? 1 : most;
            out->shape[k][c] = (struct elu_shape){128, (uint16_t)p};
        }
    }
}

/* ---- ELU_AUTOTUNE ---- */

/* Measured at each class's size but the last's, up to 16 MiB an operand.
 * The largest inputs keep the rule's shapes: they stream from memory,
 * where no measured shape beat the rule, and measuring them would take
 * most of the scratch memory and time (docs/DESIGN.md, "ELU_AUTOTUNE"). */
#define TUNED_CLASSES (ELU_SIZE_CLASSES - 1)
#define SCRATCH_BYTES ((size_t)1 << (14 + 2 * (TUNED_CLASSES - 1)))
static const uint16_t THREADS[] = {128, 256, 512};
static const uint16_t PACKS[] = {1, 2, 4};
#define CANDIDATES (sizeof THREADS / sizeof *THREADS * sizeof PACKS / sizeof *PACKS)
/* Each candidate's median of ROUNDS timings of BATCH launches, the rounds
 * interleaved so that a slow moment of the machine hurts all alike; a
 * shape replaces the heuristic's only when MARGIN faster. */
#define ROUNDS 5
#define BATCH 16
#define MARGIN 0.03f

struct scratch {
    const struct elu_cuda_api *cu;
    elu_cu_deviceptr buf[3]; /* a, b, out */
    elu_cu_stream stream;
    elu_cu_event start, end;
};

static void scratch_free(struct scratch *s)
{
    for (int i = 0; i < 3; i++)
        if (s->buf[i])
            s->cu->MemFree(s->buf[i]);
    if (s->start)
        s->cu->EventDestroy(s->start);
    if (s->end)
        s->cu->EventDestroy(s->end);
    if (s->stream)
        s->cu->StreamDestroy(s->stream);
}

/* Inputs spread over [-8, 8) (the values, not the bits: the half types'
 * table lookups see what real activations give them), in 1 MiB copies. */
static elu_cu_result fill(const struct scratch *s, elu_dtype dtype, void *chunk, size_t bytes)
{
    const size_t size = elu_dtype_size(dtype), count = bytes / size;
    for (size_t i = 0; i < count; i++) {
        const double v = (double)((i * 2654435761u) & 0xffff) / 4096.0 - 8.0;
        char *p = (char *)chunk + i * size;
        if (dtype == ELU_F32)
            *(float *)p = (float)v;
        else if (dtype == ELU_F64)
            *(double *)p = v;
        else
            *(uint16_t *)p = dtype == ELU_F16 ? elu_f16_from(v) : elu_bf16_from(v);
    }
    elu_cu_result r = 0;
    for (int i = 0; i < 2 && r == 0; i++)
        for (size_t at = 0; at < SCRATCH_BYTES && r == 0; at += bytes)
            r = s->cu->MemcpyHtoD(s->buf[i] + at, chunk, bytes);
    return r;
}

static elu_cu_result scratch_init(struct scratch *s, elu_dtype dtype)
{
    const struct elu_cuda_api *cu = s->cu;
    elu_cu_result r = 0;
    for (int i = 0; i < 3 && r == 0; i++)
        r = cu->MemAlloc(&s->buf[i], SCRATCH_BYTES);
    if (r == 0)
        r = cu->StreamCreate(&s->stream, ELU_CU_STREAM_NON_BLOCKING);
    if (r == 0)
        r = cu->EventCreate(&s->start, 0);
    if (r == 0)
        r = cu->EventCreate(&s->end, 0);
    const size_t chunk_bytes = (size_t)1 << 20;
    void *chunk = r == 0 ? malloc(chunk_bytes) : NULL;
    if (r == 0 && !chunk)
        r = ELU_CU_ERROR_OUT_OF_MEMORY;
    if (r == 0)
        r = fill(s, dtype, chunk, chunk_bytes);
    free(chunk);
    return r;
}

struct trial {
    enum elu_kernel kernel;
    size_t n;
    elu_tune_launch launch;
    void *arg;
};

/* Milliseconds for BATCH launches of t with shape `shape`. */
static elu_cu_result time_batch(const struct scratch *s, const struct trial *t,
                                struct elu_shape shape, float *ms)
{
    const struct elu_cuda_api *cu = s->cu;
    elu_cu_result r = cu->EventRecord(s->start, s->stream);
    for (int i = 0; i < BATCH && r == 0; i++)
        r = t->launch(t->arg, t->kernel, shape, s->buf[0], s->buf[1], s->buf[2], t->n,
                      s->stream);
    if (r == 0)
        r = cu->EventRecord(s->end, s->stream);
    if (r == 0)
        r = cu->EventSynchronize(s->end);
    return r ? r : cu->EventElapsedTime(ms, s->start, s->end);
}

static int by_value(const void *a, const void *b)
{
    const float x = *(const float *)a, y = *(const float *)b;
    return (x > y) - (x < y);
}

/* The best of the candidate shapes for one kernel and size, starting from
 * the heuristic's *best. */
static elu_cu_result pick(const struct scratch *s, const struct trial *t, unsigned most,
                          struct elu_shape *best)
{
    struct elu_shape shapes[CANDIDATES];
    unsigned count = 0, heuristic = 0;
    for (size_t i = 0; i < sizeof THREADS / sizeof *THREADS; i++)
        for (size_t j = 0; j < sizeof PACKS / sizeof *PACKS && PACKS[j] <= most; j++) {
            if (THREADS[i] == best->threads && PACKS[j] == best->packs)
                heuristic = count;
            shapes[count++] = (struct elu_shape){THREADS[i], PACKS[j]};
        }
    float ms[CANDIDATES][ROUNDS + 1]; /* the first round warms up */
    elu_cu_result r = 0;
    for (int round = 0; round <= ROUNDS && r == 0; round++)
        for (unsigned i = 0; i < count && r == 0; i++)
            r = time_batch(s, t, shapes[i], &ms[i][round]);
    if (r != 0)
        return r;
    float bar = 0;
    for (unsigned i = 0; i < count; i++) {
        qsort(&ms[i][1], ROUNDS, sizeof(float), by_value);
        const float median = ms[i][1 + ROUNDS / 2];
        if (i == heuristic)
            bar = median * (1 - MARGIN);
        ms[i][0] = median;
    }
    for (unsigned i = 0; i < count; i++)
        if (i != heuristic && ms[i][0] < bar) {
            bar = ms[i][0];
            *best = shapes[i];
        }
    return 0;
}

static elu_cu_result measure(const struct scratch *s, elu_dtype dtype, elu_tune_launch launch,
                             void *arg, struct elu_tuning *t)
{
    elu_cu_result r = 0;
    for (unsigned k = 0; k < 3 && r == 0; k++)
        for (unsigned c = 0; c < TUNED_CLASSES && r == 0; c++) {
            const struct trial trial = {(enum elu_kernel)k,
                                        class_bytes(c) / elu_dtype_size(dtype), launch, arg};
            r = pick(s, &trial, elu_max_packs((enum elu_kernel)k), &t->shape[k][c]);
        }
    return r;
}

/* A stored tuning is used only if every shape is one this library could
 * have chosen. */
static bool valid(const struct elu_tuning *t)
{
    for (unsigned k = 0; k < 3; k++)
        for (unsigned c = 0; c < ELU_SIZE_CLASSES; c++) {
            const struct elu_shape s = t->shape[k][c];
            if (s.threads < 32 || s.threads > 1024 || s.threads % 32 || s.packs < 1 ||
                s.packs > elu_max_packs((enum elu_kernel)k))
                return false;
        }
    return true;
}

/* Only a forged entry could fail the size or shape checks (the key covers
 * libelu and its kernel source, the checksum the rest); it is measured
 * again and replaced. */
static bool from_disk(elu_ctx *ctx, const struct elu_cache_key *key,
                      struct elu_tuning *out, enum elu_cache_result *seen)
{
    void *payload = NULL;
    size_t size = 0;
    const bool hit =
        elu_jit_cache_get(ctx, key, ELU_BINARY_TUNING, &payload, &size, seen) &&
        size == sizeof *out && valid(payload);
    if (hit)
        memcpy(out, payload, sizeof *out);
    free(payload);
    return hit;
}

static void store(elu_ctx *ctx, const struct elu_cache_key *key, const struct elu_tune_device *d,
                  elu_dtype dtype, const struct elu_tuning *t)
{
    static const char *const dtypes[] = {"f32", "f64", "f16", "bf16"};
    static const char *const kernels[] = {"; forward", "; backward", "; from output"};
    char description[ELU_CACHE_MAX_DESCRIPTION];
    int len = snprintf(description, sizeof description,
                       "launch shapes (threads x packs, by size) for %s on %s (sm_%d), libelu %s",
                       dtypes[dtype], d->name, d->sm, ELU_VERSION_STRING);
    for (unsigned k = 0; k < 3; k++) {
        len += snprintf(description + len, sizeof description - (size_t)len, "%s", kernels[k]);
        for (unsigned c = 0; c < ELU_SIZE_CLASSES; c++)
            len += snprintf(description + len, sizeof description - (size_t)len, " %ux%u",
                            t->shape[k][c].threads, t->shape[k][c].packs);
    }
    elu_jit_cache_put(ctx, key, ELU_BINARY_TUNING, description, t, sizeof *t,
                      "tuning kept in memory");
}

void elu_tune(elu_ctx *ctx, const struct elu_tune_device *d, elu_dtype dtype,
              elu_tune_launch launch, void *arg, struct elu_tuning *out)
{
    elu_tune_heuristic(d->resident_threads, out);
    const struct elu_cache_key key = elu_jit_tuning_key(d->name, d->sm, dtype);
    enum elu_cache_result seen = ELU_CACHE_MISS;
    if (ctx->disk_cache && from_disk(ctx, &key, out, &seen))
        return;
    /* One process measures at a time (another's kernels would skew the
     * timings); whoever waited finds the entry. */
    char why[ELU_PATH_MAX + 256];
    const int lock = ctx->disk_cache ? elu_cache_lock(&ctx->cache, &key, why, sizeof why) : -1;
    if (lock >= 0 && from_disk(ctx, &key, out, &seen)) {
        elu_cache_unlock(lock);
        return;
    }
    struct scratch s = {.cu = d->cu};
    struct elu_tuning t = *out;
    elu_cu_result r = scratch_init(&s, dtype);
    if (r == 0)
        r = measure(&s, dtype, launch, arg, &t);
    scratch_free(&s);
    if (r == 0) {
        *out = t;
        ELU_COUNT(ctx, autotunes);
        if (ctx->disk_cache)
            store(ctx, &key, d, dtype, &t);
    } else {
        elu_fail(ctx, ELU_OK, "autotune: %s (using the heuristic's launch shapes)",
                 elu_cu_result_text(d->cu, r).text);
    }
    elu_cache_unlock(lock);
}
