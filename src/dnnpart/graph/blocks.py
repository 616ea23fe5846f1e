"""A model's repeated blocks, found from module paths alone (``--granularity block``).

Pipeline runtimes (``torch.distributed.pipelining``, DeepSpeed, Megatron, torchtitan) cut a
model between whole blocks: the children of its ``ModuleList``s (``transformer.h.3``,
``model.layers.0``, ``encoder.layer.1``, ``layer2.0``). This module finds them for any
architecture from the operators' module paths, with no list of architectures:

* **Top-level blocks.** The first numbered component of a path makes a block: the children of
  the outermost numbered container (``transformer.h.3.attn.c_attn`` -> ``transformer.h.3``;
  ``encoder.block.0.layer.1.DenseReluDense`` -> ``encoder.block.0``).
* **Blocks inside blocks.** A block is split into its own numbered children when at least two
  of them have the same structure (the same set of operator paths under them) and that
  structure is composite (more than one path): Swin's ``layers.0`` stage into
  ``layers.0.blocks.0``, ``layers.0.blocks.1`` (the stage's ``downsample`` stays with the stage
  key), ConvNeXt's ``features.1`` stage into its ``CNBlock``s. T5's ``block.0.layer.0`` (self-
  attention) and ``layer.1`` (feed-forward) differ, so a T5 block stays whole; a Sequential of
  single layers (``block.0`` a convolution, ``block.2`` a norm) is not composite, so it stays
  whole too.
* **Units.** In execution order, a unit is a maximal run of operators with the same block key.
  Operators outside every block (embeddings, masks, the final norm and head, the loss) form one
  unit per run between blocks; a run of such operators between two runs of the same block
  joins that block (a helper call inside a block's forward). A block key met again after
  another unit (a block called twice) gets a new unit ``KEY#2``.
* **Backward nodes** (training graphs) take the unit of the forward operator they
  differentiate; one that differentiates none (a gradient accumulation, the loss seed) takes
  the smallest unit among its predecessors, else the largest among its successors.

Encoder-decoder models give the encoder's blocks then the decoder's, in execution order; the
encoder output read by every decoder block's cross-attention is an edge that a pipeline cut
carries forward (:mod:`dnnpart.pricing.chain`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from dnnpart.graph.core import NO_FORWARD, Graph

IntArray = npt.NDArray[np.int64]

__all__ = ["BlockUnits", "block_keys", "node_units", "unit_runs"]


def _parts(path: str) -> list[str]:
    return [p for p in path.replace("/", ".").strip(".").split(".") if p]


def block_keys(paths: Sequence[str]) -> list[str]:
    """The block each module path lies in (``""`` for paths outside every block).

    Examples
    --------
    >>> block_keys(["transformer.wte", "transformer.h.0.attn.c_attn", "transformer.h.1.mlp.c_fc",
    ...             "lm_head"])
    ['', 'transformer.h.0', 'transformer.h.1', '']
    >>> swin = ["e.layers.0.blocks.0.attn", "e.layers.0.blocks.0.mlp", "e.layers.0.blocks.1.attn",
    ...         "e.layers.0.blocks.1.mlp", "e.layers.0.downsample.norm"]
    >>> block_keys(swin)
    ['e.layers.0.blocks.0', 'e.layers.0.blocks.0', 'e.layers.0.blocks.1', 'e.layers.0.blocks.1', 'e.layers.0']
    """
    split = [_parts(p) for p in paths]
    # container (path before a numbered component) -> child number -> paths under that child
    under: dict[tuple[str, ...], dict[str, set[tuple[str, ...]]]] = {}
    for parts in split:
        for i, part in enumerate(parts):
            if part.isdigit():
                under.setdefault(tuple(parts[:i]), {}).setdefault(part, set()).add(tuple(parts[i + 1:]))
    repeated: dict[tuple[str, ...], bool] = {}

    def is_repeated(container: tuple[str, ...]) -> bool:
        if container not in repeated:
            seen: dict[frozenset[tuple[str, ...]], int] = {}
            for rest in under.get(container, {}).values():
                sig = frozenset(rest)
                seen[sig] = seen.get(sig, 0) + 1
            repeated[container] = any(k >= 2 and len(sig) >= 2 for sig, k in seen.items())
        return repeated[container]

    keys: list[str] = []
    for parts in split:
        numbered = [i for i, part in enumerate(parts) if part.isdigit()]
        if not numbered:
            keys.append("")
            continue
        end = numbered[0]
        for j in numbered[1:]:
            if not is_repeated(tuple(parts[:j])):
                break
            end = j
        keys.append(".".join(parts[: end + 1]))
    return keys


def unit_runs(keys: Sequence[str]) -> IntArray:
    """Unit id per operator (ids ``0..U-1`` in order) from block keys in execution order.

    Examples
    --------
    >>> unit_runs(["", "", "h.0", "", "h.0", "h.1", "", ""]).tolist()   # the "" inside h.0 joins it
    [0, 0, 1, 1, 1, 2, 3, 3]
    """
    n = len(keys)
    filled = list(keys)
    i = 0
    while i < n:  # a run of "" between two runs of one block joins that block
        if filled[i] == "":
            j = i
            while j < n and filled[j] == "":
                j += 1
            if 0 < i and j < n and filled[i - 1] == filled[j]:
                for k in range(i, j):
                    filled[k] = filled[j]
            i = j
        else:
            i += 1
    out = np.zeros(n, np.int64)
    for k in range(1, n):
        out[k] = out[k - 1] + (filled[k] != filled[k - 1])
    return out


@dataclass(frozen=True, slots=True)
class BlockUnits:
    """The units of a graph: ``unit[v]`` for every node and each unit's name."""

    unit: IntArray
    names: tuple[str, ...]

    @property
    def n_units(self) -> int:
        return len(self.names)


