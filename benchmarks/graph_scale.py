"""How fast and how lean dnnpart is on a large graph (default 200,000 nodes, 1,000,000 edges).

The generated DAG is shaped like a DNN training graph: a forward pass and its mirrored
backward pass joined into one long backbone (so the longest path has ``n - 1`` edges), random
forward skip connections within a window in both passes, and one edge from every forward node
to its backward partner (the saved activation), with forward/backward partners in one colour
class. Node ids are sparse and nodes and edges are given in shuffled order, so
:func:`dnnpart.graph.build_graph` does real renumbering work.

Every stage runs in a fresh interpreter, so its peak RSS (``resource.getrusage``) is its own;
interpreter start-up, ``import dnnpart``, numba JIT warm-up (on a tiny graph) and loading the
stage's input are timed apart from the measured work. The orchestrating process never touches
the big arrays, so it cannot inflate a child's peak either.

Usage::

    python benchmarks/graph_scale.py [--nodes 200000 --edges 1000000] [--no-json]

Prints a Markdown table and writes it to ``bench-results/graph_scale.md``.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

REPO = Path(__file__).resolve().parent.parent
TARGET_S, TARGET_MB = 5.0, 1024.0

# stage -> (what it measures, whether it needs the JSON reader/writer)
STAGES: dict[str, str] = {
    "generate": "generate the random DAG arrays (not dnnpart; input of the next stages)",
    "build_graph": "(a) build_graph from arrays: validation + topological renumbering",
    "topological_levels": "(b) topological_levels (numba kernel)",
    "save_graph": "(c) save_graph, native, uncompressed",
    "save_graph_compressed": "(c') save_graph, native, compress=True",
    "load_graph": "(d) load_graph of the uncompressed native file (full validation)",
    "load_graph_compressed": "(d') load_graph of the compressed native file",
    "target_from_arrays": "target: build_graph + topological_levels from arrays",
    "target_from_file": "target: load_graph + topological_levels from the native file",
    "json_write": "(e) write_problem, paper's JSON reference format",
    "json_read": "(e) read_problem, paper's JSON reference format (full validation)",
}
TARGET_STAGES = ("target_from_arrays", "target_from_file")


# -- the generated graph -----------------------------------------------------------------


def generate(n_nodes: int, n_edges: int, *, window: int, seed: int) -> dict[str, Any]:
    """Arrays of a random training-like DAG, in shuffled order with sparse original ids.

    Positions ``0..f-1`` are the forward pass, ``f..n-1`` the backward pass; backward node
    ``n-1-i`` is the partner of forward node ``i``.
    """
    rng = np.random.default_rng(seed)
    n = n_nodes
    f = n // 2
    chain = np.arange(n - 1, dtype=np.int64)
    src_parts, dst_parts = [chain], [chain + 1]
    budget = n_edges - (n - 1)
    if budget < 0:
        raise SystemExit(f"--edges must be at least --nodes - 1 = {n - 1} (the backbone)")

    # saved activations: forward i -> its backward partner (skip the one the chain has)
    act = np.arange(f - 1, dtype=np.int64)[: budget]
    src_parts.append(act)
    dst_parts.append(n - 1 - act)
    budget -= act.size

    # skip connections u -> u + d (2 <= d <= window) inside the forward pass, mirrored into
    # the backward pass; draw with surplus, deduplicate, then trim to the exact count
    want = budget // 2
    skips = np.empty(0, np.int64)
    while skips.size < want and f > 2:
        u = rng.integers(0, f - 2, size=2 * (want - skips.size) + 1000)
        d = rng.integers(2, window + 1, size=u.size)
        v = u + d
        key = u[v < f] * f + v[v < f]
        skips = np.unique(np.concatenate([skips, key]))
    skips = rng.permutation(skips)[:want]
    su, sv = skips // f, skips % f
    src_parts += [su, n - 1 - sv]
    dst_parts += [sv, n - 1 - su]
    if budget - 2 * skips.size == 1:  # odd remainder: one more forward-to-backward edge
        src_parts.append(np.array([0]))
        dst_parts.append(np.array([n - 3]))
    src = np.concatenate(src_parts)
    dst = np.concatenate(dst_parts)

    node_order = rng.permutation(n)  # position in the input -> generated node
    pos_of = np.empty(n, np.int64)
    pos_of[node_order] = np.arange(n)
    ids = rng.choice(10 * n, size=n, replace=False).astype(np.int64)  # ids by input position
    edge_order = rng.permutation(src.size)
    src_ids = ids[pos_of[src[edge_order]]]
    dst_ids = ids[pos_of[dst[edge_order]]]

    backward = node_order >= f
    partner = np.where(backward, n - 1 - node_order, node_order)
    acc = rng.gamma(2.0, 0.5, size=n) * np.where(backward, 2.0, 1.0)
    acc[rng.random(n) < 0.01] = np.inf  # a few operators without accelerator support
    cpu = acc * rng.uniform(5, 20, size=n)
    cpu[~np.isfinite(cpu)] = rng.gamma(2.0, 5.0, size=int((~np.isfinite(cpu)).sum()))
    ops = np.array(["Conv", "Relu", "MatMul", "Add", "LayerNorm", "Softmax", "BatchNorm"])
    op_of = rng.integers(0, ops.size, size=n)
    names = [f"{'bw' if b else 'fw'}/block{p // 16}/{ops[o]}_{p}"
             for b, p, o in zip(backward.tolist(), partner.tolist(), op_of.tolist(), strict=True)]
    return {
        "node_ids": ids,
        "edge_src": src_ids,
        "edge_dst": dst_ids,
        "compute_time": np.column_stack([cpu, acc]),
        "edge_cost": rng.exponential(0.1, size=src.size),
        "edge_bytes": rng.integers(1 << 10, 1 << 24, size=src.size).astype(np.float64),
        "memory_bytes": np.where(backward, 0.0, rng.exponential(4e6, size=n)),
        "is_backward": backward,
        "color_class": partner,
        "layer_id": partner // 16,
        "names": np.array(names),
        "op_types": ops[op_of],
    }


def build_kwargs(arrays: dict[str, Any]) -> dict[str, Any]:
    kwargs = dict(arrays)
    # build_graph takes sequences of str; a list is what frontends and readers pass
    kwargs["names"] = arrays["names"].tolist()
    kwargs["op_types"] = arrays["op_types"].tolist()
    return kwargs


# -- one stage in a fresh interpreter ----------------------------------------------------


def _rss_now_mb() -> float:
    try:
        with open("/proc/self/status") as fh:
            for line in fh:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        pass
    return _peak_mb()


def _peak_mb() -> float:
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return peak / (1024 * 1024) if sys.platform == "darwin" else peak / 1024  # bytes vs KiB


def run_stage(stage: str, work: Path, opts: dict[str, Any]) -> dict[str, Any]:
    """Body of a child process: warm up, load the input, then time the stage's work."""
    t0 = time.perf_counter()
    import dnnpart  # noqa: F401
    from dnnpart.graph import build_graph, topological_levels
    from dnnpart.io.native import load_graph, save_graph

    t_import = time.perf_counter() - t0

    t0 = time.perf_counter()
    tiny = build_graph([3, 1, 2], [1, 2], [2, 3], compute_time=np.ones((3, 2)),
                       edge_cost=[0.0, 0.0], names=["a", "b", "c"])
    topological_levels(tiny)
    save_graph(tiny, work / "tiny.native")
    load_graph(work / "tiny.native")
    t_warmup = time.perf_counter() - t0

    native = work / "graph.native"
    t0 = time.perf_counter()
    work_fn: Callable[[], Any]
    result: dict[str, Any] = {}
    if stage == "generate":
        def work_fn() -> Any:
            arrays = generate(opts["nodes"], opts["edges"], window=opts["window"],
                              seed=opts["seed"])
            np.savez(work / "input.npz", **arrays)
            return arrays
    elif stage in ("build_graph", "target_from_arrays"):
        with np.load(work / "input.npz") as archive:
            kwargs = build_kwargs({k: archive[k] for k in archive.files})

        def work_fn() -> Any:
            graph = build_graph(**kwargs)
            if stage == "target_from_arrays":
                result["depth"] = int(topological_levels(graph).max())
            return graph
    elif stage == "topological_levels":
        graph = load_graph(native)

        def work_fn() -> Any:
            levels = topological_levels(graph)
            result["depth"] = int(levels.max())
            return levels
    elif stage in ("save_graph", "save_graph_compressed"):
        graph = load_graph(native)
        compress = stage.endswith("compressed")
        out = work / ("graph.native.z" if compress else "graph.native.copy")

        def work_fn() -> Any:
            save_graph(graph, out, compress=compress)
            result["file_mb"] = out.stat().st_size / 2**20
    elif stage in ("load_graph", "load_graph_compressed", "target_from_file"):
        src = work / "graph.native.z" if stage.endswith("compressed") else native

        def work_fn() -> Any:
            graph = load_graph(src)
            if stage == "target_from_file":
                result["depth"] = int(topological_levels(graph).max())
            return graph
    elif stage == "json_write":
        from dnnpart.devices.presets import reference_cluster
        from dnnpart.io import write_problem
        from dnnpart.problem import Problem

        problem = Problem(graph=load_graph(native),
                          cluster=reference_cluster(n_accelerators=4, n_cpus=1, memory_bytes=16e9))
        out = work / "graph.json"

        def work_fn() -> Any:
            write_problem(problem, out)
            result["file_mb"] = out.stat().st_size / 2**20
    elif stage == "json_read":
        from dnnpart.io import read_problem

        def work_fn() -> Any:
            return read_problem(work / "graph.json")
    else:
        raise SystemExit(f"unknown stage {stage!r}")
    t_input = time.perf_counter() - t0

    rss_before = _rss_now_mb()
    t0 = time.perf_counter()
    value = work_fn()
    work_s = time.perf_counter() - t0
    peak = _peak_mb()
    if stage == "build_graph":  # the later stages read the graph from this file
        save_graph(value, native)
    result.update(stage=stage, import_s=t_import, warmup_s=t_warmup, input_s=t_input,
                  work_s=work_s, rss_before_mb=rss_before, peak_mb=peak)
    return result


