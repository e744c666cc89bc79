// libelu._torch_ext: PyTorch tensors read and made through PyTorch's C++
// API, for libelu._ext's per-call path (ext_torch.h). Through the Python C
// API a tensor's metadata takes eight attribute reads and a new tensor a
// call of torch.empty_like, most of a small call's cost; here they are
// field reads and a C++ allocation. libelu._ext still does the rest: the
// checks across arguments, the library's call, its errors.
//
// Built against one PyTorch (meson.build, where the Python that builds has
// PyTorch), it refuses to load into another (ImportError), and the package
// reads tensors through the Python C API as before.
#include "torch_ext.h"

#include <ATen/Parallel.h>
#include <ATen/core/Tensor.h>
#include <ATen/core/grad_mode.h>
#include <ATen/ops/empty_like.h>
#include <c10/core/InferenceMode.h>
#include <c10/core/impl/DeviceGuardImplInterface.h>
#include <torch/csrc/Exceptions.h>
#include <torch/csrc/autograd/python_variable.h>
#include <torch/csrc/autograd/variable.h>

#include <cstring>
#include <type_traits>

#include "elu.h"

namespace {

bool dl_dtype(c10::ScalarType type, DLDataType *out)
{
    switch (type) {
    case c10::ScalarType::Float: *out = {kDLFloat, 32, 1}; return true;
    case c10::ScalarType::Double: *out = {kDLFloat, 64, 1}; return true;
    case c10::ScalarType::Half: *out = {kDLFloat, 16, 1}; return true;
    case c10::ScalarType::BFloat16: *out = {kDLBfloat, 16, 1}; return true;
    default: return false;
    }
}

// The tensor's memory, where data_ptr() gives it: a tensor without
// storage (a functorch wrapper) or with symbolic sizes throws there as
// from Python, and is left to the general path, which says what it is.
bool memory_of(const at::Tensor &x, DLTensor *t)
{
    try {
        t->data = x.data_ptr();
        t->ndim = static_cast<int32_t>(x.dim());
        t->shape = const_cast<int64_t *>(x.sizes().data());
        t->strides = const_cast<int64_t *>(x.strides().data());
    } catch (...) { // nothing may unwind through libelu._ext's C frames
        return false;
    }
    t->byte_offset = 0;
    return true;
}

} // namespace

int elu_torch::read(const at::Tensor &x, DLTensor *t, int *device)
{
    if (!x.defined() || x.layout() != c10::kStrided || x.is_neg() ||
        !dl_dtype(x.scalar_type(), &t->dtype))
        return NOT_TAKEN;
    const c10::Device d = x.device();
    if (d.is_cpu()) {
        *device = -1;
        t->device = {kDLCPU, 0};
    } else if (d.is_cuda() && d.index() >= 0) {
        *device = d.index();
        t->device = {kDLCUDA, d.index()};
    } else {
        return NOT_TAKEN;
    }
    return memory_of(x, t) ? TAKEN : NOT_TAKEN;
}

elu_stream elu_torch::current_stream(int device)
{
    const c10::Device d(c10::DeviceType::CUDA, static_cast<c10::DeviceIndex>(device));
    return static_cast<elu_stream>(
        c10::impl::getDeviceGuardImpl(d.type())->getStream(d).native_handle());
}

