"""Resolve what the user named as a model: an ``.onnx`` file or a torch module factory.

Model specs:

* ``path/to/model.onnx`` -- the ONNX frontend;
* ``builtin:NAME`` -- our own ``torch.nn`` models (:mod:`dnnpart.frontends.models`):
  ``resnet50``, ``inception_v3``, ``bert``;
* ``torchvision:NAME`` -- ``torchvision.models.get_model(NAME, weights=None)``; where
  torchvision cannot be imported, the builtin model of the same name stands in (with a
  warning), since there is no CPU build of torchvision to install;
* ``module:package.module:callable`` -- any importable callable returning an ``nn.Module``;
* ``hf:ARCH[:KEY=VALUE,...]`` -- a HuggingFace ``transformers`` model built from its config
  (:mod:`dnnpart.frontends.hf`), on the meta device unless ``materialize``.

Torch models are put in eval mode and get deterministic random example inputs of the given
shapes (defaults for the builtin and ``hf:`` models). Inputs are given either as shapes in
order with one dtype for all (``--input-shape``/``--input-dtype``, the single-input shorthand)
or by name, each with its own shape and dtype (``--input name=shape:dtype``, :class:`ModelInput`):
``hf:`` models take them as keyword arguments (replacing the default input of that name, or
added after the defaults); other torch models take them positionally in the order of their
``forward``'s parameters; ONNX files by graph-input name. Token ids are drawn below the
model's vocabulary, masks are ones. They are captured with ``torch.export``
(:mod:`dnnpart.frontends.export_import`, the default ``frontend="export"``); ``frontend="fx"``
keeps the symbolic ``torch.fx`` tracer for modules it can follow (one node per module call).
"""

from __future__ import annotations

import importlib
import warnings
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from dnnpart._optional import require
from dnnpart.cost.model import CostModel
from dnnpart.errors import FormatError, MissingDependencyError, UsageError
from dnnpart.frontends.build import ImportedModel
from dnnpart.frontends.ir import ModelIR
from dnnpart.limits import check_input_bytes

if TYPE_CHECKING:
    import torch

DTYPES = ("float32", "float64", "int64", "int32")
FRONTENDS = ("export", "fx")
_TORCHVISION_STANDINS = {"resnet50": "resnet50", "inception_v3": "inception_v3"}


@dataclass(frozen=True, slots=True)
class ModelInput:
    """One named example input (``--input name=shape:dtype``); ``dtype`` ``None``: the model's."""

    name: str
    shape: tuple[int, ...]
    dtype: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "shape": list(self.shape), "dtype": self.dtype}


def parse_input(text: str) -> ModelInput:
    """``"input_ids=1x16:int64"`` (``NAME=SHAPE[:DTYPE]``, shape as in :func:`parse_shape`).

    Examples
    --------
    >>> parse_input("decoder_input_ids=1x8:int64")
    ModelInput(name='decoder_input_ids', shape=(1, 8), dtype='int64')
    >>> parse_input("pixel_values=1,3,32,32").dtype is None
    True
    >>> parse_input("1x8:int64")
    Traceback (most recent call last):
    ...
    dnnpart.errors.UsageError: --input '1x8:int64': expected NAME=SHAPE[:DTYPE], e.g. input_ids=1x16:int64
    """
    name, eq, rest = text.partition("=")
    name = name.strip()
    if not eq or not name.isidentifier():
        raise UsageError(f"--input {text!r}: expected NAME=SHAPE[:DTYPE], e.g. input_ids=1x16:int64")
    shape_text, colon, dtype = rest.partition(":")
    dtype = dtype.strip()
    if colon and dtype not in DTYPES:
        raise UsageError(f"--input {text!r}: dtype {dtype!r}: expected one of {', '.join(DTYPES)}")
    try:
        shape = parse_shape(shape_text)
    except FormatError:
        raise UsageError(f"--input {text!r}: shape {shape_text!r}: expected positive integers like "
                         "1x16 or 1,3,224,224") from None
    return ModelInput(name=name, shape=shape, dtype=dtype if colon else None)


