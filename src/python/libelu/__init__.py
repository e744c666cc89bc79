"""libelu from Python, with nothing to compile: ELU, SELU and CELU (and their
gradients) on any array that speaks DLPack: PyTorch, CuPy, NumPy, ...

    import libelu
    y = libelu.elu(x, alpha=1.0)            # same kind of array as x
    libelu.elu(x, out=x)                    # in place
    gx = libelu.elu_backward(gy, y, is_result=True)

Arrays are used in place, never copied, but for NumPy inputs in a layout
that the C side cannot read (see elu()). CUDA arrays run on the GPU, on the
array library's current stream (PyTorch, CuPy) or on `stream=` (a CUDA
stream handle as an int); host arrays run on the CPU. One libelu context is
made per process and device, on first use (default_context()); a
libelu.Context of your own (options, info(), stats(), prepare(),
precompile()) is passed as `context=`. For autograd and nn.ELU, see
libelu.torch. Wrong arguments raise TypeError or ValueError (see elu());
what the library itself refuses or fails at raises libelu.EluError.
"""
import math
import numbers
import os
import sys
import threading

from . import _lib, _numpy
from ._context import _MAX_THREADS, Context
from ._lib import EluError

__all__ = ["elu", "elu_backward", "selu", "celu", "Context", "default_context", "EluError",
           "version"]

SELU_ALPHA = 1.6732632423543772848170429916717
SELU_SCALE = 1.0507009873554804934193349852946

_c = _lib.library()
_contexts = {}
_contexts_lock = threading.Lock()


def version():
    """The version of the C library in use (also libelu.__version__)."""
    return _c.elu_version_string().decode()


__version__ = version()


def _ndarray_type():
    """NumPy's array type, or () (which nothing is an instance of) while
    NumPy is not loaded: libelu imports it only for its users."""
    return getattr(sys.modules.get("numpy"), "ndarray", ())


def _check_array(array, name):
    if not (hasattr(array, "__dlpack__") and hasattr(array, "__dlpack_device__")):
        raise TypeError(f"{name} must be an array that supports DLPack (NumPy, PyTorch, "
                        f"CuPy, ...), not {type(array).__qualname__}")


_DEVICE_NAMES = {_lib.KDL_CPU: "cpu", _lib.KDL_CUDA: "cuda", _lib.KDL_CUDA_HOST: "cuda_host",
                 _lib.KDL_CUDA_MANAGED: "cuda_managed"}


def _device_name(device):
    return f"{_DEVICE_NAMES.get(device[0], f'DLPack device type {device[0]}')}:{device[1]}"


def _place(device):
    """Where memory of a DLPack device is processed: ("cpu", 0) for host
    memory, ("cuda", id) on a GPU; None where libelu cannot."""
    device_type, device_id = device
    if device_type in (_lib.KDL_CPU, _lib.KDL_CUDA_HOST):
        return ("cpu", 0)
    if device_type in (_lib.KDL_CUDA, _lib.KDL_CUDA_MANAGED):
        return ("cuda", device_id)
    return None


def _common_place(devices, names):
    """The place of all the arrays' devices; ValueError where there is none."""
    places = [_place(device) for device in devices]
    for place, device, name in zip(places, devices, names):
        if place is None:
            raise ValueError(f"{name} is on {_device_name(device)}: libelu runs on host "
                             "and CUDA memory")
        if place != places[0]:
            raise ValueError(f"{name} is on {_device_name(device)} and {names[0]} on "
                             f"{_device_name(devices[0])}: they must be on one device")
    return places[0]


def _context(place):
    """The default context for a place: a CPU context for host memory
    (which never initializes CUDA), one CUDA context per GPU."""
    with _contexts_lock:
        if place not in _contexts:
            context = Context(backend=place[0], device=place[1])
            context.default = True
            _contexts[place] = context
        return _contexts[place]


def _context_address(device):
    """The default context's elu_ctx address for a device ordinal, -1 for
    the CPU: what the fast path (libelu._ext) runs in."""
    return default_context("cpu" if device < 0 else device).handle.value


# libelu._ext, or None: then the ctypes path below serves every call.
_fast = _lib.extension(_c, _context_address)
_fast_knows = set()  # the array libraries _fast was told about
_torch_ext = None  # libelu._torch_ext, where it loads, once PyTorch is met


