/* The CPU path against the long double reference: every dtype, forward and
 * backward, random and special values, all 65536 inputs of the half types,
 * threads, in place. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "cpu_fast.h"
#include "cpu_isa.h"
#include "elu_forward_f32.h"
#include "elu_forward_f64.h"
#include "half_table.h"
#include "scalar.h"
#include "testutil.h"

#include <dirent.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/wait.h>
#include <unistd.h>
#if defined(__x86_64__)
#include <xmmintrin.h>
#endif

#define N 300000 /* enough to be split over threads (cpu.c: 32768 a thread) */

static elu_params param_sets[4];

static void set_params(elu_dtype t)
{
    param_sets[0] = elu_params_elu(t, 1.0);
    param_sets[1] = elu_params_elu(t, 0.3);
    param_sets[2] = elu_params_selu(t);
    param_sets[3] = elu_params_celu(t, 2.5);
}

static void report(const char *what, elu_dtype t, int set, double err, size_t at)
{
    if (err > 1.0)
        fprintf(stderr, "%s %s set %d: %.3f ulp at %zu\n", what,
                tu_dtype_names[t], set, err, at);
}

static void test_forward_all_dtypes(void **state)
{
    (void)state;
    elu_ctx *ctx = tu_ctx(.backend = ELU_BACKEND_CPU, .flags = ELU_NO_DISK_CACHE);
    for (int d = 0; d < 4; d++) {
        const elu_dtype t = tu_dtypes[d];
        const size_t bytes = N * elu_dtype_size(t);
        void *x = malloc(bytes), *y = tu_poisoned(bytes);
        tu_fill_inputs(t, x, N);
        set_params(t);
        for (int s = 0; s < 4; s++) {
            memset(y, 0xA5, bytes);
            assert_int_equal(elu_run(ctx, &param_sets[s], x, y, N, NULL), ELU_OK);
            size_t at = 0;
            const double err = tu_check_forward(&param_sets[s], x, y, N, false, &at);
            report("forward", t, s, err, at);
            assert_true(err <= 1.0);
        }
        free(x);
        free(y);
    }
    elu_ctx_destroy(ctx);
}

static void test_backward_all_dtypes(void **state)
{
    (void)state;
    elu_ctx *ctx = tu_ctx(.backend = ELU_BACKEND_CPU, .flags = ELU_NO_DISK_CACHE);
    for (int d = 0; d < 4; d++) {
        const elu_dtype t = tu_dtypes[d];
        const size_t bytes = N * elu_dtype_size(t);
        void *g = malloc(bytes), *x = malloc(bytes), *y = malloc(bytes),
             *dx = tu_poisoned(bytes);
        tu_fill_uniform(t, g, N, -4, 4);
        tu_fill_inputs(t, x, N);
        set_params(t);
        for (int s = 0; s < 4; s++) {
            const elu_params *p = &param_sets[s];
            size_t at = 0;
            memset(dx, 0xA5, bytes);
            assert_int_equal(elu_run_backward(ctx, p, g, x, false, dx, N, NULL), ELU_OK);
            /* the half types round correctly: half an ulp */
            const double tol = t == ELU_F16 || t == ELU_BF16 ? 0.5 : 1.0;
            double err = tu_check_backward(p, g, x, false, dx, N, false, &at);
            report("backward(input)", t, s, err, at);
            assert_true(err <= tol);
            assert_int_equal(elu_run(ctx, p, x, y, N, NULL), ELU_OK);
            memset(dx, 0xA5, bytes);
            assert_int_equal(elu_run_backward(ctx, p, g, y, true, dx, N, NULL), ELU_OK);
            err = tu_check_backward(p, g, y, true, dx, N, false, &at);
            report("backward(output)", t, s, err, at);
            assert_true(err <= tol);
        }
        free(g);
        free(x);
        free(y);
        free(dx);
    }
    elu_ctx_destroy(ctx);
}

/* Every f16 and bf16 input, correctly rounded: at most half an ulp. */
static void test_half_types_exhaustive(void **state)
{
    (void)state;
    elu_ctx *ctx = tu_ctx(.backend = ELU_BACKEND_CPU, .threads = 1, .flags = ELU_NO_DISK_CACHE);
    uint16_t *x = malloc(65536 * 2), *y = tu_poisoned(65536 * 2);
    for (uint32_t i = 0; i < 65536; i++)
        x[i] = (uint16_t)i;
    const elu_dtype types[] = {ELU_F16, ELU_BF16};
    for (int d = 0; d < 2; d++) {
        set_params(types[d]);
        for (int s = 0; s < 4; s++) {
            assert_int_equal(elu_run(ctx, &param_sets[s], x, y, 65536, NULL), ELU_OK);
            size_t at = 0;
            const double err = tu_check_forward(&param_sets[s], x, y, 65536, false, &at);
            if (err > 0.5)
                fprintf(stderr, "%s set %d: %.3f ulp at 0x%04zx\n",
                        tu_dtype_names[types[d]], s, err, at);
            assert_true(err <= 0.5);
        }
    }
    free(x);
    free(y);
    elu_ctx_destroy(ctx);
}

/* The forward tables, built from the f32 vector kernel where that is surely
 * right, equal the scalar kernel's results bit for bit: random constants,
 * both half types. */
static void test_forward_tables_match_scalar(void **state)
{
    (void)state;
    uint16_t *want = malloc(65536 * 2);
    for (int set = 0; set < (tu_under_valgrind() ? 2 : 24); set++) {
        const elu_dtype t = set % 2 ? ELU_BF16 : ELU_F16;
        const float alpha = (float)tu_uniform(0.05, 4), scale = (float)tu_uniform(0.5, 2);
        const struct elu_coef c = {t, alpha * scale, scale,
                                   set % 4 < 2 ? 1.0f : (float)tu_uniform(0.1, 3)};
        uint16_t *table = elu_half_forward_table(&c);
        assert_non_null(table);
        size_t differ = 0;
        for (uint32_t i = 0; i < 65536; i++) {
            const uint16_t x = (uint16_t)i;
            elu_cpu_element(&c, ELU_KERNEL_FORWARD, &x, 0, NULL, 0, want, (ptrdiff_t)i);
            differ += want[i] != table[i];
        }
        if (differ)
            fprintf(stderr, "%s neg %a pos %a nip %a: %zu differ\n", tu_dtype_names[t], c.scale_alpha,
                    c.scale, c.input_scale, differ);
        assert_int_equal(differ, 0);
        free(table);
    }
    free(want);
}

/* Constants for the half types' vector tests: ELU, SELU and CELU for
 * each type, then a test's own edges, then random ones (alpha in [0.05,
 * 4], scale in [0.5, 2], input_scale 1 for half of them). */
struct half_consts {
    elu_dtype t;
    float neg, pos, nip;
};

