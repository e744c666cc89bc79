/* The CPU path. The scalar kernels here compute each element in a wider
 * type than it is stored in (double for float-valued dtypes, long double for
 * F64) and round once, so results are within a rounding of the exact value
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
                        __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")};
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

bool elu_cpu_fast_f32_ok(const struct elu_coef *c)
{
    return c->dtype == ELU_F32 && isfinite(c->pos) && fabs(c->neg) >= 0x1p-24 &&
           c->nip >= 0x1p-100 && fabs(c->neg) * c->nip <= 0x1p60;
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
 * arithmetic, since scaling by a power of two is exact and nearbyint rounds
 * to even under the default rounding mode. */
static uint16_t half_from_double(double v, struct half_format f)
{
    const uint16_t sign = signbit(v) ? 0x8000 : 0;
    const int exp_max = (1 << (15 - f.mant)) - 1;
    if (isnan(v))
        return sign | (uint16_t)(exp_max << f.mant) | (1u << (f.mant - 1));
    double a = fabs(v);
    if (a == 0)
        return sign;
    const int emin = 1 - f.bias;
    int e = ilogb(a);
    if (e < emin)
        e = emin;
    double r = ldexp(nearbyint(ldexp(a, f.mant - e)), e - f.mant);
    if (r >= ldexp(2.0, exp_max - 1 - f.bias)) /* rounded past the largest */
        return sign | (uint16_t)(exp_max << f.mant);
    if (r < ldexp(1.0, emin)) /* subnormal: exponent field 0 */
        return sign | (uint16_t)ldexp(r, f.mant - emin);
    e = ilogb(r);
    const unsigned m = (unsigned)ldexp(r, f.mant - e) - (1u << f.mant);
    return sign | (uint16_t)((e + f.bias) << f.mant) | (uint16_t)m;
}

double elu_f16_to_double(uint16_t h) { return half_to_double(h, F16); }
double elu_bf16_to_double(uint16_t h) { return half_to_double(h, BF16); }
uint16_t elu_f16_from_double(double v) { return half_from_double(v, F16); }
uint16_t elu_bf16_from_double(double v) { return half_from_double(v, BF16); }

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

/* F64 is computed in long double; the others in double, which a float
 * product already fits exactly. Each store rounds once. */
static void store(elu_dtype t, void *p, ptrdiff_t i, long double v)
{
    switch (t) {
    case ELU_F32: ((float *)p)[i] = (float)(double)v; break;
    case ELU_F64: ((double *)p)[i] = (double)v; break;
    case ELU_F16: ((uint16_t *)p)[i] = elu_f16_from_double((double)v); break;
    case ELU_BF16: ((uint16_t *)p)[i] = elu_bf16_from_double((double)v); break;
    }
}

/* -------- the math, as PyTorch writes it -------- */

static long double forward1(const struct elu_coef *c, long double x)
{
    if (c->dtype == ELU_F64)
        return x > 0 ? x * c->pos : expm1l(x * c->nip) * c->neg;
    const double xd = (double)x;
    return xd > 0 ? xd * c->pos : expm1(xd * c->nip) * c->neg;
}

/* `s <= 0`, not `s > 0`: a NaN saved value takes the scale branch, as in
 * PyTorch's elu_backward. */
static long double backward1(const struct elu_coef *c, long double g,
                             long double s, bool from_output)
{
    if (!(s <= 0))
        return g * c->pos;
    if (from_output)
        return g * c->nip * (s + c->neg);
    if (c->dtype == ELU_F64)
        return g * c->nip * c->neg * expl(s * c->nip);
    return (double)g * c->nip * c->neg * exp((double)s * c->nip);
}

/* out[io] = kernel(a[ia], b[ib]), offsets in elements. */
static void element(const struct elu_coef *c, enum elu_kernel kernel,
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

/* -------- splitting over threads -------- */

struct job {
    const struct elu_coef *c;
    enum elu_kernel kernel;
    const void *a, *b;
    void *out;
    size_t n, chunk;
};

static void run_part(void *arg, int part)
{
    const struct job *j = arg;
    const size_t begin = (size_t)part * j->chunk;
    const size_t end = begin + j->chunk < j->n ? begin + j->chunk : j->n;
    if (isa && j->kernel == ELU_KERNEL_FORWARD && elu_cpu_fast_f32_ok(j->c)) {
        isa->forward_f32(j->c, (const float *)j->a + begin, (float *)j->out + begin,
                         end - begin);
        return;
    }
    for (size_t i = begin; i < end; i++)
        element(j->c, j->kernel, j->a, (ptrdiff_t)i, j->b, (ptrdiff_t)i, j->out,
                (ptrdiff_t)i);
}

/* Below this many elements per thread, waking another costs more than it
 * saves. */
#define ELU_CPU_MIN_PER_THREAD 65536

void elu_cpu_run(const struct elu_coef *c, enum elu_kernel kernel,
                 const void *a, const void *b, void *out, size_t n,
                 struct elu_pool *pool)
{
    pthread_once(&isa_once, pick_isa);
    size_t parts = n / ELU_CPU_MIN_PER_THREAD;
    if (parts > (size_t)elu_pool_threads(pool))
        parts = (size_t)elu_pool_threads(pool);
    if (parts < 1)
        parts = 1;
    const struct job j = {c, kernel, a, b, out, n, (n + parts - 1) / parts};
    elu_pool_run(pool, run_part, (void *)&j, (int)parts);
}

void elu_cpu_run_strided(const struct elu_coef *c, enum elu_kernel kernel,
                         const void *a, const void *b, void *out, size_t n,
                         const struct elu_layout *l)
{
    int64_t index[ELU_MAX_RANK] = {0};
    ptrdiff_t offset[3] = {0, 0, 0}; /* of a, b, out */
    for (size_t i = 0; i < n; i++) {
        element(c, kernel, a, offset[0], b, offset[1], out, offset[2]);
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