def inputs_from_json(value: Any, where: str) -> tuple[ModelInput, ...]:
    """The ``inputs`` list of a plan file's model block (:meth:`ModelInput.to_dict` each)."""
    if not isinstance(value, list):
        raise FormatError(f"{where}: expected a list of {{name, shape, dtype}}, got {type(value).__name__}")
    out = []
    for i, item in enumerate(value):
        at = f"{where}[{i}]"
        if not isinstance(item, dict):
            raise FormatError(f"{at}: expected an object {{name, shape, dtype}}, got {type(item).__name__}")
        name, shape, dtype = item.get("name"), item.get("shape"), item.get("dtype")
        if not isinstance(name, str) or not name.isidentifier():
            raise FormatError(f"{at}.name: expected an identifier, got {name!r}")
        if (not isinstance(shape, list) or not shape
                or any(isinstance(d, bool) or not isinstance(d, int) or not 0 < d < 2**31 for d in shape)):
            raise FormatError(f"{at}.shape: expected a list of positive integers, got {shape!r}")
        if dtype is not None and dtype not in DTYPES:
            raise FormatError(f"{at}.dtype: expected one of {', '.join(DTYPES)} or null, got {dtype!r}")
        out.append(ModelInput(name=name, shape=tuple(shape), dtype=dtype))
    return tuple(out)


@dataclass(slots=True, kw_only=True)
class ModelSource:
    """A resolved model: a torch module with example inputs, or an ONNX file.

    ``input_dtype`` is the dtype of every input, or one per input joined by commas
    (``"float32,int64"``) where they differ: what :func:`example_inputs` takes.
    ``input_names`` name the inputs where known (``hf:`` models, ``--input``); ``model_class``
    is the class built (``MixtralForCausalLM``) and ``notes`` what the user is told about it.
    """

    spec: str
    module: Any = None  # torch.nn.Module
    example_inputs: tuple[Any, ...] = ()
    onnx_path: Path | None = None
    input_shapes: list[tuple[int, ...]] = field(default_factory=list)
    input_dtype: str = "float32"
    input_names: tuple[str, ...] = ()
    frontend: str = "export"
    #: wrapper attribute stripped from module paths (``model`` for ``hf:`` models)
    strip_prefix: str = ""
    model_class: str = ""
    notes: tuple[str, ...] = ()

    @property
    def input_dtypes(self) -> tuple[str, ...]:
        """The dtype of each input."""
        return _dtypes(self.input_dtype, len(self.input_shapes))

    @property
    def inputs(self) -> tuple[ModelInput, ...]:
        """The inputs by name (empty where the names are unknown)."""
        if not self.input_names:
            return ()
        dtypes = self.input_dtypes if self.is_torch else (None,) * len(self.input_names)
        return tuple(ModelInput(name=n, shape=tuple(s), dtype=d)
                     for n, s, d in zip(self.input_names, self.input_shapes, dtypes, strict=True))

    @property
    def is_torch(self) -> bool:
        return self.module is not None

    @property
    def name(self) -> str:
        if self.onnx_path is not None:
            return self.onnx_path.stem
        if self.spec.startswith("hf:"):
            return self.spec[3:].split(":")[0]
        return self.spec.split(":")[-1]


#: Spec prefixes that name a model (imported on the fly) rather than a graph file.
MODEL_PREFIXES = ("builtin:", "torchvision:", "module:", "hf:")
#: Cluster a model spec is priced for when the command names no cluster.
DEFAULT_MODEL_CLUSTER = "4xA100"


@dataclass(frozen=True, slots=True, kw_only=True)
class ModelOptions:
    """How to turn a model spec into a graph (the CLI's model options)."""

    input_shapes: tuple[tuple[int, ...], ...] = ()
    input_dtype: str | None = None
    inputs: tuple[ModelInput, ...] = ()
    training: bool = False
    optimizer: str | None = None
    precision: str = "fp32"
    frontend: str = "export"
    config_file: str | None = None
    granularity: str = "op"


def is_model_spec(spec: str) -> bool:
    """Whether ``spec`` names a model (``hf:``, ``builtin:``, ``module:``, ``torchvision:``, ``.onnx``).

    Examples
    --------
    >>> is_model_spec("hf:gpt2"), is_model_spec("model.onnx"), is_model_spec("graph.json")
    (True, True, False)
    """
    text = str(spec)
    return text.startswith(MODEL_PREFIXES) or text.lower().endswith(".onnx")


