// ELU forward and backward, compiled at run time by NVRTC (see src/jit.c).
//
// src/jit.c puts a few lines before this file, then elu_expm1.h, elu_dd.h
// (f32 and f64), elu_forward_f32.h (f32 alone), elu_forward_f64.h (f64
// alone) and elu_kernel_args.h (what each kernel takes):
//   ELU_DTYPE               0 f32, 1 f64, 2 f16, 3 bf16
//   ELU_NEG, ELU_POS, ELU_NIP   (optional) scale*alpha, scale and input_scale
//                           as exact constants of op_t; without them (the
//                           generic module) every constant comes from the
//                           `c` argument.
//   ELU_EXACT               (optional, f32 and f64) the exact forward takes
//                           the constants: ELU_UNIT_NIP follows when
//                           input_scale is 1.
//   ELU_PART                (the generic module) which of its parts: all its
//                           kernels, or a quick one (elu_kernel_args.h), with
//                           ELU_UNIT_NIP for the quick f32 or f64 forward
//                           for input_scale 1, and ELU_QUICK_PACKS for a
//                           quick forward compiled to PTX (src/jit.h).
// No #include: cuda_fp16.h alone would add hundreds of milliseconds to
// every compile, so the half conversions are written out below.
//
// The forward is exact where the constants allow: for f32 and f64
// correctly rounded by elu_forward_f32.h's and elu_forward_f64.h's
// methods (exact_forward); for the half types correctly rounded, in a specialized
// module by a table (forward_of), or for small inputs computed, the table
// serving where the rounding is in doubt (elu_forward_computed), and in
// the generic module computed, settled in double where in doubt. The
// generic module's constants are arguments rather than literals. Everything else follows PyTorch's
// ActivationEluKernel.cu operation by operation (same types, same order),
// so the backward, and the forward for constants outside the exact
// method's range, are bit-identical to PyTorch's on CUDA.

#if ELU_DTYPE == 1
typedef double op_t;
#else
typedef float op_t;
#endif

// The constants in the dtype's arithmetic (elu_kernel_args.h); a
// specialized module reads none of them.
#if ELU_DTYPE == 1
typedef elu_coef_f64 elu_coef;
#define COEF_OF(args) (args).coef.d
#else
typedef elu_coef_f32 elu_coef;
#define COEF_OF(args) (args).coef.f
#endif

// Which kernels a module holds (elu_kernel_args.h's parts): all of them
// (a specialized module, or a dtype's whole generic module), or one of the
// generic module's quick parts, which serve a dtype's first calls.
#ifndef ELU_PART
#define ELU_PART ELU_PART_ALL_KERNELS
#endif

#ifdef ELU_NEG
#define ELU_SPECIALIZED 1
#else
#define ELU_NEG c.scale_alpha
#define ELU_POS c.scale
#define ELU_NIP c.input_scale
#if ELU_DTYPE <= 1
#define ELU_EXACT 1
#if ELU_PART != ELU_PART_FORWARD_KERNEL
// Chosen at run time, but in the quick generic forward, which comes
// compiled for input_scale 1 (ELU_UNIT_NIP) or for other values: choosing
// at run time would lengthen its compile, which a cold first call waits
// for (docs/DESIGN.md, Specialized and generic kernels).
#define UNIT_NIP (c.flags & ELU_COEF_UNIT_INPUT_SCALE)
#endif
#endif
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
#if __CUDA_ARCH__ >= 800
    // One instruction rather than six: the backward's arithmetic bounds
    // its speed, and this brings bf16's backward up to a copy's pace
    // (docs/DESIGN.md, The half types).
    unsigned short h;
    asm("cvt.rn.bf16.f32 %0, %1;" : "=h"(h) : "f"(v));
    return h;
