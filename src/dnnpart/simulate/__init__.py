"""Simulators below the solvers: op-level emulation, pipelines, Chrome traces.

API (every function takes a :class:`~dnnpart.graph.core.Graph` and a
:class:`~dnnpart.devices.cluster.Cluster`, whose matrices come from the one routing rule of
:mod:`dnnpart.devices.routing`; times are in the graph's unit, ``cluster.time_unit_s``
seconds each):

* :func:`emulate_ops` ``(graph, cluster, assignment, *, memory=True, curves=True,
  contention=False) -> OpSchedule`` -- paper 2's framework-scheduler emulation: per-node
  ``start`` / ``finish`` / ``ready``, ``makespan``, ``peak_memory`` per device (Eq. 2),
  ``memory`` curves, ``transfers``; ``.timeline()`` gives a :class:`Timeline`.
* :func:`emulate_makespan` ``(graph, cluster, assignment, *, contention=False) ->
  (makespan, peaks)`` -- the fast path for heuristics (no curves, no timeline; about 0.3 s
  for 200k nodes / 1M edges on 16 devices after JIT warm-up).
* :func:`emulate_plan` ``(problem, plan_or_assignment, **options)`` -- the same on a
  :class:`~dnnpart.problem.Problem` (what ``Objective(kind="makespan")`` evaluates).
* :func:`simulate_pipeline` ``(stages, cluster, *, microbatches, schedule, recompute, ...)
  -> PipelineResult`` -- synchronous pipeline (GPipe / 1F1B, replicas, ring all-reduce,
  recomputation) over :class:`~dnnpart.stages.Stage` descriptions; :func:`stages_from_plan` builds them from a
  contiguous plan (paper 1's plans simulate as pipelines).
* :func:`replay_strategy` ``(layer_graph, layer_configs, device_spec, bandwidth) ->
  LayerwiseReplay`` -- paper 3's layer-wise strategies replayed task by task (forward and
  backward per tile, transfers on inbound ports, parameter-server sync) beside Eq. 1's t_O.
* :func:`chrome_trace` / :func:`write_chrome_trace` -- any Timeline as a Chrome / Perfetto
  trace (``ts`` / ``dur`` in microseconds).

Semantics and choices: ``docs/simulate.md``.
"""

from dnnpart.simulate.layerwise import LayerwiseReplay, replay_strategy
from dnnpart.simulate.memory import tensor_bytes, track_memory
from dnnpart.simulate.ops import (
    OpSchedule,
    emulate_makespan,
    emulate_ops,
    emulate_plan,
    transfer_bytes,
)
from dnnpart.simulate.pipeline import SCHEDULES, PipelineResult, simulate_pipeline
from dnnpart.simulate.stages import stages_from_plan
from dnnpart.simulate.timeline import MemoryCurve, Timeline
from dnnpart.simulate.trace import chrome_trace, write_chrome_trace
from dnnpart.stages import Stage, StageEdge

__all__ = [
    "SCHEDULES",
    "LayerwiseReplay",
    "MemoryCurve",
    "OpSchedule",
    "PipelineResult",
    "Stage",
    "StageEdge",
    "Timeline",
    "chrome_trace",
    "emulate_makespan",
    "emulate_ops",
    "emulate_plan",
    "replay_strategy",
    "simulate_pipeline",
    "stages_from_plan",
    "tensor_bytes",
    "track_memory",
    "transfer_bytes",
    "write_chrome_trace",
]
