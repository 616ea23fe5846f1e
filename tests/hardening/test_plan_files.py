"""Class 5 of issue 13: plan files are data; names from files are printed escaped.

200 seeded plan files whose model spec would import a module are refused by ``export`` and
``run`` without importing it (a marker module records any import), unless the user names
the model (``--model``) or passes ``--trust-plan``. 200 seeded clusters with terminal control
characters in device names never reach the terminal raw.
"""

from __future__ import annotations

import random
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "fuzz"))
from clirun import assert_one_error_line, run_cli
from corpus import CONTROL, code_plan, control_names

from dnnpart.errors import FormatError
from dnnpart.limits import printable
from dnnpart.workflow.loading import plan_model_spec

MARKER_MODULE = "dnnpart_issue13_marker"


@pytest.fixture
def marker(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A module that writes a file when imported: proof that a plan ran code."""
    flag = tmp_path / "imported.flag"
    (tmp_path / f"{MARKER_MODULE}.py").write_text(
        f"open({str(flag)!r}, 'w').write('ran')\n"
        "def main():\n    raise SystemExit(0)\nbuild = x = main\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    sys.modules.pop(MARKER_MODULE, None)
    return flag


def test_seeded_plans_with_code_specs_are_refused(tmp_path: Path, marker: Path) -> None:
    rng = random.Random(1305)
    for i in range(200):
        case = code_plan(rng, tmp_path, i, MARKER_MODULE)
        code, _, err = run_cli(case.argv)
        assert code == 2, (case.argv, err)
        assert_one_error_line(code, err, must_name="--trust-plan")
        assert not marker.exists(), f"{case.argv} imported the plan's module"
    assert MARKER_MODULE not in sys.modules


def test_trust_and_model_override_are_the_only_ways_in() -> None:
    block = {"spec": "module:pkg.mod:build"}
    with pytest.raises(FormatError, match=r"model\.spec"):
        plan_model_spec(block, "p.json", model=None, trust=False)
    assert plan_model_spec(block, "p.json", model=None, trust=True) == "module:pkg.mod:build"
    assert plan_model_spec(block, "p.json", model="builtin:bert", trust=False) == "builtin:bert"
    for safe in ("builtin:resnet50", "torchvision:resnet18", "model.onnx", "hf:gpt2"):
        assert plan_model_spec({"spec": safe}, "p.json", model=None, trust=False) == safe


def test_seeded_control_characters_never_reach_the_terminal(tmp_path: Path) -> None:
    rng = random.Random(1306)
    for i in range(200):
        case, bad = control_names(rng, tmp_path, i)
        code, out, err = run_cli(case.argv)
        assert code in (0, 1), err
        for ch in CONTROL:
            assert ch not in out and ch not in err, (repr(ch), case.argv)
        assert printable(f"acc{bad}") in out


def test_printable_keeps_ordinary_text() -> None:
    assert printable("conv2d/ReLU_3 (GPU 0) µs") == "conv2d/ReLU_3 (GPU 0) µs"
    assert printable("a\x1b[31mb") == "a\\x1b[31mb"
