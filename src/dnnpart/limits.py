"""Limits on what untrusted input may make dnnpart allocate or print, checked at the edge.

Every size a user controls is checked *before* the allocation it drives, with a message
that says what to do instead:

* files are read only if they are regular files no larger than :data:`MAX_FILE_BYTES`
  (:func:`read_bounded`; a FIFO, ``/dev/zero`` or a folder is refused at once);
* ``.npz`` members are checked against :data:`MAX_NPZ_MEMBER_BYTES` from their headers
  before they are decompressed (:func:`check_npz_member`), so a zip bomb is refused;
* device counts are capped at :data:`MAX_DEVICES` (dense ``d x d`` link arrays), see
  :func:`check_device_count`;
* sums of times, sizes and transfer costs must stay finite (:func:`check_finite_sum`):
  latencies of ``1e308`` would otherwise overflow to ``inf`` inside a solver;
* the DP estimates its lattice and table memory before allocating (``max_memory_bytes``,
  :mod:`dnnpart.solvers.dp.ideals`).

Text that came from a file (node and device names) is printed through :func:`printable`,
which escapes terminal control characters.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path
from typing import Any

import numpy as np

from dnnpart.errors import FormatError

#: Largest graph/plan/cluster file read (bytes). The paper's biggest graph file is ~20 MB.
MAX_FILE_BYTES = 256 * 1024 * 1024

#: Largest uncompressed ``.npz`` member (bytes): 2**27 float64 values.
MAX_NPZ_MEMBER_BYTES = 1 << 30

#: Most devices in a cluster. Clusters hold dense ``d x d`` link arrays and the solvers
#: per-device tables; 4096 devices keep one such array at 128 MB.
MAX_DEVICES = 4096


def read_bounded(path: str | os.PathLike[str], *, limit: int = MAX_FILE_BYTES, what: str = "file") -> bytes:
    """Read a regular file of at most ``limit`` bytes; anything else is a :class:`FormatError`.

    Examples
    --------
    >>> read_bounded("/dev/zero")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    dnnpart.errors.FormatError: /dev/zero: not a regular file (a device, FIFO or socket); ...
    """
    p = Path(path)
    try:
        fd = os.open(p, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
    except FileNotFoundError:
        raise FormatError(f"{p}: no such file") from None
    except IsADirectoryError:
        raise FormatError(f"{p}: is a directory, expected a {what}") from None
    except OSError as exc:
        raise FormatError(f"{p}: cannot read ({exc.strerror})") from None
    try:
        info = os.fstat(fd)
        if stat.S_ISDIR(info.st_mode):
            raise FormatError(f"{p}: is a directory, expected a {what}")
        if not stat.S_ISREG(info.st_mode):
            raise FormatError(f"{p}: not a regular file (a device, FIFO or socket); expected a {what}")
        if info.st_size > limit:
            raise FormatError(f"{p}: {info.st_size:,} bytes, more than the {limit:,} dnnpart reads")
        chunks, total = [], 0
        while True:
            chunk = os.read(fd, 1 << 20)
            if not chunk:
                break
            total += len(chunk)
            if total > limit:  # the file grew while being read
                raise FormatError(f"{p}: more than the {limit:,} bytes dnnpart reads")
            chunks.append(chunk)
        return b"".join(chunks)
    except IsADirectoryError:
        raise FormatError(f"{p}: is a directory, expected a {what}") from None
    except OSError as exc:
        raise FormatError(f"{p}: cannot read ({exc.strerror})") from None
    finally:
        os.close(fd)


def check_output_path(path: str | os.PathLike[str], *, directory: bool = False) -> Path:
    """Refuse an output path that cannot be written: empty, a folder, or in a missing folder.

    Checked before the work that produces the output, so a long solve does not end in an
    unwritable ``--out``. ``directory=True``: the output is a folder (created if missing).

    Examples
    --------
    >>> check_output_path("")
    Traceback (most recent call last):
    ...
    dnnpart.errors.FormatError: --out: empty path
    >>> check_output_path("/nonexistent-dir/plan.json")
    Traceback (most recent call last):
    ...
    dnnpart.errors.FormatError: /nonexistent-dir/plan.json: folder /nonexistent-dir does not exist
    """
    text = os.fspath(path)
    if not str(text).strip():
        raise FormatError("--out: empty path")
    p = Path(text)
    if p.is_dir() and not directory:
        raise FormatError(f"{p}: is a directory, expected a file path")
    if p.exists() and directory and not p.is_dir():
        raise FormatError(f"{p}: exists and is not a directory")
    parent = p.parent if str(p.parent) else Path(".")
    if not parent.exists():
        raise FormatError(f"{p}: folder {parent} does not exist")
    if not parent.is_dir():
        raise FormatError(f"{p}: {parent} is not a folder")
    return p


def check_npz_member(shape: tuple[int, ...], dtype: np.dtype[Any], where: str) -> None:
    """Refuse an ``.npz`` member whose header promises more than :data:`MAX_NPZ_MEMBER_BYTES`.

    Examples
    --------
    >>> check_npz_member((10**12,), np.dtype(np.float64), "g.npz: x")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    dnnpart.errors.FormatError: g.npz: x: 8,000,000,000,000 bytes uncompressed, more than the ...
    """
    size = int(np.prod(shape, dtype=object)) * int(dtype.itemsize)
    if size > MAX_NPZ_MEMBER_BYTES:
        raise FormatError(f"{where}: {size:,} bytes uncompressed, more than the "
                          f"{MAX_NPZ_MEMBER_BYTES:,} dnnpart reads")


def check_device_count(n: int, where: str) -> int:
    """Refuse clusters with more than :data:`MAX_DEVICES` devices (before building them).

    Examples
    --------
    >>> check_device_count(10**9, "maxFPGAs")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    dnnpart.errors.FormatError: maxFPGAs: 1,000,000,000 devices, more than the 4,096 ...
    """
    if n > MAX_DEVICES:
        raise FormatError(f"{where}: {n:,} devices, more than the {MAX_DEVICES:,} dnnpart handles "
                          "(dense device-by-device arrays); describe a smaller cluster")
    return n


def check_finite_sum(values: Any, where: str) -> None:
    """Refuse values whose finite entries sum to more than float64 holds.

    Examples
    --------
    >>> check_finite_sum(np.array([1e308, 1e308]), "nodes[*].cpuLatency")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    dnnpart.errors.FormatError: nodes[*].cpuLatency: the values sum past the largest float ...
    """
    arr = np.asarray(values, dtype=np.float64)
    finite = arr[np.isfinite(arr)]
    with np.errstate(over="ignore"):
        total = float(np.abs(finite).sum()) if finite.size else 0.0
    # a margin: solvers add times and transfers, and scale them by device speeds
    if not np.isfinite(total) or total > 1e300:
        raise FormatError(f"{where}: the values sum past the largest float (1.8e308); use smaller units")


#: Deepest ``[``/``{`` nesting accepted in YAML text (PyYAML recurses once per level).
MAX_NESTING = 200


def check_nesting(text: str, where: str, *, limit: int = MAX_NESTING) -> None:
    """Refuse text whose brackets nest deeper than ``limit`` (before a recursive parser runs).

    Brackets inside quotes count too: the check errs on the side of refusing, and no real
    cluster file nests 200 deep.

    Examples
    --------
    >>> check_nesting("[" * 500, "c.yaml")
    Traceback (most recent call last):
    ...
    dnnpart.errors.FormatError: c.yaml: nested more than 200 deep
    """
    depth = 0
    for ch in text:
        if ch in "[{":
            depth += 1
            if depth > limit:
                raise FormatError(f"{where}: nested more than {limit} deep")
        elif ch in "]}":
            depth = max(0, depth - 1)


def printable(text: str) -> str:
    """``text`` with terminal control characters escaped (names read from files).

    Examples
    --------
    >>> printable("conv\\x1b[2J1")
    'conv\\\\x1b[2J1'
    """
    if text.isprintable():
        return text
    return "".join(c if c.isprintable() else c.encode("unicode_escape").decode("ascii") for c in text)
