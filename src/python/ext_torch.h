/* What libelu._ext (ext.c) and libelu._torch_ext (torch_ext.cpp) hand each
 * other, in capsules: the one PyTorch tensors read and made through
 * PyTorch's C++ API, the other its calls of the library, which autograd's
 * C++ function (torch_autograd.cpp) makes. */
#ifndef ELU_EXT_TORCH_H
#define ELU_EXT_TORCH_H

#include <Python.h>

#include <dlpack/dlpack.h>

#include "elu.h"

/* libelu._torch_ext's attribute "api", and what libelu._ext.api() returns. */
#define ELU_TORCH_API_NAME "libelu._torch_ext.api"
#define ELU_EXT_API_NAME "libelu._ext.api"

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
    /* Whether libelu may write an out tensor (read by `read`), as PyTorch's
     * in-place operations ask: NOT_TAKEN where autograd records gradients
     * for it, or for an inference tensor outside inference mode. */
    int (*writable)(PyObject *out);
    /* After the write: its version counter bumped. */
    void (*wrote)(PyObject *out);
} elu_torch_api;

/* The library's elu_run_dlpack and elu_run_backward_dlpack. */
typedef elu_status (*elu_run_fn)(elu_ctx *, const elu_params *, const DLTensor *, DLTensor *,
                                 elu_stream);
typedef elu_status (*elu_run_backward_fn)(elu_ctx *, const elu_params *, const DLTensor *,
                                          const DLTensor *, bool, DLTensor *, elu_stream);

typedef struct {
    /* libelu._ext.elu(x, alpha, scale, input_scale, out) for its module
     * `ext`, with the parameters it read into *p: out (x itself in place),
     * a new array like x where out is None, or NotImplemented where the
     * general path must serve; NULL with an exception set. */
    PyObject *(*elu)(PyObject *ext, PyObject *const args[5], elu_params *p);
    /* The default context of a CUDA device, or of the CPU (-1); NULL with
     * an exception set. */
    elu_ctx *(*context)(PyObject *ext, int device);
    /* The library's elu_run_dlpack, elu_run_backward_dlpack and
     * elu_ctx_last_error, which need no Python. */
    elu_run_fn run;
    elu_run_backward_fn run_backward;
    const char *(*last_error)(const elu_ctx *);
    /* libelu.EluError for a failed call's status and the context's last
     * error, set as the Python exception; under the GIL. */
    void (*raise_failure)(PyObject *ext, const elu_ctx *ctx, elu_status status);
} elu_ext_api;

#endif
