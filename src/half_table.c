/* The half types' forward tables, computed (for the CPU path and the
 * GPU's specialized modules alike), and as a disk cache entry (see
 * half_table.h). */
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
