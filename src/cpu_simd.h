/* The few vector operations the fast CPU kernels use, over whichever x86
 * instruction set the including file is compiled for (meson builds
 * cpu_fast.c once per set with that set's -m flags; nothing here runs
 * unless cpu_isa.c has checked at run time that the processor has the set).
 *
 * One name per operation, so the kernels are written once. Every fused
 * multiply-add is explicit (v_fma and friends), because the kernels' exact
 * steps depend on it; the including file is compiled with contraction off. */
#ifndef ELU_CPU_SIMD_H
#define ELU_CPU_SIMD_H

#include <immintrin.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#if defined(__AVX512F__)

#define V_WIDTH 16 /* floats per vector */
typedef __m512 vf;
typedef __mmask16 vmask;

static inline vf v_set1(float a) { return _mm512_set1_ps(a); }
static inline vf v_load(const float *p) { return _mm512_loadu_ps(p); }
static inline void v_store(float *p, vf a) { _mm512_storeu_ps(p, a); }
/* Past the caches, not through them; p aligned to V_WIDTH floats. */
static inline void v_stream(float *p, vf a) { _mm512_stream_ps(p, a); }
static inline vf v_add(vf a, vf b) { return _mm512_add_ps(a, b); }
static inline vf v_sub(vf a, vf b) { return _mm512_sub_ps(a, b); }
static inline vf v_mul(vf a, vf b) { return _mm512_mul_ps(a, b); }
static inline vf v_fma(vf a, vf b, vf c) { return _mm512_fmadd_ps(a, b, c); }   /* a*b + c */
static inline vf v_fms(vf a, vf b, vf c) { return _mm512_fmsub_ps(a, b, c); }   /* a*b - c */
static inline vf v_fnma(vf a, vf b, vf c) { return _mm512_fnmadd_ps(a, b, c); } /* c - a*b */
/* a > b ? a : b, so a NaN in b comes through. */
static inline vf v_max(vf a, vf b) { return _mm512_max_ps(a, b); }
static inline vf v_min(vf a, vf b) { return _mm512_min_ps(a, b); } /* a < b ? a : b */
static inline vmask v_gt(vf a, vf b) { return _mm512_cmp_ps_mask(a, b, _CMP_GT_OQ); }
/* m ? yes : no, lane by lane. */
static inline vf v_select(vmask m, vf yes, vf no) { return _mm512_mask_blend_ps(m, no, yes); }
/* The same, lane k taking yes where bit k of m is set. */
static inline vf v_select_bits(unsigned m, vf yes, vf no) { return _mm512_mask_blend_ps((__mmask16)m, no, yes); }
/* m ? a*b : no, in one masked instruction. */
static inline vf v_select_mul(vmask m, vf a, vf b, vf no) { return _mm512_mask_mul_ps(no, m, a, b); }
/* 2^n for integral n: 0 below float's range, NaN for NaN. */
static inline vf v_exp2i(vf n) { return _mm512_scalef_ps(_mm512_set1_ps(1), n); }
static inline vf v_round(vf a) { return _mm512_roundscale_ps(a, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC); }
static inline vf v_floor(vf a) { return _mm512_roundscale_ps(a, _MM_FROUND_TO_NEG_INF | _MM_FROUND_NO_EXC); }
/* a*2^n for integral n, rounded once: 0 or subnormal below float's
 * range. */
static inline vf v_ldexp(vf a, vf n) { return _mm512_scalef_ps(a, n); }
/* t[i mod 16] for the integers i held in the low bits of the floats'
 * bits. */
static inline vf v_table16(const float t[16], vf i)
{
    return _mm512_permutexvar_ps(_mm512_castps_si512(i), _mm512_loadu_ps(t));
}

/* table[x[i]] for the 2 * V_WIDTH 16-bit elements at x, in order, as the
 * bits of one vector (for v_store and v_stream): 4-byte gathers at 2-byte
 * steps, so the table needs one entry of padding. */
