"""Model specs in GRAPH arguments, --precision, and their bad-input paths (exit 2, one error line)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from dnnpart.cli.main import main
from dnnpart.cost import load_catalog
from dnnpart.cost.model import CostModel
from dnnpart.cost.ops import Work

TINY = "hf:gpt2:n_layer=1,n_embd=32,n_head=2,vocab_size=97"


def test_a100_tensor_core_peaks_from_the_presets() -> None:
    a100 = load_catalog().device("A100")
    assert (a100.peak_at("fp32"), a100.peak_at("tf32"), a100.peak_at("bf16")) == (19.5e12, 156e12, 312e12)
    assert load_catalog().device("V100").peak_at("bf16") == 15.7e12  # no bf16 path: fp32 peak
    fp32 = CostModel.from_presets()
    bf16 = fp32.with_precision("bf16")
    work = [Work(1e12, 0.0), Work(0.0, 1e9)]  # compute-bound, memory-bound
    t32, t16 = fp32.compute_times_ms(work), bf16.compute_times_ms(work)
    assert t16[0, 1] < t32[0, 1] / 10  # 16x the peak on tensor cores
    assert t16[1, 1] == pytest.approx((t32[1, 1] - 5e-3) / 2 + 5e-3)  # half the bytes


def _info(capsys: pytest.CaptureFixture[str], *extra: str) -> dict[str, object]:
    pytest.importorskip("transformers")
    assert main(["info", TINY, "--input-shape", "1,8", "--json", "--ideal-limit", "10", *extra]) == 0
    data: dict[str, object] = json.loads(capsys.readouterr().out)
    return data


def test_info_takes_an_hf_spec_with_training_optimizer_and_precision(
    capsys: pytest.CaptureFixture[str],
) -> None:
    plain = _info(capsys)
    training = _info(capsys, "--training", "--optimizer", "adam")
    half = _info(capsys, "--precision", "bf16")
    assert training["nodes"] > 2 * plain["nodes"]  # type: ignore[operator]
    assert half["nodes"] == plain["nodes"]
    assert half["total_memory_bytes"] == pytest.approx(plain["total_memory_bytes"] / 2)  # type: ignore[operator]


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["info", "hf:nosuchmodel"], "unknown model type"),
        (["info", TINY + ",n_layers=3"], "n_layers: not a field"),
        (["info", TINY, "--optimizer", "adam"], "--optimizer adam: needs --training"),
        (["solve", "hf:gpt2:n_layer=x=y"], "hf:gpt2:n_layer=x=y"),
    ],
)
def test_bad_model_specs_exit_2_with_one_error_line(
    argv: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    pytest.importorskip("transformers")
    assert main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1].startswith("error:") and message in err[-1]
    assert not any("Traceback" in line for line in err)


def test_bad_config_file_exits_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    pytest.importorskip("transformers")
    bad = tmp_path / "cfg.json"
    bad.write_text("{not json")
    assert main(["info", "hf:gpt2", "--config", str(bad)]) == 2
    assert "--config" in capsys.readouterr().err


def test_model_options_on_a_graph_file_are_refused(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["info", "zoo:bert-3", "--precision", "bf16"]) == 2
    assert "--precision: apply to model specs" in capsys.readouterr().err