def import_model_spec(
    spec: str, options: ModelOptions | None = None, *, cluster_spec: str = DEFAULT_MODEL_CLUSTER
) -> tuple[ImportedModel, Any]:
    """Import a model spec into a priced graph; returns it and the priced cluster it was priced for.

    This is the one place where a GRAPH argument that names a model is resolved (the CLI's
    ``info``, ``solve``, ``evaluate``, ``simulate`` go through
    :func:`dnnpart.workflow.load_problem`, which calls it).
    """
    from dnnpart.cost.clusters import resolve_cluster

    opts = options or ModelOptions()
    priced = resolve_cluster(cluster_spec)
    model = priced.cost_model.with_precision(opts.precision)
    source = resolve_model(
        spec,
        input_shapes=list(opts.input_shapes) or None,
        input_dtype=opts.input_dtype,
        inputs=opts.inputs,
        frontend=opts.frontend,
        config_file=opts.config_file,
    )
    imported = import_source(
        source, cost_model=model, training=opts.training, optimizer=opts.optimizer,
        granularity=opts.granularity,
    )
    return imported, priced


def parse_shape(text: str) -> tuple[int, ...]:
    """``"1,3,224,224"`` (or ``1x3x224x224``) -> ``(1, 3, 224, 224)``.

    Examples
    --------
    >>> parse_shape("1,3,224,224"), parse_shape("2x128")
    ((1, 3, 224, 224), (2, 128))
    >>> parse_shape("1,-3")
    Traceback (most recent call last):
    ...
    dnnpart.errors.FormatError: --input-shape '1,-3': expected positive integers like 1,3,224,224
    """
    parts = text.replace("x", ",").replace(" ", "").strip("()[]").split(",")
    try:
        dims = tuple(int(p) for p in parts if p != "")
    except ValueError:
        dims = ()
    if not dims or any(d <= 0 for d in dims):
        raise FormatError(f"--input-shape {text!r}: expected positive integers like 1,3,224,224")
    return dims


def resolve_model(
    spec: str,
    *,
    input_shapes: Sequence[Sequence[int]] | None = None,
    input_dtype: str | None = None,
    inputs: Sequence[ModelInput] | None = None,
    seed: int = 0,
    frontend: str = "export",
    config_file: str | Path | None = None,
    materialize: bool = False,
) -> ModelSource:
    """Resolve a model spec (see the module docstring); torch specs are built and given inputs.

    ``input_shapes``/``input_dtype`` (shapes in input order, one dtype) and ``inputs`` (by
    name, :class:`ModelInput`) are two ways to give the example inputs; not both.
    ``materialize`` builds ``hf:`` models with real (seeded) weights instead of on the meta
    device, as running them needs; ``config_file`` holds ``hf:`` config overrides (JSON).
    """
    if frontend not in FRONTENDS:
        raise FormatError(f"--frontend {frontend!r}: expected one of {', '.join(FRONTENDS)}")
    shapes = [tuple(int(d) for d in s) for s in (input_shapes or [])]
    if input_dtype is not None and input_dtype not in DTYPES:
        raise FormatError(f"--input-dtype {input_dtype!r}: expected one of {', '.join(DTYPES)}")
    named = tuple(inputs or ())
    if named and (shapes or input_dtype is not None):
        raise UsageError("--input: give the inputs either by name (--input NAME=SHAPE[:DTYPE]) or "
                         "with --input-shape/--input-dtype, not both")
    seen = [i.name for i in named]
    if len(set(seen)) < len(seen):
        twice = next(n for n in seen if seen.count(n) > 1)
        raise UsageError(f"--input {twice}: given twice")
    if spec.lower().endswith(".onnx") and ":" not in spec.split("/")[-1]:
        path = Path(spec)
        if not path.is_file():
            raise FormatError(f"{path}: no such file")
        if named:
            return ModelSource(spec=spec, onnx_path=path, input_shapes=[i.shape for i in named],
                               input_names=tuple(seen))
        return ModelSource(spec=spec, onnx_path=path, input_shapes=shapes)
    kind, _, rest = spec.partition(":")
    if not rest:
        raise FormatError(
            f"model {spec!r}: expected FILE.onnx, builtin:NAME, torchvision:NAME, hf:ARCH "
            "or module:PACKAGE.MODULE:CALLABLE"
        )
    if kind == "hf":  # its sizes are checked before torch and transformers load (seconds)
        from dnnpart.frontends.hf import parse_hf_spec

        parse_hf_spec(spec, config_file)
    require("torch", extra="torch", caller=f"model {spec!r}")
    if kind == "hf":
        return _hf_source(spec, shapes, input_dtype, named, seed=seed, frontend=frontend,
                          config_file=config_file, materialize=materialize)
    default_shape: tuple[int, ...] | None = None
    default_dtype = "float32"
    if kind == "builtin":
        module, default_shape, default_dtype = _builtin(rest)
    elif kind == "torchvision":
        module, default_shape = _torchvision(rest)
    elif kind == "module":
        module = _from_callable(rest, spec)
    else:
        raise FormatError(
            f"model {spec!r}: unknown kind {kind!r}; expected builtin, torchvision, hf or module"
        )
    names: tuple[str, ...] = ()
    if named:
        ordered = _in_forward_order(module, named, spec)
        names = tuple(i.name for i in ordered)
        shapes = [i.shape for i in ordered]
        dtypes = [i.dtype or default_dtype for i in ordered]
    else:
        if not shapes:
            if default_shape is None:
                raise FormatError(f"model {spec!r}: pass --input-shape (e.g. --input-shape 1,3,224,224)")
            shapes = [default_shape]
        dtypes = [input_dtype or default_dtype] * len(shapes)
    return _torch_source(spec, module, shapes, dtypes, names, seed=seed, frontend=frontend)


