/* The constants of the f64 forward's exponential-minus-one, shared text:
 * src/cpu_fast.c includes this file (C), and src/jit.c puts it before
 * kernels_src/elu.cu (CUDA C++), so that the CPU's vector kernels and the
 * GPU's kernels compute the same method, bit for bit. The method and its
 * error bound: the comment atop src/cpu_fast.c. (f32 has a method of its
 * own: elu_forward_f32.h.)
 *
 *   LN2, LN2_LO   ln2 in double, and the rest of ln2 beyond it
 *   INV_LN2       1/ln2
 *   ROUND         1.5 * 2^(p-1): v + ROUND - ROUND is v rounded to an
 *                 integer, and v + ROUND holds that integer in its low bits
 *   A_MIN         where expm1(a) is within a quarter ulp of -1: a is clamped
 *   A_TINY        below which |a|, expm1(a) = a within a 64th of an ulp
 *   POLY          the coefficients of Q, highest degree first (degree 9, a
 *                 Chebyshev fit rounded to double) */
#ifndef ELU_EXPM1_H
#define ELU_EXPM1_H

#define ELU_F64_LN2 0x1.62e42fefa39efp-1
#define ELU_F64_LN2_LO 0x1.abc9e3b39803fp-56
#define ELU_F64_INV_LN2 0x1.71547652b82fep0
#define ELU_F64_ROUND 0x1.8p52
#define ELU_F64_A_MIN (-40.0)
#define ELU_F64_A_TINY 0x1p-58
#define ELU_F64_POLY 0x1.1f66da6ee7eeap-29, 0x1.af38a0d2d9620p-26, 0x1.27e4e1f6a6779p-22, \
                     0x1.71de0db21e27fp-19, 0x1.a01a01a47a78fp-16, 0x1.a01a01a7c327ap-13, \
                     0x1.6c16c16c167e2p-10, 0x1.11111111109b4p-7, 0x1.5555555555555p-5, \
                     0x1.5555555555556p-3

#endif
