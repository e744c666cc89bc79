"""libelu._ext, the per-call fast path: what it takes itself, what it hands
to the general path (NotImplemented), and that both give the same bits.
The other Python tests run through each path (each_path)."""
import concurrent.futures
import os
import signal
import subprocess
import sys

import numpy as np
import pytest

import libelu

fast = libelu._fast
pytestmark = pytest.mark.skipif(fast is None, reason="libelu._ext is not built")

X = np.linspace(-4, 4, 64, dtype=np.float32)


def taken(*args):
    """Whether the fast path's elu ran on these arguments."""
    return fast.elu(*args) is not NotImplemented


def test_the_package_uses_the_library_it_loaded():
    ctx = libelu.default_context()
    before = ctx.stats()["cpu_runs"]
    libelu.elu(X)
    assert ctx.stats()["cpu_runs"] == before + 1


@pytest.mark.parametrize("view", ["plain", "f16", "f64", "transpose", "reversed", "broadcast",
                                  "0-d", "empty", "every other"])
def test_numpy_layouts_it_takes(view):
    base = np.linspace(-5, 5, 120).reshape(10, 12)
    x = {"plain": base.astype(np.float32), "f16": base.astype(np.float16), "f64": base,
         "transpose": base.T, "reversed": base[::-1, ::-3],
         "broadcast": np.broadcast_to(base[3], (5, 12)), "0-d": np.array(-0.5),
         "empty": base[:0], "every other": base[:, ::2]}[view]
    libelu.elu(x)  # tells the fast path about NumPy
    assert taken(x, 0.5, 1.0, 1.0, None)
    y = fast.elu(x, 0.5, 1.0, 1.0, None)
    assert y.shape == x.shape and y.dtype == x.dtype
    np.testing.assert_array_equal(y, libelu.elu(x.copy(), 0.5))
    g = np.full(x.shape, 1.5, x.dtype)
    for is_result in (False, True):
        got = fast.elu_backward(g, x, 0.5, 1.0, 1.0, is_result, None)
        np.testing.assert_array_equal(got, libelu.elu_backward(g, x.copy(), 0.5,
                                                               is_result=is_result))


def test_what_it_leaves_to_the_general_path():
    libelu.elu(X)
    swapped = X.astype(X.dtype.newbyteorder(">"))
    misaligned = np.ndarray(3, np.float32, buffer=bytearray(13), offset=1)
    read_only = X.copy()
    read_only.flags.writeable = False
    leaves = [
        (swapped, 1.0, 1.0, 1.0, None),
        (misaligned, 1.0, 1.0, 1.0, None),
        (X.astype(np.int32), 1.0, 1.0, 1.0, None),
        (X, 1.0, 1.0, 1.0, read_only),
        (X, 1.0, 1.0, 1.0, X.astype(np.float64)),  # dtypes differ
        (X, 1.0, 1.0, 1.0, X[:-1].copy()),  # shapes differ
        (X[:-1], 1.0, 1.0, 1.0, X[1:]),  # overlap: the library refuses it
        (X, True, 1.0, 1.0, None),  # not floats: the general path converts them
        (X, np.complex64(1.0), 1.0, 1.0, None),  # the general path refuses them
        (X, np.bool_(True), 1.0, 1.0, None),
        (X, 1.0, np.float32(np.inf), 1.0, None),
        (X, 1.0, 1.0, np.longdouble(1e4000), None),
        (X, 10 ** 400, 1.0, 1.0, None),
        (X, float("nan"), 1.0, 1.0, None),
        (memoryview(X), 1.0, 1.0, 1.0, None),  # not DLPack
        (X.tolist(), 1.0, 1.0, 1.0, None),
        (np.zeros((1,) * 17, np.float32), 1.0, 1.0, 1.0, None),  # past its rank
    ]
    for args in leaves:
        assert not taken(*args), args
    assert fast.elu_backward(X, X, -1.0, 1.0, 1.0, True, None) is NotImplemented
    assert fast.elu_backward(X, X, 1.0, 1.0, 1.0, 1, None) is NotImplemented