#else
    // Round to nearest even, as cvt.rn.bf16.f32 does; NaN stays NaN.
    unsigned u = __float_as_uint(v);
    if ((u & 0x7fffffffu) > 0x7f800000u)
        return (elu_t)((u >> 16) | 0x40u);
    return (elu_t)((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
#endif
}
#endif

__device__ __forceinline__ float op_expm1(float v) { return expm1f(v); }
__device__ __forceinline__ double op_expm1(double v) { return expm1(v); }
__device__ __forceinline__ float op_exp(float v) { return expf(v); }
__device__ __forceinline__ double op_exp(double v) { return exp(v); }

// The kinds of elu_strided (elu_kernel_args.h), which apply takes too.
enum {
    FWD = ELU_KIND_FORWARD,
    BWD_FROM_INPUT = ELU_KIND_BACKWARD_INPUT,
    BWD_FROM_OUTPUT = ELU_KIND_BACKWARD_OUTPUT,
    FWD_PYTORCH = ELU_KIND_FORWARD_PYTORCH
};

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

#if defined(ELU_EXACT) && !defined(UNIT_NIP)
#ifdef ELU_UNIT_NIP
#define UNIT_NIP true
#else
#define UNIT_NIP false
#endif
#endif

#if defined(ELU_EXACT) && ELU_DTYPE <= 1
// The f32 and f64 forward, correctly rounded (elu_forward_f32.h,
// elu_forward_f64.h): the CPU's results, bit for bit. A specialized
// module's scale of 1 leaves x > 0 as it is (NVRTC keeps a product by 1).
__device__ __forceinline__ op_t exact_forward(op_t x, const elu_coef &c)
{
    if (x > (op_t)0)
        return ELU_POS == (op_t)1 ? x : x * ELU_POS;
#if ELU_DTYPE == 0
    return elu_f32_forward_neg(x, ELU_NEG, ELU_NIP, UNIT_NIP);
#else
#ifdef ELU_SPECIALIZED
    return elu_f64_forward_neg(x, ELU_NEG, ELU_NIP, UNIT_NIP, ELU_NEG == 1.0);
#else
    return elu_f64_forward_neg(x, ELU_NEG, ELU_NIP, UNIT_NIP, false);
#endif
#endif
}
#endif

// BYTES per access when every pointer allows it: 16, or 8 where more
// threads with fewer elements each pay (elu_forward_computed).
template <int BYTES>
struct alignas(BYTES) pack {
    elu_t v[BYTES / sizeof(elu_t)];
};

#if ELU_DTYPE >= 2 && defined(ELU_SPECIALIZED)
// Where src/modules.c puts a specialized module's table (in the module, so that
// loading it allocates the memory): the CPU's correctly rounded forward of
// each of the 65536 inputs.
__device__ elu_t elu_forward_table[65536];
#define HAS_FORWARD_TABLE true
#else
#define HAS_FORWARD_TABLE false
#endif

#if ELU_DTYPE >= 2
// A half type's forward of v > 0 (x's value): scale * v correctly rounded.
// The product rounded to odd in float (toward zero, its last bit set
// where that dropped anything) and then once to the type is the exact
// product rounded once: float keeps 13 bits more than f16, 16 more than
// bf16. That holds while the FMA shows the dropped part, a multiple of
// 2^-34 of the product's leading bit: a product of 2^-115 or more (f16's
// inputs are 2^-24 or more: scale >= 2^-91 does); settled apart below. In
// f16's specialized forward, computing these halves the table lookups,
// which bound it: faster than looking every input up, through L1 or in a
// table in shared memory. bf16's specialized forward, whose lookups hit
// L1 more often, looks them up (docs/DESIGN.md, The half types).
__device__ __forceinline__ elu_t settle(elu_t x, const elu_t *table, const elu_coef &c);
__device__ __forceinline__ elu_t positive_forward(float v, elu_t x, const elu_t *table,
                                                  const elu_coef &c)
{
    const float p = __fmul_rz(v, ELU_POS);
    const float dropped = fmaf(v, ELU_POS, -p); // exact; NaN for v = inf
    const bool shown = ELU_DTYPE == 2 ? ELU_POS >= 0x1p-91f : p >= 0x1p-115f;
    if (!shown)
        return settle(x, table, c);
    return from_op(__uint_as_float(__float_as_uint(p) | (dropped < 0.0f || dropped > 0.0f)));
}
#endif

#if ELU_DTYPE >= 2
// The operands stream past the forward table, which must stay in cache:
// its entries are loaded evict-last from L1, and the forward's operand
// packs evict-first from L2 (load_pack, store_pack), where the target knows
// these hints (sm_80 and later). That speeds the half types' forward both
// from memory and in L2. f32 and f64, with no table, keep plain loads and
// stores: marking them evict-first gained nothing from memory and lost in
// L2 (docs/DESIGN.md, The half types).
#if __CUDA_ARCH__ >= 800
#define ELU_CACHE_HINTS 1
#endif
__device__ __forceinline__ elu_t table_entry(const elu_t *table, elu_t x)
{
#ifdef ELU_CACHE_HINTS
    elu_t r;
    asm("ld.global.nc.L1::evict_last.u16 %0, [%1];" : "=h"(r) : "l"(table + x));
    return r;
#else
    return __ldg(table + x);
#endif
}
#endif

#if ELU_DTYPE >= 2
// The half types' forward computed in float, its rare doubtful roundings
// settled apart: by the table in a specialized module's
// elu_forward_computed, for inputs that sit in L2 (there each kernel
// starts with the table out of L1, and a lookup is a second trip to L2 for
// nearly every negative element); in double in the generic module, which
// has no table (settle).

__device__ __forceinline__ float fast_exp2(float v)
{
    float r;
    asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(r) : "f"(v));
    return r;
}

// 2^b - 1 for b <= 0, zero and NaN, within 2^-21.2 of it (relatively,
// for normal b):
// below b = -1/2, ex2.approx less 1 (its relative error is at most
// 2^-22.7, measured on the H200 over every float in [-64, 64], and
// subtracting 1 multiplies it by 2^b / (1 - 2^b), at most 2.41 there);
// above, b times a polynomial of degree 4 that comes within 2^-24.9 of
// (2^b - 1) / b (a minimax fit), which keeps the sign of a zero b.
__device__ __forceinline__ float exp2m1_approx(float b)
{
    const float big = fast_exp2(b) - 1.0f;
    float r = fmaf(b, 0x1.2ea1ecp-10f, 0x1.38a606p-7f);
    r = fmaf(r, b, 0x1.c693d0p-5f);
    r = fmaf(r, b, 0x1.ebfb6cp-3f);
    r = fmaf(r, b, 0x1.62e430p-1f);
    return b < -0.5f ? big : b * r;
}