namespace {

int read(PyObject *obj, DLTensor *t, int *device)
{
    return THPVariable_CheckExact(obj) ? elu_torch::read(THPVariable_Unpack(obj), t, device)
                                       : NOT_TAKEN;
}

PyObject *empty_like(PyObject *like)
{
    HANDLE_TH_ERRORS
    return THPVariable_Wrap(at::empty_like(THPVariable_Unpack(like)));
    END_HANDLE_TH_ERRORS
}

int stream(int device, elu_stream *out)
{
    HANDLE_TH_ERRORS
    *out = elu_torch::current_stream(device);
    return TAKEN;
    END_HANDLE_TH_ERRORS_RET(FAILED)
}

// As aten's in-place operations ask: an out tensor that autograd records
// gradients for, or an inference tensor outside inference mode (no version
// counter to tell a backward it changed), goes to the general path, which
// refuses it.
int writable(PyObject *out)
{
    const at::Tensor &x = THPVariable_Unpack(out);
    return (x.requires_grad() && at::GradMode::is_enabled()) ||
                   (x.is_inference() && !c10::InferenceMode::is_enabled())
               ? NOT_TAKEN
               : TAKEN;
}

void wrote(PyObject *out)
{
    try {
        torch::autograd::impl::bump_version(THPVariable_Unpack(out));
    } catch (...) { // only an inference tensor outside inference mode, which
    }               // writable() refused: nothing may unwind through C frames
}

const elu_torch_api api = {read, empty_like, stream, writable, wrote};

// at::parallel_for runs in parallel here where PyTorch's own threads are
// OpenMP's and this was compiled with it (meson.build), or PyTorch's native
// pool's; else it would run everything on the calling thread.
#if defined(_OPENMP) || AT_PARALLEL_NATIVE
#define ELU_TORCH_PARALLEL 1

// elu_options.cpu_parallel for the package's CPU context once PyTorch is
// met: a call's parts on PyTorch's threads (at::parallel_for), which poll
// for work between PyTorch's operations, rather than on libelu's workers
// beside them, where the two pools would take turns on the same cores.
void parallel(void *, void (*part)(void *arg, int index), void *arg, int parts)
{
    bool done[1024] = {}; // parts <= cpu_threads <= 1024 (elu.h)
    try {
        at::parallel_for(0, parts, 1, [&](int64_t begin, int64_t end) {
            for (int64_t i = begin; i < end; i++) {
                part(arg, static_cast<int>(i));
                done[i] = true;
            }
        });
    } catch (...) { // nothing may unwind through C frames; part throws nothing,
        for (int i = 0; i < parts; i++) // so PyTorch's pool failed: the rest here
            if (!done[i])
                part(arg, i);
    }
}
static_assert(std::is_same_v<decltype(&parallel), elu_parallel_fn>,
              "parallel is an elu_parallel_fn");
#endif

// libelu._ext and what it hands out (bind()), for elu_eager() and the
// operators' kernels: one for the process, as the package loads one
// libelu._ext.
PyObject *bound_ext;
const elu_ext_api *bound_api;

// bind(libelu._ext), once it is bound itself.
PyObject *bind(PyObject *, PyObject *ext)
{
    PyObject *capsule = PyObject_CallMethod(ext, "api", nullptr);
    void *functions = capsule ? PyCapsule_GetPointer(capsule, ELU_EXT_API_NAME) : nullptr;
    Py_XDECREF(capsule); // what it points to lives in ext's state, which ext keeps
    if (!functions)
        return nullptr;
    bound_api = static_cast<const elu_ext_api *>(functions); // before the old ext may go
    Py_INCREF(ext);
    Py_XSETREF(bound_ext, ext);
    Py_RETURN_NONE;
}

// Whether a method of `count` arguments, whose call reads `usage`, may run:
// given as many, and bind() called; else false with an exception set.
bool may_run(Py_ssize_t nargs, Py_ssize_t count, const char *usage)
{
    if (nargs != count)
        PyErr_SetString(PyExc_TypeError, usage);
    else if (!bound_api)
        PyErr_SetString(PyExc_RuntimeError, "libelu._torch_ext: bind() was not called");
    return nargs == count && bound_api;
}

// elu_eager(x, alpha, scale, input_scale): libelu.torch's plain eager call,
// not in place (elu_torch::elu_eager), for an exact tensor (or Parameter)
// that PyTorch need not see: NotImplemented for the rest, and where
// libelu._ext leaves x to the general path, which the Python side serves.
PyObject *elu_eager(PyObject *, PyObject *const *args, Py_ssize_t nargs)
{
    if (!may_run(nargs, 4, "elu_eager(x, alpha, scale, input_scale)"))
        return nullptr;
    if (!THPVariable_CheckExact(args[0]) || !elu_torch::unobserved())
        Py_RETURN_NOTIMPLEMENTED;
    PyObject *const elu_args[5] = {args[0], args[1], args[2], args[3], Py_None};
    return elu_torch::elu_eager(bound_ext, bound_api, elu_args);
}

// register_operators(elu, elu_, elu_backward): the operators' C++ kernels,
// with libelu._torch_ops's Python kernels for what the library leaves.
PyObject *register_operators(PyObject *, PyObject *const *args, Py_ssize_t nargs)
{
    if (!may_run(nargs, 3, "register_operators(elu, elu_, elu_backward)"))
        return nullptr;
    return elu_torch::register_operators(bound_ext, bound_api, args);
}

PyMethodDef methods[] = {
    {"bind", bind, METH_O, "bind(libelu._ext): what elu_eager() and the operators call"},
    {"elu_eager", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)(void)>(elu_eager)),
     METH_FASTCALL, "elu_eager(x, alpha, scale, input_scale): ELU, with autograd's node"},
    {"register_operators",
     reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)(void)>(register_operators)),
     METH_FASTCALL, "register_operators(elu, elu_, elu_backward): the operators' C++ kernels"},
    {nullptr, nullptr, 0, nullptr},
};

// Whether the PyTorch in the process is the one this was built against
// (ELU_TORCH_VERSION, from meson.build); ImportError where it is not.
bool same_torch()
{
    PyObject *torch = PyImport_ImportModule("torch");
    PyObject *version = torch ? PyObject_GetAttrString(torch, "__version__") : nullptr;
    const char *text = version ? PyUnicode_AsUTF8(version) : nullptr;
    const bool same = text && std::strcmp(text, ELU_TORCH_VERSION) == 0;
    if (text && !same)
        PyErr_Format(PyExc_ImportError,
                     "libelu._torch_ext was built for PyTorch %s, not %s: rebuild libelu "
                     "(pip install --no-build-isolation .) to use it",
                     ELU_TORCH_VERSION, text);
    Py_XDECREF(version);
    Py_XDECREF(torch);
    return same;
}

// The module's body, run at each load (multi-phase initialization), so
// that a load always checks the PyTorch it finds.
int exec_module(PyObject *module)
{
    if (!same_torch())
        return -1;
    PyObject *capsule =
        PyCapsule_New(const_cast<elu_torch_api *>(&api), ELU_TORCH_API_NAME, nullptr);
    if (!capsule || PyModule_AddObject(module, "api", capsule) < 0) {
        Py_XDECREF(capsule);
        return -1;
    }
#ifdef ELU_TORCH_PARALLEL
    PyObject *address = PyLong_FromVoidPtr(reinterpret_cast<void *>(&parallel));
    if (!address || PyModule_AddObject(module, "parallel", address) < 0) {
        Py_XDECREF(address);
        return -1;
    }
#endif
    return 0;
}

PyModuleDef_Slot slots[] = {{Py_mod_exec, reinterpret_cast<void *>(exec_module)},
                            {0, nullptr}};

PyModuleDef module_def = {
    PyModuleDef_HEAD_INIT,
    "libelu._torch_ext",
    "PyTorch tensors read and made through PyTorch's C++ API, for libelu._ext; ELU's "
    "autograd, eager calls and the operators' kernels in C++, for libelu.torch.",
    0,
    methods,
    slots,
    nullptr,
    nullptr,
    nullptr,
};

} // namespace

PyMODINIT_FUNC PyInit__torch_ext(void)
{
    return PyModuleDef_Init(&module_def);
}
