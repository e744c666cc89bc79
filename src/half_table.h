/* The half types' forward tables: a half type has 65536 values, so its
 * forward can be a table of correctly rounded results, which the GPU's
 * specialized modules look up, and the CPU path for constants its vector
 * kernels do not compute. The forward table is also a disk cache entry of its own, apart
 * from the binary of a module that reads it: a warm process needs neither
 * NVRTC nor the table's build, and the table is made and kept whatever
 * binary uses it. */
#ifndef ELU_HALF_TABLE_H
#define ELU_HALF_TABLE_H

#include "internal.h"

#include <stdint.h>

#define ELU_HALF_TABLE_BYTES (65536 * 2)

/* The forward of a half type (c->dtype) for each of its 65536 values,
 * correctly rounded: the f32 vector kernel's results rounded to the type
 * where that is surely right, the scalar kernel's elsewhere; and one entry
 * of padding. malloc'd, NULL when out of memory. */
uint16_t *elu_half_forward_table(const struct elu_coef *c);

/* Whether a module for spec reads a forward table: a specialized half
 * type's. */
bool elu_half_table_needed(const struct elu_spec *spec);

/* The disk cache's key for c's table (libelu's version in it: a new libelu
 * computes it again). */
struct elu_cache_key elu_half_table_key(const struct elu_coef *c);

/* c's table, ELU_HALF_TABLE_BYTES malloc'd into *out: from the context's
 * disk cache, else computed and then stored there. ELU_ERR_OUT_OF_MEMORY
 * is the only failure; a cache that fails is noted, not fatal. */
elu_status elu_half_table_obtain(elu_ctx *ctx, const struct elu_coef *c, uint16_t **out);

#endif