static struct elu_coef half_test_coef(const struct half_consts *edges, int count, int set)
{
    static const struct half_consts usual[] = {
        {ELU_F16, 1, 1, 1},
        {ELU_BF16, 1, 1, 1},
        {ELU_F16, 1.0507009873554805f * 1.6732632423543772f, 1.0507009873554805f, 1},
        {ELU_BF16, 1.0507009873554805f * 1.6732632423543772f, 1.0507009873554805f, 1},
        {ELU_F16, 0.6f, 1, 1 / 0.6f},
        {ELU_BF16, 2.5f, 1, 0.4f},
    };
    const int usuals = (int)(sizeof usual / sizeof *usual);
    if (set < usuals + count) {
        const struct half_consts *e = set < usuals ? &usual[set] : &edges[set - usuals];
        return (struct elu_coef){e->t, e->neg, e->pos, e->nip};
    }
    const float alpha = (float)tu_uniform(0.05, 4), scale = (float)tu_uniform(0.5, 2);
    return (struct elu_coef){set % 2 ? ELU_BF16 : ELU_F16, alpha * scale, scale,
                             set % 4 < 2 ? 1.0f : (float)tu_uniform(0.1, 3)};
}

/* The half types' computed forward of each instruction set equals the
 * scalar kernel's, bit for bit, on every input: random constants and the
 * edges of those it takes (input_scale at its bounds, |scale*alpha| at
 * bf16's, tiny, negative and zero constants, -scale*alpha a tie of the
 * type or a few float ulps from one). */
static void test_half_forward_matches_scalar(void **state)
{
    (void)state;
#if defined(__x86_64__)
    bool has[2];
    elu_cpu_isas_present(has);
    const struct elu_coef probe = {ELU_F16, 1, 1, 1};
    if ((!has[0] && !has[1]) || !elu_cpu_fast_half_forward_ok(&probe))
        skip(); /* the tables serve (an emulator's double FMA, say) */
    const struct half_consts edges[] = {
        {ELU_F16, 1, 1, 0x1p-60f},
        {ELU_F16, 1, 1, 0x1p126f},
        {ELU_BF16, 0x1p15f, 1, 0x1p-125f},
        {ELU_BF16, 0x1p15f, 1, 0x1p126f},
        {ELU_F16, 1e-6f, 1, 1},
        {ELU_BF16, 1e-30f, 1e-30f, 1},
        {ELU_F16, 6e4f, 3e4f, 3},
        {ELU_F16, -0.7f, -2, 1},
        {ELU_BF16, -0.7f, -2, 1},
        {ELU_F16, 0, 0, 1},
        {ELU_BF16, 0, 0, 1},
        {ELU_F16, 1 + 3 * 0x1p-11f, 1, 1},
        {ELU_BF16, 1 + 3 * 0x1p-8f, 1, 1},
        /* -scale*alpha a few float ulps from a tie: results of x << 0 too */
        {ELU_F16, 1 + 0x1p-11f + 5 * 0x1p-23f, 1, 1},
        {ELU_F16, 1.5f + 0x1p-11f - 9 * 0x1p-23f, 1, 1},
        {ELU_F16, 1 + 0x1p-11f + 0x1p-23f, 1, 1},
        {ELU_F16, 1 + 0x1p-11f - 3 * 0x1p-23f, 1, 0.37f},
        {ELU_BF16, 1 + 0x1p-8f + 7 * 0x1p-23f, 1, 1},
        {ELU_BF16, 1 + 0x1p-8f - 0x1p-23f, 1, 1},
    };
    const int count = (int)(sizeof edges / sizeof *edges);
    uint16_t *x = malloc(65536 * 2), *y = malloc(65536 * 2), *want = malloc(65536 * 2);
    for (uint32_t i = 0; i < 65536; i++)
        x[i] = (uint16_t)i;
    for (int set = 0; set < (tu_under_valgrind() ? 2 : count + 30); set++) {
        const struct elu_coef c = half_test_coef(edges, count, set);
        assert_true(elu_cpu_fast_half_forward_ok(&c));
        for (uint32_t i = 0; i < 65536; i++)
            elu_cpu_element(&c, ELU_KERNEL_FORWARD, x, (ptrdiff_t)i, NULL, 0, want, (ptrdiff_t)i);
        for (int k = 0; k < 2; k++) {
            if (!has[k])
                continue;
            memset(y, 0xA5, 65536 * 2);
            elu_cpu_isas[k]->forward_half(&c, x, y, 65536);
            size_t differ = 0, first = 0;
            for (uint32_t i = 65536; i-- > 0;)
                if (want[i] != y[i]) {
                    differ++;
                    first = i;
                }
            if (differ)
                fprintf(stderr, "%s %s neg %a pos %a nip %a: %zu differ, first x = 0x%04zx: "
                        "0x%04x, want 0x%04x\n", elu_cpu_isas[k]->name, tu_dtype_names[c.dtype],
                        c.scale_alpha, c.scale, c.input_scale, differ, first, y[first],
                        want[first]);
            assert_int_equal(differ, 0);
        }
    }
    free(x);
    free(y);
    free(want);
#else
    skip();
#endif
}

/* The half types' vector backward of each instruction set equals the
 * scalar kernel's, bit for bit, from the input and from the output: every
 * saved value of the type, each with four gradients (random ones, and short
 * ones whose products often land on ties of the type), under random
 * constants and the edges of those it takes: |input_scale*scale*alpha| at
 * 2^-70 and 2^126, input_scale tiny and huge, negative and inexact
 * products (input_scale*scale*alpha not a float). */
static void test_half_backward_matches_scalar(void **state)
{
    (void)state;
#if defined(__x86_64__)
    bool has[2];
    elu_cpu_isas_present(has);
    if (!has[0] && !has[1])
        skip();
    const struct half_consts edges[] = {
        {ELU_F16, 0x1p-40f, 1, 0x1p-30f},
        {ELU_BF16, 0x1p-40f, 1, 0x1p-30f},
        {ELU_F16, 0x1p63f, 1, 0x1p63f},
        {ELU_BF16, 0x1p63f, 1, 0x1p63f},
        {ELU_F16, 0x1p40f, 3, 0x1p-60f},
        {ELU_BF16, 1e-3f, 1, 0x1p100f},
        {ELU_F16, -0.7f, -2, 1},
        {ELU_BF16, -0.7f, -2, 1.5f},
        {ELU_F16, 1 + 3 * 0x1p-11f, 1, 1 + 0x1p-23f},
        {ELU_BF16, 1 + 3 * 0x1p-8f, 1, 1 - 0x1p-24f},
    };
    const int count = (int)(sizeof edges / sizeof *edges);
    enum { PER = 4, COUNT = 65536 * PER };
    uint16_t *g = malloc(COUNT * 2), *s = malloc(COUNT * 2), *dx = malloc(COUNT * 2), *want = malloc(COUNT * 2);
    assert_true(g && s && dx && want);
    for (int set = 0; set < (tu_under_valgrind() ? 2 : count + 22); set++) {
        const struct elu_coef c = half_test_coef(edges, count, set);
        assert_true(elu_cpu_fast_backward_ok(&c));
        for (uint32_t i = 0; i < COUNT; i++) {
            s[i] = (uint16_t)(i / PER);
            const double short_g = ldexp(1 + i % 7, (int)(i % 13) - 6);
            const double v = i % 2 ? tu_uniform(-4, 4) : i % 4 ? short_g : -short_g;
            g[i] = c.dtype == ELU_F16 ? elu_f16_from(v) : elu_bf16_from(v);
        }
        for (int from_output = 0; from_output < 2; from_output++) {
            const enum elu_kernel kernel = from_output ? ELU_KERNEL_BACKWARD_OUTPUT
                                                       : ELU_KERNEL_BACKWARD_INPUT;
            for (uint32_t i = 0; i < COUNT; i++)
                elu_cpu_element(&c, kernel, g, (ptrdiff_t)i, s, (ptrdiff_t)i, want, (ptrdiff_t)i);
            for (int k = 0; k < 2; k++) {
                if (!has[k])
                    continue;
                memset(dx, 0xA5, COUNT * 2);
                elu_cpu_isas[k]->backward_half(&c, g, s, from_output, dx, COUNT);
                size_t differ = 0, first = 0;
                for (uint32_t i = COUNT; i-- > 0;)
                    if (want[i] != dx[i]) {
                        differ++;
                        first = i;
                    }
                if (differ)
                    fprintf(stderr, "%s %s from the %s, neg %a pos %a nip %a: %zu differ, "
                            "first g 0x%04x s 0x%04x: 0x%04x, want 0x%04x\n",
                            elu_cpu_isas[k]->name, tu_dtype_names[c.dtype],
                            from_output ? "output" : "input", c.scale_alpha, c.scale,
                            c.input_scale, differ, g[first], s[first], dx[first], want[first]);
                assert_int_equal(differ, 0);
            }
        }
    }
    free(g);
    free(s);
    free(dx);
    free(want);
#else
    skip();
#endif
}

