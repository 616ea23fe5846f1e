"""Field-level validation of parsed JSON/YAML with error paths like ``nodes[17].cpuLatency``."""

from __future__ import annotations

import json
import math
import reprlib
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from dnnpart.errors import FormatError
from dnnpart.limits import read_bounded

MISSING: Any = object()
_INT64_MAX = 2**63 - 1
_INT64_MIN = -(2**63)


def _short_repr() -> reprlib.Repr:
    short = reprlib.Repr()
    short.maxlevel, short.maxdict, short.maxlist, short.maxtuple = 2, 3, 4, 4
    short.maxset = short.maxfrozenset = short.maxdeque = short.maxarray = 4
    short.maxstring = short.maxother = short.maxlong = 40
    return short


_SHORT = _short_repr()
#: Integers longer than this many bits are described by their size (``repr`` of one is
#: quadratic, and refused past 4,300 digits).
_DESCRIBED_BITS = 256


def describe(value: Any) -> str:
    """Short rendering of a bad value for an error message, in time and memory bounded by
    the rendering, not by the value (a YAML alias bomb, a million-digit number).

    Examples
    --------
    >>> describe("x" * 100)
    '"xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx...'
    >>> describe(10**1000)
    'an integer of 3322 bits'
    """
    if isinstance(value, bool) or value is None:
        text = json.dumps(value)
    elif isinstance(value, str):
        text = json.dumps(value[:41])
    elif isinstance(value, int) and value.bit_length() > _DESCRIBED_BITS:
        return f"an integer of {value.bit_length()} bits"
    else:
        text = _SHORT.repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


def read_json(path: str | Path) -> Any:
    """Load a JSON file; I/O and syntax errors become :class:`FormatError`."""
    p = Path(path)
    raw = read_bounded(p, what="JSON file")  # regular files of bounded size only
    try:
        return json.loads(raw)
    except UnicodeDecodeError as exc:
        raise FormatError(f"{p}: not a text file ({exc.reason})") from None
    except json.JSONDecodeError as exc:
        raise FormatError(f"{p}: invalid JSON at line {exc.lineno} column {exc.colno}: {exc.msg}") from None
    except RecursionError:
        raise FormatError(f"{p}: invalid JSON: nested too deeply") from None
    except ValueError as exc:  # e.g. an integer of more than 4,300 digits
        raise FormatError(f"{p}: invalid JSON: {one_line(str(exc))}") from None


def one_line(message: str) -> str:
    """The first line of a library's message (for one-line errors)."""
    lines = [line for line in message.splitlines() if line.strip()]
    return lines[0] if lines else message


def require_mapping(value: Any, where: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise FormatError(f"{where}: expected an object, got {type(value).__name__}")
    return value


def require_list(value: Any, where: str) -> list[Any]:
    if not isinstance(value, list):
        raise FormatError(f"{where}: expected a list, got {type(value).__name__}")
    return value


def number(value: Any, where: str, *, minimum: float | None = 0.0, allow_inf: bool = False) -> float:
    """A real number (bools refused), optionally ``>= minimum``; NaN always refused."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        expect = "a number" if minimum is None else f"a number >= {minimum:g}"
        raise FormatError(f"{where}: expected {expect}, got {describe(value)}")
    try:
        x = float(value)
    except OverflowError:
        raise FormatError(f"{where}: expected a finite number, got an integer of "
                          f"{len(str(abs(value)))} digits") from None
    if math.isnan(x) or (math.isinf(x) and not allow_inf):
        raise FormatError(f"{where}: expected a finite number, got {describe(value)}")
    if minimum is not None and x < minimum:
        raise FormatError(f"{where}: expected a number >= {minimum:g}, got {describe(value)}")
    return x


def integer(value: Any, where: str, *, minimum: int | None = None) -> int:
    """An integer (``3.0`` accepted, bools refused), optionally ``>= minimum``."""
    if isinstance(value, bool):
        raise FormatError(f"{where}: expected an integer, got {describe(value)}")
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if not isinstance(value, int):
        raise FormatError(f"{where}: expected an integer, got {describe(value)}")
    if minimum is not None and value < minimum:
        raise FormatError(f"{where}: expected an integer >= {minimum}, got {describe(value)}")
    if not _INT64_MIN <= value <= _INT64_MAX:  # the int64 range, -2**63 included
        raise FormatError(f"{where}: expected a 64-bit integer, got {describe(value)}")
    return value


def flag(value: Any, where: str) -> bool:
    """A boolean given as ``true``/``false`` or ``0``/``1``."""
    if isinstance(value, bool):
        return value
    if isinstance(value, (int, float)) and value in (0, 1):
        return bool(value)
    raise FormatError(f"{where}: expected true/false or 0/1, got {describe(value)}")


def text(value: Any, where: str) -> str:
    if not isinstance(value, str):
        raise FormatError(f"{where}: expected a string, got {describe(value)}")
    return value


def column(
    records: Sequence[dict[str, Any]], prefix: str, key: str, parse: Callable[[Any, str], Any],
    default: Any = MISSING,
) -> list[Any]:
    """Parse ``records[i][key]`` for every record; a missing key takes ``default`` or fails.

    Columns of plain numbers (the common case of large files) are checked with numpy; any
    other column, or one with a bad value, takes the per-value path whose errors name the
    record and field.
    """
    fast = _fast_column(records, key, parse, default)
    if fast is not None:
        return fast
    out = []
    for i, rec in enumerate(records):
        value = rec.get(key, MISSING)
        if value is MISSING:
            if default is MISSING:
                raise FormatError(f"{prefix}[{i}].{key}: missing (required)")
            out.append(default)
        else:
            out.append(parse(value, f"{prefix}[{i}].{key}"))
    return out


def _fast_column(
    records: Sequence[dict[str, Any]], key: str, parse: Callable[[Any, str], Any], default: Any
) -> list[Any] | None:
    if parse not in (number, integer, flag):
        return None
    values = [rec.get(key, default) for rec in records]
    kinds = {type(x) for x in values}
    if parse is number and kinds <= {int, float}:
        try:
            arr = np.asarray(values, dtype=np.float64)
        except OverflowError:  # an integer too large for a float: the slow path names it
            return None
        ok = bool(np.all(np.isfinite(arr)) and np.all(arr >= 0.0))
    elif parse is integer and kinds <= {int}:
        ok = not values or (max(values) <= _INT64_MAX and min(values) >= _INT64_MIN)
    elif parse is flag and kinds <= {bool, int}:
        ok = all(x in (0, 1) for x in values)
    else:
        return None
    if not ok:
        return None
    return [bool(x) for x in values] if parse is flag else values
