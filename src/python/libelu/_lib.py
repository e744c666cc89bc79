"""The C library through ctypes: loading it, its prototypes, the DLPack
structures, errors, and the fast path's extension modules beside it.
Nothing here imports an array library."""
import ctypes
import ctypes.util
import importlib.machinery
import importlib.util
import os
import warnings

# DLPack (dlpack.h, v0.6 and later: the unversioned "dltensor" capsule).
KDL_CPU, KDL_CUDA, KDL_CUDA_HOST, KDL_CUDA_MANAGED = 1, 2, 3, 13
KDL_FLOAT, KDL_BFLOAT, KDL_BOOL = 2, 4, 6
_TYPE_CODES = {0: "int", 1: "uint", 2: "float", 3: "handle", 4: "bfloat", 5: "complex",
               6: "bool"}


class DLDevice(ctypes.Structure):
    _fields_ = [("device_type", ctypes.c_int), ("device_id", ctypes.c_int)]


class DLDataType(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint8), ("bits", ctypes.c_uint8), ("lanes", ctypes.c_uint16)]


def dtype_name(t):
    """A DLDataType as NumPy and PyTorch spell it: float32, bfloat16, ..."""
    if t.code not in _TYPE_CODES:
        return f"DLPack type code {t.code} of {t.bits} bits"
    name = "bool" if t.code == KDL_BOOL else f"{_TYPE_CODES[t.code]}{t.bits}"
    return name if t.lanes == 1 else f"{name} in {t.lanes} lanes"


def supported(t):
    """Whether the C side computes in this DLDataType (dlpack.c's dtype_of)."""
    return t.lanes == 1 and (t.code, t.bits) in ((KDL_FLOAT, 16), (KDL_FLOAT, 32),
                                                 (KDL_FLOAT, 64), (KDL_BFLOAT, 16))


def unsupported_dtype(name, dtype):
    return TypeError(f"{name} has dtype {dtype}: libelu takes float16, bfloat16, "
                     "float32 and float64 arrays")


class DLTensor(ctypes.Structure):
    _fields_ = [("data", ctypes.c_void_p), ("device", DLDevice), ("ndim", ctypes.c_int),
                ("dtype", DLDataType), ("shape", ctypes.POINTER(ctypes.c_int64)),
                ("strides", ctypes.POINTER(ctypes.c_int64)), ("byte_offset", ctypes.c_uint64)]


class Params(ctypes.Structure):
    """elu_params; the dtype is taken from the tensors by the DLPack calls."""
    _fields_ = [("dtype", ctypes.c_int), ("alpha", ctypes.c_double),
                ("scale", ctypes.c_double), ("input_scale", ctypes.c_double)]


class Options(ctypes.Structure):
    _fields_ = [("backend", ctypes.c_int), ("device", ctypes.c_int),
                ("cache_dir", ctypes.c_char_p), ("flags", ctypes.c_uint32),
                ("cpu_threads", ctypes.c_int), ("max_specializations", ctypes.c_int),
                ("prewarm", ctypes.POINTER(Params)), ("prewarm_count", ctypes.c_size_t),
                ("cpu_parallel", ctypes.c_void_p), ("cpu_parallel_user", ctypes.c_void_p),
                ("reserved", ctypes.c_uint64 * 4)]


class Info(ctypes.Structure):
    _fields_ = [("backend", ctypes.c_int), ("device", ctypes.c_int), ("sm", ctypes.c_int),
                ("multiprocessors", ctypes.c_int), ("driver_version", ctypes.c_int),
                ("nvrtc_version", ctypes.c_int), ("cpu_threads", ctypes.c_int),
                ("disk_cache", ctypes.c_bool), ("device_name", ctypes.c_char * 256),
                ("cache_dir", ctypes.c_char * 4096), ("cpu_isa", ctypes.c_char * 16),
                ("reserved", ctypes.c_uint64 * 16)]


STATS = ("compiles", "disk_hits", "disk_writes", "disk_rejects", "disk_errors",
         "disk_evictions", "memory_hits", "gpu_launches", "generic_launches", "cpu_runs",
         "autotunes", "background_builds", "builtin_ptx_loads")


