"""The tutorial's test.py, on libelu: ELU on the CPU and (if there is one)
the GPU against torch.nn.functional.elu, with nothing compiled at install.
Run from the repository after building:
    LIBELU_LIBRARY=build/libelu.so PYTHONPATH=src/python python3 examples/python/test_elu.py
"""
import torch

import libelu
from libelu.torch import ELU


def test_elu():
    # CPU
    x_cpu = torch.randn(10)
    out_cpu = libelu.elu(x_cpu)
    ref_cpu = torch.nn.functional.elu(x_cpu)
    assert torch.allclose(out_cpu, ref_cpu), "CPU test failed"
    # CUDA, with gradients through the drop-in module: the forward bit for
    # bit the CPU's (exact to 1 ulp, where PyTorch's is within 2 or so), the
    # gradient PyTorch's
    if torch.cuda.is_available():
        x_cuda = x_cpu.cuda().requires_grad_()
        out_cuda = ELU()(x_cuda)
        ref_cuda = torch.nn.functional.elu(x_cuda)
        assert torch.equal(out_cuda.cpu(), out_cpu), "CUDA test failed"
        assert torch.allclose(out_cuda, ref_cuda), "CUDA test failed"
        (grad,) = torch.autograd.grad(out_cuda.sum(), x_cuda)
        (ref_grad,) = torch.autograd.grad(ref_cuda.sum(), x_cuda)
        assert torch.allclose(grad, ref_grad), "CUDA gradient test failed"
    print("All tests passed!")


if __name__ == "__main__":
    test_elu()
