"""``export --format pipelining`` writes a folder that ``torchrun`` runs.

The export is launched as its README says (``python -m torch.distributed.run --nproc-per-node S
run_pipeline.py --steps N --check``, gloo on this CPU) and must exit 0; the loss it prints is
compared with the unpartitioned model's, computed here by the test itself (the model rebuilt
from the plan, the same seeded micro-batches and targets, plain SGD), tolerance
:data:`dnnpart.export.training_run.RTOL`. Plans are block-aligned by hand
(:mod:`tests.block_plans`) on devices out of rank order, so that the launch's device mapping
(``CUDA_VISIBLE_DEVICES``) is not the identity. A ``torchrun`` launch costs ~10 s here (each
process imports torch and ``torch.distributed.pipelining``), so the default suite runs one
(training, ``pipeline()``); GPT-2 (tied weights, ``hf:``), forward-only inference with dnnpart's
stage modules, and 3-4 stage ResNet-50/GPT-2 with either split are ``slow``.
"""

from __future__ import annotations

import json
import os
import re
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

torch = pytest.importorskip("torch", reason="needs torch")
if not torch.distributed.is_available() or not torch.distributed.is_gloo_available():
    pytest.skip("torch.distributed with the gloo backend is not available", allow_module_level=True)

from tests.block_plans import block_plan  # noqa: E402

from dnnpart.cli.main import main  # noqa: E402
from dnnpart.devices import Cluster, Device  # noqa: E402
from dnnpart.export.pipelining import launch_dict, readme_text  # noqa: E402
from dnnpart.export.training_run import RTOL, gradient_difference, main_output  # noqa: E402
from dnnpart.workflow import run_pipeline as script  # noqa: E402
from dnnpart.workflow.loading import rebuild_model  # noqa: E402

TINY_GPT2 = "hf:gpt2:n_layer=2,n_embd=64,n_head=2"
SHARED_RELU = "module:dnnpart.frontends.models:shared_relu_resnet"
SRC = Path(__file__).resolve().parents[2] / "src"


