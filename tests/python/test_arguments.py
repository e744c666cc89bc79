"""Wrong arguments to every public function: TypeError for what is not an
array or of a wrong dtype, ValueError for wrong values, shapes and devices,
each naming the argument."""
import subprocess
import sys

import numpy as np
import pytest

import libelu

pytestmark = pytest.mark.usefixtures("each_path")

X = np.linspace(-3, 3, 12, dtype=np.float32)


class Foreign:
    """An array of another library: NumPy's memory through DLPack alone
    (so libelu's general path), on the device it claims."""

    def __init__(self, array, device=(1, 0)):
        self.array, self.device = array, device

    def __dlpack__(self, stream=None):
        return self.array.__dlpack__()

    def __dlpack_device__(self):
        return self.device


def calls(x=X, **kw):
    """Each public function on x (as every array argument in turn where
    there are several), with the other arguments fine."""
    plain = np.ones_like(X)
    return {
        "elu": lambda: libelu.elu(x, **kw),
        "selu": lambda: libelu.selu(x, **kw),
        "celu": lambda: libelu.celu(x, **kw),
        "elu_backward grad_output": lambda: libelu.elu_backward(x, plain, **kw),
        "elu_backward saved": lambda: libelu.elu_backward(plain, x, **kw),
    }


NOT_ARRAYS = [[1.0, 2.0], 1.5, None, "x", (np.float32(1),), memoryview(b"abcd")]


@pytest.mark.parametrize("x", NOT_ARRAYS, ids=lambda x: type(x).__name__)
def test_not_an_array(x):
    for name, call in calls(x).items():
        with pytest.raises(TypeError, match="must be an array that supports DLPack"
                                            ".*NumPy, PyTorch"):
            call()
    if x is not None:  # out's default
        with pytest.raises(TypeError, match="^out must be an array"):
            libelu.elu(X, out=x)


def test_no_output_like_an_unknown_array_type():
    with pytest.raises(TypeError, match="pass out="):
        libelu.elu(Foreign(X))
    out = np.empty_like(X)
    assert libelu.elu(Foreign(X), out=out) is out
    np.testing.assert_array_equal(out, libelu.elu(X))


WRONG_DTYPES = [np.int32, np.int64, np.uint8, np.bool_, np.complex64, np.complex128,
                np.longdouble, object, "U3", "M8[s]", [("a", "f4"), ("b", "i2")]]


@pytest.mark.parametrize("dtype", WRONG_DTYPES, ids=lambda dtype: str(np.dtype(dtype)))
def test_unsupported_dtypes(dtype):
    x = np.zeros(X.shape, dtype)
    for name, call in calls(x).items():
        with pytest.raises(TypeError, match=r"has dtype .*libelu takes float16, bfloat16"):
            call()
    with pytest.raises(TypeError, match="^out has dtype"):
        libelu.elu(X, out=x)


@pytest.mark.parametrize("dtype", [np.int32, np.complex64, np.bool_])
def test_unsupported_dtypes_of_other_array_types(dtype):
    with pytest.raises(TypeError, match=f"^x has dtype {np.dtype(dtype).name}"):
        libelu.elu(Foreign(np.zeros(3, dtype)), out=np.zeros(3, np.float32))


def test_mismatched_dtypes():
    f64 = X.astype(np.float64)
    with pytest.raises(TypeError, match=r"^out \(float64, shape \(12,\)\) does not match "
                                        r"x \(float32, shape \(12,\)\)"):
        libelu.elu(X, out=np.empty_like(f64))
    with pytest.raises(TypeError, match=r"^saved \(float64.*grad_output \(float32"):
        libelu.elu_backward(X, f64)
    with pytest.raises(TypeError, match=r"^out \(float16.*grad_output \(float32"):
        libelu.elu_backward(X, X, out=X.astype(np.float16))


