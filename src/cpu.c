/* The CPU path. The scalar kernels here compute each element in a wider
 * type than it is stored in (double for F32, long double for F64 and the
 * half types) and round once, so results are within a rounding of the exact value
 * of PyTorch's formula; they serve every case the vectorized kernels of
 * cpu_fast.c do not, and are the tests' model. */
#include "cpu.h"
#include "cpu_fast.h"

#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

/* -------- the instruction set, chosen once per process -------- */

static const struct elu_cpu_isa *isa; /* NULL: the scalar kernels only */
static pthread_once_t isa_once = PTHREAD_ONCE_INIT;

/* The best set the processor has, or the one ELU_CPU_ISA names if it has
 * that one ("baseline": none). */
static void pick_isa(void)
{
#if defined(__x86_64__)
    const struct elu_cpu_isa *const best_first[] = {&elu_cpu_isa_avx512, &elu_cpu_isa_avx2};
    const bool has[] = {__builtin_cpu_supports("avx512f"),
                        __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") &&
                            __builtin_cpu_supports("f16c")};
    const char *want = getenv("ELU_CPU_ISA");
    for (size_t i = 0; i < sizeof has / sizeof *has && !isa; i++)
        if (has[i] && (!want || !*want || strcmp(want, best_first[i]->name) == 0))
            isa = best_first[i];
#endif
}

const char *elu_cpu_isa_name(void)
{
    pthread_once(&isa_once, pick_isa);
    return isa ? isa->name : "baseline";
}

bool elu_cpu_fast_forward_ok(const struct elu_coef *c)
{
    const double neg = fabs(c->neg), nip = c->nip;
    if (c->dtype == ELU_F32)
        return isfinite(c->pos) && neg >= 0x1p-24 && nip >= 0x1p-100 && neg * nip <= 0x1p60;
    return c->dtype == ELU_F64 && isfinite(c->pos) && neg >= 0x1p-500 && neg <= 0x1p500 &&
           nip >= 0x1p-500 && nip <= 0x1p500 && neg * nip <= 0x1p500;
}

static bool within(double v, double e) { return fabs(v) >= 1 / e && fabs(v) <= e; }

bool elu_cpu_fast_backward_ok(const struct elu_coef *c)
{
    const bool finite = isfinite(c->pos) && isfinite(c->neg) && c->nip >= 0 && isfinite(c->nip);
    if (c->dtype == ELU_F64)
        return finite && within(c->nip, 0x1p300) && within(c->nip * c->neg, 0x1p300);
    return finite;
}

/* -------- half types -------- */

/* A binary format with `mant` stored mantissa bits and exponent bias `bias`
 * (f16: 10, 15; bf16: 7, 127). */
struct half_format {
    int mant, bias;
};
static const struct half_format F16 = {10, 15}, BF16 = {7, 127};

static double half_to_double(uint16_t h, struct half_format f)
{
    const int exp_mask = (1 << (15 - f.mant)) - 1;
    const int e = (h >> f.mant) & exp_mask, m = h & ((1 << f.mant) - 1);
    const double sign = (h & 0x8000) ? -1.0 : 1.0;
    if (e == exp_mask)
        return m ? NAN : sign * INFINITY;
    if (e == 0) /* zero or subnormal */
        return sign * ldexp(m, 1 - f.bias - f.mant);
    return sign * ldexp(m + (1 << f.mant), e - f.bias - f.mant);
}

/* Round |v| to a multiple of the format's quantum at v's binade: exact
 * arithmetic, since scaling by a power of two is exact and nearbyintl
 * rounds to even under the default rounding mode. */
static uint16_t half_from(long double v, struct half_format f)
{
    const uint16_t sign = signbit(v) ? 0x8000 : 0;
    const int exp_max = (1 << (15 - f.mant)) - 1;
    if (isnan(v))
        return sign | (uint16_t)(exp_max << f.mant) | (1u << (f.mant - 1));
    long double a = fabsl(v);
    if (a == 0)
        return sign;
    const int emin = 1 - f.bias;
    int e = ilogbl(a);
    if (e < emin)
        e = emin;
    long double r = ldexpl(nearbyintl(ldexpl(a, f.mant - e)), e - f.mant);
    if (r >= ldexpl(2.0, exp_max - 1 - f.bias)) /* rounded past the largest */
        return sign | (uint16_t)(exp_max << f.mant);
    if (r < ldexpl(1.0, emin)) /* subnormal: exponent field 0 */
        return sign | (uint16_t)ldexpl(r, f.mant - emin);
    e = ilogbl(r);
    const unsigned m = (unsigned)ldexpl(r, f.mant - e) - (1u << f.mant);
    return sign | (uint16_t)((e + f.bias) << f.mant) | (uint16_t)m;
}

