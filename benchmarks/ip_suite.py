"""Benchmark of the integer programs on paper 1's 14 reference workloads.

Run: ``.venv/bin/python benchmarks/ip_suite.py [--time-limit S] [--threads N] [--only NAME ...]
[--parts contiguous noncontig latency] [--backends cpsat highs portfolio] [--descent]
[--deterministic] [--out FILE]``.
Writes ``bench-results/ip_suite.md`` (or ``--out``) and prints it.

* contiguous: ``ip`` against the DP optimum (``dp``), per backend;
* noncontig: ``ip-noncontig`` against the paper's IPn column (Gurobi, 4 cores, 1% gap or
  20 min); use ``--time-limit 1200 --threads 2`` for the paper's budget; ``--descent`` keeps
  half of each CP-SAT limit for threshold descent;
* latency: ``ip`` on ``latency_scenario(graph)`` of the 8 inference graphs, CPUs free as in
  the paper (``contiguous_cpus=False``), warm-started from the best baseline, against the
  greedy baseline and the max-load DP split scored for latency.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
WORKLOADS = ROOT / ".." / "shared" / "workloads" / "dnn-partitioning" / "throughput"
OUT = ROOT / "bench-results" / "ip_suite.md"

# (folder, file stem, label, published DP, published IPn)
SUITE = [
    ("OperatorGraphs", "bert_l-3_inference", "op BERT-3 inference", 27.92, 21.91),
    ("OperatorGraphs", "bert_l-6_inference", "op BERT-6 inference", 29.58, 28.33),
    ("OperatorGraphs", "bert_l-12_inference", "op BERT-12 inference", 147.48, 130.03),
    ("OperatorGraphs", "resnet50_inference", "op ResNet50 inference", 124.35, 124.35),
    ("OperatorGraphs", "bert_l-3_training", "op BERT-3 training", 65.30, 54.21),
    ("OperatorGraphs", "resnet50_training", "op ResNet50 training", 255.19, 255.19),
    ("LayerGraphs", "bert24_inference", "layer BERT-24 inference", 17.79, 17.71),
    ("LayerGraphs", "resnet50_inference", "layer ResNet50 inference", 33.77, 33.31),
    ("LayerGraphs", "inceptionv3_inference", "layer InceptionV3 inference", 51.55, 51.52),
    ("LayerGraphs", "gnmt_inference", "layer GNMT inference", 32.91, 31.68),
    ("LayerGraphs", "bert24_training", "layer BERT-24 training", 41.75, 39.79),
    ("LayerGraphs", "resnet50_training", "layer ResNet50 training", 78.63, 76.65),
    ("LayerGraphs", "inceptionv3_training", "layer InceptionV3 training", 122.76, 117.72),
    ("LayerGraphs", "gnmt_training", "layer GNMT training", 107.00, 88.47),
]


def _fmt(x: Any, digits: int = 2) -> str:
    if x is None:
        return "-"
    if isinstance(x, float):
        return f"{x:.{digits}f}"
    return str(x)


def _ip_cells(r: Any) -> list[str]:
    gap = r.gap
    return [_fmt(r.objective), _fmt(r.bound), "-" if gap is None else f"{100 * gap:.2f}%",
            r.status.value, f"{r.wall_time_s:.1f}"]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--time-limit", type=float, default=60.0, help="seconds per IP solve")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--gap", type=float, default=0.01)
    ap.add_argument("--only", nargs="*", help="substrings of workload labels or file stems")
    ap.add_argument("--parts", nargs="*", default=["contiguous", "noncontig", "latency"])
    ap.add_argument("--out", type=Path, default=OUT, help=f"table file (default {OUT.relative_to(ROOT)})")
    ap.add_argument("--descent", action="store_true",
                    help="non-contiguous: keep half the time for threshold descent (cpsat)")
    ap.add_argument("--backends", nargs="*", default=["cpsat", "highs"])
    ap.add_argument("--deterministic", action="store_true",
                    help="CP-SAT deterministic time (results independent of machine load)")
    args = ap.parse_args(argv)
    if not WORKLOADS.exists():
        print(f"workloads not found at {WORKLOADS}", file=sys.stderr)
        return 1
    from dnnpart.evaluate import evaluate
    from dnnpart.io import read_problem
    from dnnpart.scenarios import latency_scenario
    from dnnpart.solvers import available_methods, solve

    suite = [s for s in SUITE if not args.only or any(o in s[2] or o in s[1] for o in args.only)]
    opts: dict[str, Any] = {"threads": args.threads, "gap": args.gap}
    if args.deterministic:
        opts["deterministic"] = True
    lines = [f"# IP suite (time limit {args.time_limit:g} s, {args.threads} threads, gap {args.gap:g}"
             f"{', descent' if args.descent else ''}{', deterministic' if args.deterministic else ''})", ""]

    def flush() -> None:
        args.out.parent.mkdir(exist_ok=True)
        args.out.write_text("\n".join(lines) + "\n")

    if "contiguous" in args.parts:
        lines += ["## Contiguous throughput IP (`ip`) vs DP optimum", "",
                  "| workload | DP | backend | IP TPS | bound | gap | status | s | IP/DP - 1 |",
                  "|---|---|---|---|---|---|---|---|---|"]
        for folder, stem, label, _, _ in suite:
            p = read_problem(WORKLOADS / folder / f"{stem}.json")
            dp = solve(p, "dp")
            for backend in args.backends:
                r = solve(p, "ip", time_limit=args.time_limit, backend=backend, **opts)
                rel = r.objective / dp.objective - 1
                lines.append(f"| {label} | {_fmt(dp.objective)} | {backend} | " + " | ".join(_ip_cells(r))
                             + f" | {100 * rel:+.3f}% |")
                print(lines[-1], flush=True)
                flush()
        lines.append("")
    if "noncontig" in args.parts:
        lines += ["## Non-contiguous throughput IP (`ip-noncontig`) vs paper IPn", "",
                  "| workload | paper IPn | backend | IP TPS | bound | gap | status | s | <= IPn+0.5% |",
                  "|---|---|---|---|---|---|---|---|---|"]
        for folder, stem, label, _, ipn in suite:
            p = read_problem(WORKLOADS / folder / f"{stem}.json")
            for backend in args.backends:
                extra: dict[str, Any] = {"descent": True} if args.descent and backend == "cpsat" else {}
                r = solve(p, "ip-noncontig", time_limit=args.time_limit, backend=backend, **opts, **extra)
                ok = "yes" if r.objective <= ipn * 1.005 else "no"
                cells = " | ".join(_ip_cells(r))
                lines.append(f"| {label} | {ipn:.2f} | {backend} | {cells} | {ok} |")
                print(lines[-1], flush=True)
                flush()
        lines.append("")
    if "latency" in args.parts:
        has_greedy = "greedy" in {m.name for m in available_methods()}
        lines += ["## Latency IP (`ip`, CPUs free) on the section-7 latency scenario", "",
                  "| workload | k acc | greedy | DP split | backend | IP latency | bound | gap "
                  "| status | s |",
                  "|---|---|---|---|---|---|---|---|---|---|"]
        for folder, stem, label, _, _ in suite:
            if "inference" not in stem:
                continue
            base = read_problem(WORKLOADS / folder / f"{stem}.json")
            p = latency_scenario(base.graph, name=label)
            greedy = solve(p, "greedy").objective if has_greedy else None
            from dnnpart.problem import Objective

            t0 = time.perf_counter()
            try:
                dp_plan = solve(p.with_objective(Objective()), "dp").plan
                dp_lat = evaluate(p, dp_plan).objective if dp_plan is not None else None
            except Exception:  # the DP may refuse (too many ideals): no baseline then
                dp_lat = None
            _ = time.perf_counter() - t0
            for backend in args.backends:
                r = solve(p, "ip", time_limit=args.time_limit, backend=backend,
                          contiguous_cpus=False, **opts)
                cells = " | ".join(_ip_cells(r))
                lines.append(f"| {label} | {len(p.cluster.accelerators)} | {_fmt(greedy)} | "
                             f"{_fmt(dp_lat)} | {backend} | {cells} |")
                print(lines[-1], flush=True)
                flush()
        lines.append("")
    flush()
    print(args.out.read_text())
    return 0


if __name__ == "__main__":
    sys.exit(main())
