"""Benchmark of the throughput DP and DPL on paper 1's 14 reference workloads.

Run: ``.venv/bin/python benchmarks/dp_suite.py [--only NAME ...]``. Each workload runs in its
own subprocess so that its peak memory (RSS) is its own; in each, a warm-up solve of a tiny
graph first loads/compiles the numba kernels, and that time is reported apart. Writes a
Markdown table to ``bench-results/dp_suite.md`` and prints it.

The authors' single-threaded C++ DP (paper 1) is quoted for comparison.

``--before DIR`` (another checkout's ``src``) writes ``bench-results/dp_suite_before_after.md``
instead: each workload solved by both sources in alternation, ``--repeat`` times each, best
DP seconds of each, the speed-up, slices priced and whether the optima agree.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
WORKLOADS = ROOT / ".." / "shared" / "workloads" / "dnn-partitioning" / "throughput"
OUT = ROOT / "bench-results" / "dp_suite.md"

# (folder, file stem, label, published DP, published DPL, C++ DP seconds or None)
SUITE = [
    ("OperatorGraphs", "bert_l-3_inference", "op BERT-3 inference", 27.92, 27.92, 1.5),
    ("OperatorGraphs", "bert_l-6_inference", "op BERT-6 inference", 29.58, 29.58, 5.5),
    ("OperatorGraphs", "bert_l-12_inference", "op BERT-12 inference", 147.48, 147.48, 27.0),
    ("OperatorGraphs", "resnet50_inference", "op ResNet50 inference", 124.35, 124.35, None),
    ("OperatorGraphs", "bert_l-3_training", "op BERT-3 training", 65.30, 65.30, 9.5),
    ("OperatorGraphs", "resnet50_training", "op ResNet50 training", 255.19, 255.19, 2.0),
    ("LayerGraphs", "bert24_inference", "layer BERT-24 inference", 17.79, 17.79, None),
    ("LayerGraphs", "resnet50_inference", "layer ResNet50 inference", 33.77, 33.77, None),
    ("LayerGraphs", "inceptionv3_inference", "layer InceptionV3 inference", 51.55, 51.55, 44 * 60.0),
    ("LayerGraphs", "gnmt_inference", "layer GNMT inference", 32.91, 32.91, 24.0),
    ("LayerGraphs", "bert24_training", "layer BERT-24 training", 41.75, 41.75, None),
    ("LayerGraphs", "resnet50_training", "layer ResNet50 training", 78.63, 78.65, None),
    ("LayerGraphs", "inceptionv3_training", "layer InceptionV3 training", 122.76, 123.93, 75 * 60.0),
    ("LayerGraphs", "gnmt_training", "layer GNMT training", 107.00, 107.00, 44.0),
]


def run_one(path: str) -> dict[str, object]:
    """Solve one workload with dp and dpl (in this process); return the figures."""
    t0 = time.perf_counter()
    from dnnpart.evaluate import evaluate
    from dnnpart.io import read_problem
    from dnnpart.solvers import solve
    from dnnpart.testing import chain_problem

    import_s = time.perf_counter() - t0
    # the warm-up must load the compiled kernels: no plain-Python paths for small inputs
    import dnnpart.graph.kernels as graph_kernels
    import dnnpart.solvers.dp.ideals as ideals
    import dnnpart.solvers.dp.kernels as dp_kernels
    from dnnpart._jit import LazyKernel

    modules = [graph_kernels, dp_kernels]
    try:  # the thresholds live in the driver, the lattice kernels apart
        import dnnpart.solvers.dp.driver as dp_solver
        import dnnpart.solvers.dp.lattice_kernels as lattice_kernels

        modules.append(lattice_kernels)
    except ImportError:  # a --before tree from when the package held them
        import dnnpart.solvers.dp as dp_solver  # type: ignore[no-redef]
    dp_solver.SMALL_COVER_PAIRS = 0
    dp_solver.SMALL_LATTICE = 0
    ideals.SMALL_IDEALS = 0
    for module in modules:
        for obj in vars(module).values():
            if isinstance(obj, LazyKernel):
                obj.plain_below = 0
    t0 = time.perf_counter()
    warm = chain_problem([1.0, 2.0, 3.0], n_accelerators=2, n_cpus=1)
    solve(warm, "dp")
    solve(warm, "dpl")
    jit_s = time.perf_counter() - t0
    problem = read_problem(path)
    t0 = time.perf_counter()
    dpl = solve(problem, "dpl")
    dpl_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    dp = solve(problem, "dp")
    dp_s = time.perf_counter() - t0
    ev = evaluate(problem, dp.require_plan())
    return {
        "nodes": problem.graph.n_nodes,
        "ideals": dp.stats["n_ideals"],
        "dp": dp.objective,
        "dp_eval": ev.objective,
        "status": dp.status.value,
        "dpl": dpl.objective,
        "dp_s": dp_s,
        "dpl_s": dpl_s,
        "import_s": import_s,
        "jit_s": jit_s,
        "slices": dp.stats["slices_priced"],
        "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", nargs="*", default=None, help="file stems to run")
    parser.add_argument("--one", help=argparse.SUPPRESS)
    parser.add_argument("--before", type=Path, default=None,
                        help="sources of the code before: a before / after table")
    parser.add_argument("--repeat", type=int, default=1, help="runs per source (best DP s)")
    args = parser.parse_args()
    if args.one:
        print(json.dumps(run_one(args.one)))
        return 0
    if not WORKLOADS.exists():
        print(f"skipped: reference workloads not found at {WORKLOADS}")
        return 0
    if args.before is not None:
        return compare(args)
    rows = []
    header = (
        "| workload | nodes | ideals | DP | published DP | DPL | published DPL | DP s | DPL s "
        "| C++ DP s | speed-up | slices priced | peak RSS MB | import s | JIT warm-up s |\n"
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"
    )
    print(header, flush=True)
    for folder, stem, label, pub_dp, pub_dpl, cpp_s in SUITE:
        if args.only and stem not in args.only:
            continue
        path = WORKLOADS / folder / f"{stem}.json"
        proc = subprocess.run([sys.executable, __file__, "--one", str(path)],
                              capture_output=True, text=True, check=False)
        if proc.returncode != 0:
            row = f"| {label} | failed: {proc.stderr.strip().splitlines()[-1:]} |"
        else:
            r = json.loads(proc.stdout.strip().splitlines()[-1])
            cpp = f"{cpp_s:.1f}" if cpp_s else "-"
            speed = f"{cpp_s / r['dp_s']:.0f}x" if cpp_s else "-"
            if label.endswith("InceptionV3 training"):
                cpp, speed = "> 4500 (did not finish)", f"> {cpp_s / r['dp_s']:.0f}x"
            row = (
                f"| {label} | {r['nodes']} | {r['ideals']} | {r['dp']:.4f} | {pub_dp:.2f} "
                f"| {r['dpl']:.4f} | {pub_dpl:.2f} | {r['dp_s']:.3f} | {r['dpl_s']:.3f} | {cpp} "
                f"| {speed} | {r['slices']:,} | {r['peak_rss_mb']:.0f} | {r['import_s']:.2f} "
                f"| {r['jit_s']:.2f} |"
            )
        rows.append(row)
        print(row, flush=True)
    OUT.parent.mkdir(parents=True, exist_ok=True)
    note = (
        "# Throughput DP / DPL on paper 1's workloads\n\n"
        "DP and DPL seconds exclude interpreter start-up, imports and numba JIT loading "
        "(reported apart: a warm-up solve of a 3-node chain). Peak RSS is the whole process "
        "(Python + numba + the solve). C++ DP figures: paper 1 / the brief (one core).\n\n"
    )
    OUT.write_text(note + header + "\n" + "\n".join(rows) + "\n")
    print(f"\nwritten to {OUT}")
    return 0


def _child(path: Path, src: Path) -> dict[str, object]:
    env = dict(os.environ, PYTHONPATH=str(src.resolve()))
    proc = subprocess.run([sys.executable, __file__, "--one", str(path)], capture_output=True,
                          text=True, check=True, env=env)
    result: dict[str, object] = json.loads(proc.stdout.strip().splitlines()[-1])
    return result


def compare(args: argparse.Namespace) -> int:
    """Before / after, same run: both sources alternate on each workload."""
    header = (
        "| workload | ideals | DP s before | DP s after | speed-up | slices before "
        "| slices after | same optimum |\n|---|---|---|---|---|---|---|---|"
    )
    print(header, flush=True)
    rows = []
    totals = [0.0, 0.0]
    loads = []
    for folder, stem, label, *_ in SUITE:
        if args.only and stem not in args.only:
            continue
        path = WORKLOADS / folder / f"{stem}.json"
        runs: dict[str, list[dict[str, object]]] = {"before": [], "after": []}
        for _ in range(args.repeat):
            for key, src in (("before", args.before), ("after", ROOT / "src")):
                loads.append(os.getloadavg()[0])
                runs[key].append(_child(path, src))
        best = {k: min(runs[k], key=lambda r: float(str(r["dp_s"]))) for k in runs}
        b, a = float(str(best["before"]["dp_s"])), float(str(best["after"]["dp_s"]))
        totals[0] += b
        totals[1] += a
        objs = [float(str(r["dp"])) for k in runs for r in runs[k]]
        same = "yes" if max(objs) - min(objs) <= 1e-9 * max(objs) else "no"
        row = (f"| {label} | {best['after']['ideals']:,} | {b:.3f} | {a:.3f} | {b / a:.2f}x "
               f"| {best['before']['slices']:,} | {best['after']['slices']:,} | {same} |")
        rows.append(row)
        print(row, flush=True)
    total = (f"| total | | {totals[0]:.2f} | {totals[1]:.2f} | {totals[0] / totals[1]:.2f}x "
             "| | | |")
    print(total, flush=True)
    out = OUT.parent / "dp_suite_before_after.md"
    out.parent.mkdir(parents=True, exist_ok=True)
    note = (f"# Throughput DP before / after\n\nbefore: `{args.before}`, after: this checkout; "
            f"best of {args.repeat} each, alternating; load average {min(loads):.1f}-"
            f"{max(loads):.1f}. DP seconds exclude start-up and the numba warm-up.\n\n")
    out.write_text(note + header + "\n" + "\n".join([*rows, total]) + "\n")
    print(f"\nwritten to {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
