/* Wall-clock time and medians for the examples' measurements. */
#ifndef ELU_EXAMPLES_TIMING_H
#define ELU_EXAMPLES_TIMING_H

#include <stdlib.h>
#include <time.h>

static inline double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static inline int by_value_(const void *a, const void *b)
{
    const double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Sorts v. */
static inline double median(double *v, int n)
{
    qsort(v, (size_t)n, sizeof *v, by_value_);
    return v[n / 2];
}

#endif
