"""``dnnpart map`` and ``dnnpart solve --objective pipeline --method parmesan``."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from tests.cli.test_cli import _assert_bad_input, run

FIG2 = {"compute": [0, 0, 0, 0], "param_bytes": [0, 0, 0, 0],
        "comm_bytes": [[0, 1, 1], [1, 2, 3], [2, 3, 1]]}
HIER = "two-level:nodes=2,gpus=2,intra=100,inter=10"


def _file(tmp_path: Path, doc: object) -> str:
    path = tmp_path / "st.json"
    path.write_text(json.dumps(doc))
    return str(path)


def test_map_fig2(capsys, tmp_path):
    st = _file(tmp_path, FIG2)
    code, out, _ = run(capsys, "map", st, "--cluster", HIER, "--json", "--threads", "1")
    doc = json.loads(out)
    assert code == 0 and doc["status"] == "optimal"
    assert doc["objective"] == pytest.approx(0.13) and doc["baselines"]["cs"] == pytest.approx(0.31)
    # s1 and s2 share a node (g0 or g1)
    s1, s2 = doc["device_of"][0][1], doc["device_of"][0][2]
    assert s1[:2] == s2[:2]
    code, out, _ = run(capsys, "map", st, "--cluster", HIER, "--json", "--set", "mapping=cs")
    assert json.loads(out)["objective"] == pytest.approx(0.31)


@pytest.mark.parametrize(("doc", "argv", "fragment"), [
    ({**FIG2, "compute": [0, 0]}, [], "param_bytes: expected 2 numbers"),
    ({**FIG2, "replicas": 0}, [], "replicas: expected an integer >= 1"),
    ({**FIG2, "comm_bytes": [[0, 9, 1]]}, [], "comm_bytes[0]: stages must be"),
    ({**FIG2, "colour": 1}, [], "colour: unknown field"),
    ({**FIG2, "replicas": 2}, [], "needs S * R = 4 * 2 = 8 accelerators"),
    (FIG2, ["--set", "mapping=best"], "--set mapping"),
    (FIG2, ["--set", "eps=0"], "eps"),
    (FIG2, ["--time-limit", "0"], "--time-limit"),
])
def test_map_bad_input_names_the_field(capsys, tmp_path, doc, argv, fragment):
    st = _file(tmp_path, doc)
    _assert_bad_input(*run(capsys, "map", st, "--cluster", HIER, *argv), fragment)


def test_solve_pipeline_parmesan_writes_copies_and_rings(capsys, tmp_path):
    out_plan = tmp_path / "plan.json"
    code, out, err = run(capsys, "solve", "zoo:bert-3-training", "--objective", "pipeline",
                         "--method", "parmesan", "--cluster", "two-level:nodes=2,gpus=2",
                         "--set", "stages=2", "--set", "replicas=2", "--time-limit", "20",
                         "--json", "--out", str(out_plan))
    assert code == 0, err
    doc = json.loads(out)
    assert doc["objective"] == pytest.approx(doc["evaluation"]["objective"])
    assert doc["stages"] == 2 and doc["replicas"] == 2 and "eq5_max_stage_time" in doc
    plan = json.loads(out_plan.read_text())
    copies = [d.get("pipeline_copy") for d in plan["devices"] if d["kind"] == "accelerator"]
    assert sorted(copies) == [0, 0, 1, 1]
    code, out, _ = run(capsys, "evaluate", "zoo:bert-3-training", str(out_plan), "--objective",
                       "pipeline", "--json")
    assert code == 0 and json.loads(out)["objective"] == pytest.approx(doc["objective"])
