/* The CPU path: every dtype, forward and backward, split over threads.
 * What it is built of: scalar.h (the reference kernels), cpu_isa.h and
 * cpu_fast.h (the vector kernels), half_table.h (the half types' tables). */
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

#endif
