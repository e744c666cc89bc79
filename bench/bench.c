/* elu-bench: libelu on the GPU, measured against the device's own
 * yardsticks in the same run:
 *   - throughput of elu_run and elu_run_backward per dtype and size, as a
 *     share of a device-to-device copy of the same bytes (median over REPS
 *     batches of BATCH calls, timed on the host around a synchronize; the
 *     copy's and each kernel's batches interleaved);
 *   - the host cost of one small elu_run against a raw cuLaunchKernel of an
 *     empty kernel with the same parameters;
 *   - the replay of a captured graph of GRAPH_CALLS small elu_run;
 *   - the first call in a new process, with an empty disk cache (cold) and
 *     then a warm one, and cold with ELU_PREWARM; and a new specialization
 *     in a running process.
 *   elu-bench [--json] [log2 of the largest size, default 28]
 * With --json, one JSON object on stdout instead of the tables. */
#include "bench_dev.h"
#include "fill.h"
#include "new_constants.h"
#include "elu.h"
#include "timing.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define REPS 15
#define BATCH 10
#define SMALL_N 1024
#define LAUNCHES 100   /* per timed batch of host-cost launches */
#define GRAPH_CALLS 1000
#define MIN_LOG2 10
#define STR_(x) #x
#define STR(x) STR_(x)

static const char *const NAMES[] = {"f32", "f64", "f16", "bf16"};

enum op { COPY, FORWARD, BACKWARD };

struct bufs {
    void *a, *b, *out;
};

/* One call on n elements from element `skew` of each buffer (1: every
 * pointer misaligned by one element). */
static bool run_once(enum op op, elu_ctx *ctx, const elu_params *p,
                     const struct bufs *d, size_t n, size_t skew)
{
    const size_t es = elu_dtype_size(p->dtype);
    const char *a = (const char *)d->a + skew * es, *b = (const char *)d->b + skew * es;
    char *out = (char *)d->out + skew * es;
    switch (op) {
    case COPY: return dev_copy_async(out, a, n * es);
    case FORWARD: return elu_run(ctx, p, a, out, n, NULL) == ELU_OK;
    case BACKWARD: return elu_run_backward(ctx, p, b, a, false, out, n, NULL) == ELU_OK;
    }
    return false;
}

/* One measurement of a row of the throughput table: op on n elements from
 * element skew (see run_once), in ctx. */
#define JOBS 9
struct job {
    enum op op;
    elu_ctx *ctx;
    size_t n, skew;
};

/* Median seconds per call of each job: REPS rounds, each timing one batch
 * of every job in turn, so that every median samples the same stretch of
 * time. The GPU's clocks drift over a long run: measured one after the
 * other, the same f64 kernel gave 0.92 and 1.03 of a copy on the H200. */
static bool time_jobs(const struct job jobs[JOBS], const elu_params *p, const struct bufs *d,
                      double seconds[JOBS])
{
    double t[JOBS][REPS];
    for (int j = 0; j < JOBS; j++)
        if (!run_once(jobs[j].op, jobs[j].ctx, p, d, jobs[j].n, jobs[j].skew))
            return false;
    dev_sync();
    for (int r = 0; r < REPS; r++)
        for (int j = 0; j < JOBS; j++) {
            const double t0 = now_s();
            for (int i = 0; i < BATCH; i++)
                if (!run_once(jobs[j].op, jobs[j].ctx, p, d, jobs[j].n, jobs[j].skew))
                    return false;
            dev_sync();
            t[j][r] = (now_s() - t0) / BATCH;
        }
    for (int j = 0; j < JOBS; j++)
        seconds[j] = median(t[j], REPS);
    return true;
}

struct row {
    int dtype, log2;
    double copy, fwd, bwd; /* GB/s: copy and forward 2 bytes moved per byte, backward 3 */
    double fwd_skew, bwd_skew; /* misaligned by one element, n - 1 elements */
    double fwd_tuned, bwd_tuned; /* with ELU_AUTOTUNE's launch shapes */
    double fwd_generic, bwd_generic; /* the generic kernels (constants as arguments) */
};

