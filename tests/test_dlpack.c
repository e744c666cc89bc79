/* The DLPack entry points on the CPU: compact tensors of any rank, strided
 * views (transposes, steps, broadcasts, negative strides), and every error
 * the header promises. The GPU side is exercised from PyTorch and CuPy by
 * tests/python on a GPU machine. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <dlpack/dlpack.h>

#include "testutil.h"

#include <stdlib.h>
#include <string.h>

static elu_ctx *ctx;

static int setup(void **state)
{
    (void)state;
    ctx = tu_ctx(.backend = ELU_BACKEND_CPU, .flags = ELU_NO_DISK_CACHE);
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    elu_ctx_destroy(ctx);
    return 0;
}

static DLTensor tensor(void *data, DLDataType dtype, int ndim, int64_t *shape,
                       int64_t *strides)
{
    return (DLTensor){data, {kDLCPU, 0}, ndim, dtype, shape, strides, 0};
}

static DLTensor moved(DLTensor t, uint64_t byte_offset)
{
    t.byte_offset = byte_offset;
    return t;
}

static DLTensor on(DLTensor t, DLDeviceType device)
{
    t.device = (DLDevice){device, 0};
    return t;
}

static const DLDataType F32 = {kDLFloat, 32, 1}, F64 = {kDLFloat, 64, 1},
                        F16 = {kDLFloat, 16, 1}, BF16 = {kDLBfloat, 16, 1};

/* A forward from x to y and what it must return, with a word its message
 * must hold (NULL: any). */
struct dlpack_case {
    const char *name;
    DLTensor x, y;
    elu_status want;
    const char *said;
};

static void check_cases(const elu_params *p, const struct dlpack_case *c, size_t count)
{
    for (size_t i = 0; i < count; i++) {
        DLTensor y = c[i].y;
        const elu_status got = elu_run_dlpack(ctx, p, &c[i].x, &y, NULL);
        const char *message = got == ELU_OK ? "" : elu_ctx_last_error(ctx);
        if (got != c[i].want || (c[i].said && !strstr(message, c[i].said)))
            fail_msg("%s: %s (\"%s\"), want %s saying \"%s\"", c[i].name, elu_status_str(got),
                     message, elu_status_str(c[i].want), c[i].said ? c[i].said : "");
    }
}

/* Every element of the view y(i) = ELU(x(i)), both given by strides. */
static void check_view(const elu_params *p, const float *x, const int64_t *xs,
                       const float *y, const int64_t *ys, const int64_t *shape, int ndim)
{
    int64_t index[4] = {0};
    int64_t total = 1;
    for (int d = 0; d < ndim; d++)
        total *= shape[d];
    for (int64_t i = 0; i < total; i++) {
        int64_t rest = i, ox = 0, oy = 0;
        for (int d = ndim - 1; d >= 0; d--) {
            index[d] = rest % shape[d];
            rest /= shape[d];
            ox += index[d] * xs[d];
            oy += index[d] * ys[d];
        }
        assert_true(tu_ulp_error(ELU_F32, y[oy], tu_ref_forward(p, x[ox], false)) <= 1.0);
    }
}

static void test_compact_any_rank(void **state)
{
    (void)state;
    const elu_params p = elu_params_selu(ELU_F64); /* dtype: from the tensors */
    float x[2 * 3 * 4 * 5], y[2 * 3 * 4 * 5];
    tu_fill_inputs(ELU_F32, x, 120);
    int64_t shape[4] = {2, 3, 4, 5}, strides[4] = {60, 20, 5, 1};
    DLTensor tx = tensor(x, F32, 4, shape, NULL), ty = tensor(y, F32, 4, shape, strides);
    memset(y, 0xA5, sizeof y);
    assert_int_equal(elu_run_dlpack(ctx, &p, &tx, &ty, NULL), ELU_OK);
    elu_params as_run = p; /* the constants rounded for the tensors' f32 */
    as_run.dtype = ELU_F32;
    check_view(&as_run, x, strides, y, strides, shape, 4);
    DLTensor scalar_x = tensor(x, F32, 0, NULL, NULL), scalar_y = tensor(y, F32, 0, NULL, NULL);
    assert_int_equal(elu_run_dlpack(ctx, &p, &scalar_x, &scalar_y, NULL), ELU_OK);
    int64_t empty[2] = {3, 0};
    DLTensor ex = tensor(x, F32, 2, empty, NULL), ey = tensor(y, F32, 2, empty, NULL);
    assert_int_equal(elu_run_dlpack(ctx, &p, &ex, &ey, NULL), ELU_OK);
    elu_ctx_stats s;
    elu_ctx_get_stats(ctx, &s);
    assert_int_equal(s.cpu_runs, 2); /* the empty one does nothing */
}

