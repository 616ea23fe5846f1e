"""Real models in: ONNX files and torch modules (traced with torch.fx) -> priced graphs.

torch and onnx are imported only when a frontend runs (extras ``torch`` and ``onnx``).
"""

from dnnpart.frontends.build import ImportedModel, UnknownOperatorWarning, price_model
from dnnpart.frontends.ir import ModelIR, OpRecord
from dnnpart.frontends.sources import ModelSource, import_source, parse_shape, resolve_model

__all__ = [
    "ImportedModel",
    "ModelIR",
    "ModelSource",
    "OpRecord",
    "UnknownOperatorWarning",
    "import_source",
    "parse_shape",
    "price_model",
    "resolve_model",
]