/* -------- host cost and graphs -------- */

struct small {
    elu_ctx *ctx;
    elu_params p;
    void *x, *y;
};

static bool record_elus(void *arg, elu_stream stream)
{
    const struct small *s = arg;
    for (int i = 0; i < GRAPH_CALLS; i++)
        if (elu_run(s->ctx, &s->p, s->x, s->y, SMALL_N, stream) != ELU_OK)
            return false;
    return true;
}

struct host_cost {
    double elu_us, raw_us, graph_us; /* per call; graph: per ELU in a replay */
};

/* Median host time of one call over REPS batches of LAUNCHES, the batch's
 * synchronize untimed; elu_run and the raw launch alternate batches so that
 * both see the same machine. */
static bool measure_host_cost(elu_ctx *ctx, struct host_cost *hc)
{
    struct small s = {ctx, elu_params_elu(ELU_F32, 1.0), dev_alloc(SMALL_N * 4),
                      dev_alloc(SMALL_N * 4)};
    void *kernel = dev_empty_kernel();
    elu_stream stream;
    if (!s.x || !s.y || !kernel || !dev_stream_create(&stream) ||
        elu_prepare(ctx, &s.p) != ELU_OK)
        return false;
    unsigned long long n = SMALL_N;
    const float c[3] = {1, 1, 1};
    void *table = NULL;
    unsigned long long head = 0;
    void *params[] = {&s.x, &s.y, &n, (void *)c, &table, &head};
    double elu[REPS], raw[REPS], graph[REPS];
    for (int r = -1; r < REPS; r++) { /* r = -1 warms up */
        double t0 = now_s();
        for (int i = 0; i < LAUNCHES; i++)
            elu_run(ctx, &s.p, s.x, s.y, SMALL_N, stream);
        const double t_elu = (now_s() - t0) / LAUNCHES;
        dev_stream_sync(stream);
        t0 = now_s();
        for (int i = 0; i < LAUNCHES; i++)
            dev_launch_empty(kernel, 1, 128, params, stream);
        const double t_raw = (now_s() - t0) / LAUNCHES;
        dev_stream_sync(stream);
        if (r >= 0) {
            elu[r] = t_elu;
            raw[r] = t_raw;
        }
    }
    void *g = dev_capture(stream, record_elus, &s);
    bool ok = g != NULL;
    for (int r = -1; ok && r < REPS; r++) {
        const double t0 = now_s();
        ok = dev_replay(g, stream) && dev_stream_sync(stream);
        if (r >= 0)
            graph[r] = (now_s() - t0) / GRAPH_CALLS;
    }
    dev_graph_destroy(g);
    dev_stream_destroy(stream);
    dev_free(s.x);
    dev_free(s.y);
    *hc = (struct host_cost){median(elu, REPS) * 1e6, median(raw, REPS) * 1e6,
                             ok ? median(graph, REPS) * 1e6 : -1};
    return true;
}

/* -------- new specializations in a running process -------- */

#define NEW_SPECS 5

/* What a specialization of dtype that neither the process nor the disk
 * cache has costs once NVRTC is loaded, in median milliseconds: elu_prepare
 * in ctx (a compile, a cache write and a module load), then in `memory`, a
 * context without a disk cache (a compile and a load); and elu_precompile
 * in ctx (a compile and a write), then elu_prepare of that one (a disk hit
 * and a load). Every compile has constants of its own: NVRTC (CUDA 12.9
 * and later) returns a program it has compiled before at once. */
struct spec_cost {
    double prepare, in_memory, compile, load, first_run;
};

/* The first elu_run of new constants of dtype on 2^20 device elements,
 * synchronized, in median milliseconds, once the dtype's generic forward is
 * loaded: what an application sees, as the generic kernels serve while the
 * context's background thread compiles. In a context without a disk cache,
 * destroyed before the other measures (it waits for its thread). */
