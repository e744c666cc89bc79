/* Vectorized CPU kernels. Meson compiles this file once per x86 instruction
 * set (ELU_ISA names it: avx512, avx2) with that set's -m flags and
 * -ffp-contract=off; cpu.c calls a set's table only on a processor that has
 * it.
 *
 * Forward, f32, within 1 ulp of the exact neg * expm1(x * nip) (checked on
 * all 2^32 inputs by tests/test_cpu_exhaustive.c), in float arithmetic only:
 *
 *   a = x*nip            carried as ah + al, exactly (al by an FMA)
 *   a = k*ln2 + r        k = round(a/ln2), |r| <= ln2/2; r = r1 + rl,
 *                        where r1 = a - k*L is exact for the float L
 *                        nearest ln2 (|k| <= 26), and rl = al - k*(ln2 - L)
 *                        is tiny
 *   expm1(r) = r1 + tail tail = r1^2 P(r1) + rl*(1 + expm1(r1)), with P a
 *                        degree-5 near-minimax fit of (expm1(r) - r)/r^2 on
 *                        |r| <= ln2/2 (relative error 2^-26.4) and r1^2
 *                        exact (r2 + r2l)
 *   neg*expm1(a) = u*(1 + expm1(r)) - neg,  u = neg*2^k (exact)
 *                = (dh + dl) + (ph + pl) + u*tail
 *   where dh + dl = u - neg and ph + pl = u*r1, both exactly (Fast2Sum,
 *   |u| <= |neg|; an FMA), and s + sl = dh + ph exactly (Fast2Sum,
 *   |ph| <= |dh| or dh = 0). Then y = s + (dl + pl + sl + u*tail): the sum
 *   in brackets is below a fifth of |y|, so its roundings and tail's
 *   (below 2^-23 relative) cost under 0.3 ulp, and the last addition
 *   rounds once. Without the exact dh + ph, its rounding could cost
 *   another half ulp.
 *
 * x is clamped so that a >= -18 (about): below, expm1(a) is within 2^-26
 * of -1 and every result rounds to -neg, as at -18. Clamping x rather than
 * a keeps al small and finite, -inf included. Tiny a are apart (below). */
#include "cpu.h"
#include "cpu_fast.h"
#include "cpu_simd.h"

#include <math.h>
#include <string.h>

#define CAT2(a, b) a##_##b
#define CAT(a, b) CAT2(a, b)

/* How far ahead to prefetch the input, in floats (2 KiB): the hardware
 * prefetcher alone leaves a busy core waiting on memory. */
#define PREFETCH_FLOATS 512
/* Above this many bytes of output, store past the caches: the output would
 * not stay in them anyway, and ordinary stores first read every line. */
#define STREAM_BYTES ((size_t)4 << 20)

/* Where to start streaming stores into n floats at y: the count of
 * elements before y's first aligned vector; n when n is too small to
 * stream (or y misaligned for a float), so that no stores stream. */
static size_t stream_start(const float *y, size_t n)
{
    if (n * sizeof *y < STREAM_BYTES || (uintptr_t)y % sizeof *y)
        return n;
    return (sizeof(vf) - (uintptr_t)y % sizeof(vf)) % sizeof(vf) / sizeof *y;
}

struct forward_consts {
    vf neg, pos, nip;
    vf x_min, x_max; /* -18 / nip, -2^-29 / nip */
    vf w_hi, w_lo; /* nip * neg * 2^64, exactly */
};

/* Inlined into two loops: input_scale 1 (ELU, SELU), where a = x exactly,
 * and any other. */
#define INLINE static inline __attribute__((always_inline))

