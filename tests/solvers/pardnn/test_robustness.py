"""Paper 2's methods on small random DAGs: no crash, and the objective is the evaluator's.

The instances are the shapes that crashed them once: fewer linear clusters than devices
(a chain or a narrow DAG on 2-3 accelerators), pinned nodes outside every cluster, and ops
that only the CPU runs (or no device of the cluster runs).
"""

from __future__ import annotations

import numpy as np
import pytest

from dnnpart import Objective, Status, evaluate
from dnnpart.evaluate.diagnose import unrunnable_node
from dnnpart.problem import MAKESPAN, Problem
from dnnpart.solvers import available_methods, solve
from dnnpart.testing.strategies import seeded_makespan_problems, seeded_problems

#: Registry methods for the makespan objective, but the exhaustive oracle: paper 2's
#: PARDNN and its baselines; ``pardnn`` once more with ``paper_only`` (another code path).
RUNS = [(m.name, {}) for m in available_methods()
        if MAKESPAN in m.objectives and m.name != "brute-force"] + [("pardnn", {"paper_only": True})]
IDS = [name + ("-paper-only" if opts else "") for name, opts in RUNS]

#: 40 DAGs of 3-7 nodes on 2-3 identical accelerators, memory caps on 70% of them.
DAGS = seeded_makespan_problems(40, seed=27, min_nodes=3, max_nodes=7, training=False)
#: 40 DAGs of 3-7 nodes on 1-3 accelerators and at most one CPU, 30% of ops without an
#: accelerator time, some pinned to the CPU.
CPU_ONLY_OPS = seeded_problems(40, seed=2027, min_nodes=3, max_nodes=7, max_accelerators=3,
                               max_cpus=1, unsupported_prob=0.3, objective=Objective(kind=MAKESPAN))


def _fewer_linear_clusters_than_accelerators(p: Problem) -> bool:
    from dnnpart.solvers.pardnn.baselines.linear_clustering import linear_clusters
    from dnnpart.solvers.pardnn.method import Layout, _local_fixed, problem_costs

    costs, lay = problem_costs(p)
    _, ptr, _, _ = linear_clusters(costs, free=_local_fixed(p.graph, Layout(p)) < 0)
    return lay.k > 1 and len(ptr) - 1 < lay.k


def test_the_instances_hold_the_shapes_that_crashed() -> None:
    assert all(3 <= p.graph.n_nodes <= 7 and 2 <= p.cluster.n_devices <= 3 for p in DAGS)
    assert sum(_fewer_linear_clusters_than_accelerators(p) for p in DAGS) >= 3
    nowhere = [unrunnable_node(p) is not None for p in CPU_ONLY_OPS]
    cpu_only = [not bad and bool(p.cluster.cpus) and not np.isfinite(p.graph.time_on("accelerator")).all()
                for p, bad in zip(CPU_ONLY_OPS, nowhere, strict=True)]
    assert sum(nowhere) >= 3 and sum(cpu_only) >= 3


@pytest.mark.parametrize(("method", "options"), RUNS, ids=IDS)
def test_no_crash_and_the_objective_is_the_evaluators(method: str, options: dict[str, bool]) -> None:
    for p in DAGS:
        r = solve(p, method, **options)
        assert r.plan is not None
        assert r.objective == evaluate(p, r.plan).objective


@pytest.mark.parametrize(("method", "options"), RUNS, ids=IDS)
def test_ops_only_the_cpu_runs_go_to_it_and_ops_nothing_runs_make_it_infeasible(
        method: str, options: dict[str, bool]) -> None:
    for p in CPU_ONLY_OPS:
        r = solve(p, method, **options)
        if unrunnable_node(p) is not None:  # no placement runs every op: a proof, no plan
            assert r.status is Status.INFEASIBLE and r.plan is None
            continue
        assert r.plan is not None
        ev = evaluate(p, r.plan)
        assert r.objective == ev.objective
        assert not any("does not support" in v or "colocat" in v for v in ev.violations), ev.violations
        assert (r.status is Status.FEASIBLE) == ev.feasible
