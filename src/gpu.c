#include "gpu.h"

#include "cuda_loader.h"
#include "jit.h"
#include "tune.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Indexed by enum elu_kernel; then the one strided kernel for all three,
 * which takes the enum value as its last argument. */
static const char *const KERNEL_NAMES[] = {"elu_forward", "elu_backward_input",
                                           "elu_backward_output", "elu_strided"};
#define KERNELS (sizeof KERNEL_NAMES / sizeof *KERNEL_NAMES)
#define STRIDED 3

struct module {
    struct elu_spec spec;
    elu_cu_module handle;
    elu_cu_function fn[KERNELS];
    /* A specialized half-type module's forward results for each of the
     * 65536 inputs, in its elu_forward_table (else 0): see forward_table.
     * And the kernel that copies them to shared memory first, where the
     * device has room for them (else NULL). */
    elu_cu_deviceptr table;
    elu_cu_function forward_shared;
};

struct elu_gpu {
    const struct elu_cuda_api *cu;
    elu_cu_device device;
    elu_cu_context primary;
    int ordinal, sm, multiprocessors, driver_version;
    int shared_optin; /* most shared memory a block may ask for, in bytes */
    unsigned resident_threads; /* multiprocessors times the threads each holds */
    char name[256];
    /* Launch shapes per dtype: the heuristic's from the start; with
     * ELU_AUTOTUNE, replaced under `lock` when the dtype's first module
     * loads (`tuned`), before that module is published. */
    struct elu_tuning tuning[4];
    bool tuned[4];
    /* The module table. Entries are appended under `lock` and published by
     * `published` (release); once published an entry never changes until
     * the context is destroyed, so lookups take no lock (acquire). */
    pthread_mutex_t lock;
    struct module *modules;
    atomic_size_t published;
    atomic_size_t specialized; /* non-generic entries; written under lock */
    size_t capacity;
    /* ELU_PREWARM's thread, while `prewarming`; it stops early once
     * `closing` is set. */
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
                    "%s: %s", what, elu_cu_error_name(cu, r));
}

static const char FORKED[] = "this process was forked from one that had "
                             "initialized CUDA, which does not survive fork: "
                             "use the CPU here (a CPU or AUTO context)";

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
    int major = 0, minor = 0, per_sm = 0;
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
        (r = cu->DeviceGetAttribute(&g->shared_optin,
                                    ELU_CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN,
                                    g->device)) != 0 ||
        (r = cu->DeviceGetName(g->name, sizeof g->name, g->device)) != 0 ||
        (r = cu->DriverGetVersion(&g->driver_version)) != 0)
        return cu_fail(ctx, ELU_ERR_NO_DEVICE, "querying the device", r);
    g->ordinal = ordinal;
    g->sm = 10 * major + minor;
    g->resident_threads = (unsigned)g->multiprocessors * (unsigned)per_sm;
    for (int d = 0; d < 4; d++)
        elu_tune_heuristic(g->resident_threads, (elu_dtype)d, &g->tuning[d]);
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
    struct elu_gpu *g = calloc(1, sizeof *g);
    const size_t capacity = (size_t)ctx->max_specializations + 4;
    struct module *modules = calloc(capacity, sizeof *modules);
    if (!g || !modules) {
        free(g);
        free(modules);
        return elu_fail(ctx, ELU_ERR_OUT_OF_MEMORY, "out of memory");
    }
    g->cu = cu;
    g->modules = modules;
    g->capacity = capacity;
    pthread_mutex_init(&g->lock, NULL);
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
    /* After a fork the thread belongs to the parent: nothing to wait for. */
    atomic_store(&g->closing, true);
    if (g->prewarming && !elu_cuda_forked())
        pthread_join(g->prewarm, NULL);
    free(g->prewarm_coefs);
    if (g->primary && !elu_cuda_forked()) {
        const bool pushed = enter(g);
        const size_t count = atomic_load_explicit(&g->published, memory_order_acquire);
        for (size_t i = 0; i < count; i++)
            g->cu->ModuleUnload(g->modules[i].handle); /* and its table */
        leave(g, pushed);
        g->cu->DevicePrimaryCtxRelease(g->device);
    }
    pthread_mutex_destroy(&g->lock);
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
    return a->generic == b->generic && a->coef.dtype == b->coef.dtype &&
           memcmp(&a->coef.neg, &b->coef.neg, sizeof(double)) == 0 &&
           memcmp(&a->coef.pos, &b->coef.pos, sizeof(double)) == 0 &&
           memcmp(&a->coef.nip, &b->coef.nip, sizeof(double)) == 0;
}