INLINE vf forward_v(vf x, const struct forward_consts *c, bool unit_nip)
{
    const vf ln2 = v_set1(0x1.62e430p-1f), ln2_lo = v_set1(-0x1.05c610p-29f);
    const vf xc = v_min(c->x_max, v_max(c->x_min, x)); /* a NaN stays */
    const vf a = unit_nip ? xc : v_mul(xc, c->nip);
    const vf k = v_round(v_mul(a, v_set1(0x1.715476p0f)));
    const vf r1 = v_fnma(k, ln2, a);
    const vf rl = unit_nip ? v_mul(k, v_sub(v_set1(0.0f), ln2_lo))
                           : v_fnma(k, ln2_lo, v_fms(xc, c->nip, a));

    vf p = v_fma(r1, v_set1(0x1.a073cap-13f), v_set1(0x1.6d4650p-10f));
    p = v_fma(p, r1, v_set1(0x1.11114ep-7f));
    p = v_fma(p, r1, v_set1(0x1.5554e6p-5f));
    p = v_fma(p, r1, v_set1(0x1.555556p-3f));
    p = v_fma(p, r1, v_set1(0.5f));
    const vf r2 = v_mul(r1, r1), r2l = v_fms(r1, r1, r2); /* r1^2, exactly */
    const vf t0 = v_fma(r2, p, v_mul(r2l, p));
    const vf tail = v_add(t0, v_fma(rl, v_add(r1, t0), rl));

    const vf u = v_ldexp(c->neg, k);
    const vf dh = v_sub(u, c->neg);
    const vf dl = v_sub(u, v_add(dh, c->neg));
    const vf ph = v_mul(u, r1), pl = v_fms(u, r1, ph);
    const vf s = v_add(dh, ph), sl = v_sub(ph, v_sub(s, dh));
    vf y = v_add(s, v_fma(u, tail, v_add(v_add(dl, pl), sl)));

    /* Where |x*nip| < 2^-29, expm1(x*nip) = x*nip within 2^-30, 1/64 ulp:
     * y = x*nip*neg, rounded about once (x*w_lo scaled not to underflow),
     * and -0.0 for -0.0. Clamping x keeps the lines above clear of such
     * tiny numbers, whose subnormal products would be slow and inexact. */
    const vmask tiny = v_gt(x, c->x_max);
    if (unit_nip)
        y = v_select_mul(tiny, x, c->neg, y);
    else
        y = v_select(tiny, v_mul(v_fma(x, c->w_hi, v_mul(x, c->w_lo)), v_set1(0x1p-64f)), y);
    return v_select_mul(v_gt(x, v_set1(0.0f)), x, c->pos, y);
}

/* Fewer than V_WIDTH elements, through a buffer. */
INLINE void forward_part(const struct forward_consts *c, const float *x, float *y, size_t n,
                         bool unit_nip)
{
    float buf[V_WIDTH] = {0};
    memcpy(buf, x, n * sizeof *x);
    v_store(buf, forward_v(v_load(buf), c, unit_nip));
    memcpy(y, buf, n * sizeof *y);
}

INLINE void forward_loop(const struct forward_consts *c, const float *x, float *y, size_t n,
                         bool unit_nip)
{
    size_t i = stream_start(y, n);
    const bool stream = i < n;
    if (stream) /* up to the first aligned vector of y */
        forward_part(c, x, y, i, unit_nip);
    else
        i = 0;
    for (; i + V_WIDTH <= n; i += V_WIDTH) {
        if (i + PREFETCH_FLOATS < n)
            __builtin_prefetch(x + i + PREFETCH_FLOATS);
        const vf v = forward_v(v_load(x + i), c, unit_nip);
        if (stream)
            v_stream(y + i, v);
        else
            v_store(y + i, v);
    }
    forward_part(c, x + i, y + i, n - i, unit_nip);
    if (stream)
        _mm_sfence(); /* streamed stores are visible before we return */
}

static void forward_f32(const struct elu_coef *coef, const float *x, float *y, size_t n)
{
    /* w = w_hi + w_lo exactly, w_hi rounded toward zero so that w_lo has
     * w's sign (or is zero): then x = -0.0 gives the right signed zero. */
    const double w = coef->nip * coef->neg * 0x1p64;
    float w_hi = (float)w;
    if (fabsf(w_hi) > fabs(w))
        w_hi = nextafterf(w_hi, 0);
    const struct forward_consts c = {
        .neg = v_set1((float)coef->neg),
        .pos = v_set1((float)coef->pos),
        .nip = v_set1((float)coef->nip),
        .x_min = v_set1(-18.0f / (float)coef->nip),
        .x_max = v_set1(-0x1p-29f / (float)coef->nip),
        .w_hi = v_set1(w_hi),
        .w_lo = v_set1((float)(w - w_hi)),
    };
    if (coef->nip == 1)
        forward_loop(&c, x, y, n, true);
    else
        forward_loop(&c, x, y, n, false);
}

/* -------- backward, f32 --------
 *
 * In double: the exact inputs' products and sums lose at most a few double
 * roundings (2^-50 or so), far below the float ulp of the single rounding
 * at the end. Memory, not arithmetic, bounds these kernels: three arrays
 * move for every element. */

struct backward_consts {
    vd pos, neg, nip;
    vd w; /* nip * neg, exact */
};

/* e^a, for a <= 0: 2^k e^r with k = round(a/ln2), |r| <= ln2/2, and e^r
 * by its Taylor polynomial to degree 11 (error below 2^-46, which the half
 * types' rounding test below needs); 0 below -708, where even the largest
 * float gradient times it is 0 in float. */
