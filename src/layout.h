/* Strided layouts (the DLPack entry points' views): the bytes each buffer
 * spans, computed without overflow, and whether an output's elements
 * overlap each other or an input's. */
#ifndef ELU_LAYOUT_H
#define ELU_LAYOUT_H

#include "internal.h"

#include <stddef.h>
#include <stdint.h>

/* The largest byte span a buffer's layout may have: far beyond any memory,
 * and small enough that sums of two spans cannot overflow an int64_t. */
#define ELU_LAYOUT_MAX_SPAN ((int64_t)1 << 60)

/* The bytes buffer k (0: a, 1: b, 2: out) of l reaches relative to its
 * base, [*lo, *hi) with *lo <= 0 < *hi, for elements of `size` bytes.
 * False if a span exceeds ELU_LAYOUT_MAX_SPAN (then *lo and *hi are not
 * set). l's shape must be positive; a dimension of size 1 adds nothing,
 * whatever its stride. */
bool elu_layout_span(const struct elu_layout *l, int k, size_t size, int64_t *lo,
                     int64_t *hi);

/* Whether [base + lo, base + hi) lies inside the address space. */
bool elu_layout_fits(const void *base, int64_t lo, int64_t hi);

enum elu_overlap {
    ELU_OVERLAP_NONE,    /* proven: no byte shared */
    ELU_OVERLAP_SOME,    /* proven: a byte is shared */
    ELU_OVERLAP_UNKNOWN  /* too costly to decide (a layout of no common shape) */
};

/* Whether two different elements of buffer k share memory. l's spans must
 * have passed elu_layout_span(). */
enum elu_overlap elu_layout_self_overlap(const struct elu_layout *l, int k);

/* Whether an element of buffer k at p shares a byte with an element of
 * buffer j at q other than at the same index of the same view (in place).
 * l's spans must have passed elu_layout_span(). */
enum elu_overlap elu_layout_overlap(const struct elu_layout *l, int k, const void *p,
                                    int j, const void *q, size_t size);

#endif
