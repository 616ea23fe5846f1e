"""In what order the DP's rows are filled: in chunks between clock checks, or level by level
in threads; with progress reports. Which kernel fills them is the driver's choice
(:func:`dnnpart.solvers.dp.driver.run_dp`)."""

from __future__ import annotations

import itertools
from collections.abc import Callable
from typing import Any

import numpy as np

from dnnpart.graph.stage_graph import StageGraph
from dnnpart.solvers.dp.ideals import IdealLattice
from dnnpart.solvers.dp.lattice_kernels import ideal_sums
from dnnpart.solvers.method import Progress, Stopwatch

#: Lattices from this many ideals are filled by several threads (below, a level's rows take
#: less time than handing them out).
THREADED_IDEALS = 20_000

#: ``fill_rows(start, stop, scratch)``: fill rows ``start <= I < stop`` with a thread's scratch.
FillRows = Callable[[int, int, Any], None]


def chunk_rows(n_ideals: int) -> int:
    """Rows filled between two clock checks (time limit, Ctrl-C): a row prices up to every
    lower ideal, so on a 200k-ideal chain 1% of the rows is tens of seconds.

    Examples
    --------
    >>> chunk_rows(500), chunk_rows(10**6)
    (5, 64)
    """
    return max(1, min(n_ideals // 100, 64))


def report(progress: Progress | None, clock: Stopwatch | None, label: str, done: int,
           total: int) -> None:
    """Tell ``progress`` that ``done`` of ``total`` rows are filled."""
    if progress is not None:
        elapsed = f", {clock.elapsed:.1f} s" if clock is not None else ""
        progress.update(f"{label}: {done:,}/{total:,} rows filled{elapsed}", done / total)


def fill_in_order(
    n_ideals: int, fill_rows: FillRows, scratch: Any, clock: Stopwatch | None,
    progress: Progress | None, label: str,
) -> bool:
    """Fill every row in order, in chunks with a clock check before each; returns whether
    all were filled (``False``: the clock expired)."""
    chunk = chunk_rows(n_ideals)
    for start in range(0, n_ideals, chunk):
        if clock is not None and clock.expired():
            return False
        stop = min(n_ideals, start + chunk)
        fill_rows(start, stop, scratch)
        report(progress, clock, label, stop, n_ideals)
    return True


def fill_by_levels(
    lattice: IdealLattice, stage: StageGraph, fill_rows: FillRows,
    scratch: Callable[[], Any], threads: int, clock: Stopwatch | None,
    progress: Progress | None, label: str,
) -> tuple[bool, list[Any]]:
    """Fill the rows level by level (ideals of one size read only smaller ones), each level
    in pieces spread over ``threads`` threads (the kernels release the GIL); the clock is
    checked between pieces. Returns whether all rows were filled and the threads' scratch
    (``scratch()`` makes one per thread: every array a kernel writes)."""
    from concurrent.futures import FIRST_EXCEPTION, ThreadPoolExecutor, wait
    from queue import SimpleQueue

    n_ideals = lattice.n_ideals
    sizes = ideal_sums(lattice.parent, lattice.added, np.ones(stage.n_stage_nodes))
    assert np.all(np.diff(sizes) >= 0), "ideals must be numbered level by level"
    starts = [0, *(np.flatnonzero(np.diff(sizes)) + 1).tolist(), n_ideals]
    scratches = [scratch() for _ in range(threads)]
    free: SimpleQueue[Any] = SimpleQueue()
    for sc in scratches:
        free.put(sc)

    def task(a: int, b: int) -> None:
        sc = free.get()
        try:
            fill_rows(a, b, sc)
        finally:
            free.put(sc)

    step = chunk_rows(n_ideals) * threads
    with ThreadPoolExecutor(threads) as pool:
        for lo, hi in itertools.pairwise(starts):
            for a in range(lo, hi, step):
                if clock is not None and clock.expired():
                    return False, scratches
                b = min(hi, a + step)
                cuts = np.linspace(a, b, threads + 1).astype(int).tolist()
                futures = [pool.submit(task, x, y) for x, y in itertools.pairwise(cuts) if y > x]
                pending = set(futures)
                while pending:  # short waits: Ctrl-C and the watchdog reach this thread
                    _, pending = wait(pending, timeout=0.1, return_when=FIRST_EXCEPTION)
                for f in futures:
                    f.result()
                report(progress, clock, label, b, n_ideals)
    return True, scratches
