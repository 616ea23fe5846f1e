"""``dnnpart`` command line: thin adapters over the library; the only place that prints.

Each command is a module with ``add_parser(subparsers)``, which registers its arguments and
its handler (``set_defaults(handler=...)``); :data:`COMMANDS` lists them in the order of
``dnnpart --help``. Command modules share only the helpers (:mod:`~dnnpart.cli.args`,
:mod:`~dnnpart.cli.output`, :mod:`~dnnpart.cli.render`, :mod:`~dnnpart.cli.progress`) and
call the library (:mod:`dnnpart.workflow`, :mod:`dnnpart.solvers`...), never each other.

Exit codes (:mod:`dnnpart.cli.output`; the README's table says the same): 0 ok, 1 no plan
found / infeasible, 2 bad input or usage, 3 missing extra, 4 internal error (a bug: one
``error:`` line, the traceback with ``--debug``), 130 interrupted (Ctrl-C). :func:`main` is
the one safety net: whatever a command raises ends as one line and one of these codes. The code
follows the exception's type, never where it was raised: bad input is a
:class:`~dnnpart.errors.FormatError`/:class:`~dnnpart.errors.UsageError` raised at the edge, so
a ``ValueError``, ``KeyError`` or ``IndexError`` that escapes (ours or a library's) is a bug.
"""

from __future__ import annotations

import argparse
import contextlib
import signal
import sys
from collections.abc import Iterator, Sequence
from types import FrameType
from typing import Any

from dnnpart import interrupt
from dnnpart.cli import (
    calibrate_cmd,
    cluster_cmd,
    demo_cmd,
    evaluate_cmd,
    export_cmd,
    import_cmd,
    info_cmd,
    map_cmd,
    methods_cmd,
    plan_cmd,
    report_cmd,
    reproduce_cmd,
    run_cmd,
    simulate_cmd,
    solve_cmd,
)
from dnnpart.cli.args import PROGRESS_CHOICES, PROGRESS_HELP, check_non_empty
from dnnpart.cli.output import (
    EXIT_BAD_INPUT,
    EXIT_INTERNAL,
    EXIT_INTERRUPTED,
    EXIT_MISSING_EXTRA,
    EXIT_NO_PLAN,
    one_line,
    os_error_line,
)
from dnnpart.errors import (
    DnnpartError,
    InfeasibleError,
    MissingDependencyError,
    ProblemTooLargeError,
)

#: The commands, in the order ``dnnpart --help`` lists them.
COMMANDS = (info_cmd, evaluate_cmd, solve_cmd, methods_cmd, demo_cmd, reproduce_cmd, import_cmd,
            plan_cmd, export_cmd, run_cmd, simulate_cmd, calibrate_cmd, cluster_cmd, report_cmd, map_cmd)


