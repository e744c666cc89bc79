"""The package as a user meets it: its version, and what importing says
when it finds no C library."""
import os
import shutil
import subprocess
import sys

import pytest

import libelu


def test_version_is_the_libraries():
    assert libelu.__version__ == libelu.version()
    assert libelu.__version__.count(".") == 2


def test_import_without_a_library_says_where_it_looked(tmp_path):
    package = tmp_path / "libelu"
    package.mkdir()
    for name in os.listdir(os.path.dirname(libelu.__file__)):
        if name.endswith(".py"):
            shutil.copy(os.path.join(os.path.dirname(libelu.__file__), name), package)
    env = dict(os.environ, PYTHONPATH=str(tmp_path), LIBELU_LIBRARY=str(tmp_path / "none.so"))
    result = subprocess.run([sys.executable, "-c", "import libelu"], env=env, cwd=tmp_path,
                            capture_output=True, text=True)
    assert result.returncode != 0
    assert "ImportError" in result.stderr and "LIBELU_LIBRARY" in result.stderr


def _system_nvrtc():
    """A libnvrtc.so.13 or .12 of a CUDA toolkit on this machine, or None."""
    for lib in ("lib64", "lib"):
        for name in ("libnvrtc.so.13", "libnvrtc.so.12"):
            path = os.path.join("/usr/local/cuda", lib, name)
            if os.path.exists(path):
                return path, name
    return None


CHILD = """
import os, sys, libelu
print(os.environ.get("ELU_NVRTC_LIBRARY", ""))
with libelu.Context("cpu", cache_dir=sys.argv[1]) as ctx:
    print(ctx.info()["nvrtc_version"] > 0)
"""


@pytest.mark.parametrize("layout", ["cu13/lib", "cuda_nvrtc/lib"])
def test_nvrtc_from_a_wheel(tmp_path, layout):
    """An NVRTC wheel's library (nvidia-cuda-nvrtc for CUDA 13,
    nvidia-cuda-nvrtc-cu12), laid out as pip installs it, is found without
    environment variables; ELU_NVRTC_LIBRARY, where set, wins."""
    found = _system_nvrtc()
    if found is None:
        pytest.skip("no CUDA toolkit NVRTC to stand in for a wheel's")
    wanted = "libnvrtc.so.13" if layout.startswith("cu13") else "libnvrtc.so.12"
    if found[1] != wanted:
        pytest.skip(f"this machine's NVRTC is {found[1]}, not the wheel's {wanted}")
    lib = tmp_path / "site" / "nvidia" / layout
    lib.mkdir(parents=True)
    (lib / wanted).symlink_to(found[0])
    env = {k: v for k, v in os.environ.items() if k != "ELU_NVRTC_LIBRARY"}
    env["PYTHONPATH"] = os.pathsep.join([str(tmp_path / "site"), env.get("PYTHONPATH", "")])
    for override in (None, found[0]):
        if override:
            env["ELU_NVRTC_LIBRARY"] = override
        result = subprocess.run([sys.executable, "-c", CHILD, str(tmp_path / "cache")],
                                env=env, cwd=tmp_path, capture_output=True, text=True)
        assert result.returncode == 0, result.stderr
        assert result.stdout.split() == [override or str(lib / wanted), "True"]
