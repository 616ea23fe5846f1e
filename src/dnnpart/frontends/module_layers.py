"""Real models as OptCNN layer graphs, at module granularity (paper 3's input from any model).

A model spec (``module:PKG.MOD:CALLABLE``, ``torchvision:NAME``, ``hf:ARCH`` vision models, an
``.onnx`` file) is captured by the ordinary frontends (``torch.export`` by default, symbolic
``torch.fx`` with ``--frontend fx``, or ONNX) into operators
(:class:`~dnnpart.frontends.ir.ModelIR`), and the operators become the
:class:`~dnnpart.layerwise.layers.LayerGraph` the ``iteration`` objective prices: one
layer per convolution, pooling, fully connected layer, residual addition, channel
concatenation and softmax, with its output shape, kernel/stride/padding and parameter count.

Mapping (each rule tested in ``tests/frontends/test_module_layers.py``):

* **Layers.** 2-D convolution (``Conv2d``, ONNX ``Conv``) -> ``conv``; max/average pooling ->
  ``pool_max``/``pool_avg``; adaptive pooling and global pooling (``AdaptiveAvgPool2d``,
  ``GlobalAveragePool``, a ``mean`` over H and W) -> a pooling layer whose window tiles the
  input exactly (``kernel = stride = in / out``); refused where ``in / out`` is not whole;
  ``Linear``/``Gemm``/``addmm`` over ``(N, features)`` -> ``fc``; an element-wise addition of
  two or more activations of one shape -> ``add``; a concatenation along channels ->
  ``concat``; ``softmax``/``log_softmax`` -> ``softmax``; graph inputs -> ``input``.
* **Folded into their producer**, as the builtin networks fold batch norm and ReLU: batch
  norm, activations (ReLU, ReLU6, GELU, SiLU, sigmoid, tanh, ...), dropout, identity, copies
  and casts, and arithmetic with a constant (``x * 0.5``, a bias add). Their trainable
  parameters (batch norm's scale and shift; not its running statistics, which are buffers)
  join the producer's; so a layer's parameters are the parameters of the modules folded into
  it, and the layer graph's parameter total is the model's (tested against
  ``sum(p.numel() for p in module.parameters())``).
* **Flatten/view/reshape** are aliases of their input: a ``(N, C, H, W)`` tensor flattened to
  ``(N, C*H*W)`` may only be read by a fully connected layer (which reads its whole
  ``(C, H, W)`` per sample, as the builtins' ``fc`` does); a 2-D ``(N, C)`` tensor is the
  layer shape ``(N, C, 1, 1)``.
* **Checked, not assumed.** Every layer's output shape is recomputed from its kernel, stride
  and padding and must equal the captured shape: dilation, ``ceil_mode`` and grouped or
  depthwise convolutions are refused (the cost model's convolution reads all input channels
  with a dense window), as is anything else the table above does not name. The refusal is
  one :class:`~dnnpart.errors.FormatError` naming the module path, its type and the operator
  (``layer3.0.attn (MultiheadAttention): operator 'bmm' ...``).
* **Loss layer.** Paper 3 trains; its networks (and our builtins) end in a softmax. A model
  output that is not already a softmax gets one appended (``softmax``, ``softmax_1``, ...),
  so ``module:...:resnet50`` and ``builtin:resnet50`` have the same layers.
* **Names** are module paths (``layer1.0.conv1``); an addition or concatenation outside a leaf
  module is named ``PATH/OP`` after the block it runs in; a name taken twice (a module called
  twice) gets ``#2``, ``#3``.

Choice: the batch dimension of the captured shapes does not matter: the ``iteration``
objective rescales every ``N`` to the per-device batch times the device count.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from dnnpart.errors import FormatError
from dnnpart.frontends.ir import ModelIR, OpRecord
from dnnpart.layerwise.layers import LayerGraph, LayerSpec, Shape

if TYPE_CHECKING:
    from dnnpart.frontends.sources import ModelOptions

__all__ = ["FOLDED", "layers_from_ir", "model_layer_graph"]

#: Canonical operator types folded into their producer (element-wise, one activation input).
FOLDED = frozenset({
    "batchnorm", "relu", "clip", "leaky_relu", "elu", "gelu", "silu", "sigmoid", "tanh",
    "hardswish", "hardsigmoid", "mish", "softplus", "dropout", "identity", "contiguous", "cast",
    "abs", "neg",
})
#: Arithmetic folded when only one operand is an activation (the other a constant or scalar).
_SCALAR_ARITH = frozenset({"add", "sub", "mul", "div", "pow"})
_VIEWS = frozenset({"reshape", "flatten", "view", "squeeze", "unsqueeze", "getitem"})
_SKIPPED = frozenset({"shape", "size", "getattr", "constant", "constant_of_shape", "range", "fill"})
#: Normalisations whose first two parameter tensors (scale, shift) are trainable, the rest buffers.
_AFFINE_FIRST_TWO = frozenset({"batchnorm"})
_FC = frozenset({"linear", "matmul"})


@dataclass(frozen=True)
class _Value:
    """An activation: the layer producing it and whether it is a flattened ``(N, C*H*W)`` view."""

    layer: int
    flat: bool = False


def _as4(shape: tuple[int, ...]) -> Shape | None:
    if len(shape) == 4:
        return (int(shape[0]), int(shape[1]), int(shape[2]), int(shape[3]))
    if len(shape) == 2:
        return (int(shape[0]), int(shape[1]), 1, 1)
    return None


def _window_out(size: int, k: int, s: int, p: int) -> int:
    return (size + 2 * p - k) // s + 1


def _pair(values: object, default: tuple[int, int]) -> tuple[int, int]:
    vals = tuple(int(v) for v in values) if isinstance(values, (tuple, list)) else ()
    if not vals:
        return default
    return (vals[0], vals[-1]) if len(vals) <= 2 else (vals[0], vals[1])


def _onnx_pads(values: object) -> tuple[int, int] | None:
    """Padding per axis; ONNX's asymmetric ``(h_begin, w_begin, h_end, w_end)`` gives ``None``."""
    vals = tuple(int(v) for v in values) if isinstance(values, (tuple, list)) else ()
    if len(vals) == 4:
        return (vals[0], vals[1]) if (vals[0], vals[1]) == (vals[2], vals[3]) else None
    return _pair(vals, (0, 0))