def build_parser() -> argparse.ArgumentParser:
    """The parser of every command; a parsed command's ``handler(args, out)`` runs it."""
    parser = argparse.ArgumentParser(
        prog="dnnpart",
        description="Place DNN operator/layer graphs on accelerators and CPUs, with proven bounds.",
    )
    parser.add_argument("--quiet", "-q", action="store_true", help="no progress output on stderr "
                        "(--progress none)")
    parser.add_argument("--progress", choices=PROGRESS_CHOICES, default="auto", help=PROGRESS_HELP)
    parser.add_argument("--debug", action="store_true",
                        help="show the traceback of an internal error (exit code 4)")
    from dnnpart import __version__

    parser.add_argument("--version", action="version", version=f"dnnpart {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for command in COMMANDS:
        command.add_parser(sub)
    for command_parser in sub.choices.values():  # `dnnpart solve -q ...` as well as `dnnpart -q solve`
        command_parser.add_argument("--quiet", "-q", action="store_true", default=argparse.SUPPRESS,
                                    help="no progress output on stderr (--progress none)")
        command_parser.add_argument("--progress", choices=PROGRESS_CHOICES, default=argparse.SUPPRESS,
                                    help=PROGRESS_HELP)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the CLI; returns the exit code (see the module docstring).

    Ctrl-C is handled from the first line (parser building included): exit 130 and one
    ``interrupted`` line, whenever it comes.
    """
    try:
        with _noting_ctrl_c():
            return _main(argv)
    except KeyboardInterrupt:  # one that landed while the handlers were being set or restored
        return _interrupted()


def _main(argv: Sequence[str] | None) -> int:
    try:
        parser = build_parser()
        args = parser.parse_args(argv)
    except SystemExit as exc:  # argparse: usage errors exit 2, --help exits 0
        return int(exc.code or 0) if not isinstance(exc.code, str) else EXIT_BAD_INPUT
    except KeyboardInterrupt:
        return _interrupted()
    from dnnpart.cli.render import Renderer

    out = Renderer(json_mode=getattr(args, "json", False), quiet=args.quiet, progress=args.progress)
    try:
        check_non_empty(args)
        code: int = args.handler(args, out)
        return code
    except KeyboardInterrupt:
        return _interrupted()
    except MissingDependencyError as exc:
        out.error(one_line(str(exc)))
        return EXIT_MISSING_EXTRA
    except (InfeasibleError, ProblemTooLargeError) as exc:
        out.error(one_line(str(exc)))
        return EXIT_NO_PLAN
    except DnnpartError as exc:  # FormatError, UsageError, InvalidGraphError: the input
        out.error(one_line(str(exc)))
        return EXIT_BAD_INPUT
    except RecursionError as exc:
        return _internal(out, exc, args)
    except OSError as exc:
        out.error(os_error_line(exc))
        return EXIT_BAD_INPUT
    except Exception as exc:  # the safety net: one line, exit 4, traceback with --debug
        return _internal(out, exc, args)


@contextlib.contextmanager
def _noting_ctrl_c() -> Iterator[None]:
    """Ctrl-C raises ``KeyboardInterrupt`` as usual and is also noted
    (:func:`dnnpart.interrupt.note_interrupt`): Python drops one raised inside a finalizer or a
    garbage collector callback, and the command's solve must still stop. The note ends with
    the command. Meanwhile a ``KeyboardInterrupt`` (or a backstop ``Stopped``) that Python
    drops that way is not printed either (``sys.unraisablehook``): the note already stops the
    run, and the user sees one ``interrupted`` line, not an "Exception ignored" traceback."""
    def on_sigint(signum: int, frame: FrameType | None) -> None:
        interrupt.note_interrupt()
        raise KeyboardInterrupt

    previous_hook = sys.unraisablehook

    def quiet_hook(unraisable: Any) -> None:
        if not isinstance(unraisable.exc_value, (KeyboardInterrupt, interrupt.Stopped)):
            previous_hook(unraisable)

    try:
        previous = signal.signal(signal.SIGINT, on_sigint)
    except ValueError:  # not the main thread: Python's own handling applies
        yield
        return
    sys.unraisablehook = quiet_hook
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)
        sys.unraisablehook = previous_hook
        interrupt.reset()


def _interrupted() -> int:
    sys.stderr.write("interrupted\n")
    return EXIT_INTERRUPTED


def _internal(out: Any, exc: BaseException, args: argparse.Namespace) -> int:
    if getattr(args, "debug", False):
        import traceback

        traceback.print_exception(exc)
    rerun = "" if getattr(args, "debug", False) else "; rerun with --debug for the traceback"
    out.error(one_line(f"internal error ({type(exc).__name__}: {exc}); this is a bug, "
                       f"please report it{rerun}"))
    return EXIT_INTERNAL


def entry_point() -> None:
    """The ``dnnpart`` console script: :func:`main`, then exit with its code (a Ctrl-C during
    the interpreter's shutdown exits 130 with one line, as one during start-up does)."""
    from dnnpart._entry import exit_on_sigint

    exit_on_sigint()  # already so for the command (dnnpart/__init__.py); also when called directly
    code = main()
    exit_on_sigint()
    sys.exit(code)
