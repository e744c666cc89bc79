/* Launch shapes without a GPU: the size classes, the heuristic's rule,
 * ELU_AUTOTUNE's record in the disk cache, and its measuring through a
 * stand-in driver whose timings say which shape wins (test_gpu's
 * test_autotune measures the real kernels). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "internal.h"
#include "jit.h"
#include "testutil.h"
#include "tune.h"

#include <stdlib.h>
#include <string.h>

static void test_size_classes(void **state)
{
    (void)state;
    assert_int_equal(elu_size_class(0), 0);
    assert_int_equal(elu_size_class(1), 0);
    assert_int_equal(elu_size_class((1 << 15) - 1), 0);
    assert_int_equal(elu_size_class(1 << 15), 1);
    assert_int_equal(elu_size_class(1 << 16), 1);
    assert_int_equal(elu_size_class((size_t)1 << 25), 6);
    assert_int_equal(elu_size_class((size_t)1 << 26), 6);
    assert_int_equal(elu_size_class(SIZE_MAX), ELU_SIZE_CLASSES - 1);
}

/* The H200's 132 SMs of 2048 threads: 1 pack per thread up to 2 MiB an
 * operand, then all the kernel takes. */
static void test_heuristic(void **state)
{
    (void)state;
    struct elu_tuning h;
    elu_tune_heuristic(132 * 2048, &h);
    for (int k = 0; k < 3; k++)
        for (unsigned c = 0; c < ELU_SIZE_CLASSES; c++) {
            const struct elu_shape s = h.shape[k][c];
            assert_int_equal(s.threads, 128);
            assert_int_equal(s.packs, c <= 3 ? 1 : elu_max_packs((enum elu_kernel)k));
        }
    assert_int_equal(elu_max_packs(ELU_KERNEL_FORWARD), 2);
    assert_int_equal(elu_max_packs(ELU_KERNEL_BACKWARD_OUTPUT), 1);
}

/* One record per GPU model and dtype, stored as a cache entry of its own
 * kind, read back whole. */
static void test_tuning_entry(void **state)
{
    (void)state;
    const struct elu_cache_key a = elu_jit_tuning_key("NVIDIA H200", 90, ELU_F32),
                               b = elu_jit_tuning_key("NVIDIA H200", 90, ELU_F16),
                               c = elu_jit_tuning_key("NVIDIA H100", 90, ELU_F32);
    assert_memory_not_equal(&a, &b, sizeof a);
    assert_memory_not_equal(&a, &c, sizeof a);
    char dir[512], why[1024];
    tu_tempdir(dir, sizeof dir);
    struct elu_cache cache;
    assert_true(elu_cache_open(&cache, dir, why, sizeof why));
    struct elu_tuning t;
    elu_tune_heuristic(1000, &t);
    unsigned evicted;
    assert_true(elu_cache_put(&cache, &a, ELU_BINARY_TUNING, "shapes", &t, sizeof t,
                              &evicted, why, sizeof why));
    enum elu_binary_kind kind;
    void *payload = NULL;
    size_t size = 0;
    assert_int_equal(elu_cache_get(&cache, &a, &kind, &payload, &size, why, sizeof why),
                     ELU_CACHE_HIT);
    assert_int_equal(kind, ELU_BINARY_TUNING);
    assert_int_equal(size, sizeof t);
    assert_memory_equal(payload, &t, sizeof t);
    free(payload);
    tu_rmdir(dir);
}

/* ---- a stand-in driver: launches cost 1 ms, or 0.5 ms with the shape
 * `fast`; an event's elapsed time is what was launched since the last. */

static struct elu_shape fast;
static float launched_ms;
static unsigned launches;
static bool fail_alloc;

static elu_cu_result fake_alloc(elu_cu_deviceptr *p, size_t bytes)
{
    (void)bytes;
    if (fail_alloc)
        return 2; /* CUDA_ERROR_OUT_OF_MEMORY */
    *p = 0x10000;
    return 0;
}
static elu_cu_result fake_free(elu_cu_deviceptr p) { return p ? 0 : 1; }
static elu_cu_result fake_copy(elu_cu_deviceptr d, const void *s, size_t n)
{
    (void)d, (void)s, (void)n;
    return 0;
}
static elu_cu_result fake_stream(elu_cu_stream *st, unsigned flags)
{
    (void)flags;
    *st = (elu_cu_stream)(uintptr_t)1;
    return 0;
}
static elu_cu_result fake_stream_destroy(elu_cu_stream st) { return st ? 0 : 1; }
static elu_cu_result fake_event(elu_cu_event *e, unsigned flags)
{
    (void)flags;
    *e = (elu_cu_event)(uintptr_t)1;
    return 0;
}
static elu_cu_result fake_record(elu_cu_event e, elu_cu_stream st)
{
    (void)e, (void)st;
    return 0;
}
static elu_cu_result fake_event_sync(elu_cu_event e) { return e ? 0 : 1; }
static elu_cu_result fake_elapsed(float *ms, elu_cu_event a, elu_cu_event b)
{
    (void)a, (void)b;
    *ms = launched_ms;
    launched_ms = 0;
    return 0;
}
static elu_cu_result fake_error_name(elu_cu_result r, const char **name)
{
    *name = r == 2 ? "CUDA_ERROR_OUT_OF_MEMORY" : "CUDA_ERROR_UNKNOWN";
    return 0;
}