def test_ints_and_numpy_real_scalars_are_taken():
    libelu.elu(X)
    for alpha in (2, np.float64(2.0), np.float32(2.0), np.float16(2.0), np.longdouble(2.0),
                  np.int64(2), np.uint8(2)):
        assert taken(X, alpha, 1, 1.0, None), type(alpha)
        np.testing.assert_array_equal(fast.elu(X, alpha, 1, 1.0, None), libelu.elu(X, 2.0))
        g = fast.elu_backward(X, X, alpha, np.float32(1), np.int32(1), False, None)
        np.testing.assert_array_equal(g, libelu.elu_backward(X, X, 2.0))
    third = np.float32(1 / 3)  # as float() makes it, not 1/3
    np.testing.assert_array_equal(libelu.elu(X, third), libelu.elu(X, float(third)))


def test_out_is_returned_and_written_in_place():
    x = X.copy()
    assert fast.elu(x, 1.0, 1.0, 1.0, x) is x
    np.testing.assert_array_equal(x, libelu.elu(X))


def test_arguments_are_counted():
    for call in (lambda: fast.elu(X, 1.0, 1.0, 1.0),
                 lambda: fast.elu(X, 1.0, 1.0, 1.0, None, None, None, None),
                 lambda: fast.elu_backward(X, X, 1.0, 1.0, 1.0, False),
                 lambda: fast.elu_backward(X, X, 1.0, 1.0, 1.0, False, None, None, None,
                                           None)):
        with pytest.raises(TypeError):
            call()


def test_a_named_context_is_taken_and_runs_the_call():
    libelu.elu(X)
    default = libelu.default_context()
    with libelu.Context("cpu", threads=1) as ctx:
        before, default_before = ctx.stats()["cpu_runs"], default.stats()["cpu_runs"]
        assert taken(X, 0.5, 1.0, 1.0, None, ctx)
        assert taken(X, 0.5, 1.0, 1.0, None, None)  # None: the default context
        g = fast.elu_backward(X, X, 0.5, 1.0, 1.0, False, None, ctx)
        assert g is not NotImplemented
        assert ctx.stats()["cpu_runs"] == before + 2
        assert default.stats()["cpu_runs"] == default_before + 1
        np.testing.assert_array_equal(g, libelu.elu_backward(X, X, 0.5))
        np.testing.assert_array_equal(libelu.elu(X, 0.5, context=ctx), libelu.elu(X, 0.5))
        assert ctx.stats()["cpu_runs"] == before + 3


def test_a_stream_named_for_host_arrays_is_taken():
    """The library does not use it there, as on the general path."""
    libelu.elu(X)
    for stream in (0, 1, 1 << 63):
        assert taken(X, 0.5, 1.0, 1.0, None, None, stream)
        g = fast.elu_backward(X, X, 0.5, 1.0, 1.0, False, None, None, stream)
        np.testing.assert_array_equal(g, libelu.elu_backward(X, X, 0.5))
    np.testing.assert_array_equal(libelu.elu(X, stream=7), libelu.elu(X))
    with pytest.raises(TypeError):
        libelu.elu(X, stream=1.5)


def test_what_is_not_an_open_context_is_left_to_the_general_path():
    libelu.elu(X)
    for context in (0, -1, 1 << 64, 1.5, "ctx", True, object()):
        assert not taken(X, 1.0, 1.0, 1.0, None, context), context
        assert fast.elu_backward(X, X, 1.0, 1.0, 1.0, False, None, context) is NotImplemented
    for stream in (-1, 1 << 64, 1.5, True):
        assert not taken(X, 1.0, 1.0, 1.0, None, None, stream), stream
    closed = libelu.Context("cpu")
    closed.close()
    assert not taken(X, 1.0, 1.0, 1.0, None, closed)
    assert libelu._fast_context(closed) is closed
    assert libelu._fast_context(object()) == 0
    assert libelu._fast_context(None) is None
    with pytest.raises(TypeError, match="alpha"):  # the general path's order of checks
        libelu.elu(X, "x", stream=1.5)


def test_a_context_closed_during_the_call_is_refused():
    """Its handle is read after the last Python code the call runs, here a
    parameter's __float__, so the call goes to the general path, which
    says it is closed, rather than into the freed context."""
    libelu.elu(X)
    ctx = libelu.Context("cpu")

    class Closing(np.float32):
        def __float__(self):
            ctx.close()
            return 0.5

    assert fast.elu(X, Closing(0.5), 1.0, 1.0, None, ctx) is NotImplemented
    ctx = libelu.Context("cpu")
    with pytest.raises(ValueError, match="closed"):
        libelu.elu(X, Closing(0.5), context=ctx)
    ctx = libelu.Context("cpu")
    with pytest.raises(ValueError, match="closed"):
        libelu.elu_backward(X, X, Closing(0.5), context=ctx)


