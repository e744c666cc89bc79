"""NumPy arrays as the C side can take them: inputs copied where their
layout is one it cannot read, outputs checked, read-only inputs described
by hand; through the arrays' own methods, without importing NumPy."""
import ctypes

from . import _lib


def _check_dtype(array, name):
    if array.dtype.kind != "f" or array.itemsize not in (2, 4, 8):
        raise _lib.unsupported_dtype(name, array.dtype)


def _layout_problem(array):
    """Why the C side cannot take the array where it lies, or None. Its
    DLPack strides count items, and it loads and stores them as the C types
    they are, so they must be aligned as those (NumPy's `aligned` flag).
    Dimensions of one item have no stride that matters."""
    if not array.dtype.isnative:
        return f"has non-native byte order ({array.dtype.str})"
    if not array.flags.c_contiguous and any(
            n > 1 and stride % array.itemsize for n, stride in zip(array.shape, array.strides)):
        return f"has strides {array.strides}, not multiples of its {array.itemsize}-byte items"
    if not array.flags.aligned:
        return f"is not aligned to its {array.itemsize}-byte items"
    return None


def readable(array, name):
    """The input as the C side can read it: the array itself, else (byte
    swapped, or misaligned, or strided by part of an item) a native copy."""
    _check_dtype(array, name)
    if _layout_problem(array) is None:
        return array
    return array.astype(array.dtype.newbyteorder("="), order="C")


def tensor(array, name, writable):
    """A DLTensor for an array the C side can take in place (an input from
    readable(), or an output), and what must live while it is used;
    ValueError for an output that it cannot write where it lies."""
    if writable:
        _check_dtype(array, name)
        problem = _layout_problem(array) or (not array.flags.writeable and "is read-only")
        if problem:
            raise ValueError(f"{name} {problem}: libelu writes results where they lie, so an "
                             "output must be writable, native in byte order, aligned, and "
                             "strided by whole items")
    if array.flags.writeable:
        capsule = array.__dlpack__()
        return _lib.tensor_of(capsule), capsule
    return _read_only_tensor(array)


def _read_only_tensor(array):
    """A DLTensor describing a read-only array, which NumPy exports only in
    DLPack 1.0's capsules (their flags say read-only), which the C side
    does not take. The layout is one it takes (readable() made sure)."""
    rank = max(array.ndim, 1)  # a 0-d array's pointers still point somewhere
    shape = (ctypes.c_int64 * rank)(*array.shape)
    strides = (ctypes.c_int64 * rank)(*(s // array.itemsize if n > 1 else 0
                                        for n, s in zip(array.shape, array.strides)))
    dtype = _lib.DLDataType(_lib.KDL_FLOAT, array.itemsize * 8, 1)
    described = _lib.DLTensor(array.ctypes.data, _lib.DLDevice(_lib.KDL_CPU, 0), array.ndim,
                              dtype, shape, strides, 0)
    return described, (array, shape, strides)
