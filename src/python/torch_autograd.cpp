// ELU's autograd in C++, for libelu.torch's plain eager calls that need
// gradients and are not in place: the node a torch.autograd.Function
// would make in Python, without its Python (docs/DESIGN.md, The Python
// call). It saves the input, as aten's elu does. The backward is libelu's,
// or the operator libelu::elu_backward where PyTorch must see it (a
// backward that is itself differentiated, a dispatch mode, tensor
// subclasses) or where the library leaves the tensors to the general path.
// In place stays with the Python ELUFunction: a torch::autograd::Function
// that marks its input dirty holds a view's base in a reference cycle (it
// saves the output as an input) and fails compiled autograd's checks.
#include "torch_ext.h"

#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/ops/empty_like.h>
#include <c10/core/impl/TorchDispatchModeTLS.h>
#include <torch/csrc/Exceptions.h>
#include <torch/csrc/autograd/custom_function.h>
#include <torch/csrc/autograd/python_variable.h>
#include <torch/csrc/utils/object_ptr.h>

namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

// The forward's output, computed before the node is made: a type of its own,
// which Function::apply does not take for an input.
struct Computed {
    at::Tensor y;
};

// libelu::elu_backward from the saved input, through the dispatcher
// (registered by libelu._torch_ops, which libelu.torch imports).
at::Tensor backward_operator(const at::Tensor &grad, const at::Tensor &x, const elu_params &p)
{
    static const auto op =
        c10::Dispatcher::singleton()
            .findSchemaOrThrow("libelu::elu_backward", "")
            .typed<at::Tensor(const at::Tensor &, const at::Tensor &, double, double, double,
                              bool)>();
    return op.call(grad, x, p.alpha, p.scale, p.input_scale, false);
}

// Whether the backward may call the library itself, as the dispatcher would
// send the operator to it: gradients not recorded, no dispatch mode, no
// tensor subclass.
bool direct(const at::Tensor &grad, const at::Tensor &saved)
{
    return !at::GradMode::is_enabled() && c10::impl::TorchDispatchModeTLS::stack_len() == 0 &&
           !grad.key_set().has(c10::DispatchKey::Python) &&
           !saved.key_set().has(c10::DispatchKey::Python);
}

// The library as the backward calls it, off the GIL: a context and the
// two functions, which live as long as libelu.so (never unloaded), saved
// with the node as integers (AutogradContext::saved_data holds IValues).
struct Library {
    elu_ctx *ctx;
    elu_run_backward_fn run_backward;
    const char *(*last_error)(const elu_ctx *);

    std::vector<int64_t> saved() const
    {
        return {reinterpret_cast<int64_t>(ctx), reinterpret_cast<int64_t>(run_backward),
                reinterpret_cast<int64_t>(last_error)};
    }
    static Library of(const std::vector<int64_t> &v)
    {
        return {reinterpret_cast<elu_ctx *>(v[0]), reinterpret_cast<elu_run_backward_fn>(v[1]),
                reinterpret_cast<const char *(*)(const elu_ctx *)>(v[2])};
    }
};

// The library's backward into a new tensor like grad; false where it leaves
// the tensors to the general path (the operator serves them).
bool library_backward(const at::Tensor &grad, const at::Tensor &saved, const elu_params &p,
                      const Library &lib, at::Tensor *out)
{
    DLTensor g, s, o;
    int g_device, s_device, o_device;
    if (elu_torch::read(grad, &g, &g_device) != TAKEN ||
        elu_torch::read(saved, &s, &s_device) != TAKEN || g_device != s_device)
        return false;
    *out = at::empty_like(grad);
    if (elu_torch::read(*out, &o, &o_device) != TAKEN)
        return false;
    const elu_stream stream = g_device < 0 ? nullptr : elu_torch::current_stream(g_device);
    const elu_status status = lib.run_backward(lib.ctx, &p, &g, &s, false, &o, stream);
    if (status == ELU_ERR_INVALID_ARG || status == ELU_ERR_UNSUPPORTED)
        return false;
    TORCH_CHECK(status == ELU_OK, "libelu: ", lib.last_error(lib.ctx));
    return true;
}

struct EluFunction : public torch::autograd::Function<EluFunction> {
    // x, and libelu's ELU of it, for the constants: what the backward needs
    // saved, the library included.
    static at::Tensor forward(AutogradContext *node, const at::Tensor &x, Computed computed,
                              double alpha, double scale, double input_scale,
                              std::vector<int64_t> library)
    {
        node->save_for_backward({x});
        node->saved_data["constants"] = std::vector<double>{alpha, scale, input_scale};
        node->saved_data["library"] = std::move(library);
        return computed.y;
    }

    static variable_list backward(AutogradContext *node, variable_list grads)
    {
        const at::Tensor x = node->get_saved_variables()[0];
        const auto constants = node->saved_data["constants"].toDoubleVector();
        const elu_params p = {ELU_F32, constants[0], constants[1], constants[2]};
        const Library lib = Library::of(node->saved_data["library"].toIntVector());
        const at::Tensor &grad = grads[0];
        at::Tensor grad_x;
        if (!direct(grad, x) || !library_backward(grad, x, p, lib, &grad_x))
            grad_x = backward_operator(grad, x, p);
        return {grad_x, {}, {}, {}, {}, {}};
    }
};

} // namespace

PyObject *elu_torch::elu_autograd(PyObject *ext, const elu_ext_api *api,
                                  PyObject *const args[5])
{
    HANDLE_TH_ERRORS
    elu_params p;
    THPObjectPtr y(api->elu(ext, args, &p));
    if (!y || y.get() == Py_NotImplemented)
        return y.release();
    const at::Tensor &x = THPVariable_Unpack(args[0]);
    elu_ctx *ctx = api->context(ext, x.is_cuda() ? x.device().index() : -1);
    if (!ctx)
        return nullptr;
    const Library lib = {ctx, api->run_backward, api->last_error};
    return THPVariable_Wrap(EluFunction::apply(x, Computed{THPVariable_Unpack(y.get())}, p.alpha,
                                               p.scale, p.input_scale, lib.saved()));
    END_HANDLE_TH_ERRORS
}
