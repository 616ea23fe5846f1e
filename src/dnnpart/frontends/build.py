"""Price a :class:`~dnnpart.frontends.ir.ModelIR` into a graph (nodes = operators, edges = tensors)."""

from __future__ import annotations

import logging
import warnings
from collections import Counter
from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt

from dnnpart.cost.model import CostModel
from dnnpart.cost.ops import Work, operator_work
from dnnpart.errors import UsageError
from dnnpart.frontends.ir import ModelIR, layer_key, top_level
from dnnpart.graph.core import Graph, LayerAttrs, build_graph
from dnnpart.graph.training import add_backward_pass

FloatArray = npt.NDArray[np.float64]
logger = logging.getLogger(__name__)

#: Backward operators run about twice as long as forward ones (gradients with respect to the
#: input and to the weights, each about one forward pass of work).
BACKWARD_FACTOR = 2.0


class UnknownOperatorWarning(UserWarning):
    """Some operator types are not in the cost model; they were priced by bytes moved only."""


@dataclass(frozen=True, slots=True, kw_only=True, eq=False)
class ImportedModel:
    """A priced graph and what it came from.

    Attributes
    ----------
    graph : the priced graph (times in ms); the forward node with original id ``i`` is
        ``ir.ops[i]`` (and has its name).
    ir : the operators it was built from.
    flops, bytes_moved : per forward operator, in ``ir.ops`` order (per graph node for an
        ``autograd`` graph).
    unknown_ops : operator types priced by bytes only, with their counts.
    cost_model : the pricing used.
    measured : whether the CPU column holds measured times (profiling) instead of estimates.
    """

    graph: Graph
    ir: ModelIR
    flops: FloatArray
    bytes_moved: FloatArray
    cost_model: CostModel
    unknown_ops: dict[str, int] = field(default_factory=dict)
    measured: bool = False
    #: the graph is a real autograd training graph (``flops`` then has one entry per graph
    #: node, in node order) rather than ``ir.ops`` priced and perhaps mirrored
    autograd: bool = False
    #: backward nodes of an autograd graph whose forward op could not be identified
    orphans: tuple[str, ...] = ()
    #: ``--granularity module``: graph node name -> the operator names it stands for
    members: dict[str, tuple[str, ...]] | None = None

    @property
    def total_flops(self) -> float:
        return float(self.flops.sum())

    @property
    def n_operators(self) -> int:
        return len(self.ir.ops)

    def module_paths(self) -> list[str]:
        """Module path of every forward operator, in ``ir.ops`` order."""
        return [op.module_path for op in self.ir.ops]


def op_works(ir: ModelIR) -> tuple[list[Work], dict[str, int]]:
    """Work of each operator and the unknown operator types (with counts)."""
    works = [operator_work(op.spec) for op in ir.ops]
    unknown = Counter(op.source_type for op, w in zip(ir.ops, works, strict=True) if not w.known)
    return works, dict(unknown)


def layer_attributes(ir: ModelIR) -> LayerAttrs:
    """Op kind (the source's type), output shape, kernel/stride/padding of every operator."""

    def ints(value: object) -> tuple[int, ...]:
        return tuple(int(v) for v in value) if isinstance(value, (tuple, list)) else ()

    return LayerAttrs(
        kind=tuple(op.source_type for op in ir.ops),
        output_shape=tuple(op.spec.output_shapes[0] if op.spec.output_shapes else () for op in ir.ops),
        kernel=tuple(ints(op.spec.attrs.get("kernel")) for op in ir.ops),
        stride=tuple(ints(op.spec.attrs.get("stride")) for op in ir.ops),
        padding=tuple(ints(op.spec.attrs.get("padding")) for op in ir.ops),
    )


