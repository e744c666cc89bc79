"""libelu's PyTorch operators, registered with torch.library on import:

    libelu::elu(Tensor x, float alpha=1, float scale=1, float input_scale=1) -> Tensor
    libelu::elu_(Tensor(a!) x, float alpha=1, float scale=1, float input_scale=1) -> ()
    libelu::elu_backward(Tensor grad_output, Tensor saved, float alpha=1,
                         float scale=1, float input_scale=1, bool is_result=False) -> Tensor

with kernels for the CPU and CUDA (libelu.elu() and elu_backward(), on
PyTorch's current stream), fake kernels (torch.compile, torch.export), and
autograd as aten's elu and elu_ have it: elu saves its input, elu_ its
output (which needs alpha >= 0), and the backward is elu_backward, itself
differentiable as aten's is. On CUDA libelu's backward is aten's
elu_backward bit for bit, so gradients from the same saved tensors are
too; on the CPU it rounds once from a wider type, where aten's CPU kernel
rounds each step (within a few ulps of it).

They are defined with torch.library.Library rather than custom_op: a call
through the dispatcher costs a third as much (docs/DESIGN.md, "The Python
call"). Where libelu._torch_ext is built, the kernels for the CPU and CUDA
and the autograd of elu and elu_backward are its C++ ones, which leave
what the library does not take to the Python kernels below; else those
serve every call. libelu.torch's modules call the operators under
torch.compile and whenever PyTorch must see the call (modes, tracing,
tensor subclasses); plain eager calls go straight to libelu (direct()), as
the dispatcher would send them.
"""
import torch

import libelu

_lib = torch.library.Library("libelu", "DEF")
_lib.define("elu(Tensor x, float alpha=1.0, float scale=1.0, float input_scale=1.0) -> Tensor")
_lib.define("elu_(Tensor(a!) x, float alpha=1.0, float scale=1.0, float input_scale=1.0) -> ()")
_lib.define("elu_backward(Tensor grad_output, Tensor saved, float alpha=1.0, float scale=1.0, "
            "float input_scale=1.0, bool is_result=False) -> Tensor")

_DTYPES = (torch.float32, torch.float64, torch.float16, torch.bfloat16)


def _elu(x: torch.Tensor, alpha: float = 1.0, scale: float = 1.0,
         input_scale: float = 1.0) -> torch.Tensor:
    return libelu.elu(x, alpha, scale, input_scale)


def check_in_place(x: torch.Tensor) -> None:
    """As aten's in-place ops: an inference tensor, which has no version
    counter to tell autograd it changed, only inside inference mode."""
    if x.is_inference() and not torch.is_inference_mode_enabled():
        raise RuntimeError("Inplace update to inference tensor outside InferenceMode is not "
                           "allowed. You can make a clone to get a normal tensor before "
                           "doing inplace update.")


def _elu_(x: torch.Tensor, alpha: float = 1.0, scale: float = 1.0,
          input_scale: float = 1.0) -> None:
    check_in_place(x)  # inference tensors come here, past the Autograd kernel
    libelu.elu(x, alpha, scale, input_scale, out=x)


def _elu_backward(grad_output: torch.Tensor, saved: torch.Tensor, alpha: float = 1.0,
                  scale: float = 1.0, input_scale: float = 1.0,
                  is_result: bool = False) -> torch.Tensor:
    return libelu.elu_backward(grad_output, saved, alpha, scale, input_scale, is_result)


# The kernels in C++ (libelu._torch_ext), where it loaded: the CPU and CUDA
# kernels, which leave what the library does not take to the Python ones
# above, and elu's and elu_backward's autograd; else all in Python.
libelu._meet_torch(torch)
_register_cpp = getattr(libelu._torch_ext, "register_operators", None)
if _register_cpp is not None:
    _register_cpp(_elu, _elu_, _elu_backward)