static void test_strided_views(void **state)
{
    (void)state;
    const elu_params p = elu_params_celu(ELU_F32, 0.7);
    float base[8 * 6], y[8 * 6];
    tu_fill_inputs(ELU_F32, base, 48);
    int64_t shape[2] = {6, 8};
    /* The transpose of an 8x6 matrix into a compact 6x8 one. */
    int64_t xt[2] = {1, 6}, compact[2] = {8, 1};
    DLTensor tx = tensor(base, F32, 2, shape, xt), ty = tensor(y, F32, 2, shape, compact);
    memset(y, 0xA5, sizeof y);
    assert_int_equal(elu_run_dlpack(ctx, &p, &tx, &ty, NULL), ELU_OK);
    check_view(&p, base, xt, y, compact, shape, 2);
    /* Every other row, backwards, into every other column of y. */
    int64_t half[2] = {4, 4}, xs[2] = {-12, 1}, ys[2] = {8, 2};
    tx = moved(tensor(base, F32, 2, half, xs), 36 * sizeof(float)); /* row 6, going up */
    ty = tensor(y, F32, 2, half, ys);
    memset(y, 0xA5, sizeof y);
    assert_int_equal(elu_run_dlpack(ctx, &p, &tx, &ty, NULL), ELU_OK);
    check_view(&p, base + 36, xs, y, ys, half, 2);
    assert_true(((uint32_t *)y)[1] == 0xA5A5A5A5u); /* untouched between */
    /* A broadcast input: one row repeated. */
    int64_t bs[2] = {0, 1};
    tx = tensor(base, F32, 2, shape, bs);
    ty = tensor(y, F32, 2, shape, compact);
    assert_int_equal(elu_run_dlpack(ctx, &p, &tx, &ty, NULL), ELU_OK);
    check_view(&p, base, bs, y, compact, shape, 2);
    /* In place on a strided view is fine. */
    memcpy(y, base, sizeof y);
    tx = tensor(y, F32, 2, shape, xt);
    assert_int_equal(elu_run_dlpack(ctx, &p, &tx, &tx, NULL), ELU_OK);
    check_view(&p, base, xt, y, xt, shape, 2);
}

static void test_all_dtypes_and_backward(void **state)
{
    (void)state;
    const DLDataType types[4] = {F32, F64, F16, BF16};
    int64_t shape[2] = {50, 40}, cols[2] = {1, 50};
    for (int d = 0; d < 4; d++) {
        const elu_dtype t = tu_dtypes[d];
        const size_t bytes = 2000 * elu_dtype_size(t);
        void *g = malloc(bytes), *x = malloc(bytes), *dx = malloc(bytes);
        tu_fill_uniform(t, g, 2000, -3, 3);
        tu_fill_inputs(t, x, 2000);
        memset(dx, 0xA5, bytes);
        const elu_params p = elu_params_elu(ELU_F32, 0.4);
        elu_params q = p;
        q.dtype = t;
        /* Column-major g and x, row-major dx: the strided path. */
        DLTensor tg = tensor(g, types[d], 2, shape, cols), tx = tensor(x, types[d], 2, shape, cols),
                 tdx = tensor(dx, types[d], 2, shape, NULL);
        assert_int_equal(elu_run_backward_dlpack(ctx, &p, &tg, &tx, false, &tdx, NULL), ELU_OK);
        for (int64_t i = 0; i < 50; i++)
            for (int64_t j = 0; j < 40; j++) {
                const long double ref = tu_ref_backward(&q, tu_get(t, g, i + 50 * j),
                                                        tu_get(t, x, i + 50 * j), false, false);
                assert_true(tu_ulp_error(t, tu_get(t, dx, i * 40 + j), ref) <= 1.0);
            }
        free(g);
        free(x);
        free(dx);
    }
}