static inline vf v_lookup16(const uint16_t *table, const uint16_t *x)
{
    const __m512i i0 = _mm512_cvtepu16_epi32(_mm256_loadu_si256((const __m256i *)x));
    const __m512i i1 = _mm512_cvtepu16_epi32(_mm256_loadu_si256((const __m256i *)(x + 16)));
    const __m256i v0 = _mm512_cvtepi32_epi16(_mm512_i32gather_epi32(i0, (const void *)table, 2));
    const __m256i v1 = _mm512_cvtepi32_epi16(_mm512_i32gather_epi32(i1, (const void *)table, 2));
    return _mm512_castsi512_ps(_mm512_inserti64x4(_mm512_castsi256_si512(v0), v1, 1));
}

static inline vf v_abs(vf a) { return _mm512_abs_ps(a); }
static inline unsigned v_mask_bits(vmask m) { return m; }
static inline vmask v_lt(vf a, vf b) { return _mm512_cmp_ps_mask(a, b, _CMP_LT_OQ); }
static inline vmask v_le(vf a, vf b) { return _mm512_cmp_ps_mask(a, b, _CMP_LE_OQ); }
static inline vmask v_eq(vf a, vf b) { return _mm512_cmp_ps_mask(a, b, _CMP_EQ_OQ); }
/* a > b, a >= b, or either NaN. */
static inline vmask v_nle(vf a, vf b) { return _mm512_cmp_ps_mask(a, b, _CMP_NLE_UQ); }
static inline vmask v_nlt(vf a, vf b) { return _mm512_cmp_ps_mask(a, b, _CMP_NLT_UQ); }
/* The lanes of a that m's bits select, packed into the low lanes (the
 * rest zero); and the low lanes of a spread back to m's lanes, the others
 * taken from no. */
static inline vf v_compress(unsigned m, vf a) { return _mm512_maskz_compress_ps((__mmask16)m, a); }
static inline vf v_expand(vf no, unsigned m, vf a) { return _mm512_mask_expand_ps(no, (__mmask16)m, a); }
/* Lanes whose lowest `low` bits are within `ulps` of 2^(low-1): a float
 * within that many ulps of a tie of a narrower type whose last bit is bit
 * `low`. */
static inline unsigned v_near_tie(vf a, int low, int ulps)
{
    const __m512i bits = _mm512_and_si512(_mm512_castps_si512(a), _mm512_set1_epi32((1 << low) - 1));
    const __m512i off = _mm512_sub_epi32(bits, _mm512_set1_epi32((1 << (low - 1)) - ulps));
    return _mm512_cmple_epu32_mask(off, _mm512_set1_epi32(2 * ulps));
}
/* a with its lowest `low` bits set to 2^(low-1): the tie of the narrower
 * type nearest a, for a within v_near_tie's reach of one. */
static inline vf v_tie(vf a, int low)
{
    const __m512i b = _mm512_andnot_si512(_mm512_set1_epi32((1 << low) - 1), _mm512_castps_si512(a));
    return _mm512_castsi512_ps(_mm512_or_si512(b, _mm512_set1_epi32(1 << (low - 1))));
}
/* |a| with the sign of b. */
static inline vf v_copysign(vf a, vf b)
{
    const __m512i sign = _mm512_set1_epi32(INT32_MIN);
    return _mm512_castsi512_ps(_mm512_ternarylogic_epi32(sign, _mm512_castps_si512(a),
                                                         _mm512_castps_si512(b), 0xAC));
}
/* The float next to a (finite, not zero) on the side where d's sign
 * points. */
