/* The API's contract on bad input and on a machine without CUDA. Runs with
 * ELU_CUDA_LIBRARY and ELU_NVRTC_LIBRARY pointing at files that do not
 * exist (see tests/meson.build), so it behaves the same with or without a
 * GPU. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "elu.h"
#include "testctx.h" /* public API only, as this program links */

#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

/* A call's status, and a word its message must hold (NULL: any), checked
 * against what it must be; `name` says which call failed. */
static void check_call(const char *name, elu_status got, const elu_ctx *ctx, elu_status want,
                       const char *said)
{
    const char *message = ctx && got != ELU_OK ? elu_ctx_last_error(ctx) : "";
    if (got != want || (said && !strstr(message, said)))
        fail_msg("%s: %s (\"%s\"), want %s saying \"%s\"", name, elu_status_str(got), message,
                 elu_status_str(want), said ? said : "");
}

static void test_version_and_status(void **state)
{
    (void)state;
    assert_int_equal(elu_version_number(), ELU_VERSION_NUMBER);
    assert_string_equal(elu_version_string(), ELU_VERSION_STRING);
    const elu_status all[] = {ELU_OK, ELU_ERR_INVALID_ARG, ELU_ERR_UNSUPPORTED,
                              ELU_ERR_NO_DEVICE, ELU_ERR_COMPILE, ELU_ERR_CUDA,
                              ELU_ERR_OUT_OF_MEMORY, ELU_ERR_IO};
    for (int i = 0; i < 8; i++) {
        assert_int_equal(all[i], -i); /* pinned values */
        assert_string_not_equal(elu_status_str(all[i]), "unknown status");
    }
    assert_string_equal(elu_status_str((elu_status)-999), "unknown status");
    const struct {
        elu_dtype dtype;
        size_t size;
    } sizes[] = {{ELU_F32, 4}, {ELU_F64, 8}, {ELU_F16, 2}, {ELU_BF16, 2}, {(elu_dtype)7, 0}};
    for (size_t i = 0; i < sizeof sizes / sizeof *sizes; i++)
        if (elu_dtype_size(sizes[i].dtype) != sizes[i].size)
            fail_msg("dtype %d: size %zu, want %zu", (int)sizes[i].dtype,
                     elu_dtype_size(sizes[i].dtype), sizes[i].size);
}

static void test_params_helpers(void **state)
{
    (void)state;
    const elu_params e = elu_params_elu(ELU_F16, 0.5);
    assert_true(e.dtype == ELU_F16 && e.alpha == 0.5 && e.scale == 1 && e.input_scale == 1);
    const elu_params s = elu_params_selu(ELU_F32);
    assert_true(fabs(s.alpha - 1.6732632423543772) < 1e-15);
    assert_true(fabs(s.scale - 1.0507009873554805) < 1e-15);
    const elu_params c = elu_params_celu(ELU_F64, 2.0);
    assert_true(c.scale == 1 && c.input_scale == 0.5 && c.alpha == 2.0);
}

static elu_options default_options(void)
{
    elu_options o;
    elu_options_default(&o);
    return o;
}

static void test_create_and_destroy(void **state)
{
    (void)state;
    elu_options o = default_options();
    assert_int_equal(o.backend, ELU_BACKEND_AUTO);
    assert_null(o.cache_dir);
    assert_int_equal(elu_ctx_create(NULL, &o), ELU_ERR_INVALID_ARG);
    struct {
        const char *name;
        elu_options options;
    } bad[] = {{"backend 9", default_options()}, {"device -1", default_options()},
               {"cpu_threads -2", default_options()}, {"reserved[3] set", default_options()},
               {"cpu_parallel_user alone", default_options()}};
    bad[0].options.backend = (elu_backend)9;
    bad[1].options.device = -1;
    bad[2].options.cpu_threads = -2;
    bad[3].options.reserved[3] = 1;
    bad[4].options.cpu_parallel_user = &o;
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        elu_ctx *ctx = (elu_ctx *)0x1;
        check_call(bad[i].name, elu_ctx_create(&ctx, &bad[i].options), NULL,
                   ELU_ERR_INVALID_ARG, NULL);
        if (ctx)
            fail_msg("%s: a context was returned", bad[i].name);
    }
    elu_ctx_destroy(NULL); /* a no-op */
    assert_string_equal(elu_ctx_last_error(NULL), "NULL context");
    elu_options_default(NULL);
}

