#include "devmem.h"

#include "cuda_loader.h"

#include <stdint.h>

static const struct elu_cuda_api *cu;

bool dev_init(int device)
{
    const char *why;
    elu_cu_context primary;
    cu = elu_cuda_load(&why);
    return cu && elu_cuda_init() == 0 &&
           cu->DevicePrimaryCtxRetain(&primary, device) == 0 &&
           cu->CtxPushCurrent(primary) == 0;
}

int dev_count(void)
{
    const char *why;
    int count = 0;
    cu = elu_cuda_load(&why);
    if (!cu || elu_cuda_init() != 0 || cu->DeviceGetCount(&count) != 0)
        return 0;
    return count;
}

void *dev_alloc(size_t bytes)
{
    elu_cu_deviceptr d = 0;
    return cu->MemAlloc(&d, bytes) == 0 ? (void *)(uintptr_t)d : NULL;
}

void *dev_upload(const void *host, size_t bytes)
{
    void *d = dev_alloc(bytes);
    if (d && cu->MemcpyHtoD((elu_cu_deviceptr)(uintptr_t)d, host, bytes) != 0) {
        dev_free(d);
        return NULL;
    }
    return d;
}

bool dev_copy_async(void *dst, const void *src, size_t bytes)
{
    return cu->MemcpyDtoDAsync((elu_cu_deviceptr)(uintptr_t)dst,
                               (elu_cu_deviceptr)(uintptr_t)src, bytes, NULL) == 0;
}

bool dev_download(void *host, const void *dev, size_t bytes)
{
    return cu->MemcpyDtoH(host, (elu_cu_deviceptr)(uintptr_t)dev, bytes) == 0;
}

bool dev_sync(void) { return cu->CtxSynchronize() == 0; }

bool dev_stream_create(elu_stream *stream)
{
    return cu->StreamCreate(stream, 1 /* CU_STREAM_NON_BLOCKING */) == 0;
}

bool dev_stream_sync(elu_stream stream) { return cu->StreamSynchronize(stream) == 0; }

void dev_stream_destroy(elu_stream stream) { cu->StreamDestroy(stream); }

void dev_free(void *dev)
{
    if (dev)
        cu->MemFree((elu_cu_deviceptr)(uintptr_t)dev);
}
