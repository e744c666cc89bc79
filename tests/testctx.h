/* A context for a test, made through the public API alone, so that
 * test_api (which links libelu's public API and nothing else) shares it
 * with the programs that link testutil. Header only for that reason. */
#ifndef ELU_TESTCTX_H
#define ELU_TESTCTX_H

#include "elu.h"

#include <stdio.h>
#include <unistd.h>

/* What a test's context has other than elu_options_default's options. */
struct tu_ctx_options {
    elu_backend backend;
    const char *cache_dir; /* NULL: the default place; for none, ELU_NO_DISK_CACHE */
    int threads;           /* elu_options.cpu_threads; 0: one per processor */
    uint32_t flags;
    int device;
    int max_specializations;
};

/* The context, or NULL where a CUDA context cannot be made here (no usable
 * GPU: the caller skips). Any other failure is a broken test or library:
 * it is printed and the process exits with 91, from a forked child too,
 * where a cmocka failure would go on to run the rest of the tests. */
static inline elu_ctx *tu_ctx_make(const struct tu_ctx_options *t)
{
    elu_options o;
    elu_options_default(&o);
    o.backend = t->backend;
    o.cache_dir = t->cache_dir;
    o.cpu_threads = t->threads;
    o.flags = t->flags;
    o.device = t->device;
    o.max_specializations = t->max_specializations;
    elu_ctx *ctx = NULL;
    const elu_status status = elu_ctx_create(&ctx, &o);
    if (status == ELU_OK || t->backend == ELU_BACKEND_CUDA)
        return ctx;
    fprintf(stderr, "tu_ctx: elu_ctx_create: %s\n", elu_status_str(status));
    _exit(91);
}

/* The options by name, the others left at their defaults, e.g.
 *   tu_ctx(.backend = ELU_BACKEND_CPU, .threads = 1, .flags = ELU_NO_DISK_CACHE) */
#define tu_ctx(...) tu_ctx_make(&(const struct tu_ctx_options){__VA_ARGS__})

#endif