/* elu_options.cpu_parallel: an application's pool, here one that runs the
 * parts on the calling thread, last first, and counts what it was given. */
struct counted_pool {
    int jobs, parts;
};

static void run_backwards(void *user, void (*part)(void *arg, int index), void *arg, int parts)
{
    struct counted_pool *pool = user;
    pool->jobs++;
    pool->parts += parts;
    for (int i = parts - 1; i >= 0; i--)
        part(arg, i);
}

static void test_cpu_parallel_runs_the_parts(void **state)
{
    (void)state;
    enum { N = 4 * 32768 + 5, THREADS = 4 }; /* src/cpu.c: 32768 elements a part at least */
    struct counted_pool pool = {0, 0};
    elu_options o = default_options();
    o.backend = ELU_BACKEND_CPU;
    o.flags = ELU_NO_DISK_CACHE;
    o.cpu_threads = THREADS;
    o.cpu_parallel = run_backwards;
    o.cpu_parallel_user = &pool;
    elu_ctx *theirs = NULL;
    assert_int_equal(elu_ctx_create(&theirs, &o), ELU_OK);
    elu_ctx *ours = tu_ctx(.backend = ELU_BACKEND_CPU, .threads = THREADS,
                           .flags = ELU_NO_DISK_CACHE);
    float *x = malloc(N * sizeof *x), *a = malloc(N * sizeof *a), *b = malloc(N * sizeof *b);
    assert_non_null(x && a && b);
    for (int i = 0; i < N; i++)
        x[i] = (float)((i * 7919) % 2001 - 1000) / 97.0f;
    memset(a, 0xA5, N * sizeof *a);
    memset(b, 0x5A, N * sizeof *b);
    const elu_params p = elu_params_selu(ELU_F32);
    assert_int_equal(elu_run(theirs, &p, x, a, N, NULL), ELU_OK);
    assert_int_equal(elu_run(ours, &p, x, b, N, NULL), ELU_OK);
    assert_memory_equal(a, b, N * sizeof *a);
    assert_int_equal(pool.jobs, 1);
    assert_int_equal(pool.parts, THREADS);
    assert_int_equal(elu_run(theirs, &p, x, a, 100, NULL), ELU_OK); /* one part: not handed */
    assert_int_equal(pool.jobs, 1);
    const pid_t child = fork(); /* where the application's pool may not be: not handed */
    if (child == 0) {
        memset(a, 0, N * sizeof *a);
        const bool ok = elu_run(theirs, &p, x, a, N, NULL) == ELU_OK && pool.jobs == 1 &&
                        memcmp(a, b, N * sizeof *a) == 0;
        free(x); /* nothing left for valgrind to count as lost */
        free(a);
        free(b);
        elu_ctx_destroy(ours);
        elu_ctx_destroy(theirs);
        _exit(ok ? 0 : 1);
    }
    int status = -1;
    assert_int_equal(waitpid(child, &status, 0), child);
    assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    elu_ctx_info info;
    assert_int_equal(elu_ctx_get_info(theirs, &info), ELU_OK);
    assert_int_equal(info.cpu_threads, THREADS);
    free(x);
    free(a);
    free(b);
    elu_ctx_destroy(ours);
    elu_ctx_destroy(theirs);
}

/* ELU_PREWARM's list is checked whatever the backend; a CPU context has
 * nothing to prepare and starts no thread. */