/* Whether v lies halfway between two neighbours in the format. */
static bool half_tie(long double v, struct half_format f)
{
    const long double a = fabsl(v);
    const int e = ilogbl(a) < 1 - f.bias ? 1 - f.bias : ilogbl(a);
    const long double m = ldexpl(a, f.mant - e);
    return isfinite(a) && m - floorl(m) == 0.5L;
}

double elu_f16_to_double(uint16_t h) { return half_to_double(h, F16); }
double elu_bf16_to_double(uint16_t h) { return half_to_double(h, BF16); }
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
 * The exact value is never a tie (expm1 of a nonzero rational is
 * irrational), but the computed one is where expm1l(a) returns a itself:
 * the exact value lies beyond it by neg * a^2 / 2, on neg's side. */
static long double forward_half(const struct elu_coef *c, long double x)
{
    if (x > 0)
        return x * c->pos; /* exact: 11 bits times 24 */
    const long double v = expm1l(x * c->nip) * c->neg;
    const bool tie = half_tie(v, c->dtype == ELU_F16 ? F16 : BF16);
    return tie ? nextafterl(v, c->neg > 0 ? INFINITY : -INFINITY) : v;
}

static long double forward1(const struct elu_coef *c, long double x)
{
    if (c->dtype == ELU_F16 || c->dtype == ELU_BF16)
        return forward_half(c, x);
    if (c->dtype == ELU_F64)
        return x > 0 ? x * c->pos : expm1l(x * c->nip) * c->neg;
    const double xd = (double)x;
    return xd > 0 ? xd * c->pos : expm1(xd * c->nip) * c->neg;
}

/* The half types' backward from the output, g * nip * (s + neg), is
 * rational and may be exactly a tie: then that is the value to round. The
 * computed one is a tie only if the exact one is, or if it was rounded onto
 * one; the exact remainders of the sum and of the last product say which. */
static long double backward_half_output(const struct elu_coef *c, long double g, long double s)
{
    const long double sum = s + c->neg, b = sum - s; /* TwoSum: sum + sum_err exact */
    const long double sum_err = (s - (sum - b)) + (c->neg - b);
    const long double p = c->nip * sum; /* exact: at most 59 bits */
    const long double v = g * p;
    const long double rem = fmal(g, p, -v) + g * c->nip * sum_err;
    const bool tie = half_tie(v, c->dtype == ELU_F16 ? F16 : BF16);
    return tie && rem != 0 ? nextafterl(v, rem > 0 ? INFINITY : -INFINITY) : v;
}

/* `s <= 0`, not `s > 0`: a NaN saved value takes the scale branch, as in
 * PyTorch's elu_backward. */
