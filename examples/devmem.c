#include "devmem.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

typedef int CUresult; /* 0 is CUDA_SUCCESS */
typedef unsigned long long CUdeviceptr;
#define CU_STREAM_NON_BLOCKING 1

/* The driver's entry points the examples call, each resolved by the symbol
 * that cuda.h maps its name to (cuMemAlloc is cuMemAlloc_v2). */
static struct {
    CUresult (*Init)(unsigned flags);
    CUresult (*DeviceGetCount)(int *count);
    CUresult (*DeviceGet)(int *device, int ordinal);
    CUresult (*DevicePrimaryCtxRetain)(void **context, int device);
    CUresult (*CtxPushCurrent)(void *context);
    CUresult (*CtxSynchronize)(void);
    CUresult (*MemAlloc)(CUdeviceptr *ptr, size_t bytes);
    CUresult (*MemFree)(CUdeviceptr ptr);
    CUresult (*MemcpyHtoD)(CUdeviceptr dst, const void *src, size_t bytes);
    CUresult (*MemcpyDtoH)(void *dst, CUdeviceptr src, size_t bytes);
    CUresult (*StreamCreate)(elu_stream *stream, unsigned flags);
    CUresult (*StreamSynchronize)(elu_stream stream);
    CUresult (*StreamDestroy)(elu_stream stream);
} cu;
static bool cu_ready;
static pthread_once_t cu_once = PTHREAD_ONCE_INIT;

/* Stores dlsym's result into a function pointer: ISO C has no conversion
 * between the two, POSIX guarantees they have one representation. */
static bool resolve(void *lib, const char *symbol, void *fn)
{
    void *address = dlsym(lib, symbol);
    memcpy(fn, &address, sizeof address);
    return address != NULL;
}

static void load_driver(void)
{
    /* The driver libelu loads (the README's ELU_CUDA_LIBRARY). */
    const char *name = getenv("ELU_CUDA_LIBRARY");
    void *lib = dlopen(name && *name ? name : "libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    cu_ready = lib && resolve(lib, "cuInit", &cu.Init) &&
               resolve(lib, "cuDeviceGetCount", &cu.DeviceGetCount) &&
               resolve(lib, "cuDeviceGet", &cu.DeviceGet) &&
               resolve(lib, "cuDevicePrimaryCtxRetain", &cu.DevicePrimaryCtxRetain) &&
               resolve(lib, "cuCtxPushCurrent_v2", &cu.CtxPushCurrent) &&
               resolve(lib, "cuCtxSynchronize", &cu.CtxSynchronize) &&
               resolve(lib, "cuMemAlloc_v2", &cu.MemAlloc) &&
               resolve(lib, "cuMemFree_v2", &cu.MemFree) &&
               resolve(lib, "cuMemcpyHtoD_v2", &cu.MemcpyHtoD) &&
               resolve(lib, "cuMemcpyDtoH_v2", &cu.MemcpyDtoH) &&
               resolve(lib, "cuStreamCreate", &cu.StreamCreate) &&
               resolve(lib, "cuStreamSynchronize", &cu.StreamSynchronize) &&
               resolve(lib, "cuStreamDestroy_v2", &cu.StreamDestroy) && cu.Init(0) == 0;
}

static bool driver_ready(void)
{
    pthread_once(&cu_once, load_driver);
    return cu_ready;
}

bool dev_init(int device)
{
    int handle;
    void *primary;
    return driver_ready() && cu.DeviceGet(&handle, device) == 0 &&
           cu.DevicePrimaryCtxRetain(&primary, handle) == 0 &&
           cu.CtxPushCurrent(primary) == 0;
}

int dev_count(void)
{
    int count = 0;
    return driver_ready() && cu.DeviceGetCount(&count) == 0 ? count : 0;
}

void *dev_alloc(size_t bytes)
{
    CUdeviceptr d = 0;
    return cu.MemAlloc(&d, bytes) == 0 ? (void *)(uintptr_t)d : NULL;
}

void *dev_upload(const void *host, size_t bytes)
{
    void *d = dev_alloc(bytes);
    if (d && cu.MemcpyHtoD((CUdeviceptr)(uintptr_t)d, host, bytes) != 0) {
        dev_free(d);
        return NULL;
    }
    return d;
}

bool dev_download(void *host, const void *dev, size_t bytes)
{
    return cu.MemcpyDtoH(host, (CUdeviceptr)(uintptr_t)dev, bytes) == 0;
}

bool dev_sync(void) { return cu.CtxSynchronize() == 0; }

bool dev_stream_create(elu_stream *stream)
{
    return cu.StreamCreate(stream, CU_STREAM_NON_BLOCKING) == 0;
}

bool dev_stream_sync(elu_stream stream) { return cu.StreamSynchronize(stream) == 0; }

void dev_stream_destroy(elu_stream stream) { cu.StreamDestroy(stream); }

void dev_free(void *dev)
{
    if (dev)
        cu.MemFree((CUdeviceptr)(uintptr_t)dev);
}
