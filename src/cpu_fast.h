/* The vectorized CPU kernels, one table per x86 instruction set; cpu.c
 * picks one at run time. */
#ifndef ELU_CPU_FAST_H
#define ELU_CPU_FAST_H

#include "internal.h"

#include <stdbool.h>
#include <stddef.h>

struct elu_cpu_isa {
    const char *name; /* as ELU_CPU_ISA spells it */
    /* y = forward(x) over n floats, within 1 ulp of the exact result;
     * for constants that elu_cpu_fast_f32_ok accepts. y may equal x. */
    void (*forward_f32)(const struct elu_coef *c, const float *x, float *y, size_t n);
    /* dx = backward(g, s) over n floats, s the saved input or output, within
     * 1 ulp; for constants elu_cpu_fast_backward_ok accepts. dx may equal g
     * or s. */
    void (*backward_f32)(const struct elu_coef *c, const float *g, const float *s,
                         bool from_output, float *dx, size_t n);
    /* y[i] = table[x[i]] over n elements; the table has 65537 entries (the
     * last only pads the gathers). y may equal x. */
    void (*lookup16)(const uint16_t *table, const uint16_t *x, uint16_t *y, size_t n);
    /* The backward of f16 or bf16 (c->dtype), correctly rounded; for
     * constants elu_cpu_fast_backward_ok accepts. dx may equal g or s. */
    void (*backward_half)(const struct elu_coef *c, const uint16_t *g, const uint16_t *s,
                          bool from_output, uint16_t *dx, size_t n);
};

/* Whether forward_f32 takes these constants: a finite scale; |scale*alpha|
 * at least 2^-24 (results stay normal but where x is tiny); input_scale at
 * least 2^-100 (the exponential's argument is never positive, -18/input_scale
 * is finite); and their product at most 2^60 (it is kept times 2^64).
 * ELU, SELU and CELU of any sensible alpha qualify; others take the scalar
 * path. */
bool elu_cpu_fast_f32_ok(const struct elu_coef *c);

/* Whether backward_f32 and backward_half take these constants (and
 * dtype): all finite, input_scale >= 0 (the exponential's argument is
 * never positive). */
bool elu_cpu_fast_backward_ok(const struct elu_coef *c);

#if defined(__x86_64__)
extern const struct elu_cpu_isa elu_cpu_isa_avx512, elu_cpu_isa_avx2;
#endif

#endif
