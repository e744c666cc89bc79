/* The numbers both paths share (numerics.h). */
#include "numerics.h"

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

bool elu_exact_forward_takes(const struct elu_coef *c)
{
    const double neg = fabs(c->scale_alpha), nip = c->input_scale;
    if (c->dtype == ELU_F32)
        return isfinite(c->scale) && isfinite(neg) && nip > 0 && isfinite(nip);
    return c->dtype == ELU_F64 && isfinite(c->scale) && neg >= 0x1p-500 && neg <= 0x1p500 &&
           nip >= 0x1p-500 && nip <= 0x1p500;
}
