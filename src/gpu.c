#include "gpu.h"

#include "background.h"
#include "cpu.h"
#include "cuda_loader.h"
#include "jit.h"
#include "tune.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Indexed by enum elu_kernel; then the one strided kernel for all three,
 * which takes the enum value as its last argument; then, in specialized
 * modules only, the half types' forward for small inputs and the f32 and
 * f64 forward for large ones. */
static const char *const KERNEL_NAMES[] = {"elu_forward", "elu_backward_input",
                                           "elu_backward_output", "elu_strided",
                                           "elu_forward_computed", "elu_forward_contiguous"};
#define KERNELS (sizeof KERNEL_NAMES / sizeof *KERNEL_NAMES)
#define STRIDED 3
#define COMPUTED 4
#define CONTIGUOUS 5
/* elu_strided's kind beyond enum elu_kernel: the forward by PyTorch's
 * arithmetic (kernels_src/elu.cu's FWD_PYTORCH). */
#define FWD_PYTORCH 3

/* The kernels' elu_coef argument (kernels_src/elu.cu), in the dtype's
 * arithmetic: scale*alpha, scale, input_scale, then the exact forward's
 * x_min, x_max, w_hi and w_lo, and flags. Only the generic kernels read it. */
enum { COEF_EXACT = 1, COEF_UNIT_NIP = 2 };
union kernel_coef {
    struct {
        float v[7];
        int flags;
    } f; /* f32, f16, bf16 */
    struct {
        double v[7];
        int flags;
    } d; /* f64 */
};

/* An entry of the module table: a module (specialized, or one part of a
 * dtype's generic module), or a specialization that the generic kernels
 * serve (`backed`) until the background thread has built its module. */
struct module {
    struct elu_spec spec;
    bool backed;
    elu_cu_module handle; /* NULL when backed */
    elu_cu_function fn[KERNELS]; /* NULL for those the module lacks */
    /* The half types' forward results for each of the 65536 inputs (else
     * 0): a specialized module's elu_forward_table, or the memory a backed
     * entry allocated (and frees). See forward_table. */
    elu_cu_deviceptr table;
    /* Blocks of 128 threads of each kernel that the GPU holds at once (0:
     * unknown): see balanced_blocks. */
    unsigned wave[KERNELS];
    union kernel_coef coef; /* backed: its constants, for the generic kernels */
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
    atomic_size_t specialized; /* specializations with entries; written under lock */
    size_t capacity;
    /* The background thread (`builder`, once `building`) that builds the
     * modules of backed specializations, queued under `lock`; `wake` tells
     * it of a new one, of `held` falling to 0, or of `closing`. It starts
     * no build while `held`: calls that backed a specialization and have
     * yet to load the generic kernels serving it, whose compile a
     * concurrent one (on every core, with split compilation) would slow. */
    pthread_cond_t wake;
    bool building;
    pthread_t builder;
    struct elu_coef *queue;
    size_t queued;
    unsigned held;
    /* ELU_PREWARM's thread, while `prewarming`; both threads stop early
     * once `closing` is set. */
    bool prewarming;
    atomic_bool closing;
    pthread_t prewarm;
    struct elu_coef *prewarm_coefs;
    size_t prewarm_count;
};

static elu_status cu_fail(elu_ctx *ctx, elu_status status, const char *what,
                          elu_cu_result r)
{
    const struct elu_cuda_api *cu = ctx->gpu->cu;
    return elu_fail(ctx, r == ELU_CU_ERROR_OUT_OF_MEMORY ? ELU_ERR_OUT_OF_MEMORY
                                                         : status,
                    "%s: %s", what, elu_cu_result_text(cu, r).text);
}

static const char FORKED[] = "this process was forked from one that had "
                             "initialized CUDA, which does not survive fork: "
                             "use the CPU here (a CPU or AUTO context)";

/* The first driver that captures launches with programmatic dependent
 * launch into CUDA graphs (CUDA 12.3), which elu_run allows. */
#define PDL_DRIVER 12030

static elu_status query_device(elu_ctx *ctx, int ordinal)
{
    struct elu_gpu *g = ctx->gpu;
    const struct elu_cuda_api *cu = g->cu;
    if (elu_cuda_forked())
        return elu_fail(ctx, ELU_ERR_NO_DEVICE, "%s", FORKED);
    elu_cu_result r = elu_cuda_init();
    if (r != 0)
        return cu_fail(ctx, ELU_ERR_NO_DEVICE, "cuInit", r);
    int count = 0;
    if ((r = cu->DeviceGetCount(&count)) != 0)
        return cu_fail(ctx, ELU_ERR_NO_DEVICE, "cuDeviceGetCount", r);
    if (ordinal >= count)
        return elu_fail(ctx, ELU_ERR_NO_DEVICE,
                        "device %d requested, %d present", ordinal, count);
    int major = 0, minor = 0, per_sm = 0, l2 = 0;
    if ((r = cu->DeviceGet(&g->device, ordinal)) != 0 ||
        (r = cu->DeviceGetAttribute(&major, ELU_CU_DEVICE_ATTRIBUTE_CC_MAJOR,
                                    g->device)) != 0 ||
        (r = cu->DeviceGetAttribute(&minor, ELU_CU_DEVICE_ATTRIBUTE_CC_MINOR,
                                    g->device)) != 0 ||
        (r = cu->DeviceGetAttribute(&g->multiprocessors,
                                    ELU_CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT,
                                    g->device)) != 0 ||
        (r = cu->DeviceGetAttribute(&per_sm,
                                    ELU_CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_MULTIPROCESSOR,
                                    g->device)) != 0 ||
        (r = cu->DeviceGetAttribute(&l2, ELU_CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE,
                                    g->device)) != 0 ||
        (r = cu->DeviceGetName(g->name, sizeof g->name, g->device)) != 0 ||
        (r = cu->DriverGetVersion(&g->driver_version)) != 0)
        return cu_fail(ctx, ELU_ERR_NO_DEVICE, "querying the device", r);
    g->ordinal = ordinal;
    g->sm = 10 * major + minor;
    g->resident_threads = (unsigned)g->multiprocessors * (unsigned)per_sm;
    g->l2_bytes = l2 > 0 ? (size_t)l2 : 0;
    g->pdl = !ctx->no_pdl && cu->LaunchKernelEx && g->sm >= 90 &&
             g->driver_version >= PDL_DRIVER;
    elu_tune_heuristic(g->resident_threads, &g->rule);
    for (int d = 0; d < 4; d++)
        g->tuning[d] = g->rule;
    if ((r = cu->DevicePrimaryCtxRetain(&g->primary, g->device)) != 0)
        return cu_fail(ctx, ELU_ERR_CUDA, "cuDevicePrimaryCtxRetain", r);
    return ELU_OK;
}

