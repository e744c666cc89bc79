/* The CUDA path. Every test skips cleanly where there is no usable GPU and
 * runs for real where there is one. Device memory: testutil's tu_dev_. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <dlpack/dlpack.h> /* before elu.h (cache.h), for elu_run_dlpack */

#include "cache.h"
#include "cuda_loader.h"
#include "testutil.h"

#include <math.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>

#define CU_OK(call) assert_int_equal((call), 0)

/* A CUDA context on a fresh cache directory; device 0's primary context is
 * current for the test's memory. */
struct fixture {
    elu_ctx *ctx;
    char dir[512];
};

static int setup(void **state)
{
    struct fixture *f = calloc(1, sizeof *f);
    *state = f;
    tu_tempdir(f->dir, sizeof f->dir);
    f->ctx = tu_ctx(.backend = ELU_BACKEND_CUDA, .cache_dir = f->dir);
    if (!f->ctx)
        return 0; /* each test skips */
    tu_dev_begin(0);
    return 0;
}

static int teardown(void **state)
{
    struct fixture *f = *state;
    if (f->ctx)
        tu_dev_end(0);
    elu_ctx_destroy(f->ctx);
    tu_rmdir(f->dir);
    free(f);
    return 0;
}

static struct fixture *need_gpu(void **state)
{
    struct fixture *f = *state;
    if (!f->ctx) {
        fprintf(stderr, "skipping: no usable CUDA device\n");
        skip();
    }
    return f;
}

/* Tolerances in ulps of the dtype. The forward is exact, as the CPU
 * path's: correctly rounded for F32 (tu_check_forward counts any other
 * result 1 more than its distance, so 1 demands it) and the half types,
 * within 1 ulp for F64 (its vector kernels' method). */
static const double TOL_FORWARD[4] = {1.0, 1.0, 0.5, 0.5};
/* The backward, and the half types' forward past the cap, do PyTorch's
 * arithmetic, judged against the reference with PyTorch's rounded exp argument
 * (testutil.h): expm1 or exp of the arithmetic type (CUDA documents at most
 * 1 and 2 ulp) and one or two rounded multiplies, each error counted in the
 * ulp of its own binade. The half types round a float result once more: at
 * most half an ulp of their own, plus a trace. */
static const double TOL_PYTORCH_FORWARD[4] = {3.0, 3.0, 0.6, 0.6};
static const double TOL_BACKWARD[4] = {4.0, 4.0, 0.6, 0.6};

static elu_params sets(elu_dtype t, int i)
{
    switch (i) {
    case 0: return elu_params_elu(t, 1.0);
    case 1: return elu_params_selu(t);
    default: return elu_params_celu(t, 0.6);
    }
}

/* Forward over n elements, x starting `x_at` elements into its buffer and
 * y `y_at` into its own. */
static void check_forward(struct fixture *f, elu_dtype t, size_t n, size_t x_at, size_t y_at)
{
    const size_t es = elu_dtype_size(t), bytes = (n + 1) * es;
    void *x = tu_poisoned(bytes), *y = tu_poisoned(bytes);
    tu_fill_inputs(t, (char *)x + x_at * es, n);
    void *dx = tu_dev_copy_of(x, bytes);
    for (int s = 0; s < 3; s++) {
        const elu_params p = sets(t, s);
        memset(y, 0xA5, bytes);
        void *dy = tu_dev_copy_of(y, bytes);
        assert_int_equal(elu_run(f->ctx, &p, (char *)dx + x_at * es, (char *)dy + y_at * es, n,
                                 NULL), ELU_OK);
        tu_dev_download(y, dy, bytes);
        for (size_t i = 0; i < bytes; i++) /* nothing written outside the n elements */
            if (i < y_at * es || i >= (y_at + n) * es)
                assert_int_equal(((unsigned char *)y)[i], 0xA5);
        size_t at = 0;
        const double err = tu_check_forward(&p, (char *)x + x_at * es, (char *)y + y_at * es, n,
                                            false, &at);
        fprintf(stderr, "gpu forward %-4s set %d n %zu x at %zu, y at %zu: max %.3f ulp\n",
                tu_dtype_names[t], s, n, x_at, y_at, err);
        assert_true(err <= TOL_FORWARD[t]);
        tu_dev_free(dy);
    }
    tu_dev_free(dx);
    free(x);
    free(y);
}

static void test_forward_all_dtypes(void **state)
{
    struct fixture *f = need_gpu(state);
    for (int d = 0; d < 4; d++) {
        check_forward(f, tu_dtypes[d], (1 << 20) + 3, 0, 0);
        check_forward(f, tu_dtypes[d], 100003, 1, 1); /* misaligned, odd n */
        check_forward(f, tu_dtypes[d], 100003, 1, 0); /* unequally: one by one */
        check_forward(f, tu_dtypes[d], 5, 0, 0);
    }
}

/* Backward from the input and from the output over n elements, grad_y
 * starting `g_at` elements into its buffer; the output poisoned before
 * each run, so that an element one run leaves unwritten shows even where
 * the run before wrote it. */
static void check_backward(struct fixture *f, elu_dtype t, size_t n, size_t g_at)
{
    const size_t es = elu_dtype_size(t), bytes = n * es;
    void *g_buf = tu_poisoned(bytes + es), *x = malloc(bytes), *y = malloc(bytes),
         *out = malloc(bytes);
    void *g = (char *)g_buf + g_at * es;
    tu_fill_uniform(t, g, n, -4, 4);
    tu_fill_inputs(t, x, n);
    void *dg_buf = tu_dev_copy_of(g_buf, bytes + es), *dx = tu_dev_copy_of(x, bytes),
         *dy = tu_dev_alloc(bytes), *dout = tu_dev_alloc(bytes);
    const void *dg = (char *)dg_buf + g_at * es;
    for (int s = 0; s < 3; s++) {
        const elu_params p = sets(t, s);
        for (int from_output = 0; from_output < 2; from_output++) {
            const void *saved = from_output ? dy : dx;
            assert_int_equal(elu_run(f->ctx, &p, dx, dy, n, NULL), ELU_OK);
            tu_dev_download(y, dy, bytes);
            tu_dev_fill(dout, 0xA5, bytes);
            assert_int_equal(elu_run_backward(f->ctx, &p, dg, saved, from_output, dout, n,
                                              NULL), ELU_OK);
            tu_dev_download(out, dout, bytes);
            size_t at = 0;
            const double err = tu_check_backward(&p, g, from_output ? y : x, from_output,
                                                 out, n, true, &at);
            fprintf(stderr, "gpu backward(%s) %-4s set %d n %zu grad at %zu: max %.3f ulp\n",
                    from_output ? "output" : "input", tu_dtype_names[t], s, n, g_at, err);
            assert_true(err <= TOL_BACKWARD[t]); /* one more multiply */
        }
    }
    tu_dev_free(dg_buf);
    tu_dev_free(dx);
    tu_dev_free(dy);
    tu_dev_free(dout);
    free(g_buf);
    free(x);
    free(y);
    free(out);
}

static void test_backward_all_dtypes(void **state)
{
    struct fixture *f = need_gpu(state);
    for (int d = 0; d < 4; d++) {
        check_backward(f, tu_dtypes[d], (1 << 19) + 5, 0);
        check_backward(f, tu_dtypes[d], 100003, 1); /* grad_y misaligned alone */
    }
}

static void test_in_place_on_a_stream(void **state)
{
    struct fixture *f = need_gpu(state);
    const size_t n = 300001;
    float *x = malloc(n * 4), *y = tu_poisoned(n * 4);
    tu_fill_inputs(ELU_F32, x, n);
    float *d = tu_dev_copy_of(x, n * 4);
    elu_cu_stream stream;
    CU_OK(tu_cu()->StreamCreate(&stream, 1 /* non-blocking */));
    const elu_params p = elu_params_elu(ELU_F32, 1.0);
    assert_int_equal(elu_run(f->ctx, &p, d, d, n, stream), ELU_OK);
    CU_OK(tu_cu()->StreamSynchronize(stream));
    tu_dev_download(y, d, n * 4);
    size_t at = 0;
    assert_true(tu_check_forward(&p, x, y, n, false, &at) <= TOL_FORWARD[ELU_F32]);
    CU_OK(tu_cu()->StreamDestroy(stream));
    tu_dev_free(d);
    free(x);
    free(y);
}

/* Calls that each read what the one before wrote, queued on a stream:
 * six forwards from one buffer to the other and back; a forward through a
 * reversed view (DLPack, stride -1), whose first blocks read what the
 * previous kernel's last blocks wrote, so that a kernel starting before
 * the one before it has finished shows; then a backward from the output
 * that reads the last two results. With `sync`, the stream is synchronized
 * after each call. */
