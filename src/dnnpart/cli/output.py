"""What every command shares about its output: exit codes, JSON text, one-line messages.

Exit codes (the README's table says the same): 0 ok, 1 no plan found / infeasible, 2 bad
input or usage, 3 missing extra, 4 internal error (a bug), 130 interrupted (Ctrl-C).
"""

from __future__ import annotations

import json
from typing import Any

from dnnpart.workflow.text import jsonable, one_line

__all__ = [
    "EXIT_BAD_INPUT", "EXIT_INTERNAL", "EXIT_INTERRUPTED", "EXIT_MISSING_EXTRA", "EXIT_NO_PLAN",
    "EXIT_OK", "dumps", "jsonable", "one_line", "os_error_line",
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
