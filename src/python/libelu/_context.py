"""libelu.Context: a C context (elu_ctx) with its options, and what it can
tell and do besides running: info(), stats(), prepare(), precompile()."""
import ctypes
import math
import numbers
import os

from . import _lib
from ._lib import EluError

_MAX_THREADS, _MAX_SPECIALIZATIONS, _MAX_PREWARM = 1024, 4096, 4096


def _whole(name, value, low, high):
    """value as an int in [low, high]: TypeError for what is not an integer
    (bool included), ValueError out of range."""
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise TypeError(f"{name} must be an integer, not {type(value).__qualname__}")
    if not low <= value <= high:
        raise ValueError(f"{name} must be from {low} to {high}, not {value}")
    return int(value)


def _dtype(name, dtype):
    """An elu_dtype from a dtype's name (float32, float64, float16,
    bfloat16) or from a NumPy, PyTorch or CuPy dtype or scalar type, whose
    name ends so (torch.float16, numpy.float16)."""
    spelled = (dtype.__name__ if isinstance(dtype, type) else str(dtype)).rsplit(".", 1)[-1]
    if spelled not in _lib.DTYPES:
        raise TypeError(f"{name} must be float32, float64, float16 or bfloat16, not {dtype!r}")
    return _lib.DTYPES[spelled]