#define CHAIN_FORWARDS 6
#define CHAIN_CALLS (CHAIN_FORWARDS + 2)
static void queue_chain(elu_ctx *ctx, const elu_params *p, float *a, float *b, float *g,
                        size_t n, elu_cu_stream stream, bool sync)
{
    int64_t shape[1] = {(int64_t)n}, back[1] = {-1};
    DLTensor reversed = {a + n - 1, {kDLCUDA, 0}, 1, {kDLFloat, 32, 1}, shape, back, 0};
    DLTensor forward = {b, {kDLCUDA, 0}, 1, {kDLFloat, 32, 1}, shape, NULL, 0};
    for (int i = 0; i < CHAIN_CALLS; i++) {
        if (i < CHAIN_FORWARDS)
            assert_int_equal(elu_run(ctx, p, i % 2 ? b : a, i % 2 ? a : b, n, stream), ELU_OK);
        else if (i == CHAIN_FORWARDS)
            assert_int_equal(elu_run_dlpack(ctx, p, &reversed, &forward, stream), ELU_OK);
        else
            assert_int_equal(elu_run_backward(ctx, p, b, a, true, g, n, stream), ELU_OK);
        if (sync)
            CU_OK(tu_cu()->StreamSynchronize(stream));
    }
}

/* How chain_results runs the chain. */
enum chain_way { QUEUED, SYNCHRONIZED, CAPTURED };

/* The chain's results in host memory (a, b, then g), from x: queued
 * without synchronization, with a synchronization after each call, or
 * captured into a graph and replayed. */
static void *chain_results(elu_ctx *ctx, const elu_params *p, const void *x, size_t n,
                           elu_cu_stream stream, enum chain_way how)
{
    const size_t bytes = n * 4;
    float *a = tu_dev_copy_of(x, bytes), *b = tu_dev_alloc(bytes), *g = tu_dev_alloc(bytes);
    tu_dev_fill(g, 0xA5, bytes);
    void *graph = NULL, *exec = NULL;
    if (how == CAPTURED)
        CU_OK(tu_cu()->StreamBeginCapture(stream, 2 /* CU_STREAM_CAPTURE_MODE_RELAXED */));
    queue_chain(ctx, p, a, b, g, n, stream, how == SYNCHRONIZED);
    if (how == CAPTURED) {
        CU_OK(tu_cu()->StreamEndCapture(stream, &graph));
        CU_OK(tu_cu()->GraphInstantiate(&exec, graph, 0));
        CU_OK(tu_cu()->GraphLaunch(exec, stream));
    }
    CU_OK(tu_cu()->StreamSynchronize(stream));
    if (how == CAPTURED) {
        CU_OK(tu_cu()->GraphExecDestroy(exec));
        CU_OK(tu_cu()->GraphDestroy(graph));
    }
    char *out = malloc(3 * bytes);
    tu_dev_download(out, a, bytes);
    tu_dev_download(out + bytes, b, bytes);
    tu_dev_download(out + 2 * bytes, g, bytes);
    tu_dev_free(a);
    tu_dev_free(b);
    tu_dev_free(g);
    return out;
}

/* Each call waits for the one before it in the stream: the default context
 * (on sm_90 and later, with programmatic dependent launch, each kernel
 * starting while the one before it ends) and the same chain captured into
 * a graph give the results of a context with ELU_NO_PDL synchronized after
 * every call, bit for bit. The specialization is prepared before the
 * capture, so that the graph holds its specialized kernels: every call,
 * queued or captured, launches them, never the generic ones (whose results
 * would be the same bits, so that only the counters tell). */
static void test_chained_calls_on_a_stream(void **state)
{
    struct fixture *f = need_gpu(state);
    const size_t n = ((size_t)1 << 22) + 3;
    const elu_params p = elu_params_selu(ELU_F32);
    float *x = malloc(n * 4);
    tu_fill_inputs(ELU_F32, x, n);
    elu_ctx *plain = tu_ctx(.backend = ELU_BACKEND_CUDA, .cache_dir = f->dir,
                            .flags = ELU_NO_PDL);
    assert_int_equal(elu_prepare(f->ctx, &p), ELU_OK);
    assert_int_equal(elu_prepare(plain, &p), ELU_OK);
    elu_cu_stream stream;
    CU_OK(tu_cu()->StreamCreate(&stream, 1 /* non-blocking */));
    void *want = chain_results(plain, &p, x, n, stream, SYNCHRONIZED);
    const enum chain_way ways[] = {QUEUED, CAPTURED};
    const char *const way_names[] = {"queued", "captured"};
    for (int w = 0; w < 2; w++) {
        const elu_ctx_stats before = tu_stats(f->ctx);
        void *got = chain_results(f->ctx, &p, x, n, stream, ways[w]);
        const elu_ctx_stats after = tu_stats(f->ctx);
        const uint64_t launches = after.gpu_launches - before.gpu_launches,
                       generic = after.generic_launches - before.generic_launches;
        if (launches != CHAIN_CALLS || generic != 0)
            fail_msg("%s chain: %llu launches, %llu of them generic; want %d, none generic",
                     way_names[w], (unsigned long long)launches, (unsigned long long)generic,
                     CHAIN_CALLS);
        assert_memory_equal(got, want, 3 * n * 4);
        free(got);
    }
    assert_int_equal(tu_stats(f->ctx).background_builds, 0); /* nothing left to build */
    CU_OK(tu_cu()->StreamDestroy(stream));
    elu_ctx_destroy(plain);
    free(want);
    free(x);
}

/* In a CUDA context, host memory runs on the CPU path. */
static void test_host_pointers_run_on_cpu(void **state)
{
    struct fixture *f = need_gpu(state);
    const size_t n = 4096;
    double *x = malloc(n * 8), *y = tu_poisoned(n * 8);
    tu_fill_inputs(ELU_F64, x, n);
    const elu_params p = elu_params_selu(ELU_F64);
    elu_ctx_stats before, after;
    elu_ctx_get_stats(f->ctx, &before);
    assert_int_equal(elu_run(f->ctx, &p, x, y, n, NULL), ELU_OK);
    elu_ctx_get_stats(f->ctx, &after);
    assert_int_equal(after.cpu_runs, before.cpu_runs + 1);
    assert_int_equal(after.gpu_launches, before.gpu_launches);
    size_t at = 0;
    assert_true(tu_check_forward(&p, x, y, n, false, &at) <= 1.0);
    free(x);
    free(y);
}

/* Host and device buffers mixed: an error, and the context still works. */
static void test_mixed_places_rejected(void **state)
{
    struct fixture *f = need_gpu(state);
    const size_t n = 1024;
    float *x = malloc(n * 4), *y = tu_poisoned(n * 4);
    tu_fill_inputs(ELU_F32, x, n);
    float *d = tu_dev_copy_of(x, n * 4);
    const elu_params p = elu_params_elu(ELU_F32, 1.0);
    assert_int_equal(elu_run(f->ctx, &p, x, d, n, NULL), ELU_ERR_INVALID_ARG);
    assert_int_equal(elu_run(f->ctx, &p, d, y, n, NULL), ELU_ERR_INVALID_ARG);
    assert_int_equal(elu_run_backward(f->ctx, &p, d, x, false, d, n, NULL),
                     ELU_ERR_INVALID_ARG);
    assert_int_equal(elu_run(f->ctx, &p, d, d, n, NULL), ELU_OK);
    tu_dev_download(y, d, n * 4);
    size_t at = 0;
    assert_true(tu_check_forward(&p, x, y, n, false, &at) <= TOL_FORWARD[ELU_F32]);
    tu_dev_free(d);
    free(x);
    free(y);
}

static void test_managed_memory_runs_on_gpu(void **state)
{
    struct fixture *f = need_gpu(state);
    const size_t n = 65537;
    elu_cu_deviceptr mx, my;
    CU_OK(tu_cu()->MemAllocManaged(&mx, n * 2, ELU_CU_MEM_ATTACH_GLOBAL));
    CU_OK(tu_cu()->MemAllocManaged(&my, n * 2, ELU_CU_MEM_ATTACH_GLOBAL));
    uint16_t *x = (uint16_t *)(uintptr_t)mx, *y = (uint16_t *)(uintptr_t)my;
    tu_fill_inputs(ELU_BF16, x, n);
    memset(y, 0xA5, n * 2);
    const elu_params p = elu_params_elu(ELU_BF16, 0.5);
    elu_ctx_stats before, after;
    elu_ctx_get_stats(f->ctx, &before);
    assert_int_equal(elu_run(f->ctx, &p, x, y, n, NULL), ELU_OK);
    tu_dev_sync();
    elu_ctx_get_stats(f->ctx, &after);
    assert_int_equal(after.gpu_launches, before.gpu_launches + 1);
    size_t at = 0;
    assert_true(tu_check_forward(&p, x, y, n, false, &at) <= TOL_FORWARD[ELU_BF16]);
    tu_dev_free(x);
    tu_dev_free(y);
}

