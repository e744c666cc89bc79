"""The Python package. NumPy on the CPU runs everywhere (CI included);
PyTorch and CuPy on CUDA run where they and a GPU are present."""
import numpy as np
import pytest

import libelu

pytestmark = pytest.mark.usefixtures("each_path")

SPECIALS = [np.nan, np.inf, -np.inf, 0.0, -0.0, 1e-40, -1e-40, -1e-310, -100.0, 1e4, -1e4]
SETS = [(1.0, 1.0, 1.0), (0.3, 1.0, 1.0), (libelu.SELU_ALPHA, libelu.SELU_SCALE, 1.0),
        (0.6, 1.0, 1 / 0.6)]


def inputs(dtype, n=20000, seed=None):
    rng = np.random.default_rng(seed)
    x = np.concatenate([SPECIALS, rng.normal(0, 8, n // 2),
                        rng.choice([-1, 1], n // 2) * np.exp2(rng.uniform(-40, 10, n // 2))])
    with np.errstate(over="ignore"):
        return x.astype(dtype)


def constants(dtype, alpha, scale, input_scale):
    """As PyTorch rounds them: to the arithmetic type, scale*alpha in it."""
    op = np.float64 if dtype == np.float64 else np.float32
    return op(op(alpha) * op(scale)), op(scale), op(input_scale)


def reference(x, alpha=1.0, scale=1.0, input_scale=1.0):
    neg, pos, nip = (np.longdouble(c) for c in constants(x.dtype, alpha, scale, input_scale))
    xx = x.astype(np.longdouble)
    with np.errstate(over="ignore", invalid="ignore"):
        return np.where(xx > 0, xx * pos, np.expm1(xx * nip) * neg)


def ulps(got, ref):
    """Error of got in units of the last place of its dtype at ref."""
    with np.errstate(over="ignore", invalid="ignore"):
        rounded = ref.astype(got.dtype)
        both_nan = np.isnan(got) & np.isnan(rounded)
        same_inf = np.isinf(rounded) & (got == rounded)
        spacing = np.spacing(np.abs(rounded)).astype(np.longdouble)
        err = np.abs(got.astype(np.longdouble) - ref) / spacing
    return np.where(both_nan | same_inf, 0, np.where(np.isnan(err), np.inf, err))


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.float16])
@pytest.mark.parametrize("alpha,scale,input_scale", SETS)
def test_numpy_forward(dtype, alpha, scale, input_scale):
    x = inputs(dtype)
    y = libelu.elu(x, alpha, scale, input_scale)
    assert isinstance(y, np.ndarray) and y.dtype == dtype and y.shape == x.shape
    assert ulps(y, reference(x, alpha, scale, input_scale)).max() <= 1.0


def test_helpers_and_in_place():
    x = inputs(np.float32)
    np.testing.assert_array_equal(libelu.selu(x), libelu.elu(x, libelu.SELU_ALPHA, libelu.SELU_SCALE))
    np.testing.assert_array_equal(libelu.celu(x, 2.0), libelu.elu(x, 2.0, 1.0, 0.5))
    y = x.copy()
    assert libelu.elu(y, out=y) is y
    np.testing.assert_array_equal(y, libelu.elu(x))


@pytest.mark.parametrize("view", ["step", "transpose", "reversed", "broadcast", "3d"])
def test_numpy_strided_views(view):
    base = inputs(np.float64, 6000)[:6000].reshape(60, 100)
    x = {"step": base[::3, 1::2], "transpose": base.T, "reversed": base[::-1, ::-2],
         "broadcast": np.broadcast_to(base[7], (40, 100)),  # read-only, stride 0
         "3d": base.reshape(6, 10, 100).transpose(2, 0, 1)[::2]}[view]
    y = libelu.elu(x, 0.8)
    np.testing.assert_array_equal(y, libelu.elu(np.ascontiguousarray(x), 0.8))
    out = np.full(x.shape[::-1], np.nan).T  # a strided output
    libelu.elu(x, 0.8, out=out)
    np.testing.assert_array_equal(out, y)


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.float16])
def test_numpy_backward(dtype):
    x = inputs(dtype, 5000)
    g = np.random.default_rng().uniform(-2, 2, x.shape).astype(dtype)
    alpha, scale, input_scale = SETS[3]
    neg, pos, nip = (np.longdouble(c) for c in constants(dtype, alpha, scale, input_scale))
    gg, xx = g.astype(np.longdouble), x.astype(np.longdouble)
    with np.errstate(over="ignore", invalid="ignore"):
        ref = np.where(xx <= 0, gg * nip * neg * np.exp(xx * nip), gg * pos)
    got = libelu.elu_backward(g, x, alpha, scale, input_scale)
    assert ulps(got, ref).max() <= 1.0
    y = libelu.elu(x, alpha, scale, input_scale)
    yy = y.astype(np.longdouble)
    with np.errstate(over="ignore", invalid="ignore"):
        ref = np.where(yy <= 0, gg * nip * (yy + neg), gg * pos)
    got = libelu.elu_backward(g, y, alpha, scale, input_scale, is_result=True)
    assert ulps(got, ref).max() <= 1.0


def test_empty_and_scalar():
    assert libelu.elu(np.zeros((0, 3), np.float32)).shape == (0, 3)
    assert float(libelu.elu(np.array(-1.0))) == pytest.approx(np.expm1(-1.0), abs=0)


# ---- PyTorch and CuPy on CUDA ----

try:
    import torch
    HAVE_CUDA = torch.cuda.is_available()
