/* A context's persistent CPU workers: created once, woken per job. */
#ifndef ELU_POOL_H
#define ELU_POOL_H

#include "elu.h"

struct elu_pool;

/* Workers for a pool of `threads` (the caller of elu_pool_run is one of
 * them, so threads - 1 are started). NULL when threads < 2 or on failure:
 * elu_pool_run then runs everything on the calling thread. */
struct elu_pool *elu_pool_create(int threads);

/* A pool that starts no thread and hands each job to the application's
 * `parallel` (elu_options.cpu_parallel), as parts for `threads`; in a fork
 * child, whose copy of that pool may have no threads, the caller runs
 * them. */
struct elu_pool *elu_pool_create_external(int threads, elu_parallel_fn parallel, void *user);
void elu_pool_destroy(struct elu_pool *pool);

/* The number of threads a job may use: workers + the caller. */
int elu_pool_threads(const struct elu_pool *pool);

/* fn(arg, part) for every part in [0, parts), and return when all are done.
 * The caller runs parts too. When the pool is busy with another caller's
 * job, or in a fork child (where its threads do not exist), every part runs
 * on the calling thread instead: never a wait for the pool. */
void elu_pool_run(struct elu_pool *pool, void (*fn)(void *arg, int part), void *arg,
                  int parts);

#endif