def _real(name, value):
    """A constant as a finite float: TypeError for what is not a real
    number, ValueError for infinities and NaN."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise TypeError(f"{name} must be a real number, not {type(value).__qualname__}")
    value = float(value)
    if not math.isfinite(value):
        raise ValueError(f"{name} must be finite, not {value}")
    return value


def params(dtype, alpha=1.0, scale=1.0, input_scale=1.0):
    """elu_params for a dtype and the three constants."""
    return _lib.Params(_dtype("dtype", dtype), _real("alpha", alpha), _real("scale", scale),
                       _real("input_scale", input_scale))


def _prewarm_list(prewarm):
    """elu_params for each (dtype, alpha, scale, input_scale) tuple, the
    constants after the dtype optional."""
    try:
        entries = list(prewarm)
    except TypeError:
        raise TypeError("prewarm must be a list of (dtype, alpha, scale, input_scale) "
                        f"tuples, not {type(prewarm).__qualname__}") from None
    if len(entries) > _MAX_PREWARM:
        raise ValueError(f"prewarm takes at most {_MAX_PREWARM} entries, not {len(entries)}")
    out = (_lib.Params * max(len(entries), 1))()
    for i, entry in enumerate(entries):
        if not isinstance(entry, tuple) or not 1 <= len(entry) <= 4:
            raise TypeError(f"prewarm[{i}] must be a tuple (dtype, alpha, scale, "
                            f"input_scale), the constants optional, not {entry!r}")
        out[i] = params(*entry)
    return out, len(entries)


class Context:
    """A libelu context: where calls run and with which options, to pass as
    `context=` to libelu.elu() and the other functions (they otherwise use
    one context per device, made at first use: default_context()).

    backend: "auto" (the GPU where there is one, else the CPU), "cpu" or
    "cuda" (EluError without a usable GPU). device: the CUDA device
    ordinal. cache_dir: the disk cache's directory (default:
    $ELU_CACHE_DIR, else ~/.cache/elu); disk_cache=False compiles in memory.
    threads: CPU threads (0: the online CPUs). max_specializations: sets of
    constants it keeps track of (0: 64). prewarm: (dtype, alpha, scale,
    input_scale) tuples that a thread sets up at creation, so that their
    first calls launch at once. autotune: measure the GPU's launch shapes.
    pdl=False: no programmatic dependent launch.

    A CUDA context's calls on host arrays run on the CPU. One context may
    serve several threads at once; close() (or the end of a `with` block)
    destroys it, and must not overlap any call on it.
    """

    def __init__(self, backend="auto", device=0, *, cache_dir=None, disk_cache=True,
                 threads=0, max_specializations=0, prewarm=(), autotune=False, pdl=True,
                 _parallel=None):
        if backend not in _lib.BACKENDS:
            raise ValueError(f"backend must be one of {', '.join(_lib.BACKENDS)}, not "
                             f"{backend!r}")
        self._c = _lib.library()
        self._handle = None
        opts = _lib.Options()
        self._c.elu_options_default(opts)
        opts.backend = _lib.BACKENDS[backend]
        opts.device = _whole("device", device, 0, 2 ** 31 - 1)
        if cache_dir is not None:
            self._cache_dir = os.fsencode(cache_dir)  # kept alive: the C side copies it
            if not self._cache_dir:
                raise ValueError("cache_dir must not be empty")
            opts.cache_dir = self._cache_dir
        opts.cpu_threads = _whole("threads", threads, 0, _MAX_THREADS)
        opts.cpu_parallel = _parallel  # a C function's address (libelu._torch_ext's), or None
        opts.max_specializations = _whole("max_specializations", max_specializations, 0,
                                          _MAX_SPECIALIZATIONS)
        self._prewarm, opts.prewarm_count = _prewarm_list(prewarm)
        opts.prewarm = self._prewarm if opts.prewarm_count else None
        opts.flags = ((0 if disk_cache else _lib.NO_DISK_CACHE) |
                      (_lib.PREWARM if opts.prewarm_count else 0) |
                      (_lib.AUTOTUNE if autotune else 0) | (0 if pdl else _lib.NO_PDL))
        handle = ctypes.c_void_p()
        status = self._c.elu_ctx_create(ctypes.byref(handle), opts)
        if status != 0:
            raise EluError(status, f"cannot create a {backend} context on device {device}: "
                                   "ELU_DEBUG=1 prints why")
        self._handle = handle
        self.backend = self.info()["backend"]
        self.default = False  # default_context()'s, never destroyed

    @property
    def handle(self):
        """The elu_ctx pointer, for C code: valid until close()."""
        if self._handle is None:
            raise ValueError("the libelu context is closed")
        return self._handle

    def _check(self, status, what):
        if status != 0:
            raise EluError(status, f"{what}: " +
                           self._c.elu_ctx_last_error(self.handle).decode(errors="replace"))

    def info(self):
        """What the context runs on, as a dict: backend ("cpu" or "cuda"),
        device (-1 for the CPU), device_name, sm (90 for sm_90),
        multiprocessors, driver_version, nvrtc_version, cpu_threads,
        cpu_isa ("avx512", "avx2" or "baseline"), disk_cache and cache_dir."""
        info = _lib.Info()
        self._check(self._c.elu_ctx_get_info(self.handle, info), "elu_ctx_get_info")
        names = {v: k for k, v in _lib.BACKENDS.items()}
        return {"backend": names[info.backend], "device": info.device,
                "device_name": info.device_name.decode(errors="replace"), "sm": info.sm,
                "multiprocessors": info.multiprocessors,
                "driver_version": info.driver_version, "nvrtc_version": info.nvrtc_version,
                "cpu_threads": info.cpu_threads, "cpu_isa": info.cpu_isa.decode(),
                "disk_cache": bool(info.disk_cache),
                "cache_dir": os.fsdecode(info.cache_dir) if info.disk_cache else None}

    def stats(self):
        """The context's counters since creation, as a dict of ints:
        compiles, disk_hits, disk_writes, disk_rejects, disk_errors,
        disk_evictions, memory_hits, gpu_launches, generic_launches,
        cpu_runs, autotunes, background_builds, builtin_ptx_loads (elu.h
        says what each counts)."""
        stats = _lib.Stats()
        self._check(self._c.elu_ctx_get_stats(self.handle, stats), "elu_ctx_get_stats")
        return {name: getattr(stats, name) for name in _lib.STATS}

    def prepare(self, dtype, alpha=1.0, scale=1.0, input_scale=1.0):
        """Compile (waiting) or load the kernels of these constants, both
        directions, so that the next call neither compiles nor loads: call
        it before capturing calls in a CUDA graph. No-op on the CPU."""
        p = params(dtype, alpha, scale, input_scale)
        self._check(self._c.elu_prepare(self.handle, p), "elu_prepare")

    def precompile(self, sm, dtype, alpha=1.0, scale=1.0, input_scale=1.0):
        """Compile these constants' kernels for compute capability `sm` (90
        for sm_90) into the disk cache with NVRTC alone: no GPU needed."""
        sm = _whole("sm", sm, 10, 9999)
        p = params(dtype, alpha, scale, input_scale)
        self._check(self._c.elu_precompile(self.handle, p, sm), "elu_precompile")

    def close(self):
        """Destroy the context (waiting for its background compiles); no
        call may be in flight on it. Closing twice does nothing. A default
        context (default_context()) is never closed: ValueError, as the
        fast path (libelu._ext) keeps its address."""
        if self.default:
            raise ValueError("a default libelu context lives as long as the process: "
                             "close a libelu.Context of your own")
        handle, self._handle = self._handle, None
        if handle is not None:
            self._c.elu_ctx_destroy(handle)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __del__(self):
        # Not the default contexts, which live as long as the process.
        if getattr(self, "_handle", None) is not None and not getattr(self, "default", True):
            self.close()

    def __repr__(self):
        if self._handle is None:
            return "<libelu.Context, closed>"
        return f"<libelu.Context {self.backend} device {self.info()['device']}>"
