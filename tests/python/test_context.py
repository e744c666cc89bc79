"""libelu.Context: options as keyword arguments, checked; info() and
stats() as dicts; prepare() and precompile(); context= on every function;
closing. CPU contexts, and CUDA ones where there is a GPU."""
import os

import numpy as np
import pytest

import libelu

X = np.linspace(-3, 3, 1000, dtype=np.float32)


def test_runs_in_its_context(tmp_path):
    with libelu.Context("cpu", threads=2, cache_dir=tmp_path) as ctx:
        before = ctx.stats()["cpu_runs"]
        y = libelu.elu(X, 0.5, context=ctx)
        libelu.selu(X, out=y, context=ctx)
        libelu.celu(X, 0.5, out=y, context=ctx)
        g = libelu.elu_backward(X, X, context=ctx)
        assert ctx.stats()["cpu_runs"] == before + 4
        np.testing.assert_array_equal(g, libelu.elu_backward(X, X))
        np.testing.assert_array_equal(y, libelu.celu(X, 0.5))


def test_info_and_stats_are_plain():
    with libelu.Context("cpu", threads=3, disk_cache=False) as ctx:
        info = ctx.info()
        assert info["backend"] == "cpu" and info["device"] == -1
        assert info["cpu_threads"] == 3
        assert info["cpu_isa"] in ("avx512", "avx2", "baseline")
        assert info["disk_cache"] is False and info["cache_dir"] is None
        stats = ctx.stats()
        assert set(stats) >= {"compiles", "cpu_runs", "gpu_launches", "background_builds",
                              "builtin_ptx_loads"}
        assert all(isinstance(v, int) for v in stats.values())
        assert repr(ctx) == "<libelu.Context cpu device -1>"


def test_cache_dir_is_used(tmp_path):
    with libelu.Context("cpu", cache_dir=tmp_path / "elu") as ctx:
        assert ctx.info()["cache_dir"] == os.fspath(tmp_path / "elu")


def test_prepare_is_a_no_op_on_the_cpu():
    with libelu.Context("cpu") as ctx:
        ctx.prepare("float32", 0.5)
        ctx.prepare(np.float16, 1.0, 1.0507, 1.0)
        assert ctx.stats()["compiles"] == 0


def test_precompile_fills_the_disk_cache(tmp_path):
    with libelu.Context("cpu", cache_dir=tmp_path) as ctx:
        if ctx.info()["nvrtc_version"] == 0:
            with pytest.raises(libelu.EluError, match="NVRTC"):
                ctx.precompile(90, "float32", 0.5)
            return
        ctx.precompile(90, "float32", 0.5)
        assert ctx.stats()["compiles"] == 1
        assert [p.suffix for p in tmp_path.iterdir()].count(".bin") == 1


@pytest.mark.parametrize("kw, error", [
    ({"backend": "gpu"}, ValueError),
    ({"device": -1}, ValueError),
    ({"device": 1.0}, TypeError),
    ({"threads": 1025}, ValueError),
    ({"threads": "2"}, TypeError),
    ({"max_specializations": -1}, ValueError),
    ({"max_specializations": True}, TypeError),
    ({"cache_dir": ""}, ValueError),
    ({"prewarm": 3}, TypeError),
    ({"prewarm": [("float32", 1.0, 1.0, 1.0, 1.0)]}, TypeError),
    ({"prewarm": [("int8", 1.0)]}, TypeError),
    ({"prewarm": [("float32", float("nan"))]}, ValueError),
    ({"prewarm": [("float32", "1")]}, TypeError),
])
def test_options_checked(kw, error):
    with pytest.raises(error):
        libelu.Context(**{"backend": "cpu", **kw})


def test_prewarm_accepted_on_the_cpu():
    with libelu.Context("cpu", prewarm=[("float32", 1.0), ("bfloat16", 0.5, 1.0, 2.0)]) as ctx:
        assert ctx.info()["backend"] == "cpu"


def test_bad_arguments_to_methods():
    with libelu.Context("cpu") as ctx:
        with pytest.raises(TypeError):
            ctx.prepare("float8")
        with pytest.raises(ValueError):
            ctx.prepare("float32", float("inf"))
        with pytest.raises(ValueError):
            ctx.precompile(9, "float32")
        with pytest.raises(TypeError):
            libelu.elu(X, context=object())


def test_closed_context_refuses():
    ctx = libelu.Context("cpu")
    ctx.close()
    ctx.close()  # twice: nothing
    assert repr(ctx) == "<libelu.Context, closed>"
    for call in (ctx.info, ctx.stats, lambda: ctx.prepare("float32"),
                 lambda: libelu.elu(X, context=ctx)):
        with pytest.raises(ValueError, match="closed"):
            call()


def test_default_context():
    ctx = libelu.default_context()
    assert isinstance(ctx, libelu.Context) and ctx.info()["backend"] == "cpu"
    assert libelu.default_context("cpu") is ctx
    before = ctx.stats()["cpu_runs"]
    libelu.elu(X)
    assert ctx.stats()["cpu_runs"] == before + 1
    for bad in (-1, "cuda", True, 1.5):
        with pytest.raises(ValueError):
            libelu.default_context(bad)
    with pytest.raises(ValueError, match="lives as long as the process"):
        ctx.close()
    np.testing.assert_array_equal(libelu.elu(X), libelu.elu(X, context=ctx))


def test_cuda_context_without_a_gpu_or_with_one():
    try:
        ctx = libelu.Context("cuda")
    except libelu.EluError as e:
        assert e.status == "ELU_ERR_NO_DEVICE"
        return
    with ctx:
        info = ctx.info()
        assert info["backend"] == "cuda" and info["sm"] > 0 and info["device_name"]
        ctx.prepare("float32", 0.5)
        assert ctx.stats()["compiles"] + ctx.stats()["disk_hits"] >= 1
        y = libelu.elu(X, 0.5, context=ctx)  # host memory: the CPU path
        np.testing.assert_array_equal(y, libelu.elu(X, 0.5))
