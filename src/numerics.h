/* The numbers both paths share, with no dependency on either: the dtypes'
 * sizes, and the constants of the exact forward (f64: the method atop
 * src/cpu_fast.c; f32: kernels_src/elu_forward_f32.h), which the CPU's
 * vector kernels and the GPU's kernels compute alike). */
#ifndef ELU_NUMERICS_H
#define ELU_NUMERICS_H

#include "internal.h"

/* For c: F64's x is clamped to [x_min, x_max] (A_MIN / input_scale and
 * -A_TINY / input_scale), and input_scale * scale_alpha * 2^64 = w_hi +
 * w_lo exactly, for tiny x. F32's x_min is T_MIN / input_scale rounded to
 * float, the rest 0. False, and *k untouched, where the method does not
 * take c: a dtype other than F32 and F64, or constants out of the range
 * elu_cpu_fast_forward_ok (cpu_fast.h) describes. */
struct elu_exact_consts {
    double x_min, x_max, w_hi, w_lo;
};
bool elu_exact_forward_consts(const struct elu_coef *c, struct elu_exact_consts *k);

#endif
