/* The strided layouts' overlap decisions (src/layout.c) against brute
 * force, on random small layouts: strides of either sign, zero, equal, and
 * bases that put elements at any byte offset from each other. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "layout.h"
#include "testutil.h"

#include <stdlib.h>

enum { TRIALS = 20000, MAX_ELEMENTS = 256 };

/* The byte offsets of buffer k's elements, in index order; their count. */
static size_t offsets(const struct elu_layout *l, int k, size_t size, int64_t *out)
{
    size_t n = 1;
    for (int d = 0; d < l->ndim; d++)
        n *= (size_t)l->shape[d];
    for (size_t i = 0; i < n; i++) {
        size_t rest = i;
        int64_t at = 0;
        for (int d = (int)l->ndim - 1; d >= 0; d--) {
            at += (int64_t)(rest % (size_t)l->shape[d]) * l->stride[k][d];
            rest /= (size_t)l->shape[d];
        }
        out[i] = at * (int64_t)size;
    }
    return n;
}

static void random_layout(struct elu_layout *l)
{
    size_t n = 1;
    l->ndim = 1 + (int64_t)(tu_rand() % 4);
    for (int d = 0; d < l->ndim; d++) {
        l->shape[d] = 1 + (int64_t)(tu_rand() % 6);
        if (n * (size_t)l->shape[d] > MAX_ELEMENTS)
            l->shape[d] = 1;
        n *= (size_t)l->shape[d];
        for (int k = 0; k < 3; k++) /* small strides, often shared */
            l->stride[k][d] = (int64_t)(tu_rand() % 4 == 0 ? tu_rand() % 40 : tu_rand() % 7) -
                              (int64_t)(tu_rand() % 2 ? 0 : 6);
    }
}

static void test_self_overlap_matches_brute_force(void **state)
{
    (void)state;
    int64_t at[MAX_ELEMENTS];
    int found[2] = {0, 0};
    for (int trial = 0; trial < TRIALS; trial++) {
        struct elu_layout l;
        random_layout(&l);
        const size_t n = offsets(&l, 2, 4, at);
        bool repeats = false;
        for (size_t i = 0; i < n && !repeats; i++)
            for (size_t j = i + 1; j < n && !repeats; j++)
                repeats = at[i] == at[j];
        const enum elu_overlap got = elu_layout_self_overlap(&l, 2);
        assert_int_equal(got, repeats ? ELU_OVERLAP_SOME : ELU_OVERLAP_NONE);
        found[repeats]++;
    }
    assert_true(found[0] > TRIALS / 10 && found[1] > TRIALS / 10);
}

static void test_overlap_matches_brute_force(void **state)
{
    (void)state;
    static const size_t sizes[3] = {2, 4, 8};
    int64_t out_at[MAX_ELEMENTS], in_at[MAX_ELEMENTS];
    int found[2] = {0, 0};
    char *arena = malloc(1 << 16);
    for (int trial = 0; trial < TRIALS; trial++) {
        struct elu_layout l;
        random_layout(&l);
        const size_t size = sizes[tu_rand() % 3];
        if (tu_rand() % 4 == 0) /* the same strides: slices of one array */
            for (int d = 0; d < l.ndim; d++)
                l.stride[0][d] = l.stride[2][d];
        const char *out = arena + 32768, *in = out + (int64_t)(tu_rand() % 81) - 40;
        const size_t n = offsets(&l, 2, size, out_at);
        offsets(&l, 0, size, in_at);
        bool same_view = in == out;
        for (int d = 0; d < l.ndim; d++)
            same_view = same_view && (l.shape[d] == 1 || l.stride[0][d] == l.stride[2][d]);
        bool shared = false;
        for (size_t i = 0; i < n && !shared && !same_view; i++)
            for (size_t j = 0; j < n && !shared; j++)
                shared = llabs((out - in) + out_at[i] - in_at[j]) < (int64_t)size;
        const enum elu_overlap got = elu_layout_overlap(&l, 2, out, 0, in, size);
        assert_int_equal(got, shared ? ELU_OVERLAP_SOME : ELU_OVERLAP_NONE);
        found[shared]++;
    }
    free(arena);
    assert_true(found[0] > TRIALS / 10 && found[1] > TRIALS / 10);
}

/* Spans: exact for what fits, refused for what overflows. */
static void test_spans(void **state)
{
    (void)state;
    struct elu_layout l = {.ndim = 2, .shape = {3, 5}, .stride = {{-10, 2}}};
    int64_t lo, hi;
    assert_true(elu_layout_span(&l, 0, 4, &lo, &hi));
    assert_int_equal(lo, -80);
    assert_int_equal(hi, 8 * 4 + 4);
    l.stride[0][0] = INT64_C(1) << 61;
    assert_false(elu_layout_span(&l, 0, 4, &lo, &hi));
    l.stride[0][0] = INT64_MIN;
    assert_false(elu_layout_span(&l, 0, 1, &lo, &hi));
    l.shape[0] = INT64_MAX;
    l.stride[0][0] = 1;
    assert_false(elu_layout_span(&l, 0, 2, &lo, &hi));
    assert_true(elu_layout_fits((void *)(uintptr_t)100, -100, 1));
    assert_false(elu_layout_fits((void *)(uintptr_t)100, -101, 1));
    assert_false(elu_layout_fits((void *)(UINTPTR_MAX - 10), 0, 12));
}

/* Layouts of many dimensions that a search must not take long over. */
static void test_hard_layouts_bounded(void **state)
{
    (void)state;
    struct elu_layout l = {.ndim = 8};
    for (int d = 0; d < 8; d++) {
        l.shape[d] = 1000;
        for (int k = 0; k < 3; k++)
            l.stride[k][d] = 1000003 + 7919 * d * (k + 1);
    }
    char *base = malloc(64);
    const enum elu_overlap self = elu_layout_self_overlap(&l, 2);
    const enum elu_overlap other = elu_layout_overlap(&l, 2, base, 0, base + 4, 4);
    assert_true(self == ELU_OVERLAP_SOME || self == ELU_OVERLAP_UNKNOWN);
    assert_true(other == ELU_OVERLAP_SOME || other == ELU_OVERLAP_UNKNOWN);
    free(base);
}

int main(void)
{
    tu_seed();
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_self_overlap_matches_brute_force),
        cmocka_unit_test(test_overlap_matches_brute_force),
        cmocka_unit_test(test_spans),
        cmocka_unit_test(test_hard_layouts_bounded),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
