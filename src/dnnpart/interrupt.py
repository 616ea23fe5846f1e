"""Stopping long runs: one stop flag for Ctrl-C and time limits, checked by every solver.

Mechanism
---------
* A process-wide *stop flag* (:func:`request_stop`, :func:`stop_requested`) with the reason
  (``"interrupted"`` or ``"time-limit"``). Solvers never poll it by hand: their
  :class:`~dnnpart.solvers.registry.Stopwatch` reports ``expired()`` once it is set, so every
  loop that already checked its own time limit also stops on Ctrl-C. Numba kernels run in
  chunks between which the caller checks the clock (the DP fills 1% of its rows per call,
  local search makes a bounded number of moves per call).
* :func:`guard` wraps one top-level solve (:func:`dnnpart.solvers.registry.solve`). In the
  main thread it routes SIGINT to the flag (first Ctrl-C: stop with the best plan so far;
  second Ctrl-C: ``KeyboardInterrupt`` at once). A watchdog thread sets the flag with reason
  ``"time-limit"`` when the time limit passes, and, as a backstop for code that cannot check
  the flag (a long C call, a method that ignores the clock), raises :class:`Stopped` in the
  solving thread ``GRACE_S`` seconds after the flag was set (plus 5% of the limit when the
  limit set it). The
  registry turns :class:`Stopped` into a result with the best plan the method offered so
  far (:mod:`dnnpart.solvers.incumbent`; none when it offered none). The backstop waits while
  numba compiles or loads a kernel (:func:`shielded`, :func:`shield_numba_compiles`): a
  compile cut midway would break the kernel for the rest of the process.
* Blocking C solvers (CP-SAT, HiGHS) run in a helper thread through :func:`run_blocking`,
  which waits in short slices and calls the solver's own ``stop`` hook when the flag is set,
  so they return their incumbent; a backstop landing meanwhile does not discard it. A
  solver that may not hear its hook (HiGHS's child process in a MIP's root LP) is killed a second
  after it, before the backstop: the caller then keeps its earlier phases' plan.

The stop reason of a finished solve is in ``result.stats["stopped"]``; the CLI maps
``"interrupted"`` to exit 130.
"""

from __future__ import annotations

import contextlib
import ctypes
import math
import signal
import threading
import time
from collections.abc import Callable, Iterator
from types import FrameType
from typing import Any, TypeVar

T = TypeVar("T")

INTERRUPTED = "interrupted"
TIME_LIMIT = "time-limit"

#: Seconds a run may go on after the stop flag before the backstop raises :class:`Stopped`.
GRACE_S = 2.0

_lock = threading.Lock()
_flag = threading.Event()
_state: dict[str, Any] = {"reason": None, "since": None, "depth": 0, "limit_hit": False,
                          "shield": 0, "pending": False}


class Stopped(BaseException):
    """Raised in the solving thread by the backstop when a run ignores the stop flag."""


def request_stop(reason: str = INTERRUPTED) -> None:
    """Set the stop flag (the first reason given is kept).

    Examples
    --------
    >>> reset(); request_stop("time-limit"); stop_requested(), stop_reason()
    (True, 'time-limit')
    >>> reset(); stop_requested()
    False
    """
    with _lock:
        if _state["reason"] is None:
            _state["reason"], _state["since"] = reason, time.monotonic()
        _flag.set()


def stop_requested() -> bool:
    """Whether a stop was requested (Ctrl-C or a passed time limit)."""
    return _flag.is_set()


def stop_reason() -> str | None:
    """``"interrupted"``, ``"time-limit"`` or ``None``."""
    reason: str | None = _state["reason"]
    return reason


def note_time_limit() -> None:
    """Record that a solver stopped on its own time limit (reported as ``stopped``)."""
    _state["limit_hit"] = True


def depth() -> int:
    """How many :func:`guard` blocks are active (0: no solve running)."""
    return int(_state["depth"])


def time_limit_hit() -> bool:
    return bool(_state["limit_hit"])


def reset() -> None:
    """Clear the flag, the recorded reason and a pending Ctrl-C (done when the outermost solve
    ends, and by the CLI when a command ends)."""
    with _lock:
        _flag.clear()
        _state.update(reason=None, since=None, limit_hit=False, pending=False)


def note_interrupt() -> None:
    """Remember a Ctrl-C that came outside any solve (the CLI's handler calls this before it
    raises ``KeyboardInterrupt``).

    Python prints and drops a ``KeyboardInterrupt`` raised inside a finalizer or a garbage
    collector callback; a command would then go on as if no Ctrl-C had come. With the note,
    the next :func:`guard` starts with the stop flag set, so the solve stops at once and
    reports ``interrupted``.

    Examples
    --------
    >>> reset(); note_interrupt()
    >>> with guard():
    ...     print(stop_reason())
    interrupted
    >>> reset()
    """
    with _lock:
        _state["pending"] = True


