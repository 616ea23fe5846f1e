"""The exact search for hybrid data x tensor x pipeline plans (``plan --parallel dp,tp,pp``).

Over the cost model of :mod:`dnnpart.pricing.parallel` (Piper's two levels, Tarnawski et al.
2021, specialised to a stack of identical blocks):

* **outer**: every global choice -- tensor degree ``t`` (dividing the heads, at most a
  machine's size), pipeline depth ``p`` (at most the blocks), data degree ``d = N / (t p)``
  (all ``N`` devices used; ``d`` divides the global batch), micro-batch size ``b`` (dividing the
  per-replica batch; ``m`` micro-batches follow), ZeRO stage, schedule (GPipe, 1F1B,
  interleaved with ``v`` chunks);
* **inner**: the split of the blocks into ``p`` contiguous non-empty stages and, per stage, its
  recomputation. A stage's value ``V_s(n) = span tau_s(n) + G_s(n)`` (``inf`` when it does not
  fit) never decreases with its block count ``n`` (time and memory only grow), so the best
  bottleneck is the least ``T`` with ``sum_s max{n : V_s(n) <= T} >= L`` and every stage able
  to hold one block: a binary search over the values of the table, exact, ``O(p L log(p L))``
  per global choice.

Two answers: the **best plan** (recomputation may differ per stage) and the **best launchable
plan** (one recomputation for every stage; and no ZeRO-2/3 with pipeline stages, which
DeepSpeed refuses): what Megatron-LM, torchtitan and DeepSpeed take, and what the exports carry.
Both are exact over their spaces. Interleaved schedules split the blocks evenly (``L``
divisible by ``p v``, ``m`` by ``p``, as Megatron requires). The bound beside them is
:func:`~dnnpart.pricing.parallel.ideal_bound` (over every plan of the model).
"""

from __future__ import annotations

import bisect
import math
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field, fields
from typing import Any

import numpy as np
import numpy.typing as npt

from dnnpart.devices.cluster import Cluster
from dnnpart.errors import UsageError
from dnnpart.pricing.pairs import Topology
from dnnpart.pricing.parallel import (
    RECOMPUTE,
    SCHEDULES,
    GroupLinks,
    ParallelConfig,
    ParallelCost,
    StageParts,
    combine_parts,
    device_capacity,
    evaluate_parallel,
    ideal_bound,
    schedule_span,
    stage_flight,
    stage_parts,
)
from dnnpart.pricing.parallel_profile import ModelProfile

__all__ = ["HybridResult", "SearchSpace", "best_split", "global_choices", "search_parallel"]

FloatArray = npt.NDArray[np.float64]


@dataclass(frozen=True, slots=True, kw_only=True)
class SearchSpace:
    """What the search may choose; ``None``: every value the model allows (module docstring).

    ``dims``: the parallel dimensions asked for (``dp``, ``tp``, ``pp``); a missing one is
    fixed at degree 1.
    """

    dims: frozenset[str] = frozenset({"dp", "tp", "pp"})
    tensor: tuple[int, ...] | None = None
    pipeline: tuple[int, ...] | None = None
    micro_batch: tuple[int, ...] | None = None
    zero: tuple[int, ...] = (0, 1, 2, 3)
    recompute: tuple[str, ...] = RECOMPUTE
    schedules: tuple[str, ...] = SCHEDULES
    virtual: tuple[int, ...] = (2, 4)


def divisors(n: int) -> list[int]:
    """Divisors of ``n`` in increasing order.

    >>> divisors(12)
    [1, 2, 3, 4, 6, 12]
    """
    return [k for k in range(1, n + 1) if n % k == 0]


def machine_size(cluster: Cluster) -> int:
    """Accelerators per machine (its ``group``); all of them on a flat cluster."""
    acc = np.asarray(cluster.accelerators, dtype=np.int64)
    if cluster.group.size == 0 or acc.size == 0:
        return int(acc.size)
    groups = cluster.group[acc]
    return int(np.bincount(groups - groups.min()).max())


@dataclass(frozen=True, slots=True)
class GlobalChoice:
    """One outer choice (module docstring)."""

    t: int
    d: int
    p: int
    b: int
    m: int
    zero: int
    schedule: str
    virtual: int = 1


