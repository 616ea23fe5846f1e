"""Per-sample costs of a transformer's units, split into what tensor parallelism divides and
what it replicates: the input of the hybrid (data x tensor x pipeline) cost model
(:mod:`dnnpart.pricing.parallel`).

A training graph captured with a few blocks (:func:`unit_profiles`) gives three
:class:`UnitProfile`: the *prologue* (embeddings), one *block* (every block of the model has its
shape, so one is priced and reused for all of them) and the *epilogue* (final norm, head,
loss). Each field is per sample (one sequence): the graph is captured at ``samples`` samples and
divided by it (choice: a micro-batch of ``b`` costs ``b`` samples' time, the roofline's
behaviour at the sizes tensor parallelism is used for).

Choices (also in ``docs/methods/hybrid.md``):

* **What tensor parallelism divides** is Megatron's layout without sequence parallelism,
  propagated along the forward graph: a product with a weight whose input is whole is
  column-parallel (its output split over the ranks: query/key/value, the MLP's first
  products, the head), one whose input is split row-parallel (its output whole after an
  all-reduce: the attention's output projection, the MLP's last product); the attention's
  products of two activations and the attention core keep their inputs' split; any other
  operator is split when an input is (rotary embedding, softmax, the MLP's activation, the
  loss on vocabulary-split logits). Products, embeddings (vocabulary-parallel) and the
  attention core are always divided, every operator on split values too; the rest (norms,
  residual adds) runs replicated on every rank. A backward node follows the forward operator
  it differentiates.
* **Weights**: a parameter read by a matrix product or an embedding is split (columns, rows or
  the vocabulary; a bias the product adds too, also a row-parallel one, which Megatron keeps
  whole: a few kilobytes), any other (norm scales) replicated.
* **Stash** (bytes the backward reads, :func:`~dnnpart.pricing.chain.node_activation_bytes`) is
  split the same way by the node that produced it.
* **Selective recomputation** drops the stash of the attention core and of the divided
  operators inside the attention module other than its weight products, and recomputes them in
  the backward (Korthikanti et al., 2022); what it drops and the forward time it adds are
  ``attention_stash`` and ``attention_s``.
* **Working set** (:func:`~dnnpart.pricing.liveness.piece_working`) is taken as divided by the
  tensor-parallel degree.
"""

from __future__ import annotations

from dataclasses import dataclass, fields, replace

import numpy as np
import numpy.typing as npt

from dnnpart.cost.ops import op_class
from dnnpart.errors import FormatError
from dnnpart.graph.blocks import node_units
from dnnpart.graph.core import NO_FORWARD, RESIDUAL, Graph
from dnnpart.pricing.chain import (
    MESSAGE_KINDS,
    UP,
    F,
    boundary_bytes,
    node_activation_bytes,
    optimizer_factor,
    weight_readers,
)
from dnnpart.pricing.liveness import alias_nodes, piece_working

__all__ = ["ModelProfile", "UnitProfile", "unit_profiles"]

FloatArray = npt.NDArray[np.float64]

#: operator classes tensor parallelism always divides
DIVIDED_CLASSES = frozenset({"matmul", "attention", "embedding"})
#: classes whose weights tensor parallelism splits
SPLIT_WEIGHT_CLASSES = frozenset({"matmul", "embedding"})


