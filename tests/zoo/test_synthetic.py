"""The torch-free synthetic generator: calibrated statistics, determinism, twin kernels."""

from __future__ import annotations

import numpy as np
import pytest

from dnnpart.errors import FormatError
from dnnpart.zoo.synthetic import (
    SEARCH_WINDOW,
    _wire,
    calibrations,
    graph_statistics,
    parse_synthetic,
    synthetic_graph,
)


@pytest.mark.parametrize("like", sorted(calibrations()))
@pytest.mark.parametrize("seed", [0, 7])
def test_statistics_at_calibration_size_within_10_percent(like: str, seed: int) -> None:
    reference = calibrations()[like]["stats"]
    n = int(reference["n_nodes"])
    got = graph_statistics(synthetic_graph(f"zoo:synthetic:nodes={n},seed={seed},like={like}"))
    for key, want in reference.items():
        if key in ("n_nodes", "n_edges"):
            continue
        assert got[key] == pytest.approx(want, rel=0.10, abs=1e-9), key


def test_same_spec_same_graph_other_seed_other_graph() -> None:
    a = synthetic_graph("zoo:synthetic:nodes=3000,seed=1,like=word-rnn")
    b = synthetic_graph("zoo:synthetic:nodes=3000,seed=1,like=word-rnn")
    c = synthetic_graph("zoo:synthetic:nodes=3000,seed=2,like=word-rnn")
    assert a.succ_idx.tolist() == b.succ_idx.tolist()
    assert a.compute_time.tolist() == b.compute_time.tolist()
    assert a.succ_idx.tolist() != c.succ_idx.tolist()


def test_edges_parameter_gives_exactly_that_many_edges() -> None:
    g = synthetic_graph("zoo:synthetic:nodes=5000,edges=25000,seed=3,like=char-crn")
    assert (g.n_nodes, g.n_edges) == (5000, 25000)
    assert np.all(g.edge_sources() < g.succ_idx)


def test_wiring_kernel_compiles_like_its_source() -> None:
    """A compilation check against the kernel's own source (``.py_func``), and the wiring's
    properties: edges point forward, no target reads a source twice."""
    rng = np.random.default_rng(5)
    n = 300
    indeg = rng.integers(0, 4, n)
    indeg[0] = 0
    outcap = rng.integers(0, 4, n)
    cdf = np.cumsum([5.0, 3.0, 2.0, 1.0])
    cdf /= cdf[-1]
    uniforms = rng.random(2 * int(indeg.sum()))
    fast = _wire(indeg, outcap.copy(), cdf, uniforms, SEARCH_WINDOW)
    slow = _wire.py_func(indeg, outcap.copy(), cdf, uniforms, SEARCH_WINDOW)
    m = fast[2]
    assert m == slow[2]
    assert fast[0][:m].tolist() == slow[0][:m].tolist()
    assert fast[1][:m].tolist() == slow[1][:m].tolist()
    # every edge points forward and no target reads one source twice
    assert np.all(fast[0][:m] < fast[1][:m])
    pairs = set(zip(fast[0][:m].tolist(), fast[1][:m].tolist(), strict=True))
    assert len(pairs) == m


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("zoo:synthetic:seed=1", "nodes: missing"),
        ("zoo:synthetic:nodes=1", "nodes: expected an integer in 2"),
        ("zoo:synthetic:nodes=ten", "nodes: expected an integer, got 'ten'"),
        ("zoo:synthetic:nodes=10,like=alexnet", "like: expected one of"),
        ("zoo:synthetic:nodes=10,colour=red", "expected nodes=N"),
        ("zoo:synthetic:nodes=10,edges=0", "edges: expected an integer"),
    ],
)
def test_bad_generator_parameters_are_named(spec: str, message: str) -> None:
    with pytest.raises(FormatError, match=message):
        parse_synthetic(spec)


def test_cli_info_reads_a_synthetic_spec(capsys: pytest.CaptureFixture[str]) -> None:
    from dnnpart.cli.main import main

    assert main(["info", "zoo:synthetic:nodes=500,seed=1,like=wide-resnet"]) == 0
    assert "500" in capsys.readouterr().out
    assert main(["info", "zoo:synthetic:nodes=-5"]) == 2
