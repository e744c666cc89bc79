/* The CUDA driver and NVRTC, loaded at run time through dlopen (cuew's
 * pattern): the library builds without the CUDA toolkit and the CPU path runs
 * without a driver. Only the few types and constants libelu uses are declared
 * here, with the values of cuda.h and nvrtc.h, under names that cannot clash
 * with theirs. */
#ifndef ELU_CUDA_LOADER_H
#define ELU_CUDA_LOADER_H

#include <stdbool.h>
#include <stddef.h>

typedef int elu_cu_result; /* CUresult: 0 is CUDA_SUCCESS */
typedef int elu_cu_device;
typedef struct CUctx_st *elu_cu_context;
typedef struct CUmod_st *elu_cu_module;
typedef struct CUfunc_st *elu_cu_function;
typedef struct CUstream_st *elu_cu_stream;
typedef struct CUevent_st *elu_cu_event;
typedef unsigned long long elu_cu_deviceptr;
typedef struct _nvrtcProgram *elu_nvrtc_program;
#define ELU_NVRTC_ERROR_INVALID_OPTION 5

enum {
    ELU_CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION = 6,
    ELU_CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT = 16,
    ELU_CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE = 38,
    ELU_CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_MULTIPROCESSOR = 39,
    ELU_CU_DEVICE_ATTRIBUTE_CC_MAJOR = 75,
    ELU_CU_DEVICE_ATTRIBUTE_CC_MINOR = 76,
    ELU_CU_POINTER_ATTRIBUTE_MEMORY_TYPE = 2,
    ELU_CU_POINTER_ATTRIBUTE_IS_MANAGED = 8,
    ELU_CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL = 9,
    ELU_CU_MEMORYTYPE_DEVICE = 2,
    ELU_CU_MEM_ATTACH_GLOBAL = 1,
    ELU_CU_ERROR_INVALID_VALUE = 1,
    ELU_CU_ERROR_OUT_OF_MEMORY = 2,
    ELU_CU_STREAM_NON_BLOCKING = 1,
};

/* CUlaunchAttribute and CUlaunchConfig (CUDA 12.0 and later), laid out as
 * in cuda.h: cuLaunchKernelEx's arguments. */
struct elu_cu_launch_attribute {
    int id;
    char pad[4];
    union {
        char bytes[64];
        unsigned long long align; /* as the union's pointers and sizes */
        int value;
    } value;
};
struct elu_cu_launch_config {
    unsigned grid[3], block[3], shared_bytes;
    elu_cu_stream stream;
    struct elu_cu_launch_attribute *attrs;
    unsigned count;
};

/* Driver entry points, named as in cuda.h without the "cu" prefix. Where
 * cuda.h maps a name to a versioned symbol (cuMemAlloc -> cuMemAlloc_v2),
 * the loader resolves that same symbol. */
