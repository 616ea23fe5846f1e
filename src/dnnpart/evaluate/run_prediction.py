"""What the cost model predicts ``dnnpart run`` measures: per stage, forward and backward
time per step and peak memory; the step time.

The prediction is for the run's conditions, not the plan's (choices, also in ``docs/run.md``):

* **Times** are the plan's graph times on its cluster (the stage's nodes on its device),
  and on the last stage ``run``'s loss (:func:`run_loss_seconds`), per micro-batch times
  ``m``, forward and backward apart; a training stage's backward also adds each
  micro-batch's gradients into those of the ones before (autograd's accumulation: ``m - 1``
  in-place adds per parameter per step, :func:`accumulation_seconds`; the schedule's one
  scaling pass per step is in the step, not in a backward); an optimizer's update operators (a plan made with
  ``--optimizer``) are left out, as ``run`` applies no optimizer. The step time is the
  pipeline simulator's for the run's schedule, micro-batches and recomputation (the number
  ``plan`` and ``simulate`` print for the same); inference steps are simulated forward
  only. A plan whose devices are not a chain has no simulated step.
* **Memory** of a training stage: the stages model's parts
  (:func:`dnnpart.pricing.chain.stage_memory` with no optimizer state) and what the runtime
  adds, from one micro-batch's walk through the stage
  (:func:`dnnpart.pricing.liveness.working_set`: stash ``S``, peak ``P``):

  - ``weights`` ``W``, ``gradients`` ``W``, ``activations`` ``f A`` (``f`` micro-batches in
    flight, :func:`~dnnpart.pricing.chain.in_flight`; ``A`` the stash the backward reads,
    :func:`~dnnpart.pricing.chain.node_activation_bytes`): the stages model;
  - ``held``: ``f (S - A)``, values the schedule keeps until a micro-batch's backward beyond
    what the backward reads (the stage's outputs, the model output the loss reads);
  - ``working``: ``P - S``, one micro-batch's gradients and temporaries at their peak, a
    convolution's CPU workspace included (:func:`cpu_scratch`);
  - ``buffers``: ``torch.distributed.pipelining`` allocates a receive buffer per micro-batch
    for the activations a stage receives and for the gradients of those it sends, kept
    across steps: ``m (I_in + I_out)``;
  - ``loss`` (last stage): ``run``'s loss is ``F.mse_loss`` against a target, whose result
    keeps an output-sized buffer (a 0-d tensor over the unreduced storage), and the schedule
    keeps every micro-batch's loss until the step ends: ``m Y``.

  With recomputation (``run`` wraps each stage in ``torch.utils.checkpoint``) a micro-batch's
  forward keeps only the stage's inputs (the receive buffers: no bytes of their own) and the
  outputs the schedule holds, ``held`` ``f O`` (``O`` the walk's ``leaving``); its backward
  runs the forward again and then the backward, ``working`` ``P - O``; backward time is the
  forward's plus the backward's.

  An inference rank frees a value after its last reader (no autograd): ``weights``;
  ``activations``: ``P``, its operators' working set for one micro-batch (workspaces
  included), plus the values it
  receives for it (the stages model's ``1 A``, every forward output at once, is an upper
  bound the run does not reach); ``buffers``: the values it sends (to other ranks, the
  model's outputs to the first), held by their pending sends until the pass ends,
  ``(m - 1) O`` beyond the current micro-batch's; and on the first rank the collected
  ``outputs``, ``m Y``.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from dnnpart.graph.core import REFERENCE
from dnnpart.plan import Plan
from dnnpart.pricing.chain import (
    MESSAGE_KINDS,
    UP,
    F,
    boundary_bytes,
    in_flight,
    node_activation_bytes,
    positions_sum,
    recomputed_forward,
    stage_memory,
    stage_parameter_bytes,
    stage_weights,
)
from dnnpart.pricing.liveness import loss_inputs, value_bytes, working_set
from dnnpart.pricing.loads import node_times
from dnnpart.problem import Problem


@dataclass(frozen=True, slots=True)
class StagePrediction:
    """One stage (a rank): its device, forward and backward seconds per step, memory by part."""

    device: int
    name: str
    forward_s: float
    backward_s: float
    memory: dict[str, float]

    @property
    def peak_bytes(self) -> float:
        return float(sum(self.memory.values()))


@dataclass(frozen=True, slots=True)
class RunPrediction:
    """A run's prediction: its stages, the simulated step (``None``: not a chain), and whether
    every stage's device is calibrated (carries measured operator classes)."""

    stages: list[StagePrediction]
    step_s: float | None
    calibrated: bool
    devices: list[str] = field(default_factory=list)