static inline vf v_next_toward(vf a, vf d)
{
    const __m512i b = _mm512_castps_si512(a);
    const __mmask16 away = _mm512_cmpge_epi32_mask(_mm512_xor_si512(b, _mm512_castps_si512(d)),
                                                   _mm512_setzero_si512());
    return _mm512_castsi512_ps(_mm512_mask_add_epi32(_mm512_sub_epi32(b, _mm512_set1_epi32(1)),
                                                     away, b, _mm512_set1_epi32(1)));
}
/* Doubles: a float vector's lower and upper halves, each as one vd. */
typedef __m512d vd;
typedef __mmask8 vdmask;
static inline vd vd_lo(vf a) { return _mm512_cvtps_pd(_mm512_castps512_ps256(a)); }
static inline vd vd_hi(vf a)
{
    return _mm512_cvtps_pd(_mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(a), 1)));
}
/* Both halves back, each rounded once to float. */
static inline vf vd_join(vd lo, vd hi)
{
    const __m512d l = _mm512_castps_pd(_mm512_castps256_ps512(_mm512_cvtpd_ps(lo)));
    return _mm512_castpd_ps(_mm512_insertf64x4(l, _mm256_castps_pd(_mm512_cvtpd_ps(hi)), 1));
}
static inline vd vd_set1(double a) { return _mm512_set1_pd(a); }
static inline vd vd_load(const double *p) { return _mm512_loadu_pd(p); }
static inline void vd_store(double *p, vd a) { _mm512_storeu_pd(p, a); }
static inline void vd_stream(double *p, vd a) { _mm512_stream_pd(p, a); }
static inline vd vd_add(vd a, vd b) { return _mm512_add_pd(a, b); }
static inline vd vd_sub(vd a, vd b) { return _mm512_sub_pd(a, b); }
static inline vd vd_mul(vd a, vd b) { return _mm512_mul_pd(a, b); }
static inline vd vd_fma(vd a, vd b, vd c) { return _mm512_fmadd_pd(a, b, c); }
static inline vd vd_fnma(vd a, vd b, vd c) { return _mm512_fnmadd_pd(a, b, c); }
static inline vd vd_fms(vd a, vd b, vd c) { return _mm512_fmsub_pd(a, b, c); }
static inline vd vd_max(vd a, vd b) { return _mm512_max_pd(a, b); }
static inline vd vd_min(vd a, vd b) { return _mm512_min_pd(a, b); }
static inline vd vd_round(vd a) { return _mm512_roundscale_pd(a, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC); }
static inline vdmask vd_le(vd a, vd b) { return _mm512_cmp_pd_mask(a, b, _CMP_LE_OQ); }
static inline vdmask vd_lt(vd a, vd b) { return _mm512_cmp_pd_mask(a, b, _CMP_LT_OQ); }
static inline vd vd_select(vdmask m, vd yes, vd no) { return _mm512_mask_blend_pd(m, no, yes); }
static inline vd vd_select_mul(vdmask m, vd a, vd b, vd no) { return _mm512_mask_mul_pd(no, m, a, b); }
/* The same, lane k taking yes where bit k of m is set. */
static inline vd vd_select_bits(unsigned m, vd yes, vd no) { return _mm512_mask_blend_pd((__mmask8)m, no, yes); }
/* a * 2^k for integral k in [-1022, 1023]. */
static inline vd vd_ldexp(vd a, vd k) { return _mm512_scalef_pd(a, k); }
static inline vd vd_abs(vd a) { return _mm512_abs_pd(a); }
/* hi + lo (|lo| at most half hi's ulp) rounded to odd at double's last
 * bit: hi moved one ulp toward lo's side where lo is not zero and hi's
 * last bit is 0. */
static inline vd vd_round_to_odd(vd hi, vd lo)
{
    const __m512i b = _mm512_castpd_si512(hi);
    const __m512d zero = _mm512_setzero_pd();
    const __mmask8 move = _mm512_testn_epi64_mask(b, _mm512_set1_epi64(1)) &
                          _mm512_cmp_pd_mask(lo, zero, _CMP_NEQ_UQ);
    const __mmask8 differ = _mm512_cmp_pd_mask(lo, zero, _CMP_GT_OQ) ^
                            _mm512_cmp_pd_mask(hi, zero, _CMP_GT_OQ);
    const __m512i step = _mm512_mask_blend_epi64(differ, _mm512_set1_epi64(1), _mm512_set1_epi64(-1));
    return _mm512_castsi512_pd(_mm512_mask_add_epi64(b, move, b, step));
}
/* a rounded to odd at bit `low`: its bits below cleared (toward zero),
 * and bit `low` set where they were not all zero. */
