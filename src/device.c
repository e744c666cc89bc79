/* The device: the driver loaded, the device's attributes, its primary
 * context retained and made current around driver calls; the pointers'
 * whereabouts; and the context's GPU state made and torn down, fork
 * included. */
#include "gpu_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

elu_status elu_gpu_fail_cu(elu_ctx *ctx, elu_status status, const char *what,
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
        return elu_gpu_fail_cu(ctx, ELU_ERR_NO_DEVICE, "cuInit", r);
    int count = 0;
    if ((r = cu->DeviceGetCount(&count)) != 0)
        return elu_gpu_fail_cu(ctx, ELU_ERR_NO_DEVICE, "cuDeviceGetCount", r);
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
        return elu_gpu_fail_cu(ctx, ELU_ERR_NO_DEVICE, "querying the device", r);
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
        return elu_gpu_fail_cu(ctx, ELU_ERR_CUDA, "cuDevicePrimaryCtxRetain", r);
    return ELU_OK;
}

elu_status elu_gpu_open(elu_ctx *ctx, int ordinal)
{
    const char *why;
    const struct elu_cuda_api *cu = elu_cuda_load(&why);
    if (!cu)
        return elu_fail(ctx, ELU_ERR_NO_DEVICE, "CUDA driver unavailable: %s",
                        why);
    /* Specializations have up to twice max_specializations entries (see
     * modules.c's load_own), each dtype a whole generic module and three
     * quick parts; each entry is queued at most once. */
    struct elu_gpu *g = calloc(1, sizeof *g);
    const size_t capacity = 2 * (size_t)ctx->max_specializations + 16;
    struct module *modules = calloc(capacity, sizeof *modules);
    struct module **queue = calloc(capacity, sizeof *queue);
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
    pthread_cond_init(&g->settled, NULL);
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
bool elu_gpu_enter(const struct elu_gpu *g)
{
    elu_cu_context current = NULL;
    g->cu->CtxGetCurrent(&current);
    if (current == g->primary)
        return false;
    return g->cu->CtxPushCurrent(g->primary) == 0;
}

void elu_gpu_leave(const struct elu_gpu *g, bool pushed)
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
        const bool pushed = elu_gpu_enter(g);
        const size_t count = atomic_load_explicit(&g->published, memory_order_acquire);
        for (size_t i = 0; i < count; i++) {
            const struct module *m = &g->modules[i];
            if (m->built.handle)
                g->cu->ModuleUnload(m->built.handle); /* and its table */
        }
        elu_gpu_leave(g, pushed);
        g->cu->DevicePrimaryCtxRelease(g->device);
    }
    if (!forked) { /* a copy of the parent's waiting thread would block these */
        pthread_cond_destroy(&g->wake);
        pthread_cond_destroy(&g->settled);
        pthread_mutex_destroy(&g->lock);
    }
    free(g->queue);
    free(g->modules);
    free(g);
    ctx->gpu = NULL;
}

/* Every path into the driver starts here: after a fork, none may. */
elu_status elu_gpu_check_not_forked(elu_ctx *ctx)
{
    if (elu_cuda_forked())
        return elu_fail(ctx, ELU_ERR_CUDA, "%s; this context's CUDA state "
                        "belongs to the parent", FORKED);
    return ELU_OK;
}

elu_status elu_gpu_locate(elu_ctx *ctx, const void *p, enum elu_place *place)
{
    const struct elu_gpu *g = ctx->gpu;
    const elu_status status = elu_gpu_check_not_forked(ctx);
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
        return elu_gpu_fail_cu(ctx, ELU_ERR_CUDA, "cuPointerGetAttributes", r);
    if (managed)
        *place = ELU_PLACE_DEVICE;
    else if (type != ELU_CU_MEMORYTYPE_DEVICE)
        *place = ELU_PLACE_HOST; /* pageable or page-locked host memory */
    else
        *place = ordinal == g->ordinal ? ELU_PLACE_DEVICE : ELU_PLACE_OTHER_DEVICE;
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