class _Builder:
    def __init__(self, ir: ModelIR, module_types: Mapping[str, str]) -> None:
        self.ir = ir
        self.types = module_types
        self.layers: list[LayerSpec] = []
        self.values: dict[str, _Value] = {}
        self.names: dict[str, int] = {}

    # -- helpers --------------------------------------------------------------------------
    def where(self, op: OpRecord) -> str:
        path = op.module_path
        kind = self.types.get(path)
        place = path or "the model's own forward"
        return f"{self.ir.name}: {place} ({kind})" if kind else f"{self.ir.name}: {place}"

    def refuse(self, op: OpRecord, why: str) -> FormatError:
        return FormatError(
            f"{self.where(op)}: operator {op.source_type!r} ({op.op_type}) {why}; the iteration "
            "objective's layer graphs take conv, pool, fc, add, concat, softmax and element-wise "
            "ops folded into them"
        )

    def name_for(self, op: OpRecord, kind: str) -> str:
        path = op.module_path
        if path and kind in ("conv", "pool_max", "pool_avg", "fc", "softmax"):
            base = path
        else:  # a join is named after the block it runs in (ONNX names already carry it)
            base = f"{path}/{op.name}" if path and not op.name.startswith(path) else op.name
        count = self.names.get(base, 0) + 1
        self.names[base] = count
        return base if count == 1 else f"{base}#{count}"

    def add_layer(self, spec: LayerSpec) -> int:
        self.layers.append(spec)
        return len(self.layers) - 1

    def shape(self, value: _Value) -> Shape:
        return self.layers[value.layer].out_shape

    def inputs(self, op: OpRecord) -> list[_Value]:
        return [self.values[n] for n in op.inputs if n in self.values]

    def out_shape(self, op: OpRecord) -> tuple[int, ...]:
        if not op.spec.output_shapes:
            raise self.refuse(op, "has no tensor output")
        return tuple(int(d) for d in op.spec.output_shapes[0])

    def trainable(self, op: OpRecord) -> int:
        shapes = op.spec.weight_shapes
        if op.op_type in _AFFINE_FIRST_TWO:
            shapes = shapes[:2]
        return sum(math.prod(s) for s in shapes)

    def one_input(self, op: OpRecord, *, spatial: bool = True) -> tuple[_Value, Shape]:
        ins = self.inputs(op)
        if len(ins) != 1:
            raise self.refuse(op, f"reads {len(ins)} activations, expected 1")
        if ins[0].flat and spatial:
            raise self.refuse(op, "reads a flattened tensor (only a fully connected layer may)")
        return ins[0], self.shape(ins[0])

    # -- operators ------------------------------------------------------------------------
    def graph_input(self, name: str, shape: tuple[int, ...]) -> None:
        s4 = _as4(shape)
        if s4 is None or len(shape) != 4:
            raise FormatError(f"{self.ir.name}: input {name!r} has shape {shape}; a layer graph's "
                              "input is an image batch (N, C, H, W)")
        label = name if name not in self.names else f"{name}#input"
        self.names[label] = 1
        self.values[name] = _Value(self.add_layer(LayerSpec(label, "input", (), (), s4)))

    def conv(self, op: OpRecord) -> None:
        src, (n, cin, h, w) = self.one_input(op)
        weight = op.spec.weight_shapes[0] if op.spec.weight_shapes else ()
        if len(weight) != 4:
            raise self.refuse(op, "is not a 2-D convolution with a weight (C_out, C_in, kh, kw)")
        if int(weight[1]) != cin:
            raise self.refuse(op, f"is a grouped convolution ({cin} input channels, {weight[1]} per group)")
        attrs = op.spec.attrs
        if any(int(d) != 1 for d in attrs.get("dilation", ()) or ()):
            raise self.refuse(op, f"has dilation {tuple(attrs['dilation'])}")
        if int(attrs.get("groups", 1) or 1) != 1:
            raise self.refuse(op, f"is a grouped convolution (groups={attrs['groups']})")
        k = (int(weight[2]), int(weight[3]))
        s = _pair(attrs.get("stride", ()), (1, 1))
        p = _onnx_pads(attrs.get("padding", ()))
        if p is None:
            raise self.refuse(op, f"has asymmetric padding {tuple(attrs['padding'])}")
        self.windowed(op, "conv", src, (n, cin, h, w), k, s, p, int(weight[0]))

    def pool(self, op: OpRecord) -> None:
        src, shape = self.one_input(op)
        attrs = op.spec.attrs
        k = _pair(attrs.get("kernel", ()), (0, 0))
        if k == (0, 0):
            raise self.refuse(op, "has no kernel size")
        s = _pair(attrs.get("stride", ()), k)
        p = _onnx_pads(attrs.get("padding", ()))
        if p is None:
            raise self.refuse(op, f"has asymmetric padding {tuple(attrs['padding'])}")
        if any(int(d) != 1 for d in attrs.get("dilation", ()) or ()):
            raise self.refuse(op, f"has dilation {tuple(attrs['dilation'])}")
        kind = "pool_max" if op.op_type == "maxpool" else "pool_avg"
        self.windowed(op, kind, src, shape, k, s, p, shape[1])

    def global_pool(self, op: OpRecord) -> None:
        src, (n, c, h, w) = self.one_input(op)
        out = _as4(self.out_shape(op))
        if out is None or out[:2] != (n, c) or h % out[2] or w % out[3]:
            raise self.refuse(op, f"pools {(n, c, h, w)} to {self.out_shape(op)}: windows are not "
                                  "equal tiles of the input")
        k = (h // out[2], w // out[3])
        kind = "pool_max" if "max" in op.source_type.lower() else "pool_avg"
        self.windowed(op, kind, src, (n, c, h, w), k, k, (0, 0), c)

    def windowed(self, op: OpRecord, kind: str, src: _Value, shape: Shape, k: tuple[int, int],
                 s: tuple[int, int], p: tuple[int, int], cout: int) -> None:
        n, _, h, w = shape
        want = (n, cout, _window_out(h, k[0], s[0], p[0]), _window_out(w, k[1], s[1], p[1]))
        got = _as4(self.out_shape(op))
        if got != want or min(want) < 1:
            raise self.refuse(op, f"outputs {self.out_shape(op)}, but kernel {k} stride {s} padding "
                                  f"{p} give {want} (dilation, ceil_mode and 'same' padding are not "
                                  "modelled)")
        params = self.trainable(op) if kind == "conv" else 0
        spec = LayerSpec(self.name_for(op, kind), kind, (src.layer,), (shape,), want, k, s, p, params)
        self.values[op.outputs[0]] = _Value(self.add_layer(spec))

    def fc(self, op: OpRecord) -> None:
        src, shape = self.one_input(op, spatial=False)
        out = self.out_shape(op)
        if len(out) != 2:
            raise self.refuse(op, f"outputs {out}; a fully connected layer maps (N, features) to "
                                  "(N, classes)")
        n, c, h, w = shape
        if not src.flat and (h, w) != (1, 1):
            raise self.refuse(op, f"reads an unflattened {shape} tensor")
        params = self.trainable(op)
        if not op.spec.weight_shapes or params < c * h * w * out[1]:
            raise self.refuse(op, "has no weight of (features x outputs) elements")
        spec = LayerSpec(self.name_for(op, "fc"), "fc", (src.layer,), (shape,),
                         (n, int(out[1]), 1, 1), params=params)
        self.values[op.outputs[0]] = _Value(self.add_layer(spec))

    def fold(self, op: OpRecord) -> None:
        src, shape = self.one_input(op, spatial=False)
        out = self.out_shape(op)
        expected = (shape[0], shape[1] * shape[2] * shape[3]) if src.flat else None
        if _as4(out) != shape and out != expected:
            raise self.refuse(op, f"changes the shape {shape} to {out}")
        extra = self.trainable(op)
        if extra:
            layer = self.layers[src.layer]
            self.layers[src.layer] = replace(layer, params=layer.params + extra)
        self.values[op.outputs[0]] = src

    def view(self, op: OpRecord) -> None:
        src, shape = self.one_input(op, spatial=False)
        out = self.out_shape(op)
        n = shape[0]
        if _as4(out) == shape and not src.flat:
            self.values[op.outputs[0]] = src
        elif out == (n, shape[1] * shape[2] * shape[3]):
            self.values[op.outputs[0]] = _Value(src.layer, flat=(shape[2], shape[3]) != (1, 1))
        else:
            raise self.refuse(op, f"reshapes {shape} to {out}; only flattening (N, C, H, W) to "
                                  "(N, C*H*W) is a layer-graph view")

    def join(self, op: OpRecord, kind: str) -> None:
        ins = list(dict.fromkeys(self.inputs(op)))
        if any(v.flat for v in ins):
            raise self.refuse(op, "reads a flattened tensor")
        shapes = tuple(self.shape(v) for v in ins)
        out = _as4(self.out_shape(op))
        if kind == "add":
            if len(set(shapes)) != 1 or out != shapes[0]:
                raise self.refuse(op, f"adds tensors of shapes {shapes} (a residual addition adds "
                                      "equal shapes)")
        else:
            n, _, h, w = shapes[0]
            if len({(s[0], s[2], s[3]) for s in shapes}) != 1 or out != (n, sum(s[1] for s in shapes), h, w):
                raise self.refuse(op, f"concatenates {shapes} into {self.out_shape(op)}, not along "
                                      "channels")
        assert out is not None
        spec = LayerSpec(self.name_for(op, kind), kind, tuple(v.layer for v in ins), shapes, out)
        self.values[op.outputs[0]] = _Value(self.add_layer(spec))

    def softmax(self, op: OpRecord) -> None:
        src, shape = self.one_input(op)
        spec = LayerSpec(self.name_for(op, "softmax"), "softmax", (src.layer,), (shape,), shape)
        self.values[op.outputs[0]] = _Value(self.add_layer(spec))

    def op(self, op: OpRecord) -> None:
        kind = op.op_type
        acts = self.inputs(op)
        if kind in _SKIPPED or (not op.spec.output_shapes and not acts):
            return
        if not acts:
            raise self.refuse(op, "reads no activation (a constant computed inside the model)")
        if kind == "conv":
            self.conv(op)
        elif kind in ("maxpool", "avgpool"):
            self.pool(op)
        elif kind == "global_pool" or (kind == "mean" and self._spatial_mean(op)):
            self.global_pool(op)
        elif kind in _FC:
            self.fc(op)
        elif kind in ("softmax", "log_softmax"):
            self.softmax(op)
        elif kind == "concat":
            self.join(op, "concat")
        elif kind == "add" and len(acts) >= 2:
            self.join(op, "add")
        elif kind in FOLDED or (kind in _SCALAR_ARITH and len(acts) == 1):
            self.fold(op)
        elif kind in _SCALAR_ARITH:
            raise self.refuse(op, f"combines {len(acts)} activations element-wise (only add joins "
                                  "branches)")
        elif kind in _VIEWS:
            self.view(op)
        else:
            raise self.refuse(op, "has no layer-graph kind")

    def _spatial_mean(self, op: OpRecord) -> bool:
        ins = self.inputs(op)
        if len(ins) != 1 or ins[0].flat or not op.spec.output_shapes:
            return False
        n, c, _, _ = self.shape(ins[0])
        return _as4(self.out_shape(op)) == (n, c, 1, 1)


def layers_from_ir(ir: ModelIR, *, module_types: Mapping[str, str] | None = None,
                   input_shapes: Mapping[str, tuple[int, ...]] | None = None) -> LayerGraph:
    """The layer graph of a captured model (rules in the module docstring).

    ``module_types`` maps module paths to class names (for messages); ``input_shapes`` gives
    the graph inputs' shapes where no operator records them.

    Examples
    --------
    >>> from dnnpart.cost.ops import OpSpec
    >>> ops = [OpRecord(name="c", source_type="conv2d", module_path="conv", inputs=("x",), outputs=("c",),
    ...        spec=OpSpec(op_type="conv", input_shapes=((2, 3, 8, 8),), output_shapes=((2, 4, 8, 8),),
    ...                    weight_shapes=((4, 3, 3, 3),), attrs={"stride": (1, 1), "padding": (1, 1)})),
    ...        OpRecord(name="r", source_type="relu", inputs=("c",), outputs=("r",),
    ...        spec=OpSpec(op_type="relu", input_shapes=((2, 4, 8, 8),), output_shapes=((2, 4, 8, 8),)))]
    >>> g = layers_from_ir(ModelIR(name="m", source="export", ops=ops, graph_inputs=("x",),
    ...                            graph_outputs=("r",)))
    >>> [(x.name, x.op, x.params) for x in g.layers]   # ReLU folded, softmax (the loss) appended
    [('x', 'input', 0), ('conv', 'conv', 108), ('softmax', 'softmax', 0)]
    """
    b = _Builder(ir, module_types or {})
    shapes = dict(input_shapes or {})
    for op in ir.ops:
        if len(op.inputs) == len(op.spec.input_shapes):
            for name, shape in zip(op.inputs, op.spec.input_shapes, strict=True):
                shapes.setdefault(name, tuple(int(d) for d in shape))
    for name in ir.graph_inputs:
        if name not in shapes:
            raise FormatError(f"{ir.name}: the shape of input {name!r} is unknown")
        b.graph_input(name, shapes[name])
    for op in ir.ops:
        b.op(op)
    outputs = [b.values[v] for v in ir.graph_outputs if v in b.values]
    if not outputs:
        raise FormatError(f"{ir.name}: no model output is a layer-graph tensor")
    for value in dict.fromkeys(outputs):
        if value.flat:
            raise FormatError(f"{ir.name}: the model's output is a flattened feature map, not class scores")
        if b.layers[value.layer].op != "softmax":  # the loss layer (module docstring)
            shape = b.layers[value.layer].out_shape
            count = b.names.get("softmax", 0) + 1
            b.names["softmax"] = count
            name = "softmax" if count == 1 else f"softmax_{count - 1}"
            b.add_layer(LayerSpec(name, "softmax", (value.layer,), (shape,), shape))
    if len(b.layers) < 2:
        raise FormatError(f"{ir.name}: the model has no layers")
    return LayerGraph(ir.name, tuple(b.layers))


def model_layer_graph(spec: str, options: ModelOptions | None = None) -> LayerGraph:
    """Capture the model ``spec`` names and convert it (module docstring); torch/onnx optional.

    Raises
    ------
    FormatError
        Bad spec or options, a model that cannot be captured, an operator without a layer kind.
    MissingDependencyError
        The ``torch`` (or ``onnx``) extra is not installed.
    """
    from dnnpart.frontends.sources import ModelOptions, capture, onnx_input_shapes, resolve_model

    opts = options or ModelOptions()
    for flag, used in (("--training", opts.training), ("--optimizer", opts.optimizer is not None),
                       ("--precision", opts.precision != "fp32")):
        if used:
            raise FormatError(f"{flag}: does not apply to the iteration objective (it always prices "
                              "a training step in FP32)")
    source = resolve_model(spec, input_shapes=list(opts.input_shapes) or None, input_dtype=opts.input_dtype,
                           inputs=opts.inputs, frontend=opts.frontend, config_file=opts.config_file)
    if source.onnx_path is not None:
        from dnnpart.frontends.onnx_import import import_onnx

        ir = import_onnx(source.onnx_path, input_shapes=onnx_input_shapes(source)).ir
        return layers_from_ir(ir)
    _, ir = capture(source)
    prefix = source.strip_prefix
    types: dict[str, str] = {}
    for path, sub in source.module.named_modules():
        key = path[len(prefix) + 1:] if prefix and path.startswith(prefix + ".") else path
        types[key] = type(sub).__name__
    shapes = dict(zip(ir.graph_inputs, source.input_shapes, strict=False))
    return layers_from_ir(ir, module_types=types, input_shapes=shapes)
