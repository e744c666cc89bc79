"""Views through the Python package: outputs whose elements alias each
other are refused, views that interleave without sharing an element are
accepted and computed right."""
import numpy as np
import pytest
from numpy.lib.stride_tricks import as_strided

import libelu

pytestmark = pytest.mark.usefixtures("each_path")


def elu_ref(x, alpha=1.0):
    """float32 ELU through float64: within an ulp of libelu's exact result."""
    x64 = x.astype(np.float64)
    return np.where(x64 > 0, x64, alpha * np.expm1(x64)).astype(np.float32)


def close(got, want):
    assert np.all(np.abs(got.view(np.int32).astype(np.int64) -
                         want.view(np.int32).astype(np.int64)) <= 1)


def test_aliasing_view_in_place_refused():
    base = np.random.default_rng().normal(0, 2, 600 * 4 + 8).astype(np.float32)
    before = base.copy()
    view = as_strided(base, (600, 2), (16, 16))
    with pytest.raises(libelu.EluError, match="share memory"):
        libelu.elu(view, out=view)
    assert np.array_equal(base, before)


@pytest.mark.parametrize("case", ["columns", "evens-odds", "column-blocks"])
def test_interleaved_views_accepted(case):
    a = np.random.default_rng().normal(0, 2, (300, 10)).astype(np.float32)
    src, dst = {"columns": (a[:, 0], a[:, 1]),
                "evens-odds": (a.reshape(-1)[::2], a.reshape(-1)[1::2]),
                "column-blocks": (a[:, 5:], a[:, :5])}[case]
    want = elu_ref(src)
    libelu.elu(src, out=dst)
    close(dst, want)