@contextlib.contextmanager
def shielded() -> Iterator[None]:
    """Hold the backstop off for a block that must not be cut midway.

    Numba compiles (or loads from its cache) a kernel in Python under its compiler lock; an
    asynchronous :class:`Stopped` landing there leaves the dispatcher half-built ("no compiled
    object yet" on every later call). The stop flag stays set, so the caller still stops, and
    the backstop fires again once no block is shielded. (The watchdog checks the shield and
    sends under one lock; a backstop sent just before a block is raised at the thread's next
    Python step, before the block's entry has run.)

    Examples
    --------
    >>> with shielded():
    ...     _state["shield"]
    1
    """
    _enter_shield()
    try:
        yield
    finally:
        _leave_shield()


def _enter_shield() -> None:
    with _lock:  # the watchdog sends the backstop under this lock, after checking the shield
        _state["shield"] += 1


def _leave_shield() -> None:
    with _lock:
        _state["shield"] -= 1


_numba_shielded = False
#: Nesting of numba's compiler lock, when the outermost hold began, seconds held in all.
_compile = {"depth": 0, "since": 0.0, "total": 0.0, "quiet_until": -math.inf}
#: Seconds the backstop still waits after numba releases its compiler lock: the dispatcher
#: goes on in Python (unboxing, its own bookkeeping) before the machine code runs, and an
#: asynchronous exception landing there can crash the process (seen: a segfault).
COMPILE_TAIL_S = 0.5


def compile_seconds() -> float:
    """Seconds this process has spent in numba compiles and cache loads (shielded ones).

    The backstop waits for them, so a run's wall time can exceed its limit by this much; the
    time-limit tests take it out.

    Examples
    --------
    >>> compile_seconds() >= 0.0
    True
    """
    with _lock:
        return float(_compile["total"])


def shield_numba_compiles() -> None:
    """Shield every numba compilation (and cache load) of this process from the backstop.

    Called by each module right after ``import numba``; numba announces its compiler lock as
    the ``numba:compiler_lock`` event, whose start and end enter and leave :func:`shielded`.
    """
    global _numba_shielded
    if _numba_shielded:
        return
    from numba.core import event

    class _CompileShield(event.Listener):
        def on_start(self, ev: Any) -> None:
            _enter_shield()
            with _lock:
                if _compile["depth"] == 0:
                    _compile["since"] = time.perf_counter()
                _compile["depth"] += 1

        def on_end(self, ev: Any) -> None:
            with _lock:
                _compile["depth"] -= 1
                if _compile["depth"] == 0:
                    _compile["total"] += time.perf_counter() - _compile["since"]
                    _compile["quiet_until"] = time.monotonic() + COMPILE_TAIL_S
            _leave_shield()

    event.register("numba:compiler_lock", _CompileShield())  # type: ignore[no-untyped-call]
    _numba_shielded = True


def caused_by_stop(exc: BaseException) -> bool:
    """Whether ``exc`` is, or was raised while handling, a backstop :class:`Stopped`.

    A backstop landing just as a compiled (numba) call returns surfaces as ``SystemError:
    ... returned a result with an exception set`` caused by the ``Stopped``; it means the
    same: the run was stopped.

    Examples
    --------
    >>> try:
    ...     try:
    ...         raise Stopped()
    ...     except Stopped as inner:
    ...         raise SystemError("returned a result with an exception set") from inner
    ... except SystemError as outer:
    ...     caused_by_stop(outer)
    True
    >>> caused_by_stop(SystemError("other"))
    False
    """
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        if isinstance(current, Stopped):
            return True
        seen.add(id(current))
        current = current.__cause__ or current.__context__
    return False


def _raise_in(thread_id: int, exc: type[BaseException]) -> None:
    ctypes.pythonapi.PyThreadState_SetAsyncExc(ctypes.c_ulong(thread_id), ctypes.py_object(exc))


