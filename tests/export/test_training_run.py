"""Training plans run one pipelined step whose loss and gradients match the unpartitioned model.

Tolerance: :data:`dnnpart.export.training_run.RTOL` (1e-4 of the largest reference gradient;
measured differences are ~1e-7). Tiny configs keep the default run short; full sizes are slow.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch", reason="dnnpart run needs torch (pip install 'dnnpart[torch]')")
if not torch.distributed.is_available() or not torch.distributed.is_gloo_available():
    pytest.skip("torch.distributed with the gloo backend is not available", allow_module_level=True)

from dnnpart.baselines.pipeline_split import range_split  # noqa: E402
from dnnpart.cli.main import main  # noqa: E402
from dnnpart.errors import FormatError  # noqa: E402
from dnnpart.export.stages import StagedProgram, split_module  # noqa: E402
from dnnpart.export.training_run import RTOL, check_linear, device_order  # noqa: E402
from dnnpart.testing import chain_problem  # noqa: E402

SHARED_RELU = "module:dnnpart.frontends.models:shared_relu_resnet"
TINY_GPT2 = "hf:gpt2:n_layer=2,n_embd=64,n_head=2,vocab_size=512"


def _plan_and_run(tmp_path: Path, capsys: pytest.CaptureFixture[str], spec: str, *extra: str,
                  schedule: str = "1f1b", micro: str = "4") -> dict[str, object]:
    plan = tmp_path / "p.json"
    code = main(["plan", spec, "--training", "--cluster", "4xA100", "--microbatches", micro,
                 "--schedule", schedule, "-o", str(plan), "--json", *extra])
    assert code == 0
    capsys.readouterr()
    # the plan's schedule and micro-batches
    assert main(["run", str(plan), "--json", "--trust-plan", "--steps", "1"]) == 0
    info: dict[str, object] = json.loads(capsys.readouterr().out)
    # exactly the plan's devices run, each once: those holding its operators
    held = {d["name"] for d in json.loads(plan.read_text())["devices"] if d["nodes"]}
    devices = info["devices"]
    assert isinstance(devices, list) and sorted(devices) == sorted(held)
    return info


def test_shared_relu_resnet_gpipe_matches_gradients(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    info = _plan_and_run(tmp_path, capsys, SHARED_RELU, "--input-shape", "1,3,16,16", schedule="gpipe")
    assert info["passed"] is True and info["schedule"] == "gpipe" and info["microbatches"] == 4
    assert info["stages"] == 4  # one stage per accelerator of the plan
    assert float(info["grad_relative_diff"]) <= RTOL  # type: ignore[arg-type]
    assert info["parameters_checked"] == 29


def test_tiny_gpt2_1f1b_matches_gradients(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    info = _plan_and_run(tmp_path, capsys, TINY_GPT2, micro="8")
    assert info["passed"] is True and info["schedule"] == "1f1b" and info["stages"] == 4
    assert float(info["grad_relative_diff"]) <= RTOL  # type: ignore[arg-type]
    losses = info["losses"]
    assert isinstance(losses, list) and len(losses) == 8


@pytest.mark.slow
@pytest.mark.parametrize("spec", ["builtin:resnet50", "hf:gpt2"])
def test_full_size_models_match_gradients(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], spec: str
) -> None:
    extra = ("--input-shape", "1,3,64,64") if spec.startswith("builtin") else ("--input-shape", "1,64")
    info = _plan_and_run(tmp_path, capsys, spec, *extra, micro="8")
    assert info["passed"] is True


def test_device_order_refuses_devices_passing_activations_both_ways() -> None:
    g = chain_problem([1, 1, 1, 1], n_accelerators=2).graph
    assert device_order(g, np.array([0, 0, 1, 1])) == [0, 1]
    assert device_order(g, np.array([1, 1, 0, 0])) == [1, 0]
    with pytest.raises(FormatError, match="both ways"):
        device_order(g, np.array([0, 1, 0, 1]))


def test_check_linear_refuses_replication_and_split_devices() -> None:
    empty = StagedProgram(stages=(), input_names=(), output_template=None, output_values=())
    with pytest.raises(FormatError, match="replicates"):
        check_linear(empty, replicated=True)
    gm = torch.fx.symbolic_trace(torch.nn.Sequential(torch.nn.ReLU(), torch.nn.Tanh(), torch.nn.ReLU()))
    ops = [n.name for n in gm.graph.nodes if n.op == "call_module"]
    program = split_module(gm, {ops[0]: 0, ops[1]: 1, ops[2]: 0})
    with pytest.raises(FormatError, match="two separate pieces"):
        check_linear(program)


def test_run_refuses_a_non_pipeline_training_plan(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    plan = tmp_path / "p.json"
    assert main(["plan", SHARED_RELU, "--input-shape", "1,3,16,16", "--training", "--cluster", "2xA100",
                 "-m", "pipeline", "-o", str(plan)]) == 0
    capsys.readouterr()  # then scatter the operators over both devices: not a pipeline
    code = main(["run", str(_scrambled(plan)), "--trust-plan"])
    err = capsys.readouterr().err
    assert code == 2 and "both ways" in err and err.count("\n") == 1


def _scrambled(path: Path) -> Path:
    data = json.loads(path.read_text())
    devices = data["devices"]
    names = [d["name"] for d in devices]
    nodes = sorted({n for d in devices for n in d.get("nodes", [])})
    for d in devices:
        d["nodes"] = []
    for i, n in enumerate(nodes):
        devices[i % len(names)]["nodes"].append(n)
    out = path.with_name("scrambled.json")
    out.write_text(json.dumps(data))
    return out


@pytest.mark.parametrize("weights,k", [([4.0, 1, 1, 4], 2), ([1.0] * 7, 3), ([5.0, 1, 1, 1, 1, 1], 4)])
def test_range_split_is_optimal_by_brute_force(weights: list[float], k: int) -> None:
    import itertools

    w = np.asarray(weights, dtype=float)
    ends = range_split(w, k)
    got = max(w[a:b].sum() for a, b in zip([0, *ends[:-1]], ends, strict=True))
    best = min(
        max(w[a:b].sum() for a, b in zip([0, *cuts], [*cuts, len(w)], strict=True))
        for r in range(k)
        for cuts in itertools.combinations(range(1, len(w)), r)
    )
    assert got == best and ends[-1] == len(w) and len(ends) <= k


def test_run_refuses_a_plan_it_cannot_run_as_planned(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    import dataclasses

    from tests.block_plans import block_assignment

    from dnnpart.plan import Plan
    from dnnpart.workflow import plan_model
    from dnnpart.workflow.running import _check_backward_placement

    planned = plan_model(SHARED_RELU, cluster="4xA100", training=True, schedule="gpipe",
                         input_shapes=[(1, 3, 16, 16)])
    blocks = block_assignment(planned, [0, 1])
    backward = planned.problem.graph.is_backward
    _check_backward_placement(dataclasses.replace(planned, plan=Plan(assignment=blocks)), [0, 1], "p")
    # the backward of acc1's stage away from its forward: on acc0, or alone on acc3
    away = dataclasses.replace(planned, plan=Plan(assignment=np.where(backward & (blocks == 1), 0, blocks)))
    with pytest.raises(FormatError, match="device acc0 runs the backward of operator"):
        _check_backward_placement(away, [0, 1], "p")
    alone = Plan(assignment=np.where(backward & (blocks == 1), 3, blocks))
    path = dataclasses.replace(planned, plan=alone).write(tmp_path / "p.json")
    capsys.readouterr()
    assert main(["run", str(path), "--trust-plan"]) == 2
    err = "".join(line + "\n" for line in capsys.readouterr().err.splitlines()
                  if not line.startswith("progress:"))  # a slow load prints progress first
    assert "device acc3 holds" in err and "no forward operator" in err and err.count("\n") == 1, err


def test_run_says_it_ran_the_plans_stages_on_its_devices(
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    import dnnpart.workflow as workflow
    from dnnpart.export.training_run import TrainingRun
    from dnnpart.workflow import TrainingRunResult

    step = TrainingRun(schedule="gpipe", microbatches=2, stages=2, losses=[1.0, 1.0],
                       reference_losses=[1.0, 1.0], grad_max_abs_diff=0.0, grad_max_abs_reference=1.0,
                       loss_max_abs_diff=0.0, n_parameters_checked=3, worst_parameter="w")
    canned = TrainingRunResult(model="m", devices=("acc2", "acc0"), operators_moved=0, operators=(5, 5),
                               run=step)
    monkeypatch.setattr(workflow, "run_plan", lambda *a, **k: canned)
    assert main(["run", "p.json"]) == 0
    assert capsys.readouterr().out.splitlines()[0] == "ran 2 stages on devices acc2, acc0 as planned"