// v * k; in a specialized module v itself where k is 1 (the compiler keeps
// a product by 1). The generic module multiplies: testing k would cost as
// much, and NVRTC would copy the loop for each outcome.
#ifdef ELU_SPECIALIZED
#define TIMES1(v, k) ((k) == 1.0f ? (v) : (v) * (k))
#else
#define TIMES1(v, k) ((v) * (k))
#endif

// Whether the computed forward may serve these constants: x*input_scale*
// log2(e), with the last two as one float, stays a normal float wherever
// the result is at least the type's least normal (f16's inputs are at
// least 2^-24 in size, bf16's 2^-133, whose results need |scale*alpha| <=
// 2^15, as rounds_surely's zeros do), and the product of the constants is
// finite and normal; input_scale > 0, so that x <= 0 gives a <= 0.
#if ELU_DTYPE == 2
#define COMPUTABLE (ELU_NIP >= 0x1p-60f && ELU_NIP <= 0x1p126f)
#else
#define COMPUTABLE \
    (ELU_NIP >= 0x1p-125f && ELU_NIP <= 0x1p126f && fabsf(ELU_NEG) <= 0x1p15f)
#endif

// Whether y, the computed forward (exp2m1_approx's error, three roundings
// of products and one of the argument: within 2^-20.6 of the exact
// result, 10.6 of y's ulps), rounds to the type as the exact result does:
// where the bits that the rounding drops (13 for f16, 16 for bf16) are
// more than 16 ulps from half their range (a midpoint between two
// neighbours of the type), both round alike. A zero y is the exact
// result's rounding, of its sign: it comes from a zero x, a zero scale or
// scale*alpha, or a product below 2^-150, which the type rounds to zero
// (COMPUTABLE keeps the argument's rounding in bounds there). Not for y
// below the type's least normal (f16's 2^-14, where more bits drop; for
// bf16 2^-100), nor inf or NaN: the caller settles those apart. With
// uniform low bits, 33 in 8192 f16 results fail the test (1 in 250), and
// 33 in 65536 bf16 ones.
__device__ __forceinline__ bool rounds_surely(float y)
{
#if ELU_DTYPE == 2
    const unsigned least = 0x38800000u, dropped = 0x1fffu;
#else
    const unsigned least = 0x0d800000u, dropped = 0xffffu;
#endif
    const unsigned u = __float_as_uint(y) & 0x7fffffffu;
    return (u - least < 0x7f800000u - least || u == 0) &&
           (u & dropped) - (dropped / 2 + 1 - 16) > 32u;
}

#ifndef ELU_SPECIALIZED
// expm1(a) for a in [-17, 700] as hi + *lo, within 2^-51 of it, in double,
// by elu_expm1.h's constants: a = k*ln2 + r (ln2 in two parts,
// |r| <= ln2/2 but for rounding), expm1(r) = r + t, t = r^2/2 + r^3*Q(r),
// and expm1(a) = 2^k*expm1(r) + (2^k - 1). Where k = 0 (r = a), *lo is
// what the sum r + t leaves out, exactly, so that the sign of what the
// result misses is known however small t (a tiny a whose product lands on
// a tie); else *lo = 0.
// Written out rather than CUDA's expm1, whose libdevice a first compile
// would load and parse.
__device__ __forceinline__ double half_slow_expm1(double a, double *lo)
{
#define HORNER4(p, r, a, b, c, d) fma(fma(fma(fma(p, r, a), r, b), r, c), r, d)
#define Q_OF(r, q9, q8, q7, q6, q5, q4, q3, q2, q1, q0) \
    HORNER4(HORNER4(fma(q9, r, q8), r, q7, q6, q5, q4), r, q3, q2, q1, q0)
#define APPLY(macro, args) macro args
    const double kf = fma(a, ELU_EXPM1_INV_LN2, ELU_EXPM1_ROUND);
    const double k = kf - ELU_EXPM1_ROUND;
    const long long ki = __double_as_longlong(kf) - __double_as_longlong(ELU_EXPM1_ROUND);
    const double r = fma(-k, ELU_EXPM1_LN2_LO, fma(-k, ELU_EXPM1_LN2, a));
    const double t = r * r * fma(r, APPLY(Q_OF, (r, ELU_EXPM1_POLY)), 0.5);
    const double p2k = __longlong_as_double((1023LL + ki) << 52);
    if (ki != 0) {
        *lo = 0.0;
        return fma(p2k, r + t, p2k - 1.0);
    }
    const double e = __dadd_rn(r, t); // r = a, |t| < |r|: Fast2Sum, never fused
    *lo = t - (e - r);
    return e;
#undef HORNER4
#undef Q_OF
#undef APPLY
}

