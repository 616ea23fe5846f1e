"""Field-level validation of parsed JSON/YAML with error paths like ``nodes[17].cpuLatency``."""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from dnnpart.errors import FormatError

MISSING: Any = object()


def describe(value: Any) -> str:
    """Short rendering of a bad value for an error message."""
    text = json.dumps(value) if isinstance(value, (str, bool, type(None))) else repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


def read_json(path: str | Path) -> Any:
    """Load a JSON file; I/O and syntax errors become :class:`FormatError`."""
    p = Path(path)
    try:
        with p.open("rb") as fh:
            return json.load(fh)
    except FileNotFoundError:
        raise FormatError(f"{p}: no such file") from None
    except IsADirectoryError:
        raise FormatError(f"{p}: is a directory, expected a JSON file") from None
    except UnicodeDecodeError as exc:
        raise FormatError(f"{p}: not a text file ({exc.reason})") from None
    except json.JSONDecodeError as exc:
        raise FormatError(f"{p}: invalid JSON at line {exc.lineno} column {exc.colno}: {exc.msg}") from None
    except OSError as exc:
        raise FormatError(f"{p}: cannot read ({exc.strerror})") from None


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
    x = float(value)
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
        raise FormatError(f"{where}: expected an integer >= {minimum}, got {value}")
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
        arr = np.asarray(values, dtype=np.float64)
        ok = bool(np.all(np.isfinite(arr)) and np.all(arr >= 0.0))
    elif parse is integer and kinds <= {int}:
        ok = True
    elif parse is flag and kinds <= {bool, int}:
        ok = all(x in (0, 1) for x in values)
    else:
        return None
    if not ok:
        return None
    return [bool(x) for x in values] if parse is flag else values
