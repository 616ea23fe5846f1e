"""Files a plan refers to (graph, ONNX model, cluster, config): absolute path plus content hash.

A plan file is used from other directories and on other days. So it names each input file by
its absolute path and the SHA-256 of its bytes (``{"path": ..., "sha256": ...}``). Reading it
back (:func:`resolve_ref`):

* the path is tried as written, then -- when it is missing -- the same file name beside the
  plan file (a plan copied together with its inputs);
* a file whose hash differs is refused in one line naming both hashes: the plan's node ids and
  costs would silently refer to another graph. ``--model`` / ``--graph`` name a file yourself.
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

from dnnpart.errors import FormatError


def sha256_of(path: str | Path) -> str:
    """Hex SHA-256 of a file's bytes.

    Examples
    --------
    >>> import os, tempfile
    >>> p = os.path.join(tempfile.mkdtemp(), "x.txt")
    >>> _ = open(p, "wb").write(b"abc")
    >>> sha256_of(p)[:16]
    'ba7816bf8f01cfea'
    """
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def file_ref(path: str | Path) -> dict[str, str]:
    """``{"path": absolute path, "sha256": hex digest}`` of an existing file."""
    target = Path(path).resolve()
    return {"path": str(target), "sha256": sha256_of(target)}


def is_file_spec(text: Any) -> bool:
    """Whether a spec or path names an existing local file (not ``zoo:``, ``hf:``, a preset...).

    A spec longer than a file name may be (an ``hf:`` spec with many overrides) names none.
    """
    if not isinstance(text, str) or not text:
        return False
    try:
        return Path(text).is_file()
    except OSError:  # ENAMETOOLONG: not a file name
        return False


def resolve_ref(ref: Any, where: str, plan_path: str | Path) -> Path:
    """The file a plan's reference names, checked against its hash.

    Examples
    --------
    >>> import os, tempfile
    >>> d = tempfile.mkdtemp()
    >>> p = os.path.join(d, "g.json")
    >>> _ = open(p, "w").write("{}")
    >>> ref = file_ref(p)
    >>> resolve_ref(ref, "graph", os.path.join(d, "plan.json")) == Path(p).resolve()
    True
    >>> _ = open(p, "w").write("{ }")
    >>> resolve_ref(ref, "graph", os.path.join(d, "plan.json"))  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    dnnpart.errors.FormatError: ...plan.json: graph: .../g.json has changed since the plan was made ...
    """
    if not isinstance(ref, dict) or not isinstance(ref.get("path"), str):
        raise FormatError(f"{plan_path}: {where}: expected {{\"path\": ..., \"sha256\": ...}}")
    written = Path(ref["path"])
    candidates = [written, Path(plan_path).resolve().parent / written.name]
    found = next((c for c in candidates if c.is_file()), None)
    want = ref.get("sha256")
    if found is None:
        raise FormatError(f"{plan_path}: {where}: {written} not found (nor beside the plan file); "
                          f"the plan was made for a file with sha256 {str(want)[:12]}...")
    if isinstance(want, str):
        have = sha256_of(found)
        if have != want:
            raise FormatError(f"{plan_path}: {where}: {found} has changed since the plan was made "
                              f"(sha256 {have[:12]}..., the plan's {want[:12]}...); plan again, or "
                              "name the file yourself")
    return found