static bool first_runs(elu_dtype dtype, double *ms)
{
    const size_t n = (size_t)1 << 20;
    void *x = dev_alloc(n * 8), *y = dev_alloc(n * 8);
    elu_options o;
    elu_options_default(&o);
    o.backend = ELU_BACKEND_CUDA;
    o.flags = ELU_NO_DISK_CACHE;
    elu_ctx *ctx = NULL;
    const double fresh = (double)(time(NULL) % 1000003) * 1e-8;
    const elu_params warm = elu_params_celu(dtype, 0.2 + fresh);
    bool ok = x && y && elu_ctx_create(&ctx, &o) == ELU_OK &&
              elu_run(ctx, &warm, x, y, n, NULL) == ELU_OK && dev_sync();
    double t[NEW_SPECS];
    for (int k = 0; k < NEW_SPECS && ok; k++) {
        const elu_params p = elu_params_celu(dtype, 0.21 + 0.01 * k + fresh);
        const double t0 = now_s();
        ok = elu_run(ctx, &p, x, y, n, NULL) == ELU_OK && dev_sync();
        t[k] = (now_s() - t0) * 1e3;
    }
    elu_ctx_destroy(ctx);
    dev_free(x);
    dev_free(y);
    *ms = ok ? median(t, NEW_SPECS) : -1;
    return ok;
}

static bool new_specialization(elu_ctx *ctx, elu_ctx *memory, elu_dtype dtype, int sm,
                               struct spec_cost *sc)
{
    double t[4][NEW_SPECS];
    for (int k = 0; k < NEW_SPECS; k++) {
        const double fresh = (double)(time(NULL) % 1000003) * 1e-8;
        const elu_params p = elu_params_celu(dtype, 0.3 + 0.01 * k + fresh);
        const elu_params q = elu_params_celu(dtype, 0.5 + 0.01 * k + fresh);
        const elu_params r = elu_params_celu(dtype, 0.7 + 0.01 * k + fresh);
        const double t0 = now_s();
        bool ok = elu_prepare(ctx, &p) == ELU_OK;
        const double t1 = now_s();
        ok = ok && elu_prepare(memory, &r) == ELU_OK;
        const double t2 = now_s();
        ok = ok && elu_precompile(ctx, &q, sm) == ELU_OK;
        const double t3 = now_s();
        if (!ok || elu_prepare(ctx, &q) != ELU_OK)
            return false;
        t[0][k] = (t1 - t0) * 1e3;
        t[1][k] = (t2 - t1) * 1e3;
        t[2][k] = (t3 - t2) * 1e3;
        t[3][k] = (now_s() - t3) * 1e3;
    }
    *sc = (struct spec_cost){median(t[0], NEW_SPECS), median(t[1], NEW_SPECS),
                             median(t[2], NEW_SPECS), median(t[3], NEW_SPECS), sc->first_run};
    return true;
}

/* -------- the first call in a new process -------- */

/* The application's own start-up, between creating its context and its
 * first elu_run, in the prewarmed case. */
#define START_UP_MS 200

/* The child: a context on cache_dir (prewarming dtype's specialization, then
 * START_UP_MS of other work, if asked), then the first elu_run of dtype on
 * 2^20 device elements, synchronized. Prints "ctx_ms run_ms compiles
 * disk_hits"; for the floor (dtype -1), NVRTC's load in place of ctx_ms. */
