"""Progress of the commands that run through phases: each phase is named as it starts.

``plan``, ``import``, ``run``, ``report``, ``export`` and ``simulate`` open one progress
reporter for the whole command and name each phase on it (:mod:`dnnpart.workflow.phases`).
No test here waits for a line: the reporters' clock is replaced by one that advances 10 s
each time it is read, so every phase start and every piece of news is "due" and printed
(stderr is not a terminal under pytest, so ``--progress auto`` prints ``lines``). What is
asserted is the order of the phases printed, which does not depend on the load.
"""

from __future__ import annotations

import io
import itertools
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from dnnpart.cli import progress as progress_module
from dnnpart.cli.main import main
from dnnpart.cli.progress import LineProgress, StatusProgress

LINE = re.compile(r"^progress: (?P<label>[\w-]+), (?P<elapsed>\d+) s: (?P<news>.+)$")
MODEL = "module:dnnpart.frontends.models:shared_relu_resnet"
SHAPE = "1,3,16,16"


@pytest.fixture()
def fast_clock(monkeypatch: pytest.MonkeyPatch) -> None:
    """A clock that moves 10 s per reading: every line is due at once (interval 5 s)."""
    ticks = itertools.count(step=10.0)
    monkeypatch.setattr(progress_module, "_now", lambda: float(next(ticks)))
    monkeypatch.setenv("DNNPART_PROGRESS_SECONDS", "5")


def _lines(err: str, label: str) -> list[str]:
    """The news of the ``progress:`` lines of ``label``, in order."""
    found = [m for m in map(LINE.match, err.splitlines()) if m]
    assert found, err
    assert {m["label"] for m in found} == {label}, err
    return [m["news"] for m in found]


def _phases(news: list[str]) -> list[str]:
    """The phases named, in order, each once per run of lines (heartbeats repeat a line)."""
    return [name for name, _ in itertools.groupby(n.split(": ")[0] for n in news)]


@pytest.fixture(scope="module")
def plan_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    pytest.importorskip("torch", reason="the model path imports torch models")
    from dnnpart.workflow import plan_model

    path = tmp_path_factory.mktemp("phases") / "plan.json"
    plan_model(MODEL, cluster="2xA100", input_shapes=[(1, 3, 16, 16)]).write(path)
    return path


def test_plan_names_import_solve_and_the_fallback_that_really_runs(
        fast_clock: None, monkeypatch: pytest.MonkeyPatch, tmp_path: Path,
        capsys: pytest.CaptureFixture[str]) -> None:
    pytest.importorskip("torch", reason="the model path imports torch models")
    import dnnpart.solvers as solvers
    from dnnpart.errors import ProblemTooLargeError

    real = solvers.solve

    def dp_refuses(problem: Any, method: str, **kwargs: Any) -> Any:
        # the refusal of a graph too large for dp, without the seconds dp takes to find out
        if method == "dp":
            kwargs["progress"].update("DP: contracted to 40 forward nodes", 0.0)
            raise ProblemTooLargeError("too many ideals (stand-in)")
        return real(problem, method, **kwargs)

    monkeypatch.setattr(solvers, "solve", dp_refuses)
    code = main(["plan", MODEL, "--input-shape", SHAPE, "--cluster", "2xA100",
                 "--report", str(tmp_path / "r.html")])
    err = capsys.readouterr().err
    assert code == 0, err
    news = _lines(err, "plan")
    assert _phases(news) == [f"importing {MODEL} (torch.export)", "solving with dp",
                             "solving with dpl", "writing report"]
    # each method's news under its own name: no dp news once dpl runs, and dpl's own rows
    under_dpl = [n for n in news if n.startswith("solving with dpl: ")]
    assert under_dpl and all(n.startswith("solving with dpl: DPL: ") for n in under_dpl), news
    assert any(n == "solving with dp: DP: contracted to 40 forward nodes (0%)" for n in news)
    assert "method: dpl (the default dp refused this graph" in err


def test_import_names_the_capture_and_the_file(fast_clock: None, tmp_path: Path,
                                               capsys: pytest.CaptureFixture[str]) -> None:
    pytest.importorskip("torch", reason="the model path imports torch models")
    out = tmp_path / "g.json"
    assert main(["import", MODEL, "--input-shape", SHAPE, "--frontend", "fx", "-o", str(out)]) == 0
    assert _phases(_lines(capsys.readouterr().err, "import")) == [
        f"importing {MODEL} (torch.fx)", f"writing {out}"]


