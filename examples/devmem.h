/* Device memory for the examples. A real application has the CUDA runtime
 * (cudaMalloc) or a framework for this; the examples borrow libelu's
 * internal driver loader so they build without the CUDA toolkit. */
#ifndef ELU_EXAMPLES_DEVMEM_H
#define ELU_EXAMPLES_DEVMEM_H

#include <stdbool.h>
#include <stddef.h>

/* Make device 0's primary context current (libelu uses the same one). */
bool dev_init(void);
/* `bytes` of device memory, or NULL. */
void *dev_alloc(size_t bytes);
/* A device copy of `bytes` bytes of host memory, or NULL. */
void *dev_upload(const void *host, size_t bytes);
/* Device-to-device copy on the legacy default stream (the benchmark's
 * bandwidth yardstick). */
bool dev_copy_async(void *dst, const void *src, size_t bytes);
bool dev_download(void *host, const void *dev, size_t bytes);
bool dev_sync(void);
void dev_free(void *dev);

#endif
