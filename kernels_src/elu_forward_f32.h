/* The f32 forward for x <= 0, correctly rounded: the float nearest
 * neg * expm1(t), t = x * nip exact in double, ties to even. Shared text:
 * src/scalar.c and src/cpu_fast.c (its constants and tables) include this
 * file (C), and src/jit.c puts it before kernels_src/elu.cu (CUDA C++), so
 * that every path computes the same method; correct rounding alone would
 * make their results equal.
 * docs/DESIGN.md (The correctly rounded f32 forward) derives the bounds.
 *
 * Fast: in double, with t clamped to [T_MIN, 0] (below, the result
 * rounds to -neg as at T_MIN) and written as k ln2/16 + r, |r| <= ln2/32:
 *
 *   e^t - 1 = A (1 + p) - 1 = A p + (A - 1),  A = 2^(k/16) = 2^m T[j],
 *   p = expm1(r) = r + r^2 Q(r),  y = neg * fma(A, p, A - 1)
 *
 * The CPU (C) takes Q of degree 3, its coefficients fitted for least
 * relative error: p within 2^-41.1, y within 2^-41 of the exact value,
 * relatively. The GPU (CUDA) takes Taylor's polynomial of degree 6 (Q of
 * degree 4): p within 2^-45.5, y within 2^-44. On the CPU, bound by its
 * FMAs, the FMA saved pays; on the GPU the fitted polynomial ran slower
 * where the operands sit in L2 (docs/DESIGN.md). The float nearest y is
 * the result unless y lies within FAST_ERR ulps (of double, at y) of a
 * float midpoint: then that of the exact slow path, in double-double,
 * within 2^-99 relatively, which takes about one input in 2^15 (CPU) or
 * 2^18 (GPU). Doubt can only remain for an exact value within 2^-99 of a
 * midpoint; none of the inputs the tests sweep for six sets of constants
 * is.
 *
 * The includer defines nothing (but ELU_F32_TAYLOR, below, where it
 * asks for the GPU's polynomial); C gets static inline functions and CUDA
 * __device__ ones. */
#ifndef ELU_FORWARD_F32_H
#define ELU_FORWARD_F32_H

#ifndef __CUDACC__
#include "elu_dd.h" /* src/jit.c puts it before this file for CUDA */
#endif

#define ELU_F32_T_MIN (-18.0)               /* e^t < 2^-25.9: -neg, rounded */
#define ELU_F32_INV_L 0x1.71547652b82fep+4  /* 16/ln2 */
#define ELU_F32_ROUND 0x1.8p52              /* v + ROUND holds round(v) */
#define ELU_F32_L 0x1.62e42fefa39efp-5      /* ln2/16 */
/* Taylor's polynomial where CUDA compiles this file (or an includer asks
 * for it, as the tests do to find the GPU's inputs in doubt). */
#if defined(__CUDACC__) && !defined(ELU_F32_TAYLOR)
#define ELU_F32_TAYLOR 1
#endif
#ifdef ELU_F32_TAYLOR
#define ELU_F32_FAST_ERR 1024               /* 2^-43 at y, in double ulps */
#else
#define ELU_F32_FAST_ERR 8192               /* 2^-40 */
#endif
/* ln2/16 in three parts for the slow path: L1 has 44 bits, so that k*L1
 * and t - k*L1 are exact. */
#define ELU_F32_L1 0x1.62e42fefa3800p-5
#define ELU_F32_L2 0x1.ef35793c76730p-49
#define ELU_F32_L3 0x1.f97b57a079a19p-107

/* The fast path's constants (ELU_CONSTANTS): Q's coefficients from the
 * highest degree, the GPU's last (1/2) apart. */
struct elu_f32_fast_constants {
    double inv_l, l, q[4];
};
#ifdef ELU_F32_TAYLOR
ELU_CONSTANTS struct elu_f32_fast_constants elu_f32_k = {
    ELU_F32_INV_L, ELU_F32_L, {1.0 / 720, 1.0 / 120, 1.0 / 24, 1.0 / 6}};
#else
ELU_CONSTANTS struct elu_f32_fast_constants elu_f32_k = {
    ELU_F32_INV_L,
    ELU_F32_L,
    {0x1.1113066b979dfp-7, 0x1.55570c03addccp-5, 0x1.55555553eae58p-3, 0x1.fffffffe5928ap-2}};
#endif

/* 2^(j/16) for j in [0, 16), as hi + lo (lo within 2^-106 of the rest):
 * the fast path reads hi alone. */
