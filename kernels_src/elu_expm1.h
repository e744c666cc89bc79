/* An exponential in double within an ulp or so, shared text: the f64
 * backward on the CPU (src/cpu_fast.c, which derives its bounds) and the
 * half types' double evaluation on the GPU (kernels_src/elu.cu,
 * exact_half_forward) reduce a = k ln2 + r and evaluate
 * expm1(r) = r + r^2/2 + r^3 Q(r) by these constants; src/jit.c puts
 * this file before elu.cu. (The correctly rounded f32 and f64 forwards
 * have methods of their own: elu_forward_f32.h, elu_forward_f64.h.)
 *
 *   LN2, LN2_LO   ln2 in double, and the rest of ln2 beyond it
 *   INV_LN2       1/ln2
 *   ROUND         1.5 * 2^(p-1): v + ROUND - ROUND is v rounded to an
 *                 integer, and v + ROUND holds that integer in its low bits
 *   POLY          the coefficients of Q, highest degree first (degree 9, a
 *                 Chebyshev fit of (expm1(r) - r - r^2/2)/r^3 on
 *                 |r| <= ln2/2, rounded to double) */
#ifndef ELU_EXPM1_H
#define ELU_EXPM1_H

#define ELU_EXPM1_LN2 0x1.62e42fefa39efp-1
#define ELU_EXPM1_LN2_LO 0x1.abc9e3b39803fp-56
#define ELU_EXPM1_INV_LN2 0x1.71547652b82fep0
#define ELU_EXPM1_ROUND 0x1.8p52
#define ELU_EXPM1_POLY 0x1.1f66da6ee7eeap-29, 0x1.af38a0d2d9620p-26, 0x1.27e4e1f6a6779p-22, \
                     0x1.71de0db21e27fp-19, 0x1.a01a01a47a78fp-16, 0x1.a01a01a7c327ap-13, \
                     0x1.6c16c16c167e2p-10, 0x1.11111111109b4p-7, 0x1.5555555555555p-5, \
                     0x1.5555555555556p-3

#endif
