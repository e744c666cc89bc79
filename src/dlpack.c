/* The DLPack entry points: read dtype, device and layout off the tensors,
 * then take the common run path (api.c) with contiguous buffers or with a
 * strided layout. */
#include <dlpack/dlpack.h>

#include "internal.h"

/* Validate or return ELU_ERR_INVALID_ARG / the given status with a message. */
#define REQUIRE(ctx, cond, status, ...)                \
    do {                                               \
        if (!(cond))                                   \
            return elu_fail((ctx), (status), __VA_ARGS__); \
    } while (0)

static elu_status dtype_of(elu_ctx *ctx, DLDataType t, elu_dtype *out)
{
    REQUIRE(ctx, t.lanes == 1, ELU_ERR_UNSUPPORTED, "vector dtypes (%u lanes) "
            "are not supported", (unsigned)t.lanes);
    if (t.code == kDLFloat && (t.bits == 32 || t.bits == 64 || t.bits == 16))
        *out = t.bits == 32 ? ELU_F32 : t.bits == 64 ? ELU_F64 : ELU_F16;
    else if (t.code == kDLBfloat && t.bits == 16)
        *out = ELU_BF16;
    else
        return elu_fail(ctx, ELU_ERR_UNSUPPORTED, "unsupported dtype (code %u, "
                        "%u bits): float 16/32/64 and bfloat16 only",
                        (unsigned)t.code, (unsigned)t.bits);
    return ELU_OK;
}

/* Whether the tensor's memory can be used by this context at all. The
 * pointers' own attributes then decide GPU or CPU (api.c). */
static elu_status check_device(elu_ctx *ctx, DLDevice d)
{
    switch (d.device_type) {
    case kDLCPU:
    case kDLCUDAHost:
    case kDLCUDAManaged:
        return ELU_OK;
    case kDLCUDA:
        REQUIRE(ctx, ctx->backend == ELU_BACKEND_CUDA, ELU_ERR_INVALID_ARG,
                "a CUDA tensor given to a CPU context");
        REQUIRE(ctx, d.device_id == ctx->device, ELU_ERR_INVALID_ARG,
                "a tensor on CUDA device %d given to the context of device %d",
                d.device_id, ctx->device);
        return ELU_OK;
    default:
        return elu_fail(ctx, ELU_ERR_UNSUPPORTED, "unsupported device type %d",
                        (int)d.device_type);
    }
}

static bool compact(const DLTensor *t)
{
    if (!t->strides)
        return true;
    int64_t expected = 1;
    for (int d = t->ndim - 1; d >= 0; d--) {
        if (t->shape[d] != 1 && t->strides[d] != expected)
            return false;
        expected *= t->shape[d];
    }
    return true;
}

static void *data_of(const DLTensor *t)
{
    return (char *)t->data + t->byte_offset;
}

/* Check the tensors against each other; on success *n holds the element
 * count and *strided whether the layout (filled in) is needed. */
static elu_status describe(elu_ctx *ctx, const DLTensor *const *t, int count,
                           elu_params *p, size_t *n, bool *strided,
                           struct elu_layout *layout)
{
    elu_status status;
    for (int i = 0; i < count; i++) {
        REQUIRE(ctx, t[i], ELU_ERR_INVALID_ARG, "tensor %d is NULL", i);
        REQUIRE(ctx, t[i]->ndim >= 0 && (t[i]->ndim == 0 || t[i]->shape),
                ELU_ERR_INVALID_ARG, "tensor %d has no shape", i);
        if ((status = check_device(ctx, t[i]->device)) != ELU_OK)
            return status;
    }
    if ((status = dtype_of(ctx, t[0]->dtype, &p->dtype)) != ELU_OK)
        return status;
    const int ndim = t[0]->ndim;
    *n = 1;
    *strided = false;
    for (int i = 0; i < count; i++) {
        elu_dtype other;
        if ((status = dtype_of(ctx, t[i]->dtype, &other)) != ELU_OK)
            return status;
        REQUIRE(ctx, other == p->dtype, ELU_ERR_INVALID_ARG, "tensors differ in dtype");
        REQUIRE(ctx, t[i]->ndim == ndim, ELU_ERR_INVALID_ARG, "tensors differ in rank");
        for (int d = 0; d < ndim; d++)
            REQUIRE(ctx, t[i]->shape[d] == t[0]->shape[d] && t[i]->shape[d] >= 0,
                    ELU_ERR_INVALID_ARG, "tensors differ in shape (dimension %d)", d);
        *strided = *strided || !compact(t[i]);
    }
    for (int d = 0; d < ndim; d++) {
        REQUIRE(ctx, t[0]->shape[d] == 0 || *n <= SIZE_MAX / (size_t)t[0]->shape[d],
                ELU_ERR_INVALID_ARG, "too many elements");
        *n *= (size_t)t[0]->shape[d];
    }
    if (!*strided || *n == 0)
        return ELU_OK;
    REQUIRE(ctx, ndim <= ELU_MAX_RANK, ELU_ERR_UNSUPPORTED,
            "strided views of rank %d: at most %d", ndim, ELU_MAX_RANK);
    /* Slots of the layout: a, b, out; the forward has no b. */
    const int slot[2][3] = {{0, 2, -1}, {0, 1, 2}};
    layout->ndim = ndim;
    for (int d = 0; d < ndim; d++) {
        layout->shape[d] = t[0]->shape[d];
        for (int i = 0; i < count; i++) {
            int64_t expected = 1; /* a compact tensor's stride here */
            for (int e = d + 1; e < ndim; e++)
                expected *= t[i]->shape[e];
            layout->stride[slot[count - 2][i]][d] =
                t[i]->strides ? t[i]->strides[d] : expected;
        }
        if (count == 2)
            layout->stride[1][d] = 0;
    }
    return ELU_OK;
}

/* What both entry points share: tensors to buffers and layout, then the
 * common run path. t holds (a, [b,] out). */
static elu_status run_tensors(elu_ctx *ctx, const elu_params *p, enum elu_kernel kernel,
                              const DLTensor *const *t, int count, elu_stream stream)
{
    if (!ctx || !p)
        return elu_fail(ctx, ELU_ERR_INVALID_ARG, "ctx or params is NULL");
    elu_params q = *p;
    size_t n = 0;
    bool strided = false;
    struct elu_layout layout;
    const elu_status status = describe(ctx, t, count, &q, &n, &strided, &layout);
    if (status != ELU_OK)
        return status;
    return elu_run_any(ctx, &q, kernel, data_of(t[0]), count == 3 ? data_of(t[1]) : NULL,
                       data_of(t[count - 1]), n, strided ? &layout : NULL, stream);
}

elu_status elu_run_dlpack(elu_ctx *ctx, const elu_params *p, const DLTensor *x,
                          DLTensor *y, elu_stream stream)
{
    const DLTensor *const t[] = {x, y};
    return run_tensors(ctx, p, ELU_KERNEL_FORWARD, t, 2, stream);
}

elu_status elu_run_backward_dlpack(elu_ctx *ctx, const elu_params *p,
                                   const DLTensor *grad_y, const DLTensor *saved,
                                   bool saved_is_output, DLTensor *grad_x,
                                   elu_stream stream)
{
    const DLTensor *const t[] = {grad_y, saved, grad_x};
    return run_tensors(ctx, p,
                       saved_is_output ? ELU_KERNEL_BACKWARD_OUTPUT
                                       : ELU_KERNEL_BACKWARD_INPUT,
                       t, 3, stream);
}
