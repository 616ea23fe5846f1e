"""Stops in the integer programs' HiGHS backend: HiGHS hears the cancel, and a child that does
not answer a stop is killed (so the method goes on to return its earlier phases' plan)."""

from __future__ import annotations

import signal
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "fuzz"))
from big import wide_dag

from dnnpart import interrupt
from dnnpart.solvers.ip import highs
from dnnpart.solvers.ip.backend import BackendSettings
from dnnpart.solvers.ip.throughput import build_throughput

pytest.importorskip("highspy")


def test_highs_hears_a_stop_in_branch_and_bound(monkeypatch: pytest.MonkeyPatch) -> None:
    # gap 0 on a 40-node layered DAG: minutes of branch and bound; the stop comes with the
    # first report from inside the MIP solve, where HiGHS checks for cancels
    model = build_throughput(wide_dag(40, seed=3), contiguous=False, contiguous_cpus=True,
                             symmetry=True).model
    monkeypatch.setattr(highs, "KILL_AFTER_S", 600.0)  # only HiGHS's own answer counts here
    reports: list[float] = []

    def on_progress(incumbent: float, bound: float, seconds: float) -> None:
        reports.append(incumbent)
        interrupt.request_stop(interrupt.INTERRUPTED)

    with interrupt.guard(None):
        out = highs.solve_highs(model, BackendSettings(time_limit=300, gap=0.0, on_progress=on_progress))
    assert reports
    assert out.status == "interrupted by user", out.stats  # not "optimal" minutes later
    assert out.values is not None  # its incumbent came back


def test_a_child_that_does_not_answer_a_stop_is_killed(monkeypatch: pytest.MonkeyPatch) -> None:
    # HiGHS in presolve or the root's LP hears no cancel (op BERT-12: 29 s): stood in for by a
    # child that ignores SIGINT and sleeps
    children: list[Any] = []

    def deaf(argv: list[str], **kwargs: Any) -> Any:
        code = "import sys, time; sys.stdin.buffer.read(); time.sleep(120)"
        child = subprocess.Popen([sys.executable, "-c", code], **kwargs,
                                 preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_IGN))
        children.append(child)
        return child

    monkeypatch.setattr(highs, "subprocess", SimpleNamespace(Popen=deaf, PIPE=subprocess.PIPE))
    monkeypatch.setattr(highs, "KILL_AFTER_S", 0.1)
    model = build_throughput(wide_dag(16, seed=3), contiguous=False, contiguous_cpus=True,
                             symmetry=True).model
    with interrupt.guard(None):
        interrupt.request_stop(interrupt.INTERRUPTED)
        out = highs.solve_highs(model, BackendSettings(time_limit=60))
    assert out.values is None and out.status == "interrupted"
    assert children and children[0].poll() == -signal.SIGKILL  # killed, not left running
