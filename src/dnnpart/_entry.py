"""Ctrl-C before the CLI's own handling starts: exit 130 with one line, no traceback.

``import dnnpart`` (numpy, the graph kernels...) and building the parser take a second or two;
a Ctrl-C then used to print a 20-line ``KeyboardInterrupt`` traceback. The package's first
line calls :func:`exit_on_sigint_if_cli`, which, only when this process *is* the ``dnnpart``
command (the console script or ``python -m dnnpart``) and nobody has set a handler yet,
makes SIGINT end the process at once with the documented code. :func:`dnnpart.cli.main.main`
replaces it with its own handler while a command runs, and the console entry point puts it
back for the interpreter's shutdown. A library user's process is left alone.

Only ``os``, ``signal`` and ``sys`` are used: this runs before anything else is imported.
"""

from __future__ import annotations

import os
import signal
import sys
from types import FrameType

#: The exit code of an interrupted run (``dnnpart.cli.output.EXIT_INTERRUPTED``).
EXIT_INTERRUPTED = 130


def _exit_now(signum: int, frame: FrameType | None) -> None:
    try:
        os.write(2, b"interrupted\n")
    finally:
        os._exit(EXIT_INTERRUPTED)


def is_cli_process() -> bool:
    """Whether this process was started as the ``dnnpart`` command.

    Examples
    --------
    >>> is_cli_process()  # doctest runs under pytest, not the dnnpart command
    False
    """
    name = os.path.basename(sys.argv[0]) if sys.argv else ""
    if name in ("dnnpart", "dnnpart.exe"):
        return True
    argv = [str(a) for a in getattr(sys, "orig_argv", [])]
    i = 1
    while i < len(argv):
        arg = argv[i]
        if arg == "-m":
            return i + 1 < len(argv) and argv[i + 1] == "dnnpart"
        if arg.startswith("-m"):
            return arg[2:] == "dnnpart"
        if arg in ("-X", "-W"):  # options with a separate value
            i += 1
        elif arg == "-c" or not arg.startswith("-"):
            return False  # a script or -c: not python -m dnnpart
        i += 1
    return False


def exit_on_sigint() -> None:
    """Make SIGINT exit this process at once with :data:`EXIT_INTERRUPTED` and one line
    (main thread only; elsewhere signals cannot be set and nothing is done)."""
    try:
        signal.signal(signal.SIGINT, _exit_now)
    except ValueError:  # not the main thread
        pass


def exit_on_sigint_if_cli() -> None:
    """:func:`exit_on_sigint` when this process is the ``dnnpart`` command and SIGINT still
    has Python's default handler."""
    if is_cli_process() and signal.getsignal(signal.SIGINT) is signal.default_int_handler:
        exit_on_sigint()
