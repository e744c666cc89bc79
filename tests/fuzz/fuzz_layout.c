/* libFuzzer over the DLPack entry points' checks: shapes, strides, byte
 * offsets, dtypes, devices and data pointers as a caller might pass them.
 * Whatever the checks accept must be addressable without overflow, must
 * not alias an output element (decided here by brute force for small
 * tensors), and, where it lies inside this harness's arena, must run on
 * the CPU without touching a byte outside it (ASan watches). Built with
 * -Dfuzz=true by clang (see .ci/run); tests/fuzz/layout_seeds.py writes
 * the seed inputs.
 *
 * Input format, little-endian, missing bytes read as 0:
 *   u8 kind (0: forward, 1: backward from the input, 2: from the output),
 *   u8 ndim (as a signed byte), u8 dtype (index into `dtypes`),
 *   i64 shape[ndim] of tensor 0,
 *   then per tensor: u8 flags (1: strides follow, 2: a shape of its own
 *   follows, 4: CUDA device type), u8 where (0: NULL, 1: the arena,
 *   2: address 4096, 3: near the top of memory), u16 offset into the
 *   arena, u64 byte_offset, [i64 shape[ndim]], [i64 strides[ndim]]. */
#include "dlpack_view.h"
#include "layout.h"

#include <stdlib.h>

__extension__ typedef __int128 wide; /* addresses without overflow */

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

enum { MAX_DIMS = 10, ARENA = 1 << 16, BRUTE_MAX = 512 };

static _Alignas(64) unsigned char arena[ARENA];
static elu_ctx *ctx;

static const DLDataType dtypes[] = {
    {kDLFloat, 32, 1}, {kDLFloat, 64, 1}, {kDLFloat, 16, 1}, {kDLBfloat, 16, 1},
    {kDLFloat, 32, 4}, {kDLInt, 32, 1},   {kDLFloat, 8, 1},  {kDLBfloat, 32, 1},
};

struct input {
    const uint8_t *at;
    size_t left;
};

static uint64_t take(struct input *in, int bytes)
{
    uint64_t v = 0;
    for (int i = 0; i < bytes && in->left; i++, in->left--)
        v |= (uint64_t)*in->at++ << (8 * i);
    return v;
}

struct tensors {
    DLTensor t[3];
    int64_t shape[3][MAX_DIMS], strides[3][MAX_DIMS];
    int count;
};

static void *address(int where, uint64_t offset)
{
    switch (where & 3) {
    case 0: return NULL;
    case 1: return arena + offset % ARENA;
    case 2: return (void *)(uintptr_t)4096;
    default: return (void *)(UINTPTR_MAX - 255);
    }
}

static void read_tensors(struct input *in, struct tensors *ts, int count)
{
    const int ndim = (int8_t)take(in, 1) % MAX_DIMS; /* negative too */
    const DLDataType dtype = dtypes[take(in, 1) % (sizeof dtypes / sizeof *dtypes)];
    for (int d = 0; d < ndim; d++)
        ts->shape[0][d] = (int64_t)take(in, 8);
    ts->count = count;
    for (int i = 0; i < count; i++) {
        const unsigned flags = (unsigned)take(in, 1);
        const int where = (int)take(in, 1);
        void *data = address(where, take(in, 2));
        DLTensor *t = &ts->t[i];
        *t = (DLTensor){data, {flags & 4 ? kDLCUDA : kDLCPU, 0}, ndim, dtype, ts->shape[0],
                        NULL, take(in, 8)};
        if (flags & 2) {
            for (int d = 0; d < ndim; d++)
                ts->shape[i][d] = (int64_t)take(in, 8);
            t->shape = ts->shape[i];
        }
        if (flags & 1) {
            for (int d = 0; d < ndim; d++)
                ts->strides[i][d] = (int64_t)take(in, 8);
            t->strides = ts->strides[i];
        }
    }
}

