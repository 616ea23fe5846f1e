"""``dnnpart calibrate``: measure this machine and write a machine file the cost model takes.

What is measured (``docs/calibrate.md`` says the same for users):

* **operators**: each micro-benchmark of :mod:`~dnnpart.workflow.calibration_cases` is traced
  with ``make_fx`` into the aten operators its forward and backward run; every one of them is
  timed by :func:`~dnnpart.frontends.profiling.time_fx_nodes` (medians over repeats, the way
  ``import --profile`` times a model) and priced by the capture's own formula
  (:func:`~dnnpart.frontends.export_import.aten_spec`, :func:`~dnnpart.cost.ops.operator_work`),
  so a sample is (class, FLOPs, bytes, seconds) exactly as a captured graph would count it;
* per class, :func:`~dnnpart.cost.calibration.fit_additive` fits overhead, FLOP rate and byte
  rate over all its samples, and again per kind (``CLASS:KIND``: an operator type, a matrix
  product's operand layout) with samples of two sizes or more, which the cost model prefers
  for that kind (:mod:`dnnpart.cost.ops`); the median time of the tiniest operator (a
  one-element add) is the device's overhead for operators of no calibrated class;
* **fresh memory** (CPU): writing a tensor of 64-128 MiB the allocator has just mapped, less
  writing one already mapped: the page faults a large output costs, ``fresh_bytes_rate``
  (:func:`measure_fresh_rate`);
* **the link**: :mod:`~dnnpart.workflow.calibrating_link` (two gloo processes).

**The machine file** is a device catalog (``--specs FILE``) with a ``cluster`` entry, so that
``--cluster FILE`` is the cluster of two calibrated ranks joined by the measured link
(:func:`dnnpart.cost.clusters.machine_cluster`). The rank is an *accelerator*-kind device (every
method places on accelerators), named after the file (``-o box.yaml``: device ``box``, link
``box-gloo``, cluster ``2xbox``); its roofline fields are the fits' (peak FLOP/s: matmul's
rate, bandwidth: element-wise's byte rate, efficiencies 1), for operators of no class; its
memory is half the machine's RAM (two ranks share it), or with ``--device cuda`` the GPU's.
With ``--device cuda`` each operator is timed between two ``torch.cuda.synchronize`` calls and
its launch (the call's return) is read too; the fits are made of the cost an eager step pays,
``max(launch, synchronised - wait)`` (:func:`queued_samples`: a step never waits between
operators, a timing alone does); the launch of one-element adds queued back to back
(:func:`measure_dispatch`) is recorded beside them (``dispatch_s``).

A ``calibration`` section records when, where (platform, CPU model, torch version, threads)
and how well (each class's fit error, the link's samples), and every timed operator
(``samples``: the data behind the fits).

Repeats adapt to the case: enough passes for about ``target_s`` seconds of timing, between
``min_repeats`` and ``max_repeats`` per sweep, in three sweeps over all the cases, an
operator's time the median of its sweeps (:func:`_measure_ops`; ``--quick``: two sizes per
case, one sweep of two or three passes).
"""

from __future__ import annotations

import dataclasses
import datetime
import math
import os
import platform
import re
import statistics
import time
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from dnnpart._optional import require
from dnnpart.cost.calibration import AdditiveFit, fit_additive
from dnnpart.devices.specs import OP_CLASSES, op_classes_to_dict
from dnnpart.errors import UsageError
from dnnpart.workflow.calibration_cases import CASES, OVERHEAD_CASE, case_sizes
from dnnpart.workflow.phases import ProgressFactory, phase

#: Devices ``--device`` takes.
CALIBRATE_DEVICES = ("cpu", "cuda")
#: Ranks of the cluster a machine file names (the link is measured between two processes).
RANKS = 2


