// The kernels of libelu's PyTorch operators (libelu::elu, elu_ and
// elu_backward, which libelu._torch_ops defines) in C++: for the CPU and
// CUDA the library's own calls, and the Autograd kernels of elu and
// elu_backward (torch_autograd.cpp's nodes). libelu._torch_ops registers
// them (register_operators) in place of its Python kernels, so that a call
// through the dispatcher, as torch.ops.libelu and torch.compile's graphs
// make it, runs no Python (docs/DESIGN.md, The Python call). What the
// library leaves to the general path (another dtype or layout, tensors on
// two devices) or refuses goes to those Python kernels, under the GIL,
// which word the error and raise Python's own exception types.
#include "torch_ext.h"

#include <ATen/core/LegacyTypeDispatch.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/core/grad_mode.h>
#include <ATen/ops/empty_like.h>
#include <c10/core/InferenceMode.h>
#include <torch/csrc/Exceptions.h>
#include <torch/csrc/autograd/python_variable.h>
#include <torch/csrc/autograd/variable.h>
#include <torch/csrc/utils/object_ptr.h>
#include <torch/library.h>

#include <atomic>
#include <memory>

namespace {

// The devices whose default contexts are kept here: the CPU's (-1) and
// CUDA's first 64, as libelu._ext keeps them; tensors on others go to the
// Python kernels.
constexpr int MAX_DEVICES = 64;

// What register_operators() was given, set before any kernel is registered
// and kept for the process: libelu._ext and its functions, the Python
// kernels (elu, elu_, elu_backward) and the default contexts met so far.
struct Bound {
    PyObject *ext;
    const elu_ext_api *api;
    PyObject *python_kernel[3];
    std::atomic<elu_ctx *> context[MAX_DEVICES + 1];
};
Bound *bound;

enum { ELU, ELU_, ELU_BACKWARD };

// The Python error set, thrown as PyTorch throws it back to Python.
[[noreturn]] void throw_python_error()
{
    python_error error;
    error.persist();
    throw error;
}

// The Python kernel's answer for these arguments (tensors, then the
// constants, then is_result for the backward): its result, undefined for
// elu_ (None), or its exception, thrown.
at::Tensor in_python(int kernel, std::initializer_list<at::Tensor> tensors,
                     const elu_params &p, int is_result = -1)
{
    pybind11::gil_scoped_acquire gil;
    const Py_ssize_t count = static_cast<Py_ssize_t>(tensors.size());
    THPObjectPtr args(PyTuple_New(count + 3 + (is_result >= 0)));
    if (!args)
        throw_python_error();
    Py_ssize_t i = 0;
    for (const at::Tensor &t : tensors)
        PyTuple_SET_ITEM(args.get(), i++, THPVariable_Wrap(t));
    for (double constant : {p.alpha, p.scale, p.input_scale})
        PyTuple_SET_ITEM(args.get(), i++, PyFloat_FromDouble(constant));
    if (is_result >= 0)
        PyTuple_SET_ITEM(args.get(), i++, PyBool_FromLong(is_result));
    for (Py_ssize_t k = 0; k < i; k++)
        if (!PyTuple_GET_ITEM(args.get(), k))
            throw_python_error();
    THPObjectPtr result(PyObject_CallObject(bound->python_kernel[kernel], args.get()));
    if (!result)
        throw_python_error();
    return result.get() == Py_None ? at::Tensor() : THPVariable_Unpack(result.get());
}

// The package's default context for a device (-1: the CPU), asked of
// libelu._ext once, under the GIL; NULL for a device beyond those kept.
elu_ctx *context_for(int device)
{
    if (device >= MAX_DEVICES)
        return nullptr;
    std::atomic<elu_ctx *> &slot = bound->context[device + 1];
    elu_ctx *ctx = slot.load(std::memory_order_acquire);
    if (ctx)
        return ctx;
    pybind11::gil_scoped_acquire gil;
    ctx = bound->api->context(bound->ext, device);
    if (!ctx)
        throw_python_error();
    slot.store(ctx, std::memory_order_release);
    return ctx;
}

// The library's run on one input (the forward) or two (the backward, from
// the saved input or output) into *out (a new tensor like the first input
// where it is undefined), on PyTorch's current stream: true where it ran;
// false where the library leaves the tensors to the general path (refusals
// come before any memory is touched), for the Python kernel to answer; the
// library's own failure (CUDA's, a compile's) thrown as libelu.EluError,
// as the Python kernel would raise it, without running the call again.
bool run(std::initializer_list<at::Tensor> inputs, at::Tensor *out, const elu_params &p,
         bool is_result = false)
{
    DLTensor t[3];
    int device[3] = {}, count = 0;
    for (const at::Tensor &x : inputs) {
        if (elu_torch::read(x, &t[count], &device[count]) != TAKEN ||
            device[count] != device[0])
            return false;
        count++;
    }
    elu_ctx *ctx = context_for(device[0]);
    if (!ctx)
        return false;
    if (!out->defined())
        *out = at::empty_like(*inputs.begin());
    if (elu_torch::read(*out, &t[2], &device[2]) != TAKEN)
        return false;
    const elu_stream stream = device[0] < 0 ? nullptr : elu_torch::current_stream(device[0]);
    const elu_ext_api &lib = *bound->api;
    const elu_status status = count == 1
                                  ? lib.run(ctx, &p, &t[0], &t[2], stream)
                                  : lib.run_backward(ctx, &p, &t[0], &t[1], is_result, &t[2],
                                                     stream);
    if (status == ELU_OK || status == ELU_ERR_INVALID_ARG || status == ELU_ERR_UNSUPPORTED)
        return status == ELU_OK;
    pybind11::gil_scoped_acquire gil;
    lib.raise_failure(bound->ext, ctx, status);
    throw_python_error();
}

elu_params params(double alpha, double scale, double input_scale)
{
    return {ELU_F32, alpha, scale, input_scale}; // the dtype is the tensors'
}

at::Tensor elu_kernel(const at::Tensor &x, double alpha, double scale, double input_scale)
{
    const elu_params p = params(alpha, scale, input_scale);
    at::Tensor y;
    return run({x}, &y, p) ? y : in_python(ELU, {x}, p);
}

// In place, as aten's in-place operations: an inference tensor outside
// inference mode (no version counter to tell autograd it changed) is left
// to the Python kernel, which refuses it; else x's version is bumped.
void elu__kernel(const at::Tensor &x, double alpha, double scale, double input_scale)
{
    const elu_params p = params(alpha, scale, input_scale);
    at::Tensor y = x;
    if ((x.is_inference() && !c10::InferenceMode::is_enabled()) || !run({x}, &y, p)) {
        in_python(ELU_, {x}, p);
        return;
    }
    if (!x.is_inference())
        torch::autograd::impl::bump_version(x);
}

at::Tensor elu_backward_kernel(const at::Tensor &grad_output, const at::Tensor &saved,
                               double alpha, double scale, double input_scale, bool is_result)
{
    const elu_params p = params(alpha, scale, input_scale);
    at::Tensor grad_input;
    return run({grad_output, saved}, &grad_input, p, is_result)
               ? grad_input
               : in_python(ELU_BACKWARD, {grad_output, saved}, p, is_result);
}

// The operators as the dispatcher calls them.
const auto &elu_operator()
{
    static const auto op = c10::Dispatcher::singleton()
                               .findSchemaOrThrow("libelu::elu", "")
                               .typed<at::Tensor(const at::Tensor &, double, double, double)>();
    return op;
}

const auto &elu_backward_operator()
{
    static const auto op =
        c10::Dispatcher::singleton()
            .findSchemaOrThrow("libelu::elu_backward", "")
            .typed<at::Tensor(const at::Tensor &, const at::Tensor &, double, double, double,
                              bool)>();
    return op;
}

// The Autograd kernels: the operator below autograd, and a node where a
// gradient is recorded.
at::Tensor elu_autograd_kernel(const at::Tensor &x, double alpha, double scale,
                               double input_scale)
{
    TORCH_CHECK_NOT_IMPLEMENTED(!elu_torch::has_tangent(x),
                                "libelu::elu has no forward-mode derivative");
    at::Tensor y;
    {
        at::AutoDispatchBelowADInplaceOrView below;
        y = elu_operator().call(x, alpha, scale, input_scale);
    }
    if (!at::GradMode::is_enabled() || !x.requires_grad())
        return y;
    return elu_torch::with_elu_node(x, y, alpha, scale, input_scale);
}

at::Tensor elu_backward_autograd_kernel(const at::Tensor &grad_output, const at::Tensor &saved,
                                        double alpha, double scale, double input_scale,
                                        bool is_result)
{
    TORCH_CHECK_NOT_IMPLEMENTED(
        !elu_torch::has_tangent(grad_output) && !elu_torch::has_tangent(saved),
        "libelu::elu_backward has no forward-mode derivative");
    at::Tensor grad_input;
    {
        at::AutoDispatchBelowADInplaceOrView below;
        grad_input =
            elu_backward_operator().call(grad_output, saved, alpha, scale, input_scale, is_result);
    }
    if (!at::GradMode::is_enabled() || !(grad_output.requires_grad() || saved.requires_grad()))
        return grad_input;
    return elu_torch::with_elu_backward_node(grad_output, saved, grad_input, alpha, scale,
                                             input_scale, is_result);
}

// The registrations, kept for the process: dropping one would take its
// kernels away.
void register_kernels()
{
    for (const c10::DispatchKey key : {c10::DispatchKey::CPU, c10::DispatchKey::CUDA}) {
        auto *lib = new torch::Library(torch::Library::IMPL, "libelu", key, __FILE__, __LINE__);
        lib->impl("elu", TORCH_FN(elu_kernel));
        lib->impl("elu_", TORCH_FN(elu__kernel));
        lib->impl("elu_backward", TORCH_FN(elu_backward_kernel));
    }
    auto *lib = new torch::Library(torch::Library::IMPL, "libelu", c10::DispatchKey::Autograd,
                                   __FILE__, __LINE__);
    lib->impl("elu", TORCH_FN(elu_autograd_kernel));
    lib->impl("elu_backward", TORCH_FN(elu_backward_autograd_kernel));
}

} // namespace

at::Tensor elu_torch::elu_backward(const at::Tensor &grad_output, const at::Tensor &saved,
                                   double alpha, double scale, double input_scale,
                                   bool is_result)
{
    return elu_backward_operator().call(grad_output, saved, alpha, scale, input_scale,
                                        is_result);
}

PyObject *elu_torch::register_operators(PyObject *ext, const elu_ext_api *api,
                                        PyObject *const kernels[3])
{
    HANDLE_TH_ERRORS
    if (bound) {
        PyErr_SetString(PyExc_RuntimeError, "libelu's operators are registered already");
        return nullptr;
    }
    auto b = std::make_unique<Bound>();
    b->ext = ext;
    b->api = api;
    for (int i = 0; i < 3; i++)
        b->python_kernel[i] = kernels[i];
    Py_INCREF(ext);
    for (int i = 0; i < 3; i++)
        Py_INCREF(kernels[i]);
    bound = b.release();
    register_kernels();
    Py_RETURN_NONE;
    END_HANDLE_TH_ERRORS
}
