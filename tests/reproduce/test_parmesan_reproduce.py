"""``dnnpart reproduce parmesan --quick``: both tables' shapes, the paper's algorithm alone beside
ours.

"Ours" and "+ our map" are never below PipeDream + CS by construction (CS and PipeDream's
partition are among their candidates), and the Eq. 5 ratio of the paper's mapper is never
below 1.0 (CS is its search's starting point): nothing here asserts those. What is asserted can
fail: every cell has a plan for the paper's algorithm alone, and the paper's mapper alone beats
CS on the random topologies as the paper reports (Table 2: 1.1-33.5x there).
"""

from __future__ import annotations

import json
import math
import statistics
from pathlib import Path

from tests.cli.test_cli import run

from dnnpart.reproduce.parmesan import PAPER_TABLE2, T2_COLUMNS, table2_topology


def test_quick_reproduce_shows_the_paper_alone_beside_ours(capsys, tmp_path: Path):
    code, _out, err = run(capsys, "reproduce", "parmesan", "--quick", "--out", str(tmp_path),
                         "--time-limit", "1")
    assert code == 0, err
    doc = json.loads((tmp_path / "parmesan" / "parmesan.json").read_text())
    t1, t2 = doc["table1"], doc["table2"]
    assert {(r["S"], r["R"]) for r in t1} == {(4, 4), (8, 2), (16, 1)} and len(t1) == 6
    for r in t1:  # the paper's flow found a plan in every cell (it may lose to PipeDream + CS)
        assert math.isfinite(r["paper_only"]) and r["speedup_paper_only"] > 0
        assert r["paper_ours"] is not None
    assert {r["topology"] for r in t2} == set(PAPER_TABLE2) and len(t2) == 21
    for r in t2:
        assert r["speedup_paper_only"] is not None and math.isfinite(r["simulated_paper_only"])
    # the published direction on the random topologies, with room: the paper's mapper alone
    # beats CS by a median of 1.5x or more over their 9 cells (paper: 1.1-33.5x on each;
    # measured 0.99-4.2x, median 2.4x)
    alone = [r["speedup_paper_only"] for r in t2
             if r["topology"] in ("random_blk_1", "random_blk_2", "uniform_dist")]
    assert len(alone) == 9 and statistics.median(alone) >= 1.5, alone
    text = (tmp_path / "parmesan" / "table2.md").read_text()
    assert "paper's mapper alone" in text and "by construction" in text
    assert "by construction" in (tmp_path / "parmesan" / "table1.md").read_text()
    # issue 31: the mapping objective the methods finish with is the simulator's (rank
    # correlation 1 over the mappings tried; fails if the two drift apart) and never worse
    # than the paper's Eq. 5 optima and the heuristics it starts from
    for r in doc["mapping_agreement"]:
        assert r["rho_sim-swaps"] > 0.999, r
        named = [r[f"simulated_{k}"] for k in ("cs", "p2p-first", "eq5-p2p", "eq5-allreduce")]
        assert r["simulated_sim-swaps"] <= min(v for v in named if v is not None) * (1 + 1e-9)
    # with the real weights all-reduced, a mapping gain over CS appears on the slow
    # hierarchy (measured 1.22x on ResNet-50 (4,4) at 12.5 GB/s; the zoo's memory_bytes as
    # weights gave 1.00x everywhere)
    gains = [r["speedup_our_map"] for r in doc["mapping_ablation"] if r["weights"] == "weights"]
    assert max(gains) >= 1.1, gains


def test_table2_topologies_exist_where_the_paper_has_figures():
    for name, figures in PAPER_TABLE2.items():
        for (d, _s, _r), paper in zip(T2_COLUMNS, figures, strict=True):
            assert (table2_topology(name, d) is None) == (paper is None), (name, d)