static void test_prewarm_options(void **state)
{
    (void)state;
    elu_ctx *ctx = NULL;
    elu_options o;
    elu_options_default(&o);
    o.backend = ELU_BACKEND_CPU;
    o.flags = ELU_PREWARM;
    o.prewarm_count = 1; /* and no list */
    assert_int_equal(elu_ctx_create(&ctx, &o), ELU_ERR_INVALID_ARG);
    assert_null(ctx);
    const elu_params bad[] = {elu_params_selu(ELU_F32), elu_params_elu((elu_dtype)7, 1.0)};
    o.prewarm = bad;
    o.prewarm_count = 2;
    assert_int_equal(elu_ctx_create(&ctx, &o), ELU_ERR_INVALID_ARG);
    assert_null(ctx);
    o.prewarm_count = 1;
    assert_int_equal(elu_ctx_create(&ctx, &o), ELU_OK);
    elu_ctx_stats s;
    elu_ctx_get_stats(ctx, &s);
    assert_int_equal(s.compiles, 0);
    elu_ctx_destroy(ctx);
    o.backend = ELU_BACKEND_AUTO; /* no driver here: the CPU, and no thread */
    assert_int_equal(elu_ctx_create(&ctx, &o), ELU_OK);
    elu_ctx_destroy(ctx);
    /* A count of SIZE_MAX (n - 1 for an empty list) is refused, not sized. */
    o.prewarm_count = SIZE_MAX;
    assert_int_equal(elu_ctx_create(&ctx, &o), ELU_ERR_INVALID_ARG);
    assert_null(ctx);
    o.prewarm_count = 4097;
    assert_int_equal(elu_ctx_create(&ctx, &o), ELU_ERR_INVALID_ARG);
}

/* The same options are valid or not whatever the environment: a bad
 * prewarm list without ELU_PREWARM, unknown flags, too many threads. */
static void test_options_checked_alike(void **state)
{
    (void)state;
    elu_ctx *ctx = NULL;
    elu_options o;
    elu_options_default(&o);
    o.backend = ELU_BACKEND_CPU;
    const elu_params bad[] = {elu_params_elu(ELU_F32, NAN)};
    o.prewarm = bad;
    o.prewarm_count = 1;
    for (int with_env = 0; with_env < 2; with_env++) {
        if (with_env)
            setenv("ELU_PREWARM", "1", 1);
        assert_int_equal(elu_ctx_create(&ctx, &o), ELU_ERR_INVALID_ARG);
        assert_null(ctx);
    }
    unsetenv("ELU_PREWARM");
    elu_options_default(&o);
    o.backend = ELU_BACKEND_CPU;
    o.flags = 1u << 20;
    assert_int_equal(elu_ctx_create(&ctx, &o), ELU_ERR_INVALID_ARG);
    o.flags = ELU_NO_DISK_CACHE | ELU_PREWARM | ELU_AUTOTUNE | ELU_NO_PDL;
    assert_int_equal(elu_ctx_create(&ctx, &o), ELU_OK);
    elu_ctx_destroy(ctx);
    o.flags = ELU_NO_DISK_CACHE;
    o.cpu_threads = INT_MAX;
    assert_int_equal(elu_ctx_create(&ctx, &o), ELU_ERR_INVALID_ARG);
    o.cpu_threads = 1025;
    assert_int_equal(elu_ctx_create(&ctx, &o), ELU_ERR_INVALID_ARG);
    o.cpu_threads = 3;
    assert_int_equal(elu_ctx_create(&ctx, &o), ELU_OK);
    elu_ctx_info info;
    elu_ctx_get_info(ctx, &info);
    assert_int_equal(info.cpu_threads, 3);
    elu_ctx_destroy(ctx);
}

static void test_auto_falls_back_and_says_why(void **state)
{
    (void)state;
    elu_ctx *ctx = NULL;
    assert_int_equal(elu_ctx_create(&ctx, NULL), ELU_OK);
    elu_ctx_info info;
    assert_int_equal(elu_ctx_get_info(ctx, &info), ELU_OK);
    assert_int_equal(info.backend, ELU_BACKEND_CPU);
    assert_int_equal(info.device, -1);
    assert_true(info.cpu_threads >= 1);
    assert_non_null(strstr(elu_ctx_last_error(ctx), "CUDA driver unavailable"));
    assert_int_equal(elu_ctx_get_info(ctx, NULL), ELU_ERR_INVALID_ARG);
    assert_int_equal(elu_ctx_get_info(NULL, &info), ELU_ERR_INVALID_ARG);
    elu_ctx_destroy(ctx);
}