static int first_call(const char *cache_dir, int dtype, bool prewarm, double alpha)
{
    const size_t n = (size_t)1 << 20;
    if (!dev_init(0))
        return 1;
    if (dtype < 0) { /* the floor: NVRTC's first compile, of a one-line kernel */
        double load_ms = 0;
        const double ms = dev_nvrtc_floor_ms(0, (unsigned)((alpha - 1) * 1e9), &load_ms);
        printf("%.3f %.3f 1 0\n", load_ms, ms);
        return ms < 0;
    }
    void *x = dev_alloc(n * 8), *y = dev_alloc(n * 8);
    const elu_params p = elu_params_elu((elu_dtype)dtype, alpha);
    elu_options o;
    elu_options_default(&o);
    o.backend = ELU_BACKEND_CUDA;
    o.cache_dir = cache_dir;
    if (prewarm) {
        o.flags |= ELU_PREWARM;
        o.prewarm = &p;
        o.prewarm_count = 1;
    }
    elu_ctx *ctx;
    const double t0 = now_s();
    if (!x || !y || elu_ctx_create(&ctx, &o) != ELU_OK)
        return 1;
    const double t1 = now_s();
    if (prewarm)
        nanosleep(&(struct timespec){0, START_UP_MS * 1000000L}, NULL);
    const double t2 = now_s();
    if (elu_run(ctx, &p, x, y, n, NULL) != ELU_OK || !dev_sync())
        return 1;
    const double t3 = now_s();
    elu_ctx_stats s;
    elu_ctx_get_stats(ctx, &s);
    printf("%.3f %.3f %llu %llu\n", (t1 - t0) * 1e3, (t3 - t2) * 1e3,
           (unsigned long long)s.compiles, (unsigned long long)s.disk_hits);
    elu_ctx_destroy(ctx);
    return 0;
}

/* The cases, in order: a warm one runs on the cache the case before left.
 * dtype -1 is the floor (dev_nvrtc_floor_ms), measured between the others
 * so that a slow moment of the machine weighs on both. */
struct first {
    int dtype;
    bool warm, prewarm;
    double alpha;
    double ctx_ms, run_ms;
    double over_floor; /* where over_the_floor: see measure_first_calls */
    unsigned long long compiles, disk_hits;
};
#define FIRST_CASES 6
#define FLOOR_CASE 2
static const struct first FIRST_CASE[FIRST_CASES] = {
    {ELU_F32, false, false, 0, 0, 0, 0, 0, 0}, {ELU_F32, true, false, 0, 0, 0, 0, 0, 0},
    {-1, false, false, 0, 0, 0, 0, 0, 0},      {ELU_F16, false, false, 0, 0, 0, 0, 0, 0},
    {ELU_F16, true, false, 0, 0, 0, 0, 0, 0},  {ELU_F32, false, true, 0, 0, 0, 0, 0, 0},
};

/* Whether f is a cold first call of libelu's, which over_floor compares
 * with its round's floor. */
static bool over_the_floor(const struct first *f)
{
    return f->dtype >= 0 && !f->warm && !f->prewarm;
}

static const char *first_name(const struct first *f)
{
    return f->dtype < 0 ? "nvrtc floor" : NAMES[f->dtype];
}

static bool spawn_first_call(const char *dir, struct first *f)
{
    char cmd[1024];
    /* NVRTC (CUDA 12.9 and later) keeps the programs it compiles in the
     * driver's cache (~/.nv/ComputeCache), unless told not to as libelu
     * does: each case gets a cache of its own, empty, so that the floor's
     * compile pays the first use of that cache as on a fresh machine. */
    snprintf(cmd, sizeof cmd, "CUDA_CACHE_PATH='%s/nv' /proc/%d/exe --first-call '%s' %d %d %.17g",
             dir, (int)getpid(), dir, (int)f->dtype, (int)f->prewarm, f->alpha);
    FILE *child = popen(cmd, "r");
    const bool ok = child && fscanf(child, "%lf %lf %llu %llu", &f->ctx_ms, &f->run_ms,
                                    &f->compiles, &f->disk_hits) == 4;
    return child && pclose(child) == 0 && ok;
}

/* Each case FIRST_REPS times, the cases interleaved; the medians. A cold
 * case's first elu_run is also compared with the floor of its own round
 * (NVRTC's load and first compile), the median of those differences
 * standing in over_floor: the host's NVRTC timings drift by 15 ms from one
 * process to the next on the H200's host, and a round's processes share
 * its moment. */
#define FIRST_REPS 9