// The correctly rounded forward of v, x's value, through double: x*scale
// and x*input_scale are exact there (11 or 8 bits by 24), and the result
// y = hi + lo (hi the rounded product by scale*alpha, lo what it left out)
// lies within 2^-50 of the exact one. Rounding y to odd in float (toward
// zero, the last bit set where anything lies beyond: 24 bits, at least two
// more than the type) and then to the type rounds as the exact result does
// unless that lies within 2^-50 of a midpoint of the type. Below a = -17,
// e^a < 2^-24 and the exact result lies strictly between -scale*alpha and
// the float next to it toward zero, which is then the odd rounding, its
// last bit set (at a = -inf, -scale*alpha itself). Above a = 700 (a negative input_scale), |y| > 2^-149 *
// e^700 > 2^800 all the same, rounding to infinity, and 2^k would leave
// double's range. Out of line: the computed forward sends here about 1
// element in 250, its infinities, NaNs and tiny results, and every x <= 0
// for constants it does not take; inlined in every element of a pack this
// would lengthen NVRTC's compile.
__device__ __noinline__ elu_t exact_half_forward(float v, float neg, float pos, float nip)
{
    if (v != v) // the one NaN the CPU gives, as a specialized module's table
        return ELU_DTYPE == 2 ? 0x7e00 : 0x7fc0;
    const double a = (double)v * nip;
    // scale*alpha 0: a zero of expm1(a)'s sign times its (NaN for a = +inf);
    // a = -inf: expm1 is -1 exactly, the result -scale*alpha rounded once.
    if (v <= 0.0f && neg == 0.0f)
        return from_op((float)((a < 0.0 ? -1.0 : a) * neg));
    if (v <= 0.0f && a == -__longlong_as_double(0x7ff0000000000000LL))
        return from_op(-neg);
    if (v <= 0.0f && a < -17.0) {
        const unsigned below = (__float_as_uint(neg) & 0x7fffffffu) - 1u;
        return from_op(__uint_as_float(below | 1u | (neg > 0.0f ? 0x80000000u : 0u)));
    }
    double hi, lo = 0.0;
    if (v > 0.0f || a == 0.0) { // exact; a = 0 keeps its sign: expm1(-0) is -0
        hi = v > 0.0f ? (double)v * pos : a * neg;
    } else {
        double e_lo;
        const double e = half_slow_expm1(a > 700.0 ? 700.0 : a, &e_lo);
        hi = e * neg;
        lo = fma(e, (double)neg, -hi) + e_lo * neg;
    }
    float odd = __double2float_rz(hi);
    const bool on_float = (double)odd == hi;
    if (on_float && lo != 0.0 && (lo < 0.0) != (hi < 0.0)) // just inside odd, toward zero
        odd = __uint_as_float(__float_as_uint(odd) - 1u);
    if (!on_float || lo != 0.0)
        odd = __uint_as_float(__float_as_uint(odd) | 1u);
    return from_op(odd);
}
#endif

// The rare element whose computed forward may round otherwise than the
// exact result: the table's entry in a specialized module, else computed
// in double.
__device__ __forceinline__ elu_t settle(elu_t x, const elu_t *table, const elu_coef &c)
{
#ifdef ELU_SPECIALIZED
    return table_entry(table, x);
#else
    return exact_half_forward(to_op(x), ELU_NEG, ELU_POS, ELU_NIP);
#endif
}

// v > 0 ? if_positive : otherwise, as a select: written so, NVRTC branches
// around the costlier side, which diverges in nearly every warp.
__device__ __forceinline__ float positive_or(float v, float if_positive, float otherwise)
{
    float r;
    asm("{\n\t.reg .pred p;\n\tsetp.gt.f32 p, %1, 0f00000000;\n\t"
        "selp.f32 %0, %2, %3, p;\n\t}" : "=f"(r) : "f"(v), "f"(if_positive), "f"(otherwise));
    return r;
}

// y, the forward of x computed in float, and whether it rounds to the type
// as the exact result does (rounds_surely); never where the constants are
// not COMPUTABLE and x <= 0 (their exponent's factor is then NaN). Both
// sides of the sign are computed and one chosen: a branch would diverge
// in nearly every warp.
__device__ __forceinline__ bool computed_value(elu_t x, const elu_coef &c, float *y)
{
    const float log2e_nip = COMPUTABLE ? ELU_NIP * 0x1.715476p0f : __int_as_float(0x7fffffff);
    const float v = to_op(x);
    *y = positive_or(v, TIMES1(v, ELU_POS), TIMES1(exp2m1_approx(v * log2e_nip), ELU_NEG));
    return rounds_surely(*y);
}

// The correctly rounded forward of x: computed, else settled apart.
__device__ __forceinline__ elu_t computed_forward(elu_t x, const elu_t *table, const elu_coef &c)
{
    float y;
    return computed_value(x, c, &y) ? from_op(y) : settle(x, table, c);
}

#undef TIMES1
#endif