/* A second context on the same cache directory loads, never compiles. */
static void test_warm_disk_cache(void **state)
{
    struct fixture *f = need_gpu(state);
    const elu_params p = elu_params_celu(ELU_F16, 1.7);
    assert_int_equal(elu_prepare(f->ctx, &p), ELU_OK);
    elu_ctx_stats s;
    elu_ctx_get_stats(f->ctx, &s);
    assert_int_equal(s.compiles, 1);
    assert_int_equal(s.disk_writes, 2); /* the module, and its forward table */
    elu_ctx *warm = tu_ctx(.backend = ELU_BACKEND_CUDA, .cache_dir = f->dir);
    assert_int_equal(elu_prepare(warm, &p), ELU_OK);
    elu_ctx_get_stats(warm, &s);
    assert_int_equal(s.compiles, 0);
    assert_int_equal(s.disk_hits, 2);
    const size_t n = 777;
    uint16_t *x = malloc(n * 2), *y = tu_poisoned(n * 2);
    tu_fill_inputs(ELU_F16, x, n);
    uint16_t *d = tu_dev_copy_of(x, n * 2);
    assert_int_equal(elu_run(warm, &p, d, d, n, NULL), ELU_OK);
    tu_dev_download(y, d, n * 2);
    elu_ctx_get_stats(warm, &s);
    assert_int_equal(s.compiles, 0);
    assert_int_equal(s.memory_hits, 1);
    size_t at = 0;
    assert_true(tu_check_forward(&p, x, y, n, false, &at) <= TOL_FORWARD[ELU_F16]);
    tu_dev_free(d);
    free(x);
    free(y);
    elu_ctx_destroy(warm);
}

/* The warm path needs no NVRTC: a new process whose NVRTC cannot load
 * (ELU_NVRTC_LIBRARY names nothing) finds its kernel in the disk cache.
 * This program re-run as `--warm-child DIR` is that process. */
static const elu_params WARM_PARAMS = {ELU_F16, 1.7, 1.0, 1 / 1.7}; /* CELU(1.7) */

static double now_ms(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1e3 + t.tv_nsec / 1e6;
}

static int warm_child(const char *dir)
{
    const double t0 = now_ms();
    elu_ctx *ctx = tu_ctx(.backend = ELU_BACKEND_CUDA, .cache_dir = dir);
    if (!ctx)
        return 2;
    const double t1 = now_ms();
    const elu_status status = elu_prepare(ctx, &WARM_PARAMS);
    const double t2 = now_ms();
    elu_ctx_stats s;
    elu_ctx_info info;
    elu_ctx_get_stats(ctx, &s);
    elu_ctx_get_info(ctx, &info);
    printf("warm process without NVRTC: context %.2f ms, kernel %.3f ms (status %d, "
           "%llu compiles, %llu disk hits, NVRTC version %d)\n", t1 - t0, t2 - t1,
           (int)status, (unsigned long long)s.compiles, (unsigned long long)s.disk_hits,
           info.nvrtc_version);
    elu_ctx_destroy(ctx);
    /* the module, and its forward table */
    return status == ELU_OK && s.compiles == 0 && s.disk_hits == 2 && info.nvrtc_version == 0
               ? 0 : 1;
}

/* The forward of n elements of p's dtype on the GPU against the CPU
 * path's, in a child process (printing what it found): true when equal. */
static bool child_forward_ok(elu_ctx *ctx, const elu_params *p, size_t n, const char *what)
{
    const size_t bytes = n * elu_dtype_size(p->dtype);
    void *x = malloc(bytes), *y = tu_poisoned(bytes);
    tu_fill_inputs(p->dtype, x, n);
    void *dx = tu_dev_copy_of(x, bytes), *dy = tu_dev_alloc(bytes);
    const double t0 = now_ms();
    const elu_status status = elu_run(ctx, p, dx, dy, n, NULL);
    tu_dev_download(y, dy, bytes);
    const double t1 = now_ms();
    size_t at = 0;
    const double ulps = tu_check_forward(p, x, y, n, false, &at);
    printf("cold process without NVRTC: %s %s, %zu elements: %.2f ms (status %d), %g ulps\n",
           tu_dtype_names[p->dtype], what, n, t1 - t0, (int)status, ulps);
    tu_dev_free(dx);
    tu_dev_free(dy);
    free(x);
    free(y);
    return status == ELU_OK && ulps <= TOL_FORWARD[p->dtype];
}

/* A cold first call needs no NVRTC either where libelu has the quick
 * forward parts built in (builtin_ptx.h): a new process whose NVRTC cannot
 * load, with an empty disk cache, runs each dtype's forward on the GPU,
 * the driver compiling the PTX built in, and gets the CPU path's results
 * (the whole generic module cannot be built without NVRTC, so the quick
 * part goes on serving). This program re-run as `--cold-child DIR` is
 * that process. */
static int cold_child(const char *dir)
{
    elu_ctx *ctx = tu_ctx(.backend = ELU_BACKEND_CUDA, .cache_dir = dir);
    if (!ctx)
        return 2;
    tu_dev_begin(0);
    bool ok = true;
    for (elu_dtype t = ELU_F32; t <= ELU_BF16; t++) {
        /* SELU for input_scale 1, CELU(0.7) for another: both quick parts */
        const elu_params p = t == ELU_F64 ? elu_params_celu(t, 0.7) : elu_params_selu(t);
        ok = child_forward_ok(ctx, &p, 100003, "first call") && ok;
        ok = child_forward_ok(ctx, &p, ((size_t)1 << 20) + 3, "second call") && ok;
    }
    elu_ctx_stats s;
    elu_ctx_get_stats(ctx, &s);
    printf("%llu built-in PTX loads, %llu compiles, %llu generic launches\n",
           (unsigned long long)s.builtin_ptx_loads, (unsigned long long)s.compiles,
           (unsigned long long)s.generic_launches);
    elu_ctx_destroy(ctx);
    return ok && s.builtin_ptx_loads == 4 && s.compiles == 0 && s.generic_launches == 8 ? 0 : 1;
}

extern char **environ;

/* This program as `flag dir` without NVRTC: whether it exited with 0. */
static bool child_without_nvrtc(const char *flag, const char *dir)
{
    size_t count = 0;
    while (environ[count])
        count++;
    char **env = calloc(count + 2, sizeof *env);
    memcpy(env, environ, count * sizeof *env);
    env[count] = "ELU_NVRTC_LIBRARY=/nonexistent/libnvrtc.so";
    char *argv[] = {"/proc/self/exe", (char *)flag, (char *)dir, NULL};
    pid_t pid;
    int status = 0;
    const bool ran = posix_spawn(&pid, argv[0], NULL, NULL, argv, env) == 0 &&
                     waitpid(pid, &status, 0) == pid;
    free(env);
    return ran && WIFEXITED(status) && WEXITSTATUS(status) == 0;
}

static void test_warm_path_without_nvrtc(void **state)
{
    struct fixture *f = need_gpu(state);
    assert_int_equal(elu_prepare(f->ctx, &WARM_PARAMS), ELU_OK);
    assert_true(child_without_nvrtc("--warm-child", f->dir));
}

/* Whether a new context's first f32 forward loads the PTX built in: not
 * where libelu has none for this GPU, or the driver is older than the
 * NVRTC that made it. */
static bool builtin_ptx_taken(void)
{
    elu_ctx *ctx = tu_ctx(.backend = ELU_BACKEND_CUDA, .flags = ELU_NO_DISK_CACHE);
    const size_t n = 1000;
    float *x = malloc(n * 4);
    tu_fill_inputs(ELU_F32, x, n);
    float *dx = tu_dev_copy_of(x, n * 4), *dy = tu_dev_alloc(n * 4);
    const elu_params p = elu_params_selu(ELU_F32);
    assert_int_equal(elu_run(ctx, &p, dx, dy, n, NULL), ELU_OK);
    const bool taken = tu_stats(ctx).builtin_ptx_loads == 1;
    elu_ctx_destroy(ctx);
    tu_dev_free(dx);
    tu_dev_free(dy);
    free(x);
    return taken;
}

static void test_cold_first_call_without_nvrtc(void **state)
{
    struct fixture *f = need_gpu(state);
    if (!builtin_ptx_taken()) {
        fprintf(stderr, "skipping: no PTX built in that this GPU and driver take\n");
        skip();
    }
    assert_true(child_without_nvrtc("--cold-child", f->dir));
}

/* Past max_specializations, the constants-as-arguments kernels serve:
 * exactly for f32 and f64. */