/* With flush-to-zero and denormals-are-zero set by the caller (as
 * torch.set_flush_denormal sets them) before it makes the context, whose
 * workers inherit them: the same results as without, subnormal inputs and
 * outputs included, every dtype, forward and backward from the input. */
static void test_flush_to_zero_set_by_the_caller(void **state)
{
    (void)state;
#if defined(__x86_64__)
    enum { COUNT = 70000 }; /* split over two threads */
    const elu_dtype types[] = {ELU_F32, ELU_F64, ELU_F16, ELU_BF16};
    unsigned char *x[4], *g[4], *want[4][2], *y = malloc(COUNT * 8);
    for (int d = 0; d < 4; d++) { /* subnormals of the type, then random values */
        const size_t size = elu_dtype_size(types[d]);
        x[d] = malloc(COUNT * size);
        g[d] = malloc(COUNT * size);
        for (size_t i = 0; i < COUNT / 2; i++) {
            const uint64_t bits = (i * 2654435761u) % 1000 + 1, sign = (uint64_t)(i % 2)
                                                                         << (8 * size - 1);
            memcpy(x[d] + i * size, &(uint64_t){bits | sign}, size);
            memcpy(g[d] + i * size, &(uint64_t){bits | sign}, size);
        }
        tu_fill_inputs(types[d], x[d] + COUNT / 2 * size, COUNT - COUNT / 2);
        tu_fill_inputs(types[d], g[d] + COUNT / 2 * size, COUNT - COUNT / 2);
    }
    const unsigned csr = _mm_getcsr();
    for (int flush = 0; flush < 2; flush++) {
        _mm_setcsr(flush ? csr | 0x8040u : csr);
        elu_ctx *ctx = tu_ctx(.backend = ELU_BACKEND_CPU, .threads = 2,
                              .flags = ELU_NO_DISK_CACHE);
        for (int d = 0; d < 4; d++) {
            const size_t size = elu_dtype_size(types[d]);
            const elu_params p = elu_params_selu(types[d]);
            for (int k = 0; k < 2; k++) {
                memset(y, 0xA5, COUNT * size);
                const elu_status st =
                    k ? elu_run_backward(ctx, &p, g[d], x[d], false, y, COUNT, NULL)
                      : elu_run(ctx, &p, x[d], y, COUNT, NULL);
                if (!flush) {
                    want[d][k] = malloc(COUNT * size);
                    memcpy(want[d][k], y, COUNT * size);
                    assert_int_equal(st, ELU_OK);
                    continue;
                }
                size_t differ = 0;
                for (size_t i = 0; i < COUNT; i++)
                    differ += memcmp(y + i * size, want[d][k] + i * size, size) != 0;
                _mm_setcsr(csr);
                if (differ)
                    fprintf(stderr, "%s %s: %zu differ with flush-to-zero\n",
                            tu_dtype_names[types[d]], k ? "backward" : "forward", differ);
                assert_int_equal(st, ELU_OK);
                assert_int_equal(differ, 0);
                _mm_setcsr(csr | 0x8040u);
                free(want[d][k]);
            }
        }
        elu_ctx_destroy(ctx);
    }
    _mm_setcsr(csr);
    for (int d = 0; d < 4; d++) {
        free(x[d]);
        free(g[d]);
    }
    free(y);
#else
    skip();
#endif
}

/* More sets of constants than a context keeps tables for, forward and
 * backward: the vector kernels compute the forward; the backward from the
 * input of the sets past the twelfth builds a table for the call (65536
 * elements) or takes the scalar kernel (fewer, under valgrind); the same
 * results. */
static void test_half_tables_beyond_capacity(void **state)
{
    (void)state;
    elu_ctx *ctx = tu_ctx(.backend = ELU_BACKEND_CPU, .threads = 2, .flags = ELU_NO_DISK_CACHE);
    uint16_t *x = malloc(65536 * 2), *y = tu_poisoned(65536 * 2);
    for (uint32_t i = 0; i < 65536; i++)
        x[i] = (uint16_t)(i * 40503u); /* every input, shuffled */
    for (int round = 0; round < (tu_under_valgrind() ? 1 : 2); round++)
        for (int s = 0; s < 16; s++) {
            const elu_dtype t = s % 2 ? ELU_BF16 : ELU_F16;
            const elu_params p = elu_params_elu(t, 0.25 + s * 0.125);
            assert_int_equal(elu_run(ctx, &p, x, y, 65536, NULL), ELU_OK);
            size_t at = 0;
            const double err = tu_check_forward(&p, x, y, 65536, false, &at);
            if (err > 0.5)
                fprintf(stderr, "%s alpha %g: %.3f ulp at 0x%04x\n", tu_dtype_names[t],
                        p.alpha, err, x[at]);
            assert_true(err <= 0.5);
            const size_t nb = tu_under_valgrind() ? 4096 : 65536; /* still builds tables */
            for (int from_output = 0; from_output < 2; from_output++) {
                assert_int_equal(elu_run_backward(ctx, &p, x, x, from_output, y, nb, NULL),
                                 ELU_OK);
                assert_true(tu_check_backward(&p, x, x, from_output, y, nb, false, &at) <= 0.5);
            }
        }
    free(x);
    free(y);
    elu_ctx_destroy(ctx);
}