static bool measure_first_calls(const char *dir, struct first *fc)
{
    char sub[64] = "";
    double ctx_ms[FIRST_CASES][FIRST_REPS], run_ms[FIRST_CASES][FIRST_REPS];
    memcpy(fc, FIRST_CASE, sizeof FIRST_CASE);
    /* A cold case's constants are new to this machine, so that no cache
     * helps it: not ours (a directory of its own), nor NVRTC's (which,
     * since CUDA 12.9, returns a program it compiled before at once; see
     * spawn_first_call). A warm case reuses the case before's constants
     * and directory. */
    double alpha = 1;
    for (int r = 0; r < FIRST_REPS; r++) {
        for (int i = 0; i < FIRST_CASES; i++) {
            if (!fc[i].warm) {
                snprintf(sub, sizeof sub, "%s/%d.%d", dir, i, r);
                alpha = 1 + (double)(time(NULL) % 1000003) * 1e-7 + (i + 8 * r) * 1e-9;
            }
            fc[i].alpha = alpha;
            if (!spawn_first_call(sub, &fc[i]))
                return false;
            ctx_ms[i][r] = fc[i].ctx_ms;
            run_ms[i][r] = fc[i].run_ms;
        }
    }
    for (int i = 0; i < FIRST_CASES; i++) {
        double over[FIRST_REPS];
        for (int r = 0; r < FIRST_REPS; r++)
            over[r] = run_ms[i][r] - ctx_ms[FLOOR_CASE][r] - run_ms[FLOOR_CASE][r];
        fc[i].over_floor = median(over, FIRST_REPS);
        fc[i].ctx_ms = median(ctx_ms[i], FIRST_REPS);
        fc[i].run_ms = median(run_ms[i], FIRST_REPS);
    }
    return true;
}

/* -------- output -------- */

static void print_text(const elu_ctx_info *info, const struct row *rows, int count,
                       const double *tune_ms, const struct host_cost *hc,
                       const struct first *fc, const struct spec_cost *sc)
{
    printf("%s sm_%d, driver %d, NVRTC %d; median of %d batches of %d\n",
           info->device_name, info->sm, info->driver_version, info->nvrtc_version, REPS,
           BATCH);
    printf("%-5s %-6s %10s %10s %8s %10s %8s %9s %9s %9s %9s %9s %9s\n", "dtype", "n",
           "copy GB/s", "fwd GB/s", "fwd/cp", "bwd GB/s", "bwd/cp", "fwd+1/al", "bwd+1/al",
           "fwdT/cp", "bwdT/cp", "fwdG/fwd", "bwdG/bwd");
    for (int i = 0; i < count; i++)
        printf("%-5s 2^%-4d %10.1f %10.1f %8.3f %10.1f %8.3f %9.3f %9.3f %9.3f %9.3f %9.3f "
               "%9.3f\n",
               NAMES[rows[i].dtype], rows[i].log2, rows[i].copy, rows[i].fwd,
               rows[i].fwd / rows[i].copy, rows[i].bwd, rows[i].bwd / rows[i].copy,
               rows[i].fwd_skew / rows[i].fwd, rows[i].bwd_skew / rows[i].bwd,
               rows[i].fwd_tuned / rows[i].copy, rows[i].bwd_tuned / rows[i].copy,
               rows[i].fwd_generic / rows[i].fwd, rows[i].bwd_generic / rows[i].bwd);
    printf("(fwd+1/al, bwd+1/al: every pointer one element off 16-byte alignment, n - 1 "
           "elements, against aligned; fwdT, bwdT: with ELU_AUTOTUNE's launch shapes; fwdG, "
           "bwdG: the generic kernels, constants as arguments, against the specialized)\n");
    for (int t = 0; t < 4; t++)
        printf("ELU_AUTOTUNE for %s: measured in %.1f ms\n", NAMES[t], tune_ms[t]);
    printf("host cost of one call, f32 n=%d (median of %d batches of %d): elu_run %.2f us, "
           "raw cuLaunchKernel %.2f us, ratio %.3f\n", SMALL_N, REPS, LAUNCHES, hc->elu_us,
           hc->raw_us, hc->elu_us / hc->raw_us);
    printf("graph of %d elu_run (f32 n=%d), replayed: %.3f us per ELU\n", GRAPH_CALLS,
           SMALL_N, hc->graph_us);
    for (int i = 0; i < FIRST_CASES; i++) {
        if (fc[i].dtype < 0) {
            printf("the floor in a new process (medians of " STR(FIRST_REPS) "): NVRTC's "
                   "first compile, of a one-line kernel, %.2f ms, after %.2f ms to load "
                   "NVRTC\n", fc[i].run_ms, fc[i].ctx_ms);
            continue;
        }
        printf("first call in a new process (medians of " STR(FIRST_REPS) "), %s, %s "
               "cache%s: context %.2f ms, first elu_run (2^20, synchronized) %.2f ms, "
               "%llu compiles, %llu disk hits\n",
               NAMES[fc[i].dtype], fc[i].warm ? "warm" : "cold",
               fc[i].prewarm ? ", ELU_PREWARM and " STR(START_UP_MS) " ms of start-up" : "",
               fc[i].ctx_ms, fc[i].run_ms, fc[i].compiles, fc[i].disk_hits);
        if (over_the_floor(&fc[i]))
            printf("  that elu_run less its round's floor and NVRTC load (median of "
                   STR(FIRST_REPS) " rounds): %+.2f ms\n", fc[i].over_floor);
    }
    for (int t = 0; t < 4; t++)
        printf("a new %s specialization in a running process (medians of %d): first elu_run "
               "(2^20, synchronized; the generic kernels serve) %.2f ms; elu_prepare %.2f ms "
               "(without a disk cache %.2f ms); apart, compile and store %.2f ms, load "
               "%.2f ms\n", NAMES[t], NEW_SPECS, sc[t].first_run, sc[t].prepare,
               sc[t].in_memory, sc[t].compile, sc[t].load);
}

