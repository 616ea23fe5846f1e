"""``dnnpart reproduce parmesan --quick``: both tables' shapes, never worse than CS."""

from __future__ import annotations

import json
from pathlib import Path

from tests.cli.test_cli import run

from dnnpart.reproduce.parmesan import PAPER_TABLE2, T2_COLUMNS, table2_topology


def test_quick_reproduce_writes_both_tables_and_never_loses_to_cs(capsys, tmp_path: Path):
    code, _out, err = run(capsys, "reproduce", "parmesan", "--quick", "--out", str(tmp_path),
                         "--time-limit", "1")
    assert code == 0, err
    doc = json.loads((tmp_path / "parmesan" / "parmesan.json").read_text())
    t1, t2 = doc["table1"], doc["table2"]
    assert {(r["S"], r["R"]) for r in t1} == {(4, 4), (8, 2), (16, 1)} and len(t1) == 6
    for r in t1:  # "+ our map" takes the better of our mapping and CS on the same partition
        assert r["speedup_our_map"] >= 1.0 - 1e-12
        # ours: PipeDream's partition and CS mapping are among parmesan's candidates
        assert r["speedup_ours"] >= 1.0 - 1e-12
        assert r["paper_ours"] is not None
    assert {r["topology"] for r in t2} == set(PAPER_TABLE2) and len(t2) == 21
    for r in t2:
        assert r["speedup"] >= 1.0 - 1e-12 and r["eq5_speedup"] >= 1.0 - 1e-9
    text = (tmp_path / "parmesan" / "table2.md").read_text()
    assert "uniform_dist median speedup" in text


def test_table2_topologies_exist_where_the_paper_has_figures():
    for name, figures in PAPER_TABLE2.items():
        for (d, _s, _r), paper in zip(T2_COLUMNS, figures, strict=True):
            assert (table2_topology(name, d) is None) == (paper is None), (name, d)
