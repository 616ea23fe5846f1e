"""Paper 2's baselines (CP heuristic, LC + GLB, round-robin) and the makespan lower bound."""

from __future__ import annotations

import numpy as np

from dnnpart.solvers.pardnn.baselines.cp_heuristic import cp_heuristic
from dnnpart.solvers.pardnn.baselines.linear_clustering import linear_clustering, linear_clusters
from dnnpart.solvers.pardnn.baselines.round_robin import round_robin
from dnnpart.solvers.pardnn.bound import makespan_lower_bound
from dnnpart.solvers.pardnn.levels import levels
from dnnpart.solvers.pardnn.oracles import all_paths, edge_map, is_path, path_weight, random_costs
from dnnpart.solvers.pardnn.slicing import slice_graph


def test_cp_heuristic_is_cp_then_least_loaded_in_topological_order() -> None:
    rng = np.random.default_rng(0)
    for _ in range(200):
        c = random_costs(rng, max_n=12)
        k = int(rng.integers(1, 5))
        device = cp_heuristic(c, k)
        em = edge_map(c)
        cp = slice_graph(c, 1).members(0).tolist()
        best = max(path_weight(c, p, em) for p in all_paths(c, np.ones(c.n, bool)))
        assert is_path(c, cp) and path_weight(c, cp, em) == best
        assert np.all(device[cp] == 0)
        loads = [0.0] * k
        loads[0] = sum(c.comp[v] for v in cp)
        for v in range(c.n):
            if v not in cp:
                d = min(range(k), key=lambda q: (loads[q], q))
                assert device[v] == d
                loads[d] += c.comp[v]


def test_linear_clustering_takes_heaviest_paths_with_levels_recomputed() -> None:
    rng = np.random.default_rng(1)
    for _ in range(150):
        c = random_costs(rng, max_n=10)
        cluster, cl_ptr, cl_nodes, finished = linear_clusters(c)
        assert finished
        em = edge_map(c)
        alive = np.ones(c.n, bool)
        assert sorted(cl_nodes.tolist()) == list(range(c.n))
        for j in range(len(cl_ptr) - 1):
            members = cl_nodes[cl_ptr[j]:cl_ptr[j + 1]].tolist()
            assert members and is_path(c, members)
            assert np.all(cluster[members] == j)
            assert path_weight(c, members, em) == max(path_weight(c, p, em) for p in all_paths(c, alive))
            alive[members] = False


def test_linear_clustering_out_of_time_still_partitions_into_paths() -> None:
    rng = np.random.default_rng(2)
    for _ in range(50):
        c = random_costs(rng, min_n=5, max_n=200, density=0.05)
        cluster, cl_ptr, cl_nodes, finished = linear_clusters(c, time_limit=0.0)
        assert not finished
        assert sorted(cl_nodes.tolist()) == list(range(c.n))
        for j in range(len(cl_ptr) - 1):
            members = cl_nodes[cl_ptr[j]:cl_ptr[j + 1]].tolist()
            assert members and is_path(c, members) and np.all(cluster[members] == j)


def test_glb_maps_clusters_by_earliest_start_to_the_least_loaded_device() -> None:
    rng = np.random.default_rng(3)
    for _ in range(150):
        c = random_costs(rng, max_n=14)
        k = int(rng.integers(1, 5))
        device, _ = linear_clustering(c, k)
        cluster, cl_ptr, cl_nodes, _ = linear_clusters(c)
        src = c.edge_sources()
        tl, _ = levels(c, comm=np.where(cluster[src] != cluster[c.succ_idx], c.comm, 0.0))
        clusters = [cl_nodes[cl_ptr[j]:cl_ptr[j + 1]] for j in range(len(cl_ptr) - 1)]
        loads = [0.0] * k
        for members in sorted(clusters, key=lambda m: (tl[m[0]], m[0])):
            d = min(range(k), key=lambda q: (loads[q], q))
            assert np.all(device[members] == d)
            loads[d] += float(c.comp[members].sum())


def test_round_robin_and_lower_bound() -> None:
    rng = np.random.default_rng(4)
    for _ in range(100):
        c = random_costs(rng, max_n=12)
        k = int(rng.integers(1, 6))
        assert np.bincount(round_robin(c, k), minlength=k).max() - np.bincount(
            round_robin(c, k), minlength=k).min() <= 1
        zero = {e: 0.0 for e in edge_map(c)}
        longest = max(path_weight(c, p, zero) for p in all_paths(c, np.ones(c.n, bool)))
        assert makespan_lower_bound(c, k) == max(longest, c.comp.sum() / k)


def test_glb_skips_empty_clusters_and_gives_them_no_load() -> None:
    """Alg. 1's slicing has empty primaries once the graph runs out; GLB maps the others."""
    from dnnpart.solvers.pardnn.baselines.linear_clustering import glb_est_first
    from dnnpart.solvers.pardnn.inputs import Costs

    chain = Costs.from_edges(4, [0, 1, 2], [1, 2, 3], comp=[1.0] * 4, comm=[1.0] * 3)
    sl = slice_graph(chain, 3)  # primary 0 is the chain, primaries 1 and 2 are empty
    assert [sl.members(i).size for i in range(sl.n_clusters)] == [4, 0, 0]
    assert glb_est_first(chain, sl.cluster, sl.cl_ptr, sl.cl_nodes, 3).tolist() == [0, 0, 0, 0]
    # two independent pairs with an empty cluster between them: the empty one weighs nothing,
    # so the second pair goes to the least loaded device 1, not 2
    pairs = Costs.from_edges(4, [0, 2], [1, 3], comp=[1.0] * 4, comm=[1.0, 1.0])
    cluster = np.array([0, 0, 2, 2])
    device = glb_est_first(pairs, cluster, np.array([0, 2, 2, 4]), np.array([0, 1, 2, 3]), 3)
    assert device.tolist() == [0, 0, 1, 1]