static void test_generic_kernel_past_the_cap(void **state)
{
    struct fixture *f = need_gpu(state);
    elu_ctx *ctx =
        tu_ctx(.backend = ELU_BACKEND_CUDA, .cache_dir = f->dir, .max_specializations = 1);
    const size_t n = 50000;
    float *x = malloc(n * 4), *y = tu_poisoned(n * 4);
    tu_fill_inputs(ELU_F32, x, n);
    float *dx = tu_dev_copy_of(x, n * 4), *dy = tu_dev_alloc(n * 4);
    const double alphas[] = {1.0, 0.5, 0.25, 0.5};
    for (int i = 0; i < 4; i++) {
        const elu_params p = elu_params_elu(ELU_F32, alphas[i]);
        assert_int_equal(elu_run(ctx, &p, dx, dy, n, NULL), ELU_OK);
        tu_dev_download(y, dy, n * 4);
        size_t at = 0;
        assert_true(tu_check_forward(&p, x, y, n, false, &at) <= TOL_FORWARD[ELU_F32]);
    }
    /* Constants outside the exact method's range (input_scale 0):
     * PyTorch's arithmetic. */
    const elu_params extreme = {ELU_F32, 0.5, 1.0, 0.0};
    assert_int_equal(elu_run(ctx, &extreme, dx, dy, n, NULL), ELU_OK);
    tu_dev_download(y, dy, n * 4);
    size_t at = 0;
    assert_true(tu_check_forward(&extreme, x, y, n, true, &at) <=
                TOL_PYTORCH_FORWARD[ELU_F32]);
    assert_int_equal(tu_wait_builds(ctx, 1), 1); /* the whole generic module */
    elu_ctx_stats s;
    elu_ctx_get_stats(ctx, &s);
    assert_int_equal(s.gpu_launches, 5);
    assert_int_equal(s.generic_launches, 5); /* the first too: used once, not specialized */
    /* the quick forward (its PTX built in, where it is) and strided parts,
     * then the whole generic module */
    assert_int_equal(s.compiles + s.builtin_ptx_loads, 3);
    tu_dev_free(dx);
    tu_dev_free(dy);
    free(x);
    free(y);
    elu_ctx_destroy(ctx);
}

/* Whether a and b hold the same n results of dtype t: bit for bit, but
 * that a NaN matches any NaN (the CPU's and the GPU's differ in payload).
 * The first difference goes to stderr, with its input from x (if not NULL). */
static bool same_results(elu_dtype t, const void *x, const void *a, const void *b, size_t n)
{
    const size_t es = elu_dtype_size(t);
    if (memcmp(a, b, n * es) == 0)
        return true;
    for (size_t i = 0; i < n; i++)
        if (memcmp((const char *)a + i * es, (const char *)b + i * es, es) != 0 &&
            !(isnan(tu_get(t, a, i)) && isnan(tu_get(t, b, i)))) {
            fprintf(stderr, "%s results differ at %zu: x = %.17Lg, %.17Lg against %.17Lg\n",
                    tu_dtype_names[t], i, x ? tu_get(t, x, i) : 0.0L, tu_get(t, a, i),
                    tu_get(t, b, i));
            return false;
        }
    return true;
}


/* Forward with p[0], backward from the input with p[1] and from the
 * output with p[2], of x (and grad g), n elements, into out[0..2] on the
 * host. */
static void run_three(elu_ctx *ctx, const elu_params p[3], const void *x, const void *g,
                      size_t n, void *out[3])
{
    const size_t bytes = n * elu_dtype_size(p[0].dtype);
    void *dx = tu_dev_copy_of(x, bytes), *dg = tu_dev_copy_of(g, bytes);
    void *dy = tu_dev_alloc(bytes), *dout = tu_dev_alloc(bytes);
    assert_int_equal(elu_run(ctx, &p[0], dx, dy, n, NULL), ELU_OK);
    tu_dev_download(out[0], dy, bytes);
    for (int from_output = 0; from_output < 2; from_output++) {
        assert_int_equal(elu_run_backward(ctx, &p[1 + from_output], dg, from_output ? dy : dx,
                                          from_output, dout, n, NULL), ELU_OK);
        tu_dev_download(out[1 + from_output], dout, bytes);
    }
    tu_dev_free(dx);
    tu_dev_free(dg);
    tu_dev_free(dy);
    tu_dev_free(dout);
}

/* A first run of new constants is served at once by the generic kernels:
 * their quick parts, then the dtype's whole generic module once the
 * context's background thread has built it. Constants in steady use
 * (ELU_HOT_CALLS calls) get a specialized module of their own, built in
 * the background, which serves the next runs with the same results, bit
 * for bit: the forward the CPU path's, the backward PyTorch's arithmetic.
 * Each of the three runs takes constants of its own, so that each is a
 * first run: with one set, the module built for the forward may already
 * serve the backward. */
static void test_served_then_built(void **state)
{
    need_gpu(state);
    elu_ctx *ctx = tu_ctx(.backend = ELU_BACKEND_CUDA, .flags = ELU_NO_DISK_CACHE),
            *cpu = tu_ctx(.backend = ELU_BACKEND_CPU);
    const size_t n = 300007;
    for (int d = 0; d < 4; d++) {
        const elu_dtype t = tu_dtypes[d];
        const elu_params p[3] = {elu_params_celu(t, 0.83), elu_params_celu(t, 0.71),
                                 elu_params_celu(t, 0.59)};
        const size_t bytes = n * elu_dtype_size(t);
        void *x = malloc(bytes), *g = malloc(bytes), *want = tu_poisoned(bytes);
        void *runs[3][3]; /* quick parts, the whole generic module, specialized */
        tu_fill_inputs(t, x, n);
        tu_fill_uniform(t, g, n, -4, 4);
        elu_ctx_stats before, after;
        elu_ctx_get_stats(ctx, &before);
        const uint64_t builds = before.background_builds;
        for (int stage = 0; stage < 3; stage++) {
            for (int k = 0; k < 3; k++)
                runs[stage][k] = tu_poisoned(bytes);
            run_three(ctx, p, x, g, n, runs[stage]);
            if (stage == 0) /* the whole generic module */
                assert_int_equal(tu_wait_builds(ctx, builds + 1), builds + 1);
            for (int call = 3; stage == 1 && call <= ELU_HOT_CALLS; call++)
                run_three(ctx, p, x, g, n, runs[stage]);
            if (stage == 1) /* the three specializations */
                assert_int_equal(tu_wait_builds(ctx, builds + 4), builds + 4);
        }
        elu_ctx_get_stats(ctx, &after);
        assert_int_equal(after.generic_launches, before.generic_launches + 3 * ELU_HOT_CALLS);
        assert_int_equal(elu_run(cpu, &p[0], x, want, n, NULL), ELU_OK);
        assert_true(same_results(t, x, runs[0][0], want, n));
        for (int k = 0; k < 3; k++)
            for (int stage = 1; stage < 3; stage++)
                if (!same_results(t, k == 0 ? x : g, runs[stage][k], runs[0][k], n))
                    fail_msg("%s: kernel %d differs at stage %d", tu_dtype_names[t], k, stage);
        for (int k = 0; k < 9; k++)
            free(runs[k / 3][k % 3]);
        fprintf(stderr, "gpu %-4s: served by the quick generic parts, the whole generic module, "
                "then built: forward and backward bit for bit alike, the forward the CPU's\n",
                tu_dtype_names[t]);
        free(x);
        free(g);
        free(want);
    }
    elu_ctx_stats s;
    elu_ctx_get_stats(ctx, &s);
    /* per dtype: two quick parts (the forward's PTX built in, where it
     * is), the whole generic module, three specializations */
    assert_int_equal(s.compiles + s.builtin_ptx_loads, 24);
    elu_ctx_destroy(ctx);
    elu_ctx_destroy(cpu);
}

/* The quick generic forward, which serves a dtype's first call until its
 * whole generic module is built (for f32 and f64 both of its kinds,
 * input_scale 1 and any), on views aligned, misaligned alike and
 * misaligned unequally, of many elements and of fewer than a pack: the
 * CPU's results, and nothing written outside the n elements. Each call is
 * a new context's first, without a disk cache: the whole generic module
 * is then still to be compiled, after the quick part the call waits for. */
static void test_quick_forward_layouts(void **state)
{
    need_gpu(state);
    static const size_t at[][3] = {{0, 0, 100003}, {1, 1, 100003}, {3, 3, 100003},
                                   {1, 0, 100003}, {0, 0, 3},      {1, 1, 5}};
    const size_t most = 100003;
    elu_ctx *cpu = tu_ctx(.backend = ELU_BACKEND_CPU);
    for (int d = 0; d < 4; d++) {
        const elu_dtype t = tu_dtypes[d];
        const size_t es = elu_dtype_size(t), bytes = (most + 3) * es;
        void *x = malloc(bytes), *y = malloc(bytes), *want = malloc(bytes);
        tu_fill_inputs(t, x, most + 3);
        void *dx = tu_dev_copy_of(x, bytes), *dy = tu_dev_alloc(bytes);
        for (size_t k = 0; k < sizeof at / sizeof *at; k++) {
            const size_t n = at[k][2];
            const elu_params p = k % 2 ? elu_params_celu(t, 0.83) : elu_params_elu(t, 1.3);
            const size_t x_at = at[k][0] * es, y_at = at[k][1] * es;
            elu_ctx *ctx = tu_ctx(.backend = ELU_BACKEND_CUDA, .flags = ELU_NO_DISK_CACHE);
            tu_dev_fill(dy, 0xA5, bytes);
            assert_int_equal(elu_run(ctx, &p, (char *)dx + x_at, (char *)dy + y_at, n, NULL),
                             ELU_OK);
            tu_dev_download(y, dy, bytes);
            memset(want, 0xA5, bytes);
            assert_int_equal(elu_run(cpu, &p, (char *)x + x_at, (char *)want + y_at, n, NULL),
                             ELU_OK);
            assert_int_equal(tu_stats(ctx).generic_launches, 1);
            if (!same_results(t, NULL, y, want, most + 3))
                fail_msg("%s: the quick forward, x at %zu, y at %zu, %zu elements",
                         tu_dtype_names[t], at[k][0], at[k][1], n);
            elu_ctx_destroy(ctx);
        }
        fprintf(stderr, "gpu %-4s: the quick generic forward, aligned, misaligned alike and "
                "not, long and short: the CPU's results\n", tu_dtype_names[t]);
        tu_dev_free(dx);
        tu_dev_free(dy);
        free(x);
        free(y);
        free(want);
    }
    elu_ctx_destroy(cpu);
}

