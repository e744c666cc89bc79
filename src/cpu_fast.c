/* Vectorized CPU kernels. Meson compiles this file once per x86 instruction
 * set (ELU_ISA names it: avx512, avx2) with that set's -m flags and
 * -ffp-contract=off; cpu_isa.c picks a set's table only on a processor that has
 * it.
 *
 * The forward is correctly rounded: f32 and f64 by the methods of
 * kernels_src/elu_forward_f32.h and elu_forward_f64.h, the half types
 * computed in float and settled in double where in doubt, or through a
 * table for constants the computation does not take (their sections
 * below). The backward kernels follow their own sections' comments;
 * nothing is kept per set of constants but the forward's tables. */
#include "cpu_fast.h"
#include "numerics.h"
#include "scalar.h"
#include "cpu_simd.h"
#include "elu_expm1.h"
#include "elu_forward_f32.h"
#include "elu_forward_f64.h"

#include <float.h>
#include <math.h>
#include <string.h>

#define CAT2(a, b) a##_##b
#define CAT(a, b) CAT2(a, b)

/* Inlined into the loops that specialize on a flag (from_output,
 * input_scale 1). */
#define INLINE static inline __attribute__((always_inline))

/* How far ahead to prefetch the inputs (2 KiB): the hardware prefetcher
 * alone leaves a busy core waiting on memory. */
#define PREFETCH_BYTES 2048
/* Above this many bytes of output, store past the caches: the output would
 * not stay in them anyway, and ordinary stores first read every line. */
#define STREAM_BYTES ((size_t)4 << 20)
/* The f32 and f64 forward's blocks, packed (cpu_fast_loops.inc): 4 KiB of
 * inputs, so that a block's two buffers stay in L1. */
#define PACK_BYTES 4096

/* Where to start streaming stores into n elements of `size` bytes at y:
 * the count of elements before y's first aligned vector; n when n is too
 * small to stream (or y misaligned for its type), so that no stores
 * stream. */
static size_t stream_start(const void *y, size_t n, size_t size)
{
    if (n * size < STREAM_BYTES || (uintptr_t)y % size)
        return n;
    return (sizeof(vf) - (uintptr_t)y % sizeof(vf)) % sizeof(vf) / size;
}

static bool exact_fma64(void);

/* The constants of the backward kernels, in double. */
struct backward_consts {
    const struct elu_coef *coef;
    vd pos, neg, nip;
    vd w, w_lo; /* nip * neg = w + w_lo exactly (w_lo 0 for F32) */
};

static struct backward_consts backward_consts_of(const struct elu_coef *coef)
{
    const double w = coef->input_scale * coef->scale_alpha;
    return (struct backward_consts){coef, vd_set1(coef->scale), vd_set1(coef->scale_alpha),
                                    vd_set1(coef->input_scale), vd_set1(w),
                                    vd_set1(fma(coef->input_scale, coef->scale_alpha, -w))};
}

/* The scalar kernel's results for the lanes in m of the vector at element
 * i of g and s, into y (lane k at y[k], in the dtype): the lanes a vector
 * kernel leaves to it. */
static void redo_lanes(const struct elu_coef *coef, bool from_output, const void *g,
                       const void *s, size_t i, unsigned m, void *y)
{
    const enum elu_kernel kernel = from_output ? ELU_KERNEL_BACKWARD_OUTPUT
                                               : ELU_KERNEL_BACKWARD_INPUT;
    for (; m; m &= m - 1) {
        const int k = __builtin_ctz(m);
        elu_cpu_element(coef, kernel, g, (ptrdiff_t)(i + (size_t)k), s,
                        (ptrdiff_t)(i + (size_t)k), y, k);
    }
}

/* Each type's backward on one vector, which the template's loops call
 * (defined below it); *redo gets the lanes left to the scalar kernel. */
INLINE vf backward_v_f32(vf g, vf s, const struct backward_consts *c, bool from_output,
                         unsigned *redo);
INLINE vd backward_v_f64(vd g, vd s, const struct backward_consts *c, bool from_output,
                         unsigned *redo);

/* a as k*ln2 + r1 (exact: r1 = a - k*L for the double L nearest ln2),
 * with k = round(a/ln2) and kf = k + ROUND; and the parts of
 * expm1(r1) = r1 + r1^2/2 + r1^2*h, h = r1*Q(r1) (elu_expm1.h's Q),
 * r1^2 = r2 + r2l exactly: the f64 backward's exponential. */
struct reduced_f64 {
    vd kf, k, r1, h, r2, r2l;
};

INLINE struct reduced_f64 reduce_f64(vd a)
{
    static const double q[] = {ELU_EXPM1_POLY};
    struct reduced_f64 e;
    e.kf = vd_fma(a, vd_set1(ELU_EXPM1_INV_LN2), vd_set1(ELU_EXPM1_ROUND));
    e.k = vd_sub(e.kf, vd_set1(ELU_EXPM1_ROUND));
    e.r1 = vd_fnma(e.k, vd_set1(ELU_EXPM1_LN2), a);
    vd p = vd_set1(q[0]);
    for (size_t i = 1; i < sizeof q / sizeof *q; i++)
        p = vd_fma(p, e.r1, vd_set1(q[i]));
    e.h = vd_mul(e.r1, p);
    e.r2 = vd_mul(e.r1, e.r1);
    e.r2l = vd_fms(e.r1, e.r1, e.r2);
    return e;
}

/* -------- forward, f32: correctly rounded --------
 *
 * kernels_src/elu_forward_f32.h's method, each float vector as two of
 * doubles, with neg taken into the table: A' = (neg T[j]) 2^m and
 * y = fma(A', p, A' - neg) where elu_f32_fast rounds neg fma(A, p, A - 1),
 * one multiply fewer per lane; the lanes in doubt (about one in 2^15)
 * through its slow path, here for a whole vector at a time, lane by lane
 * the same operations.
 * Every lane computes: x >= 0 as 0, x below x_min as x_min (both give -neg
 * there, as t clamped to T_MIN does), NaN as NaN. The last selects put
 * x*pos where x > 0 or NaN, and x*neg's signed zero where x is a zero:
 * pos's sign gives it where it is neg's. */

/* Where x*neg's signed zeros come from. */
enum zeros {
    ZEROS_BY_POS, /* pos and neg of one sign: x*pos's */
    ZEROS_BY_NEG, /* of opposite signs: x*neg where x is a zero */
    ZEROS_ALL,    /* neg is a zero: every result for x <= 0 is one */
};

struct forward_consts_f32 {
    double neg_exp2[16]; /* neg * 2^(j/16), each rounded once */
    vf x_min;            /* T_MIN / nip, or -FLT_MAX: below, results round to -neg */
    vf x_tiny;           /* from it to 0, a result may be below 2^-126 */
    vf pos, negf;        /* scale, scale*alpha */
    vd neg, nip;
    enum zeros zeros;
    bool inf_apart; /* x_min is -FLT_MAX (nip below 18/FLT_MAX): -inf selected apart */
};

/* -x_tiny bounds the x < 0 whose result may lie among float's subnormals,
 * which the slow path rounds: |expm1(t)| >= |t|/2 for |t| <= 1 and >= 1/2
 * beyond, so |t| >= 2^-123/|neg| gives |y| >= 2^-124 where |neg| >=
 * 2^-120. Below that, every lane; for neg zero, none (y is zero). */
static float x_tiny_of(double neg, double nip)
{
    if (neg == 0)
        return 0;
    return fabs(neg) >= 0x1p-120 ? (float)(-0x1p-123 / (fabs(neg) * nip)) : -INFINITY;
}

INLINE struct forward_consts_f32 forward_consts_of_f32(const struct elu_coef *coef)
{
    const double neg = coef->scale_alpha, nip = coef->input_scale;
    const double x_min = ELU_F32_T_MIN / nip;
    struct forward_consts_f32 c = {
        .x_min = v_set1(x_min < -FLT_MAX ? -FLT_MAX : (float)x_min),
        .x_tiny = v_set1(x_tiny_of(neg, nip)),
        .pos = v_set1((float)coef->scale),
        .negf = v_set1((float)neg),
        .neg = vd_set1(neg),
        .nip = vd_set1(nip),
        .zeros = neg == 0                                ? ZEROS_ALL
                 : signbit(neg) != signbit(coef->scale) ? ZEROS_BY_NEG
                                                         : ZEROS_BY_POS,
        .inf_apart = x_min < -FLT_MAX,
    };
    for (int j = 0; j < 16; j++)
        c.neg_exp2[j] = neg * elu_f32_exp2_16[0][j];
    return c;
}

