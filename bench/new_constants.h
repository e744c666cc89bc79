/* elu-bench's rows for constants that change from call to call. */
#ifndef ELU_BENCH_NEW_CONSTANTS_H
#define ELU_BENCH_NEW_CONSTANTS_H

#include "elu.h"

/* Sizes 2^16, 2^20 and 2^24; forward and backward; every dtype. */
#define NEW_CONSTANTS_MIN_LOG2 16
#define NEW_CONSTANTS_MAX_LOG2 24
#define NEW_CONSTANTS_ROWS (4 * 3 * 2)

struct new_constants_row {
    int dtype, log2, backward;
    double new_us, prepared_us; /* per call: new constants each call; one prepared set */
};

/* Fills rows (NEW_CONSTANTS_ROWS of them) in a context of its own on
 * cache_dir; returns how many it measured. */
int measure_new_constants(const char *cache_dir, struct new_constants_row *rows);

/* The rows as a table; as the last member of elu-bench's JSON object,
 * closing it. */
void print_new_constants_text(const struct new_constants_row *rows, int count);
void print_new_constants_json(const struct new_constants_row *rows, int count);

#endif