static struct module *find(struct elu_gpu *g, const struct elu_spec *spec)
{
    const size_t count = atomic_load_explicit(&g->published, memory_order_acquire);
    for (size_t i = 0; i < count; i++)
        if (same_spec(&g->modules[i].spec, spec))
            return &g->modules[i];
    return NULL;
}

/* The half types' forward as a table, as on the CPU: a half type has
 * 65536 values, so the correctly rounded result for each, computed once
 * per specialization (elu_cpu_forward_table, half a millisecond, at compile
 * time: the binary carries it, see jit.h) and looked up by the kernel, is
 * both exact and cheaper than computing expm1 in float, which bounds the
 * computing kernel's speed. y is the binary's table, NULL for other dtypes
 * and the generic module (whose constants vary per call): m->table stays
 * 0 then. */
static elu_status forward_table(elu_ctx *ctx, struct module *m, const void *y)
{
    const struct elu_coef *c = &m->spec.coef;
    m->table = 0;
    m->forward_shared = NULL;
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
        r = g->cu->MemcpyHtoD(table, y, ELU_JIT_TABLE_BYTES);
    if (r != 0)
        return cu_fail(ctx, ELU_ERR_CUDA, "the forward table", r);
    m->table = table;
    /* f16 only: bf16 inputs spread over 4 times fewer values per binade than
     * f16's, and their table entries stay in L1 (on the H200, at 2^28 random
     * elements: 0.90-0.94 of a copy's bandwidth from L1, 0.87 from shared
     * memory; f16 0.75 and 0.87). */
    if (c->dtype == ELU_F16 && g->shared_optin >= ELU_JIT_TABLE_BYTES &&
        g->cu->ModuleGetFunction(&m->forward_shared, m->handle, "elu_forward_shared") == 0 &&
        g->cu->FuncSetAttribute(m->forward_shared,
                                ELU_CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                                ELU_JIT_TABLE_BYTES) != 0)
        m->forward_shared = NULL;
    return ELU_OK;
}

/* From here the shared-table forward's copy of the table into each block
 * (128 KiB, a microsecond) costs less than its faster lookups save. */
#define SHARED_TABLE_MIN_N ((size_t)1 << 22)

/* Blocks to cover n elements in one pass of the grid, each thread taking
 * per_thread of them: on the H200, one pass beats a grid-stride loop over
 * a resident wave (f32 forward at 2^28: 0.99 of a copy's bandwidth against
 * 0.81 with 4 packs per thread; f32 backward 1.03 against 0.97), as the
 * block scheduler keeps every SM fed. */
static unsigned blocks_for(size_t n, size_t per_thread, size_t threads)
{
    const size_t per_block = per_thread * threads;
    const size_t blocks = (n + per_block - 1) / per_block;
    return blocks > INT_MAX ? INT_MAX : blocks ? (unsigned)blocks : 1;
}

/* One launch of m's kernel, the primary context current. `c` gives the
 * generic kernel its constants; the shape is the contiguous kernels' (the
 * strided kernel takes one element per thread). */
