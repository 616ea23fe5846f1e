"""The mapping objective and the pipeline simulator agree (issue 31).

Paper 4's Eq. 6 / Eq. 7 rank mappings differently from the simulator (measured in
``docs/methods/parmesan.md``, "Mapping objective vs simulator"); the methods therefore finish
the mapping with a swap search scored by :class:`MappingSimulator`. These tests fail if that
score drifts from ``evaluate`` (units, ring order, pipeline copies, which stages talk) or if
the swap search stops short of what it claims, on small two-level hierarchies whose
inter-machine links are 4-40x slower than the intra-machine ones, enumerating every mapping.
"""

from __future__ import annotations

import itertools

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as hs

from dnnpart import Objective, evaluate
from dnnpart.devices.topology import two_level
from dnnpart.graph.core import build_graph
from dnnpart.graph.training import add_backward_pass
from dnnpart.pricing.pairs import Topology
from dnnpart.problem import Problem
from dnnpart.solvers import solve
from dnnpart.solvers.parmesan.baselines import cs_mapping, p2p_first_mapping
from dnnpart.solvers.parmesan.candidates import memory_model, plan_from_mapping
from dnnpart.solvers.parmesan.phase1 import partition_ops, pipeline_stages
from dnnpart.solvers.parmesan.search import map_stages
from dnnpart.solvers.parmesan.simscore import MappingSimulator, swap_search


def _problem(seed: int, n_ops: int, ratio: float, gpus: int = 2) -> Problem:
    """A training chain with one skip edge, weights and activations, on two machines."""
    rng = np.random.default_rng(seed)
    src = [*range(n_ops - 1), 0]
    dst = [*range(1, n_ops), n_ops - 1]
    nbytes = rng.uniform(1e6, 4e7, len(src))
    comp = rng.uniform(0.2, 2.0, n_ops)  # ms
    g = build_graph(np.arange(n_ops), src, dst, compute_time=np.c_[comp * 10, comp],
                    edge_cost=nbytes / 12.5e9 * 1e3, edge_bytes=nbytes,
                    memory_bytes=np.zeros(n_ops), param_bytes=rng.uniform(0, 6e7, n_ops),
                    output_bytes=rng.uniform(1e6, 4e7, n_ops))
    cluster = two_level(nodes=2, gpus=gpus, intra=100e9, inter=100e9 / ratio)
    return Problem(graph=add_backward_pass(g), cluster=cluster,
                   objective=Objective(kind="pipeline", microbatches=4, recompute=True,
                                       schedule="1f1b"))


def _partition(problem: Problem, s_n: int, r_n: int):  # type: ignore[no-untyped-def]
    mem = memory_model(problem, 2.0, replicas=r_n, n_devices=s_n * r_n)
    part = partition_ops(problem.graph, s_n, s_n * r_n, replicas=r_n, k=None, memory=mem)
    assert part.stage_of is not None and part.atom_stage is not None
    return part, pipeline_stages(part.dag, part.atom_stage, r_n, memory=mem)


def _all_mappings(r_n: int, s_n: int) -> list[np.ndarray]:
    return [np.array(p).reshape(r_n, s_n) for p in itertools.permutations(range(r_n * s_n))]


_CASE = dict(seed=hs.integers(0, 10_000), n_ops=hs.integers(5, 9),
             ratio=hs.sampled_from([4.0, 12.0, 40.0]), pair=hs.sampled_from([(4, 1), (2, 2)]))


@settings(max_examples=6, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.too_slow])
@given(**_CASE)
def test_mapping_score_is_the_simulated_objective(seed: int, n_ops: int, ratio: float,
                                                  pair: tuple[int, int]) -> None:
    """Over every mapping, the mapper's score equals ``evaluate``'s simulated time (so their
    rank correlation is 1), and mappings differ: the hierarchy makes the mapping matter."""
    problem = _problem(seed, n_ops, ratio)
    s_n, r_n = pair
    part, stages = _partition(problem, s_n, r_n)
    sim = MappingSimulator(problem, part.stage_of, cs_mapping(stages), plan_from_mapping)
    ours, theirs = [], []
    for m in _all_mappings(r_n, s_n):
        ours.append(sim.score(m))
        theirs.append(evaluate(problem, plan_from_mapping(problem, part.stage_of, m)).objective)
    np.testing.assert_allclose(ours, theirs, rtol=1e-12)
    assert max(theirs) > min(theirs) * (1 + 1e-6)


@settings(max_examples=6, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.too_slow])
@given(**_CASE)
def test_swap_search_beats_the_eq5_optima_and_is_a_local_optimum(
        seed: int, n_ops: int, ratio: float, pair: tuple[int, int]) -> None:
    """From the best of the Eq. 6 / Eq. 7 optima, CS and p2p-first, the swap search ends no
    slower than any of them (simulated), with no improving swap left, and within 10% of the
    simulator's best over all mappings on these 4-device instances."""
    problem = _problem(seed, n_ops, ratio)
    s_n, r_n = pair
    part, stages = _partition(problem, s_n, r_n)
    topo = Topology.from_cluster(problem.cluster)
    starts = [cs_mapping(stages), p2p_first_mapping(stages)]
    for kind in ("p2p", "allreduce"):
        res = map_stages(stages, topo, instantiation=kind, time_limit=5)  # type: ignore[arg-type]
        assert res.device_of is not None
        starts.append(res.device_of)
    sim = MappingSimulator(problem, part.stage_of, starts[0], plan_from_mapping)
    start = min(starts, key=sim.score)
    best, value, _ = swap_search(sim.score, start)
    assert value <= min(sim.score(m) for m in starts) * (1 + 1e-12)
    flat = best.reshape(-1)
    for i, j in itertools.combinations(range(flat.size), 2):
        other = flat.copy()
        other[i], other[j] = other[j], other[i]
        assert sim.score(other.reshape(best.shape)) >= value * (1 - 1e-9)
    assert value <= 1.10 * min(sim.score(m) for m in _all_mappings(r_n, s_n))


def test_parmesan_reports_the_swap_search_and_paper_only_skips_it() -> None:
    """The method keeps the swap search's plan when it simulates faster, names it, and
    ``paper_only`` / ``sim_search=false`` leave it out."""
    found = False
    for seed in (6, 0, 1):  # seed 6: the swaps win (measured); 0 and 1: they do not
        problem = _problem(seed, 10, 40.0, gpus=4)
        default = solve(problem, "parmesan", stages=4, replicas=2)
        off = solve(problem, "parmesan", stages=4, replicas=2, sim_search=False)
        alone = solve(problem, "parmesan", stages=4, replicas=2, paper_only=True)
        assert default.objective <= off.objective * (1 + 1e-12)
        assert off.stats["mapping_pick"] != "sim-swaps"
        assert alone.stats["mapping_pick"] != "sim-swaps"
        if default.stats["mapping_pick"] == "sim-swaps":
            found = True
            assert default.objective < off.objective
            assert "swaps scored by the simulator" in default.provenance
    assert found, "no instance where the swap search improved on the Eq. 5 candidates"
