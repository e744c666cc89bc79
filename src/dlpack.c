/* The DLPack entry points: read dtype, device and layout off the tensors,
 * then take the common run path (api.c) with contiguous buffers or with a
 * strided layout. */
#include "dlpack_view.h"

#include <stdio.h>

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

static const char *dtype_name(elu_dtype dtype)
{
    return dtype == ELU_F32 ? "float32" : dtype == ELU_F64 ? "float64"
         : dtype == ELU_F16 ? "float16" : "bfloat16";
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

/* Whether t's elements lie in row-major order without gaps. The shape's
 * product is known to fit (check_shapes). */
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
    return t->data ? (char *)t->data + t->byte_offset : NULL; /* NULL: no elements */
}

/* "(2, 3, 4)", cut short if it does not fit. */
static const char *shape_str(const DLTensor *t, char *buf, size_t len)
{
    size_t used = (size_t)snprintf(buf, len, "(");
    for (int d = 0; d < t->ndim && used < len; d++)
        used += (size_t)snprintf(buf + used, len - used, "%s%lld", d ? ", " : "",
                                 (long long)t->shape[d]);
    if (used < len)
        snprintf(buf + used, len - used, t->ndim == 1 ? ",)" : ")");
    return buf;
}

/* Each tensor on its own: present, with a shape, data where there are
 * elements, and an address that byte_offset does not carry past the end. */
static elu_status check_tensor(elu_ctx *ctx, const DLTensor *t, int i)
{
    REQUIRE(ctx, t, ELU_ERR_INVALID_ARG, "tensor %d is NULL", i);
    REQUIRE(ctx, t->ndim >= 0 && (t->ndim == 0 || t->shape), ELU_ERR_INVALID_ARG,
            "tensor %d has no shape", i);
    bool empty = false;
    for (int d = 0; d < t->ndim; d++) {
        REQUIRE(ctx, t->shape[d] >= 0, ELU_ERR_INVALID_ARG,
                "tensor %d has a negative size (%lld) in dimension %d", i,
                (long long)t->shape[d], d);
        empty = empty || t->shape[d] == 0;
    }
    REQUIRE(ctx, empty || t->data, ELU_ERR_INVALID_ARG, "tensor %d's data is NULL", i);
    REQUIRE(ctx, !t->data || t->byte_offset <= UINTPTR_MAX - (uintptr_t)t->data,
            ELU_ERR_INVALID_ARG, "tensor %d's byte_offset %llu carries its address past the "
            "end of memory", i, (unsigned long long)t->byte_offset);
    return check_device(ctx, t->device);
}

/* The tensors' shapes against each other; *n receives the element count. */
static elu_status check_shapes(elu_ctx *ctx, const DLTensor *const *t, int count, size_t *n)
{
    char one[256], other[256];
    for (int i = 1; i < count; i++) {
        bool same = t[i]->ndim == t[0]->ndim;
        for (int d = 0; same && d < t[0]->ndim; d++)
            same = t[i]->shape[d] == t[0]->shape[d];
        REQUIRE(ctx, same, ELU_ERR_INVALID_ARG, "tensors differ in shape: %s (tensor 0) "
                "and %s (tensor %d)", shape_str(t[0], one, sizeof one),
                shape_str(t[i], other, sizeof other), i);
    }
    *n = 1;
    for (int d = 0; d < t[0]->ndim; d++)
        if (t[0]->shape[d] == 0)
            *n = 0; /* however large the other sizes */
    for (int d = 0; d < t[0]->ndim && *n; d++)
        REQUIRE(ctx, !__builtin_mul_overflow(*n, (size_t)t[0]->shape[d], n) && *n <= INT64_MAX,
                ELU_ERR_INVALID_ARG, "too many elements: %s", shape_str(t[0], one, sizeof one));
    return ELU_OK;
}

/* Check the tensors against each other; on success *n holds the element
 * count and *strided whether the layout (filled in) is needed. */
static elu_status describe(elu_ctx *ctx, const DLTensor *const *t, int count,
                           elu_params *p, size_t *n, bool *strided,
                           struct elu_layout *layout)
{
    elu_status status;
    for (int i = 0; i < count; i++)
        if ((status = check_tensor(ctx, t[i], i)) != ELU_OK)
            return status;
    for (int i = 0; i < count; i++) {
        elu_dtype dtype = ELU_F32;
        if ((status = dtype_of(ctx, t[i]->dtype, &dtype)) != ELU_OK)
            return status;
        REQUIRE(ctx, i == 0 || dtype == p->dtype, ELU_ERR_INVALID_ARG,
                "tensors differ in dtype: %s (tensor 0) and %s (tensor %d)",
                dtype_name(p->dtype), dtype_name(dtype), i);
        p->dtype = dtype;
    }
    if ((status = check_shapes(ctx, t, count, n)) != ELU_OK)
        return status;
    *strided = false;
    if (*n == 0)
        return ELU_OK;
    for (int i = 0; i < count; i++)
        *strided = *strided || !compact(t[i]);
    if (!*strided)
        return ELU_OK;
    const int ndim = t[0]->ndim;
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

elu_status elu_dlpack_view(elu_ctx *ctx, const elu_params *p, const DLTensor *const *t,
                           int count, struct elu_dlpack_view *v)
{
    if (!ctx || !p)
        return elu_fail(ctx, ELU_ERR_INVALID_ARG, "ctx or params is NULL");
    v->params = *p;
    const elu_status status = describe(ctx, t, count, &v->params, &v->n, &v->strided,
                                       &v->layout);
    if (status != ELU_OK)
        return status;
    v->a = data_of(t[0]);
    v->b = count == 3 ? data_of(t[1]) : NULL;
    v->out = data_of(t[count - 1]);
    return ELU_OK;
}

/* What both entry points share: tensors to buffers and layout, then the
 * common run path. t holds (a, [b,] out). */
static elu_status run_tensors(elu_ctx *ctx, const elu_params *p, enum elu_kernel kernel,
                              const DLTensor *const *t, int count, elu_stream stream)
{
    struct elu_dlpack_view v;
    const elu_status status = elu_dlpack_view(ctx, p, t, count, &v);
    if (status != ELU_OK)
        return status;
    return elu_run_any(ctx, &v.params, kernel, v.a, v.b, v.out, v.n,
                       v.strided ? &v.layout : NULL, stream);
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