@dataclass(frozen=True, slots=True)
class Sample:
    """One timed aten operator: its class, work and median seconds; ``op`` its aten name;
    ``key`` its cost key (``CLASS:KIND``, :attr:`dnnpart.cost.ops.Work.cost_key`). On a GPU
    ``host_seconds`` is the time until the call returned (its launch) and ``synced_seconds``
    the time until its kernels finished, of which ``seconds`` is the queued cost
    (:func:`queued_samples`)."""

    op_class: str
    op: str
    flops: float
    bytes_moved: float
    seconds: float
    key: str = ""
    host_seconds: float | None = None
    synced_seconds: float | None = None


@dataclass(frozen=True, slots=True)
class Budget:
    """How long each case is timed: ``passes`` sweeps over every case and size, each timing
    between ``min_repeats`` and ``max_repeats`` repeats, aiming at ``target_s`` seconds per
    case and size in all."""

    target_s: float
    min_repeats: int
    max_repeats: int
    passes: int = 1

    @classmethod
    def for_run(cls, quick: bool) -> Budget:
        return cls(0.02, 2, 3) if quick else cls(1.0, 2, 9, passes=3)


@dataclass(frozen=True, slots=True, kw_only=True)
class Calibration:
    """What one ``calibrate`` run measured and fitted (:meth:`machine_file` writes it)."""

    name: str
    device: str
    threads: int
    quick: bool
    fits: dict[str, AdditiveFit]
    overhead_s: float
    ops_per_class: dict[str, tuple[str, ...]]
    link: dict[str, Any]
    skipped: tuple[str, ...] = ()
    machine: dict[str, Any] = field(default_factory=dict)
    date: str = ""
    seconds: float = 0.0
    fresh_bytes_rate: float = math.inf
    samples: tuple[Sample, ...] = ()
    memory_bytes: float = math.inf
    dispatch_s: float | None = None

    def machine_file(self) -> dict[str, Any]:
        """The machine file's content (module docstring)."""
        link_name = f"{self.name}-gloo"
        matmul, elementwise = self.fits.get("matmul"), self.fits.get("elementwise")
        peak = matmul.flops_rate if matmul and math.isfinite(matmul.flops_rate) else _fastest(
            self.fits, "flops_rate")
        bandwidth = elementwise.bytes_rate if elementwise and math.isfinite(elementwise.bytes_rate) \
            else _fastest(self.fits, "bytes_rate")
        device = {
            "kind": "accelerator",
            "peak_flops": peak,
            "memory_bandwidth": bandwidth,
            "compute_efficiency": 1.0,
            "bandwidth_efficiency": 1.0,
            "launch_overhead_s": self.overhead_s,
            "memory_bytes": (self.memory_bytes if math.isfinite(self.memory_bytes)
                             else _memory_bytes() / RANKS),
            "default_link": link_name,
            "host_link": link_name,
            "op_classes": op_classes_to_dict(tuple(fit.op_class(c) for c, fit in sorted(self.fits.items()))),
        }
        if math.isfinite(self.fresh_bytes_rate):
            device["fresh_bytes_rate"] = self.fresh_bytes_rate
        fits = {c: {"samples": fit.samples, "rms_rel_error": round(fit.rms_rel_error, 4),
                    "max_rel_error": round(fit.max_rel_error, 4), "ops": list(self.ops_per_class[c])}
                for c, fit in sorted(self.fits.items())}
        p2p = self.link["p2p"]
        return {
            "cluster": f"{RANKS}x{self.name}",
            "devices": {self.name: device},
            "links": {link_name: {"bandwidth": p2p["bandwidth"], "latency": p2p["latency"]}},
            "calibration": {
                "written_by": "dnnpart calibrate" + (" --quick" if self.quick else ""),
                "date": self.date,
                "seconds": round(self.seconds, 1),
                "machine": self.machine,
                "device": self.device,
                "threads": self.threads,
                "precision": "fp32",
                "overhead_s": self.overhead_s,
                **({"dispatch_s": self.dispatch_s} if self.dispatch_s is not None else {}),
                "fits": fits,
                # the timings behind the fits: [cost key, case:aten op, FLOPs, bytes, seconds]
                # and on a GPU also [synchronised seconds, launch seconds] (queued_samples)
                "samples": [[x.key or x.op_class, x.op, x.flops, x.bytes_moved, x.seconds,
                             *((x.synced_seconds, x.host_seconds) if x.host_seconds is not None else ())]
                            for x in self.samples],
                "link": self.link,
                "skipped": list(self.skipped),
            },
        }


