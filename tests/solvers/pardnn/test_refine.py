"""The critical-chain refinement (ours): never worse, the evaluator's makespan, constraints kept."""

from __future__ import annotations

import itertools

import numpy as np

from dnnpart.cost.clusters import resolve_cluster
from dnnpart.graph import build_graph
from dnnpart.simulate import emulate_ops
from dnnpart.solvers.pardnn.refine import critical_chain, refine
from dnnpart.testing.layered import layered_graph


def run(graph, cluster, device, **kw):  # type: ignore[no-untyped-def]
    def emulate(d):  # type: ignore[no-untyped-def]
        return emulate_ops(graph, cluster, d, memory=False)

    return refine(device, emulate, pred_ptr=graph.pred_ptr.astype(np.int64),
                  pred_idx=graph.pred_idx.astype(np.int64), succ_ptr=graph.succ_ptr.astype(np.int64),
                  succ_idx=graph.succ_idx.astype(np.int64), k=cluster.n_devices, **kw)


def test_a_transfer_on_the_critical_chain_is_removed() -> None:
    """a -> b -> c with b alone on device 1 and tensors costing more than compute: the chain's
    last remote edge is b -> c, whose first candidate (c to b's device) removes one transfer;
    the next chain's only remote edge a -> b then moves a there too."""
    g = build_graph([0, 1, 2], [0, 1], [1, 2], compute_time=[[1.0, 1.0]] * 3, edge_cost=[0.0, 0.0],
                    output_bytes=[4e9, 4e9, 4e9])
    cl = resolve_cluster("2xV100").cluster
    s = emulate_ops(g, cl, [0, 1, 0], memory=False)
    remote, busy = critical_chain(g.pred_ptr, g.pred_idx, np.array([0, 1, 0]), s)
    assert remote == [(1, 2), (0, 1)] and busy == []
    r = run(g, cl, np.array([0, 1, 0]))
    assert r.device.tolist() == [1, 1, 1] and r.moves == 2
    assert r.makespan == emulate_ops(g, cl, r.device, memory=False).makespan < s.makespan


def test_never_worse_deterministic_and_constraints_kept() -> None:
    cl = resolve_cluster("4xV100").cluster
    for seed in range(5):
        g = layered_graph(300, 4 + 3 * seed, seed=seed)
        rng = np.random.default_rng(seed)
        n = g.n_nodes
        device = rng.integers(0, 4, n)
        fixed = np.full(n, -1, np.int64)
        pinned = rng.choice(n, size=10, replace=False)
        fixed[pinned] = device[pinned]
        variable = np.full(n, -1, np.int64)
        followers = rng.choice(np.setdiff1d(np.arange(1, n), pinned), size=20, replace=False)
        variable[followers] = np.where(fixed[followers - 1] < 0, followers - 1, -1)
        led = variable >= 0
        variable[led] = np.where(variable[variable[led]] >= 0, -1, variable[led])  # no chains
        device[variable >= 0] = device[variable[variable >= 0]]
        before = emulate_ops(g, cl, device, memory=False).makespan
        r = run(g, cl, device, variable=variable, fixed=fixed, max_evals=60)
        again = run(g, cl, device, variable=variable, fixed=fixed, max_evals=60)
        assert np.array_equal(r.device, again.device)
        assert r.makespan == emulate_ops(g, cl, r.device, memory=False).makespan <= before
        assert r.evals <= 60 and (r.moves > 0) == (r.makespan < before)
        assert np.array_equal(r.device[pinned], device[pinned])
        f = variable >= 0
        assert np.array_equal(r.device[f], r.device[variable[f]])


def test_a_stop_request_keeps_the_input() -> None:
    g = build_graph([0, 1, 2], [0, 1], [1, 2], compute_time=[[1.0, 1.0]] * 3, edge_cost=[0.0, 0.0],
                    output_bytes=[4e9, 4e9, 4e9])
    cl = resolve_cluster("2xV100").cluster
    r = run(g, cl, np.array([0, 1, 0]), stop=lambda: True)
    assert r.device.tolist() == [0, 1, 0] and r.moves == 0 and r.evals == 0