struct elu_cuda_api {
    elu_cu_result (*Init)(unsigned flags);
    elu_cu_result (*DriverGetVersion)(int *version);
    elu_cu_result (*GetErrorName)(elu_cu_result err, const char **name);
    elu_cu_result (*DeviceGetCount)(int *count);
    elu_cu_result (*DeviceGet)(elu_cu_device *dev, int ordinal);
    elu_cu_result (*DeviceGetName)(char *name, int len, elu_cu_device dev);
    elu_cu_result (*DeviceGetAttribute)(int *value, int attr, elu_cu_device dev);
    elu_cu_result (*DevicePrimaryCtxRetain)(elu_cu_context *ctx, elu_cu_device dev);
    elu_cu_result (*DevicePrimaryCtxRelease)(elu_cu_device dev);
    elu_cu_result (*CtxGetCurrent)(elu_cu_context *ctx);
    elu_cu_result (*CtxPushCurrent)(elu_cu_context ctx);
    elu_cu_result (*CtxPopCurrent)(elu_cu_context *ctx);
    elu_cu_result (*CtxSynchronize)(void);
    elu_cu_result (*ModuleLoadData)(elu_cu_module *mod, const void *image);
    elu_cu_result (*ModuleUnload)(elu_cu_module mod);
    elu_cu_result (*ModuleGetFunction)(elu_cu_function *fn, elu_cu_module mod,
                                       const char *name);
    elu_cu_result (*ModuleGetGlobal)(elu_cu_deviceptr *ptr, size_t *bytes, elu_cu_module mod,
                                     const char *name);
    elu_cu_result (*LaunchKernel)(elu_cu_function fn, unsigned gx, unsigned gy,
                                  unsigned gz, unsigned bx, unsigned by,
                                  unsigned bz, unsigned shared_bytes,
                                  elu_cu_stream stream, void **params,
                                  void **extra);
    /* NULL where the driver lacks it (before CUDA 12.0). */
    elu_cu_result (*LaunchKernelEx)(const struct elu_cu_launch_config *config,
                                    elu_cu_function fn, void **params, void **extra);
    elu_cu_result (*OccupancyMaxActiveBlocksPerMultiprocessor)(int *blocks, elu_cu_function fn,
                                                               int threads, size_t shared_bytes);
    elu_cu_result (*PointerGetAttributes)(unsigned count, int *attrs,
                                          void **data, elu_cu_deviceptr ptr);
    /* Memory: the half types' tables (modules.c); tests, examples and
     * benchmarks manage their memory and streams with these too. */
    elu_cu_result (*MemAlloc)(elu_cu_deviceptr *ptr, size_t bytes);
    elu_cu_result (*MemAllocManaged)(elu_cu_deviceptr *ptr, size_t bytes,
                                     unsigned flags);
    elu_cu_result (*MemFree)(elu_cu_deviceptr ptr);
    elu_cu_result (*MemcpyHtoD)(elu_cu_deviceptr dst, const void *src,
                                size_t bytes);
    elu_cu_result (*MemcpyDtoH)(void *dst, elu_cu_deviceptr src, size_t bytes);
    elu_cu_result (*MemcpyDtoDAsync)(elu_cu_deviceptr dst, elu_cu_deviceptr src,
                                     size_t bytes, elu_cu_stream stream);
    elu_cu_result (*MemsetD8)(elu_cu_deviceptr dst, unsigned char value, size_t bytes);
    elu_cu_result (*StreamCreate)(elu_cu_stream *stream, unsigned flags);
    /* Graph capture and replay, and module loading by name: elu-bench's
     * measures of host cost. */
    elu_cu_result (*StreamBeginCapture)(elu_cu_stream stream, int mode);
    elu_cu_result (*StreamEndCapture)(elu_cu_stream stream, void **graph);
    elu_cu_result (*GraphInstantiate)(void **exec, void *graph, unsigned long long flags);
    elu_cu_result (*GraphLaunch)(void *exec, elu_cu_stream stream);
    elu_cu_result (*GraphExecDestroy)(void *exec);
    elu_cu_result (*GraphDestroy)(void *graph);
    elu_cu_result (*StreamSynchronize)(elu_cu_stream stream);
    elu_cu_result (*StreamDestroy)(elu_cu_stream stream);
    /* Timing: ELU_AUTOTUNE's measures (tune.c). */
    elu_cu_result (*EventCreate)(elu_cu_event *event, unsigned flags);
    elu_cu_result (*EventRecord)(elu_cu_event event, elu_cu_stream stream);
    elu_cu_result (*EventSynchronize)(elu_cu_event event);
    elu_cu_result (*EventElapsedTime)(float *ms, elu_cu_event start, elu_cu_event end);
    elu_cu_result (*EventDestroy)(elu_cu_event event);
};

struct elu_nvrtc_api {
    int (*Version)(int *major, int *minor);
    const char *(*GetErrorString)(int result);
    int (*GetNumSupportedArchs)(int *count);
    int (*GetSupportedArchs)(int *archs);
    int (*CreateProgram)(elu_nvrtc_program *prog, const char *src,
                         const char *name, int num_headers,
                         const char *const *headers,
                         const char *const *include_names);
    int (*CompileProgram)(elu_nvrtc_program prog, int num_options,
                          const char *const *options);
    int (*GetProgramLogSize)(elu_nvrtc_program prog, size_t *size);
    int (*GetProgramLog)(elu_nvrtc_program prog, char *log);
    int (*GetCUBINSize)(elu_nvrtc_program prog, size_t *size);
    int (*GetCUBIN)(elu_nvrtc_program prog, char *cubin);
    int (*GetPTXSize)(elu_nvrtc_program prog, size_t *size);
    int (*GetPTX)(elu_nvrtc_program prog, char *ptx);
    int (*DestroyProgram)(elu_nvrtc_program *prog);
};

/* Load libcuda.so.1 ($ELU_CUDA_LIBRARY, unless empty, overrides the name)
 * and resolve the table, once per process and thread-safely. cuInit is not
 * called here.
 * Returns NULL on failure with *why set to a static description. */
const struct elu_cuda_api *elu_cuda_load(const char **why);

/* Load NVRTC: $ELU_NVRTC_LIBRARY unless unset or empty, else
 * libnvrtc.so.13, .12, .11.2 and libnvrtc.so in that order. Once per
 * process, thread-safe. Returns NULL on failure with *why set to a static
 * description. */
const struct elu_nvrtc_api *elu_nvrtc_load(const char **why);

/* cuInit(0), once per process, after elu_cuda_load() succeeded; later calls
 * return the first one's result. It also arms fork detection: see
 * elu_cuda_forked(). */
elu_cu_result elu_cuda_init(void);

/* True in a process forked (directly or not) from one in which
 * elu_cuda_init() had succeeded: CUDA state does not survive fork, and any
 * driver call there may fail or hang, so libelu makes none. */
bool elu_cuda_forked(void);

/* A CUresult or nvrtcResult for a message: its name and number, e.g.
 * "CUDA_ERROR_OUT_OF_MEMORY (2)", and the number alone where the library
 * cannot name it. Returned by value, so that it may be a printf argument:
 * elu_fail(..., "%s", elu_cu_result_text(cu, r).text). */
struct elu_result_text {
    char text[96];
};
struct elu_result_text elu_cu_result_text(const struct elu_cuda_api *cu, elu_cu_result r);
struct elu_result_text elu_nvrtc_result_text(const struct elu_nvrtc_api *nv, int r);

#endif
