/* The scalar kernels (scalar.c): the reference that the vector kernels are
 * tested against and fall back on for rare elements; and the half types'
 * conversions. */
#ifndef ELU_SCALAR_H
#define ELU_SCALAR_H

#include "internal.h"

#include <stddef.h>
#include <stdint.h>

/* out[io] = kernel(a[ia], b[ib]) by the scalar kernels, offsets in
 * elements: what the vectorized kernels fall back on for rare elements. */
void elu_cpu_element(const struct elu_coef *c, enum elu_kernel kernel, const void *a,
                     ptrdiff_t ia, const void *b, ptrdiff_t ib, void *out, ptrdiff_t io);

/* h of the half type t as a float, exactly (every half value is one). */
float elu_half_to_float(uint16_t h, elu_dtype t);

/* Conversions of the half types, correctly rounded (nearest, ties to even).
 * Exposed for the tests' references. */
double elu_f16_to_double(uint16_t h);
double elu_bf16_to_double(uint16_t h);
uint16_t elu_f16_from(long double v);
uint16_t elu_bf16_from(long double v);

#endif
