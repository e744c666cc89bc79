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

/* An entry of the module table: a module (specialized, or one part of a
 * dtype's generic module), or a specialization that the generic kernels
 * serve (`backed`) until the background thread has built its module:
 * `claimed` (queued, or loaded by elu_prepare(), within the cap on
 * specialized modules) once `calls` reach ELU_HOT_CALLS, or `refused` past
 * that cap. */
struct module {
    struct elu_spec spec;
    bool backed;
    atomic_uint calls;
    atomic_bool claimed, refused;
    elu_cu_module handle; /* NULL when backed */
    elu_cu_function fn[KERNELS]; /* NULL for those the module lacks */
    /* A specialized half-type module's elu_forward_table: the correctly
     * rounded forward of each of the 65536 inputs (else 0). See
     * forward_table. */
    elu_cu_deviceptr table;
    /* Blocks of 128 threads of each kernel that the GPU holds at once (0:
     * unknown): see balanced_blocks. */
    unsigned wave[KERNELS];
    union elu_coef_arg coef; /* backed: its constants, for the generic kernels */
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
     * `published` (release); once published an entry never changes until
     * the context is destroyed, so lookups take no lock (acquire). */
    pthread_mutex_t lock;
    struct module *modules;
    atomic_size_t published;
    /* Against max_specializations, each written under lock: backed
     * entries, and specializations with modules of their own (loaded, or
     * claimed for the builder). Two caps, so that constants used once each
     * (a sweep) leave room to specialize those in steady use. */
    atomic_size_t tracked, specialized;
    size_t capacity;
    /* The background thread (`builder`, once `building`) that builds, in
     * order, the modules queued under `lock`: each dtype's whole generic
     * module, offered once (`generic_offered`) at the first call that
     * needs generic kernels, and the specialized modules of hot backed
     * specializations. `wake` tells it of a new one, of `held` falling to
     * 0, or of `closing`. It starts no build while `held`: calls that
     * queued their dtype's generic module and have yet to load the quick
     * parts serving them meanwhile, whose compile a concurrent one (on
     * every core, with split compilation) would slow. */
    pthread_cond_t wake;
    bool building;
    pthread_t builder;
    struct elu_spec *queue;
    size_t queued;
    unsigned held;
    atomic_bool generic_offered[4];
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

/* The entry for c: its module when `built` (compiled now if need be),
 * else whatever serves it first (its module from the disk cache, or a
 * backed entry the generic kernels serve); NULL beyond the context's cap
 * on specializations, where the generic kernels serve with the call's
 * constants. */
elu_status elu_modules_entry_for(elu_ctx *ctx, const struct elu_coef *c, bool built,
                                 struct module **out);
/* One more call served for m, a backed entry: the builder compiles its
 * module at the ELU_HOT_CALLS-th; at once when `now` (ELU_PREWARM). */
void elu_modules_note_call(elu_ctx *ctx, struct module *m, bool now);
/* The dtype's whole generic module: published, or loaded from the disk
 * cache now; else NULL, the module queued for the builder at the first
 * such call, which then holds the builder (*held; elu_builder_let_go once
 * it has the quick parts that serve meanwhile). */
const struct module *elu_modules_whole_generic(elu_ctx *ctx, elu_dtype dtype, bool *held);
/* The dtype's quick generic part `part`, loaded (compiled if need be) on
 * first use; and the forward part that serves c. */
elu_status elu_modules_generic_part(elu_ctx *ctx, elu_dtype dtype, enum elu_part part,
                                    const struct module **out);
enum elu_part elu_modules_forward_part(const struct elu_coef *c);
/* The generic kernels' constants argument for c. */
union elu_coef_arg elu_modules_coef(const struct elu_coef *c);
/* spec's binary in the form *kind asks for, set to the form made (no lock
 * needed). */
elu_status elu_modules_obtain(elu_ctx *ctx, const struct elu_spec *spec,
                              enum elu_binary_kind *kind, struct elu_binary *bin);
/* The builder's end of a build: bin (freed here), obtained without the
 * lock, loaded and measured (ELU_AUTOTUNE) without it too, then published
 * under it (a specialized module in place of spec's backed entry), unless
 * elu_prepare() or the context's end came first. */
void elu_modules_finish_build(elu_ctx *ctx, const struct elu_spec *spec, struct elu_binary *bin);
/* The builder's end of a build that failed: the generic kernels go on
 * serving spec, which keeps no place under the cap and is not tried
 * again. */
void elu_modules_build_failed(elu_ctx *ctx, const struct elu_spec *spec);

/* builder.c */

/* Have the builder build spec's module (under g->lock): false if its
 * thread cannot start, and what serves meanwhile goes on serving. */
bool elu_builder_queue(elu_ctx *ctx, const struct elu_spec *spec);
/* The end of a call's hold on the builder (see elu_modules_entry_for). */
void elu_builder_let_go(struct elu_gpu *g);

/* launch.c */

/* One launch of a kernel of module `code` (specialized or generic), the
 * primary context current; `coef` and `table` are the generic kernels'
 * constants and forward table. The shape is the contiguous kernels' (the
 * strided kernel takes one element per thread, and `kind`). */
elu_cu_result elu_launch_shaped(const struct elu_gpu *g, const struct module *code,
                                const union elu_coef_arg *coef, elu_cu_deviceptr table,
                                enum elu_kernel kernel, int kind, struct elu_shape shape,
                                const void *a, const void *b, void *out, size_t n,
                                const struct elu_layout *layout, elu_stream stream);

#endif
