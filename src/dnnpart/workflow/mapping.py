"""Map a pipeline's stage replicas onto a topology: Parmesan's phase 2 on a given stage graph
(``dnnpart map STAGES.json --cluster SPEC``).

The stage graph (:mod:`dnnpart.io.stages_file`) has ``S`` stages of ``R`` replicas each; the
cluster's ``S * R`` accelerators (routed matrices) receive them. ``mapping="parmesan"`` is the
exact search (within ``eps``, when it finishes); ``cs``, ``p2p-first`` and ``random`` are the
paper's baselines, all scored by the max stage time of Eq. 6 (point to point) or Eq. 7 (ring
all-reduce), ``instantiation="auto"`` choosing between them.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from dnnpart.devices.cluster import Cluster
from dnnpart.errors import UsageError
from dnnpart.stages import PipelineStages

MAPPINGS = ("parmesan", "cs", "p2p-first", "random")
INSTANTIATIONS = ("auto", "p2p", "allreduce")


@dataclass(frozen=True, slots=True, kw_only=True, eq=False)
class StageMapping:
    """A mapping of stage replicas onto devices.

    Attributes
    ----------
    payload : JSON-ready (``dnnpart map --json``): mapping, status, instantiation, objective,
        bound, gap, the baselines' objectives and, with a mapping, ``device_of`` (device names,
        a row per pipeline copy) and ``rings`` (a stage's devices in ring order).
    baselines : the max stage time of each baseline mapping (``inf`` where it needs a
        missing link).
    device_of : accelerator index of each (copy, stage); ``None`` when none was found.
    """

    payload: dict[str, Any]
    baselines: dict[str, float]
    device_of: Any

    @property
    def found(self) -> bool:
        return self.device_of is not None


T = TypeVar("T")


def _within_limit(what: str, work: Callable[[], T], time_limit: float | None) -> tuple[T, float]:
    """``work()`` under the time limit and Ctrl-C, with the seconds it took: building a large
    topology, or the mapper's tables on thousands of devices, stops like a search (exit 1 at
    the limit, naming ``what``; 130 on Ctrl-C)."""
    import time

    from dnnpart import interrupt
    from dnnpart.errors import ProblemTooLargeError

    start = time.monotonic()
    try:
        with interrupt.guard(time_limit):
            done = work()
    except interrupt.Stopped:  # a stop point, or the backstop between them
        if interrupt.stop_reason() == interrupt.TIME_LIMIT:
            raise ProblemTooLargeError(f"{what} did not end within the time limit") from None
        raise KeyboardInterrupt from None
    return done, time.monotonic() - start


def _routed(spec: str, time_limit: float | None) -> tuple[Cluster, float]:
    """``--cluster SPEC`` resolved (and routed) within the time limit."""
    from dnnpart.cost import resolve_cluster

    return _within_limit("--cluster: building the topology",
                         lambda: resolve_cluster(spec).cluster, time_limit)


def map_stage_graph(
    stages: PipelineStages | str | Path,
    cluster: Cluster | str,
    *,
    mapping: str = "parmesan",
    instantiation: str = "auto",
    eps: float = 1e-3,
    time_limit: float | None = None,
    threads: int = 1,
    deterministic: bool = False,
    node_limit: int | None = None,
    seed: int = 0,
) -> StageMapping:
    """Map the replicas of ``stages`` (a stage graph or its file) onto ``cluster``'s accelerators.

    Raises
    ------
    ValueError
        The cluster does not have ``S * R`` accelerators; an unknown mapping or instantiation.

    Examples
    --------
    >>> from dnnpart.stages import PipelineStages
    >>> st = PipelineStages(compute=[1.0, 1.0], param_bytes=[1e6, 1e6],
    ...                     comm_bytes=[[0, 1e6], [0, 0]], replicas=2)
    >>> m = map_stage_graph(st, "mesh2d:x=2,y=2", deterministic=True)
    >>> m.payload["status"], len(m.payload["rings"])
    ('optimal', 2)
    """
    from dnnpart.io.stages_file import read_stages
    from dnnpart.pricing.stages import max_stage_time
    from dnnpart.solvers.parmesan import Topology, map_stages
    from dnnpart.solvers.parmesan.baselines import cs_mapping, p2p_first_mapping, random_mapping
    from dnnpart.solvers.parmesan.cost import Instantiation, choose_instantiation

    graph = stages if isinstance(stages, PipelineStages) else read_stages(stages)
    devices, spent = (cluster, 0.0) if isinstance(cluster, Cluster) else _routed(cluster, time_limit)
    if time_limit is not None:  # routing spent some of it
        time_limit = max(1e-3, time_limit - spent)
    topo = Topology.from_cluster(devices)
    if topo.n_devices != graph.n_devices:
        raise UsageError(f"--cluster: the stage graph needs S * R = {graph.n_stages} * "
                         f"{graph.replicas} = {graph.n_devices} accelerators, the cluster has "
                         f"{topo.n_devices}")
    if mapping not in MAPPINGS:
        raise UsageError(f"--set mapping: expected parmesan, cs, p2p-first or random, got {mapping!r}")
    if instantiation not in INSTANTIATIONS:
        raise UsageError(f"--set instantiation: expected auto, p2p or allreduce, got {instantiation!r}")
    kind: Instantiation = choose_instantiation(graph) if instantiation == "auto" \
        else ("p2p" if instantiation == "p2p" else "allreduce")
    baselines = {"cs": cs_mapping(graph), "p2p-first": p2p_first_mapping(graph),
                 "random": random_mapping(graph, seed)}
    base_obj = {k: max_stage_time(graph, topo, m, kind) for k, m in baselines.items()}
    if mapping == "parmesan":
        # the search keeps its incumbent at the limit; its tables (minutes on thousands of
        # devices) stop at it
        res, _ = _within_limit("map: the mapper's tables", lambda: map_stages(
            graph, topo, instantiation=kind, eps=eps, time_limit=time_limit, threads=threads,
            deterministic=deterministic, node_limit=node_limit, seed=seed), time_limit)
        device_of = res.device_of
        payload: dict[str, Any] = {
            "mapping": mapping, "status": res.status.value, "instantiation": res.instantiation,
            "objective": res.objective if math.isfinite(res.objective) else None,
            "bound": res.bound if math.isfinite(res.bound) else None,
            "gap": res.gap if math.isfinite(res.gap) else None,
            "wall_time_s": res.wall_time_s, "search_nodes": res.n_nodes}
    else:
        device_of = baselines[mapping]
        value = base_obj[mapping]
        payload = {"mapping": mapping, "status": "heuristic", "instantiation": kind,
                   "objective": value if math.isfinite(value) else None, "bound": None,
                   "gap": None}
    names = [devices.devices[a].name for a in devices.accelerators]
    payload["baselines"] = {k: (v if math.isfinite(v) else None) for k, v in base_obj.items()}
    if device_of is not None:
        payload["device_of"] = [[names[int(d)] for d in row] for row in device_of]
        payload["rings"] = [[names[int(d)] for d in device_of[:, s]]
                            for s in range(graph.n_stages)]
    return StageMapping(payload=payload, baselines=base_obj, device_of=device_of)
