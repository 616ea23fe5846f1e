"""Benchmark of the hierarchy DP (paper 1, appendix C.3) on paper 1's layer graphs.

Run: ``.venv/bin/python benchmarks/hierarchy_dp.py [--plain] [--only NAME ...]``. Solves each layer
graph of :data:`WORKLOADS` with ``dp`` on a two-level cluster of 2 groups x 2 accelerators plus
one CPU (inter links 4x slower than intra), in a fresh process, and reports the solve time
(compile/cache load of the kernels excluded, measured apart). ``--plain`` times the plain-Python
twin instead (slow: minutes).
Writes ``bench-results/hierarchy_dp.md``.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
LAYERS = ROOT / ".." / "shared" / "workloads" / "dnn-partitioning" / "throughput" / "LayerGraphs"
WORKLOADS = ("resnet50_inference", "resnet50_training", "bert24_inference", "bert24_training")


def run_one(name: str, plain: bool) -> dict[str, object]:
    """Solve one layer graph on 2x2 accelerators + a CPU (in this process)."""
    import dataclasses

    from dnnpart.devices import two_level_cluster
    from dnnpart.io.dnn_partitioning import read_problem
    from dnnpart.problem import Problem
    from dnnpart.solvers import solve
    from dnnpart.testing import chain_graph

    base = read_problem(LAYERS / f"{name}.json")
    cluster = two_level_cluster(n_groups=2, accelerators_per_group=2, memory_bytes=float(
        base.cluster.devices[base.cluster.accelerators[0]].memory_bytes), intra_bandwidth=100e9,
        inter_bandwidth=25e9, n_cpus=1)
    problem = Problem(graph=base.graph, cluster=cluster)
    import dnnpart.solvers.dp.hierarchy_solve as dp

    if plain:  # today's plain-Python twin in place of the kernel
        setattr(dp, "run_hierarchy_dp", _plain)  # noqa: B010  (not an exported name)
    t0 = time.perf_counter()
    warm = solve(dataclasses.replace(problem, graph=chain_graph(3, acc_time=1.0, cost=1.0)),
                 "dp", max_hierarchy_ideals=10**9)
    warm_s = time.perf_counter() - t0
    del warm
    t0 = time.perf_counter()
    r = solve(problem, "dp", max_hierarchy_ideals=10**9)
    return {"name": name, "objective": r.objective, "status": r.status.value,
            "ideals": r.stats.get("n_ideals"), "slices": r.stats.get("slices_priced"),
            "seconds": time.perf_counter() - t0, "warm_s": warm_s}


def _plain(*args: Any, jit: bool = True, **kw: Any) -> Any:
    from dnnpart.solvers.dp.hierarchy import run_hierarchy_dp_plain

    return run_hierarchy_dp_plain(*args, **kw)


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--plain", action="store_true")
    parser.add_argument("--child", default=None)
    parser.add_argument("--only", nargs="*", default=None)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(run_one(args.child, args.plain)))
        return 0
    if not LAYERS.exists():
        print(f"skipped: workloads not found at {LAYERS}")
        return 0
    rows = []
    for name in args.only or WORKLOADS:
        cmd = [sys.executable, __file__, "--child", name] + (["--plain"] if args.plain else [])
        proc = subprocess.run(cmd, capture_output=True, text=True, check=True)
        r = json.loads(proc.stdout.strip().splitlines()[-1])
        print(r, flush=True)
        rows.append(f"| {r['name']} | {r['ideals']:,} | {r['objective']:.4f} | {r['status']} "
                    f"| {r['slices']:,} | {r['seconds']:.2f} | {r['warm_s']:.2f} |")
    out = ROOT / "bench-results" / ("hierarchy_dp_plain.md" if args.plain else "hierarchy_dp.md")
    out.parent.mkdir(exist_ok=True)
    out.write_text("# Hierarchy DP, layer graphs on two-level 2x2 + 1 CPU (inter 4x slower)\n\n"
                   "| workload | ideals | objective | status | slices priced | solve s "
                   "| kernel load s |\n|---|---|---|---|---|---|---|\n" + "\n".join(rows) + "\n")
    print(out.read_text())
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
