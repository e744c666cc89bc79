"""libelu for PyTorch: an autograd Function and drop-in modules for
torch.nn.ELU, SELU and CELU (in place too), with nothing to compile.

    from libelu.torch import ELU
    model = torch.nn.Sequential(torch.nn.Linear(64, 64), ELU(inplace=True))
"""
import torch

from . import SELU_ALPHA, SELU_SCALE, _celu_input_scale, _finite, elu, elu_backward

__all__ = ["ELUFunction", "elu_autograd", "ELU", "SELU", "CELU"]


class ELUFunction(torch.autograd.Function):
    """ELU with libelu's kernels both ways. As PyTorch's own autograd: the
    backward starts from the saved input, or (in place, where the input is
    gone) from the saved output, which needs alpha >= 0. So gradients match
    PyTorch's bit for bit (from the same saved values); the forward is
    libelu's exact one (within 1 ulp, the half types correctly rounded),
    where PyTorch's is within an ulp or two."""

    @staticmethod
    def forward(ctx, x, alpha=1.0, scale=1.0, input_scale=1.0, inplace=False):
        if inplace and _finite("alpha", alpha) < 0:
            raise ValueError("in-place ELU needs alpha >= 0: the backward "
                             "then has only the output")
        y = elu(x, alpha, scale, input_scale, out=x if inplace else None)
        if inplace:
            ctx.mark_dirty(x)
        ctx.is_result = inplace
        ctx.constants = (alpha, scale, input_scale)
        ctx.save_for_backward(y if ctx.is_result else x)
        return y

    @staticmethod
    def backward(ctx, grad):
        (saved,) = ctx.saved_tensors
        gx = elu_backward(grad, saved, *ctx.constants, is_result=ctx.is_result)
        return gx, None, None, None, None


def elu_autograd(x, alpha=1.0, scale=1.0, input_scale=1.0, inplace=False):
    return ELUFunction.apply(x, alpha, scale, input_scale, inplace)


class ELU(torch.nn.Module):
    """Drop-in for torch.nn.ELU."""

    def __init__(self, alpha=1.0, inplace=False):
        super().__init__()
        self.alpha, self.inplace = alpha, inplace

    def forward(self, x):
        return ELUFunction.apply(x, self.alpha, 1.0, 1.0, self.inplace)

    def extra_repr(self):
        return f"alpha={self.alpha}" + (", inplace=True" if self.inplace else "")


class SELU(torch.nn.Module):
    """Drop-in for torch.nn.SELU."""

    def __init__(self, inplace=False):
        super().__init__()
        self.inplace = inplace

    def forward(self, x):
        return ELUFunction.apply(x, SELU_ALPHA, SELU_SCALE, 1.0, self.inplace)


class CELU(torch.nn.Module):
    """Drop-in for torch.nn.CELU."""

    def __init__(self, alpha=1.0, inplace=False):
        super().__init__()
        self.alpha, self.inplace = alpha, inplace

    def forward(self, x):
        return ELUFunction.apply(x, self.alpha, 1.0, _celu_input_scale(self.alpha),
                                 self.inplace)