def test_numpy_scalars_are_taken_once_pytorch_is_met():
    """PyTorch imports NumPy: its scalars are parameters from the first
    PyTorch call on, in a process that never passed a NumPy array."""
    pytest.importorskip("torch")
    code = ("import numpy as np, torch, libelu\n"
            "x = torch.linspace(-3, 3, 10)\n"
            "libelu.elu(x)\n"
            "y = libelu._fast.elu(x, np.float32(0.5), 1.0, 1.0, None)\n"
            "assert y is not NotImplemented and torch.equal(y, libelu.elu(x, 0.5))\n")
    subprocess.run([sys.executable, "-c", code], check=True, timeout=120)


def test_a_float_subclass_converts_as_float_does():
    class Half(float):
        def __float__(self):
            return 0.5

    libelu.elu(X)
    assert taken(X, Half(2.0), 1.0, 1.0, None)
    np.testing.assert_array_equal(libelu.elu(X, Half(2.0)), libelu.elu(X, 0.5))


@pytest.fixture(params=["C++", "Python"])
def tensors_read_through(request):
    """PyTorch tensors read through PyTorch's C++ API (libelu._torch_ext,
    skipped where it is not built), then through the Python C API."""
    torch = pytest.importorskip("torch")
    libelu.elu(torch.zeros(1))  # the fast path meets PyTorch
    built = libelu._torch_ext.api if libelu._torch_ext is not None else None
    if request.param == "C++" and built is None:
        pytest.skip("libelu._torch_ext is not built")
    libelu._bind_torch(torch, built if request.param == "C++" else None)
    yield torch
    libelu._bind_torch(torch, built)


def test_torch_tensors(tensors_read_through):
    torch = tensors_read_through
    x = torch.linspace(-4, 4, 96, dtype=torch.float64).reshape(8, 12)
    for view in (x, x.t(), x[::2, 1::3], x[3].expand(5, 12), x.to(torch.bfloat16),
                 x.to(torch.float16).t(), torch.nn.Parameter(x.float())):
        assert taken(view, 0.5, 1.0, 1.0, None)
        assert torch.equal(fast.elu(view, 0.5, 1.0, 1.0, None),
                           libelu.elu(view.detach().contiguous(), 0.5))
    neg = torch.imag(torch.complex(x, x).conj())  # a view with the negative bit
    assert neg.is_neg() and not taken(neg, 1.0, 1.0, 1.0, None)
    assert torch.equal(libelu.elu(neg), libelu.elu(neg.resolve_neg()))
    for other in (x.to_sparse(), x.int(), torch.empty(3, device="meta")):
        assert not taken(other, 1.0, 1.0, 1.0, None)
    out = torch.empty(8, 12, dtype=torch.float64)
    assert fast.elu(x, 1.0, 1.0, 1.0, out) is out
    assert not taken(x, 1.0, 1.0, 1.0, out.float())


def test_cuda_tensors_in_a_named_context(tensors_read_through):
    """A CUDA context named takes the call on the tensors' stream; a CPU
    one is left to the general path, which refuses it."""
    torch = tensors_read_through
    if not torch.cuda.is_available():
        pytest.skip("needs a CUDA device")
    x = torch.linspace(-4, 4, 1000, device="cuda")
    with libelu.Context("cuda") as ctx, libelu.Context("cpu") as cpu:
        before = ctx.stats()["gpu_launches"]
        stream = torch.cuda.Stream()
        with torch.cuda.stream(stream):
            y = fast.elu(x, 0.5, 1.0, 1.0, None, ctx)
            assert y is not NotImplemented
            stream.synchronize()
        assert ctx.stats()["gpu_launches"] > before
        assert torch.equal(y, libelu.elu(x, 0.5))
        assert not taken(x, 0.5, 1.0, 1.0, None, cpu)
        with pytest.raises(ValueError, match="CPU"):
            libelu.elu(x, context=cpu)
        # a stream named: taken where it is the one PyTorch works on, else
        # left to the general path, which orders PyTorch's work before it
        current = torch.cuda.current_stream().cuda_stream
        assert taken(x, 0.5, 1.0, 1.0, None, None, current)
        assert not taken(x, 0.5, 1.0, 1.0, None, None, stream.cuda_stream)
        z = libelu.elu(x, 0.5, stream=stream.cuda_stream)
        stream.synchronize()
        assert torch.equal(z, y)


