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

// Whether PyTorch need not see a call: no torch function or dispatch mode,
// no TorchScript tracing, no functorch transform (torch_autograd.cpp).
bool unobserved();

// Whether forward-mode AD carries a tangent for x, which libelu's nodes
// have no rule for (torch_autograd.cpp).
bool has_tangent(const at::Tensor &x);

// ELU of args[0], an exact tensor, as `api` (libelu._ext's, for its module
// `ext`) runs args (out None), with autograd's node where it records
// gradients for x (torch_autograd.cpp): a new tensor; NotImplemented where
// libelu._ext leaves x to the general path; NULL with an exception set
// (NotImplementedError for a tangent of forward-mode AD).
PyObject *elu_eager(PyObject *ext, const elu_ext_api *api, PyObject *const args[5]);

// y, the ELU of x for these constants, as the output of the node that
// saves x (torch_autograd.cpp).
at::Tensor with_elu_node(const at::Tensor &x, const at::Tensor &y, double alpha, double scale,
                         double input_scale);

// grad_input, elu_backward of these arguments, as the output of the node
// that differentiates it again (torch_autograd.cpp).
at::Tensor with_elu_backward_node(const at::Tensor &grad_output, const at::Tensor &saved,
                                  const at::Tensor &grad_input, double alpha, double scale,
                                  double input_scale, bool is_result);

// The operator libelu::elu_backward, through the dispatcher (torch_ops.cpp).
at::Tensor elu_backward(const at::Tensor &grad_output, const at::Tensor &saved, double alpha,
                        double scale, double input_scale, bool is_result);

// Register the operators' C++ kernels (torch_ops.cpp), which call `api`
// (libelu._ext's, for its module `ext`) and leave what it does not take
// to `kernels`, the Python kernels of elu, elu_ and elu_backward; once
// for the process. None, or NULL with an exception set.
PyObject *register_operators(PyObject *ext, const elu_ext_api *api, PyObject *const kernels[3]);

} // namespace elu_torch

#endif
