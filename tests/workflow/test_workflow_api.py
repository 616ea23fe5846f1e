"""The library API for models (:mod:`dnnpart.workflow`) on its own, without the CLI.

A small torch model (a four-block ResNet on 16x16 images) keeps each plan to about a second;
the CLI tests check that the commands print and write what these functions return.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("torch", reason="the model path imports torch models")

from dnnpart.errors import FormatError, ProblemTooLargeError
from dnnpart.problem import Objective
from dnnpart.workflow import (
    PlannedModel,
    export_plan,
    load_plan,
    load_planned_model,
    plan_model,
    run_plan,
    simulate_plan,
)

MODEL = "module:dnnpart.frontends.models:shared_relu_resnet"
SHAPES = [(1, 3, 16, 16)]


@pytest.fixture(scope="module")
def planned() -> PlannedModel:
    return plan_model(MODEL, cluster="2xA100", input_shapes=SHAPES)


def test_a_plan_holds_its_problem_result_evaluation_and_stages(planned: PlannedModel) -> None:
    result, ev = planned.result, planned.evaluation
    assert result is not None and ev is not None and planned.plan is result.plan
    assert (result.method, result.status.value) == ("dp", "optimal")
    assert ev.objective == pytest.approx(result.objective)
    stages = planned.stages
    assert [s.index for s in stages] == list(range(len(stages))) and 1 <= len(stages) <= 2
    assert sum(s.nodes for s in stages) == planned.problem.graph.n_nodes
    assert max(s.load for s in stages) == pytest.approx(ev.objective)
    assert stages[0].first_module == "conv1" and stages[-1].last_module == "fc"
    assert len(planned.notes) == 1 and planned.notes[0].startswith("granularity: block")
    assert planned.imported is not None


def test_the_default_plan_cuts_only_between_blocks(planned: PlannedModel) -> None:
    from dnnpart.graph.blocks import node_units

    assert planned.plan is not None and planned.model_block is not None
    assert planned.model_block["granularity"] == "block"
    unit = node_units(planned.problem.graph).unit
    a = planned.plan.assignment
    assert all(np.unique(a[unit == u]).size == 1 for u in np.unique(unit))  # whole units
    op = plan_model(MODEL, cluster="2xA100", input_shapes=SHAPES, granularity="op")
    assert op.notes == () and op.result is not None and op.result.method == "dp"
    assert op.result.objective <= planned.result.objective + 1e-12  # op level is a relaxation


def test_the_plan_file_round_trips(planned: PlannedModel, tmp_path: Path) -> None:
    path = planned.write(tmp_path / "plan.json")
    data = json.loads(path.read_text())
    assert data == json.loads(json.dumps(planned.to_dict()))
    block = data["model"]
    assert block["spec"] == MODEL and block["input_shapes"] == [[1, 3, 16, 16]]
    assert block["schedule"] is None and block["microbatches"] is None  # run's own defaults
    with pytest.raises(FormatError, match="--trust-plan"):  # a module: spec imports code
        load_planned_model(path)
    again = load_planned_model(path, trust=True)
    assert again.result is None and again.record["method"] == "dp"
    assert again.plan is not None and planned.plan is not None
    assert again.plan.assignment.tolist() == planned.plan.assignment.tolist()
    assert again.runnable is not None and again.runnable.module is not None
    assert set(again.runnable.device_of.values()) <= {0, 1}
    assert again.to_dict() == data
    named = load_plan(path, model=MODEL)  # naming the model yourself is the other way in
    assert named.runnable is None and named.spec == MODEL


def test_an_objective_given_by_kind_takes_the_schedule() -> None:
    planned = plan_model(MODEL, cluster="2xA100", input_shapes=SHAPES, objective="pipeline",
                         method="pipedream", schedule="1f1b", microbatches=6)
    assert planned.problem.objective == Objective(kind="pipeline", schedule="1f1b", microbatches=6)
    assert planned.model_block is not None and planned.model_block["microbatches"] == 6


def test_a_schedule_asks_for_stages_of_whole_blocks_and_says_so() -> None:
    told: list[str] = []
    planned = plan_model(MODEL, cluster="2xA100", input_shapes=SHAPES, schedule="gpipe",
                         notify=told.append)
    assert planned.result is not None and planned.result.method == "block-pipeline"
    assert planned.problem.objective.kind == "stages"
    assert told == list(planned.notes) and told[0].startswith("objective: stages")
    # paper 1's throughput with a schedule keeps the op-level `pipeline` method
    told.clear()
    planned = plan_model(MODEL, cluster="2xA100", input_shapes=SHAPES, schedule="gpipe",
                         objective="throughput", notify=told.append)
    assert planned.result is not None and planned.result.method == "pipeline"
    assert told[0].startswith("method: pipeline")


def test_dpl_stands_in_for_a_refusing_dp_unless_dp_options_were_set() -> None:
    planned = plan_model(MODEL, cluster="2xA100", input_shapes=SHAPES, training=True,
                         granularity="op")
    assert planned.result is not None and planned.result.method == "dpl"
    assert planned.notes[-1].startswith("method: dpl (the default dp refused this graph")
    with pytest.raises(ProblemTooLargeError):
        plan_model(MODEL, cluster="2xA100", input_shapes=SHAPES, max_ideals=2, granularity="op")


def test_bad_names_fail_before_the_model_is_captured(monkeypatch: pytest.MonkeyPatch) -> None:
    import dnnpart.workflow.planning as planning

    def no_capture(*args: object, **kwargs: object) -> None:
        raise AssertionError("captured the model before checking the method")

    monkeypatch.setattr(planning, "import_model", no_capture)
    with pytest.raises(ValueError, match="unknown method"):
        plan_model(MODEL, method="nope")
    with pytest.raises(ValueError, match="unknown method"):
        plan_model(MODEL, compare=["greedy", "nope"])
    with pytest.raises(ValueError, match="max_ideals"):
        plan_model(MODEL, max_ideals="many")


def test_op_level_plans_are_refused_by_run_before_capturing() -> None:
    planned = plan_model(MODEL, cluster="2xA100", input_shapes=SHAPES, objective="makespan",
                         method="round-robin")
    with pytest.raises(FormatError, match="op-level placement"):
        run_plan(planned)


def test_export_and_simulate_take_the_planned_model(planned: PlannedModel, tmp_path: Path) -> None:
    written = export_plan(planned, "pipelining", tmp_path / "split.json")
    assert written.to_dict()["format"] == "pipelining" and written.details["split_spec"]
    lines = export_plan(planned, "placement-text", tmp_path / "lines.txt")
    assert lines.details["nodes"] == planned.problem.graph.n_nodes
    with pytest.raises(FormatError, match="only for a plan file"):
        export_plan(planned, "placement-text", tmp_path / "x.txt", graph="zoo:bert-3")
    with pytest.raises(FormatError, match="--format"):
        export_plan(planned, "onnx", tmp_path / "x")
    sim = simulate_plan(planned, schedule="1f1b", microbatches=8)
    assert sim.level == "pipeline" and sim.summary["step_time"] > 0 and sim.microbatches == 8
    with pytest.raises(ValueError, match="pass the plan"):
        simulate_plan(planned.problem)
