/* What the CUDA path's files share (gpu.h is what the rest of the library
 * sees): the context's GPU state and its module table, and the functions
 * one file offers the others.
 *
 *   device.c   the device: driver, primary context, attributes, fork
 *   modules.c  the module table: each specialization's kernels, loaded
 *              from the disk cache or compiled, or the generic kernels
 *              that serve it meanwhile; ELU_AUTOTUNE's shapes
 *   builder.c  the background threads (the compile queue, ELU_PREWARM)
 *              and the end of the process
 *   launch.c   launch geometry, the kernels' arguments, the launch itself */
#ifndef ELU_GPU_INTERNAL_H
#define ELU_GPU_INTERNAL_H

#include "cuda_loader.h"
#include "gpu.h"
#include "jit.h"
#include "tune.h"

#define KERNELS ELU_FN_COUNT
#define STRIDED ELU_FN_STRIDED
#define COMPUTED ELU_FN_FORWARD_COMPUTED
#define CONTIGUOUS ELU_FN_FORWARD_CONTIGUOUS

/* Each entry of the module table is one specialization or one generic
 * module, in one of these states, changed only under the table's lock:
 *
 *   SERVED    the generic kernels serve it, with its constants (`coef`),
 *             counting its `calls`; at the ELU_HOT_CALLS-th, within the cap
 *             on modules of their own, it is QUEUED, else REFUSED
 *   QUEUED    claimed (a place under that cap), waiting for the builder;
 *             elu_prepare() may take it over
 *   BUILDING  claimed, being built by one thread, without the lock
 *   READY     its module loaded: `built` is set, and never changes again
 *   REFUSED   past the cap: the generic kernels serve it for good
 *   FAILED    its build failed: the generic kernels serve it (elu_prepare()
 *             tries again; a generic module is tried again when needed)
 *
 * A generic module is never SERVED: a quick part is BUILDING until READY,
 * the whole module QUEUED (or BUILDING, from the disk cache) until READY. */
enum module_state {
    MODULE_SERVED,
    MODULE_QUEUED,
    MODULE_BUILDING,
    MODULE_READY,
    MODULE_REFUSED,
    MODULE_FAILED,
};

/* A loaded module's kernels, written by the thread that builds it while
 * BUILDING, read by others only once READY (acquire). */
struct module_code {
    elu_cu_module handle;
    elu_cu_function fn[KERNELS]; /* NULL for those the module lacks */
    /* A specialized half-type module's elu_forward_table: the correctly
     * rounded forward of each of the 65536 inputs (else 0). */
    elu_cu_deviceptr table;
    /* Blocks of 128 threads of each kernel that the GPU holds at once (0:
     * unknown): see balanced_blocks. */
    unsigned wave[KERNELS];
    /* Whether its kernels wait for those before them (compiled for sm_90
     * or later, kernels_src/elu.cu's after_previous_kernels), as launches
     * with programmatic dependent launch need: a PTX for an older arch,
     * which the driver compiles for a newer GPU, has them not wait. */
    bool waits;
    /* A quick forward part's shape: one pack per thread rather than one
     * element (elu_quick_packs). */
    bool quick_packs;
};

struct module {
    struct elu_spec spec;
    union elu_coef_arg coef; /* its constants, for the generic kernels */
    atomic_int state;        /* enum module_state */
    atomic_uint calls;       /* served while SERVED */
    struct module_code built;
};

struct elu_gpu {
    const struct elu_cuda_api *cu;
    elu_cu_device device;
    elu_cu_context primary;
    int ordinal, sm, multiprocessors, driver_version;
    unsigned resident_threads; /* multiprocessors times the threads each holds */
    size_t l2_bytes; /* the L2 cache's size (0: unknown) */
    bool pdl; /* launches with programmatic dependent launch (see launch) */
    char name[256];
    /* Launch shapes per dtype: the heuristic's from the start; with
     * ELU_AUTOTUNE, replaced under `lock` when the dtype's first specialized
     * module loads (`tuned`), before that module is published. The generic
     * kernels keep the heuristic's (`rule`, the same for every dtype), as
     * they may run meanwhile. */
    struct elu_tuning tuning[4], rule;
    bool tuned[4];
    /* The module table. Entries are appended under `lock` and published by
     * `published` (release); an entry's state changes under `lock`, and
     * `settled` tells of each end of a build. Lookups take no lock
     * (acquire). */
    pthread_mutex_t lock;
    pthread_cond_t settled;
    struct module *modules;
    atomic_size_t published;
    /* Against max_specializations, each written under lock: entries of
     * specializations, and those claimed (QUEUED, BUILDING or READY). Two
     * caps, so that constants used once each (a sweep) leave room to
     * specialize those in steady use. */
    atomic_size_t tracked, specialized;
    size_t capacity;
    /* The background thread (`builder`, once `building`) that builds, in
     * order, the QUEUED entries in `queue` (each queued once, and passed
     * over if no longer QUEUED): each dtype's whole generic module, queued
     * at the first call that needs generic kernels, and the specialized
     * modules of hot specializations. `wake` tells it of a new one, of
     * `held` falling to 0, or of `closing`. It starts no build while
     * `held`: calls that queued their dtype's generic module and have yet
     * to load the quick parts serving them meanwhile, whose compile a
     * concurrent one (on every core, with split compilation) would slow;
     * those calls then wait for `warmed_up` (elu_builder_let_go). */
    pthread_cond_t wake;
    bool building;
    pthread_t builder;
    struct module **queue;
    size_t queued;
    unsigned held;
    /* The builder has warmed NVRTC up, or a call waited for that in vain
     * (elu_builder_let_go): no call waits for it any more. */
    bool warmed_up;
    /* ELU_PREWARM's thread, while `prewarming`; both threads stop early
     * once `closing` is set. */
    bool prewarming;
    atomic_bool closing;
    pthread_t prewarm;
    struct elu_coef *prewarm_coefs;
    size_t prewarm_count;
};

