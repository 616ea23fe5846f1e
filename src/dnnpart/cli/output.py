"""What every command shares about its output: exit codes, JSON text, one-line messages.

Exit codes (the README's table says the same): 0 ok, 1 no plan found / infeasible, 2 bad
input or usage, 3 missing extra, 4 internal error (a bug), 130 interrupted (Ctrl-C).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from dnnpart.workflow.text import jsonable, one_line

__all__ = [
    "EXIT_BAD_INPUT", "EXIT_INTERNAL", "EXIT_INTERRUPTED", "EXIT_MISSING_EXTRA", "EXIT_NO_PLAN",
    "EXIT_OK", "check_outputs", "dumps", "jsonable", "one_line", "os_error_line",
]

EXIT_OK, EXIT_NO_PLAN, EXIT_BAD_INPUT, EXIT_MISSING_EXTRA = 0, 1, 2, 3
EXIT_INTERNAL, EXIT_INTERRUPTED = 4, 130


def dumps(value: Any) -> str:
    """``value`` as indented strict JSON (non-finite floats become ``null``).

    Examples
    --------
    >>> print(dumps({"objective": float("inf")}))
    {
      "objective": null
    }
    """
    return json.dumps(jsonable(value), indent=2)


def check_outputs(out: Any, files: Mapping[str, Any] | None = None,
                  folders: Mapping[str, Any] | None = None) -> None:
    """Check a command's outputs before its work (:func:`dnnpart.io.output_files.check_output`),
    each named by its option: ``files`` and ``folders`` map an option to its path (``None``:
    not given).

    An output to standard output (``-``) takes stdout: the command's own lines then go to
    stderr, and ``--json`` (whose object is on stdout) is refused beside it, as is a second
    output to stdout.

    Examples
    --------
    >>> check_outputs(None, {"--out": None, "--trace": "/dev/null"})
    >>> check_outputs(None, {"-o": ""})
    Traceback (most recent call last):
    ...
    dnnpart.io.output_files.OutputError: -o: empty path; name a file (or - for standard output)
    """
    from dnnpart.errors import UsageError
    from dnnpart.io.output_files import check_output, is_stdout

    to_stdout = []
    for option, path in (files or {}).items():
        if path is not None:
            check_output(path, option=option)
            if is_stdout(path):
                to_stdout.append(option)
    for option, path in (folders or {}).items():
        if path is not None:
            check_output(path, option=option, directory=True)
    if not to_stdout:
        return
    if len(to_stdout) > 1:
        raise UsageError(f"{', '.join(to_stdout)}: only one output can go to standard output")
    if getattr(out, "json_mode", False):
        raise UsageError(f"{to_stdout[0]} -: standard output carries the --json object; write "
                         f"{to_stdout[0]} to a file, or drop --json")
    if out is not None and hasattr(out, "err"):
        out.out = out.err  # the output owns stdout; the command's own lines go to stderr


def os_error_line(exc: OSError) -> str:
    """``FILE: reason`` of an I/O error, on one line.

    Examples
    --------
    >>> os_error_line(FileNotFoundError(2, "No such file or directory", "plan.json"))
    'plan.json: No such file or directory'
    """
    where = exc.filename if exc.filename is not None else ""
    reason = exc.strerror or type(exc).__name__
    return one_line(f"{where}: {reason}" if where else reason)
