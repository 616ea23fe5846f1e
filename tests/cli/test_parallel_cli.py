"""``dnnpart plan MODEL --parallel dp,tp,pp``: the hybrid plans through the CLI, and the
options it refuses (exit 2, one line)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

pytest.importorskip("torch", reason="plan imports a torch model")
pytest.importorskip("transformers", reason="--parallel plans hf: models")

from dnnpart.cli.main import main

GPT2 = "hf:gpt2:n_layer=4,n_embd=64,n_head=4,vocab_size=128"
BASE = ["plan", GPT2, "--input-shape", "1,32", "--cluster", "two-level:nodes=2,gpus=2,device=A100"]


def test_plan_parallel_writes_a_plan_with_its_exports(tmp_path: Path,
                                                      capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "hybrid.json"
    code = main(["-q", *BASE, "--parallel", "dp,tp,pp", "--global-batch", "8", "-o", str(out), "--json",
                 "--check-exports", "--pipeline-degree", "2"])
    printed = json.loads(capsys.readouterr().out)
    assert code == 0
    data = json.loads(out.read_text())
    assert data == printed and data["format"] == "dnnpart.parallel-plan"
    c = data["launchable"]["config"]
    assert c["data"] * c["tensor"] * c["pipeline"] == 4 and sum(c["blocks"]) == 4
    assert c["pipeline"] == 2 and set(data["by_pipeline"]) == {"2"}  # fixed by --pipeline-degree
    assert c["global_batch"] == 8 and len(set(c["recompute"])) == 1
    assert data["bound_s"] <= data["best"]["step_s"] <= data["launchable"]["step_s"]
    args = data["exports"]["megatron"]["args"]
    assert args[args.index("--tensor-model-parallel-size") + 1] == str(c["tensor"])
    assert args[args.index("--global-batch-size") + 1] == "8"
    pytest.importorskip("megatron.core")
    assert data["exports"]["megatron"]["checked_by"].startswith("megatron-core")
    assert set(data["by_devices"]) == {"1", "2", "4"}  # down to 4 / 8, at least 1


def test_plan_parallel_prints_the_tables(capsys: pytest.CaptureFixture[str]) -> None:
    assert main([*BASE, "--parallel", "dp,pp", "--global-batch", "4"]) == 0
    text = capsys.readouterr().out
    for what in ("hybrid plans", "launchable", "bound", "what if", "Megatron-LM:", "torchtitan:",
                 "DeepSpeed:"):
        assert what in text, what


@pytest.mark.parametrize("extra, needle", [
    (["--parallel", "dp,xp"], "unknown dimension 'xp'"),
    (["--parallel", "dp", "--method", "dp"], "--method does not go with --parallel"),
    (["--parallel", "dp", "--schedule", "1f1b"], "--schedule does not go with --parallel"),
    (["--parallel", "dp", "--recompute"], "--recompute does not go with --parallel"),
    (["--global-batch", "8"], "--global-batch goes with --parallel"),
    (["--check-exports"], "--check-exports goes with --parallel"),
    (["--tensor-degree", "2"], "--tensor-degree goes with --parallel"),
    (["--parallel", "dp", "--pipeline-degree", "0"], "--pipeline-degree 0"),
    (["--parallel", "dp", "--devices", "9"], "--devices 9"),
    (["--parallel", "dp", "--global-batch", "0"], "--global-batch 0"),
    (["--parallel", "dp", "--input-shape", "1,2,3"], "BATCH,SEQ"),
])
def test_plan_parallel_refuses(extra: list[str], needle: str, capsys: pytest.CaptureFixture[str]) -> None:
    argv = [*BASE, *extra]
    if "--input-shape" in extra:
        argv = ["plan", GPT2, "--cluster", "4xA100", *extra]
    assert main(argv) == 2
    err = capsys.readouterr().err
    lines = [ln for ln in err.splitlines() if ln.startswith("error:")]
    assert len(lines) == 1 and needle in lines[0], err
    assert "Traceback" not in err


def test_plan_parallel_refuses_a_model_without_layers(capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["plan", "builtin:resnet50", "--cluster", "2xA100", "--parallel", "dp"])
    assert code == 2
    assert "not an hf: transformer spec" in capsys.readouterr().err


def test_mixed_precision_keeps_fp32_master_weights_and_state() -> None:
    from dnnpart.workflow import plan_parallel

    fp32 = plan_parallel(GPT2, cluster="4xA100", input_shapes=[(1, 32)], global_batch=4)
    bf16 = plan_parallel(GPT2, cluster="4xA100", input_shapes=[(1, 32)], global_batch=4,
                         precision="bf16")
    assert fp32.profile.optimizer_k == 2.0  # Adam's two moments in the weights' fp32
    assert bf16.profile.optimizer_k == 6.0  # an fp32 master copy and two fp32 moments per 2 bytes
    assert bf16.profile.block.weights[0] == pytest.approx(fp32.profile.block.weights[0] / 2)
    assert bf16.devices is not None and bf16.devices.n_accelerators == 4


def test_plan_parallel_report_is_the_report_of_its_plan_file(tmp_path: Path,
                                                            capsys: pytest.CaptureFixture[str]) -> None:
    plan, page = tmp_path / "hybrid.json", tmp_path / "page.html"
    assert main(["-q", *BASE, "--parallel", "dp,tp,pp", "--global-batch", "8", "--pipeline-degree",
                 "2", "-o", str(plan), "--report", str(page)]) == 0
    again = tmp_path / "again.html"
    assert main(["-q", "report", str(plan), "-o", str(again)]) == 0
    text = page.read_text()
    assert text == again.read_text()  # the page is a function of the plan file alone
    for what in ("launchable", "Stages of the launchable plan", "memory per device", "What if",
                 "Megatron-LM arguments", "DeepSpeed config"):
        assert what in text, what
    schedule = json.loads(plan.read_text())["launchable"]["config"]["schedule"]
    assert ("schedule Gantt" in text) == (schedule in ("gpipe", "1f1b"))
    capsys.readouterr()
    assert main(["report", str(plan), "-o", str(tmp_path / "x.html"), "--schedule", "gpipe"]) == 2
    err = capsys.readouterr().err
    assert "--schedule does not apply to a hybrid plan file" in err and "Traceback" not in err
    assert not (tmp_path / "x.html").exists()


def test_a_spec_is_printed_as_written_not_as_an_emoji(capsys: pytest.CaptureFixture[str]) -> None:
    from dnnpart.cli.render import Renderer

    Renderer().print("hf:llama:num_hidden_layers=2 :smile:")
    assert "hf:llama:num_hidden_layers=2 :smile:" in capsys.readouterr().out


def test_an_unbounded_cluster_writes_a_plan_file_and_its_page(tmp_path: Path,
                                                             capsys: pytest.CaptureFixture[str]) -> None:
    plan, page = tmp_path / "hybrid.json", tmp_path / "page.html"
    code = main(["-q", "plan", GPT2, "--input-shape", "1,32", "--cluster", "two-level:nodes=1,gpus=2",
                 "--parallel", "dp,pp", "--global-batch", "4", "-o", str(plan), "--report", str(page)])
    assert code == 0, capsys.readouterr().err
    data = json.loads(plan.read_text())  # JSON has no infinity: the capacity is null
    assert data["launchable"]["capacity_bytes"] is None and page.exists()
