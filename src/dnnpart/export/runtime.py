"""Run a :class:`~dnnpart.export.stages.StagedProgram` across local processes with torch.distributed.

One process per device that has stages (gloo backend; on the CPU, or rank ``r`` on
``cuda:r`` with values staged through host memory). Rank 0 is the driver: it holds
the micro-batches, sends each one's inputs to the stages that read them and collects the
model's outputs. Every rank runs its stages for micro-batch 0, then 1, ... (streaming:
a rank starts the next micro-batch while later stages still work on the previous one).

Activations travel point to point: a small header (kind, dtype, shape) then the tensor;
non-tensor values (ints, shapes) are pickled into a byte tensor. Sends are asynchronous and
receives blocking; since every cross-device edge goes to a strictly higher stage level and each
rank runs its stages in (micro-batch, level) order, this cannot deadlock. Sends are waited for
at the end of a pass over the micro-batches (their tensors are held until then).

:func:`measure_distributed` makes more passes after the first, timed
(:mod:`dnnpart.export.measuring`): each rank's stage calls and its pass; the first pass,
whose outputs are returned, also measures each rank's peak memory.
"""

from __future__ import annotations

import os
import pickle
import socket
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from dnnpart._optional import require
from dnnpart.errors import UsageError
from dnnpart.export.measuring import RankMeasure
from dnnpart.export.on_device import to_device
from dnnpart.export.stages import StagedProgram, assemble_output

HEADER_LEN = 16
_DTYPES = ("float32", "float64", "float16", "bfloat16", "int64", "int32", "int16", "int8", "uint8", "bool")
_KIND_TENSOR, _KIND_PICKLE = 0, 1


@dataclass(slots=True)
class DistributedRun:
    """The first pass's outputs, each rank's measurements and the timed passes' step seconds
    (the slowest rank's)."""

    outputs: list[Any]
    measured: list[RankMeasure] = field(default_factory=list)
    step_s: list[float] = field(default_factory=list)


def run_distributed(
    program: StagedProgram,
    microbatches: Sequence[Sequence[Any]],
    *,
    nproc: int | None = None,
    timeout_s: float = 300.0,
    threads_per_process: int = 1,
) -> list[Any]:
    """Run ``program`` on every micro-batch across ``nproc`` gloo processes; outputs in order.

    ``nproc`` defaults to the number of devices with stages and must be at least that; extra
    ranks join the group and stay idle.

    Raises
    ------
    ValueError
        ``nproc`` is smaller than the number of devices the program uses.
    RuntimeError
        A worker process failed (its error is included).
    """
    return measure_distributed(program, microbatches, nproc=nproc, timeout_s=timeout_s,
                               threads_per_process=threads_per_process).outputs


def measure_distributed(
    program: StagedProgram,
    microbatches: Sequence[Sequence[Any]],
    *,
    nproc: int | None = None,
    timeout_s: float = 300.0,
    threads_per_process: int = 1,
    steps: int = 0,
    device: str = "cpu",
    spawn: bool | None = None,
) -> DistributedRun:
    """:func:`run_distributed`, then ``steps`` timed passes over the same micro-batches (see
    the module docstring); measurements of the ranks that run stages, in device order;
    ``device``: ``cuda`` runs rank ``r`` on ``cuda:r`` (values between ranks still travel
    through gloo, staged in host memory); ``spawn``: start the ranks fresh rather than
    forked (default: for GPU ranks only, :func:`run_workers`)."""
    torch = require("torch", extra="torch", caller="dnnpart run")

    used = len(program.devices)
    world = used if nproc is None else nproc
    if world < used:
        raise UsageError(f"the plan uses {used} devices; --nproc {world} is too few")
    port = _free_port()
    with tempfile.TemporaryDirectory(prefix="dnnpart-run-") as tmp:
        out_path = Path(tmp) / "outputs.pt"
        batches = [tuple(mb) for mb in microbatches]
        run_workers(_worker, (world, port, program, batches, str(out_path), timeout_s,
                              threads_per_process, steps, device), world, "the distributed run",
                    spawn=device != "cpu" if spawn is None else spawn)
        result: list[Any] = torch.load(out_path, weights_only=False)
        measured = [RankMeasure(**torch.load(Path(tmp) / f"rank{r}.pt", weights_only=False))
                    for r in range(used)]
    return DistributedRun(outputs=result, measured=measured,
                          step_s=[max(m.step_s[i] for m in measured) for i in range(steps)])