static void test_errors(void **state)
{
    (void)state;
    const elu_params p = elu_params_elu(ELU_F32, 1.0);
    float x[64], y[64];
    tu_fill_uniform(ELU_F32, x, 64, -2, 2);
    int64_t s8[1] = {8}, s9[1] = {9}, s4x4[2] = {4, 4}, zero[1] = {0}, one[1] = {1},
            two[1] = {2};
    /* Rank 9, 2 elements by 2, transposed (strided) or not. */
    int64_t shape9[9] = {1, 1, 1, 1, 1, 1, 1, 2, 2}, st9[9] = {4, 4, 4, 4, 4, 4, 4, 1, 2};
    const DLDataType i32 = {kDLInt, 32, 1}, f32x4 = {kDLFloat, 32, 4}, f8 = {kDLFloat, 8, 1};
    DLTensor a = tensor(x, F32, 1, s8, NULL), b = tensor(y, F32, 1, s8, NULL);
    assert_int_equal(elu_run_dlpack(NULL, &p, &a, &b, NULL), ELU_ERR_INVALID_ARG);
    assert_int_equal(elu_run_dlpack(ctx, NULL, &a, &b, NULL), ELU_ERR_INVALID_ARG);
    assert_int_equal(elu_run_dlpack(ctx, &p, NULL, &b, NULL), ELU_ERR_INVALID_ARG);
    const struct dlpack_case cases[] = {
        {"another size", a, tensor(y, F32, 1, s9, NULL), ELU_ERR_INVALID_ARG, "shape"},
        {"another rank", a, tensor(y, F32, 2, s4x4, NULL), ELU_ERR_INVALID_ARG, NULL},
        {"another dtype", a, tensor(y, F64, 1, s8, NULL), ELU_ERR_INVALID_ARG, "dtype"},
        {"int32", tensor(x, i32, 1, s8, NULL), tensor(y, i32, 1, s8, NULL),
         ELU_ERR_UNSUPPORTED, NULL},
        {"float32 lanes", tensor(x, f32x4, 1, s8, NULL), tensor(y, f32x4, 1, s8, NULL),
         ELU_ERR_UNSUPPORTED, NULL},
        {"float8", tensor(x, f8, 1, s8, NULL), tensor(y, f8, 1, s8, NULL),
         ELU_ERR_UNSUPPORTED, NULL},
        {"output on a GPU", a, on(b, kDLCUDA), ELU_ERR_INVALID_ARG, "CPU context"},
        {"output on Vulkan", a, on(b, kDLVulkan), ELU_ERR_UNSUPPORTED, NULL},
        {"output repeating elements", a, tensor(y, F32, 1, s8, zero), ELU_ERR_INVALID_ARG,
         NULL},
        {"output overlapping its input", tensor(x, F32, 1, s8, two),
         tensor(x + 1, F32, 1, s8, one), ELU_ERR_INVALID_ARG, NULL},
        /* beyond the strided path; the fast path has no rank limit */
        {"rank 9 strided", tensor(x, F32, 9, shape9, st9), tensor(y, F32, 9, shape9, NULL),
         ELU_ERR_UNSUPPORTED, NULL},
        {"rank 9 compact", tensor(x, F32, 9, shape9, NULL), tensor(y, F32, 9, shape9, NULL),
         ELU_OK, NULL},
    };
    check_cases(&p, cases, sizeof cases / sizeof *cases);
    /* Backward from the output needs alpha >= 0 here too. */
    const elu_params neg = elu_params_elu(ELU_F32, -1.0);
    assert_int_equal(elu_run_backward_dlpack(ctx, &neg, &a, &a, true, &b, NULL),
                     ELU_ERR_INVALID_ARG);
}

/* A view whose elements alias each other (as_strided(base, (600, 2), (4, 4)))
 * is refused as an output, in place too: elements would be written twice. */
