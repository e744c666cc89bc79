/* One context from many threads, per-thread error messages, and fork.
 * The CPU and NVRTC parts run everywhere (and under ThreadSanitizer in CI);
 * the GPU parts skip without a GPU. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "builder.h"
#include "cuda_loader.h"
#include "testutil.h"

#include <math.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#define THREADS 16
#define ROUNDS 6

/* The specializations the threads mix: dtype and constants vary. */
static elu_params params_for(int i)
{
    const elu_dtype t = tu_dtypes[i % 4];
    switch (i % 3) {
    case 0: return elu_params_elu(t, 1.0);
    case 1: return elu_params_selu(t);
    default: return elu_params_celu(t, 0.5 + 0.25 * (i % 5));
    }
}

/* How many dtypes the first `count` params_for use. */
static int dtypes_used(int count)
{
    return count < 4 ? count : 4;
}

/* How many generic forward parts the first `count` params_for need: one
 * per dtype, and for f32 and f64 one for input_scale 1 and one for others
 * (src/internal.h's enum elu_part). */
static int generic_forward_parts(int count)
{
    bool used[4][2] = {{false}};
    int parts = 0;
    for (int i = 0; i < count; i++) {
        const elu_params p = params_for(i);
        const bool unit = (p.dtype == ELU_F32 || p.dtype == ELU_F64) && p.input_scale == 1.0;
        parts += !used[p.dtype][unit];
        used[p.dtype][unit] = true;
    }
    return parts;
}

struct worker {
    pthread_t thread;
    elu_ctx *ctx;
    int index;
    bool gpu;
    bool ok;
    uint64_t seed;
    int device;
    size_t n;
    int rounds;
};

/* Fresh data, one run, check; ROUNDS times with different specializations.
 * On the GPU each thread has its own stream and buffers. */
static void *work(void *arg)
{
    struct worker *w = arg;
    const size_t n = w->n;
    elu_cu_stream stream = NULL;
    if (w->gpu) {
        tu_dev_begin(w->device);
        if (tu_cu()->StreamCreate(&stream, ELU_CU_STREAM_NON_BLOCKING))
            return NULL;
    }
    w->ok = true;
    for (int r = 0; r < w->rounds && w->ok; r++) {
        const elu_params p = params_for(w->index + r);
        const size_t bytes = n * elu_dtype_size(p.dtype);
        unsigned char *x = malloc(bytes), *y = malloc(bytes);
        for (size_t i = 0; i < n; i++) /* no shared RNG: thread-local values */
            tu_set(p.dtype, x, i, ((double)((w->seed + i * 2654435761u) % 4001) - 3000) / 97.0);
        memset(y, 0xA5, bytes);
        if (w->gpu) {
            void *dx = tu_dev_copy_of(x, bytes), *dy = tu_dev_copy_of(y, bytes);
            /* A copy from pageable memory may return before its data lands,
             * and this thread's stream does not wait for the legacy stream's
             * copies: the context's synchronize does. */
            tu_dev_sync();
            const elu_status status = elu_run(w->ctx, &p, dx, dy, n, stream);
            if (status != ELU_OK) /* the message is this thread's */
                fprintf(stderr, "thread %d: %s\n", w->index, elu_ctx_last_error(w->ctx));
            w->ok = status == ELU_OK && !tu_cu()->StreamSynchronize(stream);
            if (w->ok)
                tu_dev_download(y, dy, bytes);
            tu_dev_free(dx);
            tu_dev_free(dy);
        } else {
            w->ok = elu_run(w->ctx, &p, x, y, n, NULL) == ELU_OK;
        }
        /* Exact on either path: within 1 ulp, the half types correctly
         * rounded. */
        size_t at = 0;
        const double tol = p.dtype == ELU_F16 || p.dtype == ELU_BF16 ? 0.5 : 1.0;
        const double err = w->ok ? tu_check_forward(&p, x, y, n, false, &at) : 0;
        if (err > tol) {
            fprintf(stderr, "thread %d, %s alpha %g scale %g input_scale %g: %.3f ulp at "
                    "x = %.9Lg, y = %.9Lg\n", w->index, tu_dtype_names[p.dtype], p.alpha,
                    p.scale, p.input_scale, err, tu_get(p.dtype, x, at), tu_get(p.dtype, y, at));
            w->ok = false;
        }
        free(x);
        free(y);
    }
    if (w->gpu) {
        tu_cu()->StreamDestroy(stream);
        tu_dev_end(w->device);
    }
    return NULL;
}

