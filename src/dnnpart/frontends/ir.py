"""The frontends' common intermediate form: operators over named values, before pricing.

Both frontends (ONNX, torch.fx) reduce a model to a list of :class:`OpRecord` in a
topological order; :func:`dnnpart.frontends.build.price_model` turns it into a priced
:class:`~dnnpart.graph.core.Graph`.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from dnnpart.cost.ops import OpSpec


@dataclass(frozen=True, slots=True, kw_only=True)
class OpRecord:
    """One operator of an imported model.

    Parameters
    ----------
    name : unique name in the source (fx node name, ONNX node name).
    source_type : the operator type as the source spells it (``"Conv2d"``, ``"Conv"``).
    spec : what the cost model needs (canonical type and shapes).
    inputs : names of the activation values it reads (not its parameters).
    outputs : names of the values it produces.
    weight_bytes : bytes of its parameters (weights, biases, buffers, constants).
    output_bytes : bytes of its outputs (activation memory).
    module_path : where it comes from in the model (``"layer1.0.conv1"``), if known.
    """

    name: str
    source_type: str
    spec: OpSpec
    inputs: tuple[str, ...] = ()
    outputs: tuple[str, ...] = ()
    weight_bytes: float = 0.0
    output_bytes: float = 0.0
    module_path: str = ""

    @property
    def op_type(self) -> str:
        return self.spec.op_type


@dataclass(slots=True, kw_only=True)
class ModelIR:
    """Operators in topological order, the bytes of every value, the model's inputs/outputs."""

    name: str
    source: str  # "fx", "export" or "onnx"
    ops: list[OpRecord] = field(default_factory=list)
    value_bytes: dict[str, float] = field(default_factory=dict)
    graph_inputs: tuple[str, ...] = ()
    graph_outputs: tuple[str, ...] = ()


def top_level(module_path: str) -> str:
    """First component of a module path (``"layer1.0.conv1"`` -> ``"layer1"``).

    Examples
    --------
    >>> top_level("layer1.0.conv1"), top_level("/layers/layers.3/attention/MatMul"), top_level("")
    ('layer1', 'layers', '')
    """
    stripped = module_path.strip("/")
    for sep in ("/", "."):
        stripped = stripped.split(sep)[0]
    return stripped


def layer_key(module_path: str) -> str:
    """The numbered block a deep module path lies in (up to its first integer component).

    Examples
    --------
    >>> layer_key("transformer.h.3.attn.c_proj"), layer_key("lm_head"), layer_key("")
    ('transformer.h.3', 'lm_head', '')
    """
    parts = module_path.strip(".").split(".")
    for i, part in enumerate(parts):
        if part.isdigit():
            return ".".join(parts[: i + 1])
    return parts[0]
