"""``dnnpart plan`` takes ``solve``'s objective and method flags (one shared argument group).

A recording ``solve`` checks that each flag reaches the solver as ``solve`` would pass it; a
few real solves check that the methods accept them and that every objective plans.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("torch", reason="plan imports a torch model")

from dnnpart.cli.args import DEFAULT_METHODS
from dnnpart.cli.main import build_parser, main

MODEL = ["module:dnnpart.frontends.models:shared_relu_resnet", "--input-shape", "1,3,16,16",
         "--cluster", "2xA100"]


def _json(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, dict[str, Any]]:
    code = main(["-q", "plan", *argv, "--json"])
    out = capsys.readouterr().out
    return code, json.loads(out) if out.strip() else {}


def test_plan_and_solve_share_one_definition_of_the_flags() -> None:
    parser = build_parser()
    sub = next(a for a in parser._actions if a.dest == "command").choices  # type: ignore[union-attr]

    def flags(cmd: str) -> dict[str, Any]:
        return {a.dest: (a.choices, a.type) for a in sub[cmd]._actions}

    solve, plan = flags("solve"), flags("plan")
    for dest in ("objective", "options", "gap", "backend", "threads", "seed", "descent", "deterministic",
                 "time_limit", "method", "schedule", "microbatches", "recompute", "batch", "overlap",
                 "training_form"):
        assert dest in plan and plan[dest] == solve[dest], dest
    assert "optimizer" in plan


@pytest.fixture()
def recorded(monkeypatch: pytest.MonkeyPatch) -> list[dict[str, Any]]:
    """Calls of :func:`dnnpart.solvers.solve` (then solved for real)."""
    import dnnpart.solvers as solvers

    calls: list[dict[str, Any]] = []
    real = solvers.solve

    def spy(problem: Any, method: str, **kwargs: Any) -> Any:
        calls.append({"problem": problem, "method": method, **kwargs})
        return real(problem, method, **kwargs)

    monkeypatch.setattr(solvers, "solve", spy)
    return calls


def test_set_gap_backend_and_ip_flags_reach_the_method(capsys, recorded) -> None:
    code, payload = _json(capsys, *MODEL, "-m", "ip", "--backend", "highs", "--gap", "0.25",
                          "--set", "contiguous_cpus=false", "--seed", "3", "--time-limit", "30")
    assert code == 0 and payload["method"] == "ip"
    call = recorded[-1]
    assert call["backend"] == "highs" and call["gap"] == 0.25 and call["seed"] == 3
    assert call["contiguous_cpus"] is False and call["time_limit"] == 30.0
    assert payload["evaluation"]["objective"] == pytest.approx(payload["objective"])


def test_set_is_typed_by_the_method_and_reaches_dp(capsys) -> None:
    # dp refuses a lattice beyond max_ideals; options set for dp turn off the dpl fallback
    code = main(["-q", "plan", *MODEL, "--set", "max_ideals=2"])
    err = capsys.readouterr().err
    assert code == 1 and "max_ideals" in err, err
    code = main(["-q", "plan", *MODEL, "--set", "max_ideals=many"])
    err = capsys.readouterr().err
    assert code == 2 and "max_ideals" in err and "Traceback" not in err


def test_schedule_and_microbatches_price_the_pipeline_objective(capsys, recorded, tmp_path: Path) -> None:
    plan = tmp_path / "p.json"
    code, payload = _json(capsys, *MODEL, "--objective", "pipeline", "-m", "pipedream",
                          "--schedule", "1f1b", "--microbatches", "6", "-o", str(plan))
    assert code == 0, payload
    objective = recorded[-1]["problem"].objective
    assert (objective.kind, objective.schedule, objective.microbatches) == ("pipeline", "1f1b", 6)
    block = json.loads(plan.read_text())["model"]
    assert block["schedule"] == "1f1b" and block["microbatches"] == 6  # what `run` uses


def test_optimizer_adds_update_ops_and_is_stored(capsys, recorded, tmp_path: Path) -> None:
    plan = tmp_path / "p.json"
    code, _ = _json(capsys, *MODEL, "--training", "--optimizer", "adam", "-o", str(plan))
    assert code == 0
    with_adam = recorded[-1]["problem"].graph.n_nodes
    code, _ = _json(capsys, *MODEL, "--training")
    assert code == 0 and recorded[-1]["problem"].graph.n_nodes > 0
    assert with_adam > recorded[-1]["problem"].graph.n_nodes  # one update op per parameter
    assert json.loads(plan.read_text())["model"]["optimizer"] == "adam"


@pytest.mark.parametrize(("objective", "extra"), [
    ("throughput", []),
    ("latency", []),
    ("makespan", ["-m", "round-robin"]),
    ("pipeline", ["-m", "pipedream"]),
])
def test_every_objective_plans_an_imported_model(capsys, recorded, objective: str, extra: list[str]) -> None:
    code, payload = _json(capsys, *MODEL, "--objective", objective, *extra)
    assert code == 0, payload
    assert recorded[-1]["problem"].objective.kind == objective
    expected = extra[1] if extra else DEFAULT_METHODS[objective]
    assert payload["method"] == expected
    assert payload["evaluation"]["objective"] == pytest.approx(payload["objective"])


def test_iteration_plans_paper_3s_layer_graph_with_its_default_method(capsys, tmp_path: Path) -> None:
    plan = tmp_path / "p.json"
    code, payload = _json(capsys, "builtin:lenet5", "--objective", "iteration", "--cluster", "2xP100",
                          "-o", str(plan))
    assert code == 0 and payload["method"] == DEFAULT_METHODS["iteration"] == "optcnn"
    assert payload["evaluation"]["objective"] == pytest.approx(payload["objective"])
    # the plan file scores the same with `dnnpart evaluate`
    assert main(["evaluate", "builtin:lenet5", str(plan), "--objective", "iteration", "--cluster",
                 "2xP100", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["objective"] == pytest.approx(payload["objective"])


def test_compare_runs_each_method_and_keeps_refusals_as_rows(capsys) -> None:
    code, payload = _json(capsys, *MODEL, "--compare", "greedy,dp,parmesan")
    assert code == 0
    rows = {r["method"]: r for r in payload["comparison"]}
    assert list(rows) == ["dp", "greedy", "parmesan"]  # the main method first, run once
    assert rows["dp"]["objective"] == pytest.approx(payload["objective"])
    best = min(r["objective"] for r in rows.values() if r["objective"] is not None)
    for r in rows.values():  # "vs best" is the ratio to the best objective among the rows
        if r["objective"] is not None:
            expect = "best" if r["objective"] <= best else f"+{100 * (r['objective'] / best - 1):.0f}%"
            assert r["vs_best"] == expect
    assert rows["parmesan"]["status"] == "no plan" and "pipeline" in rows["parmesan"]["note"]
    assert main(["-q", "plan", *MODEL, "--compare", "greedy"]) == 0
    assert "Methods compared" in capsys.readouterr().out
    assert main(["-q", "plan", *MODEL, "--compare", "greedy,nonesuch"]) == 2
    assert "nonesuch" in capsys.readouterr().err
