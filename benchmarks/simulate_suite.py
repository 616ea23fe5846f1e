"""Speed and memory of the simulators and of topology routing (issue 15's scale targets).

Stages, each in a fresh interpreter (so its peak RSS is its own); numba JIT warm-up on a tiny
input and building the stage's input are timed apart from the measured work:

* ``ops``: the op-level emulator without link contention on a 200,000-node / 1,000,000-edge
  training-like DAG (the generator of ``benchmarks/graph_scale.py``, operators without an
  accelerator time get one) over 16 devices (``torus2d:x=4,y=4``), nodes cut into 16
  topological blocks with 5% moved at random; memory tracked (peaks) -- target <= 5 s, <= 1 GB;
* ``ops_curves``: the same with per-device memory curves (what ``dnnpart simulate`` draws);
* ``ops_contention``: the same with link contention along the routed paths;
* ``pipeline``: 64 stages x 8 replicas on a 512-device 3-D torus, 128 micro-batches per
  replica (1,024 per step), GPipe and 1F1B -- target <= 2 s each;
* ``torus512``: build ``torus3d:x=8,y=8,z=8`` and route all pairs -- target <= 5 s.

Usage::

    python benchmarks/simulate_suite.py [--nodes 200000 --edges 1000000]

Prints a Markdown table and writes it to ``bench-results/simulate_suite.md``.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "benchmarks"))

STAGES = {
    "ops": ("op emulator, no contention, peaks only (200k nodes / 1M edges, 16 devices)", 5.0, 1024.0),
    "ops_curves": ("op emulator, no contention, with memory curves", None, None),
    "ops_contention": ("op emulator, link contention on the routed paths, peaks only", None, None),
    "pipeline_gpipe": ("pipeline, 64 stages x 8 replicas x 128 micro-batches, GPipe", 2.0, None),
    "pipeline_1f1b": ("pipeline, 64 stages x 8 replicas x 128 micro-batches, 1F1B", 2.0, None),
    "torus512": ("512-device 3-D torus: build + route all pairs", 5.0, None),
}


def _peak_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def _rss_now_mb() -> float:
    with open("/proc/self/status") as fh:
        for line in fh:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return float("nan")


def _graph(n: int, m: int) -> Any:
    from graph_scale import build_kwargs, generate

    from dnnpart.graph import build_graph
    from dnnpart.graph.core import NORMAL, RESIDUAL

    arrays = generate(n, m, window=64, seed=0)
    acc = arrays["compute_time"][:, 1]
    acc[~np.isfinite(acc)] = arrays["compute_time"][~np.isfinite(acc), 0] / 10
    rng = np.random.default_rng(1)
    kwargs = build_kwargs(arrays)
    kwargs["memory_class"] = np.where(rng.random(n) < 0.1, RESIDUAL, NORMAL).astype(np.int8)
    kwargs["param_bytes"] = rng.exponential(2e6, size=n)
    kwargs["output_bytes"] = rng.exponential(1e6, size=n)
    return build_graph(**kwargs)


def run_stage(stage: str, opts: dict[str, Any]) -> dict[str, Any]:
    from dnnpart.cost import resolve_cluster
    from dnnpart.simulate import Stage, emulate_ops, simulate_pipeline
    from dnnpart.testing import chain_graph

    if stage == "torus512":
        resolve_cluster("torus3d:x=2,y=2,z=2")  # JIT warm-up
        t = time.perf_counter()
        c = resolve_cluster("torus3d:x=8,y=8,z=8").cluster
        wall = time.perf_counter() - t
        return {"wall_s": wall, "note": f"{c.n_devices} devices, {len(c.links)} links"}
    if stage.startswith("pipeline"):
        c = resolve_cluster("torus3d:x=8,y=8,z=8").cluster
        schedule = stage.split("_")[1]
        tiny = [Stage(devices=(0,), forward=1.0, backward=2.0)]
        simulate_pipeline(tiny, c, microbatches=2, schedule=schedule)  # JIT warm-up
        stages = [Stage(devices=tuple(range(8 * s, 8 * s + 8)), forward=1.0, backward=2.0,
                        weight_bytes=1e8, activation_bytes=1e6, name=f"s{s}") for s in range(64)]
        t = time.perf_counter()
        r = simulate_pipeline(stages, c, microbatches=128 * 8, schedule=schedule)
        wall = time.perf_counter() - t
        return {"wall_s": wall, "note": f"step {r.step_time:.1f} ms, bubble {r.bubble_fraction:.1%}, "
                                        f"{r.start.shape[0]:,} ops"}
    c = resolve_cluster("torus2d:x=4,y=4").cluster
    emulate_ops(chain_graph(4), c, [0, 1, 2, 3])  # JIT warm-up
    g = _graph(opts["nodes"], opts["edges"])
    rng = np.random.default_rng(2)
    a = (np.arange(g.n_nodes) * 16 // g.n_nodes).astype(np.int64)
    moved = rng.random(g.n_nodes) < 0.05
    a[moved] = rng.integers(0, 16, size=int(moved.sum()))
    base = _peak_mb()
    now = _rss_now_mb()
    t = time.perf_counter()
    s = emulate_ops(g, c, a, curves=stage == "ops_curves", contention=stage == "ops_contention")
    wall = time.perf_counter() - t
    return {"wall_s": wall, "rss_input_mb": base,
            "note": f"RSS {now:.0f} MB before the run; {g.n_nodes:,} nodes, {g.n_edges:,} edges, "
                    f"{s.transfers[0].shape[0]:,} transfers, makespan {s.makespan:,.0f}"}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--nodes", type=int, default=200_000)
    ap.add_argument("--edges", type=int, default=1_000_000)
    ap.add_argument("--stage", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    opts = {"nodes": args.nodes, "edges": args.edges}
    if args.stage:
        result = run_stage(args.stage, opts)
        result["peak_rss_mb"] = _peak_mb()
        print(json.dumps(result))
        return 0
    env = dict(os.environ, PYTHONPATH=str(REPO / "src") + os.pathsep + os.environ.get("PYTHONPATH", ""))
    rows = []
    for stage, (what, target_s, target_mb) in STAGES.items():
        out = subprocess.run([sys.executable, __file__, "--stage", stage, "--nodes", str(args.nodes),
                              "--edges", str(args.edges)], env=env, capture_output=True, text=True,
                             check=True)
        r = json.loads(out.stdout.strip().splitlines()[-1])
        ok = (target_s is None or r["wall_s"] <= target_s) and (
            target_mb is None or r["peak_rss_mb"] <= target_mb)
        rows.append((what, r, target_s, target_mb, ok))
        print(f"{stage}: {r['wall_s']:.3f} s, peak RSS {r['peak_rss_mb']:.0f} MB", file=sys.stderr)
    lines = [
        f"Simulators and routing ({platform.processor() or platform.machine()}, "
        f"{os.cpu_count()} CPUs, Python {platform.python_version()}); each stage in a fresh "
        "interpreter, JIT warm-up and input building not timed; peak RSS is the whole process "
        "(graph included).",
        "",
        "| stage | seconds | peak RSS MB | target | holds | notes |",
        "|---|---:|---:|---|---|---|",
    ]
    for what, r, ts, tm, ok in rows:
        target = " / ".join(x for x in (f"<= {ts:g} s" if ts else "", f"<= {tm:g} MB" if tm else "") if x)
        rss = f"{r['peak_rss_mb']:.0f}" + (f" (input {r['rss_input_mb']:.0f})" if "rss_input_mb" in r else "")
        lines.append(f"| {what} | {r['wall_s']:.3f} | {rss} | {target or '-'} | "
                     f"{('yes' if ok else 'NO') if target else '-'} | {r['note']} |")
    text = "\n".join(lines) + "\n"
    print(text)
    out_dir = REPO / "bench-results"
    out_dir.mkdir(exist_ok=True)
    (out_dir / "simulate_suite.md").write_text(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