/* elu_f32_fast for the lanes' t = x*nip, neg in the table as above and
 * k/16 in place of k, which vd_lookup16_pow2 takes (the same k and r: the
 * constants are the header's scaled by 16). */
INLINE vd forward_fast_f32(vd x, const struct forward_consts_f32 *c, bool unit_nip)
{
    const struct elu_f32_fast_constants *K = &elu_f32_k;
    const vd t = unit_nip ? x : vd_mul(x, c->nip);
    const vd kf = vd_fma(t, vd_set1(K->inv_l / 16), vd_set1(ELU_F32_ROUND / 16));
    const vd kq = vd_sub(kf, vd_set1(ELU_F32_ROUND / 16));
    const vd r = vd_fnma(kq, vd_set1(K->l * 16), t);
    vd q = vd_fma(vd_set1(K->q[0]), r, vd_set1(K->q[1]));
    q = vd_fma(q, r, vd_set1(K->q[2]));
    q = vd_fma(q, r, vd_set1(K->q[3]));
    const vd p = vd_fma(vd_mul(r, r), q, r);
    const vd a = vd_lookup16_pow2(c->neg_exp2, kf, kq);
    return vd_fma(a, p, vd_sub(a, c->neg));
}

/* elu_f32_slow_dd's double-double, lane by lane, by the same operations. */
struct vdd {
    vd hi, lo;
};

INLINE struct vdd vdd_two_sum(vd a, vd b)
{
    const vd s = vd_add(a, b), bb = vd_sub(s, a);
    return (struct vdd){s, vd_add(vd_sub(a, vd_sub(s, bb)), vd_sub(b, bb))};
}

/* The same where a is zero or |a| >= |b| (Fast2Sum), lane by lane. */
INLINE struct vdd vdd_fast_two_sum(vd a, vd b)
{
    const vd s = vd_add(a, b);
    return (struct vdd){s, vd_add(vd_sub(a, s), b)};
}

INLINE struct vdd vdd_add(struct vdd a, struct vdd b)
{
    const struct vdd s = vdd_two_sum(a.hi, b.hi);
    return vdd_two_sum(s.hi, vd_add(vd_add(s.lo, a.lo), b.lo));
}

INLINE struct vdd vdd_mul(struct vdd a, struct vdd b)
{
    const vd p = vd_mul(a.hi, b.hi);
    const vd e = vd_add(vd_fms(a.hi, b.hi, p), vd_fma(a.hi, b.lo, vd_mul(a.lo, b.hi)));
    return vdd_two_sum(p, e);
}

INLINE struct vdd vdd_step(struct vdd q, struct vdd r, double hi, double lo)
{
    return vdd_add(vdd_mul(q, r), (struct vdd){vd_set1(hi), vd_set1(lo)});
}

/* elu_f32_slow for the lanes' t, rounded to float as elu_f32_round_dd
 * does. */
INLINE vd forward_slow_f32(vd t, vd neg)
{
    const vd zero = vd_set1(0), minus = vd_set1(-1);
    const vd kf = vd_fma(t, vd_set1(ELU_F32_INV_L), vd_set1(ELU_F32_ROUND));
    const vd k = vd_sub(kf, vd_set1(ELU_F32_ROUND));
    const vd l2 = vd_set1(ELU_F32_L2), kl2 = vd_mul(k, l2), kl2_lo = vd_fms(k, l2, kl2);
    const struct vdd r0 = {vd_fnma(k, vd_set1(ELU_F32_L1), t), zero};
    const struct vdd r = vdd_add(r0, (struct vdd){vd_mul(kl2, minus),
                                                  vd_fnma(k, vd_set1(ELU_F32_L3), vd_mul(kl2_lo, minus))});
    vd h = vd_fma(vd_set1(elu_f32_taylor_high[0]), r.hi, vd_set1(elu_f32_taylor_high[1]));
    h = vd_fma(h, r.hi, vd_set1(elu_f32_taylor_high[2]));
    h = vd_fma(h, r.hi, vd_set1(elu_f32_taylor_high[3]));
    struct vdd q = {h, zero};
    for (int i = 0; i < 8; i++)
        q = vdd_step(q, r, elu_f32_taylor[0][i], elu_f32_taylor[1][i]);
    const struct vdd p = vdd_add(r, vdd_mul(vdd_mul(r, r), q));
    const vd pow2m = vd_scale_by_bits(vd_set1(1), kf, 48);
    const struct vdd a = {vd_mul(vd_lookup16(elu_f32_exp2_16[0], kf), pow2m),
                          vd_mul(vd_lookup16(elu_f32_exp2_16[1], kf), pow2m)};
    const struct vdd a1 = vdd_add(a, (struct vdd){minus, zero});
    const struct vdd e = vdd_add(vdd_mul(a, p), a1);
    const struct vdd y = vdd_mul(e, (struct vdd){neg, zero});
    return vd_round_to_odd(y.hi, y.lo);
}

/* The forward's results for xc in [x_min, 0] or NaN: the fast evaluation,
 * and the slow path for a whole vector where a lane is in doubt. */
INLINE vf forward_clamped_f32(vf xc, const struct forward_consts_f32 *c, bool unit_nip)
{
    const vf zero = v_set1(0);
    const vd lo = forward_fast_f32(vd_lo(xc), c, unit_nip);
    const vd hi = forward_fast_f32(vd_hi(xc), c, unit_nip);
    vf y = vd_join(lo, hi);
    const unsigned tiny = v_mask_bits(v_gt(xc, c->x_tiny)) & v_mask_bits(v_lt(xc, zero));
    const unsigned doubt = vd_near_tie(lo, 29, ELU_F32_FAST_ERR) |
                           vd_near_tie(hi, 29, ELU_F32_FAST_ERR) << (V_WIDTH / 2) | tiny;
    if (doubt) { /* rare: the slow path for the whole vector */
        const vd tl = unit_nip ? vd_lo(xc) : vd_mul(vd_lo(xc), c->nip);
        const vd th = unit_nip ? vd_hi(xc) : vd_mul(vd_hi(xc), c->nip);
        y = v_select_bits(doubt, vd_join(forward_slow_f32(tl, c->neg), forward_slow_f32(th, c->neg)), y);
    }
    return y;
}

/* The packed loop's two halves (cpu_fast_loops.inc, AVX-512 alone):
 * results for lanes below zero, and for the others, where the constants
 * are packable. */
#ifdef __AVX512F__
INLINE vf forward_negative_f32(vf x, const struct forward_consts_f32 *c, bool unit_nip)
{
    return forward_clamped_f32(v_max(c->x_min, x), c, unit_nip);
}
INLINE vf forward_rest_f32(vf x, const struct forward_consts_f32 *c)
{
    const vf y = v_mul(x, c->pos);
    return c->zeros == ZEROS_BY_NEG ? v_select_mul(v_eq(x, v_set1(0)), x, c->negf, y) : y;
}
/* Not where zeros or -inf need selects of their own. */
INLINE bool packable_f32(const struct forward_consts_f32 *c)
{
    return c->zeros != ZEROS_ALL && !c->inf_apart;
}
#endif

INLINE vf forward_v_f32(vf x, const struct forward_consts_f32 *c, bool unit_nip)
{
    const vf zero = v_set1(0);
    const vf xc = v_max(c->x_min, v_min(zero, x)); /* NaN stays */
    vf y = forward_clamped_f32(xc, c, unit_nip);
    if (c->zeros == ZEROS_ALL)
        y = v_select_mul(v_le(xc, zero), xc, c->negf, y);
    else if (c->zeros == ZEROS_BY_NEG)
        y = v_select_mul(v_eq(x, zero), x, c->negf, y);
    if (c->inf_apart)
        y = v_select(v_eq(x, v_set1(-INFINITY)), v_mul(c->negf, v_set1(-1)), y);
    return v_select_mul(c->zeros == ZEROS_BY_POS ? v_nlt(x, zero) : v_nle(x, zero), x, c->pos,
                        y);
}

/* -------- forward, f64: correctly rounded --------
 *
 * kernels_src/elu_forward_f64.h's method: its fast path, operation by
 * operation as elu_f64_fast but for 2^(j/128) with AVX-512 (exp2_j128,
 * within the fast path's bound all the same), and the lanes where Ziv's
 * test fails (about one in 2^15) or whose t is tiny through its scalar
 * code, which takes its slow path or its exact product for them. Lanes
 * with x >= 0 or NaN compute a stand-in, T_MIN, whose result the last
 * selects replace. */

