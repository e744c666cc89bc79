/* The only file that calls dlopen/dlsym, and the only one that calls cuInit.
 * The two tables, their status and the cuInit result are written once under
 * pthread_once and read-only afterwards; `forked` is set once, in a fork
 * child, by the pthread_atfork handler. Together with the error slots'
 * thread key (api.c) that is all of libelu's process-wide state. */
#include "cuda_loader.h"

#include "env.h"

#include <dlfcn.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>

struct symbol {
    const char *name;
    size_t offset; /* of the function pointer within the table */
    bool optional; /* left NULL where missing */
};

#define CU_SYM(field, symbol) {symbol, offsetof(struct elu_cuda_api, field), false}
#define CU_OPTIONAL(field, symbol) {symbol, offsetof(struct elu_cuda_api, field), true}
static const struct symbol cuda_symbols[] = {
    CU_SYM(Init, "cuInit"),
    CU_SYM(DriverGetVersion, "cuDriverGetVersion"),
    CU_SYM(GetErrorName, "cuGetErrorName"),
    CU_SYM(DeviceGetCount, "cuDeviceGetCount"),
    CU_SYM(DeviceGet, "cuDeviceGet"),
    CU_SYM(DeviceGetName, "cuDeviceGetName"),
    CU_SYM(DeviceGetAttribute, "cuDeviceGetAttribute"),
    CU_SYM(DevicePrimaryCtxRetain, "cuDevicePrimaryCtxRetain"),
    CU_SYM(DevicePrimaryCtxRelease, "cuDevicePrimaryCtxRelease_v2"),
    CU_SYM(CtxGetCurrent, "cuCtxGetCurrent"),
    CU_SYM(CtxPushCurrent, "cuCtxPushCurrent_v2"),
    CU_SYM(CtxPopCurrent, "cuCtxPopCurrent_v2"),
    CU_SYM(CtxSynchronize, "cuCtxSynchronize"),
    CU_SYM(ModuleLoadData, "cuModuleLoadData"),
    CU_SYM(ModuleUnload, "cuModuleUnload"),
    CU_SYM(ModuleGetFunction, "cuModuleGetFunction"),
    CU_SYM(ModuleGetGlobal, "cuModuleGetGlobal_v2"),
    CU_SYM(LaunchKernel, "cuLaunchKernel"),
    CU_OPTIONAL(LaunchKernelEx, "cuLaunchKernelEx"),
    CU_SYM(OccupancyMaxActiveBlocksPerMultiprocessor,
           "cuOccupancyMaxActiveBlocksPerMultiprocessor"),
    CU_SYM(PointerGetAttributes, "cuPointerGetAttributes"),
    CU_SYM(MemAlloc, "cuMemAlloc_v2"),
    CU_SYM(MemAllocManaged, "cuMemAllocManaged"),
    CU_SYM(MemFree, "cuMemFree_v2"),
    CU_SYM(MemcpyHtoD, "cuMemcpyHtoD_v2"),
    CU_SYM(MemcpyDtoH, "cuMemcpyDtoH_v2"),
    CU_SYM(MemcpyDtoDAsync, "cuMemcpyDtoDAsync_v2"),
    CU_SYM(MemsetD8, "cuMemsetD8_v2"),
    CU_SYM(StreamCreate, "cuStreamCreate"),
    CU_SYM(StreamBeginCapture, "cuStreamBeginCapture_v2"),
    CU_SYM(StreamEndCapture, "cuStreamEndCapture"),
    CU_SYM(GraphInstantiate, "cuGraphInstantiateWithFlags"),
    CU_SYM(GraphLaunch, "cuGraphLaunch"),
    CU_SYM(GraphExecDestroy, "cuGraphExecDestroy"),
    CU_SYM(GraphDestroy, "cuGraphDestroy"),
    CU_SYM(StreamSynchronize, "cuStreamSynchronize"),
    CU_SYM(StreamDestroy, "cuStreamDestroy_v2"),
    CU_SYM(EventCreate, "cuEventCreate"),
    CU_SYM(EventRecord, "cuEventRecord"),
    CU_SYM(EventSynchronize, "cuEventSynchronize"),
    CU_SYM(EventElapsedTime, "cuEventElapsedTime"),
    CU_SYM(EventDestroy, "cuEventDestroy_v2"),
};

#define NV_SYM(field, symbol) {symbol, offsetof(struct elu_nvrtc_api, field), false}
static const struct symbol nvrtc_symbols[] = {
    NV_SYM(Version, "nvrtcVersion"),
    NV_SYM(GetErrorString, "nvrtcGetErrorString"),
    NV_SYM(GetNumSupportedArchs, "nvrtcGetNumSupportedArchs"),
    NV_SYM(GetSupportedArchs, "nvrtcGetSupportedArchs"),
    NV_SYM(CreateProgram, "nvrtcCreateProgram"),
    NV_SYM(CompileProgram, "nvrtcCompileProgram"),
    NV_SYM(GetProgramLogSize, "nvrtcGetProgramLogSize"),
    NV_SYM(GetProgramLog, "nvrtcGetProgramLog"),
    NV_SYM(GetCUBINSize, "nvrtcGetCUBINSize"),
    NV_SYM(GetCUBIN, "nvrtcGetCUBIN"),
    NV_SYM(GetPTXSize, "nvrtcGetPTXSize"),
    NV_SYM(GetPTX, "nvrtcGetPTX"),
    NV_SYM(DestroyProgram, "nvrtcDestroyProgram"),
};

