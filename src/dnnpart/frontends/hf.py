"""``hf:ARCH[:KEY=VALUE,...]``: a HuggingFace ``transformers`` model built from its config.

The model is built from ``AutoConfig.for_model(ARCH, **overrides)`` with random weights:
nothing is downloaded and no remote code runs (``trust_remote_code`` is never set; a model
type ``transformers`` does not ship is refused). Overrides are ``KEY=VALUE`` pairs whose values
are JSON (``hf:swin:embed_dim=192,depths=[2,2,18,2],num_heads=[6,12,24,48]``; a value that is
not JSON is taken as a string), or a JSON file of overrides (``config_file``).

Choices (documented in ``docs/models.md``):

* **Which head.** Decoder-only language models (``gpt2``, ``llama``, and every model type
  :data:`CAUSAL_LM` lists) get their LM head (``AutoModelForCausalLM``): the head is part of
  the inference FLOPs formula of a decoder. Encoder-decoders (``t5``) get
  ``AutoModelForSeq2SeqLM``; vision models (``resnet``, ``vit``, ``swin``, ...)
  ``AutoModelForImageClassification``; everything else the bare ``AutoModel`` (an encoder
  "without the head", as BERT's formula counts it).
* **Default inputs per model type.** Text: one sequence of 128 tokens (``input_ids`` int64,
  shape 1x128); vision: one image ``1 x num_channels x image_size x image_size`` from the
  config (1x3x224x224 by default); encoder-decoders: encoder ``input_ids`` 1x128 and
  ``decoder_input_ids`` 1x128. ``--input-shape`` replaces the shapes (one per input).
* **Aliases.** ``t5-small``, ``swin-tiny``, ``resnet-50``, ``vit-base``, ``bert-base`` and
  ``gpt2-small`` name the model type whose ``transformers`` defaults are that size; a
  hyphenated name that is not an alias is refused rather than guessed.
* **Outputs.** The model runs with ``use_cache=False`` and ``return_dict=False`` and the
  wrapper returns its first output (logits, or the last hidden state), so export and the
  partitioned run compare one tensor.
* **Meta device.** For planning the model is built on the meta device (no memory for weights);
  ``materialize=True`` (what ``dnnpart run`` uses) builds it on the CPU after
  ``torch.manual_seed(seed)``, the same weights in every process.
"""

from __future__ import annotations

import json
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from dnnpart._optional import require
from dnnpart.errors import FormatError

#: Hyphenated names accepted for a model type whose transformers defaults are that size.
ALIASES = {
    "t5-small": "t5",
    "swin-tiny": "swin",
    "resnet-50": "resnet",
    "vit-base": "vit",
    "bert-base": "bert",
    "gpt2-small": "gpt2",
}
#: Model types built with their language-model head.
CAUSAL_LM = frozenset(
    {"gpt2", "llama", "mistral", "gpt_neox", "opt", "qwen2", "phi", "gemma", "falcon", "gptj", "bloom"}
)
SEQ2SEQ = frozenset({"t5", "mt5", "bart", "mbart", "pegasus", "marian"})
VISION = frozenset({"resnet", "vit", "swin", "convnext", "deit", "beit", "regnet", "mobilenet_v2"})
TEXT_LENGTH = 128
#: The wrapper's attribute holding the transformers model; stripped from module paths.
INNER = "model"


@dataclass(frozen=True, slots=True)
class HFSpec:
    """A parsed ``hf:`` spec."""

    model_type: str
    overrides: dict[str, Any]


def parse_hf_spec(spec: str, config_file: str | Path | None = None) -> HFSpec:
    """Parse ``hf:ARCH[:KEY=VALUE,...]`` (the leading ``hf:`` optional).

    Examples
    --------
    >>> parse_hf_spec("hf:swin:embed_dim=192,depths=[2,2,18,2],num_heads=[6,12,24,48]").overrides
    {'embed_dim': 192, 'depths': [2, 2, 18, 2], 'num_heads': [6, 12, 24, 48]}
    >>> parse_hf_spec("hf:t5-small").model_type
    't5'
    >>> parse_hf_spec("hf:gpt2:n_layer")
    Traceback (most recent call last):
    ...
    dnnpart.errors.FormatError: hf:gpt2:n_layer: override 'n_layer': expected KEY=VALUE
    """
    body = spec[3:] if spec.startswith("hf:") else spec
    arch, _, rest = body.partition(":")
    arch = arch.strip().lower()
    if not arch:
        raise FormatError(f"{spec}: expected hf:ARCH[:KEY=VALUE,...] (e.g. hf:gpt2:n_layer=2)")
    model_type = ALIASES.get(arch, arch)
    overrides: dict[str, Any] = {}
    if config_file is not None:
        path = Path(config_file)
        try:
            data = json.loads(path.read_text())
        except FileNotFoundError:
            raise FormatError(f"--config {path}: no such file") from None
        except (OSError, ValueError) as exc:
            raise FormatError(f"--config {path}: not a JSON file ({exc})") from None
        if not isinstance(data, dict):
            raise FormatError(f"--config {path}: expected a JSON object of config overrides")
        overrides.update(data)
    for item in _split_top_level(rest):
        key, eq, value = item.partition("=")
        key = key.strip()
        if not eq or not key.isidentifier():
            raise FormatError(f"{spec}: override {item!r}: expected KEY=VALUE")
        try:
            overrides[key] = json.loads(value)
        except ValueError:
            overrides[key] = value
    return HFSpec(model_type=model_type, overrides=overrides)


