/* The vectorized CPU kernels, one table per x86 instruction set; cpu_isa.c
 * picks one at run time. */
#ifndef ELU_CPU_FAST_H
#define ELU_CPU_FAST_H

#include "internal.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct elu_cpu_isa {
    const char *name; /* as ELU_CPU_ISA spells it */
    /* Whether this processor's double FMA rounds once. The f64 kernels'
     * exact products depend on it, and an emulator may not fuse it
     * (valgrind does not); cpu_isa.c leaves f64 to the scalar kernels then. */
    bool (*exact_fma64)(void);
    /* y = forward(x) over n elements, correctly rounded (f32) or within 1
     * ulp (f64) of the exact result; for constants that
     * elu_cpu_fast_forward_ok accepts. y may equal x. */
    void (*forward_f32)(const struct elu_coef *c, const float *x, float *y, size_t n);
    void (*forward_f64)(const struct elu_coef *c, const double *x, double *y, size_t n);
    /* dx = backward(g, s) over n elements, s the saved input or output,
     * within 1 ulp; for constants elu_cpu_fast_backward_ok accepts. dx may
     * equal g or s. */
    void (*backward_f32)(const struct elu_coef *c, const float *g, const float *s,
                         bool from_output, float *dx, size_t n);
    void (*backward_f64)(const struct elu_coef *c, const double *g, const double *s,
                         bool from_output, double *dx, size_t n);
    /* y[i] = table[x[i]] over n elements; the table has 65537 entries (the
     * last only pads the gathers). y may equal x. */
    void (*lookup16)(const uint16_t *table, const uint16_t *x, uint16_t *y, size_t n);
    /* y = forward(x) of f16 or bf16 (c->dtype) over n elements, correctly
     * rounded, computed; for constants elu_cpu_fast_half_forward_ok
     * accepts. y may equal x. */
    void (*forward_half)(const struct elu_coef *c, const uint16_t *x, uint16_t *y, size_t n);
    /* The backward of f16 or bf16 (c->dtype), correctly rounded, its
     * factors computed; for constants elu_cpu_fast_backward_ok accepts.
     * dx may equal g or s. */
    void (*backward_half)(const struct elu_coef *c, const uint16_t *g, const uint16_t *s,
                          bool from_output, uint16_t *dx, size_t n);
};

/* Whether forward_f32 or forward_f64 takes these constants (and dtype):
 * finite ones, and for F32 input_scale > 0 (the exponential's argument is
 * never positive); for F64 |scale*alpha| and input_scale within [2^-500,
 * 2^500] and their product at most 2^500 (it is kept times 2^64). ELU,
 * SELU and CELU of any sensible alpha qualify; others take the scalar
 * path. */
bool elu_cpu_fast_forward_ok(const struct elu_coef *c);

/* Whether forward_half takes these constants (and dtype): F16 or BF16,
 * finite floats with input_scale within [2^-60, 2^126] for F16, within
 * [2^-125, 2^126] and |scale*alpha| <= 2^15 for BF16, where x*input_scale*
 * log2(e) stays a normal float wherever the result is at least the type's
 * smallest normal; on a processor whose double FMA rounds once (as for
 * forward_f64). Others take the tables. */
bool elu_cpu_fast_half_forward_ok(const struct elu_coef *c);

/* Whether backward_f32, backward_f64 and backward_half take these
 * constants (and dtype): all finite, input_scale >= 0 (the exponential's
 * argument is never positive); for F64 also input_scale and
 * |input_scale*scale*alpha| within [2^-300, 2^300], where its products
 * stay normal; for F16 and BF16 the constants floats (as elu_run forms
 * them) and |input_scale*scale*alpha| within [2^-70, 2^126], which keeps
 * the factors from the output, and their product with e^r from the input,
 * normal floats. */
bool elu_cpu_fast_backward_ok(const struct elu_coef *c);

#if defined(__x86_64__)
extern const struct elu_cpu_isa elu_cpu_isa_avx512, elu_cpu_isa_avx2;
#endif

#endif
