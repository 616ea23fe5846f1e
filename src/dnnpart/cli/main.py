"""``dnnpart`` command line: thin adapters over the public API; the only place that prints.

Exit codes (the README's table says the same): 0 ok, 1 no plan found / infeasible, 2 bad
input or usage, 3 missing extra, 4 internal error (a bug: one ``error:`` line, the traceback
with ``--debug``), 130 interrupted (Ctrl-C). :func:`main` is the one safety net: whatever a
command raises ends as one line and one of these codes.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from collections.abc import Sequence
from typing import Any

from dnnpart.cli import args as cli_args
from dnnpart.cli import map_cmd, model_cmds, report_cmd, reproduce_cmd, sim_cmds
from dnnpart.errors import (
    DnnpartError,
    InfeasibleError,
    MissingDependencyError,
    ProblemTooLargeError,
)

EXIT_OK, EXIT_NO_PLAN, EXIT_BAD_INPUT, EXIT_MISSING_EXTRA = 0, 1, 2, 3
EXIT_INTERNAL, EXIT_INTERRUPTED = 4, 130
PROGRESS_CHOICES, PROGRESS_HELP = cli_args.PROGRESS_CHOICES, cli_args.PROGRESS_HELP


def _add_problem_args(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "graph",
        help="graph file (dnn-partitioning .json, native .npz), zoo:NAME, or a model spec "
        "(hf:ARCH[:K=V,...], builtin:NAME, module:PKG.MOD:CALLABLE, torchvision:NAME, FILE.onnx); "
        "with --objective iteration builtin:NAME is one of paper 3's layer graphs (lenet5, alexnet, "
        "vgg16, inception_v3, resnet50, resnet152)",
    )
    p.add_argument("--cluster", metavar="SPEC",
                   help="cluster file (JSON/YAML), NxPRESET[+Mcpu] (4xA100, 4xA100+1cpu) or "
                        "GENERATOR:key=value,... (see `dnnpart cluster show`); default: the graph file's")
    cli_args.add_objective_args(p)
    p.add_argument("--json", action="store_true", help="print one JSON object instead of tables")
    model_cmds.add_model_spec_args(p)


def build_parser() -> argparse.ArgumentParser:
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

    p = sub.add_parser("info", help="describe a graph: size, structure, ideals, width, CCR")
    _add_problem_args(p)
    p.add_argument("--ideal-limit", type=int, default=100_000,
                   help="stop counting ideals here (default 100,000)")

    p = sub.add_parser("evaluate", help="score a plan file (dnnpart plan or expert split)")
    _add_problem_args(p)
    p.add_argument("plan", help="plan file")
    p.add_argument("--fill-by-colocation", action="store_true",
                   help="place nodes the plan leaves out with their colocation class "
                        "(e.g. an inference split on a training graph)")

    p = sub.add_parser("solve", help="find a plan with a method (see `dnnpart methods`)")
    _add_problem_args(p)
    cli_args.add_method_args(p, default="dp", method_help="method name (default: dp)")
    p.add_argument("--out", "-o", metavar="PLAN.json", help="write the plan here")

    p = sub.add_parser("methods", help="list the available methods and what they guarantee")
    p.add_argument("--json", action="store_true")

    p = sub.add_parser("demo", help="run the main job on a built-in example and explain the result")
    p.add_argument("example", nargs="?", default="zoo:bert-3", help="zoo:NAME (default zoo:bert-3)")
    p.add_argument("--list", action="store_true", help="list the built-in examples")

    reproduce_cmd.add_parser(sub)
    model_cmds.add_parsers(sub)
    sim_cmds.add_parsers(sub, _add_problem_args)
    report_cmd.add_parser(sub)
    map_cmd.add_parser(sub)
    for command in sub.choices.values():  # `dnnpart solve -q ...` as well as `dnnpart -q solve`
        command.add_argument("--quiet", "-q", action="store_true", default=argparse.SUPPRESS,
                             help="no progress output on stderr (--progress none)")
        command.add_argument("--progress", choices=PROGRESS_CHOICES, default=argparse.SUPPRESS,
                             help=PROGRESS_HELP)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the CLI; returns the exit code (see the module docstring)."""
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:  # argparse: usage errors exit 2, --help exits 0
        return int(exc.code or 0) if not isinstance(exc.code, str) else EXIT_BAD_INPUT
    except KeyboardInterrupt:
        return _interrupted(None)
    from dnnpart.cli.render import Renderer

    out = Renderer(json_mode=getattr(args, "json", False), quiet=args.quiet, progress=args.progress)
    try:
        from dnnpart.cli import commands

        name = f"cmd_{args.command}"
        modules = (commands, reproduce_cmd, model_cmds, sim_cmds, report_cmd, map_cmd)
        handler = next(getattr(m, name) for m in modules if hasattr(m, name))
        code: int = handler(args, out)
        return code
    except KeyboardInterrupt:
        return _interrupted(out)
    except MissingDependencyError as exc:
        out.error(_one_line(str(exc)))
        return EXIT_MISSING_EXTRA
    except (InfeasibleError, ProblemTooLargeError) as exc:
        out.error(_one_line(str(exc)))
        return EXIT_NO_PLAN
    except (DnnpartError, ValueError, KeyError) as exc:
        # ValueError/KeyError raised on purpose by the API name the bad input; anything
        # deeper (numpy, a solver library) is a bug: exit 4 below.
        if not isinstance(exc, DnnpartError) and not _raised_by_dnnpart(exc):
            return _internal(out, exc, args)
        out.error(_one_line(exc.args[0] if isinstance(exc, KeyError) and exc.args else str(exc)))
        return EXIT_BAD_INPUT
    except RecursionError as exc:
        return _internal(out, exc, args)
    except OSError as exc:
        out.error(_os_error(exc))
        return EXIT_BAD_INPUT
    except Exception as exc:  # the safety net: one line, exit 4, traceback with --debug
        return _internal(out, exc, args)


def _interrupted(out: Any) -> int:
    sys.stderr.write("interrupted\n")
    return EXIT_INTERRUPTED


def _one_line(message: str) -> str:
    """The first line of a message, with control characters escaped (one ``error:`` line)."""
    from dnnpart.limits import printable

    lines = [line for line in str(message).splitlines() if line.strip()]
    first = lines[0] if lines else str(message)
    extra = f" (+{len(lines) - 1} more lines; --debug shows them)" if len(lines) > 1 else ""
    return printable(first[:500]) + extra


def _os_error(exc: OSError) -> str:
    where = exc.filename if exc.filename is not None else ""
    reason = exc.strerror or type(exc).__name__
    return _one_line(f"{where}: {reason}" if where else reason)


def _raised_by_dnnpart(exc: BaseException) -> bool:
    """Whether the innermost frame that raised ``exc`` is dnnpart's own code."""
    tb = exc.__traceback__
    last = None
    while tb is not None:
        last = tb
        tb = tb.tb_next
    return last is not None and "dnnpart" in last.tb_frame.f_code.co_filename


def _internal(out: Any, exc: BaseException, args: argparse.Namespace) -> int:
    if getattr(args, "debug", False):
        import traceback

        traceback.print_exception(exc)
    out.error(_one_line(f"internal error ({type(exc).__name__}: {exc}); this is a bug, "
                        "please report it (run with --debug for the traceback)"))
    return EXIT_INTERNAL


def entry_point() -> None:
    sys.exit(main())


def jsonable(value: Any) -> Any:
    """Replace non-finite floats by ``None`` so the output is strict JSON."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [jsonable(v) for v in value]
    return value


def dumps(value: Any) -> str:
    return json.dumps(jsonable(value), indent=2)
