"""Three suite members in the default test run, from plan to every runtime.

:data:`dnnpart.frontends.suite.QUICK` (GPT-2, BERT, T5: a decoder, an encoder and an
encoder-decoder) at sizes smaller than the suite's (hidden 32, vocabulary 64), through the
steps of ``benchmarks/model_suite.py``: ``plan --training --schedule 1f1b --microbatches 4``
(the default block pipeline; on ``2xA100``, not the suite's ``4xA100``, so each step starts
two ranks, not four), ``run`` (gloo ranks, gradient check), ``export --format pipelining``
and its ``torchrun ... --check`` (loss and gradients against the unpartitioned model),
``export --format deepspeed`` (its check builds the ``PipelineModule`` over gloo),
``megatron`` and ``torchtitan`` (exit 0, or exit 2 with the reason where the runtime has no
such family) and ``report`` (activations on every stage). The CLI runs in this process; the
ranks and ``torchrun`` are processes. All sixteen members at the suite's sizes:
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
from dnnpart.frontends.suite import QUICK

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


@pytest.mark.parametrize("name", QUICK)
def test_a_quick_suite_member_reaches_every_runtime(name: str, tmp_path: Path) -> None:
    plan = tmp_path / "p.json"
    code, out, err = _cli("plan", TINY[name], "--training", "--schedule", "1f1b", "--microbatches", "4",
                          "--cluster", "2xA100", "-o", str(plan), "--json")
    assert code == 0, err
    result = json.loads(out)
    assert result["method"] == "block-pipeline"
    simulation = result["evaluation"]["simulation"]
    stages = len(simulation["stages"])
    assert stages >= 2 and all(m["activations"] > 0 for m in simulation["memory"])

    code, out, err = _cli("run", str(plan))
    assert code == 0, err
    assert f"ran {stages} stages" in out and "as planned" in out

    pipe = tmp_path / "pipe"
    code, _, err = _cli("export", str(plan), "--format", "pipelining", "-o", str(pipe))
    assert code == 0, err
    ran = _torchrun(pipe, stages)
    assert ran.returncode == 0, ran.stdout + ran.stderr[-3000:]
    assert "check step" in ran.stdout

    code, _, err = _cli("export", str(plan), "--format", "deepspeed", "-o", str(tmp_path / "ds"))
    assert code == 0, err
    code, _, err = _cli("export", str(plan), "--format", "megatron", "-o", str(tmp_path / "mg"))
    assert (code, bool(err.strip())) == ((0, False) if MEGATRON_OK[name] else (2, True)), err
    code, _, err = _cli("export", str(plan), "--format", "torchtitan", "-o", str(tmp_path / "tt"))
    assert code == 2 and err.startswith("error: ") and len(err.strip().splitlines()) == 1, err

    code, _, err = _cli("report", str(plan), "-o", str(tmp_path / "r.html"))
    assert code == 0, err
    html = (tmp_path / "r.html").read_text()
    assert "activations" in html
