"""Step time and memory of a hybrid data x tensor x pipeline parallel plan of a transformer: the
one formula the hybrid search (:mod:`dnnpart.solvers.hybrid`) optimises and reports.

A plan (:class:`ParallelConfig`) runs ``p`` pipeline stages, each on ``d`` data-parallel
replicas of ``t`` tensor-parallel ranks (``d t p`` devices; rank ``j`` of replica ``r`` of stage
``s`` is device ``j + t (r + d s)``, Megatron's order: tensor fastest, pipeline slowest, so a
tensor group sits inside a machine whenever ``t`` divides its size). Stage ``s`` holds
``blocks[s]`` consecutive blocks, the prologue on the first stage and the epilogue on the last;
``b`` samples per micro-batch, ``m`` micro-batches per step per replica (global batch
``b m d``).

Per micro-batch, stage ``s`` takes (seconds)

``tau_s = b C_s(t) + R_s + TP_s + PP_s + Z_s``:

* ``C_s(t)``: forward + backward compute per sample (:class:`~dnnpart.pricing.parallel_profile.
  UnitProfile`: the divided part over ``t``);
* ``R_s``: recomputation: ``full`` redoes every block's forward (and its tensor-parallel
  all-reduces; Megatron checkpoints the transformer layers, not the embedding or the head),
  ``selective`` the attention core only;
* ``TP_s``: Megatron's all-reduces of the hidden state over the tensor group: two in each
  block's forward and two in its backward, one after the vocabulary-parallel embedding's
  forward, one before the head's backward input gradient;
* ``PP_s``: at each boundary the stage has, the forward activation and the backward gradient
  (``latency + bytes / bandwidth``, paper 4's Eq. 6 on both ends, as the stages objective);
  interleaved schedules send ``v`` times as many;
* ``Z_s``: ZeRO-3 gathers the stage's weights over the data group in every micro-batch's
  forward and backward.

Of ``tau_s``, the forward pass takes its compute, its all-reduces (two per block, the
embedding's), half the boundary messages (the activations) and one of ZeRO-3's gathers; the
rest is the backward (with any recomputation): what a Gantt of the schedule draws.

Per step, after the last backward, ``G_s``: the data-parallel gradient reduction of the stage's
weights (a ring all-reduce; ZeRO-3 a reduce-scatter, its gathers being in ``Z_s``; ZeRO-1/2's
reduce-scatter plus all-gather move what an all-reduce moves). Not overlapped with the backward
(choice: the bound the schedule guarantees; overlap is a runtime option).

**Step time** ``T = max_s [(m + p - 1) tau_s + G_s]`` (GPipe, 1F1B), ``(m + (p - 1) / v) tau_s
+ G_s`` interleaved with ``v`` chunks per device: the bottleneck stage's flush plus its
reduction (choice: a per-stage maximum, so a contiguous split is optimised exactly by the
search; with equal stages it is the usual ``(m + p - 1) tau + G``).

**Memory** of a device of stage ``s`` (bytes): weights ``W`` (its ranks' share), gradients
``W``, optimizer state ``k W`` (Adam 2, the graph's optimizer), ZeRO dividing the state (1),
gradients too (2) and weights too (3, plus the largest unit's gathered weights) by ``d``; the
stash of the micro-batches in flight (:func:`~dnnpart.pricing.chain.in_flight`; interleaved:
Megatron's warm-up count ``2 (p - s - 1) + (v - 1) p + 1`` chunks of ``1/v`` each), full
recomputation stashing each block's input (the embedding's and the head's stash whole) and
rebuilding one block's stash; the largest unit's
working set as captured (one sample: its weight gradients and temporaries; choice: not scaled
with ``b``, the weight-sized part does not grow with it). A plan fits when every device's
memory is at most its capacity.

**Bound**: ``B C_model(1) / N``: the model's compute for the global batch spread perfectly over
the ``N`` devices; every plan of the model takes at least that (communication, bubbles,
replicated work and recomputation only add).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt

from dnnpart.devices.cluster import Cluster
from dnnpart.errors import UsageError
from dnnpart.pricing.chain import in_flight
from dnnpart.pricing.pairs import Topology, pair_time, ring_steps_time
from dnnpart.pricing.parallel_profile import ModelProfile, UnitProfile

__all__ = [
    "RECOMPUTE",
    "SCHEDULES",
    "GroupLinks",
    "ParallelConfig",
    "ParallelCost",
    "StageParts",
    "StageTerms",
    "combine_parts",
    "evaluate_parallel",
    "ideal_bound",
    "schedule_span",
    "stage_flight",
    "stage_parts",
    "stage_terms",
]

FloatArray = npt.NDArray[np.float64]

RECOMPUTE = ("none", "selective", "full")
SCHEDULES = ("gpipe", "1f1b", "interleaved")
ZERO_STAGES = (0, 1, 2, 3)


@dataclass(frozen=True, slots=True, kw_only=True)
class ParallelConfig:
    """One hybrid plan (module docstring); ``recompute`` per stage, ``virtual`` chunks per
    device (interleaved only).

    Examples
    --------
    >>> c = ParallelConfig(d=2, t=2, p=2, zero=1, micro_batch=1, microbatches=4,
    ...                    schedule="1f1b", blocks=(3, 3), recompute=("none", "full"))
    >>> c.devices, c.global_batch, c.uniform
    (8, 8, False)
    """

    d: int
    t: int
    p: int
    zero: int
    micro_batch: int
    microbatches: int
    schedule: str
    blocks: tuple[int, ...]
    recompute: tuple[str, ...]
    virtual: int = 1

    def __post_init__(self) -> None:
        for name in ("d", "t", "p", "micro_batch", "microbatches", "virtual"):
            if getattr(self, name) < 1:
                raise UsageError(f"parallel plan: {name} must be >= 1, got {getattr(self, name)}")
        if self.zero not in ZERO_STAGES:
            raise UsageError(f"parallel plan: zero must be 0-3, got {self.zero}")
        if self.schedule not in SCHEDULES:
            raise UsageError(f"parallel plan: schedule must be one of {', '.join(SCHEDULES)}, "
                             f"got {self.schedule!r}")
        if len(self.blocks) != self.p or len(self.recompute) != self.p:
            raise UsageError(f"parallel plan: {self.p} stages need {self.p} block counts and "
                             f"recompute choices, got {len(self.blocks)} and {len(self.recompute)}")
        if any(r not in RECOMPUTE for r in self.recompute):
            raise UsageError(f"parallel plan: recompute must be one of {', '.join(RECOMPUTE)}")
        if (self.schedule == "interleaved") != (self.virtual > 1):
            raise UsageError("parallel plan: interleaved schedules have virtual >= 2 chunks, "
                             "the others 1")

    @property
    def devices(self) -> int:
        return self.d * self.t * self.p

    @property
    def global_batch(self) -> int:
        return self.micro_batch * self.microbatches * self.d

    @property
    def uniform(self) -> bool:
        """Whether every stage recomputes alike (what Megatron, torchtitan and DeepSpeed take)."""
        return len(set(self.recompute)) <= 1

    def to_dict(self) -> dict[str, Any]:
        return {"data": self.d, "tensor": self.t, "pipeline": self.p, "zero": self.zero,
                "micro_batch": self.micro_batch, "microbatches": self.microbatches,
                "global_batch": self.global_batch, "schedule": self.schedule,
                "virtual": self.virtual, "blocks": list(self.blocks),
                "recompute": list(self.recompute)}


@dataclass(frozen=True, slots=True)
class Ring:
    """A ring collective's steps: per step ``latency`` and ``inv_bandwidth`` (s, s/byte)."""

    size: int
    latency: FloatArray
    inv_bandwidth: FloatArray

    def allreduce(self, nbytes: Any) -> Any:
        """Ring all-reduce seconds of ``nbytes`` (array or float): a reduce-scatter and an
        all-gather (:func:`~dnnpart.pricing.pairs.ring_allreduce_time`)."""
        return 2.0 * self.gather(nbytes)

    def gather(self, nbytes: Any) -> Any:
        """All-gather (or reduce-scatter) seconds (:func:`~dnnpart.pricing.pairs.ring_steps_time`)."""
        return ring_steps_time(nbytes, self.inv_bandwidth, self.latency, self.size)