def _torch_source(spec: str, module: Any, shapes: list[tuple[int, ...]], dtypes: Sequence[str],
                  names: tuple[str, ...], *, seed: int, frontend: str, strip: str = "",
                  model_class: str = "", notes: tuple[str, ...] = ()) -> ModelSource:
    module.eval()
    dtype = _joined(dtypes)
    # a meta-device model gets meta inputs, made there: nothing allocated, whatever the shape
    inputs = example_inputs(shapes, dtype, seed=seed, module=module, meta=_on_meta(module))
    return ModelSource(spec=spec, module=module, input_shapes=shapes, input_dtype=dtype,
                       input_names=names, example_inputs=inputs, frontend=frontend,
                       strip_prefix=strip, model_class=model_class or type(module).__name__,
                       notes=notes)


def _hf_source(spec: str, shapes: list[tuple[int, ...]], input_dtype: str | None,
               named: tuple[ModelInput, ...], *, seed: int, frontend: str,
               config_file: str | Path | None, materialize: bool) -> ModelSource:
    """An ``hf:`` model with its head, wrapped to take its inputs positionally."""
    from dnnpart.frontends import hf

    if frontend == "fx":
        raise FormatError(f"model {spec!r}: hf: models need the export frontend (--frontend export)")
    built = hf.build_hf_model(spec, config_file=config_file, materialize=materialize, seed=seed)
    defaults = hf.default_inputs(built.model, built.config)
    if len(shapes) > len(defaults):
        listed = ", ".join(n for n, _ in defaults)
        raise UsageError(f"--input-shape: {spec} takes {len(defaults)} input(s) ({listed}), got "
                         f"{len(shapes)} shapes; name other inputs with --input NAME=SHAPE[:DTYPE]")
    chosen: dict[str, tuple[tuple[int, ...], str]] = {}
    for i, (name, shape) in enumerate(defaults):
        chosen[name] = (shapes[i] if i < len(shapes) else shape, input_dtype or hf.input_dtype(name))
    if named:
        accepted = hf.tensor_arguments(built.model)
        for item in named:
            if accepted and item.name not in accepted:
                raise UsageError(f"--input {item.name}: not an input of {built.class_name}; its tensor "
                                 f"inputs are {', '.join(accepted)}")
            chosen[item.name] = (item.shape, item.dtype or hf.input_dtype(item.name))
    names = tuple(chosen)
    module = hf.wrap(built.model, names)
    return _torch_source(spec, module, [s for s, _ in chosen.values()], [d for _, d in chosen.values()],
                         names, seed=seed, frontend=frontend, strip=hf.INNER,
                         model_class=built.class_name, notes=built.notes)


