"""Event-driven replay of a layer-wise parallel strategy (paper 3), beside its additive t_O.

Eq. 1 adds every layer's compute, every edge's transfers and every layer's parameter sync as
if nothing overlapped. The replay runs the same work as tasks on a :class:`Timeline`:

* **Compute**: per layer and tile, a forward task and a backward task on the tile's device,
  with the roofline times of :func:`~dnnpart.layerwise.costs.tile_forward_times` (the
  backward takes :func:`~dnnpart.layerwise.costs.backward_factor` times the forward).
* **Transfers**: per edge and (producer tile, consumer tile) pair on different devices that
  share data (the intersection volume of :func:`~dnnpart.layerwise.costs.read_volume`),
  one forward task after the producer tile's forward and, for the gradient, one backward task
  after the consumer tile's backward. A transfer is a task on its *receiving* device's inbound
  port (``in:<device>``), taking ``bytes / bandwidth[src, dst]`` -- the same rule as t_X,
  which serialises what one device receives and lets devices receive in parallel.
* **Parameter sync** (parameter-server rule of t_S): per channel slice, every replica sends
  its gradient slice to the server (the slice's first tile's device) after its backward -- a
  task on the server's inbound port -- and receives the parameters back once the server has
  every gradient and its own backward -- a task on the server's outbound port
  (``out:<device>``), so the server sends them one after the other, as t_S counts them.
* **When sync starts** (choice, ``sync``): by default (``"after-backward"``) a layer's
  gradients leave only once the whole backward pass is done -- the step of Eq. 1 as paper 3
  defines it: forward, back propagation, then parameter synchronisation ("the time to
  synchronize the parameters in layer l_i after back propagation", §4), synchronous
  training with a parameter server, as TensorFlow's synchronous replicas of the time push
  gradients after ``compute_gradients``. ``"eager"`` sends them as soon as the layer's own
  backward ends (sync hidden behind the backward pass of earlier layers, as Legion or
  bucketed all-reduce can do). Paper 3's Table 4 measured its runtime 1% *slower* than t_O
  on AlexNet over 16 GPUs; the eager replay ends 12% below t_O there, the default 5% below
  (``docs/methods/optcnn.md``). Transfers overlap compute in both.
* A consumer tile's forward waits for all its inputs (transfers, or the producer tiles on its
  own device); a tile's backward waits for its forward and for every gradient sent to it.

Scheduling rule (choice, ``docs/methods/optcnn.md``): list scheduling -- among the tasks whose
dependencies are done, the one that can start earliest on its resource goes first; ties go to
the task created first (forward in topological order, then backward in reverse). This is
work-conserving, so where t_O serialises independent work (branches, sync beside backward,
transfers beside compute) the replay overlaps it and ends earlier. The replay does not model
link contention beyond the inbound port, nor the server's update step.

**Same tasks as Eq. 1, only overlap differs** (``serialise=True``): where every device's
compute, inbound and outbound port are one resource -- nothing on a device overlaps, which is
what Eq. 1's sum assumes -- the replay of the layer-wise optimum ends at t_O to 1e-15 on AlexNet
and VGG-16 on 1-16 GPUs, and at or below t_O on random strategies with arbitrary placements
(tests). The gap of the default replay is therefore overlap, not a different cost: parameter
sync beside the backward pass of earlier layers, and transfers beside compute, as Legion
(paper 3 §6) overlaps communication with computation.

Times are seconds (``Timeline.time_unit_s = 1``).
"""

from __future__ import annotations

import heapq
from collections.abc import Sequence
from dataclasses import dataclass, replace

import numpy as np
import numpy.typing as npt

from dnnpart.devices.specs import DeviceSpec
from dnnpart.errors import UsageError
from dnnpart.layerwise.costs import (
    BYTES_PER_ELEMENT,
    backward_factor,
    inverse_bandwidth,
    read_volume,
    tile_forward_times,
)
from dnnpart.layerwise.layers import LayerGraph
from dnnpart.layerwise.strategy import config_row, strategy_time
from dnnpart.plan import LayerConfig
from dnnpart.simulate.timeline import COMPUTE, TRANSFER, Timeline

__all__ = ["SYNC_MODES", "LayerwiseReplay", "ReplayTasks", "build_replay_tasks", "replay_strategy",
           "schedule_tasks", "serialised"]

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]

#: Interval kind of a parameter-sync transfer.
SYNC = "sync"
#: When parameter sync starts (module docstring): the default first.
SYNC_MODES = ("after-backward", "eager")