def _bind_torch(torch, api):
    """Give the fast path PyTorch's types, and `api`: libelu._torch_ext's
    functions, which read and make tensors through PyTorch's C++ API, or
    None, for the Python C API."""
    _fast.bind_torch(torch.Tensor, torch.nn.Parameter,
                     (torch.float32, torch.float64, torch.float16, torch.bfloat16),
                     torch.strided, getattr(torch._C, "_cuda_getCurrentRawStream", None),
                     torch.empty_like, torch.is_grad_enabled,
                     torch.autograd.graph.increment_version, api)


_retired = []  # default contexts replaced, kept: a call in flight may hold one
_meet_lock = threading.Lock()
# Whether this process is a fork child of one that imported libelu: there
# PyTorch's OpenMP threads may be the parent's, and a parallel region
# would wait for them forever (as PyTorch's own operations do).
_forked = False


def _note_fork():
    global _forked
    _forked = True


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_note_fork)


def _run_on_torch_threads(torch, parallel):
    """Make the default CPU context one whose calls run on PyTorch's threads
    (at::parallel_for through `parallel`, libelu._torch_ext's), which poll
    for work between PyTorch's operations: libelu's own workers would take
    turns with them on the same cores."""
    threads = min(torch.get_num_threads(), _MAX_THREADS)
    with _contexts_lock:
        context = Context(backend="cpu", threads=threads, _parallel=parallel)
        context.default = True
        if ("cpu", 0) in _contexts:
            _retired.append(_contexts[("cpu", 0)])
        _contexts[("cpu", 0)] = context


def _meet_torch(torch):
    """At PyTorch's first call, or libelu.torch's import: give the fast path
    PyTorch's types and load libelu._torch_ext, whose calls on the CPU run
    on PyTorch's threads from then on (not in a fork child)."""
    global _torch_ext
    with _meet_lock:
        if _fast is None or "torch" in _fast_knows:
            return
        _torch_ext = _lib.torch_extension(_fast)
        if getattr(_torch_ext, "parallel", None) is not None and not _forked:
            _run_on_torch_threads(torch, _torch_ext.parallel)
        _bind_torch(torch, _torch_ext.api if _torch_ext else None)
        _fast_knows.add("torch")
        if "numpy" in sys.modules:  # PyTorch imports it: its scalars as parameters
            _bind_numpy(sys.modules["numpy"])


def _bind_numpy(numpy):
    """Give the fast path NumPy's array type and its real scalar types."""
    if "numpy" not in _fast_knows:
        _fast.bind_numpy(numpy.ndarray, numpy.empty_like, numpy.floating, numpy.integer)
        _fast_knows.add("numpy")


def _tell_fast_path(array):
    """At an array library's first call (PyTorch's, NumPy's, CuPy's), give
    the fast path its types, found on the array: libelu imports none."""
    module = type(array).__module__.split(".")[0]
    if _fast is None or module in _fast_knows or module not in ("torch", "numpy", "cupy"):
        return
    lib = sys.modules[module]
    if module == "torch":
        _meet_torch(lib)
        return
    if module == "numpy":
        _bind_numpy(lib)
        return
    _fast.bind_cupy(lib.ndarray, lib.empty_like, lib.cuda.get_current_stream,
                    tuple(lib.dtype(name) for name in ("float32", "float64", "float16")))
    _fast_knows.add(module)


def default_context(device="cpu"):
    """The context that the functions use for arrays on `device` when given
    no context=: "cpu" for host memory, a CUDA device ordinal (int) for a
    GPU's. Made at first use, never destroyed."""
    if device == "cpu":
        return _context(("cpu", 0))
    if isinstance(device, bool) or not isinstance(device, numbers.Integral) or device < 0:
        raise ValueError(f"device must be \"cpu\" or a CUDA device ordinal, not {device!r}")
    return _context(("cuda", int(device)))


