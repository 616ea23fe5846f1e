"""Check that a tensor x pipeline plan of GPT-2 really runs: one training step of a
:class:`~dnnpart.pricing.parallel.ParallelConfig` (``t``-way tensor parallelism, ``p`` pipeline
stages, ``d = 1``) on ``t p`` gloo processes, against the unpartitioned model.

The model is ``transformers.GPT2LMHeadModel`` of the given sizes (``n_positions = seq``, every
dropout 0), built with ``torch.manual_seed(seed)`` and cast to float64: float64 keeps the
rounding of a different summation order (the tensor all-reduces, the split matrix products)
near 1e-15, so the tolerance :data:`RTOL` can be tight and a wrong split stands out by many
orders of magnitude. The data: ``microbatches`` micro-batches of ``micro_batch`` sequences of
``seq`` random token ids (seeded by ``seed``); a micro-batch's loss is the model's causal-LM
cross-entropy (``labels=input_ids``: the mean over the next-token predictions), the step's loss
the mean over micro-batches.

**Reference**: the whole model, ``(mean of the micro-batch losses).backward()`` once.
transformers' loss function casts the logits to float32 before the cross-entropy; the
reference computes the same cross-entropy in float64 from the model's logits (and refuses to go
on if it differs from transformers' own ``loss`` beyond float32 rounding), so the check stays
float64 throughout.

**Ranks**: rank ``j + t s`` is tensor rank ``j`` of stage ``s`` (tensor fastest, the cost
model's device layout); one spawned process each (``torch.multiprocessing``, gloo over
``tcp://127.0.0.1``, one thread each). The parent builds the model once (it needs it for the
reference) and hands every rank the same float64 weights through a file; each rank keeps only
its part (choice: the same weights as building the model again in every rank with the same
seed, without each rank paying ~5 s of CPU to import transformers).

**Tensor parallelism** (Megatron-LM, without sequence parallelism) inside every block: the
attention's ``c_attn`` (HF ``Conv1D``, weight ``[n_embd, 3 n_embd]`` = q | k | v) is split by
columns so that rank ``j`` holds heads ``j n_head / t, ...`` of each of q, k and v; the
attention's ``c_proj`` by rows; the MLP's ``c_fc`` by columns and its ``c_proj`` by rows
(:func:`tensor_shard`). The conjugate operators join them: ``f`` (identity forward, all-reduce
of the gradient over the stage's tensor group backward) before each column-parallel layer,
``g`` (all-reduce forward, identity backward) after each row-parallel one, whose bias is added
once, after the all-reduce. Layer norms, residuals, the embeddings, the final norm and the LM
head are replicated within a tensor group (choice: the simplest; Megatron splits the
vocabulary too). The tied ``wte``: stage 0 holds it for the embedding, the last stage a copy
for the head; the reference gradient of ``wte`` is the sum of both uses.

**Pipeline**: stage ``s`` holds ``blocks[s]`` consecutive blocks, the embeddings on stage 0,
the final norm, head and loss on the last stage. Tensor rank ``j`` of stage ``s`` sends its
output activation (``micro_batch x seq x n_embd``) to tensor rank ``j`` of stage ``s + 1`` and
receives its gradient back. Every schedule runs in GPipe order (choice: ``gpipe`` and ``1f1b``
compute the same gradients; the order only changes the memory in flight): the forward of every
micro-batch, then their backwards in reverse order, each loss scaled by ``1 / microbatches``.
``recompute`` is ignored (it changes no value), so is ``zero`` (``d = 1``).

**Comparison**: every rank returns its gradients under the full model's parameter names with
the :class:`Shard` saying where its piece sits in the full tensor, and the last stage its
losses; the parent reassembles every full gradient (tensor shards concatenated, replicated
ones from tensor rank 0, after measuring how far the other replicas are from it; the two
``wte`` uses summed) and compares them with the reference, relative to the largest reference
gradient.

A rank that fails or a run that passes ``timeout_s`` ends every rank and raises
:class:`RuntimeError` naming the rank and its error (:func:`launch_ranks`).
"""

from __future__ import annotations

import os
import pickle
import tempfile
import time
import traceback
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from dnnpart._optional import require
from dnnpart.errors import UsageError
from dnnpart.pricing.parallel import ParallelConfig

__all__ = [
    "RTOL",
    "RankPart",
    "Shard",
    "TensorPipelineCheck",
    "TensorPipelineRun",
    "assemble_gradients",
    "check_tensor_pipeline",
    "compare_tensor_pipeline",
    "launch_ranks",
    "run_tensor_pipeline",
    "tensor_shard",
    "validate",
]