def test_run_names_the_capture_and_the_processes(fast_clock: None, plan_file: Path,
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["run", str(plan_file), "--trust-plan"]) == 0
    captured = capsys.readouterr()
    used = re.search(r"in (\d+) gloo process", captured.out)
    assert used, captured.out
    processes = int(used[1])
    assert _phases(_lines(captured.err, "run")) == [
        f"loading {plan_file} (capturing its model)",
        f"running {processes} stage process{'' if processes == 1 else 'es'}",
        "running the unpartitioned model"]


def test_report_names_loading_and_writing(fast_clock: None, plan_file: Path, tmp_path: Path,
                                          capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["report", str(plan_file), "--trust-plan", "-o", str(tmp_path / "r.html")]) == 0
    assert _phases(_lines(capsys.readouterr().err, "report")) == [
        f"loading {plan_file}", "writing report"]


def test_export_names_loading_and_the_format(fast_clock: None, plan_file: Path, tmp_path: Path,
                                             capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["export", str(plan_file), "--trust-plan", "--format", "pipelining",
                 "-o", str(tmp_path / "s.json")]) == 0
    assert _phases(_lines(capsys.readouterr().err, "export")) == [
        f"loading {plan_file} (capturing its model)", "writing pipelining"]


def test_simulate_names_loading_and_simulating(fast_clock: None, tmp_path: Path,
                                               capsys: pytest.CaptureFixture[str]) -> None:
    plan = tmp_path / "p.json"
    assert main(["--quiet", "solve", "zoo:bert-3", "-m", "dp", "-o", str(plan)]) == 0
    capsys.readouterr()
    assert main(["simulate", "zoo:bert-3", str(plan)]) == 0
    assert _phases(_lines(capsys.readouterr().err, "simulate")) == [
        "loading zoo:bert-3", "simulating"]


@pytest.mark.parametrize("flags", [("--json",), ("--quiet",)])
def test_json_and_quiet_print_no_progress(fast_clock: None, tmp_path: Path,
                                          capsys: pytest.CaptureFixture[str],
                                          flags: tuple[str, ...]) -> None:
    plan = tmp_path / "p.json"
    assert main(["--quiet", "solve", "zoo:bert-3", "-m", "dp", "-o", str(plan)]) == 0
    capsys.readouterr()
    assert main(["simulate", "zoo:bert-3", str(plan), *flags]) == 0
    assert "progress:" not in capsys.readouterr().err


class _Clock:
    """A clock the test sets by hand."""

    def __init__(self) -> None:
        self.t = 0.0

    def __call__(self) -> float:
        return self.t


@pytest.fixture()
def clock(monkeypatch: pytest.MonkeyPatch) -> Iterator[_Clock]:
    c = _Clock()
    monkeypatch.setattr(progress_module, "_now", c)
    yield c


def test_the_interval_runs_across_phases(clock: _Clock) -> None:
    # not entered: no heartbeat thread, only the lines that begin/update print
    buf = io.StringIO()
    p = LineProgress(buf, label="run", interval=5.0)
    clock.t = 4.0
    p.begin("loading p.json")  # 4 s since the start: not due
    clock.t = 8.0
    p.begin("running 2 stage processes")  # 8 s since the last line: due, whatever the phase's age
    p.update("rows", 0.5)  # the line just printed: not due
    clock.t = 14.0
    p.update("more rows", 0.75)
    assert buf.getvalue().splitlines() == [
        "progress: run, 8 s: running 2 stage processes",
        "progress: run, 14 s: running 2 stage processes: more rows (75%)"]


def test_a_new_phase_drops_the_last_ones_news(clock: _Clock) -> None:
    buf = io.StringIO()
    p = LineProgress(buf, label="plan", interval=1.0)
    clock.t = 2.0
    p.update("DP: contracted to 218 forward nodes", 0.0)
    clock.t = 4.0
    p.begin("solving with dpl")
    assert buf.getvalue().splitlines() == [
        "progress: plan, 2 s: DP: contracted to 218 forward nodes (0%)",
        "progress: plan, 4 s: solving with dpl"]


def test_the_live_line_names_the_phase_and_ticks_without_news(clock: _Clock) -> None:
    from rich.console import Console

    status = StatusProgress(Console(file=io.StringIO()), label="report")
    assert str(status.__rich__()) == "report starting  (0.0 s)"
    with status.phase("writing report") as reporter:
        assert reporter is status
        clock.t = 3.0
        assert str(status.__rich__()) == "writing report  (3.0 s)"  # no news: elapsed moves
        status.update("DPL: 1/2 rows filled", 0.5)
        assert str(status.__rich__()) == "writing report: DPL: 1/2 rows filled (50%)  (3.0 s)"