/* elu_prepare() of constants queued for the builder (ELU_HOT_CALLS calls)
 * takes the build over, or waits for the builder's: one compile either
 * way, and the next run is specialized. */
static void test_prepare_of_queued_constants(void **state)
{
    need_gpu(state);
    elu_ctx *ctx = tu_ctx(.backend = ELU_BACKEND_CUDA, .flags = ELU_NO_DISK_CACHE);
    const elu_params p = elu_params_elu(ELU_F32, 0.61);
    const size_t n = 5000;
    float *d = tu_dev_alloc(n * 4);
    for (int call = 0; call < ELU_HOT_CALLS; call++)
        assert_int_equal(elu_run(ctx, &p, d, d, n, NULL), ELU_OK);
    assert_int_equal(elu_prepare(ctx, &p), ELU_OK);
    assert_true(tu_wait_builds(ctx, 1) >= 1); /* the whole generic module */
    elu_ctx_stats before, after;
    elu_ctx_get_stats(ctx, &before);
    /* the quick forward (built in, where it is), the whole generic
     * module, the specialization */
    assert_int_equal(before.compiles + before.builtin_ptx_loads, 3);
    assert_int_equal(elu_run(ctx, &p, d, d, n, NULL), ELU_OK);
    elu_ctx_get_stats(ctx, &after);
    assert_int_equal(after.generic_launches, before.generic_launches);
    tu_dev_free(d);
    elu_ctx_destroy(ctx);
}

/* A thousand new constants, each used once, forward and backward: the
 * generic kernels serve them all, and the disk cache gains the generic
 * modules of the dtypes and nothing else; no module is compiled for them. */
static void test_new_constants_leave_no_entries(void **state)
{
    struct fixture *f = need_gpu(state);
    const size_t n = 4099;
    const elu_dtype types[] = {ELU_F32, ELU_F16};
    for (int d = 0; d < 2; d++) {
        const size_t bytes = n * elu_dtype_size(types[d]);
        void *x = malloc(bytes);
        tu_fill_inputs(types[d], x, n);
        void *dx = tu_dev_copy_of(x, bytes), *dy = tu_dev_alloc(bytes);
        for (int i = 0; i < 1000; i++) {
            const elu_params p = elu_params_elu(types[d], 0.5 + i / 1000.0);
            assert_int_equal(elu_run(f->ctx, &p, dx, dy, n, NULL), ELU_OK);
            assert_int_equal(elu_run_backward(f->ctx, &p, dy, dx, false, dy, n, NULL), ELU_OK);
        }
        tu_dev_free(dx);
        tu_dev_free(dy);
        free(x);
    }
    assert_int_equal(tu_wait_builds(f->ctx, 2), 2); /* the two generic modules */
    elu_ctx_stats s;
    elu_ctx_get_stats(f->ctx, &s);
    char path[1024];
    const int entries = tu_entries(f->dir, path, sizeof path);
    fprintf(stderr, "1000 new constants of f32 and of f16, forward and backward: %d cache "
            "entries, %llu compiles, %llu generic launches\n", entries,
            (unsigned long long)s.compiles, (unsigned long long)s.generic_launches);
    /* per dtype: the whole generic module and at most the two quick parts */
    assert_true(entries <= 6 && (uint64_t)entries == s.compiles);
    assert_int_equal(s.generic_launches, 4000);
}

/* GPU forward of the n elements of x, `at` elements into the device's
 * buffers (misaligned for at > 0), in place or not, against the CPU's: how
 * many differ. */
static size_t half_forward_differences(elu_ctx *gpu, elu_ctx *cpu, const elu_params *p,
                                       const uint16_t *x, size_t n, size_t at, bool in_place)
{
    uint16_t *y = tu_poisoned(n * 2), *want = tu_poisoned(n * 2);
    uint16_t *dx = tu_dev_alloc((n + at) * 2), *dy = in_place ? dx : tu_dev_alloc((n + at) * 2);
    tu_dev_upload(dx + at, x, n * 2);
    assert_int_equal(elu_run(cpu, p, x, want, n, NULL), ELU_OK);
    assert_int_equal(elu_run(gpu, p, dx + at, dy + at, n, NULL), ELU_OK);
    tu_dev_download(y, dy + at, n * 2);
    size_t differ = 0;
    for (size_t i = 0; i < n; i++)
        if (y[i] != want[i] && differ++ < 3)
            fprintf(stderr, "  x = 0x%04x: 0x%04x against the CPU's 0x%04x\n", x[i], y[i],
                    want[i]);
    tu_dev_free(dx);
    if (!in_place)
        tu_dev_free(dy);
    free(y);
    free(want);
    return differ;
}

/* The sets above, then scales whose products f16's positive inputs
 * round to infinity, or to subnormals, or that are not short in binary;
 * then constants at the edges of what the computed forward takes
 * (kernels_src/elu.cu's COMPUTABLE), which settles the rest apart: a
 * negative input_scale; for bf16 |scale*alpha| just under 2^15 with a tiny
 * input_scale, then over 2^15 with a huge one; products that underflow
 * float to zero. */
#define HALF_SETS 10
static elu_params half_sets(elu_dtype t, int i)
{
    static const double scale[] = {3000.7, 1.0001e-3, 1.0 / 3};
    static const elu_params edges[] = {{ELU_F16, 3e6, 1.0, -0.3},
                                       {ELU_F16, 30000.0, 1.0, 0x1p-120},
                                       {ELU_F16, 1e5, 1.0, 0x1p100},
                                       {ELU_F16, 0x1p-100, 1.0, 0x1p-59}};
    if (i < 3)
        return sets(t, i);
    if (i >= 6) {
        elu_params p = edges[i - 6];
        p.dtype = t;
        return p;
    }
    return (elu_params){t, 0.75, scale[i - 3], i == 5 ? 3.0 : 0.7};
}

/* The half types' forward on the GPU, for every one of the 65536 inputs:
 * bit for bit the CPU path's (correctly rounded; test_cpu checks that),
 * small (computed) and large (looked up), aligned and not, in a
 * specialized module and in the generic kernels (computed, no table),
 * which a context past its cap on specializations runs. */
static void test_half_forward_every_input(void **state)
{
    struct fixture *f = need_gpu(state);
    const size_t n = 65536, big = ((size_t)1 << 22) + 3;
    uint16_t *x = malloc(big * 2);
    for (size_t i = 0; i < big; i++)
        x[i] = (uint16_t)(i < n ? i : i * 40503u); /* every input, then shuffled */
    elu_ctx *cpu = tu_ctx(.backend = ELU_BACKEND_CPU),
            *capped = tu_ctx(.backend = ELU_BACKEND_CUDA, .cache_dir = f->dir,
                             .max_specializations = 1);
    const elu_params other = elu_params_elu(ELU_F32, 1.0);
    assert_int_equal(elu_prepare(capped, &other), ELU_OK); /* takes the one specialization */
    const elu_dtype types[] = {ELU_F16, ELU_BF16};
    for (int d = 0; d < 2; d++)
        for (int s = 0; s < HALF_SETS; s++) {
            const elu_params p = half_sets(types[d], s);
            assert_int_equal(elu_prepare(f->ctx, &p), ELU_OK);
            assert_int_equal(elu_prepare(capped, &p), ELU_OK); /* the generic module */
            size_t small_differ[2] = {0}, big_differ[2] = {0};
            for (int generic = 0; generic < 2; generic++) {
                elu_ctx *gpu = generic ? capped : f->ctx;
                small_differ[generic] = half_forward_differences(gpu, cpu, &p, x, n, 0, false) +
                                        half_forward_differences(gpu, cpu, &p, x, n, 1, false);
                big_differ[generic] = half_forward_differences(gpu, cpu, &p, x, big, 0, false) +
                                      half_forward_differences(gpu, cpu, &p, x, big, 1, false);
            }
            fprintf(stderr, "gpu forward %-4s set %d, every input, aligned and not, from the "
                    "CPU's: specialized %zu differ, generic %zu; 2^22 + 3 of them (large n): "
                    "%zu and %zu\n", tu_dtype_names[types[d]], s,
                    small_differ[0], small_differ[1], big_differ[0], big_differ[1]);
            for (int generic = 0; generic < 2; generic++) {
                assert_int_equal(small_differ[generic], 0);
                assert_int_equal(big_differ[generic], 0);
            }
        }
    elu_ctx_stats st;
    elu_ctx_get_stats(capped, &st);
    assert_int_equal(st.generic_launches, 2 * HALF_SETS * 4);
    elu_ctx_destroy(cpu);
    elu_ctx_destroy(capped);
    free(x);
}