static inline vd vd_odd_at(vd a, int low)
{
    const __m512i b = _mm512_castpd_si512(a), below = _mm512_set1_epi64((1ll << low) - 1);
    const __m512i cut = _mm512_andnot_si512(below, b);
    return _mm512_castsi512_pd(_mm512_mask_or_epi64(cut, _mm512_test_epi64_mask(b, below), cut,
                                                    _mm512_set1_epi64(1ll << low)));
}
/* t[i mod 16] for the integers i held in the low bits of the doubles'
 * bits: a table of 16 doubles. */
static inline vd vd_lookup16(const double t[16], vd i)
{
    return _mm512_permutex2var_pd(_mm512_loadu_pd(t), _mm512_castpd_si512(i), _mm512_loadu_pd(t + 8));
}
/* t[i mod 8] for the integers i held in the low bits of the doubles'
 * bits: a table of 8 doubles. */
static inline vd vd_lookup8(const double t[8], vd i)
{
    return _mm512_permutexvar_pd(_mm512_castpd_si512(i), _mm512_loadu_pd(t));
}
/* a's bits shifted right by n, as a vector of doubles' bits. */
static inline vd vd_bits_shr(vd a, unsigned n)
{
    return _mm512_castsi512_pd(_mm512_srli_epi64(_mm512_castpd_si512(a), n));
}
/* a's bits plus (b's bits << shift) with their low 52 bits cleared: a
 * scaled by the power of two whose exponent b's bits from 52 - shift
 * on hold. */
static inline vd vd_scale_by_bits(vd a, vd b, int shift)
{
    const __m512i e = _mm512_and_si512(_mm512_slli_epi64(_mm512_castpd_si512(b), (unsigned)shift),
                                       _mm512_set1_epi64((long long)0xFFF0000000000000ull));
    return _mm512_castsi512_pd(_mm512_add_epi64(_mm512_castpd_si512(a), e));
}
/* t[k mod 16] * 2^floor(q) for q = k/16, the integer k held in the low
 * bits of kf's bits (kf = q + 1.5*2^48): a table of 16 doubles, scaled
 * exactly where the products are normal, zeros included. */
static inline vd vd_lookup16_pow2(const double t[16], vd kf, vd q)
{
    return _mm512_scalef_pd(vd_lookup16(t, kf), q);
}
/* Lanes whose lowest `low` bits are within [-ulps, ulps) of 2^(low-1),
 * ulps a power of two: a double within that many ulps of a tie of a
 * narrower type whose last bit is bit `low`. */
static inline unsigned vd_near_tie(vd a, int low, long long ulps)
{
    const __m512i b = _mm512_add_epi64(_mm512_castpd_si512(a), _mm512_set1_epi64(ulps - (1ll << (low - 1))));
    return _mm512_testn_epi64_mask(b, _mm512_set1_epi64(((1ll << low) - 1) & -2 * ulps));
}

static inline vdmask vd_gt(vd a, vd b) { return _mm512_cmp_pd_mask(a, b, _CMP_GT_OQ); }
static inline vdmask vd_eq(vd a, vd b) { return _mm512_cmp_pd_mask(a, b, _CMP_EQ_OQ); }
static inline unsigned vd_mask_bits(vdmask m) { return m; }
static inline vd vd_compress(unsigned m, vd a) { return _mm512_maskz_compress_pd((__mmask8)m, a); }
static inline vd vd_expand(vd no, unsigned m, vd a) { return _mm512_mask_expand_pd(no, (__mmask8)m, a); }
/* The half types, V_WIDTH at a time, as floats (exact both ways: stores
 * take floats that are already values of the type). */