static void test_explicit_cuda_is_an_error(void **state)
{
    (void)state;
    elu_options o;
    elu_options_default(&o);
    o.backend = ELU_BACKEND_CUDA;
    elu_ctx *ctx = (elu_ctx *)0x1;
    assert_int_equal(elu_ctx_create(&ctx, &o), ELU_ERR_NO_DEVICE);
    assert_null(ctx);
}

/* One elu_run call: its arguments, what it must return, and a word its
 * message must hold (NULL: any). */
struct run_case {
    const char *name;
    elu_ctx *ctx;
    const elu_params *p;
    const void *x;
    void *y;
    size_t n;
    elu_status want;
    const char *said;
};

/* Constants elu_run refuses, with any buffers, and a word its message
 * must hold (NULL: any). */
struct params_case {
    const char *name;
    elu_params p;
    const char *said;
};

static void test_run_validation(void **state)
{
    (void)state;
    elu_ctx *ctx = tu_ctx(.backend = ELU_BACKEND_CPU, .flags = ELU_NO_DISK_CACHE);
    const elu_params p = elu_params_elu(ELU_F32, 1.0);
    float buf[16] = {0};
    void *top = (void *)(UINTPTR_MAX - 15);
    const struct run_case calls[] = {
        {"NULL context", NULL, &p, buf, buf, 4, ELU_ERR_INVALID_ARG, NULL},
        {"NULL params", ctx, NULL, buf, buf, 4, ELU_ERR_INVALID_ARG, NULL},
        {"NULL x", ctx, &p, NULL, buf, 4, ELU_ERR_INVALID_ARG, NULL},
        {"NULL y", ctx, &p, buf, NULL, 4, ELU_ERR_INVALID_ARG, NULL},
        {"NULL x and y, n 0", ctx, &p, NULL, NULL, 0, ELU_OK, NULL},
        {"y overlapping x from above", ctx, &p, buf, buf + 1, 4, ELU_ERR_INVALID_ARG,
         "overlap"},
        {"y overlapping x from below", ctx, &p, buf + 3, buf, 4, ELU_ERR_INVALID_ARG, NULL},
        {"x misaligned", ctx, &p, (char *)buf + 1, buf + 8, 4, ELU_ERR_INVALID_ARG, "aligned"},
        {"y past the end of the address space", ctx, &p, buf, top, 8, ELU_ERR_INVALID_ARG,
         "address space"},
        {"n * 4 overflowing", ctx, &p, buf, buf, SIZE_MAX / 4, ELU_ERR_INVALID_ARG, NULL},
        {"adjacent", ctx, &p, buf, buf + 4, 4, ELU_OK, NULL},
        {"in place", ctx, &p, buf, buf, 4, ELU_OK, NULL},
        {"n beyond memory", ctx, &p, buf, buf + 8, SIZE_MAX / 2, ELU_ERR_INVALID_ARG, NULL},
    };
    for (size_t i = 0; i < sizeof calls / sizeof *calls; i++) {
        const struct run_case *c = &calls[i];
        check_call(c->name, elu_run(c->ctx, c->p, c->x, c->y, c->n, NULL), c->ctx, c->want,
                   c->said);
    }
    /* {dtype, alpha, scale, input_scale} */
    const struct params_case refused[] = {
        {"dtype 4", {(elu_dtype)4, 1, 1, 1}, "dtype"},
        {"alpha NaN", {ELU_F32, NAN, 1, 1}, NULL},
        {"alpha inf", {ELU_F32, INFINITY, 1, 1}, NULL},
        {"alpha -inf", {ELU_F32, -INFINITY, 1, 1}, NULL},
        {"scale NaN", {ELU_F64, 1, NAN, 1}, NULL},
        {"scale inf", {ELU_F64, 1, INFINITY, 1}, NULL},
        {"scale -inf", {ELU_F64, 1, -INFINITY, 1}, NULL},
        {"input_scale NaN", {ELU_F16, 1, 1, NAN}, NULL},
        {"input_scale inf", {ELU_F16, 1, 1, INFINITY}, NULL},
        {"input_scale -inf", {ELU_F16, 1, 1, -INFINITY}, NULL},
        {"CELU alpha 0 (input_scale 1/0)", elu_params_celu(ELU_F32, 0.0), NULL},
        {"alpha finite, but not as a float", {ELU_F32, 1e300, 1, 1}, NULL},
        {"alpha * scale overflowing a float", {ELU_F32, 3e38, 3e38, 1}, NULL},
    };
    for (size_t i = 0; i < sizeof refused / sizeof *refused; i++)
        check_call(refused[i].name, elu_run(ctx, &refused[i].p, buf, buf, 4, NULL), ctx,
                   ELU_ERR_INVALID_ARG, refused[i].said);
    elu_ctx_destroy(ctx);
}

