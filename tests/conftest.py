"""Shared fixtures and the hypothesis profile of the test suite."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings
from tests.workloads import ABSENT_REASON, WORKLOADS_DIR, workloads_present

settings.register_profile(
    "dnnpart",
    deadline=None,  # numba compiles kernels on first call; no timed assertions anywhere
    max_examples=50,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
settings.register_profile("thorough", parent=settings.get_profile("dnnpart"), max_examples=1000)
# HYPOTHESIS_PROFILE=thorough for a long soak of the property tests
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "dnnpart"))


@pytest.fixture(scope="session")
def workloads_dir() -> Path:
    """``../shared/workloads/dnn-partitioning`` beside the checkout; skips when absent (tests
    over several workloads parametrize with :func:`tests.workloads.over_workloads`, so that a
    missing folder costs one skip per test function)."""
    if not workloads_present():
        pytest.skip(ABSENT_REASON)
    return WORKLOADS_DIR


@pytest.fixture(autouse=True)
def _no_stop_left_behind() -> Iterator[None]:
    """Clear a stop request a test left after using ``interrupt.guard`` directly.

    ``solve`` clears its own; tests that drive the guard by hand (time limits, backstop) do
    not, and a flag left set makes a later direct ``solve_dp(...)`` (a doctest) see an expired
    clock and return UNKNOWN.
    """
    yield
    from dnnpart import interrupt

    if interrupt.depth() == 0:
        interrupt.reset()
