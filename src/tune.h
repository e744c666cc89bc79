/* Launch shapes of the contiguous kernels: threads per block and 16-byte
 * packs per thread, for each kernel and size of input. The heuristic
 * derives them from the device's attributes; ELU_AUTOTUNE measures them
 * once per GPU model and dtype and keeps the winners in the disk cache. */
#ifndef ELU_TUNE_H
#define ELU_TUNE_H

#include "cuda_loader.h"
#include "internal.h"

/* Sizes are classed by the bytes of one operand: class c stands for
 * 2^(14 + 2c) bytes (16 KiB to 64 MiB) and takes the sizes within a factor
 * of 2 of it; the first and last take everything below and above. */
#define ELU_SIZE_CLASSES 7

struct elu_shape {
    uint16_t threads; /* per block */
    uint16_t packs;   /* per thread, at most elu_max_packs() */
};

/* One dtype's shapes, by enum elu_kernel and size class. */
struct elu_tuning {
    struct elu_shape shape[3][ELU_SIZE_CLASSES];
};

/* The packs per thread each contiguous kernel is compiled for
 * (kernels_src/elu.cu's FORWARD_UNROLL and BACKWARD_UNROLL): a launch may
 * give each thread fewer, by a larger grid, never more. */
unsigned elu_max_packs(enum elu_kernel kernel);

/* The class of an operand of `bytes` bytes. */
unsigned elu_size_class(size_t bytes);

/* The shapes the device's attributes suggest: resident_threads is the
 * number of threads the device holds at once (multiprocessors times the
 * threads each can hold). */
void elu_tune_heuristic(unsigned resident_threads, struct elu_tuning *out);

/* Launches one contiguous kernel with the given shape (launch.c). */
typedef elu_cu_result (*elu_tune_launch)(void *arg, enum elu_kernel kernel,
                                         struct elu_shape shape, elu_cu_deviceptr a,
                                         elu_cu_deviceptr b, elu_cu_deviceptr out,
                                         size_t n, elu_cu_stream stream);

/* The device being tuned for; its primary context is current. */
struct elu_tune_device {
    const struct elu_cuda_api *cu;
    const char *name;
    int sm;
    unsigned resident_threads;
};

/* ELU_AUTOTUNE: dtype's shapes on this device, from the disk cache when an
 * entry for this GPU model, dtype and kernel source is there, else measured
 * (through `launch`, on a private stream, with 3 x 16 MiB of scratch device
 * memory, each candidate timed against the heuristic's; the largest class
 * keeps the heuristic's) and stored. *out starts as the heuristic's shapes,
 * which stay where measuring fails: failures are noted as the last error,
 * never fatal. */
void elu_tune(elu_ctx *ctx, const struct elu_tune_device *d, elu_dtype dtype,
              elu_tune_launch launch, void *arg, struct elu_tuning *out);

#endif
