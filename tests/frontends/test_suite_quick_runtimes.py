"""Suite members from plan to every runtime: GPT-2 in the default test run, BERT and T5 (the rest
of :data:`dnnpart.frontends.suite.QUICK`: an encoder and an encoder-decoder; 70 s of the
default run's time between them) under ``-m slow``. The members run at sizes smaller than the
suite's (hidden 32, vocabulary 64), through the steps of ``benchmarks/model_suite.py``:
``dnnpart plan --training --schedule 1f1b --microbatches 4`` (the CLI, in this process; the
default block pipeline, on ``2xA100``, not the suite's ``4xA100``, so each step starts two
ranks, not four), then, on the plan file loaded once (the CLI would capture the model again for
every command), ``run_plan`` (gloo ranks, gradient check), the ``pipelining`` export and its
``torchrun ... --check`` (loss and gradients against the unpartitioned model), ``deepspeed``
(one part per planned stage; ``tests/export/test_runtime_exports.py`` builds such a folder over
gloo), ``megatron`` and ``torchtitan`` (written, or refused as bad input with the reason where
the runtime has no such family) and the report (activations on every stage). All sixteen
members at the suite's sizes, every step a whole CLI process:
``tests/frontends/test_suite_to_runtimes.py`` (``-m slow``).
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("torch")
pytest.importorskip("transformers")
pytest.importorskip("deepspeed", reason="deepspeed not installed (extra 'deepspeed')")

from dnnpart.cli.main import main
from dnnpart.errors import UsageError
from dnnpart.frontends.suite import QUICK
from dnnpart.workflow import export_plan, load_planned_model, run_plan, write_report
from dnnpart.workflow.running import TrainingRunResult

SRC = Path(__file__).resolve().parents[2] / "src"
TINY = {
    "gpt2": "hf:gpt2:n_layer=2,n_embd=32,n_head=2,vocab_size=64,bos_token_id=0,eos_token_id=0",
    "bert": "hf:bert:num_hidden_layers=2,hidden_size=32,num_attention_heads=2,intermediate_size=64,"
            "vocab_size=64",
    "t5": "hf:t5:num_layers=2,num_decoder_layers=2,d_model=32,d_ff=64,num_heads=2,d_kv=16,vocab_size=64",
}
#: what each runtime says of each family (benchmarks/model_suite.py's table): Megatron's
#: layout has no encoder-decoders; torchtitan 0.3.0 ships none of these three
MEGATRON_OK = {"gpt2": True, "bert": True, "t5": False}


def _cli(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(["-q", *argv])
    return code, out.getvalue(), err.getvalue()


def _torchrun(folder: Path, nproc: int) -> subprocess.CompletedProcess[str]:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    env = {**os.environ, "OMP_NUM_THREADS": "1",
           "PYTHONPATH": os.pathsep.join([str(SRC), os.environ.get("PYTHONPATH", "")])}
    return subprocess.run([sys.executable, "-m", "torch.distributed.run", "--nproc-per-node", str(nproc),
                           "--master-port", str(port), "run_pipeline.py", "--steps", "1", "--check"],
                          cwd=folder, env=env, capture_output=True, text=True, timeout=300)


@pytest.mark.parametrize("name", [pytest.param(n, marks=() if n == "gpt2" else pytest.mark.slow)
                                  for n in QUICK])
def test_a_quick_suite_member_reaches_every_runtime(name: str, tmp_path: Path) -> None:
    plan = tmp_path / "p.json"
    code, out, err = _cli("plan", TINY[name], "--training", "--schedule", "1f1b", "--microbatches", "4",
                          "--cluster", "2xA100", "-o", str(plan), "--json")
    assert code == 0, err
    result = json.loads(out)
    assert result["method"] == "block-pipeline"
    simulation = result["evaluation"]["simulation"]
    stages = len(simulation["stages"])
    assert stages == 2 and all(m["activations"] > 0 for m in simulation["memory"])

    planned = load_planned_model(plan)
    ran = run_plan(planned)
    assert isinstance(ran, TrainingRunResult) and len(ran.devices) == stages
    assert ran.run.passed, (ran.run.grad_relative_diff, ran.run.loss_max_abs_diff)

    written = export_plan(planned, "pipelining", tmp_path / "pipe")
    launched = _torchrun(written.out, stages)
    assert launched.returncode == 0, launched.stdout + launched.stderr[-3000:]
    assert "check step" in launched.stdout

    parts = export_plan(planned, "deepspeed", tmp_path / "ds").details["parts"]
    assert len(parts) == stages + 1 and parts[0] == 0
    if MEGATRON_OK[name]:
        assert export_plan(planned, "megatron", tmp_path / "mg").details["layout"]
    else:
        with pytest.raises(UsageError, match="encoder-decoder"):
            export_plan(planned, "megatron", tmp_path / "mg")
    with pytest.raises(UsageError, match="its own decoder families only"):  # none of the three
        export_plan(planned, "torchtitan", tmp_path / "tt")

    write_report(planned, tmp_path / "r.html")
    assert "activations" in (tmp_path / "r.html").read_text()