def _torchrun(folder: Path, nproc: int, *args: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    with socket.socket() as s:  # torchrun's default port may be taken by a parallel run
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    env = {**os.environ, "OMP_NUM_THREADS": "1",
           "PYTHONPATH": os.pathsep.join([str(SRC), os.environ.get("PYTHONPATH", "")])}
    cmd = [sys.executable, "-m", "torch.distributed.run", "--nproc-per-node", str(nproc),
           "--master-port", str(port), "run_pipeline.py", *args]
    return subprocess.run(cmd, cwd=folder, env=env, capture_output=True, text=True, timeout=timeout)


def _export(plan: Path, out: Path, *extra: str) -> dict[str, Any]:
    assert main(["export", str(plan), "--format", "pipelining", "-o", str(out), *extra]) == 0
    assert {p.name for p in out.iterdir()} == {"run_pipeline.py", "plan.json", "launch.json", "README.md"}
    launch: dict[str, Any] = json.loads((out / "launch.json").read_text())
    return launch


def _unpartitioned_losses(plan: Path, steps: int, n_micro: int, lr: float, *,
                          trust: bool = False) -> list[float]:
    """Mean micro-batch loss per step of the whole model under SGD (the script's inputs and
    targets: :func:`script.microbatch`, :func:`script.target_for`)."""
    source = rebuild_model(plan, trust=trust)
    model = source.module
    opt = torch.optim.SGD(model.parameters(), lr=lr)
    out = []
    for step in range(steps):
        opt.zero_grad()
        losses = []
        for i in range(n_micro):
            y = main_output(model(*script.microbatch(source, step, i, n_micro)))
            losses.append(torch.nn.functional.mse_loss(y, script.target_for(y, step, i, n_micro)))
        total = sum(losses) / n_micro
        total.backward()
        opt.step()
        out.append(float(total.detach()))
    return out


def _check_training_export(tmp_path: Path, spec: str, devices: list[int], split_spec: list[str],
                           *extra: str, **options: Any) -> str:
    plan = block_plan(spec, tmp_path / "p.json", devices=devices, **options)
    launch = _export(plan, tmp_path / "out", *extra)
    names = [f"acc{d}" for d in devices]
    assert [s["device"] for s in launch["stages"]] == names and launch["schedule"] == "1f1b"
    assert launch["cuda_visible_devices"] == ",".join(map(str, devices))
    assert list(launch["split_spec"]) == split_spec
    readme = (tmp_path / "out" / "README.md").read_text()
    assert f"CUDA_VISIBLE_DEVICES={launch['cuda_visible_devices']} torchrun --nproc-per-node" in readme
    ran = _torchrun(tmp_path / "out", len(devices), "--steps", "2", "--check")
    assert ran.returncode == 0, ran.stdout + ran.stderr[-3000:]
    assert ran.stdout.count("check step") == 2
    printed = [float(x) for x in re.findall(r"^step \d+: loss (\S+)$", ran.stdout, re.M)]
    trust = "--trust-plan" in extra
    expected = _unpartitioned_losses(plan, 2, launch["microbatches"], 1e-3, trust=trust)
    assert printed == pytest.approx(expected, rel=RTOL)
    return ran.stdout


def test_training_export_runs_under_torchrun_with_the_unpartitioned_loss(tmp_path: Path) -> None:
    # units: stem, layers.0..3, head; 2 stages on acc2 then acc0 (not rank order)
    out = _check_training_export(tmp_path, SHARED_RELU, [2, 0], ["layers.2"], "--trust-plan",
                                 input_shapes=[(1, 3, 16, 16)])
    assert "split by pipeline()" in out


@pytest.mark.slow
def test_gpt2_training_export_runs_under_torchrun_with_the_unpartitioned_loss(tmp_path: Path) -> None:
    # tied wte/lm_head on both stages; the split point carries the hf: wrapper's `model.` prefix
    out = _check_training_export(tmp_path, TINY_GPT2, [2, 0], ["model.transformer.h.1"])
    assert "split by pipeline()" in out


@pytest.mark.slow
def test_inference_export_runs_forward_only_with_dnnparts_stage_modules(tmp_path: Path) -> None:
    plan = block_plan(SHARED_RELU, tmp_path / "p.json", devices=[1, 3], training=False,
                      input_shapes=[(1, 3, 16, 16)])
    launch = _export(plan, tmp_path / "out", "--trust-plan")
    assert launch["training"] is False and launch["cuda_visible_devices"] == "1,3"
    ran = _torchrun(tmp_path / "out", 2, "--check", "--split", "manual")
    assert ran.returncode == 0, ran.stdout + ran.stderr[-3000:]
    assert "split by dnnpart's stage modules" in ran.stdout and "loss" not in ran.stdout
    mean = float(re.findall(r"^step 1: output \(4, 10\), mean (\S+)$", ran.stdout, re.M)[0])
    source = rebuild_model(plan, trust=True)
    with torch.no_grad():
        ys = [main_output(source.module(*script.microbatch(source, 0, i, 4))) for i in range(4)]
    assert mean == pytest.approx(float(torch.cat(ys).double().mean()), rel=RTOL)


@pytest.mark.slow
@pytest.mark.parametrize("split", ["auto", "manual"])
def test_resnet50_and_gpt2_exports_pass_their_check_either_way(tmp_path: Path, split: str) -> None:
    plans = [(block_plan("builtin:resnet50", tmp_path / "r.json", devices=[0, 1, 2],
                         input_shapes=[(1, 3, 32, 32)]), 3),
             (block_plan(TINY_GPT2, tmp_path / "g.json", devices=[3, 1, 0, 2]), 4)]
    for plan, stages in plans:
        out = tmp_path / plan.stem
        _export(plan, out)
        ran = _torchrun(out, stages, "--steps", "2", "--check", "--split", split)
        assert ran.returncode == 0, ran.stdout + ran.stderr[-3000:]


def test_the_launch_refuses_another_process_count_in_one_line(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "launch.json").write_text(json.dumps({"stages": [{}, {}]}))
    monkeypatch.setenv("WORLD_SIZE", "3")
    monkeypatch.setenv("RANK", "0")
    assert script.main(["--dir", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: the plan has 2 stages") and err.count("\n") == 1
    with pytest.raises(SystemExit):
        script.parse_args(["--steps", "0"])


def test_launch_maps_stages_to_cuda_indices_and_cpu_stages_to_none() -> None:
    devices = [Device(name="acc0", kind="accelerator"), Device(name="cpu0", kind="cpu"),
               Device(name="acc1", kind="accelerator")]
    cluster = Cluster(devices=devices)
    out = launch_dict([{"device": 2}, {"device": 0, "split_before": "h.1"}], cluster, split_prefix="model")
    assert out["cuda_visible_devices"] == "1,0"  # acc1 is the second accelerator, CUDA index 1
    assert out["split_spec"] == {"model.h.1": "BEGINNING"}
    assert launch_dict([{"device": 1}, {"device": 0}], cluster)["cuda_visible_devices"] is None
    text = readme_text({**out, "spec": "x", "training": True, "schedule": "gpipe", "microbatches": 2})
    assert "CUDA_VISIBLE_DEVICES=1,0 torchrun --nproc-per-node 2 run_pipeline.py" in text
    assert "| 0 | 0 | acc1 | 2 | 1 |" in text


def test_export_refuses_a_plan_that_is_no_pipeline_and_a_file_as_folder(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    plan = block_plan(SHARED_RELU, tmp_path / "p.json", devices=[0, 1], training=False,
                      input_shapes=[(1, 3, 16, 16)])
    (tmp_path / "file").write_text("")
    capsys.readouterr()
    assert main(["export", str(plan), "--format", "pipelining", "-o", str(tmp_path / "file"),
                 "--trust-plan"]) == 2
    err = capsys.readouterr().err
    assert "writes a folder" in err and err.count("\n") == 1
    data = json.loads(plan.read_text())
    a, b = data["devices"][0]["nodes"], data["devices"][1]["nodes"]
    data["devices"][0]["nodes"], data["devices"][1]["nodes"] = a[::2] + b[1::2], a[1::2] + b[::2]
    (tmp_path / "mixed.json").write_text(json.dumps(data))
    assert main(["export", str(tmp_path / "mixed.json"), "--format", "pipelining", "-o",
                 str(tmp_path / "out"), "--trust-plan"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error:") and err.count("\n") == 1 and not (tmp_path / "out").exists()


def test_tied_parameters_get_the_sum_of_their_copies_gradients() -> None:
    import torch.distributed as dist

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=0, world_size=1)
    try:
        a, b, c = (torch.nn.Parameter(torch.zeros(3)) for _ in range(3))
        for p, g in ((a, 1.0), (b, 2.0), (c, 5.0)):
            p.grad = torch.full((3,), g)
        params = [("wte.weight", a), ("lm_head.weight", b), ("ln.weight", c)]
        alias = {"wte.weight": "wte.weight", "lm_head.weight": "wte.weight", "ln.weight": "ln.weight"}
        script.sync_tied(params, alias, {"wte.weight": (3,), "ln.weight": (3,)}, torch.device("cpu"))
        assert a.grad.tolist() == b.grad.tolist() == [3.0] * 3 and c.grad.tolist() == [5.0] * 3
    finally:
        dist.destroy_process_group()


def test_the_check_finds_a_changed_or_missing_gradient() -> None:
    ref = {"w": torch.tensor([1.0, -2.0]), "b": torch.tensor([0.5])}
    assert gradient_difference({k: v.clone() for k, v in ref.items()}, ref)[0] == 0.0
    diff, scale, worst = gradient_difference({"w": torch.tensor([1.0, -2.1]), "b": ref["b"]}, ref)
    assert worst == "w" and diff == pytest.approx(0.1) and scale == 2.0
    assert gradient_difference({"w": ref["w"]}, ref)[0] == float("inf")


def test_retarget_points_traced_cpu_factories_at_the_stage_device() -> None:
    class Positions(torch.nn.Module):
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return x + torch.arange(x.shape[-1], device=x.device)

    gm = torch.export.export(Positions(), (torch.randn(2, 4),)).module()
    x = torch.randn(2, 4, device="meta")
    with pytest.raises(RuntimeError, match="device"):
        gm(x)  # the trace recorded arange(..., device=cpu)
    from dnnpart.export.on_device import retarget

    retarget(gm, torch.device("meta"))
    assert gm(x).device.type == "meta"