def test_mismatched_shapes():
    with pytest.raises(ValueError, match=r"^out \(float32, shape \(13,\)\) does not match "
                                         r"x \(float32, shape \(12,\)\)"):
        libelu.elu(X, out=np.empty(13, np.float32))
    with pytest.raises(ValueError, match=r"^out \(float32, shape \(3, 4\)\).*shape \(12,\)"):
        libelu.elu(X, out=np.empty((3, 4), np.float32))
    with pytest.raises(ValueError, match=r"^saved \(float32, shape \(1, 12\)\).*grad_output "
                                         r"\(float32, shape \(12,\)\)"):
        libelu.elu_backward(X, X[None])
    with pytest.raises(ValueError, match=r"^out \(float32, shape \(\)\)"):
        libelu.elu_backward(X, X, out=np.empty((), np.float32))


def test_mismatched_devices():
    on_gpu = Foreign(X, device=(2, 0))
    with pytest.raises(ValueError, match="^out is on cuda:0 and x on cpu:0: they must be "
                                         "on one device"):
        libelu.elu(X, out=on_gpu)
    with pytest.raises(ValueError, match="^saved is on cuda:1 and grad_output on cuda:0"):
        libelu.elu_backward(on_gpu, Foreign(X, device=(2, 1)), out=on_gpu)
    with pytest.raises(ValueError, match="^x is on DLPack device type 8:0: libelu runs on"):
        libelu.elu(Foreign(X, device=(8, 0)), out=np.empty_like(X))


def test_misaligned_arrays_of_other_array_types():
    """Their producer exports them as they lie; the C side loads whole items."""
    misaligned = np.ndarray(3, np.float32, buffer=bytearray(13), offset=1)
    with pytest.raises(ValueError, match="^x is not aligned to its 4-byte items"):
        libelu.elu(Foreign(misaligned), out=np.empty(3, np.float32))
    with pytest.raises(ValueError, match="^out is not aligned"):
        libelu.elu(np.zeros(3, np.float32), out=Foreign(misaligned))


@pytest.mark.parametrize("alpha", [0, 0.0, -0.0, 1e-310, np.float32(0)])
def test_celu_needs_a_non_zero_alpha(alpha):
    with pytest.raises(ValueError, match="CELU .*alpha must be non-zero"):
        libelu.celu(X, alpha)


@pytest.mark.parametrize("param", ["alpha", "scale", "input_scale"])
@pytest.mark.parametrize("value", [np.inf, -np.inf, np.nan])
def test_parameters_must_be_finite(param, value):
    with pytest.raises(ValueError, match=f"^{param} must be finite"):
        libelu.elu(X, **{param: value})
    with pytest.raises(ValueError, match=f"^{param} must be finite"):
        libelu.elu_backward(X, X, **{param: value})
    if param == "alpha":
        with pytest.raises(ValueError, match="^alpha must be finite"):
            libelu.celu(X, value)


@pytest.mark.parametrize("value", ["1.0", None, [1.0], 1j, np.complex128(1), np.complex64(2 + 0j)])
def test_parameters_must_be_real_numbers(value):
    for call in (lambda: libelu.elu(X, alpha=value), lambda: libelu.elu(X, scale=value),
                 lambda: libelu.celu(X, value), lambda: libelu.elu_backward(X, X, value)):
        with pytest.raises(TypeError, match="must be a real number"):
            call()


def test_parameters_of_other_real_types():
    want = libelu.elu(X, 0.5, 2.0)
    np.testing.assert_array_equal(libelu.elu(X, np.float32(0.5), 2), want)
    np.testing.assert_array_equal(libelu.elu(X, np.array(0.5), np.int64(2)), want)


def test_backward_from_the_output_needs_alpha_at_least_0():
    with pytest.raises(ValueError, match=r"is_result.*alpha >= 0"):
        libelu.elu_backward(X, X, alpha=-1.0, is_result=True)


def test_the_library_s_own_refusals_stay_elu_errors():
    with pytest.raises(libelu.EluError, match="ELU_ERR_INVALID_ARG.*overlaps"):
        libelu.elu(X[:-1], out=X[1:])


