"""Plain data out of the library: strict JSON values and one-line messages.

Both the plan files the library writes (``comparison`` rows) and the CLI's ``--json`` output
go through :func:`jsonable`; a refusal kept in a comparison row and an ``error:`` line go
through :func:`one_line`, so a message reads the same in a file and on the terminal.
"""

from __future__ import annotations

import math
from typing import Any

from dnnpart.limits import printable


def jsonable(value: Any) -> Any:
    """``value`` with non-finite floats replaced by ``None``, so that it is strict JSON.

    Examples
    --------
    >>> jsonable({"a": [1.0, float("inf")], "b": (float("nan"), "x")})
    {'a': [1.0, None], 'b': [None, 'x']}
    """
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [jsonable(v) for v in value]
    return value


def one_line(message: str) -> str:
    """The first line of a message, control characters escaped, at most 500 characters.

    Further lines are counted, not shown (they are what ``--debug`` prints).

    Examples
    --------
    >>> one_line("cannot trace\\n  frame 1\\n  frame 2")
    'cannot trace (+2 more lines; --debug shows them)'
    """
    lines = [line for line in str(message).splitlines() if line.strip()]
    first = lines[0] if lines else str(message)
    extra = f" (+{len(lines) - 1} more lines; --debug shows them)" if len(lines) > 1 else ""
    return printable(first[:500]) + extra
