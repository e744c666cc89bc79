"""The package as a user meets it: its version, and what importing says
when it finds no C library."""
import os
import shutil
import subprocess
import sys

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