static elu_cu_result fake_launch(void *arg, enum elu_kernel kernel, struct elu_shape shape,
                                 elu_cu_deviceptr a, elu_cu_deviceptr b, elu_cu_deviceptr out,
                                 size_t n, elu_cu_stream stream)
{
    (void)arg, (void)kernel, (void)a, (void)b, (void)out, (void)n, (void)stream;
    launches++;
    launched_ms += shape.threads == fast.threads && shape.packs == fast.packs ? 0.5f : 1.0f;
    return 0;
}

static struct elu_cuda_api fake_api(void)
{
    struct elu_cuda_api cu = {0};
    cu.GetErrorName = fake_error_name;
    cu.MemAlloc = fake_alloc;
    cu.MemFree = fake_free;
    cu.MemcpyHtoD = fake_copy;
    cu.StreamCreate = fake_stream;
    cu.StreamDestroy = fake_stream_destroy;
    cu.EventCreate = fake_event;
    cu.EventRecord = fake_record;
    cu.EventSynchronize = fake_event_sync;
    cu.EventElapsedTime = fake_elapsed;
    cu.EventDestroy = fake_event_sync;
    return cu;
}

/* The shape that measures faster wins every class but the last (which
 * keeps the rule's) where the kernel takes it (the forward; the backward
 * takes 1 pack, and its candidates tie, so the rule's stays); the next
 * context finds the record without launching anything; a failure to
 * measure keeps the rule's and says why. */
static void test_autotune_measures_stores_and_finds(void **state)
{
    (void)state;
    char dir[512];
    tu_tempdir(dir, sizeof dir);
    const struct elu_cuda_api cu = fake_api();
    const struct elu_tune_device d = {&cu, "Stand-in GPU", 90, 132 * 2048};
    struct elu_tuning rule, t, again;
    elu_tune_heuristic(d.resident_threads, &rule);
    fast = (struct elu_shape){256, 2};
    launches = 0;
    elu_ctx *ctx = tu_ctx(.backend = ELU_BACKEND_CPU, .cache_dir = dir);
    elu_tune(ctx, &d, ELU_F32, fake_launch, NULL, &t);
    elu_ctx_stats s;
    elu_ctx_get_stats(ctx, &s);
    assert_int_equal(s.autotunes, 1);
    assert_int_equal(s.disk_writes, 1);
    assert_true(launches > 0);
    for (int k = 0; k < 3; k++)
        for (unsigned c = 0; c < ELU_SIZE_CLASSES; c++) {
            const struct elu_shape want =
                k == ELU_KERNEL_FORWARD && c < ELU_SIZE_CLASSES - 1 ? fast : rule.shape[k][c];
            assert_int_equal(t.shape[k][c].threads, want.threads);
            assert_int_equal(t.shape[k][c].packs, want.packs);
        }
    elu_ctx_destroy(ctx);

    launches = 0;
    ctx = tu_ctx(.backend = ELU_BACKEND_CPU, .cache_dir = dir);
    elu_tune(ctx, &d, ELU_F32, fake_launch, NULL, &again);
    elu_ctx_get_stats(ctx, &s);
    assert_int_equal(launches, 0);
    assert_int_equal(s.autotunes, 0);
    assert_int_equal(s.disk_hits, 1);
    assert_memory_equal(&again, &t, sizeof t);
    elu_ctx_destroy(ctx);

    fail_alloc = true;
    ctx = tu_ctx(.backend = ELU_BACKEND_CPU, .cache_dir = dir);
    elu_tune(ctx, &d, ELU_F64, fake_launch, NULL, &t);
    fail_alloc = false;
    elu_tune_heuristic(d.resident_threads, &rule);
    assert_memory_equal(&t, &rule, sizeof t);
    assert_non_null(strstr(elu_ctx_last_error(ctx), "CUDA_ERROR_OUT_OF_MEMORY"));
    elu_ctx_destroy(ctx);
    tu_rmdir(dir);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_size_classes),
        cmocka_unit_test(test_heuristic),
        cmocka_unit_test(test_tuning_entry),
        cmocka_unit_test(test_autotune_measures_stores_and_finds),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
