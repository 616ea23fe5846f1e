"""torch.fx frontend: trace an ``nn.Module`` with example inputs into a priced graph.

The module is traced symbolically (``torch.fx``), shapes are propagated by running it once on
the example inputs (``ShapeProp``), and every ``call_module`` / ``call_function`` /
``call_method`` node becomes an operator; placeholders and outputs are the model's inputs and
outputs, ``get_attr`` nodes (parameters, buffers, constants) count as their consumers'
parameters. Every operator keeps its fx node name (so a plan maps back onto the traced
program, see :mod:`dnnpart.export`) and the path of the module it was called from.
"""

from __future__ import annotations

import operator
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from dnnpart._optional import require
from dnnpart.cost.model import CostModel
from dnnpart.cost.ops import META_OPS, OpSpec, canonical_op
from dnnpart.errors import FormatError
from dnnpart.frontends.build import ImportedModel, price_model
from dnnpart.frontends.ir import ModelIR, OpRecord

if TYPE_CHECKING:
    import torch
    from torch import fx

PATH_KEY = "dnnpart_module_path"
#: Bytes charged for a non-tensor value (a shape, an int) crossing an edge.
SCALAR_BYTES = 8.0

_OPERATOR_NAMES = {
    operator.add: "add",
    operator.iadd: "add",
    operator.sub: "sub",
    operator.mul: "mul",
    operator.truediv: "div",
    operator.floordiv: "div",
    operator.matmul: "matmul",
    operator.getitem: "getitem",
    operator.neg: "neg",
    operator.pow: "pow",
}

TRACE_HINT = (
    "models with data-dependent control flow or other untraceable Python cannot be traced "
    "symbolically; export the model to ONNX (torch.onnx.export(model, example_inputs, "
    "'model.onnx')) and import the .onnx file instead"
)


def trace(module: torch.nn.Module, example_inputs: Sequence[Any], *, name: str = "") -> fx.GraphModule:
    """Symbolically trace ``module`` and annotate every node with shapes and module path.

    Raises
    ------
    FormatError
        The module cannot be traced or does not run on the example inputs; the message
        suggests the ONNX route.
    """
    require("torch", extra="torch", caller="the torch.fx frontend")
    from torch import fx
    from torch.fx.passes.shape_prop import ShapeProp

    label = name or type(module).__name__
    tracer = _make_tracer_class()()
    try:
        graph = tracer.trace(module)
    except Exception as exc:  # torch.fx raises TraceError, TypeError, NotImplementedError, ...
        raise FormatError(f"{label}: torch.fx could not trace the module ({exc}); {TRACE_HINT}") from None
    gm = fx.GraphModule(tracer.root, graph, label)
    try:
        ShapeProp(gm).propagate(*example_inputs)
    except Exception as exc:
        raise FormatError(
            f"{label}: running the traced module on inputs of shape "
            f"{[tuple(getattr(x, 'shape', ())) for x in example_inputs]} failed ({exc}); "
            "check --input-shape / --input-dtype"
        ) from None
    return gm


def _make_tracer_class() -> type:
    from torch import fx

    class PathTracer(fx.Tracer):
        """Records, on every node, the path of the module being called when it was created."""

        def __init__(self) -> None:
            super().__init__()
            self._paths: list[str] = [""]

        def call_module(self, m: Any, forward: Any, args: Any, kwargs: Any) -> Any:
            self._paths.append(self.path_of_module(m))
            try:
                return super().call_module(m, forward, args, kwargs)
            finally:
                self._paths.pop()

        def create_node(self, *args: Any, **kwargs: Any) -> Any:
            node = super().create_node(*args, **kwargs)
            node.meta[PATH_KEY] = self._paths[-1]
            return node

    return PathTracer


def import_module(
    module: torch.nn.Module,
    example_inputs: Sequence[Any],
    *,
    cost_model: CostModel | None = None,
    training: bool = False,
    name: str = "",
) -> ImportedModel:
    """Trace ``module`` on ``example_inputs`` and price it.

    Examples
    --------
    >>> import pytest; torch = pytest.importorskip("torch")
    >>> model = torch.nn.Sequential(torch.nn.Linear(8, 4), torch.nn.ReLU())
    >>> imported = import_module(model, (torch.randn(2, 8),))
    >>> imported.graph.names, imported.total_flops  # 2x4 outputs x 2x8 + 8 bias adds + 8 ReLUs
    (('_0', '_1'), 144.0)
    """
    gm = trace(module, example_inputs, name=name)
    ir = module_ir(gm, name=name or type(module).__name__)
    return price_model(ir, cost_model or CostModel.from_presets(), training=training)