def test_import_brings_in_neither_torch_nor_numpy():
    # Not from the current folder, which may be a build folder with libelu.so in it.
    code = ("import sys; del sys.path[0]; import libelu; "
            "print(sorted({'torch', 'numpy'} & set(sys.modules)))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          check=True)
    assert done.stdout.strip() == "[]"


def test_torch_modules():
    torch = pytest.importorskip("torch")
    from libelu.torch import CELU, ELU, ELUFunction
    x = torch.linspace(-2, 2, 8)
    with pytest.raises(ValueError, match="CELU .*alpha must be non-zero"):
        CELU(0.0)(x)
    with pytest.raises(TypeError, match="alpha must be a real number"):
        ELU("1", inplace=True)(x.clone())
    with pytest.raises(TypeError, match="^x has dtype int32"):
        ELU()(torch.arange(4, dtype=torch.int32))
    with pytest.raises(ValueError, match="in-place ELU needs alpha >= 0"):
        ELUFunction.apply(x.clone(), -0.5, 1.0, 1.0, True)


def test_torch_tensors_with_the_negative_bit():
    """Their memory holds their values' negatives: an input is read from a
    resolved copy, an out refused."""
    torch = pytest.importorskip("torch")
    x = torch.linspace(-3, 3, 12, dtype=torch.float64)
    neg = torch.imag(torch.complex(x, x).conj())
    assert neg.is_neg()
    assert torch.equal(libelu.elu(neg, 0.5), libelu.elu(-x, 0.5))
    assert torch.equal(libelu.elu_backward(neg, neg), libelu.elu_backward(-x, -x))
    with pytest.raises(ValueError, match="^out has PyTorch's negative bit"):
        libelu.elu(x, out=neg)


def test_torch_out_as_autograd_needs():
    """As PyTorch's in-place operations: an out that autograd records
    gradients for is refused while it records them, an inference tensor
    outside inference mode too; a written out's version counter moves, so a
    backward that saved it refuses to run rather than use what changed."""
    torch = pytest.importorskip("torch")
    x = torch.linspace(-2, 2, 8)
    leaf = torch.zeros(8, requires_grad=True)
    for out in (leaf, leaf * 2):
        with pytest.raises(ValueError, match="^out requires gradients"):
            libelu.elu(x, out=out)
    with torch.no_grad():
        assert libelu.elu(x, out=leaf) is leaf
    assert torch.equal(leaf.detach(), libelu.elu(x))
    with torch.inference_mode():
        frozen = torch.zeros(8)
        assert libelu.elu(x, out=frozen) is frozen
    with pytest.raises(ValueError, match="^out is an inference tensor"):
        libelu.elu(x, out=frozen)
    other_shape = torch.zeros(4)
    with pytest.raises(ValueError):
        libelu.elu(x, out=other_shape)
    assert other_shape._version == 0  # nothing written, nothing to tell
    saved = x.clone()
    weight = torch.ones(8, requires_grad=True)
    loss = (weight * saved).sum()  # saves `saved` for weight's gradient
    version = saved._version
    for write in (lambda: libelu.elu(x, out=saved),
                  lambda: libelu.elu_backward(x, x, out=saved)):
        write()
        assert saved._version == version + 1
        version = saved._version
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        loss.backward()


def test_torch_output_read_as_made():
    """A new output is read for what it is: a function mode that answers
    torch.empty_like with another dtype gets a refusal, not a write past
    the end of a smaller tensor."""
    torch = pytest.importorskip("torch")
    from torch.overrides import TorchFunctionMode

    class HalfEmptyLike(TorchFunctionMode):
        def __torch_function__(self, func, types, args=(), kwargs=None):
            if func is torch.empty_like:
                return torch.zeros(args[0].shape, dtype=torch.float16)
            return func(*args, **(kwargs or {}))

    x = torch.linspace(-2, 2, 1000)
    with HalfEmptyLike():
        try:
            y = libelu.elu(x)
        except TypeError as error:
            assert "does not match x" in str(error)
        else:
            assert torch.equal(y, libelu.elu(x))


@pytest.mark.parametrize("stream,error", [("0", TypeError), (True, TypeError), (1.0, TypeError),
                                          (-1, ValueError), (1 << 64, ValueError)])
def test_stream_must_be_a_handle(stream, error):
    for name, call in calls(stream=stream).items():
        with pytest.raises(error, match="^stream "):
            call()
