"""Issue 30, item 3: every size a user controls is bounded before it is allocated.

Seeded cases per surface (``tests/fuzz/corpus.py``: ``bounds``), driven by the modules that
own the bounds: every size-like config field of transformers' configs (``hf:``), every
parameter of the captured workloads, every command taking ``--microbatches``, every method
of the iteration objective (OptCNN's tables). Each ends with exit 2 and one ``error:`` line
naming the field; the blow-ups of the issue run in a subprocess under a 1 GB address-space
limit and a time limit.
"""

from __future__ import annotations

import json
import os
import random
import resource
import subprocess
import sys
import time
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "fuzz"))
from clirun import assert_one_error_line, run_cli
from corpus import bounds

from dnnpart.cli.main import build_parser
from dnnpart.errors import FormatError
from dnnpart.limits import (
    MAX_CONFIG_BYTES,
    MAX_INPUT_BYTES,
    MAX_META_INPUT_ELEMENTS,
    MAX_MICROBATCHES,
    check_input_bytes,
    max_threads,
)

SRC = str(Path(__file__).resolve().parents[2] / "src")
GB = 1 << 30


def test_seeded_sizes_past_their_bounds_are_refused_in_one_line(tmp_path: Path) -> None:
    rng = random.Random(3003)
    labels = set()
    for i in range(120):
        case = bounds(rng, tmp_path, i)
        started = time.perf_counter()
        code, _, err = run_cli(case.argv)
        assert code == case.code, f"{case.label} {case.argv}: exit {code}\n{err}"
        assert_one_error_line(code, err, must_name=case.must_name)
        assert time.perf_counter() - started < 10, f"{case.label} {case.argv}: refused too late"
        labels.add(case.label)
    assert len(labels) == 9


def test_every_size_field_of_transformers_configs_is_bounded() -> None:
    """Driven by transformers' own configs: each size-like field's default lies inside its
    range (the bounds refuse no real model), and the value past its bound is refused."""
    transformers = pytest.importorskip("transformers")
    from dnnpart.frontends.hf import MAX_LAYERS, parse_hf_spec, size_field

    checked = 0
    for model_type in ("gpt2", "bert", "t5", "llama", "swin", "vit", "whisper", "bart", "mixtral",
                       "mamba", "resnet"):
        defaults = transformers.AutoConfig.for_model(model_type).to_dict()
        layers = 0
        for key, value in defaults.items():
            bound = size_field(key)
            items = value if isinstance(value, list) else [value]
            if bound is None or not all(isinstance(v, int) and not isinstance(v, bool) for v in items):
                continue
            low, high, _ = bound
            assert all(low <= v <= high for v in items), (model_type, key, value, bound)
            layers += sum(items) if "layer" in key or "depth" in key else 0
            for bad in (high + 1, low - 1, 10**12):
                shown = json.dumps([bad] * len(items) if isinstance(value, list) else bad).replace(" ", "")
                spec = f"hf:{model_type}:{key}={shown}"
                with pytest.raises(FormatError, match=key):
                    parse_hf_spec(spec)
            checked += 1
        assert layers <= MAX_LAYERS, model_type
    assert checked >= 60


def test_hf_layers_add_up_and_other_integers_stay_in_int32() -> None:
    from dnnpart.frontends.hf import parse_hf_spec

    with pytest.raises(FormatError, match="layers in all"):
        parse_hf_spec("hf:bart:encoder_layers=200,decoder_layers=200")
    with pytest.raises(FormatError, match="pad_token_id"):
        parse_hf_spec(f"hf:gpt2:pad_token_id={2**40}")
    assert parse_hf_spec("hf:gpt2:n_layer=2,pad_token_id=-1").overrides == {"n_layer": 2, "pad_token_id": -1}


def test_config_file_goes_through_the_bounded_reader(tmp_path: Path) -> None:
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    big = tmp_path / "big.json"
    big.write_text('{"n_layer": 2, "x": "' + "a" * MAX_CONFIG_BYTES + '"}')
    deep = tmp_path / "deep.json"
    deep.write_text('{"a": ' + "[" * 5000 + "]" * 5000 + "}")
    for path, words in (("/dev/zero", "not a regular file"), (fifo, "not a regular file"),
                        (big, "bytes"), (deep, "nested"), (tmp_path, "directory")):
        started = time.perf_counter()
        code, _, err = run_cli(["info", "hf:gpt2", "--config", str(path)])
        assert code == 2, err
        line = assert_one_error_line(code, err, must_name="--config")
        assert words in line
        assert time.perf_counter() - started < 5




def test_every_command_with_microbatches_refuses_zero_and_too_many(tmp_path: Path) -> None:
    """Driven by the parser: every command with ``--microbatches`` (``report --microbatches 0``
    used to fall back to the plan's value)."""
    plan = tmp_path / "plan.json"
    plan.write_text("{}")
    argv_of = {
        "report": ["report", str(plan), "-o", str(tmp_path / "r.html")],
        "simulate": ["simulate", str(plan)],
        "solve": ["solve", "zoo:bert-3", "--objective", "pipeline"],
        "evaluate": ["evaluate", "zoo:bert-3", str(plan), "--objective", "pipeline"],
        "info": ["info", "zoo:bert-3", "--objective", "pipeline"],
        "plan": ["plan", "zoo:bert-3", "--objective", "pipeline"],
        "run": ["run", str(plan)],
    }
    sub = next(a for a in build_parser()._actions if a.dest == "command")
    with_flag = {name for name, p in sub.choices.items()  # type: ignore[attr-defined]
                 if any("--microbatches" in a.option_strings for a in p._actions)}
    assert with_flag <= set(argv_of), f"add {sorted(with_flag - set(argv_of))} to this test"
    for name in sorted(with_flag):
        for value in (0, -1, MAX_MICROBATCHES + 1, 10**9):
            code, _, err = run_cli([*argv_of[name], "--microbatches", str(value)])
            assert code == 2, (name, value, err)
            assert_one_error_line(code, err, must_name="--microbatches")


