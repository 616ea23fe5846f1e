"""Incremental construction of a :class:`~dnnpart.graph.core.Graph` (examples, frontends)."""

from __future__ import annotations

import math

import numpy as np

from dnnpart.errors import UsageError
from dnnpart.graph.core import DEVICE_KINDS, NO_CLASS, Graph, build_graph


class GraphBuilder:
    """Collect nodes and edges one at a time, then :meth:`build` a validated graph.

    Examples
    --------
    >>> b = GraphBuilder()
    >>> _ = b.add_node(1, cpu_time=4.0, acc_time=1.0, memory_bytes=1e6, name="conv1")
    >>> _ = b.add_node(2, cpu_time=4.0, acc_time=1.0, name="relu1")
    >>> b.add_edge(1, 2, cost=0.25)
    >>> b.build().names
    ('conv1', 'relu1')
    """

    def __init__(self, device_kinds: tuple[str, ...] = DEVICE_KINDS) -> None:
        self.device_kinds = device_kinds
        self._ids: list[int] = []
        self._names: list[str] = []
        self._times: list[tuple[float, ...]] = []
        self._memory: list[float] = []
        self._backward: list[bool] = []
        self._color: list[int] = []
        self._layer: list[int] = []
        self._op_types: list[str] = []
        self._src: list[int] = []
        self._dst: list[int] = []
        self._cost: list[float] = []
        self._bytes: list[float] = []

    def __len__(self) -> int:
        return len(self._ids)

    def add_node(
        self,
        node_id: int,
        *,
        cpu_time: float,
        acc_time: float = math.inf,
        memory_bytes: float = 0.0,
        is_backward: bool = False,
        color_class: int = NO_CLASS,
        layer_id: int = NO_CLASS,
        name: str | None = None,
        op_type: str = "",
    ) -> int:
        """Add a node; ``acc_time=inf`` marks it unsupported on accelerators."""
        if self.device_kinds != DEVICE_KINDS:
            raise UsageError("add_node(cpu_time=, acc_time=) needs the default device kinds")
        self._ids.append(int(node_id))
        self._names.append(str(node_id) if name is None else name)
        self._times.append((float(cpu_time), float(acc_time)))
        self._memory.append(float(memory_bytes))
        self._backward.append(bool(is_backward))
        self._color.append(int(color_class))
        self._layer.append(int(layer_id))
        self._op_types.append(op_type)
        return int(node_id)

    def add_edge(self, src: int, dst: int, *, cost: float, n_bytes: float = math.nan) -> None:
        """Add an edge ``src -> dst`` (original ids) with its transfer cost."""
        self._src.append(int(src))
        self._dst.append(int(dst))
        self._cost.append(float(cost))
        self._bytes.append(float(n_bytes))

    def build(self, *, duplicate_edges: str = "error") -> Graph:
        """Validate and build; see :func:`~dnnpart.graph.core.build_graph`."""
        return build_graph(
            self._ids,
            self._src,
            self._dst,
            compute_time=np.asarray(self._times, dtype=np.float64).reshape(len(self._ids), -1),
            edge_cost=self._cost,
            memory_bytes=self._memory,
            edge_bytes=self._bytes,
            is_backward=self._backward,
            color_class=self._color,
            layer_id=self._layer,
            names=self._names,
            op_types=self._op_types if any(self._op_types) else None,
            device_kinds=self.device_kinds,
            duplicate_edges=duplicate_edges,
        )
