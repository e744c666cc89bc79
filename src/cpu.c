/* The CPU path. The scalar kernels here compute each element in a wider
 * type than it is stored in (double for F32, long double for F64 and the
 * half types) and round once, so results are within a rounding of the exact value
 * of PyTorch's formula; they serve every case the vectorized kernels of
 * cpu_fast.c do not, and are the tests' model. */
#include "cpu.h"
#include "cpu_fast.h"
#include "elu_expm1.h"
#include "env.h"
#include "numerics.h"

#if defined(__x86_64__)
#include <cpuid.h>
#endif
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* -------- the instruction set, chosen once per process -------- */

static const struct elu_cpu_isa *isa; /* NULL: the scalar kernels only */
static bool f64_vector;                /* isa's f64 kernels may serve */
static char isa_fallback[128];         /* why isa is not the one asked for */
static pthread_once_t isa_once = PTHREAD_ONCE_INIT;

#if defined(__x86_64__)
const struct elu_cpu_isa *const elu_cpu_isas[2] = {&elu_cpu_isa_avx512, &elu_cpu_isa_avx2};

void elu_cpu_isas_present(bool has[2])
{
    unsigned eax, ebx, ecx = 0, edx;
    __get_cpuid(1, &eax, &ebx, &ecx, &edx); /* clang's builtin knows no "f16c" */
    has[0] = __builtin_cpu_supports("avx512f");
    has[1] = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && (ecx & bit_F16C);
}

const struct elu_cpu_isa *elu_cpu_choose_isa(const char *want, const bool has[2])
{
    bool allowed = !want;
    for (size_t i = 0; i < 2; i++) {
        allowed = allowed || strcmp(want, elu_cpu_isas[i]->name) == 0;
        if (allowed && has[i])
            return elu_cpu_isas[i];
    }
    return NULL;
}
#endif

static const char *name_of(const struct elu_cpu_isa *set) { return set ? set->name : "baseline"; }

/* ELU_CPU_ISA's choice, or the best the processor has (an invalid value is
 * reported at each context's creation, by env.c). */
static void pick_isa(void)
{
    const char *want = elu_env_choice("ELU_CPU_ISA");
#if defined(__x86_64__)
    bool has[2];
    elu_cpu_isas_present(has);
    isa = elu_cpu_choose_isa(want, has);
    f64_vector = isa && isa->exact_fma64();
#endif
    if (want && strcmp(want, name_of(isa)) != 0)
        snprintf(isa_fallback, sizeof isa_fallback,
                 "ELU_CPU_ISA=%s: the processor lacks it (using %s)", want, name_of(isa));
}

const char *elu_cpu_isa_name(void)
{
    pthread_once(&isa_once, pick_isa);
    return name_of(isa);
}

const char *elu_cpu_isa_fallback(void)
{
    pthread_once(&isa_once, pick_isa);
    return isa_fallback;
}

bool elu_cpu_fast_forward_ok(const struct elu_coef *c)
{
    pthread_once(&isa_once, pick_isa);
    struct elu_exact_consts k;
    return elu_exact_forward_consts(c, &k) && (c->dtype == ELU_F32 || f64_vector);
}

static bool within(double v, double e) { return fabs(v) >= 1 / e && fabs(v) <= e; }

bool elu_cpu_fast_backward_ok(const struct elu_coef *c)
{
    pthread_once(&isa_once, pick_isa);
    const bool finite = isfinite(c->scale) && isfinite(c->scale_alpha) && c->input_scale >= 0 && isfinite(c->input_scale);
    if (c->dtype == ELU_F64)
        return finite && f64_vector && within(c->input_scale, 0x1p300) &&
               within(c->input_scale * c->scale_alpha, 0x1p300);
    if (c->dtype == ELU_F16 || c->dtype == ELU_BF16)
        return finite && (float)c->scale_alpha == c->scale_alpha && (float)c->input_scale == c->input_scale &&
               (float)c->scale == c->scale && fabs(c->input_scale * c->scale_alpha) >= 0x1p-70;
    return finite;
}

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
    if (c->dtype == ELU_F64)
        return x > 0 ? x * c->scale : expm1l(x * c->input_scale) * c->scale_alpha;
    const double xd = (double)x;
    return xd > 0 ? xd * c->scale : expm1(xd * c->input_scale) * c->scale_alpha;
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

/* -------- lookup tables for the half types -------- */

