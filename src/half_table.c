/* The half types' tables, computed (for the CPU path and the GPU's
 * specialized modules alike), and the forward table as a disk cache entry
 * (see half_table.h). */
#include "half_table.h"

#include "cpu_fast.h"
#include "cpu_isa.h"
#include "jit.h"
#include "scalar.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CHUNK 1024 /* table entries computed at a time */

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

uint16_t *elu_half_forward_table(const struct elu_coef *c)
{
    const struct elu_cpu_isa *isa = elu_cpu_isa();
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
            x[k] = elu_half_to_float(h, c->dtype);
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
    const struct elu_cpu_isa *isa = elu_cpu_isa();
    const float beyond = table_factor(c->dtype, c->input_scale * c->scale_alpha * 0x1p-288);
    double s[CHUNK], one[CHUNK], d[CHUNK];
    bool tiny[CHUNK];
    for (uint32_t k = 0; k < CHUNK; k++) {
        const uint16_t v = (uint16_t)(h + k);
        s[k] = elu_half_to_float(v, c->dtype);
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

struct elu_half_factors *elu_half_factor_table(const struct elu_coef *c)
{
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
        const double s = elu_half_to_float(v, c->dtype);
        const bool exact = isnan(s) ? t->f[j] == c->scale : factor_exact(c, s, t->f[j]);
        t->exact[j / 32] |= (uint32_t)exact << j % 32;
    }
    for (uint32_t j = 32768; j < 32770; j++) { /* F(+0.0) = F(-0.0); scale */
        const bool exact = j == 32768 ? (t->exact[0] & 1) : t->f[j] == c->scale;
        t->exact[j / 32] |= (uint32_t)exact << j % 32;
    }
    return t;
}

static const char *const DTYPES[] = {"f32", "f64", "f16", "bf16"};

bool elu_half_table_needed(const struct elu_spec *spec)
{
    return !spec->generic && (spec->coef.dtype == ELU_F16 || spec->coef.dtype == ELU_BF16);
}

struct elu_cache_key elu_half_table_key(const struct elu_coef *c)
{
    char text[256]; /* %a: every bit of the constants */
    snprintf(text, sizeof text, "libelu %s cache-format %d forward table %s %a %a %a",
             ELU_VERSION_STRING, ELU_CACHE_FORMAT, DTYPES[c->dtype], c->scale_alpha, c->scale,
             c->input_scale);
    return elu_cache_key_of(text, strlen(text));
}

static bool from_disk(elu_ctx *ctx, const struct elu_cache_key *key, uint16_t **out)
{
    void *data = NULL;
    size_t size = 0;
    enum elu_cache_result seen = ELU_CACHE_MISS;
    if (!elu_jit_cache_get(ctx, key, ELU_BINARY_TABLE, &data, &size, &seen))
        return false;
    if (size == ELU_HALF_TABLE_BYTES) {
        *out = data;
        return true;
    }
    free(data); /* the key covers the size: only a forged entry */
    return false;
}

elu_status elu_half_table_obtain(elu_ctx *ctx, const struct elu_coef *c, uint16_t **out)
{
    const struct elu_cache_key key = elu_half_table_key(c);
    if (ctx->disk_cache && from_disk(ctx, &key, out))
        return ELU_OK;
    if (!(*out = elu_half_forward_table(c)))
        return elu_fail(ctx, ELU_ERR_OUT_OF_MEMORY, "out of memory");
    if (ctx->disk_cache) {
        char description[ELU_CACHE_MAX_DESCRIPTION];
        snprintf(description, sizeof description,
                 "%s forward table, scale*alpha=%.17g scale=%.17g input_scale=%.17g, libelu %s",
                 DTYPES[c->dtype], c->scale_alpha, c->scale, c->input_scale, ELU_VERSION_STRING);
        elu_jit_cache_put(ctx, &key, ELU_BINARY_TABLE, description, *out, ELU_HALF_TABLE_BYTES,
                          "table kept in memory");
    }
    return ELU_OK;
}
