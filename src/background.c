#include "background.h"

#include <pthread.h>
#include <stdlib.h>

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
     * process's first compile (the builder waits for a first call's):
     * handlers run in reverse order of registration, so this one then runs
     * before those NVRTC registered while compiling. */
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