@dataclass(frozen=True, slots=True)
class UnitProfile:
    """One unit's costs per sample; ``(divided, replicated)`` pairs where tensor parallelism
    divides the first part by its degree ``t`` (module docstring). Seconds and bytes.

    Examples
    --------
    >>> u = UnitProfile(forward_s=(2.0, 1.0), backward_s=(4.0, 1.0), weights=(8.0, 1.0),
    ...                 stash=(6.0, 2.0), working=4.0, attention_s=0.5, attention_stash=3.0,
    ...                 boundary=2.0)
    >>> u.compute_s(2)   # (2 + 4) / 2 + 1 + 1
    5.0
    """

    forward_s: tuple[float, float]
    backward_s: tuple[float, float]
    weights: tuple[float, float]
    stash: tuple[float, float]
    working: float
    attention_s: float
    attention_stash: float
    boundary: float

    def compute_s(self, t: int) -> float:
        """Forward + backward seconds per sample at tensor-parallel degree ``t``."""
        return (self.forward_s[0] + self.backward_s[0]) / t + self.forward_s[1] + self.backward_s[1]

    def forward_at(self, t: int) -> float:
        """Forward seconds per sample at degree ``t``."""
        return self.forward_s[0] / t + self.forward_s[1]

    def weights_at(self, t: int) -> float:
        """Weight bytes one tensor-parallel rank holds."""
        return self.weights[0] / t + self.weights[1]

    def stash_at(self, t: int) -> float:
        """Stash bytes per sample on one tensor-parallel rank."""
        return self.stash[0] / t + self.stash[1]

    def scaled(self, factor: float) -> UnitProfile:
        """Every per-sample figure times ``factor`` (weights and working set unchanged)."""
        def s(pair: tuple[float, float]) -> tuple[float, float]:
            return (pair[0] * factor, pair[1] * factor)

        return replace(self, forward_s=s(self.forward_s), backward_s=s(self.backward_s),
                       stash=s(self.stash),
                       attention_s=self.attention_s * factor,
                       attention_stash=self.attention_stash * factor, boundary=self.boundary * factor)


@dataclass(frozen=True, slots=True)
class ModelProfile:
    """A transformer for the hybrid cost model: ``n_blocks`` identical blocks between a
    prologue and an epilogue, ``heads``: what tensor-parallel degrees divide (the attention
    heads, and the key/value heads of grouped-query attention),
    optimizer state ``optimizer_k`` bytes per weight byte, ``block_spread``: the largest
    relative difference between the captured blocks' figures (0: identical)."""

    prologue: UnitProfile
    block: UnitProfile
    epilogue: UnitProfile
    n_blocks: int
    heads: int
    optimizer_k: float = 2.0
    block_spread: float = 0.0


def _accelerator_seconds(g: Graph, time_unit_s: float) -> FloatArray:
    kinds = list(g.device_kinds)
    col = kinds.index("accelerator") if "accelerator" in kinds else 0
    out: FloatArray = np.asarray(g.compute_time[:, col], dtype=np.float64) * time_unit_s
    return np.where(np.isfinite(out), out, 0.0)


def _node_classes(g: Graph) -> list[str]:
    """Every node's operator class (:func:`~dnnpart.cost.ops.op_class`; ``""`` without types)."""
    return [op_class(t) for t in (g.op_types or ("",) * g.n_nodes)]


def _divided_nodes(g: Graph, cls: list[str], alias: npt.NDArray[np.bool_]) -> npt.NDArray[np.bool_]:
    """Per node: whether tensor parallelism divides its work (module docstring), by Megatron's
    layout propagated along the forward graph: a product with a weight whose input is whole is
    column-parallel (its output split), one whose input is split row-parallel (its output whole
    after the all-reduce); products of two activations (the attention's) and the attention core
    keep their inputs' split, and any other operator is split when an input is. Products,
    embeddings and the attention core are always divided, and so is every operator on split
    values. A backward node follows the forward operator it differentiates."""
    res = g.memory_classes() == RESIDUAL
    weightish = res.copy()  # parameters and views of them
    split = np.zeros(g.n_nodes, dtype=np.bool_)
    divided = np.zeros(g.n_nodes, dtype=np.bool_)
    pred_ptr, pred_idx = g.pred_ptr, g.pred_idx
    bw = g.is_backward
    for v in range(g.n_nodes):
        if bw[v] or res[v]:
            continue
        preds = [u for u in pred_idx[pred_ptr[v]:pred_ptr[v + 1]].tolist() if not bw[u]]
        data = [u for u in preds if not weightish[u]]
        if alias[v] and preds and not data:
            weightish[v] = True
            continue
        split_in = any(split[u] for u in data)
        has_weight = len(data) < len(preds)
        if cls[v] == "matmul" and has_weight:
            split[v] = not split_in
        elif cls[v] == "embedding":
            split[v] = False  # vocabulary-parallel: whole after its all-reduce
        else:
            split[v] = split_in
        divided[v] = split_in or split[v] or cls[v] in DIVIDED_CLASSES
    fwd = g.forward_of if g.forward_of is not None else np.full(g.n_nodes, NO_FORWARD)
    has = (fwd != NO_FORWARD) & bw
    divided[has] = divided[fwd[has]]
    return divided


