"""Progress of long solves when stderr is not a terminal: periodic plain lines (``--progress``).

The interval is shortened with ``DNNPART_PROGRESS_SECONDS`` so that a solve of a few seconds
shows several lines.
"""

from __future__ import annotations

import io
import os
import re
import subprocess
import sys
import time

import pytest

from dnnpart.cli.main import main
from dnnpart.cli.progress import LineProgress

LINE = re.compile(r"^progress: (?P<label>[\w-]+), (?P<elapsed>\d+) s: (?P<news>.+)$")


def _solve(*extra: str, seconds: float = 4.0) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, DNNPART_PROGRESS_SECONDS="0.5")
    return subprocess.run(
        [sys.executable, "-m", "dnnpart", *extra, "solve", "zoo:bert-6", "-m", "ip-noncontig",
         "--backend", "highs", "--time-limit", str(seconds)],
        capture_output=True, text=True, timeout=180, check=False, env=env)


def test_a_long_solve_with_redirected_stderr_prints_periodic_lines() -> None:
    proc = _solve()
    assert proc.returncode in (0, 1), proc.stderr
    lines = [m for m in map(LINE.match, proc.stderr.splitlines()) if m]
    assert len(lines) >= 4, proc.stderr  # 4 s at one line per 0.5 s, whatever the load
    assert {m["label"] for m in lines} == {"ip-noncontig"}  # the method
    elapsed = [int(m["elapsed"]) for m in lines]
    assert elapsed == sorted(elapsed) and elapsed[-1] >= 2
    # HiGHS's live status: incumbent and bound reach the lines
    assert any("incumbent" in m["news"] for m in lines), proc.stderr


@pytest.mark.parametrize("flags", [("--quiet",), ("--progress", "none")])
def test_quiet_and_none_print_no_progress(flags: tuple[str, ...]) -> None:
    proc = _solve(*flags, seconds=1.5)
    assert proc.returncode in (0, 1), proc.stderr
    assert "progress:" not in proc.stderr


def test_progress_is_accepted_on_the_command_too(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["methods", "--progress", "lines", "--json"]) == 0
    assert main(["--progress", "bar", "methods", "--json"]) == 0
    capsys.readouterr()
    assert main(["methods", "--progress", "sometimes"]) == 2
    assert "invalid choice" in capsys.readouterr().err


def test_heartbeat_repeats_the_last_news_while_the_solver_is_silent() -> None:
    buf = io.StringIO()
    with LineProgress(buf, label="x", interval=0.05) as p:
        time.sleep(0.17)
        p.update("found 3")
        time.sleep(0.17)
    news = [LINE.match(line)["news"] for line in buf.getvalue().splitlines()]  # type: ignore[index]
    assert news[0] == "starting" and news[-1] == "found 3"
    assert 4 <= len(news) <= 9  # one line per interval, not one per update or wake-up
