"""``hf:ARCH[:KEY=VALUE,...]``: a HuggingFace ``transformers`` model built from its config.

The model is built from ``AutoConfig.for_model(ARCH, **overrides)`` with random weights:
nothing is downloaded and no remote code runs (``trust_remote_code`` is never set; a model
type ``transformers`` does not ship is refused). Overrides are ``KEY=VALUE`` pairs whose values
are JSON (``hf:swin:embed_dim=192,depths=[2,2,18,2],num_heads=[6,12,24,48]``; a value that is
not JSON is taken as a string), or a JSON file of overrides (``config_file``).

Choices (documented in ``docs/capture.md``):

* **Which head: the class users load, chosen from transformers' own tables.** The first of
  :data:`HEADS` whose ``MODEL_FOR_..._MAPPING_NAMES`` lists the model type is built: seq2seq LM
  (``t5``, ``bart``), speech seq2seq (``whisper``), masked LM (encoders: ``bert``,
  ``deberta-v2``, ``roberta``), causal LM (decoders: ``gpt2``, ``llama``, ``mixtral``,
  ``mamba``...), image classification (``vit``, ``swin``, ``resnet``, ``convnext``). The order
  decides for types listed twice: an encoder-decoder is listed as a causal LM too (its decoder
  alone), and an encoder as a causal LM (``BertLMHeadModel``, a decoder variant); seq2seq and
  masked LM come first so they get the class their checkpoints ship. A type in none of them gets
  the bare ``AutoModel`` and a note saying so. No model type is named in our code.
* **Default inputs, by the model's input names** (:func:`default_inputs`): the class's
  ``main_input_name``, plus ``decoder_input_ids`` for an encoder-decoder config. Token ids
  (``*_ids``) are int64 ``1 x L`` with ``L`` = 128, or the config's position limit where it is
  shorter (``max_target_positions`` for a decoder's ids); ``pixel_values`` float32
  ``1 x num_channels x image_size x image_size`` (1x3x224x224 without those fields);
  ``input_features`` (speech) float32 ``1 x num_mel_bins x 2 max_source_positions``, the frame
  count a Whisper encoder requires after its two convolutions (stride 1 and 2); ``input_values``
  (raw audio) float32 ``1 x 16000``. Inputs given by name (``--input name=shape:dtype``) replace
  the default of that name or are added after the defaults; a name must be a tensor argument of
  the class's ``forward`` (:func:`tensor_arguments`).
* **Mixture of experts.** A config with ``num_experts_per_tok`` (top-k routing) and an expert
  count (``num_local_experts``, ``num_experts`` or ``n_routed_experts``) gets a note stating the
  routed fraction: the captured expert matmuls have one row per (token, chosen expert) pair, so
  each token's FLOPs count ``k`` experts, not ``n`` (:mod:`dnnpart.cost.ops`, ``grouped_mm``).
* **Aliases.** ``t5-small``, ``swin-tiny``, ``resnet-50``, ``vit-base``, ``bert-base`` and
  ``gpt2-small`` name the model type whose ``transformers`` defaults are that size; a
  hyphenated name that is not an alias is refused rather than guessed.
* **Outputs.** The model runs with ``use_cache`` off and ``return_dict=False``; the wrapper
  passes its positional inputs as the named keyword arguments and returns the first output
  (the logits), so export and the partitioned run compare one tensor.
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
from dnnpart.limits import MAX_CONFIG_BYTES, check_estimate, check_int_range, check_nesting, read_bounded

#: Hyphenated names accepted for a model type whose transformers defaults are that size.
ALIASES = {
    "t5-small": "t5",
    "swin-tiny": "swin",
    "resnet-50": "resnet",
    "vit-base": "vit",
    "bert-base": "bert",
    "gpt2-small": "gpt2",
}
#: Heads in preference order: (transformers' ``modeling_auto`` table, the head, the Auto class).
HEADS = (
    ("MODEL_FOR_SEQ_TO_SEQ_CAUSAL_LM_MAPPING_NAMES", "seq2seq LM", "AutoModelForSeq2SeqLM"),
    ("MODEL_FOR_SPEECH_SEQ_2_SEQ_MAPPING_NAMES", "speech seq2seq", "AutoModelForSpeechSeq2Seq"),
    ("MODEL_FOR_MASKED_LM_MAPPING_NAMES", "masked LM", "AutoModelForMaskedLM"),
    ("MODEL_FOR_CAUSAL_LM_MAPPING_NAMES", "causal LM", "AutoModelForCausalLM"),
    ("MODEL_FOR_IMAGE_CLASSIFICATION_MAPPING_NAMES", "image classification",
     "AutoModelForImageClassification"),
)
#: Config fields holding the expert count of a mixture-of-experts layer (the first one set).
EXPERT_COUNT_FIELDS = ("num_local_experts", "num_experts", "n_routed_experts")
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
        overrides.update(read_config_file(config_file))
    check_nesting(rest, spec)
    for item in _split_top_level(rest):
        key, eq, value = item.partition("=")
        key = key.strip()
        if not eq or not key.isidentifier():
            raise FormatError(f"{spec}: override {item[:60]!r}: expected KEY=VALUE")
        try:
            overrides[key] = json.loads(value)
        except ValueError:
            overrides[key] = value
    check_override_sizes(overrides, spec)
    return HFSpec(model_type=model_type, overrides=overrides)


def read_config_file(config_file: str | Path) -> dict[str, Any]:
    """The JSON object of a ``--config`` file, read through the bounded reader
    (:func:`~dnnpart.limits.read_bounded`, at most :data:`~dnnpart.limits.MAX_CONFIG_BYTES`;
    ``/dev/zero`` or a FIFO is refused at once)."""
    path = Path(config_file)
    try:
        raw = read_bounded(path, limit=MAX_CONFIG_BYTES, what="JSON file of config overrides")
    except FormatError as exc:
        raise FormatError(f"--config {exc}") from None
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise FormatError(f"--config {path}: not a UTF-8 JSON file") from None
    check_nesting(text, f"--config {path}")
    try:
        data = json.loads(text)
    except ValueError as exc:
        raise FormatError(f"--config {path}: not a JSON file ({_first_line(exc)})") from None
    if not isinstance(data, dict):
        raise FormatError(f"--config {path}: expected a JSON object of config overrides")
    return data


_LAYERS = "capture time and the graph grow with every layer; the largest published models have ~130"
_WIDTH = "tensor sizes and FLOPs multiply it"
#: Size-like config fields, recognised by name (first match wins): ``(name parts, low, high,
#: why)``. Integers (and lists of integers: Swin's ``depths``) are checked; other values go to
#: transformers' own validation.
SIZE_FIELDS: tuple[tuple[tuple[str, ...], int, int, str], ...] = (
    (("vocab",), 1, 1 << 20, "the embedding and the LM head multiply it"),
    (("position", "n_ctx", "seq_len", "max_length", "context"), 1, 1 << 20,
     "position tables and attention grow with it"),
    (("image_size", "patch_size"), 1, 8192, "tensor sizes multiply it"),
    (("channels", "mel_bins"), 1, 4096, "tensor sizes multiply it"),
    (("head_dim", "d_kv"), 1, 1 << 16, _WIDTH),
    (("head",), 1, 1024, "one attention group per head"),
    (("layer", "depth"), 1, 256, _LAYERS),
    (("expert",), 1, 1024, "one weight matrix per expert"),
    (("num_labels",), 1, 1 << 20, "the classifier multiplies it"),
    (("hidden", "n_embd", "d_model", "dim", "intermediate", "ffn", "d_ff", "n_inner",
      "embedding_size", "d_inner", "state_size"), 1, 1 << 16, _WIDTH),
)
#: Most layers of all stacks together (encoder + decoder...).
MAX_LAYERS = 256
#: Largest model ``run`` builds with real weights (bytes of float32 parameters): every
#: process of a partitioned run holds them.
MAX_WEIGHT_BYTES = 4 << 30
#: Integers of other fields (token ids, window sizes...) stay in int32.
_INT32 = 2**31


def size_field(key: str) -> tuple[int, int, str] | None:
    """``(low, high, why)`` of a size-like config field, by its name; ``None`` otherwise.

    Examples
    --------
    >>> size_field("n_layer")[:2], size_field("num_attention_heads")[:2], size_field("pad_token_id")
    ((1, 256), (1, 1024), None)
    """
    low = key.lower()
    if low.endswith(("_id", "_ids")) or low.startswith(("use_", "is_", "output_")):
        return None
    for parts, lo, hi, why in SIZE_FIELDS:
        if any(part in low for part in parts):
            return lo, hi, why
    return None


def check_override_sizes(overrides: dict[str, Any], spec: str) -> None:
    """Refuse size-like overrides outside their range (:data:`SIZE_FIELDS`), integers past
    int32 elsewhere, and more than :data:`MAX_LAYERS` layers in all, before transformers sees
    them (``n_layer=1000000000`` used to hang, ``n_layer=-1`` to build an empty model).

    Examples
    --------
    >>> check_override_sizes({"n_layer": -1}, "hf:gpt2:n_layer=-1")
    Traceback (most recent call last):
    ...
    dnnpart.errors.FormatError: hf:gpt2:n_layer=-1: n_layer: expected an integer in 1..256, got -1
    """
    layers = 0
    for key, value in overrides.items():
        bound = size_field(key)
        values = value if isinstance(value, list) else [value]
        for i, item in enumerate(values):
            if isinstance(item, bool) or not isinstance(item, int):
                continue
            where = f"{spec}: {key}" + (f"[{i}]" if isinstance(value, list) else "")
            if bound is None:
                check_int_range(item, where, -_INT32, _INT32 - 1)
                continue
            check_int_range(item, where, *bound)
            if bound[2] is _LAYERS:
                layers += item
    if layers > MAX_LAYERS:
        raise FormatError(f"{spec}: {layers} layers in all, more than the {MAX_LAYERS} dnnpart "
                          f"captures ({_LAYERS})")


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
    # its log lines (special-token ids outside a small vocabulary...) would bypass our one-line
    # messages; what the user must know is in our notes and errors
    transformers.logging.set_verbosity_error()
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # transformers' config warnings: ours say what matters
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
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            config = transformers.AutoConfig.for_model(parsed.model_type, **parsed.overrides)
    except Exception as exc:  # transformers' validators raise their own error types
        raise FormatError(f"{spec}: invalid config ({_first_line(exc)})") from None
    if hasattr(config, "use_cache"):
        config.use_cache = False
    return config


@dataclass(frozen=True, slots=True)
class HFModel:
    """A built ``hf:`` model, before its inputs are chosen.

    Attributes
    ----------
    model : the ``transformers`` model (on the meta device unless materialised).
    config : its config.
    head : the head it was built with (``"causal LM"``...; ``""`` for the bare model).
    notes : what the user is told: the class chosen, the routed fraction of a mixture of experts.
    """

    model: Any
    config: Any
    head: str
    notes: tuple[str, ...]

    @property
    def class_name(self) -> str:
        return type(self.model).__name__


def choose_head(model_type: str) -> tuple[str, str] | None:
    """``(head, Auto class name)`` of the first of :data:`HEADS` listing ``model_type``, or ``None``.

    Examples
    --------
    >>> choose_head("mixtral"), choose_head("bert")
    (('causal LM', 'AutoModelForCausalLM'), ('masked LM', 'AutoModelForMaskedLM'))
    >>> choose_head("whisper"), choose_head("canine")
    (('speech seq2seq', 'AutoModelForSpeechSeq2Seq'), None)
    """
    from transformers.models.auto import modeling_auto

    for table, head, auto in HEADS:
        if model_type in getattr(modeling_auto, table, {}):
            return head, auto
    return None


def moe_note(config: Any) -> str | None:
    """The routed fraction of a mixture-of-experts config (module docstring), or ``None``.

    Examples
    --------
    >>> from types import SimpleNamespace
    >>> moe_note(SimpleNamespace(num_experts_per_tok=2, num_local_experts=8))  # doctest: +ELLIPSIS
    'mixture of experts: each token is routed to 2 of 8 experts; ...'
    """
    k = getattr(config, "num_experts_per_tok", None)
    n = next((getattr(config, f) for f in EXPERT_COUNT_FIELDS if getattr(config, f, None)), None)
    if not isinstance(k, int) or not isinstance(n, int) or k <= 0 or n <= 0:
        return None
    return (f"mixture of experts: each token is routed to {k} of {n} experts; the expert matmuls "
            f"are priced by FLOPs for {k} experts per token ({k}/{n} of the expert weights)")


def build_hf_model(
    spec: str, *, config_file: str | Path | None = None, materialize: bool = False, seed: int = 0
) -> HFModel:
    """Build the model of ``spec`` with its head (module docstring); not yet wrapped."""
    torch = require("torch", extra="torch", caller=f"model {spec!r}")
    transformers = require("transformers", extra="hf", caller=f"model {spec!r}")
    parsed = parse_hf_spec(spec, config_file)
    config = build_config(parsed, spec)
    choice = choose_head(parsed.model_type)
    head, auto_name = choice if choice is not None else ("", "AutoModel")
    auto = getattr(transformers, auto_name)
    torch.manual_seed(seed)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            with torch.device("meta"):  # no memory: what the weights would take is counted first
                inner = auto.from_config(config)
            if materialize:
                weights = 4 * sum(p.numel() for p in inner.parameters())
                check_estimate(weights, MAX_WEIGHT_BYTES, f"{spec}: the model's size", "float32 weights",
                               "`run` builds the weights in every process; give smaller sizes")
                torch.manual_seed(seed)
                inner = auto.from_config(config)
    except FormatError:
        raise
    except Exception as exc:  # a bad combination of config values fails anywhere inside
        raise FormatError(f"{spec}: transformers could not build the model ({_first_line(exc)})") from None
    inner.eval()
    name = type(inner).__name__
    notes = [f"hf:{parsed.model_type} -> {name} ({head} head)" if head else
             f"hf:{parsed.model_type} -> {name} (no head: transformers lists no seq2seq, masked LM, "
             f"causal LM or image-classification class for {parsed.model_type!r})"]
    moe = moe_note(config)
    if moe is not None:
        notes.append(moe)
    return HFModel(model=inner, config=config, head=head, notes=tuple(notes))


def tensor_arguments(model: Any) -> tuple[str, ...]:
    """The tensor arguments of ``model.forward`` by name (those annotated as tensors).

    ``labels`` is left out (with labels the first output is the loss, not the logits), and so
    are tuples of tensors (``encoder_outputs``).
    """
    import inspect

    try:
        params = inspect.signature(model.forward).parameters.values()
    except (TypeError, ValueError):
        return ()
    names = []
    for p in params:
        if p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD) or p.name in ("self", "labels"):
            continue
        annotation = p.annotation if isinstance(p.annotation, str) else repr(p.annotation)
        if "Tensor" in annotation and "tuple" not in annotation:  # not encoder_outputs
            names.append(p.name)
    return tuple(names)


def input_dtype(name: str) -> str:
    """Default dtype of an input by its name: ids and masks int64, the rest float32.

    Examples
    --------
    >>> input_dtype("decoder_input_ids"), input_dtype("attention_mask"), input_dtype("pixel_values")
    ('int64', 'int64', 'float32')
    """
    return "int64" if name.endswith("_ids") or "mask" in name else "float32"


def default_inputs(model: Any, config: Any) -> list[tuple[str, tuple[int, ...]]]:
    """The default inputs of a built model: ``(name, shape)`` each (module docstring).

    Examples
    --------
    >>> from types import SimpleNamespace as NS
    >>> default_inputs(NS(main_input_name="input_ids"), NS(is_encoder_decoder=True, n_positions=64))
    [('input_ids', (1, 64)), ('decoder_input_ids', (1, 64))]
    >>> default_inputs(NS(main_input_name="input_features"),
    ...                NS(is_encoder_decoder=True, num_mel_bins=80, max_source_positions=1500))
    [('input_features', (1, 80, 3000)), ('decoder_input_ids', (1, 128))]
    """
    main = str(getattr(model, "main_input_name", "input_ids"))
    names = [main]
    if getattr(config, "is_encoder_decoder", False) and main != "decoder_input_ids":
        names.append("decoder_input_ids")
    return [(name, _default_shape(name, config)) for name in names]


def _default_shape(name: str, config: Any) -> tuple[int, ...]:
    if name == "pixel_values":
        size = getattr(config, "image_size", 224)
        size = size[0] if isinstance(size, (list, tuple)) else size
        return (1, int(getattr(config, "num_channels", 3)), int(size), int(size))
    if name == "input_features":
        mels = int(getattr(config, "num_mel_bins", 0) or getattr(config, "feature_size", 80))
        frames = 2 * int(getattr(config, "max_source_positions", 1500))
        return (1, mels, frames)
    if name == "input_values":
        return (1, 16000)
    limits: tuple[str, ...] = ("max_position_embeddings", "n_positions", "n_ctx")
    if name.startswith("decoder_"):
        limits = ("max_target_positions", *limits)
    limit = next((int(v) for v in (getattr(config, f, None) for f in limits) if isinstance(v, int)
                  and v > 0), TEXT_LENGTH)
    return (1, min(TEXT_LENGTH, limit))


def wrap(model: Any, names: tuple[str, ...]) -> Any:
    """The module that is captured: positional inputs -> ``model``'s keyword inputs ``names``."""
    return _wrapper_class()(model, names)


def _first_line(exc: BaseException) -> str:
    text = " ".join(str(exc).split())
    return (text[:300] + "...") if len(text) > 300 else (text or type(exc).__name__)


def _wrapper_class() -> type:
    import torch

    class HFWrapper(torch.nn.Module):
        """Positional inputs -> the model's keyword inputs; returns the first output."""

        def __init__(self, model: Any, names: tuple[str, ...]) -> None:
            super().__init__()
            self.model = model  # attribute name = INNER
            self.input_names = tuple(names)
            vocab = getattr(getattr(model, "config", None), "vocab_size", None)
            #: token ids of the example inputs are drawn below this (sources.example_inputs)
            self.vocab_size = vocab if isinstance(vocab, int) and vocab > 0 else None

        def forward(self, *inputs: Any) -> Any:
            kwargs = dict(zip(self.input_names, inputs, strict=True))
            out = self.model(**kwargs, return_dict=False)
            return out[0]

    return HFWrapper
