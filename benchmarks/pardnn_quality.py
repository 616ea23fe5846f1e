"""PARDNN vs paper 2's baselines: emulated makespan, no memory caps (issue 16, Quality).

For every graph and K in {2, 4, 8, 16} (``KxV100`` clusters), the op-level emulator of
``dnnpart.simulate`` scores PARDNN (step 1 only), the CP heuristic, linear clustering + GLB
(EST-first, ``--lc-budget`` seconds) and round-robin, beside the lower bound. Graphs: the
``--graphs`` given (anything ``dnnpart.workflow.load_problem`` reads, e.g. the captured training
graphs of the real-models issue), else seeded layered random DAGs of several widths standing
in for them. Writes ``bench-results/pardnn_quality.md``. "PARDNN" is the paper's step 1 alone;
"guarded" is what ``--method pardnn`` returns with its defaults (``cp_guard=true
lc_slicing=true glb_mapping=true refine_evals=auto``: the best emulated of step 1, LFLAM on
the linear-clustering slicing, GLB on Alg. 1's slicing and the CP heuristic, refined along
its critical chain; ``dnnpart.solvers.pardnn.portfolio``), without memory caps; "guarded
s" its time.

Needs ``dnnpart.simulate`` (the topologies/simulators issue).

Run: ``PYTHONPATH=src python benchmarks/pardnn_quality.py [--graphs G ...] [--nodes 10000]``
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import numpy as np

from dnnpart.graph import Graph
from dnnpart.solvers.pardnn import Costs, pardnn
from dnnpart.solvers.pardnn.baselines.cp_heuristic import cp_heuristic
from dnnpart.solvers.pardnn.baselines.linear_clustering import linear_clustering
from dnnpart.solvers.pardnn.baselines.round_robin import round_robin
from dnnpart.solvers.pardnn.bound import makespan_lower_bound
from dnnpart.solvers.pardnn.portfolio import step_one_portfolio
from dnnpart.testing.layered import layered_graph

#: LC+GLB within this relative distance of the lower bound counts as "at the bound".
AT_BOUND = 1e-4


def main() -> None:
    try:
        from dnnpart.cost.clusters import resolve_cluster
        from dnnpart.simulate import emulate_makespan, transfer_bytes
    except ImportError as exc:  # the emulator is not on this branch yet
        raise SystemExit(f"error: this benchmark needs dnnpart.simulate ({exc})") from None
    ap = argparse.ArgumentParser()
    ap.add_argument("--graphs", nargs="*", default=[])
    ap.add_argument("--nodes", type=int, default=10_000)
    ap.add_argument("--widths", type=int, nargs="+", default=[4, 8, 16, 32, 64])
    ap.add_argument("--ks", type=int, nargs="+", default=[2, 4, 8, 16])
    ap.add_argument("--lc-budget", type=float, default=600.0)
    ap.add_argument("--out", default="bench-results/pardnn_quality.md")
    args = ap.parse_args()
    graphs: list[tuple[str, Graph]] = []
    if args.graphs:
        from dnnpart.workflow import load_problem

        graphs = [(g, load_problem(g, cluster=resolve_cluster("1xV100").cluster).graph)
                  for g in args.graphs]
    else:
        graphs = [(f"layered n={args.nodes} w={w}", layered_graph(args.nodes, w, seed=i))
                  for i, w in enumerate(args.widths)]
    lines = [
        "| graph | K | CCR | bound | PARDNN | CP | LC+GLB | LC done | RR | PARDNN/CP | PARDNN/LC "
        "| guarded/CP | guarded/LC | PARDNN s | guarded s |",
        "|---|---:|---:|---:|---:|---:|---:|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    cells = []
    for name, g in graphs:
        for k in args.ks:
            cl = resolve_cluster(f"{k}xV100").cluster
            comm = (cl.latency[0, 1] + transfer_bytes(g) / cl.bandwidth[0, 1]) / cl.time_unit_s
            base = Costs.from_graph(g)
            costs = Costs(succ_ptr=base.succ_ptr, succ_idx=base.succ_idx, pred_ptr=base.pred_ptr,
                          pred_idx=base.pred_idx, pred_edge=base.pred_edge, comp=base.comp,
                          comm=np.asarray(comm, np.float64))
            t0 = time.perf_counter()
            p = emulate_makespan(g, cl, pardnn(costs, k, memory_heuristic="none").device)[0]
            tp = time.perf_counter() - t0
            cp = emulate_makespan(g, cl, cp_heuristic(costs, k))[0]
            lc_dev, done = linear_clustering(costs, k, time_limit=args.lc_budget)
            lc = emulate_makespan(g, cl, lc_dev)[0]
            rr = emulate_makespan(g, cl, round_robin(costs, k))[0]
            lb = makespan_lower_bound(costs, k)
            ccr = float(comm.sum() / max(costs.comp.sum(), 1e-300))
            t0 = time.perf_counter()
            free = np.full(g.n_nodes, -1, np.int64)
            step1 = pardnn(costs, k, memory_heuristic="none")
            gd, _ = step_one_portfolio(g, cl, costs, k, np.arange(k), step1.device, free, free,
                                       slicing=step1.slicing)
            gp = emulate_makespan(g, cl, gd)[0]
            tg = time.perf_counter() - t0
            cells.append((p / cp, p / lc, gp / cp, gp / lc, done, lc <= lb * (1 + AT_BOUND)))
            lines.append(
                f"| {name} | {k} | {ccr:.2f} | {lb:.1f} | {p:.1f} | {cp:.1f} | {lc:.1f} | {done} "
                f"| {rr:.1f} | {p / cp:.3f} | {p / lc:.3f} | {gp / cp:.3f} | {gp / lc:.5f} | {tp:.2f} "
                f"| {tg:.2f} |"
            )
            print(lines[-1], flush=True)
    r = np.array([c[:4] for c in cells])
    done = np.array([c[4] for c in cells], dtype=bool)
    at_bound = np.array([c[5] for c in cells], dtype=bool)
    for label, col in (("PARDNN (step 1)", 0), ("guarded", 2)):
        lines += ["", f"{label} <= CP in {int((r[:, col] <= 1).sum())}/{len(r)} cells "
                  f"(worst {r[:, col].max():.3f}x); <= 1.02 x LC in "
                  f"{int((r[done, col + 1] <= 1.02).sum())}/{int(done.sum())} finished-LC cells, "
                  f"strictly lower in {int((r[done, col + 1] < 1).sum())} "
                  f"({int((done & at_bound).sum())} of those cells have LC+GLB within "
                  f"{AT_BOUND:.0e} of the lower bound, where nothing can be much lower)."]
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text("\n".join(lines) + "\n")
    print("\n".join(lines[-3:]))


if __name__ == "__main__":
    main()