def test_torch_outputs_are_fresh_tensors(tensors_read_through):
    torch = tensors_read_through
    x = torch.linspace(-4, 4, 96).reshape(8, 12).t().requires_grad_()
    y = fast.elu(x, 1.0, 1.0, 1.0, None)
    assert type(y) is torch.Tensor and not y.requires_grad and y.grad_fn is None
    assert y.shape == x.shape and y.stride() == x.stride()  # as empty_like lays it out
    assert y.data_ptr() != x.data_ptr()
    assert torch.equal(y, libelu.elu(x.detach().contiguous()))


def test_cpu_calls_run_on_pytorch_threads():
    """Once PyTorch is met, where libelu._torch_ext runs at::parallel_for in
    parallel, the default CPU context hands a call's parts to PyTorch's
    threads: the results of libelu's own workers, from several threads at
    once too."""
    torch = pytest.importorskip("torch")
    libelu.elu(torch.zeros(1))
    if getattr(libelu._torch_ext, "parallel", None) is None:
        pytest.skip("libelu._torch_ext is not built, or its at::parallel_for is serial")
    context = libelu.default_context("cpu")
    assert context.handle.value == libelu._context_address(-1)
    x = torch.randn(1 << 18, dtype=torch.float64) * 4
    inputs = [x.to(dtype) for dtype in (torch.float32, torch.float64, torch.float16,
                                        torch.bfloat16)]
    with libelu.Context(backend="cpu", threads=4, disk_cache=False) as own:
        want = [libelu.selu(v, context=own) for v in inputs]
    assert all(torch.equal(libelu.selu(v), w) for v, w in zip(inputs, want))
    with concurrent.futures.ThreadPoolExecutor(4) as pool:
        got = list(pool.map(lambda i: libelu.selu(inputs[i % 4]), range(16)))
    assert all(torch.equal(g, want[i % 4]) for i, g in enumerate(got))


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork")
def test_cpu_calls_in_a_fork_child():
    """In a fork child the parts run on the calling thread: PyTorch's
    OpenMP threads are the parent's, and waiting for them would hang (as
    PyTorch's own calls do there)."""
    torch = pytest.importorskip("torch")
    libelu.elu(torch.zeros(1))
    x = torch.randn(1 << 18)
    want = libelu.elu(x).numpy().tobytes()
    pid = os.fork()
    if pid == 0:  # the child: no pytest, no PyTorch operation, a deadline
        signal.alarm(30)
        os._exit(0 if libelu.elu(x).numpy().tobytes() == want else 1)
    assert os.waitpid(pid, 0)[1] == 0


_FORK_AFTER_PYTORCH = """
import os, signal, torch, libelu
x = torch.randn(1 << 18)
torch.nn.functional.elu(x)  # PyTorch's threads, before libelu meets PyTorch
pid = os.fork()
if pid == 0:
    signal.alarm(30)
    os._exit(0 if libelu.elu(x).numpy().tobytes() == libelu.elu(x.numpy()).tobytes() else 1)
os._exit(os.waitpid(pid, 0)[1] != 0)
"""


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork")
def test_a_fork_child_meets_pytorch_on_libelus_threads():
    """A fork child that meets PyTorch keeps libelu's own threads: PyTorch's
    may be the parent's. In a new interpreter, where libelu has not met
    PyTorch before the fork."""
    pytest.importorskip("torch")
    # Not from the current folder, which may be a build folder with libelu.so in it.
    done = subprocess.run([sys.executable, "-c", _FORK_AFTER_PYTORCH], timeout=120,
                          cwd=os.path.dirname(os.path.abspath(__file__)))
    assert done.returncode == 0