// The forward of x. For a half type in a specialized module, the entry of
// the table (the module's own, which src/modules.c passes, refusing such a
// binary without one), but for positive inputs with scale 1 and f16's
// positive inputs with any other scale; in the generic module, which has
// no table, computed (computed_forward), its quick part too (settling
// apart compiles as soon as computing every element in double does). For
// f32 and f64, computed, exactly
// where the constants allow: the generic module's forward is exact only,
// and for constants outside the exact method's range (c.flags lacks
// ELU_COEF_EXACT) src/launch.c runs elu_strided's FWD_PYTORCH. Only what a
// module uses is compiled: NVRTC's time grows with the code.
__device__ __forceinline__ elu_t forward_of(elu_t x, const elu_t *table, const elu_coef &c)
{
#if ELU_DTYPE >= 2 && !defined(ELU_SPECIALIZED)
    return computed_forward(x, table, c);
#elif ELU_DTYPE >= 2
    // With scale 1 (ELU and CELU), x > 0 (bits 1 to +inf's) is its own
    // result: bf16 then looks the table up for half the elements. f16 then
    // leaves out its positive arithmetic altogether (NVRTC cannot prove it
    // dead after this test), which speeds its forward in L2 and from memory
    // (docs/DESIGN.md, The half types).
    const unsigned positive_max = ELU_DTYPE == 2 ? 0x7c00u : 0x7f80u;
    if (ELU_POS == 1.0f && (unsigned)x - 1u < positive_max)
        return x;
#if ELU_DTYPE == 2
    const float v = to_op(x);
    if (v > 0.0f && ELU_POS != 1.0f)
        return positive_forward(v, x, table, c);
#endif
    return table_entry(table, x);
#elif defined(ELU_EXACT)
    return exact_forward(x, c);
#else
    return apply<FWD>(x, x, c);
#endif
}

// The most packs of 16 bytes each thread handles per pass, all loaded
// before any is computed. src/tune.c knows these numbers (elu_max_packs)
// and sizes the grid for as many or fewer: a larger grid leaves the last
// packs of each thread out of range. Two packs in flight per thread pay
// for large inputs, most where there is much to compute (f32 and f64; f16
// does as well with one). More packs cost registers, so the SM holds
// fewer threads, and with 4 both ran slower. The backward does as well
// with one pack as with two, and a second would lengthen NVRTC's compile
// of every f32 or f64 specialization (docs/DESIGN.md, Launch geometry).
#define FORWARD_UNROLL 2
#define BACKWARD_UNROLL 1

// One pack of the operands, in or out: evict-first from L2 around a
// forward table (a half type's forward, where the target allows: see
// table_entry), else plain. The backward has no table to keep, and runs
// faster with plain loads and stores. The cost: an evict-first forward
// right after a kernel that left normal lines in L2 (such a backward) runs
// a little slower (docs/DESIGN.md, The half types).
// The load's asm is not volatile: it reads what no thread writes before
// reading it (in place, each element is read by the thread that then
// writes it), so it may move freely.
#ifdef ELU_CACHE_HINTS
__device__ __forceinline__ unsigned long long evict_first()
{
    unsigned long long policy;
    asm("createpolicy.fractional.L2::evict_first.b64 %0, 1.0;" : "=l"(policy));
    return policy;
}
#endif
template <bool AROUND_TABLE, int BYTES>
__device__ __forceinline__ pack<BYTES> load_pack(const pack<BYTES> *p)
{
#ifdef ELU_CACHE_HINTS
    if constexpr (AROUND_TABLE) {
        static_assert(BYTES == 16, "hinted accesses take 16 bytes");
        uint4 w;
        asm("ld.global.L2::cache_hint.v4.u32 {%0, %1, %2, %3}, [%4], %5;"
            : "=r"(w.x), "=r"(w.y), "=r"(w.z), "=r"(w.w) : "l"(p), "l"(evict_first()));
        pack<16> v;
        *(uint4 *)&v = w;
        return v;
    }
#endif
    // Through a vector type: at -Ofc=min (the quick forward) NVRTC loads a
    // pack copied as a struct one element at a time.
    static_assert(BYTES == 16 || BYTES == 8, "packs of 16 or 8 bytes");
    pack<BYTES> v;
    if constexpr (BYTES == 16)
        *(uint4 *)&v = *(const uint4 *)p;
    else
        *(uint2 *)&v = *(const uint2 *)p;
    return v;
}
template <bool AROUND_TABLE, int BYTES>
__device__ __forceinline__ void store_pack(pack<BYTES> *p, const pack<BYTES> &v)
{
#ifdef ELU_CACHE_HINTS
    if constexpr (AROUND_TABLE) {
        static_assert(BYTES == 16, "hinted accesses take 16 bytes");
        const uint4 w = *(const uint4 *)&v;
        asm volatile("st.global.L2::cache_hint.v4.u32 [%0], {%1, %2, %3, %4}, %5;"
                     :: "l"(p), "r"(w.x), "r"(w.y), "r"(w.z), "r"(w.w), "l"(evict_first())
                     : "memory");
        return;
    }
#endif
    *p = v;
}