except ImportError:
    HAVE_CUDA = False
cuda = pytest.mark.skipif(not HAVE_CUDA, reason="needs PyTorch with a CUDA device")
TORCH_DTYPES = ["float32", "float64", "float16", "bfloat16"]


def torch_inputs(dtype, n=1 << 20):
    x = torch.from_numpy(inputs(np.float64, n)).to(getattr(torch, dtype))
    return x.cuda()


def bits(t):
    return t.view({2: torch.int16, 4: torch.int32, 8: torch.int64}[t.element_size()])


def assert_bitwise(got, want):
    same = (bits(got) == bits(want)) | (torch.isnan(got) & torch.isnan(want))
    assert bool(same.all()), f"{int((~same).sum())} elements differ"


@cuda
@pytest.mark.parametrize("dtype", TORCH_DTYPES)
@pytest.mark.parametrize("alpha,scale,input_scale", SETS)
def test_torch_bitwise(dtype, alpha, scale, input_scale):
    """The forward bit for bit the CPU path's (exact: correctly rounded for
    the half types, within 1 ulp for f32 and f64, where PyTorch's is not);
    the backward bit for bit PyTorch's."""
    x = torch_inputs(dtype)
    y = libelu.elu(x, alpha, scale, input_scale)
    assert isinstance(y, torch.Tensor) and y.is_cuda and y.dtype == x.dtype
    assert_bitwise(y.cpu(), libelu.elu(x.cpu(), alpha, scale, input_scale))
    g = torch.randn_like(x)
    for is_result, saved in ((False, x), (True, y)):
        assert_bitwise(libelu.elu_backward(g, saved, alpha, scale, input_scale, is_result),
                       torch.ops.aten.elu_backward(g, alpha, scale, input_scale, is_result, saved))


@cuda
def test_torch_views_on_gpu():
    base = torch_inputs("float32", 1 << 16)[: 1 << 16].reshape(256, 256)
    for x in (base.t(), base[::3, 1::2], base[5].expand(64, 256), base.flip(0)):
        assert_bitwise(libelu.elu(x, 0.7).cpu(), libelu.elu(x.cpu(), 0.7))
    out = torch.full((256, 256), float("nan"), device="cuda").t()
    libelu.elu(base, 0.7, out=out)
    assert_bitwise(out.cpu(), libelu.elu(base.cpu(), 0.7))


@cuda
def test_autograd_gradcheck_and_modules():
    from libelu.torch import CELU, ELU, SELU, ELUFunction
    x = torch.randn(64, dtype=torch.float64, device="cuda", requires_grad=True)
    for alpha in (1.0, 0.5, -0.3):
        assert torch.autograd.gradcheck(lambda t: ELUFunction.apply(t, alpha, 1.05, 0.8), (x,))
    for ours, theirs in ((ELU(0.5), torch.nn.ELU(0.5)), (SELU(), torch.nn.SELU()),
                         (CELU(1.5), torch.nn.CELU(1.5)),
                         (ELU(0.7, inplace=True), torch.nn.ELU(0.7, inplace=True))):
        a = torch.randn(1000, device="cuda", requires_grad=True)
        b = a.detach().clone().requires_grad_()
        ya, yb = ours(a * 1), theirs(b * 1)  # "* 1": in place needs a non-leaf
        # Within a few ulps of PyTorch's forward (libelu's is within one of
        # the exact value, PyTorch's within two or so), and the gradients
        # as close as that allows.
        torch.testing.assert_close(ya.detach(), yb.detach(), rtol=2**-21, atol=0)
        ya.sum().backward()
        yb.sum().backward()
        torch.testing.assert_close(a.grad, b.grad, rtol=1e-5, atol=1e-6)


@cuda
def test_runs_on_the_current_stream():
    x = torch.empty(1 << 22, device="cuda")
    stream = torch.cuda.Stream()
    with torch.cuda.stream(stream):
        torch.cuda._sleep(20_000_000)  # keep the stream busy...
        x.fill_(-1.0)                   # ...so a kernel elsewhere would read garbage
        y = libelu.elu(x)
    stream.synchronize()
    assert bool((y == libelu.elu(torch.tensor([-1.0]))[0].cuda()).all())


@cuda
def test_cuda_graph_capture():
    x = torch_inputs("float32", 1 << 16)
    y = libelu.elu(x)  # compile before capture
    graph = torch.cuda.CUDAGraph()
    stream = torch.cuda.Stream()
    with torch.cuda.stream(stream):
        with torch.cuda.graph(graph):
            y = libelu.elu(x)
    x.copy_(torch_inputs("float32", 1 << 16))
    graph.replay()
    torch.cuda.synchronize()
    assert_bitwise(y.cpu(), libelu.elu(x.cpu()))


@cuda
def test_cupy_arrays():
    cupy = pytest.importorskip("cupy")
    x = cupy.asarray(inputs(np.float32))
    y = libelu.elu(x, 0.9)
    assert isinstance(y, cupy.ndarray)
    assert ulps(cupy.asnumpy(y), reference(cupy.asnumpy(x), 0.9)).max() <= 2.0
    libelu.elu(x, 0.9, out=x)
    assert bool(cupy.array_equal(x, y, equal_nan=True))


@cuda
def test_cpu_tensor_in_torch_stays_on_cpu():
    x = torch.from_numpy(inputs(np.float32))
    y = libelu.elu(x)
    assert not y.is_cuda
    assert ulps(y.numpy(), reference(x.numpy())).max() <= 1.0