struct library {
    void *table;
    const struct symbol *symbols;
    size_t count;
    const char *env;            /* overrides the candidate names */
    const char *const *names;   /* candidates, NULL-terminated */
    const char *loaded;         /* NULL until loaded */
    char why[512];
};

/* Open the first candidate that resolves every symbol but the optional. */
static void load_library(struct library *lib)
{
    const char *override = elu_env_text(lib->env);
    const char *single[] = {override, NULL};
    const char *const *names = override ? single : lib->names;
    for (; *names; names++) {
        void *h = dlopen(*names, RTLD_NOW | RTLD_LOCAL);
        if (!h) {
            snprintf(lib->why, sizeof lib->why, "%s", dlerror());
            continue;
        }
        size_t i = 0;
        for (; i < lib->count; i++) {
            void *fn = dlsym(h, lib->symbols[i].name);
            if (!fn && !lib->symbols[i].optional) {
                snprintf(lib->why, sizeof lib->why, "%s: missing %s", *names,
                         lib->symbols[i].name);
                break;
            }
            /* ISO C has no object-to-function pointer conversion; POSIX
             * guarantees the representations match, so copy the bytes. */
            memcpy((char *)lib->table + lib->symbols[i].offset, &fn, sizeof fn);
        }
        if (i == lib->count) {
            lib->loaded = *names;
            return;
        }
        dlclose(h);
    }
}

static struct elu_cuda_api cuda_table;
static const char *const cuda_names[] = {"libcuda.so.1", NULL};
static struct library cuda_lib = {&cuda_table, cuda_symbols,
                                  sizeof cuda_symbols / sizeof *cuda_symbols,
                                  "ELU_CUDA_LIBRARY", cuda_names, NULL, ""};
static pthread_once_t cuda_once = PTHREAD_ONCE_INIT;
static void load_cuda(void) { load_library(&cuda_lib); }

static struct elu_nvrtc_api nvrtc_table;
static const char *const nvrtc_names[] = {"libnvrtc.so.13", "libnvrtc.so.12",
                                          "libnvrtc.so.11.2", "libnvrtc.so",
                                          NULL};
static struct library nvrtc_lib = {&nvrtc_table, nvrtc_symbols,
                                   sizeof nvrtc_symbols / sizeof *nvrtc_symbols,
                                   "ELU_NVRTC_LIBRARY", nvrtc_names, NULL, ""};
static pthread_once_t nvrtc_once = PTHREAD_ONCE_INIT;
static void load_nvrtc(void) { load_library(&nvrtc_lib); }

const struct elu_cuda_api *elu_cuda_load(const char **why)
{
    pthread_once(&cuda_once, load_cuda);
    *why = cuda_lib.why;
    return cuda_lib.loaded ? &cuda_table : NULL;
}

const struct elu_nvrtc_api *elu_nvrtc_load(const char **why)
{
    pthread_once(&nvrtc_once, load_nvrtc);
    *why = nvrtc_lib.why;
    return nvrtc_lib.loaded ? &nvrtc_table : NULL;
}

static elu_cu_result init_result;
static volatile sig_atomic_t initialized, forked;
static pthread_once_t init_once = PTHREAD_ONCE_INIT;

static void on_fork_child(void)
{
    if (initialized)
        forked = 1;
}

static void init_cuda(void)
{
    /* Registered before cuInit, so no fork can slip between the two. */
    pthread_atfork(NULL, NULL, on_fork_child);
    init_result = cuda_table.Init(0);
    initialized = init_result == 0;
}

elu_cu_result elu_cuda_init(void)
{
    pthread_once(&init_once, init_cuda);
    return init_result;
}

bool elu_cuda_forked(void) { return forked; }

struct elu_result_text elu_cu_result_text(const struct elu_cuda_api *cu, elu_cu_result r)
{
    struct elu_result_text t;
    const char *name = NULL;
    if (cu->GetErrorName(r, &name) == 0 && name)
        snprintf(t.text, sizeof t.text, "%s (%d)", name, r);
    else
        snprintf(t.text, sizeof t.text, "CUresult %d, which the driver cannot name", r);
    return t;
}

struct elu_result_text elu_nvrtc_result_text(const struct elu_nvrtc_api *nv, int r)
{
    struct elu_result_text t;
    const char *name = nv->GetErrorString(r);
    snprintf(t.text, sizeof t.text, "%s (%d)", name ? name : "nvrtcResult", r);
    return t;
}
