"""What the Python tests share: each_path, to run a test through each of
the package's paths to the library."""
import pytest

import libelu


@pytest.fixture(params=["fast", "fast, tensors through Python", "ctypes"])
def each_path(request, monkeypatch):
    """Run the test through libelu._ext's fast path (skipped where it is not
    built), with PyTorch tensors read through PyTorch's C++ API where
    libelu._torch_ext is built; then, where it is, through the fast path
    reading tensors through the Python C API; then through the ctypes path
    alone, which serves whatever the fast path does not take."""
    if request.param == "ctypes":
        monkeypatch.setattr(libelu, "_fast", None)
    elif libelu._fast is None:
        pytest.skip("libelu._ext is not built")
    if request.param != "fast, tensors through Python":
        yield
        return
    torch = pytest.importorskip("torch")
    libelu.elu(torch.zeros(1))  # the fast path meets PyTorch
    if libelu._torch_ext is None:
        pytest.skip("libelu._torch_ext is not built")
    libelu._bind_torch(torch, None)
    yield
    libelu._bind_torch(torch, libelu._torch_ext.api)