def _current_stream(array, device_id):
    """The CUDA stream the array's library is working on, as an int (0: the
    legacy default stream)."""
    module = type(array).__module__.split(".")[0]
    if module == "torch":
        import torch
        raw = getattr(torch._C, "_cuda_getCurrentRawStream", None)  # fast path
        return raw(device_id) if raw else torch.cuda.current_stream(device_id).cuda_stream
    if module == "cupy":
        import cupy
        return cupy.cuda.get_current_stream().ptr
    return 0


def _empty_like(array):
    """An uninitialized array of the same kind, dtype, shape and device."""
    module = sys.modules.get(type(array).__module__.split(".")[0])
    empty_like = getattr(module, "empty_like", None)
    if empty_like is None:
        raise TypeError(f"libelu cannot make an array like a {type(array).__qualname__}: "
                        "pass out=")
    return empty_like(array)


def _shape(t):
    return tuple(t.shape[d] for d in range(t.ndim))


def _dlpack_tensor(array, device, dlpack_stream):
    """A DLTensor for an array of another library than NumPy, and
    what must live while it is used."""
    if getattr(array, "requires_grad", False):
        array = array.detach()  # same storage; PyTorch exports no autograd leaves
    if device[0] == _lib.KDL_CPU:
        capsule = array.__dlpack__()
    else:
        capsule = array.__dlpack__(stream=dlpack_stream)
    return _lib.tensor_of(capsule), capsule


def _explain_refusal(tensors, names):
    """Where the C side refused the tensors for a dtype, a shape or an
    alignment (it checks them), the TypeError or ValueError that names the
    argument."""
    for t, name in zip(tensors, names):
        if not _lib.supported(t.dtype):
            raise _lib.unsupported_dtype(name, _lib.dtype_name(t.dtype))
        size = t.dtype.bits // 8
        if ((t.data or 0) + t.byte_offset) % size and all(_shape(t)):
            raise ValueError(f"{name} is not aligned to its {size}-byte items: libelu needs "
                             "aligned arrays (a copy is)")
    first = tensors[0]
    for t, name in zip(tensors[1:], names[1:]):
        same_dtype = _lib.dtype_name(t.dtype) == _lib.dtype_name(first.dtype)
        if not same_dtype or _shape(t) != _shape(first):
            raise (ValueError if same_dtype else TypeError)(
                f"{name} ({_lib.dtype_name(t.dtype)}, shape {_shape(t)}) does not match "
                f"{names[0]} ({_lib.dtype_name(first.dtype)}, shape {_shape(first)}): "
                "libelu needs one dtype and one shape")


def _arrays(names, inputs, out):
    """The arrays to run on: the inputs, NumPy's copied where the C side
    cannot read them where they lie, then out, or a new array like the
    first input."""
    for array, name in zip(inputs if out is None else [*inputs, out], names):
        _check_array(array, name)
    ndarray = _ndarray_type()
    inputs = [_numpy.readable(array, name) if isinstance(array, ndarray) else
              _resolved(array) for array, name in zip(inputs, names)]
    if out is not None and _negated(out):
        raise ValueError("out has PyTorch's negative bit (its memory holds its values' "
                         "negatives): libelu writes results where they lie (resolve_neg() "
                         "is a copy)")
    if out is not None and _is_torch(out):
        _check_torch_out(out)
    return [*inputs, _empty_like(inputs[0]) if out is None else out]


def _is_torch(array):
    torch = sys.modules.get("torch")
    return torch is not None and isinstance(array, torch.Tensor)


def _check_torch_out(out):
    """As PyTorch's in-place operations ask: refuse an out tensor that
    autograd records gradients for (libelu's functions record none), or an
    inference tensor outside inference mode (no version counter to tell a
    backward that saved it that it changed)."""
    torch = sys.modules["torch"]
    if out.requires_grad and torch.is_grad_enabled():
        raise ValueError("out requires gradients, which libelu.elu() and its kin do not "
                         "record: write it under torch.no_grad(), or use libelu.torch's "
                         "functions and modules, which do")
    if out.is_inference() and not torch.is_inference_mode_enabled():
        raise ValueError("out is an inference tensor, written in place only inside "
                         "torch.inference_mode() (a clone is a normal tensor)")


def _negated(array):
    """Whether the array is a PyTorch tensor with the negative bit, a lazy
    negation (torch.imag(z.conj()) makes one), which DLPack exports as its
    memory: the values' negatives."""
    is_neg = getattr(array, "is_neg", None)
    return callable(is_neg) and is_neg()