static void test_half_conversions(void **state)
{
    (void)state;
    for (uint32_t i = 0; i < 65536; i++) {
        const double f = elu_f16_to_double((uint16_t)i), b = elu_bf16_to_double((uint16_t)i);
        if (!isnan(f))
            assert_int_equal(elu_f16_from(f), i);
        if (!isnan(b))
            assert_int_equal(elu_bf16_from(b), i);
    }
    assert_int_equal(elu_f16_from(1.0 + 0x1p-11), 0x3c00);       /* tie: even */
    assert_int_equal(elu_f16_from(1.0 + 3 * 0x1p-11), 0x3c02);   /* tie: even */
    assert_int_equal(elu_f16_from(65519.0), 0x7bff);
    assert_int_equal(elu_f16_from(65520.0), 0x7c00);             /* overflow */
    assert_int_equal(elu_f16_from(-0x1p-25), 0x8000);            /* tie to -0 */
    assert_int_equal(elu_f16_from(0x1.8p-25), 0x0001);
    assert_int_equal(elu_bf16_from(1.0 + 0x1p-8), 0x3f80);
    assert_int_equal(elu_bf16_from(-0.0), 0x8000);
    assert_true(isnan(elu_f16_to_double(elu_f16_from(NAN))));
    assert_true(isnan(elu_bf16_to_double(elu_bf16_from(NAN))));
}

static void test_special_values_exact(void **state)
{
    (void)state;
    elu_ctx *ctx = tu_ctx(.backend = ELU_BACKEND_CPU, .threads = 1, .flags = ELU_NO_DISK_CACHE);
    const elu_params p = elu_params_selu(ELU_F32);
    const float neg = (float)p.alpha * (float)p.scale;
    const float x[] = {NAN, -INFINITY, INFINITY, -0.0f, 0.0f, -0x1p-149f, -0x1p-130f};
    float y[7];
    assert_int_equal(elu_run(ctx, &p, x, y, 7, NULL), ELU_OK);
    assert_true(isnan(y[0]));
    assert_true(y[1] == -neg);
    assert_true(isinf(y[2]) && y[2] > 0);
    assert_true(y[3] == 0 && signbit(y[3]));
    assert_true(y[4] == 0 && !signbit(y[4]));
    assert_true(y[5] < 0 || (y[5] == 0 && signbit(y[5]))); /* sign kept */
    assert_true(y[6] < 0);
    /* Backward: NaN saved value takes the scale branch, as in PyTorch. */
    const float g[] = {2, 2, 2, 2, 2, 2, 2};
    float dx[7];
    assert_int_equal(elu_run_backward(ctx, &p, g, x, false, dx, 7, NULL), ELU_OK);
    assert_true(dx[0] == 2 * (float)p.scale);
    assert_true(dx[1] == 0 && !signbit(dx[1])); /* exp(-inf) = 0 */
    elu_ctx_destroy(ctx);
}

/* The f64 forward of tiny inputs: neg * x * input_scale rounded to
 * nearest with ties toward zero (e^t - 1 lies just inside t). neg = 1.5
 * makes a midpoint of every x whose last bit is set, and input_scale 3 of
 * x * input_scale where that needs two doubles; the subnormals, the
 * smallest normal, a product that underflows to 0, and |t| within
 * [2^-170, 2^-149] (the slow path's, docs/DESIGN.md) too, through the
 * vector kernels and the scalar code (a lone element), against MPFR. The
 * same inputs among positive ones and special values, thousands of them,
 * misaligned, take the AVX-512 kernel's packed loop. */
static void test_f64_tiny_inputs_round_ties_inward(void **state)
{
    (void)state;
    elu_ctx *ctx = tu_ctx(.backend = ELU_BACKEND_CPU, .threads = 1, .flags = ELU_NO_DISK_CACHE);
    elu_params sets[] = {elu_params_elu(ELU_F64, 1.5), elu_params_selu(ELU_F64),
                         elu_params_celu(ELU_F64, 3.0), elu_params_elu(ELU_F64, 1.5),
                         elu_params_elu(ELU_F64, 1.0), elu_params_celu(ELU_F64, 1.0 / 3)};
    sets[3].input_scale = 0x1p-480; /* products below the subnormals */
    sets[4].input_scale = 3;
    const double x[] = {-(1 + 0x1p-52) * 0x1p-1000, -(1 + 3 * 0x1p-52) * 0x1p-200,
                        -0x1p-1074, -3 * 0x1p-1074, -0x1.fffffffffffffp-1023, -0x1p-1022,
                        -(1 + 0x1p-52) * 0x1p-171, -0x1.8p-600, -(1 + 5 * 0x1p-52) * 0x1p-1030,
                        -(1 + 0x1p-52) * 0x1p-160, -(1 + 3 * 0x1p-52) * 0x1p-152,
                        -(1 + 0x1p-52) * 0x1p-175, 0.0, -0.0, NAN, -INFINITY, INFINITY,
                        -1.0, -50.0};
    enum { COUNT = sizeof x / sizeof *x, LONG = 3 * 1024 + 37 };
    double *xl = malloc((LONG + 1) * sizeof *xl), *yl = tu_poisoned((LONG + 1) * sizeof *yl);
    assert_true(xl);
    for (int i = 0; i <= LONG; i++) /* a sign in three flipped */
        xl[i] = i % 3 ? x[i * 7 % COUNT] : -x[i * 7 % COUNT];
    for (size_t k = 0; k < sizeof sets / sizeof *sets; k++) {
        double y[COUNT], one;
        assert_int_equal(elu_run(ctx, &sets[k], xl + 1, yl + 1, LONG, NULL), ELU_OK);
        for (int i = 1; i <= LONG; i++) {
            const double want = tu_cr_forward_f64(&sets[k], xl[i]);
            if (isnan(want))
                assert_true(isnan(yl[i]));
            else
                assert_memory_equal(&yl[i], &want, sizeof want);
        }
        assert_int_equal(elu_run(ctx, &sets[k], x, y, COUNT, NULL), ELU_OK);
        for (size_t i = 0; i < COUNT; i++) {
            const double want = tu_cr_forward_f64(&sets[k], x[i]);
            assert_int_equal(elu_run(ctx, &sets[k], &x[i], &one, 1, NULL), ELU_OK);
            if (isnan(want)) {
                assert_true(isnan(y[i]) && isnan(one));
                continue;
            }
            assert_memory_equal(&y[i], &want, sizeof want);
            assert_memory_equal(&one, &want, sizeof want);
        }
    }
    free(xl);
    free(yl);
    /* ties to even would give -(1.5 + 2^-51) 2^-1000 here */
    const double y0 = tu_cr_forward_f64(&sets[0], x[0]);
    assert_true(y0 == -(1.5 + 0x1p-52) * 0x1p-1000);
    elu_ctx_destroy(ctx);
}