/* A half type has 65536 values, so the forward on them is a table of
 * correctly rounded results, and a load per element: the f32 vector
 * kernel's results rounded to the type where that is surely right
 * (elu_cpu_forward_table), the scalar kernel's elsewhere. The backward is
 * grad * F(s), with a factor F for each saved value s: from the input, a
 * table of F, which cpu_fast.c's kernel multiplies and rounds. A context
 * keeps one for each constants and kernel, made on the first call large
 * enough to pay for it: a build costs what the scalar kernel takes for
 * TABLE_MIN_N elements (docs/DESIGN.md, "The half types"). */
#define MAX_TABLES 12
#define TABLE_MIN_N 2048
#define CHUNK 1024 /* table entries computed at a time */

/* A table is built with no lock held and then published into the first
 * free slot: a lock held across a build would be inherited, held for
 * ever, by a fork child, which does not have the building thread. Threads
 * that meet the same new constants at once each build the table, and all
 * but the first to publish it discard theirs. */
struct half_table {
    struct elu_coef coef;
    enum elu_kernel kernel;
    void *data;
};

struct elu_cpu_tables {
    _Atomic(struct half_table *) t[MAX_TABLES]; /* filled in order, complete */
};

struct elu_cpu_tables *elu_cpu_tables_create(void)
{
    struct elu_cpu_tables *ts = malloc(sizeof *ts);
    for (int i = 0; ts && i < MAX_TABLES; i++)
        atomic_init(&ts->t[i], NULL);
    return ts;
}

static void free_table(struct half_table *t)
{
    if (t)
        free(t->data);
    free(t);
}

void elu_cpu_tables_destroy(struct elu_cpu_tables *ts)
{
    for (int i = 0; ts && i < MAX_TABLES; i++)
        free_table(atomic_load_explicit(&ts->t[i], memory_order_relaxed));
    free(ts);
}

static bool same_table(const struct half_table *t, const struct elu_coef *c,
                       enum elu_kernel kernel)
{
    return t->kernel == kernel && t->coef.dtype == c->dtype &&
           memcmp(&t->coef.scale_alpha, &c->scale_alpha, sizeof c->scale_alpha) == 0 &&
           memcmp(&t->coef.scale, &c->scale, sizeof c->scale) == 0 &&
           memcmp(&t->coef.input_scale, &c->input_scale, sizeof c->input_scale) == 0;
}

/* Whether a float (bits a, sign cleared) lies within 2 ulps of a tie at
 * its bit `low`: halfway between two multiples of 2^low ulps. */
static bool near_tie(uint32_t a, int low)
{
    const uint32_t rest = a & ((1u << low) - 1), mid = 1u << (low - 1);
    return rest + 2 >= mid && rest <= mid + 2;
}

/* v, a float within 1 ulp of an exact result, rounded to the half type t,
 * when that is surely the exact result's rounding: no tie of t within 2
 * float ulps of v (a tie between them would be), and v within t's range
 * (f16's subnormals included, counted in units of their quantum 2^-24).
 * Else -1. */
static int32_t half_of_float(float v, elu_dtype t)
{
    uint32_t b;
    memcpy(&b, &v, sizeof b);
    const uint32_t a = b & 0x7FFFFFFFu, sign = b >> 16 & 0x8000u;
    const float av = fabsf(v);
    if (t == ELU_F16 && av >= 0x1p-24f && av < 0x1p-14f) {
        const float units = av * 0x1p24f; /* exact; in [1, 1024) */
        uint32_t u;
        memcpy(&u, &units, sizeof u);
        const int low = 23 - ((int)(u >> 23) - 127); /* float bits below the units' */
        return near_tie(u, low) ? -1 : (int32_t)(sign | (uint32_t)rintf(units));
    }
    const int low = t == ELU_BF16 ? 16 : 13; /* float bits below t's last */
    const float smallest = t == ELU_BF16 ? 0x1p-126f : 0x1p-14f;
    const float largest = t == ELU_BF16 ? 0x1.fep127f : 65504.0f;
    if (near_tie(a, low) || !(av >= smallest && av <= largest))
        return -1;
    const uint32_t top = (a + (1u << (low - 1)) - 1 + (a >> low & 1)) >> low; /* ties to even */
    return (int32_t)(sign | (t == ELU_BF16 ? top : top - ((127u - 15u) << 10)));
}