def node_units(graph: Graph) -> BlockUnits:
    """Units of every node of ``graph`` (forward operators by their module paths, backward
    nodes by the forward operator they differentiate).

    Examples
    --------
    >>> from dnnpart.graph.core import build_graph
    >>> g = build_graph([0, 1, 2], [0, 1], [1, 2], compute_time=[[1, 1]] * 3, edge_cost=[0, 0],
    ...                 module_paths=["wte", "h.0.attn", "h.1.attn"])
    >>> u = node_units(g)
    >>> u.unit.tolist(), u.names
    ([0, 1, 2], ('wte', 'h.0', 'h.1'))
    """
    n = graph.n_nodes
    paths = list(graph.module_paths) if graph.module_paths is not None else [""] * n
    bw = graph.is_backward
    fwd = np.flatnonzero(~bw)
    keys = block_keys([paths[v] for v in fwd.tolist()])
    runs = unit_runs(keys)
    unit = np.full(n, -1, np.int64)
    unit[fwd] = runs
    names: list[str] = []
    taken: dict[str, int] = {}
    for r in range(int(runs[-1]) + 1 if runs.size else 0):
        members = fwd[runs == r]
        key = keys[int(np.searchsorted(runs, r))]
        base = key or _common_prefix([paths[v] for v in members.tolist()]) or "(top)"
        taken[base] = taken.get(base, 0) + 1
        names.append(base if taken[base] == 1 else f"{base}#{taken[base]}")
    of = graph.forward_of
    if of is not None:
        has = bw & (of != NO_FORWARD)
        unit[has] = unit[of[has]]
    pred_ptr, pred_idx = graph.pred_ptr, graph.pred_idx
    succ_ptr, succ_idx = graph.succ_ptr, graph.succ_idx
    for v in np.flatnonzero(unit < 0).tolist():  # orphans, in topological order
        known = [int(unit[u]) for u in pred_idx[pred_ptr[v]:pred_ptr[v + 1]].tolist() if unit[u] >= 0]
        if known:
            unit[v] = min(known)
    for v in reversed(np.flatnonzero(unit < 0).tolist()):
        known = [int(unit[w]) for w in succ_idx[succ_ptr[v]:succ_ptr[v + 1]].tolist() if unit[w] >= 0]
        unit[v] = max(known) if known else max(len(names) - 1, 0)
    return BlockUnits(unit=unit, names=tuple(names) or ("(top)",))


def _common_prefix(paths: list[str]) -> str:
    split = [_parts(p) for p in paths if p]
    if not split:
        return ""
    first = split[0]
    k = 0
    while k < len(first) and all(len(s) > k and s[k] == first[k] for s in split):
        k += 1
    if k:
        return ".".join(first[:k])
    tops = list(dict.fromkeys(s[0] for s in split))
    return "+".join(tops[:3]) + ("+..." if len(tops) > 3 else "")
