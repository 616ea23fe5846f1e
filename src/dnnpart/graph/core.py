"""The immutable operator/layer DAG shared by every solver.

Nodes are renumbered in a topological order when the graph is built, so every edge
``u -> v`` has ``u < v`` and ``range(n)`` is a topological order. Everything lives in numpy
arrays (struct of arrays, CSR adjacency both ways); names and original ids are kept for I/O.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, fields
from typing import Any

import numpy as np
import numpy.typing as npt

from dnnpart.errors import InvalidGraphError, UnknownIdError, UsageError

IntArray = npt.NDArray[np.int64]
Int32Array = npt.NDArray[np.int32]
Int8Array = npt.NDArray[np.int8]
FloatArray = npt.NDArray[np.float64]
BoolArray = npt.NDArray[np.bool_]

#: Device kinds that carry a compute-time column, in column order.
DEVICE_KINDS: tuple[str, ...] = ("cpu", "accelerator")
NO_CLASS = -1
#: Memory classes of paper 2 (PARDNN, Eq. 2), stored as int8 codes in ``Graph.memory_class``:
#: ``normal`` activations are freed after their last consumer; ``residual`` tensors (weights,
#: optimizer state) live the whole iteration; a ``reference`` op updates a residual tensor and
#: must sit with it; ``control`` nodes carry no data.
MEMORY_CLASSES: tuple[str, ...] = ("normal", "residual", "reference", "control")
NORMAL, RESIDUAL, REFERENCE, CONTROL = 0, 1, 2, 3
#: ``Graph.pin`` value of a node that may run on any device kind.
NO_PIN = -1
#: ``Graph.forward_of`` value of a node that differentiates no forward op.
NO_FORWARD = -1


Shape = tuple[int, ...]

#: Fields of :class:`LayerAttrs` that hold one integer tuple per node.
LAYER_TUPLE_FIELDS: tuple[str, ...] = ("output_shape", "kernel", "stride", "padding", "inputs")
#: Of those, the ones files may leave out (then ``()`` for every node): written later.
LAYER_OPTIONAL_FIELDS: tuple[str, ...] = ("inputs",)


@dataclass(frozen=True, slots=True)
class LayerAttrs:
    """Per-node layer attributes of a layer graph (what OptCNN-style cost models read).

    One entry per node, in node order; an empty string / tuple means "not applicable or
    unknown" (an element-wise op has no kernel). Generic on purpose: ``kind`` is the layer kind
    as its producer names it (``"conv"``, ``"linear"``, ``"aten.convolution.default"``), and
    the tuples are plain integers so any frontend can fill them.

    Attributes
    ----------
    kind : op/layer kind per node.
    output_shape : shape of the node's (first) output.
    kernel, stride, padding : spatial kernel size, stride and padding (convolution, pooling).
    inputs : the original ids (:attr:`Graph.original_ids`) of the node's producers in the order
        the layer reads them (a concatenation stacks its inputs in this order); ``()`` when
        unknown, then the predecessors in node order. Original ids, unlike node ids, survive
        renumbering and subgraphs.

    Examples
    --------
    >>> a = LayerAttrs.empty(2)
    >>> a.kind, a.kernel
    (('', ''), ((), ()))
    >>> a.take([1]).n_nodes
    1
    """

    kind: tuple[str, ...]
    output_shape: tuple[Shape, ...]
    kernel: tuple[Shape, ...]
    stride: tuple[Shape, ...]
    padding: tuple[Shape, ...]
    inputs: tuple[Shape, ...] = ()

    def __post_init__(self) -> None:
        n = len(self.kind)
        if not self.inputs and n:
            object.__setattr__(self, "inputs", ((),) * n)
        bad = [name for name in LAYER_TUPLE_FIELDS if len(getattr(self, name)) != n]
        if bad:
            raise InvalidGraphError(f"layer attributes have inconsistent lengths: {', '.join(bad)}")

    @property
    def n_nodes(self) -> int:
        return len(self.kind)

    @classmethod
    def empty(cls, n: int) -> LayerAttrs:
        """``n`` nodes with every attribute unknown."""
        blank: tuple[Shape, ...] = ((),) * n
        return cls(kind=("",) * n, output_shape=blank, kernel=blank, stride=blank, padding=blank,
                   inputs=blank)

    def take(self, order: Sequence[int] | IntArray) -> LayerAttrs:
        """The attributes of the nodes ``order`` (a permutation or selection), in that order."""
        idx = [int(i) for i in order]
        return LayerAttrs(
            kind=tuple(self.kind[i] for i in idx),
            **{name: tuple(getattr(self, name)[i] for i in idx) for name in LAYER_TUPLE_FIELDS},
        )

    def concat(self, other: LayerAttrs) -> LayerAttrs:
        """These nodes followed by ``other``'s."""
        return LayerAttrs(
            kind=self.kind + other.kind,
            **{name: getattr(self, name) + getattr(other, name) for name in LAYER_TUPLE_FIELDS},
        )


