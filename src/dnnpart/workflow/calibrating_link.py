"""The link between two processes of this machine, as ``dnnpart calibrate`` measures it.

Two gloo processes (``torch.distributed``, loopback TCP, the backend ``dnnpart run`` uses) pass
float32 tensors of a range of sizes:

* **point-to-point**: rank 0 sends, rank 1 receives and sends the tensor back; a one-way
  transfer is half the round trip (median over repeats). ``latency + bytes / bandwidth`` is
  fitted to them (:func:`~dnnpart.cost.calibration.fit_additive`, relative least squares) and
  becomes the machine file's link (where jitter leaves the fit no bandwidth term -- a larger
  transfer measured no slower -- the bandwidth is the largest transfer's bytes per second);
* **all-reduce** of the same tensors (median over repeats), fitted the same way and recorded
  beside it for data-parallel pricing.

Each rank runs torch with the calibration's thread count. A barrier precedes every timed
transfer, so neither rank is still busy with the last one.
"""

from __future__ import annotations

import json
import math
import os
import statistics
import tempfile
from pathlib import Path
from typing import Any

from dnnpart.cost.calibration import fit_additive

#: Bytes per transfer: 1 KiB .. 64 MiB (every factor 4), and the three of ``--quick``.
SIZES = tuple(4**k * 1024 for k in range(9))
QUICK_SIZES = (1024, 1 << 18, 1 << 22)
#: Seconds a rank waits for the other before giving up.
TIMEOUT_S = 120.0


def measure_link(*, threads: int = 1, quick: bool = False) -> dict[str, Any]:
    """Point-to-point and all-reduce between two local gloo processes (module docstring).

    Returns ``{"p2p": {...}, "allreduce": {...}}``, each with the fitted ``bandwidth``
    (bytes/s) and ``latency`` (s), the fit's relative errors, and the ``samples``
    (``[bytes, seconds]`` pairs).
    """
    from dnnpart.export.runtime import _free_port, run_workers

    sizes = QUICK_SIZES if quick else SIZES
    repeats = 3 if quick else 20
    with tempfile.TemporaryDirectory(prefix="dnnpart-calibrate-") as tmp:
        out = Path(tmp) / "link.json"
        run_workers(_worker, (2, _free_port(), sizes, repeats, str(out), threads), 2,
                    "the link measurement")
        measured = json.loads(out.read_text())
    return {kind: _fitted(measured[kind]) for kind in ("p2p", "allreduce")}


def _fitted(samples: list[list[float]]) -> dict[str, Any]:
    n = [b for b, _ in samples]
    t = [s for _, s in samples]
    fit = fit_additive([0.0] * len(n), n, t)
    bandwidth = fit.bytes_rate
    if not math.isfinite(bandwidth):  # jitter hid the size's effect: the largest transfer's rate
        largest = max(range(len(n)), key=lambda i: n[i])
        bandwidth = n[largest] / t[largest]
    return {"bandwidth": bandwidth, "latency": fit.overhead_s,
            "rms_rel_error": round(fit.rms_rel_error, 4), "max_rel_error": round(fit.max_rel_error, 4),
            "samples": [[int(b), float(s)] for b, s in samples]}


def _worker(rank: int, world: int, port: int, sizes: tuple[int, ...], repeats: int, out: str,
            threads: int) -> None:
    import datetime
    import time

    import torch
    import torch.distributed as dist

    from dnnpart.export.runtime import quiet_worker

    quiet_worker()
    torch.set_num_threads(threads)
    os.environ.setdefault("GLOO_SOCKET_IFNAME", "lo")
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank,
                            world_size=world, timeout=datetime.timedelta(seconds=TIMEOUT_S))
    try:
        p2p: list[list[float]] = []
        allreduce: list[list[float]] = []
        for n in sizes:
            t = torch.zeros(max(1, n // 4), dtype=torch.float32)
            trips, reduces = [], []
            for i in range(repeats + 1):  # the first of each is a warm-up
                dist.barrier()
                start = time.perf_counter()
                if rank == 0:
                    dist.send(t, 1)
                    dist.recv(t, 1)
                else:
                    dist.recv(t, 0)
                    dist.send(t, 0)
                if i:
                    trips.append(time.perf_counter() - start)
                dist.barrier()
                start = time.perf_counter()
                dist.all_reduce(t)
                if i:
                    reduces.append(time.perf_counter() - start)
            p2p.append([t.numel() * 4, statistics.median(trips) / 2])
            allreduce.append([t.numel() * 4, statistics.median(reduces)])
        if rank == 0:
            Path(out).write_text(json.dumps({"p2p": p2p, "allreduce": allreduce}))
    finally:
        dist.destroy_process_group()
