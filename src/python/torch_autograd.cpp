// ELU's autograd in C++, as aten's: the nodes that the operators' Autograd
// kernels (torch_ops.cpp) and libelu.torch's plain eager calls (elu_eager)
// make, the nodes a torch.autograd.Function would make in Python, without
// its Python (docs/DESIGN.md, The Python call). elu saves its input; its
// backward is the operator libelu::elu_backward, whose own node gives the
// second derivatives (aten's elu_double_backward). In place stays with
// Python (libelu._torch_ops): a torch::autograd::Function that marks its
// input dirty holds a view's base in a reference cycle (it saves the
// output as an input) and fails compiled autograd's checks.
#include "torch_ext.h"

#include <ATen/PythonTorchFunctionTLS.h>
#include <ATen/TensorOperators.h>
#include <ATen/core/grad_mode.h>
#include <c10/core/impl/LocalDispatchKeySet.h>
#include <c10/core/impl/TorchDispatchModeTLS.h>
#include <torch/csrc/Exceptions.h>
#include <torch/csrc/autograd/custom_function.h>
#include <torch/csrc/autograd/python_variable.h>
#include <torch/csrc/jit/frontend/tracer.h>
#include <torch/csrc/utils/object_ptr.h>

namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

// A result computed before its node is made: a type of its own, which
// Function::apply does not take for an input.
struct Computed {
    at::Tensor value;
};

struct EluFunction : public torch::autograd::Function<EluFunction> {
    static at::Tensor forward(AutogradContext *node, const at::Tensor &x, Computed y,
                              double alpha, double scale, double input_scale)
    {
        node->save_for_backward({x});
        node->saved_data["constants"] = std::vector<double>{alpha, scale, input_scale};
        return y.value;
    }

    static variable_list backward(AutogradContext *node, variable_list grads)
    {
        const at::Tensor x = node->get_saved_variables()[0];
        const auto c = node->saved_data["constants"].toDoubleVector();
        return {elu_torch::elu_backward(grads[0], x, c[0], c[1], c[2], false), {}, {}, {}, {}};
    }
};

// aten's elu_double_backward, term for term (FunctionsManual.cpp).
struct EluBackwardFunction : public torch::autograd::Function<EluBackwardFunction> {
    static at::Tensor forward(AutogradContext *node, const at::Tensor &grad_output,
                              const at::Tensor &saved, Computed grad_input, double alpha,
                              double scale, double input_scale, bool is_result)
    {
        node->save_for_backward({grad_output, saved});
        node->saved_data["constants"] = std::vector<double>{alpha, scale, input_scale};
        node->saved_data["is_result"] = is_result;
        return grad_input.value;
    }

    static variable_list backward(AutogradContext *node, variable_list grads)
    {
        const variable_list tensors = node->get_saved_variables();
        const at::Tensor &grad_output = tensors[0], &saved = tensors[1], &grad = grads[0];
        const auto c = node->saved_data["constants"].toDoubleVector();
        const bool is_result = node->saved_data["is_result"].toBool();
        at::Tensor d_grad_output, d_saved;
        if (node->needs_input_grad(0))
            d_grad_output = elu_torch::elu_backward(grad, saved, c[0], c[1], c[2], is_result);
        if (node->needs_input_grad(1)) {
            const at::Tensor negative = (saved < 0).type_as(grad);
            d_saved = is_result ? grad * grad_output * c[2] * negative
                                : elu_torch::elu_backward(grad * grad_output * c[2], saved, c[0],
                                                          c[1], c[2], false) *
                                      negative;
        }
        return {d_grad_output, d_saved, {}, {}, {}, {}, {}};
    }
};

} // namespace

at::Tensor elu_torch::with_elu_node(const at::Tensor &x, const at::Tensor &y, double alpha,
                                    double scale, double input_scale)
{
    return EluFunction::apply(x, Computed{y}, alpha, scale, input_scale);
}

at::Tensor elu_torch::with_elu_backward_node(const at::Tensor &grad_output,
                                             const at::Tensor &saved,
                                             const at::Tensor &grad_input, double alpha,
                                             double scale, double input_scale, bool is_result)
{
    return EluBackwardFunction::apply(grad_output, saved, Computed{grad_input}, alpha, scale,
                                      input_scale, is_result);
}

// A functorch transform is on while its front key is included in the
// thread's dispatch keys (functorch's DynamicLayer, whose header needs more
// than PyTorch installs).
bool elu_torch::unobserved()
{
    return !at::impl::torch_function_mode_enabled() &&
           c10::impl::TorchDispatchModeTLS::stack_len() == 0 &&
           !torch::jit::tracer::isTracing() &&
           !c10::impl::tls_is_dispatch_key_included(
               c10::DispatchKey::FuncTorchDynamicLayerFrontMode);
}

bool elu_torch::has_tangent(const at::Tensor &x)
{
    return x._fw_grad(/*level=*/0).defined();
}

PyObject *elu_torch::elu_eager(PyObject *ext, const elu_ext_api *api, PyObject *const args[5])
{
    HANDLE_TH_ERRORS
    TORCH_CHECK_NOT_IMPLEMENTED(!has_tangent(THPVariable_Unpack(args[0])),
                                "libelu's ELU has no forward-mode derivative");
    elu_params p;
    THPObjectPtr y(api->elu(ext, args, &p));
    const at::Tensor &x = THPVariable_Unpack(args[0]);
    if (!y || y.get() == Py_NotImplemented || !at::GradMode::is_enabled() || !x.requires_grad())
        return y.release();
    return THPVariable_Wrap(
        with_elu_node(x, THPVariable_Unpack(y.get()), p.alpha, p.scale, p.input_scale));
    END_HANDLE_TH_ERRORS
}