static inline vf v_load_f16(const uint16_t *p) { return _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)p)); }
/* Stores: streamed (past the caches, p aligned to their width) or not. */
static inline void v_store_f16(uint16_t *p, vf a, bool stream)
{
    const __m256i h = _mm512_cvtps_ph(a, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    if (stream)
        _mm256_stream_si256((__m256i *)p, h);
    else
        _mm256_storeu_si256((__m256i *)p, h);
}
/* bf16, 2 * V_WIDTH at a time, as the floats at even and at odd
 * positions; stores round them to nearest even (from finite floats). */
static inline void v_load_bf16_pairs(const uint16_t *p, vf *even, vf *odd)
{
    const __m512i w = _mm512_loadu_si512(p);
    *even = _mm512_castsi512_ps(_mm512_slli_epi32(w, 16));
    *odd = _mm512_castsi512_ps(_mm512_and_si512(w, _mm512_set1_epi32((int)0xFFFF0000u)));
}
static inline __m512i v_bf16_rounded(vf a) /* in the upper 16 bits */
{
    const __m512i b = _mm512_castps_si512(a);
    const __m512i odd = _mm512_and_si512(_mm512_srli_epi32(b, 16), _mm512_set1_epi32(1));
    return _mm512_add_epi32(b, _mm512_add_epi32(odd, _mm512_set1_epi32(0x7FFF)));
}
static inline void v_store_bf16_pairs(uint16_t *p, vf even, vf odd, bool stream)
{
    const __m512i e = _mm512_srli_epi32(v_bf16_rounded(even), 16);
    /* odd's upper half, even's lower */
    const __m512i w = _mm512_ternarylogic_epi32(_mm512_set1_epi32((int)0xFFFF0000u),
                                                v_bf16_rounded(odd), e, 0xCA);
    if (stream)
        _mm512_stream_si512((__m512i *)p, w);
    else
        _mm512_storeu_si512(p, w);
}

#elif defined(__AVX2__) && defined(__FMA__) && defined(__F16C__)

#define V_WIDTH 8
typedef __m256 vf;
typedef __m256 vmask; /* all ones or all zeros per lane */

static inline vf v_set1(float a) { return _mm256_set1_ps(a); }
static inline vf v_load(const float *p) { return _mm256_loadu_ps(p); }
static inline void v_store(float *p, vf a) { _mm256_storeu_ps(p, a); }
static inline void v_stream(float *p, vf a) { _mm256_stream_ps(p, a); }
static inline vf v_add(vf a, vf b) { return _mm256_add_ps(a, b); }
static inline vf v_sub(vf a, vf b) { return _mm256_sub_ps(a, b); }
static inline vf v_mul(vf a, vf b) { return _mm256_mul_ps(a, b); }
static inline vf v_fma(vf a, vf b, vf c) { return _mm256_fmadd_ps(a, b, c); }
static inline vf v_fms(vf a, vf b, vf c) { return _mm256_fmsub_ps(a, b, c); }
static inline vf v_fnma(vf a, vf b, vf c) { return _mm256_fnmadd_ps(a, b, c); }
static inline vf v_max(vf a, vf b) { return _mm256_max_ps(a, b); }
static inline vf v_min(vf a, vf b) { return _mm256_min_ps(a, b); }
static inline vmask v_gt(vf a, vf b) { return _mm256_cmp_ps(a, b, _CMP_GT_OQ); }
static inline vf v_select(vmask m, vf yes, vf no) { return _mm256_blendv_ps(no, yes, m); }
static inline vf v_select_bits(unsigned m, vf yes, vf no)
{
    const __m256i bit = _mm256_setr_epi32(1, 2, 4, 8, 16, 32, 64, 128);
    const __m256i lanes = _mm256_cmpeq_epi32(_mm256_and_si256(_mm256_set1_epi32((int)m), bit), bit);
    return _mm256_blendv_ps(no, yes, _mm256_castsi256_ps(lanes));
}
static inline vf v_select_mul(vmask m, vf a, vf b, vf no) { return v_select(m, v_mul(a, b), no); }
static inline vf v_round(vf a) { return _mm256_round_ps(a, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC); }
/* 2^n for integral n <= 127, built in the exponent field: 0 from -127
 * down (and for NaN). */
static inline vf v_exp2i(vf n)
{
    const __m256i k = _mm256_cvtps_epi32(_mm256_max_ps(n, _mm256_set1_ps(-127)));
    return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(k, _mm256_set1_epi32(127)), 23));
}

static inline vf v_floor(vf a) { return _mm256_floor_ps(a); }
/* a*2^n for integral n (as v_exp2i: 0 from 2^-127 down). */
static inline vf v_ldexp(vf a, vf n) { return _mm256_mul_ps(a, v_exp2i(n)); }
static inline vf v_table16(const float t[16], vf i)
{
    const __m256i k = _mm256_castps_si256(i);
    const __m256 lo = _mm256_permutevar8x32_ps(_mm256_loadu_ps(t), k);
    const __m256 hi = _mm256_permutevar8x32_ps(_mm256_loadu_ps(t + 8), k);
    return _mm256_blendv_ps(lo, hi, _mm256_castsi256_ps(_mm256_slli_epi32(k, 28))); /* bit 3 */
}

