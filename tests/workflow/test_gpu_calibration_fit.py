"""How ``calibrate --device cuda`` turns synchronised operator timings into what an eager step
pays (:func:`dnnpart.workflow.calibrating.queued_samples`), checked without a GPU: the
launch time :func:`~dnnpart.frontends.profiling.time_fx_nodes` records before each wait, the
synchronisation's own share (:func:`~dnnpart.workflow.calibrating.sync_wait`), and the
queued cost ``max(launch, synchronised - wait)`` the fits are made of."""

from __future__ import annotations

import math
import time

import pytest
import yaml
from hypothesis import given
from hypothesis import strategies as st

from dnnpart.cost.calibration import fit_additive
from dnnpart.workflow.calibrating import (
    Calibration,
    Sample,
    fit_samples,
    queued_samples,
    sync_wait,
)
from dnnpart.workflow.calibration_cases import OVERHEAD_CASE

torch = pytest.importorskip("torch", reason="calibrate needs torch")


def test_time_fx_nodes_records_each_launch_before_its_wait() -> None:
    from torch.fx.experimental.proxy_tensor import make_fx

    from dnnpart.frontends.profiling import time_fx_nodes

    gm = make_fx(lambda x: (x + 1.0).relu().sum())(torch.randn(64))
    wait_s = 2e-3

    def slow_sync() -> None:  # a GPU whose kernels finish 2 ms after their launch
        time.sleep(wait_s)

    host: dict[str, float] = {}
    total = time_fx_nodes(gm, (torch.randn(64),), repeats=3, warmup=1, sync=slow_sync, host=host)
    assert set(host) == set(total) and total
    for name, ms in total.items():
        assert host[name] <= ms and ms - host[name] >= 0.9 * wait_s * 1e3
    untouched: dict[str, float] = {}
    time_fx_nodes(gm, (torch.randn(64),), repeats=1, warmup=0, host=untouched)  # no sync: no launch times
    assert untouched == {}


def _tiny(synced: float, host: float) -> Sample:
    return Sample("elementwise", f"{OVERHEAD_CASE}:add", 1.0, 12.0, synced, "elementwise:add",
                  host_seconds=host)


def test_the_wait_is_the_tiny_adds_synchronised_less_launch_time() -> None:
    samples = [_tiny(33e-6, 12e-6), _tiny(35e-6, 12e-6), _tiny(31e-6, 11e-6),
               Sample("matmul", "linear:mm", 1e9, 1e7, 1e-3, "matmul:nn", host_seconds=20e-6)]
    assert sync_wait(samples) == pytest.approx(21e-6)
    assert sync_wait([Sample("matmul", "linear:mm", 1e9, 1e7, 1e-3)]) == 0.0  # nothing to tell


@given(st.lists(st.tuples(st.floats(1e-6, 1e-2), st.floats(0.0, 1.0), st.floats(0.0, 5e-5)),
                min_size=1, max_size=30))
def test_a_queued_cost_lies_between_the_launch_and_the_synchronised_time(
    rows: list[tuple[float, float, float]],
) -> None:
    samples = [Sample("elementwise", "x:add", 1.0, 1.0, synced, host_seconds=synced * share)
               for synced, share, _ in rows]
    wait = rows[0][2]
    for s, q in zip(samples, queued_samples(samples, wait), strict=True):
        assert s.host_seconds is not None and q.synced_seconds == s.seconds
        assert s.host_seconds <= q.seconds <= s.seconds
        assert q.seconds == pytest.approx(max(s.host_seconds, s.seconds - wait))


def test_a_launch_bound_class_fits_its_launch_and_a_long_kernel_its_work() -> None:
    """Small adds, each launched in 12 us and done 21 us later, fit an overhead of 12 us
    queued (33 us synchronised); large ones keep their byte rate."""
    wait, launch, rate = 21e-6, 12e-6, 2e12
    samples = [_tiny(launch + wait, launch)]
    for n in (1e3, 1e4, 1e5, 1e8, 4e8, 1.6e9):
        kernel = 1e-6 + n / rate
        samples.append(Sample("elementwise", "add:add", n / 12, n, kernel + wait, "elementwise:add",
                              host_seconds=launch))
    fits, _ = fit_samples(queued_samples(samples, sync_wait(samples)))
    q = fits["elementwise"]
    assert q.overhead_s == pytest.approx(launch, rel=0.15)
    # long kernels: the kernel, not its launch nor the wait (within 10%: one additive fit of
    # relative errors over sizes whose queued cost is max(launch, kernel) -- a knee)
    for s in samples[-2:]:
        fitted = q.overhead_s + s.flops / q.flops_rate + s.bytes_moved / q.bytes_rate
        assert fitted == pytest.approx(s.seconds - wait, rel=0.10)
        assert fitted < 0.98 * s.seconds  # the synchronised time would be more
    synced = fit_additive([s.flops for s in samples], [s.bytes_moved for s in samples],
                          [s.seconds for s in samples])
    assert synced.overhead_s > q.overhead_s + wait / 2  # what the machine file held before


def test_the_machine_file_keeps_both_timings_of_each_gpu_sample() -> None:
    samples = queued_samples([_tiny(33e-6, 12e-6)] * 3, 21e-6)
    fits, ops = fit_samples(samples)
    cal = Calibration(name="gpu", device="cuda", threads=1, quick=True, fits=fits, overhead_s=12e-6,
                      ops_per_class=ops, link={"p2p": {"bandwidth": 1e9, "latency": 1e-5}},
                      samples=tuple(samples), memory_bytes=80e9, dispatch_s=12e-6)
    data = yaml.safe_load(yaml.safe_dump(cal.machine_file()))
    device = data["devices"]["gpu"]
    assert device["memory_bytes"] == 80e9 and device["launch_overhead_s"] == 12e-6
    key, op, flops, nbytes, queued, synced, host = data["calibration"]["samples"][0]
    assert (queued, synced, host) == pytest.approx((12e-6, 33e-6, 12e-6))
    assert data["calibration"]["dispatch_s"] == 12e-6 and math.isfinite(flops + nbytes)
    assert key == "elementwise:add" and op.endswith(":add")
