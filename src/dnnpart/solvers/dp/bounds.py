"""Work-based bounds of the throughput DP: a lower bound on its optimum, and per ideal the
work that the work bound of :func:`~dnnpart.solvers.dp.kernels.fill_bounded` tests."""

from __future__ import annotations

import math

import numpy as np
import numpy.typing as npt

from dnnpart.graph.stage_graph import StageGraph
from dnnpart.problem import Problem
from dnnpart.solvers.dp.devices import DeviceModel, device_model
from dnnpart.solvers.dp.ideals import IdealLattice
from dnnpart.solvers.dp.lattice_kernels import ideal_sums


def node_work(model: DeviceModel) -> tuple[npt.NDArray[np.float64], float] | None:
    """Per original node, a lower bound on its share of some device's load in accelerator
    time units, and ``inv_ratio`` (what a CPU takes in those units per unit of load).

    ``None`` when some node runs nowhere (no bound then). See
    :func:`~dnnpart.solvers.dp.kernels.cell_is_live`.

    Examples
    --------
    >>> from dnnpart.testing import chain_problem
    >>> p = chain_problem([4, 1], n_accelerators=2, n_cpus=1)  # CPUs 10x slower
    >>> work, inv_ratio = node_work(device_model(p))
    >>> work.tolist(), inv_ratio
    ([4.0, 1.0], 0.1)
    """
    acc, cpu = model.acc_time, model.cpu_time
    both = np.isfinite(acc) & np.isfinite(cpu) & (acc > 0)
    ratio = float(np.min(cpu[both] / acc[both])) if both.any() else 1.0
    if ratio > 0:
        # a CPU with load L has done L / ratio units: every node's CPU time is >= ratio x its
        # accelerator time
        node = np.where(np.isfinite(acc), acc, cpu / ratio)
        inv_ratio = 1.0 / ratio
    else:  # a node free on a CPU: CPUs bound nothing
        node = np.where(np.isfinite(acc), acc, 0.0)
        inv_ratio = math.inf
    if not np.all(np.isfinite(node)) or not math.isfinite(float(node.sum())):
        return None
    return node, inv_ratio


def work_bound(
    model: DeviceModel, stage: StageGraph, lattice: IdealLattice,
) -> tuple[npt.NDArray[np.float64], float, float] | None:
    """Per ideal its work (:func:`node_work` summed), the total, and ``inv_ratio``: the
    ``bound`` argument of :func:`~dnnpart.solvers.dp.kernels.fill_bounded` (``None`` as
    for :func:`node_work`).

    Examples
    --------
    >>> from dnnpart.graph.stage_graph import build_stage_graph
    >>> from dnnpart.solvers.dp.ideals import enumerate_stage_ideals
    >>> from dnnpart.testing import chain_problem
    >>> p = chain_problem([4, 1], n_accelerators=2)
    >>> sg = build_stage_graph(p.graph)
    >>> work, total, inv_ratio = work_bound(device_model(p), sg, enumerate_stage_ideals(sg))
    >>> work.tolist(), total
    ([0.0, 4.0, 5.0], 5.0)
    """
    per_node = node_work(model)
    if per_node is None:
        return None
    node, inv_ratio = per_node
    inside = stage.stage_of >= 0  # a peeled graph's stage_of is -1 on the nodes left out
    per_stage = np.bincount(stage.stage_of[inside], weights=node[inside],
                            minlength=stage.n_stage_nodes)
    work = ideal_sums(lattice.parent, lattice.added, per_stage)
    return work, float(per_stage.sum()), inv_ratio


def load_lower_bound(problem: Problem, stage: StageGraph) -> float:
    """A lower bound on the max-load of every split of ``stage`` (the DP's optimum).

    The larger of the work bound (all work spread over all devices, see :func:`node_work`)
    and the least compute of the heaviest stage node (it sits on one device whole).

    Examples
    --------
    >>> from dnnpart.graph.stage_graph import build_stage_graph
    >>> from dnnpart.testing import chain_problem
    >>> p = chain_problem([4, 1, 1, 4], n_accelerators=2)
    >>> load_lower_bound(p, build_stage_graph(p.graph))
    5.0
    """
    model = device_model(problem)
    per_node = node_work(model)
    lower = 0.0
    if per_node is not None:
        node, inv_ratio = per_node
        cap = len(model.accelerators) + (len(model.cpus) * inv_ratio if model.cpus else 0.0)
        if cap > 0:
            lower = float(node.sum()) / cap
    acc = np.bincount(stage.stage_of, weights=np.where(np.isfinite(model.acc_time),
                                                       model.acc_time, 0.0),
                      minlength=stage.n_stage_nodes)
    cpu = np.bincount(stage.stage_of, weights=np.where(np.isfinite(model.cpu_time),
                                                       model.cpu_time, 0.0),
                      minlength=stage.n_stage_nodes)
    acc_bad = np.bincount(stage.stage_of, weights=~np.isfinite(model.acc_time),
                          minlength=stage.n_stage_nodes) > 0
    cpu_bad = np.bincount(stage.stage_of, weights=~np.isfinite(model.cpu_time),
                          minlength=stage.n_stage_nodes) > 0
    acc = np.where(acc_bad | (len(model.accelerators) == 0), np.inf, acc)
    cpu = np.where(cpu_bad | (len(model.cpus) == 0), np.inf, cpu)
    heaviest = float(np.minimum(acc, cpu).max()) if stage.n_stage_nodes else 0.0
    return max(lower, heaviest) if math.isfinite(heaviest) else lower
