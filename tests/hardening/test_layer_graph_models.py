"""Real models under ``--objective iteration`` (issue 17): what cannot be a layer graph ends in one line.

Seeded cases: modules with kinds the layer graph does not model (grouped, dilated, 1-D
convolutions, gating products, attention, transposes, ceil-mode or uneven adaptive pooling),
factories that fail or return no module, wrong input shapes, and model options that do not
apply. Each exits 2 with one ``error:`` line naming the module (or the flag) at fault.
"""

from __future__ import annotations

import random
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "fuzz"))
from clirun import assert_one_error_line, run_cli

pytest.importorskip("torch")

FACTORIES = '''
import torch
from torch import nn

class Gate(nn.Module):
    def __init__(self, c):
        super().__init__(); self.conv = nn.Conv2d(c, c, 1)
    def forward(self, x):
        return x * torch.sigmoid(self.conv(x))

class Attend(nn.Module):
    def __init__(self, c):
        super().__init__(); self.q = nn.Conv2d(c, c, 1); self.k = nn.Conv2d(c, c, 1)
    def forward(self, x):
        n, c, h, w = x.shape
        q, k = self.q(x).flatten(2), self.k(x).flatten(2)
        return torch.bmm(q.transpose(1, 2), k).unsqueeze(1)

class Transposed(nn.Module):
    def __init__(self, c):
        super().__init__(); self.conv = nn.Conv2d(c, c, 3, padding=1)
    def forward(self, x):
        return self.conv(x).transpose(2, 3)

def make(kind, c):
    stem = nn.Conv2d(c, 4, 3, padding=1)
    body = {
        "grouped": lambda: nn.Conv2d(4, 4, 3, groups=2),
        "depthwise": lambda: nn.Conv2d(4, 4, 3, groups=4),
        "dilated": lambda: nn.Conv2d(4, 4, 3, dilation=2),
        "gate": lambda: Gate(4),
        "attend": lambda: Attend(4),
        "transposed": lambda: Transposed(4),
        "ceil": lambda: nn.MaxPool2d(2, 2, ceil_mode=True),
        "uneven": lambda: nn.AdaptiveAvgPool2d(4),
        "convtranspose": lambda: nn.ConvTranspose2d(4, 4, 2, stride=2),
    }[kind]()
    return nn.Sequential(stem, body)
'''

KINDS = {  # kind -> what the error line names
    "grouped": "1 (Conv2d)", "depthwise": "1 (Conv2d)", "dilated": "1 (Conv2d)", "gate": "1 (Gate)",
    "attend": "1 (Attend)", "transposed": "1 (Transposed)", "ceil": "1 (MaxPool2d)",
    "uneven": "1 (AdaptiveAvgPool2d)", "convtranspose": "1 (ConvTranspose2d)",
}
OTHER = {  # extra argv -> what the error line names (on a good model)
    ("--training",): "--training", ("--precision", "fp16"): "--precision",
    ("--optimizer", "sgd"): "--optimizer", ("--input-shape", "1,3,9"): "shape",
}


def test_seeded_unsupported_models_end_in_one_line(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    rng = random.Random(1701)
    lines = [FACTORIES]
    cases: list[tuple[list[str], str]] = []
    drawn: set[str] = set()
    for i in range(18):
        kind, c, size = rng.choice(sorted(KINDS)), rng.randint(1, 4), rng.choice((7, 9, 11))
        drawn.add(kind)
        lines.append(f"def m{i}():\n    return make({kind!r}, {c})\n")
        cases.append(([f"module:issue17_bad:m{i}", "--input-shape", f"2,{c},{size},{size}"], KINDS[kind]))
    lines.append("def boom():\n    raise RuntimeError('no weights')\n")
    lines.append("def nothing():\n    return 3\n")
    lines.append("def good():\n"
                 "    return nn.Sequential(nn.Conv2d(3, 4, 3), nn.Flatten(), nn.Linear(4 * 7 * 7, 2))\n")
    cases += [(["module:issue17_bad:boom", "--input-shape", "1,3,9,9"], "RuntimeError"),
              (["module:issue17_bad:nothing", "--input-shape", "1,3,9,9"], "torch.nn.Module")]
    for extra, name in OTHER.items():
        argv = ["module:issue17_bad:good", *extra]
        if "--input-shape" not in extra:
            argv += ["--input-shape", "1,3,9,9"]
        cases.append((argv, name))
    assert len(drawn) >= 7, drawn  # the seed draws most kinds
    (tmp_path / "issue17_bad.py").write_text("\n".join(lines))
    monkeypatch.syspath_prepend(str(tmp_path))
    for argv, name in cases:
        code, _, err = run_cli(["solve", argv[0], *argv[1:], "--objective", "iteration", "--method",
                                rng.choice(("optcnn", "owt", "data-parallel")), "--cluster", "2xP100"])
        assert code == 2, (argv, err)
        assert_one_error_line(code, err, must_name=name)
    code, _, err = run_cli(["solve", "module:issue17_bad:good", "--input-shape", "1,3,9,9", "--objective",
                            "iteration", "--method", "optcnn", "--cluster", "2xP100"])
    assert code == 0, err