struct forward_consts_f64 {
    const struct elu_coef *coef; /* for the scalar code */
    vd neg, pos, nip;
#ifdef __AVX512F__
    double exp2_16a[2][8]; /* 2^(16a/128) for a in [0, 8), as hi and lo */
#endif
};

INLINE struct forward_consts_f64 forward_consts_of_f64(const struct elu_coef *coef)
{
    struct forward_consts_f64 c = {.coef = coef,
                                   .neg = vd_set1(coef->scale_alpha),
                                   .pos = vd_set1(coef->scale),
                                   .nip = vd_set1(coef->input_scale)};
#ifdef __AVX512F__
    for (int a = 0; a < 8; a++) {
        c.exp2_16a[0][a] = elu_f64_exp2_128[0][16 * a];
        c.exp2_16a[1][a] = elu_f64_exp2_128[1][16 * a];
    }
#endif
    return c;
}

/* 2^(j/128) for j = kf's low 7 bits, as hi + *lo within 2^-101 of it
 * relatively: the table's pair; with AVX-512 the product of 2^(16a/128)
 * and 2^(b/128), j = 16a + b, whose pairs permutes of registers look up
 * where gathers from the table of 128 cost more (docs/DESIGN.md, The
 * correctly rounded f64 forward). */
INLINE vd exp2_j128(const struct forward_consts_f64 *c, vd kf, vd *lo)
{
#ifdef __AVX512F__
    const vd bh = vd_lookup16(elu_f64_exp2_128[0], kf), bl = vd_lookup16(elu_f64_exp2_128[1], kf);
    const vd a = vd_bits_shr(kf, 4);
    const vd ah = vd_lookup8(c->exp2_16a[0], a), al = vd_lookup8(c->exp2_16a[1], a);
    const vd h = vd_mul(ah, bh);
    *lo = vd_fma(ah, bl, vd_fma(al, bh, vd_fms(ah, bh, h)));
    return h;
#else
    (void)c;
    *lo = vd_lookup128(elu_f64_exp2_128[1], kf);
    return vd_lookup128(elu_f64_exp2_128[0], kf);
#endif
}

/* elu_f64_fast for the lanes' t = th + tl, as yh + *yl. */
INLINE vd forward_fast_f64(const struct forward_consts_f64 *c, vd th, vd tl, vd *yl)
{
    const struct elu_f64_fast_constants *K = &elu_f64_k;
    const vd kf = vd_fma(th, vd_set1(K->inv_l), vd_set1(ELU_F64_ROUND));
    const vd k = vd_sub(kf, vd_set1(ELU_F64_ROUND));
    const struct vdd r = vdd_fast_two_sum(vd_fnma(k, vd_set1(K->l1), th), vd_fnma(k, vd_set1(K->l2), tl));
    vd q = vd_fma(vd_set1(K->c7), r.hi, vd_set1(K->c6));
    q = vd_fma(q, r.hi, vd_set1(K->c5));
    q = vd_fma(q, r.hi, vd_set1(K->c4));
    q = vd_fma(q, r.hi, vd_set1(K->c3));
    const vd half = vd_set1(0.5), one = vd_set1(1);
    const vd sq = vd_mul(r.hi, r.hi), sq_lo = vd_fms(r.hi, r.hi, sq);
    const struct vdd p0 = vdd_fast_two_sum(r.hi, vd_mul(half, sq));
    const vd plo = vd_add(p0.lo, vd_fma(vd_mul(sq, r.hi), q,
                                        vd_add(vd_fma(r.hi, r.lo, r.lo), vd_mul(half, sq_lo))));
    vd t_lo;
    const vd a_hi = vd_scale_by_bits(exp2_j128(c, kf, &t_lo), kf, 45);
    const vd a_lo = vd_mul(t_lo, vd_scale_by_bits(one, kf, 45));
    const vd ap = vd_mul(a_hi, p0.hi), ap_lo = vd_fms(a_hi, p0.hi, ap);
    const struct vdd am = vdd_fast_two_sum(vd_set1(-1), a_hi);
    const struct vdd e = vdd_fast_two_sum(am.hi, ap);
    const vd e_lo = vd_add(e.lo, vd_add(am.lo, vd_add(a_lo, vd_fma(a_hi, plo, vd_fma(a_lo, p0.hi, ap_lo)))));
    const vd y = vd_mul(c->neg, e.hi);
    *yl = vd_fma(c->neg, e_lo, vd_fms(c->neg, e.hi, y));
    return y;
}

/* The result for lanes below zero; the others compute a stand-in, T_MIN. */
INLINE vd forward_negative_f64(vd x, const struct forward_consts_f64 *c, bool unit_nip)
{
    const vd zero = vd_set1(0), t_min = vd_set1(ELU_F64_T_MIN);
    const vdmask negative = vd_lt(x, zero);
    const vd th = unit_nip ? x : vd_mul(x, c->nip);
    /* t itself where x < 0 and t >= T_MIN (not NaN, not -inf), else T_MIN */
    const vdmask take = vd_le(t_min, vd_select(negative, th, vd_set1(NAN)));
    const vd tc = vd_select(take, th, t_min);
    const vd tl = unit_nip ? zero : vd_select(take, vd_fms(x, c->nip, th), zero);
    vd yl;
    const vd yh = forward_fast_f64(c, tc, tl, &yl);
    const vd err = vd_mul(vd_set1(ELU_F64_FAST_ERR), vd_abs(yh));
    vd y = vd_add(yh, vd_sub(yl, err));
    const unsigned doubt = ~vd_mask_bits(vd_eq(y, vd_add(yh, vd_add(yl, err))));
    const unsigned tiny = vd_mask_bits(vd_lt(vd_abs(th), vd_set1(ELU_F64_TINY)));
    const unsigned redo = (doubt | tiny) & vd_mask_bits(negative) & ((1u << V_WIDTH / 2) - 1);
    if (redo) { /* rare: the scalar code for those lanes */
        double xs[V_WIDTH / 2], ys[V_WIDTH / 2];
        vd_store(xs, x);
        vd_store(ys, y);
        for (unsigned m = redo; m; m &= m - 1) {
            const int k = __builtin_ctz(m);
            ys[k] = elu_f64_forward_neg(xs[k], c->coef->scale_alpha, c->coef->input_scale, unit_nip,
                                        false);
        }
        y = vd_load(ys);
    }
    return y;
}

/* The result for the other lanes: x*pos, a zero's signed zero, NaN. */
INLINE vd forward_rest_f64(vd x, const struct forward_consts_f64 *c)
{
    return vd_select_mul(vd_eq(x, vd_set1(0)), x, c->neg, vd_mul(x, c->pos));
}

#ifdef __AVX512F__
INLINE bool packable_f64(const struct forward_consts_f64 *c)
{
    (void)c;
    return true;
}
#endif

INLINE vd forward_v_f64(vd x, const struct forward_consts_f64 *c, bool unit_nip)
{
    return vd_select(vd_lt(x, vd_set1(0)), forward_negative_f64(x, c, unit_nip),
                     forward_rest_f64(x, c));
}

#define ET float
#define VT vf
#define V(op) v_##op
#define LANES V_WIDTH
#define FN(f) f##_f32
#include "cpu_fast_loops.inc"

#define ET double
#define VT vd
#define V(op) vd_##op
#define LANES (V_WIDTH / 2)
#define FN(f) f##_f64
#include "cpu_fast_loops.inc"

/* -------- backward, f32 --------
 *
 * In double: the exact inputs' products and sums lose at most a few double
 * roundings (2^-50 or so), far below the float ulp of the single rounding
 * at the end. Memory, not arithmetic, bounds these kernels: three arrays
 * move for every element. */

/* e^a, for a <= 0: 2^k e^r with k = round(a/ln2), |r| <= ln2/2, and e^r
 * by its Taylor polynomial to degree 8 (error below 2^-32, a 256th of a
 * float ulp); 0 below -708, where even the largest float gradient times it
 * is 0 in float. */