static void test_aliasing_output_refused(void **state)
{
    (void)state;
    const elu_params p = elu_params_elu(ELU_F32, 1.0);
    enum { N = 600 * 4 + 8 };
    float *base = malloc(N * sizeof *base), *copy = malloc(N * sizeof *copy);
    tu_fill_uniform(ELU_F32, base, N, -2, 2);
    memcpy(copy, base, N * sizeof *base);
    int64_t shape[2] = {600, 2}, strides[2] = {4, 4};
    DLTensor view = tensor(base, F32, 2, shape, strides);
    assert_int_equal(elu_run_dlpack(ctx, &p, &view, &view, NULL), ELU_ERR_INVALID_ARG);
    assert_non_null(strstr(elu_ctx_last_error(ctx), "share memory"));
    float out[1200];
    DLTensor fresh = tensor(out, F32, 2, shape, NULL);
    assert_int_equal(elu_run_backward_dlpack(ctx, &p, &fresh, &fresh, false, &view, NULL),
                     ELU_ERR_INVALID_ARG);
    assert_memory_equal(base, copy, N * sizeof *base);
    /* As an input it is fine: the same element read twice. */
    assert_int_equal(elu_run_dlpack(ctx, &p, &view, &fresh, NULL), ELU_OK);
    free(base);
    free(copy);
}

/* Views that interleave without sharing an element are accepted: a column
 * written from the next one, odd elements from even ones, a block of
 * columns from the block beside it. */
static void test_interleaved_views_accepted(void **state)
{
    (void)state;
    const elu_params p = elu_params_celu(ELU_F32, 0.7);
    enum { ROWS = 300, COLS = 10 };
    float *a = malloc(ROWS * COLS * sizeof *a), *before = malloc(ROWS * COLS * sizeof *a);
    struct {
        int64_t shape[2], in_strides[2], out_strides[2];
        ptrdiff_t in_at, out_at; /* in elements of a */
    } cases[] = {
        {{ROWS, 1}, {COLS, 1}, {COLS, 1}, 0, 1},           /* a[:, 0] -> a[:, 1] */
        {{ROWS * COLS / 2, 1}, {2, 1}, {2, 1}, 0, 1},      /* a[::2] -> a[1::2] */
        {{ROWS * COLS / 2, 1}, {-2, 1}, {2, 1}, 2998, 1},  /* reversed evens -> odds */
        {{ROWS, 5}, {COLS, 1}, {COLS, 1}, 5, 0},           /* a[:, 5:] -> a[:, :5] */
        {{5, ROWS}, {1, COLS}, {1, COLS}, 0, 5},           /* transposed blocks */
    };
    for (size_t c = 0; c < sizeof cases / sizeof *cases; c++) {
        tu_fill_uniform(ELU_F32, a, ROWS * COLS, -3, 3);
        memcpy(before, a, ROWS * COLS * sizeof *a);
        DLTensor in = tensor(a + cases[c].in_at, F32, 2, cases[c].shape, cases[c].in_strides);
        DLTensor out = tensor(a + cases[c].out_at, F32, 2, cases[c].shape,
                              cases[c].out_strides);
        assert_int_equal(elu_run_dlpack(ctx, &p, &in, &out, NULL), ELU_OK);
        elu_params as_run = p;
        as_run.dtype = ELU_F32;
        check_view(&as_run, before + cases[c].in_at, cases[c].in_strides, a + cases[c].out_at,
                   cases[c].out_strides, cases[c].shape, 2);
    }
    free(a);
    free(before);
}

/* Layouts whose addresses cannot be computed are refused before any
 * access: NULL data moved by byte_offset, strides that overflow, offsets
 * past the end of memory, negative sizes. */