static void run_workers(elu_ctx *ctx, bool gpu)
{
    struct worker w[THREADS];
    for (int i = 0; i < THREADS; i++) {
        w[i] = (struct worker){.ctx = ctx, .index = i, .gpu = gpu, .seed = tu_rand(),
                               .n = 30011, .rounds = ROUNDS};
        assert_int_equal(pthread_create(&w[i].thread, NULL, work, &w[i]), 0);
    }
    for (int i = 0; i < THREADS; i++) {
        pthread_join(w[i].thread, NULL);
        assert_true(w[i].ok); /* the worker said why */
    }
}

static void test_cpu_context_shared_by_16_threads(void **state)
{
    (void)state;
    elu_ctx *ctx = tu_ctx(.backend = ELU_BACKEND_CPU, .threads = 1);
    run_workers(ctx, false);
    elu_ctx_stats s;
    elu_ctx_get_stats(ctx, &s);
    assert_int_equal(s.cpu_runs, THREADS * ROUNDS);
    elu_ctx_destroy(ctx);
}

/* Large inputs: the threads compete for the context's CPU workers; whoever
 * finds them busy computes on its own thread. */
static void test_cpu_pool_shared_by_16_threads(void **state)
{
    (void)state;
    elu_ctx *ctx = tu_ctx(.backend = ELU_BACKEND_CPU, .threads = 4);
    struct worker w[THREADS];
    for (int i = 0; i < THREADS; i++) {
        w[i] = (struct worker){.ctx = ctx, .index = i, .seed = tu_rand(), .n = 270000,
                               .rounds = 2};
        assert_int_equal(pthread_create(&w[i].thread, NULL, work, &w[i]), 0);
    }
    for (int i = 0; i < THREADS; i++) {
        pthread_join(w[i].thread, NULL);
        assert_true(w[i].ok);
    }
    elu_ctx_destroy(ctx);
}

static void test_gpu_context_shared_by_16_threads(void **state)
{
    (void)state;
    char dir[512];
    tu_tempdir(dir, sizeof dir);
    elu_ctx *ctx = tu_ctx(.backend = ELU_BACKEND_CUDA, .cache_dir = dir, .threads = 1);
    if (!ctx) {
        tu_rmdir(dir);
        skip();
    }
    run_workers(ctx, true);
    elu_ctx_stats s;
    elu_ctx_get_stats(ctx, &s);
    /* Threads raced to first use: one compile of each dtype's whole
     * generic module, in the background, and at most one of each quick
     * forward part they use meanwhile (compiled, or its PTX built in);
     * none of a specialization, as no constants reach ELU_HOT_CALLS calls. */
    const int dtypes = dtypes_used(THREADS + ROUNDS - 1);
    assert_int_equal(tu_wait_builds(ctx, (uint64_t)dtypes), (uint64_t)dtypes);
    elu_ctx_get_stats(ctx, &s);
    const uint64_t built = s.compiles + s.builtin_ptx_loads;
    assert_true(built > (uint64_t)dtypes &&
                built <= (uint64_t)(dtypes + generic_forward_parts(THREADS + ROUNDS - 1)));
    assert_int_equal(s.gpu_launches, THREADS * ROUNDS);
    elu_ctx_destroy(ctx);
    tu_rmdir(dir);
}

static int device_count(void)
{
    const char *why;
    const struct elu_cuda_api *cu = elu_cuda_load(&why);
    int count = 0;
    if (!cu || elu_cuda_init() != 0 || cu->DeviceGetCount(&count) != 0)
        return 0;
    return count;
}

/* Two devices, a context and a thread each, large runs at once; then a
 * pointer from one device given to the other's context. */