/* The f32 forward's results below float's normal range, and its signed
 * zeros, through the kernels of each instruction set (the scalar code in
 * test_cpu_baseline), whole vectors and a lone element, against the
 * correctly rounded reference: neg = 1.5 makes a midpoint of
 * neg*x for every odd multiple of 2^-149, which e^t - 1 lying just inside
 * t rounds inward, and CELU(2.5) of 2.5*0.4*x; a neg of 2^-119, 2^-125 or
 * -2^-140 makes results subnormal far from 0; a zero neg, and one whose
 * sign is not scale's, give zeros whose sign x*neg alone tells, beside
 * results that round to zero; an input_scale below 18/FLT_MAX leaves -inf
 * the one input whose t lies below -18. The same inputs among positive
 * ones, thousands of them, misaligned, take the AVX-512 kernel's packed
 * loop. */
static void test_f32_tiny_results_and_signed_zeros(void **state)
{
    (void)state;
    elu_ctx *ctx = tu_ctx(.backend = ELU_BACKEND_CPU, .threads = 1, .flags = ELU_NO_DISK_CACHE);
    elu_params sets[] = {elu_params_elu(ELU_F32, 1.5),      elu_params_celu(ELU_F32, 2.5),
                         elu_params_elu(ELU_F32, 0x1p-119), elu_params_elu(ELU_F32, 0x1p-125),
                         elu_params_elu(ELU_F32, 0),        elu_params_elu(ELU_F32, -1),
                         elu_params_selu(ELU_F32),          elu_params_elu(ELU_F32, -1),
                         elu_params_elu(ELU_F32, -0x1p-140), elu_params_elu(ELU_F32, 1),
                         elu_params_elu(ELU_F32, 0)};
    sets[6].scale = -sets[6].scale; /* pos and neg both negative */
    sets[7].input_scale = 0.5;       /* -2^-149 rounds to zero */
    sets[9].input_scale = 0x1p-125;
    sets[10].input_scale = 0x1p-125;
    enum { COUNT = 96 };
    float x[COUNT];
    const float fixed[] = {0.0f, -0.0f, -0x1.fffffcp-127f, -0x1p-126f, -0x1.000002p-126f,
                           -0x1p-100f, -0x1p-60f, -1e-10f, -1.0f, -17.5f, -18.5f, -100.0f,
                           -INFINITY, NAN, 1.0f, 0x1p-149f};
    enum { FIXED = sizeof fixed / sizeof *fixed };
    memcpy(x, fixed, sizeof fixed);
    for (int i = FIXED; i < COUNT; i++) /* subnormals: 1 to 64, then wider */
        x[i] = -(float)(i - FIXED + 1 + (i >= FIXED + 64 ? (i - FIXED) * 4099 : 0)) * 0x1p-149f;
    enum { LONG = 3 * 1024 + 37 };
    float *xl = malloc((LONG + 1) * sizeof *xl), *yl = tu_poisoned((LONG + 1) * sizeof *yl);
    assert_true(xl);
    for (int i = 0; i <= LONG; i++) /* a sign in three flipped, NaN and the zeros kept */
        xl[i] = i % 3 ? x[i * 7 % COUNT] : -x[i * 7 % COUNT];
    for (size_t k = 0; k < sizeof sets / sizeof *sets; k++) {
        float y[COUNT], one;
        assert_int_equal(elu_run(ctx, &sets[k], xl + 1, yl + 1, LONG, NULL), ELU_OK);
        for (int i = 1; i <= LONG; i++) {
            const float want = tu_cr_forward_f32(&sets[k], xl[i]);
            if (isnan(want))
                assert_true(isnan(yl[i]));
            else
                assert_memory_equal(&yl[i], &want, sizeof want);
        }
        memset(y, 0xA5, sizeof y);
        assert_int_equal(elu_run(ctx, &sets[k], x, y, COUNT, NULL), ELU_OK);
        for (int i = 0; i < COUNT; i++) {
            const float want = tu_cr_forward_f32(&sets[k], x[i]);
            assert_int_equal(elu_run(ctx, &sets[k], &x[i], &one, 1, NULL), ELU_OK);
            if (isnan(want)) {
                assert_true(isnan(y[i]) && isnan(one));
                continue;
            }
            if (memcmp(&y[i], &want, sizeof want) || memcmp(&one, &want, sizeof want))
                fprintf(stderr, "set %zu, x = %a: %a and %a, want %a\n", k, (double)x[i],
                        (double)y[i], (double)one, (double)want);
            assert_memory_equal(&y[i], &want, sizeof want);
            assert_memory_equal(&one, &want, sizeof want);
        }
    }
    free(xl);
    free(yl);
    elu_ctx_destroy(ctx);
}

/* Threads split the work; the result must not depend on how. */
static void test_threads_and_in_place(void **state)
{
    (void)state;
    const size_t n = 1000003;
    elu_ctx *one = tu_ctx(.backend = ELU_BACKEND_CPU, .threads = 1, .flags = ELU_NO_DISK_CACHE),
            *many = tu_ctx(.backend = ELU_BACKEND_CPU, .threads = 7, .flags = ELU_NO_DISK_CACHE);
    float *x = malloc(n * 4), *a = tu_poisoned(n * 4), *b = tu_poisoned(n * 4);
    tu_fill_inputs(ELU_F32, x, n);
    const elu_params p = elu_params_elu(ELU_F32, 1.0);
    assert_int_equal(elu_run(one, &p, x, a, n, NULL), ELU_OK);
    assert_int_equal(elu_run(many, &p, x, b, n, NULL), ELU_OK);
    assert_memory_equal(a, b, n * 4);
    memcpy(b, x, n * 4);
    assert_int_equal(elu_run(many, &p, b, b, n, NULL), ELU_OK); /* in place */
    assert_memory_equal(a, b, n * 4);
    free(x);
    free(a);
    free(b);
    elu_ctx_destroy(one);
    elu_ctx_destroy(many);
}

static int thread_count(void)
{
    DIR *d = opendir("/proc/self/task");
    int n = 0;
    if (!d)
        return -1;
    for (struct dirent *e; (e = readdir(d));)
        n += e->d_name[0] != '.';
    closedir(d);
    return n;
}

/* The workers are made once, with the context: calls create none. */
static void test_persistent_pool(void **state)
{
    (void)state;
    const int before = thread_count();
    if (before < 0)
        skip();
    elu_ctx *ctx = tu_ctx(.backend = ELU_BACKEND_CPU, .threads = 4, .flags = ELU_NO_DISK_CACHE);
    assert_int_equal(thread_count(), before + 3);
    const size_t n = 400000;
    float *x = malloc(n * 4), *y = tu_poisoned(n * 4);
    tu_fill_inputs(ELU_F32, x, n);
    const elu_params p = elu_params_elu(ELU_F32, 1.0);
    for (int i = 0; i < 5; i++)
        assert_int_equal(elu_run(ctx, &p, x, y, n, NULL), ELU_OK);
    assert_int_equal(thread_count(), before + 3);
    size_t at = 0;
    assert_true(tu_check_forward(&p, x, y, n, false, &at) <= 1.0);
    /* A fork child has none of the workers: it runs on its own thread. */
    memset(y, 0xA5, n * 4);
    const pid_t pid = fork();
    if (pid == 0) {
        const bool ok = elu_run(ctx, &p, x, y, n, NULL) == ELU_OK &&
                        tu_check_forward(&p, x, y, n, false, &at) <= 1.0;
        elu_ctx_destroy(ctx);
        free(x); /* valgrind checks the child's exit for leaks too */
        free(y);
        _exit(ok ? 0 : 1);
    }
    int status;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    elu_ctx_destroy(ctx);
    assert_int_equal(thread_count(), before);
    free(x);
    free(y);
}

