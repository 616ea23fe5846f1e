"""A plan's stages in the model's language: the rows of the report's "Stages" table.

A stage is the work of one device; stages are in pipeline order, the order in which the
graph's nodes (model order for an imported model) first use each device. Each stage names the
module-path range of its forward operators (first and last in model order), so that a plan of
a real model reads as "``conv1`` … ``layer2.3.relu`` on acc0".
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from dnnpart.evaluate import Evaluation
from dnnpart.plan import Plan
from dnnpart.problem import Problem

if TYPE_CHECKING:
    from dnnpart.frontends.build import ImportedModel


@dataclass(frozen=True, slots=True, kw_only=True)
class PlanStage:
    """One device's part of a plan.

    Attributes
    ----------
    index : position in pipeline order (0 first).
    device : the device's index in the problem's cluster; ``device_name`` its name.
    nodes : graph nodes it runs (backward nodes included).
    first_module, last_module : module paths (dotted) of its first and last forward operator
        in model order; empty without an imported model.
    parameter_bytes : bytes of the parameters (and optimizer state) its nodes hold.
    forward, backward, load : predicted times (the graph's unit: ms for models) of its
        forward part, its backward part and its whole load (:class:`~dnnpart.evaluate.Evaluation`).
    """

    index: int
    device: int
    device_name: str
    nodes: int
    first_module: str
    last_module: str
    parameter_bytes: float
    forward: float
    backward: float
    load: float

    @property
    def modules(self) -> str:
        """``first … last`` (one path when they agree; empty when unknown)."""
        if self.first_module == self.last_module:
            return self.first_module
        return f"{self.first_module} … {self.last_module}"


def plan_stages(problem: Problem, plan: Plan, evaluation: Evaluation,
                imported: ImportedModel | None = None) -> tuple[PlanStage, ...]:
    """The stages of ``plan`` in pipeline order (see the module docstring).

    Examples
    --------
    >>> from dnnpart import evaluate
    >>> from dnnpart.testing import chain_problem
    >>> p = chain_problem([1.0, 2.0, 3.0], n_accelerators=2)
    >>> plan = Plan(assignment=[1, 1, 0])
    >>> [(s.device_name, s.nodes, s.load) for s in plan_stages(p, plan, evaluate(p, plan))]
    [('acc1', 2, 3.0), ('acc0', 1, 3.0)]
    """
    names = [d.name for d in problem.cluster.devices]
    order = list(dict.fromkeys(int(d) for d in plan.assignment))
    n_nodes = np.bincount(plan.assignment, minlength=len(names))
    params = np.zeros(len(names))
    if problem.graph.param_bytes is not None:
        np.add.at(params, plan.assignment, problem.graph.param_bytes)
    stages = []
    for index, d in enumerate(order):
        first, last = _module_range(problem, plan, imported, d)
        stages.append(PlanStage(
            index=index, device=d, device_name=names[d], nodes=int(n_nodes[d]),
            first_module=first, last_module=last, parameter_bytes=float(params[d]),
            forward=float(evaluation.forward_load[d]), backward=float(evaluation.backward_load[d]),
            load=float(evaluation.load[d])))
    return tuple(stages)


def _module_range(problem: Problem, plan: Plan, imported: ImportedModel | None,
                  device: int) -> tuple[str, str]:
    if imported is None:
        return "", ""
    g = problem.graph
    index = {n: i for i, n in enumerate(g.names)}
    paths = [
        op.module_path.replace("/", ".") or "(top level)"
        for op in imported.ir.ops
        if op.name in index and int(plan.assignment[index[op.name]]) == device
        and not g.is_backward[index[op.name]]
    ]
    if not paths:
        return "", ""
    return paths[0], paths[-1]