else:
    for _key in ("CPU", "CUDA"):
        _lib.impl("elu", _elu, _key)
        _lib.impl("elu_", _elu_, _key)
        _lib.impl("elu_backward", _elu_backward, _key)


def _check(tensors: list, names: list) -> None:
    """What the kernels refuse of the tensors' metadata, refused alike by
    the fake kernels: another dtype, dtypes or shapes that differ."""
    for t, name in zip(tensors, names):
        if t.dtype not in _DTYPES:
            raise TypeError(f"{name} has dtype {str(t.dtype).replace('torch.', '')}: libelu "
                            "takes float16, bfloat16, float32 and float64 arrays")
    for t, name in zip(tensors[1:], names[1:]):
        if t.dtype != tensors[0].dtype:
            raise TypeError(f"{name} ({t.dtype}) does not match {names[0]} "
                            f"({tensors[0].dtype}): libelu needs one dtype")
        if t.shape != tensors[0].shape:
            raise ValueError(f"{name} (shape {tuple(t.shape)}) does not match {names[0]} "
                             f"(shape {tuple(tensors[0].shape)}): libelu needs one shape")


@torch.library.register_fake("libelu::elu", lib=_lib)
def _elu_fake(x, alpha=1.0, scale=1.0, input_scale=1.0):
    _check([x], ["x"])
    return torch.empty_like(x)  # as libelu.elu() makes its output


@torch.library.register_fake("libelu::elu_", lib=_lib)
def _elu__fake(x, alpha=1.0, scale=1.0, input_scale=1.0):
    _check([x], ["x"])


@torch.library.register_fake("libelu::elu_backward", lib=_lib)
def _elu_backward_fake(grad_output, saved, alpha=1.0, scale=1.0, input_scale=1.0,
                       is_result=False):
    _check([grad_output, saved], ["grad_output", "saved"])
    return torch.empty_like(grad_output)


def _elu_setup(ctx, inputs, output):
    x, *ctx.constants = inputs
    ctx.save_for_backward(x)


def _elu_grad(ctx, grad):
    (x,) = ctx.saved_tensors
    return torch.ops.libelu.elu_backward(grad, x, *ctx.constants, False), None, None, None


if _register_cpp is None:
    torch.library.register_autograd("libelu::elu", _elu_grad, setup_context=_elu_setup,
                                    lib=_lib)


def _elu_backward_setup(ctx, inputs, output):
    grad_output, saved, *ctx.constants, ctx.is_result = inputs
    ctx.save_for_backward(grad_output, saved)


def _elu_backward_grad(ctx, grad):
    """aten's elu_double_backward, term for term (FunctionsManual.cpp)."""
    grad_output, saved = ctx.saved_tensors
    alpha, scale, input_scale = ctx.constants
    d_grad_output = d_saved = None
    if ctx.needs_input_grad[0]:
        d_grad_output = torch.ops.libelu.elu_backward(grad, saved, alpha, scale, input_scale,
                                                      ctx.is_result)
    if ctx.needs_input_grad[1]:
        negative = (saved < 0).type_as(grad)
        if ctx.is_result:
            d_saved = grad * grad_output * input_scale * negative
        else:
            d_saved = torch.ops.libelu.elu_backward(grad * grad_output * input_scale, saved,
                                                    alpha, scale, input_scale, False) * negative
    return d_grad_output, d_saved, None, None, None, None


if _register_cpp is None:
    torch.library.register_autograd("libelu::elu_backward", _elu_backward_grad,
                                    setup_context=_elu_backward_setup, lib=_lib)


def _elu_vmap(info, in_dims, x, alpha=1.0, scale=1.0, input_scale=1.0):
    return torch.ops.libelu.elu(x, alpha, scale, input_scale), in_dims[0]


def _elu_backward_vmap(info, in_dims, grad_output, saved, *constants):
    """Elementwise: both tensors batched along their first dimension."""
    def batched(t, dim):
        return t.movedim(dim, 0) if dim is not None else t.expand(info.batch_size, *t.shape)
    grad_output, saved = (batched(t, d) for t, d in zip((grad_output, saved), in_dims))
    return torch.ops.libelu.elu_backward(grad_output, saved, *constants), 0


