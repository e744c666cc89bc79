/* What elu-bench needs of the driver and NVRTC beyond the examples' device
 * memory (examples/devmem.h), through libelu's own loader (src/cuda_loader.h):
 * NVRTC as libelu loads it, for the floor a cold first call is held against. */
#ifndef ELU_BENCH_DEV_H
#define ELU_BENCH_DEV_H

#include "devmem.h"

/* Device-to-device copy on the legacy default stream (the benchmark's
 * bandwidth yardstick). */
bool dev_copy_async(void *dst, const void *src, size_t bytes);

/* For the host-cost measures. An empty kernel with elu_forward's
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
