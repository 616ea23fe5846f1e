"""Synchronous pipeline simulator (paper 4; also paper 1's plans): GPipe, 1F1B, replicas.

Model (``docs/simulate.md``):

* stages ``0..S-1`` in a topological order of their dependencies; stage ``s`` runs on its
  replica devices (ring order = the order given, paper 4 Eq. 7 follows replica index order);
  micro-batch ``j`` of a step runs on replica ``j mod r_s``;
* per micro-batch a stage runs a forward op ``F`` (time ``forward``) and, when training, a
  backward op ``B`` (``backward``, plus with recomputation the forward it runs again:
  ``Stage.recompute_time``, the whole ``forward`` unless the stage says less);
* dependencies are :class:`StageEdge` entries (stage, phase) -> (stage, phase) with bytes per
  micro-batch; a transfer between two devices takes the shared transfer time of
  :mod:`dnnpart.pricing.pairs` (``latency + bytes / bandwidth`` of the routed pair, zero on
  one device); transfers do not contend (one link per pair, full duplex);
* each device runs its ops in the schedule's order: **GPipe** all forwards then all
  backwards, both in micro-batch order; **1F1B** (PipeDream-flush) orders a device's ops by
  priority ``F(j) -> j - R(S - s - 1)``, ``B(j) -> j + 1/2`` (``R`` the largest replica
  count): with ``R`` replicas everywhere, each pipeline copy runs the usual ``S - s - 1``
  warm-up forwards, then one forward and one backward alternately, then the cool-down; with
  uneven replica counts the same rule stays deadlock-free;
* after a stage's last backward (all replicas), a ring all-reduce of its weights (``r > 1``):
  the shared ring all-reduce time of :mod:`dnnpart.pricing.pairs`,
  ``2(r - 1) * max_k(latency_k + W / (r * B_k))`` -- paper 4 Eq. 7's ``2(r-1)W/(rB)`` at the
  slowest link when latencies are 0. Paper 1's throughput objective keeps its own
  ``(r - 1) W / (r B)`` per sample (:mod:`dnnpart.evaluate.replication`);
* Eq. 5's stage times (reported beside the simulated time) are the shared ones of
  :mod:`dnnpart.pricing.stages` under ``full`` (compute, transfers, all-reduce), each stage's
  worst pipeline copy;
* step time = the last finish (ops and all-reduces); time per sample = step time / ``m``
  (a micro-batch is one execution of the graph, the "sample" of paper 1's objective);
  bubble fraction = 1 - busy compute time / (devices used x step time);
* memory per device: weights ``W``, gradients ``W`` and optimizer state ``k W`` (training;
  ``k = optimizer_factor``, 2 for Adam), activations = peak micro-batches in flight (from the
  start of ``F`` to the end of ``B``, half-open) x stashed bytes per micro-batch
  (``activation_bytes``, or with recomputation ``input_bytes`` plus one micro-batch's
  ``activation_bytes`` rebuilt during a backward) -- an upper bound with recomputation; the
  memory curve of each device in ``timeline.memory`` is exact (static bytes plus the stash of
  every micro-batch in flight, plus the rebuilt activations while a ``B`` runs).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt

from dnnpart.devices.cluster import Cluster
from dnnpart.errors import UsageError
from dnnpart.pricing.pairs import Topology, ring_allreduce_time
from dnnpart.pricing.stages import stage_times as eq5_stage_times
from dnnpart.simulate.pipeline_kernels import timing_kernel
from dnnpart.simulate.timeline import ALLREDUCE, COMPUTE, TRANSFER, MemoryCurve, Timeline
from dnnpart.stages import B, F, Stage, StageEdge

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]

GPIPE, ONE_F_ONE_B = "gpipe", "1f1b"
SCHEDULES = (GPIPE, ONE_F_ONE_B)


@dataclass(frozen=True, slots=True, kw_only=True, eq=False)
class PipelineResult:
    """Result of :func:`simulate_pipeline` (times in the cluster's graph unit)."""

    step_time: float
    time_per_sample: float
    bubble_fraction: float
    max_stage_time: float
    stage_times: FloatArray
    allreduce: FloatArray
    op_stage: IntArray
    op_micro: IntArray
    op_phase: IntArray
    op_device: IntArray
    start: FloatArray
    finish: FloatArray
    peak_inflight: dict[int, int]
    memory: dict[int, dict[str, float]]
    microbatches: int
    schedule: str
    timeline: Timeline = field(repr=False)

    def to_dict(self, cluster: Cluster) -> dict[str, object]:
        names = [d.name for d in cluster.devices]
        return {
            "schedule": self.schedule,
            "microbatches": self.microbatches,
            "step_time": self.step_time,
            "time_per_sample": self.time_per_sample,
            "throughput_samples_per_s": (1.0 / (self.time_per_sample * cluster.time_unit_s)
                                         if self.time_per_sample > 0 else None),
            "bubble_fraction": self.bubble_fraction,
            "max_stage_time_eq5": self.max_stage_time,
            "stage_times_eq5": self.stage_times.tolist(),
            "allreduce": self.allreduce.tolist(),
            "devices": {names[d]: {**mem, "peak_inflight_microbatches": self.peak_inflight[d]}
                        for d, mem in sorted(self.memory.items())},
        }


def device_orders(n_stages: int, stage: int, micro: Sequence[int], schedule: str,
                  training: bool, spread: int = 1) -> list[tuple[int, int]]:
    """``(phase, micro-batch)`` in the order a device of ``stage`` runs them.

    Examples
    --------
    >>> device_orders(3, 0, [0, 1, 2, 3], "1f1b", True)   # (phase 0 = F, 1 = B; micro-batch)
    [(0, 0), (0, 1), (0, 2), (1, 0), (0, 3), (1, 1), (1, 2), (1, 3)]
    """
    if not training:
        return [(F, j) for j in micro]
    if schedule == GPIPE:
        return [(F, j) for j in micro] + [(B, j) for j in micro]
    # 1F1B as a priority: F(j) at j - R (S - s - 1), B(j) at j + 1/2, R = `spread` (the most
    # replicas of any stage). With R replicas per stage a device sees every R-th micro-batch
    # and this is the usual 1F1B of its pipeline copy: S - s - 1 warm-up forwards, then F/B
    # alternately, then the cool-down. It is deadlock-free for any replica counts: every
    # dependency has a smaller priority, or is B(s+1, j) -> B(s, j) (docs/simulate.md).
    w = (n_stages - stage - 1) * spread
    keyed = [(j - w, F, j) for j in micro] + [(j + 0.5, B, j) for j in micro]
    return [(ph, j) for _, ph, j in sorted(keyed)]


def _memory_curve(static: float, f_start: FloatArray, b_end: FloatArray, stash: float,
                  b_start: FloatArray | None, rebuilt: float) -> MemoryCurve:
    """Memory of one device over a step: ``static`` + stashed micro-batches (half-open
    ``[F start, B end)``) + with recomputation the activations rebuilt while a ``B`` runs."""
    times = [f_start, b_end]
    deltas = [np.full(f_start.size, stash), np.full(b_end.size, -stash)]
    if b_start is not None:
        times += [b_start, b_end]
        deltas += [np.full(b_start.size, rebuilt), np.full(b_end.size, -rebuilt)]
    t = np.concatenate(times)
    delta = np.concatenate(deltas)
    order = np.argsort(t, kind="stable")
    run = static + np.cumsum(delta[order])
    uniq, last = np.unique(t[order][::-1], return_index=True)
    value = run[::-1][last]  # after every event at that time (half-open intervals)
    return MemoryCurve(times=uniq, at=value, after=value, base=static)


def simulate_pipeline(
    stages: Sequence[Stage], cluster: Cluster, *, edges: Sequence[StageEdge] | None = None,
    microbatches: int = 4, schedule: str = GPIPE, recompute: bool = False,
    training: bool = True, optimizer_factor: float = 2.0,
) -> PipelineResult:
    """Simulate one synchronous training (or inference) step; see the module docstring.

    ``edges=None`` chains the stages: ``F(s) -> F(s+1)`` and ``B(s+1) -> B(s)`` carrying each
    stage's ``activation_bytes`` forward and back.

    Examples
    --------
    >>> from dnnpart.devices import reference_cluster
    >>> c = reference_cluster(n_accelerators=3, n_cpus=0, memory_bytes=1e9)
    >>> st = [Stage(devices=(i,), forward=1.0, backward=2.0) for i in range(3)]
    >>> r = simulate_pipeline(st, c, microbatches=4)
    >>> r.step_time, round(r.bubble_fraction, 4)        # (m + S - 1)(f + b), (S-1)/(m+S-1)
    (18.0, 0.3333)
    """
    if schedule not in SCHEDULES:
        raise UsageError(f"schedule must be one of {list(SCHEDULES)}, got {schedule!r}")
    if microbatches < 1:
        raise UsageError(f"microbatches must be >= 1, got {microbatches}")
    S, m = len(stages), int(microbatches)
    if S == 0:
        raise UsageError("a pipeline needs at least one stage")
    seen: set[int] = set()
    for stg in stages:
        for dv in stg.devices:
            if dv in seen or not 0 <= dv < cluster.n_devices:
                raise UsageError(f"stage {stg.name}: device {dv} is out of range or in two stages")
            seen.add(dv)
    if edges is None:
        edges = [StageEdge(src=s, dst=s + 1, bytes=stages[s].activation_bytes)
                 for s in range(S - 1)]
        if training:
            edges += [StageEdge(src=s + 1, dst=s, bytes=stages[s].activation_bytes,
                                src_phase=B, dst_phase=B) for s in range(S - 1)]
    phases = 2 if training else 1
    spread = max(len(st.devices) for st in stages)

    def op(s: int, j: int, ph: int) -> int:
        return (s * m + j) * phases + ph

    n_ops = S * m * phases
    dur = np.empty(n_ops)
    dev = np.empty(n_ops, np.int64)
    op_stage = np.repeat(np.arange(S), m * phases)
    op_micro = np.tile(np.repeat(np.arange(m), phases), S)
    op_phase = np.tile(np.arange(phases), S * m)
    js = np.arange(m)
    src_parts: list[IntArray] = []
    dst_parts: list[IntArray] = []
    delay_parts: list[FloatArray] = []
    for s, st in enumerate(stages):
        r = len(st.devices)
        on = np.asarray(st.devices, np.int64)[js % r]
        dev[op(s, 0, F) + js * phases] = on
        dur[op(s, 0, F) + js * phases] = st.forward
        if training:
            dev[op(s, 0, B) + js * phases] = on
            dur[op(s, 0, B) + js * phases] = st.backward + (st.recompute_time if recompute else 0.0)
            src_parts.append(op(s, 0, F) + js * phases)
            dst_parts.append(op(s, 0, B) + js * phases)
            delay_parts.append(np.zeros(m))
        for k in range(r):
            order = device_orders(S, s, list(range(k, m, r)), schedule, training, spread)
            seq = np.array([op(s, j, ph) for ph, j in order], np.int64)
            src_parts.append(seq[:-1])
            dst_parts.append(seq[1:])
            delay_parts.append(np.zeros(max(seq.size - 1, 0)))
    topo = Topology.from_matrices(cluster.bandwidth, cluster.latency)
    for e in edges:
        if e.src_phase >= phases or e.dst_phase >= phases:
            continue
        ops_u = op(e.src, 0, e.src_phase) + js * phases
        ops_v = op(e.dst, 0, e.dst_phase) + js * phases
        dev_u, dev_v = dev[ops_u], dev[ops_v]
        src_parts.append(ops_u)
        dst_parts.append(ops_v)
        delay_parts.append(np.where(dev_u == dev_v, 0.0,
                                    topo.transfer_time(e.bytes, dev_u, dev_v) / cluster.time_unit_s))
    src_all = np.concatenate(src_parts) if src_parts else np.zeros(0, np.int64)
    dst_all = np.concatenate(dst_parts) if dst_parts else np.zeros(0, np.int64)
    delay_all = np.concatenate(delay_parts) if delay_parts else np.zeros(0)
    by_dst = np.argsort(dst_all, kind="stable")
    pred = src_all[by_dst].astype(np.int64)
    delay = delay_all[by_dst]
    ptr = np.zeros(n_ops + 1, np.int64)
    ptr[1:] = np.cumsum(np.bincount(dst_all, minlength=n_ops))
    start, finish, timed = timing_kernel(dur, ptr, pred, delay)
    if timed < n_ops:
        raise UsageError("the stage dependencies form a cycle (stages must be in a topological order)")
    allreduce = np.zeros(S)
    ar_start = np.zeros(S)
    step = float(finish.max())
    if training:
        for s, st in enumerate(stages):
            allreduce[s] = ring_allreduce_time(topo.inv_bandwidth, topo.latency, st.devices,
                                               st.weight_bytes) / cluster.time_unit_s
            ar_start[s] = float(finish[op_stage == s].max())
            step = max(step, ar_start[s] + allreduce[s])
    used = len(seen)
    busy = float(dur.sum())
    bubble = 1.0 - busy / (used * step) if step > 0 else 0.0
    # Eq. 5 stage time (the shared one): compute + inter-stage transfers per micro-batch +
    # all-reduce (training), the worst pipeline copy of each stage
    compute = np.array([st.forward + (st.backward + (st.recompute_time if recompute else 0.0)
                                      if training else 0.0) for st in stages])
    stage_times = eq5_stage_times(
        compute, [st.devices for st in stages], topo, "full",
        edges=[(e.src, e.dst, e.bytes) for e in edges if e.src_phase < phases and e.dst_phase < phases],
        ring_bytes=[st.weight_bytes for st in stages] if training else None,
        time_unit_s=cluster.time_unit_s).max(axis=0)
    inflight: dict[int, int] = {}
    memory: dict[int, dict[str, float]] = {}
    curves: dict[str, MemoryCurve] = {}
    for st in stages:
        for d in st.devices:
            mine = np.flatnonzero(dev == d)
            fw = mine[op_phase[mine] == F]
            lo = start[fw]
            hi = finish[fw + 1] if training else finish[fw]
            times = np.concatenate((lo, hi))
            delta = np.concatenate((np.ones(lo.size, np.int64), -np.ones(hi.size, np.int64)))
            by_time = np.lexsort((delta, times))  # releases before acquisitions at equal times
            peak = int(np.cumsum(delta[by_time]).max()) if by_time.size else 0
            inflight[d] = peak
            stash = st.input_bytes if recompute else st.activation_bytes
            act = peak * stash + (st.activation_bytes if recompute and training and peak else 0.0)
            memory[d] = {
                "weights": st.weight_bytes,
                "gradients": st.weight_bytes if training else 0.0,
                "optimizer_state": optimizer_factor * st.weight_bytes if training else 0.0,
                "activations": act,
            }
            memory[d]["total"] = sum(memory[d].values())
            curves[cluster.devices[d].name] = _memory_curve(
                memory[d]["total"] - act, lo, hi, stash,
                start[fw + 1] if recompute and training else None, st.activation_bytes)
    names = [x.name for x in cluster.devices]
    ar_rows = [s for s in range(S) if allreduce[s] > 0]
    ring_names = [f"ring {stages[s].name or s}" for s in ar_rows]
    labels = tuple(f"{'FB'[p]}{j} {stages[s].name or s}"
                   for s, j, p in zip(op_stage.tolist(), op_micro.tolist(), op_phase.tolist(),
                                      strict=True))
    # transfers: every dependency with a delay, on the row of its directed device pair
    dst_op = np.repeat(np.arange(n_ops), np.diff(ptr))
    moved = np.flatnonzero(delay > 0)
    xsrc, xdst = pred[moved], dst_op[moved]
    pair = dev[xsrc] * cluster.n_devices + dev[xdst]
    pairs = np.unique(pair)
    pair_names = [f"{names[k // cluster.n_devices]}->{names[k % cluster.n_devices]}"
                  for k in pairs.tolist()]
    n_res = len(names) + len(ring_names)
    timeline = Timeline(
        resources=tuple(names + ring_names + pair_names),
        resource=np.concatenate((dev, len(names) + np.arange(len(ar_rows)),
                                 n_res + np.searchsorted(pairs, pair))).astype(np.int64),
        start=np.concatenate((start, ar_start[ar_rows], finish[xsrc])),
        end=np.concatenate((finish, ar_start[ar_rows] + allreduce[ar_rows],
                            finish[xsrc] + delay[moved])),
        kind=(COMPUTE,) * n_ops + (ALLREDUCE,) * len(ar_rows) + (TRANSFER,) * moved.size,
        what=labels + tuple(f"all-reduce {stages[s].name or s}" for s in ar_rows)
        + tuple(f"{labels[u]} -> {labels[v]}" for u, v in zip(xsrc.tolist(), xdst.tolist(),
                                                              strict=True)),
        memory=curves,
        time_unit_s=cluster.time_unit_s,
    )
    return PipelineResult(
        step_time=step, time_per_sample=step / m, bubble_fraction=bubble,
        max_stage_time=float(stage_times.max()), stage_times=stage_times, allreduce=allreduce,
        op_stage=op_stage, op_micro=op_micro, op_phase=op_phase, op_device=dev,
        start=start, finish=finish, peak_inflight=inflight, memory=memory,
        microbatches=m, schedule=schedule, timeline=timeline,
    )