static void test_two_devices_at_once(void **state)
{
    (void)state;
    if (device_count() < 2)
        skip();
    elu_ctx *ctx[2];
    struct worker w[2];
    for (int d = 0; d < 2; d++) {
        ctx[d] = tu_ctx(.backend = ELU_BACKEND_CUDA, .device = d, .threads = 1);
        assert_non_null(ctx[d]);
        w[d] = (struct worker){.ctx = ctx[d], .index = 0, .gpu = true, .seed = tu_rand(),
                               .device = d, .n = (size_t)1 << 24, .rounds = 2};
        assert_int_equal(pthread_create(&w[d].thread, NULL, work, &w[d]), 0);
    }
    for (int d = 0; d < 2; d++) {
        pthread_join(w[d].thread, NULL);
        assert_true(w[d].ok);
        elu_ctx_info info;
        elu_ctx_get_info(ctx[d], &info);
        assert_int_equal(info.device, d);
    }
    tu_dev_begin(0);
    void *p0 = tu_dev_alloc(4096);
    const elu_params p = elu_params_elu(ELU_F32, 1.0);
    assert_int_equal(elu_run(ctx[1], &p, p0, p0, 1024, NULL), ELU_ERR_INVALID_ARG);
    assert_non_null(strstr(elu_ctx_last_error(ctx[1]), "another device"));
    assert_int_equal(elu_run(ctx[0], &p, p0, p0, 1024, NULL), ELU_OK);
    tu_dev_free(p0);
    tu_dev_end(0);
    elu_ctx_destroy(ctx[0]);
    elu_ctx_destroy(ctx[1]);
}

struct error_worker {
    elu_ctx *ctx;
    int index;
    bool ok;
};

/* Each thread fails in its own way and reads back its own message. */
static void *fail_and_read(void *arg)
{
    struct error_worker *w = arg;
    elu_params p = elu_params_elu(ELU_F32, 1.0);
    p.dtype = (elu_dtype)(100 + w->index);
    char expected[64];
    snprintf(expected, sizeof expected, "unknown dtype %d", 100 + w->index);
    w->ok = true;
    for (int i = 0; i < 200 && w->ok; i++) {
        w->ok = elu_run(w->ctx, &p, NULL, NULL, 1, NULL) == ELU_ERR_INVALID_ARG &&
                strstr(elu_ctx_last_error(w->ctx), expected) != NULL;
    }
    return NULL;
}

static void test_last_error_is_per_thread(void **state)
{
    (void)state;
    elu_ctx *ctx = tu_ctx(.backend = ELU_BACKEND_CPU, .threads = 1);
    elu_params bad = elu_params_elu(ELU_F32, 1.0);
    bad.scale = NAN;
    assert_int_equal(elu_run(ctx, &bad, NULL, NULL, 1, NULL), ELU_ERR_INVALID_ARG);
    char mine[256];
    snprintf(mine, sizeof mine, "%s", elu_ctx_last_error(ctx));
    pthread_t t[8];
    struct error_worker w[8];
    for (int i = 0; i < 8; i++) {
        w[i] = (struct error_worker){ctx, i, false};
        assert_int_equal(pthread_create(&t[i], NULL, fail_and_read, &w[i]), 0);
    }
    for (int i = 0; i < 8; i++) {
        pthread_join(t[i], NULL);
        assert_true(w[i].ok);
    }
    assert_string_equal(elu_ctx_last_error(ctx), mine);
    /* Another context on this thread has its own message. */
    elu_ctx *other = tu_ctx(.backend = ELU_BACKEND_CPU, .threads = 1);
    assert_string_equal(elu_ctx_last_error(other), "");
    elu_ctx_destroy(other);
    elu_ctx_destroy(ctx);
}

struct precompile_worker {
    elu_ctx *ctx;
    int index;
    elu_status status;
};

static void *precompile(void *arg)
{
    struct precompile_worker *w = arg;
    const elu_params p = params_for(w->index % 3);
    w->status = elu_precompile(w->ctx, &p, 80);
    return NULL;
}

