/* elu_ctx_last_error: the detail of a failure, kept per thread and per
 * context, so that threads sharing a context never see (or tear) each
 * other's messages. Each thread holds a few slots, keyed by context id and
 * reused round-robin; they are freed when the thread exits.
 *
 * Process-wide state: the thread key (created once) and the counter that
 * gives each context a unique id (an address can be reused; an id cannot). */
#include "internal.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

#define SLOTS 8 /* contexts per thread whose last message is kept */

struct slots {
    uint64_t id[SLOTS];
    char *message[SLOTS];
    unsigned next;
};

static pthread_key_t key;
static bool key_made;
static pthread_once_t key_once = PTHREAD_ONCE_INIT;
static atomic_uint_fast64_t last_id;

static void free_slots(void *p)
{
    struct slots *s = p;
    for (int i = 0; i < SLOTS; i++)
        free(s->message[i]);
    free(s);
}

static void make_key(void) { key_made = pthread_key_create(&key, free_slots) == 0; }

uint64_t elu_new_ctx_id(void)
{
    return atomic_fetch_add_explicit(&last_id, 1, memory_order_relaxed) + 1;
}

/* This thread's message buffer for context `id`: NULL if there is none and
 * `create` is false, or if memory runs out. */
static char *slot(uint64_t id, bool create)
{
    pthread_once(&key_once, make_key);
    if (!key_made)
        return NULL;
    struct slots *s = pthread_getspecific(key);
    if (!s) {
        if (!create || !(s = calloc(1, sizeof *s)))
            return NULL;
        if (pthread_setspecific(key, s) != 0) {
            free(s);
            return NULL;
        }
    }
    for (int i = 0; i < SLOTS; i++)
        if (s->id[i] == id && s->message[i])
            return s->message[i];
    if (!create)
        return NULL;
    const unsigned i = s->next++ % SLOTS;
    if (!s->message[i] && !(s->message[i] = malloc(ELU_ERRMSG_MAX)))
        return NULL;
    s->id[i] = id;
    return s->message[i];
}

elu_status elu_fail(elu_ctx *ctx, elu_status status, const char *fmt, ...)
{
    char *buf = ctx ? slot(ctx->id, true) : NULL;
    if (buf) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(buf, ELU_ERRMSG_MAX, fmt, ap);
        va_end(ap);
    }
    return status;
}

const char *elu_ctx_last_error(const elu_ctx *ctx)
{
    if (!ctx)
        return "NULL context";
    const char *message = slot(ctx->id, false);
    return message ? message : "";
}
