"""Benchmark of Parmesan's phase 1 on Table 1's training graphs (two-level 4x4, 16 devices).

Run: ``PYTHONPATH=src python benchmarks/parmesan_phase1.py [--repeats 3] [--no-swin]``.
Writes ``bench-results/parmesan_phase1.md`` and prints it.

Per graph and ``(S, R)`` in {(4,4), (8,2), (16,1)}: the layer-level (PipeDream) partition's
Eq. 3 max stage time and time, then the op-level phase 1 as ``parmesan`` runs it (clustering
to ``k = 128`` respecting the layer partition, clustering harder until the lattice fits, DP,
refinement): its Eq. 3 after the DP and after refinement, hyper-ops, fronted subgraphs,
coarsening rounds, and the best-of-N wall time; plus the time of clustering alone (to
``k = 128``, without the layer partition). Graphs:
the zoo's ResNet-152 and BERT-Large (24 x 1024, 16 heads) training graphs and, with the
``hf`` extra, Swin-L's autograd training graph (micro-batch 8, as ``reproduce parmesan``).
"""

from __future__ import annotations

import argparse
import os
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

from dnnpart.cost import resolve_cluster
from dnnpart.graph.core import Graph
from dnnpart.problem import Problem
from dnnpart.reproduce.parmesan import MICRO_BATCH, PAIRS_T1, _objective, _swin_large
from dnnpart.solvers.parmesan.clustering import cluster_ops
from dnnpart.solvers.parmesan.opdag import atomic_dag
from dnnpart.solvers.parmesan.phase1 import partition_ops
from dnnpart.solvers.parmesan.solver import _layer_partition, memory_model
from dnnpart.zoo.bert import bert
from dnnpart.zoo.resnet import resnet

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "bench-results" / "parmesan_phase1.md"


def graphs(swin: bool) -> list[tuple[str, Graph]]:
    b = MICRO_BATCH
    out = [("ResNet-152", resnet(152, batch=b, training=True)),
           ("BERT-Large", bert(24, hidden=1024, heads=16, batch=b, training=True))]
    if swin:
        out.append(("Swin-L", _swin_large(b)))
    return out


def best_of(repeats: int, fn: Callable[[], Any]) -> tuple[float, Any]:
    best, value = float("inf"), None
    for _ in range(repeats):
        t0 = time.perf_counter()
        value = fn()
        best = min(best, time.perf_counter() - t0)
    return best, value


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--no-swin", action="store_true")
    args = ap.parse_args()
    cluster = resolve_cluster("two-level:nodes=4,gpus=4").cluster
    lines = [
        f"# Parmesan phase 1 (best of {args.repeats}; load {os.getloadavg()[0]:.1f} on "
        f"{os.cpu_count()} cores at start)", "",
        "| graph | atomic ops | (S,R) | layer DP Eq. 3 | layer DP s | op DP Eq. 3 | op refined "
        "Eq. 3 | hyper-ops | fronted subgraphs | coarsenings | op-level s | clustering s |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for name, g in graphs(not args.no_swin):
        problem = Problem(graph=g, cluster=cluster, objective=_objective(), name=name)
        mem = memory_model(problem, 2.0)
        dag, _ = atomic_dag(g)
        for s_n, r_n in PAIRS_T1:
            t_layer, layer = best_of(args.repeats, partial(
                _layer_partition, problem, s_n, 16, r_n, mem, 2_000_000))
            assert layer is not None
            t_op, op = best_of(args.repeats, partial(
                partition_ops, g, s_n, 16, replicas=r_n, k=128, memory=mem,
                respect=layer.stage_of))
            t_cl, _ = best_of(args.repeats, partial(cluster_ops, dag, 128, memory=mem,
                                                    n_stages=s_n))
            lines.append(
                f"| {name} | {dag.n} | ({s_n},{r_n}) | {layer.objective:.4f} | {t_layer:.2f} | "
                f"{op.dp_objective:.4f} | {op.objective:.4f} | {op.n_hyper_ops} | "
                f"{op.n_ideals} | {op.n_coarsenings} | {t_op:.2f} | {t_cl:.2f} |")
            print(lines[-1], flush=True)
    lines.append(f"\nLoad at the end: {os.getloadavg()[0]:.1f}.")
    OUT.parent.mkdir(exist_ok=True)
    OUT.write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