static void test_unaddressable_layouts_refused(void **state)
{
    (void)state;
    const elu_params p = elu_params_elu(ELU_F32, 1.0);
    float x[64], y[64];
    tu_fill_uniform(ELU_F32, x, 64, -2, 2);
    int64_t s2[1] = {2}, s8[1] = {8}, huge[1] = {INT64_C(1) << 62}, unit[1] = {1};
    int64_t low[1] = {INT64_MIN}, big[1] = {INT64_MAX}, back[1] = {-1000}, neg[2] = {3, -1};
    int64_t s3x4[2] = {3, 4}, s3x5[2] = {3, 5}, empty[2] = {0, INT64_MAX};
    const DLTensor a = tensor(x, F32, 1, s8, NULL), b = tensor(y, F32, 1, s8, NULL),
                   y2 = tensor(y, F32, 1, s2, NULL);
    const DLTensor null_moved = moved(tensor(NULL, F32, 1, s8, NULL), 64);
    const DLTensor negative = tensor(x, F32, 2, neg, NULL),
                   none = tensor(NULL, F32, 2, empty, NULL);
    const struct dlpack_case cases[] = {
        {"NULL data moved, input", null_moved, b, ELU_ERR_INVALID_ARG, "NULL"},
        {"NULL data moved, output", a, null_moved, ELU_ERR_INVALID_ARG, NULL},
        {"stride 2^62", tensor(x, F32, 1, s2, huge), y2, ELU_ERR_INVALID_ARG, "address space"},
        {"stride INT64_MIN", tensor(x, F32, 1, s2, low), y2, ELU_ERR_INVALID_ARG, NULL},
        {"size INT64_MAX", tensor(x, F32, 1, big, unit), tensor(y, F32, 1, big, unit),
         ELU_ERR_INVALID_ARG, NULL},
        {"offset past the end of memory", moved(a, UINT64_MAX - 16), b, ELU_ERR_INVALID_ARG,
         NULL},
        {"stride below address 0", tensor((void *)(uintptr_t)64, F32, 1, s8, back), b,
         ELU_ERR_INVALID_ARG, NULL},
        {"negative size", negative, negative, ELU_ERR_INVALID_ARG,
         "negative size (-1) in dimension 1"},
        {"shapes differ", tensor(x, F32, 2, s3x4, NULL), tensor(y, F32, 2, s3x5, NULL),
         ELU_ERR_INVALID_ARG, "(3, 4) (tensor 0) and (3, 5)"},
        /* the GPU would fault on it */
        {"data not aligned to its elements", moved(a, 2), b, ELU_ERR_INVALID_ARG, "aligned"},
        /* whatever its other sizes */
        {"zero-size tensor, no data", none, none, ELU_OK, NULL},
    };
    check_cases(&p, cases, sizeof cases / sizeof *cases);
}

/* A dimension of size 1 is never stepped along, so its stride, however
 * large, moves no address: such views are run like any other (f16, whose
 * 2-byte items make -2^62 * 2 the most negative int64_t). */
static void test_size_one_strides_ignored(void **state)
{
    (void)state;
    const elu_params p = elu_params_elu(ELU_F32, 1.0);
    float x[8], y[8];
    tu_fill_uniform(ELU_F32, x, 8, -2, 2);
    int64_t shape[2] = {1, 4}, far[2] = {INT64_C(1) << 62, 2}, dense[2] = {4, 1};
    DLTensor in = tensor(x, F32, 2, shape, far), out = tensor(y, F32, 2, shape, dense);
    assert_int_equal(elu_run_dlpack(ctx, &p, &in, &out, NULL), ELU_OK);
    check_view(&p, x, far, y, dense, shape, 2);
    /* An output over its own input's storage, with such a stride: the
     * overlap is decided, not computed with an overflowing stride. */
    uint16_t h[8] = {0};
    int64_t low[2] = {-(INT64_C(1) << 62), 2};
    DLTensor h_in = tensor(h, F16, 2, shape, low), h_out = tensor(h, F16, 2, shape, dense);
    assert_int_equal(elu_run_dlpack(ctx, &p, &h_in, &h_out, NULL), ELU_ERR_INVALID_ARG);
    assert_non_null(strstr(elu_ctx_last_error(ctx), "shares memory"));
}

#define T(f) cmocka_unit_test(f)

int main(void)
{
    tu_seed();
    const struct CMUnitTest tests[] = {
        T(test_compact_any_rank),
        T(test_strided_views),
        T(test_all_dtypes_and_backward),
        T(test_errors),
        T(test_aliasing_output_refused),
        T(test_interleaved_views_accepted),
        T(test_unaddressable_layouts_refused),
        T(test_size_one_strides_ignored),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