elu_status elu_gpu_open(elu_ctx *ctx, int ordinal)
{
    const char *why;
    const struct elu_cuda_api *cu = elu_cuda_load(&why);
    if (!cu)
        return elu_fail(ctx, ELU_ERR_NO_DEVICE, "CUDA driver unavailable: %s",
                        why);
    /* Each specialization may have two entries (backed, then built), and
     * each dtype three generic parts. */
    struct elu_gpu *g = calloc(1, sizeof *g);
    const size_t capacity = 2 * (size_t)ctx->max_specializations + 12;
    struct module *modules = calloc(capacity, sizeof *modules);
    struct elu_coef *queue = calloc((size_t)ctx->max_specializations + 1, sizeof *queue);
    if (!g || !modules || !queue) {
        free(g);
        free(modules);
        free(queue);
        return elu_fail(ctx, ELU_ERR_OUT_OF_MEMORY, "out of memory");
    }
    g->cu = cu;
    g->modules = modules;
    g->capacity = capacity;
    g->queue = queue;
    pthread_mutex_init(&g->lock, NULL);
    pthread_cond_init(&g->wake, NULL);
    ctx->gpu = g;
    const elu_status status = query_device(ctx, ordinal);
    if (status != ELU_OK) {
        g->primary = NULL; /* nothing retained */
        elu_gpu_close(ctx);
    }
    return status;
}

/* Make the primary context current on this thread if it is not; returns
 * whether it was pushed (and must be popped). */
static bool enter(const struct elu_gpu *g)
{
    elu_cu_context current = NULL;
    g->cu->CtxGetCurrent(&current);
    if (current == g->primary)
        return false;
    return g->cu->CtxPushCurrent(g->primary) == 0;
}

static void leave(const struct elu_gpu *g, bool pushed)
{
    elu_cu_context popped;
    if (pushed)
        g->cu->CtxPopCurrent(&popped);
}

void elu_gpu_close(elu_ctx *ctx)
{
    struct elu_gpu *g = ctx->gpu;
    if (!g)
        return;
    /* After a fork the threads belong to the parent: nothing to wait for,
     * and the lock may have been held by one of them when it forked. */
    const bool forked = elu_cuda_forked();
    if (!forked)
        pthread_mutex_lock(&g->lock);
    atomic_store(&g->closing, true);
    if (!forked) {
        pthread_cond_signal(&g->wake);
        pthread_mutex_unlock(&g->lock);
    }
    if (g->prewarming && !forked)
        pthread_join(g->prewarm, NULL);
    if (g->building && !forked)
        pthread_join(g->builder, NULL);
    free(g->prewarm_coefs);
    if (g->primary && !forked) {
        const bool pushed = enter(g);
        const size_t count = atomic_load_explicit(&g->published, memory_order_acquire);
        for (size_t i = 0; i < count; i++) {
            const struct module *m = &g->modules[i];
            if (m->handle)
                g->cu->ModuleUnload(m->handle); /* and its table */
            if (m->backed && m->table)
                g->cu->MemFree(m->table);
        }
        leave(g, pushed);
        g->cu->DevicePrimaryCtxRelease(g->device);
    }
    if (!forked) { /* a copy of the parent's waiting thread would block these */
        pthread_cond_destroy(&g->wake);
        pthread_mutex_destroy(&g->lock);
    }
    free(g->queue);
    free(g->modules);
    free(g);
    ctx->gpu = NULL;
}

/* Every path into the driver starts here: after a fork, none may. */
static elu_status check_not_forked(elu_ctx *ctx)
{
    if (elu_cuda_forked())
        return elu_fail(ctx, ELU_ERR_CUDA, "%s; this context's CUDA state "
                        "belongs to the parent", FORKED);
    return ELU_OK;
}

elu_status elu_gpu_locate(elu_ctx *ctx, const void *p, enum elu_place *place)
{
    const struct elu_gpu *g = ctx->gpu;
    const elu_status status = check_not_forked(ctx);
    if (status != ELU_OK)
        return status;
    /* Unlike cuPointerGetAttribute, this call does not fail (or leave an
     * error behind) for ordinary host memory: it reports type 0. */
    int attrs[] = {ELU_CU_POINTER_ATTRIBUTE_MEMORY_TYPE,
                   ELU_CU_POINTER_ATTRIBUTE_IS_MANAGED,
                   ELU_CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL};
    unsigned type = 0, managed = 0; /* the driver may write one byte of it */
    int ordinal = -1;
    void *data[] = {&type, &managed, &ordinal};
    const elu_cu_result r = g->cu->PointerGetAttributes(
        3, attrs, data, (elu_cu_deviceptr)(uintptr_t)p);
    if (r != 0)
        return cu_fail(ctx, ELU_ERR_CUDA, "cuPointerGetAttributes", r);
    if (managed)
        *place = ELU_PLACE_DEVICE;
    else if (type != ELU_CU_MEMORYTYPE_DEVICE)
        *place = ELU_PLACE_HOST; /* pageable or page-locked host memory */
    else
        *place = ordinal == g->ordinal ? ELU_PLACE_DEVICE : ELU_PLACE_OTHER_DEVICE;
    return ELU_OK;
}

