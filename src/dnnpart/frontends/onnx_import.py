"""ONNX frontend: load a model, infer shapes, build the priced graph.

Nodes are the ONNX operators (names kept; unnamed ones get ``OpType_i``), edges the tensors
between them with their bytes; initializers and ``Constant`` outputs count as parameters of
the operators that read them (weights memory), output shapes give the activation memory.
Symbolic input dimensions must be fixed with ``input_shapes`` (the CLI's ``--input-shape``).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from dnnpart._optional import require
from dnnpart.cost.model import CostModel
from dnnpart.cost.ops import OpSpec, canonical_op
from dnnpart.errors import FormatError
from dnnpart.frontends.build import ImportedModel, price_model
from dnnpart.frontends.ir import ModelIR, OpRecord
from dnnpart.limits import printable

if TYPE_CHECKING:
    import onnx

#: ONNX TensorProto element type -> bytes per element.
_ITEMSIZE = {1: 4, 2: 1, 3: 1, 4: 2, 5: 2, 6: 4, 7: 8, 9: 1, 10: 2, 11: 8, 12: 4, 13: 8, 16: 2}
_CONSTANT_OPS = frozenset({"Constant"})


def load_onnx(path: str | Path) -> onnx.ModelProto:
    """Read an ONNX file; a missing, corrupt or invalid file raises :class:`FormatError`."""
    onnx_mod = require("onnx", extra="onnx", caller="the ONNX frontend")
    p = Path(path)
    if not p.is_file():
        raise FormatError(f"{p}: no such file")
    try:
        model: onnx.ModelProto = onnx_mod.load(str(p))
    except Exception as exc:  # protobuf DecodeError, onnx errors, truncated files
        raise FormatError(f"{p}: not a readable ONNX model ({type(exc).__name__}: {exc})") from None
    if not model.graph.node:
        raise FormatError(f"{p}: not a readable ONNX model (the graph has no operators)")
    return model


def import_onnx(
    source: str | Path | onnx.ModelProto,
    *,
    input_shapes: Mapping[str, Sequence[int]] | Sequence[Sequence[int]] | None = None,
    cost_model: CostModel | None = None,
    training: bool = False,
    name: str = "",
) -> ImportedModel:
    """Import an ONNX model (a path or a loaded ``ModelProto``) and price it.

    Parameters
    ----------
    input_shapes : fixed shapes for the graph inputs, by name or in input order; needed when
        the file has symbolic dimensions (e.g. a dynamic batch).

    Raises
    ------
    FormatError
        Unreadable file, an input shape of the wrong rank or for an unknown input, shapes
        that cannot be inferred.

    Examples
    --------
    >>> import pytest; onnx = pytest.importorskip("onnx")
    >>> from onnx import TensorProto, helper
    >>> g = helper.make_graph(
    ...     [helper.make_node("Relu", ["x"], ["y"], name="r"), helper.make_node("Neg", ["y"], ["z"])],
    ...     "tiny", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 8])],
    ...     [helper.make_tensor_value_info("z", TensorProto.FLOAT, ["batch", 8])])
    >>> m = import_onnx(helper.make_model(g), input_shapes=[(2, 8)])
    >>> m.graph.names, m.graph.edge_bytes.tolist()
    (('r', 'Neg_1'), [64.0])
    """
    model = source if not isinstance(source, (str, Path)) else load_onnx(source)
    label = name or (Path(source).stem if isinstance(source, (str, Path)) else model.graph.name or "onnx")
    check_header(model, str(source) if isinstance(source, (str, Path)) else label)
    model = _with_input_shapes(model, input_shapes, label)
    ir = model_ir(model, name=label)
    return price_model(ir, cost_model or CostModel.from_presets(), training=training)


def check_header(model: onnx.ModelProto, where: str) -> None:
    """Refuse what a model's operators cannot mean: an ONNX opset newer than the installed
    ``onnx`` knows (its operators' semantics are unknown to shape inference and pricing), and a
    graph output listed twice.

    Examples
    --------
    >>> import pytest; onnx = pytest.importorskip("onnx")
    >>> from onnx import TensorProto, helper
    >>> g = helper.make_graph([helper.make_node("Relu", ["x"], ["y"])], "g",
    ...     [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1])],
    ...     [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1])] * 2)
    >>> check_header(helper.make_model(g), "m.onnx")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    dnnpart.errors.FormatError: m.onnx: graph.output[1]: 'y' is listed twice ...
    """
    onnx_mod = require("onnx", extra="onnx", caller="the ONNX frontend")
    newest = int(onnx_mod.defs.onnx_opset_version())
    for i, entry in enumerate(model.opset_import):
        if entry.domain in ("", "ai.onnx") and not 1 <= entry.version <= newest:
            raise FormatError(f"{where}: opset_import[{i}].version: expected an ONNX opset in "
                              f"1..{newest} (the installed onnx {onnx_mod.__version__}), got {entry.version}")
    seen: set[str] = set()
    for i, out in enumerate(model.graph.output):
        if out.name in seen:
            raise FormatError(f"{where}: graph.output[{i}]: {printable(out.name)[:80]!r} is listed twice "
                              "(each graph output names a distinct value)")
        seen.add(out.name)


def _with_input_shapes(
    model: onnx.ModelProto,
    shapes: Mapping[str, Sequence[int]] | Sequence[Sequence[int]] | None,
    label: str,
) -> onnx.ModelProto:
    onnx_mod = require("onnx", extra="onnx", caller="the ONNX frontend")
    init_names = {t.name for t in model.graph.initializer}
    graph_inputs = [v for v in model.graph.input if v.name not in init_names]
    model = onnx_mod.ModelProto.FromString(model.SerializeToString())  # do not mutate the caller's
    inputs = [v for v in model.graph.input if v.name not in init_names]
    if shapes is not None:
        if isinstance(shapes, Mapping):
            by_name = dict(shapes)
            unknown = set(by_name) - {v.name for v in graph_inputs}
            if unknown:
                raise FormatError(
                    f"{label}: --input-shape for unknown input(s) {sorted(unknown)}; "
                    f"inputs are {[v.name for v in graph_inputs]}"
                )
        else:
            listed = list(shapes)
            if len(listed) > len(inputs):
                raise FormatError(
                    f"{label}: {len(listed)} input shapes given, the model has "
                    f"{len(inputs)} input(s) {[v.name for v in inputs]}"
                )
            by_name = {v.name: s for v, s in zip(inputs, listed, strict=False)}
        for v in inputs:
            if v.name not in by_name:
                continue
            want = [int(d) for d in by_name[v.name]]
            dims = v.type.tensor_type.shape.dim
            if len(dims) != len(want):
                raise FormatError(
                    f"{label}: input {v.name!r} has rank {len(dims)} "
                    f"({_show_dims(dims)}), got --input-shape {tuple(want)}"
                )
            for d, size in zip(dims, want, strict=True):
                if size <= 0 or (d.HasField("dim_value") and d.dim_value != size):
                    raise FormatError(
                        f"{label}: input {v.name!r} has shape {_show_dims(dims)}, "
                        f"got --input-shape {tuple(want)}"
                    )
                d.ClearField("dim_param")
                d.dim_value = size
        # stale intermediate shapes would contradict the new input shapes
        del model.graph.value_info[:]
    for v in inputs:
        dims = v.type.tensor_type.shape.dim
        if any(not d.HasField("dim_value") for d in dims):
            raise FormatError(
                f"{label}: input {v.name!r} has symbolic shape {_show_dims(dims)}; fix it with "
                "--input-shape (one per input, e.g. --input-shape 1,3,224,224)"
            )
    try:
        inferred: onnx.ModelProto = onnx_mod.shape_inference.infer_shapes(
            model, strict_mode=True, data_prop=True
        )
        return inferred
    except Exception as exc:
        raise FormatError(f"{label}: ONNX shape inference failed ({exc})") from None


def _show_dims(dims: Any) -> str:
    return (
        "("
        + ", ".join(
            d.dim_param or str(d.dim_value) if (d.dim_param or d.HasField("dim_value")) else "?" for d in dims
        )
        + ")"
    )


def model_ir(model: onnx.ModelProto, *, name: str) -> ModelIR:
    """The operators of a shape-inferred ONNX model."""
    graph = model.graph
    shapes: dict[str, tuple[tuple[int, ...], int] | None] = {}
    for v in list(graph.input) + list(graph.value_info) + list(graph.output):
        shapes[v.name] = _value_shape(v)
    weights: dict[str, tuple[tuple[int, ...], int]] = {}
    for t in graph.initializer:
        weights[t.name] = (tuple(int(d) for d in t.dims), _ITEMSIZE.get(t.data_type, 4))
    # Constants: Constant nodes and nodes computing from constants only (folded weights,
    # e.g. Identity copies of a shared initializer). Shape values: Shape outputs and what is
    # computed from them and constants -- metadata, priced as free operators.
    meta: set[str] = set()
    constant_nodes: set[int] = set()
    for i, node in enumerate(graph.node):
        ins = [x for x in node.input if x]
        if node.op_type in _CONSTANT_OPS or (ins and all(x in weights for x in ins)):
            constant_nodes.add(i)
            for out in node.output:
                got = shapes.get(out)
                weights[out] = got if got is not None else ((), 4)
        elif node.op_type == "Shape" or (ins and all(x in weights or x in meta for x in ins)):
            meta.update(x for x in node.output if x)

    ir = ModelIR(name=name, source="onnx")
    ir.graph_inputs = tuple(v.name for v in graph.input if v.name not in weights)
    ir.graph_outputs = tuple(v.name for v in graph.output)
    for v in ir.graph_inputs:
        ir.value_bytes[v] = _nbytes(shapes.get(v))
    used_names: set[str] = set()
    missing: list[str] = []
    for i, node in enumerate(graph.node):
        if i in constant_nodes:
            continue
        node_name = node.name or f"{node.op_type}_{i}"
        while node_name in used_names:
            node_name = f"{node_name}_{i}"
        used_names.add(node_name)
        acts = [x for x in node.input if x and x not in weights]
        wts = [weights[x] for x in node.input if x in weights]
        in_shapes, out_shapes = [], []
        itemsize = 4
        is_meta = bool(node.output) and node.output[0] in meta
        for x in acts:
            got = shapes.get(x)
            if got is not None and x not in meta:
                in_shapes.append(got[0])
            elif x not in meta:
                missing.append(x)
        out_bytes = 0.0
        for x in node.output:
            if not x:
                continue
            got = shapes.get(x)
            if x in meta:
                ir.value_bytes[x] = _nbytes(got) if got is not None else 8.0
                continue
            if got is None:
                missing.append(x)
                ir.value_bytes[x] = 0.0
                continue
            out_shapes.append(got[0])
            itemsize = got[1]
            ir.value_bytes[x] = _nbytes(got)
            out_bytes += ir.value_bytes[x]
        attrs = _attributes(node)
        op_type = "shape" if is_meta else canonical_op(node.op_type)
        extra: dict[str, Any] = {}
        if node.op_type == "Gemm":
            a = shapes.get(node.input[0]) or weights.get(node.input[0])
            if a is not None and len(a[0]) == 2:
                extra["k"] = a[0][0] if attrs.get("transA") else a[0][1]
            extra["bias"] = len(node.input) > 2 and bool(node.input[2])
        elif node.op_type in ("Conv", "ConvTranspose") and len(node.input) > 2 and node.input[2]:
            pass  # the bias is among the parameters: operator_work counts it
        if "kernel_shape" in attrs and op_type in ("maxpool", "avgpool"):
            extra["kernel"] = tuple(attrs["kernel_shape"])
        if op_type in ("conv", "maxpool", "avgpool"):  # windows, for layer graphs (module_layers)
            for key, name in (("strides", "stride"), ("pads", "padding"), ("dilations", "dilation")):
                if key in attrs:
                    extra[name] = tuple(attrs[key])
            pads = extra.get("padding", ())
            if pads and pads[: len(pads) // 2] == pads[len(pads) // 2 :]:
                extra["padding"] = pads[: len(pads) // 2]  # symmetric: one per axis, as torch writes it
            if "group" in attrs:
                extra["groups"] = int(attrs["group"])
        spec = OpSpec(
            op_type=op_type,
            input_shapes=tuple(in_shapes),
            output_shapes=tuple(out_shapes),
            weight_shapes=tuple(w[0] for w in wts),
            itemsize=itemsize,
            attrs=extra,
        )
        weight_bytes = float(sum(math.prod(w[0]) * w[1] for w in wts))
        ir.ops.append(
            OpRecord(
                name=node_name,
                source_type=node.op_type,
                spec=spec,
                inputs=tuple(acts),
                outputs=tuple(x for x in node.output if x),
                weight_bytes=weight_bytes,
                output_bytes=out_bytes,
                module_path=_scoped_module_path(node) or _module_path(node_name),
            )
        )
    if missing:
        raise FormatError(
            f"{name}: ONNX shape inference left {len(set(missing))} tensor shape(s) unknown, e.g. "
            f"{missing[0]!r}; fix the input shapes with --input-shape"
        )
    return ir


def _value_shape(v: Any) -> tuple[tuple[int, ...], int] | None:
    t = v.type.tensor_type
    if not t.HasField("shape"):
        return None
    dims = []
    for d in t.shape.dim:
        if not d.HasField("dim_value"):
            return None
        dims.append(int(d.dim_value))
    return tuple(dims), _ITEMSIZE.get(t.elem_type, 4)


def _nbytes(shape: tuple[tuple[int, ...], int] | None) -> float:
    return 0.0 if shape is None else float(math.prod(shape[0]) * shape[1])


def _attributes(node: Any) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for a in node.attribute:
        if a.ints:
            out[a.name] = list(a.ints)
        elif a.type == 2:  # INT
            out[a.name] = int(a.i)
        elif a.type == 1:  # FLOAT
            out[a.name] = float(a.f)
    return out


#: Node metadata torch's dynamo ONNX exporter writes: the module scopes around the node.
NAME_SCOPES_KEY = "pkg.torch.onnx.name_scopes"


def _scoped_module_path(node: Any) -> str:
    """Innermost module of ``pkg.torch.onnx.name_scopes`` (``"['', 'h', 'h.0', 'addmm']"`` -> ``h.0``).

    The value is a Python list literal; it is read with :func:`ast.literal_eval` (literals
    only, never code). Absent or malformed metadata gives ``""``.
    """
    import ast

    for prop in getattr(node, "metadata_props", ()):
        if prop.key != NAME_SCOPES_KEY:
            continue
        try:
            scopes = ast.literal_eval(prop.value)
        except (ValueError, SyntaxError, MemoryError, RecursionError):
            return ""
        if isinstance(scopes, list) and len(scopes) >= 2 and all(isinstance(x, str) for x in scopes):
            return str(scopes[-2])
        return ""
    return ""


def _module_path(node_name: str) -> str:
    """``/layer1/layer1.0/conv1/Conv`` (torch's exporter) -> ``layer1/layer1.0/conv1``."""
    if "/" not in node_name:
        return ""
    return node_name.strip("/").rsplit("/", 1)[0]