class Stats(ctypes.Structure):
    _fields_ = [(name, ctypes.c_uint64) for name in STATS] + [("reserved", ctypes.c_uint64 * 4)]


BACKEND_AUTO, BACKEND_CPU, BACKEND_CUDA = 0, 1, 2
BACKENDS = {"auto": BACKEND_AUTO, "cpu": BACKEND_CPU, "cuda": BACKEND_CUDA}
NO_DISK_CACHE, PREWARM, AUTOTUNE, NO_PDL = 1, 2, 4, 8
DTYPES = {"float32": 0, "float64": 1, "float16": 2, "bfloat16": 3}
STATUS_NAMES = {0: "ELU_OK", -1: "ELU_ERR_INVALID_ARG", -2: "ELU_ERR_UNSUPPORTED",
                -3: "ELU_ERR_NO_DEVICE", -4: "ELU_ERR_COMPILE", -5: "ELU_ERR_CUDA",
                -6: "ELU_ERR_OUT_OF_MEMORY", -7: "ELU_ERR_IO"}


class EluError(RuntimeError):
    """A libelu call failed: `status` is the elu_status name, `detail` the
    context's last error (NVRTC log, CUresult name, ...)."""

    def __init__(self, status, detail):
        self.status = STATUS_NAMES.get(status, str(status))
        self.detail = detail
        super().__init__(f"{self.status}: {detail}")


def _find():
    """The libelu beside this package (a pip install puts it there), else
    $LIBELU_LIBRARY, else the system's."""
    here = os.path.dirname(os.path.abspath(__file__))
    for name in ("libelu.so", "libelu.so.1"):
        if os.path.exists(os.path.join(here, name)):
            return os.path.join(here, name)
    return os.environ.get("LIBELU_LIBRARY") or ctypes.util.find_library("elu") or "libelu.so.1"


# Where NVIDIA's NVRTC wheels put the library: nvidia-cuda-nvrtc (CUDA 13),
# then nvidia-cuda-nvrtc-cu12, each under the "nvidia" namespace package.
_NVRTC_WHEEL_PATHS = ("cu13/lib/libnvrtc.so.13", "cuda_nvrtc/lib/libnvrtc.so.12")


def nvrtc_wheel():
    """The libnvrtc of an NVRTC wheel installed in this Python, or None."""
    try:
        spec = importlib.util.find_spec("nvidia")
    except (ImportError, ValueError):
        return None
    for base in (spec.submodule_search_locations or []) if spec else []:
        for sub in _NVRTC_WHEEL_PATHS:
            if os.path.exists(os.path.join(base, sub)):
                return os.path.join(base, sub)
    return None


