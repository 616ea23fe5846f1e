"""Progress of long solves on stderr: one reporter the solvers call, rendered two ways.

Solvers receive a :class:`~dnnpart.solvers.registry.Progress` and call
``update(message, fraction)`` when they have news (rows filled, a new incumbent, a bound).
The CLI picks how it is shown with ``--progress`` (choices, also in docs/run.md):

* ``bar``: one live status line, redrawn in place (:class:`StatusProgress`; a terminal);
* ``lines``: a plain line every few seconds (:class:`LineProgress`) -- for logs, CI and
  ``2> file``, where a redrawn line shows nothing. A line is printed when the solver has news
  and the last line is older than the interval, and also when it has none (a heartbeat with
  the elapsed time and the last news), so a frozen solver is still seen to run;
* ``auto`` (default): ``bar`` on a terminal, ``lines`` otherwise; ``none`` (``--quiet``): nothing.

The interval is 5 s; the environment variable ``DNNPART_PROGRESS_SECONDS`` changes it (tests
and impatient people).
"""

from __future__ import annotations

import os
import sys
import threading
import time
from typing import IO, Any

from rich.console import Console
from rich.markup import escape

from dnnpart.cli.args import PROGRESS_CHOICES
from dnnpart.errors import UsageError

__all__ = ["PROGRESS_CHOICES", "LineProgress", "StatusProgress", "interval_seconds", "make_progress"]
DEFAULT_INTERVAL_S = 5.0


def interval_seconds() -> float:
    """Seconds between progress lines: ``DNNPART_PROGRESS_SECONDS`` or 5.

    Examples
    --------
    >>> interval_seconds() > 0
    True
    """
    raw = os.environ.get("DNNPART_PROGRESS_SECONDS", "")
    try:
        value = float(raw)
    except ValueError:
        return DEFAULT_INTERVAL_S
    return value if value > 0 else DEFAULT_INTERVAL_S


def _text(message: str, fraction: float | None) -> str:
    return message + (f" ({fraction:.0%})" if fraction is not None else "")


class StatusProgress:
    """One live status line on stderr (a terminal), redrawn on every update."""

    def __init__(self, console: Console, label: str = "") -> None:
        self.console = console
        self.label = label
        self.started = time.perf_counter()
        self._status: Any = None

    def __enter__(self) -> StatusProgress:
        self._status = self.console.status(f"{escape(self.label)} starting")
        self._status.__enter__()
        return self

    def __exit__(self, *exc: object) -> None:
        if self._status is not None:
            self._status.__exit__(*exc)

    def update(self, message: str, fraction: float | None = None) -> None:
        elapsed = time.perf_counter() - self.started
        if self._status is not None:
            self._status.update(f"{escape(_text(message, fraction))}  ({elapsed:.1f} s)")


class LineProgress:
    """A plain progress line on ``stream`` every ``interval`` seconds, news or not.

    Examples
    --------
    >>> import io
    >>> buf = io.StringIO()
    >>> with LineProgress(buf, label="dp", interval=0.05) as p:
    ...     p.update("DP: 10/20 rows filled", 0.5)
    ...     time.sleep(0.2)
    >>> lines = buf.getvalue().splitlines()
    >>> len(lines) >= 2 and lines[0].startswith("progress: dp, ")
    True
    >>> "DP: 10/20 rows filled (50%)" in lines[-1]
    True
    """

    def __init__(self, stream: IO[str] | None = None, *, label: str = "",
                 interval: float | None = None) -> None:
        self.stream = stream if stream is not None else sys.stderr
        self.label = label
        self.interval = interval if interval is not None else interval_seconds()
        self.started = time.perf_counter()
        self._news = "starting"
        self._last_line = self.started
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def __enter__(self) -> LineProgress:
        self.started = self._last_line = time.perf_counter()
        self._thread = threading.Thread(target=self._heartbeat, name="dnnpart-progress", daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()

    def update(self, message: str, fraction: float | None = None) -> None:
        with self._lock:
            self._news = _text(message, fraction)
            due = time.perf_counter() - self._last_line >= self.interval
        if due:
            self._emit()

    def _heartbeat(self) -> None:
        # wakes often enough to keep the interval within 10 %, prints only when a line is due
        while not self._stop.wait(self.interval / 10):
            if time.perf_counter() - self._last_line >= self.interval:
                self._emit()

    def _emit(self) -> None:
        with self._lock:
            now = time.perf_counter()
            if now - self._last_line < self.interval:
                return  # the other thread printed meanwhile
            self._last_line = now
            label = f"{self.label}, " if self.label else ""
            line = f"progress: {label}{now - self.started:.0f} s: {self._news}\n"
            try:
                self.stream.write(line)
                self.stream.flush()
            except (OSError, ValueError):  # stderr closed (a pipe's reader gone): keep solving
                self._stop.set()


def make_progress(mode: str, console: Console, *, label: str = "") -> StatusProgress | LineProgress | None:
    """The reporter for ``--progress mode`` on ``console`` (stderr); ``None`` for ``none``."""
    if mode not in PROGRESS_CHOICES:
        raise UsageError(f"--progress {mode!r}: expected one of {', '.join(PROGRESS_CHOICES)}")
    if mode == "none":
        return None
    if mode == "bar" or (mode == "auto" and console.is_terminal):
        return StatusProgress(console, label)
    return LineProgress(label=label)