@contextlib.contextmanager
def guard(time_limit: float | None = None) -> Iterator[None]:
    """Route Ctrl-C and the time limit to the stop flag for the duration of one solve.

    Nested guards (a solver calling another method) share the outer one's flag and handler.

    Examples
    --------
    >>> with guard(0.05):
    ...     time.sleep(0.2)
    ...     print(stop_reason())
    time-limit
    """
    with _lock:
        outer = _state["depth"] == 0
        _state["depth"] += 1
    if not outer:
        try:
            yield
        finally:
            _state["depth"] -= 1
        return
    pending = bool(_state["pending"])
    reset()
    if pending:  # a Ctrl-C Python dropped before this solve began (note_interrupt)
        request_stop(INTERRUPTED)
    previous: Any = None
    handled = threading.current_thread() is threading.main_thread()
    if handled:
        def on_sigint(signum: int, frame: FrameType | None) -> None:
            if stop_requested() and stop_reason() == INTERRUPTED:
                raise KeyboardInterrupt  # second Ctrl-C: give up on the incumbent
            request_stop(INTERRUPTED)

        try:
            previous = signal.signal(signal.SIGINT, on_sigint)
        except ValueError:  # not the main interpreter
            handled = False
    done = threading.Event()
    target = threading.get_ident()
    deadline = None if time_limit is None else time.monotonic() + time_limit
    # a passed time limit gets 5% of it more (models finishing their build); Ctrl-C does not
    late = 0.05 * time_limit if time_limit is not None else 0.0

    def watch() -> None:
        fired_at = -math.inf
        while not done.wait(0.05):
            now = time.monotonic()
            if deadline is not None and now >= deadline:
                request_stop(TIME_LIMIT)
            since = _state["since"]
            grace = GRACE_S + (late if _state["reason"] == TIME_LIMIT else 0.0)
            # repeated: an asynchronous exception that lands in a __del__ or a gc callback
            # is printed and dropped by Python
            if since is not None and now - since >= grace and now - fired_at >= 1.0 \
                    and not done.is_set():
                with _lock:  # not into a shielded block (see shielded)
                    if _state["shield"] == 0 and now >= _compile["quiet_until"]:
                        fired_at = now
                        _raise_in(target, Stopped)

    watcher = threading.Thread(target=watch, name="dnnpart-stop-watch", daemon=True)
    watcher.start()
    try:
        yield
    finally:
        while True:  # a late Stopped landing here must not leave the watcher running
            try:
                done.set()
                watcher.join()
                break
            except Stopped:
                continue
        with _lock:
            _state["depth"] -= 1
        if handled:
            signal.signal(signal.SIGINT, previous)


def run_blocking(func: Callable[[], T], stop: Callable[[], None], *, poll_s: float = 0.05,
                 kill: Callable[[], None] | None = None, kill_after_s: float = 1.0) -> T:
    """Run ``func`` (a blocking C call that releases the GIL) in a helper thread.

    The calling thread waits in ``poll_s`` slices; when the stop flag is set (or a
    ``KeyboardInterrupt`` arrives) it calls ``stop()`` once (the solver's own "stop now"
    hook), then waits for ``func`` to return its incumbent. A backstop :class:`Stopped` that
    lands while it waits does not throw that answer away: the solver was asked to stop and
    its incumbent is on the way (the backstop fires again after this returns); one landing
    ``GRACE_S`` seconds after ``stop()`` is raised (the solver did not hear it). ``kill``,
    for a solver that may not hear ``stop()`` (a child process busy in C code that checks no
    flag), is called when ``func`` has not returned ``kill_after_s`` seconds after ``stop()``
    (at once on a ``KeyboardInterrupt``); ``func`` must then return (or raise) at once.

    Examples
    --------
    >>> run_blocking(lambda: 42, lambda: None)
    42
    """
    box: dict[str, Any] = {}

    def body() -> None:
        try:
            box["value"] = func()
        except BaseException as exc:  # handed to the caller's thread
            box["error"] = exc
        finally:
            box["done"] = True

    worker = threading.Thread(target=body, name="dnnpart-solver", daemon=True)
    worker.start()
    asked: list[float] = []  # when stop() was called

    def ask() -> None:
        if not asked:
            asked.append(time.monotonic())
            stop()

    # Waits by sleeping, not Thread.join: an asynchronous exception (the backstop) landing in
    # join can mark a running thread as ended (CPython 3.11's _wait_for_tstate_lock releases
    # the lock the running thread holds), which would hand back no answer at all.
    wait = 0.001
    while "done" not in box:
        try:
            while "done" not in box:
                time.sleep(wait)
                wait = min(2 * wait, poll_s)
                if stop_requested():
                    ask()
                if kill is not None and asked and time.monotonic() - asked[0] >= kill_after_s:
                    kill()
                    kill = None
        except Stopped:
            ask()
            if time.monotonic() - asked[0] < GRACE_S:
                continue  # the answer it was asked for is on the way: keep waiting
            if kill is not None:
                kill()
            raise  # not heard: the backstop's case
        except BaseException:
            ask()
            if kill is not None:
                kill()
            while "done" not in box:
                time.sleep(poll_s)
            raise
    if "error" in box:
        raise box["error"]
    value: T = box["value"]
    return value
