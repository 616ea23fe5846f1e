"""Which values hold memory, and for how long: aliases, the activation stash, and the working
set of one micro-batch through a stage.

Choices (also in ``docs/methods/block-pipeline.md`` and ``docs/run.md``):

* **Aliases.** An operator of the ``view`` class (``view``, ``transpose``, ``expand``,
  ``slice``, ...) allocates nothing: its value is a view of its input's storage. Each value's
  *base* is the operator that allocated its storage; a view keeps its base alive. A
  multi-output operator (``native_layer_norm``: output, mean, rstd) counts the bytes of all
  its results; where ``getitem`` operators take them apart, each result is its own value with
  its own lifetime (a layer norm's backward keeps the small mean and rstd, not its output),
  and the operator itself holds nothing.
* **Stash.** What a stage keeps of a micro-batch between its forward and its backward. Where
  the graph says what the backward reads (an autograd capture: edges from forward values into
  backward operators), the stash is exactly those values, by their bases: autograd saves the
  inputs and outputs a backward formula needs, not every forward output (a residual ``add``,
  a ``mean``'s input are not saved). A graph with a synthesized backward (paper 1's mirror,
  :func:`dnnpart.graph.training.add_backward_pass`: no edge from a forward value into the
  backward but at the loss) or no backward keeps every forward output that is not an alias.
* **Working set.** :func:`working_set` walks one micro-batch through a stage's operators, the
  forward in order and then the backward: a value is allocated when its operator runs and
  freed after its last reader on the stage (a view's readers count for its base); a value
  that leaves the stage (read by another stage, or by none: the model's output) is held until
  the micro-batch is done; a gradient of a parameter (a backward value no operator reads) is
  freed as soon as it is made (it is added into the parameter's gradient buffer, counted with
  the weights), and so is one only such an accumulation reads: an ``add`` no operator reads
  is the sum of a parameter's gradients (a weight read twice, a tied embedding), which
  autograd makes in place, in the gradient buffer of each stage holding the parameter.
  Values made on other stages are not counted (the runtime's receive buffers hold them).
  With ``held``, the values given are kept until the micro-batch is done (a loss that keeps
  the model's output); with ``scratch``, an operator holds that many more bytes while it runs
  (a kernel's workspace).
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
import numpy.typing as npt

from dnnpart.cost.ops import op_class
from dnnpart.graph.core import NORMAL, Graph

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]
BoolArray = npt.NDArray[np.bool_]

def alias_nodes(g: Graph) -> BoolArray:
    """Per node, whether its value is an alias of its input's storage (no allocation).

    Examples
    --------
    >>> from dnnpart.testing import chain_graph
    >>> alias_nodes(chain_graph(2)).tolist()           # no operator types: no aliases
    [False, False]
    """
    if g.op_types is None:
        return np.zeros(g.n_nodes, dtype=np.bool_)
    return np.fromiter((op_class(t) == "view" for t in g.op_types), dtype=np.bool_, count=g.n_nodes)


def ops_named(g: Graph, name: str) -> BoolArray:
    """Per node, whether its operator type is ``name``; all ``False`` without operator types.

    Examples
    --------
    >>> from dnnpart.testing import chain_graph
    >>> ops_named(chain_graph(2), "add").tolist()
    [False, False]
    """
    if g.op_types is None:
        return np.zeros(g.n_nodes, dtype=np.bool_)
    return np.fromiter((t == name for t in g.op_types), dtype=np.bool_, count=g.n_nodes)


def value_bytes(g: Graph) -> FloatArray:
    """Per node, the bytes its value allocates (see the module docstring): the output bytes
    of normal operators that are no alias and whose results no ``getitem`` takes apart.

    Examples
    --------
    >>> from dnnpart.testing import chain_graph
    >>> value_bytes(chain_graph(2, memory_bytes=3.0)).tolist()   # no output_bytes: memory
    [3.0, 3.0]
    """
    out_bytes = g.node_output_bytes() if g.output_bytes is not None else g.memory_bytes
    keep = (g.memory_classes() == NORMAL) & ~alias_nodes(g)
    if g.op_types is not None:
        getitem = ops_named(g, "getitem")
        split = np.zeros(g.n_nodes, dtype=np.bool_)
        src = g.edge_sources()
        split[src[getitem[g.succ_idx]]] = True
        keep &= ~split
    out: FloatArray = np.where(keep, out_bytes, 0.0).astype(np.float64)
    return out


def bases(g: Graph) -> IntArray:
    """Per node, the node whose allocation holds its value: itself, or for an alias its
    input's base (the input with the most output bytes where it has several)."""
    out = np.arange(g.n_nodes, dtype=np.int64)
    alias = alias_nodes(g)
    if not alias.any():
        return out
    out_bytes = g.node_output_bytes() if g.output_bytes is not None else g.memory_bytes
    for v in np.flatnonzero(alias).tolist():  # topological order: inputs resolved first
        preds = g.pred_idx[g.pred_ptr[v]:g.pred_ptr[v + 1]]
        if preds.size:
            out[v] = out[int(preds[np.argmax(out_bytes[preds])])]
    return out