/* The kernels a process should run: the widest set the processor has
 * that is no wider than the one ELU_CPU_ISA names (in any case); with the
 * variable unset or naming no set, the widest the processor has. */
static const char *expected_isa(const char *want)
{
    static const char *const widest_first[] = {"avx512", "avx2", "baseline"};
    bool has[3] = {false, false, true};
#if defined(__x86_64__)
    elu_cpu_isas_present(has);
#endif
    size_t i = 0; /* unset, or naming no set: no cap */
    for (size_t named = 0; want && named < 3; named++)
        if (strcasecmp(want, widest_first[named]) == 0)
            i = named;
    while (!has[i])
        i++;
    return widest_first[i];
}

/* ELU_CPU_ISA, or its absence, picks the kernels. */
static void test_isa_choice(void **state)
{
    (void)state;
    const char *want = getenv("ELU_CPU_ISA"), *got = elu_cpu_isa_name();
    printf("CPU kernels: %s\n", got);
    if (strcmp(got, expected_isa(want)) != 0)
        fail_msg("ELU_CPU_ISA %s: kernels %s, want %s", want ? want : "unset", got,
                 expected_isa(want));
}

static const char *self; /* this program, which a child runs again */
static const char REPORT_ISA[] = "--report-isa";

/* The child's part: its kernels, and its first context's message. */
static int report_isa(void)
{
    elu_ctx *ctx = tu_ctx(.backend = ELU_BACKEND_CPU, .flags = ELU_NO_DISK_CACHE);
    printf("%s\n%s\n", elu_cpu_isa_name(), elu_ctx_last_error(ctx));
    elu_ctx_destroy(ctx);
    return 0;
}

/* What report_isa prints in a fresh process with ELU_CPU_ISA=value (NULL:
 * unset), as the kernels are chosen once per process. */
static void isa_of_process(const char *value, char *printed, size_t size)
{
    int out[2];
    assert_int_equal(pipe(out), 0);
    const pid_t pid = fork();
    if (pid == 0) {
        dup2(out[1], 1);
        if (value)
            setenv("ELU_CPU_ISA", value, 1);
        else
            unsetenv("ELU_CPU_ISA");
        execl(self, self, REPORT_ISA, (char *)NULL);
        _exit(127);
    }
    close(out[1]);
    size_t len = 0;
    for (ssize_t r; len < size - 1 && (r = read(out[0], printed + len, size - 1 - len)) > 0;)
        len += (size_t)r;
    printed[len] = '\0';
    close(out[0]);
    int status;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
}

/* A value that names no kernels leaves the best the processor has, and
 * says so; the names take any case. */
static void test_isa_invalid_values(void **state)
{
    (void)state;
    char best[512], printed[512];
    isa_of_process(NULL, best, sizeof best);
    *strchr(best, '\n') = '\0';
    const char *const invalid[] = {"foo", " avx2", "avx2 ", "sse"};
    for (size_t i = 0; i < sizeof invalid / sizeof *invalid; i++) {
        isa_of_process(invalid[i], printed, sizeof printed);
        if (strncmp(printed, best, strlen(best)) != 0 || printed[strlen(best)] != '\n' ||
            !strstr(printed, "ELU_CPU_ISA"))
            fail_msg("ELU_CPU_ISA=\"%s\": \"%s\" (best: %s)", invalid[i], printed, best);
    }
    isa_of_process("BASELINE", printed, sizeof printed);
    assert_string_equal(printed, "baseline\n\n");
}

static void report_constants(const elu_params *p, const char *what, size_t n, double err,
                             double x)
{
    fprintf(stderr, "%s %s alpha %.9g scale %.9g input_scale %.9g, n %zu: %.3f ulp at x = %a\n",
            tu_dtype_names[p->dtype], what, p->alpha, p->scale, p->input_scale, n, err, x);
}

/* Forward, and backward from the input and from the output, of n elements
 * at x + off (g + off) into y + (off * 7) % 5: each within 1 ulp. */
static void check_run(elu_ctx *ctx, const elu_params *p, const void *x, const void *g, void *y,
                      size_t n, size_t off)
{
    const size_t size = elu_dtype_size(p->dtype);
    const char *xs = (const char *)x + off * size, *gs = (const char *)g + off * size;
    char *ys = (char *)y + (off * 7) % 5 * size;
    size_t at = 0;
    memset(ys, 0xA5, n * size);
    assert_int_equal(elu_run(ctx, p, xs, ys, n, NULL), ELU_OK);
    double e = tu_check_forward(p, xs, ys, n, false, &at);
    if (e > 1.0)
        report_constants(p, "forward", n, e, (double)tu_get(p->dtype, xs, at));
    assert_true(e <= 1.0);
    for (int from_output = 0; from_output < 2; from_output++) {
        memset(ys, 0xA5, n * size);
        assert_int_equal(elu_run_backward(ctx, p, gs, xs, from_output, ys, n, NULL), ELU_OK);
        e = tu_check_backward(p, gs, xs, from_output, ys, n, false, &at);
        if (e > 1.0)
            report_constants(p, from_output ? "backward(output)" : "backward(input)", n, e,
                             (double)tu_get(p->dtype, xs, at));
        assert_true(e <= 1.0);
    }
}

/* The vectorized kernels' edges, f32 and f64: every length up to a few
 * vectors, every misalignment, the streaming size, in place, and random
 * constants (many values of scale*alpha and input_scale), each within
 * 1 ulp. */
static void test_fast_path_edges(void **state)
{
    (void)state;
    const bool slow = tu_under_valgrind();
    const size_t big = slow ? 30001 : (1u << 21) + 13; /* past the streaming threshold */
    const size_t lengths = slow ? 35 : 70;                /* over two vectors, or four */
    const elu_dtype types[] = {ELU_F32, ELU_F64};
    elu_ctx *ctx = tu_ctx(.backend = ELU_BACKEND_CPU, .threads = 2, .flags = ELU_NO_DISK_CACHE);
    for (int d = 0; d < 2; d++) {
        const elu_dtype t = types[d];
        const size_t size = elu_dtype_size(t);
        void *x = malloc((big + 16) * size), *g = malloc((big + 16) * size),
             *y = tu_poisoned((big + 16) * size);
        assert_true(x && g);
        tu_fill_inputs(t, x, big + 16);
        tu_fill_uniform(t, g, big + 16, -4, 4);
        for (int set = 0; set < (slow ? 4 : 40); set++) {
            elu_params p = elu_params_elu(t, tu_uniform(0.05, 4));
            p.scale = tu_uniform(0.5, 2);
            p.input_scale = set % 2 ? 1.0 : tu_uniform(0.1, 3);
            for (size_t n = 0; n < lengths; n++)
                for (size_t off = 0; off < 3; off++)
                    check_run(ctx, &p, x, g, y, n, off);
            check_run(ctx, &p, x, g, y, set < 4 ? big : 100000, 1);
        }
        memcpy(y, x, big * size); /* in place, streamed */
        const elu_params p = elu_params_selu(t);
        assert_int_equal(elu_run(ctx, &p, y, y, big, NULL), ELU_OK);
        size_t at = 0;
        assert_true(tu_check_forward(&p, x, y, big, false, &at) <= 1.0);
        free(x);
        free(g);
        free(y);
    }
    elu_ctx_destroy(ctx);
}