ELU_TABLE double elu_f32_exp2_16[2][16] = {
    {0x1.0000000000000p+0, 0x1.0b5586cf9890fp+0, 0x1.172b83c7d517bp+0, 0x1.2387a6e756238p+0,
     0x1.306fe0a31b715p+0, 0x1.3dea64c123422p+0, 0x1.4bfdad5362a27p+0, 0x1.5ab07dd485429p+0,
     0x1.6a09e667f3bcdp+0, 0x1.7a11473eb0187p+0, 0x1.8ace5422aa0dbp+0, 0x1.9c49182a3f090p+0,
     0x1.ae89f995ad3adp+0, 0x1.c199bdd85529cp+0, 0x1.d5818dcfba487p+0, 0x1.ea4afa2a490dap+0},
    {0x0.0p+0, 0x1.8a62e4adc610bp-54, -0x1.19041b9d78a76p-55, 0x1.9b07eb6c70573p-54,
     0x1.6f46ad23182e4p-55, 0x1.ada0911f09ebcp-55, 0x1.d4397afec42e2p-56, 0x1.6324c054647adp-54,
     -0x1.bdd3413b26456p-54, -0x1.41577ee04992fp-55, 0x1.6e9f156864b27p-54, 0x1.c7c46b071f2bep-56,
     0x1.7a1cd345dcc81p-54, 0x1.11065895048ddp-55, 0x1.2ed02d75b3707p-55, -0x1.e9c23179c2893p-54}};

/* 1/n! for n from 13 down to 10, in double; from 9 down to 2 as hi + lo. */
ELU_TABLE double elu_f32_taylor_high[4] = {0x1.6124613a86d09p-33, 0x1.1eed8eff8d898p-29,
                                               0x1.ae64567f544e4p-26, 0x1.27e4fb7789f5cp-22};
ELU_TABLE double elu_f32_taylor[2][8] = {
    {0x1.71de3a556c734p-19, 0x1.a01a01a01a01ap-16, 0x1.a01a01a01a01ap-13, 0x1.6c16c16c16c17p-10,
     0x1.1111111111111p-7, 0x1.5555555555555p-5, 0x1.5555555555555p-3, 0.5},
    {-0x1.c154f8ddc6c00p-73, 0x1.a01a01a01a01ap-76, 0x1.a01a01a01a01ap-73, -0x1.f49f49f49f49fp-65,
     0x1.1111111111111p-63, 0x1.5555555555555p-59, 0x1.5555555555555p-57, 0}};


/* For k = kf - ROUND = 16m + j in [-416, 0]: m << 20, what scales a
 * double by 2^m added to its upper 32 bits (elu_add_hi), is kf's low bits
 * shifted left by 16 (ROUND's low 16 bits are zero) with the low 20
 * cleared; and 2^m T[j]. */
ELU_FN unsigned elu_f32_scale_hi(double kf)
{
    return ((unsigned)elu_bits(kf) << 16) & 0xFFF00000u;
}
ELU_FN double elu_f32_exp2_k(double kf)
{
    const double tj = ELU_LOAD(elu_f32_exp2_16[0] + (elu_bits(kf) & 15));
    return elu_add_hi(tj, elu_f32_scale_hi(kf));
}

/* neg * expm1(t) for t in [T_MIN, 0] (or NaN), within 2^-41 (CPU) or
 * 2^-44 (GPU) relatively. */
ELU_FN double elu_f32_fast(double t, double neg)
{
    const double kf = fma(t, elu_f32_k.inv_l, ELU_F32_ROUND);
    const double k = kf - ELU_F32_ROUND;
    const double r = fma(-k, elu_f32_k.l, t);
    double q = fma(elu_f32_k.q[0], r, elu_f32_k.q[1]);
    q = fma(q, r, elu_f32_k.q[2]);
    q = fma(q, r, elu_f32_k.q[3]);
#ifdef ELU_F32_TAYLOR
    q = fma(q, r, 0.5);
#endif
    const double p = fma(r * r, q, r);
    const double a = elu_f32_exp2_k(kf);
    return neg * fma(a, p, a - 1);
}

/* Whether the float nearest y might not be the nearest to the exact value
 * it lies within FAST_ERR double ulps of: its bits below the float's last
 * are that close to a midpoint's (1 then 28 zeros). A nonzero y below
 * 2^-126, in float's subnormal range, is left to the slow path, which
 * rounds it there: only an |x| or a neg that small gives one. Integer
 * operations alone, which the GPU issues beside its double ones. */
