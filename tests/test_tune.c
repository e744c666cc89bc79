/* Launch shapes without a GPU: the size classes, the heuristic's rule, and
 * ELU_AUTOTUNE's record in the disk cache (its measuring runs in
 * test_gpu's test_autotune). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

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
 * operand, 2 up to 8 MiB, then all the kernel takes. */
static void test_heuristic(void **state)
{
    (void)state;
    for (int d = 0; d < 4; d++) {
        const elu_dtype t = tu_dtypes[d];
        struct elu_tuning h;
        elu_tune_heuristic(132 * 2048, t, &h);
        for (int k = 0; k < 3; k++)
            for (unsigned c = 0; c < ELU_SIZE_CLASSES; c++) {
                const struct elu_shape s = h.shape[k][c];
                const unsigned most = elu_max_packs(t, (enum elu_kernel)k);
                const unsigned want = c <= 3 ? 1 : c == 4 ? 2 : 4;
                assert_int_equal(s.threads, 128);
                assert_int_equal(s.packs, want < most ? want : most);
            }
    }
    assert_int_equal(elu_max_packs(ELU_F32, ELU_KERNEL_FORWARD), 4);
    assert_int_equal(elu_max_packs(ELU_F16, ELU_KERNEL_FORWARD), 1);
    assert_int_equal(elu_max_packs(ELU_F64, ELU_KERNEL_BACKWARD_OUTPUT), 1);
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
    elu_tune_heuristic(1000, ELU_F32, &t);
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

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_size_classes),
        cmocka_unit_test(test_heuristic),
        cmocka_unit_test(test_tuning_entry),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