def test_optcnn_tables_are_estimated_before_they_are_built() -> None:
    """Driven by the registry: every method of the iteration objective."""
    from dnnpart.solvers import available_methods

    methods = [m.name for m in available_methods() if "iteration" in m.objectives]
    assert methods
    for method in methods:
        started = time.perf_counter()
        code, _, err = run_cli(["solve", "builtin:alexnet", "--objective", "iteration",
                                "--cluster", "128xV100", "-m", method])
        assert code == 2, (method, err)
        line = assert_one_error_line(code, err, must_name="--cluster")
        assert "cost-table" in line
        assert time.perf_counter() - started < 10, method


def test_the_table_estimate_keeps_the_papers_settings() -> None:
    """Paper 3 ran up to 16 GPUs: its four models there stay below the bound."""
    from dnnpart.layerwise import models
    from dnnpart.layerwise.tables import table_peak_bytes
    from dnnpart.limits import MAX_TABLE_BYTES

    for name in ("alexnet", "vgg16", "inception_v3", "resnet50"):
        assert table_peak_bytes(getattr(models, name)(32 * 16), 16) <= MAX_TABLE_BYTES, name
    assert table_peak_bytes(models.alexnet(32 * 128), 128) > MAX_TABLE_BYTES


def test_the_tables_refuse_themselves_whoever_calls_them() -> None:
    """``build_tables`` checks its own estimate, so no caller (a method, the reproduction, the
    strategy tables) can build past it."""
    from dnnpart.errors import FormatError
    from dnnpart.layerwise import models
    from dnnpart.layerwise.hardware import P100, paper_bandwidth
    from dnnpart.layerwise.tables import build_tables

    started = time.perf_counter()
    with pytest.raises(FormatError, match="cost-table working memory"):
        build_tables(models.alexnet(32 * 128), 128, P100, paper_bandwidth(128))
    assert time.perf_counter() - started < 10  # refused before anything large is made


def test_example_inputs_are_checked_before_they_are_made() -> None:
    torch = pytest.importorskip("torch")
    from dnnpart.frontends.sources import example_inputs

    rng = random.Random(3005)
    for _ in range(30):
        dims = [rng.randint(1, 10**4) for _ in range(rng.randint(2, 5))]
        elements = 1
        for d in dims:
            elements *= d
        shape = tuple(dims)
        if elements * 4 > MAX_INPUT_BYTES:
            with pytest.raises(FormatError, match="--input-shape"):
                example_inputs([shape], "float32")
        if elements > MAX_META_INPUT_ELEMENTS:
            with pytest.raises(FormatError, match="elements"):
                example_inputs([shape], "float32", meta=True)
        else:
            made = example_inputs([shape], "float32", meta=True)[0]
            assert made.is_meta and tuple(made.shape) == shape and made.dtype == torch.float32
    check_input_bytes([(1, 3, 224, 224)] * 3, [4, 4, 8], meta=False)


def test_map_threads_are_bounded(tmp_path: Path) -> None:
    stages = tmp_path / "st.json"
    stages.write_text(json.dumps({"compute": [0.1, 0.2], "param_bytes": [0, 0],
                                  "comm_bytes": [[0, 1, 5.0]], "replicas": 1}))
    for value in (0, max_threads() + 1, 10**12):
        code, _, err = run_cli(["map", str(stages), "--cluster", "2xA100", "--threads", str(value)])
        assert code == 2
        assert_one_error_line(code, err, must_name="--threads")
    for value in (-1, -(2**63)):
        code, _, err = run_cli(["map", str(stages), "--cluster", "2xA100", "--seed", str(value)])
        assert code == 2, err
        assert_one_error_line(code, err, must_name="--seed")


def _limited() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (GB, GB))


#: The blow-ups of issue 30 (> 3 GB, hangs): refused under 1 GB of address space, in seconds.
BLOWUPS = [
    (["info", "zoo:synthetic:nodes=50000000"], "nodes"),
    (["info", "zoo:synthetic:nodes=100,edges=100000000"], "edges"),
    (["info", "hf:gpt2:n_layer=1000000000"], "n_layer"),
    (["solve", "builtin:alexnet", "--objective", "iteration", "--cluster", "128xV100", "-m", "optcnn"],
     "--cluster"),
    (["info", "hf:gpt2", "--config", "/dev/zero"], "--config"),
]


@pytest.mark.parametrize(("argv", "field"), BLOWUPS, ids=[a[1] for a in BLOWUPS])
def test_blowups_are_refused_within_1gb(argv: list[str], field: str) -> None:
    started = time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", "dnnpart", "-q", *argv], capture_output=True, text=True,
                          env={**os.environ, "PYTHONPATH": SRC}, preexec_fn=_limited, timeout=60)
    assert proc.returncode == 2, proc.stderr
    assert_one_error_line(proc.returncode, proc.stderr, must_name=field)
    assert time.perf_counter() - started < 30


@pytest.mark.slow
def test_a_huge_input_shape_is_refused_within_1gb() -> None:
    """Used to allocate 12 TB on the CPU before moving to the meta device."""
    proc = subprocess.run([sys.executable, "-m", "dnnpart", "-q", "info", "builtin:resnet50",
                           "--input-shape", "1000000,3,1000,1000"], capture_output=True, text=True,
                          env={**os.environ, "PYTHONPATH": SRC}, preexec_fn=_limited, timeout=120)
    assert proc.returncode == 2, proc.stderr
    assert_one_error_line(proc.returncode, proc.stderr, must_name="--input-shape")