INLINE vd exp_neg(vd a)
{
    const vd am = vd_max(vd_set1(-708.0), a);
    const vd k = vd_round(vd_mul(am, vd_set1(0x1.71547652b82fep0)));
    vd r = vd_fnma(k, vd_set1(0x1.62e42fefa3800p-1), am); /* exact: ln2's top 42 bits */
    r = vd_fnma(k, vd_set1(0x1.ef35793c76730p-45), r);
    vd p = vd_set1(1.0 / 40320);
    static const double coef[] = {1.0 / 5040, 1.0 / 720, 1.0 / 120, 1.0 / 24, 1.0 / 6, 0.5, 1, 1};
    for (size_t i = 0; i < sizeof coef / sizeof *coef; i++)
        p = vd_fma(p, r, vd_set1(coef[i]));
    return vd_select(vd_lt(a, vd_set1(-708.0)), vd_set1(0.0), vd_ldexp(p, k));
}

/* PyTorch's elu_backward, s the saved input or output: a NaN s takes the
 * scale branch. */
INLINE vd backward_d(vd g, vd s, const struct backward_consts *c, bool from_output)
{
    const vd negative = from_output ? vd_mul(vd_mul(g, c->nip), vd_add(s, c->neg))
                                    : vd_mul(vd_mul(g, c->w), exp_neg(vd_mul(s, c->nip)));
    return vd_select(vd_le(s, vd_set1(0.0)), negative, vd_mul(g, c->pos));
}

INLINE vf backward_v_f32(vf g, vf s, const struct backward_consts *c, bool from_output,
                         unsigned *redo)
{
    *redo = 0;
    return vd_join(backward_d(vd_lo(g), vd_lo(s), c, from_output),
                   backward_d(vd_hi(g), vd_hi(s), c, from_output));
}

/* -------- backward, f64 --------
 *
 * Within 1 ulp, in double arithmetic with exact pairs:
 *
 *   from the input:  g*w*e^a, w = w + w_lo and a = ah + al exactly, e^a =
 *                    2^k (1 + r1 + tail) by reduce_f64; with mh + ml = g*w,
 *                    y = 2^k (mh + mh*r1 + (mh*tail + ml*(1 + r1))), where
 *                    mh*r1 = ph + pl exactly and mh + ph = s + sl exactly
 *                    (Fast2Sum, |r1| < 0.35): one rounding of note, the last
 *   from the output: g*nip*(s + neg) = (qh + ql)(th + tl), each pair exact
 *                    (an FMA, TwoSum), = ph + (pl + qh*tl + ql*th), ph + pl
 *                    = qh*th exactly
 *
 * Those identities hold while every product stays normal. Lanes where one
 * might not (|g|, |g*nip| or |s + neg| beyond 2^+-300 or so, a below -200:
 * rare in real data), and those with an infinity or NaN, are left to the
 * scalar kernel; zeros are kept here, with their signs. */

/* 1 in the lanes where |v| lies in [2^-e, 2^e] or v is zero. */
INLINE unsigned in_range(vd v, double e)
{
    const vd a = vd_abs(v);
    return vd_mask_bits(vd_le(a, vd_set1(e))) &
           (vd_mask_bits(vd_le(vd_set1(1 / e), a)) | vd_mask_bits(vd_eq(a, vd_set1(0))));
}

INLINE vd backward_output_f64(vd g, vd s, const struct backward_consts *c, unsigned *ok)
{
    const vd th = vd_add(s, c->neg), b = vd_sub(th, s);
    const vd tl = vd_add(vd_sub(s, vd_sub(th, b)), vd_sub(c->neg, b));
    const vd qh = vd_mul(g, c->nip), ql = vd_fms(g, c->nip, qh);
    const vd ph = vd_mul(qh, th), pl = vd_fms(qh, th, ph);
    const vd y = vd_add(ph, vd_add(pl, vd_fma(qh, tl, vd_mul(ql, th))));
    /* g*nip = 0 for a nonzero g underflowed: the scalar kernel's then */
    const unsigned lost = vd_mask_bits(vd_eq(qh, vd_set1(0))) & ~vd_mask_bits(vd_eq(g, vd_set1(0)));
    *ok = in_range(qh, 0x1p400) & in_range(th, 0x1p400) & ~lost;
    /* a zero factor: ph is the product's signed zero */
    const vd zeros = vd_mul(vd_abs(qh), vd_abs(th));
    return vd_select(vd_eq(zeros, vd_set1(0)), ph, y);
}

INLINE vd backward_input_f64(vd g, vd s, const struct backward_consts *c, unsigned *ok)
{
    const vd ah = vd_mul(s, c->nip), al = vd_fms(s, c->nip, ah);
    const struct reduced_f64 e = reduce_f64(ah);
    /* expm1(r1 + rl) - r1 = t0 + r2l/2 + rl*(1 + r1 + t0), rl = al - k*(ln2 -
     * LN2): |rl| reaches 2^-47 here, as k reaches -289 */
    const vd rl = vd_fnma(e.k, vd_set1(ELU_EXPM1_LN2_LO), al);
    const vd t0 = vd_fma(e.r2, vd_set1(0.5), vd_mul(e.r2, e.h));
    const vd tail = vd_add(t0, vd_fma(e.r2l, vd_set1(0.5), vd_fma(rl, vd_add(e.r1, t0), rl)));
    const vd mh = vd_mul(g, c->w), ml = vd_fma(g, c->w_lo, vd_fms(g, c->w, mh));
    const vd ph = vd_mul(mh, e.r1), pl = vd_fms(mh, e.r1, ph);
    const vd sh = vd_add(mh, ph), sl = vd_sub(ph, vd_sub(sh, mh));
    const vd rest = vd_add(vd_add(sl, pl), vd_fma(mh, tail, vd_fma(ml, e.r1, ml)));
    const vd y = vd_ldexp(vd_add(sh, rest), e.k);
    *ok = in_range(g, 0x1p300) & vd_mask_bits(vd_le(vd_set1(-200), ah));
    return vd_select(vd_eq(g, vd_set1(0)), mh, y); /* mh: the signed zero */
}

INLINE vd backward_v_f64(vd g, vd s, const struct backward_consts *c, bool from_output,
                         unsigned *redo)
{
    unsigned ok;
    const vd neg_branch = from_output ? backward_output_f64(g, s, c, &ok)
                                      : backward_input_f64(g, s, c, &ok);
    const vdmask negative = vd_le(s, vd_set1(0));
    *redo = vd_mask_bits(negative) & ~ok;
    return vd_select(negative, neg_branch, vd_mul(g, c->pos));
}

/* -------- backward, f16 and bf16 --------
 *
 * dx = g * F(s), F(s) the factor of g for saved value s, computed in
 * float: scale where s > 0 or NaN; else from the output F = nip*(s + neg),
 * rounded once or twice (the constants are floats), and from the input F =
 * w*e^(s*nip), w = nip*neg, within 2.1 * 2^-24 of it (factor_input). g is
 * exact, so y = g*F rounded to float lies within t->ulps float ulps of the
 * exact result: 3 from the output (2 where nip = 1), 4 from the input.
 * Nothing is kept per set of constants: new ones cost nothing more.
 *
 * y rounded to the type (13 or 16 bits fewer) is then the exact result's
 * rounding unless a tie of the type lies within that many float ulps of y:
 * v_near_tie marks those lanes (about 5 in 8192 for f16, in 65536 for
 * bf16, of random data from the output, twice as many from the input;
 * more of short numbers, whose products are often exact ties), and
 * settle_ties decides them, leaving to the scalar kernel what it cannot,
 * and infinities and NaNs. bf16's ties lie at the same bits of a float
 * throughout, its subnormals' at a float's subnormals'. f16's below its
 * smallest normal, 2^-14, lie where they do in [2^-14, 2^-13): there the
 * test takes |y| + 2^-14, rounded by at most half an ulp of the sum, which
 * leaves it within 1.5 of them of the exact value's. */

struct half_type {
    bool bf16, from_output;
    bool unit_nip;  /* input_scale 1, from the input: s*nip is s */
    bool exact_fma; /* settle F from the input in double (backward_input_f64) */
    int low_bits;   /* float bits below the type's last: 13, 16 */
    int ulps;       /* how far from y the exact result may lie, in float ulps */
    vf neg, nip, pos;
    /* From the input (factor_input): w 2^(j/16) rounded to float, w =
     * nip*neg; zero_n, the n below which every gradient times F rounds to
     * zero in the type; whether w is a float; F in double by
     * backward_input_f64's constants. */
    float w16[16];
    vf zero_n;
    bool w_exact;
    struct backward_consts d;
};

