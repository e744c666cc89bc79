/* The CUDA path: the device's primary context, the table of loaded kernel
 * modules, the background thread that compiles specializations while the
 * generic kernels serve them, and launches. */
#ifndef ELU_GPU_H
#define ELU_GPU_H

#include "internal.h"

/* Where a pointer's memory lives, as seen from a CUDA context. */
enum elu_place { ELU_PLACE_HOST, ELU_PLACE_DEVICE, ELU_PLACE_OTHER_DEVICE };

/* Attach ctx to device `ordinal`: load the driver, cuInit, retain the
 * primary context. On failure ctx->gpu stays NULL and the status and
 * last error say why. */
elu_status elu_gpu_open(elu_ctx *ctx, int ordinal);
void elu_gpu_close(elu_ctx *ctx);

elu_status elu_gpu_locate(elu_ctx *ctx, const void *p, enum elu_place *place);

/* ELU_PREWARM: set up the count specializations in c (malloc'd; the
 * context takes it) as first runs would, with the generic kernels that
 * serve them, on a thread of the context's own, then warm NVRTC up if
 * nothing compiled; elu_gpu_close() waits for the thread. */
elu_status elu_gpu_prewarm(elu_ctx *ctx, struct elu_coef *c, size_t count);

/* Load (compiling if needed) the specialized kernels for c now. */
elu_status elu_gpu_prepare(elu_ctx *ctx, const struct elu_coef *c);

/* Launch asynchronously on stream. For forward, b is NULL; layout is NULL
 * for n contiguous elements. */
elu_status elu_gpu_launch(elu_ctx *ctx, const struct elu_coef *c,
                          enum elu_kernel kernel, const void *a, const void *b,
                          void *out, size_t n, const struct elu_layout *layout,
                          elu_stream stream);

void elu_gpu_describe(const elu_ctx *ctx, elu_ctx_info *info);

#endif