def calibrated(problem: Problem, devices: Sequence[int]) -> bool:
    """Whether every one of ``devices`` is priced by calibrated operator classes."""
    specs = [problem.cluster.devices[d].spec for d in devices]
    return all(s is not None and bool(s.op_classes) for s in specs)


def predict_run(problem: Problem, plan: Plan, order: Sequence[int], *, training: bool,
                schedule: str, microbatches: int, output_bytes: float,
                recompute: bool = False) -> RunPrediction:
    """Predict what ``run`` measures for ``plan`` run on the devices ``order`` (one rank each,
    in pipeline order; see the module docstring). ``output_bytes``: one micro-batch's model
    output (training: the tensor the loss reads; inference: every output collected);
    ``recompute``: every stage recomputes its forward in its backward (training), up to its last
    stashed value (:func:`~dnnpart.pricing.chain.recomputed_forward`).

    Examples
    --------
    >>> from dnnpart.testing import chain_problem
    >>> p = chain_problem([1.0, 2.0, 3.0], n_accelerators=2)
    >>> r = predict_run(p, Plan(assignment=[0, 0, 1]), [0, 1], training=False, schedule="gpipe",
    ...                 microbatches=2, output_bytes=0.0)
    >>> [(s.name, s.forward_s) for s in r.stages], r.calibrated       # 2 micro-batches of 3 ms
    ([('acc0', 0.006), ('acc1', 0.006)], False)
    """
    g, cluster = problem.graph, problem.cluster
    a = plan.assignment.astype(np.int64)
    m = int(microbatches)
    unit = cluster.time_unit_s
    update = g.memory_classes() == REFERENCE  # an optimizer's update ops: run applies none
    times = np.where(update, 0.0, node_times(g, cluster, a)) * unit
    nbytes = value_bytes(g)
    index = np.full(cluster.n_devices, -1, np.int64)
    index[np.asarray(order, np.int64)] = np.arange(len(order))
    pos = index[a]
    weights = stage_weights(g, pos, len(order)) if (pos >= 0).all() else np.zeros(len(order))
    ins, outs = _carried(g, pos, len(order))
    acts = positions_sum(node_activation_bytes(g), np.where(pos >= 0, pos, 0), len(order))
    held = loss_inputs(g) if training else None  # run's loss keeps the output to its backward
    scratch = cpu_scratch(g)
    loss_fw, loss_bw = run_loss_seconds(cluster.devices[order[-1]].spec, output_bytes) if training \
        else (0.0, 0.0)
    accumulate = [accumulation_seconds(cluster.devices[d].spec, sizes)
                  for d, sizes in zip(order, stage_parameter_bytes(g, pos, len(order)), strict=True)] \
        if training and (pos >= 0).all() else [0.0] * len(order)
    # nodes off the pipeline (position -1) go to a bucket of their own, dropped
    redo = recomputed_forward(times, g, np.where(pos >= 0, pos, len(order)), len(order) + 1)[:-1] \
        if training and recompute else np.zeros(len(order))
    stages = []
    for i, d in enumerate(order):
        mine = a == d
        last = i == len(order) - 1
        fw = (float(times[mine & ~g.is_backward].sum()) + (loss_fw if last else 0.0)) * m
        bw = (float(times[mine & g.is_backward].sum()) + (loss_bw if last else 0.0)) * m \
            + (m - 1) * accumulate[i]
        ws = working_set(g, mine & ~update, nbytes, held, scratch)
        if training and recompute:
            # the forward again inside each backward, up to the last value it stashes (the
            # loss is outside the checkpointed stage): chain.recomputed_forward
            bw += float(redo[i]) * m
            f = in_flight(schedule, m, len(order), i, True)
            memory = {"weights": float(weights[i]), "gradients": float(weights[i]),
                      "held": f * ws.leaving, "working": max(ws.peak - ws.leaving, 0.0),
                      "buffers": m * float(ins[i] + outs[i]),
                      "loss": m * output_bytes if i == len(order) - 1 else 0.0}
        elif training:
            model = stage_memory(weights=float(weights[i]), activations=float(acts[i]),
                                 inputs=float(ins[i]), stage=i, n_stages=len(order),
                                 schedule=schedule, microbatches=m, recompute=False,
                                 training=True, k=0.0)
            f = model.in_flight
            memory = {"weights": model.weights, "gradients": model.gradients,
                      "activations": model.activations,
                      "held": f * max(ws.stash - float(acts[i]), 0.0),
                      "working": max(ws.peak - ws.stash, 0.0),
                      "buffers": m * float(ins[i] + outs[i]),
                      "loss": m * output_bytes if i == len(order) - 1 else 0.0}
        else:
            memory = {"weights": float(weights[i]), "activations": ws.peak + float(ins[i]),
                      # sends pending until the pass ends: none where one rank runs everything
                      "buffers": (m - 1) * ws.leaving if len(order) > 1 else 0.0,
                      "outputs": m * output_bytes if i == 0 else 0.0}
        stages.append(StagePrediction(device=int(d), name=cluster.devices[d].name,
                                      forward_s=fw, backward_s=bw, memory=memory))
    return RunPrediction(stages=stages,
                         step_s=_simulated_step(problem, plan, order, training, schedule, m, recompute,
                                                (loss_fw / unit, loss_bw / unit),
                                                [t / unit for t in accumulate]),
                         calibrated=calibrated(problem, order),
                         devices=[cluster.devices[d].name for d in order])


