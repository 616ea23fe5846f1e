"""Memory heuristic I under caps (issue 16, Memory).

For every graph and K, the step-1 PARDNN placement is emulated; every device's cap is set to
0.6x and 0.8x of the largest per-device peak. Heuristic I (``dnnpart.solvers.pardnn.overflow``,
driven by the op-level emulator of ``dnnpart.simulate``) runs under those caps; its success is
re-verified by an independent emulation. A memory-first oracle -- residual nodes packed
largest-first onto the device with least residual bytes, the other ops round-robin in
topological order, reference ops with their variable -- says whether a placement fitting the
caps is easy to find. Reports success where the oracle fits, moved nodes / |V| and makespan
after / before. Writes ``bench-results/pardnn_memory.md``.

Graphs: the ``--graphs`` given (anything ``dnnpart.workflow.load_problem`` reads, e.g. issue 14's
``zoo:word-rnn``), else seeded layered DAGs.

Run: ``PYTHONPATH=src python benchmarks/pardnn_memory.py [--graphs G ...] [--nodes 5000] [--time-limit 120]``
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path
from typing import Any

import numpy as np

from dnnpart.graph import RESIDUAL, Graph
from dnnpart.solvers.pardnn import Costs, pardnn
from dnnpart.solvers.pardnn.constraints import colocation_leaders, follow_variables, reference_variables
from dnnpart.solvers.pardnn.overflow import heuristic_one
from dnnpart.testing.layered import layered_graph


def oracle(graph: Graph, k: int) -> np.ndarray:
    """Residual-first bin packing: residuals largest first to the least residual-loaded device."""
    cls = graph.memory_classes()
    res = graph.node_param_bytes()
    device = np.arange(graph.n_nodes, dtype=np.int64) % k
    loads = np.zeros(k)
    for v in np.flatnonzero(cls == RESIDUAL)[np.argsort(-res[cls == RESIDUAL], kind="stable")]:
        d = int(np.argmin(loads))
        device[v] = d
        loads[d] += res[v]
    return follow_variables(device, reference_variables(graph))


def main() -> None:
    try:
        from dnnpart.cost.clusters import resolve_cluster
        from dnnpart.simulate import emulate_ops, tensor_bytes, transfer_bytes
    except ImportError as exc:
        raise SystemExit(f"error: this benchmark needs dnnpart.simulate ({exc})") from None
    ap = argparse.ArgumentParser()
    ap.add_argument("--graphs", nargs="*", default=[])
    ap.add_argument("--nodes", type=int, default=5_000)
    ap.add_argument("--widths", type=int, nargs="+", default=[4, 16, 64])
    ap.add_argument("--ks", type=int, nargs="+", default=[2, 4, 8, 16])
    ap.add_argument("--fractions", type=float, nargs="+", default=[0.6, 0.8])
    ap.add_argument("--time-limit", type=float, default=120.0)
    ap.add_argument("--out", default="bench-results/pardnn_memory.md")
    args = ap.parse_args()
    lines = [
        "| graph | K | cap / peak | oracle fits | H-I success | verified | moved / V "
        "| makespan after / before | H-I s |",
        "|---|---:|---:|---|---|---|---:|---:|---:|",
    ]
    rows: list[dict[str, Any]] = []
    if args.graphs:
        from dnnpart.workflow import load_problem

        graphs = [(name, load_problem(name, cluster=resolve_cluster("1xV100").cluster).graph)
                  for name in args.graphs]
    else:
        graphs = [(f"layered w={w}", layered_graph(args.nodes, w, seed=i))
                  for i, w in enumerate(args.widths)]
    for name, g in graphs:
        variable = colocation_leaders(g)
        for k in args.ks:
            cl = resolve_cluster(f"{k}xV100").cluster
            base = Costs.from_graph(g)
            comm = (cl.latency[0, 1] + transfer_bytes(g) / cl.bandwidth[0, 1]) / cl.time_unit_s
            costs = Costs(succ_ptr=base.succ_ptr, succ_idx=base.succ_idx, pred_ptr=base.pred_ptr,
                          pred_idx=base.pred_idx, pred_edge=base.pred_edge, comp=base.comp,
                          comm=np.asarray(comm, np.float64))
            step1 = pardnn(costs, k, variable=variable, memory_heuristic="none").device
            s0 = emulate_ops(g, cl, step1, curves=False)
            for frac in args.fractions:
                caps = np.full(k, frac * float(s0.peak_memory.max()))
                fits = bool(np.all(emulate_ops(g, cl, oracle(g, k), curves=False).peak_memory <= caps))
                t0 = time.perf_counter()
                r = heuristic_one(
                    costs, step1, mem=tensor_bytes(g), memory_class=g.memory_classes(), caps=caps,
                    emulate=lambda d, g=g, cl=cl: emulate_ops(g, cl, d), variable=variable,
                    time_limit=args.time_limit,
                )
                th = time.perf_counter() - t0
                s1 = emulate_ops(g, cl, r.device, curves=False)
                verified = bool(np.all(s1.peak_memory <= caps))
                row = {"success": r.success, "fits": fits, "verified": verified,
                       "moved": r.moved_nodes / g.n_nodes, "slow": s1.makespan / s0.makespan}
                rows.append(row)
                lines.append(f"| {name} | {k} | {frac} | {fits} | {r.success} | {verified} "
                             f"| {row['moved']:.3f} | {row['slow']:.3f} | {th:.1f} |")
                print(lines[-1], flush=True)
    fit = [r for r in rows if r["fits"]]
    ok = [r for r in rows if r["success"]]
    lines += ["", f"success where the oracle fits: {sum(r['success'] for r in fit)}/{len(fit)}; "
              f"success always verified: {all(r['verified'] for r in ok)}; "
              f"max moved / V among successes: {max((r['moved'] for r in ok), default=0):.3f}; "
              f"max makespan after / before among successes: {max((r['slow'] for r in ok), default=0):.3f}"]
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text("\n".join(lines) + "\n")
    print(lines[-1])


if __name__ == "__main__":
    main()
