#include "devmem.h"

#include "cuda_loader.h"
#include "timing.h"

#include <stdint.h>
#include <stdio.h>

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

static const char EMPTY_PTX[] =
    ".version 7.0\n"
    ".target sm_50\n"
    ".address_size 64\n"
    ".visible .entry empty(.param .u64 x, .param .u64 y, .param .u64 n,\n"
    "                      .param .align 4 .b8 c[12], .param .u64 table, .param .u64 head)\n"
    "{\n"
    "    ret;\n"
    "}\n";

void *dev_empty_kernel(void)
{
    elu_cu_module module;
    elu_cu_function fn;
    if (cu->ModuleLoadData(&module, EMPTY_PTX) != 0 ||
        cu->ModuleGetFunction(&fn, module, "empty") != 0)
        return NULL;
    return fn; /* the module stays loaded until the process ends */
}

bool dev_launch_empty(void *kernel, unsigned blocks, unsigned threads, void **params,
                      elu_stream stream)
{
    return cu->LaunchKernel(kernel, blocks, 1, 1, threads, 1, 1, 0, stream, params, NULL) == 0;
}

void *dev_capture(elu_stream stream, bool (*record)(void *arg, elu_stream stream), void *arg)
{
    void *graph = NULL, *exec = NULL;
    if (cu->StreamBeginCapture(stream, 2 /* CU_STREAM_CAPTURE_MODE_RELAXED */) != 0)
        return NULL;
    const bool recorded = record(arg, stream);
    if (cu->StreamEndCapture(stream, &graph) != 0 || !recorded)
        return NULL;
    const bool ok = cu->GraphInstantiate(&exec, graph, 0) == 0;
    cu->GraphDestroy(graph);
    return ok ? exec : NULL;
}

bool dev_replay(void *graph, elu_stream stream) { return cu->GraphLaunch(graph, stream) == 0; }

void dev_graph_destroy(void *graph)
{
    if (graph)
        cu->GraphExecDestroy(graph);
}

double dev_nvrtc_floor_ms(int device, unsigned salt, double *load_ms)
{
    const char *why;
    const double t_load = now_s();
    const struct elu_nvrtc_api *nvrtc = elu_nvrtc_load(&why);
    *load_ms = (now_s() - t_load) * 1e3;
    elu_cu_device dev;
    int major = 0, minor = 0;
    if (!nvrtc || cu->DeviceGet(&dev, device) != 0 ||
        cu->DeviceGetAttribute(&major, ELU_CU_DEVICE_ATTRIBUTE_CC_MAJOR, dev) != 0 ||
        cu->DeviceGetAttribute(&minor, ELU_CU_DEVICE_ATTRIBUTE_CC_MINOR, dev) != 0)
        return -1;
    char src[128], arch[32];
    snprintf(src, sizeof src,
             "extern \"C\" __global__ void k(float *y) { y[threadIdx.x] = %u.0f; }", salt);
    snprintf(arch, sizeof arch, "-arch=sm_%d%d", major, minor);
    const char *const options[] = {arch};
    elu_nvrtc_program prog;
    const double t0 = now_s();
    if (nvrtc->CreateProgram(&prog, src, "floor.cu", 0, NULL, NULL) != 0)
        return -1;
    const int r = nvrtc->CompileProgram(prog, 1, options);
    const double ms = (now_s() - t0) * 1e3;
    nvrtc->DestroyProgram(&prog);
    return r == 0 ? ms : -1;
}
