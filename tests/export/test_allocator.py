"""``keep_freed_heap``: a training-like step that frees and reallocates faults no pages.

Each case runs in a fresh interpreter (the allocator's settings are per process): a step
whose "forward" stashes blocks of 1-8 MiB (below the large-block size) and whose "backward"
frees them behind new gradient blocks, run four times to settle; the minor page faults
(``getrusage``) of four more steps, the fewest of three such windows, are what a steady state
pays again every step.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

pytest.importorskip("torch")
pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's mallopt")

STEPS = textwrap.dedent("""
    import resource, sys, torch
    from dnnpart.export.allocator import keep_freed_heap
    if sys.argv[1] == "keep":
        assert keep_freed_heap()
    sizes = [(1 << 18) * (1 + (i * 7) % 8) for i in range(16)]
    def step():
        stash = [torch.empty(n).fill_(1.0) for n in sizes]
        grad = torch.empty(sizes[-1]).fill_(1.0)
        for n in reversed(sizes):  # each gradient reads the one before it
            grad = torch.empty(n).fill_(1.0) + grad[:1]
            stash.pop()
        return grad
    for _ in range(4):  # the heap settles over the first steps
        step()
    windows = []
    for _ in range(3):  # the quietest of three windows: the kernel's own sampling (NUMA
        before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt  # balancing) faults
        for _ in range(4):                                           # pages now and then
            step()
        windows.append(resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before)
    print(min(windows))
""")


def _faults(script: str, mode: str) -> int:
    """The page faults ``script`` prints last, run in a fresh interpreter."""
    done = subprocess.run([sys.executable, "-c", script, mode], capture_output=True, text=True,
                          timeout=120, check=True)
    return int(done.stdout.split()[-1])


def _steady_faults(mode: str) -> int:
    return _faults(STEPS, mode)


def test_a_kept_heap_reuses_its_pages_where_the_default_maps_them_again() -> None:
    step_pages = sum((1 << 20) * (1 + (i * 7) % 8) for i in range(16)) // 4096
    assert _steady_faults("keep") < step_pages // 10  # a settling block at most, not the step
    default = _steady_faults("default")
    if default < step_pages // 10:
        pytest.skip("this C library keeps freed blocks by default: nothing to compare")


REUSE = textwrap.dedent("""
    import resource, sys, torch
    from dnnpart.export.allocator import keep_freed_heap, release_freed_heap
    assert keep_freed_heap()
    n = 4 << 20  # 16 MiB of float32: below the large-block size, so a heap block
    keep = torch.empty(1 << 10).fill_(1.0)
    faults = []
    for _ in range(5):  # the fewest of five: the kernel faults a kept block in now and then
        for _ in range(3):
            torch.empty(n).fill_(1.0)  # freed at once: its pages stay in the heap
        if sys.argv[1] == "release":
            assert release_freed_heap()
        before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
        torch.empty(n).fill_(1.0)
        faults.append(resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before)
    print(min(faults))
""")


def _reuse_faults(mode: str) -> int:
    return _faults(REUSE, mode)


def test_released_free_pages_fault_in_again_where_kept_ones_do_not() -> None:
    """What ``calibrate`` relies on to time a workspace as a run pays it: after
    ``release_freed_heap`` a reused 16 MiB block faults its 4,096 pages in again, every time."""
    pages = (16 << 20) // 4096
    assert _reuse_faults("keep") < pages // 10
    assert _reuse_faults("release") > pages // 2
