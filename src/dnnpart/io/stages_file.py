"""Stage-graph files for ``dnnpart map`` (Parmesan's phase 2 on its own).

Schema (JSON object; SI units: seconds, bytes)::

    {"format": "dnnpart.stages", "version": 1,        # both optional
     "stages": 4,                                      # S (optional: len(compute))
     "replicas": 2,                                    # R (default 1); S * R = devices
     "compute": [0.1, 0.2, 0.2, 0.1],                  # c_u(s): seconds per stage replica
     "param_bytes": [4e6, 8e6, 8e6, 4e6],              # P(s): bytes all-reduced per replica
     "memory_bytes": [1e9, 1e9, 1e9, 1e9],             # optional, per stage replica
     "comm_bytes": [[0, 3e6, 0, 0], ...]               # M(s, s'): S x S matrix (one copy)
     # or "comm_bytes": [[0, 1, 3e6], [1, 2, 1e6], ...]  an edge list [s, s', bytes]
    }

``comm_bytes`` as an ``S x S`` matrix is told from an edge list by its rows: a matrix has
``S`` rows of ``S`` numbers; an edge list has rows of three with integer stage indices. An
``S = 3`` matrix whose rows look like edges is read as a matrix (give ``"comm_edges"``
instead to force an edge list). Errors name the field (``FormatError``).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from dnnpart.errors import FormatError
from dnnpart.io import fields as f
from dnnpart.stages import PipelineStages

STAGES_FORMAT = "dnnpart.stages"


def _numbers(value: Any, where: str, n: int | None) -> list[float]:
    items = f.require_list(value, where)
    if n is not None and len(items) != n:
        raise FormatError(f"{where}: expected {n} numbers (one per stage), got {len(items)}")
    return [f.number(x, f"{where}[{i}]") for i, x in enumerate(items)]


def _edges(rows: list[Any], where: str, s_n: int) -> np.ndarray:
    comm = np.zeros((s_n, s_n))
    for i, row in enumerate(rows):
        row = f.require_list(row, f"{where}[{i}]")
        if len(row) != 3:
            raise FormatError(f"{where}[{i}]: expected [s, s', bytes]")
        a = f.integer(row[0], f"{where}[{i}][0]", minimum=0)
        b = f.integer(row[1], f"{where}[{i}][1]", minimum=0)
        if a >= s_n or b >= s_n or a == b:
            raise FormatError(f"{where}[{i}]: stages must be two different indices in [0, {s_n})")
        comm[a, b] += f.number(row[2], f"{where}[{i}][2]")
    return comm


def parse_stages(data: Any, source: str = "<stages>") -> PipelineStages:
    """A parsed stage-graph document as :class:`PipelineStages`.

    Examples
    --------
    >>> st = parse_stages({"compute": [1, 2], "param_bytes": [0, 0],
    ...                    "comm_bytes": [[0, 1, 5.0]], "replicas": 2})
    >>> st.n_stages, st.n_devices, st.comm_bytes.tolist()
    (2, 4, [[0.0, 5.0], [0.0, 0.0]])
    """
    root = f.require_mapping(data, source)
    if "format" in root and root["format"] != STAGES_FORMAT:
        raise FormatError(f"format: expected {STAGES_FORMAT!r}, got {root['format']!r}")
    if "version" in root and f.integer(root["version"], "version") != 1:
        raise FormatError(f"version: this dnnpart reads stage files version 1, got {root['version']}")
    known = {"format", "version", "stages", "replicas", "compute", "param_bytes", "memory_bytes",
             "comm_bytes", "comm_edges", "name"}
    unknown = sorted(set(root) - known)
    if unknown:
        raise FormatError(f"{unknown[0]}: unknown field (expected one of {sorted(known)})")
    if "compute" not in root:
        raise FormatError("compute: missing (per-stage compute time, seconds)")
    s_given = f.integer(root["stages"], "stages", minimum=1) if "stages" in root else None
    compute = _numbers(root["compute"], "compute", s_given)
    s_n = len(compute)
    if s_n == 0:
        raise FormatError("compute: at least one stage")
    params = _numbers(root.get("param_bytes", [0.0] * s_n), "param_bytes", s_n)
    memory = (_numbers(root["memory_bytes"], "memory_bytes", s_n)
              if "memory_bytes" in root else None)
    replicas = f.integer(root.get("replicas", 1), "replicas", minimum=1)
    if "comm_edges" in root:
        comm = _edges(f.require_list(root["comm_edges"], "comm_edges"), "comm_edges", s_n)
    else:
        rows = f.require_list(root.get("comm_bytes", []), "comm_bytes")
        is_matrix = len(rows) == s_n and all(isinstance(r, list) and len(r) == s_n for r in rows)
        if is_matrix:
            comm = np.array([_numbers(r, f"comm_bytes[{i}]", s_n) for i, r in enumerate(rows)])
            if np.any(np.diag(comm) != 0):
                raise FormatError("comm_bytes: the diagonal M(s, s) must be 0")
        else:
            comm = _edges(rows, "comm_bytes", s_n)
    try:
        return PipelineStages(compute=np.asarray(compute), param_bytes=np.asarray(params),
                              comm_bytes=comm, replicas=replicas,
                              memory_bytes=None if memory is None else np.asarray(memory))
    except ValueError as exc:
        raise FormatError(f"{source}: {exc}") from None


def read_stages(path: str | Path) -> PipelineStages:
    """Read a stage-graph file (schema in the module docstring)."""
    return parse_stages(f.read_json(path), str(path))