/* device.c */

/* status (ELU_ERR_OUT_OF_MEMORY where r says so) with "what: r's text" as
 * ctx's last error. */
elu_status elu_gpu_fail_cu(elu_ctx *ctx, elu_status status, const char *what, elu_cu_result r);
/* Make the primary context current on this thread if it is not; returns
 * whether it was pushed (and must be popped by elu_gpu_leave). */
bool elu_gpu_enter(const struct elu_gpu *g);
void elu_gpu_leave(const struct elu_gpu *g, bool pushed);
/* Every path into the driver starts here: after a fork, none may. */
elu_status elu_gpu_check_not_forked(elu_ctx *ctx);

/* modules.c */

/* The entry for c: READY when `built` (compiled now if need be), else
 * whatever serves it first (READY from the disk cache, else SERVED); NULL
 * beyond the context's cap on specializations, where the generic kernels
 * serve with the call's constants. */
elu_status elu_modules_entry_for(elu_ctx *ctx, const struct elu_coef *c, bool built,
                                 struct module **out);
/* Whether m's own kernels are loaded (acquire: then m->built may be read). */
bool elu_modules_ready(const struct module *m);
/* One more call served for m by the generic kernels: the builder compiles
 * its module at the ELU_HOT_CALLS-th; at once when `now` (ELU_PREWARM). */
void elu_modules_note_call(elu_ctx *ctx, struct module *m, bool now);
/* The dtype's whole generic module: READY, or loaded from the disk cache
 * now; else NULL, the module queued for the builder at the first such
 * call, which then holds the builder (*held; elu_builder_let_go once it
 * has the quick parts that serve meanwhile). */
const struct module *elu_modules_whole_generic(elu_ctx *ctx, elu_dtype dtype, bool *held);
/* The dtype's generic part `part` (a quick part, or ELU_PART_ALL), loaded
 * (compiled if need be) on first use; and the forward part that serves c. */
elu_status elu_modules_generic_part(elu_ctx *ctx, elu_dtype dtype, enum elu_part part,
                                    const struct module **out);
enum elu_part elu_modules_forward_part(const struct elu_coef *c);
/* The generic kernels' constants argument for c. */
union elu_coef_arg elu_modules_coef(const struct elu_coef *c);
/* The builder's build of m, queued (elu_builder_queue), unless m is no
 * longer QUEUED (elu_prepare() took it over). Takes g->lock itself. */
void elu_modules_build_queued(elu_ctx *ctx, struct module *m);

/* builder.c */

/* Have the builder build m, QUEUED, under g->lock: false if its thread
 * cannot start, and what serves meanwhile goes on serving. */
bool elu_builder_queue(elu_ctx *ctx, struct module *m);
/* The end of a call's hold on the builder (see elu_modules_whole_generic). */
void elu_builder_let_go(struct elu_gpu *g);

/* launch.c */

/* One launch of a kernel of m's module (specialized or generic, READY or
 * being built by this thread), the primary context current; `coef` and
 * `table` are the generic kernels' constants and forward table. The shape is the contiguous kernels' (the
 * strided kernel takes one element per thread, and `kind`). */
elu_cu_result elu_launch_shaped(const struct elu_gpu *g, const struct module *m,
                                const union elu_coef_arg *coef, elu_cu_deviceptr table,
                                enum elu_kernel kernel, int kind, struct elu_shape shape,
                                const void *a, const void *b, void *out, size_t n,
                                const struct elu_layout *layout, elu_stream stream);

#endif
