"""The simulated objective of a mapping, and a swap search under it (our addition to phase 2).

Paper 4's mapper minimises Eq. 5 under Eq. 6 (compute + inter-stage transfers) or Eq. 7
(compute + ring all-reduce), picked by the Sec. 5.2 rule. The pipeline simulator
(:func:`dnnpart.simulate.simulate_pipeline`, the objective every plan is reported with)
disagrees with both about which mapping is better, for three reasons measured on ResNet-50 /
two-level hierarchies (``docs/methods/parmesan.md``, "Mapping objective vs simulator"):

* each instantiation drops the other kind of communication: Eq. 6 spreads a stage's replicas
  over machines (its all-reduce crosses the slow links, which Eq. 6 never sees), Eq. 7 spreads
  a pipeline copy over machines;
* Eq. 5 is a steady-state max over stages; with 4 micro-batches per step the step is mostly
  pipeline fill and drain, so the transfers on the critical path add up (a sum, not a max),
  while the simulator overlaps transfers with compute (they delay, they do not occupy a device);
* the all-reduce runs once per step, after the stage's last backward (overlapping the backward
  of earlier stages), while Eq. 7 adds it to a per-micro-batch stage time.

:class:`MappingSimulator` scores a mapping by the simulator itself (the stages, edges and bytes
of the partition are fixed; a mapping only moves the devices), so a score here equals
``evaluate(problem, plan_from_mapping(...)).objective``;
:func:`swap_search` improves a mapping by swapping two vertices' devices under that score.
"""

from __future__ import annotations

import dataclasses
import math
import time
from collections.abc import Callable, Sequence

import numpy as np

from dnnpart.plan import Plan
from dnnpart.problem import Problem
from dnnpart.stages import IntArray, Stage, StageEdge

__all__ = ["SIM_SWAPS", "MappingSimulator", "swap_search"]

#: Candidate name of the swap search's mapping (``stats["mapping_pick"]``).
SIM_SWAPS = "sim-swaps"


class MappingSimulator:
    """Simulated time per sample of ``(R, S)`` mappings of one partition.

    Built once from a reference plan of the partition (any mapping): the stages' times, bytes
    and dependencies do not depend on the mapping, only their devices do.

    Parameters
    ----------
    problem : the pipeline problem.
    stage_of : partition stage of every graph node.
    reference : a ``(R, S)`` mapping (topology numbering: the ``i``-th accelerator).
    plan_of : ``(problem, stage_of, device_of) -> Plan`` (the solver's plan builder).

    Examples
    --------
    >>> from dnnpart.testing import chain_problem
    >>> from dnnpart.solvers.parmesan.candidates import plan_from_mapping
    >>> p = chain_problem([1.0, 1.0], n_accelerators=2)
    >>> sim = MappingSimulator(p, np.array([0, 1]), np.array([[0, 1]]), plan_from_mapping)
    >>> sim.score(np.array([[1, 0]])) == sim.score(np.array([[0, 1]]))
    True
    """

    def __init__(self, problem: Problem, stage_of: IntArray, reference: IntArray,
                 plan_of: Callable[[Problem, IntArray, IntArray], Plan]) -> None:
        from dnnpart.simulate import stages_from_plan

        self.problem = problem
        ref = np.asarray(reference, dtype=np.int64)
        acc = np.asarray(problem.cluster.accelerators, dtype=np.int64)
        stages, edges = stages_from_plan(problem, plan_of(problem, stage_of, ref))
        # simulator stage i -> partition stage: the one whose copy 0 sits on its first device
        by_device = {int(acc[ref[0, s]]): s for s in range(ref.shape[1])}
        self._part_of = [by_device[st.devices[0]] for st in stages]
        self._stages: list[Stage] = stages
        self._edges: Sequence[StageEdge] = edges
        self._acc = acc

    def score(self, device_of: IntArray) -> float:
        """Simulated time per sample (the pipeline objective) of a ``(R, S)`` mapping."""
        from dnnpart.simulate import simulate_pipeline

        dev = self._acc[np.asarray(device_of, dtype=np.int64)]
        stages = [dataclasses.replace(st, devices=tuple(int(d) for d in dev[:, s]))
                  for st, s in zip(self._stages, self._part_of, strict=True)]
        obj = self.problem.objective
        r = simulate_pipeline(stages, self.problem.cluster, edges=self._edges,
                              microbatches=obj.microbatches, schedule=obj.schedule,
                              recompute=obj.recompute, training=self.problem.graph.is_training)
        return float(r.time_per_sample)


def swap_search(score: Callable[[IntArray], float], start: IntArray, *,
                time_limit: float | None = None, max_evals: int = 20_000,
                ) -> tuple[IntArray, float, int]:
    """First-improvement local search over swaps of two vertices' devices.

    Returns the mapping, its score and the number of scores computed. Stops at a local optimum
    (no swap improves by more than a relative ``1e-9``), at ``time_limit`` seconds or after
    ``max_evals`` scores. Swapping two replicas of one stage changes only its ring order; those
    swaps are tried too (the ring follows the copy order).

    Examples
    --------
    >>> cost = lambda m: float(abs(m[0, 0] - 2) + abs(m[0, 1] - 0) + abs(m[0, 2] - 1))
    >>> best, value, _ = swap_search(cost, np.array([[0, 1, 2]]))
    >>> best.tolist(), value
    ([[2, 0, 1]], 0.0)
    """
    clock = time.perf_counter()
    cur = np.array(start, dtype=np.int64)
    flat = cur.reshape(-1)
    value = score(cur)
    evals = 1
    n = flat.size
    improved = True
    while improved:
        improved = False
        for i in range(n):
            for j in range(i + 1, n):
                if evals >= max_evals or (time_limit is not None
                                          and time.perf_counter() - clock > time_limit):
                    return cur, value, evals
                flat[i], flat[j] = flat[j], flat[i]
                v = score(cur)
                evals += 1
                if v < value * (1 - 1e-9) or (math.isinf(value) and v < value):
                    value, improved = v, True
                else:
                    flat[i], flat[j] = flat[j], flat[i]
    return cur, value, evals