RTOL = 1e-9
"""Largest accepted gradient difference, replica disagreement and loss difference, each relative to
the largest reference value (float64; measured differences are ~1e-15)."""

SCHEDULES = ("gpipe", "1f1b")

_HEAD = "lm_head.weight"
_WTE = "transformer.wte.weight"
_BLOCK_PARAMS = ("ln_1.weight", "ln_1.bias", "attn.c_attn.weight", "attn.c_attn.bias",
                 "attn.c_proj.weight", "attn.c_proj.bias", "ln_2.weight", "ln_2.bias",
                 "mlp.c_fc.weight", "mlp.c_fc.bias", "mlp.c_proj.weight", "mlp.c_proj.bias")
_HF_LOSS_RTOL = 1e-5  # transformers' float32 loss against the float64 one


@dataclass(frozen=True, slots=True)
class Shard:
    """Where a rank's piece of a parameter sits in the full tensor of shape ``shape``: along
    ``dim``, the concatenation of the index ranges ``[start, stop)`` in ``ranges``, in order;
    ``dim`` ``None``: the whole tensor (replicated).

    Examples
    --------
    >>> s = Shard((8, 24), 1, ((0, 4), (8, 12), (16, 20)))
    >>> s.replicated, s.piece_shape
    (False, (8, 12))
    >>> Shard((8,)).piece_shape
    (8,)
    """

    shape: tuple[int, ...]
    dim: int | None = None
    ranges: tuple[tuple[int, int], ...] = ()

    @property
    def replicated(self) -> bool:
        return self.dim is None

    @property
    def piece_shape(self) -> tuple[int, ...]:
        if self.dim is None:
            return self.shape
        size = sum(stop - start for start, stop in self.ranges)
        return (*self.shape[: self.dim], size, *self.shape[self.dim + 1 :])

    def take(self, full: Any) -> Any:
        """This shard's piece of the full tensor ``full`` (a new tensor)."""
        import torch

        if self.dim is None:
            return full.detach().clone()
        dim = self.dim
        return torch.cat([full.detach().narrow(dim, a, b - a) for a, b in self.ranges], dim).clone()

    def place(self, piece: Any, full: Any, count: Any) -> None:
        """Add ``piece`` into ``full`` where it belongs, and 1 into ``count`` there."""
        if self.dim is None:
            full += piece
            count += 1
            return
        offset = 0
        for a, b in self.ranges:
            full.narrow(self.dim, a, b - a).add_(piece.narrow(self.dim, offset, b - a))
            count.narrow(self.dim, a, b - a).add_(1)
            offset += b - a


def tensor_shard(name: str, shape: Sequence[int], t: int, j: int) -> Shard:
    """Tensor rank ``j``'s shard of GPT-2 parameter ``name`` (full shape ``shape``) under
    ``t``-way Megatron tensor parallelism (module docstring): ``c_attn`` by heads within each
    of q, k and v, ``c_fc`` by columns, the ``c_proj`` weights by rows; every other parameter
    (and the row-parallel layers' biases) replicated.

    Examples
    --------
    >>> tensor_shard("transformer.h.0.attn.c_attn.weight", (8, 24), 2, 1).ranges
    ((4, 8), (12, 16), (20, 24))
    >>> tensor_shard("transformer.h.3.mlp.c_proj.weight", (32, 8), 2, 1)
    Shard(shape=(32, 8), dim=0, ranges=((16, 32),))
    >>> tensor_shard("transformer.h.3.mlp.c_proj.bias", (8,), 2, 1).replicated
    True
    """
    shape = tuple(int(n) for n in shape)
    parts = name.split(".")
    if len(parts) != 6 or parts[:2] != ["transformer", "h"]:
        return Shard(shape)
    layer, kind = ".".join(parts[3:5]), parts[5]
    if layer == "attn.c_attn":
        dim = len(shape) - 1
        width = shape[dim] // 3
        w = width // t
        return Shard(shape, dim, tuple((c * width + j * w, c * width + (j + 1) * w) for c in range(3)))
    if layer == "mlp.c_fc":
        dim = len(shape) - 1
        w = shape[dim] // t
        return Shard(shape, dim, ((j * w, (j + 1) * w),))
    if layer in ("attn.c_proj", "mlp.c_proj") and kind == "weight":
        w = shape[0] // t
        return Shard(shape, 0, ((j * w, (j + 1) * w),))
    return Shard(shape)


@dataclass(slots=True, kw_only=True)
class RankPart:
    """What one rank returns: its gradients under the full model's names (the last stage's copy
    of the tied ``wte`` as ``lm_head.weight``), each with its :class:`Shard`, and its
    micro-batch losses (the last stage; empty elsewhere)."""

    rank: int
    stage: int
    tensor: int
    grads: dict[str, tuple[Shard, Any]]
    losses: tuple[float, ...] = ()


