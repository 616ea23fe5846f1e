"""dnnpart's own lossless, versioned binary format for (large) graphs.

A file is a NumPy ``.npz`` archive (a zip of ``.npy`` members) holding

==================  =========  ==========  =================================================
member              dtype      shape       meaning
==================  =========  ==========  =================================================
``format``          unicode    ``()``      always ``"dnnpart.graph"``
``version``         integer    ``()``      format version, currently ``1``
``succ_ptr``        int64      ``(n+1,)``  CSR successor offsets
``succ_idx``        int32      ``(m,)``    CSR successor targets, sorted within each row
``edge_cost``       float64    ``(m,)``    per-edge transfer time
``edge_bytes``      float64    ``(m,)``    per-edge bytes, ``nan`` = unknown
``compute_time``    float64    ``(n, k)``  time per device kind, ``inf`` = unsupported
``device_kinds``    unicode    ``(k,)``    column names of ``compute_time``
``memory_bytes``    float64    ``(n,)``
``is_backward``     bool       ``(n,)``
``color_class``     int64      ``(n,)``    ``-1`` = none
``layer_id``        int64      ``(n,)``    ``-1`` = none
``original_ids``    int64      ``(n,)``
``names_blob``      uint8      ``(b,)``    UTF-8 of all names, concatenated
``names_offsets``   int64      ``(n+1,)``  byte offsets of each name in ``names_blob``
``op_types_blob``   uint8      ``(b,)``    optional, as for names; absent = ``op_types`` None
``op_types_offsets`` int64     ``(n+1,)``  optional, present together with ``op_types_blob``
==================  =========  ==========  =================================================

Version 2 adds the optional phase-2 members (each absent = the array is ``None`` on the
:class:`~dnnpart.graph.core.Graph`): ``memory_class`` (int8), ``param_bytes`` and
``output_bytes`` (float64), ``pin`` (int8), ``forward_of`` (int64 node indices), all ``(n,)``;
``module_paths_blob``/``module_paths_offsets`` (strings, as for names); and the layer-attribute
table as ``layer_kind_blob``/``layer_kind_offsets`` plus, for each of ``output_shape``,
``kernel``, ``stride`` and ``padding``, ``layer_FIELD_values`` (int64, all tuples concatenated)
and ``layer_FIELD_offsets`` (int64 ``(n+1,)``). Version-1 files (which have none of these)
still load.

Design choices (measured on a 200,000-node / 1,000,000-edge graph, see
``benchmarks/graph_scale.py``):

* **Uncompressed by default.** The payload is mostly random-looking floats and ids: zlib
  halves the file (39 -> 19 MB) but makes saving ~20x slower (0.13 s -> 2.4 s) and loading
  ~1.6x slower (0.25 s -> 0.41 s). ``save_graph(..., compress=True)`` is there for archiving
  and :func:`load_graph` reads both.
* **Names as one UTF-8 blob plus offsets**, not a fixed-width ``U`` array: a single long name
  would pad all 200k entries to its width, and a blob needs no pickling. ``surrogatepass``
  keeps even lone surrogates (legal in JSON strings) lossless.
* **The predecessor CSR is not stored.** It is a pure function of the successor CSR, so it is
  recomputed on load (one stable sort); this keeps the file smaller and makes an inconsistent
  pair of adjacency arrays impossible to load.

Loading never unpickles (``allow_pickle=False``) and every defect of the file -- not a zip,
truncated, a member missing or of the wrong dtype/shape, a wrong marker or version, edges not
pointing forward -- is reported as :class:`~dnnpart.errors.FormatError` naming the file and the
field.
"""

from __future__ import annotations

import io
import itertools
import os
import zipfile
import zlib
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from dnnpart.errors import FormatError, InvalidGraphError
from dnnpart.graph.core import LAYER_OPTIONAL_FIELDS, LAYER_TUPLE_FIELDS, Graph, LayerAttrs
from dnnpart.limits import check_npz_member, read_bounded

__all__ = ["FORMAT_NAME", "FORMAT_VERSION", "load_graph", "save_graph"]

#: Marker stored in every file as the ``format`` member.
FORMAT_NAME = "dnnpart.graph"
#: Version this module writes; :func:`load_graph` reads this and every earlier version.
FORMAT_VERSION = 2
#: Versions :func:`load_graph` reads.
READABLE_VERSIONS = (1, 2)

