"""Measure a stage process while it runs: compute times inside the real schedule, step
times, and the peak memory the allocator hands out.

Choices (also in ``docs/run.md``, "What run measures"):

* **Times.** A stage's forward and backward are timed by wrapping the two calls a
  ``torch.distributed.pipelining`` stage makes per micro-batch (``forward_one_chunk``,
  ``backward_one_chunk``; for inference, the stage module's call) with ``perf_counter``, and
  summed over every micro-batch of a step. The wrappers sit between the schedule's receive
  and send, so waits for a neighbour are not in them; a wrapper costs two clock reads per
  micro-batch, where ``torch.profiler`` would record every operator and slow the small ones
  it is meant to time (its overhead is microseconds per operator, the size of the
  per-operator costs being checked). The step time is each rank's ``schedule.step`` after a
  barrier; the step is the slowest rank's.
* **Memory.** Allocator-level, not RSS: on CPU, ``torch.profiler`` memory events
  (``profile_memory=True``) record every allocation and free of torch's allocator; their
  running sum from the profiler's start, at its largest, is what the step added. To it we add
  the bytes the rank held before: its stage's parameters and buffers (counted by storage, a
  tensor shared by two names once). Not counted: the step's input micro-batches and targets
  (the driver's data, allocated before the step) and, under ``fork``, the other stages'
  weights a rank inherits and never touches. On CUDA the same quantity from the caching
  allocator's own counters: ``torch.cuda.max_memory_allocated`` after
  ``reset_peak_memory_stats``, less ``memory_allocated`` at the start (the stage's weights,
  and the micro-batches, targets and example tensors already copied to the device), plus the
  stage's parameters and buffers (the peak alone ran on an H100, before the start was
  subtracted; the tests cannot run it: CI has no GPU). Only one step is profiled (the first,
  whose values are checked): the profiler slows the operators, so the timed steps run
  without it.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

#: How a rank's peak memory was measured, by device type (printed with it).
MEMORY_SOURCES = {
    "cpu": "torch.profiler memory events (allocator), plus the stage's parameters and buffers",
    "cuda": "torch.cuda.max_memory_allocated, less what was allocated before the step, plus the "
            "stage's parameters and buffers",
}


@dataclass(slots=True)
class RankMeasure:
    """What one rank measured: per step, its stages' summed forward and backward seconds and
    its step seconds; its peak memory (bytes) and what the peak started from."""

    forward_s: list[float] = field(default_factory=list)
    backward_s: list[float] = field(default_factory=list)
    step_s: list[float] = field(default_factory=list)
    peak_bytes: float = 0.0
    held_bytes: float = 0.0
    memory_source: str = ""

    def to_dict(self) -> dict[str, Any]:
        return {"forward_s": list(self.forward_s), "backward_s": list(self.backward_s),
                "step_s": list(self.step_s), "peak_bytes": self.peak_bytes,
                "held_bytes": self.held_bytes, "memory_source": self.memory_source}


class ChunkTimer:
    """Seconds spent in wrapped calls since the last :meth:`reset`, by phase; ``sync`` (for a
    GPU, ``torch.cuda.synchronize``) is called before and after each call, so a call's time
    is its kernels' and not only their launch."""

    def __init__(self, sync: Callable[[], Any] | None = None) -> None:
        self.seconds = {"forward": 0.0, "backward": 0.0}
        self.sync = sync

    def reset(self) -> None:
        for k in self.seconds:
            self.seconds[k] = 0.0

    def wrap(self, phase: str, fn: Callable[..., Any]) -> Callable[..., Any]:
        """``fn`` timed into ``phase``."""

        sync = self.sync

        def timed(*args: Any, **kwargs: Any) -> Any:
            if sync is not None:
                sync()
            t0 = time.perf_counter()
            try:
                return fn(*args, **kwargs)
            finally:
                if sync is not None:
                    sync()
                self.seconds[phase] += time.perf_counter() - t0

        return timed


def held_bytes(*modules: Any) -> float:
    """Bytes of the tensors ``modules`` hold (parameters, buffers, tensor attributes), each
    storage once.

    Examples
    --------
    >>> import torch
    >>> lin = torch.nn.Linear(4, 2)
    >>> held_bytes(lin), held_bytes(lin, lin)          # 2x4 weights + 2 biases, float32
    (40.0, 40.0)
    """
    import torch

    seen: dict[int, int] = {}
    for module in modules:
        for m in module.modules():
            tensors = [*m._parameters.values(), *m._buffers.values(),
                       *(v for v in vars(m).values() if isinstance(v, torch.Tensor))]
            for t in tensors:
                if isinstance(t, torch.Tensor) and t.device.type != "meta":
                    storage = t.untyped_storage()
                    seen[storage.data_ptr()] = storage.nbytes()
    return float(sum(seen.values()))


def rank_device(kind: str, rank: int) -> Any:
    """The torch device rank ``rank`` runs on: the CPU, or ``cuda:rank`` (made current,
    TF32 off: the run is checked against float32 results and priced at float32)."""
    import torch

    if kind != "cuda":
        return torch.device("cpu")
    device = torch.device("cuda", rank)
    torch.cuda.set_device(device)
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    return device


def device_sync(device: Any) -> Callable[[], Any] | None:
    """What waits for ``device``'s queued work: ``torch.cuda.synchronize`` on a GPU, else None."""
    import torch

    if getattr(device, "type", "cpu") != "cuda":
        return None
    return lambda: torch.cuda.synchronize(device)


@contextmanager
def allocator_peak(device: Any, box: RankMeasure, held: float) -> Iterator[None]:
    """Record into ``box`` the peak bytes allocated while the block runs on ``device``
    (see the module docstring); ``held`` is what the rank held before it."""
    import torch

    if getattr(device, "type", "cpu") == "cuda":
        torch.cuda.synchronize(device)
        torch.cuda.reset_peak_memory_stats(device)
        before = torch.cuda.memory_allocated(device)
        yield
        torch.cuda.synchronize(device)
        box.peak_bytes = held + float(torch.cuda.max_memory_allocated(device) - before)
        box.held_bytes = held
        box.memory_source = MEMORY_SOURCES["cuda"]
        return
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
        yield
    box.peak_bytes = held + running_peak(prof)
    box.held_bytes = held
    box.memory_source = MEMORY_SOURCES["cpu"]


def running_peak(prof: Any) -> float:
    """The largest running sum of the allocations (+) and frees (-) a CPU profile recorded.

    Read from the raw results: ``prof.events()`` folds memory records into the operators
    that made them and keeps only a few on their own.
    """
    events = [e for e in prof.profiler.kineto_results.events() if e.name() == "[memory]"]
    events.sort(key=lambda e: e.start_ns())
    total = peak = 0
    for e in events:
        total += int(e.nbytes())
        peak = max(peak, total)
    return float(peak)


@dataclass(frozen=True, slots=True)
class Spread:
    """Median and range of repeated measurements."""

    median: float
    low: float
    high: float

    @classmethod
    def of(cls, values: Sequence[float]) -> Spread:
        """Examples
        --------
        >>> Spread.of([3.0, 1.0, 2.0])
        Spread(median=2.0, low=1.0, high=3.0)
        """
        return cls(float(statistics.median(values)), float(min(values)), float(max(values)))