static bool same_spec(const struct elu_spec *a, const struct elu_spec *b)
{
    /* Bitwise: 0.0 and -0.0 compile to different kernels. */
    return a->generic == b->generic && a->part == b->part && a->coef.dtype == b->coef.dtype &&
           memcmp(&a->coef.neg, &b->coef.neg, sizeof(double)) == 0 &&
           memcmp(&a->coef.pos, &b->coef.pos, sizeof(double)) == 0 &&
           memcmp(&a->coef.nip, &b->coef.nip, sizeof(double)) == 0;
}

/* spec's entry: its module once built, else its backed entry, else NULL. */
static struct module *find(struct elu_gpu *g, const struct elu_spec *spec)
{
    const size_t count = atomic_load_explicit(&g->published, memory_order_acquire);
    struct module *backed = NULL;
    for (size_t i = 0; i < count; i++) {
        struct module *m = &g->modules[i];
        if (same_spec(&m->spec, spec)) {
            if (!m->backed)
                return m;
            backed = m;
        }
    }
    return backed;
}

/* The entry to fill next, under g->lock; NULL if the table is full (it is
 * sized so that it never is). */
static struct module *next_entry(elu_ctx *ctx)
{
    struct elu_gpu *g = ctx->gpu;
    const size_t count = atomic_load_explicit(&g->published, memory_order_relaxed);
    if (count < g->capacity)
        return &g->modules[count];
    elu_fail(ctx, ELU_ERR_OUT_OF_MEMORY, "the module table is full");
    return NULL;
}

/* Make m, filled at next_entry(), visible to lookups; under g->lock. A
 * specialization's first entry counts against max_specializations. */
static void publish(struct elu_gpu *g, const struct module *m)
{
    if (!m->spec.generic && !find(g, &m->spec))
        atomic_fetch_add_explicit(&g->specialized, 1, memory_order_relaxed);
    const size_t count = atomic_load_explicit(&g->published, memory_order_relaxed);
    atomic_store_explicit(&g->published, count + 1, memory_order_release);
}

/* The generic kernels' constants argument for c. */
static union kernel_coef kernel_coef_of(const struct elu_coef *c)
{
    struct elu_exact_consts k = {0};
    const bool exact = elu_exact_forward_consts(c, &k);
    const double v[7] = {c->neg, c->pos, c->nip, k.x_min, k.x_max, k.w_hi, k.w_lo};
    const int flags = exact ? COEF_EXACT | (c->nip == 1 ? COEF_UNIT_NIP : 0) : 0;
    union kernel_coef u;
    memset(&u, 0, sizeof u);
    for (int i = 0; i < 7; i++) {
        if (c->dtype == ELU_F64)
            u.d.v[i] = v[i];
        else
            u.f.v[i] = (float)v[i]; /* as jit.c's define_constant rounds them */
    }
    if (c->dtype == ELU_F64)
        u.d.flags = flags;
    else
        u.f.flags = flags;
    return u;
}

/* Copy a forward table to the device, done before any stream reads it:
 * from pageable memory, cuMemcpyHtoD may return before its DMA ends, and a
 * non-blocking stream does not wait for the legacy stream. */
static elu_cu_result upload_table(const struct elu_gpu *g, elu_cu_deviceptr to, const void *from)
{
    const elu_cu_result r = g->cu->MemcpyHtoD(to, from, ELU_JIT_TABLE_BYTES);
    return r != 0 ? r : g->cu->StreamSynchronize(NULL);
}

/* The half types' forward as a table, as on the CPU: a half type has
 * 65536 values, so the correctly rounded result for each, computed once
 * per specialization (elu_cpu_forward_table, half a millisecond, at compile
 * time: the binary carries it, see jit.h) and looked up by the kernel, is
 * both exact and cheaper than computing expm1 in float, which bounds the
 * computing kernel's speed (f16's positive inputs, a product, are computed:
 * kernels_src/elu.cu). y is the binary's table, NULL for other dtypes and
 * the generic modules: m->table stays 0 then. */
static elu_status forward_table(elu_ctx *ctx, struct module *m, const void *y)
{
    if (!y) /* the kernel reads a specialized half type's table unchecked */
        return elu_jit_carries_table(&m->spec)
                   ? elu_fail(ctx, ELU_ERR_CUDA, "the binary lacks its forward table")
                   : ELU_OK;
    const struct elu_gpu *g = ctx->gpu;
    elu_cu_deviceptr table = 0;
    size_t bytes = 0;
    elu_cu_result r = g->cu->ModuleGetGlobal(&table, &bytes, m->handle, "elu_forward_table");
    if (r == 0 && bytes != ELU_JIT_TABLE_BYTES)
        r = 1; /* CUDA_ERROR_INVALID_VALUE: not our kernel source */
    if (r == 0)
        r = upload_table(g, table, y);
    if (r != 0)
        return cu_fail(ctx, ELU_ERR_CUDA, "the forward table", r);
    m->table = table;
    return ELU_OK;
}

/* A backed entry for spec: its constants for the generic kernels and, for
 * a half type, its forward table in device memory of its own. The caller
 * holds g->lock, the primary context current. */
static elu_status back(elu_ctx *ctx, const struct elu_spec *spec, struct module *m)
{
    const struct elu_gpu *g = ctx->gpu;
    *m = (struct module){.spec = *spec, .backed = true, .coef = kernel_coef_of(&spec->coef)};
    if (!elu_jit_carries_table(spec))
        return ELU_OK;
    uint16_t *table = elu_cpu_forward_table(&spec->coef);
    if (!table)
        return elu_fail(ctx, ELU_ERR_OUT_OF_MEMORY, "out of memory");
    elu_cu_result r = g->cu->MemAlloc(&m->table, ELU_JIT_TABLE_BYTES);
    if (r == 0 && (r = upload_table(g, m->table, table)) != 0)
        g->cu->MemFree(m->table);
    free(table);
    if (r != 0)
        return cu_fail(ctx, ELU_ERR_CUDA, "the forward table", r);
    return ELU_OK;
}

