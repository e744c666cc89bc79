// ELU forward and backward, compiled at run time by NVRTC (see src/jit.c).
//
// src/jit.c puts a few lines before this file:
//   ELU_DTYPE               0 f32, 1 f64, 2 f16, 3 bf16
//   ELU_NEG, ELU_POS, ELU_NIP   (optional) scale*alpha, scale and input_scale
//                           as exact constants of op_t; without them (the
//                           generic kernel) they come from the `c` argument.
// No #include: NVRTC compiles this in ~20 ms, where cuda_fp16.h alone costs
// hundreds of milliseconds, so the half conversions are written out below.
//
// Arithmetic follows PyTorch's ActivationEluKernel.cu operation by operation
// (same types, same order), so results are bit-identical to F.elu on CUDA;
// but the half types' forward, which a specialized module takes from a table
// of correctly rounded results (forward_of).

#if ELU_DTYPE == 1
typedef double op_t;
#else
typedef float op_t;
#endif

struct elu_coef {
    op_t neg, pos, nip;
};

#ifndef ELU_NEG
#define ELU_NEG c.neg
#define ELU_POS c.pos
#define ELU_NIP c.nip
#endif

#if ELU_DTYPE == 0
typedef float elu_t;
__device__ __forceinline__ op_t to_op(elu_t v) { return v; }
__device__ __forceinline__ elu_t from_op(op_t v) { return v; }
#elif ELU_DTYPE == 1
typedef double elu_t;
__device__ __forceinline__ op_t to_op(elu_t v) { return v; }
__device__ __forceinline__ elu_t from_op(op_t v) { return v; }
#elif ELU_DTYPE == 2
typedef unsigned short elu_t;  // IEEE binary16 bits
__device__ __forceinline__ op_t to_op(elu_t v)
{
    float f;
    asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(v));
    return f;
}
__device__ __forceinline__ elu_t from_op(op_t v)
{
    unsigned short h;
    asm("cvt.rn.f16.f32 %0, %1;" : "=h"(h) : "f"(v));
    return h;
}
#else
typedef unsigned short elu_t;  // bfloat16 bits
__device__ __forceinline__ op_t to_op(elu_t v) { return __uint_as_float((unsigned)v << 16); }
__device__ __forceinline__ elu_t from_op(op_t v)
{
    // Round to nearest even, as cvt.rn.bf16.f32 (sm_80+) does; NaN stays NaN.
    unsigned u = __float_as_uint(v);
    if ((u & 0x7fffffffu) > 0x7f800000u)
        return (elu_t)((u >> 16) | 0x40u);
    return (elu_t)((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
}
#endif

__device__ __forceinline__ float op_expm1(float v) { return expm1f(v); }
__device__ __forceinline__ double op_expm1(double v) { return expm1(v); }
__device__ __forceinline__ float op_exp(float v) { return expf(v); }
__device__ __forceinline__ double op_exp(double v) { return exp(v); }

enum { FWD, BWD_FROM_INPUT, BWD_FROM_OUTPUT };

// One element. For FWD `a` is x and `b` unused; for the backward kinds `a`
// is grad_y and `b` the saved input or output. `s <= 0` rather than `s > 0`
// on purpose: a NaN saved value takes the scale branch, as in PyTorch.
template <int K>
__device__ __forceinline__ elu_t apply(elu_t a, elu_t b, const elu_coef &c)
{
    const op_t x = to_op(a);
    if (K == FWD)
        return from_op(x > (op_t)0 ? x * ELU_POS : op_expm1(x * ELU_NIP) * ELU_NEG);
    const op_t s = to_op(b);
    if (K == BWD_FROM_INPUT)
        return from_op(s <= (op_t)0 ? x * ELU_NIP * ELU_NEG * op_exp(s * ELU_NIP)
                                    : x * ELU_POS);
    return from_op(s <= (op_t)0 ? x * ELU_NIP * (s + ELU_NEG) : x * ELU_POS);
}

// 16 bytes per access when every pointer allows it.
#define VEC (16 / sizeof(elu_t))
struct alignas(16) pack {
    elu_t v[VEC];
};

#if ELU_DTYPE >= 2
// Where src/gpu.c puts a specialized module's table (in the module, so that
// loading it allocates the memory): the CPU's correctly rounded forward of
// each of the 65536 inputs.
__device__ elu_t elu_forward_table[65536];
#endif

// The forward of x: for the half types, where src/gpu.c passes a table (a
// specialized module's elu_forward_table), the table's entry; else
// computed.
__device__ __forceinline__ elu_t forward_of(elu_t x, const elu_t *table, const elu_coef &c)
{
#if ELU_DTYPE >= 2
    if (table)
        return __ldg(table + x);
#endif
    return apply<FWD>(x, x, c);
}

// Grid-stride loop with 64-bit indices: any n, any grid. out = f(a, b)
// element by element; b is read only if READS_B.
template <bool READS_B, class F>
__device__ __forceinline__ void map(const elu_t *a, const elu_t *b, elu_t *out,
                                    unsigned long long n, F f)
{
    const unsigned long long first = blockIdx.x * (unsigned long long)blockDim.x + threadIdx.x;
    const unsigned long long stride = (unsigned long long)gridDim.x * blockDim.x;
    unsigned long long done = 0;
    if ((((unsigned long long)a | (unsigned long long)b | (unsigned long long)out) % 16) == 0) {
        const unsigned long long packs = n / VEC;
        for (unsigned long long i = first; i < packs; i += stride) {
            pack pa = ((const pack *)a)[i];
            const pack pb = READS_B ? ((const pack *)b)[i] : pa;
#pragma unroll
            for (int k = 0; k < (int)VEC; k++)
                pa.v[k] = f(pa.v[k], pb.v[k]);
            ((pack *)out)[i] = pa;
        }
        done = packs * VEC;
    }
    for (unsigned long long i = done + first; i < n; i += stride)
        out[i] = f(a[i], READS_B ? b[i] : a[i]);
}

// Any strides (in elements, negative and zero too), rank <= 8: the DLPack
// path for views. Must match struct elu_layout in src/internal.h.
#define ELU_MAX_RANK 8
struct elu_layout {
    long long ndim;
    long long shape[ELU_MAX_RANK];
    long long stride[3][ELU_MAX_RANK];  // of a, b, out
};

// One kernel for the three kinds (chosen at run time): instantiating the
// math once keeps NVRTC's compile time down for this uncommon path.
extern "C" __global__ void elu_strided(const elu_t *a, const elu_t *b, elu_t *out,
                                       unsigned long long n, elu_layout l, elu_coef c,
                                       int kind, const elu_t *table)
{
    const unsigned long long first = blockIdx.x * (unsigned long long)blockDim.x + threadIdx.x;
    const unsigned long long stride = (unsigned long long)gridDim.x * blockDim.x;
    for (unsigned long long i = first; i < n; i += stride) {
        unsigned long long rest = i;
        long long oa = 0, ob = 0, oo = 0;
        // Rolled: unrolled, the 64-bit divisions triple the compile time.
#pragma unroll 1
        for (int d = (int)l.ndim - 1; d >= 0; d--) {
            const long long idx = (long long)(rest % (unsigned long long)l.shape[d]);
            rest /= (unsigned long long)l.shape[d];
            oa += idx * l.stride[0][d];
            ob += idx * l.stride[1][d];
            oo += idx * l.stride[2][d];
        }
        out[oo] = kind == FWD              ? forward_of(a[oa], table, c)
                  : kind == BWD_FROM_INPUT ? apply<BWD_FROM_INPUT>(a[oa], b[ob], c)
                                           : apply<BWD_FROM_OUTPUT>(a[oa], b[ob], c);
    }
}

extern "C" __global__ void elu_forward(const elu_t *x, elu_t *y, unsigned long long n,
                                       elu_coef c, const elu_t *table)
{
    map<false>(x, x, y, n, [&](elu_t a, elu_t) { return forward_of(a, table, c); });
}

#if ELU_DTYPE >= 2
// The half types' forward for large inputs: the table copied once per block
// into shared memory, where a warp's 32 scattered lookups cost a few cycles
// rather than the few dozen they take through L1. src/gpu.c launches one
// block of 1024 threads per SM, with 128 KiB of shared memory.
extern "C" __global__ void elu_forward_shared(const elu_t *x, elu_t *y, unsigned long long n,
                                              const elu_t *table)
{
    extern __shared__ pack shared_table[];
    for (int i = threadIdx.x; i < 65536 / (int)VEC; i += blockDim.x)
        shared_table[i] = ((const pack *)table)[i];
    __syncthreads();
    const elu_t *t = (const elu_t *)shared_table;
    map<false>(x, x, y, n, [&](elu_t a, elu_t) { return t[a]; });
}
#endif

extern "C" __global__ void elu_backward_input(const elu_t *grad_y, const elu_t *x,
                                              elu_t *grad_x, unsigned long long n, elu_coef c)
{
    map<true>(grad_y, x, grad_x, n,
              [&](elu_t g, elu_t s) { return apply<BWD_FROM_INPUT>(g, s, c); });
}

extern "C" __global__ void elu_backward_output(const elu_t *grad_y, const elu_t *y,
                                               elu_t *grad_x, unsigned long long n, elu_coef c)
{
    map<true>(grad_y, y, grad_x, n,
              [&](elu_t g, elu_t s) { return apply<BWD_FROM_OUTPUT>(g, s, c); });
}