static void print_json(const elu_ctx_info *info, const struct row *rows, int count,
                       const double *tune_ms, const struct host_cost *hc,
                       const struct first *fc, const struct spec_cost *sc)
{
    printf("{\"device\": \"%s\", \"sm\": %d, \"driver\": %d, \"nvrtc\": %d,\n \"throughput\": [",
           info->device_name, info->sm, info->driver_version, info->nvrtc_version);
    for (int i = 0; i < count; i++)
        printf("%s\n  {\"dtype\": \"%s\", \"log2\": %d, \"copy_gbs\": %.1f, \"fwd_gbs\": %.1f, "
               "\"bwd_gbs\": %.1f, \"fwd_ratio\": %.4f, \"bwd_ratio\": %.4f, "
               "\"fwd_misaligned_vs_aligned\": %.4f, \"bwd_misaligned_vs_aligned\": %.4f, "
               "\"fwd_tuned_ratio\": %.4f, \"bwd_tuned_ratio\": %.4f, "
               "\"fwd_generic_vs_specialized\": %.4f, \"bwd_generic_vs_specialized\": %.4f}",
               i ? "," : "", NAMES[rows[i].dtype], rows[i].log2, rows[i].copy, rows[i].fwd,
               rows[i].bwd, rows[i].fwd / rows[i].copy, rows[i].bwd / rows[i].copy,
               rows[i].fwd_skew / rows[i].fwd, rows[i].bwd_skew / rows[i].bwd,
               rows[i].fwd_tuned / rows[i].copy, rows[i].bwd_tuned / rows[i].copy,
               rows[i].fwd_generic / rows[i].fwd, rows[i].bwd_generic / rows[i].bwd);
    printf("],\n \"autotune_ms\": {");
    for (int t = 0; t < 4; t++)
        printf("%s\"%s\": %.1f", t ? ", " : "", NAMES[t], tune_ms[t]);
    printf("},\n \"host_cost\": {\"n\": %d, \"elu_run_us\": %.3f, \"raw_launch_us\": %.3f, "
           "\"ratio\": %.4f, \"graph_us_per_elu\": %.4f},\n \"first_call\": [", SMALL_N,
           hc->elu_us, hc->raw_us, hc->elu_us / hc->raw_us, hc->graph_us);
    for (int i = 0; i < FIRST_CASES; i++) {
        char over[32] = "null";
        if (over_the_floor(&fc[i]))
            snprintf(over, sizeof over, "%.3f", fc[i].over_floor);
        printf("%s\n  {\"dtype\": \"%s\", \"cache\": \"%s\", \"prewarm\": %s, "
               "\"ctx_ms\": %.3f, \"run_ms\": %.3f, \"over_floor_ms\": %s, "
               "\"compiles\": %llu, \"disk_hits\": %llu}",
               i ? "," : "", first_name(&fc[i]), fc[i].warm ? "warm" : "cold",
               fc[i].prewarm ? "true" : "false", fc[i].ctx_ms, fc[i].run_ms, over,
               fc[i].compiles, fc[i].disk_hits);
    }
    printf("],\n \"new_specialization_ms\": [");
    for (int t = 0; t < 4; t++)
        printf("%s\n  {\"dtype\": \"%s\", \"first_run\": %.3f, \"prepare\": %.3f, "
               "\"prepare_in_memory\": %.3f, \"compile\": %.3f, \"load\": %.3f}",
               t ? "," : "", NAMES[t], sc[t].first_run, sc[t].prepare, sc[t].in_memory,
               sc[t].compile, sc[t].load);
    printf("],\n");
}