uint16_t *elu_cpu_forward_table(const struct elu_coef *c)
{
    pthread_once(&isa_once, pick_isa);
    const struct elu_coef c32 = {ELU_F32, c->scale_alpha, c->scale, c->input_scale};
    const bool vector = isa && elu_cpu_fast_forward_ok(&c32);
    /* Every NaN of a sign gives the scalar kernel's one NaN of that sign:
     * computed once (NaNs are slow in x87 arithmetic). */
    const uint16_t nan_in[2] = {c->dtype == ELU_BF16 ? 0x7FC0 : 0x7E00,
                                c->dtype == ELU_BF16 ? 0xFFC0 : 0xFE00};
    uint16_t nan_out[2];
    for (int k = 0; k < 2; k++)
        elu_cpu_element(c, ELU_KERNEL_FORWARD, nan_in, k, NULL, 0, nan_out, k);
    uint16_t *y = calloc(65537, sizeof *y); /* + the gathers' pad */
    for (uint32_t i = 0; y && i < 65536; i += CHUNK) {
        float x[CHUNK], v[CHUNK];
        for (uint32_t k = 0; k < CHUNK; k++) {
            const uint16_t h = (uint16_t)(i + k);
            x[k] = half_to_float(h, c->dtype);
        }
        if (vector)
            isa->forward_f32(&c32, x, v, CHUNK);
        for (uint32_t k = 0; k < CHUNK; k++) {
            const int32_t h = vector ? half_of_float(v[k], c->dtype) : -1;
            const uint16_t xk = (uint16_t)(i + k);
            if (h >= 0)
                y[i + k] = (uint16_t)h;
            else if (isnan(x[k]))
                y[i + k] = nan_out[xk >> 15];
            else
                elu_cpu_element(c, ELU_KERNEL_FORWARD, &xk, 0, NULL, 0, y, (ptrdiff_t)(i + k));
        }
    }
    return y;
}

/* f, F(s) in double, as the table keeps it (cpu_fast.h): rounded to float,
 * or NaN where that float would be subnormal, unless every finite
 * gradient times F rounds to zero in the type t: then a zero of F's sign. */
static float table_factor(elu_dtype t, double f)
{
    const double max_g = t == ELU_BF16 ? 0x1.fep127 : 65504.0;
    const double zero_below = t == ELU_BF16 ? 0x1p-135 : 0x1p-26; /* half of half a quantum */
    if (fabs(f) * max_g < zero_below)
        return f < 0 ? -0.0f : 0.0f;
    return fabs(f) < 0x1p-126 ? NAN : (float)f;
}

/* Whether F(s), s <= 0, is exactly f (as a float, from the table): only
 * where e^(s*nip) = 1. */
static bool factor_exact(const struct elu_coef *c, double s, float f)
{
    const double F = c->input_scale * c->scale_alpha;
    return s * c->input_scale == 0 && fma(c->input_scale, c->scale_alpha, -F) == 0 && F == f;
}

/* F(s) for the CHUNK values of s from the 16-bit pattern h, into f and lo
 * (cpu_fast.h): in double, a gradient of 1 through the f64 backward (the
 * vector kernel where it takes the constants), then as table_factor keeps
 * it. From the input, s*nip below -200 is not computed (slow, and e^-200 <
 * 2^-288): a zero of F's sign where table_factor gives one for that bound,
 * else NaN. */
static void factor_chunk(const struct elu_coef *c, uint32_t h, float *f, float *lo)
{
    const struct elu_coef c64 = {ELU_F64, c->scale_alpha, c->scale, c->input_scale};
    const float beyond = table_factor(c->dtype, c->input_scale * c->scale_alpha * 0x1p-288);
    double s[CHUNK], one[CHUNK], d[CHUNK];
    bool tiny[CHUNK];
    for (uint32_t k = 0; k < CHUNK; k++) {
        const uint16_t v = (uint16_t)(h + k);
        s[k] = half_to_float(v, c->dtype);
        one[k] = 1;
        if ((tiny[k] = s[k] * c->input_scale < -200))
            s[k] = 0;
    }
    if (isa && elu_cpu_fast_backward_ok(&c64))
        isa->backward_f64(&c64, one, s, false, d, CHUNK);
    else
        for (ptrdiff_t k = 0; k < CHUNK; k++)
            elu_cpu_element(&c64, ELU_KERNEL_BACKWARD_INPUT, one, k, s, k, d, k);
    for (uint32_t k = 0; k < CHUNK; k++) {
        f[k] = tiny[k] ? (beyond == 0 ? beyond : NAN) : table_factor(c->dtype, d[k]);
        if (f[k] == 0) /* y = g*f is then 0 or NaN, never near a tie */
            lo[k] = 0;
        else
            lo[k] = !tiny[k] && fabsf(f[k]) >= 0x1p-100f ? (float)(d[k] - f[k]) : NAN;
    }
}

