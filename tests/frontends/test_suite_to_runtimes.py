"""The model suite from plan to the runtimes, whole processes (``-m slow``: about two minutes
per model): ``benchmarks/model_suite.py``'s steps for every suite member, each step exit 0,
the torchrun of the pipelining export passing its check, and the runtimes without the model's
family refusing it with exit 2 and a reason (torchtitan 0.3.0 ships llama3, qwen3, deepseek_v3 and
gpt_oss; Megatron's layout has no encoder-decoders, CNNs, vision transformers or convolution blocks)."""

from __future__ import annotations

import importlib.util
import os
from pathlib import Path

import pytest

from dnnpart.frontends.suite import SUITE

pytest.importorskip("transformers")
REPO = Path(__file__).resolve().parents[2]
#: suite members whose family each runtime does not have (exit 2 expected, with a reason)
NO_MEGATRON = {"t5", "bart", "whisper", "vit", "swin", "resnet", "mamba"}
TORCHTITAN = {"llama"}


def _bench() -> object:
    spec = importlib.util.spec_from_file_location("model_suite", REPO / "benchmarks" / "model_suite.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.slow
@pytest.mark.parametrize("name", [n for n, _ in SUITE])
def test_the_model_reaches_every_runtime(name: str, tmp_path: Path) -> None:
    bench = _bench()
    env = {**os.environ, "PYTHONPATH": str(REPO / "src"), "OMP_NUM_THREADS": "1"}
    row = bench.run_model(name, dict(SUITE)[name], tmp_path, env)  # type: ignore[attr-defined]
    for step in ("plan", "run", "export pipelining", "torchrun", "deepspeed", "report"):
        assert row.get(step, "").startswith("ok"), (step, row)
    assert row["activations"].startswith("all > 0"), row
    megatron_ok = name not in NO_MEGATRON
    assert row["megatron"].startswith("ok" if megatron_ok else "exit 2: "), row
    assert row["torchtitan"].startswith("ok" if name in TORCHTITAN else "exit 2: "), row