# member -> (dtype, shape spec); "n"/"m"/"k" are node, edge and device-kind counts, "n+1" the
# CSR offset length, "b" any length (a byte blob).
_REQUIRED: dict[str, tuple[np.dtype[Any], tuple[str, ...]]] = {
    "succ_ptr": (np.dtype(np.int64), ("n+1",)),
    "succ_idx": (np.dtype(np.int32), ("m",)),
    "edge_cost": (np.dtype(np.float64), ("m",)),
    "edge_bytes": (np.dtype(np.float64), ("m",)),
    "compute_time": (np.dtype(np.float64), ("n", "k")),
    "memory_bytes": (np.dtype(np.float64), ("n",)),
    "is_backward": (np.dtype(np.bool_), ("n",)),
    "color_class": (np.dtype(np.int64), ("n",)),
    "layer_id": (np.dtype(np.int64), ("n",)),
    "original_ids": (np.dtype(np.int64), ("n",)),
    "names_blob": (np.dtype(np.uint8), ("b",)),
    "names_offsets": (np.dtype(np.int64), ("n+1",)),
}
_OPTIONAL: dict[str, tuple[np.dtype[Any], tuple[str, ...]]] = {
    "op_types_blob": (np.dtype(np.uint8), ("b",)),
    "op_types_offsets": (np.dtype(np.int64), ("n+1",)),
}

# Version-2 optional per-node arrays: member -> dtype, each of shape (n,).
_PHASE2: dict[str, np.dtype[Any]] = {
    "memory_class": np.dtype(np.int8),
    "param_bytes": np.dtype(np.float64),
    "output_bytes": np.dtype(np.float64),
    "pin": np.dtype(np.int8),
    "forward_of": np.dtype(np.int64),
}

# What a damaged archive raises while numpy/zipfile read it; all become FormatError.
_READ_ERRORS = (OSError, ValueError, EOFError, zipfile.BadZipFile, zlib.error, KeyError)


def save_graph(graph: Graph, path: str | os.PathLike[str], *, compress: bool = False) -> None:
    """Write ``graph`` to ``path`` in the native format, atomically.

    The archive goes through the one output writer (:mod:`dnnpart.io.output_files`): to a
    temporary file in the same directory moved over ``path``, so ``path`` is either the old
    file or the complete new one, never a half-written file, even if writing fails or the
    process dies; a character device or FIFO is written in place.

    Parameters
    ----------
    graph : the graph to write.
    path : destination; written as given (no ``.npz`` suffix is appended).
    compress : zlib-compress the members (smaller, several times slower to write).

    Examples
    --------
    >>> import tempfile, pathlib
    >>> from dnnpart.testing import chain_graph
    >>> target = pathlib.Path(tempfile.mkdtemp()) / "chain.dnnpart"
    >>> save_graph(chain_graph(3), target)
    >>> load_graph(target).n_edges
    2
    """
    path = Path(path)
    arrays: dict[str, Any] = {
        "format": np.array(FORMAT_NAME),
        "version": np.array(FORMAT_VERSION, dtype=np.int64),
        "succ_ptr": graph.succ_ptr,
        "succ_idx": graph.succ_idx,
        "edge_cost": graph.edge_cost,
        "edge_bytes": graph.edge_bytes,
        "compute_time": graph.compute_time,
        # dtype "U" even when empty: np.array([]) would be float64
        "device_kinds": np.array(list(graph.device_kinds), dtype=np.str_),
        "memory_bytes": graph.memory_bytes,
        "is_backward": graph.is_backward,
        "color_class": graph.color_class,
        "layer_id": graph.layer_id,
        "original_ids": graph.original_ids,
    }
    arrays["names_blob"], arrays["names_offsets"] = _encode_strings(graph.names)
    if graph.op_types is not None:
        arrays["op_types_blob"], arrays["op_types_offsets"] = _encode_strings(graph.op_types)
    for name in _PHASE2:
        value = getattr(graph, name)
        if value is not None:
            arrays[name] = value
    if graph.module_paths is not None:
        arrays["module_paths_blob"], arrays["module_paths_offsets"] = _encode_strings(
            graph.module_paths
        )
    if graph.layer_attrs is not None:
        attrs = graph.layer_attrs
        arrays["layer_kind_blob"], arrays["layer_kind_offsets"] = _encode_strings(attrs.kind)
        for name in LAYER_TUPLE_FIELDS:
            arrays[f"layer_{name}_values"], arrays[f"layer_{name}_offsets"] = _encode_tuples(
                getattr(attrs, name)
            )

    from dnnpart.io.output_files import open_output

    # the one output writer: atomic for a file (the old one or the complete new one, even if
    # writing fails or the process dies), in place for a device or FIFO
    with open_output(path, binary=True) as fh:
        # A file object, not a path: np.savez would append ".npz" to a path.
        (np.savez_compressed if compress else np.savez)(fh, **arrays)