@dataclass(frozen=True, slots=True, eq=False)  # eq=False: arrays do not compare to bool
class Graph:
    """Immutable DAG with costs; node ids are a topological order.

    Attributes
    ----------
    succ_ptr, succ_idx : CSR successors; edge ``e`` of node ``u`` is ``succ_idx[e]`` for
        ``succ_ptr[u] <= e < succ_ptr[u+1]``; edges are sorted by ``(source, target)``.
    pred_ptr, pred_idx, pred_edge : CSR predecessors; ``pred_edge`` maps each entry to the
        index of the same edge in the successor arrays.
    edge_cost : time to move the edge's tensor between accelerator memory and host DRAM at the
        reference link (paper 1's per-node ``c_u``, kept per edge so non-uniform out-edges are
        representable).
    edge_bytes : bytes moved along the edge, ``nan`` where unknown.
    compute_time : ``(n, len(device_kinds))`` time per device kind; ``inf`` = unsupported.
    memory_bytes : persistent + activation memory the node needs on its device.
    is_backward : node belongs to the backward pass of a training graph.
    color_class : colocation class (equal classes must share a device), ``-1`` = none.
    layer_id : layer annotation, ``-1`` = none.
    names, original_ids : as given in the source, for I/O.
    op_types : operator type per node, or ``None`` when unknown.

    Optional phase-2 arrays (``None`` = absent; the accessors below give the defaults):

    memory_class : int8 code per node, see :data:`MEMORY_CLASSES` (default ``normal``).
    param_bytes : bytes of the residual tensor (weights, optimizer state) a node holds
        (default 0).
    output_bytes : bytes of the node's output activation (default ``memory_bytes``, paper 1's
        per-node memory read as the node's output).
    pin : int8 index into ``device_kinds`` the node must run on, :data:`NO_PIN` = free.
    forward_of : node index of the forward op a backward op differentiates,
        :data:`NO_FORWARD` = none. Constrains nothing by itself.
    module_paths : module path per node (e.g. ``"h.3.attn"``), ``""`` when unknown.
    layer_attrs : :class:`LayerAttrs` (op kind, output shape, kernel/stride/padding).

    Examples
    --------
    >>> from dnnpart.graph import GraphBuilder
    >>> b = GraphBuilder()
    >>> for i in range(3):
    ...     _ = b.add_node(i, cpu_time=2.0, acc_time=1.0)
    >>> b.add_edge(0, 1, cost=0.5); b.add_edge(1, 2, cost=0.5)
    >>> g = b.build()
    >>> g.n_nodes, g.n_edges, g.successors(0).tolist()
    (3, 2, [1])
    """

    succ_ptr: IntArray
    succ_idx: Int32Array
    pred_ptr: IntArray
    pred_idx: Int32Array
    pred_edge: IntArray
    edge_cost: FloatArray
    edge_bytes: FloatArray
    compute_time: FloatArray
    memory_bytes: FloatArray
    is_backward: BoolArray
    color_class: IntArray
    layer_id: IntArray
    original_ids: IntArray
    names: tuple[str, ...]
    op_types: tuple[str, ...] | None = None
    device_kinds: tuple[str, ...] = DEVICE_KINDS
    memory_class: Int8Array | None = None
    param_bytes: FloatArray | None = None
    output_bytes: FloatArray | None = None
    pin: Int8Array | None = None
    forward_of: IntArray | None = None
    module_paths: tuple[str, ...] | None = None
    layer_attrs: LayerAttrs | None = None

    def __post_init__(self) -> None:
        for f in fields(self):
            arr = getattr(self, f.name)
            if isinstance(arr, np.ndarray):
                arr.flags.writeable = False
        n, m = self.n_nodes, self.n_edges
        checks = {
            "pred_ptr": self.pred_ptr.shape == (n + 1,),
            "pred_idx": self.pred_idx.shape == (m,),
            "pred_edge": self.pred_edge.shape == (m,),
            "edge_cost": self.edge_cost.shape == (m,),
            "edge_bytes": self.edge_bytes.shape == (m,),
            "compute_time": self.compute_time.shape == (n, len(self.device_kinds)),
            "memory_bytes": self.memory_bytes.shape == (n,),
            "is_backward": self.is_backward.shape == (n,),
            "color_class": self.color_class.shape == (n,),
            "layer_id": self.layer_id.shape == (n,),
            "original_ids": self.original_ids.shape == (n,),
            "names": len(self.names) == n,
            "op_types": self.op_types is None or len(self.op_types) == n,
            "module_paths": self.module_paths is None or len(self.module_paths) == n,
            "layer_attrs": self.layer_attrs is None or self.layer_attrs.n_nodes == n,
        }
        for name in ("memory_class", "param_bytes", "output_bytes", "pin", "forward_of"):
            arr = getattr(self, name)
            checks[name] = arr is None or arr.shape == (n,)
        bad = [name for name, ok in checks.items() if not ok]
        if bad:
            raise InvalidGraphError(f"graph arrays have inconsistent shapes: {', '.join(bad)}")
        if m and np.any(self.edge_sources() >= self.succ_idx):
            raise InvalidGraphError("edges must point forward (u < v); build graphs with build_graph")
        if np.any(np.isnan(self.compute_time)) or np.any(self.compute_time < 0):
            raise InvalidGraphError("compute_time must be >= 0 (inf = unsupported), got NaN or < 0")
        if not np.all(np.isfinite(self.memory_bytes)) or np.any(self.memory_bytes < 0):
            raise InvalidGraphError("memory_bytes must be finite and >= 0")
        if not np.all(np.isfinite(self.edge_cost)) or np.any(self.edge_cost < 0):
            raise InvalidGraphError("edge_cost must be finite and >= 0")
        self._check_phase2_arrays()

    def _check_phase2_arrays(self) -> None:
        n = self.n_nodes
        if self.memory_class is not None and (
            np.any(self.memory_class < 0) or np.any(self.memory_class >= len(MEMORY_CLASSES))
        ):
            raise InvalidGraphError(f"memory_class codes must lie in 0..{len(MEMORY_CLASSES) - 1}")
        for name in ("param_bytes", "output_bytes"):
            arr = getattr(self, name)
            if arr is not None and (not np.all(np.isfinite(arr)) or np.any(arr < 0)):
                raise InvalidGraphError(f"{name} must be finite and >= 0")
        if self.pin is not None and (
            np.any(self.pin < NO_PIN) or np.any(self.pin >= len(self.device_kinds))
        ):
            raise InvalidGraphError(
                f"pin must be -1 or a device-kind index below {len(self.device_kinds)}"
            )
        if self.forward_of is not None and (
            np.any(self.forward_of < NO_FORWARD) or np.any(self.forward_of >= n)
        ):
            raise InvalidGraphError("forward_of must be -1 or a node index")

    # -- sizes and adjacency -------------------------------------------------------------
    @property
    def n_nodes(self) -> int:
        return int(self.succ_ptr.shape[0] - 1)

    @property
    def n_edges(self) -> int:
        return int(self.succ_idx.shape[0])

    def successors(self, v: int) -> Int32Array:
        return self.succ_idx[self.succ_ptr[v] : self.succ_ptr[v + 1]]

    def predecessors(self, v: int) -> Int32Array:
        return self.pred_idx[self.pred_ptr[v] : self.pred_ptr[v + 1]]

    def edge_sources(self) -> IntArray:
        """Source node of every edge, aligned with ``succ_idx``."""
        return np.repeat(np.arange(self.n_nodes, dtype=np.int64), np.diff(self.succ_ptr))

    def out_degree(self) -> IntArray:
        return np.diff(self.succ_ptr)

    def in_degree(self) -> IntArray:
        return np.diff(self.pred_ptr)

    # -- costs ---------------------------------------------------------------------------
    def time_on(self, kind: str) -> FloatArray:
        """Compute time of every node on a device of ``kind``."""
        try:
            col = self.device_kinds.index(kind)
        except ValueError:
            raise UsageError(
                f"unknown device kind {kind!r}; this graph has {list(self.device_kinds)}"
            ) from None
        return self.compute_time[:, col]

    def node_out_cost(self) -> tuple[FloatArray, BoolArray]:
        """Per-node transfer cost ``c_u`` and a mask of nodes whose out-edges agree on it.

        Nodes without out-edges get cost 0. Where out-edges disagree (``uniform`` False) the
        cost is the maximum; the evaluator then charges those edges one by one, which is what
        the edge subdivision of paper 1, appendix B amounts to.
        """
        n = self.n_nodes
        src = self.edge_sources()
        hi = np.zeros(n)
        lo = np.full(n, np.inf)
        np.maximum.at(hi, src, self.edge_cost)
        np.minimum.at(lo, src, self.edge_cost)
        uniform = (hi == lo) | (self.out_degree() == 0)
        return hi, uniform

    # -- phase-2 arrays with their defaults ------------------------------------------------
    def memory_classes(self) -> Int8Array:
        """Memory class code per node (:data:`MEMORY_CLASSES`); all ``normal`` when absent."""
        if self.memory_class is None:
            return np.zeros(self.n_nodes, np.int8)
        return self.memory_class

    def node_param_bytes(self) -> FloatArray:
        """Residual bytes per node; zeros when absent."""
        return np.zeros(self.n_nodes) if self.param_bytes is None else self.param_bytes

    def node_output_bytes(self) -> FloatArray:
        """Output activation bytes per node; ``memory_bytes`` when absent."""
        return self.memory_bytes if self.output_bytes is None else self.output_bytes

    def pins(self) -> Int8Array:
        """Device-kind index each node is pinned to, :data:`NO_PIN` where free."""
        return np.full(self.n_nodes, NO_PIN, np.int8) if self.pin is None else self.pin

    def forward_ops(self) -> IntArray:
        """Forward op each node differentiates, :data:`NO_FORWARD` where none."""
        if self.forward_of is None:
            return np.full(self.n_nodes, NO_FORWARD, np.int64)
        return self.forward_of

    @property
    def is_training(self) -> bool:
        return bool(self.is_backward.any())

    # -- ids -----------------------------------------------------------------------------
    def index_of(self, original_ids: Sequence[int] | IntArray) -> IntArray:
        """Map original ids to node indices; raises ``KeyError`` naming an unknown id."""
        ids = np.asarray(original_ids, dtype=np.int64)
        order = np.argsort(self.original_ids, kind="stable")
        sorted_ids = self.original_ids[order]
        pos = np.searchsorted(sorted_ids, ids)
        pos = np.minimum(pos, max(len(sorted_ids) - 1, 0))
        found = (len(sorted_ids) > 0) & (sorted_ids[pos] == ids)
        if not np.all(found):
            missing = ids[~found]
            raise UnknownIdError(f"unknown node id {int(missing[0])} ({missing.size} unknown in all)")
        return order[pos].astype(np.int64)

    def label(self, v: int) -> str:
        """Human-readable label of node ``v``: its name and original id."""
        name, oid = self.names[v], int(self.original_ids[v])
        return f"{name} (id {oid})" if name != str(oid) else f"id {oid}"