/* Blocks to cover n elements in one pass of the grid, each thread taking
 * per_thread of them: on the H200, one pass beats a grid-stride loop over
 * a resident wave (f32 forward at 2^28: 0.99 of a copy's bandwidth against
 * 0.81 with 4 packs per thread; f32 backward 1.03 against 0.97), as the
 * block scheduler keeps every SM fed. */
static size_t blocks_for(size_t n, size_t per_thread, size_t threads)
{
    const size_t per_block = per_thread * threads;
    return n ? (n + per_block - 1) / per_block : 1;
}

/* The elements before the first whole pack of `bytes` (kernels_src/elu.cu's
 * map): up to the pack boundary where a, b and out are equally misaligned,
 * else all n, which then go one by one. Worked out here once rather than
 * in every thread: together with the forward's one pass without a loop,
 * on the H200, in CUDA graphs, as a share of PyTorch's speed, f64 at 2^21
 * elements went from 1.00 to 1.04, f32 at 2^22 from 1.09 to 1.12, f16 at
 * 2^20 from 1.08 to 1.18 and bf16 at 2^18 from 1.09 to 1.19. The half
 * types' table kernel lost at 2^22 (f16 1.34 -> 1.21, bf16 1.59 -> 1.53)
 * and gained nothing from 2^23 up. */
static unsigned long long pack_head(const void *a, const void *b, const void *out, size_t n,
                                    size_t size, size_t bytes)
{
    const uintptr_t mis = (uintptr_t)a % bytes;
    if ((uintptr_t)b % bytes != mis || (uintptr_t)out % bytes != mis || mis % size)
        return n;
    const size_t before = (bytes - mis) % bytes / size;
    return before < n ? before : n;
}

/* Whether a contiguous kernel has no loop over its packs
 * (kernels_src/elu.cu's ONE_PASS, or a loop that runs once: the half
 * types' forward table kernel), so that its grid must cover them in one
 * pass: every forward, and the half types' backward. */
static bool one_pass(enum elu_kernel kernel, size_t size)
{
    return kernel == ELU_KERNEL_FORWARD || size == 2;
}

/* The f32 and f64 backward's grid where one pass of it (blocks_for) takes
 * up to BALANCED_WAVES waves of the blocks the GPU holds at once (`wave`,
 * of 128 threads): as few blocks as need the same number of passes of the
 * kernel's grid-stride loop, so that no last wave runs part full while
 * the operands sit in L2. On the H200, in CUDA graphs, as a share of
 * PyTorch's speed: f64 at 2^21 elements 1.026 -> 1.093, f32 at 2^22
 * 0.993 -> 1.059. The forward lost with it (f64 at 2^21 0.975 -> 0.939
 * with its kernel at 38 registers, 0.990 -> 0.96 at 32 and up to 2 waves;
 * f32 at 2^23 0.991 -> 0.967), and the half types' backward gained more
 * from one pass without a loop (kernels_src/elu.cu's map). */
#define BALANCED_WAVES 4
static unsigned balanced_blocks(unsigned blocks, unsigned wave, unsigned threads)
{
    const size_t resident = (size_t)wave * 128 / threads;
    if (resident == 0 || blocks <= resident || blocks > BALANCED_WAVES * resident)
        return blocks;
    const size_t passes = (blocks + resident - 1) / resident;
    return (unsigned)((blocks + passes - 1) / passes);
}

/* Whether an f32 or f64 forward takes elu_forward_contiguous, whose blocks
 * take their packs in a row rather than a grid apart: where its operands,
 * read and written, outgrow L2 and stream from memory. In a row, each
 * block's loads fall within one run of memory, as PyTorch's kernels' do;
 * a grid apart, a thread's two packs lie half the input apart. On the
 * H200, in CUDA graphs, each kernel's own time (CUPTI) against PyTorch's
 * writing the same output, as a share of its speed: f32 at 2^24 elements
 * 0.995 -> 1.005, at 2^28 0.993 -> 1.000; f64 at 2^22 1.136 -> 1.149. In
 * L2 the grid apart does better (f32 at 2^21 1.193 against 1.164 in a
 * row, at 2^22 1.107 against 1.082; f64 at 2^21 1.044 against 1.035). */
static bool contiguous_packs(const struct elu_gpu *g, size_t operand_bytes)
{
    return g->l2_bytes && operand_bytes > g->l2_bytes / 2;
}

/* The most elements for which a half type's forward takes
 * elu_forward_computed (packs of 8 bytes) rather than the table's kernel.
 * Up to there the operands sit in L2, and the table's lookups, which start
 * each kernel out of L1, cost more than computing. On the H200, in CUDA
 * graphs, as a share of PyTorch's speed, computed and with the table: f16
 * at 2^20 elements 1.108 and 0.870, at 2^21 1.095 and 1.211; bf16, whose
 * lookups gather in fewer lines, at 2^19 1.061 and 1.028, at 2^20 1.137
 * and 1.184. */
static size_t computed_max(elu_dtype dtype)
{
    return dtype == ELU_F16 ? (size_t)1 << 20 : (size_t)1 << 19;
}

/* Launch fn on a grid of gx * gy blocks of `threads`; where g->pdl, with
 * programmatic dependent launch (ELU_NO_PDL): every kernel begins by
 * waiting for the kernels before it in the stream (kernels_src/elu.cu's
 * after_previous_kernels), so it may start early. On the H200, in CUDA
 * graphs of 20 calls, as a share of PyTorch's speed: f32 forward at 2^10
 * elements 1.45 -> 1.80, at 2^18 1.24 -> 1.62, at 2^24 1.006 -> 1.023;
 * f16 forward at 2^14 1.24 -> 1.67. */
