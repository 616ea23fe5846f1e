"""Class 2 of issue 13: every size the user controls is checked before allocation.

200 seeded inputs (device counts past the cap in every cluster source, zip-bomb ``.npz``
members, DP lattices past ``max_memory_bytes``) end in one line; a hypothesis property
checks that the DP's memory estimate holds: a lattice is either refused or fits the budget.
"""

from __future__ import annotations

import random
import sys
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "fuzz"))
from clirun import assert_one_error_line, run_cli
from corpus import sizes

from dnnpart.errors import FormatError, ProblemTooLargeError
from dnnpart.graph.builder import GraphBuilder
from dnnpart.graph.stage_graph import build_stage_graph
from dnnpart.limits import MAX_DEVICES, read_bounded
from dnnpart.solvers.dp import enumerate_stage_ideals
from dnnpart.solvers.dp.ideals import lattice_budget
from dnnpart.testing import strategies as dst


def test_seeded_sizes_are_refused_in_one_line(tmp_path: Path) -> None:
    rng = random.Random(1302)
    labels = set()
    for i in range(200):
        case = sizes(rng, tmp_path, i)
        code, _, err = run_cli(case.argv)
        assert code == case.code, f"{case.label} {case.argv}: exit {code}\n{err}"
        assert_one_error_line(code, err, must_name=case.must_name)
        labels.add(case.label)
    assert len(labels) == 4


def test_the_device_cap_is_where_the_docs_say(tmp_path: Path) -> None:
    from dnnpart.devices.presets import reference_cluster
    from dnnpart.limits import check_device_count

    assert check_device_count(MAX_DEVICES, "devices") == MAX_DEVICES
    with pytest.raises(FormatError, match="describe a smaller cluster"):
        reference_cluster(n_accelerators=MAX_DEVICES, n_cpus=1, memory_bytes=1.0)


@settings(max_examples=60)
@given(graph=dst.graphs(max_nodes=12), budget=st.integers(min_value=1, max_value=200_000))
def test_lattice_is_refused_or_fits_its_memory_budget(graph: object, budget: int) -> None:
    stage = build_stage_graph(graph)  # type: ignore[arg-type]
    try:
        lattice = enumerate_stage_ideals(stage, max_ideals=10**9, max_memory_bytes=budget,
                                         bytes_per_ideal=16)
    except ProblemTooLargeError as exc:
        assert "max_memory_bytes" in str(exc)
        return
    by_ideal, by_edge = lattice_budget(stage.n_stage_nodes, budget, 16)
    assert lattice.n_ideals <= by_ideal
    assert lattice.n_cover_pairs <= by_edge


def test_isolated_nodes_are_refused_before_gigabytes() -> None:
    b = GraphBuilder()
    for v in range(2000):  # 2**2000 ideals: used to pass 4 GB without refusing
        b.add_node(v, acc_time=1.0, cpu_time=1.0)
    with pytest.raises(ProblemTooLargeError, match="max_memory_bytes"):
        enumerate_stage_ideals(build_stage_graph(b.build()))


@pytest.mark.parametrize("path", ["/dev/zero", "/dev/urandom"])
def test_devices_are_not_read(path: str) -> None:
    if not Path(path).exists():
        pytest.skip(f"{path} missing")
    with pytest.raises(FormatError, match="not a regular file"):
        read_bounded(path)


def test_fifo_is_not_waited_on(tmp_path: Path) -> None:
    import os

    fifo = tmp_path / "pipe.json"
    os.mkfifo(fifo)
    code, _, err = run_cli(["info", str(fifo)])
    assert code == 2
    assert_one_error_line(code, err, must_name="not a regular file")


def test_file_size_cap(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from dnnpart import limits

    p = tmp_path / "g.json"
    p.write_bytes(b" " * 5000)
    monkeypatch.setattr(limits, "MAX_FILE_BYTES", 4096)
    with pytest.raises(FormatError, match="5,000 bytes, more than the 4,096 dnnpart reads"):
        limits.read_bounded(p, limit=limits.MAX_FILE_BYTES)
    assert np.isfinite(limits.MAX_NPZ_MEMBER_BYTES)
