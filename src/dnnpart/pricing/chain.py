"""A linear pipeline's stage times and memory (the ``stages`` objective), shared by its exact
DP (:mod:`dnnpart.solvers.block_pipeline`) and :func:`dnnpart.evaluate.evaluate`.

Model (choices, also in ``docs/methods/block-pipeline.md``):

* **Positions.** Every node has a position ``0..P-1`` along the pipeline (a stage index, or a
  block unit for the DP's tables); forward edges never go to a lower position.
* **Carried transfers.** A value crosses every boundary between its producer's position and
  each consumer's, once per boundary however many consumers lie beyond it: pipeline runtimes
  pass a value needed two stages later through the stage between (``torch.distributed.
  pipelining`` sends one tuple to the next stage only). Its bytes are the largest of its
  edges' bytes (``edge_bytes``, else the producer's output bytes). Parameters (memory class
  ``residual``) and control edges move nothing: a stage reads its own copy of a weight. A
  crossing is a message from the lower to the upper stage (*up*) or back (*down*), labelled
  by the producer's phase and the earliest phase that needs it beyond the boundary (forward
  when a forward consumer lies there), as the simulator's stage edges are. A backward value
  sent up (the gradient of a weight a later stage also holds: a tied embedding) or read by a
  forward operator (an optimizer update) moves once per step, as runtimes exchange it, not
  per micro-batch: it is left out of the stage time (choice; :func:`per_microbatch`). So is a
  gradient summed into a parameter's gradient on another stage in either direction (GPT-2's
  tied head: the head's stage computes the embedding matrix's gradient, which the
  embedding's stage accumulates): each stage holding the weight accumulates its own part and
  runtimes sum them once per step; it is no message (before, a 103 MB message per micro-batch
  on GPT-2 small's last boundary).
* **Stage time** (per micro-batch): forward + backward compute of its nodes on its device
  (forward again with recomputation) plus paper 4's Eq. 6 for every message at its two
  boundaries (``latency + bytes / bandwidth`` of the device pair, on both ends): Eq. 5 with
  one replica, which is also paper 1's per-device load with carried transfers.
* **Recomputation** (``--recompute``): a stage's backward runs its forward again first, as
  ``torch.utils.checkpoint`` (non-reentrant) does over the stage, which stops once every
  value the backward reads has been rebuilt: the forward operators after the stage's last
  stashed value (in the graph's order) are not run again -- a language model's head, whose
  logits only the loss (outside the stage's module) reads, costs one forward, not two
  (:func:`recomputed_forward`; before, every stage counted its whole forward twice, measured
  24% over on the last stage of a recomputed Llama run, ``docs/results/prediction-accuracy.md``).
* **Memory** of stage ``i`` of ``S``: weights ``W`` (the parameters it holds or reads: a tied
  weight read by two stages counts in both), with training also gradients ``W`` and optimizer
  state ``k W``, plus the activations of the micro-batches in flight: GPipe ``m``, 1F1B
  ``min(m, S - i)``, inference 1, times the stage's stashed bytes ``A`` (the forward values
  its backward reads, :func:`node_activation_bytes`); with recomputation the stash is the
  bytes it receives (``I``) and one micro-batch's ``A`` is rebuilt during a backward. On top,
  training holds one micro-batch's *working set* during a backward: the gradients and
  temporaries its operators make beyond the stash, at their peak
  (:func:`dnnpart.pricing.liveness.piece_working`), taken per block unit and the largest of
  the stage's units counted (choice: a unit's backward frees its temporaries before the next
  unit's begins, so the peaks of two units do not add; measured against ``run``'s allocator
  peaks, ``docs/run.md``). ``k`` is
  the optimizer's from the import (Adam 2, SGD or none 0) where the graph has parameter
  nodes, else 2 (Adam), the simulator's default.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from dnnpart.graph.core import CONTROL, RESIDUAL, Graph
from dnnpart.pricing.liveness import accumulations, ops_named, stashed, value_bytes
from dnnpart.pricing.pairs import Topology

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]
BoolArray = npt.NDArray[np.bool_]

UP, DOWN = 0, 1
F, B = 0, 1
#: (direction, producer phase, consumer phase) of every message kind at a boundary
MESSAGE_KINDS: tuple[tuple[int, int, int], ...] = tuple(
    (d, pu, pv) for d in (UP, DOWN) for pu in (F, B) for pv in (F, B))


def per_microbatch(kind: tuple[int, int, int]) -> bool:
    """Whether a message kind moves once per micro-batch: not a backward value sent up (the
    gradient of a weight a later stage also holds, such as a tied embedding's) nor one read by
    a forward operator (an optimizer update): runtimes exchange those once per step.

    Examples
    --------
    >>> per_microbatch((UP, F, F)), per_microbatch((DOWN, B, B)), per_microbatch((UP, B, B))
    (True, True, False)
    """
    direction, pu, pv = kind
    return not ((direction == UP and pu == B) or (pu == B and pv == F))

__all__ = [
    "MESSAGE_KINDS",
    "ChainMemory",
    "boundary_bytes",
    "chain_compute",
    "in_flight",
    "message_time",
    "node_activation_bytes",
    "node_weight_bytes",
    "optimizer_factor",
    "per_microbatch",
    "positions_sum",
    "recomputed_forward",
    "stage_memory",
    "stage_parameter_bytes",
    "stage_weights",
    "weight_readers",
]


def node_weight_bytes(g: Graph) -> FloatArray:
    """Per node, the weight bytes a stage all-reduces: ``param_bytes`` where the graph has
    phase-2 arrays, else ``memory_bytes`` (paper 1's per-node memory, which its replication
    term also reads as weights). Parmesan's phase 1 uses the same figure, so its ``P(s)``
    is the simulator's ``weight_bytes``.

    Examples
    --------
    >>> from dnnpart.testing import chain_graph
    >>> node_weight_bytes(chain_graph(2, memory_bytes=3.0)).tolist()
    [3.0, 3.0]
    """
    phase_arrays = g.param_bytes is not None or g.memory_class is not None
    out: FloatArray = g.node_param_bytes() if phase_arrays else g.memory_bytes
    return out


def node_activation_bytes(g: Graph) -> FloatArray:
    """Per node, the bytes a stage stashes per micro-batch for it when the graph carries
    ``output_bytes`` (else 0): the forward values the backward reads, views and ``getitem``
    counted at the value they alias (:func:`dnnpart.pricing.liveness.stashed`; every forward
    output that allocates where the graph does not say what the backward reads) -- the
    simulator's ``activation_bytes``, which Parmesan's phase-1 memory model also charges.

    Examples
    --------
    >>> from dnnpart.testing import chain_graph
    >>> node_activation_bytes(chain_graph(2, memory_bytes=3.0)).tolist()  # no output_bytes
    [0.0, 0.0]
    """
    if g.output_bytes is None:
        return np.zeros(g.n_nodes)
    out: FloatArray = np.where(stashed(g), value_bytes(g), 0.0)
    return out


def _has_parameter_nodes(g: Graph) -> bool:
    return bool(np.any(g.memory_classes() == RESIDUAL)) and g.output_bytes is not None


def optimizer_factor(g: Graph) -> float:
    """Optimizer state per weight byte ``k`` (see the module docstring).

    Examples
    --------
    >>> from dnnpart.testing import chain_graph
    >>> optimizer_factor(chain_graph(2))
    2.0
    """
    if not _has_parameter_nodes(g):
        return 2.0
    res = g.memory_classes() == RESIDUAL
    size = float(g.node_output_bytes()[res].sum())
    state = float(g.node_param_bytes()[res].sum())
    return max(state / size - 1.0, 0.0) if size > 0 else 0.0


def weight_readers(g: Graph) -> tuple[IntArray, FloatArray, list[IntArray]]:
    """``(holders, bytes, readers)``: the weights a stage holds -- per weight node, its bytes
    and the nodes whose stage also holds a copy (the node itself and, for a parameter node,
    every operator reading it).

    Without parameter nodes every node is its own weight (:func:`node_weight_bytes`).
    """
    if not _has_parameter_nodes(g):
        nodes = np.arange(g.n_nodes, dtype=np.int64)
        return nodes, node_weight_bytes(g).astype(np.float64), [nodes[i:i + 1] for i in range(g.n_nodes)]
    res = np.flatnonzero(g.memory_classes() == RESIDUAL).astype(np.int64)
    size = g.node_output_bytes()[res].astype(np.float64)
    readers = [np.concatenate(([v], g.succ_idx[g.succ_ptr[v]:g.succ_ptr[v + 1]])).astype(np.int64)
               for v in res.tolist()]
    return res, size, readers


def _tensor_bytes(g: Graph) -> FloatArray:
    """Bytes a value moves when carried: the largest of its edges' bytes; 0 for weights and
    control values."""
    src = g.edge_sources()
    per_edge = np.where(np.isnan(g.edge_bytes), g.node_output_bytes()[src], g.edge_bytes)
    out = np.zeros(g.n_nodes)
    if src.size:
        np.maximum.at(out, src, per_edge)
    cls = g.memory_classes()
    out[(cls == RESIDUAL) | (cls == CONTROL)] = 0.0
    return out


def boundary_bytes(g: Graph, position: npt.ArrayLike, n_positions: int) -> FloatArray:
    """``(P - 1, 8)`` bytes crossing each boundary (between positions ``j`` and ``j + 1``),
    per message kind (:data:`MESSAGE_KINDS`).

    Examples
    --------
    >>> from dnnpart.testing import chain_graph
    >>> g = chain_graph(3, memory_bytes=2.0)           # 0 -> 1 -> 2, 2 bytes each
    >>> boundary_bytes(g, [0, 1, 1], 2)[:, 0].tolist()  # up, forward -> forward
    [2.0]
    """
    pos = np.asarray(position, dtype=np.int64)
    cuts = max(n_positions - 1, 0)
    out = np.zeros((cuts + 1, len(MESSAGE_KINDS)))
    nbytes = _tensor_bytes(g)
    src = g.edge_sources()
    dst = g.succ_idx.astype(np.int64)
    # a gradient summed into a parameter's on another stage (a tied weight's) is no message:
    # runtimes sum the holders' gradients once per step, after the schedule
    keep = (nbytes[src] > 0) & ~accumulations(g)[dst]
    src, dst = src[keep], dst[keep]
    if not src.size or not cuts:
        return out[:cuts]
    n = g.n_nodes
    bw = g.is_backward.astype(np.int64)
    q = pos[dst]
    big, small = np.iinfo(np.int64).max, np.iinfo(np.int64).min
    max_f = np.full(n, small)
    max_b = np.full(n, small)
    min_f = np.full(n, big)
    min_b = np.full(n, big)
    fw_dst = bw[dst] == F
    np.maximum.at(max_f, src[fw_dst], q[fw_dst])
    np.maximum.at(max_b, src[~fw_dst], q[~fw_dst])
    np.minimum.at(min_f, src[fw_dst], q[fw_dst])
    np.minimum.at(min_b, src[~fw_dst], q[~fw_dst])
    kind = {k: i for i, k in enumerate(MESSAGE_KINDS)}
    diff = np.zeros((cuts + 2, len(MESSAGE_KINDS)))

    def add(lo: IntArray, hi: IntArray, who: IntArray, col: int) -> None:
        """Boundaries ``j`` with ``lo <= j < hi`` (boundary ``j`` lies above position ``j``)."""
        ok = hi > lo
        np.add.at(diff[:, col], lo[ok], nbytes[who[ok]])
        np.add.at(diff[:, col], hi[ok], -nbytes[who[ok]])

    for u_phase in (F, B):
        who = np.flatnonzero((bw == u_phase) & (nbytes > 0))
        p = pos[who]
        top_f, top_b = max_f[who], max_b[who]
        # up: boundaries p .. top-1; forward-labelled up to the last forward consumer
        add(p, np.maximum(top_f, p), who, kind[(UP, u_phase, F)])
        add(np.maximum(top_f, p), np.maximum(top_b, p), who, kind[(UP, u_phase, B)])
        low_f, low_b = min_f[who], min_b[who]
        # down: boundaries low .. p-1; forward-labelled from the first forward consumer down
        add(np.minimum(low_f, p), p, who, kind[(DOWN, u_phase, F)])
        add(np.minimum(low_b, p), np.minimum(low_f, p), who, kind[(DOWN, u_phase, B)])
    acc = np.cumsum(diff, axis=0)
    result: FloatArray = acc[:cuts]
    return result


def message_time(topo: Topology, row: FloatArray, lower: int, upper: int, time_unit_s: float) -> float:
    """Eq. 6 time of one boundary's per-micro-batch messages between devices ``lower`` (the
    lower stage's) and ``upper``: one message per nonzero kind, each ``latency + bytes /
    bandwidth``."""
    total = 0.0
    for kind, nbytes in zip(MESSAGE_KINDS, row.tolist(), strict=True):
        if nbytes > 0 and per_microbatch(kind):
            a, b = (lower, upper) if kind[0] == UP else (upper, lower)
            total += float(topo.transfer_time(nbytes, a, b))
    return total / time_unit_s


def in_flight(schedule: str, microbatches: int, n_stages: int, stage: int, training: bool) -> int:
    """Micro-batches whose activations stage ``stage`` holds at its peak.

    Examples
    --------
    >>> [in_flight("1f1b", 8, 4, i, True) for i in range(4)], in_flight("gpipe", 8, 4, 3, True)
    ([4, 3, 2, 1], 8)
    """
    if not training:
        return 1
    if schedule == "gpipe":
        return microbatches
    return min(microbatches, n_stages - stage)


@dataclass(frozen=True, slots=True)
class ChainMemory:
    """One stage's peak memory by part (bytes; arrays of one value per candidate when
    :func:`stage_memory` was given arrays)."""

    weights: Any
    gradients: Any
    optimizer_state: Any
    activations: Any
    in_flight: int
    working: Any = 0.0

    @property
    def total(self) -> Any:
        return self.weights + self.gradients + self.optimizer_state + self.activations + self.working

    def to_dict(self) -> dict[str, float]:
        return {"weights": self.weights, "gradients": self.gradients,
                "optimizer_state": self.optimizer_state, "activations": self.activations,
                "working": self.working, "in_flight": float(self.in_flight), "total": self.total}


def stage_memory(*, weights: Any, activations: Any, inputs: Any, stage: int, n_stages: int,
                 schedule: str, microbatches: int, recompute: bool, training: bool,
                 k: float, working: Any = 0.0) -> ChainMemory:
    """Peak memory of stage ``stage`` of ``n_stages`` (see the module docstring): the one
    formula, for a finished plan (floats) and for the DP's candidate stages (arrays, one value
    per start); ``working``: one micro-batch's working set beyond its stash (training).

    Examples
    --------
    >>> m = stage_memory(weights=10.0, activations=3.0, inputs=1.0, stage=0, n_stages=2,
    ...                  schedule="1f1b", microbatches=4, recompute=False, training=True, k=2.0)
    >>> m.total, m.in_flight                         # 10 + 10 + 20 + 2 x 3
    (46.0, 2)
    """
    flight = in_flight(schedule, microbatches, n_stages, stage, training)
    if training and recompute:
        act = flight * inputs + activations
    else:
        act = flight * activations
    return ChainMemory(weights=weights, gradients=weights if training else 0.0 * weights,
                       optimizer_state=k * weights if training else 0.0 * weights,
                       activations=act, in_flight=flight,
                       working=working if training else 0.0 * weights)


def stage_weights(g: Graph, position: npt.ArrayLike, n_positions: int) -> FloatArray:
    """Weight bytes per position: every weight counted in each position holding or reading it."""
    return np.array([sum(sizes) for sizes in stage_parameter_bytes(g, position, n_positions)],
                    dtype=np.float64)


def stage_parameter_bytes(g: Graph, position: npt.ArrayLike, n_positions: int) -> list[list[float]]:
    """Per position, the bytes of each parameter tensor a stage there holds (a tied one in
    every stage that reads it): :func:`weight_readers`."""
    _, size, readers = weight_readers(g)
    pos = np.asarray(position, dtype=np.int64)
    out: list[list[float]] = [[] for _ in range(n_positions)]
    for nbytes, who in zip(size.tolist(), readers, strict=True):
        if nbytes > 0:
            for q in np.unique(pos[who]).tolist():
                out[q].append(float(nbytes))
    return out


def chain_compute(times: FloatArray, g: Graph, position: npt.ArrayLike, n_positions: int,
                  recompute: bool) -> FloatArray:
    """Compute per position: forward + backward node times, plus with recomputation on a
    training graph the forward the recomputation runs again (:func:`recomputed_forward`)."""
    pos = np.asarray(position, dtype=np.int64)
    fw = np.bincount(pos[~g.is_backward], weights=times[~g.is_backward], minlength=n_positions)
    bw = np.bincount(pos[g.is_backward], weights=times[g.is_backward], minlength=n_positions)
    out: FloatArray = (fw + bw).astype(np.float64)
    if recompute and g.is_training:
        out += recomputed_forward(times, g, pos, n_positions)
    return out


def recomputation_ends(g: Graph) -> BoolArray:
    """Per node, whether a stage's recomputation must rebuild it: a forward value its backward
    reads (:func:`~dnnpart.pricing.liveness.stashed`). Not parameters (the module's own) nor
    constant fills: the gradient's seed (``ones_like`` of the captured loss, which the
    backward reads) lies outside the stage's module, where the run's own loss is.

    Examples
    --------
    >>> from dnnpart.testing import chain_graph
    >>> recomputation_ends(chain_graph(2, memory_bytes=1.0)).tolist()  # no backward: every output
    [True, True]
    """
    out: BoolArray = (stashed(g) & (g.memory_classes() != RESIDUAL) & ~g.is_backward
                      & ~ops_named(g, "fill"))
    return out


def recomputed_forward(times: FloatArray, g: Graph, position: npt.ArrayLike,
                       n_positions: int) -> FloatArray:
    """Per position, the forward time its recomputation runs: its forward nodes in the
    graph's order up to the last one :func:`recomputation_ends` marks (module docstring,
    "Recomputation"); 0 for a position that stashes nothing.

    Examples
    --------
    >>> from dnnpart.testing import chain_graph
    >>> g = chain_graph(3, memory_bytes=2.0)   # no backward: every forward output counts
    >>> recomputed_forward(np.array([1.0, 2.0, 4.0]), g, [0, 0, 1], 2).tolist()
    [3.0, 4.0]
    """
    pos = np.asarray(position, dtype=np.int64)
    ends = np.flatnonzero(recomputation_ends(g))
    last = np.full(n_positions, -1, dtype=np.int64)
    np.maximum.at(last, pos[ends], ends)
    forward = ~g.is_backward & (np.arange(g.n_nodes) <= last[pos])
    out: FloatArray = np.bincount(pos[forward], weights=times[forward],
                                  minlength=n_positions).astype(np.float64)
    return out


def positions_sum(values: FloatArray, position: npt.ArrayLike, n_positions: int) -> FloatArray:
    """``values`` summed per position."""
    out: FloatArray = np.bincount(np.asarray(position, dtype=np.int64), weights=values,
                                  minlength=n_positions).astype(np.float64)
    return out