def build_graph(
    node_ids: Sequence[int] | IntArray,
    edge_src: Sequence[int] | IntArray,
    edge_dst: Sequence[int] | IntArray,
    *,
    compute_time: npt.ArrayLike,
    edge_cost: npt.ArrayLike,
    memory_bytes: npt.ArrayLike | None = None,
    edge_bytes: npt.ArrayLike | None = None,
    is_backward: npt.ArrayLike | None = None,
    color_class: npt.ArrayLike | None = None,
    layer_id: npt.ArrayLike | None = None,
    names: Sequence[str] | None = None,
    op_types: Sequence[str] | None = None,
    device_kinds: tuple[str, ...] = DEVICE_KINDS,
    duplicate_edges: str = "error",
    memory_class: npt.ArrayLike | None = None,
    param_bytes: npt.ArrayLike | None = None,
    output_bytes: npt.ArrayLike | None = None,
    pin: npt.ArrayLike | None = None,
    forward_of: npt.ArrayLike | None = None,
    module_paths: Sequence[str] | None = None,
    layer_attrs: LayerAttrs | None = None,
) -> Graph:
    """Validate node/edge arrays given with original ids and build a topological :class:`Graph`.

    Parameters
    ----------
    node_ids : original id of each node (unique integers).
    edge_src, edge_dst : original ids of each edge's endpoints.
    compute_time : ``(n, len(device_kinds))`` time per device kind, ``inf`` = unsupported.
    edge_cost : per-edge transfer time at the reference link.
    duplicate_edges : ``"error"`` (default) or ``"sum"`` (merge parallel edges, adding costs
        and bytes, as when two tensors flow between the same pair of operators).
    memory_class, param_bytes, output_bytes, pin, module_paths, layer_attrs : optional
        phase-2 arrays in input order (see :class:`Graph`); ``None`` leaves them absent.
    forward_of : optional original id of the forward op each node differentiates, ``-1``
        for none; stored as node indices.

    Raises
    ------
    InvalidGraphError
        Duplicate ids, unknown endpoints, self-loops, cycles (naming a node on the cycle),
        negative or NaN costs, an empty graph.

    Examples
    --------
    >>> g = build_graph([10, 20], [10], [20], compute_time=[[1, 1], [2, 1]], edge_cost=[0.5])
    >>> g.original_ids.tolist(), g.edge_cost.tolist()
    ([10, 20], [0.5])
    """
    ids = np.asarray(node_ids, dtype=np.int64).reshape(-1)
    n = ids.shape[0]
    if n == 0:
        raise InvalidGraphError("the graph has no nodes")
    src_ids = np.asarray(edge_src, dtype=np.int64).reshape(-1)
    dst_ids = np.asarray(edge_dst, dtype=np.int64).reshape(-1)
    m = src_ids.shape[0]
    if dst_ids.shape[0] != m:
        raise InvalidGraphError("edge_src and edge_dst differ in length")

    names_t = tuple(str(i) for i in ids) if names is None else tuple(names)
    time = _float_array("compute_time", compute_time, (n, len(device_kinds)), names_t, ids)
    if np.any(np.isnan(time)) or np.any(time < 0):
        bad = int(np.argwhere(np.isnan(time) | (time < 0))[0, 0])
        raise InvalidGraphError(
            f"node {names_t[bad]} (id {ids[bad]}): compute time must be >= 0, got "
            f"{time[bad].tolist()}"
        )
    mem = _float_array("memory_bytes", memory_bytes, (n,), names_t, ids, default=0.0)
    _check_finite_nonneg("memory_bytes", mem, names_t, ids)
    cost = _float_array("edge_cost", edge_cost, (m,), None, None)
    ebytes = _float_array("edge_bytes", edge_bytes, (m,), None, None, default=np.nan)
    bad_cost = ~np.isfinite(cost) | (cost < 0)
    if np.any(bad_cost):
        e = int(np.argmax(bad_cost))
        raise InvalidGraphError(
            f"edge {src_ids[e]} -> {dst_ids[e]}: cost must be finite and >= 0, got {cost[e]}"
        )

    # original ids -> input positions
    order = np.argsort(ids, kind="stable")
    sorted_ids = ids[order]
    dup = np.flatnonzero(sorted_ids[1:] == sorted_ids[:-1])
    if dup.size:
        raise InvalidGraphError(f"duplicate node id {int(sorted_ids[dup[0]])}")
    src = _lookup(sorted_ids, order, src_ids, "source")
    dst = _lookup(sorted_ids, order, dst_ids, "target")
    loops = np.flatnonzero(src == dst)
    if loops.size:
        raise InvalidGraphError(f"self-loop on node id {int(src_ids[loops[0]])} (a cycle)")

    # topological renumbering (Kahn, stable in input order)
    from dnnpart.graph.kernels import kahn_order

    ptr, idx, _ = _csr(n, src, dst)
    topo, count = kahn_order(n, ptr, idx)
    if count < n:
        on_cycle = _node_on_cycle(n, src, dst, topo[:count])
        raise InvalidGraphError(
            f"the graph has a cycle through node {names_t[on_cycle]} (id {ids[on_cycle]})"
        )
    new_of_old = np.empty(n, np.int64)
    new_of_old[topo] = np.arange(n)
    src_new, dst_new = new_of_old[src], new_of_old[dst]

    # sort edges by (src, dst), detect parallel edges
    e_order = np.lexsort((dst_new, src_new))
    src_new, dst_new = src_new[e_order], dst_new[e_order]
    cost, ebytes = cost[e_order], ebytes[e_order]
    same = (src_new[1:] == src_new[:-1]) & (dst_new[1:] == dst_new[:-1])
    if np.any(same):
        if duplicate_edges != "sum":
            e = int(np.argmax(same))
            a, b = ids[topo[src_new[e]]], ids[topo[dst_new[e]]]
            raise InvalidGraphError(f"duplicate edge {a} -> {b}")
        keep = np.concatenate(([True], ~same))
        group = np.cumsum(keep) - 1
        cost = np.bincount(group, weights=cost).astype(np.float64)
        # nan stays nan when any part is unknown
        ebytes = np.bincount(group, weights=ebytes).astype(np.float64)
        src_new, dst_new = src_new[keep], dst_new[keep]

    succ_ptr, succ_idx, _ = _csr(n, src_new, dst_new, presorted=True)
    pred_ptr, pred_idx, pred_edge = _csr(n, dst_new, src_new)

    def permuted(values: npt.ArrayLike | None, fill: object, dtype: type) -> npt.NDArray[Any]:
        if values is None:
            return np.full(n, fill, dtype=dtype)
        arr: npt.NDArray[Any] = np.asarray(values, dtype=dtype).reshape(-1)
        if arr.shape[0] != n:
            raise InvalidGraphError(f"expected {n} node values, got {arr.shape[0]}")
        result: npt.NDArray[Any] = arr[topo]
        return result

    forward_idx: IntArray | None = None
    if forward_of is not None:
        fwd_ids = np.asarray(forward_of, dtype=np.int64).reshape(-1)
        if fwd_ids.shape[0] != n:
            raise InvalidGraphError(f"forward_of: expected {n} values, got {fwd_ids.shape[0]}")
        has = fwd_ids != NO_FORWARD
        forward_idx = np.full(n, NO_FORWARD, np.int64)
        if np.any(has):
            forward_idx[has] = new_of_old[_lookup(sorted_ids, order, fwd_ids[has], "forward_of")]
        forward_idx = forward_idx[topo]

    def optional(values: npt.ArrayLike | None, dtype: type) -> npt.NDArray[Any] | None:
        return None if values is None else permuted(values, 0, dtype)

    return Graph(
        succ_ptr=succ_ptr,
        succ_idx=succ_idx.astype(np.int32),
        pred_ptr=pred_ptr,
        pred_idx=pred_idx.astype(np.int32),
        pred_edge=pred_edge,
        edge_cost=cost,
        edge_bytes=ebytes,
        compute_time=time[topo],
        memory_bytes=mem[topo],
        is_backward=permuted(is_backward, False, np.bool_),
        color_class=permuted(color_class, NO_CLASS, np.int64),
        layer_id=permuted(layer_id, NO_CLASS, np.int64),
        original_ids=ids[topo],
        names=tuple(names_t[i] for i in topo),
        op_types=None if op_types is None else tuple(op_types[i] for i in topo),
        device_kinds=device_kinds,
        memory_class=optional(memory_class, np.int8),
        param_bytes=optional(param_bytes, np.float64),
        output_bytes=optional(output_bytes, np.float64),
        pin=optional(pin, np.int8),
        forward_of=forward_idx,
        module_paths=None if module_paths is None else tuple(module_paths[i] for i in topo),
        layer_attrs=None if layer_attrs is None else _checked_layers(layer_attrs, n).take(topo),
    )