static long double backward1(const struct elu_coef *c, long double g,
                             long double s, bool from_output)
{
    if (!(s <= 0))
        return g * c->pos;
    if (from_output && (c->dtype == ELU_F16 || c->dtype == ELU_BF16))
        return backward_half_output(c, g, s);
    if (from_output)
        return g * c->nip * (s + c->neg);
    if (c->dtype != ELU_F32)
        return g * c->nip * c->neg * expl(s * c->nip);
    return (double)g * c->nip * c->neg * exp((double)s * c->nip);
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

/* A half type has 65536 values, so a forward kernel on them is a table of
 * the scalar kernel's results: correctly rounded by construction, and a
 * load per element. Built once per context and set of constants, on the
 * first call large enough to pay for it (about a millisecond). */
#define MAX_TABLES 8
#define TABLE_MIN_N 16384

struct elu_cpu_tables {
    pthread_mutex_t lock; /* held to add a table */
    atomic_int count;     /* tables published: filled, then counted */
    struct {
        struct elu_coef coef;
        uint16_t *y;
    } t[MAX_TABLES];
};

struct elu_cpu_tables *elu_cpu_tables_create(void)
{
    struct elu_cpu_tables *ts = calloc(1, sizeof *ts);
    if (ts && pthread_mutex_init(&ts->lock, NULL) != 0) {
        free(ts);
        return NULL;
    }
    return ts;
}

void elu_cpu_tables_destroy(struct elu_cpu_tables *ts)
{
    if (!ts)
        return;
    for (int i = 0; i < atomic_load(&ts->count); i++)
        free(ts->t[i].y);
    pthread_mutex_destroy(&ts->lock);
    free(ts);
}

static bool same_coef(const struct elu_coef *a, const struct elu_coef *b)
{
    return a->dtype == b->dtype && memcmp(&a->neg, &b->neg, sizeof a->neg) == 0 &&
           memcmp(&a->pos, &b->pos, sizeof a->pos) == 0 &&
           memcmp(&a->nip, &b->nip, sizeof a->nip) == 0;
}

/* The forward table for c, made if there is room; NULL otherwise. Lookups
 * take no lock: a table is complete before the count that shows it. */
static const uint16_t *table_for(struct elu_cpu_tables *ts, const struct elu_coef *c)
{
    for (int i = 0; i < atomic_load_explicit(&ts->count, memory_order_acquire); i++)
        if (same_coef(&ts->t[i].coef, c))
            return ts->t[i].y;
    pthread_mutex_lock(&ts->lock);
    const int n = atomic_load_explicit(&ts->count, memory_order_relaxed);
    uint16_t *y = NULL;
    for (int i = 0; i < n && !y; i++)
        if (same_coef(&ts->t[i].coef, c))
            y = ts->t[i].y;
    if (!y && n < MAX_TABLES && (y = calloc(65537, sizeof *y))) { /* + gathers' pad */
        for (uint32_t i = 0; i < 65536; i++) {
            const uint16_t x = (uint16_t)i;
            elu_cpu_element(c, ELU_KERNEL_FORWARD, &x, 0, NULL, 0, y, (ptrdiff_t)i);
        }
        ts->t[n].coef = *c;
        ts->t[n].y = y;
        atomic_store_explicit(&ts->count, n + 1, memory_order_release);
    }
    pthread_mutex_unlock(&ts->lock);
    return y;
}

/* -------- splitting over threads -------- */

struct job {
    const struct elu_coef *c;
    enum elu_kernel kernel;
    const void *a, *b;
    void *out;
    size_t n, chunk;
    const uint16_t *table; /* a half type's forward results, or NULL */
};

static void run_part(void *arg, int part)
{
    const struct job *j = arg;
    const size_t begin = (size_t)part * j->chunk;
    const size_t end = begin + j->chunk < j->n ? begin + j->chunk : j->n;
    if (j->table) {
        const uint16_t *x = (const uint16_t *)j->a + begin;
        uint16_t *y = (uint16_t *)j->out + begin;
        if (isa) {
            isa->lookup16(j->table, x, y, end - begin);
            return;
        }
        for (size_t i = 0; i < end - begin; i++)
            y[i] = j->table[x[i]];
        return;
    }
    if (isa && j->kernel == ELU_KERNEL_FORWARD && elu_cpu_fast_forward_ok(j->c)) {
        if (j->c->dtype == ELU_F32)
            isa->forward_f32(j->c, (const float *)j->a + begin, (float *)j->out + begin,
                             end - begin);
        else
            isa->forward_f64(j->c, (const double *)j->a + begin, (double *)j->out + begin,
                             end - begin);
        return;
    }
    if (isa && j->kernel != ELU_KERNEL_FORWARD && elu_cpu_fast_backward_ok(j->c)) {
        const bool from_output = j->kernel == ELU_KERNEL_BACKWARD_OUTPUT;
        if (j->c->dtype == ELU_F32)
            isa->backward_f32(j->c, (const float *)j->a + begin, (const float *)j->b + begin,
                              from_output, (float *)j->out + begin, end - begin);
        else if (j->c->dtype == ELU_F64)
            isa->backward_f64(j->c, (const double *)j->a + begin,
                              (const double *)j->b + begin, from_output,
                              (double *)j->out + begin, end - begin);
        else
            isa->backward_half(j->c, (const uint16_t *)j->a + begin,
                               (const uint16_t *)j->b + begin, from_output,
                               (uint16_t *)j->out + begin, end - begin);
        return;
    }
    for (size_t i = begin; i < end; i++)
        elu_cpu_element(j->c, j->kernel, j->a, (ptrdiff_t)i, j->b, (ptrdiff_t)i, j->out,
                        (ptrdiff_t)i);
}

/* Below this many elements per thread, waking another costs more than it
 * saves: on the CI-class machine (f32 forward, vector kernel, data in
 * cache), 2^17 elements took 58 us on one thread and 76 us on two, 2^18
 * 97 us on either, 2^19 206 and 163 us. */
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
    const bool half = c->dtype == ELU_F16 || c->dtype == ELU_BF16;
    const uint16_t *table = half && kernel == ELU_KERNEL_FORWARD && tables &&
                                    n >= TABLE_MIN_N ? table_for(tables, c) : NULL;
    const struct job j = {c, kernel, a, b, out, n, (n + parts - 1) / parts, table};
    elu_pool_run(pool, run_part, (void *)&j, (int)parts);
}

void elu_cpu_run_strided(const struct elu_coef *c, enum elu_kernel kernel,
                         const void *a, const void *b, void *out, size_t n,
                         const struct elu_layout *l)
{
    int64_t index[ELU_MAX_RANK] = {0};
    ptrdiff_t offset[3] = {0, 0, 0}; /* of a, b, out */
    for (size_t i = 0; i < n; i++) {
        elu_cpu_element(c, kernel, a, offset[0], b, offset[1], out, offset[2]);
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
}