INLINE vd exp_neg(vd a)
{
    const vd am = vd_max(vd_set1(-708.0), a);
    const vd k = vd_round(vd_mul(am, vd_set1(0x1.71547652b82fep0)));
    vd r = vd_fnma(k, vd_set1(0x1.62e42fefa3800p-1), am); /* exact: ln2's top 42 bits */
    r = vd_fnma(k, vd_set1(0x1.ef35793c76730p-45), r);
    vd p = vd_set1(1.0 / 39916800);
    static const double coef[] = {1.0 / 3628800, 1.0 / 362880, 1.0 / 40320, 1.0 / 5040,
                                  1.0 / 720, 1.0 / 120, 1.0 / 24, 1.0 / 6, 0.5, 1, 1};
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

INLINE vf backward_v(vf g, vf s, const struct backward_consts *c, bool from_output)
{
    return vd_join(backward_d(vd_lo(g), vd_lo(s), c, from_output),
                   backward_d(vd_hi(g), vd_hi(s), c, from_output));
}

INLINE void backward_part(const struct backward_consts *c, const float *g, const float *s,
                          float *dx, size_t n, bool from_output)
{
    float bg[V_WIDTH] = {0}, bs[V_WIDTH] = {0};
    memcpy(bg, g, n * sizeof *g);
    memcpy(bs, s, n * sizeof *s);
    v_store(bg, backward_v(v_load(bg), v_load(bs), c, from_output));
    memcpy(dx, bg, n * sizeof *dx);
}

INLINE void backward_loop(const struct backward_consts *c, const float *g, const float *s,
                          float *dx, size_t n, bool from_output)
{
    size_t i = stream_start(dx, n);
    const bool stream = i < n;
    if (stream)
        backward_part(c, g, s, dx, i, from_output);
    else
        i = 0;
    for (; i + V_WIDTH <= n; i += V_WIDTH) {
        if (i + PREFETCH_FLOATS < n) {
            __builtin_prefetch(g + i + PREFETCH_FLOATS);
            __builtin_prefetch(s + i + PREFETCH_FLOATS);
        }
        const vf v = backward_v(v_load(g + i), v_load(s + i), c, from_output);
        if (stream)
            v_stream(dx + i, v);
        else
            v_store(dx + i, v);
    }
    backward_part(c, g + i, s + i, dx + i, n - i, from_output);
    if (stream)
        _mm_sfence();
}

static struct backward_consts backward_consts_of(const struct elu_coef *coef)
{
    return (struct backward_consts){vd_set1(coef->pos), vd_set1(coef->neg), vd_set1(coef->nip),
                                    vd_set1(coef->nip * coef->neg)};
}

static void backward_f32(const struct elu_coef *coef, const float *g, const float *s,
                         bool from_output, float *dx, size_t n)
{
    const struct backward_consts c = backward_consts_of(coef);
    if (from_output)
        backward_loop(&c, g, s, dx, n, true);
    else
        backward_loop(&c, g, s, dx, n, false);
}

/* -------- backward, f16 and bf16 --------
 *
 * The f32 kernel's double arithmetic (error below 2^-46), then a correct
 * rounding to the half type: to the nearest multiple of the type's quantum
 * at the result's binade, ties to even. Where the double result lies within
 * 2^-20 quanta of a tie, its error could decide the side, so those elements
 * are redone by the scalar kernel, which settles ties exactly; unless the
 * double result is exact (a product or sum with no remainder), when a tie
 * is the exact value's own and ties to even is right. That leaves about
 * one element in 250000 to redo. */

struct half_type {
    bool bf16;
    double ulp1;                 /* 2^-mant: the quantum at 1 */
    double binade_min, binade_max; /* 2^emin, 2^emax: normal binades */
};

/* v rounded to the type, as a double (beyond the largest finite value it
 * overflows to infinity when stored); *near marks the near ties. */
INLINE vd round_to_half(vd v, const struct half_type *t, unsigned *near)
{
    const vd binade = vd_min(vd_max(vd_binade(v), vd_set1(t->binade_min)),
                             vd_set1(t->binade_max));
    const vd quantum = vd_mul(binade, vd_set1(t->ulp1));
    const vd units = vd_mul(v, vd_inverse_pow2(quantum)); /* exact */
    const vd whole = vd_round(units);
    *near = vd_mask_bits(vd_gt(vd_abs(vd_sub(units, whole)), vd_set1(0.5 - 0x1p-20)));
    return vd_mul(whole, quantum);
}

/* Lanes where v, the double result, is exact: g*pos in the scale branch;
 * g*nip*(s + neg) from the output when the sum and the last product have
 * no remainder (g*nip is exact: 24 bits by 11). e^a is never exact. */
INLINE unsigned exact_lanes(vd g, vd s, vd v, const struct backward_consts *c,
                            bool from_output)
{
    const unsigned scale_branch = ~vd_mask_bits(vd_le(s, vd_set1(0.0)));
    unsigned exact = scale_branch & vd_mask_bits(vd_eq(vd_fms(g, c->pos, v), vd_set1(0.0)));
    if (from_output) {
        const vd sum = vd_add(s, c->neg), b = vd_sub(sum, s);
        const vd sum_err = vd_add(vd_sub(s, vd_sub(sum, b)), vd_sub(c->neg, b));
        const vd no_rest = vd_add(vd_abs(sum_err), vd_abs(vd_fms(vd_mul(g, c->nip), sum, v)));
        exact |= ~scale_branch & vd_mask_bits(vd_eq(no_rest, vd_set1(0.0)));
    }
    return exact & ((1u << V_WIDTH / 2) - 1); /* ~ set the bits past the lanes */
}

INLINE void backward_half_loop(const struct elu_coef *coef, const struct half_type *t,
                               const uint16_t *g, const uint16_t *s, bool from_output,
                               uint16_t *dx, size_t n)
{
    const struct backward_consts c = backward_consts_of(coef);
    const enum elu_kernel kernel = from_output ? ELU_KERNEL_BACKWARD_OUTPUT
                                               : ELU_KERNEL_BACKWARD_INPUT;
    size_t i = 0;
    for (; i + V_WIDTH <= n; i += V_WIDTH) {
        const vf gf = t->bf16 ? v_load_bf16(g + i) : v_load_f16(g + i);
        const vf sf = t->bf16 ? v_load_bf16(s + i) : v_load_f16(s + i);
        const vd g_lo = vd_lo(gf), s_lo = vd_lo(sf), g_hi = vd_hi(gf), s_hi = vd_hi(sf);
        const vd v_lo = backward_d(g_lo, s_lo, &c, from_output);
        const vd v_hi = backward_d(g_hi, s_hi, &c, from_output);
        unsigned near_lo, near_hi;
        const vd lo = round_to_half(v_lo, t, &near_lo), hi = round_to_half(v_hi, t, &near_hi);
        unsigned near = near_lo | near_hi << V_WIDTH / 2;
        if (near)
            near &= ~(exact_lanes(g_lo, s_lo, v_lo, &c, from_output) |
                      exact_lanes(g_hi, s_hi, v_hi, &c, from_output) << V_WIDTH / 2);
        uint16_t redone[V_WIDTH]; /* before the store: dx may be g or s */
        for (unsigned m = near; m; m &= m - 1) {
            const int k = __builtin_ctz(m);
            elu_cpu_element(coef, kernel, g, (ptrdiff_t)i + k, s, (ptrdiff_t)i + k, redone, k);
        }
        const vf y = vd_join(lo, hi); /* exact: values of the type */
        if (t->bf16)
            v_store_bf16(dx + i, y);
        else
            v_store_f16(dx + i, y);
        for (unsigned m = near; m; m &= m - 1)
            dx[i + (size_t)__builtin_ctz(m)] = redone[__builtin_ctz(m)];
    }
    for (; i < n; i++)
        elu_cpu_element(coef, kernel, g, (ptrdiff_t)i, s, (ptrdiff_t)i, dx, (ptrdiff_t)i);
}

static void backward_half(const struct elu_coef *coef, const uint16_t *g, const uint16_t *s,
                          bool from_output, uint16_t *dx, size_t n)
{
    static const struct half_type f16 = {false, 0x1p-10, 0x1p-14, 0x1p15},
                                  bf16 = {true, 0x1p-7, 0x1p-126, 0x1p127};
    const struct half_type *t = coef->dtype == ELU_BF16 ? &bf16 : &f16;
    if (from_output)
        backward_half_loop(coef, t, g, s, true, dx, n);
    else
        backward_half_loop(coef, t, g, s, false, dx, n);
}

/* -------- table lookups, 16-bit -------- */

static void lookup16(const uint16_t *table, const uint16_t *x, uint16_t *y, size_t n)
{
    size_t i = 0;
    for (; i + V_WIDTH <= n; i += V_WIDTH)
        v_lookup16(table, x + i, y + i);
    for (; i < n; i++)
        y[i] = table[x[i]];
}

const struct elu_cpu_isa CAT(elu_cpu_isa, ELU_ISA) = {
    .name = ELU_ISA_NAME,
    .forward_f32 = forward_f32,
    .backward_f32 = backward_f32,
    .lookup16 = lookup16,
    .backward_half = backward_half,
};
