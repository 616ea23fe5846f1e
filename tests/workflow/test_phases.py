"""The workflow's ``progress`` callback (:mod:`dnnpart.workflow.phases`) without the CLI.

A plain callback hears each phase's name as it starts; a factory of reporters gets one scope
per phase, never two open at once, and a solving phase's reporter is the one its method
reports on -- the fallback's included.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("torch", reason="the model path imports torch models")

from dnnpart.errors import ProblemTooLargeError
from dnnpart.workflow import RunResult, export_plan, plan_model, run_plan

MODEL = "module:dnnpart.frontends.models:shared_relu_resnet"
SHAPES = [(1, 3, 16, 16)]


class Scope:
    """One phase's reporter: records its news, and its entry and exit in ``events``."""

    def __init__(self, name: str, events: list[str]) -> None:
        self.name, self.events, self.news = name, events, []

    def __enter__(self) -> Scope:
        self.events.append(f"enter {self.name}")
        return self

    def __exit__(self, *exc: object) -> None:
        self.events.append(f"exit {self.name}")

    def update(self, message: str, fraction: float | None = None) -> None:
        self.news.append(message)


def test_a_plain_callback_hears_each_phase_of_plan_run_and_export(tmp_path: Path) -> None:
    heard: list[str] = []
    planned = plan_model(MODEL, cluster="2xA100", input_shapes=SHAPES, progress=heard.append)
    assert heard == [f"importing {MODEL} (torch.export)", "solving with dp"]
    heard.clear()
    ran = run_plan(planned, progress=heard.append)
    assert isinstance(ran, RunResult)  # an inference plan
    processes = ran.processes
    assert heard == [f"capturing {MODEL}", f"running {processes} stage process"
                     + ("" if processes == 1 else "es"), "running the unpartitioned model"]
    heard.clear()
    export_plan(planned, "placement-text", tmp_path / "lines.txt", progress=heard.append)
    assert heard == ["writing placement-text"]  # a fresh plan has nothing to load


def test_each_method_reports_on_its_own_phase_the_fallback_too(
        monkeypatch: pytest.MonkeyPatch) -> None:
    import dnnpart.solvers as solvers

    real = solvers.solve
    given: dict[str, Any] = {}

    def dp_refuses(problem: Any, method: str, **kwargs: Any) -> Any:
        given[method] = kwargs["progress"]
        if method == "dp":  # the refusal of a graph too large for dp, without dp's seconds
            raise ProblemTooLargeError("too many ideals (stand-in)")
        return real(problem, method, **kwargs)

    monkeypatch.setattr(solvers, "solve", dp_refuses)
    events: list[str] = []
    scopes: dict[str, Scope] = {}

    def factory(name: str) -> Scope:
        scopes[name] = Scope(name, events)
        return scopes[name]

    planned = plan_model(MODEL, cluster="2xA100", input_shapes=SHAPES, progress=factory,
                         compare=["greedy"])
    assert planned.result is not None and planned.result.method == "dpl"
    names = [f"importing {MODEL} (torch.export)", "solving with dp", "solving with dpl",
             "solving with greedy (comparison)"]
    assert events == [e for n in names for e in (f"enter {n}", f"exit {n}")]  # one at a time
    assert given["dp"] is scopes["solving with dp"]
    assert given["dpl"] is scopes["solving with dpl"]
    assert scopes["solving with dpl"].news and all(
        m.startswith("DPL") for m in scopes["solving with dpl"].news)