def _explicit_backward_reads(g: Graph) -> bool:
    """Whether backward operators read forward values by edges (an autograd capture), beyond
    the loss's turn-around at the forward sinks (a synthesized backward)."""
    if not g.is_backward.any():
        return False
    src = g.edge_sources()
    dst = g.succ_idx.astype(np.int64)
    into_bw = ~g.is_backward[src] & g.is_backward[dst]
    fw_out = np.zeros(g.n_nodes, dtype=np.int64)
    np.add.at(fw_out, src[~g.is_backward[src] & ~g.is_backward[dst]], 1)
    return bool(np.any(into_bw & (fw_out[src] > 0)))


def stashed(g: Graph) -> BoolArray:
    """Per node, whether a stage keeps its value from the forward to the backward of a
    micro-batch (see the module docstring): forward values that allocate (:func:`value_bytes`)
    and, in an autograd capture, are read by a backward operator directly or through aliases.

    Examples
    --------
    >>> from dnnpart.testing import chain_graph
    >>> stashed(chain_graph(3, memory_bytes=2.0)).tolist()   # no backward: every forward output
    [True, True, True]
    """
    own = ~g.is_backward & (value_bytes(g) > 0)
    if not _explicit_backward_reads(g):
        return own
    base = bases(g)
    src = g.edge_sources()
    dst = g.succ_idx.astype(np.int64)
    read = np.zeros(g.n_nodes, dtype=np.bool_)
    read[base[src[~g.is_backward[src] & g.is_backward[dst]]]] = True
    out: BoolArray = own & read
    return out


def accumulations(g: Graph) -> BoolArray:
    """Per node, whether it sums a parameter's gradients in place (see the module docstring):
    a backward ``add`` no operator reads."""
    sink = np.diff(g.succ_ptr) == 0
    out: BoolArray = g.is_backward & sink & ops_named(g, "add")
    return out


def loss_inputs(g: Graph) -> BoolArray:
    """Per node, whether it is (the base of) a value the captured loss reads: the loss being a
    forward reduction no forward operator reads, in a graph with a backward."""
    out = np.zeros(g.n_nodes, dtype=np.bool_)
    if g.op_types is None or not g.is_backward.any():
        return out
    src = g.edge_sources()
    dst = g.succ_idx.astype(np.int64)
    fill = ops_named(g, "fill")
    fw_readers = np.zeros(g.n_nodes, dtype=np.int64)  # the gradient's seed (ones_like) aside
    np.add.at(fw_readers, src[~g.is_backward[dst] & ~fill[dst]], 1)
    reduce = np.fromiter((op_class(t) == "reduce" for t in g.op_types), dtype=np.bool_, count=g.n_nodes)
    loss = ~g.is_backward & reduce & (fw_readers == 0)
    out[bases(g)[src[loss[dst]]]] = True
    return out


class WorkingSet(NamedTuple):
    """One micro-batch through a stage: bytes held when its forward ends (``stash``), the most
    held at once (``peak``), and the bytes of its values that leave the stage or are the
    model's outputs (``leaving``)."""

    stash: float
    peak: float
    leaving: float


class Liveness(NamedTuple):
    """What :func:`working_set` reads of a graph, computed once for many stages."""

    base: IntArray
    accumulate: BoolArray
    getitem: BoolArray


def liveness(g: Graph) -> Liveness:
    """The :class:`Liveness` of ``g`` (:func:`bases`, :func:`accumulations`, the getitems)."""
    return Liveness(bases(g), accumulations(g), ops_named(g, "getitem"))