def load_graph(path: str | os.PathLike[str]) -> Graph:
    """Read a graph written by :func:`save_graph`, validating it completely.

    Parameters
    ----------
    path : a file written by :func:`save_graph` (compressed or not).

    Returns
    -------
    Graph
        Equal, array by array, to the graph that was saved.

    Raises
    ------
    FormatError
        The file is not a readable archive, lacks the ``format``/``version`` markers or has
        other ones, misses an array, has one of the wrong dtype or shape, or does not describe
        a valid graph (edges not pointing forward, negative costs, ...). The message names the
        file and the field.
    FileNotFoundError
        ``path`` does not exist.

    Examples
    --------
    >>> import tempfile, pathlib
    >>> from dnnpart.testing import chain_graph
    >>> target = pathlib.Path(tempfile.mkdtemp()) / "chain.dnnpart"
    >>> save_graph(chain_graph(4), target)
    >>> load_graph(target).succ_idx.tolist()
    [1, 2, 3]
    """
    path = Path(path)
    # a regular file of bounded size, read once (a FIFO, a device or a folder is refused)
    with io.BytesIO(read_bounded(path, what="graph file")) as fh:
        try:
            archive = np.load(fh, allow_pickle=False)
        except _READ_ERRORS as exc:
            raise FormatError(f"{path}: not a dnnpart graph file ({_reason(exc)})") from None
        if not isinstance(archive, np.lib.npyio.NpzFile):
            raise FormatError(f"{path}: not a dnnpart graph file (a single .npy array, not .npz)")
        with archive:
            return _graph_from_archive(archive, path)


# -- reading ------------------------------------------------------------------------------


def _graph_from_archive(archive: np.lib.npyio.NpzFile, path: Path) -> Graph:
    members = set(archive.files)
    _check_markers(archive, members, path)

    missing = [name for name in _REQUIRED if name not in members]
    if "device_kinds" not in members:
        missing.append("device_kinds")
    if missing:
        raise FormatError(f"{path}: missing array(s) {', '.join(missing)}")
    has_ops = [name in members for name in _OPTIONAL]
    if any(has_ops) and not all(has_ops):
        absent = next(name for name, there in zip(_OPTIONAL, has_ops, strict=True) if not there)
        raise FormatError(f"{path}: {absent}: missing (op_types_blob and op_types_offsets "
                          "come together)")

    device_kinds_arr = _read(archive, "device_kinds", path)
    if device_kinds_arr.dtype.kind != "U" or device_kinds_arr.ndim != 1:
        raise FormatError(f"{path}: device_kinds: expected a 1-d string array, got "
                          f"{device_kinds_arr.dtype} with shape {device_kinds_arr.shape}")
    device_kinds = tuple(str(s) for s in device_kinds_arr.tolist())

    specs = dict(_REQUIRED)
    if all(has_ops):
        specs.update(_OPTIONAL)
    arrays = {name: _read_typed(archive, name, dtype, path) for name, (dtype, _) in specs.items()}
    n = arrays["succ_ptr"].shape[0] - 1 if arrays["succ_ptr"].ndim == 1 else -1
    if n < 0:
        raise FormatError(f"{path}: succ_ptr: expected shape (n+1,), got "
                          f"{arrays['succ_ptr'].shape}")
    sizes = {"n": n, "n+1": n + 1, "m": arrays["succ_idx"].shape[0] if
             arrays["succ_idx"].ndim == 1 else -1, "k": len(device_kinds)}
    for name, (_, spec) in specs.items():
        got = arrays[name].shape
        want = tuple(None if s == "b" else sizes[s] for s in spec)
        if len(got) != len(want) or any(
            w is not None and g != w for g, w in zip(got, want, strict=True)
        ):
            shown = tuple("?" if s == "b" else sizes[s] for s in spec)
            raise FormatError(f"{path}: {name}: expected shape {shown} ({', '.join(spec)}), "
                              f"got {got}")

    succ_ptr, succ_idx = arrays["succ_ptr"], arrays["succ_idx"]
    _check_csr(n, succ_ptr, succ_idx, path)
    ids = arrays["original_ids"]
    if np.unique(ids).size != ids.size:  # the JSON reader refuses them too
        dup = ids[np.flatnonzero(np.diff(np.sort(ids)) == 0)[0]]
        raise FormatError(f"{path}: original_ids: duplicate id {int(dup)}")
    names = _decode_strings(arrays["names_blob"], arrays["names_offsets"], "names", path)
    op_types = (
        _decode_strings(arrays["op_types_blob"], arrays["op_types_offsets"], "op_types", path)
        if all(has_ops) else None
    )
    phase2 = _read_phase2(archive, members, n, path)
    pred_ptr, pred_idx, pred_edge = _predecessors(n, succ_ptr, succ_idx)
    try:
        return Graph(
            succ_ptr=succ_ptr,
            succ_idx=succ_idx,
            pred_ptr=pred_ptr,
            pred_idx=pred_idx,
            pred_edge=pred_edge,
            edge_cost=arrays["edge_cost"],
            edge_bytes=arrays["edge_bytes"],
            compute_time=arrays["compute_time"],
            memory_bytes=arrays["memory_bytes"],
            is_backward=arrays["is_backward"],
            color_class=arrays["color_class"],
            layer_id=arrays["layer_id"],
            original_ids=arrays["original_ids"],
            names=names,
            op_types=op_types,
            device_kinds=device_kinds,
            **phase2,
        )
    except InvalidGraphError as exc:
        raise FormatError(f"{path}: invalid graph: {exc}") from None


