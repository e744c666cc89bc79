/* The vector kernels' instruction set, chosen once per process on first
 * use (cpu_isa.c), and which constants its kernels take (cpu_fast.h's
 * elu_cpu_fast_forward_ok and elu_cpu_fast_backward_ok). */
#ifndef ELU_CPU_ISA_H
#define ELU_CPU_ISA_H

#include <stdbool.h>

struct elu_cpu_isa;

/* The vector kernels in use (cpu_fast.h), or NULL for the scalar kernels
 * only. */
const struct elu_cpu_isa *elu_cpu_isa(void);

/* The vectorized kernels in use: "avx512", "avx2" or "baseline" (the scalar
 * kernels only). Chosen once per process, on first use: the best the
 * processor has, no better than the one ELU_CPU_ISA names. */
const char *elu_cpu_isa_name(void);

/* Why the kernels in use are not those ELU_CPU_ISA names (the processor
 * lacks them), or "". */
const char *elu_cpu_isa_fallback(void);

#if defined(__x86_64__)
/* The choice elu_cpu_isa_name makes, given `want` ("avx512", "avx2",
 * "baseline", or NULL for no cap) and whether the processor has AVX-512
 * and AVX2 (with FMA and F16C): the best set it has no better than want;
 * NULL for the scalar kernels. */
const struct elu_cpu_isa *elu_cpu_choose_isa(const char *want, const bool has[2]);

/* The vector kernels' sets, best first, and whether this processor has
 * each (AVX2 with FMA and F16C). */
extern const struct elu_cpu_isa *const elu_cpu_isas[2];
void elu_cpu_isas_present(bool has[2]);
#endif

#endif
