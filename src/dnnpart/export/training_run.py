"""Train one step of a planned model under a ``torch.distributed.pipelining`` schedule.

A plan whose devices each run one contiguous piece of the model is a linear pipeline: stage
``k`` (in the order :func:`~dnnpart.export.stages.split_module` gives, a topological order)
runs on its own gloo process. Stages are our own split modules, so cut points need not fall
on module boundaries. ``PipelineStage`` passes one tuple of tensors from stage ``k`` to
``k + 1`` only, so each stage is wrapped to *carry* every value a later stage (or the model's
output) needs: a skip connection over a stage becomes a pass-through (an alias view, so the
gradient flows back through the carrying stage).

Choices (written in docs/run.md too):

* loss: mean squared error between the model's main output (its first floating-point tensor)
  and a fixed random target, per micro-batch; the schedule averages gradients over
  micro-batches (``scale_grads=True``), so the reference is the mean of the per-micro-batch
  losses on the unpartitioned graph module, backward once.
* the check: every parameter gradient (summed over stages: a tied weight such as GPT-2's
  ``wte`` lives in two stages) and every micro-batch loss against the reference, relative to
  the largest reference value, tolerance :data:`RTOL` (float32 reduction order differs
  between the split and the whole graph; measured differences are ~1e-7).
* measurement: the checked step is also the warm-up; its peak memory is measured
  (allocator-level, :mod:`dnnpart.export.measuring`). Then ``steps`` more schedule steps run
  on the same micro-batches (gradients set to ``None`` before each, as a trainer's
  ``zero_grad`` does), each stage's forward and backward timed over all its micro-batches
  inside the schedule. Their values are not checked again: the check is the first step's.
  The schedule keeps no merged outputs (``return_outputs=False``): nothing reads them.

Plans a linear pipeline cannot run are refused (:class:`~dnnpart.errors.FormatError`, one line
naming the reason): a device with two separate pieces (non-contiguous or op-level placements
such as PARDNN's), replicated stages, or a value crossing stages that is not a tensor.
"""

from __future__ import annotations

import os
import tempfile
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from dnnpart._optional import require
from dnnpart.errors import FormatError
from dnnpart.export.measuring import RankMeasure, Spread
from dnnpart.export.stages import StagedProgram, assemble_output

RTOL = 1e-4
"""Largest accepted ``max |pipelined - reference| / max |reference|`` for losses and gradients."""

SCHEDULES = ("gpipe", "1f1b")


@dataclass(slots=True, kw_only=True)
class TrainingRun:
    """Outcome of one pipelined training step and its check."""

    schedule: str
    microbatches: int
    stages: int
    losses: list[float]
    reference_losses: list[float]
    grad_max_abs_diff: float
    grad_max_abs_reference: float
    loss_max_abs_diff: float
    n_parameters_checked: int
    worst_parameter: str
    measured: list[RankMeasure] = field(default_factory=list)
    step_s: list[float] = field(default_factory=list)
    output_bytes: float = 0.0  # one micro-batch's output the loss reads

    @property
    def step(self) -> Spread | None:
        """Median and range of the timed steps (seconds; ``None`` without timed steps)."""
        return Spread.of(self.step_s) if self.step_s else None

    @property
    def grad_relative_diff(self) -> float:
        return self.grad_max_abs_diff / self.grad_max_abs_reference if self.grad_max_abs_reference else 0.0

    @property
    def passed(self) -> bool:
        scale = max(abs(x) for x in self.reference_losses) or 1.0
        return self.grad_relative_diff <= RTOL and self.loss_max_abs_diff / scale <= RTOL


def check_linear(program: StagedProgram, *, replicated: bool = False) -> None:
    """Refuse plans a linear pipeline cannot run (one line naming the reason).

    Examples
    --------
    >>> from dnnpart.export.stages import StagedProgram
    >>> check_linear(StagedProgram(stages=(), input_names=(), output_template=None, output_values=()))
    """
    if replicated:
        raise FormatError(
            "the plan replicates stages; a torch.distributed.pipelining schedule runs one copy of "
            "each stage (run the plan for inference, or plan without replication)"
        )
    seen: dict[int, int] = {}
    for s in program.stages:
        if s.device in seen:
            raise FormatError(
                f"device {s.device} runs two separate pieces of the model (stages {seen[s.device]} and "
                f"{s.index}, e.g. operator {s.nodes[0]!r}); a linear pipeline needs one contiguous "
                "piece per device (non-contiguous or op-level placement)"
            )
        seen[s.device] = s.index