def run_workers(worker: Any, args: tuple[Any, ...], world: int, what: str, *,
                spawn: bool = False) -> None:
    """Run ``worker(rank, *args)`` in ``world`` processes and wait: forked where the platform
    forks, unless ``spawn`` (GPU ranks: a forked child cannot use CUDA once the parent has
    touched it, and libraries such as transformers ask CUDA about itself while a model loads).

    Raises
    ------
    RuntimeError
        A worker failed; ``what`` names the run in the message, with the worker's error.
    """
    import torch.multiprocessing as mp
    from torch.multiprocessing.spawn import start_processes

    method = "fork" if "fork" in mp.get_all_start_methods() and not spawn else "spawn"
    ctx = start_processes(  # type: ignore[no-untyped-call]
        worker, args=args, nprocs=world, join=False, start_method=method)
    try:
        while not ctx.join():
            pass
    except KeyboardInterrupt:  # Ctrl-C: the workers ignore it (quiet_worker); end them here
        for proc in ctx.processes:
            if proc.is_alive():
                proc.terminate()
        for proc in ctx.processes:
            proc.join(timeout=5)
        raise
    except Exception as exc:  # ProcessRaisedException, ProcessExitedException
        raise RuntimeError(f"a worker of {what} failed: {exc}") from None


def quiet_worker() -> None:
    """First call of a worker process: Ctrl-C at the terminal reaches the whole process
    group, and the parent (:func:`run_workers`) ends the workers, so they ignore it rather
    than each printing a traceback."""
    import signal

    signal.signal(signal.SIGINT, signal.SIG_IGN)


def process_group_backend(device: str, world: int) -> str:
    """``gloo`` between CPU ranks; ``nccl`` between GPU ranks (one GPU rank needs no link:
    gloo, which every build has)."""
    return "nccl" if device == "cuda" and world > 1 else "gloo"


def check_run_device(device: str, ranks: int) -> None:
    """``UsageError`` unless this machine can run ``ranks`` ranks on ``device``.

    Asks NVML rather than the CUDA runtime, so the parent process starts no CUDA context
    before it forks its ranks (a forked child cannot use one).

    Examples
    --------
    >>> check_run_device("cpu", 4)
    """
    if device == "cpu":
        return
    if device != "cuda":
        raise UsageError(f"--device {device!r}: expected cpu or cuda")
    os.environ.setdefault("PYTORCH_NVML_BASED_CUDA_CHECK", "1")
    import torch

    found = torch.cuda.device_count() if torch.cuda.is_available() else 0
    if found < ranks:
        raise UsageError(f"--device cuda: the plan runs {ranks} rank(s), one GPU each, and torch "
                         f"sees {found} CUDA device(s) on this machine")


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def _worker(
    rank: int,
    world: int,
    port: int,
    program: StagedProgram,
    batches: list[tuple[Any, ...]],
    out_path: str,
    timeout_s: float,
    threads: int,
    steps: int,
    device_kind: str,
) -> None:
    import datetime

    import torch
    import torch.distributed as dist

    from dnnpart.export.allocator import keep_freed_heap
    from dnnpart.export.measuring import ChunkTimer, allocator_peak, device_sync, held_bytes, rank_device
    from dnnpart.export.on_device import move_module

    quiet_worker()
    keep_freed_heap()  # the heap the cost model prices (dnnpart.export.allocator)
    torch.set_num_threads(threads)
    device = rank_device(device_kind, rank)
    os.environ.setdefault("GLOO_SOCKET_IFNAME", "lo")
    dist.init_process_group(
        "gloo",
        init_method=f"tcp://127.0.0.1:{port}",
        rank=rank,
        world_size=world,
        timeout=datetime.timedelta(seconds=timeout_s),
    )
    try:
        rank_of = {dev: r for r, dev in enumerate(program.devices)}
        my_stages = [s for s in program.stages if rank_of[s.device] == rank]
        for s in my_stages:
            move_module(s.module, device)
        if rank == 0:
            batches = to_device(batches, device)
        sync = device_sync(device)
        timer = ChunkTimer(sync)
        calls = [timer.wrap("forward", s.module) for s in my_stages]
        measure = RankMeasure()
        with allocator_peak(device, measure, held_bytes(*(s.module for s in my_stages))):
            outputs = _pass(rank, program, my_stages, calls, batches, device)
        if rank == 0:
            torch.save(to_device(outputs, torch.device("cpu")), out_path)
        del outputs
        for _ in range(steps):
            dist.barrier()
            timer.reset()
            t0 = time.perf_counter()
            _pass(rank, program, my_stages, calls, batches, device)
            if sync is not None:
                sync()
            measure.step_s.append(time.perf_counter() - t0)
            measure.forward_s.append(timer.seconds["forward"])
            measure.backward_s.append(0.0)
        if rank < len(program.devices):
            torch.save(measure.to_dict(), Path(out_path).with_name(f"rank{rank}.pt"))
        dist.barrier()
    finally:
        dist.destroy_process_group()


