"""``--input NAME=SHAPE[:DTYPE]``: every bad value ends in one ``error:`` line naming ``--input``.

Seeded cases over the commands that take model options (``import``, ``plan``, ``info``,
``solve``): malformed text (no name, no ``=``, empty or non-positive shapes, an unknown dtype),
a name the model does not take, a name given twice, ``--input`` beside ``--input-shape`` /
``--input-dtype``, and ``--input`` on a graph that is not a model. Each exits 2.
"""

from __future__ import annotations

import random
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "fuzz"))
from clirun import assert_one_error_line, run_cli

pytest.importorskip("torch")
pytest.importorskip("transformers")

GPT2 = "hf:gpt2:n_layer=1,n_embd=16,n_head=2,vocab_size=97"
MALFORMED = ["input_ids", "=1x8", "1x8:int64", "input_ids=", "input_ids=1x0", "input_ids=1x-2",
             "input_ids=axb", "input_ids=1x8:float16", "input_ids=1x8:", "input ids=1x8", "9x=1x8",
             "input_ids=1x8:int64:int64", "input_ids=()"]


def _case(rng: random.Random, tmp_path: Path, i: int) -> tuple[list[str], str]:
    command = rng.choice((["import", GPT2, "-o", str(tmp_path / f"g{i}.json")],
                          ["plan", GPT2, "-m", "greedy"], ["info", GPT2], ["solve", GPT2, "-m", "greedy"]))
    kind = rng.randrange(5)
    if kind == 0:
        return [*command, "--input", rng.choice(MALFORMED)], "--input"
    if kind == 1:
        return [*command, "--input", f"{rng.choice(('nosuch', 'pixel_values', 'labels'))}=1x8"], "--input"
    if kind == 2:
        return [*command, "--input", "input_ids=1x8", "--input", "input_ids=1x4"], "--input input_ids"
    if kind == 3:
        extra = rng.choice((["--input-shape", "1,8"], ["--input-dtype", "int64"]))
        return [*command, "--input", "input_ids=1x8", *extra], "--input"
    return ["info", "zoo:bert-3", "--input", "input_ids=1x8"], "--input"


def test_seeded_bad_inputs_end_in_one_line(tmp_path: Path) -> None:
    rng = random.Random(2801)
    kinds = set()
    for i in range(30):
        argv, name = _case(rng, tmp_path, i)
        code, _, err = run_cli(argv)
        assert code == 2, (argv, err)
        assert_one_error_line(code, err, must_name=name)
        kinds.add(argv[argv.index("--input") + 1].partition("=")[0])
    assert len(kinds) >= 5, kinds

