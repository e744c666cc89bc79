#include "bench_dev.h"

#include "cuda_loader.h"
#include "timing.h"

#include <stdint.h>
#include <stdio.h>

/* The driver, already initialized by dev_init() (examples/devmem.c): the
 * same library in this process, whichever loader opened it. */
static const struct elu_cuda_api *driver(void)
{
    const char *why;
    return elu_cuda_load(&why);
}

bool dev_copy_async(void *dst, const void *src, size_t bytes)
{
    return driver()->MemcpyDtoDAsync((elu_cu_deviceptr)(uintptr_t)dst,
                                     (elu_cu_deviceptr)(uintptr_t)src, bytes, NULL) == 0;
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
    if (driver()->ModuleLoadData(&module, EMPTY_PTX) != 0 ||
        driver()->ModuleGetFunction(&fn, module, "empty") != 0)
        return NULL;
    return fn; /* the module stays loaded until the process ends */
}

bool dev_launch_empty(void *kernel, unsigned blocks, unsigned threads, void **params,
                      elu_stream stream)
{
    return driver()->LaunchKernel(kernel, blocks, 1, 1, threads, 1, 1, 0, stream, params,
                                  NULL) == 0;
}

void *dev_capture(elu_stream stream, bool (*record)(void *arg, elu_stream stream), void *arg)
{
    const struct elu_cuda_api *cu = driver();
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

bool dev_replay(void *graph, elu_stream stream)
{
    return driver()->GraphLaunch(graph, stream) == 0;
}

void dev_graph_destroy(void *graph)
{
    if (graph)
        driver()->GraphExecDestroy(graph);
}

double dev_nvrtc_floor_ms(int device, unsigned salt, double *load_ms)
{
    const struct elu_cuda_api *cu = driver();
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