def _elu__vmap(info, in_dims, x, alpha=1.0, scale=1.0, input_scale=1.0):
    torch.ops.libelu.elu_(x, alpha, scale, input_scale)
    return None, None


torch.library.register_vmap("libelu::elu", _elu_vmap, lib=_lib)
torch.library.register_vmap("libelu::elu_", _elu__vmap, lib=_lib)
torch.library.register_vmap("libelu::elu_backward", _elu_backward_vmap, lib=_lib)


def check_in_place_alpha(alpha: float) -> None:
    """In place, the backward has only the output, from which it needs
    alpha >= 0 (aten's elu_ refuses the rest at its backward)."""
    if alpha < 0:
        raise ValueError(f"in-place ELU needs alpha >= 0 (not {alpha}) for gradients: the "
                         "backward then has only the output")


def check_in_place_leaf(x: torch.Tensor) -> None:
    """As aten's in-place ops while autograd records: neither a leaf that
    requires grad nor a view of one is written (refused before any write,
    where mark_dirty would refuse only after)."""
    base = x._base
    if x.is_leaf or (base is not None and base.is_leaf and base.requires_grad):
        raise RuntimeError(f"a {'view of a ' if not x.is_leaf else ''}leaf Variable that "
                           "requires grad is being used in an in-place operation.")


class _InPlace(torch.autograd.Function):
    """elu_'s autograd: the output saved, as aten's elu_ saves it.
    torch.library.register_autograd takes only functional operators, so
    this is elu_'s Autograd kernel itself."""

    @staticmethod
    def forward(ctx, x, alpha, scale, input_scale):
        with torch._C._AutoDispatchBelowAutograd():
            torch.ops.libelu.elu_(x, alpha, scale, input_scale)
        ctx.mark_dirty(x)
        ctx.save_for_backward(x)
        ctx.constants = (alpha, scale, input_scale)
        return x

    @staticmethod
    def backward(ctx, grad):
        (y,) = ctx.saved_tensors
        return torch.ops.libelu.elu_backward(grad, y, *ctx.constants, True), None, None, None


def _elu__autograd(x: torch.Tensor, alpha: float = 1.0, scale: float = 1.0,
                   input_scale: float = 1.0) -> None:
    if torch.is_grad_enabled() and x.requires_grad:
        check_in_place_leaf(x)
        check_in_place_alpha(alpha)
        _InPlace.apply(x, alpha, scale, input_scale)
        return
    with torch._C._AutoDispatchBelowAutograd():
        torch.ops.libelu.elu_(x, alpha, scale, input_scale)


_lib.impl("elu_", _elu__autograd, "Autograd")


def _never_direct(x: object) -> bool:
    """direct() where this PyTorch lacks what it asks (private functions
    all): every call goes through the operators, correct and slower."""
    return False


def _direct_check():
    """direct(), with what it asks looked up once: it runs on every eager
    call."""
    try:
        tensor, compiling = torch.Tensor, torch.compiler.is_compiling
        function_mode = torch._C._is_torch_function_mode_enabled
        dispatch_modes = torch._C._len_torch_dispatch_stack
        tracing = torch._C._get_tracing_state
        functorch = torch._C._functorch.peek_interpreter_stack
    except AttributeError:
        return _never_direct

    def direct(x: object) -> bool:
        """Whether a call on x may go straight to libelu, as the dispatcher
        would send it, skipping the dispatcher's cost: x a plain tensor,
        not under torch.compile, TorchScript tracing, a torch function or
        dispatch mode, or a functorch transform. Otherwise PyTorch must
        see the call."""
        return (type(x) is tensor and not compiling() and not function_mode() and
                not dispatch_modes() and tracing() is None and functorch() is None)
    return direct


direct = _direct_check()