static elu_cu_result launch(const struct elu_gpu *g, elu_cu_function fn, unsigned gx,
                            unsigned gy, unsigned threads, elu_stream stream, void **params)
{
    if (!g->pdl)
        return g->cu->LaunchKernel(fn, gx, gy, 1, threads, 1, 1, 0, stream, params, NULL);
    struct elu_cu_launch_attribute early = {
        .id = ELU_CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION, .value.value = 1};
    const struct elu_cu_launch_config config = {
        {gx, gy, 1}, {threads, 1, 1}, 0, stream, &early, 1};
    return g->cu->LaunchKernelEx(&config, fn, params, NULL);
}

/* A launch of the generic forward kernel, which has no loop: one thread
 * per element, in rows of ROW_BLOCKS blocks (blockIdx.y the row) so that
 * any n fits the grid's limits (2^31 - 1 blocks across, 65535 down): up to
 * 2^43 elements in blocks of 128 threads. Rows begin at 2^27 elements,
 * which the GPU tests reach. */
#define ROW_BLOCKS ((size_t)1 << 20)
#define MAX_ROWS 65535
static elu_cu_result launch_rows(const struct elu_gpu *g, elu_cu_function fn, size_t n,
                                 unsigned threads, elu_stream stream, void **params)
{
    const size_t blocks = n ? (n - 1) / threads + 1 : 1;
    const size_t rows = (blocks - 1) / ROW_BLOCKS + 1;
    if (rows > MAX_ROWS)
        return ELU_CU_ERROR_INVALID_VALUE;
    const size_t across = rows > 1 ? ROW_BLOCKS : blocks;
    return launch(g, fn, (unsigned)across, (unsigned)rows, threads, stream, params);
}

/* One launch of a kernel of module `code` (specialized or generic), the
 * primary context current; `coef` and `table` are the generic kernels'
 * constants and forward table. The shape is the contiguous kernels' (the
 * strided kernel takes one element per thread, and `kind`: the kernel, or
 * FWD_PYTORCH). A half type's forward of up to computed_max elements runs
 * elu_forward_computed where the module has it. */
static elu_cu_result launch_shaped(const struct elu_gpu *g, const struct module *code,
                                   const union kernel_coef *coef, elu_cu_deviceptr table,
                                   enum elu_kernel kernel, int kind, struct elu_shape shape,
                                   const void *a, const void *b, void *out, size_t n,
                                   const struct elu_layout *layout, elu_stream stream)
{
    unsigned long long count = n;
    if (!b)
        b = a;
    const size_t size = elu_dtype_size(code->spec.coef.dtype);
    const bool computed = !layout && kernel == ELU_KERNEL_FORWARD && code->fn[COMPUTED] &&
                          n <= computed_max(code->spec.coef.dtype);
    unsigned long long head = pack_head(a, b, out, n, size, computed ? 8 : 16);
    /* Contiguous: (a, [b,] out, n, coef[, table for the forward], head);
     * strided: (a, b, out, n, layout, coef, kind, table). */
    void *params[8] = {&a}, **next = params + 1;
    if (layout || kernel != ELU_KERNEL_FORWARD)
        *next++ = &b;
    *next++ = &out;
    *next++ = &count;
    if (layout)
        *next++ = (void *)layout;
    *next++ = (void *)coef;
    if (layout)
        *next++ = &kind;
    if (layout || kernel == ELU_KERNEL_FORWARD)
        *next++ = &table;
    if (!layout)
        *next = &head;
    /* The elements each thread takes (kernels_src/elu.cu). */
    size_t per_thread = shape.packs * 16 / size;
    if (layout)
        per_thread = 1;
    else if (code->spec.generic && kernel == ELU_KERNEL_FORWARD)
        return launch_rows(g, code->fn[kernel], n, shape.threads, stream, params);
    else if (computed)
        per_thread = 8 / size; /* one pack of 8 bytes */
    const bool contiguous = !layout && !computed && kernel == ELU_KERNEL_FORWARD &&
                            code->fn[CONTIGUOUS] && shape.packs == elu_max_packs(kernel) &&
                            contiguous_packs(g, n * size);
    const size_t fn = layout ? STRIDED : computed ? COMPUTED : contiguous ? CONTIGUOUS : kernel;
    const size_t needed = blocks_for(n, per_thread, shape.threads);
    /* A grid short of a one-pass kernel's packs would leave elements
     * unwritten (past 2^41 elements). */
    const bool single = !layout && one_pass(kernel, size);
    if (single && needed > INT_MAX)
        return ELU_CU_ERROR_INVALID_VALUE;
    unsigned blocks = needed > INT_MAX ? INT_MAX : (unsigned)needed;
    if (!layout && !single)
        blocks = balanced_blocks(blocks, code->wave[fn], shape.threads);
    return launch(g, code->fn[fn], blocks, 1, shape.threads, stream, params);
}

struct tune_arg {
    const struct elu_gpu *g;
    const struct module *m;
};

static elu_cu_result tune_launch(void *arg, enum elu_kernel kernel, struct elu_shape shape,
                                 elu_cu_deviceptr a, elu_cu_deviceptr b, elu_cu_deviceptr out,
                                 size_t n, elu_cu_stream stream)
{
    const struct tune_arg *t = arg;
    return launch_shaped(t->g, t->m, &t->m->coef, t->m->table, kernel, (int)kernel, shape,
                         (const void *)(uintptr_t)a, (const void *)(uintptr_t)b,
                         (void *)(uintptr_t)out, n, NULL, stream);
}

/* ELU_AUTOTUNE: the dtype's launch shapes, with the context's first
 * specialized module of that dtype, before it is published (so no launch
 * reads them while they change). The caller holds g->lock, the primary
 * context current. */