/* NVRTC and the disk cache from several threads on one context. */
static void test_precompile_from_threads(void **state)
{
    (void)state;
    const char *why;
    if (!elu_nvrtc_load(&why))
        skip();
    char dir[512];
    tu_tempdir(dir, sizeof dir);
    elu_ctx *ctx = tu_ctx(.backend = ELU_BACKEND_CPU, .cache_dir = dir, .threads = 1);
    pthread_t t[6];
    struct precompile_worker w[6];
    for (int i = 0; i < 6; i++) {
        w[i] = (struct precompile_worker){ctx, i, ELU_ERR_UNSUPPORTED};
        assert_int_equal(pthread_create(&t[i], NULL, precompile, &w[i]), 0);
    }
    for (int i = 0; i < 6; i++) {
        pthread_join(t[i], NULL);
        assert_int_equal(w[i].status, ELU_OK);
    }
    /* All three kernels (and f16's forward table) are now valid disk hits
     * for a fresh context. */
    elu_ctx *check = tu_ctx(.backend = ELU_BACKEND_CPU, .cache_dir = dir, .threads = 1);
    for (int i = 0; i < 3; i++) {
        const elu_params p = params_for(i);
        assert_int_equal(elu_precompile(check, &p, 80), ELU_OK);
    }
    elu_ctx_stats s;
    elu_ctx_get_stats(check, &s);
    assert_int_equal(s.disk_hits, 4);
    assert_int_equal(s.compiles, 0);
    elu_ctx_destroy(check);
    elu_ctx_destroy(ctx);
    tu_rmdir(dir);
}

/* `child` in a fork with a watchdog; the child exits with what it returns
 * (0 pass, 77 skip). */
static pid_t fork_child(int (*child)(void *), void *arg)
{
    fflush(NULL); /* a child that calls exit() must not write our buffers again */
    const pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        alarm(60); /* a hang in the child fails the test instead */
        _exit(child(arg));
    }
    return pid;
}

/* The child's exit code; killed (by the watchdog) fails the test. */
static int wait_child(pid_t pid)
{
    int status = 0;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    if (!WIFEXITED(status))
        fprintf(stderr, "child killed by signal %d\n", WTERMSIG(status));
    assert_true(WIFEXITED(status));
    return WEXITSTATUS(status);
}

static int in_child(int (*child)(void *), void *arg)
{
    return wait_child(fork_child(child, arg));
}

static int cpu_and_auto_work(void)
{
    float x[3] = {-1, 0, 2}, y[3];
    const elu_params p = elu_params_elu(ELU_F32, 1.0);
    elu_ctx *cpu = tu_ctx(.backend = ELU_BACKEND_CPU, .threads = 1),
            *any = tu_ctx(.backend = ELU_BACKEND_AUTO, .threads = 1);
    const int ok = elu_run(cpu, &p, x, y, 3, NULL) == ELU_OK && y[2] == 2 &&
                   elu_run(any, &p, x, y, 3, NULL) == ELU_OK && y[0] < 0;
    elu_ctx_destroy(cpu);
    elu_ctx_destroy(any);
    return ok;
}

static int child_cpu_only(void *arg)
{
    (void)arg;
    return cpu_and_auto_work() ? 0 : 1;
}

/* A parent that never initialized CUDA: the child may use the GPU. */
static int child_uses_gpu(void *arg)
{
    (void)arg;
    elu_ctx *ctx = tu_ctx(.backend = ELU_BACKEND_CUDA, .threads = 1);
    if (!ctx)
        return cpu_and_auto_work() ? 77 : 1; /* no GPU here at all */
    float x[4] = {-1, -2, 3, 4}, y[4];
    const elu_params p = elu_params_elu(ELU_F32, 1.0);
    tu_dev_begin(0);
    void *d = tu_dev_copy_of(x, sizeof x);
    const bool ran = elu_run(ctx, &p, d, d, 4, NULL) == ELU_OK;
    if (ran)
        tu_dev_download(y, d, sizeof y);
    tu_dev_free(d);
    tu_dev_end(0);
    elu_ctx_destroy(ctx);
    return ran && y[0] < 0 && y[3] == 4 ? 0 : 1;
}

static void test_fork_before_cuda(void **state)
{
    (void)state;
    const int code = in_child(child_uses_gpu, NULL);
    if (code == 77)
        skip();
    assert_int_equal(code, 0);
}

/* The exit guard itself (src/builder.c), without a GPU: background
 * work begun before exit() ends before the process does. */
static int exit_pipe[2];