INLINE struct half_type half_type_of(const struct elu_coef *coef, bool bf16, bool from_output,
                                     bool unit_nip, bool exact_fma)
{
    const double w = coef->input_scale * coef->scale_alpha; /* exact: two floats */
    const double max_g = bf16 ? 0x1.fep127 : 65504.0;
    const double zero_below = bf16 ? 0x1p-135 : 0x1p-26; /* half of half the least step */
    struct half_type t = {
        .bf16 = bf16,
        .from_output = from_output,
        .unit_nip = unit_nip,
        .exact_fma = exact_fma,
        .low_bits = bf16 ? 16 : 13,
        .ulps = !from_output ? 4 : coef->input_scale != 1 ? 3 : 2,
        .neg = v_set1((float)coef->scale_alpha),
        .nip = v_set1((float)coef->input_scale),
        .pos = v_set1((float)coef->scale),
        .w_exact = (float)w == w,
        .d = backward_consts_of(coef),
    };
    if (!from_output) {
        t.zero_n = v_set1((float)ceil(log2(zero_below / max_g) - log2(fabs(w)) - 1));
        for (int j = 0; j < 16; j++) /* within 2^-52 of w 2^(j/16) before the last rounding */
            t.w16[j] = (float)(w * elu_f32_exp2_16[0][j]);
    }
    return t;
}

/* F(s) from the input, for s <= 0: w*e^a, a = s*nip = ah + al exactly
 * (an FMA), as 2^n 2^(j/16) e^r with k = round(16 ah/ln2) = 16n + j, j in
 * [0, 16), and r = ah - k*ln2/16 + al, |r| <= ln2/32 (ln2/16 in two
 * parts; ah is clamped to -300). e^r - 1 by Taylor's polynomial of degree
 * 4 (within 2^-34.5), then w 2^(j/16) (a table made per call) times e^r
 * in one FMA. Within 2.1 * 2^-24 of F, relatively, while F is a normal
 * float: the table's rounding and the FMA's, 1 each; r's roundings and
 * the polynomial's add 0.1. F < |w| 2^(n + 1): where n < zero_n every
 * finite gradient times F rounds to zero in the type, and F is taken as a
 * zero of w's sign; where F is below float's normal range otherwise (bf16
 * alone: a between about -90 and -180), NaN, which leaves the lane to the
 * scalar kernel: with AVX2, whose v_ldexp stops at 2^-127, wherever n <=
 * -127. */
INLINE vf factor_input(const struct half_type *t, vf s)
{
    const vf ah = t->unit_nip ? s : v_mul(s, t->nip);
    const vf a = v_max(ah, v_set1(-300)); /* and a NaN's lane, which takes pos */
    const vf kf = v_fma(a, v_set1(0x1.715476p4f), v_set1(0x1.8p23f)); /* k in its low bits */
    const vf k = v_sub(kf, v_set1(0x1.8p23f));
    const vf r0 = v_fnma(k, v_set1(-0x1.05c610p-33f), v_fnma(k, v_set1(0x1.62e430p-5f), a));
    const vf r = t->unit_nip ? r0 : v_add(r0, v_fms(s, t->nip, ah));
    vf q = v_fma(r, v_set1(1.0f / 24), v_set1(1.0f / 6));
    q = v_fma(q, r, v_set1(0.5f));
    q = v_fma(q, r, v_set1(1));
    const vf w16 = v_table16(t->w16, kf);
    const vf n = v_floor(v_mul(k, v_set1(0x1p-4f)));
    const vf f = v_ldexp(v_fma(w16, v_mul(q, r), w16), n);
    const vf normal = v_select(v_le(v_set1(0x1p-126f), v_abs(f)), f, v_set1(NAN));
    return v_select(v_lt(n, t->zero_n), v_copysign(v_set1(0), v_set1(t->w16[0])), normal);
}

INLINE vf factor(const struct half_type *t, vf s)
{
    const vf f = t->from_output ? v_mul(t->nip, v_add(s, t->neg)) : factor_input(t, s);
    return v_select(v_le(s, v_set1(0)), f, t->pos); /* a NaN takes pos */
}

/* F - f rounded to float for F from the input, f = factor_input(s), s <= 0:
 * F by the f64 backward's exponential (a gradient of 1), within 2^-52 of
 * it, so that F - f is within 2^-45 of F; NaN in the lanes where that does
 * not hold (a below -200) or f is NaN or below 2^-100. Out of line: few
 * vectors need it. */
static __attribute__((noinline)) vf input_factor_rest(const struct half_type *t, vf s, vf f)
{
    unsigned ok[2];
    vd rest[2];
    for (int h = 0; h < 2; h++) {
        const vd sh = h ? vd_hi(s) : vd_lo(s);
        const vd d = backward_input_f64(vd_set1(1), sh, &t->d, &ok[h]);
        rest[h] = vd_sub(d, h ? vd_hi(f) : vd_lo(f));
    }
    const unsigned usable = (ok[0] | ok[1] << (V_WIDTH / 2)) &
                            v_mask_bits(v_le(v_set1(0x1p-100f), v_abs(f)));
    return v_select_bits(usable, vd_join(rest[0], rest[1]), v_set1(NAN));
}

/* F - f rounded to float, where f is factor()'s F, for the lanes `near`
 * at least: within 2^-45 of it, relatively, or NaN where not known;
 * *exact: the lanes where f is F exactly. From the output, the exact
 * remainders of s + neg (TwoSum) and of nip times it (an FMA) give them.
 * The constants elu_cpu_fast_backward_ok takes keep F from the output
 * normal, and its remainders exact, unless it is 0. From the input, F is w
 * where s is zero, irrational elsewhere. */
INLINE vf factor_rest(const struct half_type *t, vf s, vf f, unsigned near, unsigned *exact)
{
    const unsigned negative = v_mask_bits(v_le(s, v_set1(0)));
    if (!t->from_output) {
        const unsigned zero = v_mask_bits(v_eq(s, v_set1(0)));
        *exact = ~negative | (t->w_exact ? zero : 0);
        const unsigned inexact = near & negative & ~*exact;
        const vf rest = t->exact_fma && inexact ? input_factor_rest(t, s, f) : v_set1(NAN);
        return v_select_bits(negative & ~*exact, rest, v_set1(0));
    }
    const vf sum = v_add(s, t->neg), b = v_sub(sum, s);
    const vf sum_rest = v_add(v_sub(s, v_sub(sum, b)), v_sub(t->neg, b));
    const vf product_rest = v_fms(t->nip, sum, f);
    *exact = ~negative | (v_mask_bits(v_eq(sum_rest, v_set1(0))) &
                          v_mask_bits(v_eq(product_rest, v_set1(0))));
    return v_select_bits(negative, v_fma(t->nip, sum_rest, product_rest), v_set1(0));
}

/* Where v_near_tie looks for ties of the type: y for bf16; for f16, |y|,
 * plus 2^-14 below that (f16's smallest normal). */
INLINE vf tie_test(const struct half_type *t, vf y, vf *shift)
{
    const vf ay = v_abs(y), m = v_set1(0x1p-14f);
    *shift = t->bf16 ? v_set1(0) : v_select(v_lt(ay, m), m, v_set1(0));
    return t->bf16 ? y : v_select(v_lt(ay, m), v_add(ay, m), ay);
}

/* y = g*f, f = factor(t, s), settled where it lies near a tie of the type
 * (the lanes `near`, finite): y itself where it is the exact result, f
 * exactly F and the product exact too (its remainder r is 0); else the
 * float next to the tie T on the exact result's side, which then rounds to
 * the type as the exact result does. That side is the sign of g*F - T =
 * (y - T) + r + g*(F - f), within 2^-46 of it (y - T and r exact, the rest
 * rounded once or twice). r is exact where |y| >= 2^-100: g*f's bits then
 * lie above a float's smallest subnormal. *unsettled gets the lanes left:
 * |y| below that, F - f unknown (NaN), or g*F too close to T to tell. */
INLINE vf settle_ties(const struct half_type *t, vf s, vf g, vf f, vf y, unsigned near,
                      unsigned *unsettled)
{
    const vf ay = v_abs(y), r = v_fms(g, f, y);
    const unsigned big = ~v_mask_bits(v_lt(ay, v_set1(0x1p-100f)));
    unsigned exact_f;
    const vf rest = factor_rest(t, s, f, near, &exact_f);
    *unsettled = near & ~(big & exact_f & v_mask_bits(v_eq(r, v_set1(0))));
    if (!*unsettled) /* the usual case where ties are common */
        return y;
    vf shift;
    const vf tested = tie_test(t, y, &shift);
    const vf tie = v_copysign(v_sub(v_tie(tested, t->low_bits), shift), y);
    const vf d = v_add(v_sub(y, tie), v_fma(g, rest, r));
    const unsigned apart = v_mask_bits(v_gt(v_abs(d), v_mul(v_abs(tie), v_set1(0x1p-40f))));
    const unsigned moved = *unsettled & big & apart;
    *unsettled &= ~moved;
    return v_select_bits(moved, v_next_toward(tie, d), y);
}

