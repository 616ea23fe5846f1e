"""The pipeline simulator's timing kernel against a fixed-point twin, cycles included.

:func:`~dnnpart.simulate.pipeline_kernels.timing_kernel` times a DAG of ops: an op starts at
the latest finish-plus-delay of its dependencies (0 without any) and runs its duration; ops
on or after a cycle are not timed, and the kernel returns how many are. The twin times any
op whose dependencies all have times until none is left, in no particular order (the times
do not depend on it). ``tests/simulate/test_pipeline.py`` checks whole GPipe / 1F1B
pipelines against a naive simulator; this checks the kernel alone on any dependency graph.
"""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from dnnpart.simulate.pipeline_kernels import timing_kernel


def timing_twin(dur: list[float], preds: list[list[tuple[int, float]]]
                ) -> dict[int, tuple[float, float]]:
    """``{op: (start, finish)}`` of every op that can be timed."""
    times: dict[int, tuple[float, float]] = {}
    progress = True
    while progress:
        progress = False
        for v in reversed(range(len(dur))):  # any order will do: sweep until nothing moves
            if v in times or any(u not in times for u, _ in preds[v]):
                continue
            start = max([times[u][1] + delay for u, delay in preds[v]], default=0.0)
            times[v] = (start, start + dur[v])
            progress = True
    return times


@st.composite
def dependency_graphs(draw):
    n = draw(st.integers(1, 12))
    back = draw(st.sampled_from([0.0, 0.0, 0.05, 0.2]))  # edges to later ops make cycles
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    preds = [[(int(u), float(rng.integers(0, 4))) for u in range(n)
              if u != v and rng.random() < (0.3 if u < v else back)] for v in range(n)]
    if n > 1 and draw(st.booleans()):  # a repeated dependency with another delay
        v = int(rng.integers(1, n))
        preds[v].append((0, float(rng.integers(0, 6))))
    dur = rng.integers(0, 5, n).astype(np.float64).tolist()
    return dur, preds


@settings(max_examples=150, deadline=None)
@given(dependency_graphs())
def test_timing_kernel_equals_fixed_point_twin(case) -> None:
    dur, preds = case
    ptr = np.cumsum([0] + [len(p) for p in preds]).astype(np.int64)
    pred = np.array([u for p in preds for u, _ in p], np.int64)
    delay = np.array([d for p in preds for _, d in p], np.float64)
    start, finish, timed = timing_kernel(np.asarray(dur), ptr, pred, delay)
    want = timing_twin(dur, preds)
    assert timed == len(want)
    for v, (s, f) in want.items():
        assert (start[v], finish[v]) == (s, f), v