def _fastest(fits: dict[str, AdditiveFit], attr: str) -> float:
    """The largest finite rate ``attr`` of any class (a roofline fallback), else 1e10."""
    rates = [getattr(f, attr) for f in fits.values() if math.isfinite(getattr(f, attr))]
    return max(rates, default=1e10)


def _memory_bytes() -> float:
    try:
        return float(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES"))
    except (ValueError, OSError, AttributeError):
        return math.inf


def machine_info(torch: Any, device: str, threads: int) -> dict[str, Any]:
    """Where the calibration ran: platform, CPU model, torch version, threads (and GPU)."""
    cpu = platform.processor()
    try:
        text = Path("/proc/cpuinfo").read_text(encoding="utf-8", errors="replace")
        found = re.search(r"^model name\s*:\s*(.+)$", text, re.MULTILINE)
        cpu = found.group(1).strip() if found else cpu
    except OSError:
        pass
    info: dict[str, Any] = {"platform": platform.platform(), "cpu": cpu or "unknown",
                            "cpu_count": os.cpu_count(), "torch": str(torch.__version__),
                            "threads": threads, "hostname": platform.node()}
    if device == "cuda":
        info["gpu"] = str(torch.cuda.get_device_name(0))
    return info


def machine_name(path: str | Path) -> str:
    """The device name a machine file at ``path`` gets: its stem, in preset characters.

    Examples
    --------
    >>> machine_name("out/my box.yaml"), machine_name("out/--.yaml")
    ('my-box', 'machine')
    """
    stem = re.sub(r"[^A-Za-z0-9_.\-]+", "-", Path(path).stem).strip("-.")
    return stem or "machine"


def check_options(device: str, threads: int) -> None:
    """``UsageError`` for a device this machine lacks or a thread count out of range."""
    if device not in CALIBRATE_DEVICES:
        raise UsageError(f"--device {device!r}: expected one of {', '.join(CALIBRATE_DEVICES)}")
    if isinstance(threads, bool) or not isinstance(threads, int) or not 1 <= threads <= 1024:
        raise UsageError(f"--threads {threads!r}: expected an integer from 1 to 1024")
    if device == "cuda":
        torch = require("torch", extra="torch", caller="calibrate")
        if not torch.cuda.is_available():
            raise UsageError("--device cuda: torch sees no CUDA device on this machine "
                             "(torch.cuda.is_available() is False); calibrate the CPU with --device cpu")


def calibrate(
    *,
    name: str = "machine",
    device: str = "cpu",
    threads: int = 1,
    quick: bool = False,
    progress: ProgressFactory | None = None,
) -> Calibration:
    """Measure this machine (module docstring); ``threads``: torch's intra-op threads, in
    this process and in each link process."""
    check_options(device, threads)
    torch = require("torch", extra="torch", caller="calibrate")
    started = time.perf_counter()
    if device == "cpu":
        from dnnpart.export.allocator import keep_freed_heap

        keep_freed_heap()  # the heap run's ranks have (dnnpart.export.allocator)
    before = torch.get_num_threads()
    torch.set_num_threads(threads)
    if device == "cuda":  # float32 as run computes it (dnnpart.export.measuring.rank_device)
        torch.backends.cuda.matmul.allow_tf32 = False
        torch.backends.cudnn.allow_tf32 = False
    try:
        samples, skipped = _measure_ops(torch, device, quick, progress)
        fresh, dispatch, memory = math.inf, None, math.inf
        if device == "cpu":
            with phase(progress, "timing writes to freshly allocated large tensors"):
                fresh = measure_fresh_rate(torch, quick)
        else:
            dispatch = measure_dispatch(torch)
            memory = float(torch.cuda.get_device_properties(0).total_memory)
    finally:
        torch.set_num_threads(before)
    if device == "cuda":
        samples = queued_samples(samples, sync_wait(samples))
    with phase(progress, "fitting the operator classes"):
        fits, ops = fit_samples(samples)
        tiny = [s.seconds for s in samples if s.op == f"{OVERHEAD_CASE}:add"]
        overhead = statistics.median(tiny) if tiny else fits["elementwise"].overhead_s
    from dnnpart.workflow.calibrating_link import measure_link

    with phase(progress, f"measuring the gloo link between {RANKS} processes"):
        link = measure_link(threads=threads, quick=quick)
    return Calibration(
        name=name, device=device, threads=threads, quick=quick, fits=fits, overhead_s=overhead,
        ops_per_class=ops, link=link, skipped=tuple(skipped), fresh_bytes_rate=fresh,
        samples=tuple(samples), memory_bytes=memory, dispatch_s=dispatch,
        machine=machine_info(torch, device, threads),
        date=datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        seconds=time.perf_counter() - started,
    )


def _measure_ops(torch: Any, device: str, quick: bool,
                 progress: ProgressFactory | None) -> tuple[list[Sample], list[str]]:
    """Every case's operators, timed in :attr:`Budget.passes` sweeps over all the cases
    (alternate sweeps in reverse order); an operator's time is its median over the sweeps.

    Why sweeps: this machine's speed drifts over tens of seconds (a shared VM), and one sweep
    times each operator class within a few seconds of each other, so a slow spell moved a
    whole class; the median of sweeps tens of seconds apart drops one slow spell.
    """
    from torch.fx.experimental.proxy_tensor import make_fx

    budget = Budget.for_run(quick)
    sync = torch.cuda.synchronize if device == "cuda" else None
    traced: dict[tuple[int, tuple[int, ...]], tuple[Any, dict[str, tuple[int, ...]]]] = {}
    times: dict[tuple[int, tuple[int, ...]], list[dict[str, float]]] = defaultdict(list)
    launches: dict[tuple[int, tuple[int, ...]], list[dict[str, float]]] = defaultdict(list)
    order = list(enumerate(CASES))
    fresh_heap = sync is None and workspace_is_fresh()
    for sweep in range(budget.passes):
        for i, case in order if sweep % 2 == 0 else order[::-1]:
            sizes = case_sizes(case, quick)
            what = f"timing {case.name} ({case.op_class}, case {i + 1} of {len(CASES)})"
            if budget.passes > 1:
                what += f", sweep {sweep + 1} of {budget.passes}"
            with phase(progress, what) as rep:
                for j, size in enumerate(sizes):
                    if rep is not None:
                        rep.update(f"size {'x'.join(map(str, size))}", j / len(sizes))
                    fn, inputs, params = case.build(size, device)
                    key = (i, tuple(size))
                    if key not in traced:
                        gm = make_fx(fn, tracing_mode="fake")(*inputs)
                        names = [n.name for n in gm.graph.nodes if n.op == "placeholder"]
                        traced[key] = gm, {names[k]: tuple(int(d) for d in inputs[k].shape)
                                           for k in params}
                    host: dict[str, float] = {}
                    times[key].append(_time_case(traced[key][0], inputs, budget, sync, host,
                                                 fresh_heap=fresh_heap and bool(case.fresh_heap_ops)))
                    launches[key].append(host)
    return _case_samples(traced, times, launches)


def workspace_is_fresh() -> bool:
    """Whether this CPU's oneDNN takes the 16 x 16-block weight-gradient workspace the cost
    model's ``@wide`` bucket describes (AVX-512: :func:`~dnnpart.evaluate.run_prediction.channel_block`
    is 16), so that ``calibrate`` times :attr:`~dnnpart.workflow.calibration_cases.Case.fresh_heap_ops`
    on a released heap; elsewhere (measured on AVX-512 only) they are timed as every operator is."""
    from dnnpart.cost.ops import DEPTHWISE_WORKSPACE_PER_TAP
    from dnnpart.evaluate.run_prediction import channel_block

    return channel_block() ** 2 == DEPTHWISE_WORKSPACE_PER_TAP


def _time_case(gm: Any, inputs: tuple[Any, ...], budget: Budget, sync: Any,
               host: dict[str, float], *, fresh_heap: bool = False) -> dict[str, float]:
    """Time one case's operators (``fresh_heap``: each pass on a heap whose free pages were
    released, :attr:`~dnnpart.workflow.calibration_cases.Case.fresh_heap_ops`)."""
    from dnnpart.export.allocator import release_freed_heap
    from dnnpart.frontends.profiling import time_fx_nodes

    repeats = _repeats(gm, inputs, budget, sync)
    return time_fx_nodes(gm, inputs, repeats=repeats, warmup=1, sync=sync, host=host,
                         before_pass=release_freed_heap if fresh_heap else None)


def _case_samples(
    traced: dict[tuple[int, tuple[int, ...]], tuple[Any, dict[str, tuple[int, ...]]]],
    times: dict[tuple[int, tuple[int, ...]], list[dict[str, float]]],
    launches: dict[tuple[int, tuple[int, ...]], list[dict[str, float]]],
) -> tuple[list[Sample], list[str]]:
    """One sample per timed operator: its median ms over the sweeps, priced by the capture's
    formula."""
    from dnnpart.cost.ops import aten_op_name, operator_work
    from dnnpart.frontends.export_import import aten_spec, tensor_vals

    samples: list[Sample] = []
    skipped: set[str] = set()
    for (i, size), (gm, const_shape) in traced.items():
        case = CASES[i]
        for node in gm.graph.nodes:
            ms = [t[node.name] for t in times[(i, size)] if node.name in t]
            if node.op != "call_function" or not ms:
                continue
            source = aten_op_name(node.target)
            if case.fresh_heap_ops and source not in case.fresh_heap_ops:
                continue  # timed on a released heap: not a run's state for it
            work = operator_work(aten_spec(node, source, tensor_vals(node), const_shape))
            if not work.known or not work.op_class:
                skipped.add(source)
                continue
            host = [h[node.name] for h in launches[(i, size)] if node.name in h]
            launch = statistics.median(host) / 1e3 if host else None
            samples.append(Sample(work.op_class, f"{case.name}:{source}", work.flops,
                                  work.bytes_moved, statistics.median(ms) / 1e3, work.cost_key,
                                  host_seconds=launch))
    return samples, sorted(skipped)


def _repeats(gm: Any, inputs: tuple[Any, ...], budget: Budget, sync: Any) -> int:
    """Repeats to time in one sweep: one untimed pass measures how long a pass takes."""
    import torch

    start = time.perf_counter()
    with torch.no_grad():
        gm(*inputs)
    if sync is not None:
        sync()
    seconds = time.perf_counter() - start
    wanted = int(budget.target_s / budget.passes / max(seconds, 1e-9))
    return max(budget.min_repeats, min(budget.max_repeats, wanted))


#: Samples a kind needs, of at least two sizes, for a fit of its own beside its class's.
MIN_KIND_SAMPLES = 3


#: Classes whose operators launch no kernel: views and shape queries.
NO_KERNEL_CLASSES = frozenset({"view", "meta"})


def sync_wait(samples: list[Sample]) -> float:
    """Seconds a synchronised timing adds to a kernel's launch beyond the kernel itself: the
    median, over the one-element adds (:data:`OVERHEAD_CASE`), of synchronised less launch
    time (their kernels take about a microsecond)."""
    waits = [s.seconds - s.host_seconds for s in samples
             if s.op == f"{OVERHEAD_CASE}:add" and s.host_seconds is not None]
    return max(statistics.median(waits), 0.0) if waits else 0.0


def queued_samples(samples: list[Sample], wait: float) -> list[Sample]:
    """GPU samples as an eager step pays them: a step launches operator after operator
    without waiting, so an operator costs its launch (``host_seconds``) or its kernel,
    whichever is longer -- ``max(host, synced - wait)``, ``wait`` the synchronisation's own
    share of a timed kernel (:func:`sync_wait`). Timed alone, each operator also paid that
    wait; summed over the hundreds of small operators of a step, that is most of the step.

    Examples
    --------
    >>> s = Sample("elementwise", "x:add", 1.0, 12.0, seconds=33e-6, host_seconds=12e-6)
    >>> q, = queued_samples([s], wait=21e-6)
    >>> round(q.seconds * 1e6, 1), round(q.synced_seconds * 1e6, 1)
    (12.0, 33.0)
    """
    out = []
    for s in samples:
        host = s.host_seconds if s.host_seconds is not None else 0.0
        out.append(dataclasses.replace(s, seconds=max(host, s.seconds - wait), synced_seconds=s.seconds))
    return out


def fit_samples(samples: list[Sample]) -> tuple[dict[str, AdditiveFit], dict[str, tuple[str, ...]]]:
    """Per class, one fit of all its samples; per kind (``CLASS:KIND``) with
    :data:`MIN_KIND_SAMPLES` samples of two sizes or more, its own."""
    groups: dict[str, list[Sample]] = defaultdict(list)
    for s in samples:
        groups[s.op_class].append(s)
        if s.key and s.key != s.op_class:
            groups[s.key].append(s)
    fits: dict[str, AdditiveFit] = {}
    ops: dict[str, tuple[str, ...]] = {}
    for key in sorted(groups):
        got = groups[key]
        if key.partition(":")[0] not in OP_CLASSES:
            continue
        if ":" in key and (len(got) < MIN_KIND_SAMPLES or len({s.bytes_moved for s in got}) < 2):
            continue
        fits[key] = fit_additive([s.flops for s in got], [s.bytes_moved for s in got],
                                 [s.seconds for s in got])
        ops[key] = tuple(sorted({s.op.partition(":")[2] for s in got}))
    return fits, ops


def measure_dispatch(torch: Any, n: int = 2000) -> float:
    """Seconds per operator that a GPU's queue absorbs: ``n`` one-element adds issued back to
    back and waited for once, over ``n`` (the host's launch cost, which an eager step pays per
    operator whenever its kernels are shorter; the synchronised timing of ``calibrate``
    also holds the wait for each kernel's completion)."""
    x = torch.zeros(1, device="cuda")
    for _ in range(100):
        x.add_(1.0)
    torch.cuda.synchronize()
    start = time.perf_counter()
    for _ in range(n):
        x.add_(1.0)
    torch.cuda.synchronize()
    return (time.perf_counter() - start) / n


def measure_fresh_rate(torch: Any, quick: bool) -> float:
    """Bytes/s of first writes to a large tensor the allocator maps anew: filling a fresh
    ``empty`` of :data:`~dnnpart.cost.ops.FRESH_ALLOCATION_BYTES` x 2 and x 4, less filling
    the same bytes already mapped (the median of a few repeats each); ``inf`` where the
    difference is not positive (an allocator that keeps large blocks)."""
    from dnnpart.cost.ops import FRESH_ALLOCATION_BYTES

    rates = []
    for factor in (2,) if quick else (2, 4):
        n = factor * FRESH_ALLOCATION_BYTES // 4
        kept = torch.empty(n)
        kept.fill_(0.0)
        fresh_s, kept_s = [], []
        for _ in range(3 if quick else 5):
            start = time.perf_counter()
            torch.empty(n).fill_(1.0)
            fresh_s.append(time.perf_counter() - start)
            start = time.perf_counter()
            kept.fill_(1.0)
            kept_s.append(time.perf_counter() - start)
        extra = statistics.median(fresh_s) - statistics.median(kept_s)
        if extra > 0:
            rates.append(4 * n / extra)
    return statistics.median(rates) if rates else math.inf


def write_machine_file(calibration: Calibration, path: str | Path) -> Path:
    """Write ``calibration``'s machine file (YAML) at ``path``, atomically."""
    import yaml

    from dnnpart.io.dnn_partitioning import write_text_atomic

    target = Path(path)
    header = ("# dnnpart machine file: a device catalog (--specs) with its cluster (--cluster this "
              "file).\n# Written by `dnnpart calibrate`; docs/calibrate.md says what each field is.\n")
    write_text_atomic(header + yaml.safe_dump(calibration.machine_file(), sort_keys=False), target)
    return target