def _in_forward_order(module: Any, named: tuple[ModelInput, ...], spec: str) -> list[ModelInput]:
    """Named inputs of a torch module in the order of its ``forward``'s positional parameters."""
    import inspect

    try:
        params = list(inspect.signature(module.forward).parameters.values())
    except (TypeError, ValueError):
        return list(named)
    if any(p.kind is p.VAR_POSITIONAL for p in params):
        return list(named)  # forward(*inputs): the order given
    positional = [p.name for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    by_name = {i.name: i for i in named}
    for name in by_name:
        if name not in positional:
            raise UsageError(f"--input {name}: not an input of {spec} (its forward takes "
                             f"{', '.join(positional) or 'no named inputs'})")
    missing = [n for n in positional[: max(positional.index(n) for n in by_name) + 1] if n not in by_name]
    if missing:
        raise UsageError(f"--input: {spec} takes its inputs in the order {', '.join(positional)}; "
                         f"give {', '.join(missing)} too")
    return [by_name[n] for n in positional if n in by_name]


def _joined(dtypes: Sequence[str]) -> str:
    """One dtype when all inputs share it, else one per input joined by commas."""
    unique = set(dtypes)
    if not dtypes:
        return "float32"
    return dtypes[0] if len(unique) == 1 else ",".join(dtypes)


def _dtypes(dtype: str | Sequence[str], count: int) -> tuple[str, ...]:
    """Per-input dtypes of ``dtype`` (one for all, comma-joined, or a sequence)."""
    parts = tuple(dtype.split(",")) if isinstance(dtype, str) else tuple(dtype)
    if len(parts) == 1:
        return parts * count
    if len(parts) != count:
        raise FormatError(f"input dtypes {','.join(parts)}: expected one dtype or {count}")
    return parts


def _on_meta(module: Any) -> bool:
    first = next(iter(module.parameters()), None)
    return first is not None and bool(first.is_meta)


def example_inputs(
    shapes: Sequence[tuple[int, ...]], dtype: str | Sequence[str], *, seed: int = 0, module: Any = None,
    meta: bool = False,
) -> tuple[Any, ...]:
    """Deterministic random inputs: normal floats; token ids below the vocabulary (the
    module's ``vocab_size`` where it has one, else its first embedding's size); ones for
    inputs named as masks (``module.input_names``).

    ``dtype`` is one dtype for all inputs, one per input joined by commas, or a sequence.
    ``meta``: empty tensors on the meta device (shapes and dtypes only, nothing allocated).
    The sizes are checked first (:func:`~dnnpart.limits.check_input_bytes`): at most 1 GiB on
    the CPU, ``2**40`` elements per input on the meta device.

    Examples
    --------
    >>> example_inputs([(10**6, 3, 10**3, 10**3)], "float32")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    dnnpart.errors.FormatError: --input-shape/--input 1000000x3x1000x1000: 12,000,000,000,000 bytes, ...
    >>> example_inputs([(10**5, 3, 10**3, 10**3)], "float32", meta=True)[0].is_meta  # 1.2 TB, on meta
    True
    """
    import torch

    dtypes = _dtypes(dtype, len(shapes))
    check_input_bytes(shapes, [getattr(torch, dt).itemsize for dt in dtypes], meta=meta)
    if meta:
        return tuple(torch.empty(shape, dtype=getattr(torch, dt), device="meta")
                     for shape, dt in zip(shapes, dtypes, strict=True))
    gen = torch.Generator().manual_seed(seed)
    names = tuple(getattr(module, "input_names", ()) or ())
    high = getattr(module, "vocab_size", None) if module is not None else None
    if not isinstance(high, int) or high <= 0:
        high = 2
        if module is not None:
            emb = next((m for m in module.modules() if isinstance(m, torch.nn.Embedding)), None)
            high = emb.num_embeddings if emb is not None else 2
    out = []
    for i, (shape, dt) in enumerate(zip(shapes, dtypes, strict=True)):
        kind = getattr(torch, dt)
        if dt.startswith("int") and i < len(names) and "mask" in names[i]:
            out.append(torch.ones(shape, dtype=kind))
        elif dt.startswith("int"):
            out.append(torch.randint(0, high, shape, generator=gen, dtype=kind))
        else:
            out.append(torch.randn(shape, generator=gen, dtype=kind))
    return tuple(out)


def _builtin(name: str) -> tuple[torch.nn.Module, tuple[int, ...], str]:
    import torch

    from dnnpart.frontends.models import BUILTIN_MODELS

    key = name.lower().replace("-", "_")
    if key not in BUILTIN_MODELS:
        raise FormatError(f"builtin:{name}: unknown model; builtin models are {', '.join(BUILTIN_MODELS)}")
    factory, shape, dtype = BUILTIN_MODELS[key]
    torch.manual_seed(0)
    return factory(), shape, dtype


def _torchvision(name: str) -> tuple[torch.nn.Module, tuple[int, ...]]:
    import torch

    shape = (1, 3, 299, 299) if "inception" in name else (1, 3, 224, 224)
    try:
        tv = importlib.import_module("torchvision.models")
    except Exception as exc:  # ImportError, or RuntimeError from a torchvision built for another torch
        standin = _TORCHVISION_STANDINS.get(name.lower())
        if standin is None:
            raise MissingDependencyError(
                f"torchvision:{name} needs torchvision, which could not be imported ({exc}); install "
                "a torchvision matching your torch (pip install 'dnnpart[torch]') or use builtin:NAME"
            ) from None
        warnings.warn(
            f"torchvision could not be imported ({exc}); using builtin:{standin} instead", stacklevel=3
        )
        module, _, _ = _builtin(standin)
        return module, shape
    torch.manual_seed(0)
    try:
        kwargs: dict[str, Any] = {"weights": None}
        if "inception" in name:
            kwargs["aux_logits"] = False
            kwargs["init_weights"] = False
        module = tv.get_model(name, **kwargs)
    except ValueError as exc:
        raise FormatError(f"torchvision:{name}: {exc}") from None
    return module, shape


def _from_callable(target: str, spec: str) -> torch.nn.Module:
    import torch

    module_name, _, attr = target.rpartition(":")
    if not module_name or not attr:
        raise FormatError(f"model {spec!r}: expected module:PACKAGE.MODULE:CALLABLE")
    try:
        mod = importlib.import_module(module_name)
    except ImportError as exc:
        raise FormatError(f"model {spec!r}: cannot import {module_name!r} ({exc})") from None
    except (Exception, SystemExit) as exc:  # the module failed while importing: their input
        raise FormatError(f"model {spec!r}: importing {module_name!r} raised "
                          f"{type(exc).__name__}: {exc}") from None
    factory = getattr(mod, attr, None)
    if factory is None or not callable(factory):
        raise FormatError(f"model {spec!r}: {module_name} has no callable {attr!r}")
    torch.manual_seed(0)
    try:
        model = factory()
    except TypeError as exc:
        raise FormatError(f"model {spec!r}: {attr}() must take no arguments ({exc})") from None
    except (Exception, SystemExit) as exc:  # the factory failed (or exited): exit 2, one line
        raise FormatError(f"model {spec!r}: {attr}() raised {type(exc).__name__}: {exc}") from None
    if not isinstance(model, torch.nn.Module):
        raise FormatError(f"model {spec!r}: {attr}() returned {type(model).__name__}, not a torch.nn.Module")
    return model


def import_source(
    source: ModelSource,
    *,
    cost_model: CostModel | None = None,
    training: bool = False,
    profile: bool = False,
    profile_repeats: int = 10,
    profile_warmup: int = 3,
    optimizer: str | None = None,
    granularity: str = "op",
) -> ImportedModel:
    """Import a resolved model through its frontend; ``profile`` measures CPU times.

    ``training`` on a torch model captured with ``torch.export`` gives the real autograd
    graph (:mod:`dnnpart.frontends.training`), with ``optimizer`` (``sgd``/``adam``) update
    ops; elsewhere (ONNX, fx) the backward pass is synthesised from the forward graph.
    """
    if optimizer is not None and not training:
        raise FormatError(f"--optimizer {optimizer}: needs --training")
    if granularity not in ("op", "module"):
        raise FormatError(f"--granularity {granularity!r}: expected op or module")
    imported = _import_source(
        source, cost_model, training, profile, profile_repeats, profile_warmup, optimizer
    )
    if granularity == "module":
        from dnnpart.frontends.build import by_module

        imported = by_module(imported)
    return imported


def _import_source(
    source: ModelSource,
    cost_model: CostModel | None,
    training: bool,
    profile: bool,
    profile_repeats: int,
    profile_warmup: int,
    optimizer: str | None,
) -> ImportedModel:
    model = cost_model or CostModel.from_presets()
    if source.onnx_path is not None:
        from dnnpart.frontends.onnx_import import import_onnx

        imported = import_onnx(
            source.onnx_path, input_shapes=onnx_input_shapes(source), cost_model=model, training=False
        )
        if profile:
            from dnnpart.frontends.profiling import profile_onnx

            measured = profile_onnx(
                source.onnx_path, imported, repeats=profile_repeats, warmup=profile_warmup
            )
            imported = _reprice(imported, model, training, measured)
        elif training:
            imported = _reprice(imported, model, training, None)
        return imported
    gm, ir = capture(source)
    if training and source.frontend == "export":
        if profile:
            raise FormatError("--profile measures forward operators; it does not apply to --training graphs")
        return _autograd_model(source, gm, ir, model, optimizer)
    if optimizer is not None:
        raise FormatError(f"--optimizer {optimizer}: needs the export frontend (--frontend export)")
    times: Any = None
    if profile:
        if _on_meta(source.module):
            raise FormatError(f"model {source.spec!r}: --profile needs real weights, not a meta-device model")
        from dnnpart.frontends.profiling import profile_fx

        times = profile_fx(gm, source.example_inputs, ir, repeats=profile_repeats, warmup=profile_warmup)
    from dnnpart.frontends.build import price_model

    return price_model(ir, model, training=training, cpu_times_ms=times)


def _autograd_model(
    source: ModelSource, gm: Any, ir: ModelIR, model: CostModel, optimizer: str | None
) -> ImportedModel:
    import numpy as np

    from dnnpart.frontends.training import training_graph

    tg = training_graph(
        gm, source.example_inputs, model, optimizer=optimizer, strip_prefix=source.strip_prefix
    )
    return ImportedModel(
        graph=tg.graph,
        ir=ir,
        flops=tg.flops,
        bytes_moved=np.zeros(tg.graph.n_nodes),
        cost_model=model,
        unknown_ops=tg.unknown_ops,
        autograd=True,
        orphans=tg.orphans,
    )


def onnx_input_shapes(source: ModelSource) -> Any:
    """The input shapes of an ONNX source as :func:`~dnnpart.frontends.onnx_import.import_onnx`
    takes them: by graph-input name where named, else in order (``None``: the file's own)."""
    if source.input_names:
        return dict(zip(source.input_names, source.input_shapes, strict=True))
    return source.input_shapes or None


def capture(source: ModelSource) -> tuple[Any, ModelIR]:
    """The graph module (what a partitioned run splits) and operators of a torch source."""
    if source.frontend == "fx":
        from dnnpart.frontends.fx_import import module_ir, trace

        gm = trace(source.module, source.example_inputs, name=source.name)
        return gm, module_ir(gm, name=source.name)
    from dnnpart.frontends.export_import import export_graph_module, export_ir

    gm = export_graph_module(source.module, source.example_inputs, name=source.name)
    return gm, export_ir(gm, name=source.name, strip_prefix=source.strip_prefix)


def _reprice(imported: ImportedModel, model: CostModel, training: bool, times: Any) -> ImportedModel:
    from dnnpart.frontends.build import price_model

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # already warned on the first pricing
        return price_model(imported.ir, model, training=training, cpu_times_ms=times)
