"""Progress of long solves on stderr: one reporter the solvers call, rendered two ways.

Solvers receive a :class:`~dnnpart.solvers.registry.Progress` and call
``update(message, fraction)`` when they have news (rows filled, a new incumbent, a bound).
The CLI picks how it is shown with ``--progress`` (choices, also in docs/run.md):

* ``bar``: one live status line, redrawn in place (:class:`StatusProgress`; a terminal);
* ``lines``: a plain line every few seconds (:class:`LineProgress`) -- for logs, CI and
  ``2> file``, where a redrawn line shows nothing. A line is printed when the solver has news
  and the last line is older than the interval, and also when it has none (a heartbeat with
  the elapsed time and the last news, at most an interval after the last line), so a frozen
  solver is still seen to run;
* ``auto`` (default): ``bar`` on a terminal, ``lines`` otherwise; ``none`` (``--quiet``): nothing.

The interval is 5 s; the environment variable ``DNNPART_PROGRESS_SECONDS`` changes it (tests
and impatient people).

Commands that run through several phases (``plan``, ``import``, ``run``, ``report``,
``export``, ``simulate``) open one reporter for the whole command (:func:`command_progress`,
labelled with the command) and name each phase on it as it starts (:mod:`dnnpart.workflow.phases`:
``"importing hf:gpt2 (torch.export)"``, ``"solving with dpl"``, ``"running 4 stage
processes ..."``). The news is then ``PHASE`` or ``PHASE: METHOD'S NEWS (FRACTION)``, and the
heartbeat belongs to the command, not the phase, so phases shorter than the interval still
leave no gap longer than it. In ``--json`` mode these commands show no progress: their stderr
carries only notes and errors.
"""

from __future__ import annotations

import contextlib
import os
import sys
import threading
import time
from collections.abc import Callable, Iterator
from typing import IO, Any, Protocol

from rich.console import Console
from rich.text import Text

from dnnpart.cli.args import PROGRESS_CHOICES
from dnnpart.errors import UsageError

__all__ = ["PROGRESS_CHOICES", "LineProgress", "StatusProgress", "command_progress",
           "interval_seconds", "make_progress"]
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


def _now() -> float:
    """The reporters' clock (a module function so that tests can stand in a fake one)."""
    return time.perf_counter()


def _text(message: str, fraction: float | None) -> str:
    return message + (f" ({fraction:.0%})" if fraction is not None else "")


class _News:
    """What a reporter shows: the phase running (if named) and the last news within it."""

    def __init__(self) -> None:
        self.phase: str | None = None
        self.news: str | None = "starting"

    def begin(self, name: str) -> None:
        self.phase, self.news = name, None

    def text(self) -> str:
        if self.phase is None:
            return self.news or ""
        return self.phase + (f": {self.news}" if self.news else "")


class _Phase:
    """The context of one named phase on a command-wide reporter (see :func:`command_progress`)."""

    def __init__(self, reporter: StatusProgress | LineProgress, name: str) -> None:
        self.reporter, self.name = reporter, name

    def __enter__(self) -> StatusProgress | LineProgress:
        self.reporter.begin(self.name)
        return self.reporter

    def __exit__(self, *exc: object) -> None:
        return None


class StatusProgress:
    """One live status line on stderr (a terminal) with the elapsed time ticking.

    The line is a renderable that rich redraws about 12 times a second, so the elapsed time
    moves while a phase or a solver reports nothing.
    """

    def __init__(self, console: Console, label: str = "") -> None:
        self.console = console
        self.label = label
        self.started = _now()
        self._state = _News()
        self._status: Any = None

    def __enter__(self) -> StatusProgress:
        self.started = _now()
        self._status = self.console.status(self)
        self._status.__enter__()
        return self

    def __exit__(self, *exc: object) -> None:
        if self._status is not None:
            self._status.__exit__(*exc)

    def __rich__(self) -> Text:
        text = self._state.text()
        if self._state.phase is None and text == "starting":
            text = f"{self.label} starting"
        return Text(f"{text}  ({_now() - self.started:.1f} s)")

    def update(self, message: str, fraction: float | None = None) -> None:
        self._state.news = _text(message, fraction)

    def begin(self, name: str) -> None:
        """A new phase of the command starts (the news of the last one is dropped)."""
        self._state.begin(name)

    def phase(self, name: str) -> _Phase:
        """The phase ``name``, entered for its duration (a :data:`ProgressFactory` of the workflow)."""
        return _Phase(self, name)


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
        self.started = _now()
        self._state = _News()
        self._last_line = self.started
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def __enter__(self) -> LineProgress:
        self.started = self._last_line = _now()
        self._thread = threading.Thread(target=self._heartbeat, name="dnnpart-progress", daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()

    def update(self, message: str, fraction: float | None = None) -> None:
        with self._lock:
            self._state.news = _text(message, fraction)
            due = _now() - self._last_line >= self.interval
        if due:
            self._emit()

    def begin(self, name: str) -> None:
        """A new phase of the command starts: the next line names it (the news of the last
        phase is dropped); printed now if a line is due."""
        with self._lock:
            self._state.begin(name)
            due = _now() - self._last_line >= self.interval
        if due:
            self._emit()

    def phase(self, name: str) -> _Phase:
        """The phase ``name``, entered for its duration (a :data:`ProgressFactory` of the workflow)."""
        return _Phase(self, name)

    def _heartbeat(self) -> None:
        # wakes 10 times an interval and prints once the next wake-up would be late: the
        # silence between lines stays within the interval (the promise is a maximum)
        tick = self.interval / 10
        while not self._stop.wait(tick):
            if _now() - self._last_line >= self.interval - tick:
                self._emit(self.interval - tick)

    def _emit(self, due_after: float | None = None) -> None:
        with self._lock:
            now = _now()
            if now - self._last_line < (self.interval if due_after is None else due_after):
                return  # the other thread printed meanwhile
            self._last_line = now
            label = f"{self.label}, " if self.label else ""
            line = f"progress: {label}{now - self.started:.0f} s: {self._state.text()}\n"
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


class _Output(Protocol):
    """What :func:`command_progress` reads of the CLI's renderer."""

    json_mode: bool
    progress_mode: str
    err: Console


@contextlib.contextmanager
def command_progress(out: _Output, label: str) -> Iterator[Callable[[str], Any] | None]:
    """One reporter for the whole command ``label``, entered for the block; yields the
    workflow's ``progress`` (the reporter's :meth:`~LineProgress.phase`), or ``None`` in
    ``--json`` mode and for ``--progress none``.

    Examples
    --------
    >>> from types import SimpleNamespace
    >>> quiet = SimpleNamespace(json_mode=False, progress_mode="none", err=None)
    >>> with command_progress(quiet, "run") as progress:
    ...     progress is None
    True
    """
    reporter = None if out.json_mode else make_progress(out.progress_mode, out.err, label=label)
    if reporter is None:
        yield None
        return
    with reporter:
        yield reporter.phase