/* The byte address of buffer k's element i, in 128 bits: no overflow. */
static wide element_at(const struct elu_dlpack_view *v, int k, const void *base,
                           size_t i, size_t size)
{
    wide at = (wide)(uintptr_t)base;
    if (!v->strided)
        return at + (wide)i * (wide)size;
    for (int d = (int)v->layout.ndim - 1; d >= 0; d--) {
        const int64_t extent = v->layout.shape[d];
        at += (wide)((int64_t)(i % (size_t)extent)) * v->layout.stride[k][d] *
              (wide)size;
        i /= (size_t)extent;
    }
    return at;
}

static bool in_arena(wide lo, wide hi)
{
    return lo >= (wide)(uintptr_t)arena && hi <= (wide)(uintptr_t)(arena + ARENA);
}

/* What the checks accepted, checked again the slow way. */
static void recheck(const struct elu_dlpack_view *v, size_t size, bool *inside)
{
    const void *base[3] = {v->a, v->b, v->out};
    wide lo[3], hi[3];
    for (int k = 0; k < 3; k++) {
        if (!base[k])
            continue;
        lo[k] = hi[k] = element_at(v, k, base[k], 0, size);
        if (v->strided) { /* extremes: each index at 0 or its end */
            lo[k] = hi[k] = (wide)(uintptr_t)base[k];
            for (int d = 0; d < v->layout.ndim; d++) {
                const wide reach = (wide)(v->layout.shape[d] - 1) *
                                       v->layout.stride[k][d] * (wide)size;
                *(reach < 0 ? &lo[k] : &hi[k]) += reach;
            }
        } else {
            hi[k] += (wide)(v->n - 1) * (wide)size;
        }
        hi[k] += (wide)size;
        if (lo[k] < 0 || hi[k] > (wide)UINTPTR_MAX + 1 ||
            hi[k] - lo[k] > ELU_LAYOUT_MAX_SPAN)
            abort(); /* accepted, yet not addressable */
        *inside = *inside && in_arena(lo[k], hi[k]);
    }
    if (v->n > BRUTE_MAX)
        return;
    for (int k = 0; k < 3; k++) {
        bool same_view = base[k] == v->out;
        for (int d = 0; v->strided && d < v->layout.ndim; d++)
            same_view = same_view && (v->layout.shape[d] == 1 ||
                                      v->layout.stride[k][d] == v->layout.stride[2][d]);
        if (!base[k] || (k < 2 && same_view))
            continue; /* in place: element i read, then written */
        for (size_t i = 0; i < v->n; i++)
            for (size_t j = 0; j < v->n; j++) {
                const wide o = element_at(v, 2, v->out, i, size);
                const wide at = element_at(v, k, base[k], j, size);
                if ((k < 2 || i != j) && (at > o ? at - o : o - at) < (wide)size)
                    abort(); /* an output element shares memory */
            }
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (!ctx) {
        elu_options o;
        elu_options_default(&o);
        o.backend = ELU_BACKEND_CPU;
        o.flags = ELU_NO_DISK_CACHE;
        o.cpu_threads = 1;
        if (elu_ctx_create(&ctx, &o) != ELU_OK)
            abort();
    }
    struct input in = {data, size};
    const int kind = (int)(take(&in, 1) % 3);
    struct tensors ts;
    read_tensors(&in, &ts, kind ? 3 : 2);
    const DLTensor *const t[3] = {&ts.t[0], &ts.t[1], &ts.t[2]};
    const elu_params p = elu_params_elu(ELU_F32, 1.0);
    struct elu_dlpack_view v;
    if (elu_dlpack_view(ctx, &p, t, ts.count, &v) != ELU_OK || v.n == 0)
        return 0;
    const size_t element = elu_dtype_size(v.params.dtype);
    if (v.n > SIZE_MAX / element ||
        elu_check_buffers(ctx, v.a, v.b, v.out, v.n, element, v.strided ? &v.layout : NULL) !=
            ELU_OK)
        return 0;
    bool inside = true;
    recheck(&v, element, &inside);
    if (inside) { /* run it for real: ASan sees any access outside the arena */
        const elu_status status =
            kind == 0 ? elu_run_dlpack(ctx, &p, t[0], &ts.t[1], NULL)
                      : elu_run_backward_dlpack(ctx, &p, t[0], t[1], kind == 2, &ts.t[2], NULL);
        if (status != ELU_OK)
            abort();
    }
    return 0;
}