def _split_weight(g: Graph, v: int, cls: list[str], alias: npt.NDArray[np.bool_]) -> bool:
    """Whether tensor parallelism splits weight ``v``: a forward operator reached from it through
    views (a transpose, a reshape) is a matrix product or an embedding."""
    succ_ptr, succ_idx = g.succ_ptr, g.succ_idx
    todo, seen = [v], {v}
    while todo:
        u = todo.pop()
        for w in succ_idx[succ_ptr[u]:succ_ptr[u + 1]].tolist():
            if w in seen or g.is_backward[w]:
                continue
            seen.add(w)
            if alias[w]:
                todo.append(w)
            elif cls[w] in SPLIT_WEIGHT_CLASSES:
                return True
    return False


def _unit_weights(g: Graph, unit: npt.NDArray[np.int64], n_units: int, cls: list[str],
                  alias: npt.NDArray[np.bool_]) -> tuple[FloatArray, FloatArray]:
    """Per unit, the weight bytes tensor parallelism splits and those it replicates; a weight
    counts in every unit holding or reading it (a tied embedding in the prologue and the
    epilogue, as :func:`~dnnpart.pricing.chain.weight_readers` counts it for stages)."""
    holders, sizes, readers = weight_readers(g)
    split, repl = np.zeros(n_units), np.zeros(n_units)
    for v, size, who in zip(holders.tolist(), sizes.tolist(), readers, strict=True):
        target = split if _split_weight(g, v, cls, alias) else repl
        for u in set(unit[who].tolist()):
            target[u] += size
    return split, repl


def _attention_nodes(g: Graph, divided: npt.NDArray[np.bool_],
                     classes: list[str]) -> npt.NDArray[np.bool_]:
    """Forward nodes selective recomputation redoes: the attention core, and the divided
    non-product operators inside an attention module (their outputs are on the scores)."""
    paths = g.module_paths or ("",) * g.n_nodes
    cls = np.array(classes, dtype=object)
    in_attn = np.array(["attn" in p.lower() or "attention" in p.lower() for p in paths])
    core: npt.NDArray[np.bool_] = (cls == "attention") | (in_attn & divided & (cls != "matmul"))
    return core & ~g.is_backward


