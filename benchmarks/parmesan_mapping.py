"""Benchmark of Parmesan's phase-2 mapper (binary search over the DFS) on meshes and tori.

Run: ``PYTHONPATH=src python benchmarks/parmesan_mapping.py [--time-limit 20] [--threads 1]``.
Writes ``bench-results/parmesan_mapping.md`` and prints it.

Topologies (``D = 64``):

* the topologies layer's generators (``dnnpart.devices.topology``), routed by the project's
  rule (widest path, summed latency): 8x8 ``mesh2d`` / ``torus2d`` and 4x4x4 ``mesh3d`` /
  ``torus3d`` with equal 25 GB/s links and 1 us per link (every pair then has the same
  bandwidth, so mappings differ by latency only), and ``random_blk_1``, ``random_blk_2``,
  ``uniform_dist`` over 64 devices (seed 0);
* ``hops`` variants of the four grids built here: ``50 GB/s / hops`` and 2 us per hop, a
  proxy for links shared along a route, the kind of distance-sensitive topology Table 2 of
  the paper is about.

Stage graphs are SemanticFPN-like: a chain of ``S`` stages with skip edges from early stages to
late ones (lateral connections), ``R = D / S``; a p2p-heavy and an all-reduce-heavy variant.
Each instance reports the chosen instantiation, the status (optimal within eps=1e-3, or
feasible with the final gap when the time limit cut it), the time, and CS / ours on the Eq. 5
objective (the speedup of our mapping over CS under the mapper's own cost model).
"""

from __future__ import annotations

import argparse
import itertools
import time
from pathlib import Path

import numpy as np

from dnnpart.solvers.parmesan import PipelineStages, Topology, map_stages

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "bench-results" / "parmesan_mapping.md"
GB = 1e9


def grid_links(dims: tuple[int, ...], torus: bool) -> list[tuple[int, int]]:
    coords = list(itertools.product(*[range(d) for d in dims]))
    index = {c: i for i, c in enumerate(coords)}
    links = []
    for c in coords:
        for axis, size in enumerate(dims):
            n = list(c)
            n[axis] += 1
            if n[axis] == size:
                if not torus or size <= 2:
                    continue
                n[axis] = 0
            links.append((index[c], index[tuple(n)]))
    return links


def widest_paths(n: int, links: list[tuple[int, int]], bw: np.ndarray,
                 lat: float) -> tuple[np.ndarray, np.ndarray]:
    """All-pairs widest path (max bottleneck), latency summed along the chosen path."""
    adj: list[list[tuple[int, float]]] = [[] for _ in range(n)]
    for (a, b), w in zip(links, bw, strict=True):
        adj[a].append((b, float(w)))
        adj[b].append((a, float(w)))
    band = np.zeros((n, n))
    hops = np.zeros((n, n))
    import heapq

    for s in range(n):
        best = np.zeros(n)
        h = np.zeros(n)
        best[s] = np.inf
        heap = [(-np.inf, 0, s)]
        done = np.zeros(n, np.bool_)
        while heap:
            negw, hop, u = heapq.heappop(heap)
            if done[u]:
                continue
            done[u] = True
            h[u] = hop
            for v, w in adj[u]:
                cand = min(-negw, w)
                if not done[v] and (cand > best[v]):
                    best[v] = cand
                    heapq.heappush(heap, (-cand, hop + 1, v))
        best[s] = 0.0
        band[s] = best
        hops[s] = h
    return band, hops * lat


def hop_matrix(n: int, links: list[tuple[int, int]]) -> np.ndarray:
    adj: list[list[int]] = [[] for _ in range(n)]
    for a, b in links:
        adj[a].append(b)
        adj[b].append(a)
    dist = np.zeros((n, n))
    for s in range(n):
        seen = {s: 0}
        frontier = [s]
        while frontier:
            nxt = []
            for u in frontier:
                for v in adj[u]:
                    if v not in seen:
                        seen[v] = seen[u] + 1
                        nxt.append(v)
            frontier = nxt
        for v, d in seen.items():
            dist[s, v] = d
    return dist


