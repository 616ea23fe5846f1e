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
  :mod:`dnnpart.solvers.dp.ideals`);
* counts and sizes given as numbers (micro-batches, samples, threads, model-spec parameters,
  example-input shapes, cost-table sizes) are checked by :func:`check_int_range` and the
  ``check_*`` functions below against the ``MAX_*`` constants, each with its reason; the
  table in ``docs/limits.md`` lists them all.

Text that came from a file (node and device names) is printed through :func:`printable`,
which escapes terminal control characters.
"""

from __future__ import annotations

import math
import os
import stat
from collections.abc import Sequence
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


#: Most micro-batches per step (``--microbatches``, a plan's ``microbatches``). The pipeline
#: simulators keep a task per stage and micro-batch and ``report`` draws each one: 10,000
#: micro-batches took 48 s in ``report``; real trainers use at most a few hundred.
MAX_MICROBATCHES = 4096

#: Most samples per device (``--batch``, the iteration objective). Layer shapes are products
#: of the batch with the layer's other dimensions, held as int64.
MAX_BATCH = 1 << 20

#: Largest seed accepted where a seed is given as a number (numpy takes unsigned 64-bit
#: seeds; negative ones are refused by numpy, so by us first).
MAX_SEED = 2**63 - 1

#: Worker processes/threads per logical CPU at most (``map --threads``, ``--threads``):
#: more only adds start-up time and memory (each worker imports the solver).
THREADS_PER_CPU = 4

#: Largest example input made on the CPU (bytes, all inputs together): builtin and
#: torchvision models are captured from real example inputs, ``run`` feeds them to the model.
MAX_INPUT_BYTES = 1 << 30

#: Most elements of one example input made on the meta device (``hf:`` models when planning):
#: no memory is allocated, but operator costs multiply the dimensions.
MAX_META_INPUT_ELEMENTS = 1 << 40

#: Largest ``--config`` file of ``hf:`` overrides (bytes): a config is a few hundred bytes.
MAX_CONFIG_BYTES = 1 << 20

#: Largest working array while building OptCNN's cost tables (bytes): one edge's transfer
#: table is computed as a ``(C_producer, C_consumer, devices, devices, 4)`` int64 array, and
#: its intermediates take about twice that again.
MAX_TABLE_BYTES = 256 << 20

#: Memory a model spec's graph may be estimated to take before it is built (bytes), for
#: generated graphs (``zoo:synthetic``) whose size the spec sets: a million nodes (paper 2's
#: largest graphs) take about 0.6 GB.
MAX_GRAPH_BYTES = 1 << 30


def check_int_range(value: Any, where: str, low: int, high: int, reason: str = "") -> int:
    """``value`` as an int in ``low..high``, else a :class:`FormatError` naming ``where``.

    Booleans and non-integers are refused. ``reason`` (why the bound is what it is) is
    appended to the message of a value above ``high``.

    Examples
    --------
    >>> check_int_range(4, "--microbatches", 1, MAX_MICROBATCHES)
    4
    >>> check_int_range(0, "--microbatches", 1, 4096)
    Traceback (most recent call last):
    ...
    dnnpart.errors.FormatError: --microbatches: expected an integer in 1..4,096, got 0
    >>> check_int_range(300, "n_layer", 1, 256, "capture time grows with the layers")
    ... # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    dnnpart.errors.FormatError: n_layer: expected an integer in 1..256, got 300 (capture ...
    """
    if isinstance(value, bool) or not isinstance(value, int):
        if isinstance(value, float) and value.is_integer() and math.isfinite(value):
            value = int(value)
        else:
            raise FormatError(f"{where}: expected an integer in {low:,}..{high:,}, got {_short(value)}")
    if value < low or value > high:
        shown = str(value) if len(str(value)) <= 30 else f"a {len(str(abs(value)))}-digit number"
        why = f" ({reason})" if reason and value > high else ""
        raise FormatError(f"{where}: expected an integer in {low:,}..{high:,}, got {shown}{why}")
    return int(value)


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


def check_microbatches(value: Any, where: str = "--microbatches") -> int:
    """Micro-batches per step: ``1..MAX_MICROBATCHES``.

    Examples
    --------
    >>> check_microbatches(5000)  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    dnnpart.errors.FormatError: --microbatches: expected an integer in 1..4,096, got 5000 (...)
    """
    return check_int_range(value, where, 1, MAX_MICROBATCHES,
                           "the simulators and the report handle every micro-batch one by one")


def check_batch(value: Any, where: str = "--batch") -> int:
    """Samples per device: ``1..MAX_BATCH``.

    Examples
    --------
    >>> check_batch(2**70)  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    dnnpart.errors.FormatError: --batch: expected an integer in 1..1,048,576, got ... (...)
    """
    return check_int_range(value, where, 1, MAX_BATCH, "layer shapes are int64 products of the batch")


def check_seed(value: Any, where: str = "--seed") -> int:
    """A random seed: ``0..2**63-1``.

    Examples
    --------
    >>> check_seed(-1)
    Traceback (most recent call last):
    ...
    dnnpart.errors.FormatError: --seed: expected an integer in 0..9,223,372,036,854,775,807, got -1
    """
    return check_int_range(value, where, 0, MAX_SEED)


def max_threads() -> int:
    """Most worker processes or threads accepted: :data:`THREADS_PER_CPU` per logical CPU.

    Examples
    --------
    >>> max_threads() >= THREADS_PER_CPU
    True
    """
    return THREADS_PER_CPU * (os.cpu_count() or 1)


def check_threads(value: Any, where: str = "--threads") -> int:
    """Worker processes or threads: ``1..max_threads()``.

    Examples
    --------
    >>> check_threads(100000)  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    dnnpart.errors.FormatError: --threads: expected an integer in 1..., got 100000 (... per logical CPU)
    """
    return check_int_range(value, where, 1, max_threads(),
                           f"at most {THREADS_PER_CPU} per logical CPU")


def check_input_bytes(shapes: Sequence[Sequence[int]], itemsizes: Sequence[int], *, meta: bool,
                      where: str = "--input-shape/--input") -> None:
    """Refuse example inputs larger than the bounds, before they are made.

    On the CPU the inputs together may take :data:`MAX_INPUT_BYTES`; on the meta device
    (nothing allocated) each may have :data:`MAX_META_INPUT_ELEMENTS` elements.

    Examples
    --------
    >>> check_input_bytes([(1, 3, 224, 224)], [4], meta=False)
    >>> check_input_bytes([(100000, 30, 1000, 1000)], [4], meta=False)  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    dnnpart.errors.FormatError: --input-shape/--input 100000x30x1000x1000: 12,000,000,000,000 bytes, ...
    """
    total = 0
    for shape, size in zip(shapes, itemsizes, strict=True):
        elements = math.prod(int(d) for d in shape)
        dims = "x".join(str(d) for d in shape)
        if meta and elements > MAX_META_INPUT_ELEMENTS:
            raise FormatError(f"{where} {dims}: {elements:,} elements, more than the "
                              f"{MAX_META_INPUT_ELEMENTS:,} dnnpart prices in one input")
        total += elements * int(size)
        if not meta and total > MAX_INPUT_BYTES:
            raise FormatError(f"{where} {dims}: {total:,} bytes, more than the {MAX_INPUT_BYTES:,} "
                              "of example inputs dnnpart makes on the CPU; give a smaller shape")


def check_estimate(estimate: float, limit: float, where: str, what: str, advice: str) -> None:
    """Refuse when an estimated size passes its limit (the message names both).

    Examples
    --------
    >>> check_estimate(3e9, MAX_GRAPH_BYTES, "zoo:synthetic: nodes", "graph memory",
    ...                "ask for fewer nodes")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    dnnpart.errors.FormatError: zoo:synthetic: nodes: graph memory estimated at 3 GB, more than ...
    """
    if estimate > limit:
        raise FormatError(f"{where}: {what} estimated at {_gb(estimate)}, more than the "
                          f"{_gb(limit)} dnnpart allows; {advice}")


def _gb(n: float) -> str:
    return f"{n / 1e9:.3g} GB" if n >= 1e9 else f"{n / 1e6:.3g} MB"
