/* The benchmarks' data. */
#ifndef ELU_BENCH_FILL_H
#define ELU_BENCH_FILL_H

#include "elu.h"

#include <stddef.h>

/* n elements of dtype t at buf: real data, not zeros (see fill.c). */
void bench_fill(elu_dtype t, void *buf, size_t n);

#endif