/* y = g*F rounded to float (not yet to the type) for the V_WIDTH gradients
 * g and saved values s; *redo marks the lanes the scalar kernel redoes. */
INLINE vf backward_half_vector(const struct half_type *t, vf g, vf s, unsigned *redo)
{
    const vf f = factor(t, s);
    const vf y = v_mul(g, f);
    vf shift;
    const unsigned all = (1u << V_WIDTH) - 1;
    const unsigned unsafe = ~v_mask_bits(v_le(v_abs(y), v_set1(FLT_MAX))) & all; /* inf, NaN */
    *redo = (v_near_tie(tie_test(t, y, &shift), t->low_bits, t->ulps) & all) | unsafe;
    if (!*redo)
        return y;
    unsigned unsettled;
    const vf settled = settle_ties(t, s, g, f, y, *redo & ~unsafe, &unsettled);
    *redo = unsettled | unsafe;
    return settled;
}

/* Lanes to redo, noted with their inputs (dx may be g or s) and redone by
 * the scalar kernel after a block of vectors: no call in the loop. */
struct noted {
    size_t at;
    uint16_t g, s;
};
struct notes {
    size_t count;
    struct noted at[8 * V_WIDTH];
};

/* Notes the lanes in redo of the elements at g[at0 + k * step], s[...]
 * (lane k), those below `end`. */
static void note(struct notes *notes, const uint16_t *g, const uint16_t *s, size_t at0,
                 size_t step, unsigned redo, size_t end)
{
    for (; redo; redo &= redo - 1) {
        const size_t k = (size_t)__builtin_ctz(redo), at = at0 + k * step;
        if (at < end)
            notes->at[notes->count++] = (struct noted){at, g[k * step], s[k * step]};
    }
}

/* One step of the loop: the f16 elements at g, s and dx, V_WIDTH of them,
 * or the bf16 ones, 2 * V_WIDTH (their even and odd positions: no
 * shuffles to widen and narrow them); the lanes to redo into notes, with
 * their positions from `at`, below `end`. */
INLINE void backward_half_step(const struct half_type *t, const uint16_t *g, const uint16_t *s,
                               uint16_t *dx, bool stream, size_t at, size_t end,
                               struct notes *notes)
{
    unsigned redo;
    if (!t->bf16) {
        const vf y = backward_half_vector(t, v_load_f16(g), v_load_f16(s), &redo);
        if (redo)
            note(notes, g, s, at, 1, redo, end);
        v_store_f16(dx, y, stream);
        return;
    }
    vf ge, go, se, so;
    v_load_bf16_pairs(g, &ge, &go);
    v_load_bf16_pairs(s, &se, &so);
    unsigned redo_odd;
    const vf ye = backward_half_vector(t, ge, se, &redo);
    const vf yo = backward_half_vector(t, go, so, &redo_odd);
    if (redo | redo_odd) {
        note(notes, g, s, at, 2, redo, end);
        note(notes, g + 1, s + 1, at + 1, 2, redo_odd, end);
    }
    v_store_bf16_pairs(dx, ye, yo, stream);
}

/* The m elements from at (fewer than a step), through buffers. */
INLINE void backward_half_part(const struct half_type *t, const uint16_t *g, const uint16_t *s,
                               uint16_t *dx, size_t at, size_t m, struct notes *notes)
{
    uint16_t bg[2 * V_WIDTH] = {0}, bs[2 * V_WIDTH] = {0}, by[2 * V_WIDTH];
    memcpy(bg, g + at, m * sizeof *g);
    memcpy(bs, s + at, m * sizeof *s);
    backward_half_step(t, bg, bs, by, false, at, at + m, notes);
    memcpy(dx + at, by, m * sizeof *dx);
}

/* By steps, in blocks that note at most 8 * V_WIDTH lanes, which the scalar
 * kernel then redoes; the elements before dx's first aligned vector (where
 * its stores stream) and after the last step, by parts. */
INLINE void backward_half_loop(const struct elu_coef *coef, bool bf16, const uint16_t *g,
                               const uint16_t *s, bool from_output, bool unit_nip, uint16_t *dx,
                               size_t n)
{
    const struct half_type t = half_type_of(coef, bf16, from_output, unit_nip, exact_fma64());
    const enum elu_kernel kernel = from_output ? ELU_KERNEL_BACKWARD_OUTPUT
                                               : ELU_KERNEL_BACKWARD_INPUT;
    const size_t step = bf16 ? 2 * V_WIDTH : V_WIDTH, ahead = PREFETCH_BYTES / sizeof *g;
    const size_t head = stream_start(dx, n, sizeof *dx);
    const bool stream = head < n;
    struct notes notes;
    for (size_t i = 0; i < n;) {
        notes.count = 0;
        while (stream && i < head) { /* up to dx's first aligned vector */
            const size_t m = head - i < step ? head - i : step;
            backward_half_part(&t, g, s, dx, i, m, &notes);
            i += m;
        }
        for (; i + step <= n && notes.count <= 6 * V_WIDTH; i += step) {
            if (i + ahead < n) {
                __builtin_prefetch(g + i + ahead);
                __builtin_prefetch(s + i + ahead);
            }
            backward_half_step(&t, g + i, s + i, dx + i, stream, i, n, &notes);
        }
        if (i + step > n && i < n && notes.count <= 6 * V_WIDTH) {
            backward_half_part(&t, g, s, dx, i, n - i, &notes);
            i = n;
        }
        for (size_t k = 0; k < notes.count; k++)
            elu_cpu_element(coef, kernel, &notes.at[k].g, 0, &notes.at[k].s, 0, dx,
                            (ptrdiff_t)notes.at[k].at);
    }
    if (stream)
        _mm_sfence(); /* streamed stores are visible before we return */
}

static void backward_half(const struct elu_coef *coef, const uint16_t *g, const uint16_t *s,
                          bool from_output, uint16_t *dx, size_t n)
{
    const bool bf16 = coef->dtype == ELU_BF16, unit_nip = coef->input_scale == 1;
    if (from_output && bf16)
        backward_half_loop(coef, true, g, s, true, false, dx, n);
    else if (from_output)
        backward_half_loop(coef, false, g, s, true, false, dx, n);
    else if (unit_nip && bf16)
        backward_half_loop(coef, true, g, s, false, true, dx, n);
    else if (unit_nip)
        backward_half_loop(coef, false, g, s, false, true, dx, n);
    else if (bf16)
        backward_half_loop(coef, true, g, s, false, false, dx, n);
    else
        backward_half_loop(coef, false, g, s, false, false, dx, n);
}

/* -------- forward, f16 and bf16: computed --------
 *
 * In float, as the GPU's generic module computes them (kernels_src/elu.cu's
 * computed_value; 2^b by a polynomial here where the GPU has ex2.approx):
 * y = x*pos for x > 0, else y = neg*(2^b - 1) with b = x*fl(nip*log2(e)).
 * y lies within 2^-21.7 of the exact result, 5 float ulps (exp2m1's
 * error, b's rounding, the product's; docs/DESIGN.md, The half types), so
 * where its bits below the type's last are more than 16 ulps from a tie
 * of the type, y rounds to it as the exact result does. The rest (about
 * one lane in 250 for f16, one in 2^12 for bf16, of random inputs; results
 * below the type's smallest normal, infinities and NaN) settle_half
 * settles. No table: new constants cost nothing more. */

struct forward_consts_half {
    const struct elu_coef *coef; /* for the scalar kernel */
    bool bf16;
    vf neg, pos, log2e_nip, least; /* least: the type's smallest normal */
    struct forward_consts_f32 f32; /* settle_half's */
    vd pos_d, least_d, far;        /* far: -neg*(1 - 2^-30), see settle_half */
};

/* The scalar kernel's NaN, found at a call's first NaN input. */
struct half_nan {
    bool known;
    float value;
};

