"""Plans run across gloo processes give the unpartitioned model's output (max |diff| <= 1e-5).

Models are the real architectures at small inputs (and a narrow BERT) so the default run
stays short; the planning is the exact DP on 2 and 4 simulated A100s.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch", reason="export and run need torch (pip install 'dnnpart[torch]')")
if not torch.distributed.is_available() or not torch.distributed.is_gloo_available():
    pytest.skip("torch.distributed with the gloo backend is not available", allow_module_level=True)

from dnnpart.cost import shorthand_cluster  # noqa: E402
from dnnpart.errors import FormatError  # noqa: E402
from dnnpart.export import operator_devices, split_points  # noqa: E402
from dnnpart.export.runtime import run_distributed  # noqa: E402
from dnnpart.export.stages import run_locally, split_module  # noqa: E402
from dnnpart.frontends.build import price_model  # noqa: E402
from dnnpart.frontends.fx_import import module_ir, trace  # noqa: E402
from dnnpart.frontends.models import InceptionV3, bert_encoder, resnet50  # noqa: E402
from dnnpart.problem import Problem  # noqa: E402
from dnnpart.solvers import solve  # noqa: E402

TOLERANCE = 1e-5


def _model(name: str) -> tuple[torch.nn.Module, tuple[torch.Tensor, ...]]:
    torch.manual_seed(0)
    if name == "resnet50":
        return resnet50().eval(), (torch.randn(1, 3, 64, 64),)
    if name == "inception_v3":
        return InceptionV3().eval(), (torch.randn(1, 3, 80, 80),)
    model = bert_encoder(hidden=64, heads=4, ffn=128, vocab_size=100, seq_len=16).eval()
    return model, (torch.randint(0, 100, (1, 16)),)


@pytest.mark.parametrize("n_devices", [2, 4])
@pytest.mark.parametrize(
    "name",
    ["resnet50", pytest.param("inception_v3", marks=pytest.mark.slow), "bert"],  # DP ~30-50 s
)
def test_dp_plan_runs_distributed_with_the_same_output(name: str, n_devices: int) -> None:
    model, inputs = _model(name)
    gm = trace(model, inputs, name=name)
    priced = shorthand_cluster(n_devices, "A100", host_cpu=False)
    imported = price_model(module_ir(gm, name=name), priced.cost_model)
    problem = Problem(graph=imported.graph, cluster=priced.cluster, name=name)
    plan = solve(problem, "dp").require_plan()
    program = split_module(gm, operator_devices(imported, plan))
    micro = [
        inputs,
        tuple(torch.randn_like(x) if x.is_floating_point() else torch.randint_like(x, 100) for x in inputs),
    ]
    outputs = run_distributed(program, micro, nproc=n_devices)
    torch.set_num_threads(1)
    with torch.no_grad():
        for out, mb in zip(outputs, micro, strict=True):
            assert float((out - model(*mb)).abs().max()) <= TOLERANCE


def test_non_contiguous_placement_gets_several_stages_per_device() -> None:
    model, inputs = _model("resnet50")
    gm = trace(model, inputs)
    ops = [n.name for n in gm.graph.nodes if n.op.startswith("call")]
    third = len(ops) // 3
    device_of = {op: (1 if third <= i < 2 * third else 0) for i, op in enumerate(ops)}
    program = split_module(gm, device_of)
    assert [s.device for s in program.stages] == [0, 1, 0]
    with torch.no_grad():
        expected = model(*inputs)
        assert torch.equal(run_locally(program, inputs), expected)
    ir = module_ir(gm, name="r50")
    with pytest.raises(FormatError, match="contiguous"):
        split_points(ir, device_of)
    contiguous = {op: int(i >= third) for i, op in enumerate(ops)}
    stages = split_points(ir, contiguous)
    path = ir.ops[third].module_path.split(".")  # layer2.2.conv1: the split is its block
    block = ".".join(path[: next(i for i, p in enumerate(path) if p.isdigit()) + 1])
    assert [s["split_before"] for s in stages] == [None, block]


def test_cli_plan_export_run(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from dnnpart.cli.main import main

    plan = tmp_path / "plan.json"
    assert (
        main(
            ["plan", "builtin:resnet50", "--input-shape", "1,3,64,64", "--cluster", "2xV100", "-o", str(plan),
             "--microbatches", "2"]
        )
        == 0
    )
    assert json.loads(plan.read_text())["model"]["spec"] == "builtin:resnet50"
    for fmt in ("placement", "torch"):
        assert main(["export", str(plan), "--format", fmt, "-o", str(tmp_path / fmt)]) == 0
    placed = json.loads((tmp_path / "placement").read_text())
    assert len(placed["nodes"]) == 175
    manifest = json.loads((tmp_path / "torch" / "stages.json").read_text())
    assert manifest["stages"]
    capsys.readouterr()
    assert main(["run", str(plan), "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["microbatches"] == 2  # the plan's
    devices = json.loads(plan.read_text())["devices"]  # every device with nodes runs, no other
    assert sorted(report["devices_used"]) == sorted(d["name"] for d in devices if d["nodes"])
    assert report["max_abs_diff"] <= TOLERANCE
    assert np.isfinite(report["max_abs_diff"])
    assert main(["run", str(tmp_path / "placement")]) == 2  # not a plan with a model


def test_cli_plan_falls_back_to_dpl_when_dp_refuses(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # With no -m, `plan` runs dp; when dp refuses the graph as too large (as on aten-level
    # hf:gpt2), it says so and plans with dpl; a method the user names is never replaced.
    import dnnpart.solvers as solvers
    from dnnpart.cli.main import main
    from dnnpart.errors import ProblemTooLargeError

    real_solve = solvers.solve

    def refusing_dp(problem, method="dp", /, **kw):  # type: ignore[no-untyped-def]
        if method == "dp":
            raise ProblemTooLargeError("too many ideals (test)")
        return real_solve(problem, method, **kw)

    monkeypatch.setattr(solvers, "solve", refusing_dp)
    plan = tmp_path / "plan.json"
    args = ["plan", "builtin:resnet50", "--input-shape", "1,3,64,64", "--cluster", "2xV100"]
    assert main([*args, "-o", str(plan)]) == 0
    assert json.loads(plan.read_text())["method"] == "dpl"
    assert "method: dpl (the default dp refused this graph" in capsys.readouterr().err
    assert main([*args, "-m", "dp"]) == 1
