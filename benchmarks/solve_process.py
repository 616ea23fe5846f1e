"""One ``dnnpart solve ... --json`` as a whole process: its result, wall time and peak RSS.

Shared by the benchmarks that time whole processes (``dp_big_lattice.py``,
``paper1_real_models.py``). The peak RSS is this child's own (``os.wait4``), so one runner
process can time many solves.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import tempfile
import time
from typing import Any


def run_solve(argv: list[str], env: dict[str, str], timeout: float) -> dict[str, Any]:
    """Run ``argv`` (a ``solve --json`` command line); its JSON result plus ``wall_s`` and
    ``rss_mb``. A run past ``timeout`` is killed (status ``killed``); a run that prints no
    result (exit 1 without a plan, 2, 4, ...) gets status ``exit N: <last stderr line>``."""
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        t0 = time.perf_counter()
        proc = subprocess.Popen(argv, stdout=out, stderr=err, env=env)
        killed = False
        while True:  # wait4 reaps the child and gives its own rusage
            pid, status, usage = os.wait4(proc.pid, os.WNOHANG)
            if pid:
                break
            if not killed and time.perf_counter() - t0 > timeout:
                os.kill(proc.pid, signal.SIGKILL)
                killed = True
            time.sleep(0.01)
        proc.returncode = os.waitstatus_to_exitcode(status)  # already reaped: tell Popen
        wall = time.perf_counter() - t0
        out.seek(0)
        err.seek(0)
        text, tail = out.read().decode(), err.read().decode().strip().splitlines()[-1:]
    rss = usage.ru_maxrss / 1024
    if killed:
        return {"status": "killed", "wall_s": wall, "rss_mb": rss}
    if proc.returncode not in (0, 1) or not text.strip():
        return {"status": f"exit {proc.returncode}: {(tail or [''])[0][:90]}", "wall_s": wall,
                "rss_mb": rss}
    result: dict[str, Any] = json.loads(text)
    result.update(wall_s=wall, rss_mb=rss)
    return result