INLINE struct forward_consts_half forward_consts_of_half(const struct elu_coef *coef)
{
    const bool bf16 = coef->dtype == ELU_BF16;
    const float least = bf16 ? 0x1p-100f : 0x1p-14f;
    struct forward_consts_half c = {
        .coef = coef,
        .bf16 = bf16,
        .neg = v_set1((float)coef->scale_alpha),
        .pos = v_set1((float)coef->scale),
        .log2e_nip = v_set1((float)coef->input_scale * 0x1.715476p0f),
        .least = v_set1(least),
        .f32 = forward_consts_of_f32(coef),
        .pos_d = vd_set1(coef->scale),
        .least_d = vd_set1(bf16 ? 0x1p-126 : 0x1p-14),
        .far = vd_set1(-coef->scale_alpha * (1 - 0x1p-30)),
    };
    return c;
}

/* *n = round(b) and f Q(f), f = b - n in [-1/2, 1/2] (exact), Q a
 * near-minimax fit of (2^f - 1)/f of degree 5: 2^b = 2^n (1 + f Q(f)). */
INLINE vf exp2_frac(vf b, vf *n)
{
    *n = v_round(b);
    const vf f = v_sub(b, *n);
    vf q = v_fma(v_set1(0x1.4307ccp-13f), f, v_set1(0x1.5f0762p-10f));
    q = v_fma(q, f, v_set1(0x1.3b2ba0p-7f));
    q = v_fma(q, f, v_set1(0x1.c6af70p-5f));
    q = v_fma(q, f, v_set1(0x1.ebfbdep-3f));
    q = v_fma(q, f, v_set1(0x1.62e430p-1f));
    return v_mul(f, q);
}

/* 2^b - 1 for b <= 0: with n = round(b) and f = b - n in [-1/2, 1/2]
 * (exact), 2^n q + (2^n - 1) in one FMA, q = f Q(f) for Q a near-minimax
 * fit of (2^f - 1)/f of degree 5. Measured over every float b in
 * [-30, -2^-120] against expm1l: within 2^-22.98 (1.52 ulps); below -30
 * it rounds to -1. Nearer 0 the product f Q(f) leaves float's normal
 * range, and a zero b loses its sign: results of the type's smallest
 * normal or more come from neither (elu_cpu_fast_half_forward_ok's
 * bounds; a zero x is taken apart). -inf gives NaN. */
INLINE vf exp2m1(vf b)
{
    vf n;
    const vf fq = exp2_frac(b, &n), scale = v_exp2i(n);
    return v_fma(scale, fq, v_sub(scale, v_set1(1)));
}

/* The type's bits of x, one of its values (exactly), and a value of the
 * type as a float, its NaN's sign kept: f16 through the vector
 * conversion, which every set here has. */
static uint16_t half_bits(float x, bool bf16)
{
    return bf16 ? elu_bf16_from(x) : elu_f16_from(x);
}
static float half_value(uint16_t h, bool bf16)
{
    float v[V_WIDTH];
    if (bf16) {
        const uint32_t b = (uint32_t)h << 16;
        memcpy(v, &b, sizeof b);
        return v[0];
    }
    uint16_t hs[V_WIDTH];
    for (int k = 0; k < V_WIDTH; k++)
        hs[k] = h;
    v_store(v, v_load_f16(hs));
    return v[0];
}

/* The scalar kernel's result for x (one of the type's values), as a
 * float. */
static float scalar_half(const struct forward_consts_half *c, float x)
{
    const uint16_t h = half_bits(x, c->bf16);
    uint16_t y;
    elu_cpu_element(c->coef, ELU_KERNEL_FORWARD, &h, 0, NULL, 0, &y, 0);
    return half_value(y, c->bf16);
}

/* The lanes of `unsure` where b <= -12, settled apart from the double
 * path. Their results lie close to -neg, within neg 2^b of it: where
 * -neg lies within 16 float ulps of a tie of the type (about one alpha in
 * 250), the forward's test leaves the results of every x below about
 * -14/nip in doubt. For a tie T near y, the exact value's side of T is
 * the sign of d = neg 2^b + (-neg - T): -neg - T is exact (Sterbenz), and
 * neg 2^n (1 + f Q(f)) lies within 2^-17.5 of neg 2^b, relatively (b's
 * rounding moves 2^b by 2^-18.2 at most while b >= -26; below, 2^b <
 * 2^-26 is either far below the distance of -neg from T, or T is -neg and
 * only its sign counts). Where |d| exceeds 2^-16 of that term, its sign is
 * the exact value's, and the float next to T on that side rounds to the
 * type as the exact value does. */
INLINE vf settle_deep(const struct forward_consts_half *c, vf x, vf y, int low,
                      unsigned *unsure)
{
    const vf b = v_mul(x, c->log2e_nip), a = v_abs(y);
    const unsigned deep = *unsure & v_mask_bits(v_le(b, v_set1(-12))) &
                          v_mask_bits(v_le(c->least, a)) & v_mask_bits(v_le(a, v_set1(FLT_MAX)));
    if (!deep)
        return y;
    vf n;
    const vf fq = exp2_frac(b, &n);
    const vf above = v_mul(c->neg, v_ldexp(v_add(fq, v_set1(1)), n)); /* neg 2^b */
    const vf tie = v_tie(y, low);
    const vf d = v_add(above, v_sub(v_sub(v_set1(0), c->neg), tie));
    const unsigned shown = v_mask_bits(v_gt(v_abs(d), v_mul(v_abs(above), v_set1(0x1p-16f))));
    const unsigned settled = deep & shown;
    *unsure &= ~settled;
    return v_select_bits(settled, v_next_toward(tie, d), y);
}

/* y's lanes `unsure`, for x, settled: the f32 forward's evaluation in
 * double (within 2^-41 of the exact value; its slow path, within 2^-99,
 * where that lies within 2^-40 of a tie of the type), x*pos exactly for
 * x > 0. Where t = x*nip <= -18, e^t < 2^-25.9: the exact value lies
 * within 2^-25.9 of -neg, toward zero, where no tie of the type lies but
 * -neg itself (two floats that differ lie an ulp apart): any value there
 * rounds alike, and the one taken is -neg*(1 - 2^-30), which spares the
 * slow path the lanes where -neg is a tie.
 *
 * The value is rounded to odd at float's last bit, which the store then
 * rounds to the type as the exact value: float keeps 13 or 16 bits more
 * than the type, 2 would do. Below the type's smallest normal its steps
 * are those of [least, 2 least), so the doubt test takes |y| + least.
 * bf16's steps below 2^-126 (2^-133) are rounded apart, y scaled by 2^64
 * into float's normal range, rounded to odd there and then to a multiple
 * of 2^-69: in float's subnormals rounding to odd would be too coarse.
 *
 * NaN inputs get the scalar kernel's NaN (found once a call), which also
 * computes NaN results of other inputs (+inf times a zero scale). Out of
 * line: the loop's registers stay its own. */
static __attribute__((noinline, cold)) vf settle_half(const struct forward_consts_half *c,
                                                      struct half_nan *nan, vf x, vf y,
                                                      unsigned unsure)
{
    const int low = c->bf16 ? 16 : 13; /* float bits below the type's last */
    y = settle_deep(c, x, y, low, &unsure);
    if (!unsure)
        return y;
    const int half = V_WIDTH / 2;
    const vmask negative = v_lt(x, v_set1(0));
    const vf xc = v_select(negative, v_max(c->f32.x_min, x), c->f32.x_min);
    vd d[2], scaled[2];
    for (int h = 0; h < 2; h++) {
        const vd xh = h ? vd_hi(x) : vd_lo(x), xch = h ? vd_hi(xc) : vd_lo(xc);
        vd yd = forward_fast_f32(xch, &c->f32, false);
        const vd a = vd_abs(yd);
        const vd tested = vd_select(vd_lt(a, c->least_d), vd_add(a, c->least_d), yd);
        const unsigned doubt = vd_near_tie(tested, low + 29, ELU_F32_FAST_ERR) &
                               v_mask_bits(negative) >> (h * half) & ((1u << half) - 1);
        const vdmask far = vd_le(vd_mul(xh, c->f32.nip), vd_set1(ELU_F32_T_MIN));
        if (doubt & ~vd_mask_bits(far))
            yd = vd_select_bits(doubt, forward_slow_f32(vd_mul(xch, c->f32.nip), c->f32.neg), yd);
        yd = vd_select(far, c->far, yd);
        /* a zero neg's signed zero, which forward_fast_f32 leaves unsigned */
        yd = vd_select_mul(vd_eq(yd, vd_set1(0)), xh, c->f32.neg, yd);
        yd = vd_select(vd_gt(xh, vd_set1(0)), vd_mul(xh, c->pos_d), yd);
        yd = vd_select_mul(vd_eq(xh, vd_set1(0)), xh, c->f32.neg, yd); /* the signed zero */
        yd = vd_select(vd_eq(xh, vd_set1(-INFINITY)), vd_mul(c->f32.neg, vd_set1(-1)), yd);
        d[h] = vd_odd_at(yd, 29);
        scaled[h] = vd_odd_at(vd_mul(vd_abs(yd), vd_set1(0x1p64)), 29);
    }
    vf r = vd_join(d[0], d[1]);
    if (c->bf16) { /* |y| 2^64 rounded to a multiple of 2^-69 by adding 1.5*2^-46 */
        const vf m = v_set1(0x1.8p-46f);
        const vf steps = v_sub(v_add(vd_join(scaled[0], scaled[1]), m), m);
        const vf below = v_copysign(v_mul(steps, v_set1(0x1p-64f)), r);
        r = v_select(v_lt(v_abs(r), v_set1(0x1p-126f)), below, r);
    }
    const unsigned all = (1u << V_WIDTH) - 1;
    const unsigned nan_in = ~v_mask_bits(v_eq(x, x)) & unsure;
    const unsigned nan_out = ~v_mask_bits(v_eq(r, r)) & ~nan_in & unsure & all;
    if (nan_in && !nan->known)
        *nan = (struct half_nan){true, scalar_half(c, NAN)};
    r = v_select_bits(nan_in, v_set1(nan->value), r);
    if (nan_out) {
        float xs[V_WIDTH], rs[V_WIDTH];
        v_store(xs, x);
        v_store(rs, r);
        for (unsigned m = nan_out; m; m &= m - 1) {
            const int k = __builtin_ctz(m);
            rs[k] = scalar_half(c, xs[k]);
        }
        r = v_load(rs);
    }
    return v_select_bits(unsure, r, y);
}

