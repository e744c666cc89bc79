/* Error-free transformations and double-double arithmetic, the building
 * blocks of the correctly rounded forwards (elu_forward_f32.h,
 * elu_forward_f64.h). Shared text: C includes it, and src/jit.c puts it
 * before those headers for CUDA C++. C gets static inline functions,
 * CUDA __device__ ones; ELU_SLOW_FN marks the rare paths, kept out of
 * line on the GPU so that the common path keeps its registers.
 *
 * A fused a*b + c would break these sums. In C, meson builds every file
 * with -std=c11, under which gcc fuses nothing (cpu_fast.c adds
 * -ffp-contract=off), and no expression here names a product whose
 * rounding matters beside a sum; on the GPU such products are ELU_MUL. */
#ifndef ELU_DD_H
#define ELU_DD_H

#ifdef __CUDACC__
#define ELU_FN static __device__ __forceinline__
#define ELU_SLOW_FN static __device__ __noinline__
#define ELU_TABLE static __device__ const
#define ELU_CONSTANTS static __constant__ /* not const: NVRTC would fold them into literals */
#define ELU_LOAD(p) __ldg(p)
/* A product never fused with a sum that uses it: NVRTC contracts a*b + c
 * into an FMA by default (C under -std=c11 does not), and the error-free
 * transformations need the product rounded. */
#define ELU_MUL(a, b) __dmul_rn(a, b)
/* A slow path's loop left rolled: unrolled, its double-double steps
 * lengthened NVRTC's compile of every module, the quick part that a cold
 * first call waits for included, for a path that runs rarely. */
#define ELU_ROLLED _Pragma("unroll 1")
#else
#include <math.h>
#include <stdbool.h>
#include <string.h>
#define ELU_FN static inline
#define ELU_SLOW_FN static
#define ELU_TABLE static const
#define ELU_CONSTANTS static const
#define ELU_LOAD(p) (*(p))
#define ELU_MUL(a, b) ((a) * (b))
#define ELU_ROLLED
#endif
/* ELU_TABLE for tables read at an index, from memory; ELU_CONSTANTS for
 * the few constants of a fast path, which the GPU's instructions read from
 * constant memory as operands (a literal double takes two instructions to
 * load, over again where registers run short). Neither is written. */

#ifdef __CUDACC__
ELU_FN unsigned long long elu_bits(double v) { return (unsigned long long)__double_as_longlong(v); }
ELU_FN double elu_from_bits(unsigned long long b) { return __longlong_as_double((long long)b); }
#else
ELU_FN unsigned long long elu_bits(double v)
{
    unsigned long long b;
    memcpy(&b, &v, sizeof b);
    return b;
}
ELU_FN double elu_from_bits(unsigned long long b)
{
    double v;
    memcpy(&v, &b, sizeof v);
    return v;
}
#endif

/* v with n added to the upper 32 bits of its encoding (to its exponent
 * field, to scale it by a power of 2): on the GPU one 32-bit add, where a
 * 64-bit one takes two. */
#ifdef __CUDACC__
ELU_FN double elu_add_hi(double v, unsigned n)
{
    return __hiloint2double(__double2hiint(v) + (int)n, __double2loint(v));
}
#else
ELU_FN double elu_add_hi(double v, unsigned n)
{
    return elu_from_bits(elu_bits(v) + ((unsigned long long)n << 32));
}
#endif

/* The upper 32 bits of v's encoding: sign, exponent field, and 20 bits of
 * the significand. */
ELU_FN unsigned elu_hi_bits(double v) { return (unsigned)(elu_bits(v) >> 32); }

/* hi + lo, unevaluated. */
struct elu_dd {
    double hi, lo;
};

/* hi + lo (C++ has no compound literals). */
ELU_FN struct elu_dd elu_dd_of(double hi, double lo)
{
    struct elu_dd v;
    v.hi = hi;
    v.lo = lo;
    return v;
}

/* a + b = hi + lo exactly, hi = a + b rounded (TwoSum). */
ELU_FN struct elu_dd elu_two_sum(double a, double b)
{
    struct elu_dd s;
    s.hi = a + b;
    const double bb = s.hi - a;
    s.lo = (a - (s.hi - bb)) + (b - bb);
    return s;
}

/* The same where a is zero or |a| >= |b| (Fast2Sum). */
ELU_FN struct elu_dd elu_fast_two_sum(double a, double b)
{
    struct elu_dd s;
    s.hi = a + b;
    s.lo = (a - s.hi) + b;
    return s;
}

/* a * b = hi + lo exactly while the product stays normal. */
ELU_FN struct elu_dd elu_two_prod(double a, double b)
{
    struct elu_dd p;
    p.hi = ELU_MUL(a, b);
    p.lo = fma(a, b, -p.hi);
    return p;
}

ELU_FN struct elu_dd elu_dd_add(struct elu_dd a, struct elu_dd b)
{
    const struct elu_dd s = elu_two_sum(a.hi, b.hi);
    return elu_two_sum(s.hi, s.lo + a.lo + b.lo);
}

ELU_FN struct elu_dd elu_dd_mul(struct elu_dd a, struct elu_dd b)
{
    const double p = ELU_MUL(a.hi, b.hi);
    const double e = fma(a.hi, b.hi, -p) + fma(a.hi, b.lo, a.lo * b.hi);
    return elu_two_sum(p, e);
}

#endif
