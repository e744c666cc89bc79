/* The CPU path: every dtype, forward and backward, split over threads. */
#ifndef ELU_CPU_H
#define ELU_CPU_H

#include "internal.h"
#include "numerics.h"
#include "pool.h"

#include <stddef.h>
#include <stdint.h>

/* A context's lookup tables for the half types (see cpu.c); NULL when out
 * of memory, which only means no tables. */
struct elu_cpu_tables;
struct elu_cpu_tables *elu_cpu_tables_create(void);
void elu_cpu_tables_destroy(struct elu_cpu_tables *tables);

/* out = kernel(a, b) over n elements, before returning, split over the
 * pool's threads when n is large; b is NULL for the forward kernel. out may
 * equal a or b. tables may be NULL. */
void elu_cpu_run(const struct elu_coef *c, enum elu_kernel kernel,
                 const void *a, const void *b, void *out, size_t n,
                 struct elu_pool *pool, struct elu_cpu_tables *tables);

/* The same over n elements of any strides (single-threaded: views are the
 * uncommon case). */
void elu_cpu_run_strided(const struct elu_coef *c, enum elu_kernel kernel,
                         const void *a, const void *b, void *out, size_t n,
                         const struct elu_layout *l);

/* out[io] = kernel(a[ia], b[ib]) by the scalar kernels, offsets in
 * elements: what the vectorized kernels fall back on for rare elements. */
void elu_cpu_element(const struct elu_coef *c, enum elu_kernel kernel, const void *a,
                     ptrdiff_t ia, const void *b, ptrdiff_t ib, void *out, ptrdiff_t io);

/* The forward of a half type (c->dtype) for each of its 65536 values,
 * correctly rounded, and one entry of padding; malloc'd, NULL when out of
 * memory. The CPU path's forward tables, and the GPU's (modules.c). */
uint16_t *elu_cpu_forward_table(const struct elu_coef *c);

/* The factors a half type's vector backward from the input takes
 * (cpu_fast.h), for constants c; malloc'd, NULL when out of memory.
 * Exposed for the tests, which run every instruction set's kernel on it. */
struct elu_half_factors;
struct elu_half_factors *elu_cpu_factor_table(const struct elu_coef *c);


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
struct elu_cpu_isa;
const struct elu_cpu_isa *elu_cpu_choose_isa(const char *want, const bool has[2]);

/* The vector kernels' sets, best first, and whether this processor has
 * each (AVX2 with FMA and F16C). */
extern const struct elu_cpu_isa *const elu_cpu_isas[2];
void elu_cpu_isas_present(bool has[2]);
#endif

/* Conversions of the half types, correctly rounded (nearest, ties to even).
 * Exposed for the tests' references. */
double elu_f16_to_double(uint16_t h);
double elu_bf16_to_double(uint16_t h);
uint16_t elu_f16_from(long double v);
uint16_t elu_bf16_from(long double v);

#endif
