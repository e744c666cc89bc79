/* The context's background threads and the end of the process.
 *
 * The builder builds, one at a time, the modules that modules.c queues:
 * each dtype's whole generic module, which takes over from the quick parts
 * that serve a dtype's first calls, and the specialized modules of
 * constants in steady use; ELU_PREWARM's thread sets up the named
 * specializations at creation. Both call into NVRTC and the driver; a process that ends while
 * one does, its context never destroyed, would tear both libraries down
 * under it (a crash at exit: docs/DESIGN.md, fork and exit). So each
 * piece of background work runs between elu_background_begin and
 * elu_background_end, and at exit the process waits for the piece in
 * flight, and starts no other. */
#include "builder.h"
#include "gpu_internal.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* Process-wide, set up once (pthread_once): the pieces of background work
 * in flight, and whether the process is exiting. */
static struct {
    pthread_mutex_t lock;
    pthread_cond_t idle; /* `busy` fell to 0 */
    unsigned busy;
    bool exiting;
} state = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 0, false};
static pthread_once_t once = PTHREAD_ONCE_INIT;

/* At exit (atexit handlers run before the libraries' destructors): wait
 * for the work in flight, at most one compile per background thread. */
static void at_exit(void)
{
    pthread_mutex_lock(&state.lock);
    state.exiting = true;
    while (state.busy)
        pthread_cond_wait(&state.idle, &state.lock);
    pthread_mutex_unlock(&state.lock);
}

/* A fork child has none of the parent's threads, so none of their work:
 * the lock is held across fork so that the child's copy is consistent. */
static void before_fork(void) { pthread_mutex_lock(&state.lock); }
static void after_fork_parent(void) { pthread_mutex_unlock(&state.lock); }
static void after_fork_child(void)
{
    state.busy = 0;
    pthread_mutex_unlock(&state.lock);
}

static void set_up(void)
{
    /* Registered at the first background work, which mostly follows the
     * process's first NVRTC compile (a first call's, or the builder's
     * warm-up: builder_main): handlers run in reverse order of
     * registration, so this one then runs before those NVRTC registered
     * while compiling. */
    atexit(at_exit);
    pthread_atfork(before_fork, after_fork_parent, after_fork_child);
}

bool elu_background_begin(void)
{
    pthread_once(&once, set_up);
    pthread_mutex_lock(&state.lock);
    const bool go = !state.exiting;
    state.busy += go;
    pthread_mutex_unlock(&state.lock);
    return go;
}

void elu_background_end(void)
{
    pthread_mutex_lock(&state.lock);
    if (--state.busy == 0)
        pthread_cond_broadcast(&state.idle);
    pthread_mutex_unlock(&state.lock);
}

static void *builder_main(void *arg);

bool elu_builder_queue(elu_ctx *ctx, struct module *m)
{
    struct elu_gpu *g = ctx->gpu;
    if (!g->building) {
        const int e = pthread_create(&g->builder, NULL, builder_main, ctx);
        if (e != 0) {
            elu_fail(ctx, ELU_OK, "cannot start the thread that builds kernels in the "
                     "background (%s): the generic kernels serve", strerror(e));
            return false;
        }
        g->building = true;
    }
    g->queue[g->queued++] = m;
    pthread_cond_signal(&g->wake);
    return true;
}

/* The end of a call's hold on the builder (see elu_modules_whole_generic),
 * once the builder has warmed NVRTC up (see builder_main), or after
 * WARM_UP_WAIT_S, once: a call from a shared library's constructor run by
 * dlopen holds the loader's lock, which the warm-up's loading of NVRTC
 * waits for. Such a call goes on without the exit order the warm-up
 * gives, and later ones do not wait (docs/DESIGN.md, fork and exit). */