static void autotune(elu_ctx *ctx, const struct module *m)
{
    struct elu_gpu *g = ctx->gpu;
    const elu_dtype dtype = m->spec.coef.dtype;
    if (!ctx->autotune || m->spec.generic || g->tuned[dtype])
        return;
    g->tuned[dtype] = true;
    const struct elu_tune_device d = {g->cu, g->name, g->sm, g->resident_threads};
    struct tune_arg arg = {g, m};
    elu_tune(ctx, &d, dtype, tune_launch, &arg, &g->tuning[dtype]);
}

/* spec's binary in the form *kind asks for, set to the form made: a cubin
 * for this very GPU from the disk cache needs no NVRTC; else NVRTC says
 * which target it can make, and makes it if the cache lacks it. No lock
 * needed. */
static elu_status obtain(elu_ctx *ctx, const struct elu_spec *spec,
                         enum elu_binary_kind *kind, struct elu_binary *bin)
{
    const struct elu_gpu *g = ctx->gpu;
    struct elu_target t = {g->sm, ELU_BINARY_CUBIN};
    elu_status status = ELU_OK;
    if (*kind != ELU_BINARY_CUBIN || !elu_jit_cached(ctx, spec, &t, bin)) {
        status = elu_jit_target(ctx, g->sm, *kind, &t);
        if (status == ELU_OK)
            status = elu_jit_obtain(ctx, spec, &t, bin);
    }
    *kind = t.kind;
    return status;
}

/* Whether spec's module holds kernel k. */
static bool holds(const struct elu_spec *spec, size_t k)
{
    if (k == COMPUTED || k == CONTIGUOUS)
        return spec->part == ELU_PART_ALL &&
               (elu_dtype_size(spec->coef.dtype) == 2) == (k == COMPUTED);
    return spec->part == ELU_PART_ALL ||
           (spec->part != ELU_PART_REST) == (k == ELU_KERNEL_FORWARD);
}

/* Load bin (freed here) as spec's module into m, the primary context
 * current. */
static elu_status install(elu_ctx *ctx, const struct elu_spec *spec, struct elu_binary *bin,
                          struct module *m)
{
    const struct elu_gpu *g = ctx->gpu;
    *m = (struct module){.spec = *spec};
    const char *what = bin->kind == ELU_BINARY_CUBIN ? "cuModuleLoadData (cubin)"
                                                     : "cuModuleLoadData (PTX)";
    const elu_cu_result r = g->cu->ModuleLoadData(&m->handle, bin->data);
    elu_status status = r == 0 ? ELU_OK : cu_fail(ctx, ELU_ERR_CUDA, what, r);
    for (size_t k = 0; k < KERNELS && status == ELU_OK; k++) {
        if (!holds(spec, k))
            continue;
        const elu_cu_result e = g->cu->ModuleGetFunction(&m->fn[k], m->handle, KERNEL_NAMES[k]);
        if (e != 0)
            status = cu_fail(ctx, ELU_ERR_CUDA, KERNEL_NAMES[k], e);
        int per_sm = 0;
        if (e == 0 && g->cu->OccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, m->fn[k], 128,
                                                                       0) == 0)
            m->wave[k] = (unsigned)per_sm * (unsigned)g->multiprocessors;
    }
    const bool table = elu_jit_carries_table(spec) && bin->size > ELU_JIT_TABLE_BYTES;
    if (status == ELU_OK)
        status = forward_table(ctx, m, table ? (const char *)bin->data + bin->size -
                                                   ELU_JIT_TABLE_BYTES
                                             : NULL);
    free(bin->data);
    bin->data = NULL;
    if (status != ELU_OK && r == 0)
        g->cu->ModuleUnload(m->handle);
    return status;
}

/* Load spec's module, compiling it if need be, and publish it; the caller
 * holds g->lock. A binary that the driver refuses (a PTX newer than the
 * driver, a stale cubin) is rebuilt once in the other form before giving
 * up. */
static elu_status load(elu_ctx *ctx, const struct elu_spec *spec, struct module **out)
{
    struct elu_gpu *g = ctx->gpu;
    struct module *m = next_entry(ctx);
    if (!m)
        return ELU_ERR_OUT_OF_MEMORY;
    const bool pushed = enter(g);
    elu_status status = ELU_ERR_CUDA;
    enum elu_binary_kind kind = ELU_BINARY_CUBIN;
    for (int attempt = 0; attempt < 2 && status == ELU_ERR_CUDA; attempt++) {
        struct elu_binary bin = {0};
        if ((status = obtain(ctx, spec, &kind, &bin)) == ELU_OK)
            status = install(ctx, spec, &bin, m);
        if (kind != ELU_BINARY_CUBIN)
            break;
        kind = ELU_BINARY_PTX;
    }
    if (status == ELU_OK)
        autotune(ctx, m);
    leave(g, pushed);
    if (status != ELU_OK)
        return status;
    publish(g, m);
    *out = m;
    return ELU_OK;
}

/* The generic forward part for c: compiled for input_scale 1 where the
 * exact forward takes c's (f32, f64). */
static enum elu_part forward_part(const struct elu_coef *c)
{
    const bool exact_type = c->dtype == ELU_F32 || c->dtype == ELU_F64;
    return exact_type && c->nip == 1 ? ELU_PART_FORWARD_UNIT_NIP : ELU_PART_FORWARD;
}

/* The dtype's generic module `part`, loaded (compiled if need be) on first
 * use. */
static elu_status generic_part(elu_ctx *ctx, elu_dtype dtype, enum elu_part part,
                               const struct module **out)
{
    struct elu_gpu *g = ctx->gpu;
    const struct elu_spec spec = {{dtype, 0, 0, 0}, true, part};
    struct module *m = find(g, &spec);
    elu_status status = ELU_OK;
    if (!m) {
        pthread_mutex_lock(&g->lock);
        if (!(m = find(g, &spec)))
            status = load(ctx, &spec, &m);
        pthread_mutex_unlock(&g->lock);
    }
    *out = m;
    return status;
}