def test_pytorch_threads_capped_at_libelus_most(monkeypatch):
    torch = pytest.importorskip("torch")
    libelu.elu(torch.zeros(1))
    if getattr(libelu._torch_ext, "parallel", None) is None:
        pytest.skip("libelu._torch_ext is not built, or its at::parallel_for is serial")
    monkeypatch.setattr(torch, "get_num_threads", lambda: 5000)
    libelu._run_on_torch_threads(torch, libelu._torch_ext.parallel)
    assert libelu.default_context("cpu").info()["cpu_threads"] == 1024
    monkeypatch.undo()
    libelu._run_on_torch_threads(torch, libelu._torch_ext.parallel)
    libelu._bind_torch(torch, libelu._torch_ext.api)  # the fast path asks for it again
    x = torch.randn(1 << 17)
    runs = libelu.default_context("cpu").stats()["cpu_runs"]
    assert torch.equal(libelu.elu(x), torch.from_numpy(libelu.elu(x.numpy())))
    assert libelu.default_context("cpu").stats()["cpu_runs"] == runs + 2


def test_torch_extension_refuses_another_pytorch(monkeypatch):
    torch = pytest.importorskip("torch")
    libelu.elu(torch.zeros(1))
    if libelu._torch_ext is None:
        pytest.skip("libelu._torch_ext is not built")
    monkeypatch.setattr(torch, "__version__", "0.0.1")
    with pytest.warns(RuntimeWarning, match="built for PyTorch .*, not 0.0.1"):
        assert libelu._lib.torch_extension(fast) is None


def cuda_cupy():
    """CuPy where there is a GPU, told to the fast path; else skip."""
    cupy = pytest.importorskip("cupy")
    try:
        devices = cupy.cuda.runtime.getDeviceCount()
    except cupy.cuda.runtime.CUDARuntimeError:  # no driver
        devices = 0
    if devices == 0:
        pytest.skip("needs a CUDA device")
    libelu.elu(cupy.zeros(1, cupy.float32))
    return cupy


def test_cupy_layouts_it_takes():
    cupy = cuda_cupy()
    base = cupy.linspace(-5, 5, 120).reshape(10, 12)
    views = [base.astype(cupy.float32), base.astype(cupy.float16), base, base.T,
             base[::-1, ::-3], cupy.broadcast_to(base[3], (5, 12)), cupy.array(-0.5), base[:0],
             base[:, ::2]]
    for x in views:
        assert taken(x, 0.5, 1.0, 1.0, None)
        y = fast.elu(x, 0.5, 1.0, 1.0, None)
        assert isinstance(y, cupy.ndarray) and y.shape == x.shape and y.dtype == x.dtype
        np.testing.assert_array_equal(cupy.asnumpy(y), libelu.elu(cupy.asnumpy(x), 0.5))
        g = cupy.full(x.shape, 1.5, x.dtype)
        for is_result in (False, True):
            got = fast.elu_backward(g, x, 0.5, 1.0, 1.0, is_result, None)
            want = libelu.elu_backward(cupy.ascontiguousarray(g), cupy.ascontiguousarray(x),
                                       0.5, is_result=is_result)
            np.testing.assert_array_equal(cupy.asnumpy(got), cupy.asnumpy(want))
    out = cupy.empty_like(views[0])
    assert fast.elu(views[0], 1.0, 1.0, 1.0, out) is out
    misaligned = cupy.ndarray((3,), cupy.float32, memptr=cupy.empty(16, cupy.uint8).data + 1)
    for other in (base.astype(cupy.int32), base.astype(cupy.complex64), misaligned):
        assert not taken(other, 1.0, 1.0, 1.0, None)
    assert not taken(views[0], 1.0, 1.0, 1.0, out.astype(cupy.float64))


def test_cupy_runs_on_the_current_stream():
    """On CuPy's current stream, here one that does not wait for the legacy
    default stream: a kernel on any other would read x before it is
    filled."""
    cupy = cuda_cupy()
    a = cupy.ones((4096, 4096), cupy.float64)
    x = cupy.empty(1 << 22, cupy.float32)
    stream = cupy.cuda.Stream(non_blocking=True)
    with stream:
        a @ a  # keeps the stream busy for a while
        x.fill(-1.0)
        y = libelu.elu(x)
    stream.synchronize()
    assert bool((y == cupy.float32(libelu.elu(np.array([-1.0], np.float32))[0])).all())