def global_choices(profile: ModelProfile, cluster: Cluster, *, devices: int, global_batch: int,
                   space: SearchSpace) -> Iterator[GlobalChoice]:
    """Every outer choice of the space on ``devices`` accelerators (module docstring)."""
    L = profile.n_blocks
    node = machine_size(cluster)
    ts = [t for t in divisors(devices) if profile.heads % t == 0 and t <= node]
    if "tp" not in space.dims:
        ts = [1]
    if space.tensor is not None:
        ts = [t for t in ts if t in space.tensor]
    for t in ts:
        ps = [p for p in divisors(devices // t) if p <= L]
        if "pp" not in space.dims:
            ps = [1]
        if space.pipeline is not None:
            ps = [p for p in ps if p in space.pipeline]
        for p in ps:
            if devices % (t * p):
                continue
            d = devices // (t * p)
            if ("dp" not in space.dims and d > 1) or global_batch % d:
                continue
            per_replica = global_batch // d
            for b in divisors(per_replica):
                if space.micro_batch is not None and b not in space.micro_batch:
                    continue
                m = per_replica // b
                for zero in space.zero:
                    for schedule in space.schedules:
                        if schedule == "interleaved":
                            for v in space.virtual:
                                if p >= 2 and L % (p * v) == 0 and m % p == 0:
                                    yield GlobalChoice(t, d, p, b, m, zero, schedule, v)
                        elif p > 1 or schedule == "1f1b":  # one stage: the schedules agree
                            yield GlobalChoice(t, d, p, b, m, zero, schedule)


def best_split(values: FloatArray, n_blocks: int) -> tuple[float, list[int]]:
    """The least bottleneck over splits of ``n_blocks`` into ``len(values)`` contiguous
    non-empty stages, and a split reaching it; ``values[s, n - 1]``: stage ``s``'s value with
    ``n`` blocks, nondecreasing in ``n`` (``inf``: does not fit). ``(inf, [])`` when none fits.

    Examples
    --------
    >>> v = np.array([[1.0, 2.0, 3.0], [1.5, 2.5, np.inf]])
    >>> best_split(v, 3)
    (2.0, [2, 1])
    """
    p = values.shape[0]
    if n_blocks < p:
        return math.inf, []
    finite = values[np.isfinite(values)]
    if finite.size == 0:
        return math.inf, []
    candidates = np.unique(finite)

    def counts(threshold: float) -> npt.NDArray[np.int64]:
        return np.asarray((values <= threshold).sum(axis=1), dtype=np.int64)  # rows nondecreasing

    def feasible(threshold: float) -> bool:
        c = counts(threshold)
        return bool(c.min() >= 1 and c.sum() >= n_blocks)

    first = bisect.bisect_left(range(candidates.size), True,
                               key=lambda i: feasible(float(candidates[i])))
    if first == candidates.size:
        return math.inf, []
    best = float(candidates[first])
    split = counts(best).tolist()
    surplus = sum(split) - n_blocks
    for s in range(p - 1, -1, -1):  # take the surplus off the last stages first
        cut = min(surplus, split[s] - 1)
        split[s] -= cut
        surplus -= cut
    return best, split


@dataclass(slots=True)
class _Tables:
    """Per stage, recomputation and block count: value, for one global choice."""

    values: FloatArray  # (p, R, n_max)
    recompute: tuple[str, ...]


class _PartsCache:
    """:func:`~dnnpart.pricing.parallel.stage_parts` per ``(t, d, p)``, recomputation and
    split kind, for every micro-batch size at once, every stage's rows stacked (one array per
    field, ``[micro-batch size, stage, block count]``): the global choices differing only in
    micro-batch size, ZeRO stage and schedule share them."""

    def __init__(self, profile: ModelProfile, recompute: Sequence[str]) -> None:
        self.profile = profile
        self.recompute = tuple(recompute)
        self.parts: dict[tuple[int, ...], tuple[dict[int, int], StageParts]] = {}

    def get(self, links: GroupLinks, g: GlobalChoice, k: int, even: bool) -> StageParts:
        key = (g.t, g.d, g.p, k, int(even))
        hit = self.parts.get(key)
        if hit is None:
            L = self.profile.n_blocks
            counts = np.array([L // g.p], dtype=np.float64) if even else \
                np.arange(1, L - g.p + 2, dtype=np.float64)
            sizes = divisors(g.b * g.m)  # every micro-batch size of this replica's batch
            column = np.array(sizes, dtype=np.float64)[:, None]
            rows = [stage_parts(self.profile, links, stage=s, n_blocks=counts, t=g.t, d=g.d,
                                p=g.p, b=column, recompute=self.recompute[k]) for s in range(g.p)]

            def stack(name: str) -> FloatArray:
                out = np.empty((len(sizes), g.p, counts.size))
                for s, r in enumerate(rows):
                    out[:, s, :] = getattr(r, name)  # a float, a row or a table: broadcast
                return out

            hit = ({size: i for i, size in enumerate(sizes)},
                   StageParts(**{f.name: stack(f.name) for f in fields(StageParts)}))
            self.parts[key] = hit
        index, parts = hit
        i = index[g.b]
        return StageParts(**{f.name: getattr(parts, f.name)[i] for f in fields(StageParts)})


def _tables(cache: _PartsCache, links: GroupLinks, g: GlobalChoice, capacity: float) -> _Tables:
    even = g.schedule == "interleaved"
    span = schedule_span(g.schedule, g.m, g.p, g.virtual)
    flight = np.array([[stage_flight(g.schedule, g.m, g.p, s, g.virtual)] for s in range(g.p)],
                      dtype=np.float64)
    rows = []
    for k in range(len(cache.recompute)):
        terms = combine_parts(cache.get(links, g, k, even), stage=0, p=g.p, m=g.m, zero=g.zero,
                              schedule=g.schedule, virtual=g.virtual, d=g.d,
                              k=cache.profile.optimizer_k, flight=flight)
        value = span * np.asarray(terms.tau) + np.asarray(terms.sync)
        rows.append(np.where(np.asarray(terms.memory) <= capacity, value, np.inf))
    out = np.stack(rows, axis=1)  # (p, R, n)
    # monotone by the model; the running maximum guards the search against rounding
    return _Tables(np.maximum.accumulate(out, axis=2), cache.recompute)


@dataclass(slots=True)
class HybridResult:
    """The search's answers (module docstring): ``best`` and ``launchable`` (``None`` when no
    plan fits), the bound, how many global choices were priced and how many skipped by their
    floor (:func:`choice_floor`), and the best step time per tensor degree and per pipeline depth
    (the what-if tables)."""

    best: ParallelCost | None
    launchable: ParallelCost | None
    bound_s: float
    devices: int
    global_batch: int
    choices: int
    pruned: int = 0
    by_tensor: dict[int, float] = field(default_factory=dict)
    by_pipeline: dict[int, float] = field(default_factory=dict)

    @property
    def gap(self) -> float:
        """Relative gap of the launchable plan's step time over the bound."""
        if self.launchable is None or self.bound_s <= 0:
            return math.inf
        return (self.launchable.step_s - self.bound_s) / self.launchable.step_s

    def to_dict(self) -> dict[str, Any]:
        return {"devices": self.devices, "global_batch": self.global_batch,
                "bound_s": self.bound_s, "choices": self.choices, "pruned": self.pruned,
                "best": self.best.to_dict() if self.best else None,
                "launchable": self.launchable.to_dict() if self.launchable else None,
                "by_tensor": {str(k): v for k, v in sorted(self.by_tensor.items())},
                "by_pipeline": {str(k): v for k, v in sorted(self.by_pipeline.items())}}


def _config(g: GlobalChoice, split: Sequence[int], recompute: Sequence[str]) -> ParallelConfig:
    return ParallelConfig(d=g.d, t=g.t, p=g.p, zero=g.zero, micro_batch=g.b, microbatches=g.m,
                          schedule=g.schedule, blocks=tuple(int(x) for x in split),
                          recompute=tuple(recompute), virtual=g.virtual)


def choice_floor(profile: ModelProfile, g: GlobalChoice, gather: float | None = None) -> float:
    """A lower bound on every plan of global choice ``g``: the span times the average stage's
    compute per micro-batch (the bottleneck takes at least the average; communication,
    recomputation and the reduction only add); with ``gather`` (the cheapest data ring's
    all-gather of ``ceil(L / p)`` blocks' weights: :func:`fullest_stage_gather`), also the stage
    holding the most blocks: their compute over the span plus that reduction. A choice whose
    floor is no better than the incumbents of every answer it could change is skipped: the
    search stays exact.

    Examples
    --------
    >>> from dnnpart.pricing.parallel_profile import ModelProfile, UnitProfile
    >>> u = UnitProfile(forward_s=(1.0, 0.0), backward_s=(1.0, 0.0), weights=(0.0, 0.0),
    ...                 stash=(0.0, 0.0), working=0.0, attention_s=0.0, attention_stash=0.0,
    ...                 boundary=0.0)
    >>> choice_floor(ModelProfile(prologue=u, block=u, epilogue=u, n_blocks=2, heads=1),
    ...              GlobalChoice(t=1, d=1, p=2, b=1, m=4, zero=0, schedule="1f1b"))
    20.0
    """
    compute = (profile.n_blocks * profile.block.compute_s(g.t) + profile.prologue.compute_s(g.t)
               + profile.epilogue.compute_s(g.t))
    span = schedule_span(g.schedule, g.m, g.p, g.virtual)
    floor = span * g.b * compute / g.p
    if gather is None:
        return floor
    k = -(-profile.n_blocks // g.p)
    sync = gather * (1.0 if g.zero == 3 else 2.0)  # a reduce-scatter, else an all-reduce
    return max(floor, span * g.b * k * profile.block.compute_s(g.t) + sync)


def fullest_stage_gather(profile: ModelProfile, links: GroupLinks, t: int, p: int) -> float:
    """The cheapest data ring's all-gather of ``ceil(L / p)`` blocks' weights at degree ``t``."""
    weights = -(-profile.n_blocks // p) * profile.block.weights_at(t)
    return min(float(r.gather(weights)) for r in links.data)


def launchable_choice(g: GlobalChoice) -> bool:
    """Whether runtimes take this global choice: ZeRO-2/3 only without pipeline stages."""
    return g.zero <= 1 or g.p == 1


def search_parallel(profile: ModelProfile, cluster: Cluster, *, global_batch: int,
                    devices: int | None = None, space: SearchSpace | None = None,
                    launchable_only: bool = False) -> HybridResult:
    """The best and the best launchable plan of ``profile`` on ``devices`` accelerators of
    ``cluster`` for ``global_batch`` samples per step (module docstring). The global choices
    are priced in the order of their floors (:func:`choice_floor`), so the first good plans
    let the floors skip the rest. ``launchable_only``: the launchable plan alone (``best``
    is ``None``, the what-if tables empty), the question a what-if per device count asks; its
    search stops at the first floor no better than the incumbent.

    Raises
    ------
    UsageError
        No device, a global batch below 1, or more devices than the cluster has.

    Examples
    --------
    >>> from dnnpart.pricing.parallel_profile import ModelProfile, UnitProfile
    >>> from dnnpart.devices import reference_cluster
    >>> u = UnitProfile(forward_s=(1.0, 0.1), backward_s=(2.0, 0.1), weights=(8e6, 1e3),
    ...                 stash=(4e6, 1e6), working=1e6, attention_s=0.2, attention_stash=1e6,
    ...                 boundary=1e5)
    >>> prof = ModelProfile(prologue=u, block=u, epilogue=u, n_blocks=4, heads=4)
    >>> r = search_parallel(prof, reference_cluster(n_accelerators=4, n_cpus=0, memory_bytes=1e9),
    ...                     global_batch=8)
    >>> r.launchable.config.devices, r.best.step_s <= r.launchable.step_s, r.bound_s <= r.best.step_s
    (4, True, True)
    """
    space = space or SearchSpace()
    n = devices if devices is not None else cluster.n_accelerators
    if n < 1 or global_batch < 1:
        raise UsageError(f"parallel plan: need >= 1 device and a global batch >= 1, got {n} and "
                         f"{global_batch}")
    if n > cluster.n_accelerators:
        raise UsageError(f"parallel plan: {n} devices, the cluster has {cluster.n_accelerators} "
                         "accelerators")
    capacity = device_capacity(cluster, n)
    topology = Topology.from_cluster(cluster)  # once: a (D, D) inverse of the bandwidths
    links_of: dict[tuple[int, int, int], GroupLinks] = {}
    gathers: dict[tuple[int, int, int], float] = {}
    floored: list[tuple[float, int, GlobalChoice]] = []
    for g in global_choices(profile, cluster, devices=n, global_batch=global_batch, space=space):
        if launchable_only and not launchable_choice(g):
            continue
        key = (g.d, g.t, g.p)
        if key not in links_of:
            links_of[key] = GroupLinks.of(cluster, d=g.d, t=g.t, p=g.p, topology=topology)
            gathers[key] = fullest_stage_gather(profile, links_of[key], g.t, g.p)
        floored.append((choice_floor(profile, g, gathers[key]), len(floored), g))
    # cheapest floor first: good incumbents early let the floors skip more choices
    floored.sort(key=lambda item: (item[0], item[1]))
    best: tuple[float, GlobalChoice, list[int], list[str]] | None = None
    uniform: tuple[float, GlobalChoice, list[int], list[str]] | None = None
    by_t: dict[int, float] = {}
    by_p: dict[int, float] = {}
    cache = _PartsCache(profile, space.recompute)
    count = pruned = 0
    for i, (floor, _, g) in enumerate(floored):
        if launchable_only and uniform is not None and floor >= uniform[0]:
            pruned += len(floored) - i  # the floors only grow from here
            break
        # no stage of this choice can beat what every table it feeds already holds
        if not launchable_only and (best is not None and uniform is not None
                                    and floor >= best[0] and floor >= uniform[0]
                                    and floor >= by_t.get(g.t, math.inf)
                                    and floor >= by_p.get(g.p, math.inf)):
            pruned += 1
            continue
        count += 1
        tables = _tables(cache, links_of[(g.d, g.t, g.p)], g, capacity)
        if not launchable_only:
            mixed = tables.values.min(axis=1)
            if g.schedule == "interleaved":
                per_stage = [profile.n_blocks // g.p] * g.p
                value = float(mixed[:, 0].max())
                found = (value, per_stage) if math.isfinite(value) else (math.inf, [])
            else:
                found = best_split(mixed, profile.n_blocks)
            value, split = found
            if split and (best is None or value < best[0]):
                column = [0 if g.schedule == "interleaved" else k - 1 for k in split]
                rec = [tables.recompute[int(np.argmin(tables.values[s, :, column[s]]))]
                       for s in range(g.p)]
                best = (value, g, split, rec)
            if split:
                by_t[g.t] = min(by_t.get(g.t, math.inf), value)
                by_p[g.p] = min(by_p.get(g.p, math.inf), value)
            if not launchable_choice(g):
                continue
        for k, r in enumerate(tables.recompute):
            rows = tables.values[:, k, :]
            if g.schedule == "interleaved":
                v_u = float(rows[:, 0].max())
                split_u = [profile.n_blocks // g.p] * g.p if math.isfinite(v_u) else []
            else:
                v_u, split_u = best_split(rows, profile.n_blocks)
            if split_u and (uniform is None or v_u < uniform[0]):
                uniform = (v_u, g, split_u, [r] * g.p)

    def cost(found: tuple[float, GlobalChoice, list[int], list[str]] | None) -> ParallelCost | None:
        if found is None:
            return None
        _, g, split, rec = found
        return evaluate_parallel(profile, cluster, _config(g, split, rec), links_of[(g.d, g.t, g.p)])

    return HybridResult(best=cost(best), launchable=cost(uniform),
                        bound_s=ideal_bound(profile, global_batch, n), devices=n,
                        global_batch=global_batch, choices=count, pruned=pruned, by_tensor=by_t,
                        by_pipeline=by_p)