ELU_FN bool elu_f32_doubtful(double y)
{
    const unsigned magnitude = elu_hi_bits(y) & 0x7FFFFFFFu;
    const bool tiny = magnitude - 1u < 0x38100000u - 1u; /* 0 wraps around */
    const unsigned long long low = elu_bits(y) + (ELU_F32_FAST_ERR - (1ull << 28));
    return tiny | ((low & ((1ull << 29) - 1)) < 2 * ELU_F32_FAST_ERR);
}

/* -------- the slow path: double-double -------- */

/* q r + (hi + lo), a step of Horner's rule. */
ELU_FN struct elu_dd elu_f32_dd_step(struct elu_dd q, struct elu_dd r, double hi,
                                              double lo)
{
    return elu_dd_add(elu_dd_mul(q, r), elu_dd_of(hi, lo));
}

/* neg * expm1(t) for t in [T_MIN, 0], as hi + lo within 2^-99 of it
 * relatively: the fast path's steps in double-double, with ln2/16 in three
 * parts (the first, 44 bits, times k exact) and Taylor's polynomial to
 * degree 13 (its terms from degree 10 on in double). */
ELU_FN struct elu_dd elu_f32_slow_dd(double t, double neg)
{
    const double kf = fma(t, ELU_F32_INV_L, ELU_F32_ROUND);
    const double k = kf - ELU_F32_ROUND;
    const double kl2 = ELU_MUL(k, ELU_F32_L2), kl2_lo = fma(k, ELU_F32_L2, -kl2);
    const struct elu_dd r0 = elu_dd_of(fma(-k, ELU_F32_L1, t), 0); /* exact */
    const struct elu_dd r = elu_dd_add(r0, elu_dd_of(-kl2, fma(-k, ELU_F32_L3, -kl2_lo)));
    double h = fma(elu_f32_taylor_high[0], r.hi, elu_f32_taylor_high[1]);
    h = fma(h, r.hi, elu_f32_taylor_high[2]);
    h = fma(h, r.hi, elu_f32_taylor_high[3]);
    struct elu_dd q = elu_dd_of(h, 0);
    ELU_ROLLED
    for (int i = 0; i < 8; i++)
        q = elu_f32_dd_step(q, r, elu_f32_taylor[0][i], elu_f32_taylor[1][i]);
    const struct elu_dd p = elu_dd_add(r, elu_dd_mul(elu_dd_mul(r, r), q));
    const unsigned long long j = elu_bits(kf) & 15;
    const double pow2m = elu_add_hi(1.0, elu_f32_scale_hi(kf));
    const struct elu_dd a = elu_dd_of(elu_f32_exp2_16[0][j] * pow2m, elu_f32_exp2_16[1][j] * pow2m);
    const struct elu_dd a1 = elu_dd_add(a, elu_dd_of(-1, 0));
    const struct elu_dd e = elu_dd_add(elu_dd_mul(a, p), a1);
    return elu_dd_mul(e, elu_dd_of(neg, 0));
}

/* The float nearest hi + lo: hi rounded to odd at double's last bit
 * (moved one ulp toward lo where lo is not zero and hi's last bit is 0),
 * then to nearest float, which gives the rounding of hi + lo itself
 * (double keeps 29 bits more than float, 2 would do). */
ELU_FN float elu_f32_round_dd(struct elu_dd v)
{
    unsigned long long b = elu_bits(v.hi);
    if (v.lo != 0 && !(b & 1))
        b += (v.lo > 0) == (v.hi > 0) ? 1 : (unsigned long long)-1;
    return (float)elu_from_bits(b);
}

ELU_SLOW_FN float elu_f32_slow(double t, double neg)
{
    return elu_f32_round_dd(elu_f32_slow_dd(t, neg));
}

/* The whole forward for x <= 0 or NaN (x > 0 is scale * x, one rounding);
 * unit_nip where nip is 1. */
ELU_FN float elu_f32_forward_neg(float x, double neg, double nip, bool unit_nip)
{
    if (x == 0)
        return (float)((double)x * neg); /* the signed zero of x * neg */
    /* t clamped to T_MIN by a test in float, which the GPU issues beside
     * its double operations: nip is a float's value (api.c's coef_of
     * rounds input_scale so), so xs is t within 2^-24 relatively; a t
     * clamped was below -17.999 (every result from -17.33 down rounds to
     * -neg), and one left is above -18.001 (k stays at -416 or above). A
     * NaN stays. */
    const float xs = unit_nip ? x : x * (float)nip;
    double t = unit_nip ? (double)x : (double)x * nip;
    t = xs < (float)ELU_F32_T_MIN ? ELU_F32_T_MIN : t;
    const double y = elu_f32_fast(t, neg);
    return elu_f32_doubtful(y) ? elu_f32_slow(t, neg) : (float)y;
}

#endif