static inline vf v_lookup16(const uint16_t *table, const uint16_t *x)
{
    const __m256i low = _mm256_set1_epi32(0xFFFF);
    const __m256i i0 = _mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)x));
    const __m256i i1 = _mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)(x + 8)));
    const __m256i v0 = _mm256_and_si256(_mm256_i32gather_epi32((const int *)table, i0, 2), low);
    const __m256i v1 = _mm256_and_si256(_mm256_i32gather_epi32((const int *)table, i1, 2), low);
    /* packus interleaves the 128-bit halves: v0 low, v1 low, v0 high, v1 high */
    return _mm256_castsi256_ps(_mm256_permute4x64_epi64(_mm256_packus_epi32(v0, v1), 0xD8));
}

static inline vf v_abs(vf a) { return _mm256_andnot_ps(_mm256_set1_ps(-0.0f), a); }
static inline unsigned v_mask_bits(vmask m) { return (unsigned)_mm256_movemask_ps(m); }
static inline vmask v_lt(vf a, vf b) { return _mm256_cmp_ps(a, b, _CMP_LT_OQ); }
static inline vmask v_le(vf a, vf b) { return _mm256_cmp_ps(a, b, _CMP_LE_OQ); }
static inline vmask v_eq(vf a, vf b) { return _mm256_cmp_ps(a, b, _CMP_EQ_OQ); }
static inline vmask v_nle(vf a, vf b) { return _mm256_cmp_ps(a, b, _CMP_NLE_UQ); }
static inline vmask v_nlt(vf a, vf b) { return _mm256_cmp_ps(a, b, _CMP_NLT_UQ); }
static inline unsigned v_near_tie(vf a, int low, int ulps)
{
    const __m256i bits = _mm256_and_si256(_mm256_castps_si256(a), _mm256_set1_epi32((1 << low) - 1));
    const __m256i off = _mm256_sub_epi32(bits, _mm256_set1_epi32((1 << (low - 1)) - ulps));
    const __m256i near = _mm256_cmpeq_epi32(_mm256_min_epu32(off, _mm256_set1_epi32(2 * ulps)), off);
    return (unsigned)_mm256_movemask_ps(_mm256_castsi256_ps(near));
}
static inline vf v_tie(vf a, int low)
{
    const __m256i b = _mm256_andnot_si256(_mm256_set1_epi32((1 << low) - 1), _mm256_castps_si256(a));
    return _mm256_castsi256_ps(_mm256_or_si256(b, _mm256_set1_epi32(1 << (low - 1))));
}
static inline vf v_copysign(vf a, vf b)
{
    const __m256 sign = _mm256_set1_ps(-0.0f);
    return _mm256_or_ps(_mm256_andnot_ps(sign, a), _mm256_and_ps(sign, b));
}
static inline vf v_next_toward(vf a, vf d)
{
    const __m256i b = _mm256_castps_si256(a);
    const __m256i toward = _mm256_cmpgt_epi32(_mm256_setzero_si256(),
                                              _mm256_xor_si256(b, _mm256_castps_si256(d)));
    /* toward zero: -1 (toward's all ones); away from it: +1 */
    return _mm256_castsi256_ps(_mm256_add_epi32(b, _mm256_or_si256(toward, _mm256_set1_epi32(1))));
}
typedef __m256d vd;
typedef __m256d vdmask;
static inline vd vd_lo(vf a) { return _mm256_cvtps_pd(_mm256_castps256_ps128(a)); }
static inline vd vd_hi(vf a) { return _mm256_cvtps_pd(_mm256_extractf128_ps(a, 1)); }
static inline vf vd_join(vd lo, vd hi)
{
    return _mm256_insertf128_ps(_mm256_castps128_ps256(_mm256_cvtpd_ps(lo)),
                                _mm256_cvtpd_ps(hi), 1);
}
static inline vd vd_set1(double a) { return _mm256_set1_pd(a); }
static inline vd vd_load(const double *p) { return _mm256_loadu_pd(p); }
static inline void vd_store(double *p, vd a) { _mm256_storeu_pd(p, a); }
static inline void vd_stream(double *p, vd a) { _mm256_stream_pd(p, a); }
static inline vd vd_add(vd a, vd b) { return _mm256_add_pd(a, b); }
static inline vd vd_sub(vd a, vd b) { return _mm256_sub_pd(a, b); }
static inline vd vd_mul(vd a, vd b) { return _mm256_mul_pd(a, b); }
static inline vd vd_fma(vd a, vd b, vd c) { return _mm256_fmadd_pd(a, b, c); }
static inline vd vd_fnma(vd a, vd b, vd c) { return _mm256_fnmadd_pd(a, b, c); }
static inline vd vd_fms(vd a, vd b, vd c) { return _mm256_fmsub_pd(a, b, c); }
static inline vd vd_max(vd a, vd b) { return _mm256_max_pd(a, b); }
static inline vd vd_min(vd a, vd b) { return _mm256_min_pd(a, b); }
static inline vd vd_round(vd a) { return _mm256_round_pd(a, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC); }
static inline vdmask vd_le(vd a, vd b) { return _mm256_cmp_pd(a, b, _CMP_LE_OQ); }
static inline vdmask vd_lt(vd a, vd b) { return _mm256_cmp_pd(a, b, _CMP_LT_OQ); }
static inline vd vd_select(vdmask m, vd yes, vd no) { return _mm256_blendv_pd(no, yes, m); }
static inline vd vd_select_mul(vdmask m, vd a, vd b, vd no) { return vd_select(m, vd_mul(a, b), no); }
static inline vd vd_select_bits(unsigned m, vd yes, vd no)
{
    const __m256i bit = _mm256_setr_epi64x(1, 2, 4, 8);
    const __m256i lanes = _mm256_cmpeq_epi64(_mm256_and_si256(_mm256_set1_epi64x(m), bit), bit);
    return _mm256_blendv_pd(no, yes, _mm256_castsi256_pd(lanes));
}
static inline vd vd_odd_at(vd a, int low)
{
    const __m256i b = _mm256_castpd_si256(a), below = _mm256_set1_epi64x((1ll << low) - 1);
    const __m256i exact = _mm256_cmpeq_epi64(_mm256_and_si256(b, below), _mm256_setzero_si256());
    const __m256i sticky = _mm256_andnot_si256(exact, _mm256_set1_epi64x(1ll << low));
    return _mm256_castsi256_pd(_mm256_or_si256(_mm256_andnot_si256(below, b), sticky));
}
static inline vd vd_abs(vd a) { return _mm256_andnot_pd(_mm256_set1_pd(-0.0), a); }
static inline vd vd_round_to_odd(vd hi, vd lo)
{
    const __m256i b = _mm256_castpd_si256(hi);
    const __m256d zero = _mm256_setzero_pd();
    const __m256i even = _mm256_cmpeq_epi64(_mm256_and_si256(b, _mm256_set1_epi64x(1)),
                                            _mm256_setzero_si256());
    const __m256i move = _mm256_and_si256(even, _mm256_castpd_si256(_mm256_cmp_pd(lo, zero, _CMP_NEQ_UQ)));
    const __m256d differ = _mm256_xor_pd(_mm256_cmp_pd(lo, zero, _CMP_GT_OQ),
                                         _mm256_cmp_pd(hi, zero, _CMP_GT_OQ));
    /* all ones (-1) where they differ, else 1 */
    const __m256i step = _mm256_or_si256(_mm256_castpd_si256(differ), _mm256_set1_epi64x(1));
    return _mm256_castsi256_pd(_mm256_add_epi64(b, _mm256_and_si256(step, move)));
}
static inline vd vd_lookup16(const double t[16], vd i)
{
    const __m256i j = _mm256_and_si256(_mm256_castpd_si256(i), _mm256_set1_epi64x(15));
    return _mm256_i64gather_pd(t, j, 8);
}
static inline vd vd_lookup128(const double t[128], vd i)
{
    const __m256i j = _mm256_and_si256(_mm256_castpd_si256(i), _mm256_set1_epi64x(127));
    return _mm256_i64gather_pd(t, j, 8);
}
static inline vd vd_scale_by_bits(vd a, vd b, int shift)
{
    const __m256i e = _mm256_and_si256(_mm256_slli_epi64(_mm256_castpd_si256(b), shift),
                                       _mm256_set1_epi64x((long long)0xFFF0000000000000ull));
    return _mm256_castsi256_pd(_mm256_add_epi64(_mm256_castpd_si256(a), e));
}
static inline vd vd_lookup16_pow2(const double t[16], vd kf, vd q)
{
    (void)q; /* kf's bits hold floor(q) as well: k >> 4 */
    return vd_mul(vd_lookup16(t, kf), vd_scale_by_bits(vd_set1(1), kf, 48));
}
static inline unsigned vd_near_tie(vd a, int low, long long ulps)
{
    const __m256i b = _mm256_add_epi64(_mm256_castpd_si256(a), _mm256_set1_epi64x(ulps - (1ll << (low - 1))));
    const __m256i m = _mm256_and_si256(b, _mm256_set1_epi64x(((1ll << low) - 1) & -2 * ulps));
    return (unsigned)_mm256_movemask_pd(_mm256_castsi256_pd(_mm256_cmpeq_epi64(m, _mm256_setzero_si256())));
}

