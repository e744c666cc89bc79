"""meson's entry to the Python tests: pytest over this folder, or exit 77
(skip) where NumPy or pytest is missing. CI installs both, so it runs there."""
import os
import sys

try:
    import numpy  # noqa: F401
    import pytest
except ImportError as e:
    print(f"skipping the Python tests: {e}")
    sys.exit(77)

sys.exit(pytest.main(["-q", "-p", "no:cacheprovider", os.path.dirname(os.path.abspath(__file__))]))
