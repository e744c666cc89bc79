// What torch_ext.cpp and torch_autograd.cpp share.
#ifndef ELU_TORCH_EXT_H
#define ELU_TORCH_EXT_H

#include "ext_torch.h"

#include <ATen/core/Tensor.h>

namespace elu_torch {

// elu_torch_api.read for a tensor already unpacked.
int read(const at::Tensor &x, DLTensor *t, int *device);

// PyTorch's current CUDA stream on a device; throws as PyTorch does.
elu_stream current_stream(int device);

// ELU with autograd (torch_autograd.cpp) of args[0], an exact tensor that
// needs gradients, as `api` (libelu._ext's, for its module `ext`) runs
// args (out None): a new tensor; NotImplemented where libelu._ext leaves
// x to the general path; NULL with an exception set.
PyObject *elu_autograd(PyObject *ext, const elu_ext_api *api, PyObject *const args[5]);

} // namespace elu_torch

#endif