/* The forward of V_WIDTH values of the type, as floats (see above): x
 * itself above 0 where scale is 1 (unit_pos), exact. A zero x gives x*neg,
 * the exact result's signed zero. */
INLINE vf forward_v_half(vf x, const struct forward_consts_half *c, bool bf16, bool unit_pos,
                         struct half_nan *nan)
{
    const vmask zero = v_eq(x, v_set1(0)), positive = v_gt(x, v_set1(0));
    const vf below = v_mul(exp2m1(v_mul(x, c->log2e_nip)), c->neg);
    const vf y = v_select_mul(zero, x, c->neg,
                              v_select(positive, unit_pos ? x : v_mul(x, c->pos), below));
    const vf a = v_abs(y);
    const unsigned normal = v_mask_bits(v_le(c->least, a)) & v_mask_bits(v_le(a, v_set1(FLT_MAX)));
    const unsigned exact = v_mask_bits(zero) | (unit_pos ? v_mask_bits(positive) : 0);
    const unsigned sure = (normal & ~v_near_tie(y, bf16 ? 16 : 13, 16)) | exact;
    const unsigned unsure = ~sure & ((1u << V_WIDTH) - 1);
    return unsure ? settle_half(c, nan, x, y, unsure) : y;
}

/* One step: V_WIDTH f16 elements, or 2 * V_WIDTH bf16 ones (as the floats
 * at their even and at their odd positions). */
INLINE void forward_half_step(const struct forward_consts_half *c, bool bf16, bool unit_pos,
                              struct half_nan *nan, const uint16_t *x, uint16_t *y, bool stream)
{
    if (!bf16) {
        v_store_f16(y, forward_v_half(v_load_f16(x), c, false, unit_pos, nan), stream);
        return;
    }
    vf even, odd;
    v_load_bf16_pairs(x, &even, &odd);
    v_store_bf16_pairs(y, forward_v_half(even, c, true, unit_pos, nan),
                       forward_v_half(odd, c, true, unit_pos, nan), stream);
}

/* The m elements at x (fewer than a step), through buffers. */
INLINE void forward_half_part(const struct forward_consts_half *c, bool bf16, bool unit_pos,
                              struct half_nan *nan, const uint16_t *x, uint16_t *y, size_t m)
{
    uint16_t bx[2 * V_WIDTH] = {0}, by[2 * V_WIDTH];
    memcpy(bx, x, m * sizeof *x);
    forward_half_step(c, bf16, unit_pos, nan, bx, by, false);
    memcpy(y, by, m * sizeof *y);
}

INLINE void forward_half_loop(const struct elu_coef *coef, bool bf16, bool unit_pos,
                              const uint16_t *x, uint16_t *y, size_t n)
{
    const struct forward_consts_half c = forward_consts_of_half(coef);
    struct half_nan nan = {false, 0};
    const size_t step = bf16 ? 2 * V_WIDTH : V_WIDTH, ahead = PREFETCH_BYTES / sizeof *x;
    size_t i = stream_start(y, n, sizeof *y);
    const bool stream = i < n;
    for (size_t j = 0; stream && j < i; j += step) /* up to y's first aligned vector */
        forward_half_part(&c, bf16, unit_pos, &nan, x + j, y + j, i - j < step ? i - j : step);
    if (!stream)
        i = 0;
    for (; i + step <= n; i += step) {
        if (i + ahead < n)
            __builtin_prefetch(x + i + ahead);
        forward_half_step(&c, bf16, unit_pos, &nan, x + i, y + i, stream);
    }
    if (i < n)
        forward_half_part(&c, bf16, unit_pos, &nan, x + i, y + i, n - i);
    if (stream)
        _mm_sfence(); /* streamed stores are visible before we return */
}

/* For constants elu_cpu_fast_half_forward_ok accepts. */
static void forward_half(const struct elu_coef *coef, const uint16_t *x, uint16_t *y, size_t n)
{
    const bool bf16 = coef->dtype == ELU_BF16;
    if (coef->scale == 1 && bf16)
        forward_half_loop(coef, true, true, x, y, n);
    else if (bf16)
        forward_half_loop(coef, true, false, x, y, n);
    else if (coef->scale == 1)
        forward_half_loop(coef, false, true, x, y, n);
    else
        forward_half_loop(coef, false, false, x, y, n);
}

/* -------- table lookups, 16-bit -------- */

/* The half types' forward: y[i] = table[x[i]], a vector of gathers at a
 * time. Streamed stores and prefetched inputs, as in the forward loops,
 * pay here too (docs/DESIGN.md, The half types). */
static void lookup16(const uint16_t *table, const uint16_t *x, uint16_t *y, size_t n)
{
    const size_t step = 2 * V_WIDTH, ahead = PREFETCH_BYTES / sizeof *x;
    size_t i = stream_start(y, n, sizeof *y);
    const bool stream = i < n;
    if (!stream)
        i = 0;
    for (size_t j = 0; j < i; j++) /* up to the first aligned vector of y */
        y[j] = table[x[j]];
    for (; i + step <= n; i += step) {
        if (i + ahead < n)
            __builtin_prefetch(x + i + ahead);
        const vf v = v_lookup16(table, x + i); /* 16-bit results, as a vector's bits */
        if (stream)
            v_stream((float *)(void *)(y + i), v);
        else
            v_store((float *)(void *)(y + i), v);
    }
    for (; i < n; i++)
        y[i] = table[x[i]];
    if (stream)
        _mm_sfence();
}

/* a^2 - round(a^2) for a = 1 + 3*2^-52 is 9*2^-104, which only a fused FMA
 * sees (an emulator's wider arithmetic may not: valgrind's loses it); and
 * -0*1 + -0 is -0. */
static bool exact_fma64(void)
{
    volatile double one_plus = 0x1.0000000000003p0, zero = -0.0; /* not folded */
    const __m128d a = _mm_set_sd(one_plus), z = _mm_set_sd(zero);
    const double rest = _mm_cvtsd_f64(_mm_fmsub_sd(a, a, _mm_mul_sd(a, a)));
    const double signed_zero = _mm_cvtsd_f64(_mm_fmadd_sd(z, _mm_set_sd(1), z));
    return rest == 0x1.2p-101 && signbit(signed_zero);
}

const struct elu_cpu_isa CAT(elu_cpu_isa, ELU_ISA) = {
    .name = ELU_ISA_NAME,
    .exact_fma64 = exact_fma64,
    .forward_f32 = forward_packed_f32,
    .forward_f64 = forward_packed_f64,
    .backward_f32 = backward_f32,
    .backward_f64 = backward_f64,
    .lookup16 = lookup16,
    .forward_half = forward_half,
    .backward_half = backward_half,
};