def test_arrivals_answer_as_the_dict_of_transfers_did() -> None:
    """The binary-search lookup against a dict built from the transfer list (later entries
    win), on random transfers with repeated pairs, for every pair and some that are absent."""
    from types import SimpleNamespace

    from dnnpart.solvers.pardnn.refine import Arrivals

    rng = np.random.default_rng(7)
    for _ in range(20):
        m = int(rng.integers(0, 60))
        xs, xd = rng.integers(0, 15, m), rng.integers(0, 4, m)
        xe = rng.random(m)
        s = SimpleNamespace(transfers=(xs, xd, np.zeros(m), xe))
        table = {(int(u), int(d)): float(e) for u, d, e in zip(xs, xd, xe, strict=True)}
        a = Arrivals(s)
        for u in range(16):
            for d in range(6):
                assert a.get(u, d, -1.0) == table.get((u, d), -1.0)


def _walk_twin(pred_ptr, pred_idx, device, s):
    """The chain walk node by node, as first written: a dict of arrivals, a loop over inputs."""
    start, finish, ready = s.start, s.finish, s.ready
    xs, xd, _, xe = s.transfers
    arrive = {(int(u), int(d)): float(e) for u, d, e in zip(xs, xd, xe, strict=True)}
    n = len(device)
    prev = [-1] * n
    for d in set(device.tolist()):
        mine = sorted((float(start[v]), v) for v in range(n) if device[v] == d)
        for (_, a), (_, b) in itertools.pairwise(mine):
            prev[b] = a
    remote, busy = [], []
    v = int(np.argmax(finish))
    nodes = [v]
    for _ in range(2 * n):
        if start[v] > ready[v] and prev[v] >= 0:
            busy.append(v)
            v = prev[v]
            nodes.append(v)
            continue
        preds = pred_idx[pred_ptr[v]:pred_ptr[v + 1]].tolist()
        if not preds:
            break
        best, best_at = -1, -np.inf
        for u in preds:
            at = finish[u] if device[u] == device[v] else arrive.get((u, int(device[v])), finish[u])
            if at > best_at:
                best, best_at = u, at
        if device[best] != device[v]:
            remote.append((best, v))
        v = best
        nodes.append(v)
    return remote, busy, nodes


def test_chain_walk_equals_its_node_by_node_twin() -> None:
    """Random DAGs, placements and schedules (integer times, so ties between inputs happen):
    the vectorised walk (latest input per node at once) follows the same chain."""
    from types import SimpleNamespace

    from dnnpart.solvers.pardnn.refine import chain_walk

    rng = np.random.default_rng(11)
    for _ in range(60):
        n = int(rng.integers(2, 40))
        edges = sorted({(int(a), int(b)) for a, b in rng.integers(0, n, (3 * n, 2)) if a < b})
        preds: list[list[int]] = [[] for _ in range(n)]
        for a, b in edges:
            preds[b].append(a)
        pred_ptr = np.concatenate(([0], np.cumsum([len(p) for p in preds]))).astype(np.int64)
        pred_idx = np.array([u for p in preds for u in p], dtype=np.int32)
        device = rng.integers(0, 3, n)
        start = rng.integers(0, 30, n).astype(float)
        ready = start - rng.integers(0, 2, n)
        finish = start + rng.integers(1, 4, n)
        far = [(u, int(device[v])) for u, v in edges if device[u] != device[v]]
        xs = np.array([u for u, _ in far], dtype=np.int64)
        xd = np.array([d for _, d in far], dtype=np.int64)
        xe = finish[xs] + rng.integers(0, 5, len(far)) if far else np.zeros(0)
        s = SimpleNamespace(start=start, finish=finish, ready=ready,
                            transfers=(xs, xd, np.zeros(len(far)), np.asarray(xe, float)))
        assert chain_walk(pred_ptr, pred_idx, device, s) == _walk_twin(pred_ptr, pred_idx, device, s)
