/* What libelu._torch_ext (torch_ext.cpp) lends libelu._ext (ext.c): PyTorch
 * tensors read and made through PyTorch's C++ API, in a capsule named
 * ELU_TORCH_API_NAME, its module's attribute "api". */
#ifndef ELU_EXT_TORCH_H
#define ELU_EXT_TORCH_H

#include <Python.h>

#include <dlpack/dlpack.h>

#include "elu.h"

#define ELU_TORCH_API_NAME "libelu._torch_ext.api"

/* What reading an argument came to: NOT_TAKEN sends the call to the
 * general path; FAILED has a Python exception set. */
enum { TAKEN = 1, NOT_TAKEN = 0, FAILED = -1 };

typedef struct {
    /* An exact torch.Tensor (or Parameter) of float32, float64, float16 or
     * bfloat16, strided, with storage, without the negative bit, on the CPU
     * (*device -1) or a CUDA device (its ordinal): its data pointer, rank,
     * dtype and device into t, and t->shape and t->strides pointing at the
     * tensor's own, valid while it lives; else NOT_TAKEN. */
    int (*read)(PyObject *tensor, DLTensor *t, int *device);
    /* A new tensor as torch.empty_like(like) makes it; NULL with PyTorch's
     * exception set. */
    PyObject *(*empty_like)(PyObject *like);
    /* PyTorch's current CUDA stream on a device (NULL: the legacy default
     * stream); FAILED with PyTorch's exception set. */
    int (*stream)(int device, elu_stream *stream);
} elu_torch_api;

#endif