def child(stage: str, work: Path, opts: dict[str, Any], env: dict[str, str]) -> dict[str, Any]:
    cmd = [sys.executable, str(Path(__file__).resolve()), "--_stage", stage,
           "--_work", str(work), "--_opts", json.dumps(opts)]
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, check=False)
    wall = time.perf_counter() - t0
    if proc.returncode != 0:
        sys.stderr.write(proc.stderr)
        raise SystemExit(f"stage {stage} failed (exit {proc.returncode})")
    line = next(ln for ln in proc.stdout.splitlines() if ln.startswith("RESULT "))
    out: dict[str, Any] = json.loads(line[len("RESULT "):])
    out["process_wall_s"] = wall
    return out


def interpreter_startup_s(env: dict[str, str], repeat: int = 3) -> float:
    best = float("inf")
    for _ in range(repeat):
        t0 = time.perf_counter()
        subprocess.run([sys.executable, "-c", "pass"], env=env, check=True)
        best = min(best, time.perf_counter() - t0)
    return best


# -- report -----------------------------------------------------------------------------


def report(results: list[dict[str, Any]], opts: dict[str, Any], startup_s: float,
           skipped: list[str]) -> str:
    import numba

    first = results[0]
    lines = [
        f"# graph_scale: {opts['nodes']:,} nodes, {opts['edges']:,} edges "
        f"(window {opts['window']}, seed {opts['seed']})",
        "",
        f"{platform.platform()}, {os.cpu_count()} CPUs, Python {platform.python_version()}, "
        f"numpy {np.__version__}, numba {numba.__version__}. Each stage runs in a fresh "
        "interpreter; *work* excludes start-up, import, JIT warm-up and reading the stage's "
        "input; *peak RSS* is the whole process's high-water mark (it includes the input "
        "the stage holds, shown as *RSS before*).",
        "",
        "Start-up, apart from the work: interpreter "
        f"{startup_s:.3f} s; `import dnnpart` + `dnnpart.io.native` {first['import_s']:.3f} s; "
        f"numba JIT warm-up on a tiny graph {first['warmup_s']:.3f} s with an empty numba "
        f"cache (first stage), {min(r['warmup_s'] for r in results[1:]):.3f} s from the "
        "on-disk cache (later stages).",
        "",
        "| stage | work (s) | peak RSS (MB) | RSS before (MB) | notes |",
        "|---|---:|---:|---:|---|",
    ]
    for r in results:
        notes = []
        if "depth" in r:
            notes.append(f"depth {r['depth']:,}")
        if "file_mb" in r:
            notes.append(f"file {r['file_mb']:.1f} MB")
        if r["stage"] in TARGET_STAGES:
            ok = r["work_s"] < TARGET_S and r["peak_mb"] < TARGET_MB
            notes.append(f"target <{TARGET_S:g} s, <{TARGET_MB:g} MB: "
                         f"{'met' if ok else 'MISSED'}")
        lines.append(f"| {STAGES[r['stage']]} | {r['work_s']:.3f} | {r['peak_mb']:.0f} | "
                     f"{r['rss_before_mb']:.0f} | {'; '.join(notes)} |")
    for stage in skipped:
        lines.append(f"| {STAGES[stage]} | – | – | – | skipped |")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--nodes", type=int, default=200_000)
    parser.add_argument("--edges", type=int, default=1_000_000)
    parser.add_argument("--window", type=int, default=32, help="longest skip connection")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--no-json", action="store_true", help="skip stage (e), the JSON format")
    parser.add_argument("--out", type=Path, default=REPO / "bench-results" / "graph_scale.md")
    parser.add_argument("--_stage", help=argparse.SUPPRESS)
    parser.add_argument("--_work", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--_opts", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)

    if args._stage:
        result = run_stage(args._stage, args._work, json.loads(args._opts))
        print("RESULT " + json.dumps(result), flush=True)
        return 0

    opts = {"nodes": args.nodes, "edges": args.edges, "window": args.window, "seed": args.seed}
    stages = list(STAGES)
    skipped: list[str] = []
    try:
        import dnnpart.io as dio

        has_json = hasattr(dio, "read_problem") and hasattr(dio, "write_problem")
    except ImportError:
        has_json = False
    if args.no_json or not has_json:
        skipped = ["json_write", "json_read"]
        stages = [s for s in stages if s not in skipped]

    with tempfile.TemporaryDirectory(prefix="graph_scale_") as tmp:
        work = Path(tmp)
        # A fresh numba cache: the first stage shows the real compile cost of a clean
        # checkout, the later ones the cached start-up every run after that pays.
        env = dict(os.environ, NUMBA_CACHE_DIR=str(work / "numba-cache"))
        startup = interpreter_startup_s(env)
        results = []
        for stage in stages:
            print(f"running {stage} ...", file=sys.stderr, flush=True)
            results.append(child(stage, work, opts, env))
    table = report(results, opts, startup, skipped)
    print(table)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(table)
    print(f"written to {args.out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
