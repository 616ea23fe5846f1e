"""``torch.export`` frontend: any ``nn.Module`` -> one operator per aten op.

``torch.export.export(module, inputs, strict=False)`` captures the module's forward as a graph
of aten operators whatever Python it runs (HuggingFace models included, where symbolic
``torch.fx`` tracing fails). Capture runs on fake tensors, so a model built on the meta device
is captured without allocating its weights. ``ExportedProgram.module()`` gives back an
``fx.GraphModule`` whose parameters are ``get_attr`` nodes; that module is what the partitioned
run (:mod:`dnnpart.export`) splits, so a plan maps onto it by node name.

Every ``call_function`` node becomes an operator carrying

* its aten op (``op_types`` is the canonical cost-model type, ``source_type`` the aten packet
  name, e.g. ``addmm``), output shapes and dtype (from the node's fake-tensor ``val``);
* its module path, the innermost entry of ``nn_module_stack`` (``transformer.h.3.attn``), with
  a wrapper prefix stripped (``strip_prefix``);
* the bytes of the parameters it reads; a parameter read by several operators (tied
  embeddings) is charged to the first only, so parameter bytes sum to the model's;
* layer attributes: op kind, output shape, and kernel/stride/padding of convolutions and
  pooling.

Graph inputs are placeholders, the output node lists the model outputs; ``_guards_fn`` (the
input-guard submodule export inserts) is removed, since it does no work and has no place on a
device.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from dnnpart._optional import require
from dnnpart.cost.ops import OpSpec, aten_op_name, canonical_op
from dnnpart.errors import FormatError
from dnnpart.frontends.ir import ModelIR, OpRecord

if TYPE_CHECKING:
    import torch
    from torch import fx

EXPORT_HINT = (
    "torch.export could not capture the model; check --input-shape/--input-dtype, or export it "
    "to ONNX and import the .onnx file"
)
_NOISY_LOGGERS = ("torch.fx.experimental.symbolic_shapes", "torch._subclasses.fake_tensor", "torch.export")
#: Bytes charged for a non-tensor value (a shape, an int) crossing an edge.
SCALAR_BYTES = 8.0


def export_graph_module(
    module: torch.nn.Module, example_inputs: Sequence[Any], *, name: str = ""
) -> fx.GraphModule:
    """Capture ``module`` with ``torch.export`` (non-strict) and return its graph module.

    Raises
    ------
    FormatError
        Export failed (the message carries torch's reason, shortened).
    """
    torch = require("torch", extra="torch", caller="the torch.export frontend")
    label = name or type(module).__name__
    quiet = [logging.getLogger(n) for n in _NOISY_LOGGERS]
    levels = [lg.level for lg in quiet]
    for lg in quiet:  # export logs its own failures; ours is the one-line error below
        lg.setLevel(logging.CRITICAL)
    try:
        program = torch.export.export(module, tuple(example_inputs), strict=False)
    except Exception as exc:  # export raises many types (UserError, RuntimeError, TypeError)
        reason = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise FormatError(f"{label}: {EXPORT_HINT} ({reason[:300]})") from None
    finally:
        for lg, level in zip(quiet, levels, strict=True):
            lg.setLevel(level)
    gm: fx.GraphModule = program.module()
    for node in list(gm.graph.nodes):
        if node.op == "call_module" and str(node.target) == "_guards_fn":
            gm.graph.erase_node(node)
    gm.graph.lint()
    gm.recompile()
    return gm


def tensor_vals(node: fx.Node) -> list[Any]:
    """Fake tensors of a node's output(s), flattened; [] for non-tensor results."""
    import torch

    out: list[Any] = []

    def walk(v: Any) -> None:
        if isinstance(v, torch.Tensor):
            out.append(v)
        elif isinstance(v, (list, tuple)):
            for x in v:
                walk(x)

    walk(node.meta.get("val"))
    return out


def _shape(t: Any) -> tuple[int, ...]:
    return tuple(int(d) for d in t.shape)


def _nbytes(vals: list[Any]) -> float:
    return float(sum(math.prod(_shape(t)) * t.element_size() for t in vals))


def module_path_of(node: fx.Node, strip_prefix: str = "") -> str:
    """Innermost ``nn_module_stack`` path of ``node`` (``""`` at the top level)."""
    stack = node.meta.get("nn_module_stack") or {}
    if not stack:
        return ""
    path = str(list(stack.values())[-1][0])
    if strip_prefix:
        if path == strip_prefix:
            return ""
        if path.startswith(strip_prefix + "."):
            return path[len(strip_prefix) + 1 :]
    return path


def export_ir(
    gm: fx.GraphModule,
    *,
    name: str,
    strip_prefix: str = "",
    parameter_nodes: frozenset[str] = frozenset(),
) -> ModelIR:
    """The operators of an exported graph module (see the module docstring).

    ``parameter_nodes`` names placeholders that hold parameters (a joint training graph lifts
    them to inputs): they count as parameters of their consumers, like ``get_attr`` nodes.
    """
    import torch

    ir = ModelIR(name=name, source="export")
    const_bytes: dict[str, float] = {}
    const_shape: dict[str, tuple[int, ...]] = {}
    charged: set[str] = set()
    inputs: list[str] = []
    outputs: list[str] = []
    for node in gm.graph.nodes:
        vals = tensor_vals(node)
        if node.op == "placeholder":
            if node.name in parameter_nodes:
                const_bytes[node.name] = _nbytes(vals)
                const_shape[node.name] = _shape(vals[0]) if vals else ()
            else:
                inputs.append(node.name)
                ir.value_bytes[node.name] = _nbytes(vals)
            continue
        if node.op == "get_attr":
            value = _fetch_attr(gm, str(node.target))
            if isinstance(value, torch.Tensor):
                const_bytes[node.name] = float(value.numel() * value.element_size())
                const_shape[node.name] = tuple(value.shape)
            else:
                const_bytes[node.name] = 0.0
                const_shape[node.name] = ()
            continue
        if node.op == "output":
            outputs.extend(a.name for a in node.all_input_nodes)
            continue
        if node.op != "call_function":
            raise FormatError(f"{name}: unexpected {node.op} node {node.name!r} in an exported graph")
        source_type = aten_op_name(node.target)
        args = list(dict.fromkeys(node.all_input_nodes))
        act = [a for a in args if a.name not in const_bytes]
        consts = [a for a in args if a.name in const_bytes]
        weight_bytes = 0.0
        for a in consts:
            if a.name not in charged:
                charged.add(a.name)
                weight_bytes += const_bytes[a.name]
        spec = aten_spec(node, source_type, vals, const_shape)
        out_bytes = _nbytes(vals)
        ir.value_bytes[node.name] = out_bytes if vals else SCALAR_BYTES
        ir.ops.append(
            OpRecord(
                name=node.name,
                source_type=source_type,
                spec=spec,
                inputs=tuple(a.name for a in act),
                outputs=(node.name,),
                weight_bytes=weight_bytes,
                output_bytes=out_bytes,
                module_path=module_path_of(node, strip_prefix),
            )
        )
    ir.graph_inputs = tuple(inputs)
    ir.graph_outputs = tuple(outputs)
    return ir


# aten ops whose reduction length (k of a matrix product) is the last dim of argument i
_MATMUL_K_ARG = {"mm": 0, "bmm": 0, "matmul": 0, "linear": 0, "addmm": 1, "baddbmm": 1, "addbmm": 1}
_CONV = frozenset({"convolution", "conv2d", "conv1d", "conv3d", "_convolution", "conv_transpose2d"})
_POOL = frozenset({"max_pool2d", "max_pool2d_with_indices", "avg_pool2d", "max_pool1d", "avg_pool1d"})


#: Argument positions of a matrix product's two operands ``A @ B``.
_MATMUL_OPERANDS = {"mm": (0, 1), "bmm": (0, 1), "matmul": (0, 1), "linear": (0, 1),
                    "addmm": (1, 2), "baddbmm": (1, 2), "addbmm": (1, 2)}


def _column_major(val: Any) -> bool:
    """Whether a tensor's last two dimensions are stored column by column (a transposed view)."""
    if val is None or val.dim() < 2 or val.shape[-1] < 2 or val.shape[-2] < 2:
        return False
    stride = val.stride()
    return bool(stride[-2] == 1 and stride[-1] != 1)


def matmul_layout(node: fx.Node, source_type: str) -> str:
    """Storage of a matrix product's operands ``A @ B``, from their fake tensors' strides:
    ``"nn"`` (both row-major), ``"nt"`` (``B`` transposed: ``x @ W.T``, a linear layer's
    forward), ``"tn"`` (``A`` transposed, ``B`` either: a weight gradient ``x.T @ g``); ``""``
    where the operands are unknown. ``linear(x, W)`` multiplies by ``W.T``, so a row-major
    ``W`` is a transposed ``B``. CPU kernels run these at different speeds (module
    :mod:`dnnpart.cost.ops`: the kinds of class ``matmul``)."""
    from torch import fx

    where = _MATMUL_OPERANDS.get(source_type)
    if where is None or len(node.args) <= max(where):
        return ""
    vals: list[Any] = []
    for k in where:
        arg = node.args[k]
        tv = tensor_vals(arg) if isinstance(arg, fx.Node) else []
        if not tv:
            return ""
        vals.append(tv[0])
    a_t, b_t = _column_major(vals[0]), _column_major(vals[1])
    if source_type == "linear":
        b_t = not b_t and vals[1].dim() == 2 and vals[1].shape[0] > 1 and vals[1].shape[1] > 1
    return "tn" if a_t else "nt" if b_t else "nn"


def channels_last(node: fx.Node, positions: Sequence[int]) -> bool:
    """Whether any 4-D tensor argument of ``node`` at ``positions`` is stored channels-last
    (``NHWC`` strides of an ``NCHW`` shape), from its fake tensor: a depthwise convolution's
    kernel on this layout runs two to three times as fast on a CPU (:mod:`dnnpart.cost.ops`).
    A gradient arriving through a ``permute`` from ``NHWC`` (a ConvNeXt block) has it."""
    import torch
    from torch import fx

    for k in positions:
        arg = node.args[k] if k < len(node.args) else None
        vals = tensor_vals(arg) if isinstance(arg, fx.Node) else []
        val = vals[0] if vals else None
        if (val is not None and val.dim() == 4 and val.shape[1] > 1 and val.shape[2] * val.shape[3] > 1
                and val.is_contiguous(memory_format=torch.channels_last) and not val.is_contiguous()):
            return True
    return False


def aten_spec(
    node: fx.Node, source_type: str, vals: list[Any], const_shape: dict[str, tuple[int, ...]]
) -> OpSpec:
    """Cost-model spec of one aten node (shapes from fake tensors)."""
    from torch import fx

    def shape_of(a: Any) -> tuple[int, ...] | None:
        if not isinstance(a, fx.Node):
            return None
        if a.name in const_shape:
            return const_shape[a.name]
        tv = tensor_vals(a)
        return _shape(tv[0]) if tv else None

    op_type = canonical_op(source_type)
    tensor_args = [a for a in node.all_input_nodes]
    act_shapes: list[tuple[int, ...]] = []
    weight_shapes: list[tuple[int, ...]] = []
    for a in dict.fromkeys(tensor_args):
        s = shape_of(a)
        if s is None:
            continue
        (weight_shapes if a.name in const_shape else act_shapes).append(s)
    attrs: dict[str, Any] = {}
    if source_type in _MATMUL_K_ARG:
        k_shape = shape_of(node.args[_MATMUL_K_ARG[source_type]])
        if k_shape:
            attrs["k"] = k_shape[-1]
        if source_type in ("addmm", "baddbmm", "addbmm") or (source_type == "linear" and len(node.args) > 2):
            attrs["bias"] = True
        layout = matmul_layout(node, source_type)
        if layout:
            attrs["layout"] = layout
    if source_type in _CONV:
        # the kernel is argument 1 whether it is a get_attr or (training) a placeholder
        x, w = shape_of(node.args[0]), shape_of(node.args[1])
        act_shapes = [x] if x else []
        weight_shapes = [w] if w else []
        b = shape_of(node.args[2]) if len(node.args) > 2 else None
        if b:
            weight_shapes.append(b)
        attrs["stride"] = _ints(node.args[3] if len(node.args) > 3 else ())
        attrs["padding"] = _ints(node.args[4] if len(node.args) > 4 else ())
        if len(node.args) > 5:
            attrs["dilation"] = _ints(node.args[5])
        if w:
            attrs["kernel"] = w[2:]
        if channels_last(node, (0,)):
            attrs["memory_format"] = "channels_last"
    if source_type == "convolution_backward":  # (grad_out, input, weight, ...)
        g, x, w = (shape_of(node.args[i]) for i in range(3))
        act_shapes = [s for s in (g, x) if s]
        weight_shapes = [w] if w else []
        attrs["stride"] = _ints(node.args[4] if len(node.args) > 4 else ())
        if channels_last(node, (0, 1)):
            attrs["memory_format"] = "channels_last"
    if source_type in _POOL:
        attrs["kernel"] = _ints(node.args[1] if len(node.args) > 1 else ())
        attrs["stride"] = _ints(node.args[2] if len(node.args) > 2 else ())
        attrs["padding"] = _ints(node.args[3] if len(node.args) > 3 else ())
    itemsize = int(vals[0].element_size()) if vals else 4
    return OpSpec(
        op_type=op_type,
        input_shapes=tuple(act_shapes),
        output_shapes=tuple(_shape(t) for t in vals),
        weight_shapes=tuple(weight_shapes),
        itemsize=itemsize,
        attrs=attrs,
    )


def _ints(value: Any) -> tuple[int, ...]:
    if isinstance(value, int):
        return (value,)
    if isinstance(value, (list, tuple)):
        return tuple(int(v) for v in value if isinstance(v, int))
    return ()


def _fetch_attr(gm: fx.GraphModule, target: str) -> Any:
    obj: Any = gm
    for part in target.split("."):
        obj = getattr(obj, part)
    return obj