struct elu_half_factors *elu_cpu_factor_table(const struct elu_coef *c)
{
    pthread_once(&isa_once, pick_isa);
    struct elu_half_factors *t = calloc(1, sizeof *t);
    if (!t)
        return NULL;
    for (uint32_t i = 0; i < 32768; i += CHUNK)
        factor_chunk(c, 0x8000 + i, t->f + i, t->lo + i);
    t->f[32768] = t->f[0];
    t->lo[32768] = t->lo[0];
    t->f[32769] = (float)c->scale;
    t->lo[32769] = fabsf(t->f[32769]) >= 0x1p-100f ? (float)(c->scale - t->f[32769]) : NAN;
    for (uint32_t j = 0; j < 32768; j++) {
        const uint16_t v = (uint16_t)(0x8000 + j);
        const double s = half_to_float(v, c->dtype);
        const bool exact = isnan(s) ? t->f[j] == c->scale : factor_exact(c, s, t->f[j]);
        t->exact[j / 32] |= (uint32_t)exact << j % 32;
    }
    for (uint32_t j = 32768; j < 32770; j++) { /* F(+0.0) = F(-0.0); scale */
        const bool exact = j == 32768 ? (t->exact[0] & 1) : t->f[j] == c->scale;
        t->exact[j / 32] |= (uint32_t)exact << j % 32;
    }
    return t;
}

static struct half_table *new_table(const struct elu_coef *c, enum elu_kernel kernel)
{
    void *data = kernel == ELU_KERNEL_FORWARD ? (void *)elu_cpu_forward_table(c)
                                              : (void *)elu_cpu_factor_table(c);
    struct half_table *t = data ? malloc(sizeof *t) : NULL;
    if (t)
        *t = (struct half_table){*c, kernel, data};
    else
        free(data);
    return t;
}

/* The table for c and kernel, made if there is room; NULL otherwise.
 * Takes no lock: a table is complete before the slot that shows it. */
static const void *table_for(struct elu_cpu_tables *ts, const struct elu_coef *c,
                             enum elu_kernel kernel)
{
    struct half_table *made = NULL;
    for (int i = 0; i < MAX_TABLES; i++) {
        struct half_table *seen = atomic_load_explicit(&ts->t[i], memory_order_acquire);
        if (!seen) {
            if (!made && !(made = new_table(c, kernel)))
                return NULL;
            if (atomic_compare_exchange_strong_explicit(
                    &ts->t[i], &seen, made, memory_order_release, memory_order_acquire))
                return made->data;
        }
        if (same_table(seen, c, kernel)) { /* another thread's, published first */
            free_table(made);
            return seen->data;
        }
    }
    free_table(made);
    return NULL;
}

/* The table a call takes, or NULL: for the half types, forward (any
 * instruction set) and backward (the vector kernels' only). */
static const void *table_of_call(struct elu_cpu_tables *ts, const struct elu_coef *c,
                                 enum elu_kernel kernel, size_t n)
{
    if (!ts || (c->dtype != ELU_F16 && c->dtype != ELU_BF16) || n < TABLE_MIN_N)
        return NULL;
    return kernel == ELU_KERNEL_FORWARD ||
                   (isa && kernel == ELU_KERNEL_BACKWARD_INPUT && elu_cpu_fast_backward_ok(c))
               ? table_for(ts, c, kernel) : NULL;
}

/* Whether the vector kernel takes a half type's backward from the output,
 * which computes its factors rather than looking them up (cpu_fast.c). */
static bool half_output_vector(const struct elu_coef *c, enum elu_kernel kernel)
{
    return isa && kernel == ELU_KERNEL_BACKWARD_OUTPUT &&
           (c->dtype == ELU_F16 || c->dtype == ELU_BF16) && elu_cpu_fast_backward_ok(c);
}

/* -------- splitting over threads -------- */

struct job {
    const struct elu_coef *c;
    enum elu_kernel kernel;
    const void *a, *b;
    void *out;
    size_t n, chunk;
    const void *table; /* a half type's, or NULL */
};

/* out = kernel(a, b) over n contiguous elements, by the vector kernels
 * where they apply. table: a half type's, or NULL. */