// Ask L2 for the element (or pack) PREFETCH_AHEAD elements past x[i],
// where it lies below n: the data that threads further on (in blocks
// started later, or not yet started) will load, so that their loads find
// it in L2. A thread keeps only its own loads in flight, too few bytes to
// reach the memory's bandwidth where it computes much per element (the
// generic kernels, constants as arguments) or takes a single element or
// pack (the quick forward). The specialized kernels, at a copy's speed already, go
// without (docs/DESIGN.md, Prefetching).
#define PREFETCH_AHEAD (1ull << 19)
template <class T>
__device__ __forceinline__ void prefetch_ahead(const T *x, unsigned long long i,
                                               unsigned long long n)
{
    const unsigned long long ahead = i + PREFETCH_AHEAD * sizeof(elu_t) / sizeof(T);
    if (ahead < n)
        asm volatile("prefetch.global.L2 [%0];" ::"l"(x + ahead));
}

// Programmatic dependent launch (src/launch.c's launch, on sm_90 and later):
// wait until the kernels before this one in the stream have completed and
// their writes show, before any access to memory; then let the next kernel
// launched so start its blocks, which wait likewise. Without such a launch
// both are no-ops.
__device__ __forceinline__ void after_previous_kernels()
{
#if __CUDA_ARCH__ >= 900
    asm volatile("griddepcontrol.wait;" ::: "memory");
    asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
}

// A function of one element, as map applies it: to each element of a
// pack in turn (fast_then_whole takes a pack its own way).
template <class F>
struct each_element {
    F f;
    __device__ elu_t operator()(elu_t a, elu_t b) const { return f(a, b); }
    template <int N>
    __device__ void pack(elu_t (&a)[N], const elu_t (&b)[N]) const
    {
#pragma unroll
        for (int k = 0; k < N; k++)
            a[k] = f(a[k], b[k]);
    }
};
template <class F>
__device__ __forceinline__ each_element<F> each(F f)
{
    return {f};
}

// A forward as map applies it, a pack at a time: `fast` computes an element
// (in op_t) and says whether its result stands, `whole` answers for the
// rare rest after the pack, so that the pack's common path has no branch
// and its elements' arithmetic interleaves.
template <class Fast, class Whole>
struct fast_then_whole {
    Fast fast;
    Whole whole;
    __device__ elu_t operator()(elu_t x, elu_t) const
    {
        op_t y;
        return fast(x, &y) ? from_op(y) : whole(x);
    }
    template <int N>
    __device__ void pack(elu_t (&v)[N], const elu_t (&)[N]) const
    {
        elu_t out[N];
        unsigned unsure = 0;
#pragma unroll
        for (int k = 0; k < N; k++) {
            op_t y;
            unsure |= (unsigned)!fast(v[k], &y) << k;
            out[k] = from_op(y);
        }
        if (unsure) {
#pragma unroll
            for (int k = 0; k < N; k++)
                if (unsure >> k & 1)
                    out[k] = whole(v[k]);
        }
#pragma unroll
        for (int k = 0; k < N; k++)
            v[k] = out[k];
    }
};
template <class Fast, class Whole>
__device__ __forceinline__ fast_then_whole<Fast, Whole> fast_then(Fast fast, Whole whole)
{
    return {fast, whole};
}