static inline vdmask vd_gt(vd a, vd b) { return _mm256_cmp_pd(a, b, _CMP_GT_OQ); }
static inline vdmask vd_eq(vd a, vd b) { return _mm256_cmp_pd(a, b, _CMP_EQ_OQ); }
static inline unsigned vd_mask_bits(vdmask m) { return (unsigned)_mm256_movemask_pd(m); }
static inline vf v_load_f16(const uint16_t *p) { return _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)p)); }
static inline void v_store_f16(uint16_t *p, vf a, bool stream)
{
    const __m128i h = _mm256_cvtps_ph(a, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    if (stream)
        _mm_stream_si128((__m128i *)p, h);
    else
        _mm_storeu_si128((__m128i *)p, h);
}
static inline void v_load_bf16_pairs(const uint16_t *p, vf *even, vf *odd)
{
    const __m256i w = _mm256_loadu_si256((const __m256i *)p);
    *even = _mm256_castsi256_ps(_mm256_slli_epi32(w, 16));
    *odd = _mm256_castsi256_ps(_mm256_and_si256(w, _mm256_set1_epi32((int)0xFFFF0000u)));
}
static inline __m256i v_bf16_rounded(vf a)
{
    const __m256i b = _mm256_castps_si256(a);
    const __m256i odd = _mm256_and_si256(_mm256_srli_epi32(b, 16), _mm256_set1_epi32(1));
    return _mm256_add_epi32(b, _mm256_add_epi32(odd, _mm256_set1_epi32(0x7FFF)));
}
static inline void v_store_bf16_pairs(uint16_t *p, vf even, vf odd, bool stream)
{
    const __m256i e = _mm256_srli_epi32(v_bf16_rounded(even), 16);
    const __m256i o = _mm256_and_si256(v_bf16_rounded(odd), _mm256_set1_epi32((int)0xFFFF0000u));
    if (stream)
        _mm256_stream_si256((__m256i *)p, _mm256_or_si256(o, e));
    else
        _mm256_storeu_si256((__m256i *)p, _mm256_or_si256(o, e));
}
/* 2^k built in the exponent field (AVX2 has no 64-bit integer
 * conversion, so through 32-bit integers). */
static inline vd vd_ldexp(vd a, vd k)
{
    const __m256i e = _mm256_slli_epi64(
        _mm256_add_epi64(_mm256_cvtepi32_epi64(_mm256_cvtpd_epi32(k)), _mm256_set1_epi64x(1023)),
        52);
    return _mm256_mul_pd(a, _mm256_castsi256_pd(e));
}

#else
#error "cpu_simd.h needs AVX-512F, or AVX2, FMA and F16C"
#endif

#endif