/* The half types' inputs whose computed forward is in doubt
 * (tu_half_doubtful_inputs), in stretches of 4096 elements, dense and
 * sparse in turn: in a dense one every element, so that every pack takes
 * the settling path (kernels_src/elu.cu's fast_then_whole) for most of
 * its elements, in a sparse one an element in 61, among zeros of both
 * signs, so that packs that settle sit among packs that do not. Through
 * a specialized module and the generic kernels, for sizes that take the
 * 8-byte computed kernel and the 16-byte one (in a specialized module,
 * the table's), aligned and not, in place and not: the CPU's results, bit
 * for bit. */
static void test_half_doubtful_inputs(void **state)
{
    struct fixture *f = need_gpu(state);
    const size_t sizes[] = {((size_t)1 << 16) + 3, ((size_t)1 << 20) + 3};
    uint16_t *doubtful = malloc(65536 * 2), *x = malloc(sizes[1] * 2);
    elu_ctx *cpu = tu_ctx(.backend = ELU_BACKEND_CPU),
            *capped = tu_ctx(.backend = ELU_BACKEND_CUDA, .cache_dir = f->dir,
                             .max_specializations = 1);
    const elu_params other = elu_params_elu(ELU_F32, 1.0);
    assert_int_equal(elu_prepare(capped, &other), ELU_OK); /* takes the one specialization */
    const elu_dtype types[] = {ELU_F16, ELU_BF16};
    const int used_sets[] = {0, 1, 2, 5};
    for (int d = 0; d < 2; d++)
        for (int s = 0; s < 4; s++) {
            const elu_params p = half_sets(types[d], used_sets[s]);
            const size_t found = tu_half_doubtful_inputs(&p, doubtful, 65536);
            assert_true(found > 0);
            for (size_t i = 0, next = 0; i < sizes[1]; i++) {
                const bool dense = (i >> 12) % 2 == 0;
                x[i] = dense || i % 61 == 0 ? doubtful[next++ % found]
                                            : (uint16_t)(i % 2 ? 0x8000 : 0);
            }
            assert_int_equal(elu_prepare(f->ctx, &p), ELU_OK);
            assert_int_equal(elu_prepare(capped, &p), ELU_OK); /* the generic module */
            size_t differ = 0;
            for (int generic = 0; generic < 2; generic++)
                for (int k = 0; k < 2; k++)
                    for (size_t at = 0; at < 2; at++)
                        for (int in_place = 0; in_place < 2; in_place++)
                            differ += half_forward_differences(generic ? capped : f->ctx, cpu,
                                                               &p, x, sizes[k], at, in_place);
            fprintf(stderr, "gpu forward %-4s set %d, %zu inputs in doubt, dense and sparse: "
                    "%zu differ from the CPU's\n", tu_dtype_names[types[d]], used_sets[s],
                    found, differ);
            assert_int_equal(differ, 0);
        }
    elu_ctx_stats st;
    elu_ctx_get_stats(capped, &st);
    assert_int_equal(st.generic_launches, 4 * 2 * 8);
    elu_ctx_destroy(cpu);
    elu_ctx_destroy(capped);
    free(doubtful);
    free(x);
}

/* The f32 and f64 inputs whose forward the fast evaluation leaves in
 * doubt, among others, through a specialized module and through the
 * generic kernels (a context past its cap): each the correctly rounded
 * result, by the slow path in the kernel. */
static void doubtful_inputs(void **state, elu_dtype dtype)
{
    struct fixture *f = need_gpu(state);
    enum { CAP = 256 };
    const bool f32 = dtype == ELU_F32;
    const size_t n = 4 * CAP, size = f32 ? 4 : 8;
    float *xf = malloc(n * 4);
    double *xd = malloc(n * 8);
    void *x = f32 ? (void *)xf : (void *)xd, *y = tu_poisoned(n * size);
    elu_ctx *capped = tu_ctx(.backend = ELU_BACKEND_CUDA, .cache_dir = f->dir,
                             .max_specializations = 1);
    const elu_params other = elu_params_elu(ELU_F16, 1.0);
    assert_int_equal(elu_prepare(capped, &other), ELU_OK); /* takes the one specialization */
    const elu_params sets[] = {elu_params_elu(dtype, 1.0), elu_params_selu(dtype),
                               elu_params_celu(dtype, 0.6)};
    for (size_t k = 0; k < sizeof sets / sizeof *sets; k++) {
        const size_t found = f32 ? tu_f32_doubtful_inputs(&sets[k], true, xf, CAP)
                                 : tu_f64_doubtful_inputs(&sets[k], xd, CAP);
        assert_true(found >= 16);
        for (size_t i = found; i < n; i++) {
            const double v = -tu_uniform(0.001, 17);
            if (f32)
                xf[i] = i % 3 ? (float)v : xf[i % found];
            else
                xd[i] = i % 3 ? v : xd[i % found];
        }
        void *dx = tu_dev_copy_of(x, n * size), *dy = tu_dev_alloc(n * size);
        assert_int_equal(elu_prepare(f->ctx, &sets[k]), ELU_OK);
        for (int generic = 0; generic < 2; generic++) {
            tu_dev_fill(dy, 0xA5, n * size);
            assert_int_equal(elu_run(generic ? capped : f->ctx, &sets[k], dx, dy, n, NULL), ELU_OK);
            tu_dev_download(y, dy, n * size);
            size_t at = 0;
            const double err = tu_check_forward(&sets[k], x, y, n, false, &at);
            fprintf(stderr, "gpu %s forward, set %zu, %s: %zu inputs in doubt, worst %.4f ulp\n",
                    f32 ? "f32" : "f64", k, generic ? "generic" : "specialized", found, err);
            assert_true(err < 1); /* correctly rounded (tu_check_forward) */
        }
        tu_dev_free(dx);
        tu_dev_free(dy);
    }
    elu_ctx_destroy(capped);
    free(xf);
    free(xd);
    free(y);
}

static void test_f32_doubtful_inputs(void **state) { doubtful_inputs(state, ELU_F32); }
static void test_f64_doubtful_inputs(void **state) { doubtful_inputs(state, ELU_F64); }

/* A cached cubin that verifies but that the driver refuses (here: text with
 * a correct header; not ELF, so the driver does not parse it as one) is
 * rebuilt once as PTX, and the run succeeds. */
static void test_refused_binary_rebuilt_as_ptx(void **state)
{
    struct fixture *f = need_gpu(state);
    const elu_params p = elu_params_elu(ELU_F64, 0.75);
    assert_int_equal(elu_prepare(f->ctx, &p), ELU_OK);
    char path[1024], why[512];
    assert_true(tu_only_entry(f->dir, path, sizeof path));
    FILE *file = fopen(path, "rb");
    unsigned char header[ELU_CACHE_HEADER_SIZE];
    assert_int_equal(fread(header, 1, sizeof header, file), sizeof header);
    fclose(file);
    struct elu_cache_key key;
    memcpy(key.bytes, header + 16, sizeof key.bytes);
    const char garbage[] = "not a cubin";
    struct elu_cache cache;
    unsigned evicted;
    assert_true(elu_cache_open(&cache, f->dir, why, sizeof why));
    assert_true(elu_cache_put(&cache, &key, ELU_BINARY_CUBIN, "forged", garbage,
                              sizeof garbage, &evicted, why, sizeof why));

    elu_ctx *ctx = tu_ctx(.backend = ELU_BACKEND_CUDA, .cache_dir = f->dir);
    assert_int_equal(elu_prepare(ctx, &p), ELU_OK);
    elu_ctx_stats s;
    elu_ctx_get_stats(ctx, &s);
    assert_int_equal(s.disk_hits, 1); /* the refused cubin */
    assert_int_equal(s.compiles, 1);  /* the PTX */
    const size_t n = 1000;
    double *x = malloc(n * 8), *y = tu_poisoned(n * 8);
    tu_fill_inputs(ELU_F64, x, n);
    double *d = tu_dev_copy_of(x, n * 8);
    /* Runs in another context meet the refused cubin too: the generic
     * kernels serve, and once the constants are in steady use the
     * background thread loads the PTX (after the dtype's generic module). */
    for (int i = 0; i < 2; i++) {
        elu_ctx *run = i == 0 ? ctx : tu_ctx(.backend = ELU_BACKEND_CUDA, .cache_dir = f->dir);
        for (int call = 0; call < (i == 0 ? 1 : ELU_HOT_CALLS); call++) {
            tu_dev_upload(d, x, n * 8);
            assert_int_equal(elu_run(run, &p, d, d, n, NULL), ELU_OK);
            tu_dev_download(y, d, n * 8);
            size_t at = 0;
            assert_true(tu_check_forward(&p, x, y, n, false, &at) <= TOL_FORWARD[ELU_F64]);
        }
        if (i == 1) {
            assert_int_equal(tu_wait_builds(run, 2), 2);
            elu_ctx_destroy(run);
        }
    }
    tu_dev_free(d);
    free(x);
    free(y);
    elu_ctx_destroy(ctx);
}