def working_set(g: Graph, members: BoolArray, nbytes: FloatArray,
                held: BoolArray | None = None, scratch: FloatArray | None = None,
                context: Liveness | None = None) -> WorkingSet:
    """The :class:`WorkingSet` of one micro-batch through the stage of ``members`` (see the
    module docstring).

    ``nbytes`` is the bytes each node's value allocates (:func:`value_bytes`); ``held`` marks
    values kept until the micro-batch is done; ``scratch`` is bytes an operator holds while
    it runs; ``context``: :func:`liveness` of ``g``, when many stages of one graph are walked.

    Examples
    --------
    >>> from dnnpart.testing import chain_graph
    >>> g = chain_graph(3, memory_bytes=2.0)           # a -> b -> c, forward only
    >>> working_set(g, np.array([True, True, True]), np.array([2.0, 2.0, 2.0]))
    WorkingSet(stash=2.0, peak=4.0, leaving=2.0)
    """
    base, accumulate, getitem = context if context is not None else liveness(g)
    nodes = np.flatnonzero(members)
    order = np.concatenate((nodes[~g.is_backward[nodes]], nodes[g.is_backward[nodes]]))
    step = np.full(g.n_nodes, -1, dtype=np.int64)
    step[order] = np.arange(order.size)
    end = order.size  # "held until the micro-batch is done"
    last = np.full(g.n_nodes, -1, dtype=np.int64)  # last reader's step, per base
    leaves = np.zeros(g.n_nodes, dtype=np.bool_)
    for v in order.tolist():
        b = int(base[v])
        for w in g.succ_idx[g.succ_ptr[v]:g.succ_ptr[v + 1]].tolist():
            if accumulate[w]:
                continue  # added into a gradient buffer where it is made
            if step[w] >= 0:
                last[b] = max(last[b], int(step[w]))
            else:
                leaves[b] = True
    alloc = np.zeros(end + 1)
    free = np.zeros(end + 2)
    leaving = 0.0
    for v in order.tolist():
        size = float(nbytes[v])
        if size <= 0 or base[v] != v or accumulate[v]:
            continue
        s = int(step[v])
        if getitem[v]:  # a result of a multi-output operator exists from that operator's step
            preds = g.pred_idx[g.pred_ptr[v]:g.pred_ptr[v + 1]]
            s = min([s, *(int(step[u]) for u in preds.tolist() if step[u] >= 0)])
        has_reader = g.succ_ptr[v + 1] > g.succ_ptr[v]
        out = leaves[v] or (not has_reader and not g.is_backward[v])
        leaving += size if out else 0.0
        if out or (held is not None and held[v]):
            until = end  # leaves the stage, is the model's output, or is held
        elif last[v] < 0:
            until = s  # a parameter's gradient: added into its buffer at once
        else:
            until = int(last[v])
        alloc[s] += size
        free[until + 1] += size
    if scratch is not None:  # held during the operator's own step only
        np.add.at(alloc, step[order], scratch[order])
        np.add.at(free, step[order] + 1, scratch[order])
    live = np.cumsum(alloc[:end + 1] - free[:end + 1])
    forward_end = int(np.count_nonzero(~g.is_backward[order]))
    # after the last forward operator, its inputs freed
    stash = float(alloc[:forward_end].sum() - free[:forward_end + 1].sum())
    return WorkingSet(stash, float(live.max()) if live.size else 0.0, leaving)


def piece_working(g: Graph, piece: IntArray, n_pieces: int) -> FloatArray:
    """Per piece (``piece[v]`` in ``0..n_pieces-1``; ``-1``: none), one micro-batch's
    transient bytes beyond its stash, ``peak - stash`` of its :func:`working_set`: the
    gradients and temporaries of its backward at their peak. 0 for every piece of a graph
    with no backward or no ``output_bytes`` (an inference stage's working set is within the
    stages model's every-forward-output activations).

    Examples
    --------
    >>> from dnnpart.testing import chain_graph
    >>> piece_working(chain_graph(3, memory_bytes=2.0), np.array([0, 0, 1]), 2).tolist()
    [0.0, 0.0]
    """
    out = np.zeros(n_pieces)
    if g.output_bytes is None or not g.is_backward.any():
        return out
    nbytes = value_bytes(g)
    context = liveness(g)
    order = np.argsort(piece, kind="stable")
    bounds = np.searchsorted(piece[order], np.arange(n_pieces + 1))
    for p in range(n_pieces):
        nodes = order[bounds[p]:bounds[p + 1]]
        if nodes.size == 0 or not g.is_backward[nodes].any():
            continue
        members = np.zeros(g.n_nodes, dtype=np.bool_)
        members[nodes] = True
        ws = working_set(g, members, nbytes, context=context)
        out[p] = max(ws.peak - ws.stash, 0.0)
    return out