def _resolved(array):
    """An input as its values lie in memory: a tensor with the negative bit
    read from a resolved copy."""
    return array.resolve_neg() if _negated(array) else array


def _tensors(arrays, names, devices, dlpack_stream):
    """DLTensors for the arrays (the last one written), each with what must
    live while it is used."""
    ndarray, last = _ndarray_type(), len(arrays) - 1
    return [_numpy.tensor(array, name, writable=i == last) if isinstance(array, ndarray)
            else _dlpack_tensor(array, device, dlpack_stream)
            for i, (array, name, device) in enumerate(zip(arrays, names, devices))]


def _context_for(context, place, names):
    """The context a call runs in: `context`, or the place's default."""
    if context is None:
        return _context(place)
    if not isinstance(context, Context):
        raise TypeError(f"context must be a libelu.Context, not {type(context).__qualname__}")
    if place[0] == "cuda" and context.backend == "cpu":
        raise ValueError(f"{names[0]} is in CUDA memory and the context runs on the CPU")
    return context


def _fast_context(context):
    """context= as the fast path takes it: None for the default, a Context
    (whose handle it reads at the call), else 0, which leaves the call (and
    its error) to the general path."""
    if context is None or isinstance(context, Context):
        return context
    return 0


def _stream_handle(stream):
    """stream= as the int handle it must be (None: the array's own)."""
    if stream is None:
        return None
    if isinstance(stream, bool) or not isinstance(stream, numbers.Integral):
        raise TypeError("stream must be a CUDA stream handle (an int), not "
                        f"{type(stream).__qualname__}")
    if not 0 <= stream < 1 << 64:
        raise ValueError(f"stream {stream} is not a CUDA stream handle (0 to 2^64 - 1)")
    return int(stream)


def _run(names, inputs, out, params, saved_is_output=None, stream=None, context=None):
    """Run forward (one input) or backward (two) into `out`, or a new array
    like the first input; return it. names: the arguments', out's last."""
    stream = _stream_handle(stream)
    arrays = _arrays(names, inputs, out)
    _tell_fast_path(arrays[0])
    devices = [tuple(array.__dlpack_device__()) for array in arrays]
    place = _common_place(devices, names)
    ctx = _context_for(context, place, names).handle
    # The stream handed to __dlpack__, for the producer to order its work
    # before ours: -1 (nothing to do) when we run on its own current stream;
    # else ours, with the legacy default stream spelled 1, never 0.
    dlpack_stream = -1
    if place[0] == "cuda":
        if stream is None:
            stream = _current_stream(arrays[0], place[1])
            if type(arrays[0]).__module__.split(".")[0] not in ("torch", "cupy"):
                dlpack_stream = 1  # an unknown producer: order it on ours
        else:
            dlpack_stream = stream or 1
    held = _tensors(arrays, names, devices, dlpack_stream)
    tensors = [tensor for tensor, _ in held]
    if saved_is_output is None:
        status = _c.elu_run_dlpack(ctx, params, tensors[0], tensors[1], stream or None)
    else:
        status = _c.elu_run_backward_dlpack(ctx, params, tensors[0], tensors[1],
                                            saved_is_output, tensors[2], stream or None)
    if status != 0:
        _explain_refusal(tensors, names)
        raise EluError(status, _c.elu_ctx_last_error(ctx).decode(errors="replace"))
    if out is not None and _is_torch(out):
        # as PyTorch's in-place operations: a backward that saved it refuses
        sys.modules["torch"].autograd.graph.increment_version(out)
    return arrays[-1]


def _finite(name, value):
    """A parameter as a float; TypeError for what is not a real number,
    ValueError for infinities and NaN (the C side computes with neither)."""
    if type(value) is not float:
        # NumPy's complex scalars have __float__, which drops the imaginary
        # part: what has it must also not be a complex number.
        if not hasattr(value, "__float__") or (isinstance(value, numbers.Complex) and
                                               not isinstance(value, numbers.Real)):
            raise TypeError(f"{name} must be a real number, not {type(value).__qualname__}")
        value = float(value)
    if not math.isfinite(value):
        raise ValueError(f"{name} must be finite, not {value}")
    return value