@dataclass(frozen=True, slots=True, kw_only=True, eq=False)
class ReplayTasks:
    """Tasks of one training iteration, in priority order (index = priority).

    Attributes
    ----------
    resources : names: ``dev<d>`` (compute of device ``d``), ``in:dev<d>`` (its inbound port),
        ``out:dev<d>`` (its outbound port, used by parameter-server sends).
    resource, duration : per task.
    deps : per task, the tasks that must finish first (all of lower index).
    kind, what : ``compute`` / ``transfer`` / ``sync`` and a label (``F conv1[2]`` = forward
        of conv1's tile 2, ``X conv1[0]->conv2[1]``, ``G``/``P fc6[1]`` gradient/parameters).
    moved_bytes : bytes each transfer task moves (0 for compute).
    """

    resources: tuple[str, ...]
    resource: IntArray
    duration: FloatArray
    deps: tuple[tuple[int, ...], ...]
    kind: tuple[str, ...]
    what: tuple[str, ...]
    moved_bytes: FloatArray

    def __len__(self) -> int:
        return int(self.resource.shape[0])


class _Builder:
    def __init__(self, devices: int) -> None:
        self.resources = tuple([f"dev{d}" for d in range(devices)] + [f"in:dev{d}" for d in range(devices)]
                               + [f"out:dev{d}" for d in range(devices)])
        self.devices = devices
        self.resource: list[int] = []
        self.duration: list[float] = []
        self.deps: list[tuple[int, ...]] = []
        self.kind: list[str] = []
        self.what: list[str] = []
        self.moved: list[float] = []

    def add(self, resource: int, duration: float, deps: Sequence[int], kind: str, what: str,
            moved: float = 0.0) -> int:
        self.resource.append(resource)
        self.duration.append(float(duration))
        self.deps.append(tuple(sorted(set(int(d) for d in deps))))
        self.kind.append(kind)
        self.what.append(what)
        self.moved.append(float(moved))
        return len(self.resource) - 1

    def inbound(self, device: int) -> int:
        return self.devices + device

    def outbound(self, device: int) -> int:
        return 2 * self.devices + device

    def build(self) -> ReplayTasks:
        return ReplayTasks(
            resources=self.resources, resource=np.asarray(self.resource, dtype=np.int64),
            duration=np.asarray(self.duration, dtype=np.float64), deps=tuple(self.deps),
            kind=tuple(self.kind), what=tuple(self.what),
            moved_bytes=np.asarray(self.moved, dtype=np.float64),
        )