def unit_profiles(g: Graph, *, time_unit_s: float, n_blocks: int, heads: int,
                  samples: int = 1) -> ModelProfile:
    """The :class:`ModelProfile` of a training graph captured with two or more identical blocks
    (:func:`~dnnpart.graph.blocks.node_units`), for a model of ``n_blocks`` blocks; every
    per-sample figure is the graph's divided by ``samples`` (the capture's batch).

    Raises
    ------
    FormatError
        The graph has no backward, fewer than two blocks, or no prologue/epilogue unit.

    Examples
    --------
    A captured GPT-2 of two blocks (``tests/pricing/test_parallel_profile.py`` runs this):

    >>> from dnnpart.workflow import import_model                      # doctest: +SKIP
    >>> m = import_model("hf:gpt2:n_layer=2,n_embd=64,n_head=4", training=True,
    ...                  input_shapes=[(1, 32)])                       # doctest: +SKIP
    >>> p = unit_profiles(m.imported.graph, time_unit_s=1e-3, n_blocks=24,
    ...                   heads=4)                                     # doctest: +SKIP
    >>> p.n_blocks, p.block.weights[0] > p.block.weights[1]           # doctest: +SKIP
    (24, True)
    """
    if not g.is_backward.any():
        raise FormatError("hybrid planning needs a training graph (capture with --training)")
    units = node_units(g)
    names = units.names
    if len(names) < 4 or names[0] != "prologue" or names[-1] != "epilogue":
        raise FormatError(f"hybrid planning needs a prologue, two or more blocks and an epilogue; "
                          f"the captured graph has units {', '.join(names)}")
    n_units = len(names)
    unit = _own_blocks(g, units.unit, names)
    fwd_up = MESSAGE_KINDS.index((UP, F, F))
    cuts = boundary_bytes(g, unit, n_units)[:, fwd_up]
    seconds = _accelerator_seconds(g, time_unit_s)
    classes, alias = _node_classes(g), alias_nodes(g)
    divided = _divided_nodes(g, classes, alias)
    split_w, repl_w = _unit_weights(g, unit, n_units, classes, alias)
    stash = node_activation_bytes(g)
    working = piece_working(g, unit, n_units)
    attn = _attention_nodes(g, divided, classes)
    bw = g.is_backward

    def profile(u: int) -> UnitProfile:
        m = unit == u
        boundary = float(cuts[u]) if u < n_units - 1 else 0.0
        out = UnitProfile(
            forward_s=(float(seconds[m & ~bw & divided].sum()), float(seconds[m & ~bw & ~divided].sum())),
            backward_s=(float(seconds[m & bw & divided].sum()), float(seconds[m & bw & ~divided].sum())),
            weights=(float(split_w[u]), float(repl_w[u])),
            stash=(float(stash[m & divided].sum()), float(stash[m & ~divided].sum())),
            working=float(working[u]), attention_s=float(seconds[m & attn].sum()),
            attention_stash=float(stash[m & attn].sum()), boundary=boundary)
        return out.scaled(1.0 / samples) if samples != 1 else out

    blocks = [profile(u) for u in range(1, n_units - 1)]
    block, spread = _largest(blocks)
    return ModelProfile(prologue=profile(0), block=block, epilogue=profile(n_units - 1),
                        n_blocks=n_blocks, heads=heads, optimizer_k=optimizer_factor(g),
                        block_spread=spread)


def _own_blocks(g: Graph, unit: npt.NDArray[np.int64], names: tuple[str, ...]) -> npt.NDArray[np.int64]:
    """``unit`` with the operators of another module that the block split put into the first
    or last block (Llama's token embedding goes with its first consumer, the first block) moved
    to the prologue or the epilogue, so that every captured block holds its own module's
    operators only; a backward node goes where the forward operator it differentiates goes."""
    paths = g.module_paths or ("",) * g.n_nodes
    fwd = g.forward_of if g.forward_of is not None else np.full(g.n_nodes, NO_FORWARD)
    out = unit.copy()
    last_block = len(names) - 2
    for v in range(g.n_nodes):
        u = int(unit[v])
        if u not in (1, last_block):
            continue
        src = int(fwd[v]) if g.is_backward[v] and fwd[v] != NO_FORWARD else v
        path, key = paths[src], names[u]
        if path and path != key and not path.startswith(key + "."):
            out[v] = 0 if u == 1 else len(names) - 1
    return out


def _flat(u: UnitProfile) -> FloatArray:
    out: list[float] = []
    for f in fields(u):
        value = getattr(u, f.name)
        out.extend(value if isinstance(value, tuple) else (value,))
    return np.asarray(out, dtype=np.float64)


def _largest(blocks: list[UnitProfile]) -> tuple[UnitProfile, float]:
    """The field-wise largest of the captured blocks (choice: a block that also carries a
    helper computation, such as the first block's mask, is priced for all of them) and the
    largest relative spread among them."""
    rows = np.stack([_flat(b) for b in blocks])
    top = rows.max(axis=0)
    spread = float(np.max((top - rows.min(axis=0)) / np.where(top > 0, top, 1.0)))
    values = iter(top.tolist())
    kwargs: dict[str, object] = {}
    for f in fields(UnitProfile):
        current = getattr(blocks[0], f.name)
        kwargs[f.name] = (next(values), next(values)) if isinstance(current, tuple) else next(values)
    return UnitProfile(**kwargs), spread  # type: ignore[arg-type]