@dataclass(frozen=True, slots=True)
class GroupLinks:
    """The links the plan's collectives use, per stage: its tensor rings, data rings and the
    pair to the next stage (the slowest over the stage's groups), from the cluster's routed
    matrices."""

    tensor: tuple[Ring, ...]
    data: tuple[Ring, ...]
    next_stage: tuple[tuple[float, float], ...]  # (latency, inv_bandwidth) to stage s + 1

    @classmethod
    def of(cls, cluster: Cluster, *, d: int, t: int, p: int,
           topology: Topology | None = None) -> GroupLinks:
        """Links of ``d x t x p`` on the first ``d t p`` accelerators of ``cluster``; ``topology``:
        its accelerators' matrices (:meth:`~dnnpart.pricing.pairs.Topology.from_cluster`),
        built once by a caller pricing many plans."""
        n = cluster.n_accelerators
        if d * t * p > n:
            raise UsageError(f"parallel plan: {d * t * p} devices, the cluster has {n} accelerators")
        topo = topology if topology is not None else Topology.from_cluster(cluster)
        inv, lat = topo.inv_bandwidth, topo.latency
        grid = np.arange(d * t * p).reshape(p, d, t)  # [stage, replica, tensor rank]

        def ring(groups: npt.NDArray[np.int64]) -> Ring:
            # every ring of the stage, its steps together: the slowest step of any of them;
            # distinct (latency, inverse bandwidth) pairs only, as the slowest is all that counts
            nxt = np.roll(groups, -1, axis=1)
            steps = np.unique(np.stack([lat[groups, nxt].ravel(), inv[groups, nxt].ravel()]), axis=1)
            return Ring(groups.shape[1], steps[0], steps[1])

        tensor = tuple(ring(grid[s]) for s in range(p))
        data = tuple(ring(grid[s].T) for s in range(p))
        nxt = []
        for s in range(p - 1):  # rank j of replica r talks to its twin on the next stage
            a, b = grid[s].ravel(), grid[s + 1].ravel()
            nxt.append((float(lat[a, b].max()), float(inv[a, b].max())))
        return cls(tensor, data, tuple(nxt))