def build_replay_tasks(graph: LayerGraph, configs: Sequence[LayerConfig], device: DeviceSpec,
                       bandwidth: FloatArray, *, sync: str = "after-backward") -> ReplayTasks:
    """The tasks of one iteration of ``configs`` (module docstring).

    ``sync`` is ``"after-backward"`` (a layer's gradients leave once the whole backward pass is
    done: the step's three phases of Eq. 1) or ``"eager"`` (once the layer's own backward is).

    Examples
    --------
    >>> from dnnpart.layerwise.hardware import P100, uniform_bandwidth
    >>> from dnnpart.layerwise.models import lenet5
    >>> g = lenet5(8)
    >>> tasks = build_replay_tasks(g, [LayerConfig((1, 1, 1, 1), (0,))] * len(g), P100,
    ...                            uniform_bandwidth(2, 1e9))
    >>> len(tasks), set(tasks.kind)   # forward and backward of 8 layers, nothing moves
    (16, {'compute'})
    """
    if sync not in SYNC_MODES:
        raise UsageError(f"sync: expected one of {', '.join(SYNC_MODES)}, got {sync!r}")
    bandwidth = np.asarray(bandwidth, dtype=np.float64)
    d = bandwidth.shape[0]
    inv = inverse_bandwidth(bandwidth)
    rows = [config_row(layer, c, d) for layer, c in zip(graph.layers, configs, strict=True)]
    forward = [tile_forward_times(layer, row, device)[0]
               for layer, row in zip(graph.layers, rows, strict=True)]
    b = _Builder(d)
    n = len(graph.layers)
    fwd: list[list[int]] = [[] for _ in range(n)]
    bwd: list[list[int]] = [[] for _ in range(n)]
    consumers: list[list[tuple[int, int]]] = [[] for _ in range(n)]
    volumes: dict[tuple[int, int], IntArray] = {}
    for j, layer in enumerate(graph.layers):
        for k, p in enumerate(layer.inputs):
            consumers[p].append((j, k))
            pr, cr = rows[p], rows[j]
            volumes[(j, k)] = read_volume(layer, k, pr.lo[0, :, None, :], pr.hi[0, :, None, :],
                                          cr.lo[0, None, :, :], cr.hi[0, None, :, :])
    # forward, topological order
    for j, layer in enumerate(graph.layers):
        devs = configs[j].devices
        for t, dev in enumerate(devs):
            deps: list[int] = []
            for k, p in enumerate(layer.inputs):
                vol = volumes[(j, k)]
                for s, src in enumerate(configs[p].devices):
                    if vol[s, t] <= 0:
                        continue
                    if src == dev:
                        deps.append(fwd[p][s])
                        continue
                    moved = float(vol[s, t]) * BYTES_PER_ELEMENT
                    deps.append(b.add(b.inbound(dev), moved * inv[src, dev], [fwd[p][s]], TRANSFER,
                                      f"X {graph.layers[p].name}[{s}]->{layer.name}[{t}]", moved))
            fwd[j].append(b.add(dev, forward[j][t], deps, COMPUTE, f"F {layer.name}[{t}]"))
    # backward, reverse topological order
    first_backward = len(b.deps)
    for p in range(n - 1, -1, -1):
        layer = graph.layers[p]
        factor = backward_factor(layer)
        for s, dev in enumerate(configs[p].devices):
            deps = [fwd[p][s]]
            for j, k in consumers[p]:
                vol = volumes[(j, k)]
                for u, src in enumerate(configs[j].devices):
                    if vol[s, u] <= 0:
                        continue
                    if src == dev:
                        deps.append(bwd[j][u])
                        continue
                    moved = float(vol[s, u]) * BYTES_PER_ELEMENT
                    deps.append(b.add(b.inbound(dev), moved * inv[src, dev], [bwd[j][u]], TRANSFER,
                                      f"X {graph.layers[j].name}[{u}]->{layer.name}[{s}] grad", moved))
            bwd[p].append(b.add(dev, factor * forward[p][s], deps, COMPUTE, f"B {layer.name}[{s}]"))
        if sync == "eager":
            _sync_tasks(b, graph, p, configs[p], rows[p].lo[0, :, 1], bwd[p], inv, ())
    if sync == "after-backward":
        # every backward task is an ancestor of one that nothing in the backward pass waits on
        needed = {dep for task in range(first_backward, len(b.deps)) for dep in b.deps[task]}
        ends = tuple(t for layer_tasks in bwd for t in layer_tasks if t not in needed)
        for p in range(n - 1, -1, -1):
            _sync_tasks(b, graph, p, configs[p], rows[p].lo[0, :, 1], bwd[p], inv, ends)
    return b.build()


def _sync_tasks(b: _Builder, graph: LayerGraph, i: int, config: LayerConfig, chan_lo: IntArray,
                bwd: list[int], inv: FloatArray, after: Sequence[int]) -> None:
    layer = graph.layers[i]
    c = config.degrees[1]
    if layer.params == 0 or config.tiles == c:
        return
    slice_bytes = BYTES_PER_ELEMENT * layer.params / c
    tiles = np.arange(config.tiles)
    for lo_c in np.unique(chan_lo[: config.tiles]):
        group = [int(t) for t in tiles[chan_lo[: config.tiles] == lo_c]]
        server_tile, replicas = group[0], group[1:]
        server = config.devices[server_tile]
        grads = [b.add(b.inbound(server), slice_bytes * inv[config.devices[r], server],
                       [bwd[r], *after], SYNC, f"G {layer.name}[{r}]", slice_bytes) for r in replicas]
        for r in replicas:
            dev = config.devices[r]
            b.add(b.outbound(server), slice_bytes * inv[server, dev], [*grads, bwd[server_tile], *after],
                  SYNC, f"P {layer.name}[{r}]", slice_bytes)