@dataclass(slots=True, kw_only=True)
class TensorPipelineRun:
    """The ranks' parts of one checked step and the reference's gradients (by parameter name)
    and micro-batch losses."""

    config: ParallelConfig
    parts: list[RankPart]
    reference_grads: dict[str, Any]
    reference_losses: tuple[float, ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class TensorPipelineCheck:
    """Outcome of the check: largest gradient difference (absolute, and relative to the
    largest reference gradient), largest disagreement between the replicas of a replicated
    parameter within a tensor group (relative to the largest reference gradient), largest
    micro-batch loss difference (absolute; ``reference_loss``: the largest reference loss).

    Examples
    --------
    >>> c = TensorPipelineCheck(t=2, p=2, microbatches=2, n_parameters=52, max_abs_grad_diff=2e-17,
    ...                         max_rel_grad_diff=1e-16, max_rel_replica_diff=0.0, loss_diff=0.0,
    ...                         reference_loss=4.2, worst_parameter="transformer.wte.weight")
    >>> c.passed
    True
    >>> c.summary().split(": ")[0]
    'tensor 2 x pipeline 2 (4 gloo ranks), 2 micro-batches'
    """

    t: int
    p: int
    microbatches: int
    n_parameters: int
    max_abs_grad_diff: float
    max_rel_grad_diff: float
    max_rel_replica_diff: float
    loss_diff: float
    reference_loss: float
    worst_parameter: str
    losses: tuple[float, ...] = field(default=())

    @property
    def passed(self) -> bool:
        return (self.max_rel_grad_diff <= RTOL and self.max_rel_replica_diff <= RTOL
                and self.loss_diff <= RTOL * max(self.reference_loss, 1.0))

    def summary(self) -> str:
        return (f"tensor {self.t} x pipeline {self.p} ({self.t * self.p} gloo ranks), "
                f"{self.microbatches} micro-batches: {self.n_parameters} parameter gradients, largest "
                f"difference {self.max_abs_grad_diff:.2e} ({self.max_rel_grad_diff:.2e} of the largest "
                f"gradient, at {self.worst_parameter}), replicas {self.max_rel_replica_diff:.2e} apart, loss "
                f"difference {self.loss_diff:.2e}: {'passed' if self.passed else 'FAILED'} "
                f"(tolerance {RTOL:g})")


def check_tensor_pipeline(
    config: ParallelConfig,
    *,
    n_layer: int,
    n_embd: int,
    n_head: int,
    vocab_size: int,
    seq: int,
    seed: int = 0,
    timeout_s: float = 180.0,
) -> TensorPipelineCheck:
    """Run one training step of GPT-2 under ``config`` on ``t p`` gloo processes and compare
    its losses and gradients with the unpartitioned model's (module docstring).

    Parameters
    ----------
    config
        The plan: ``d = 1``, ``schedule`` ``gpipe`` or ``1f1b`` (both run in GPipe order),
        ``blocks`` summing to ``n_layer``; ``recompute`` and ``zero`` are ignored.
    n_layer, n_embd, n_head, vocab_size
        GPT-2's sizes; ``t`` must divide ``n_head`` (and so ``4 n_embd``).
    seq
        Tokens per sequence (also the model's ``n_positions``), at least 2.
    seed
        Seeds the model's weights and the token ids.
    timeout_s
        Limit of the whole distributed run (and of every collective in it).

    Returns
    -------
    TensorPipelineCheck
        ``passed`` when the gradients agree within :data:`RTOL`.

    Raises
    ------
    UsageError
        The plan or the sizes cannot be run (one line naming why).
    RuntimeError
        A rank failed (named, with its error) or the run passed ``timeout_s``.

    Examples
    --------
    >>> c = ParallelConfig(d=1, t=2, p=2, zero=0, micro_batch=2, microbatches=2,
    ...                    schedule="1f1b", blocks=(2, 2), recompute=("none", "none"))
    >>> check = check_tensor_pipeline(c, n_layer=4, n_embd=32, n_head=4, vocab_size=64,
    ...                               seq=16)  # doctest: +SKIP
    >>> check.passed  # doctest: +SKIP
    True
    """
    run = run_tensor_pipeline(config, n_layer=n_layer, n_embd=n_embd, n_head=n_head,
                              vocab_size=vocab_size, seq=seq, seed=seed, timeout_s=timeout_s)
    return compare_tensor_pipeline(run)


def validate(config: ParallelConfig, *, n_layer: int, n_embd: int, n_head: int, vocab_size: int,
             seq: int) -> None:
    """Refuse what :func:`check_tensor_pipeline` cannot run (:class:`UsageError`, one line).

    Examples
    --------
    >>> c = ParallelConfig(d=2, t=2, p=1, zero=0, micro_batch=1, microbatches=1,
    ...                    schedule="gpipe", blocks=(2,), recompute=("none",))
    >>> validate(c, n_layer=2, n_embd=32, n_head=4, vocab_size=64, seq=8)
    Traceback (most recent call last):
    ...
    dnnpart.errors.UsageError: tensor x pipeline check: the plan has d=2 data-parallel replicas; ...
    """
    what = "tensor x pipeline check"
    if config.d != 1:
        raise UsageError(f"{what}: the plan has d={config.d} data-parallel replicas; the check runs d=1 only")
    if config.schedule not in SCHEDULES:
        raise UsageError(f"{what}: schedule {config.schedule!r} is not run; expected one of "
                         f"{', '.join(SCHEDULES)}")
    for name, value in (("n_layer", n_layer), ("n_embd", n_embd), ("n_head", n_head),
                        ("vocab_size", vocab_size)):
        if value < 1:
            raise UsageError(f"{what}: {name} must be >= 1, got {value}")
    if seq < 2:
        raise UsageError(f"{what}: seq must be >= 2 (the loss predicts each next token), got {seq}")
    if sum(config.blocks) != n_layer:
        raise UsageError(f"{what}: the plan's stages hold {sum(config.blocks)} blocks "
                         f"({'+'.join(map(str, config.blocks))}), the model has n_layer={n_layer}")
    if n_embd % n_head:
        raise UsageError(f"{what}: n_head={n_head} does not divide n_embd={n_embd}")
    if n_head % config.t:
        raise UsageError(f"{what}: t={config.t} tensor ranks do not divide n_head={n_head} heads")
    if (4 * n_embd) % config.t:
        raise UsageError(f"{what}: t={config.t} tensor ranks do not divide the MLP width {4 * n_embd}")


def run_tensor_pipeline(
    config: ParallelConfig,
    *,
    n_layer: int,
    n_embd: int,
    n_head: int,
    vocab_size: int,
    seq: int,
    seed: int = 0,
    timeout_s: float = 180.0,
) -> TensorPipelineRun:
    """The step of :func:`check_tensor_pipeline` and its reference, not yet compared
    (:func:`compare_tensor_pipeline` compares them); same arguments and errors.

    Examples
    --------
    >>> c = ParallelConfig(d=1, t=2, p=1, zero=0, micro_batch=1, microbatches=1,
    ...                    schedule="gpipe", blocks=(1,), recompute=("none",))
    >>> run = run_tensor_pipeline(c, n_layer=1, n_embd=16, n_head=2, vocab_size=32,
    ...                           seq=4)  # doctest: +SKIP
    >>> compare_tensor_pipeline(run).passed  # doctest: +SKIP
    True
    """
    validate(config, n_layer=n_layer, n_embd=n_embd, n_head=n_head, vocab_size=vocab_size, seq=seq)
    torch = require("torch", extra="torch", caller="the tensor x pipeline check")
    transformers = require("transformers", extra="hf", caller="the tensor x pipeline check")
    from dnnpart.export.runtime import _free_port

    torch.manual_seed(seed)
    model_config = transformers.GPT2Config(
        n_layer=n_layer, n_embd=n_embd, n_head=n_head, vocab_size=vocab_size, n_positions=seq,
        resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0,
        # token ids inside the vocabulary (transformers warns otherwise); no value depends on them
        bos_token_id=vocab_size - 1, eos_token_id=vocab_size - 1,
    )
    model = transformers.GPT2LMHeadModel(model_config).to(torch.float64).eval()
    model.loss_type = "ForCausalLM"  # what it falls back to anyway, without logging that it does
    ids = torch.randint(vocab_size, (config.microbatches, config.micro_batch, seq),
                        generator=torch.Generator().manual_seed(seed))
    state = {n: p.detach().clone() for n, p in model.named_parameters()}
    ref_losses, ref_grads = _reference(model, ids)

    spec = _Spec(port=_free_port(), t=config.t, p=config.p, blocks=tuple(config.blocks),
                 n_embd=n_embd, n_head=n_head, eps=float(model_config.layer_norm_epsilon),
                 timeout_s=timeout_s)
    with tempfile.TemporaryDirectory(prefix="dnnpart-tp-") as tmp:
        inputs = str(Path(tmp) / "inputs.pt")
        torch.save({"state": state, "ids": ids}, inputs)
        world = config.t * config.p
        labels = [f"rank {r} (tensor rank {r % config.t} of stage {r // config.t})" for r in range(world)]
        results = launch_ranks(_rank_step, [(r, spec, inputs) for r in range(world)],
                               timeout_s=timeout_s, what="the tensor x pipeline check", labels=labels)
    return TensorPipelineRun(config=config, parts=list(results), reference_grads=ref_grads,
                             reference_losses=tuple(ref_losses))


def assemble_gradients(parts: Sequence[RankPart]) -> tuple[dict[str, Any], float]:
    """Every parameter's full gradient from the ranks' parts, and the largest absolute
    difference between a replicated gradient and tensor rank 0's copy in the same stage.

    Within a stage, tensor shards are put where their :class:`Shard` says (they must cover the
    full tensor exactly once) and replicated gradients are taken from tensor rank 0; across
    stages, the uses of one tensor (the tied ``wte`` and its head copy ``lm_head.weight``) are
    summed.

    Raises
    ------
    RuntimeError
        A stage's shards of a parameter do not cover it exactly once, mix replicated and split
        pieces, or lack tensor rank 0's copy of a replicated one.

    Examples
    --------
    >>> import torch
    >>> full = torch.arange(12.0).reshape(2, 6)
    >>> name = "transformer.h.0.attn.c_attn.bias"
    >>> parts = [RankPart(rank=j, stage=0, tensor=j,
    ...                   grads={name: (s := tensor_shard(name, (6,), 2, j), s.take(full[0]))})
    ...          for j in range(2)]
    >>> assemble_gradients(parts)[0][name].tolist()
    [0.0, 1.0, 2.0, 3.0, 4.0, 5.0]
    """
    import torch

    uses: dict[tuple[str, int], dict[int, tuple[Shard, Any]]] = {}
    for part in parts:
        for name, piece in part.grads.items():
            uses.setdefault((name, part.stage), {})[part.tensor] = piece
    out: dict[str, Any] = {}
    replica = 0.0
    for (name, stage), pieces in uses.items():
        kinds = {shard.replicated for shard, _ in pieces.values()}
        if kinds == {True}:
            if 0 not in pieces:
                raise RuntimeError(f"stage {stage} has no tensor rank 0 gradient of {name}")
            total = pieces[0][1].detach().clone()
            for _, grad in pieces.values():
                replica = max(replica, float((grad - total).abs().max()) if grad.numel() else 0.0)
        elif kinds == {False}:
            shape = next(iter(pieces.values()))[0].shape
            total = torch.zeros(shape, dtype=torch.float64)
            count = torch.zeros(shape, dtype=torch.int64)
            for shard, grad in pieces.values():
                if shard.shape != shape or tuple(grad.shape) != shard.piece_shape:
                    raise RuntimeError(f"stage {stage}'s shards of {name} disagree on its shape")
                shard.place(grad.double(), total, count)
            if not bool((count == 1).all()):
                raise RuntimeError(f"stage {stage}'s tensor shards of {name} do not cover it exactly once")
        else:
            raise RuntimeError(f"stage {stage} both splits and replicates {name}")
        key = _WTE if name == _HEAD else name
        out[key] = total if key not in out else out[key] + total
    return out, replica


def compare_tensor_pipeline(run: TensorPipelineRun) -> TensorPipelineCheck:
    """Reassemble the ranks' gradients (:func:`assemble_gradients`) and compare them and the
    last stage's losses with the reference.

    Raises
    ------
    RuntimeError
        A parameter has no gradient from the ranks or one the reference lacks (named), or the
        last stage reported a wrong number of losses.

    Examples
    --------
    >>> import torch
    >>> c = ParallelConfig(d=1, t=1, p=1, zero=0, micro_batch=1, microbatches=1,
    ...                    schedule="gpipe", blocks=(1,), recompute=("none",))
    >>> g = torch.ones(3, dtype=torch.float64)
    >>> part = RankPart(rank=0, stage=0, tensor=0, grads={"w": (Shard((3,)), g)}, losses=(2.0,))
    >>> run = TensorPipelineRun(config=c, parts=[part], reference_grads={"w": g},
    ...                         reference_losses=(2.0,))
    >>> compare_tensor_pipeline(run).passed
    True
    """
    grads, replica = assemble_gradients(run.parts)
    missing = sorted(set(run.reference_grads) - set(grads))
    if missing:
        raise RuntimeError(f"the ranks returned no gradient of {missing[0]} ({len(missing)} missing)")
    extra = sorted(set(grads) - set(run.reference_grads))
    if extra:
        raise RuntimeError(f"the ranks returned a gradient of {extra[0]}, which the model does not have")
    worst, worst_name, scale = 0.0, "", 0.0
    for name, ref in run.reference_grads.items():
        if not ref.numel():
            continue
        if tuple(grads[name].shape) != tuple(ref.shape):
            raise RuntimeError(f"the gradient of {name} has shape {tuple(grads[name].shape)}, "
                               f"the parameter {tuple(ref.shape)}")
        diff = float((grads[name].double() - ref.double()).abs().max())
        scale = max(scale, float(ref.double().abs().max()))
        if diff >= worst:
            worst, worst_name = diff, name
    config = run.config
    last = [p for p in run.parts if p.stage == config.p - 1 and p.tensor == 0]
    losses = last[0].losses if last else ()
    if len(losses) != len(run.reference_losses):
        raise RuntimeError(f"the last stage reported {len(losses)} losses for "
                           f"{len(run.reference_losses)} micro-batches")
    loss_diff = max((abs(a - b) for a, b in zip(losses, run.reference_losses, strict=True)), default=0.0)
    return TensorPipelineCheck(
        t=config.t, p=config.p, microbatches=config.microbatches, n_parameters=len(run.reference_grads),
        max_abs_grad_diff=worst, max_rel_grad_diff=worst / scale if scale else worst,
        max_rel_replica_diff=replica / scale if scale else replica, loss_diff=loss_diff,
        reference_loss=max((abs(x) for x in run.reference_losses), default=0.0),
        worst_parameter=worst_name, losses=tuple(losses),
    )


def launch_ranks(
    target: Callable[..., Any],
    args: Sequence[tuple[Any, ...]],
    *,
    timeout_s: float,
    what: str = "the distributed run",
    labels: Sequence[str] | None = None,
) -> list[Any]:
    """Run ``target(*args[r])`` in one spawned process per rank ``r`` and return their results
    in rank order (each pickled through a file).

    Waits at most ``timeout_s`` seconds in all; a rank that fails, or the time running out,
    ends every rank still running (terminated, then killed) before raising.

    Raises
    ------
    RuntimeError
        A rank raised (the first to fail, named by ``labels[r]`` or ``rank r``, with its error
        and where it was raised) or died, or ranks were still running after ``timeout_s``.

    Examples
    --------
    >>> import math
    >>> launch_ranks(math.sqrt, [(4.0,), (9.0,)], timeout_s=120)
    [2.0, 3.0]
    """
    import multiprocessing.connection

    import torch.multiprocessing as mp

    names = list(labels) if labels is not None else [f"rank {r}" for r in range(len(args))]
    ctx = mp.get_context("spawn")
    with tempfile.TemporaryDirectory(prefix="dnnpart-ranks-") as tmp:
        procs = [ctx.Process(target=_guarded, args=(target, tuple(a), str(Path(tmp) / f"rank{r}")),
                             name=f"dnnpart-rank{r}", daemon=True) for r, a in enumerate(args)]
        deadline = time.monotonic() + timeout_s
        try:
            for proc in procs:
                proc.start()
            pending = set(range(len(procs)))
            while pending:
                # one reading of the exit codes: a rank ending between two readings would leave
                # the pending set unseen as failed
                codes = {r: procs[r].exitcode for r in sorted(pending)}
                failed = [r for r, code in codes.items() if code not in (None, 0)]
                if failed:
                    raise RuntimeError(_failure(what, names, failed, tmp, procs))
                pending = {r for r, code in codes.items() if code is None}
                left = deadline - time.monotonic()
                if pending and left <= 0:
                    running = ", ".join(names[r] for r in sorted(pending))
                    raise RuntimeError(f"{what} timed out after {timeout_s:g} s; still running: {running}")
                if pending:
                    multiprocessing.connection.wait([procs[r].sentinel for r in pending],
                                                    timeout=min(left, 1.0))
        finally:
            for proc in procs:
                if proc.is_alive():
                    proc.terminate()
            for proc in procs:
                if proc.pid is not None:
                    proc.join(timeout=5)
                    if proc.is_alive():
                        proc.kill()
                        proc.join()
        results = []
        for r in range(len(procs)):
            with open(Path(tmp) / f"rank{r}.pkl", "rb") as fh:
                results.append(pickle.load(fh))
    return results


def _failure(what: str, names: list[str], failed: list[int], tmp: str, procs: list[Any]) -> str:
    """The message of the first rank to fail (the oldest error file: later failures are
    usually its peers losing their connection to it)."""
    errors = {r: Path(tmp) / f"rank{r}.err" for r in failed}
    written = [r for r in failed if errors[r].exists()]
    if not written:
        r = failed[0]
        return f"{names[r]} of {what} died (exit code {procs[r].exitcode}) without an error message"
    r = min(written, key=lambda k: errors[k].stat().st_mtime_ns)
    text = errors[r].read_text(encoding="utf-8").strip()
    others = [names[k] for k in failed if k != r]
    also = f" (also failed: {', '.join(others)})" if others else ""
    return f"{names[r]} of {what} failed: {text}{also}"


def _guarded(target: Callable[..., Any], args: tuple[Any, ...], stem: str) -> None:
    """A rank's process: ``target(*args)``, its result pickled to ``stem.pkl``; an error written
    to ``stem.err`` (its text and where it was raised) and exit code 1, printing nothing."""
    from dnnpart.export.runtime import quiet_worker

    quiet_worker()
    try:
        result = target(*args)
        with open(stem + ".pkl.tmp", "wb") as fh:
            pickle.dump(result, fh)
        os.replace(stem + ".pkl.tmp", stem + ".pkl")
    except BaseException as exc:
        frames = traceback.extract_tb(exc.__traceback__)
        last = frames[-1] if frames else None
        where = f" (at {Path(last.filename).name}:{last.lineno} in {last.name})" if last else ""
        text = "".join(traceback.format_exception_only(type(exc), exc)).strip()
        Path(stem + ".err").write_text(text + where, encoding="utf-8")
        raise SystemExit(1) from None


def _reference(model: Any, ids: Any) -> tuple[list[float], dict[str, Any]]:
    """The whole model's micro-batch losses (float64) and the gradients of their mean."""
    import torch
    import torch.nn.functional as F

    model.zero_grad(set_to_none=True)
    losses = []
    for mb in ids:
        out = model(input_ids=mb, labels=mb)
        logits = out.logits
        loss = F.cross_entropy(logits[:, :-1].reshape(-1, logits.shape[-1]), mb[:, 1:].reshape(-1))
        hf, mine = float(out.loss.detach()), float(loss.detach())
        if abs(hf - mine) > _HF_LOSS_RTOL * max(abs(mine), 1.0):
            raise RuntimeError(f"the float64 cross-entropy {mine!r} is not transformers' "
                               f"loss {hf!r}: the loss definitions differ")
        losses.append(loss)
    total = torch.stack(losses).mean()
    total.backward()  # type: ignore[no-untyped-call]
    grads = {n: p.grad.detach().clone() for n, p in model.named_parameters() if p.grad is not None}
    return [float(x.detach()) for x in losses], grads


@dataclass(frozen=True, slots=True)
class _Spec:
    """What every rank needs besides the weights and ids (in the inputs file)."""

    port: int
    t: int
    p: int
    blocks: tuple[int, ...]
    n_embd: int
    n_head: int
    eps: float
    timeout_s: float


def _conjugates() -> tuple[Callable[[Any, Any], Any], Callable[[Any, Any], Any]]:
    """Megatron's ``f`` (identity forward, all-reduce backward) and ``g`` (all-reduce forward,
    identity backward) over a process group."""
    import torch
    import torch.distributed as dist

    class CopyToTensorRegion(torch.autograd.Function):
        @staticmethod
        def forward(ctx: Any, x: Any, group: Any) -> Any:
            ctx.group = group
            return x.view_as(x)

        @staticmethod
        def backward(ctx: Any, grad: Any) -> Any:
            grad = grad.contiguous().clone()
            dist.all_reduce(grad, group=ctx.group)
            return grad, None

    class ReduceFromTensorRegion(torch.autograd.Function):
        @staticmethod
        def forward(ctx: Any, x: Any, group: Any) -> Any:
            out = x.contiguous().clone()
            dist.all_reduce(out, group=group)
            return out

        @staticmethod
        def backward(ctx: Any, grad: Any) -> Any:
            return grad, None

    def f(x: Any, group: Any) -> Any:
        return CopyToTensorRegion.apply(x, group)  # type: ignore[no-untyped-call]

    def g(x: Any, group: Any) -> Any:
        return ReduceFromTensorRegion.apply(x, group)  # type: ignore[no-untyped-call]

    return f, g


def _rank_step(rank: int, spec: _Spec, inputs: str) -> RankPart:
    """One rank's step (module docstring): its part of the weights, the forward of every
    micro-batch, then their backwards in reverse order."""
    import datetime

    import torch
    import torch.distributed as dist
    import torch.nn.functional as F

    from dnnpart.export.runtime import process_group_backend

    torch.set_num_threads(1)
    os.environ.setdefault("GLOO_SOCKET_IFNAME", "lo")
    t, p = spec.t, spec.p
    s, j = divmod(rank, t)
    world = t * p
    dist.init_process_group(
        process_group_backend("cpu", world), init_method=f"tcp://127.0.0.1:{spec.port}",
        rank=rank, world_size=world, timeout=datetime.timedelta(seconds=spec.timeout_s),
    )
    try:
        # every rank creates every stage's tensor group, in the same order
        groups = [dist.new_group(ranks=[t * k + i for i in range(t)]) for k in range(p)]
        group = groups[s] if t > 1 else None
        f, g = _conjugates()
        data = torch.load(inputs, weights_only=True)
        state, ids = data["state"], data["ids"]
        params: dict[str, Any] = {}
        shards: dict[str, Shard] = {}

        def keep(name: str, source: str | None = None) -> Any:
            full = state[source or name]
            shard = tensor_shard(source or name, tuple(full.shape), t, j)
            params[name] = torch.nn.Parameter(shard.take(full))
            shards[name] = shard
            return params[name]

        first = sum(spec.blocks[:s])
        layers = range(first, first + spec.blocks[s])
        if s == 0:
            keep(_WTE)
            keep("transformer.wpe.weight")
        for i in layers:
            for suffix in _BLOCK_PARAMS:
                keep(f"transformer.h.{i}.{suffix}")
        last = s == p - 1
        if last:
            keep("transformer.ln_f.weight")
            keep("transformer.ln_f.bias")
            head = params[_WTE] if p == 1 else keep(_HEAD, _WTE)
        state.clear()  # the full weights: only this rank's part stays

        def tp_in(x: Any) -> Any:
            return f(x, group) if group is not None else x

        def tp_out(x: Any) -> Any:
            return g(x, group) if group is not None else x

        def block(x: Any, i: int) -> Any:
            pre = f"transformer.h.{i}."
            w = {k: params[pre + k] for k in _BLOCK_PARAMS}
            b, n, e = x.shape
            heads = spec.n_head // t
            hd = spec.n_embd // spec.n_head
            h = F.layer_norm(x, (e,), w["ln_1.weight"], w["ln_1.bias"], spec.eps)
            qkv = torch.addmm(w["attn.c_attn.bias"], tp_in(h).reshape(-1, e), w["attn.c_attn.weight"])
            q, k, v = (z.reshape(b, n, heads, hd).transpose(1, 2) for z in qkv.reshape(b, n, -1).chunk(3, -1))
            a = F.scaled_dot_product_attention(q, k, v, is_causal=True, scale=hd ** -0.5)
            a = a.transpose(1, 2).reshape(b * n, heads * hd)
            x = x + (tp_out(a @ w["attn.c_proj.weight"]) + w["attn.c_proj.bias"]).reshape(b, n, e)
            h = F.layer_norm(x, (e,), w["ln_2.weight"], w["ln_2.bias"], spec.eps)
            m = F.gelu(torch.addmm(w["mlp.c_fc.bias"], tp_in(h).reshape(-1, e), w["mlp.c_fc.weight"]),
                       approximate="tanh")  # GPT-2's gelu_new
            return x + (tp_out(m @ w["mlp.c_proj.weight"]) + w["mlp.c_proj.bias"]).reshape(b, n, e)

        prev, nxt = rank - t, rank + t
        m_count = len(ids)
        shape = (ids.shape[1], ids.shape[2], spec.n_embd)
        received: list[Any] = []
        outputs: list[Any] = []
        losses: list[float] = []
        for mb, tokens in enumerate(ids):
            if s == 0:
                x = F.embedding(tokens, params[_WTE]) + params["transformer.wpe.weight"][: tokens.shape[1]]
            else:
                x = torch.empty(shape, dtype=torch.float64)
                dist.recv(x, prev, tag=mb)
                x.requires_grad_(True)
                received.append(x)
            for i in layers:
                x = block(x, i)
            if last:
                hid = F.layer_norm(x, (spec.n_embd,), params["transformer.ln_f.weight"],
                                   params["transformer.ln_f.bias"], spec.eps)
                logits = F.linear(hid, head)
                loss = F.cross_entropy(logits[:, :-1].reshape(-1, logits.shape[-1]),
                                       tokens[:, 1:].reshape(-1))
                losses.append(float(loss.detach()))
                outputs.append(loss / m_count)
            else:
                dist.send(x.detach().contiguous(), nxt, tag=mb)
                outputs.append(x)
        for mb in reversed(range(m_count)):
            out = outputs[mb]
            if last:
                out.backward()
            else:
                grad = torch.empty(shape, dtype=torch.float64)
                dist.recv(grad, nxt, tag=m_count + mb)
                out.backward(grad)
            if s > 0:
                dist.send(received[mb].grad.contiguous(), prev, tag=m_count + mb)
        grads = {n: (shards[n], q.grad.detach().clone()) for n, q in params.items() if q.grad is not None}
        dist.barrier()
        return RankPart(rank=rank, stage=s, tensor=j, grads=grads, losses=tuple(losses) if last else ())
    finally:
        dist.destroy_process_group()
