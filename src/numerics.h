/* The numbers both paths share, with no dependency on either: the dtypes'
 * sizes, and which constants the exact forward takes. */
#ifndef ELU_NUMERICS_H
#define ELU_NUMERICS_H

#include "internal.h"

/* Whether the exact forward (elu_forward_f32.h, elu_forward_f64.h) takes
 * c: for F32 finite constants with input_scale > 0; for F64 a finite
 * scale, |scale*alpha| and input_scale within [2^-500, 2^500]. */
bool elu_exact_forward_takes(const struct elu_coef *c);

#endif