def device_order(graph: Any, assignment: Any) -> list[int]:
    """Devices in pipeline order, from the plan's forward operators on the planned graph.

    The devices the forward edges connect must form a DAG (then every device's piece is
    convex and a topological order of devices is a linear pipeline).

    Raises
    ------
    FormatError
        Two devices send forward activations to each other (naming them): the placement is
        not a pipeline (non-contiguous or op-level).

    Examples
    --------
    >>> from dnnpart.testing import chain_problem
    >>> g = chain_problem([1, 1, 1], n_accelerators=2).graph
    >>> device_order(g, [1, 1, 0])
    [1, 0]
    """
    import numpy as np

    a = np.asarray(assignment)
    back = np.asarray(graph.is_backward, dtype=bool)
    fwd = np.flatnonzero(~back)
    used = list(dict.fromkeys(int(a[v]) for v in fwd))
    succ: dict[int, set[int]] = {d: set() for d in used}
    for u in fwd:
        for w in graph.successors(int(u)):
            if not back[w] and a[w] != a[u]:
                succ[int(a[u])].add(int(a[w]))
    indeg = {d: 0 for d in used}
    for d in used:
        for e in succ[d]:
            indeg[e] += 1
    order = [d for d in used if indeg[d] == 0]
    for d in order:
        for e in sorted(succ[d]):
            indeg[e] -= 1
            if indeg[e] == 0:
                order.append(e)
    if len(order) < len(used):
        left = [d for d in used if d not in order]
        back_edge = next((d, e) for d in left for e in succ[d] if e in left)
        raise FormatError(
            f"devices {back_edge[0]} and {back_edge[1]} pass forward activations both ways; a linear "
            "pipeline needs one contiguous piece of the model per device (non-contiguous or "
            "op-level placement; plan with -m pipeline)"
        )
    return order


def linearize(gm: Any, device_of: dict[str, int], order: list[int]) -> tuple[dict[str, int], int]:
    """Move operators that would run before their producers' stage to that stage.

    The planned (autograd ``make_fx``) graph and the module run differ in a few nodes
    (decomposed attention, dropped casts); those are matched by aligning op sequences and can
    land on an earlier stage than their inputs. Returns the placement and how many operators
    moved.
    """
    rank = {d: i for i, d in enumerate(order)}
    out: dict[str, int] = {}
    moved = 0
    for n in gm.graph.nodes:
        if n.name not in device_of:
            continue
        r = rank.get(device_of[n.name], 0)
        for a in n.all_input_nodes:
            if a.name in out:
                r = max(r, rank[out[a.name]])
        out[n.name] = order[r] if order else device_of[n.name]
        moved += out[n.name] != device_of[n.name]
    return out, moved


def carries(program: StagedProgram) -> list[tuple[str, ...]]:
    """Values stage ``k`` receives from stage ``k - 1`` (stage 0: the model's inputs), and,
    last, what the final stage must hold to assemble the output."""
    stages = program.stages
    out: list[tuple[str, ...]] = [tuple(program.input_names)]
    available = list(program.input_names)
    for k, stage in enumerate(stages):
        available += [v for v in stage.outputs if v not in available]
        needed = set(program.output_values)
        for later in stages[k + 1 :]:
            needed.update(later.inputs)
        out.append(tuple(v for v in available if v in needed))
    return out


def main_output(value: Any) -> Any:
    """The model output trained on: the first floating-point tensor of ``value`` (``None``)."""
    import torch

    if isinstance(value, torch.Tensor) and value.is_floating_point():
        return value
    items = value.values() if isinstance(value, dict) else value if isinstance(value, (list, tuple)) else ()
    for x in items:
        found = main_output(x)
        if found is not None:
            return found
    return None


