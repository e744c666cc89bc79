/* The scalar kernels: each element computed in a wider type than it is
 * stored in (double for F32, long double for F64 and the half types) and
 * rounded once, so results are within a rounding of the exact value of
 * PyTorch's formula; the F32 forward correctly rounded for input_scale > 0
 * and the F64 forward for the constants numerics.c's
 * elu_exact_forward_takes accepts (kernels_src/elu_forward_f32.h,
 * elu_forward_f64.h). They serve every case the vector kernels of
 * cpu_fast.c do not, and are the tests' model. */
#include "scalar.h"

#include "elu_forward_f32.h"
#include "elu_forward_f64.h"
#include "numerics.h"

#include <math.h>
#include <string.h>

/* -------- half types -------- */

/* A binary format with `mant` stored mantissa bits and exponent bias `bias`
 * (f16: 10, 15; bf16: 7, 127). */
struct half_format {
    int mant, bias;
};
static const struct half_format F16 = {10, 15}, BF16 = {7, 127};

/* 2^k for k in [-1022, 1023], by its bits: ldexp is slow, and the table
 * builds call this 65536 times. */
static double pow2(int k)
{
    const uint64_t bits = (uint64_t)(k + 1023) << 52;
    double v;
    memcpy(&v, &bits, sizeof v);
    return v;
}

/* h of the half type t as a float, exactly (every half value is one), by
 * its bits: the table builds convert 65536 of them, and through integer
 * arithmetic in double that took a third of their time. */
static inline float half_to_float(uint16_t h, elu_dtype t)
{
    uint32_t b = (uint32_t)h << 16; /* bf16: the float's top half */
    if (t == ELU_F16) {
        const uint32_t e = h >> 10 & 0x1F, m = h & 0x3FF, sign = b & 0x80000000u;
        if (e == 0) { /* zero or subnormal: m * 2^-24 */
            const float v = (float)m * 0x1p-24f;
            return sign ? -v : v;
        }
        b = sign | (e == 0x1F ? 0xFFu : e + 127 - 15) << 23 | m << 13; /* inf: all ones */
    }
    if ((b & 0x7FFFFFFFu) > 0x7F800000u)
        return NAN; /* the one NaN, as elu_f16_to_double has always given */
    float v;
    memcpy(&v, &b, sizeof v);
    return v;
}

/* The binade of a (the e with 2^e <= a < 2^(e+1)), at least emin; for
 * 0 <= a < 2^1000. Through double, corrected where rounding a to double
 * carried it up to the next power of two: ilogbl is slow, and the table
 * builds call this 65536 times. */
static int binade(long double a, int emin)
{
    if (a < (long double)pow2(emin))
        return emin;
    int e = ilogb((double)a);
    if ((long double)pow2(e) > a)
        e--;
    return e;
}

/* v correctly rounded to the format (nearest, ties to even): |v| in units
 * of the quantum at its binade, rounded by rintl (exact arithmetic: the
 * scalings are by powers of two, and rintl rounds to even under the
 * default rounding mode). */
static uint16_t half_from(long double v, struct half_format f)
{
    const uint16_t sign = signbit(v) ? 0x8000 : 0;
    const int exp_max = (1 << (15 - f.mant)) - 1, emin = 1 - f.bias, emax = exp_max - 1 - f.bias;
    const uint16_t inf = sign | (uint16_t)(exp_max << f.mant);
    if (isnan(v))
        return inf | (uint16_t)(1u << (f.mant - 1));
    const long double a = fabsl(v);
    if (a >= (long double)pow2(emax + 1)) /* past the largest, however rounded */
        return inf;
    int e = binade(a, emin);
    unsigned units = (unsigned)rintl(a * pow2(f.mant - e)); /* at most 2^(mant+1) */
    if (e == emin && units < (1u << f.mant)) /* subnormal or zero */
        return sign | (uint16_t)units;
    if (units == 2u << f.mant) { /* rounded up into the next binade */
        units >>= 1;
        e++;
    }
    if (e > emax)
        return inf;
    return sign | (uint16_t)((e + f.bias) << f.mant) | (uint16_t)(units - (1u << f.mant));
}

/* Whether v lies halfway between two neighbours in the format. */
static bool half_tie(long double v, struct half_format f)
{
    const long double a = fabsl(v);
    if (!(a < (long double)pow2(1000))) /* also inf and NaN */
        return false;
    const long double m = a * pow2(f.mant - binade(a, 1 - f.bias));
    return m - floorl(m) == 0.5L;
}

float elu_half_to_float(uint16_t h, elu_dtype t) { return half_to_float(h, t); }
double elu_f16_to_double(uint16_t h) { return half_to_float(h, ELU_F16); }
double elu_bf16_to_double(uint16_t h) { return half_to_float(h, ELU_BF16); }
uint16_t elu_f16_from(long double v) { return half_from(v, F16); }
uint16_t elu_bf16_from(long double v) { return half_from(v, BF16); }

/* -------- element access -------- */