@dataclass(frozen=True, slots=True)
class StageTerms:
    """One stage's terms (module docstring), arrays over candidate block counts or floats."""

    tau: Any
    sync: Any
    memory: Any
    forward: Any  # the forward pass's part of tau (what a Gantt draws as F; tau - forward: B)
    weights: Any
    gradients: Any
    optimizer_state: Any
    activations: Any
    working: Any
    in_flight: Any


def _units(profile: ModelProfile, first: bool, last: bool) -> list[UnitProfile]:
    return [u for u, keep in ((profile.prologue, first), (profile.epilogue, last)) if keep]


def stage_terms(profile: ModelProfile, links: GroupLinks, *, stage: int, n_blocks: Any, t: int,
                d: int, p: int, b: int, m: int, zero: int, recompute: str, schedule: str,
                virtual: int = 1) -> StageTerms:
    """Stage ``stage``'s terms with ``n_blocks`` blocks (a number or an array of candidates).

    Examples
    --------
    >>> from dnnpart.pricing.parallel_profile import UnitProfile
    >>> u = UnitProfile(forward_s=(1.0, 0.0), backward_s=(2.0, 0.0), weights=(4.0, 0.0),
    ...                 stash=(8.0, 0.0), working=0.0, attention_s=0.0, attention_stash=0.0,
    ...                 boundary=0.0)
    >>> z = UnitProfile(forward_s=(0.0, 0.0), backward_s=(0.0, 0.0), weights=(0.0, 0.0),
    ...                 stash=(0.0, 0.0), working=0.0, attention_s=0.0, attention_stash=0.0,
    ...                 boundary=0.0)
    >>> prof = ModelProfile(prologue=z, block=u, epilogue=z, n_blocks=2, heads=1)
    >>> from dnnpart.devices import reference_cluster
    >>> links = GroupLinks.of(reference_cluster(n_accelerators=1, n_cpus=0, memory_bytes=1e9),
    ...                       d=1, t=1, p=1)
    >>> s = stage_terms(prof, links, stage=0, n_blocks=2, t=1, d=1, p=1, b=1, m=1, zero=0,
    ...                 recompute="none", schedule="1f1b")
    >>> float(s.tau), float(s.memory)   # 2 x (1 + 2); 8 + 8 + 2 x 8 weights, 2 x 8 stash
    (6.0, 48.0)
    """
    parts = stage_parts(profile, links, stage=stage, n_blocks=n_blocks, t=t, d=d, p=p, b=b,
                        recompute=recompute)
    return combine_parts(parts, stage=stage, p=p, m=m, zero=zero, schedule=schedule,
                         virtual=virtual, d=d, k=profile.optimizer_k)