def _pass(rank: int, program: StagedProgram, my_stages: list[Any], calls: list[Any],
          batches: list[tuple[Any, ...]], device: Any) -> list[Any]:
    """One pass of this rank over every micro-batch; the model's outputs on rank 0.
    Values cross ranks through host memory (gloo) and are moved to ``device`` on receipt."""
    import torch

    rank_of = {dev: r for r, dev in enumerate(program.devices)}
    producer_rank = {v: 0 for v in program.input_names}
    for s in program.stages:
        for v in s.outputs:
            producer_rank[v] = rank_of[s.device]
    tag_of = {v: i for i, v in enumerate(sorted(producer_rank))}
    # who needs each value on another rank
    needed: dict[str, set[int]] = {}
    for s in program.stages:
        for v in s.inputs:
            needed.setdefault(v, set()).add(rank_of[s.device])
    for v in program.output_values:
        needed.setdefault(v, set()).add(0)
    pending: list[Any] = []
    kept: list[dict[str, Any]] = []
    with torch.no_grad():
        for mb in batches:
            values: dict[str, Any] = {}
            if rank == 0:
                values.update(zip(program.input_names, mb, strict=True))
                for v in program.input_names:
                    for dst in sorted(needed.get(v, set()) - {0}):
                        pending += _send(values[v], dst, tag_of[v])
            for stage, call in zip(my_stages, calls, strict=True):
                for v in stage.inputs:
                    if v not in values:
                        values[v] = to_device(_recv(producer_rank[v], tag_of[v]), device)
                results = call(*(values[v] for v in stage.inputs))
                for v, value in zip(stage.outputs, results, strict=True):
                    values[v] = value
                    for dst in sorted(needed.get(v, set()) - {rank}):
                        pending += _send(value, dst, tag_of[v])
            if rank == 0:
                kept.append({v: values[v] for v in program.output_values if v in values})
        # the model's outputs made on other ranks, once every micro-batch is under way: a
        # receive inside the loop would hold rank 0 until the last stage finished each one,
        # and no two stages would ever overlap (the pass would not be a pipeline)
        for values in kept:
            for v in program.output_values:
                if v not in values:
                    values[v] = to_device(_recv(producer_rank[v], tag_of[v]), device)
    outputs = [assemble_output(program, values) for values in kept]
    for work in pending:
        work.wait()
    return outputs


def _send(value: Any, dst: int, tag: int) -> list[Any]:
    import torch
    import torch.distributed as dist

    header = torch.zeros(HEADER_LEN, dtype=torch.int64)
    if (
        isinstance(value, torch.Tensor)
        and str(value.dtype).removeprefix("torch.") in _DTYPES
        and value.dim() <= HEADER_LEN - 3
    ):
        payload = value.detach().cpu().contiguous()
        header[0], header[1], header[2] = _KIND_TENSOR, _DTYPES.index(str(value.dtype)[6:]), value.dim()
        header[3 : 3 + value.dim()] = torch.tensor(value.shape, dtype=torch.int64)
    else:
        payload = torch.frombuffer(bytearray(pickle.dumps(value)), dtype=torch.uint8)
        header[0], header[1] = _KIND_PICKLE, payload.numel()
    return [dist.isend(header, dst, tag=tag), dist.isend(payload, dst, tag=tag)]


def _recv(src: int, tag: int) -> Any:
    import torch
    import torch.distributed as dist

    header = torch.zeros(HEADER_LEN, dtype=torch.int64)
    dist.recv(header, src, tag=tag)
    if int(header[0]) == _KIND_TENSOR:
        ndim = int(header[2])
        shape = [int(d) for d in header[3 : 3 + ndim]]
        buf = torch.empty(shape, dtype=getattr(torch, _DTYPES[int(header[1])]))
        dist.recv(buf, src, tag=tag)
        return buf
    raw = torch.empty(int(header[1]), dtype=torch.uint8)
    dist.recv(raw, src, tag=tag)
    return pickle.loads(raw.numpy().tobytes())  # values we sent ourselves, same job
