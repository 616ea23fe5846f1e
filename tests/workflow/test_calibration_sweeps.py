"""``calibrate`` times every case in several sweeps and keeps each operator's median.

The timer is replaced by one that answers a different time per sweep, so the test checks
what ``_measure_ops`` does with the sweeps (median, not mean or last; reversed order on
alternate sweeps; one trace per case and size), not the machine.
"""

from __future__ import annotations

import statistics
from typing import Any

import pytest

pytest.importorskip("torch")

from dnnpart.frontends import profiling
from dnnpart.workflow import calibrating, calibration_cases

SWEEP_MS = (1.0, 9.0, 2.0)  # a slow spell in the second sweep


def test_an_operator_costs_its_median_over_the_sweeps(monkeypatch: pytest.MonkeyPatch) -> None:
    by_name = {c.name: c for c in calibration_cases.CASES}
    cases = (by_name["tiny add"], by_name["layer_norm"])
    monkeypatch.setattr(calibrating, "CASES", cases)
    monkeypatch.setattr(calibrating.Budget, "for_run",
                        classmethod(lambda cls, quick: cls(0.001, 1, 1, passes=len(SWEEP_MS))))
    calls: list[int] = []  # id of the traced graph timed, call by call

    def timer(gm: Any, inputs: Any, **_: Any) -> dict[str, float]:
        calls.append(id(gm))
        sweep = calls.count(id(gm)) - 1
        return {n.name: SWEEP_MS[sweep] for n in gm.graph.nodes if n.op == "call_function"}

    monkeypatch.setattr(profiling, "time_fx_nodes", timer)
    import torch

    samples, _ = calibrating._measure_ops(torch, "cpu", quick=True, progress=None)
    sizes = sum(len(calibration_cases.case_sizes(c, True)) for c in cases)
    assert len(calls) == sizes * len(SWEEP_MS)
    # the second sweep runs the cases the other way round: the first case ("tiny add", one
    # size) closes it, and opens the third
    assert calls[0] != calls[sizes] and calls[0] == calls[2 * sizes - 1] == calls[2 * sizes]
    assert samples
    assert {s.seconds for s in samples} == {statistics.median(SWEEP_MS) / 1e3}
    assert {s.op.partition(":")[0] for s in samples} == {c.name for c in cases}


@pytest.mark.parametrize("fresh", [True, False])
def test_a_fresh_heap_case_releases_the_heap_before_each_pass_and_keeps_only_its_operators(
        monkeypatch: pytest.MonkeyPatch, fresh: bool) -> None:
    """The wide depthwise backward's workspace is a fresh allocation in a run on an AVX-512
    CPU: its case is timed with the heap released before every pass (elsewhere as every
    case is), and its forward operators are no samples; the other cases are timed as before."""
    from dnnpart.export.allocator import release_freed_heap

    monkeypatch.setattr(calibrating, "workspace_is_fresh", lambda: fresh)

    by_name = {c.name: c for c in calibration_cases.CASES}
    wide = by_name["depthwise conv2d channels-last, wide"]
    cases = (by_name["tiny add"], wide)
    monkeypatch.setattr(calibrating, "CASES", cases)
    monkeypatch.setattr(calibrating.Budget, "for_run",
                        classmethod(lambda cls, quick: cls(0.001, 1, 1, passes=1)))
    hooks: dict[int, Any] = {}

    def timer(gm: Any, inputs: Any, **kwargs: Any) -> dict[str, float]:
        hooks[len(hooks)] = kwargs.get("before_pass")
        return {n.name: 1.0 for n in gm.graph.nodes if n.op == "call_function"}

    monkeypatch.setattr(profiling, "time_fx_nodes", timer)
    import torch

    samples, _ = calibrating._measure_ops(torch, "cpu", quick=True, progress=None)
    assert hooks[0] is None  # "tiny add"
    assert len(hooks) > 1
    expected = release_freed_heap if fresh else None
    assert [hooks[i] for i in range(1, len(hooks))] == [expected] * (len(hooks) - 1)
    kept = {s.op for s in samples if s.op.startswith(wide.name + ":")}
    assert kept == {f"{wide.name}:convolution_backward"}
    assert {s.key for s in samples if s.op in kept} == {"depthwise_conv:conv_backward_cl@wide"}