static elu_cu_result launch_shaped(const struct elu_gpu *g, const struct module *m,
                                   const struct elu_coef *c, enum elu_kernel kernel,
                                   struct elu_shape shape, const void *a, const void *b,
                                   void *out, size_t n, const struct elu_layout *layout,
                                   elu_stream stream)
{
    /* The kernel's elu_coef: three op_t, float or double. */
    const float cf[3] = {(float)c->neg, (float)c->pos, (float)c->nip};
    const double cd[3] = {c->neg, c->pos, c->nip};
    void *coef = c->dtype == ELU_F64 ? (void *)cd : (void *)cf;
    unsigned long long count = n;
    int kind = (int)kernel;
    const elu_cu_deviceptr *table = &m->table;
    if (!b)
        b = a;
    /* The shared-table forward: one block of 1024 threads per SM. */
    if (kernel == ELU_KERNEL_FORWARD && !layout && m->forward_shared &&
        n >= SHARED_TABLE_MIN_N) {
        void *params[] = {&a, &out, &count, (void *)table};
        return g->cu->LaunchKernel(m->forward_shared, (unsigned)g->multiprocessors, 1, 1,
                                   1024, 1, 1, ELU_JIT_TABLE_BYTES, stream, params, NULL);
    }
    /* Contiguous: (a, [b,] out, n, coef[, table for the forward]); strided:
     * (a, b, out, n, layout, coef, kind, table). */
    void *params[8] = {&a}, **next = params + 1;
    if (layout || kernel != ELU_KERNEL_FORWARD)
        *next++ = &b;
    *next++ = &out;
    *next++ = &count;
    if (layout)
        *next++ = (void *)layout;
    *next++ = coef;
    if (layout)
        *next++ = &kind;
    if (layout || kernel == ELU_KERNEL_FORWARD)
        *next = (void *)table;
    const size_t per_thread = layout ? 1 : shape.packs * 16 / elu_dtype_size(c->dtype);
    return g->cu->LaunchKernel(m->fn[layout ? STRIDED : kernel],
                               blocks_for(n, per_thread, shape.threads), 1, 1, shape.threads,
                               1, 1, 0, stream, params, NULL);
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
    return launch_shaped(t->g, t->m, &t->m->spec.coef, kernel, shape,
                         (const void *)(uintptr_t)a, (const void *)(uintptr_t)b,
                         (void *)(uintptr_t)out, n, NULL, stream);
}

/* ELU_AUTOTUNE: the dtype's launch shapes, with the context's first module
 * of that dtype, before it is published (so no launch reads them while
 * they change). The caller holds g->lock, the primary context current. */
static void autotune(elu_ctx *ctx, const struct module *m)
{
    struct elu_gpu *g = ctx->gpu;
    const elu_dtype dtype = m->spec.coef.dtype;
    if (!ctx->autotune || g->tuned[dtype])
        return;
    g->tuned[dtype] = true;
    const struct elu_tune_device d = {g->cu, g->name, g->sm, g->resident_threads};
    struct tune_arg arg = {g, m};
    elu_tune(ctx, &d, dtype, tune_launch, &arg, &g->tuning[dtype]);
}

/* *kind: the form asked for in, the form used out. */
static elu_status load_binary(elu_ctx *ctx, const struct elu_spec *spec,
                              enum elu_binary_kind *kind, struct module *m)
{
    struct elu_gpu *g = ctx->gpu;
    /* A cubin for this very GPU, cached: no NVRTC needed. Else NVRTC says
     * which target it can make, and makes it if the cache lacks it. */
    struct elu_target t = {g->sm, ELU_BINARY_CUBIN};
    struct elu_binary bin;
    elu_status status = ELU_OK;
    if (*kind != ELU_BINARY_CUBIN || !elu_jit_cached(ctx, spec, &t, &bin)) {
        status = elu_jit_target(ctx, g->sm, *kind, &t);
        if (status == ELU_OK)
            status = elu_jit_obtain(ctx, spec, &t, &bin);
    }
    if (status != ELU_OK)
        return status;
    *kind = t.kind;
    const elu_cu_result r = g->cu->ModuleLoadData(&m->handle, bin.data);
    if (r != 0) {
        free(bin.data);
        return cu_fail(ctx, ELU_ERR_CUDA, t.kind == ELU_BINARY_CUBIN
                       ? "cuModuleLoadData (cubin)" : "cuModuleLoadData (PTX)", r);
    }
    for (size_t k = 0; k < KERNELS && status == ELU_OK; k++) {
        const elu_cu_result e = g->cu->ModuleGetFunction(&m->fn[k], m->handle,
                                                         KERNEL_NAMES[k]);
        if (e != 0)
            status = cu_fail(ctx, ELU_ERR_CUDA, KERNEL_NAMES[k], e);
    }
    m->spec = *spec;
    const bool table = elu_jit_carries_table(spec) && bin.size > ELU_JIT_TABLE_BYTES;
    if (status == ELU_OK)
        status = forward_table(ctx, m, table ? (const char *)bin.data + bin.size -
                                                   ELU_JIT_TABLE_BYTES
                                             : NULL);
    free(bin.data);
    if (status != ELU_OK)
        g->cu->ModuleUnload(m->handle);
    return status;
}

/* Load spec's module into the table; the caller holds g->lock. A binary
 * that the driver refuses (a PTX newer than the driver, a stale cubin) is
 * rebuilt once in the other form before giving up. */
