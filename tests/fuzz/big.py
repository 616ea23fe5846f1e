"""Inputs large enough that methods need their time limit (issue 13's time and Ctrl-C tests)."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from dnnpart.devices.presets import reference_cluster
from dnnpart.graph.builder import GraphBuilder
from dnnpart.problem import Problem


def wide_dag(n: int, *, seed: int = 0, width: int = 8, n_accelerators: int = 4) -> Problem:
    """A layered random DAG of ``n`` nodes, ``width`` per layer, edges to the next layer."""
    rng = np.random.default_rng(seed)
    b = GraphBuilder()
    for v in range(n):
        b.add_node(v, acc_time=float(rng.integers(1, 10)), cpu_time=float(rng.integers(5, 50)),
                   memory_bytes=float(rng.integers(1, 10)))
    for v in range(width, n):
        layer_start = (v // width - 1) * width
        for u in {layer_start + int(rng.integers(0, width)), layer_start + v % width}:
            b.add_edge(u, v, cost=float(rng.integers(0, 4)))
    cluster = reference_cluster(n_accelerators=n_accelerators, n_cpus=1, memory_bytes=float(n) * 2)
    return Problem(graph=b.build(), cluster=cluster, name=f"wide{n}")


def write_reference(problem: Problem, path: Path) -> Path:
    """``problem`` as a dnn-partitioning JSON file (for CLI runs)."""
    from dnnpart.io.dnn_partitioning import write_problem

    write_problem(problem, path)
    return path