def _checked_layers(attrs: LayerAttrs, n: int) -> LayerAttrs:
    if attrs.n_nodes != n:
        raise InvalidGraphError(f"layer_attrs: expected {n} nodes, got {attrs.n_nodes}")
    return attrs


def _float_array(
    field: str,
    values: npt.ArrayLike | None,
    shape: tuple[int, ...],
    names: tuple[str, ...] | None,
    ids: IntArray | None,
    default: float | None = None,
) -> FloatArray:
    if values is None:
        if default is None:
            raise InvalidGraphError(f"{field} is required")
        return np.full(shape, default, dtype=np.float64)
    try:
        arr = np.asarray(values, dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise InvalidGraphError(f"{field}: expected numbers ({exc})") from exc
    if arr.shape != shape:
        if arr.size == int(np.prod(shape)):
            arr = arr.reshape(shape)
        else:
            raise InvalidGraphError(f"{field}: expected shape {shape}, got {arr.shape}")
    return arr


def _check_finite_nonneg(
    field: str, arr: FloatArray, names: tuple[str, ...], ids: IntArray
) -> None:
    bad = ~np.isfinite(arr) | (arr < 0)
    if np.any(bad):
        i = int(np.argmax(bad))
        raise InvalidGraphError(
            f"node {names[i]} (id {ids[i]}): {field} must be finite and >= 0, got {arr[i]}"
        )


def _lookup(sorted_ids: IntArray, order: IntArray, query: IntArray, role: str) -> IntArray:
    if query.size == 0:
        return query.copy()
    pos = np.minimum(np.searchsorted(sorted_ids, query), sorted_ids.shape[0] - 1)
    ok = sorted_ids[pos] == query
    if not np.all(ok):
        e = int(np.argmin(ok))
        raise InvalidGraphError(f"edges[{e}]: {role} id {int(query[e])} is not a node id")
    result: IntArray = order[pos].astype(np.int64)
    return result


def _csr(
    n: int, src: IntArray, dst: IntArray, presorted: bool = False
) -> tuple[IntArray, IntArray, IntArray]:
    """CSR of edges grouped by ``src``; also returns the permutation applied to the edges."""
    perm = np.arange(src.shape[0]) if presorted else np.lexsort((dst, src))
    ptr = np.zeros(n + 1, np.int64)
    np.cumsum(np.bincount(src, minlength=n), out=ptr[1:])
    return ptr, dst[perm].astype(np.int64), perm.astype(np.int64)


def _node_on_cycle(n: int, src: IntArray, dst: IntArray, done: IntArray) -> int:
    """Return a node lying on a cycle among the nodes Kahn's algorithm could not order."""
    left = np.ones(n, bool)
    left[done] = False
    pred_ptr, pred_idx, _ = _csr(n, dst, src)
    v = int(np.argmax(left))
    seen: set[int] = set()
    # Every node Kahn left behind still has a predecessor that was left behind; walking
    # such predecessors must revisit a node, and the first revisited node lies on a cycle.
    while v not in seen:
        seen.add(v)
        v = next(int(u) for u in pred_idx[pred_ptr[v] : pred_ptr[v + 1]] if left[u])
    return v