/* The half types' forward (computed, or through a table where the vector
 * kernel does not compute it): every length over a few vectors, every
 * offset of x and y, the streaming size (aligned, misaligned, in place),
 * bit for bit the scalar kernel's. */
static void test_half_lookup_edges(void **state)
{
    (void)state;
    const size_t big = tu_under_valgrind() ? 40003 : ((size_t)1 << 21) + 13;
    elu_ctx *ctx = tu_ctx(.backend = ELU_BACKEND_CPU, .threads = 2, .flags = ELU_NO_DISK_CACHE);
    uint16_t *x = malloc((big + 4) * 2), *y = malloc((big + 4) * 2), *want = malloc(65536 * 2);
    for (size_t i = 0; i < big + 4; i++)
        x[i] = (uint16_t)(i * 40503u + 7);
    for (int d = 0; d < 2; d++) {
        const elu_dtype t = d ? ELU_BF16 : ELU_F16;
        const elu_params p = elu_params_elu(t, 0.75);
        const struct elu_coef c = {t, 0.75, 1.0, 1.0};
        for (uint32_t i = 0; i < 65536; i++) {
            const uint16_t v = (uint16_t)i;
            elu_cpu_element(&c, ELU_KERNEL_FORWARD, &v, 0, NULL, 0, want, (ptrdiff_t)i);
        }
        for (size_t n = 2048; n < 2048 + 70; n += tu_under_valgrind() ? 7 : 1)
            for (size_t xo = 0; xo < 3; xo++)
                for (size_t yo = 0; yo < 3; yo++) {
                    memset(y, 0xA5, (n + 3) * 2);
                    assert_int_equal(elu_run(ctx, &p, x + xo, y + yo, n, NULL), ELU_OK);
                    for (size_t i = 0; i < n; i++)
                        assert_int_equal(y[yo + i], want[x[xo + i]]);
                    assert_int_equal(y[yo + n], 0xA5A5); /* nothing past the end */
                }
        for (size_t off = 0; off < 2; off++) {
            memset(y, 0xA5, (big + 4) * 2);
            assert_int_equal(elu_run(ctx, &p, x + off, y + off, big, NULL), ELU_OK);
            for (size_t i = 0; i < big; i++)
                assert_int_equal(y[off + i], want[x[off + i]]);
        }
        memcpy(y, x, big * 2); /* in place, streamed */
        assert_int_equal(elu_run(ctx, &p, y, y, big, NULL), ELU_OK);
        for (size_t i = 0; i < big; i++)
            assert_int_equal(y[i], want[x[i]]);
    }
    free(x);
    free(y);
    free(want);
    elu_ctx_destroy(ctx);
}

/* Where -scale * alpha lies exactly halfway between two values of the
 * type, x = -inf gives it rounded to even (expm1(-inf) is -1 exactly),
 * and a finite x far below 0 the neighbour toward zero (the exact value
 * lies short of -scale * alpha): by the scalar kernel (a short call) and
 * the table (a long one). */
static void test_half_tie_at_minus_infinity(void **state)
{
    (void)state;
    elu_ctx *ctx = tu_ctx(.backend = ELU_BACKEND_CPU, .threads = 1, .flags = ELU_NO_DISK_CACHE);
    const struct {
        elu_dtype t;
        double alpha;
        uint16_t minus_inf, minus_100, at_inf, at_100;
    } cases[] = {{ELU_F16, 1 + 3 * 0x1p-11, 0xfc00, 0xd640, 0xbc02, 0xbc01},
                 {ELU_BF16, 1 + 3 * 0x1p-8, 0xff80, 0xc2c8, 0xbf82, 0xbf81}};
    const size_t most = 4096;
    uint16_t *x = malloc(most * 2), *y = malloc(most * 2);
    for (int c = 0; c < 2; c++) {
        const elu_params p = elu_params_elu(cases[c].t, cases[c].alpha);
        for (size_t i = 0; i < most; i++)
            x[i] = i % 2 ? cases[c].minus_100 : cases[c].minus_inf;
        for (size_t n = 2; n <= most; n += most - 2) {
            memset(y, 0xA5, most * 2);
            assert_int_equal(elu_run(ctx, &p, x, y, n, NULL), ELU_OK);
            /* valgrind's long double has no infinity: -inf reads as -LDBL_MAX */
            for (size_t i = tu_under_valgrind(); i < n; i += 1 + tu_under_valgrind())
                if (y[i] != (i % 2 ? cases[c].at_100 : cases[c].at_inf))
                    fail_msg("%s, %zu elements: x = 0x%04x gives 0x%04x", tu_dtype_names[p.dtype],
                             n, x[i], y[i]);
        }
    }
    free(x);
    free(y);
    elu_ctx_destroy(ctx);
}

/* dx[i] against the scalar kernel's, bit for bit. */
static void check_half_backward(const struct elu_coef *c, bool from_output, const uint16_t *g,
                                const uint16_t *s, const uint16_t *dx, size_t n)
{
    const enum elu_kernel kernel = from_output ? ELU_KERNEL_BACKWARD_OUTPUT
                                               : ELU_KERNEL_BACKWARD_INPUT;
    for (size_t i = 0; i < n; i++) {
        uint16_t want;
        elu_cpu_element(c, kernel, g, (ptrdiff_t)i, s, (ptrdiff_t)i, &want, 0);
        if (dx[i] != want)
            fail_msg("%s backward from the %s, n %zu: element %zu is 0x%04x, not 0x%04x",
                     tu_dtype_names[c->dtype], from_output ? "output" : "input", n, i, dx[i],
                     want);
    }
}

/* The half types' vector backward: every length over a few vectors (from
 * the input, where the table serves, n >= 2048), every offset of the
 * inputs and of dx, the streaming size (aligned, misaligned, in place on
 * either input), bit for bit the scalar kernel's, nothing written past the
 * end. */
