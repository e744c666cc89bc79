/* libelu's environment variables: every one is read here, by one policy.
 *
 * - An empty value is the same as an unset one.
 * - A flag is on for 1, true, yes or on, and off for 0, false, no or off,
 *   in any case; unset, it is off.
 * - A number is decimal digits and nothing else (no sign, no spaces, no
 *   exponent), within its variable's range; unset, it is its default.
 * - A choice is one of its variable's words, in any case.
 * - Anything else is invalid: ignored, so that the default holds, and
 *   reported by elu_env_check (elu_ctx_create puts that in the context's
 *   last error, and on stderr under ELU_DEBUG).
 * The variables, their ranges and words are env.c's table, and the
 * README's. */
#ifndef ELU_ENV_H
#define ELU_ENV_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* The disk cache's defaults, and the most that ELU_CACHE_LOCK_TIMEOUT_MS
 * takes (an hour: every wait ends). */
#define ELU_CACHE_DEFAULT_MAX_BYTES (256ull << 20)
#define ELU_CACHE_LOCK_TIMEOUT_MS 60000
#define ELU_CACHE_MAX_LOCK_TIMEOUT_MS 3600000

/* Whether the flag `name` is on. */
bool elu_env_flag(const char *name);

/* The number `name`, or its default when unset or invalid. */
uint64_t elu_env_number(const char *name);

/* The word of `name`'s list that its value spells (in the list's own
 * case), or NULL when unset or invalid. */
const char *elu_env_choice(const char *name);

/* The value of `name`, or NULL when unset or empty. */
const char *elu_env_text(const char *name);

/* Appends to `report` a clause for each libelu variable whose value is
 * invalid, saying what it is and what holds instead; true if any. */
bool elu_env_check(char *report, size_t size);

/* Appends one printf-style clause to `report`, after "; " unless it is the
 * first: how every report of what a context falls back on is joined. */
void elu_report(char *report, size_t size, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

#endif