static long double load(elu_dtype t, const void *p, ptrdiff_t i)
{
    switch (t) {
    case ELU_F32: return ((const float *)p)[i];
    case ELU_F64: return ((const double *)p)[i];
    case ELU_F16: return elu_f16_to_double(((const uint16_t *)p)[i]);
    case ELU_BF16: return elu_bf16_to_double(((const uint16_t *)p)[i]);
    }
    return NAN;
}

/* F32 is computed in double, which a float product fits exactly; F64 and
 * the half types in long double. Each store rounds once. */
static void store(elu_dtype t, void *p, ptrdiff_t i, long double v)
{
    switch (t) {
    case ELU_F32: ((float *)p)[i] = (float)(double)v; break;
    case ELU_F64: ((double *)p)[i] = (double)v; break;
    case ELU_F16: ((uint16_t *)p)[i] = half_from(v, F16); break;
    case ELU_BF16: ((uint16_t *)p)[i] = half_from(v, BF16); break;
    }
}

/* -------- the math, as PyTorch writes it -------- */

/* The half types are rounded correctly, so a result that lands exactly
 * halfway between two of them must be broken by the exact value's side.
 * The exact value is never a tie for a finite nonzero a = x * input_scale
 * (expm1 of a nonzero rational is irrational), but the computed one is
 * where expm1l(a) returns a itself (the exact value lies beyond it by
 * neg * a^2 / 2, on neg's side) or -1 (it lies short of it by neg * e^a,
 * on neg's side too). At a = -inf the exact value is -neg, tie or not. */
static long double forward_half(const struct elu_coef *c, long double x)
{
    if (x > 0)
        return x * c->scale; /* exact: 11 bits times 24 */
    const long double a = x * c->input_scale;
    const long double v = expm1l(a) * c->scale_alpha;
    const bool tie = isfinite(a) && half_tie(v, c->dtype == ELU_F16 ? F16 : BF16);
    return tie ? nextafterl(v, c->scale_alpha > 0 ? INFINITY : -INFINITY) : v;
}

static long double forward1(const struct elu_coef *c, long double x)
{
    if (c->dtype == ELU_F16 || c->dtype == ELU_BF16)
        return forward_half(c, x);
    const double xd = (double)x;
    if (c->dtype == ELU_F64) {
        if (xd > 0)
            return xd * c->scale; /* one rounding */
        if (elu_exact_forward_takes(c))
            return elu_f64_forward_neg(xd, c->scale_alpha, c->input_scale, c->input_scale == 1,
                                       c->scale_alpha == 1);
        return expm1l(x * c->input_scale) * c->scale_alpha;
    }
    if (xd > 0)
        return xd * c->scale;
    if (c->input_scale > 0) /* the constants the exact forward takes */
        return elu_f32_forward_neg((float)xd, c->scale_alpha, c->input_scale, false);
    return expm1(xd * c->input_scale) * c->scale_alpha;
}

/* The half types' backward from the output, g * nip * (s + neg), is
 * rational and may be exactly a tie: then that is the value to round. The
 * computed one is a tie only if the exact one is, or if it was rounded onto
 * one; the exact remainders of the sum and of the last product say which. */
static long double backward_half_output(const struct elu_coef *c, long double g, long double s)
{
    const long double sum = s + c->scale_alpha, b = sum - s; /* TwoSum: sum + sum_err exact */
    const long double sum_err = (s - (sum - b)) + (c->scale_alpha - b);
    const long double p = c->input_scale * sum; /* exact: at most 59 bits */
    const long double v = g * p;
    const long double rem = fmal(g, p, -v) + g * c->input_scale * sum_err;
    const bool tie = half_tie(v, c->dtype == ELU_F16 ? F16 : BF16);
    return tie && rem != 0 ? nextafterl(v, rem > 0 ? INFINITY : -INFINITY) : v;
}

/* `s <= 0`, not `s > 0`: a NaN saved value takes the scale branch, as in
 * PyTorch's elu_backward. */
static long double backward1(const struct elu_coef *c, long double g,
                             long double s, bool from_output)
{
    if (!(s <= 0))
        return g * c->scale;
    if (from_output && (c->dtype == ELU_F16 || c->dtype == ELU_BF16))
        return backward_half_output(c, g, s);
    if (from_output)
        return g * c->input_scale * (s + c->scale_alpha);
    if (c->dtype != ELU_F32)
        return g * c->input_scale * c->scale_alpha * expl(s * c->input_scale);
    return (double)g * c->input_scale * c->scale_alpha * exp((double)s * c->input_scale);
}

/* out[io] = kernel(a[ia], b[ib]), offsets in elements. */
void elu_cpu_element(const struct elu_coef *c, enum elu_kernel kernel,
                    const void *a, ptrdiff_t ia, const void *b, ptrdiff_t ib,
                    void *out, ptrdiff_t io)
{
    const elu_dtype t = c->dtype;
    const long double x = load(t, a, ia);
    const long double r =
        kernel == ELU_KERNEL_FORWARD
            ? forward1(c, x)
            : backward1(c, x, load(t, b, ib), kernel == ELU_KERNEL_BACKWARD_OUTPUT);
    store(t, out, io, r);
}