/* One elu_run_backward call, as struct run_case. */
struct backward_case {
    const char *name;
    elu_ctx *ctx;
    elu_params p;
    const void *g, *s;
    bool from_output;
    void *dx;
    elu_status want;
    const char *said;
};

static void test_backward_validation(void **state)
{
    (void)state;
    elu_ctx *ctx = tu_ctx(.backend = ELU_BACKEND_CPU, .flags = ELU_NO_DISK_CACHE);
    const elu_params negative = elu_params_elu(ELU_F64, -0.5), p = elu_params_elu(ELU_F64, 1.0);
    double g[8] = {1, 1, 1, 1}, s[8] = {-1, 1, -2, 2}, dx[8];
    const struct backward_case calls[] = {
        {"from the output, alpha < 0", ctx, negative, g, s, true, dx, ELU_ERR_INVALID_ARG,
         "alpha >= 0"},
        {"from the input, alpha < 0", ctx, negative, g, s, false, dx, ELU_OK, NULL},
        {"NULL grad_y", ctx, p, NULL, s, false, dx, ELU_ERR_INVALID_ARG, NULL},
        {"NULL saved", ctx, p, g, NULL, false, dx, ELU_ERR_INVALID_ARG, NULL},
        {"NULL dx", ctx, p, g, s, false, NULL, ELU_ERR_INVALID_ARG, NULL},
        {"dx overlapping grad_y", ctx, p, g, s, false, g + 1, ELU_ERR_INVALID_ARG, NULL},
        {"dx overlapping saved", ctx, p, g, s, false, s + 2, ELU_ERR_INVALID_ARG, NULL},
        {"in place over grad_y", ctx, p, g, s, false, g, ELU_OK, NULL},
        {"in place over the saved output", ctx, p, g, s, true, s, ELU_OK, NULL},
        {"inputs overlapping each other", ctx, p, g, g + 1, false, dx, ELU_OK, NULL},
        {"NULL context", NULL, p, g, s, false, dx, ELU_ERR_INVALID_ARG, NULL},
    };
    for (size_t i = 0; i < sizeof calls / sizeof *calls; i++) {
        const struct backward_case *c = &calls[i];
        check_call(c->name,
                   elu_run_backward(c->ctx, &c->p, c->g, c->s, c->from_output, c->dx, 4, NULL),
                   c->ctx, c->want, c->said);
    }
    elu_ctx_destroy(ctx);
}

static void test_prepare_and_precompile_without_nvrtc(void **state)
{
    (void)state;
    elu_ctx *ctx = tu_ctx(.backend = ELU_BACKEND_CPU, .flags = ELU_NO_DISK_CACHE);
    elu_params p = elu_params_elu(ELU_F32, 1.0);
    assert_int_equal(elu_prepare(ctx, &p), ELU_OK); /* nothing to do on a CPU */
    assert_int_equal(elu_prepare(NULL, &p), ELU_ERR_INVALID_ARG);
    assert_int_equal(elu_precompile(ctx, &p, 5), ELU_ERR_INVALID_ARG);
    /* This context has no disk cache: nothing to precompile into. */
    assert_int_equal(elu_precompile(ctx, &p, 90), ELU_ERR_IO);
    elu_ctx_destroy(ctx);

    char dir[] = "/tmp/elu-api-XXXXXX";
    assert_non_null(mkdtemp(dir));
    ctx = tu_ctx(.backend = ELU_BACKEND_CPU, .cache_dir = dir);
    check_call("elu_precompile", elu_precompile(ctx, &p, 90), ctx, ELU_ERR_UNSUPPORTED,
               "NVRTC unavailable");
    elu_ctx_info info;
    elu_ctx_get_info(ctx, &info);
    assert_int_equal(info.nvrtc_version, 0);
    assert_true(info.disk_cache);
    elu_ctx_destroy(ctx);
    rmdir(dir);
}