@dataclass(frozen=True, slots=True)
class StageParts:
    """What a stage's terms are made of before the ZeRO stage and the schedule are chosen
    (:func:`combine_parts`): per micro-batch ``compute`` (compute, recomputation and tensor
    all-reduces) and ``pipeline`` (boundary messages, once), the rank's ``weights``, the data
    ring's all-gather time of them, the stash ``kept`` per micro-batch in flight and
    ``rebuilt`` once, the ``working`` set and the largest unit's weights; ``forward``: the
    forward pass's part of ``compute`` (its compute and all-reduces; recomputation runs in the
    backward)."""

    compute: Any
    forward: Any
    pipeline: Any
    weights: Any
    gather: Any
    kept: Any
    rebuilt: Any
    working: Any
    largest: Any


def stage_parts(profile: ModelProfile, links: GroupLinks, *, stage: int, n_blocks: Any, t: int,
                d: int, p: int, b: Any, recompute: str) -> StageParts:
    """Stage ``stage``'s :class:`StageParts` with ``n_blocks`` blocks and micro-batches of ``b``
    samples (each a number or an array; arrays broadcast against each other)."""
    n = np.asarray(n_blocks, dtype=np.float64)
    b = np.asarray(b, dtype=np.float64)
    first, last = stage == 0, stage == p - 1
    extra = _units(profile, first, last)
    blk = profile.block
    hidden = b * blk.boundary
    compute = n * blk.compute_s(t) + sum(u.compute_s(t) for u in extra)
    tp_count = 4.0 * n + (1.0 if first else 0.0) + (1.0 if last else 0.0)
    units_stash = n * blk.stash_at(t) + sum(u.stash_at(t) for u in extra)
    redo: Any
    kept: Any
    rebuilt: Any
    forward_s = n * blk.forward_at(t) + sum(u.forward_at(t) for u in extra)
    forward_tp = 2.0 * n + (1.0 if first else 0.0)  # the blocks' two and the embedding's
    if recompute == "full":  # each block's forward again in its backward, all-reduces too
        # Megatron checkpoints the transformer layers only: the embedding and the head keep
        # their stash and run once
        redo, tp_count = b * n * blk.forward_at(t), tp_count + 2.0 * n
        kept = b * (n * blk.boundary + sum(u.stash_at(t) for u in extra))
        rebuilt = b * blk.stash_at(t) + 0.0 * n
    elif recompute == "selective":
        redo = b * (n * blk.attention_s + sum(u.attention_s for u in extra)) / t
        dropped = (n * blk.attention_stash + sum(u.attention_stash for u in extra)) / t
        kept, rebuilt = b * (units_stash - dropped), 0.0 * n
    else:
        redo, kept, rebuilt = 0.0 * n, b * units_stash, 0.0 * n
    pp = 0.0 * hidden
    for lower in ((stage - 1,) if not first else ()) + ((stage,) if not last else ()):
        lat, inv = links.next_stage[lower]
        pp = pp + 2.0 * pair_time(hidden, inv, lat)  # the activation up, its gradient down
    weights = n * blk.weights_at(t) + sum(u.weights_at(t) for u in extra)
    allreduce = links.tensor[stage].allreduce(hidden)
    return StageParts(
        compute=b * compute + redo + tp_count * allreduce,
        forward=b * forward_s + forward_tp * allreduce,
        pipeline=pp, weights=weights, gather=links.data[stage].gather(weights), kept=kept,
        rebuilt=rebuilt, working=max([blk.working, *(u.working for u in extra)]) / t,
        largest=max([blk.weights_at(t), *(u.weights_at(t) for u in extra)]))