// out = f(a, b), a pack at a time (f.pack) and the rest element by
// element (f itself), with 64-bit indices; b is read only if READS_B (the
// backward: the forward alone reads one operand, and may look up a
// table). U packs of BYTES per thread per pass (the forward's 16-byte
// packs go around its table), from element `head` on: src/launch.c's
// pack_head, the elements up to the first pack boundary where the three
// pointers are equally misaligned (a view one element in, say), else n
// (no packs). Those go one by one, with those after the last whole pack.
// The grid: one pass over the packs (src/launch.c), but for the f32 and f64
// backward's, which may take a few equal ones. In one pass, a thread's U
// packs lie a grid apart, or if CONTIGUOUS a block apart, each block
// taking U * blockDim.x packs in a row (elu_forward_contiguous).
template <int U, bool READS_B, int BYTES = 16, bool CONTIGUOUS = false, class F>
__device__ __forceinline__ void map(const elu_t *a, const elu_t *b, elu_t *out,
                                    unsigned long long n, unsigned long long head, F f)
{
    after_previous_kernels();
    const int per_pack = BYTES / sizeof(elu_t);
    const bool around_table = HAS_FORWARD_TABLE && !READS_B && BYTES == 16;
#ifdef ELU_SPECIALIZED
    constexpr bool PREFETCHES = false;
#else
    constexpr bool PREFETCHES = !READS_B;
#endif
    const unsigned long long first = blockIdx.x * (unsigned long long)blockDim.x + threadIdx.x;
    const unsigned long long stride = (unsigned long long)gridDim.x * blockDim.x;
    const unsigned long long packs = (n - head) / per_pack;
    typedef pack<BYTES> pack_t;
    const pack_t *pa_in = (const pack_t *)(a + head), *pb_in = (const pack_t *)(b + head);
    pack_t *p_out = (pack_t *)(out + head);
    // The rest, one by one: [0, head) and what follows the packs. f32 and
    // f64 take it first, so that what only it needs (head, n and what it
    // derives from them) is dead in the packs' loop, which then needs
    // fewer registers: an SM may hold more blocks, which spares some sizes
    // a part-full last wave. The half types ran slower with it and take
    // it last (docs/DESIGN.md, Launch geometry).
    constexpr bool REST_FIRST = sizeof(elu_t) >= 4;
    const auto rest = [&] {
        const unsigned long long left = n - packs * per_pack;
        for (unsigned long long r = first; r < left; r += stride) {
            const unsigned long long i = r < head ? r : r + packs * per_pack;
            out[i] = f(a[i], READS_B ? b[i] : a[i]);
        }
    };
    // Where the grid covers the packs in one pass, no loop: the forward, but
    // for the half types' table kernel, which runs slower without it, and
    // the half types' backward, which runs faster. The f32 and f64 backward
    // keep the loop and their balanced grid (src/launch.c's
    // balanced_blocks), faster together than one pass (docs/DESIGN.md,
    // Launch geometry).
    constexpr bool ONE_PASS =
        READS_B ? sizeof(elu_t) == 2 : sizeof(elu_t) >= 4 || BYTES == 8;
    const auto pass = [&](unsigned long long i, unsigned long long step) {
        pack_t pa[U], pb[U];
#pragma unroll
        for (int u = 0; u < U; u++) {
            const unsigned long long j = i + u * step;
            if constexpr (PREFETCHES)
                prefetch_ahead(pa_in, j, packs);
            if (j < packs) {
                pa[u] = load_pack<around_table>(pa_in + j);
                pb[u] = READS_B ? load_pack<false>(pb_in + j) : pa[u];
            }
        }
#pragma unroll
        for (int u = 0; u < U; u++) {
            const unsigned long long j = i + u * step;
            if (j < packs) {
                f.pack(pa[u].v, pb[u].v);
                store_pack<around_table>(p_out + j, pa[u]);
            }
        }
    };
    if constexpr (REST_FIRST)
        rest();
    if constexpr (ONE_PASS) {
        const unsigned long long i =
            CONTIGUOUS ? blockIdx.x * (unsigned long long)(U * blockDim.x) + threadIdx.x : first;
        if (i < packs)
            pass(i, CONTIGUOUS ? blockDim.x : stride);
    } else {
        for (unsigned long long i = first; i < packs; i += U * stride)
            pass(i, stride);
    }
    if constexpr (!REST_FIRST)
        rest();
}

// forward_of as map takes it: in the generic module a half type's
// computed forward, fast then whole (fast_then_whole); else element by
// element.
#if ELU_DTYPE >= 2
__device__ __forceinline__ auto computed_packs(const elu_t *table, const elu_coef &c)
{
    return fast_then([&c](elu_t x, float *y) { return computed_value(x, c, y); },
                     [table, &c](elu_t x) { return settle(x, table, c); });
}
#endif
__device__ __forceinline__ auto forward_packs(const elu_t *table, const elu_coef &c)
{
#if ELU_DTYPE >= 2 && !defined(ELU_SPECIALIZED)
    return computed_packs(table, c);
#else
    return each([table, &c](elu_t a, elu_t) { return forward_of(a, table, c); });
#endif
}

#if ELU_PART == ELU_PART_FORWARD_KERNEL && defined(ELU_QUICK_PACKS)
// The quick generic forward compiled to PTX (src/jit.h's elu_quick_packs):
// the PTX built into libelu, whose NVRTC share is paid at build time, or
// NVRTC's for a GPU newer than it; the driver compiles it at full
// optimization. One pack per thread (ELU_QUICK_PACK_BYTES) in one pass:
// enough bytes in flight to come near a copy's pace, forward_of inlined a
// few times rather than 17 as in elu_forward's two packs.
extern "C" __global__ void elu_forward(const elu_contiguous_args p)
{
    const elu_t *x = (const elu_t *)p.a, *table = (const elu_t *)p.table;
    const elu_coef &c = COEF_OF(p);
    map<1, false, ELU_QUICK_PACK_BYTES(sizeof(elu_t))>(x, x, (elu_t *)p.out, p.n, p.head,
                                                       forward_packs(table, c));
}
#elif ELU_PART == ELU_PART_FORWARD_KERNEL
// The quick generic forward compiled by NVRTC to a cubin: what a cold
// first call of a dtype waits for NVRTC to compile, serving until the dtype's whole generic module is
// built. So it must compile fast: forward_of inlined once rather than 17
// times as in map, one element per thread, and no loop: the grid covers n,
// in rows of blocks (src/launch.c). A grid-stride loop, or elements queued
// in registers, would compile slower (docs/DESIGN.md, Specialized and
// generic kernels). It has no use for `head`.
extern "C" __global__ void elu_forward(const elu_contiguous_args p)
{
    const elu_t *x = (const elu_t *)p.a, *table = (const elu_t *)p.table;
    elu_t *y = (elu_t *)p.out;
    const elu_coef &c = COEF_OF(p);
    after_previous_kernels();
    const unsigned long long i =
        (blockIdx.y * (unsigned long long)gridDim.x + blockIdx.x) * blockDim.x + threadIdx.x;
    if (i < p.n) {
        prefetch_ahead(x, i, p.n);
        y[i] = forward_of(x[i], table, c);
    }
}
#elif ELU_PART == ELU_PART_ALL_KERNELS
// The forward in packs, as map takes them: a specialized module's, or the
// whole generic module's, which serves constants that have no module of
// their own.
extern "C" __global__ void elu_forward(const elu_contiguous_args p)
{
    const elu_t *x = (const elu_t *)p.a, *table = (const elu_t *)p.table;
    const elu_coef &c = COEF_OF(p);
    map<FORWARD_UNROLL, false>(x, x, (elu_t *)p.out, p.n, p.head, forward_packs(table, c));
}

