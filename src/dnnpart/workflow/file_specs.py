"""The one gate for specs read from files: a file is data and never runs code on its own.

A plan file names the model or graph it was made for (``model.spec``, ``graph.spec``); a spec
there reaches the same resolvers as one on the command line (:func:`~dnnpart.workflow.
load_problem`, :func:`~dnnpart.frontends.sources.resolve_model`), so it meets the same size
bounds and messages. What a file alone may not do is import and run code: a spec of a kind that
does (``module:PKG:FN``; kinds added later too, until listed in :data:`DATA_SPEC_KINDS`) is
refused unless the user names the model (``--model SPEC``) or trusts the file
(``--trust-plan``). Every reader of a spec from a file calls :func:`gated_spec`.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from dnnpart.errors import FormatError

__all__ = ["DATA_SPEC_KINDS", "gated_spec", "runs_code"]

#: Spec kinds a file may name and have followed: built-in and torchvision models, ``hf:``
#: models (built from a config; ``trust_remote_code`` is never set) and ``zoo:`` examples.
#: A spec without a kind (a graph or ``.onnx`` file) is data, read by the bounded file readers.
DATA_SPEC_KINDS = ("builtin", "torchvision", "hf", "zoo")
#: ``KIND:`` at the start of a spec (a path has none: ``graph.json``, ``./m.onnx``).
_KIND = re.compile(r"^\s*([A-Za-z][\w.+-]*):")


def runs_code(spec: str) -> bool:
    """Whether following ``spec`` may import and run code that is not dnnpart's (or its
    model libraries'): any ``KIND:`` not in :data:`DATA_SPEC_KINDS`.

    Examples
    --------
    >>> runs_code("module:pkg.mod:build"), runs_code(" module:x:y"), runs_code("module:m:f.onnx")
    (True, True, True)
    >>> runs_code("hf:gpt2:n_layer=2"), runs_code("zoo:bert-3"), runs_code("graphs/g.json")
    (False, False, False)
    """
    found = _KIND.match(spec)
    return found is not None and found.group(1).lower() not in DATA_SPEC_KINDS


def gated_spec(spec: Any, path: str | Path, field: str, *, model: str | None = None,
               trust: bool = False) -> str:
    """The spec to follow for ``field`` of the file ``path``: ``model`` if the user named one,
    else the file's own ``spec`` once it passes the gate.

    Parameters
    ----------
    spec : the value the file holds.
    path, field : where it came from, for messages (``plan.json``, ``model.spec``).
    model : the user's own spec (``--model SPEC``): followed instead, whatever it is.
    trust : ``--trust-plan``: follow a spec that imports code.

    Raises
    ------
    FormatError
        Not a string; a live module's name (no file can rebuild it); a spec that would import
        and run code without ``model``/``trust``.

    Examples
    --------
    >>> gated_spec("zoo:bert-3", "p.json", "graph.spec")
    'zoo:bert-3'
    >>> gated_spec("module:os:getcwd", "p.json", "model.spec")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    dnnpart.errors.FormatError: p.json: model.spec: 'module:os:getcwd' would import and run code; ...
    >>> gated_spec("module:os:getcwd", "p.json", "model.spec", trust=True)
    'module:os:getcwd'
    """
    if model is not None:
        return model
    if not isinstance(spec, str):
        raise FormatError(f"{path}: {field}: expected a string, got {type(spec).__name__}")
    text = spec.strip()
    if text.startswith("live:"):
        raise FormatError(f"{path}: {field}: {text[:80]!r} was a live module given to plan_model; a "
                          "file cannot rebuild it -- pass --model SPEC naming the same model, or run "
                          "and apply the plan from the Python process that made it")
    if runs_code(text) and not trust:
        raise FormatError(f"{path}: {field}: {spec[:80]!r} would import and run code; name the "
                          "model yourself (--model SPEC) or pass --trust-plan")
    return spec