def stage_flight(schedule: str, m: int, p: int, stage: int, virtual: int = 1) -> int:
    """Micro-batches (interleaved: chunks) whose stash stage ``stage`` holds at its peak:
    :func:`~dnnpart.pricing.chain.in_flight`, or Megatron's interleaved warm-up count
    ``2 (p - s - 1) + (v - 1) p + 1``.

    Examples
    --------
    >>> [stage_flight("interleaved", 8, 2, s, 2) for s in (0, 1)], stage_flight("1f1b", 8, 2, 0)
    ([5, 3], 2)
    """
    if schedule == "interleaved":
        return min(m * virtual, 2 * (p - stage - 1) + (virtual - 1) * p + 1)
    return in_flight(schedule, m, p, stage, True)


def combine_parts(parts: StageParts, *, stage: int, p: int, m: int, zero: int, schedule: str,
                  virtual: int, d: int, k: float, flight: Any = None) -> StageTerms:
    """The :class:`StageTerms` of ``parts`` under ZeRO stage ``zero`` and ``schedule`` (module
    docstring); ``flight`` (default :func:`stage_flight` of ``stage``) may be a column of
    every stage's count when ``parts`` holds every stage's rows. The working set is the
    captured one (one sample: its weight gradients and temporaries; choice: not scaled with
    ``b``, the weight-sized part does not grow with it)."""
    gathers = 2.0 * parts.gather if zero == 3 else 0.0 * parts.gather
    tau = parts.compute + parts.pipeline * virtual + gathers
    sync = parts.gather if zero == 3 else 2.0 * parts.gather  # reduce-scatter / all-reduce
    if flight is None:
        flight = stage_flight(schedule, m, p, stage, virtual)
    if schedule == "interleaved":
        act = flight * parts.kept / virtual + parts.rebuilt
    else:
        act = flight * parts.kept + parts.rebuilt
    w = parts.weights
    w_mem = w / d + parts.largest if zero == 3 else w
    g_mem = w / d if zero >= 2 else w
    o_mem = k * w / d if zero >= 1 else k * w
    memory = w_mem + g_mem + o_mem + act + parts.working
    forward = parts.forward + (parts.pipeline * virtual + gathers) / 2.0  # the sends up, one gather
    return StageTerms(tau=tau, sync=sync, memory=memory, forward=forward, weights=w_mem, gradients=g_mem,
                      optimizer_state=o_mem, activations=act, working=parts.working,
                      in_flight=flight)


def stage_span(config: ParallelConfig) -> float:
    """The step's multiplier of the bottleneck's per-micro-batch time (:func:`schedule_span`)."""
    return schedule_span(config.schedule, config.microbatches, config.p, config.virtual)


def step_time(config: ParallelConfig, tau: Sequence[float], sync: Sequence[float]) -> float:
    """The step of ``config`` with these stages' ``tau_s`` and ``G_s``:
    ``max_s [span tau_s + G_s]`` (module docstring).

    Examples
    --------
    >>> c = ParallelConfig(d=1, t=1, p=2, zero=0, micro_batch=1, microbatches=4,
    ...                    schedule="1f1b", blocks=(1, 1), recompute=("none", "none"))
    >>> step_time(c, [1.0, 2.0], [3.0, 0.5])   # (4 + 2 - 1) x 2 + 0.5
    10.5
    """
    span = stage_span(config)
    return max(span * t + g for t, g in zip(tau, sync, strict=True))