def carry_module(program: StagedProgram, k: int, carry: list[tuple[str, ...]],
                 recompute: bool = False) -> Any:
    """Stage ``k`` as a module taking ``carry[k]`` and returning ``carry[k + 1]`` (the last
    stage: the model's main output, :func:`main_output`), as ``PipelineStage`` needs.

    With ``recompute`` the stage's operators run under ``torch.utils.checkpoint`` (non-reentrant):
    a micro-batch's forward keeps only the stage's inputs, and its backward runs the forward
    again -- full recomputation of the stage, the cost model's ``--recompute``."""
    import torch
    from torch.utils.checkpoint import checkpoint

    stage = program.stages[k]
    last = k == len(program.stages) - 1

    class CarryStage(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.inner = stage.module

        def forward(self, *args: Any) -> Any:
            values = dict(zip(carry[k], args, strict=True))
            inputs = [values[v] for v in stage.inputs]
            results = (checkpoint(self.inner, *inputs, use_reentrant=False) if recompute
                       else self.inner(*inputs))
            values.update(zip(stage.outputs, results, strict=True))
            if last:
                main = main_output(assemble_output(program, values))
                if main is None:
                    raise FormatError("the model's output has no floating-point tensor to train on")
                return main.contiguous()
            outs = []
            for v in carry[k + 1]:
                x = values[v]
                if not isinstance(x, torch.Tensor):
                    raise FormatError(
                        f"value {v!r} crosses from stage {k} to stage {k + 1} but is a "
                        f"{type(x).__name__}, not a tensor; a pipelining stage passes tensors only"
                    )
                # an alias, not the received leaf itself, so autograd routes its gradient back
                # (and contiguous: gloo sends contiguous buffers only)
                outs.append((x.view_as(x) if v in carry[k] and x.is_floating_point() else x).contiguous())
            return tuple(outs)

    return CarryStage()


def stage_examples(program: StagedProgram, carry: list[tuple[str, ...]],
                   inputs: Sequence[Any], stages: int | None = None) -> list[tuple[Any, Any]]:
    """``(input_args, output_args)`` of the first ``stages`` stages (default all) on one
    micro-batch, for ``PipelineStage``.

    Computed by running the stages: ``PipelineStage``'s own shape inference runs on the meta
    device, whose strides differ from the CPU kernels' (gloo then rejects the non-contiguous
    receive buffers it builds).
    """
    import torch

    world = len(program.stages)
    examples: list[tuple[Any, Any]] = []
    with torch.no_grad():
        args = tuple(inputs)
        for k in range(world if stages is None else stages):
            result = carry_module(program, k, carry)(*args)
            outs = _example(result, True) if k == world - 1 else tuple(_example(r, True) for r in result)
            examples.append((tuple(_example(a, k > 0) for a in args), outs))
            args = result if isinstance(result, tuple) else (result,)
    return examples


def _example(x: Any, grad: bool) -> Any:
    """A detached copy; floating tensors between stages carry gradients."""
    y = x.detach().clone()
    return y.requires_grad_(True) if grad and y.is_floating_point() else y


def reference_step(
    gm: Any, microbatches: Sequence[tuple[Any, ...]], targets: Sequence[Any]
) -> tuple[list[float], dict[str, Any]]:
    """Per-micro-batch losses and the mean-loss gradients of the unpartitioned module."""
    import torch

    gm.zero_grad(set_to_none=True)
    losses = []
    total = None
    for mb, target in zip(microbatches, targets, strict=True):
        out = main_output(gm(*mb))
        loss = torch.nn.functional.mse_loss(out, target)
        losses.append(float(loss.detach()))
        total = loss if total is None else total + loss
    assert total is not None
    (total / len(microbatches)).backward()  # type: ignore[no-untyped-call]
    alias = canonical_names(gm)
    grads = {alias[n]: p.grad.detach().clone() for n, p in gm.named_parameters() if p.grad is not None}
    return losses, grads


def canonical_names(gm: Any) -> dict[str, str]:
    """Every parameter name -> the first name of the same tensor (tied weights: one name)."""
    first: dict[int, str] = {}
    out = {}
    for n, p in gm.named_parameters(remove_duplicate=False):
        out[n] = first.setdefault(id(p), n)
    return out


def gradient_difference(grads: Mapping[str, Any], reference: Mapping[str, Any]) -> tuple[float, float, str]:
    """``(max |grad - reference|, max |reference|, the parameter of the largest difference)``
    over every reference gradient; the difference is ``inf`` for a parameter without one."""
    missing = sorted(set(reference) - set(grads))
    if missing:
        return float("inf"), 1.0, missing[0]
    worst, worst_name, scale = 0.0, "", 0.0
    for name, ref in reference.items():
        d = float((grads[name].double() - ref.double()).abs().max()) if ref.numel() else 0.0
        scale = max(scale, float(ref.double().abs().max()) if ref.numel() else 0.0)
        if d >= worst:
            worst, worst_name = d, name
    return worst, scale, worst_name


def run_training_step(
    program: StagedProgram,
    gm: Any,
    microbatches: Sequence[tuple[Any, ...]],
    *,
    schedule: str = "1f1b",
    timeout_s: float = 300.0,
    steps: int = 0,
    recompute: bool = False,
    device: str = "cpu",
    spawn: bool | None = None,
) -> TrainingRun:
    """One pipelined training step across ``len(program.stages)`` gloo processes, checked;
    then ``steps`` more steps, timed (see the module docstring); ``recompute``: each stage
    recomputes its forward in its backward (:func:`carry_module`); ``device``: ``cuda`` runs
    stage ``k`` on ``cuda:k`` (NCCL between ranks), checked against the float32 CPU step;
    ``spawn``: as for :func:`~dnnpart.export.runtime.measure_distributed`.

    Raises
    ------
    FormatError
        The plan is not a linear pipeline, or ``schedule`` is unknown.
    RuntimeError
        A worker process failed (its error is included).
    """
    torch = require("torch", extra="torch", caller="dnnpart run")
    from dnnpart.export.runtime import _free_port, run_workers

    if schedule not in SCHEDULES:
        raise FormatError(f"--schedule {schedule}: expected one of {', '.join(SCHEDULES)}")
    check_linear(program)
    carry = carries(program)
    n = len(microbatches)
    torch.manual_seed(0)
    with torch.no_grad():
        shapes = [main_output(gm(*mb)) for mb in microbatches[:1]]
    if shapes[0] is None:
        raise FormatError("the model's output has no floating-point tensor to train on")
    targets = [torch.randn_like(shapes[0]) for _ in range(n)]
    batch = tuple(torch.cat([mb[i] for mb in microbatches]) for i in range(len(microbatches[0])))
    full_target = torch.cat(targets)
    world = len(program.stages)
    alias = canonical_names(gm)
    examples = stage_examples(program, carry, microbatches[0])
    port = _free_port()
    with tempfile.TemporaryDirectory(prefix="dnnpart-train-") as tmp:
        run_workers(_worker, (world, port, program, carry, alias, examples, batch, full_target, n,
                              schedule, tmp, timeout_s, steps, recompute, device),
                    world, "the pipelined training run",
                    spawn=device != "cpu" if spawn is None else spawn)
        parts = [torch.load(Path(tmp) / f"rank{r}.pt", weights_only=False) for r in range(world)]
    # one thread, as in the workers: CPU kernels pick their reduction order by thread count,
    # and batch norm over a few values (ResNet's last blocks on small images) amplifies that
    # rounding to ~1% of a gradient
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        ref_losses, ref_grads = reference_step(gm, microbatches, targets)
    finally:
        torch.set_num_threads(threads)
    grads: dict[str, Any] = {}
    for part in parts:
        for name, g in part["grads"].items():
            grads[name] = g if name not in grads else grads[name] + g
    worst, scale, worst_name = gradient_difference(grads, ref_grads)
    if worst == float("inf"):
        raise RuntimeError(f"the pipeline produced no gradient for parameter {worst_name!r}")
    losses = [float(x) for x in parts[-1]["losses"]]
    measured = [RankMeasure(**p["measured"]) for p in parts]
    return TrainingRun(
        schedule=schedule,
        microbatches=n,
        stages=world,
        losses=losses,
        reference_losses=ref_losses,
        grad_max_abs_diff=worst,
        grad_max_abs_reference=scale,
        loss_max_abs_diff=max(abs(a - b) for a, b in zip(losses, ref_losses, strict=True)),
        n_parameters_checked=len(ref_grads),
        worst_parameter=worst_name,
        measured=measured,
        step_s=[max(m.step_s[i] for m in measured) for i in range(steps)],
        output_bytes=float(shapes[0].numel() * shapes[0].element_size()),
    )


def _worker(
    rank: int,
    world: int,
    port: int,
    program: StagedProgram,
    carry: list[tuple[str, ...]],
    alias: dict[str, str],
    examples: list[tuple[Any, Any]],
    batch: tuple[Any, ...],
    target: Any,
    n_micro: int,
    schedule: str,
    tmp: str,
    timeout_s: float,
    steps: int,
    recompute: bool,
    device_kind: str,
) -> None:
    import datetime

    import torch
    import torch.distributed as dist
    from torch.distributed.pipelining import PipelineStage, Schedule1F1B, ScheduleGPipe

    from dnnpart.export.allocator import keep_freed_heap
    from dnnpart.export.measuring import ChunkTimer, allocator_peak, device_sync, held_bytes, rank_device
    from dnnpart.export.on_device import move_module, to_device
    from dnnpart.export.runtime import process_group_backend, quiet_worker

    quiet_worker()
    keep_freed_heap()  # the heap the cost model prices (dnnpart.export.allocator)
    torch.set_num_threads(1)
    os.environ.setdefault("GLOO_SOCKET_IFNAME", "lo")
    device = rank_device(device_kind, rank)
    dist.init_process_group(
        process_group_backend(device_kind, world), init_method=f"tcp://127.0.0.1:{port}",
        rank=rank, world_size=world, timeout=datetime.timedelta(seconds=timeout_s),
    )
    try:
        module = move_module(carry_module(program, rank, carry, recompute), device)
        module.zero_grad(set_to_none=True)
        ins, outs = to_device(examples[rank], device)
        batch, target = to_device((batch, target), device)
        stage = PipelineStage(module, rank, world, device, input_args=ins, output_args=outs)
        sync = device_sync(device)
        timer = ChunkTimer(sync)  # inside the schedule, between its receives and sends
        stage.forward_one_chunk = timer.wrap("forward", stage.forward_one_chunk)  # type: ignore[method-assign]
        stage.backward_one_chunk = timer.wrap("backward", stage.backward_one_chunk)  # type: ignore[method-assign]

        def loss_fn(out: Any, tgt: Any) -> Any:
            return torch.nn.functional.mse_loss(out, tgt)

        cls = ScheduleGPipe if schedule == "gpipe" else Schedule1F1B
        sched = cls(stage, n_microbatches=n_micro, loss_fn=loss_fn)
        last = rank == world - 1

        def step(losses: list[Any] | None) -> None:
            kwargs: dict[str, Any] = {"target": target, "losses": losses} if last else {}
            if rank == 0:
                sched.step(*batch, return_outputs=False, **kwargs)
            else:
                sched.step(return_outputs=False, **kwargs)

        measure = RankMeasure()
        losses: list[Any] = []
        with allocator_peak(device, measure, held_bytes(module)):
            step(losses)  # the checked step, and the warm-up
        grads = {alias.get(n, n): p.grad.detach().cpu().clone()
                 for n, p in module.inner.named_parameters() if p.grad is not None}
        for _ in range(steps):
            module.zero_grad(set_to_none=True)
            dist.barrier()
            timer.reset()
            t0 = time.perf_counter()
            step([] if last else None)
            if sync is not None:
                sync()
            measure.step_s.append(time.perf_counter() - t0)
            measure.forward_s.append(timer.seconds["forward"])
            measure.backward_s.append(timer.seconds["backward"])
        torch.save(
            {"grads": grads, "losses": [float(x.detach()) for x in losses],
             "measured": measure.to_dict()},
            Path(tmp) / f"rank{rank}.pt",
        )
        dist.barrier()
    finally:
        dist.destroy_process_group()