def topology(dims: tuple[int, ...], torus: bool, rule: str, seed: int = 0) -> Topology:
    """A local grid: ``hops`` (B / hops) or ``widest`` (random link speeds, widest path)."""
    n = int(np.prod(dims))
    links = grid_links(dims, torus)
    if rule == "widest":
        bw = np.random.default_rng(seed).choice([25 * GB, 50 * GB, 100 * GB], len(links))
        band, lat = widest_paths(n, links, bw, 2e-6)
        return Topology.from_matrices(band, lat)
    hops = hop_matrix(n, links)
    with np.errstate(divide="ignore"):
        band = np.where(hops > 0, 50 * GB / np.maximum(hops, 1), 0.0)
    return Topology.from_matrices(band, hops * 2e-6)


def generated(name: str) -> Topology:
    """A topology from the topologies layer's generators (64 devices)."""
    from dnnpart.devices.topology import generate

    grids = {"mesh2d": {"x": 8, "y": 8}, "torus2d": {"x": 8, "y": 8},
             "mesh3d": {"x": 4, "y": 4, "z": 4}, "torus3d": {"x": 4, "y": 4, "z": 4}}
    if name in grids:
        params: dict[str, object] = {**grids[name], "bw": 25 * GB, "latency": 1e-6}
    else:
        params = {"n": 64, "seed": 0}
    return Topology.from_cluster(generate(name, params))


def fpn_stages(s_n: int, r_n: int, heavy: str, seed: int = 0) -> PipelineStages:
    rng = np.random.default_rng(seed)
    comm = np.zeros((s_n, s_n))
    for s in range(s_n - 1):
        comm[s, s + 1] = rng.uniform(50, 200) * 1e6  # activations, bytes per step
    for s in range(s_n // 2):  # lateral connections into the top-down half
        comm[s, s_n - 1 - s] += rng.uniform(20, 100) * 1e6
    params = rng.uniform(10, 60, s_n) * 1e6
    params *= 20 if heavy == "allreduce" else 0.02
    return PipelineStages(compute=rng.uniform(0.002, 0.004, s_n), param_bytes=params,
                          comm_bytes=comm / r_n, replicas=r_n)


GENERATED = ["mesh2d", "torus2d", "mesh3d", "torus3d", "random_blk_1", "random_blk_2",
             "uniform_dist"]
HOPS = [
    ("2d torus 8x8", (8, 8), True),
    ("2d mesh 8x8", (8, 8), False),
    ("3d mesh 4x4x4", (4, 4, 4), False),
    ("3d torus 4x4x4", (4, 4, 4), True),
]
SR = [(4, 16), (8, 8), (16, 4)]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--time-limit", type=float, default=20.0)
    ap.add_argument("--threads", type=int, default=1)
    args = ap.parse_args()
    # warm-up: compile the kernel outside the timings
    warm = PipelineStages(compute=[0, 0], param_bytes=[0, 0], comm_bytes=[[0, 1], [0, 0]])
    t0 = time.perf_counter()
    map_stages(warm, Topology.from_matrices([[0, 1], [1, 0]]))
    warm_s = time.perf_counter() - t0
    rows = []
    topos = [(name, "generator", generated(name)) for name in GENERATED]
    topos += [(name, "hops", topology(dims, torus, "hops")) for name, dims, torus in HOPS]
    for name, rule, topo in topos:
        for (s_n, r_n), heavy in itertools.product(SR, ("p2p", "allreduce")):
            st = fpn_stages(s_n, r_n, heavy)
            res = map_stages(st, topo, time_limit=args.time_limit, threads=args.threads)
            cs = res.baselines["cs"]
            rows.append((name, rule, f"({s_n},{r_n})", heavy, res.instantiation,
                         res.status.value, f"{res.gap:.2%}", f"{res.wall_time_s:.2f}",
                         f"{cs / res.objective:.2f}x", f"{res.n_nodes:,}"))
            print(" | ".join(rows[-1]), flush=True)
    head = ("topology", "routing", "(S,R)", "stage graph", "Eq.", "status", "gap", "time s",
            "CS/ours", "DFS nodes")
    lines = [
        "# Parmesan mapping benchmark",
        "",
        f"D = 64, time limit {args.time_limit:g} s per instance, {args.threads} worker(s), "
        f"eps 1e-3; kernel compile/load {warm_s:.1f} s (not in the times).",
        "",
        "| " + " | ".join(head) + " |",
        "|" + "---|" * len(head),
        *["| " + " | ".join(r) + " |" for r in rows],
        "",
    ]
    OUT.parent.mkdir(exist_ok=True)
    OUT.write_text("\n".join(lines))
    print("\n".join(lines))


if __name__ == "__main__":
    main()