#if ELU_DTYPE <= 1
// elu_forward with each block's packs in a row rather than a grid apart,
// for operands that outgrow L2 (src/launch.c's contiguous_packs). A kernel of
// its own, not an argument of elu_forward: choosing at run time, by a flag
// or by the grid's row and step as arguments, slowed the forward where the
// operands sit in L2. The cost is a longer NVRTC compile of every f32 or
// f64 specialized module (docs/DESIGN.md, Launch geometry and Compiling).
extern "C" __global__ void elu_forward_contiguous(const elu_contiguous_args p)
{
    const elu_t *x = (const elu_t *)p.a, *table = (const elu_t *)p.table;
    const elu_coef &c = COEF_OF(p);
    map<FORWARD_UNROLL, false, 16, true>(x, x, (elu_t *)p.out, p.n, p.head,
                                         forward_packs(table, c));
}
#endif

#if ELU_DTYPE >= 2
// The half types' forward for small inputs (src/launch.c chooses it by n),
// computed where the constants allow, one pack of 8 bytes per thread:
// half the elements per thread, so twice the threads wait for their loads
// at once: faster there than packs of 16 bytes, and than the table. One
// pack rather than two, as the rule gives every size this kernel takes: a
// second pack would lengthen NVRTC's compile of the module, for no speed
// (docs/DESIGN.md, The half types).
extern "C" __global__ void elu_forward_computed(const elu_contiguous_args p)
{
    const elu_t *x = (const elu_t *)p.a, *table = (const elu_t *)p.table;
    const elu_coef &c = COEF_OF(p);
    map<1, false, 8>(x, x, (elu_t *)p.out, p.n, p.head, computed_packs(table, c));
}
#endif

#endif

#if ELU_PART != ELU_PART_FORWARD_KERNEL
// Any strides, rank <= ELU_MAX_RANK: the DLPack path for views. One kernel
// for every kind (chosen at run time): instantiating the math once keeps
// NVRTC's compile time down for this uncommon path.
extern "C" __global__ void elu_strided(const elu_strided_args p)
{
    const elu_t *a = (const elu_t *)p.a, *b = (const elu_t *)p.b;
    const elu_t *table = (const elu_t *)p.table;
    elu_t *out = (elu_t *)p.out;
    const unsigned long long n = p.n;
    const elu_layout &l = p.layout;
    const elu_coef &c = COEF_OF(p);
    const int kind = p.kind;
    after_previous_kernels();
    const unsigned long long first = blockIdx.x * (unsigned long long)blockDim.x + threadIdx.x;
    const unsigned long long stride = (unsigned long long)gridDim.x * blockDim.x;
    for (unsigned long long i = first; i < n; i += stride) {
        unsigned long long rest = i;
        long long oa = 0, ob = 0, oo = 0;
        // Rolled: unrolled, the 64-bit divisions would make the module's
        // compile several times longer (docs/DESIGN.md, Compiling).
#pragma unroll 1
        for (int d = (int)l.ndim - 1; d >= 0; d--) {
            const long long idx = (long long)(rest % (unsigned long long)l.shape[d]);
            rest /= (unsigned long long)l.shape[d];
            oa += idx * l.stride[0][d];
            ob += idx * l.stride[1][d];
            oo += idx * l.stride[2][d];
        }
        out[oo] = kind == FWD              ? forward_of(a[oa], table, c)
                  : kind == FWD_PYTORCH    ? apply<FWD>(a[oa], a[oa], c)
                  : kind == BWD_FROM_INPUT ? apply<BWD_FROM_INPUT>(a[oa], b[ob], c)
                                           : apply<BWD_FROM_OUTPUT>(a[oa], b[ob], c);
    }
}

// grad_x from grad_y (p.a) and the saved x or y (p.b).
extern "C" __global__ void elu_backward_input(const elu_contiguous_args p)
{
    const elu_coef &c = COEF_OF(p);
    const auto f = [&](elu_t g, elu_t s) { return apply<BWD_FROM_INPUT>(g, s, c); };
    map<BACKWARD_UNROLL, true>((const elu_t *)p.a, (const elu_t *)p.b, (elu_t *)p.out, p.n, p.head,
                               each(f));
}

extern "C" __global__ void elu_backward_output(const elu_contiguous_args p)
{
    const elu_coef &c = COEF_OF(p);
    const auto f = [&](elu_t g, elu_t s) { return apply<BWD_FROM_OUTPUT>(g, s, c); };
    map<BACKWARD_UNROLL, true>((const elu_t *)p.a, (const elu_t *)p.b, (elu_t *)p.out, p.n, p.head,
                               each(f));
}
#endif
