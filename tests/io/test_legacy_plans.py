"""Plan files written before devices carried their spec still load and keep their meaning.

``tests/data/plan-v3-iteration-v100-objective-device.json`` was written by ``dnnpart solve
builtin:lenet5 --objective iteration --method optcnn --cluster 2xV100 -o ...`` before the
roofline moved from ``Objective.device`` onto the cluster's devices: its cluster has no device
specs and its ``objective_spec`` names ``device: V100-32GB``.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from dnnpart.cli.main import main
from dnnpart.io.plan_files import plan_cluster

OLD = Path(__file__).resolve().parents[1] / "data" / "plan-v3-iteration-v100-objective-device.json"


def test_the_old_file_has_no_specs_and_names_its_device() -> None:
    data = json.loads(OLD.read_text())
    assert data["objective_spec"]["device"] == "V100-32GB"
    assert all(d.spec is None for d in plan_cluster(str(OLD)).devices)  # type: ignore[union-attr]


def test_an_old_iteration_plan_scores_as_it_was_made(capsys: pytest.CaptureFixture[str]) -> None:
    recorded = json.loads(OLD.read_text())["objective"]
    assert main(["evaluate", "builtin:lenet5", str(OLD), "--objective", "iteration", "--json"]) == 0
    scored = json.loads(capsys.readouterr().out)["objective"]
    assert scored == pytest.approx(recorded, rel=1e-12)  # priced on its V100s, as it was planned
    assert main(["evaluate", "builtin:lenet5", str(OLD), "--objective", "iteration", "--cluster",
                 "2xP100", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["objective"] > scored  # a P100 is slower