/* ELU_PREWARM: the named specializations are set up in the background (the
 * generic kernels of their dtypes loaded, then built whole, their own
 * compiled), and the first runs find them loaded; a context destroyed at
 * once waits for its threads. */
static void test_prewarm(void **state)
{
    struct fixture *f = need_gpu(state);
    const elu_params named[] = {elu_params_celu(ELU_F32, 0.77), elu_params_celu(ELU_F16, 0.77)};
    elu_options o;
    elu_options_default(&o);
    o.backend = ELU_BACKEND_CUDA;
    o.cache_dir = f->dir;
    o.flags = ELU_PREWARM;
    o.prewarm = named;
    o.prewarm_count = 2;
    elu_ctx *gone = NULL, *ctx = NULL;
    assert_int_equal(elu_ctx_create(&gone, &o), ELU_OK);
    elu_ctx_destroy(gone); /* while its thread compiles */
    char dir[512];
    tu_tempdir(dir, sizeof dir);
    o.cache_dir = dir; /* cold: nothing found on disk */
    assert_int_equal(elu_ctx_create(&ctx, &o), ELU_OK);
    assert_int_equal(tu_wait_builds(ctx, 4), 4); /* the generic modules, the specializations */
    elu_ctx_stats s;
    elu_ctx_get_stats(ctx, &s);
    /* per dtype: the quick parts (the forward's built in, where it is), the
     * whole generic module, the specialization */
    assert_int_equal(s.compiles + s.builtin_ptx_loads, 8);
    const size_t n = 4099;
    for (int d = 0; d < 2; d++) {
        const elu_dtype t = named[d].dtype;
        const size_t bytes = n * elu_dtype_size(t);
        void *x = malloc(bytes), *y = tu_poisoned(bytes);
        tu_fill_inputs(t, x, n);
        void *dx = tu_dev_copy_of(x, bytes), *dy = tu_dev_copy_of(y, bytes);
        assert_int_equal(elu_run(ctx, &named[d], dx, dy, n, NULL), ELU_OK);
        tu_dev_download(y, dy, bytes);
        size_t at = 0;
        assert_true(tu_check_forward(&named[d], x, y, n, false, &at) <= TOL_FORWARD[t]);
        tu_dev_free(dx);
        tu_dev_free(dy);
        free(x);
        free(y);
    }
    elu_ctx_stats after;
    elu_ctx_get_stats(ctx, &after);
    /* nothing more to do */
    assert_int_equal(after.compiles + after.builtin_ptx_loads + after.disk_hits, 8);
    assert_int_equal(after.memory_hits, s.memory_hits + 2);
    assert_int_equal(after.generic_launches, 0);
    elu_ctx_destroy(ctx);
    tu_rmdir(dir);
}

/* ELU_AUTOTUNE: a dtype's launch shapes are measured once, stored beside
 * its kernels, and found there by the next context; the kernels stay
 * right whatever shapes won, at sizes across the classes. */
static void test_autotune(void **state)
{
    struct fixture *f = need_gpu(state);
    elu_ctx *plain = f->ctx;
    f->ctx = tu_ctx(.backend = ELU_BACKEND_CUDA, .cache_dir = f->dir, .flags = ELU_AUTOTUNE);
    const elu_dtype dtypes[] = {ELU_F32, ELU_F16};
    for (int d = 0; d < 2; d++) {
        const elu_params p = elu_params_elu(dtypes[d], 1.0);
        elu_ctx_stats before, after;
        elu_ctx_get_stats(f->ctx, &before);
        assert_int_equal(elu_prepare(f->ctx, &p), ELU_OK);
        elu_ctx_get_stats(f->ctx, &after);
        fprintf(stderr, "autotune %s: %s\n", tu_dtype_names[dtypes[d]],
                elu_ctx_last_error(f->ctx));
        assert_int_equal(after.autotunes, before.autotunes + 1);
        /* the kernels and the shapes, and f16's forward table */
        assert_int_equal(after.disk_writes, before.disk_writes + 2 + (dtypes[d] == ELU_F16));
        const size_t sizes[] = {1000, 70001, (1 << 21) + 1, (1 << 23) + 3};
        for (int i = 0; i < 4; i++) {
            check_forward(f, dtypes[d], sizes[i], (size_t)i % 2, (size_t)i % 2);
            check_backward(f, dtypes[d], sizes[i], 0);
        }
    }
    elu_ctx_destroy(f->ctx);
    f->ctx = tu_ctx(.backend = ELU_BACKEND_CUDA, .cache_dir = f->dir, .flags = ELU_AUTOTUNE);
    for (int d = 0; d < 2; d++) {
        const elu_params p = elu_params_elu(dtypes[d], 1.0);
        assert_int_equal(elu_prepare(f->ctx, &p), ELU_OK);
    }
    elu_ctx_stats s;
    elu_ctx_get_stats(f->ctx, &s);
    assert_int_equal(s.autotunes, 0);
    assert_int_equal(s.disk_hits, 5);
    elu_ctx_destroy(f->ctx);
    f->ctx = plain;
}

static void test_info(void **state)
{
    struct fixture *f = need_gpu(state);
    elu_ctx_info info;
    assert_int_equal(elu_ctx_get_info(f->ctx, &info), ELU_OK);
    assert_int_equal(info.backend, ELU_BACKEND_CUDA);
    assert_int_equal(info.device, 0);
    assert_true(info.sm >= 50);
    assert_true(info.multiprocessors > 0);
    assert_true(info.driver_version > 0);
    assert_true(strlen(info.device_name) > 0);
    fprintf(stderr, "device: %s sm_%d, %d SMs, driver %d, NVRTC %d\n",
            info.device_name, info.sm, info.multiprocessors,
            info.driver_version, info.nvrtc_version);
}

/* -------- the exhaustive suite (test_gpu --exhaustive) --------
 *
 * The GPU's forward against the CPU path's, which tests/test_cpu_exhaustive.c
 * holds to correct rounding (f32, the half types) or 1 ulp (f64): the same
 * method, so bit for bit, and any element that differs is judged against
 * the exact value itself. NaN inputs give NaN on both, of payloads that may
 * differ. */

/* Elements of y (GPU) and want (CPU) that differ, beyond NaN payloads;
 * each must be within tol ulps of the exact value: of the forward of x, or
 * where g is not NULL of the backward from the output g, x (PyTorch's
 * arithmetic). */
static size_t differences(const elu_params *p, const void *g, const void *x, const void *y,
                          const void *want, size_t n, double tol)
{
    const size_t es = elu_dtype_size(p->dtype);
    if (memcmp(y, want, n * es) == 0)
        return 0;
    size_t differ = 0;
    for (size_t i = 0; i < n; i++) {
        const long double a = tu_get(p->dtype, y, i), b = tu_get(p->dtype, want, i);
        if (memcmp((const char *)y + i * es, (const char *)want + i * es, es) == 0 ||
            (isnan(a) && isnan(b)))
            continue;
        size_t at = 0;
        const char *xi = (const char *)x + i * es, *yi = (const char *)y + i * es;
        const double err = g ? tu_check_backward(p, (const char *)g + i * es, xi, true, yi, 1,
                                                 true, &at)
                             : tu_check_forward(p, xi, yi, 1, false, &at);
        if (differ++ < 5)
            fprintf(stderr, "  element %zu: GPU %.9Lg, CPU %.9Lg: %.3f ulp\n", i, a, b, err);
        assert_true(err <= tol);
    }
    return differ;
}

/* What a comparison of the GPU with the CPU holds: n elements of input
 * (x, on the host; dx, its device copy), the GPU's results (dy, and y on
 * the host), the CPU's (want), and a CPU context. For f32 and f64 also a
 * CUDA context whose one specialization is taken, so that its generic
 * kernels serve every other, and their forward results (y_generic). */
struct sweep {
    void *x, *y, *want, *dx, *dy, *y_generic;
    elu_ctx *cpu, *generic;
};

static struct sweep sweep_new(size_t bytes, bool generic_too)
{
    struct sweep w = {malloc(bytes), malloc(bytes), malloc(bytes), tu_dev_alloc(bytes),
                      tu_dev_alloc(bytes), NULL, tu_ctx(.backend = ELU_BACKEND_CPU), NULL};
    assert_true(w.x && w.y && w.want);
    if (generic_too) {
        const elu_params other = elu_params_elu(ELU_F16, 1.0);
        w.generic = tu_ctx(.backend = ELU_BACKEND_CUDA, .max_specializations = 1,
                           .flags = ELU_NO_DISK_CACHE);
        assert_int_equal(elu_prepare(w.generic, &other), ELU_OK);
        assert_non_null(w.y_generic = malloc(bytes));
    }
    return w;
}

