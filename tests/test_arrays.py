"""Array helpers (:mod:`dnnpart._arrays`)."""

from __future__ import annotations

import numpy as np
from hypothesis import given
from hypothesis import strategies as st

from dnnpart._arrays import unique_ints


@given(st.lists(st.integers(-(2**62), 2**62), max_size=50))
def test_unique_ints_equals_numpy_unique(values: list[int]) -> None:
    array = np.asarray(values, dtype=np.int64)
    got = unique_ints(array)
    np.testing.assert_array_equal(got, np.unique(array))
    assert got.dtype == array.dtype