static void test_stats_count_cpu_runs(void **state)
{
    (void)state;
    elu_ctx *ctx = tu_ctx(.backend = ELU_BACKEND_CPU, .flags = ELU_NO_DISK_CACHE);
    elu_params p = elu_params_elu(ELU_BF16, 1.0);
    uint16_t x[3] = {0x3f80, 0xbf80, 0x8000}, y[3];
    assert_int_equal(elu_run(ctx, &p, x, y, 3, NULL), ELU_OK);
    assert_int_equal(elu_run_backward(ctx, &p, x, x, false, y, 3, NULL), ELU_OK);
    elu_ctx_stats s;
    assert_int_equal(elu_ctx_get_stats(ctx, &s), ELU_OK);
    assert_int_equal(s.cpu_runs, 2);
    assert_int_equal(s.gpu_launches + s.compiles + s.disk_hits, 0);
    assert_int_equal(elu_ctx_get_stats(NULL, &s), ELU_ERR_INVALID_ARG);
    assert_int_equal(elu_ctx_get_stats(ctx, NULL), ELU_ERR_INVALID_ARG);
    elu_ctx_destroy(ctx);
}

static void test_cpu_isa_in_info(void **state)
{
    (void)state;
    elu_ctx *ctx = tu_ctx(.backend = ELU_BACKEND_CPU, .flags = ELU_NO_DISK_CACHE);
    elu_ctx_info info;
    memset(&info, 0xA5, sizeof info);
    assert_int_equal(elu_ctx_get_info(ctx, &info), ELU_OK);
    assert_true(strcmp(info.cpu_isa, "avx512") == 0 || strcmp(info.cpu_isa, "avx2") == 0 ||
                strcmp(info.cpu_isa, "baseline") == 0);
    for (size_t i = 0; i < sizeof info.reserved / sizeof *info.reserved; i++)
        assert_int_equal(info.reserved[i], 0);
    elu_ctx_destroy(ctx);
}

/* Invalid values are ignored and said, by every context created. */
static void test_invalid_environment_reported(void **state)
{
    (void)state;
    const char *const bad[][2] = {{"ELU_CACHE_LOCK_TIMEOUT_MS", "-5"},
                                  {"ELU_CACHE_MAX_BYTES", "99999999999999999999"},
                                  {"ELU_NO_PDL", "maybe"}};
    for (int i = 0; i < 3; i++)
        setenv(bad[i][0], bad[i][1], 1);
    for (int round = 0; round < 2; round++) {
        elu_ctx *ctx = tu_ctx(.backend = ELU_BACKEND_CPU, .flags = ELU_NO_DISK_CACHE);
        for (int i = 0; i < 3; i++)
            if (!strstr(elu_ctx_last_error(ctx), bad[i][0]))
                fail_msg("%s not in \"%s\"", bad[i][0], elu_ctx_last_error(ctx));
        elu_ctx_destroy(ctx);
    }
    for (int i = 0; i < 3; i++)
        unsetenv(bad[i][0]);
}

/* elu_precompile fails with ELU_ERR_IO, saying why the cache is off. */
static void check_precompile_says(elu_ctx *ctx, const char *why)
{
    const elu_params p = elu_params_elu(ELU_F32, 1.0);
    check_call("elu_precompile", elu_precompile(ctx, &p, 90), ctx, ELU_ERR_IO, why);
}