def _check_markers(archive: np.lib.npyio.NpzFile, members: set[str], path: Path) -> None:
    if "format" not in members:
        raise FormatError(f"{path}: format: missing marker; not a dnnpart graph file")
    marker = _read(archive, "format", path)
    if marker.dtype.kind != "U" or marker.shape != () or str(marker) != FORMAT_NAME:
        raise FormatError(f"{path}: format: expected {FORMAT_NAME!r}, got {_show(marker)}")
    if "version" not in members:
        raise FormatError(f"{path}: version: missing")
    version = _read(archive, "version", path)
    if version.dtype.kind not in "iu" or version.shape != ():
        raise FormatError(f"{path}: version: expected an integer, got {_show(version)}")
    if int(version) not in READABLE_VERSIONS:
        newer = " (written by a newer dnnpart)" if int(version) > FORMAT_VERSION else ""
        raise FormatError(f"{path}: version: this dnnpart reads versions "
                          f"{', '.join(map(str, READABLE_VERSIONS))}, got {int(version)}{newer}")


def _read_phase2(
    archive: np.lib.npyio.NpzFile, members: set[str], n: int, path: Path
) -> dict[str, Any]:
    """The optional version-2 members as Graph keyword arguments (absent ones left out)."""
    found: dict[str, Any] = {}
    for name, dtype in _PHASE2.items():
        if name in members:
            arr = _read_typed(archive, name, dtype, path)
            if arr.shape != (n,):
                raise FormatError(f"{path}: {name}: expected shape ({n},) (n), got {arr.shape}")
            found[name] = arr
    paths = _read_string_pair(archive, members, "module_paths", n, path)
    if paths is not None:
        found["module_paths"] = paths
    kinds = _read_string_pair(archive, members, "layer_kind", n, path)
    tuples = {
        name: _read_tuple_pair(archive, members, f"layer_{name}", n, path) for name in LAYER_TUPLE_FIELDS
    }
    present = [kinds is not None] + [t is not None for name, t in tuples.items()
                                     if name not in LAYER_OPTIONAL_FIELDS]
    if any(present) and not all(present):
        raise FormatError(f"{path}: layer attributes: layer_kind_* and layer_*_values/offsets "
                          "of output_shape, kernel, stride and padding come together")
    if kinds is not None:
        given = {name: t for name, t in tuples.items() if t is not None}
        found["layer_attrs"] = LayerAttrs(kind=kinds, **given)
    return found