static void *builder_main(void *arg);

/* Have the builder compile spec's module (under g->lock). If its thread
 * cannot start, the generic kernels go on serving. */
static void queue_build(elu_ctx *ctx, const struct elu_coef *c)
{
    struct elu_gpu *g = ctx->gpu;
    if (!g->building) {
        const int e = pthread_create(&g->builder, NULL, builder_main, ctx);
        if (e != 0) {
            elu_fail(ctx, ELU_OK, "cannot start the thread that builds specialized kernels "
                     "(%s): the generic kernels serve", strerror(e));
            return;
        }
        g->building = true;
    }
    g->queue[g->queued++] = *c;
    pthread_cond_signal(&g->wake);
}

/* spec's module from the disk cache, without NVRTC, into m (under
 * g->lock, the primary context current): true when loaded. */
static bool load_cached(elu_ctx *ctx, const struct elu_spec *spec, struct module *m)
{
    struct elu_target t = {ctx->gpu->sm, ELU_BINARY_CUBIN};
    struct elu_binary bin;
    if (!elu_jit_cached(ctx, spec, &t, &bin) || install(ctx, spec, &bin, m) != ELU_OK)
        return false;
    autotune(ctx, m);
    return true;
}

/* The first call of spec, under g->lock: its module if the disk cache has
 * it; else a backed entry, which the generic kernels serve at once while
 * the builder compiles the module (a compile takes hundreds of
 * milliseconds, the generic kernels' at most once per dtype and process,
 * and none once in the disk cache). *held: whether the call now holds the
 * builder (g->held), to let go with let_go once it has its kernels. */
static elu_status serve(elu_ctx *ctx, const struct elu_spec *spec, struct module **out,
                        bool *held)
{
    struct elu_gpu *g = ctx->gpu;
    struct module *m = next_entry(ctx);
    if (!m)
        return ELU_ERR_OUT_OF_MEMORY;
    const bool pushed = enter(g);
    elu_status status = ELU_OK;
    if (!load_cached(ctx, spec, m) && (status = back(ctx, spec, m)) == ELU_OK) {
        queue_build(ctx, &spec->coef);
        g->held++;
        *held = true;
    }
    leave(g, pushed);
    if (status != ELU_OK)
        return status;
    publish(g, m);
    *out = m;
    return ELU_OK;
}

/* The builder's work for one specialization: compile it (or find it in the
 * disk cache) outside the lock, so that other calls go on meanwhile, then
 * load and publish it under the lock, unless elu_prepare() did first. */
static void build(elu_ctx *ctx, const struct elu_spec *spec)
{
    struct elu_gpu *g = ctx->gpu;
    enum elu_binary_kind kind = ELU_BINARY_CUBIN;
    struct elu_binary bin = {0};
    const elu_status compiled = obtain(ctx, spec, &kind, &bin);
    pthread_mutex_lock(&g->lock);
    struct module *m = find(g, spec);
    if (compiled == ELU_OK && m && m->backed && !atomic_load(&g->closing) &&
        (m = next_entry(ctx)) != NULL) {
        const bool pushed = enter(g);
        elu_status status = install(ctx, spec, &bin, m);
        if (status == ELU_OK)
            autotune(ctx, m);
        leave(g, pushed);
        if (status == ELU_OK)
            publish(g, m);
        else /* refused by the driver: the other form */
            status = load(ctx, spec, &m);
        if (status == ELU_OK)
            ELU_COUNT(ctx, background_builds);
    }
    pthread_mutex_unlock(&g->lock);
    free(bin.data);
}

/* The end of a call's hold on the builder (see serve). */
static void let_go(struct elu_gpu *g)
{
    pthread_mutex_lock(&g->lock);
    if (--g->held == 0)
        pthread_cond_signal(&g->wake);
    pthread_mutex_unlock(&g->lock);
}

static void *builder_main(void *arg)
{
    elu_ctx *ctx = arg;
    struct elu_gpu *g = ctx->gpu;
    pthread_mutex_lock(&g->lock);
    while (!atomic_load(&g->closing)) {
        if (!g->queued || g->held) {
            pthread_cond_wait(&g->wake, &g->lock);
            continue;
        }
        const struct elu_spec spec = {g->queue[0], false, ELU_PART_ALL};
        g->queued--;
        memmove(g->queue, g->queue + 1, g->queued * sizeof *g->queue);
        pthread_mutex_unlock(&g->lock);
        if (!elu_background_begin())
            return NULL; /* the process is exiting: the generic kernels serve */
        build(ctx, &spec);
        elu_background_end();
        pthread_mutex_lock(&g->lock);
    }
    pthread_mutex_unlock(&g->lock);
    return NULL;
}

/* Whether spec's entry is there as wanted (its module when `built`), into
 * *out; or NULL where the context's cap on specializations is reached and
 * the generic kernels serve with the call's constants. */
static bool settled(elu_ctx *ctx, const struct elu_spec *spec, bool built, struct module **out)
{
    struct elu_gpu *g = ctx->gpu;
    *out = find(g, spec);
    if (*out)
        return !built || !(*out)->backed;
    return atomic_load_explicit(&g->specialized, memory_order_relaxed) >=
           (size_t)ctx->max_specializations;
}

/* The entry for c (see settled). The hit path takes no lock; a miss loads,
 * backs or compiles under the table's lock, after looking again (another
 * thread may have meanwhile), so each entry is made once. *held: as
 * serve's, false unless set there. */
