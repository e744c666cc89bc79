"""NumPy arrays of every layout: each input gives the result of the same
values in a plain array, or a clear error; an `out` that cannot be written
where it lies raises rather than being written wrong."""
import numpy as np
import pytest

import libelu

pytestmark = pytest.mark.usefixtures("each_path")

VALUES = [-3.5, -1.0, -0.25, 0.0, 0.5, 2.0, -7.0, 1e-3, -40.0, 3.0, -0.5, 9.0]


def records(dtype, lead=False, align=False):
    """A structured array whose field 'a' holds VALUES, beside fields of
    other types (and after a byte where lead): strides that are no multiple
    of the item size, items that are not aligned."""
    fields = [("c", "i1")] * lead + [("a", dtype), ("b", "i2")]
    rec = np.zeros(len(VALUES), np.dtype(fields, align=align))
    rec["a"], rec["b"] = VALUES, 0x7777
    return rec


def misaligned(dtype, count=len(VALUES)):
    """A writable array one byte into its buffer."""
    dtype = np.dtype(dtype)
    array = np.ndarray(count, dtype, buffer=bytearray(count * dtype.itemsize + 1), offset=1)
    array[...] = VALUES[:count]
    return array


def read_only(array):
    array = array.view()
    array.flags.writeable = False
    return array


def grid(dtype):
    return np.array(VALUES, dtype).reshape(3, 4)


INPUTS = {
    "field": lambda: records("f4")["a"],
    "field reversed": lambda: records("f4")["a"][::-1],  # read below the buffer before
    "field every other": lambda: records("f4")["a"][::2],  # aligned, whole items apart
    "field odd ones": lambda: records("f4")["a"][1::2],  # whole items apart, misaligned
    "field after a byte": lambda: records("f8", lead=True)["a"][1::3],
    "field f16": lambda: records("f2", lead=True)["a"],
    "field one element": lambda: records("f4")["a"][2:3],
    "field empty": lambda: records("f4")["a"][:0],
    "field of a 2-d record array": lambda: records("f4").reshape(3, 4)["a"].T,
    "aligned record field": lambda: records("f8", lead=True, align=True)["a"][::-2],
    "big-endian f32": lambda: np.array(VALUES, ">f4"),
    "big-endian f64 reversed 2-d": lambda: grid(">f8")[::-1, ::-2],
    "big-endian f16": lambda: np.array(VALUES, ">f2"),
    "big-endian field": lambda: records(">f4")["a"],
    "big-endian 0-d": lambda: np.array(-2.0, ">f4"),
    "big-endian read-only": lambda: read_only(np.array(VALUES, ">f8")),
    "misaligned f32": lambda: misaligned("f4"),
    "misaligned f64 reversed": lambda: misaligned("f8")[::-1],
    "misaligned f16": lambda: misaligned("f2"),
    "misaligned one element": lambda: misaligned("f4", 1),
    "read-only": lambda: read_only(np.array(VALUES, "f4")),
    "read-only reversed": lambda: read_only(grid("f8")[::-1, 1::2]),
    "read-only 0-d": lambda: read_only(np.array(-1.5)),
    "read-only empty": lambda: read_only(np.zeros((0, 4), "f2")),
    "read-only field": lambda: read_only(records("f4")["a"]),
    "broadcast": lambda: np.broadcast_to(np.array(VALUES[:4], "f4"), (3, 4)),
    "transposed": lambda: grid("f4").T,
}


def plain(array):
    """The same values in a native, C-contiguous array."""
    return np.array(array, dtype=array.dtype.newbyteorder("="), order="C")


def assert_same(got, want):
    assert got.shape == want.shape and got.dtype == want.dtype
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("make", INPUTS.values(), ids=INPUTS.keys())
def test_forward_of_every_input_layout(make):
    x = make()
    before = plain(x)
    y = libelu.elu(x, 0.7)
    assert y.dtype.isnative and y.dtype.itemsize == x.dtype.itemsize
    assert_same(y, libelu.elu(plain(x), 0.7))
    assert_same(plain(x), before)  # read only
    with np.errstate(over="ignore"):
        want = np.where(before > 0, before, 0.7 * np.expm1(before.astype(np.float64)))
    np.testing.assert_allclose(y, want.astype(y.dtype), rtol=1e-3)
    out = np.full(x.shape, np.nan, y.dtype)
    assert libelu.elu(x, 0.7, out=out) is out
    assert_same(out, y)


@pytest.mark.parametrize("make", INPUTS.values(), ids=INPUTS.keys())
def test_backward_of_every_input_layout(make):
    x = make()
    g = np.linspace(-2, 2, x.size).reshape(x.shape).astype(plain(x).dtype)
    for is_result in (False, True):
        want = libelu.elu_backward(g, plain(x), 0.7, is_result=is_result)
        assert_same(libelu.elu_backward(g, x, 0.7, is_result=is_result), want)
        # and as grad_output, with a plain `saved`
        want = libelu.elu_backward(plain(x), g, 0.7, is_result=is_result)
        assert_same(libelu.elu_backward(x, g, 0.7, is_result=is_result), want)


OUTPUTS = {
    "big-endian": (lambda: np.zeros(len(VALUES), ">f4"), "byte order"),
    "field": (lambda: records("f4")["a"], "strides"),
    "misaligned": (lambda: misaligned("f4"), "aligned"),
    "read-only": (lambda: read_only(np.zeros(len(VALUES), "f4")), "read-only"),
    "read-only broadcast": (lambda: np.broadcast_to(np.float32(0), (len(VALUES),)), "read-only"),
}


@pytest.mark.parametrize("make,problem", OUTPUTS.values(), ids=OUTPUTS.keys())
def test_unwritable_out_raises(make, problem):
    x = np.array(VALUES, "f4")
    out = make()
    before = out.copy()
    with pytest.raises(ValueError, match=f"out .*{problem}"):
        libelu.elu(x, out=out)
    with pytest.raises(ValueError, match=f"out .*{problem}"):
        libelu.elu_backward(x, x, out=out)
    assert_same(out, before)


def test_in_place_on_an_unwritable_layout_raises():
    for x in (np.array(VALUES, ">f4"), records("f4")["a"], read_only(np.array(VALUES))):
        before = x.copy()
        with pytest.raises(ValueError, match="out "):
            libelu.elu(x, out=x)
        np.testing.assert_array_equal(x, before)


def test_out_of_one_element_with_any_stride():
    """A dimension of one element has no stride worth checking."""
    rec = records("f4")
    libelu.elu(np.array([-1.0], "f4"), out=rec["a"][2:3])
    assert rec["a"][2] == libelu.elu(np.array(-1.0, "f4"))
    assert list(rec["b"]) == [0x7777] * len(VALUES)


@pytest.mark.parametrize("view", [lambda a: a[::-1, ::2], lambda a: a.T, lambda a: a[1:3],
                                  lambda a: records("f8", align=True)["a"][::2]],
                         ids=["reversed step", "transposed", "rows", "aligned record field"])
def test_in_place_views(view):
    """Views that the C side takes where they lie are written there."""
    x = view(np.array(VALUES * 2, "f8").reshape(4, 6))
    want = libelu.elu(plain(x))
    assert libelu.elu(x, out=x) is x
    assert_same(plain(x), want)