/* ELU_CACHE_DISABLE is a flag like every other. */
static void test_cache_disable_spellings(void **state)
{
    (void)state;
    char dir[] = "/tmp/elu-api-XXXXXX";
    assert_non_null(mkdtemp(dir));
    const char *const values[] = {"false", "0", "off", "No", "", "1", "yes", "TRUE", "on"};
    for (int i = 0; i < 9; i++) {
        setenv("ELU_CACHE_DISABLE", values[i], 1);
        elu_ctx *ctx = tu_ctx(.backend = ELU_BACKEND_CPU, .cache_dir = dir);
        elu_ctx_info info;
        elu_ctx_get_info(ctx, &info);
        if (info.disk_cache != (i < 5))
            fail_msg("ELU_CACHE_DISABLE=\"%s\": disk cache %d", values[i], info.disk_cache);
        if (!info.disk_cache)
            check_precompile_says(ctx, "ELU_CACHE_DISABLE");
        elu_ctx_destroy(ctx);
    }
    unsetenv("ELU_CACHE_DISABLE");
    elu_ctx *ctx = tu_ctx(.backend = ELU_BACKEND_CPU, .flags = ELU_NO_DISK_CACHE);
    check_precompile_says(ctx, "ELU_NO_DISK_CACHE");
    elu_ctx_destroy(ctx);
    rmdir(dir);
}

/* An AUTO context on the CPU with a refused cache directory says both. */
static void test_auto_keeps_every_reason(void **state)
{
    (void)state;
    char dir[] = "/tmp/elu-api-XXXXXX";
    assert_non_null(mkdtemp(dir));
    chmod(dir, 0777);
    elu_ctx *ctx = tu_ctx(.backend = ELU_BACKEND_AUTO, .cache_dir = dir);
    const char *why = elu_ctx_last_error(ctx);
    if (!strstr(why, "writable by anyone") || !strstr(why, "using the CPU: CUDA driver"))
        fail_msg("a reason is missing from \"%s\"", why);
    check_precompile_says(ctx, "writable by anyone");
    elu_ctx_destroy(ctx);
    rmdir(dir);
}

/* Under ELU_DEBUG, each new context says what it is and falls back on. */
static void test_debug_describes_each_context(void **state)
{
    (void)state;
    setenv("ELU_DEBUG", "on", 1);
    setenv("ELU_CACHE_MAX_BYTES", "-1", 1);
    char path[] = "/tmp/elu-api-stderr-XXXXXX";
    const int fd = mkstemp(path), saved = dup(2);
    assert_true(fd >= 0 && saved >= 0);
    fflush(stderr);
    dup2(fd, 2);
    elu_ctx *ctx = tu_ctx(.backend = ELU_BACKEND_CPU, .flags = ELU_NO_DISK_CACHE);
    fflush(stderr);
    dup2(saved, 2);
    close(saved);
    char printed[4096] = "", expected[64];
    assert_true(pread(fd, printed, sizeof printed - 1, 0) > 0);
    close(fd);
    unlink(path);
    elu_ctx_info info;
    elu_ctx_get_info(ctx, &info);
    snprintf(expected, sizeof expected, "CPU kernels %s", info.cpu_isa);
    if (!strstr(printed, expected) || !strstr(printed, "ELU_CACHE_MAX_BYTES=\"-1\""))
        fail_msg("ELU_DEBUG printed \"%s\"", printed);
    elu_ctx_destroy(ctx);
    unsetenv("ELU_DEBUG");
    unsetenv("ELU_CACHE_MAX_BYTES");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_version_and_status),
        cmocka_unit_test(test_params_helpers),
        cmocka_unit_test(test_create_and_destroy),
        cmocka_unit_test(test_prewarm_options),
        cmocka_unit_test(test_options_checked_alike),
        cmocka_unit_test(test_auto_falls_back_and_says_why),
        cmocka_unit_test(test_explicit_cuda_is_an_error),
        cmocka_unit_test(test_run_validation),
        cmocka_unit_test(test_backward_validation),
        cmocka_unit_test(test_prepare_and_precompile_without_nvrtc),
        cmocka_unit_test(test_stats_count_cpu_runs),
        cmocka_unit_test(test_cpu_parallel_runs_the_parts),
        cmocka_unit_test(test_cpu_isa_in_info),
        cmocka_unit_test(test_invalid_environment_reported),
        cmocka_unit_test(test_cache_disable_spellings),
        cmocka_unit_test(test_auto_keeps_every_reason),
        cmocka_unit_test(test_debug_describes_each_context),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
