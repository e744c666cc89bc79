/* Device memory for the examples. A real application has the CUDA runtime
 * (cudaMalloc) or a framework for this; devmem.c makes the few driver calls
 * the examples need itself, loading the driver with dlopen, so the examples
 * build with libelu alone, without the CUDA toolkit. */
#ifndef ELU_EXAMPLES_DEVMEM_H
#define ELU_EXAMPLES_DEVMEM_H

#include <elu.h>

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
/* `bytes` from device memory at `dev` into host memory. */
bool dev_download(void *host, const void *dev, size_t bytes);
/* Wait for all work on this thread's current device. */
bool dev_sync(void);
/* A non-blocking stream on the current device, its synchronize, its end. */
bool dev_stream_create(elu_stream *stream);
bool dev_stream_sync(elu_stream stream);
void dev_stream_destroy(elu_stream stream);
void dev_free(void *dev);

#endif
