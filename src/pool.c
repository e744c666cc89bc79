#include "pool.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

/* How long a thread polls before it sleeps: a worker for the next job, the
 * caller for the workers' last parts. A sleeping thread takes a futex wake
 * and the scheduler's latency to run again, tens of microseconds that a
 * call of a few hundred pays per thread; a loop of calls from Python comes
 * back within a few. OpenMP's threads, PyTorch's among them, poll too. */
#define ELU_POOL_POLL_NS 50000

struct elu_pool {
    pthread_mutex_t busy; /* held by the caller whose job runs */
    pthread_mutex_t lock; /* guards the job below and the sleepers' counts */
    pthread_cond_t work, done;
    void (*fn)(void *arg, int part);
    void *arg;
    int parts, next;
    atomic_uint unfinished; /* parts not yet done: the caller polls it */
    atomic_uint jobs;      /* jobs started: the workers poll it */
    bool quit, caller_sleeps;
    int sleeping; /* workers waiting on `work` */
    pid_t owner;  /* the process whose threads these are */
    elu_parallel_fn external; /* the application's, which runs each job
                               * of the process that made the pool */
    void *user;
    int count; /* threads beside the caller: started, or the external's */
    pthread_t threads[];
};

static void relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    __asm__ volatile("yield");
#endif
}

static long long now_ns(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1000000000LL + t.tv_nsec;
}

/* Poll until *v differs from seen or the polling time is up. */
static void poll_while(atomic_uint *v, unsigned seen)
{
    const long long until = now_ns() + ELU_POOL_POLL_NS;
    while (atomic_load_explicit(v, memory_order_relaxed) == seen && now_ns() < until)
        relax();
}

/* Take parts until none is left; the caller holds pool->lock. */
static void work_through(struct elu_pool *pool)
{
    while (pool->next < pool->parts) {
        const int part = pool->next++;
        pthread_mutex_unlock(&pool->lock);
        pool->fn(pool->arg, part);
        pthread_mutex_lock(&pool->lock);
        if (atomic_fetch_sub(&pool->unfinished, 1) == 1 && pool->caller_sleeps)
            pthread_cond_signal(&pool->done);
    }
}

static void *worker(void *arg)
{
    struct elu_pool *pool = arg;
    pthread_mutex_lock(&pool->lock);
    while (!pool->quit) {
        work_through(pool);
        const unsigned seen = atomic_load(&pool->jobs);
        pthread_mutex_unlock(&pool->lock);
        poll_while(&pool->jobs, seen);
        pthread_mutex_lock(&pool->lock);
        while (atomic_load(&pool->jobs) == seen && !pool->quit) {
            pool->sleeping++;
            pthread_cond_wait(&pool->work, &pool->lock);
            pool->sleeping--;
        }
    }
    pthread_mutex_unlock(&pool->lock);
    return NULL;
}

struct elu_pool *elu_pool_create(int threads)
{
    if (threads < 2)
        return NULL;
    struct elu_pool *pool = calloc(1, sizeof *pool + (size_t)(threads - 1) * sizeof(pthread_t));
    if (!pool)
        return NULL;
    pthread_mutex_init(&pool->busy, NULL);
    pthread_mutex_init(&pool->lock, NULL);
    pthread_cond_init(&pool->work, NULL);
    pthread_cond_init(&pool->done, NULL);
    atomic_init(&pool->unfinished, 0);
    atomic_init(&pool->jobs, 0);
    pool->owner = getpid();
    while (pool->count < threads - 1 &&
           pthread_create(&pool->threads[pool->count], NULL, worker, pool) == 0)
        pool->count++;
    if (pool->count == 0) {
        elu_pool_destroy(pool);
        return NULL;
    }
    return pool;
}

struct elu_pool *elu_pool_create_external(int threads, elu_parallel_fn parallel, void *user)
{
    if (threads < 2)
        return NULL;
    struct elu_pool *pool = calloc(1, sizeof *pool);
    if (!pool)
        return NULL;
    pool->external = parallel;
    pool->user = user;
    pool->owner = getpid();
    pool->count = threads - 1;
    return pool;
}

void elu_pool_destroy(struct elu_pool *pool)
{
    if (!pool)
        return;
    /* The application's threads, or in a fork child none (locks as
     * forked): nothing to stop. */
    if (pool->external || pool->owner != getpid()) {
        free(pool);
        return;
    }
    pthread_mutex_lock(&pool->lock);
    pool->quit = true;
    atomic_fetch_add(&pool->jobs, 1); /* ends the polls */
    pthread_cond_broadcast(&pool->work);
    pthread_mutex_unlock(&pool->lock);
    for (int i = 0; i < pool->count; i++)
        pthread_join(pool->threads[i], NULL);
    pthread_cond_destroy(&pool->work);
    pthread_cond_destroy(&pool->done);
    pthread_mutex_destroy(&pool->lock);
    pthread_mutex_destroy(&pool->busy);
    free(pool);
}

int elu_pool_threads(const struct elu_pool *pool)
{
    return pool ? pool->count + 1 : 1;
}

void elu_pool_run(struct elu_pool *pool, void (*fn)(void *arg, int part), void *arg,
                  int parts)
{
    if (pool && pool->external && parts >= 2 && pool->owner == getpid()) {
        pool->external(pool->user, fn, arg, parts);
        return;
    }
    if (!pool || parts < 2 || pool->owner != getpid() ||
        pthread_mutex_trylock(&pool->busy) != 0) {
        for (int part = 0; part < parts; part++)
            fn(arg, part);
        return;
    }
    pthread_mutex_lock(&pool->lock);
    pool->fn = fn;
    pool->arg = arg;
    pool->parts = parts;
    pool->next = 0;
    atomic_store(&pool->unfinished, (unsigned)parts);
    atomic_fetch_add(&pool->jobs, 1);
    /* Workers still polling need no wake; of those asleep, as many as
     * there are parts beside the caller's. */
    for (int i = 0; i < parts - 1 && i < pool->sleeping; i++)
        pthread_cond_signal(&pool->work);
    work_through(pool); /* the caller works too */
    while (atomic_load(&pool->unfinished) > 0) {
        const unsigned left = atomic_load(&pool->unfinished);
        pthread_mutex_unlock(&pool->lock);
        poll_while(&pool->unfinished, left);
        pthread_mutex_lock(&pool->lock);
        if (atomic_load(&pool->unfinished) == left) {
            pool->caller_sleeps = true;
            pthread_cond_wait(&pool->done, &pool->lock);
            pool->caller_sleeps = false;
        }
    }
    pool->parts = 0;
    pthread_mutex_unlock(&pool->lock);
    pthread_mutex_unlock(&pool->busy);
}
