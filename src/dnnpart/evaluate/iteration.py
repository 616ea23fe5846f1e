"""The ``iteration`` objective (paper 3): Eq. 1's t_O of a layer-wise strategy on the cluster.

``evaluate`` reads the plan's per-layer :class:`~dnnpart.plan.LayerConfig` (degrees and tile
devices); a plan without them is the strategy that runs every layer whole on its assigned
device. The cost functions are those of :mod:`dnnpart.layerwise` (t_C roofline of the
devices' :attr:`~dnnpart.devices.cluster.Device.spec`, t_X over tile intersection volumes, t_S
parameter server), over the cluster's derived ``(d, d)`` bandwidth matrix (the routing rule of
:mod:`dnnpart.devices.routing`) and the layer graph scaled to ``batch x d`` samples.

Choices: all devices of the cluster count (``d = n_devices``) and must be accelerators (the
paper's GPUs) priced by one spec (Eq. 1's t_C takes one roofline); the value is reported in
the cluster's time unit (ms by default); the plan's
``assignment`` is ignored where ``layer_configs`` are given (it holds the first tiles'
devices). Paper 3's model has no memory term, so no memory constraint applies.
"""

from __future__ import annotations

from typing import Any

from dnnpart.errors import UsageError
from dnnpart.plan import LayerConfig, Plan
from dnnpart.problem import Problem

__all__ = ["iteration_configs", "iteration_setting", "iteration_value"]


def iteration_setting(problem: Problem) -> tuple[Any, Any, Any]:
    """``(layer graph on batch x d samples, device roofline, bandwidth matrix)`` of a problem.

    Examples
    --------
    >>> from dnnpart.cost import resolve_cluster
    >>> from dnnpart.layerwise.graphs import layer_graph
    >>> from dnnpart.problem import Objective
    >>> p = Problem(graph=layer_graph("lenet5"), cluster=resolve_cluster("4xP100").cluster,
    ...             objective=Objective(kind="iteration"))
    >>> g, dev, bw = iteration_setting(p)
    >>> g.batch, dev.name, bw.shape
    (128, 'P100-16GB', (4, 4))
    """
    import numpy as np

    from dnnpart.devices.cluster import ACCELERATOR
    from dnnpart.layerwise.graphs import layers_of

    cluster = problem.cluster
    if any(d.kind != ACCELERATOR for d in cluster.devices):
        raise UsageError("the iteration objective needs a cluster of accelerators only (paper 3's GPUs)")
    specs = {d.spec for d in cluster.devices}
    if None in specs:
        raise UsageError("the iteration objective prices layers by the devices' roofline; the cluster's "
                         "devices carry no spec (give --cluster as NxPRESET, e.g. 4xP100, or a "
                         "generator with device=PRESET)")
    if len(specs) > 1:
        raise UsageError("the iteration objective prices every GPU with one roofline; the cluster mixes "
                         f"{', '.join(sorted(s.name for s in specs if s is not None))}")
    layers = layers_of(problem.graph).with_batch(problem.objective.batch * cluster.n_devices)
    bandwidth = np.array(cluster.bandwidth, dtype=np.float64)
    return layers, cluster.devices[0].spec, bandwidth


def iteration_configs(problem: Problem, plan: Plan) -> tuple[LayerConfig, ...]:
    """The plan's layer configurations, or one whole tile per layer on its assigned device."""
    if plan.layer_configs is not None:
        return plan.layer_configs
    ones = (1,) * 4
    return tuple(LayerConfig(ones, (int(d),)) for d in plan.assignment)


def iteration_value(problem: Problem, plan: Plan) -> tuple[float, dict[str, Any]]:
    """t_O in the cluster's time unit and figures (seconds, bytes per step, throughput).

    Examples
    --------
    >>> from dnnpart.cost import resolve_cluster
    >>> from dnnpart.layerwise.graphs import layer_graph
    >>> from dnnpart.problem import Objective
    >>> p = Problem(graph=layer_graph("lenet5"), cluster=resolve_cluster("2xP100").cluster,
    ...             objective=Objective(kind="iteration"))
    >>> value, figures = iteration_value(p, Plan(assignment=[0] * 8))
    >>> figures["bytes_per_step"], value == figures["t_o_s"] * 1e3
    (0.0, True)
    """
    from dnnpart.layerwise.strategy import strategy_tables
    from dnnpart.layerwise.tables import communication_bytes, iteration_time

    layers, device, bandwidth = iteration_setting(problem)
    configs = iteration_configs(problem, plan)
    tables = strategy_tables(layers, configs, device, bandwidth)
    zeros = [0] * len(layers)
    t_o = iteration_time(tables, zeros)
    moved = communication_bytes(tables, zeros)
    figures = {
        "t_o_s": t_o,
        "bytes_per_step": moved,
        "global_batch": layers.batch,
        "throughput_samples_per_s": layers.batch / t_o if t_o > 0 else float("inf"),
    }
    return t_o / problem.cluster.time_unit_s, figures