static void sweep_free(struct sweep *w)
{
    elu_ctx_destroy(w->cpu);
    elu_ctx_destroy(w->generic);
    free(w->y_generic);
    tu_dev_free(w->dx);
    tu_dev_free(w->dy);
    free(w->x);
    free(w->y);
    free(w->want);
}

/* The forward, or the backward from the output (x its own saved value), on
 * the n elements from element `skew` of w's buffers, on the GPU and on the
 * CPU; returns how many results differ, each checked as differences()
 * does. */
static size_t compare(struct fixture *f, const struct sweep *w, const elu_params *p,
                      bool backward, size_t n, size_t skew)
{
    const size_t es = elu_dtype_size(p->dtype), bytes = n * es;
    char *x = (char *)w->x + skew * es, *dx = (char *)w->dx + skew * es,
         *dy = (char *)w->dy + skew * es;
    tu_dev_fill(dy, 0xA5, bytes);
    memset(w->want, 0xA5, bytes);
    if (!backward) {
        assert_int_equal(elu_run(f->ctx, p, dx, dy, n, NULL), ELU_OK);
        assert_int_equal(elu_run(w->cpu, p, x, w->want, n, NULL), ELU_OK);
    } else {
        assert_int_equal(elu_run_backward(f->ctx, p, dx, dx, true, dy, n, NULL), ELU_OK);
        assert_int_equal(elu_run_backward(w->cpu, p, x, x, true, w->want, n, NULL), ELU_OK);
    }
    tu_dev_download(w->y, dy, bytes);
    if (w->generic && !backward) { /* the generic kernels' forward: the same bits */
        tu_dev_fill(dy, 0xA5, bytes);
        assert_int_equal(elu_run(w->generic, p, dx, dy, n, NULL), ELU_OK);
        tu_dev_download(w->y_generic, dy, bytes);
        assert_true(same_results(p->dtype, x, w->y_generic, w->y, n));
    }
    return backward ? differences(p, x, x, w->y, w->want, n, TOL_BACKWARD[p->dtype])
                    : differences(p, NULL, x, w->y, w->want, n, TOL_FORWARD[p->dtype]);
}

/* Every one of the 2^32 f32 inputs, in 16 chunks, for three sets. */
static void test_f32_every_input(void **state)
{
    struct fixture *f = need_gpu(state);
    const size_t n = (size_t)1 << 28;
    struct sweep w = sweep_new(n * 4, true);
    size_t differ[3] = {0};
    for (uint32_t chunk = 0; chunk < 16; chunk++) {
        for (size_t i = 0; i < n; i++)
            ((uint32_t *)w.x)[i] = chunk << 28 | (uint32_t)i;
        tu_dev_upload(w.dx, w.x, n * 4);
        for (int s = 0; s < 3; s++) {
            const elu_params p = sets(ELU_F32, s);
            differ[s] += compare(f, &w, &p, false, n, 0);
        }
    }
    for (int s = 0; s < 3; s++)
        fprintf(stderr, "gpu forward f32 set %d, all 2^32 inputs: %zu differ from the CPU's "
                "(correctly rounded); the generic kernels' the same bits\n", s, differ[s]);
    for (int s = 0; s < 3; s++)
        assert_int_equal(differ[s], 0);
    sweep_free(&w);
}

/* 10^8 f64 inputs: special values and every magnitude, then one in four
 * any bit pattern at all; for the first set also one element off 16-byte
 * alignment (n - 1 elements), which takes the large-input kernel with a
 * head and a tail of single elements. */
static void test_f64_random_inputs(void **state)
{
    struct fixture *f = need_gpu(state);
    const size_t n = 100000000, mixed = 1000000;
    struct sweep w = sweep_new(n * 8, true);
    double *x = w.x;
    tu_fill_inputs(ELU_F64, x, mixed);
    for (size_t i = mixed; i < n; i++) {
        const uint64_t r = tu_rand();
        if (r % 4 == 0)
            memcpy(&x[i], &r, 8);
        else
            x[i] = -ldexp((double)(r >> 11) * 0x1p-53, (int)(r % 64) - 57);
    }
    tu_dev_upload(w.dx, w.x, n * 8);
    for (int s = 0; s < 3; s++) {
        const elu_params p = sets(ELU_F64, s);
        fprintf(stderr, "gpu forward f64 set %d, 10^8 inputs: %zu differ from the CPU's "
                "(correctly rounded); the generic kernels' the same bits\n", s,
                compare(f, &w, &p, false, n, 0));
    }
    const elu_params p = sets(ELU_F64, 0);
    fprintf(stderr, "gpu forward f64 set 0, 10^8 - 1 inputs one element off alignment: %zu "
            "differ from the CPU's (correctly rounded)\n", compare(f, &w, &p, false, n - 1, 1));
    sweep_free(&w);
}

/* More than 2^32 elements (64-bit indexing): f16, forward (aligned and one
 * element off) and backward from the output, against the CPU. The
 * backward does PyTorch's arithmetic: within TOL_BACKWARD where it differs
 * from the CPU's correctly rounded one. */
static void test_beyond_2_32_elements(void **state)
{
    struct fixture *f = need_gpu(state);
    const size_t n = ((size_t)1 << 32) + 17;
    struct sweep w = sweep_new(n * 2, false);
    const uint64_t seed = tu_rand();
    for (size_t i = 0; i < n; i++)
        ((uint16_t *)w.x)[i] = (uint16_t)((i * 0x9E3779B97F4A7C15ull + seed) >> 40);
    tu_dev_upload(w.dx, w.x, n * 2);
    const elu_params p = elu_params_selu(ELU_F16);
    const size_t differ = compare(f, &w, &p, false, n, 0);
    const size_t misaligned = compare(f, &w, &p, false, n - 1, 1);
    const size_t backward = compare(f, &w, &p, true, n, 0);
    fprintf(stderr, "gpu f16, 2^32 + 17 elements: forward %zu differ from the CPU's "
            "(misaligned: %zu); backward from the output: %zu, each within %.1f ulp\n",
            differ, misaligned, backward, TOL_BACKWARD[ELU_F16]);
    assert_int_equal(differ, 0);
    assert_int_equal(misaligned, 0);
    sweep_free(&w);
}

#define T(f) cmocka_unit_test_setup_teardown(f, setup, teardown)

/* test_gpu [--exhaustive] [--skip PATTERN]: the quick group, or the
 * exhaustive one, less the tests whose names match PATTERN (cmocka's
 * wildcards). Under compute-sanitizer's racecheck, for one, test_autotune
 * is left out: over autotune's thousands of timed launches the tool's own
 * memory grew by 1 GB a second, to the H200 host's 128 GB and the OOM
 * killer, where the plain suite peaks at 416 MB. */
int main(int argc, char **argv)
{
    if (argc == 3 && strcmp(argv[1], "--warm-child") == 0)
        return warm_child(argv[2]);
    if (argc == 3 && strcmp(argv[1], "--cold-child") == 0)
        return cold_child(argv[2]);
    tu_seed();
    const struct CMUnitTest tests[] = {
        T(test_info),
        T(test_forward_all_dtypes),
        T(test_backward_all_dtypes),
        T(test_in_place_on_a_stream),
        T(test_chained_calls_on_a_stream),
        T(test_host_pointers_run_on_cpu),
        T(test_mixed_places_rejected),
        T(test_managed_memory_runs_on_gpu),
        T(test_warm_disk_cache),
        T(test_warm_path_without_nvrtc),
        T(test_cold_first_call_without_nvrtc),
        T(test_generic_kernel_past_the_cap),
        T(test_served_then_built),
        T(test_quick_forward_layouts),
        T(test_prepare_of_queued_constants),
        T(test_new_constants_leave_no_entries),
        T(test_half_forward_every_input),
        T(test_half_doubtful_inputs),
        T(test_f32_doubtful_inputs),
        T(test_f64_doubtful_inputs),
        T(test_refused_binary_rebuilt_as_ptx),
        T(test_prewarm),
        T(test_autotune),
    };
    const struct CMUnitTest exhaustive[] = {
        T(test_f32_every_input),
        T(test_f64_random_inputs),
        T(test_beyond_2_32_elements),
    };
    bool all = false;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--exhaustive") == 0)
            all = true;
        else if (strcmp(argv[i], "--skip") == 0 && i + 1 < argc)
            cmocka_set_skip_filter(argv[++i]);
        else {
            fprintf(stderr, "usage: test_gpu [--exhaustive] [--skip PATTERN]\n");
            return 2;
        }
    }
    const int failed = all ? cmocka_run_group_tests(exhaustive, NULL, NULL)
                           : cmocka_run_group_tests(tests, NULL, NULL);
    /* 77 tells meson the whole program skipped: no GPU here. */
    elu_ctx *probe = tu_ctx(.backend = ELU_BACKEND_CUDA);
    const bool gpu = probe != NULL;
    elu_ctx_destroy(probe);
    return failed ? failed : gpu ? 0 : 77;
}