static elu_status load(elu_ctx *ctx, const struct elu_spec *spec,
                       struct module **out)
{
    struct elu_gpu *g = ctx->gpu;
    const size_t count = atomic_load_explicit(&g->published, memory_order_relaxed);
    struct module *m = &g->modules[count];
    const bool pushed = enter(g);
    enum elu_binary_kind kind = ELU_BINARY_CUBIN;
    elu_status status = load_binary(ctx, spec, &kind, m);
    if (status == ELU_ERR_CUDA && kind == ELU_BINARY_CUBIN) {
        kind = ELU_BINARY_PTX;
        status = load_binary(ctx, spec, &kind, m);
    }
    if (status == ELU_OK)
        autotune(ctx, m);
    leave(g, pushed);
    if (status != ELU_OK)
        return status;
    if (!spec->generic)
        atomic_fetch_add_explicit(&g->specialized, 1, memory_order_relaxed);
    atomic_store_explicit(&g->published, count + 1, memory_order_release);
    *out = m;
    return ELU_OK;
}

/* The module for spec, or the dtype's generic one once the context's cap
 * on specializations is reached; NULL if neither is loaded yet. */
static struct module *lookup(elu_ctx *ctx, struct elu_spec *spec)
{
    struct module *m = find(ctx->gpu, spec);
    const size_t specialized =
        atomic_load_explicit(&ctx->gpu->specialized, memory_order_relaxed);
    if (!m && specialized >= (size_t)ctx->max_specializations) {
        *spec = (struct elu_spec){{spec->coef.dtype, 0, 0, 0}, true};
        m = find(ctx->gpu, spec);
    }
    return m;
}

/* The module for c. The hit path takes no lock; a miss compiles or loads
 * under the table's lock, after looking again (another thread may have
 * loaded it meanwhile), so each specialization is built once. */
static elu_status module_for(elu_ctx *ctx, const struct elu_coef *c,
                             struct module **out)
{
    struct elu_gpu *g = ctx->gpu;
    elu_status status = check_not_forked(ctx);
    if (status != ELU_OK)
        return status;
    struct elu_spec spec = {*c, false};
    if ((*out = lookup(ctx, &spec))) {
        ELU_COUNT(ctx, memory_hits);
        return ELU_OK;
    }
    pthread_mutex_lock(&g->lock);
    spec = (struct elu_spec){*c, false};
    if ((*out = lookup(ctx, &spec)))
        ELU_COUNT(ctx, memory_hits);
    else
        status = load(ctx, &spec, out);
    pthread_mutex_unlock(&g->lock);
    return status;
}

elu_status elu_gpu_prepare(elu_ctx *ctx, const struct elu_coef *c)
{
    struct module *m;
    return module_for(ctx, c, &m);
}

static void *prewarm_main(void *arg)
{
    elu_ctx *ctx = arg;
    struct elu_gpu *g = ctx->gpu;
    const uint64_t compiles = atomic_load(&ctx->stats.compiles);
    for (size_t i = 0; i < g->prewarm_count && !atomic_load(&g->closing); i++)
        elu_gpu_prepare(ctx, &g->prewarm_coefs[i]);
    if (atomic_load(&ctx->stats.compiles) == compiles && !atomic_load(&g->closing))
        elu_jit_warm_up(ctx, g->sm);
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

elu_status elu_gpu_launch(elu_ctx *ctx, const struct elu_coef *c,
                          enum elu_kernel kernel, const void *a, const void *b,
                          void *out, size_t n, const struct elu_layout *layout,
                          elu_stream stream)
{
    struct module *m;
    elu_status status = module_for(ctx, c, &m);
    if (status != ELU_OK)
        return status;
    const struct elu_gpu *g = ctx->gpu;
    const struct elu_shape shape =
        layout ? (struct elu_shape){128, 1}
               : g->tuning[c->dtype].shape[kernel][elu_size_class(n * elu_dtype_size(c->dtype))];
    const bool pushed = enter(g);
    const elu_cu_result r = launch_shaped(g, m, c, kernel, shape, a, b, out, n, layout, stream);
    leave(g, pushed);
    if (r != 0)
        return cu_fail(ctx, ELU_ERR_CUDA, "cuLaunchKernel", r);
    ELU_COUNT(ctx, gpu_launches);
    if (m->spec.generic)
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