static void remove_dir(const char *dir)
{
    char rm[128];
    snprintf(rm, sizeof rm, "rm -rf '%s'", dir);
    if (system(rm) != 0)
        fprintf(stderr, "elu-bench: could not remove %s\n", dir);
}

/* -------- the throughput table -------- */

/* ctx with the default launch shapes, tuned with ELU_AUTOTUNE's (measured
 * at its first elu_prepare of each dtype, in tune_ms), and `generic`, whose
 * one specialization is taken, so that its generic kernels serve. */
static int measure_throughput(elu_ctx *ctx, elu_ctx *tuned, elu_ctx *generic, int max_log2,
                              struct row *rows, double *tune_ms)
{
    const size_t max_bytes = ((size_t)1 << max_log2) * 8;
    void *host = malloc(max_bytes);
    struct bufs d = {NULL, NULL, dev_alloc(max_bytes)};
    int count = 0;
    for (int t = 0; t < 4 && host && d.out; t++) {
        const elu_params p = elu_params_elu((elu_dtype)t, 1.0);
        bench_fill((elu_dtype)t, host, max_bytes / elu_dtype_size(p.dtype));
        dev_free(d.a);
        dev_free(d.b);
        d.a = dev_upload(host, max_bytes);
        d.b = dev_upload(host, max_bytes);
        if (!d.a || !d.b || elu_prepare(ctx, &p) != ELU_OK || elu_prepare(generic, &p) != ELU_OK)
            break;
        const double t0 = now_s(); /* the kernels from the disk cache, then tuning */
        if (elu_prepare(tuned, &p) != ELU_OK)
            break;
        tune_ms[t] = (now_s() - t0) * 1e3;
        for (int lg = MIN_LOG2; lg <= max_log2; lg += 2) {
            const size_t n = (size_t)1 << lg;
            const double bytes = (double)(n * elu_dtype_size(p.dtype));
            const struct job jobs[JOBS] = {
                {COPY, ctx, n, 0},         {FORWARD, ctx, n, 0},     {BACKWARD, ctx, n, 0},
                {FORWARD, ctx, n - 1, 1},  {BACKWARD, ctx, n - 1, 1}, {FORWARD, tuned, n, 0},
                {BACKWARD, tuned, n, 0},   {FORWARD, generic, n, 0}, {BACKWARD, generic, n, 0}};
            double s[JOBS];
            if (!time_jobs(jobs, &p, &d, s))
                break;
            rows[count++] = (struct row){t, lg, 2 * bytes / s[0] / 1e9, 2 * bytes / s[1] / 1e9,
                                         3 * bytes / s[2] / 1e9, 2 * bytes / s[3] / 1e9,
                                         3 * bytes / s[4] / 1e9, 2 * bytes / s[5] / 1e9,
                                         3 * bytes / s[6] / 1e9, 2 * bytes / s[7] / 1e9,
                                         3 * bytes / s[8] / 1e9};
        }
    }
    free(host);
    dev_free(d.a);
    dev_free(d.b);
    dev_free(d.out);
    return count;
}

