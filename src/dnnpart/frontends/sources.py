"""Resolve what the user named as a model: an ``.onnx`` file or a torch module factory.

Model specs:

* ``path/to/model.onnx`` -- the ONNX frontend;
* ``builtin:NAME`` -- our own ``torch.nn`` models (:mod:`dnnpart.frontends.models`):
  ``resnet50``, ``inception_v3``, ``bert``;
* ``torchvision:NAME`` -- ``torchvision.models.get_model(NAME, weights=None)``; where
  torchvision cannot be imported, the builtin model of the same name stands in (with a
  warning), since there is no CPU build of torchvision to install;
* ``module:package.module:callable`` -- any importable callable returning an ``nn.Module``.

Torch models are put in eval mode and get deterministic random example inputs of the given
shapes (defaults for the builtin models).
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
from dnnpart.errors import FormatError, MissingDependencyError
from dnnpart.frontends.build import ImportedModel

if TYPE_CHECKING:
    import torch

DTYPES = ("float32", "float64", "int64", "int32")
_TORCHVISION_STANDINS = {"resnet50": "resnet50", "inception_v3": "inception_v3"}


@dataclass(slots=True, kw_only=True)
class ModelSource:
    """A resolved model: a torch module with example inputs, or an ONNX file."""

    spec: str
    module: Any = None  # torch.nn.Module
    example_inputs: tuple[Any, ...] = ()
    onnx_path: Path | None = None
    input_shapes: list[tuple[int, ...]] = field(default_factory=list)
    input_dtype: str = "float32"

    @property
    def is_torch(self) -> bool:
        return self.module is not None

    @property
    def name(self) -> str:
        if self.onnx_path is not None:
            return self.onnx_path.stem
        return self.spec.split(":")[-1]


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
    seed: int = 0,
) -> ModelSource:
    """Resolve a model spec (see the module docstring); torch specs are built and given inputs."""
    shapes = [tuple(int(d) for d in s) for s in (input_shapes or [])]
    if input_dtype is not None and input_dtype not in DTYPES:
        raise FormatError(f"--input-dtype {input_dtype!r}: expected one of {', '.join(DTYPES)}")
    if spec.lower().endswith(".onnx") and ":" not in spec.split("/")[-1]:
        path = Path(spec)
        if not path.is_file():
            raise FormatError(f"{path}: no such file")
        return ModelSource(spec=spec, onnx_path=path, input_shapes=shapes)
    kind, _, rest = spec.partition(":")
    if not rest:
        raise FormatError(
            f"model {spec!r}: expected FILE.onnx, builtin:NAME, torchvision:NAME "
            "or module:PACKAGE.MODULE:CALLABLE"
        )
    require("torch", extra="torch", caller=f"model {spec!r}")
    default_shape: tuple[int, ...] | None = None
    dtype = input_dtype or "float32"
    if kind == "builtin":
        module, default_shape, default_dtype = _builtin(rest)
        dtype = input_dtype or default_dtype
    elif kind == "torchvision":
        module, default_shape = _torchvision(rest)
    elif kind == "module":
        module = _from_callable(rest, spec)
    else:
        raise FormatError(f"model {spec!r}: unknown kind {kind!r}; expected builtin, torchvision or module")
    if not shapes:
        if default_shape is None:
            raise FormatError(f"model {spec!r}: pass --input-shape (e.g. --input-shape 1,3,224,224)")
        shapes = [default_shape]
    module.eval()
    return ModelSource(
        spec=spec,
        module=module,
        input_shapes=shapes,
        input_dtype=dtype,
        example_inputs=example_inputs(shapes, dtype, seed=seed, module=module),
    )


def example_inputs(
    shapes: Sequence[tuple[int, ...]], dtype: str, *, seed: int = 0, module: Any = None
) -> tuple[Any, ...]:
    """Deterministic random inputs: normal floats, or token ids below the first embedding size."""
    import torch

    gen = torch.Generator().manual_seed(seed)
    if dtype.startswith("int"):
        high = 2
        if module is not None:
            emb = next((m for m in module.modules() if isinstance(m, torch.nn.Embedding)), None)
            high = emb.num_embeddings if emb is not None else 2
        return tuple(torch.randint(0, high, s, generator=gen, dtype=getattr(torch, dtype)) for s in shapes)
    return tuple(torch.randn(s, generator=gen, dtype=getattr(torch, dtype)) for s in shapes)


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
) -> ImportedModel:
    """Import a resolved model through its frontend; ``profile`` measures CPU times."""
    model = cost_model or CostModel.from_presets()
    if source.onnx_path is not None:
        from dnnpart.frontends.onnx_import import import_onnx

        imported = import_onnx(
            source.onnx_path, input_shapes=source.input_shapes or None, cost_model=model, training=False
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
    from dnnpart.frontends.fx_import import module_ir, trace

    gm = trace(source.module, source.example_inputs, name=source.name)
    ir = module_ir(gm, name=source.name)
    times: Any = None
    if profile:
        from dnnpart.frontends.profiling import profile_fx

        times = profile_fx(gm, source.example_inputs, ir, repeats=profile_repeats, warmup=profile_warmup)
    from dnnpart.frontends.build import price_model

    return price_model(ir, model, training=training, cpu_times_ms=times)


def _reprice(imported: ImportedModel, model: CostModel, training: bool, times: Any) -> ImportedModel:
    from dnnpart.frontends.build import price_model

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # already warned on the first pricing
        return price_model(imported.ir, model, training=training, cpu_times_ms=times)
