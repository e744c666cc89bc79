"""What the Python tests share: each_path, to run a test through both of
the package's paths to the library."""
import pytest

import libelu


@pytest.fixture(params=["fast", "ctypes"])
def each_path(request, monkeypatch):
    """Run the test through libelu._ext's fast path (skipped where it is not
    built), then through the ctypes path alone, which serves whatever the
    fast path does not take."""
    if request.param == "ctypes":
        monkeypatch.setattr(libelu, "_fast", None)
    elif libelu._fast is None:
        pytest.skip("libelu._ext is not built")
