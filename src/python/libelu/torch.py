"""libelu for PyTorch: drop-in modules for torch.nn.ELU, SELU and CELU (in
place too) and a functional elu(), on the operators libelu::elu, elu_ and
elu_backward (registered on import, see libelu._torch_ops), with nothing
to compile.

    from libelu.torch import ELU
    model = torch.nn.Sequential(torch.nn.Linear(64, 64), ELU(inplace=True))
    model = torch.compile(model, fullgraph=True)   # the operators, no graph break

Autograd is aten's: the backward starts from the saved input, or in place
(where the input is gone) from the saved output, which needs alpha >= 0.
So on CUDA gradients match PyTorch's bit for bit from the same saved
values (on the CPU libelu's backward rounds once from a wider type, where
aten's CPU kernel is within a few ulps); the forward is libelu's exact
one (within 1 ulp, the half types correctly rounded), where PyTorch's is
within an ulp or two. Under torch.autocast it runs in its input's dtype,
as aten's elu does.
"""
import torch

import libelu
from . import SELU_ALPHA, SELU_SCALE, _celu_input_scale, _finite
from . import elu as _libelu_elu
from . import elu_backward as _libelu_elu_backward
from . import _meet_torch, _torch_ops

__all__ = ["elu", "ELUFunction", "elu_autograd", "ELU", "SELU", "CELU"]


def _through_ops(x: torch.Tensor, alpha: float, scale: float, input_scale: float,
                 inplace: bool) -> torch.Tensor:
    """The forward through the operators, which PyTorch sees."""
    if not inplace:
        return torch.ops.libelu.elu(x, alpha, scale, input_scale)
    torch.ops.libelu.elu_(x, alpha, scale, input_scale)
    return x


def _direct_in_place(x: torch.Tensor, alpha: float, scale: float,
                     input_scale: float) -> torch.Tensor:
    """In place without autograd, straight to libelu, for a call that
    _torch_ops.direct() allows."""
    _torch_ops.check_in_place(x)
    return _libelu_elu(x, alpha, scale, input_scale, out=x)  # bumps x's version


def _forward(x: torch.Tensor, alpha: float, scale: float, input_scale: float,
             inplace: bool) -> torch.Tensor:
    """The forward without autograd: straight to libelu in plain eager
    calls, else through the operators."""
    if not _torch_ops.direct(x):
        return _through_ops(x, alpha, scale, input_scale, inplace)
    if inplace:
        return _direct_in_place(x, alpha, scale, input_scale)
    return _libelu_elu(x, alpha, scale, input_scale)


def _backward(grad: torch.Tensor, saved: torch.Tensor, alpha: float, scale: float,
              input_scale: float, is_result: bool) -> torch.Tensor:
    """The gradient: straight to libelu, but where the backward itself is
    differentiated (create_graph) or PyTorch must see the call."""
    if not torch.is_grad_enabled() and _torch_ops.direct(grad):
        return _libelu_elu_backward(grad, saved, alpha, scale, input_scale, is_result)
    return torch.ops.libelu.elu_backward(grad, saved, alpha, scale, input_scale, is_result)


# A plain eager call not in place, in C++ (libelu._torch_ext), where it
# loaded: what direct() asks, then the library's result, with the node
# ELUFunction makes where gradients are recorded, at a fraction of the
# cost; NotImplemented where the paths below must serve. None: they serve
# every call.
_meet_torch(torch)
_eager = getattr(libelu._torch_ext, "elu_eager", None)
_compiling = torch.compiler.is_compiling


class ELUFunction(torch.autograd.Function):
    """ELU with autograd, as aten's: saving the input, or in place the
    output (alpha >= 0). elu() takes this in eager calls that need
    gradients; it calls the operators under torch.compile."""

    @staticmethod
    def forward(ctx, x, alpha=1.0, scale=1.0, input_scale=1.0, inplace=False):
        if inplace:
            _torch_ops.check_in_place_alpha(_finite("alpha", alpha))
        y = _forward(x, alpha, scale, input_scale, inplace)
        if inplace:
            ctx.mark_dirty(x)
        ctx.is_result = inplace
        ctx.constants = (alpha, scale, input_scale)
        ctx.save_for_backward(y if inplace else x)
        return y

    @staticmethod
    def backward(ctx, grad):
        (saved,) = ctx.saved_tensors
        return _backward(grad, saved, *ctx.constants, ctx.is_result), None, None, None, None


def elu(x: torch.Tensor, alpha: float = 1.0, scale: float = 1.0, input_scale: float = 1.0,
        inplace: bool = False) -> torch.Tensor:
    """scale * x where x > 0, else scale * alpha * expm1(input_scale * x),
    as torch.nn.functional.elu (selu and celu are its constants), with
    autograd; in place when `inplace` (x returned), which with gradients
    needs alpha >= 0 (ValueError). Plain eager calls run libelu directly
    (where gradients are needed, through libelu._torch_ext's autograd node
    where it loaded and the call is not in place, else ELUFunction); under
    torch.compile, modes, tracing and functorch the operators libelu::elu
    and elu_."""
    if not inplace and _eager is not None and not _compiling():
        y = _eager(x, alpha, scale, input_scale)
        if y is not NotImplemented:
            return y
    if not _torch_ops.direct(x):
        return _through_ops(x, alpha, scale, input_scale, inplace)
    if torch.is_grad_enabled() and x.requires_grad:
        if inplace:
            _torch_ops.check_in_place_leaf(x)
        return ELUFunction.apply(x, alpha, scale, input_scale, inplace)
    if inplace:
        return _direct_in_place(x, alpha, scale, input_scale)
    return _libelu_elu(x, alpha, scale, input_scale)


def elu_autograd(x: torch.Tensor, alpha: float = 1.0, scale: float = 1.0,
                 input_scale: float = 1.0, inplace: bool = False) -> torch.Tensor:
    """elu(), under its former name."""
    return elu(x, alpha, scale, input_scale, inplace)


class ELU(torch.nn.Module):
    """Drop-in for torch.nn.ELU."""

    def __init__(self, alpha: float = 1.0, inplace: bool = False):
        super().__init__()
        self.alpha, self.inplace = alpha, inplace

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """ELU of x (in place: x itself)."""
        return elu(x, self.alpha, 1.0, 1.0, self.inplace)

    def extra_repr(self) -> str:
        return f"alpha={self.alpha}" + (", inplace=True" if self.inplace else "")


class SELU(torch.nn.Module):
    """Drop-in for torch.nn.SELU."""

    def __init__(self, inplace: bool = False):
        super().__init__()
        self.inplace = inplace

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """SELU of x (in place: x itself)."""
        return elu(x, SELU_ALPHA, SELU_SCALE, 1.0, self.inplace)

    def extra_repr(self) -> str:
        return "inplace=True" if self.inplace else ""


class CELU(torch.nn.Module):
    """Drop-in for torch.nn.CELU."""

    def __init__(self, alpha: float = 1.0, inplace: bool = False):
        super().__init__()
        self.alpha, self.inplace = alpha, inplace

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """CELU of x (in place: x itself); ValueError for alpha 0."""
        return elu(x, self.alpha, 1.0, _celu_input_scale(self.alpha), self.inplace)

    def extra_repr(self) -> str:
        return f"alpha={self.alpha}" + (", inplace=True" if self.inplace else "")