def price_model(
    ir: ModelIR,
    cost_model: CostModel,
    *,
    training: bool = False,
    cpu_times_ms: npt.ArrayLike | None = None,
) -> ImportedModel:
    """Build the priced graph of ``ir``.

    Nodes are the operators (original id = position in ``ir.ops``, name = source name,
    layer id = index of the top-level module); an edge ``u -> v`` carries every tensor ``u``
    produces that ``v`` reads (bytes summed), priced on the cost model's host link. A node's
    memory is its parameters plus its outputs. Unknown operator types are priced by bytes
    moved and listed in an :class:`UnknownOperatorWarning`.

    With ``training`` the backward pass is mirrored (:func:`~dnnpart.graph.training.add_backward_pass`,
    ``2x`` forward time): each forward node keeps its output stashed until its colocated
    gradient node runs (already counted in its memory), and each gradient node holds
    gradients of its parameters and of its output (``weight_bytes + output_bytes``).

    ``cpu_times_ms`` replaces the CPU column with measured times (see ``profile``).
    """
    works, unknown = op_works(ir)
    if unknown:
        listing = ", ".join(f"{t} (x{n})" for t, n in sorted(unknown.items()))
        warnings.warn(
            f"{ir.name}: no cost formula for operator type(s) {listing}; they are priced by the "
            "bytes they move only",
            UnknownOperatorWarning,
            stacklevel=2,
        )
    n = len(ir.ops)
    if n == 0:
        from dnnpart.errors import FormatError

        raise FormatError(f"{ir.name}: the model has no operators")
    times = cost_model.compute_times_ms(works)
    measured = cpu_times_ms is not None
    if cpu_times_ms is not None:
        cpu = np.asarray(cpu_times_ms, dtype=np.float64).reshape(-1)
        if cpu.shape != (n,):
            raise UsageError(f"cpu_times_ms: expected {n} values, got {cpu.shape[0]}")
        times[:, 0] = cpu

    producer: dict[str, int] = {}
    for i, op in enumerate(ir.ops):
        for value in op.outputs:
            producer[value] = i
    src: list[int] = []
    dst: list[int] = []
    nbytes: list[float] = []
    for j, op in enumerate(ir.ops):
        for value in dict.fromkeys(op.inputs):  # a tensor read twice crosses once
            source_op = producer.get(value)
            if source_op is not None and source_op != j:
                src.append(source_op)
                dst.append(j)
                nbytes.append(float(ir.value_bytes.get(value, 0.0)))
    # captures measure fp32 tensors; a lower --precision stores them narrower
    scale = cost_model.bytes_factor
    weight = np.array([op.weight_bytes for op in ir.ops], dtype=np.float64) * scale
    output = np.array([op.output_bytes for op in ir.ops], dtype=np.float64) * scale
    layer_names: dict[str, int] = {}
    # export graphs name deep paths ("transformer.h.3.attn"): a layer is a numbered block
    key = layer_key if ir.source == "export" else top_level
    layers = [
        layer_names.setdefault(key(op.module_path), len(layer_names)) if op.module_path else -1
        for op in ir.ops
    ]
    graph = build_graph(
        np.arange(n),
        src,
        dst,
        compute_time=times,
        edge_cost=cost_model.edge_costs_ms(nbytes) if nbytes else np.zeros(0),
        memory_bytes=weight + output,
        edge_bytes=np.asarray(nbytes, dtype=np.float64) * scale,
        layer_id=layers,
        names=[op.name for op in ir.ops],
        op_types=[op.op_type for op in ir.ops],
        duplicate_edges="sum",
        param_bytes=weight,
        output_bytes=output,
        module_paths=[op.module_path for op in ir.ops],
        layer_attrs=layer_attributes(ir),
    )
    if training:
        # build_graph renumbers topologically; ir.ops is topological, so the order is kept.
        graph = add_backward_pass(
            graph,
            backward_factor=BACKWARD_FACTOR,
            backward_memory_bytes=(weight + output)[graph.original_ids],
        )
    flops = np.array([w.flops for w in works], dtype=np.float64)
    moved = np.array([w.bytes_moved for w in works], dtype=np.float64)
    logger.info(
        "%s: %d operators, %.3g GFLOPs, %d unknown types", ir.name, n, flops.sum() / 1e9, len(unknown)
    )
    return ImportedModel(
        graph=graph,
        ir=ir,
        flops=flops,
        bytes_moved=moved,
        cost_model=cost_model,
        unknown_ops=unknown,
        measured=measured,
    )


def by_module(imported: ImportedModel) -> ImportedModel:
    """One node per run of consecutive operators called from the same module (``--granularity
    module``), via :func:`dnnpart.graph.contract.contract_intervals`; ``members`` records which
    operators each node stands for (so plans still map onto the captured program).
    """
    from dataclasses import replace

    from dnnpart.graph.contract import consecutive_groups, contract_intervals

    g = imported.graph
    paths = g.module_paths or ("",) * g.n_nodes
    group = consecutive_groups(list(paths))
    contracted = contract_intervals(g, group)
    members: dict[str, list[str]] = {}
    first_name = [contracted.names[int(k)] for k in group]
    for v in range(g.n_nodes):
        members.setdefault(first_name[v], []).append(g.names[v])
    flops = imported.flops
    if imported.autograd:
        flops = np.bincount(group, weights=imported.flops, minlength=contracted.n_nodes).astype(np.float64)
    return replace(
        imported, graph=contracted, flops=flops, members={k: tuple(v) for k, v in members.items()}
    )
