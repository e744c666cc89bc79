/* elu-cache's JSON output: strings of any bytes, written as valid JSON. */
#ifndef ELU_CACHE_JSON_H
#define ELU_CACHE_JSON_H

#include <stddef.h>
#include <stdio.h>

/* The len bytes at s (NUL among them) as one JSON string on out: valid
 * UTF-8 as it is, but for the quote, the backslash, the control characters
 * and DEL, escaped; every maximal run of bytes that cannot begin valid
 * UTF-8 (Unicode's "maximal subpart" rule, as Python's "replace" error
 * handler) as one U+FFFD, the replacement character. */
void json_string(FILE *out, const char *s, size_t len);

#endif