static elu_status entry_for(elu_ctx *ctx, const struct elu_coef *c, bool built,
                            struct module **out, bool *held)
{
    struct elu_gpu *g = ctx->gpu;
    elu_status status = check_not_forked(ctx);
    if (status != ELU_OK)
        return status;
    const struct elu_spec spec = {*c, false, ELU_PART_ALL};
    if (settled(ctx, &spec, built, out)) {
        ELU_COUNT(ctx, memory_hits);
        return ELU_OK;
    }
    pthread_mutex_lock(&g->lock);
    if (settled(ctx, &spec, built, out))
        ELU_COUNT(ctx, memory_hits);
    else if (built)
        status = load(ctx, &spec, out);
    else
        status = serve(ctx, &spec, out, held);
    pthread_mutex_unlock(&g->lock);
    return status;
}

elu_status elu_gpu_prepare(elu_ctx *ctx, const struct elu_coef *c)
{
    struct module *m;
    const struct module *part;
    bool held = false; /* stays false: built */
    elu_status status = entry_for(ctx, c, true, &m, &held);
    if (status == ELU_OK && !m) /* beyond the cap: both generic parts */
        status = generic_part(ctx, c->dtype, forward_part(c), &part);
    if (status == ELU_OK && !m)
        status = generic_part(ctx, c->dtype, ELU_PART_REST, &part);
    return status;
}

/* ELU_PREWARM's thread: each named specialization set up as a first run
 * would (its module from the disk cache, or else queued for the builder),
 * and, where the generic kernels are to serve it, both their parts loaded:
 * a first run then finds something to launch at once. */
static void *prewarm_main(void *arg)
{
    elu_ctx *ctx = arg;
    struct elu_gpu *g = ctx->gpu;
    const uint64_t compiles = atomic_load(&ctx->stats.compiles);
    for (size_t i = 0; i < g->prewarm_count && !atomic_load(&g->closing); i++) {
        const struct elu_coef *c = &g->prewarm_coefs[i];
        struct module *m;
        const struct module *part;
        bool held = false;
        if (!elu_background_begin())
            return NULL;
        if (entry_for(ctx, c, false, &m, &held) == ELU_OK && (!m || m->backed) &&
            generic_part(ctx, c->dtype, forward_part(c), &part) == ELU_OK)
            generic_part(ctx, c->dtype, ELU_PART_REST, &part);
        if (held)
            let_go(g);
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

/* Whether the generic forward kernel, exact only, takes these constants:
 * the exact method's, or a half type's table. */
static bool generic_forward_takes(const union kernel_coef *coef, elu_dtype dtype,
                                  elu_cu_deviceptr table)
{
    if (dtype == ELU_F16 || dtype == ELU_BF16)
        return table != 0;
    return ((dtype == ELU_F64 ? coef->d.flags : coef->f.flags) & COEF_EXACT) != 0;
}

/* What one launch of `kernel` for c runs: the module that holds it
 * (specialized, or a generic part), the generic kernels' constants and
 * table, the strided kernel's kind, and the layout (NULL: contiguous). */
struct plan {
    const struct module *code;
    union kernel_coef coef;
    elu_cu_deviceptr table;
    int kind;
    const struct elu_layout *layout;
    struct elu_layout line; /* where the layout is the elements in a line */
};

static elu_status plan_launch(elu_ctx *ctx, const struct elu_coef *c, enum elu_kernel kernel,
                              size_t n, struct plan *p)
{
    struct module *m;
    bool held = false;
    elu_status status = entry_for(ctx, c, false, &m, &held);
    if (status != ELU_OK)
        return status;
    p->code = m;
    p->coef = m ? m->coef : kernel_coef_of(c);
    p->table = m ? m->table : 0;
    p->kind = (int)kernel;
    if (m && !m->backed)
        return ELU_OK;
    /* Where the generic forward does not take them: elu_strided. */
    if (kernel == ELU_KERNEL_FORWARD && !generic_forward_takes(&p->coef, c->dtype, p->table)) {
        p->kind = FWD_PYTORCH;
        if (!p->layout) {
            p->line = (struct elu_layout){.ndim = 1, .shape = {(int64_t)n},
                                          .stride = {{1}, {1}, {1}}};
            p->layout = &p->line;
        }
    }
    status = generic_part(ctx, c->dtype,
                          p->layout || kernel != ELU_KERNEL_FORWARD ? ELU_PART_REST
                                                                    : forward_part(c),
                          &p->code);
    if (held)
        let_go(ctx->gpu);
    return status;
}

elu_status elu_gpu_launch(elu_ctx *ctx, const struct elu_coef *c,
                          enum elu_kernel kernel, const void *a, const void *b,
                          void *out, size_t n, const struct elu_layout *layout,
                          elu_stream stream)
{
    struct plan p = {.layout = layout};
    const elu_status status = plan_launch(ctx, c, kernel, n, &p);
    if (status != ELU_OK)
        return status;
    const struct elu_gpu *g = ctx->gpu;
    const bool generic = p.code->spec.generic;
    const struct elu_tuning *tuning = generic ? &g->rule : &g->tuning[c->dtype];
    const struct elu_shape shape =
        p.layout ? (struct elu_shape){128, 1}
                 : tuning->shape[kernel][elu_size_class(n * elu_dtype_size(c->dtype))];
    const bool pushed = enter(g);
    const elu_cu_result r = launch_shaped(g, p.code, &p.coef, p.table, kernel, p.kind, shape,
                                          a, b, out, n, p.layout, stream);
    leave(g, pushed);
    if (r != 0)
        return cu_fail(ctx, ELU_ERR_CUDA, g->pdl ? "cuLaunchKernelEx" : "cuLaunchKernel", r);
    ELU_COUNT(ctx, gpu_launches);
    if (generic)
        ELU_COUNT(ctx, generic_launches);
    return ELU_OK;
}

void elu_gpu_describe(const elu_ctx *ctx, elu_ctx_info *info)
{
    const struct elu_gpu *g = ctx->gpu;
    info->device = g->ordinal;
    info->sm = g->sm;
    info->multiprocessors = g->multiprocessors;
    info->driver_version = g->driver_version;
    snprintf(info->device_name, sizeof info->device_name, "%s", g->name);
}
