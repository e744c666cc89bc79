/* The constants of the exact forward's exponential-minus-one, shared text:
 * src/cpu_fast.c includes this file (C), and src/jit.c puts it before
 * kernels_src/elu.cu (CUDA C++), so that the CPU's vector kernels and the
 * GPU's specialized f32 and f64 kernels compute the same method, bit for
 * bit. The method and its error bound: the comment atop src/cpu_fast.c.
 *
 *   LN2, LN2_LO   ln2 in the type, and the rest of ln2 beyond it
 *   INV_LN2       1/ln2
 *   A_MIN         where expm1(a) is within a quarter ulp of -1: a is clamped
 *   A_TINY        below which |a|, expm1(a) = a within a 64th of an ulp
 *   POLY          the coefficients of P, highest degree first (f32: a
 *                 degree-5 near-minimax fit, f64: a degree-10 Chebyshev one) */
#ifndef ELU_EXPM1_H
#define ELU_EXPM1_H

#define ELU_F32_LN2 0x1.62e430p-1f
#define ELU_F32_LN2_LO (-0x1.05c610p-29f)
#define ELU_F32_INV_LN2 0x1.715476p0f
#define ELU_F32_A_MIN (-18.0f)
#define ELU_F32_A_TINY 0x1p-29f
#define ELU_F32_POLY 0x1.a073cap-13f, 0x1.6d4650p-10f, 0x1.11114ep-7f, 0x1.5554e6p-5f, \
                     0x1.555556p-3f, 0.5f

#define ELU_F64_LN2 0x1.62e42fefa39efp-1
#define ELU_F64_LN2_LO 0x1.abc9e3b39803fp-56
#define ELU_F64_INV_LN2 0x1.71547652b82fep0
#define ELU_F64_A_MIN (-40.0)
#define ELU_F64_A_TINY 0x1p-58
#define ELU_F64_POLY 0x1.1f730349868cep-29, 0x1.af4de97ca4194p-26, 0x1.27e4db646b17ep-22, \
                     0x1.71de0231960ebp-19, 0x1.a01a01a6d889cp-16, 0x1.a01a01abe7fe1p-13, \
                     0x1.6c16c16c162d4p-10, 0x1.11111111100dcp-7, 0x1.5555555555556p-5, \
                     0x1.5555555555557p-3, 0.5

#endif
