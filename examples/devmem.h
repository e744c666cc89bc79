/* Device memory for the examples. A real application has the CUDA runtime
 * (cudaMalloc) or a framework for this; the examples borrow libelu's
 * internal driver loader so they build without the CUDA toolkit. */
#ifndef ELU_EXAMPLES_DEVMEM_H
#define ELU_EXAMPLES_DEVMEM_H

#include "elu.h"

#include <stdbool.h>
#include <stddef.h>

/* Make `device`'s primary context current on this thread (libelu uses
 * the same one). */
bool dev_init(int device);
/* The number of CUDA devices; 0 without a driver. */
int dev_count(void);
/* `bytes` of device memory, or NULL. */
void *dev_alloc(size_t bytes);
/* A device copy of `bytes` bytes of host memory, or NULL. */
void *dev_upload(const void *host, size_t bytes);
/* Device-to-device copy on the legacy default stream (the benchmark's
 * bandwidth yardstick). */
bool dev_copy_async(void *dst, const void *src, size_t bytes);
/* `bytes` from device memory at `dev` into host memory. */
bool dev_download(void *host, const void *dev, size_t bytes);
/* Wait for all work on this thread's current device. */
bool dev_sync(void);
/* A non-blocking stream on the current device, its synchronize, its end. */
bool dev_stream_create(elu_stream *stream);
bool dev_stream_sync(elu_stream stream);
void dev_stream_destroy(elu_stream stream);
void dev_free(void *dev);

/* For elu-bench's host-cost measures. An empty kernel with elu_forward's
 * parameters (x, y, n, three floats, table, head), loaded from PTX (the driver
 * compiles it; no NVRTC), and one launch of it: the floor an elu_run call
 * is held against. NULL / false on failure. */
void *dev_empty_kernel(void);
bool dev_launch_empty(void *kernel, unsigned blocks, unsigned threads, void **params,
                      elu_stream stream);
/* Capture the work `record` queues on `stream` into a graph, ready to
 * replay; NULL on failure. */
void *dev_capture(elu_stream stream, bool (*record)(void *arg, elu_stream stream), void *arg);
bool dev_replay(void *graph, elu_stream stream);
void dev_graph_destroy(void *graph);

/* The floor a cold first call is held against: milliseconds that NVRTC (as
 * libelu loads it, before the clock starts) takes to create and compile
 * its first program in this process, a one-line kernel for `device`'s
 * architecture whose constant is `salt` (NVRTC 12.9 and later return a
 * program they compiled before at once). Negative on failure. *load_ms:
 * the milliseconds that loading NVRTC took before (0 where this process
 * had loaded it), which a cold elu_run pays too. */
double dev_nvrtc_floor_ms(int device, unsigned salt, double *load_ms);

#endif