static void test_half_backward_edges(void **state)
{
    (void)state;
    const size_t big = tu_under_valgrind() ? 40003 : ((size_t)1 << 21) + 13;
    elu_ctx *ctx = tu_ctx(.backend = ELU_BACKEND_CPU, .threads = 2, .flags = ELU_NO_DISK_CACHE);
    uint16_t *g = malloc((big + 4) * 2), *s = malloc((big + 4) * 2), *dx = malloc((big + 4) * 2),
             *copy = malloc((big + 4) * 2);
    assert_true(g && s && dx && copy);
    for (int d = 0; d < 2; d++) {
        const elu_dtype t = d ? ELU_BF16 : ELU_F16;
        for (size_t i = 0; i < big + 4; i++) {
            const double v = tu_uniform(-6, 3), w = tu_uniform(-2, 2);
            s[i] = t == ELU_F16 ? elu_f16_from(v) : elu_bf16_from(v);
            g[i] = t == ELU_F16 ? elu_f16_from(w) : elu_bf16_from(w);
        }
        const elu_params p = elu_params_celu(t, 1.25);
        const struct elu_coef c = {t, 1.25f, 1.0, 1 / 1.25f};
        for (int from_output = 0; from_output < 2; from_output++) {
            const size_t first = from_output ? 0 : 2048;
            for (size_t n = first; n < first + 70; n += tu_under_valgrind() ? 7 : 1)
                for (size_t o = 0; o < 9; o++) {
                    const size_t go = o % 3, yo = o / 3;
                    memset(dx, 0xA5, (n + 3) * 2);
                    assert_int_equal(elu_run_backward(ctx, &p, g + go, s + go, from_output,
                                                      dx + yo, n, NULL),
                                     ELU_OK);
                    check_half_backward(&c, from_output, g + go, s + go, dx + yo, n);
                    assert_int_equal(dx[yo + n], 0xA5A5); /* nothing past the end */
                }
            for (size_t off = 0; off < 2; off++) {
                assert_int_equal(elu_run_backward(ctx, &p, g + off, s, from_output, dx + off,
                                                  big, NULL),
                                 ELU_OK);
                check_half_backward(&c, from_output, g + off, s, dx + off, big);
            }
            for (int on = 0; on < 2; on++) { /* in place, streamed: dx is g, then s */
                const uint16_t *other = on ? g : s;
                memcpy(copy, on ? s : g, big * 2);
                assert_int_equal(elu_run_backward(ctx, &p, on ? other : copy,
                                                  on ? copy : other, from_output, copy, big,
                                                  NULL),
                                 ELU_OK);
                memcpy(dx, copy, big * 2);
                check_half_backward(&c, from_output, g, s, dx, big);
            }
        }
    }
    free(g);
    free(s);
    free(dx);
    free(copy);
    elu_ctx_destroy(ctx);
}

/* The inputs whose f32 or f64 forward the fast evaluation leaves in
 * doubt, through the slow path itself and through the CPU path (whichever
 * kernel ELU_CPU_ISA picks), alone and among others: each the correctly
 * rounded result. (The fast evaluation rounded alone gets most of these
 * right too, as it does every f32 input the exhaustive sweeps try: what
 * the test guards is the slow path, which any result in doubt takes.) */
static void doubtful_inputs(elu_dtype dtype)
{
    elu_ctx *ctx = tu_ctx(.backend = ELU_BACKEND_CPU, .flags = ELU_NO_DISK_CACHE);
    const elu_params sets[] = {elu_params_elu(dtype, 1.0), elu_params_selu(dtype),
                               elu_params_celu(dtype, 0.6)};
    enum { CAP = 64 };
    const bool f32 = dtype == ELU_F32;
    for (size_t k = 0; k < sizeof sets / sizeof *sets; k++) {
        const elu_params *p = &sets[k];
        float xf[4 * CAP], yf[4 * CAP];
        double xd[4 * CAP], yd[4 * CAP];
        const size_t found = f32 ? tu_f32_doubtful_inputs(p, false, xf, CAP) : tu_f64_doubtful_inputs(p, xd, CAP);
        assert_true(found >= 4);
        size_t gpu_doubtful = 0; /* Taylor's (tests/gpu_doubt.c) leaves 1/8 as many */
        for (size_t i = 0; i < found; i++) {
            if (f32) {
                const float neg = (float)p->alpha * (float)p->scale;
                const double t = (double)xf[i] * (float)p->input_scale;
                const float slow = elu_f32_slow(t, neg);
                assert_true(slow == tu_cr_forward_f32(p, xf[i]));
                gpu_doubtful += tu_f32_gpu_doubtful(t < ELU_F32_T_MIN ? ELU_F32_T_MIN : t, neg);
            } else {
                const struct elu_dd t = elu_two_prod(xd[i], p->input_scale);
                assert_true(elu_f64_slow(t, p->alpha * p->scale) == tu_cr_forward_f64(p, xd[i]));
            }
        }
        if (f32)
            assert_true(gpu_doubtful < found);
        for (size_t i = found; i < 4 * found; i++) { /* others among them */
            const double v = -tu_uniform(0.001, 17);
            xf[i] = i % 3 ? (float)v : xf[i % found];
            xd[i] = i % 3 ? v : xd[i % found];
        }
        void *x = f32 ? (void *)xf : (void *)xd, *y = f32 ? (void *)yf : (void *)yd;
        memset(y, 0xA5, f32 ? sizeof yf : sizeof yd);
        assert_int_equal(elu_run(ctx, p, x, y, 4 * found, NULL), ELU_OK);
        size_t at = 0;
        const double err = tu_check_forward(p, x, y, 4 * found, false, &at);
        printf("%s forward, set %zu: %zu inputs in doubt, worst %.4f ulp\n", f32 ? "f32" : "f64",
               k, found, err);
        assert_true(err < 1); /* correctly rounded (tu_check_forward) */
    }
    elu_ctx_destroy(ctx);
}

static void test_f32_doubtful_inputs(void **state)
{
    (void)state;
    doubtful_inputs(ELU_F32);
}

static void test_f64_doubtful_inputs(void **state)
{
    (void)state;
    doubtful_inputs(ELU_F64);
}

int main(int argc, char **argv)
{
    self = argv[0];
    if (argc == 2 && strcmp(argv[1], REPORT_ISA) == 0)
        return report_isa();
    tu_seed();
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_isa_choice),
        cmocka_unit_test(test_isa_invalid_values),
        cmocka_unit_test(test_half_conversions),
        cmocka_unit_test(test_forward_all_dtypes),
        cmocka_unit_test(test_backward_all_dtypes),
        cmocka_unit_test(test_half_types_exhaustive),
        cmocka_unit_test(test_half_tables_beyond_capacity),
        cmocka_unit_test(test_forward_tables_match_scalar),
        cmocka_unit_test(test_half_forward_matches_scalar),
        cmocka_unit_test(test_half_backward_matches_scalar),
        cmocka_unit_test(test_flush_to_zero_set_by_the_caller),
        cmocka_unit_test(test_special_values_exact),
        cmocka_unit_test(test_f64_tiny_inputs_round_ties_inward),
        cmocka_unit_test(test_f32_tiny_results_and_signed_zeros),
        cmocka_unit_test(test_threads_and_in_place),
        cmocka_unit_test(test_persistent_pool),
        cmocka_unit_test(test_fast_path_edges),
        cmocka_unit_test(test_half_lookup_edges),
        cmocka_unit_test(test_half_tie_at_minus_infinity),
        cmocka_unit_test(test_half_backward_edges),
        cmocka_unit_test(test_f32_doubtful_inputs),
        cmocka_unit_test(test_f64_doubtful_inputs),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