def _split_top_level(text: str) -> list[str]:
    """Split on commas outside brackets/braces (list values contain commas)."""
    items, depth, start = [], 0, 0
    for i, ch in enumerate(text):
        if ch in "[{":
            depth += 1
        elif ch in "]}":
            depth -= 1
        elif ch == "," and depth == 0:
            items.append(text[start:i])
            start = i + 1
    items.append(text[start:])
    return [s for s in (x.strip() for x in items) if s]


def build_config(parsed: HFSpec, spec: str) -> Any:
    """The ``transformers`` config (``use_cache`` off); unknown types and keys are refused."""
    transformers = require("transformers", extra="hf", caller=f"model {spec!r}")
    try:
        default = transformers.AutoConfig.for_model(parsed.model_type)
    except ValueError:
        raise FormatError(
            f"{spec}: unknown model type {parsed.model_type!r}; expected a transformers model type "
            f"such as gpt2, bert, llama, t5, swin, resnet, vit (aliases: {', '.join(ALIASES)})"
        ) from None
    known = set(default.to_dict())
    for key in parsed.overrides:
        if key not in known and not hasattr(default, key):
            raise FormatError(f"{spec}: {key}: not a field of {type(default).__name__}")
    try:
        # through the constructor, so derived fields (Swin's hidden_size) follow the overrides
        config = transformers.AutoConfig.for_model(parsed.model_type, **parsed.overrides)
    except Exception as exc:  # transformers' validators raise their own error types
        raise FormatError(f"{spec}: invalid config ({_first_line(exc)})") from None
    if hasattr(config, "use_cache"):
        config.use_cache = False
    return config


def input_kind(model_type: str) -> str:
    """``"seq2seq"``, ``"vision"`` or ``"text"``: which default inputs the model takes."""
    if model_type in SEQ2SEQ:
        return "seq2seq"
    if model_type in VISION:
        return "vision"
    return "text"


def default_input_shapes(model_type: str, config: Any) -> list[tuple[int, ...]]:
    """The documented default inputs of a model type (see the module docstring).

    Examples
    --------
    >>> default_input_shapes("gpt2", None), default_input_shapes("t5", None)
    ([(1, 128)], [(1, 128), (1, 128)])
    """
    kind = input_kind(model_type)
    if kind == "vision":
        size = getattr(config, "image_size", 224)
        size = size[0] if isinstance(size, (list, tuple)) else size
        return [(1, int(getattr(config, "num_channels", 3)), int(size), int(size))]
    if kind == "seq2seq":
        return [(1, TEXT_LENGTH), (1, TEXT_LENGTH)]
    return [(1, TEXT_LENGTH)]


def build_hf_model(
    spec: str, *, config_file: str | Path | None = None, materialize: bool = False, seed: int = 0
) -> tuple[Any, list[tuple[int, ...]], str]:
    """Module (wrapped, see :func:`_wrapper_class`), default input shapes and input dtype."""
    torch = require("torch", extra="torch", caller=f"model {spec!r}")
    transformers = require("transformers", extra="hf", caller=f"model {spec!r}")
    parsed = parse_hf_spec(spec, config_file)
    config = build_config(parsed, spec)
    kind = input_kind(parsed.model_type)
    if parsed.model_type in CAUSAL_LM:
        auto = transformers.AutoModelForCausalLM
    elif kind == "seq2seq":
        auto = transformers.AutoModelForSeq2SeqLM
    elif kind == "vision":
        auto = transformers.AutoModelForImageClassification
    else:
        auto = transformers.AutoModel
    transformers.logging.set_verbosity_error()
    torch.manual_seed(seed)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            if materialize:
                inner = auto.from_config(config)
            else:
                with torch.device("meta"):
                    inner = auto.from_config(config)
    except Exception as exc:  # a bad combination of config values fails anywhere inside
        raise FormatError(f"{spec}: transformers could not build the model ({_first_line(exc)})") from None
    inner.eval()
    module = _wrapper_class()(inner, kind)
    dtype = "float32" if kind == "vision" else "int64"
    return module, default_input_shapes(parsed.model_type, config), dtype


def _first_line(exc: BaseException) -> str:
    text = " ".join(str(exc).split())
    return (text[:300] + "...") if len(text) > 300 else (text or type(exc).__name__)


def _wrapper_class() -> type:
    import torch

    class HFWrapper(torch.nn.Module):
        """Positional inputs -> the model's keyword inputs; returns the first output."""

        def __init__(self, model: Any, kind: str) -> None:
            super().__init__()
            self.model = model  # attribute name = INNER
            self.kind = kind

        def forward(self, *inputs: Any) -> Any:
            if self.kind == "vision":
                out = self.model(pixel_values=inputs[0], return_dict=False)
            elif self.kind == "seq2seq":
                out = self.model(
                    input_ids=inputs[0], decoder_input_ids=inputs[1], return_dict=False, use_cache=False
                )
            else:
                out = self.model(input_ids=inputs[0], return_dict=False)
            return out[0]

    return HFWrapper