def schedule_tasks(tasks: ReplayTasks) -> tuple[FloatArray, FloatArray]:
    """Start and end of every task under the list-scheduling rule (module docstring).

    Examples
    --------
    >>> t = ReplayTasks(resources=("a",), resource=np.array([0, 0, 0]),
    ...                 duration=np.array([2.0, 1.0, 1.0]), deps=((), (), (1,)),
    ...                 kind=("compute",) * 3, what=("x", "y", "z"), moved_bytes=np.zeros(3))
    >>> [v.tolist() for v in schedule_tasks(t)]
    [[0.0, 2.0, 3.0], [2.0, 3.0, 4.0]]
    """
    n = len(tasks)
    waiting = np.array([len(d) for d in tasks.deps], dtype=np.int64)
    users: list[list[int]] = [[] for _ in range(n)]
    for i, deps in enumerate(tasks.deps):
        for dep in deps:
            users[dep].append(i)
    ready = np.zeros(n)
    free = np.zeros(len(tasks.resources))
    start = np.full(n, np.nan)
    end = np.full(n, np.nan)
    heap = [(0.0, i) for i in range(n) if waiting[i] == 0]
    heapq.heapify(heap)
    while heap:
        key, i = heapq.heappop(heap)
        est = max(ready[i], free[tasks.resource[i]])
        if est > key:  # the resource got busier since the task was queued
            heapq.heappush(heap, (est, i))
            continue
        start[i], end[i] = est, est + tasks.duration[i]
        free[tasks.resource[i]] = end[i]
        for u in users[i]:
            ready[u] = max(ready[u], end[i])
            waiting[u] -= 1
            if waiting[u] == 0:
                heapq.heappush(heap, (max(ready[u], free[tasks.resource[u]]), u))
    if np.isnan(end).any():
        raise ValueError("replay tasks have a dependency cycle")
    return start, end


@dataclass(frozen=True, slots=True, kw_only=True, eq=False)
class LayerwiseReplay:
    """A replayed iteration beside Eq. 1.

    Attributes
    ----------
    makespan : seconds from the first forward task to the last task (sync included).
    additive : t_O of the same strategy (Eq. 1).
    moved_bytes : bytes the transfers and syncs moved (equals the strategy's bytes per step).
    timeline : every task as an interval (Chrome trace via :func:`~dnnpart.simulate.chrome_trace`).
    """

    makespan: float
    additive: float
    moved_bytes: float
    timeline: Timeline

    @property
    def ratio(self) -> float:
        """``makespan / additive`` (1 where t_O is 0)."""
        return self.makespan / self.additive if self.additive > 0 else 1.0


def serialised(tasks: ReplayTasks) -> ReplayTasks:
    """The same tasks with each device's compute and ports merged into one resource ``dev<d>``.

    Examples
    --------
    >>> t = ReplayTasks(resources=("dev0", "dev1", "in:dev0", "in:dev1"), resource=np.array([0, 2, 3]),
    ...                 duration=np.ones(3), deps=((), (), ()), kind=("compute",) * 3,
    ...                 what=("a", "b", "c"), moved_bytes=np.zeros(3))
    >>> serialised(t).resource.tolist(), serialised(t).resources
    ([0, 0, 1], ('dev0', 'dev1'))
    """
    devices = sum(1 for name in tasks.resources if name.startswith("dev"))
    return replace(tasks, resources=tasks.resources[:devices], resource=tasks.resource % devices)


def replay_strategy(graph: LayerGraph, configs: Sequence[LayerConfig], device: DeviceSpec,
                    bandwidth: FloatArray, *, serialise: bool = False,
                    sync: str = "after-backward") -> LayerwiseReplay:
    """Replay one training iteration of ``configs`` and report it beside t_O.

    ``serialise`` merges each device's compute and ports into one resource (nothing overlaps
    on a device, Eq. 1's assumption; module docstring).

    Examples
    --------
    >>> from dnnpart.layerwise.hardware import P100, uniform_bandwidth
    >>> from dnnpart.layerwise.models import lenet5
    >>> g = lenet5(8)
    >>> r = replay_strategy(g, [LayerConfig((1, 1, 1, 1), (0,))] * len(g), P100, uniform_bandwidth(2, 1e9))
    >>> abs(r.makespan - r.additive) < 1e-15   # one device, a chain: nothing overlaps
    True
    """
    tasks = build_replay_tasks(graph, configs, device, bandwidth, sync=sync)
    if serialise:
        tasks = serialised(tasks)
    start, end = schedule_tasks(tasks)
    timeline = Timeline(resources=tasks.resources, resource=tasks.resource, start=start, end=end,
                        kind=tasks.kind, what=tasks.what, time_unit_s=1.0)
    return LayerwiseReplay(makespan=timeline.makespan,
                           additive=strategy_time(graph, configs, device, bandwidth),
                           moved_bytes=float(tasks.moved_bytes.sum()), timeline=timeline)