def _read_string_pair(
    archive: np.lib.npyio.NpzFile, members: set[str], stem: str, n: int, path: Path
) -> tuple[str, ...] | None:
    blob, offsets = f"{stem}_blob", f"{stem}_offsets"
    if blob not in members and offsets not in members:
        return None
    if blob not in members or offsets not in members:
        raise FormatError(f"{path}: {blob if blob not in members else offsets}: missing "
                          f"({blob} and {offsets} come together)")
    raw = _read_typed(archive, blob, np.dtype(np.uint8), path)
    off = _read_typed(archive, offsets, np.dtype(np.int64), path)
    if raw.ndim != 1 or off.shape != (n + 1,):
        raise FormatError(f"{path}: {offsets}: expected shape ({n + 1},) (n+1), got {off.shape}")
    return _decode_strings(raw, off, stem, path)


def _read_tuple_pair(
    archive: np.lib.npyio.NpzFile, members: set[str], stem: str, n: int, path: Path
) -> tuple[tuple[int, ...], ...] | None:
    values, offsets = f"{stem}_values", f"{stem}_offsets"
    if values not in members and offsets not in members:
        return None
    if values not in members or offsets not in members:
        raise FormatError(f"{path}: {values if values not in members else offsets}: missing "
                          f"({values} and {offsets} come together)")
    vals = _read_typed(archive, values, np.dtype(np.int64), path)
    off = _read_typed(archive, offsets, np.dtype(np.int64), path)
    if vals.ndim != 1 or off.shape != (n + 1,):
        raise FormatError(f"{path}: {offsets}: expected shape ({n + 1},) (n+1), got {off.shape}")
    if off[0] != 0 or off[-1] != vals.shape[0] or np.any(np.diff(off) < 0):
        raise FormatError(f"{path}: {offsets}: must rise from 0 to the value count {vals.shape[0]}")
    flat = vals.tolist()
    bounds = off.tolist()
    return tuple(tuple(flat[a:b]) for a, b in itertools.pairwise(bounds))


def _read(archive: np.lib.npyio.NpzFile, name: str, path: Path) -> npt.NDArray[Any]:
    """One member, with read failures (CRC, truncation, pickled objects) as FormatError.

    The member's ``.npy`` header is read first and its size checked against
    :data:`~dnnpart.limits.MAX_NPZ_MEMBER_BYTES` before anything is decompressed (a zip bomb
    is refused from its header); a member that is not an array is refused too.
    """
    try:
        if archive.zip is None:
            raise ValueError("archive closed")
        with archive.zip.open(f"{name}.npy") as member:
            version = np.lib.format.read_magic(member)
            if version == (1, 0):
                shape, _, dtype = np.lib.format.read_array_header_1_0(member)
            elif version == (2, 0):
                shape, _, dtype = np.lib.format.read_array_header_2_0(member)
            else:
                raise ValueError(f"unsupported .npy version {version}")
        check_npz_member(tuple(shape), np.dtype(dtype), f"{path}: {name}")
        arr: Any = archive[name]
    except FormatError:
        raise
    except (*_READ_ERRORS, RecursionError, TypeError, AttributeError) as exc:
        raise FormatError(f"{path}: {name}: unreadable, not an .npy array ({_reason(exc)})") from None
    if not isinstance(arr, np.ndarray):
        raise FormatError(f"{path}: {name}: expected an array, got {type(arr).__name__}")
    return arr


def _read_typed(
    archive: np.lib.npyio.NpzFile, name: str, dtype: np.dtype[Any], path: Path
) -> npt.NDArray[Any]:
    arr = _read(archive, name, path)
    # "equiv" admits only a byte-order change, so a file from a big-endian machine loads but
    # no value is ever silently truncated or reinterpreted.
    if not np.can_cast(arr.dtype, dtype, casting="equiv"):
        raise FormatError(f"{path}: {name}: expected dtype {dtype}, got {arr.dtype}")
    return arr.astype(dtype, copy=False)