static void run_contiguous(const struct elu_coef *c, enum elu_kernel kernel, const void *a,
                           const void *b, void *out, size_t n, const void *table)
{
    const bool from_output = kernel == ELU_KERNEL_BACKWARD_OUTPUT;
    if (table && kernel == ELU_KERNEL_FORWARD) {
        const uint16_t *x = a, *t = table;
        uint16_t *y = out;
        if (isa) {
            isa->lookup16(t, x, y, n);
            return;
        }
        for (size_t i = 0; i < n; i++)
            y[i] = t[x[i]];
        return;
    }
    if (table || half_output_vector(c, kernel)) { /* a half type's backward */
        isa->backward_half(c, table, a, b, from_output, out, n);
        return;
    }
    if (isa && kernel == ELU_KERNEL_FORWARD && elu_cpu_fast_forward_ok(c)) {
        if (c->dtype == ELU_F32)
            isa->forward_f32(c, a, out, n);
        else
            isa->forward_f64(c, a, out, n);
        return;
    }
    if (isa && kernel != ELU_KERNEL_FORWARD && elu_cpu_fast_backward_ok(c) &&
        (c->dtype == ELU_F32 || c->dtype == ELU_F64)) {
        if (c->dtype == ELU_F32)
            isa->backward_f32(c, a, b, from_output, out, n);
        else
            isa->backward_f64(c, a, b, from_output, out, n);
        return;
    }
    for (size_t i = 0; i < n; i++)
        elu_cpu_element(c, kernel, a, (ptrdiff_t)i, b, (ptrdiff_t)i, out, (ptrdiff_t)i);
}

static void run_part(void *arg, int part)
{
    const struct job *j = arg;
    const size_t begin = (size_t)part * j->chunk;
    const size_t end = begin + j->chunk < j->n ? begin + j->chunk : j->n;
    const size_t size = elu_dtype_size(j->c->dtype);
    run_contiguous(j->c, j->kernel, (const char *)j->a + begin * size,
                   j->b ? (const char *)j->b + begin * size : NULL,
                   (char *)j->out + begin * size, end - begin, j->table);
}

/* Below this many elements per thread, waking another costs more than it
 * saves (docs/DESIGN.md, "The CPU path"). */
#define ELU_CPU_MIN_PER_THREAD 131072

void elu_cpu_run(const struct elu_coef *c, enum elu_kernel kernel,
                 const void *a, const void *b, void *out, size_t n,
                 struct elu_pool *pool, struct elu_cpu_tables *tables)
{
    pthread_once(&isa_once, pick_isa);
    size_t parts = n / ELU_CPU_MIN_PER_THREAD;
    if (parts > (size_t)elu_pool_threads(pool))
        parts = (size_t)elu_pool_threads(pool);
    if (parts < 1)
        parts = 1;
    const struct job j = {c, kernel, a, b, out, n, (n + parts - 1) / parts,
                          table_of_call(tables, c, kernel, n)};
    elu_pool_run(pool, run_part, (void *)&j, (int)parts);
}

/* Views go through the same kernels as contiguous arrays, a block at a
 * time through buffers, so that a result does not depend on the layout. */
void elu_cpu_run_strided(const struct elu_coef *c, enum elu_kernel kernel,
                         const void *a, const void *b, void *out, size_t n,
                         const struct elu_layout *l)
{
    pthread_once(&isa_once, pick_isa);
    enum { BLOCK = 512 };
    const size_t size = elu_dtype_size(c->dtype);
    int64_t index[ELU_MAX_RANK] = {0};
    ptrdiff_t offset[3] = {0, 0, 0}; /* of a, b, out, in elements */
    ptrdiff_t out_at[BLOCK];
    double buf[3][BLOCK]; /* a, b, out; of any dtype */
    for (size_t done = 0; done < n;) {
        const size_t m = n - done < BLOCK ? n - done : BLOCK;
        for (size_t i = 0; i < m; i++) {
            out_at[i] = offset[2];
            memcpy((char *)buf[0] + i * size, (const char *)a + offset[0] * (ptrdiff_t)size, size);
            if (b)
                memcpy((char *)buf[1] + i * size, (const char *)b + offset[1] * (ptrdiff_t)size,
                       size);
            /* Step the multi-index like an odometer, last dimension fastest. */
            for (int d = (int)l->ndim - 1; d >= 0; d--) {
                const bool wraps = ++index[d] == l->shape[d];
                for (int k = 0; k < 3; k++)
                    offset[k] += (ptrdiff_t)(l->stride[k][d] * (wraps ? 1 - l->shape[d] : 1));
                if (!wraps)
                    break;
                index[d] = 0;
            }
        }
        run_contiguous(c, kernel, buf[0], b ? buf[1] : NULL, buf[2], m, NULL);
        for (size_t i = 0; i < m; i++)
            memcpy((char *)out + out_at[i] * (ptrdiff_t)size, (const char *)buf[2] + i * size,
                   size);
        done += m;
    }
}
