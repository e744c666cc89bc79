"""libelu from Python, with nothing to compile: ELU, SELU and CELU (and their
gradients) on any array that speaks DLPack: PyTorch, CuPy, NumPy, ...

    import libelu
    y = libelu.elu(x, alpha=1.0)            # same kind of array as x
    libelu.elu(x, out=x)                    # in place
    gx = libelu.elu_backward(gy, y, is_result=True)

Arrays are used in place, never copied. CUDA arrays run on the GPU, on the
array library's current stream (PyTorch, CuPy) or on `stream=` (a CUDA
stream handle as an int); host arrays run on the CPU. One libelu context is
made per process and device, on first use. For autograd and nn.ELU, see
libelu.torch. Failures raise libelu.EluError.
"""
import threading

from . import _lib
from ._lib import EluError

__all__ = ["elu", "elu_backward", "selu", "celu", "EluError", "version"]

SELU_ALPHA = 1.6732632423543772848170429916717
SELU_SCALE = 1.0507009873554804934193349852946

_c = _lib.load()
_contexts = {}
_contexts_lock = threading.Lock()


def version():
    return _c.elu_version_string().decode()


def _context(device_type, device_id):
    """The context for a DLPack device: CPU contexts for host memory (which
    never initialize CUDA), one CUDA context per GPU."""
    on_gpu = device_type in (_lib.KDL_CUDA, _lib.KDL_CUDA_MANAGED)
    key = ("cuda", device_id) if on_gpu else ("cpu", 0)
    with _contexts_lock:
        if key not in _contexts:
            opts = _lib.Options()
            _c.elu_options_default(opts)
            opts.backend = _lib.BACKEND_CUDA if on_gpu else _lib.BACKEND_CPU
            opts.device = device_id if on_gpu else 0
            ctx = _lib.ctypes.c_void_p()
            status = _c.elu_ctx_create(_lib.ctypes.byref(ctx), opts)
            if status != 0:
                raise EluError(status, f"cannot create a context for {key}: "
                                       "see ELU_DEBUG=1 for the detail")
            _contexts[key] = ctx
        return _contexts[key]


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
    module = __import__(type(array).__module__.split(".")[0])
    return module.empty_like(array)


def _tensor(array, device_type, dlpack_stream, is_input):
    """A DLTensor pointer for the array, and what must live while it is used."""
    if getattr(array, "requires_grad", False):
        array = array.detach()  # same storage; PyTorch exports no autograd leaves
    try:
        if device_type == _lib.KDL_CPU:
            capsule = array.__dlpack__()
        else:
            capsule = array.__dlpack__(stream=dlpack_stream)
    except BufferError:
        if not is_input or type(array).__module__.split(".")[0] != "numpy":
            raise
        return _lib.numpy_tensor(array)  # read-only NumPy input: only read
    return _lib.tensor_of(capsule), capsule


def _run(inputs, out, params, saved_is_output=None, stream=None):
    """Run forward (one input) or backward (two) into `out`; return out."""
    device_type, device_id = inputs[0].__dlpack_device__()
    # The stream handed to __dlpack__, for the producer to order its work
    # before ours: -1 (nothing to do) when we run on its own current stream;
    # else ours, with the legacy default stream spelled 1, never 0.
    dlpack_stream = -1
    if device_type != _lib.KDL_CPU:
        if stream is None:
            stream = _current_stream(inputs[0], device_id)
            if type(inputs[0]).__module__.split(".")[0] not in ("torch", "cupy"):
                dlpack_stream = 1  # an unknown producer: order it on ours
        else:
            dlpack_stream = stream or 1
    ctx = _context(device_type, device_id)
    arrays = [*inputs, out]
    held = [_tensor(a, device_type, dlpack_stream, a is not out) for a in arrays]
    tensors = [tensor for tensor, _ in held]
    if saved_is_output is None:
        status = _c.elu_run_dlpack(ctx, params, tensors[0], tensors[1], stream or None)
    else:
        status = _c.elu_run_backward_dlpack(ctx, params, tensors[0], tensors[1],
                                            saved_is_output, tensors[2], stream or None)
    del tensors, held  # the call is done with them
    if status != 0:
        raise EluError(status, _c.elu_ctx_last_error(ctx).decode(errors="replace"))
    return out


def elu(x, alpha=1.0, scale=1.0, input_scale=1.0, out=None, stream=None):
    """scale * x where x > 0, else scale * alpha * expm1(input_scale * x), as
    torch.nn.functional.elu; into `out` (x itself for in place) or a new
    array like x."""
    out = _empty_like(x) if out is None else out
    return _run([x], out, _lib.Params(0, alpha, scale, input_scale), stream=stream)


def selu(x, out=None, stream=None):
    return elu(x, SELU_ALPHA, SELU_SCALE, 1.0, out=out, stream=stream)


def celu(x, alpha=1.0, out=None, stream=None):
    return elu(x, alpha, 1.0, 1.0 / alpha, out=out, stream=stream)


def elu_backward(grad_output, saved, alpha=1.0, scale=1.0, input_scale=1.0,
                 is_result=False, out=None, stream=None):
    """The gradient of elu, as torch's elu_backward: `saved` is the input x,
    or the output y when is_result (which needs alpha >= 0)."""
    out = _empty_like(grad_output) if out is None else out
    return _run([grad_output, saved], out, _lib.Params(0, alpha, scale, input_scale),
                saved_is_output=bool(is_result), stream=stream)
