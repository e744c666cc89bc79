#include "env.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

enum kind { FLAG, NUMBER, CHOICE };

/* A variable that can be invalid. The others (ELU_CACHE_DIR,
 * ELU_NVRTC_LIBRARY, ELU_CUDA_LIBRARY) are paths or names, any text. */
struct variable {
    const char *name;
    enum kind kind;
    uint64_t fallback, min, max; /* NUMBER */
    const char *const *words;    /* CHOICE: NULL-terminated */
    const char *otherwise;       /* CHOICE: what holds without a word */
};

static const char *const CPU_ISAS[] = {"avx512", "avx2", "baseline", NULL};

static const struct variable VARIABLES[] = {
    {.name = "ELU_CACHE_DISABLE", .kind = FLAG},
    {.name = "ELU_CACHE_SHARED", .kind = FLAG},
    {.name = "ELU_CACHE_MAX_BYTES", .kind = NUMBER, .fallback = ELU_CACHE_DEFAULT_MAX_BYTES,
     .min = 1, .max = UINT64_MAX},
    {.name = "ELU_CACHE_LOCK_TIMEOUT_MS", .kind = NUMBER, .fallback = ELU_CACHE_LOCK_TIMEOUT_MS,
     .min = 0, .max = ELU_CACHE_MAX_LOCK_TIMEOUT_MS},
    {.name = "ELU_DEBUG", .kind = FLAG},
    {.name = "ELU_CPU_ISA", .kind = CHOICE, .words = CPU_ISAS,
     .otherwise = "the best the processor has"},
    {.name = "ELU_PREWARM", .kind = FLAG},
    {.name = "ELU_AUTOTUNE", .kind = FLAG},
    {.name = "ELU_NO_PDL", .kind = FLAG},
};
#define VARIABLE_COUNT (sizeof VARIABLES / sizeof *VARIABLES)

/* The entry of `name`. libelu asks for no name outside the table: one
 * would be a mistake in libelu, which the first test to read it meets. */
static const struct variable *find(const char *name)
{
    for (size_t i = 0; i < VARIABLE_COUNT; i++)
        if (strcmp(VARIABLES[i].name, name) == 0)
            return &VARIABLES[i];
    abort();
}

static bool parse_flag(const char *value, bool *on)
{
    static const char *const words[][2] = {{"0", "1"}, {"false", "true"}, {"no", "yes"},
                                           {"off", "on"}};
    for (size_t i = 0; i < sizeof words / sizeof *words; i++)
        for (int v = 0; v < 2; v++)
            if (strcasecmp(value, words[i][v]) == 0) {
                *on = v;
                return true;
            }
    return false;
}

/* Digits only, the whole string, without overflow, within [min, max]. */
static bool parse_number(const char *value, uint64_t min, uint64_t max, uint64_t *out)
{
    uint64_t v = 0;
    const char *p = value;
    for (; *p >= '0' && *p <= '9'; p++) {
        const unsigned digit = (unsigned)(*p - '0');
        if (v > (UINT64_MAX - digit) / 10)
            return false;
        v = 10 * v + digit;
    }
    if (p == value || *p != '\0' || v < min || v > max)
        return false;
    *out = v;
    return true;
}

static const char *parse_choice(const char *value, const char *const *words)
{
    for (; *words; words++)
        if (strcasecmp(value, *words) == 0)
            return *words;
    return NULL;
}

const char *elu_env_text(const char *name)
{
    const char *value = getenv(name);
    return value && *value ? value : NULL;
}

bool elu_env_flag(const char *name)
{
    const char *value = elu_env_text(name);
    bool on = false;
    return value && parse_flag(value, &on) && on;
}

uint64_t elu_env_number(const char *name)
{
    const struct variable *v = find(name);
    const char *value = elu_env_text(name);
    uint64_t number;
    return value && parse_number(value, v->min, v->max, &number) ? number : v->fallback;
}

const char *elu_env_choice(const char *name)
{
    const char *value = elu_env_text(name);
    return value ? parse_choice(value, find(name)->words) : NULL;
}

static bool valid(const struct variable *v, const char *value)
{
    bool on;
    uint64_t number;
    switch (v->kind) {
    case FLAG: return parse_flag(value, &on);
    case NUMBER: return parse_number(value, v->min, v->max, &number);
    case CHOICE: return parse_choice(value, v->words) != NULL;
    }
    return false;
}

/* What v takes, and what holds instead of an invalid value. */
static void expected(const struct variable *v, char *buf, size_t size)
{
    switch (v->kind) {
    case FLAG:
        snprintf(buf, size, "not 1/0, true/false, yes/no or on/off (off holds)");
        return;
    case NUMBER:
        snprintf(buf, size, "not a whole number from %" PRIu64 " to %" PRIu64 " (%" PRIu64
                 " holds)", v->min, v->max, v->fallback);
        return;
    case CHOICE: {
        int len = snprintf(buf, size, "not one of");
        for (const char *const *w = v->words; *w && len < (int)size; w++)
            len += snprintf(buf + len, size - (size_t)len, "%s%s", w == v->words ? " " : ", ",
                            *w);
        if (len < (int)size)
            snprintf(buf + len, size - (size_t)len, ", in any case (%s holds)", v->otherwise);
        return;
    }
    }
}

bool elu_env_check(char *report, size_t size)
{
    bool any = false;
    for (size_t i = 0; i < VARIABLE_COUNT; i++) {
        const struct variable *v = &VARIABLES[i];
        const char *value = elu_env_text(v->name);
        if (!value || valid(v, value))
            continue;
        char why[160];
        expected(v, why, sizeof why);
        elu_report(report, size, "%s=\"%.64s\" is %s", v->name, value, why);
        any = true;
    }
    return any;
}

void elu_report(char *report, size_t size, const char *fmt, ...)
{
    size_t used = strlen(report);
    if (used > 0 && used + 2 < size) {
        memcpy(report + used, "; ", 3);
        used += 2;
    }
    if (used + 1 >= size)
        return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(report + used, size - used, fmt, ap);
    va_end(ap);
}
