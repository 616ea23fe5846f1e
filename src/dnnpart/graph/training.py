"""Training graphs: synthesise the backward pass of an inference (forward-only) graph.

The backward pass of a DNN is, to a good approximation, the mirror image of its forward pass
(paper 1, section 5.3 and appendix B): every forward operator ``v`` has a gradient operator
``v'`` that runs about twice as long (gradients with respect to both inputs and weights), every
forward edge ``u -> v`` becomes a backward edge ``v' -> u'`` carrying a gradient of the same
shape as the activation, and the loss turns the computation around at the forward sinks. A
forward node and its backward image use the same weights, so they must share a device; they
share a colocation class.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt

from dnnpart.errors import UsageError
from dnnpart.graph.core import NO_CLASS, NO_FORWARD, Graph, build_graph

#: Suffix of a backward node's name (and op type) after its forward partner's.
GRAD_SUFFIX = "_grad"


def add_backward_pass(
    graph: Graph,
    *,
    backward_factor: float = 2.0,
    backward_memory_bytes: npt.ArrayLike | None = None,
) -> Graph:
    """Append a mirrored backward pass to a forward graph.

    Each forward node ``v`` gets one backward partner ``v_grad`` with

    * compute time ``backward_factor`` x the forward time on every device kind (``inf`` stays
      ``inf``: an operator unsupported on a device kind has no gradient kernel there either);
    * memory ``backward_memory_bytes[v]``, by default the forward node's own ``memory_bytes``.
      Every gradient has the shape of the tensor it differentiates, so the gradient buffers
      of ``v_grad`` (weight gradients + the gradient of ``v``'s output) take as many bytes as
      ``v``'s weights + output. The stashed forward activations are *not* counted again: they
      are ``v``'s output, already counted on ``v``, and stay on the same device until
      ``v_grad`` consumes them because the pair is colocated. Callers that know better (e.g.
      optimizer state, re-materialisation) pass their own figures;
    * the same layer id, ``is_backward=True``, and the colocation class of ``v``; pairs whose
      forward node has no class get a fresh class id each (above every existing id), so
      forward classes that already group several nodes keep doing so, with their partners.

    Each forward edge ``u -> v`` yields a backward edge ``v_grad -> u_grad`` with the same cost
    and bytes (the gradient of an activation has the activation's shape). Each forward sink
    ``s`` gets an edge ``s -> s_grad`` where the loss turns around; its cost and bytes are 0
    because the pair is colocated, so that tensor never crosses a device boundary.

    Phase-2 arrays the forward graph carries are kept: every backward node gets
    ``forward_of`` = its forward partner (set even when the forward graph had none), the
    partner's module path, pin and layer attributes; ``param_bytes`` 0 and ``memory_class``
    ``normal`` (gradients are activations of the backward pass); ``output_bytes`` its memory.

    Backward original ids are ``original_id + id_offset`` with
    ``id_offset = max(original_ids) - min(original_ids) + 1`` (ids ``0..n-1`` map to
    ``n..2n-1``), so they never collide with forward ids.

    Parameters
    ----------
    graph : a forward-only graph (no node has ``is_backward`` set).
    backward_factor : backward compute time relative to forward, per device kind (> 0).
    backward_memory_bytes : ``(n,)`` memory of each backward node, indexed like ``graph``'s
        nodes; default: the forward partner's ``memory_bytes``.

    Returns
    -------
    Graph
        ``2 n`` nodes and ``2 m + (number of forward sinks)`` edges.

    Raises
    ------
    ValueError
        The graph already has backward nodes, or ``backward_factor`` is not a finite
        number > 0, or ``backward_memory_bytes`` has the wrong shape.

    Examples
    --------
    >>> from dnnpart.testing import chain_graph
    >>> g = add_backward_pass(chain_graph(3, acc_time=1.0))
    >>> g.n_nodes, g.n_edges, g.names[-1]
    (6, 5, '0_grad')
    >>> g.time_on("accelerator").tolist()
    [1.0, 1.0, 1.0, 2.0, 2.0, 2.0]
    """
    if graph.is_training:
        raise UsageError(
            f"the graph already has {int(graph.is_backward.sum())} backward nodes; "
            "add_backward_pass expects a forward-only graph"
        )
    if not (np.isfinite(backward_factor) and backward_factor > 0):
        raise UsageError(f"backward_factor must be a finite number > 0, got {backward_factor}")
    n = graph.n_nodes
    if backward_memory_bytes is None:
        bw_memory = graph.memory_bytes
    else:
        bw_memory = np.asarray(backward_memory_bytes, dtype=np.float64).reshape(-1)
        if bw_memory.shape != (n,):
            raise UsageError(
                f"backward_memory_bytes must have one value per node ({n}), "
                f"got {bw_memory.shape[0]}"
            )

    ids = graph.original_ids
    id_offset = int(ids.max() - ids.min() + 1)
    # Backward images are listed in reverse topological order so that the renumbering in
    # build_graph tends to keep the familiar "forward, then backward mirrored" layout.
    mirror = np.arange(n - 1, -1, -1)
    bw_ids = ids[mirror] + id_offset

    src = graph.edge_sources()
    dst = graph.succ_idx.astype(np.int64)
    sinks = np.flatnonzero(graph.out_degree() == 0)
    edge_src = np.concatenate((ids[src], ids[dst] + id_offset, ids[sinks]))
    edge_dst = np.concatenate((ids[dst], ids[src] + id_offset, ids[sinks] + id_offset))
    edge_cost = np.concatenate((graph.edge_cost, graph.edge_cost, np.zeros(sinks.size)))
    edge_bytes = np.concatenate((graph.edge_bytes, graph.edge_bytes, np.zeros(sinks.size)))

    color = graph.color_class.copy()
    unclassed = np.flatnonzero(color == NO_CLASS)
    first_free = int(color.max()) + 1 if n - unclassed.size > 0 else 0
    color[unclassed] = first_free + np.arange(unclassed.size)

    names = graph.names + tuple(graph.names[v] + GRAD_SUFFIX for v in mirror)
    op_types = None
    if graph.op_types is not None:
        op_types = graph.op_types + tuple(
            graph.op_types[v] + GRAD_SUFFIX if graph.op_types[v] else "" for v in mirror
        )

    def doubled(arr: npt.NDArray[Any] | None, backward: npt.ArrayLike) -> npt.ArrayLike | None:
        return None if arr is None else np.concatenate((arr, np.asarray(backward, arr.dtype)))

    zeros = np.zeros(n)
    return build_graph(
        np.concatenate((ids, bw_ids)),
        edge_src,
        edge_dst,
        compute_time=np.concatenate(
            (graph.compute_time, backward_factor * graph.compute_time[mirror])
        ),
        edge_cost=edge_cost,
        memory_bytes=np.concatenate((graph.memory_bytes, bw_memory[mirror])),
        edge_bytes=edge_bytes,
        is_backward=np.concatenate((np.zeros(n, np.bool_), np.ones(n, np.bool_))),
        color_class=np.concatenate((color, color[mirror])),
        layer_id=np.concatenate((graph.layer_id, graph.layer_id[mirror])),
        names=names,
        op_types=op_types,
        device_kinds=graph.device_kinds,
        memory_class=doubled(graph.memory_class, np.zeros(n, np.int8)),
        param_bytes=doubled(graph.param_bytes, zeros),
        output_bytes=doubled(graph.output_bytes, bw_memory[mirror]),
        pin=None if graph.pin is None else np.concatenate((graph.pin, graph.pin[mirror])),
        forward_of=np.concatenate((np.full(n, NO_FORWARD, np.int64), ids[mirror])),
        module_paths=None if graph.module_paths is None
        else graph.module_paths + tuple(graph.module_paths[v] for v in mirror),
        layer_attrs=None if graph.layer_attrs is None
        else graph.layer_attrs.concat(graph.layer_attrs.take(mirror)),
    )


def backward_partner(graph: Graph) -> npt.NDArray[np.int64]:
    """Partner of every node in a graph made by :func:`add_backward_pass` (``-1`` if none).

    Pairs are recognised by name: ``v`` and ``v`` + ``"_grad"``.

    Examples
    --------
    >>> from dnnpart.testing import chain_graph
    >>> g = add_backward_pass(chain_graph(2))
    >>> [g.names[p] for p in backward_partner(g)]
    ['0_grad', '1_grad', '1', '0']
    """
    index = {name: v for v, name in enumerate(graph.names)}
    partner = np.full(graph.n_nodes, -1, np.int64)
    for v in np.flatnonzero(~graph.is_backward):
        w = index.get(graph.names[v] + GRAD_SUFFIX)
        if w is not None and graph.is_backward[w]:
            partner[v], partner[w] = w, v
    return partner