def _check_csr(n: int, ptr: npt.NDArray[np.int64], idx: npt.NDArray[np.int32], path: Path) -> None:
    """Offsets well formed, targets in range, each row strictly increasing (sorted, no dups)."""
    m = idx.shape[0]
    if ptr[0] != 0 or ptr[-1] != m:
        raise FormatError(f"{path}: succ_ptr: must start at 0 and end at the edge count {m}, "
                          f"got {int(ptr[0])} and {int(ptr[-1])}")
    steps = np.diff(ptr)
    if np.any(steps < 0):
        v = int(np.argmax(steps < 0))
        raise FormatError(f"{path}: succ_ptr[{v + 1}]: offsets must not decrease")
    if m == 0:
        return
    if idx.min() < 0 or idx.max() >= n:
        e = int(np.argmax((idx < 0) | (idx >= n)))
        raise FormatError(f"{path}: succ_idx[{e}]: node {int(idx[e])} is out of range 0..{n - 1}")
    # Inside a row targets must increase; a row start (ptr value) may step down.
    rises = idx[1:] > idx[:-1]
    row_start = np.zeros(m, np.bool_)
    row_start[ptr[1:-1][ptr[1:-1] < m]] = True
    bad = ~rises & ~row_start[1:]
    if np.any(bad):
        e = int(np.argmax(bad)) + 1
        raise FormatError(f"{path}: succ_idx[{e}]: targets of a node must be strictly "
                          "increasing (sorted, no duplicate edges)")


def _predecessors(
    n: int, succ_ptr: npt.NDArray[np.int64], succ_idx: npt.NDArray[np.int32]
) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int32], npt.NDArray[np.int64]]:
    """Predecessor CSR exactly as :func:`~dnnpart.graph.build_graph` lays it out.

    Edges are sorted by (source, target), so a stable sort by target orders them by
    (target, source), the order build_graph uses.
    """
    src = np.repeat(np.arange(n, dtype=np.int32), np.diff(succ_ptr))
    perm = np.argsort(succ_idx, kind="stable")
    pred_ptr = np.zeros(n + 1, np.int64)
    np.cumsum(np.bincount(succ_idx, minlength=n), out=pred_ptr[1:])
    return pred_ptr, src[perm], perm.astype(np.int64, copy=False)


# -- strings ------------------------------------------------------------------------------


def _encode_strings(
    strings: tuple[str, ...],
) -> tuple[npt.NDArray[np.uint8], npt.NDArray[np.int64]]:
    encoded = [s.encode("utf-8", "surrogatepass") for s in strings]
    offsets = np.zeros(len(encoded) + 1, np.int64)
    np.cumsum(np.fromiter(map(len, encoded), np.int64, len(encoded)), out=offsets[1:])
    return np.frombuffer(b"".join(encoded), np.uint8), offsets


def _encode_tuples(
    tuples: tuple[tuple[int, ...], ...],
) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]]:
    offsets = np.zeros(len(tuples) + 1, np.int64)
    np.cumsum(np.fromiter(map(len, tuples), np.int64, len(tuples)), out=offsets[1:])
    values = np.fromiter((v for t in tuples for v in t), np.int64, int(offsets[-1]))
    return values, offsets


def _decode_strings(
    blob: npt.NDArray[np.uint8], offsets: npt.NDArray[np.int64], field: str, path: Path
) -> tuple[str, ...]:
    size = blob.shape[0]
    if offsets[0] != 0 or offsets[-1] != size or np.any(np.diff(offsets) < 0):
        raise FormatError(f"{path}: {field}_offsets: must rise from 0 to the blob size {size}")
    raw = blob.tobytes()
    starts, ends = offsets[:-1].tolist(), offsets[1:].tolist()
    try:
        if raw.isascii():
            # Byte and character offsets agree: decode once and slice the str (about 3x
            # faster than decoding 200k small byte strings).
            text = raw.decode("ascii")
            return tuple(text[a:b] for a, b in zip(starts, ends, strict=True))
        return tuple(
            raw[a:b].decode("utf-8", "surrogatepass") for a, b in zip(starts, ends, strict=True)
        )
    except UnicodeDecodeError as exc:
        raise FormatError(f"{path}: {field}_blob: invalid UTF-8 at byte {exc.start}") from None


# -- messages -----------------------------------------------------------------------------


def _reason(exc: BaseException) -> str:
    text = str(exc).strip() or type(exc).__name__
    return text if len(text) <= 120 else text[:117] + "..."


def _show(arr: npt.NDArray[Any]) -> str:
    if arr.shape == () and arr.dtype.kind in "Uiuf":
        return repr(arr.item())
    return f"an array of dtype {arr.dtype} and shape {arr.shape}"