int main(int argc, char **argv)
{
    if (argc == 6 && strcmp(argv[1], "--first-call") == 0)
        return first_call(argv[2], atoi(argv[3]), atoi(argv[4]), strtod(argv[5], NULL));
    const bool json = argc > 1 && strcmp(argv[1], "--json") == 0;
    const int max_log2 = argc > 1 + json ? atoi(argv[1 + json]) : 28;
    /* A cache of its own, in /tmp: new specializations are new there, and
     * its writes cost what a local disk's do. */
    char dir[] = "/tmp/elu-bench-XXXXXX", main_dir[64];
    const bool have_dir = mkdtemp(dir) != NULL;
    snprintf(main_dir, sizeof main_dir, "%s/main", dir);
    elu_options o;
    elu_options_default(&o);
    o.backend = ELU_BACKEND_CUDA;
    o.cache_dir = main_dir;
    elu_ctx *ctx;
    if (!have_dir || max_log2 < MIN_LOG2 || max_log2 > 30 ||
        elu_ctx_create(&ctx, &o) != ELU_OK || !dev_init(0)) {
        fprintf(stderr, "usage: elu-bench [--json] [log2 of the largest size, 10..30]; "
                        "it needs a CUDA device\n");
        if (have_dir)
            remove_dir(dir);
        return 1;
    }
    elu_ctx_info info;
    elu_ctx_get_info(ctx, &info);
    struct row rows[4 * 16];
    double tune_ms[4] = {0};
    o.flags = ELU_AUTOTUNE;
    elu_ctx *tuned = NULL, *generic = NULL;
    const bool tuned_ok = elu_ctx_create(&tuned, &o) == ELU_OK;
    o.flags = 0;
    o.max_specializations = 1;
    const elu_params taken = elu_params_selu(ELU_F64);
    const bool generic_ok = elu_ctx_create(&generic, &o) == ELU_OK &&
                            elu_prepare(generic, &taken) == ELU_OK;
    o.max_specializations = 0;
    const int count = tuned_ok && generic_ok
                          ? measure_throughput(ctx, tuned, generic, max_log2, rows, tune_ms)
                          : 0;
    elu_ctx_destroy(tuned);
    elu_ctx_destroy(generic);
    struct new_constants_row nc[NEW_CONSTANTS_ROWS];
    const int nc_count = measure_new_constants(main_dir, nc);
    struct host_cost hc = {-1, -1, -1};
    const bool hc_ok = measure_host_cost(ctx, &hc);
    struct spec_cost sc[4] = {{0}};
    o.flags = ELU_NO_DISK_CACHE;
    elu_ctx *memory = NULL;
    bool spec_ok = elu_ctx_create(&memory, &o) == ELU_OK;
    for (int t = 0; t < 4 && spec_ok; t++)
        spec_ok = first_runs((elu_dtype)t, &sc[t].first_run) &&
                  new_specialization(ctx, memory, (elu_dtype)t, info.sm, &sc[t]);
    elu_ctx_destroy(memory);
    elu_ctx_destroy(ctx);
    struct first fc[FIRST_CASES];
    const bool fc_ok = measure_first_calls(dir, fc);
    remove_dir(dir);
    (json ? print_json : print_text)(&info, rows, count, tune_ms, &hc, fc, sc);
    (json ? print_new_constants_json : print_new_constants_text)(nc, nc_count);
    if (count != 4 * ((max_log2 - MIN_LOG2) / 2 + 1) || !hc_ok || !fc_ok || !spec_ok ||
        nc_count != NEW_CONSTANTS_ROWS) {
        fprintf(stderr, "elu-bench: a measure failed\n");
        return 1;
    }
    return 0;
}
