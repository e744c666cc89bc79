/* The numbers both paths share (numerics.h). */
#include "numerics.h"

#include "elu_expm1.h"
#include "elu_forward_f32.h"

#include <math.h>

size_t elu_dtype_size(elu_dtype dtype)
{
    switch (dtype) {
    case ELU_F32: return 4;
    case ELU_F64: return 8;
    case ELU_F16:
    case ELU_BF16: return 2;
    }
    return 0;
}

/* input_scale * scale_alpha * 2^64 as w_hi + w_lo exactly, both doubles,
 * w_hi rounded toward zero so that w_lo has w's sign or is zero:
 * then x = -0.0 gives the right signed zero. */
static void split_w(const struct elu_coef *c, double *w_hi, double *w_lo)
{
    const double nip = c->input_scale * 0x1p64; /* exact */
    double hi = nip * c->scale_alpha;
    double lo = fma(nip, c->scale_alpha, -hi); /* exact */
    if (lo != 0 && signbit(lo) != signbit(hi)) {
        hi = nextafter(hi, 0);
        lo = fma(nip, c->scale_alpha, -hi);
    }
    *w_hi = hi;
    *w_lo = lo;
}

bool elu_exact_forward_consts(const struct elu_coef *c, struct elu_exact_consts *k)
{
    const double neg = fabs(c->scale_alpha), nip = c->input_scale;
    if (c->dtype == ELU_F32 && isfinite(c->scale) && isfinite(neg) && nip > 0 && isfinite(nip)) {
        *k = (struct elu_exact_consts){.x_min = (float)(ELU_F32_T_MIN / nip)};
        return true;
    }
    if (c->dtype == ELU_F64 && isfinite(c->scale) && neg >= 0x1p-500 && neg <= 0x1p500 &&
        nip >= 0x1p-500 && nip <= 0x1p500 && neg * nip <= 0x1p500) {
        k->x_min = ELU_F64_A_MIN / nip;
        k->x_max = -ELU_F64_A_TINY / nip;
        split_w(c, &k->w_hi, &k->w_lo);
        return true;
    }
    return false;
}