def module_ir(gm: fx.GraphModule, *, name: str) -> ModelIR:
    """The operators of a traced, shape-propagated module."""
    import torch

    ir = ModelIR(name=name, source="fx")
    constants: dict[str, tuple[int, ...]] = {}
    const_bytes: dict[str, float] = {}
    inputs: list[str] = []
    outputs: list[str] = []
    for node in gm.graph.nodes:
        metas = _tensor_metas(node)
        if node.op == "placeholder":
            inputs.append(node.name)
            ir.value_bytes[node.name] = _bytes(metas)
            continue
        if node.op == "get_attr":
            value = _fetch_attr(gm, str(node.target))
            if isinstance(value, torch.Tensor):
                constants[node.name] = tuple(value.shape)
                const_bytes[node.name] = float(value.numel() * value.element_size())
            else:
                constants[node.name] = ()
                const_bytes[node.name] = 0.0
            continue
        if node.op == "output":
            outputs.extend(a.name for a in _arg_nodes(node))
            continue
        args = _arg_nodes(node)
        act = [a for a in args if a.name not in constants]
        consts = [a for a in args if a.name in constants]
        weight_shapes = [constants[a.name] for a in consts]
        weight_bytes = sum(const_bytes[a.name] for a in consts)
        if node.op == "call_module":
            sub = gm.get_submodule(str(node.target))
            source_type = type(sub).__name__
            for p in list(sub.parameters()) + list(sub.buffers()):
                weight_shapes.append(tuple(p.shape))
                weight_bytes += float(p.numel() * p.element_size())
        elif node.op == "call_function":
            source_type = _OPERATOR_NAMES.get(node.target, getattr(node.target, "__name__", str(node.target)))
        else:  # call_method
            source_type = str(node.target)
        op_type = canonical_op(source_type)
        if not metas and op_type not in META_OPS:
            op_type = "shape"  # shape arithmetic, tuple access: no tensor, no cost
        out_bytes = _bytes(metas) if metas else SCALAR_BYTES
        ir.value_bytes[node.name] = out_bytes
        itemsize = metas[0].dtype.itemsize if metas else 4
        in_shapes = tuple(tuple(m.shape) for a in act for m in _tensor_metas(a))
        attrs: dict[str, Any] = {}
        if node.op == "call_module" and op_type in ("maxpool", "avgpool", "conv"):
            rank = max(len(in_shapes[0]) - 2, 1) if in_shapes else 1
            for key, name in (("kernel_size", "kernel"), ("stride", "stride"), ("padding", "padding"),
                              ("dilation", "dilation")):
                value = getattr(sub, key, None)
                if isinstance(value, int):
                    attrs[name] = (value,) * rank
                elif isinstance(value, (tuple, list)) and all(isinstance(v, int) for v in value):
                    attrs[name] = tuple(value)  # a string padding ('same') is left out
            if op_type == "conv":
                attrs["groups"] = int(getattr(sub, "groups", 1))
        spec = OpSpec(
            op_type=op_type,
            input_shapes=in_shapes,
            output_shapes=tuple(tuple(m.shape) for m in metas),
            weight_shapes=tuple(weight_shapes),
            itemsize=itemsize,
            attrs=attrs,
        )
        path = str(node.target) if node.op == "call_module" else str(node.meta.get(PATH_KEY, ""))
        ir.ops.append(
            OpRecord(
                name=node.name,
                source_type=source_type,
                spec=spec,
                inputs=tuple(a.name for a in act),
                outputs=(node.name,),
                weight_bytes=weight_bytes,
                output_bytes=_bytes(metas),
                module_path=path,
            )
        )
    ir.graph_inputs = tuple(inputs)
    ir.graph_outputs = tuple(outputs)
    return ir


def _arg_nodes(node: fx.Node) -> list[fx.Node]:
    from torch import fx

    found: list[fx.Node] = []

    def collect(n: fx.Node) -> fx.Node:
        found.append(n)
        return n

    fx.node.map_arg((node.args, node.kwargs), collect)
    return list(dict.fromkeys(found))


def _tensor_metas(node: fx.Node) -> list[Any]:
    """Tensor metadata of a node's output(s) (flattening tuples); [] for non-tensors."""
    meta = node.meta.get("tensor_meta")
    out: list[Any] = []

    def walk(m: Any) -> None:
        if m is None:
            return
        if hasattr(m, "shape") and hasattr(m, "dtype"):
            out.append(m)
        elif isinstance(m, (list, tuple)):
            for x in m:
                walk(x)
        elif isinstance(m, dict):
            for x in m.values():
                walk(x)

    walk(meta)
    return out


def _bytes(metas: list[Any]) -> float:
    import math

    return float(sum(math.prod(m.shape) * m.dtype.itemsize for m in metas))


def _fetch_attr(gm: fx.GraphModule, target: str) -> Any:
    obj: Any = gm
    for part in target.split("."):
        obj = getattr(obj, part)
    return obj