def _params(alpha, scale, input_scale):
    return _lib.Params(0, _finite("alpha", alpha), _finite("scale", scale),
                       _finite("input_scale", input_scale))


def _celu_input_scale(alpha):
    """CELU's input_scale, 1 / alpha, for a non-zero alpha whose reciprocal
    is finite; ValueError for any other."""
    alpha = _finite("alpha", alpha)
    if alpha == 0 or not math.isfinite(1.0 / alpha):
        raise ValueError(f"CELU computes expm1(x / alpha): alpha must be non-zero, with "
                         f"a finite reciprocal, not {alpha}")
    return 1.0 / alpha


def elu(x, alpha=1.0, scale=1.0, input_scale=1.0, out=None, stream=None, context=None):
    """scale * x where x > 0, else scale * alpha * expm1(input_scale * x), as
    torch.nn.functional.elu; into `out` (x itself for in place) or a new
    array like x, which is returned.

    A NumPy x that the C side cannot read where it lies (non-native byte
    order, not aligned to its items, strided by part of an item as a field
    of a structured array) is read from a native copy, and a new array is
    made like that copy. Such an `out`, or a read-only one, raises
    ValueError: results are written where they lie, never through a copy.

    TypeError: x or out is not an array that supports DLPack; its dtype is
    not float16, bfloat16, float32 or float64, or out's is not x's; a
    parameter is not a real number. ValueError: out's shape is not x's;
    they are on different devices; an array of another library than NumPy
    is not aligned to its items; a parameter is not finite; CUDA arrays and
    a CPU `context`; a PyTorch out that autograd records gradients for
    (libelu's functions record none: write it under torch.no_grad()), or
    an inference tensor outside inference mode; a stream that is not a
    handle. libelu.EluError: what the library refuses or fails at (out
    overlapping x other than exactly, a strided view of rank over 8, a CUDA
    error). A PyTorch out's version counter moves when it is written, as
    with PyTorch's in-place operations.

    stream: a CUDA stream handle (an int) to run on, rather than the array
    library's current one. context: a libelu.Context to run in, rather than
    the device's default one."""
    if _fast is not None:
        y = _fast.elu(x, alpha, scale, input_scale, out, _fast_context(context), stream)
        if y is not NotImplemented:
            return y
    return _run(("x", "out"), [x], out, _params(alpha, scale, input_scale), stream=stream,
                context=context)


def selu(x, out=None, stream=None, context=None):
    """SELU: elu with SELU's alpha and scale (1.6732632423543772...,
    1.0507009873554804...), as torch.nn.functional.selu; otherwise as
    elu()."""
    return elu(x, SELU_ALPHA, SELU_SCALE, 1.0, out=out, stream=stream, context=context)


def celu(x, alpha=1.0, out=None, stream=None, context=None):
    """CELU: elu with input_scale 1 / alpha, as torch.nn.functional.celu;
    ValueError where alpha is 0 (or so small that 1 / alpha overflows);
    otherwise as elu()."""
    return elu(x, alpha, 1.0, _celu_input_scale(alpha), out=out, stream=stream,
               context=context)


def elu_backward(grad_output, saved, alpha=1.0, scale=1.0, input_scale=1.0,
                 is_result=False, out=None, stream=None, context=None):
    """The gradient of elu, as torch's elu_backward: `saved` is the input x,
    or the output y when is_result (which needs alpha >= 0, else
    ValueError); into `out` or a new array like grad_output, which is
    returned. grad_output and saved are taken as elu takes x, and out as
    elu's: the three alike in dtype, shape and device; stream and context
    as elu's."""
    if _fast is not None:
        grad_x = _fast.elu_backward(grad_output, saved, alpha, scale, input_scale, is_result,
                                    out, _fast_context(context), stream)
        if grad_x is not NotImplemented:
            return grad_x
    params = _params(alpha, scale, input_scale)
    if is_result and params.alpha < 0:
        raise ValueError(f"the backward from the output (is_result) needs alpha >= 0, "
                         f"not {params.alpha}")
    return _run(("grad_output", "saved", "out"), [grad_output, saved], out, params,
                saved_is_output=bool(is_result), stream=stream, context=context)