def schedule_span(schedule: str, m: int, p: int, virtual: int = 1) -> float:
    """``m + p - 1`` micro-batch times, or ``m + (p - 1) / v`` interleaved.

    Examples
    --------
    >>> schedule_span("1f1b", 8, 4), schedule_span("interleaved", 8, 4, 2)
    (11.0, 9.5)
    """
    if schedule == "interleaved":
        return m + (p - 1) / virtual
    return float(m + p - 1)


@dataclass(frozen=True, slots=True)
class ParallelCost:
    """A plan's predicted step (seconds), per stage ``tau``, ``sync`` and memory, whether every
    device fits its capacity."""

    config: ParallelConfig
    step_s: float
    stages: tuple[StageTerms, ...]
    capacity: float
    fits: bool = field(default=True)

    def to_dict(self) -> dict[str, Any]:
        return {"config": self.config.to_dict(), "step_s": self.step_s, "fits": self.fits,
                # JSON has no infinity: an unbounded device's capacity is null
                "capacity_bytes": self.capacity if math.isfinite(self.capacity) else None,
                "stages": [{"tau_s": float(s.tau), "forward_s": float(s.forward),
                            "sync_s": float(s.sync),
                            "memory_bytes": float(s.memory), "weights": float(s.weights),
                            "gradients": float(s.gradients),
                            "optimizer_state": float(s.optimizer_state),
                            "activations": float(s.activations), "working": float(s.working),
                            "in_flight": s.in_flight} for s in self.stages]}


def device_capacity(cluster: Cluster, n: int) -> float:
    """The smallest memory capacity among the first ``n`` accelerators."""
    acc = np.asarray(cluster.accelerators, dtype=np.int64)[:n]
    return float(np.min(cluster.memory_capacity()[acc])) if acc.size else math.inf


def evaluate_parallel(profile: ModelProfile, cluster: Cluster, config: ParallelConfig,
                      links: GroupLinks | None = None) -> ParallelCost:
    """The step time and memory of ``config`` (module docstring); ``step_s`` is ``inf`` when
    a device's memory exceeds its capacity.

    Raises
    ------
    UsageError
        The blocks do not add up to the model's, or more devices than the cluster has.
    """
    if sum(config.blocks) != profile.n_blocks:
        raise UsageError(f"parallel plan: stages hold {sum(config.blocks)} blocks, the model has "
                         f"{profile.n_blocks}")
    links = links or GroupLinks.of(cluster, d=config.d, t=config.t, p=config.p)
    cap = device_capacity(cluster, config.devices)
    terms = tuple(
        stage_terms(profile, links, stage=s, n_blocks=config.blocks[s], t=config.t, d=config.d,
                    p=config.p, b=config.micro_batch, m=config.microbatches, zero=config.zero,
                    recompute=config.recompute[s], schedule=config.schedule,
                    virtual=config.virtual)
        for s in range(config.p))
    step = step_time(config, [float(s.tau) for s in terms], [float(s.sync) for s in terms])
    fits = all(float(s.memory) <= cap for s in terms)
    return ParallelCost(config=config, step_s=step if fits else math.inf, stages=terms,
                        capacity=cap, fits=fits)


def ideal_bound(profile: ModelProfile, global_batch: int, n_devices: int) -> float:
    """``B C_model(1) / N`` seconds (module docstring).

    Examples
    --------
    >>> from dnnpart.pricing.parallel_profile import UnitProfile
    >>> u = UnitProfile(forward_s=(1.0, 0.5), backward_s=(2.0, 0.5), weights=(0.0, 0.0),
    ...                 stash=(0.0, 0.0), working=0.0, attention_s=0.0, attention_stash=0.0,
    ...                 boundary=0.0)
    >>> ideal_bound(ModelProfile(prologue=u, block=u, epilogue=u, n_blocks=2, heads=1), 8, 4)
    32.0
    >>> 8 * (2 * 4.0 + 4.0 + 4.0) / 4   # four units' worth of 4 s per sample, 8 samples, 4 devices
    32.0
    """
    per_sample = (profile.n_blocks * profile.block.compute_s(1) + profile.prologue.compute_s(1)
                  + profile.epilogue.compute_s(1))
    return global_batch * per_sample / n_devices
