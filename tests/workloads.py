"""Paper 1's reference workloads: they live beside the checkout, never in the repository.

Tests over them parametrize with :func:`over_workloads`: the cases when the folder is there,
else a single case marked skip with :data:`ABSENT_REASON`, so a missing folder costs one skip
per test function, not one per workload.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

#: ``../shared/workloads/dnn-partitioning`` beside the checkout.
WORKLOADS_DIR = Path(__file__).resolve().parents[1] / ".." / "shared" / "workloads" / "dnn-partitioning"
ABSENT_REASON = (f"needs paper 1's reference workloads at {WORKLOADS_DIR.resolve()}: put the "
                 "dnn-partitioning folder at ../shared/workloads/dnn-partitioning beside the checkout")


def workloads_present() -> bool:
    return (WORKLOADS_DIR / "throughput").is_dir()


def over_workloads(cases: Sequence[Any], ids: Sequence[str] | None = None) -> list[Any]:
    """Parameters of a test over reference workloads (a tuple per case for several arguments,
    or a ``pytest.param``): every case when the folder is present, else the first one's
    values, marked skip."""
    if not cases:
        raise ValueError("no cases")
    params = [c if isinstance(c, type(pytest.param())) else
              pytest.param(*(c if isinstance(c, tuple) else (c,)), id=None if ids is None else ids[i])
              for i, c in enumerate(cases)]
    if workloads_present():
        return params
    return [pytest.param(*params[0].values, id="workloads-absent",
                         marks=pytest.mark.skip(reason=ABSENT_REASON))]
