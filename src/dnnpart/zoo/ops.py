"""Operator lists: the model builders describe work in FLOPs and bytes, this turns it into a graph.

A model builder (:mod:`dnnpart.zoo.bert`, :mod:`dnnpart.zoo.resnet`) appends :class:`Op`
records to an :class:`OpGraph` in a topological order, naming each op's inputs. The op list
keeps the raw figures (FLOPs, weight and activation bytes), so tests and docs can check them
against published numbers; :meth:`OpGraph.to_graph` prices them with the analytic cost model
of :mod:`dnnpart.zoo.cost`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from dnnpart.errors import UsageError
from dnnpart.graph.core import DEVICE_KINDS, Graph, build_graph
from dnnpart.zoo.cost import (
    ACCELERATOR_PROFILE,
    BYTES_PER_ELEMENT,
    CPU_PROFILE,
    DeviceProfile,
    node_memory_bytes,
    transfer_time_ms,
)


@dataclass(frozen=True, slots=True)
class Op:
    """One operator (or layer) of a model.

    Attributes
    ----------
    name : unique name, e.g. ``"layer1.attention.q_matmul"``.
    op_type : operator type, e.g. ``"MatMul"``, ``"Conv"``.
    inputs : names of the ops whose outputs this op reads.
    flops : floating-point operations (mul and add counted separately).
    weight_bytes : bytes of weights/parameters (and buffers) the op owns.
    output_bytes : bytes of the op's output activation.
    bytes_moved : bytes read and written in device memory when the op runs.
    layer_id : layer annotation (see the model builders).
    """

    name: str
    op_type: str
    inputs: tuple[str, ...]
    flops: float
    weight_bytes: float
    output_bytes: float
    bytes_moved: float
    layer_id: int


class OpGraph:
    """An append-only list of :class:`Op` in topological order.

    Examples
    --------
    >>> ops = OpGraph()
    >>> x = ops.add("fc1", "MatMul", (), flops=2e6, weight_elements=1e6, output_elements=1e3)
    >>> y = ops.add("relu", "Relu", (x,), flops=1e3, output_elements=1e3)
    >>> g = ops.to_graph()
    >>> g.n_nodes, g.n_edges, g.op_types
    (2, 1, ('MatMul', 'Relu'))
    """

    def __init__(self) -> None:
        self.ops: list[Op] = []
        self._index: dict[str, int] = {}

    def __len__(self) -> int:
        return len(self.ops)

    def __getitem__(self, name: str) -> Op:
        return self.ops[self._index[name]]

    def add(
        self,
        name: str,
        op_type: str,
        inputs: Sequence[str],
        *,
        output_elements: float,
        flops: float = 0.0,
        weight_elements: float = 0.0,
        bytes_moved: float | None = None,
        layer_id: int = -1,
    ) -> str:
        """Append an op and return its name (to pass as a later op's input).

        ``bytes_moved`` defaults to reading every input and the weights once and writing the
        output once; ops that touch less (a view, a table lookup) pass their own figure.
        """
        if name in self._index:
            raise UsageError(f"duplicate op name {name!r}")
        unknown = [i for i in inputs if i not in self._index]
        if unknown:
            raise UsageError(f"op {name!r}: unknown input(s) {unknown}; add inputs first")
        weight_bytes = float(weight_elements) * BYTES_PER_ELEMENT
        output_bytes = float(output_elements) * BYTES_PER_ELEMENT
        if bytes_moved is None:
            bytes_moved = sum(self[i].output_bytes for i in inputs) + weight_bytes + output_bytes
        self._index[name] = len(self.ops)
        self.ops.append(
            Op(
                name=name,
                op_type=op_type,
                inputs=tuple(dict.fromkeys(inputs)),  # x + x reads one tensor: one edge
                flops=float(flops),
                weight_bytes=weight_bytes,
                output_bytes=output_bytes,
                bytes_moved=float(bytes_moved),
                layer_id=int(layer_id),
            )
        )
        return name

    # -- totals --------------------------------------------------------------------------
    def total_flops(self) -> float:
        """FLOPs of all ops (mul and add counted separately)."""
        return float(sum(op.flops for op in self.ops))

    def total_weight_bytes(self) -> float:
        return float(sum(op.weight_bytes for op in self.ops))

    def flops_by_type(self) -> dict[str, float]:
        """FLOPs per op type, e.g. to count only convolutions and matmuls."""
        out: dict[str, float] = {}
        for op in self.ops:
            out[op.op_type] = out.get(op.op_type, 0.0) + op.flops
        return out

    # -- graph ---------------------------------------------------------------------------
    def to_graph(
        self,
        *,
        accelerator: DeviceProfile = ACCELERATOR_PROFILE,
        cpu: DeviceProfile = CPU_PROFILE,
        host_bandwidth: float | None = None,
        training: bool = False,
        backward_factor: float = 2.0,
    ) -> Graph:
        """Price the ops with the roofline model and build the (training) graph.

        Node ``i`` is the ``i``-th op; edge ``u -> v`` carries ``u``'s output, priced at the
        host link (PCIe 3.0 x16 unless ``host_bandwidth`` is given). Times are in ms.
        ``training`` appends the mirrored backward pass
        (:func:`dnnpart.graph.training.add_backward_pass`).
        """
        if not self.ops:
            raise UsageError("no ops to build a graph from")
        flops = np.array([op.flops for op in self.ops])
        moved = np.array([op.bytes_moved for op in self.ops])
        weight = np.array([op.weight_bytes for op in self.ops])
        output = np.array([op.output_bytes for op in self.ops])
        times = np.empty((len(self.ops), len(DEVICE_KINDS)))
        times[:, DEVICE_KINDS.index("cpu")] = cpu.time_ms(flops, moved)
        times[:, DEVICE_KINDS.index("accelerator")] = accelerator.time_ms(flops, moved)

        src = np.array([self._index[i] for op in self.ops for i in op.inputs], dtype=np.int64)
        dst = np.array(
            [v for v, op in enumerate(self.ops) for _ in op.inputs], dtype=np.int64
        )
        edge_bytes = output[src]
        if host_bandwidth is None:
            edge_cost = transfer_time_ms(edge_bytes)
        else:
            edge_cost = transfer_time_ms(edge_bytes, host_bandwidth)

        graph = build_graph(
            np.arange(len(self.ops)),
            src,
            dst,
            compute_time=times,
            edge_cost=edge_cost,
            memory_bytes=node_memory_bytes(weight, output),
            edge_bytes=edge_bytes,
            layer_id=[op.layer_id for op in self.ops],
            names=[op.name for op in self.ops],
            op_types=[op.op_type for op in self.ops],
        )
        if training:
            from dnnpart.graph.training import add_backward_pass

            graph = add_backward_pass(graph, backward_factor=backward_factor)
        return graph