def cpu_scratch(g: Any, block: int | None = None) -> Any:
    """Per node, the workspace its CPU kernel holds while it runs: for a convolution, oneDNN's
    layout copies, one buffer the size of its output forward and two backward (measured with
    ``torch.profiler`` on torch 2.13), in oneDNN's blocked layout, whose channels are padded
    to a multiple of ``block`` (:func:`channel_block`: 16 with AVX-512, 8 without; a
    convolution of 8 output channels holds twice its output on an AVX-512 CPU); 0 for other
    operators.

    Examples
    --------
    >>> from dnnpart.testing import chain_graph
    >>> cpu_scratch(chain_graph(2)).tolist()   # no operator types: no convolution
    [0.0, 0.0]
    """
    from dnnpart.cost.ops import op_class

    if g.op_types is None or g.output_bytes is None:
        return np.zeros(g.n_nodes)
    conv = np.fromiter((op_class(t) in ("conv", "depthwise_conv") for t in g.op_types),
                       dtype=np.bool_, count=g.n_nodes)
    pad = np.ones(g.n_nodes)
    shapes = g.layer_attrs.output_shape if g.layer_attrs is not None else None
    if shapes is not None:
        b = block or channel_block()
        for v in np.flatnonzero(conv).tolist():
            shape = shapes[v]
            if len(shape) >= 2 and shape[1] > 0:
                pad[v] = -(-shape[1] // b) * b / shape[1]
    return np.where(conv, np.where(g.is_backward, 2.0, 1.0) * pad * g.node_output_bytes(), 0.0)


@functools.cache
def channel_block() -> int:
    """Channels per block of oneDNN's blocked convolution layouts on this CPU: 16 where it
    has AVX-512 (``avx512f`` in ``/proc/cpuinfo``), else 8 (AVX2); 8 where that cannot be
    read. What a run's ranks on this machine use, so what their memory is predicted with."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as f:
            for line in f:
                if line.startswith("flags"):
                    return 16 if " avx512f" in line else 8
    except OSError:
        pass
    return 8


def _carried(g: Any, pos: Any, n: int) -> tuple[Any, Any]:
    """Per stage, forward bytes it receives and sends per micro-batch (values carried up
    across each boundary, :func:`~dnnpart.pricing.chain.boundary_bytes`)."""
    ins, outs = np.zeros(n), np.zeros(n)
    if n < 2 or (pos < 0).any():
        return ins, outs
    up = [k for k, (d, pu, _) in enumerate(MESSAGE_KINDS) if d == UP and pu == F]
    crossing = boundary_bytes(g, pos, n)[:, up].sum(axis=1)
    outs[:-1] = crossing
    ins[1:] = crossing
    return ins, outs


def run_loss_seconds(spec: Any, output_bytes: float) -> tuple[float, float]:
    """Forward and backward seconds of ``run``'s loss on a device of ``spec``: ``F.mse_loss``
    of the model output (``output_bytes``, fp32) against a target, and its backward, priced
    as captured operators are (cost keys ``reduce:mse_loss`` and
    ``elementwise:mse_loss_backward``, fresh bytes for an output-sized temporary and the
    output's gradient); ``(0, 0)`` without a spec. The plan's own stand-in loss (the mean of
    the output) is left in the stage's time: it is small beside this one.

    Examples
    --------
    >>> from dnnpart.cost.specs import load_catalog
    >>> fw, bw = run_loss_seconds(load_catalog().device("A100"), 4e6)
    >>> 0 < fw < 1e-3 and 0 < bw < 1e-3
    True
    """
    from dnnpart.cost.model import device_time_s
    from dnnpart.cost.ops import OpSpec, operator_work

    if spec is None or output_bytes <= 0:
        return 0.0, 0.0
    n = int(output_bytes // 4)
    forward = operator_work(OpSpec(op_type="mse_loss", input_shapes=((n,), (n,)), output_shapes=((n,),)))
    backward = operator_work(OpSpec(op_type="mse_loss_backward", input_shapes=((), (n,), (n,)),
                                    output_shapes=((n,),)))
    works = (forward, backward)
    t = device_time_s([w.flops for w in works], [w.bytes_moved for w in works],
                      [w.cost_key for w in works], spec, "fp32", [w.fresh_bytes for w in works])
    return float(t[0]), float(t[1])


def accumulation_seconds(spec: Any, tensor_bytes: Sequence[float]) -> float:
    """Seconds to add one micro-batch's gradients into the accumulated ones: an in-place
    ``add`` per parameter tensor of ``tensor_bytes`` (fp32), priced as a captured ``add`` is;
    0 without a spec.

    Examples
    --------
    >>> from dnnpart.cost.specs import load_catalog
    >>> a100 = load_catalog().device("A100")
    >>> 0 < accumulation_seconds(a100, [4e6]) < accumulation_seconds(a100, [4e6, 4e6])
    True
    """
    from dnnpart.cost.model import device_time_s
    from dnnpart.cost.ops import OpSpec, operator_work

    if spec is None or not tensor_bytes:
        return 0.0
    works = [operator_work(OpSpec(op_type="add", input_shapes=((n,), (n,)), output_shapes=((n,),)))
             for n in (max(int(b // 4), 1) for b in tensor_bytes)]
    t = device_time_s([w.flops for w in works], [w.bytes_moved for w in works],
                      [w.cost_key for w in works], spec, "fp32")
    return float(np.sum(t))


def _simulated_step(problem: Problem, plan: Plan, order: Sequence[int], training: bool,
                    schedule: str, m: int, recompute: bool = False,
                    loss: tuple[float, float] = (0.0, 0.0),
                    accumulate: Sequence[float] = ()) -> float | None:
    """The simulator's step (seconds) for the run's schedule and micro-batches, without the
    optimizer's update operators; ``None`` when the plan is not a chain in ``order``.
    ``accumulate``: per stage, one pass over its gradients (time units), paid ``m - 1``
    times in its backwards and once more when the schedule scales them: once per
    micro-batch on average."""
    import dataclasses

    from dnnpart.evaluate.chain import chain_stages
    from dnnpart.simulate import simulate_pipeline

    chain = chain_stages(problem, plan)
    if chain is None:
        return None
    stages, edges, k = chain
    if [s.devices[0] for s in stages] != list(order):
        return None
    g = problem.graph
    update = g.memory_classes() == REFERENCE
    if update.any():
        a = plan.assignment.astype(np.int64)
        times = node_times(g, problem.cluster, a)
        own = [float(times[update & (a == s.devices[0])].sum()) for s in stages]
        stages = [dataclasses.replace(s, backward=max(s.backward - t, 0.0))
                  for s, t in zip(stages, own, strict=True)]
    if training and any(loss):  # run's loss, on the last stage
        stages[-1] = dataclasses.replace(stages[-1], forward=stages[-1].forward + loss[0],
                                         backward=stages[-1].backward + loss[1])
    if training and accumulate:
        stages = [dataclasses.replace(s, backward=s.backward + t)
                  for s, t in zip(stages, accumulate, strict=True)]
    r = simulate_pipeline(stages, problem.cluster, edges=edges, microbatches=m,
                          schedule=schedule if training else "gpipe", recompute=recompute and training,
                          training=training, optimizer_factor=k)
    return float(r.step_time) * problem.cluster.time_unit_s