static void *slow_work(void *arg)
{
    (void)arg;
    nanosleep(&(struct timespec){0, 100000000}, NULL);
    const char done = 'd';
    if (write(exit_pipe[1], &done, 1) != 1)
        abort();
    elu_background_end();
    return NULL;
}

static int child_exits_during_work(void *arg)
{
    (void)arg;
    pthread_t t;
    if (!elu_background_begin() || pthread_create(&t, NULL, slow_work, NULL) != 0 ||
        pthread_detach(t) != 0) /* never joined: the process ends */
        return 1;
    exit(0);
}

static void test_exit_waits_for_background_work(void **state)
{
    (void)state;
    assert_int_equal(pipe(exit_pipe), 0);
    assert_int_equal(in_child(child_exits_during_work, NULL), 0);
    close(exit_pipe[1]);
    char c = 0;
    assert_int_equal(read(exit_pipe[0], &c, 1), 1);
    assert_int_equal(c, 'd');
    close(exit_pipe[0]);
}

/* A process that ends while the builder compiles, its context never
 * destroyed, as a short-lived tool may: exit() (which runs the atexit
 * handlers and destructors that _exit skips) must wait for the compile,
 * not crash under it. 3: the build ended before exit, nothing was tested. */
static int child_exits_while_building(void *arg)
{
    elu_ctx *ctx = tu_ctx(.backend = ELU_BACKEND_CUDA, .cache_dir = arg, .threads = 1);
    if (!ctx)
        return 77;
    float x[4] = {-1, -2, 3, 4};
    /* Constants new to NVRTC's own cache too (CUDA 12.9+ keeps programs). */
    const elu_params p = elu_params_celu(ELU_F32, 0.5 + (double)(time(NULL) % 100003) * 1e-6);
    tu_dev_begin(0);
    void *d = tu_dev_copy_of(x, sizeof x);
    if (elu_run(ctx, &p, d, d, 4, NULL) != ELU_OK)
        return 1;
    tu_dev_sync();
    /* The builder starts once the call has its generic kernels; a
     * specialized compile takes over 100 ms. */
    nanosleep(&(struct timespec){0, 30000000}, NULL);
    elu_ctx_stats s;
    elu_ctx_get_stats(ctx, &s);
    exit(s.background_builds == 0 ? 0 : 3);
}

static void test_exit_while_building(void **state)
{
    (void)state;
    char dir[512];
    tu_tempdir(dir, sizeof dir);
    const int code = in_child(child_exits_while_building, dir);
    tu_rmdir(dir);
    if (code == 77)
        skip();
    assert_int_equal(code, 0);
}

/* After the parent initialized CUDA: the inherited context fails clearly,
 * new CUDA contexts are refused, AUTO and CPU contexts work. */
static int child_after_cuda(void *arg)
{
    elu_ctx *inherited = arg;
    float x[3] = {-1, 0, 2}, y[3];
    const elu_params p = elu_params_elu(ELU_F32, 1.0);
    if (elu_run(inherited, &p, x, y, 3, NULL) != ELU_ERR_CUDA ||
        !strstr(elu_ctx_last_error(inherited), "forked") ||
        elu_prepare(inherited, &p) != ELU_ERR_CUDA)
        return 2;
    elu_ctx_destroy(inherited); /* must not touch the driver, nor hang */
    elu_ctx *cuda = NULL;
    elu_options o;
    elu_options_default(&o);
    o.backend = ELU_BACKEND_CUDA;
    if (elu_ctx_create(&cuda, &o) != ELU_ERR_NO_DEVICE)
        return 3;
    elu_ctx *any = tu_ctx(.backend = ELU_BACKEND_AUTO, .threads = 1);
    elu_ctx_info info;
    elu_ctx_get_info(any, &info);
    const bool fell_back = info.backend == ELU_BACKEND_CPU &&
                           strstr(elu_ctx_last_error(any), "forked") != NULL;
    elu_ctx_destroy(any);
    return !fell_back ? 4 : cpu_and_auto_work() ? 0 : 5;
}

/* A first run of new constants on device memory in ctx (whose disk cache
 * lacks the generic kernels), then the wait for the context's background
 * thread to build the dtype's generic module: the thread then waits for
 * more, on a condition variable. */
