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
* **Units.** Each block is a unit; blocks are ordered by their data flow (a topological order
  of the blocks, ties by first appearance; blocks feeding each other in a cycle -- one module
  called at two places -- are merged into one unit). An operator outside every block goes to
  the *prologue* unit when no block precedes it (embeddings, the attention mask), to the
  *epilogue* when no block follows it (the final norm, the head, the loss), else to the last
  block it depends on; one that only the backward pass reads (a value saved for it, such as a
  norm's ``detach``) goes with its latest producer. An operator outside every block that
  reads no activation (a parameter, a weight's transpose, a constant) goes with its first
  consumer, so no stage sends weights.
  Node order alone would not do: a traced graph interleaves the mask's operators with the
  first block's.
* **Backward nodes** (training graphs) take the unit of the forward operator they
  differentiate; one that differentiates none (a gradient accumulation, the loss seed) takes
  the smallest unit among its predecessors, else the largest among its successors (the sums
  autograd makes of a residual stream's gradients are such orphans:
  :mod:`dnnpart.frontends.training`).

Encoder-decoder models give the encoder's blocks then the decoder's, in execution order; the
encoder output read by every decoder block's cross-attention is an edge that a pipeline cut
carries forward (:mod:`dnnpart.pricing.chain`).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from dnnpart._arrays import set_bits
from dnnpart.graph.core import NO_CLASS, NO_FORWARD, RESIDUAL, Graph
from dnnpart.graph.scc import strong_components

IntArray = npt.NDArray[np.int64]

__all__ = ["BlockUnits", "block_colocated", "block_keys", "node_units", "unit_runs"]


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
    """Unit id per operator of a list in *execution order* (a model's operators, not a
    graph's topological order): a new unit where the block key changes, a run of ``""``
    between two runs of one block joining that block.

    Examples
    --------
    >>> unit_runs(["", "", "h.0", "", "h.0", "h.1", "", ""]).tolist()
    [0, 0, 1, 1, 1, 2, 3, 3]
    """
    n = len(keys)
    filled = list(keys)
    i = 0
    while i < n:
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
    """The units of a graph in pipeline order: ``unit[v]`` for every node, each unit's name.

    Every forward edge ``u -> v`` has ``unit[u] <= unit[v]``, so contiguous runs of units are
    the stages of a linear pipeline.
    """

    unit: IntArray
    names: tuple[str, ...]

    @property
    def n_units(self) -> int:
        return len(self.names)


def node_units(graph: Graph) -> BlockUnits:
    """Units of every node of ``graph``, in an order every forward edge respects.

    Blocks (:func:`block_keys` of the forward operators' module paths) are ordered by their
    data flow (blocks that feed each other in a cycle, such as one module called at two
    places, are one unit); a forward operator outside every block goes to the *prologue*
    unit when no block precedes it, to the *epilogue* when no block follows it, else to the
    last block it depends on (a helper computation between blocks joins its neighbour).
    Operators outside every block that read no activation go with their first consumer. Backward
    nodes follow the forward operator they differentiate (see the module docstring).

    Examples
    --------
    >>> from dnnpart.graph.core import build_graph
    >>> paths = ["", "wte", "h.0.attn", "h.1.attn", "ln_f"]   # node 0: the input
    >>> g = build_graph(range(5), range(4), range(1, 5), compute_time=[[1, 1]] * 5,
    ...                 edge_cost=[0] * 4, module_paths=paths)
    >>> u = node_units(g)
    >>> u.unit.tolist(), u.names
    ([0, 0, 1, 2, 3], ('prologue', 'h.0', 'h.1', 'epilogue'))
    """
    n = graph.n_nodes
    paths = list(graph.module_paths) if graph.module_paths is not None else [""] * n
    bw = graph.is_backward
    fwd = np.flatnonzero(~bw)
    if not any(paths[v] for v in fwd.tolist()):
        return _node_per_unit(graph, fwd)
    key_of = dict(zip(fwd.tolist(), block_keys([paths[v] for v in fwd.tolist()]), strict=True))
    blocks = list(dict.fromkeys(k for k in key_of.values() if k))
    block_id = {k: i for i, k in enumerate(blocks)}
    pred_ptr, pred_idx = graph.pred_ptr, graph.pred_idx
    succ_ptr, succ_idx = graph.succ_ptr, graph.succ_idx
    # anc[v]: bit set of the blocks among v's forward ancestors, v's own included
    anc = [0] * n
    for v in fwd.tolist():
        bits = 0
        for u in pred_idx[pred_ptr[v]:pred_ptr[v + 1]].tolist():
            if not bw[u]:
                bits |= anc[u]
        if key_of[v]:
            bits |= 1 << block_id[key_of[v]]
        anc[v] = bits
    order = _block_order(blocks, [(anc[v], block_id[key_of[v]]) for v in fwd.tolist() if key_of[v]])
    k_n = max(order.values(), default=-1) + 1 if order else 0
    desc = [0] * n
    for v in reversed(fwd.tolist()):
        bits = 0
        for w in succ_idx[succ_ptr[v]:succ_ptr[v + 1]].tolist():
            if not bw[w]:
                bits |= desc[w]
        if key_of[v]:
            bits |= 1 << block_id[key_of[v]]
        desc[v] = bits
    # positions: 0 the prologue, 1..K the block groups, K + 1 the epilogue
    pos = np.full(n, -1, np.int64)
    for v in fwd.tolist():
        if key_of[v]:
            pos[v] = 1 + order[block_id[key_of[v]]]
            continue
        made = [int(pos[u]) for u in pred_idx[pred_ptr[v]:pred_ptr[v + 1]].tolist() if not bw[u]]
        readers = bw[succ_idx[succ_ptr[v]:succ_ptr[v + 1]]]
        if made and readers.size and readers.all():
            pos[v] = max(made)  # read by the backward pass only (a value saved for it)
            continue
        lo = max((order[b] for b in set_bits(anc[v])), default=-1)
        hi = min((order[b] for b in set_bits(desc[v])), default=k_n)
        pos[v] = 0 if lo < 0 else (k_n + 1 if hi >= k_n else 1 + lo)
    # operators outside blocks that read no activation (parameters, a weight's transpose,
    # constants) go with their first consumer: a stage computes its own, nothing is sent
    residual = graph.memory_classes() == RESIDUAL
    reads_input = np.zeros(n, bool)
    for v in fwd.tolist():
        preds = pred_idx[pred_ptr[v]:pred_ptr[v + 1]]
        reads_input[v] = bool(reads_input[preds].any()) if preds.size else not residual[v]
    for v in reversed(fwd.tolist()):
        if not key_of[v] and not reads_input[v]:
            after = [int(pos[w]) for w in succ_idx[succ_ptr[v]:succ_ptr[v + 1]].tolist() if not bw[w]]
            if after:
                pos[v] = min(after)
    of = graph.forward_of
    if of is not None:
        has = bw & (of != NO_FORWARD)
        pos[has] = pos[of[has]]
    for v in np.flatnonzero(pos < 0).tolist():  # backward orphans, in topological order
        known = [int(pos[u]) for u in pred_idx[pred_ptr[v]:pred_ptr[v + 1]].tolist() if pos[u] >= 0]
        if known:
            pos[v] = min(known)
    for v in reversed(np.flatnonzero(pos < 0).tolist()):
        known = [int(pos[w]) for w in succ_idx[succ_ptr[v]:succ_ptr[v + 1]].tolist() if pos[w] >= 0]
        pos[v] = max(known) if known else k_n + 1
    used, unit = np.unique(pos, return_inverse=True)
    group_names: dict[int, list[str]] = {}
    for b, i in order.items():
        group_names.setdefault(i, []).append(blocks[b])
    names = []
    for p in used.tolist():
        if p in (0, k_n + 1):
            names.append("prologue" if p == 0 else "epilogue")
        else:
            members = group_names[p - 1]
            names.append(members[0] if len(members) == 1 else f"{members[0]}..{members[-1]}")
    return _colocated(graph, BlockUnits(unit=unit.astype(np.int64), names=tuple(names)))


def block_colocated(graph: Graph) -> Graph:
    """``graph`` with every unit of :func:`node_units` made one colocation class.

    This is block granularity for the op-level methods (``dp``, ``parmesan``, ``pipeline``):
    they place colocation classes whole (paper 1's stage DAG contracts each class into one
    node), so their plans cut the operator graph only between blocks, and the one
    ``evaluate`` scores them on the operator graph.

    Examples
    --------
    >>> from dnnpart.graph.core import build_graph
    >>> paths = ["", "wte", "h.0.attn", "h.0.mlp", "ln_f"]
    >>> g = build_graph(range(5), range(4), range(1, 5), compute_time=[[1, 1]] * 5,
    ...                 edge_cost=[0] * 4, module_paths=paths)
    >>> block_colocated(g).color_class.tolist()
    [0, 0, 1, 1, 2]
    """
    unit = node_units(graph).unit
    return dataclasses.replace(graph, color_class=unit.astype(graph.color_class.dtype))


def _node_per_unit(graph: Graph, fwd: IntArray) -> BlockUnits:
    """No module paths (a graph file): every forward node is a unit, in node order."""
    pos = np.full(graph.n_nodes, -1, np.int64)
    pos[fwd] = np.arange(fwd.size)
    of = graph.forward_of
    if of is not None:
        has = graph.is_backward & (of != NO_FORWARD)
        pos[has] = pos[of[has]]
    for v in np.flatnonzero(pos < 0).tolist():  # backward orphans: with their last producer
        known = [int(pos[u]) for u in graph.predecessors(v).tolist() if pos[u] >= 0]
        pos[v] = max(known) if known else 0
    return _colocated(graph, BlockUnits(unit=pos, names=tuple(graph.label(int(v)) for v in fwd.tolist())))


def _colocated(graph: Graph, units: BlockUnits) -> BlockUnits:
    """Units merged so that every colocation class lies in one unit: the units from the
    class's first to its last become one (a run, so the order stays a chain)."""
    cls = graph.color_class
    has = cls != NO_CLASS
    if not np.any(has):
        return units
    n_units = units.n_units
    reach = np.arange(n_units)  # reach[u]: the last unit merged with u
    for c in np.unique(cls[has]).tolist():
        touched = units.unit[cls == c]
        lo, hi = int(touched.min()), int(touched.max())
        reach[lo] = max(reach[lo], hi)
    new_id = np.zeros(n_units, np.int64)
    current, end = -1, -1
    names: list[str] = []
    for u in range(n_units):
        if u > end:
            current += 1
            names.append(units.names[u])
        else:
            names[-1] = f"{names[-1].split('..')[0]}..{units.names[u]}"
        end = max(end, int(reach[u]))
        new_id[u] = current
    return BlockUnits(unit=new_id[units.unit], names=tuple(names))


def _block_order(blocks: list[str], reached: list[tuple[int, int]]) -> dict[int, int]:
    """Block -> position: a topological order of the blocks' data flow, blocks on a cycle
    merged into one position, ties by first appearance."""
    k = len(blocks)
    if not k:
        return {}
    src: list[int] = []
    dst: list[int] = []
    for bits, b in reached:
        for a in set_bits(bits):
            if a != b:
                src.append(a)
                dst.append(b)
    n_comp, label = strong_components(k, np.asarray(src, np.int64), np.asarray(dst, np.int64))
    first = [k] * n_comp
    for b in range(k):
        first[int(label[b])] = min(first[int(label[b])], b)
    succ: list[set[int]] = [set() for _ in range(n_comp)]
    indeg = [0] * n_comp
    for a, b in zip(src, dst, strict=True):
        ca, cb = int(label[a]), int(label[b])
        if ca != cb and cb not in succ[ca]:
            succ[ca].add(cb)
            indeg[cb] += 1
    ready = sorted((first[c], c) for c in range(n_comp) if indeg[c] == 0)
    position: dict[int, int] = {}
    while ready:
        _, c = ready.pop(0)
        position[c] = len(position)
        for d in succ[c]:
            indeg[d] -= 1
            if indeg[d] == 0:
                ready.append((first[d], d))
                ready.sort()
    return {b: position[int(label[b])] for b in range(k)}
