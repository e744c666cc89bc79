#include "pool.h"

#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <unistd.h>

struct elu_pool {
    pthread_mutex_t busy; /* held by the caller whose job runs */
    pthread_mutex_t lock; /* guards the job below */
    pthread_cond_t work, done;
    void (*fn)(void *arg, int part);
    void *arg;
    int parts, next, unfinished;
    bool quit;
    pid_t owner; /* the process whose threads these are */
    int count;
    pthread_t threads[];
};

/* Take parts until none is left; the caller holds pool->lock. */
static void work_through(struct elu_pool *pool)
{
    while (pool->next < pool->parts) {
        const int part = pool->next++;
        pthread_mutex_unlock(&pool->lock);
        pool->fn(pool->arg, part);
        pthread_mutex_lock(&pool->lock);
        if (--pool->unfinished == 0)
            pthread_cond_signal(&pool->done);
    }
}

static void *worker(void *arg)
{
    struct elu_pool *pool = arg;
    pthread_mutex_lock(&pool->lock);
    while (!pool->quit) {
        work_through(pool);
        pthread_cond_wait(&pool->work, &pool->lock);
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

void elu_pool_destroy(struct elu_pool *pool)
{
    if (!pool)
        return;
    if (pool->owner != getpid()) { /* a fork child: no threads, locks as forked */
        free(pool);
        return;
    }
    pthread_mutex_lock(&pool->lock);
    pool->quit = true;
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
    pool->unfinished = parts;
    pthread_cond_broadcast(&pool->work);
    work_through(pool); /* the caller works too */
    while (pool->unfinished > 0)
        pthread_cond_wait(&pool->done, &pool->lock);
    pool->parts = 0;
    pthread_mutex_unlock(&pool->lock);
    pthread_mutex_unlock(&pool->busy);
}