static bool start_builder(elu_ctx *ctx)
{
    float x[4] = {-1, -2, 3, 4};
    const elu_params p = elu_params_celu(ELU_F32, 0.61);
    tu_dev_begin(0);
    void *d = tu_dev_copy_of(x, sizeof x);
    const bool ran = elu_run(ctx, &p, d, d, 4, NULL) == ELU_OK;
    tu_dev_sync();
    tu_dev_free(d);
    tu_dev_end(0);
    return ran && tu_wait_builds(ctx, 1) == 1;
}

static void test_fork_after_cuda(void **state)
{
    (void)state;
    char dir[512];
    tu_tempdir(dir, sizeof dir);
    elu_ctx *ctx = tu_ctx(.backend = ELU_BACKEND_CUDA, .cache_dir = dir, .threads = 1);
    if (!ctx) {
        tu_rmdir(dir);
        assert_int_equal(in_child(child_cpu_only, NULL), 0); /* fork, no CUDA */
        skip();
    }
    const elu_params p = elu_params_elu(ELU_F32, 1.0);
    assert_int_equal(elu_prepare(ctx, &p), ELU_OK);
    /* The child's copy of the waiting thread must not hang its destroy. */
    assert_true(start_builder(ctx));
    assert_int_equal(in_child(child_after_cuda, ctx), 0);
    elu_ctx_destroy(ctx);
    tu_rmdir(dir);
}

/* -------- fork while other threads are on the CPU path -------- */

#define TABLE_N 2048 /* the least n for which a half type's call builds a table */

/* ThreadSanitizer ends a fork child of a process with threads when the
 * child starts one ("not supported"), and checks nothing in such a child:
 * there a context made in the child gets no workers. */
#if defined(__SANITIZE_THREAD__)
#define CHILD_CTX_THREADS 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define CHILD_CTX_THREADS 1
#endif
#endif
#ifndef CHILD_CTX_THREADS
#define CHILD_CTX_THREADS 4
#endif

/* Constants whose f16 or bf16 forward the CPU's vector kernels do not
 * compute (input_scale below their range), so that a call of 2048
 * elements or more builds a table. */
static elu_params tabled(elu_dtype t, double alpha)
{
    elu_params p = elu_params_elu(t, alpha);
    p.input_scale = 0x1p-130;
    return p;
}

/* Two forwards (f16, computed; bf16, through a table it builds) and a
 * backward from the input (bf16), exact, over n elements, with constants
 * no other call of these tests uses. */
static bool halves_work(elu_ctx *ctx, size_t n)
{
    uint16_t *x = malloc(n * 2), *g = malloc(n * 2), *y = malloc(n * 2);
    const elu_params forward = elu_params_celu(ELU_F16, 0.3);
    const elu_params table = tabled(ELU_BF16, 0.3);
    const elu_params backward = elu_params_celu(ELU_BF16, 0.3);
    size_t at = 0;
    bool ok = x && g && y;
    if (ok) {
        tu_fill_inputs(ELU_F16, x, n);
        ok = elu_run(ctx, &forward, x, y, n, NULL) == ELU_OK &&
             tu_check_forward(&forward, x, y, n, false, &at) <= 0.5;
    }
    if (ok) {
        tu_fill_inputs(ELU_BF16, x, n);
        ok = elu_run(ctx, &table, x, y, n, NULL) == ELU_OK &&
             tu_check_forward(&table, x, y, n, false, &at) <= 0.5;
    }
    if (ok) {
        tu_fill_inputs(ELU_BF16, x, n);
        tu_fill_inputs(ELU_BF16, g, n);
        ok = elu_run_backward(ctx, &backward, g, x, false, y, n, NULL) == ELU_OK &&
             tu_check_backward(&backward, g, x, false, y, n, false, &at) <= 0.5;
    }
    free(x);
    free(g);
    free(y);
    return ok;
}

/* A thread whose calls build half-type tables until stopped: f16
 * forwards with constants `tabled`, each new to its context, and a fresh
 * context once one holds as many tables as a context keeps (src/cpu.c's
 * MAX_TABLES). */
struct table_builder {
    pthread_t thread;
    atomic_bool stop;
    _Atomic(elu_ctx *) calling; /* the context of the call in progress, or NULL */
    uint16_t x[TABLE_N], y[TABLE_N];
};