#define WARM_UP_WAIT_S 10
void elu_builder_let_go(struct elu_gpu *g)
{
    struct timespec until;
    clock_gettime(CLOCK_REALTIME, &until); /* the condition variable's clock */
    until.tv_sec += WARM_UP_WAIT_S;
    pthread_mutex_lock(&g->lock);
    int waited = 0;
    while (!g->warmed_up && waited != ETIMEDOUT)
        waited = pthread_cond_timedwait(&g->settled, &g->lock, &until);
    g->warmed_up = true;
    if (--g->held == 0)
        pthread_cond_signal(&g->wake);
    pthread_mutex_unlock(&g->lock);
}

static void *builder_main(void *arg)
{
    elu_ctx *ctx = arg;
    struct elu_gpu *g = ctx->gpu;
    /* NVRTC's first compile in the process registers exit handlers, which
     * must come before at_exit (registered at the first background work)
     * for at_exit to run first. Where the quick part a first call waits
     * for is built in as PTX, NVRTC has not compiled yet: it does so here,
     * while the call that queued this work waits (elu_builder_let_go), so
     * that a program cannot return from main during it. A builder started
     * by constants in steady use (elu_modules_note_call) has no call
     * waiting: a process that exits during its warm-up is not waited for
     * (docs/DESIGN.md, fork and exit). */
    elu_jit_warm_up(ctx, g->sm);
    pthread_mutex_lock(&g->lock);
    g->warmed_up = true;
    pthread_cond_broadcast(&g->settled);
    while (!atomic_load(&g->closing)) {
        if (!g->queued || g->held) {
            pthread_cond_wait(&g->wake, &g->lock);
            continue;
        }
        struct module *m = g->queue[0];
        g->queued--;
        memmove(g->queue, g->queue + 1, g->queued * sizeof *g->queue);
        pthread_mutex_unlock(&g->lock);
        if (!elu_background_begin())
            return NULL; /* the process is exiting: the generic kernels serve */
        elu_modules_build_queued(ctx, m); /* without the lock, so that calls go on */
        elu_background_end();
        pthread_mutex_lock(&g->lock);
    }
    pthread_mutex_unlock(&g->lock);
    return NULL;
}

/* ELU_PREWARM's thread: each named specialization set up as a first run
 * would (its module from the disk cache, or else served by the generic
 * kernels: the whole generic module from the disk cache, or else its quick
 * parts loaded), and its module queued for the builder at once: a first
 * run then finds something to launch. */
static void *prewarm_main(void *arg)
{
    elu_ctx *ctx = arg;
    struct elu_gpu *g = ctx->gpu;
    const uint64_t compiles = atomic_load(&ctx->stats.compiles);
    for (size_t i = 0; i < g->prewarm_count && !atomic_load(&g->closing); i++) {
        const struct elu_coef *c = &g->prewarm_coefs[i];
        struct module *m = NULL;
        const struct module *part;
        bool held = false;
        if (!elu_background_begin())
            return NULL;
        if (elu_modules_entry_for(ctx, c, false, &m) == ELU_OK && (!m || !elu_modules_ready(m)) &&
            !elu_modules_whole_generic(ctx, c->dtype, &held) &&
            elu_modules_generic_part(ctx, c->dtype, elu_modules_forward_part(c), &part) == ELU_OK)
            elu_modules_generic_part(ctx, c->dtype, ELU_PART_REST, &part);
        if (m && !elu_modules_ready(m))
            elu_modules_note_call(ctx, m, true);
        if (held)
            elu_builder_let_go(g);
        elu_background_end();
    }
    if (atomic_load(&ctx->stats.compiles) == compiles && !atomic_load(&g->closing) &&
        elu_background_begin()) {
        elu_jit_warm_up(ctx, g->sm);
        elu_background_end();
    }
    return NULL;
}

elu_status elu_gpu_prewarm(elu_ctx *ctx, struct elu_coef *c, size_t count)
{
    struct elu_gpu *g = ctx->gpu;
    g->prewarm_coefs = c;
    g->prewarm_count = count;
    const int e = pthread_create(&g->prewarm, NULL, prewarm_main, ctx);
    if (e != 0)
        return elu_fail(ctx, ELU_ERR_OUT_OF_MEMORY, "cannot start the prewarm thread: %s",
                        strerror(e));
    g->prewarming = true;
    return ELU_OK;
}
