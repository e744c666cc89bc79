/* A JSON string writer, apart from elu-cache.c: it knows bytes and UTF-8,
 * nothing of the cache. */
#include "elu-cache-json.h"

#include <stdbool.h>

/* How many bytes of the UTF-8 sequence at s (left bytes there) are valid:
 * all of it (*whole set), or its longest valid beginning, at least 1
 * (*whole clear). The second byte's range depends on the lead byte, which
 * keeps out overlong forms, surrogates and code points past U+10FFFF
 * (Unicode's table 3-7). */
static size_t utf8_valid_prefix(const unsigned char *s, size_t left, bool *whole)
{
    const unsigned char lead = s[0];
    size_t length = 0;
    unsigned char low = 0x80, high = 0xbf; /* of the second byte */
    if (lead < 0x80) {
        length = 1;
    } else if (lead >= 0xc2 && lead <= 0xdf) {
        length = 2;
    } else if (lead >= 0xe0 && lead <= 0xef) {
        length = 3;
        low = lead == 0xe0 ? 0xa0 : 0x80;
        high = lead == 0xed ? 0x9f : 0xbf;
    } else if (lead >= 0xf0 && lead <= 0xf4) {
        length = 4;
        low = lead == 0xf0 ? 0x90 : 0x80;
        high = lead == 0xf4 ? 0x8f : 0xbf;
    }
    size_t valid = length ? 1 : 0;
    for (; valid < length && valid < left && s[valid] >= low && s[valid] <= high; valid++) {
        low = 0x80;
        high = 0xbf;
    }
    *whole = length > 0 && valid == length;
    return valid ? valid : 1;
}

/* The escape of an ASCII byte that needs one, else NULL. */
static const char *escape_of(unsigned char c, char *buf, size_t size)
{
    switch (c) {
    case '"':
        return "\\\"";
    case '\\':
        return "\\\\";
    case '\b':
        return "\\b";
    case '\f':
        return "\\f";
    case '\n':
        return "\\n";
    case '\r':
        return "\\r";
    case '\t':
        return "\\t";
    default:
        if (c >= 0x20 && c != 0x7f)
            return NULL;
        snprintf(buf, size, "\\u%04x", c);
        return buf;
    }
}

void json_string(FILE *out, const char *s, size_t len)
{
    const unsigned char *bytes = (const unsigned char *)s;
    putc('"', out);
    for (size_t i = 0; i < len;) {
        bool whole;
        const size_t n = utf8_valid_prefix(bytes + i, len - i, &whole);
        char buf[8];
        const char *escape = whole && n == 1 ? escape_of(bytes[i], buf, sizeof buf) : NULL;
        if (!whole)
            fputs("\\ufffd", out);
        else if (escape)
            fputs(escape, out);
        else
            fwrite(bytes + i, 1, n, out);
        i += n;
    }
    putc('"', out);
}