static void *build_tables(void *arg)
{
    struct table_builder *b = arg;
    while (!atomic_load(&b->stop)) {
        elu_ctx *ctx = tu_ctx(.backend = ELU_BACKEND_CPU, .threads = 1, .flags = ELU_NO_DISK_CACHE);
        for (int i = 0; i < 12 && !atomic_load(&b->stop); i++) {
            const elu_params p = tabled(ELU_F16, 1 + i / 8.0);
            atomic_store(&b->calling, ctx);
            elu_run(ctx, &p, b->x, b->y, TABLE_N, NULL);
            atomic_store(&b->calling, NULL);
        }
        elu_ctx_destroy(ctx);
    }
    return NULL;
}

struct parent_state {
    struct table_builder *builder;
    elu_ctx *pooled; /* made before the fork, with workers */
};

/* 3: the fork fell between the builder's calls, nothing to test. Else
 * the context the builder was building a table in, one with workers made
 * before the fork, and one made here with workers: all work. */
static int child_while_building(void *arg)
{
    const struct parent_state *f = arg;
    elu_ctx *inherited = atomic_load(&f->builder->calling);
    if (!inherited)
        return 3;
    elu_ctx *fresh = tu_ctx(.backend = ELU_BACKEND_CPU, .threads = CHILD_CTX_THREADS,
                            .flags = ELU_NO_DISK_CACHE);
    const size_t pooled_n = 2 * 131072; /* src/cpu.c: parts enough for 2 threads */
    const bool ok = halves_work(inherited, TABLE_N) && halves_work(f->pooled, pooled_n) &&
                    halves_work(fresh, pooled_n);
    elu_ctx_destroy(fresh);
    elu_ctx_destroy(f->pooled);
    return ok ? 0 : 1;
}

/* One fork while the builder is in a call, which is almost always inside
 * a table's build; the child's code, or 3. */
static int fork_while_building(struct parent_state *f)
{
    struct table_builder *b = f->builder;
    atomic_store(&b->stop, false);
    assert_int_equal(pthread_create(&b->thread, NULL, build_tables, b), 0);
    while (!atomic_load(&b->calling))
        sched_yield();
    const pid_t pid = fork_child(child_while_building, f);
    atomic_store(&b->stop, true);
    pthread_join(b->thread, NULL);
    return wait_child(pid);
}

/* A fork while another thread builds a half-type table: the child's own
 * first table must not wait for that thread, which it does not have. Forks
 * that fall between the builder's calls are retried until three have
 * landed inside one. */
static void test_fork_while_building_tables(void **state)
{
    (void)state;
    struct table_builder *b = calloc(1, sizeof *b);
    assert_non_null(b);
    tu_fill_inputs(ELU_F16, b->x, TABLE_N);
    struct parent_state f = {
        b, tu_ctx(.backend = ELU_BACKEND_CPU, .threads = 4, .flags = ELU_NO_DISK_CACHE)};
    int landed = 0;
    for (int round = 0; round < 100 && landed < 3; round++) {
        const int code = fork_while_building(&f);
        if (code != 3) {
            assert_int_equal(code, 0);
            landed++;
        }
    }
    assert_int_equal(landed, 3);
    elu_ctx_destroy(f.pooled);
    free(b);
}

int main(void)
{
    tu_seed();
    const struct CMUnitTest tests[] = {
        /* First two: this process must not have initialized CUDA yet. */
        cmocka_unit_test(test_fork_before_cuda),
        cmocka_unit_test(test_exit_while_building),
        cmocka_unit_test(test_exit_waits_for_background_work),
        cmocka_unit_test(test_cpu_context_shared_by_16_threads),
        cmocka_unit_test(test_cpu_pool_shared_by_16_threads),
        cmocka_unit_test(test_last_error_is_per_thread),
        cmocka_unit_test(test_fork_while_building_tables),
        cmocka_unit_test(test_precompile_from_threads),
        cmocka_unit_test(test_gpu_context_shared_by_16_threads),
        cmocka_unit_test(test_two_devices_at_once),
        cmocka_unit_test(test_fork_after_cuda),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