def load(path=None):
    """The library at `path`, else where _find() looks; ImportError saying
    where it looked when there is none. Where $ELU_NVRTC_LIBRARY is unset
    and an NVRTC wheel is installed (PyTorch's CUDA builds bring one), it
    points there, for the library to load NVRTC from when it first needs
    it: the wheel matches this environment's CUDA."""
    if not os.environ.get("ELU_NVRTC_LIBRARY"):
        wheel = nvrtc_wheel()
        if wheel:
            os.environ["ELU_NVRTC_LIBRARY"] = wheel
    path = path or _find()
    try:
        lib = ctypes.CDLL(path)
    except OSError as e:
        raise ImportError(f"libelu: cannot load the C library ({e}). Looked beside the "
                          "package, then $LIBELU_LIBRARY, then the system's libelu.so.1: "
                          "install with `pip install .` from a libelu checkout, or build it "
                          "with Meson and set LIBELU_LIBRARY to build/libelu.so") from e
    ctx_p, status = ctypes.c_void_p, ctypes.c_int
    tensor_p = ctypes.POINTER(DLTensor)
    lib.elu_ctx_create.argtypes = [ctypes.POINTER(ctx_p), ctypes.POINTER(Options)]
    lib.elu_ctx_create.restype = status
    lib.elu_options_default.argtypes = [ctypes.POINTER(Options)]
    lib.elu_options_default.restype = None
    lib.elu_ctx_last_error.argtypes = [ctx_p]
    lib.elu_ctx_last_error.restype = ctypes.c_char_p
    lib.elu_status_str.argtypes = [status]
    lib.elu_status_str.restype = ctypes.c_char_p
    lib.elu_run_dlpack.argtypes = [ctx_p, ctypes.POINTER(Params), tensor_p, tensor_p,
                                   ctypes.c_void_p]
    lib.elu_run_dlpack.restype = status
    lib.elu_run_backward_dlpack.argtypes = [ctx_p, ctypes.POINTER(Params), tensor_p,
                                            tensor_p, ctypes.c_bool, tensor_p,
                                            ctypes.c_void_p]
    lib.elu_run_backward_dlpack.restype = status
    lib.elu_version_string.restype = ctypes.c_char_p
    lib.elu_ctx_destroy.argtypes = [ctx_p]
    lib.elu_ctx_destroy.restype = None
    lib.elu_prepare.argtypes = [ctx_p, ctypes.POINTER(Params)]
    lib.elu_prepare.restype = status
    lib.elu_precompile.argtypes = [ctx_p, ctypes.POINTER(Params), ctypes.c_int]
    lib.elu_precompile.restype = status
    lib.elu_ctx_get_info.argtypes = [ctx_p, ctypes.POINTER(Info)]
    lib.elu_ctx_get_info.restype = status
    lib.elu_ctx_get_stats.argtypes = [ctx_p, ctypes.POINTER(Stats)]
    lib.elu_ctx_get_stats.restype = status
    return lib


_library = None


def library():
    """The C library, loaded once (load())."""
    global _library
    if _library is None:
        _library = load()
    return _library


def _address(function):
    return ctypes.cast(function, ctypes.c_void_p).value


def extension(lib, context_of):
    """libelu._ext, the per-call fast path, bound to `lib` (its elu_run_dlpack,
    elu_run_backward_dlpack and elu_ctx_last_error) and to `context_of`
    (a device ordinal, -1 for the CPU, to its default context's address);
    None where there is none, and the ctypes path serves every call. It is
    looked for beside the libelu.so in use: the package's own in a pip
    install, build/ in a build tree. As it calls the library through these
    addresses, both paths share one library and its contexts."""
    here = os.path.dirname(os.path.abspath(lib._name)) if os.sep in lib._name else None
    for suffix in importlib.machinery.EXTENSION_SUFFIXES if here else ():
        path = os.path.join(here, "_ext" + suffix)
        if os.path.exists(path):
            spec = importlib.util.spec_from_file_location("libelu._ext", path)
            module = importlib.util.module_from_spec(spec)
            spec.loader.exec_module(module)
            module.bind(_address(lib.elu_run_dlpack), _address(lib.elu_run_backward_dlpack),
                        _address(lib.elu_ctx_last_error), EluError, context_of)
            return module
    return None


def torch_extension(fast):
    """libelu._torch_ext, bound to `fast` (libelu._ext), or None: where it
    was not built beside fast, or was built for another PyTorch (a
    RuntimeWarning says so), libelu._ext reads tensors through the Python C
    API and libelu.torch's autograd is Python's. Loaded only once torch is,
    whose libraries it uses."""
    here, name = os.path.split(fast.__file__)
    path = os.path.join(here, name.replace("_ext", "_torch_ext", 1))
    if not os.path.exists(path):
        return None
    spec = importlib.util.spec_from_file_location("libelu._torch_ext", path)
    module = importlib.util.module_from_spec(spec)
    try:
        spec.loader.exec_module(module)
    except ImportError as e:
        warnings.warn(f"{e}; tensors are read the slower way", RuntimeWarning, stacklevel=3)
        return None
    module.bind(fast)
    return module


_get_pointer = ctypes.pythonapi.PyCapsule_GetPointer
_get_pointer.restype = ctypes.c_void_p
_get_pointer.argtypes = [ctypes.py_object, ctypes.c_char_p]


def tensor_of(capsule):
    """The DLTensor inside a "dltensor" capsule (its first member), borrowed:
    the capsule keeps ownership and must outlive the use."""
    return DLTensor.from_address(_get_pointer(capsule, b"dltensor"))
