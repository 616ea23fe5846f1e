"""``plan MODEL --parallel dp,tp,pp``: the best hybrid data x tensor x pipeline plan of a
transformer, and the best one Megatron-LM, torchtitan and DeepSpeed launch.

Steps: the model's config gives its layer count and heads (on the meta device, no weights);
a copy with two layers is captured as a training graph and priced for the cluster
(:func:`~dnnpart.workflow.importing.import_model`); its units give the
:class:`~dnnpart.pricing.parallel_profile.ModelProfile` (one block priced, reused for every
layer: the blocks of a transformer share their shapes); the search
(:func:`~dnnpart.solvers.hybrid.search_parallel`) returns the best plan, the best launchable
plan and the bound; the exports are the launchable plan's (:mod:`dnnpart.export.parallel_launch`).
The what-if tables: the best step time per tensor degree, per pipeline depth and per device
count (the search again on 1/2, 1/4 and 1/8 of the devices).

Choices: only ``hf:`` transformers (a config with ``num_hidden_layers`` and
``num_attention_heads``); the input is ``--input-shape 1,SEQ`` (default: one sequence of 1,024
tokens or the model's longest, whichever is shorter); the global batch defaults to 8 sequences
per device; with ``--precision bf16/fp16`` the optimizer keeps an fp32 master copy and fp32
state (Megatron's and DeepSpeed's mixed precision: Adam holds 6 bytes per 2-byte weight byte,
``(1 + k) x 2``), at fp32 the graph's ``k`` (Adam 2).
"""

from __future__ import annotations

import json
import math
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from dnnpart.errors import UsageError
from dnnpart.workflow.importing import DEFAULT_CLUSTER, Notify, import_model
from dnnpart.workflow.phases import ProgressFactory, phase

__all__ = ["DIMENSIONS", "ParallelPlan", "parse_dimensions", "plan_parallel"]

DIMENSIONS = ("dp", "tp", "pp")
CAPTURED_LAYERS = 2
DEFAULT_SEQ = 1024
SEQUENCES_PER_DEVICE = 8
#: precisions whose trainers keep an fp32 master copy and fp32 optimizer state
MIXED_PRECISIONS = ("bf16", "fp16")
#: the what-if table per device count goes down to 1/8 of the devices, halving
WHAT_IF_FRACTION = 8


def parse_dimensions(text: str) -> frozenset[str]:
    """``--parallel dp,tp,pp`` -> the set of dimensions.

    Examples
    --------
    >>> sorted(parse_dimensions("tp, dp"))
    ['dp', 'tp']
    >>> parse_dimensions("dp,ep")
    Traceback (most recent call last):
    ...
    dnnpart.errors.UsageError: --parallel 'dp,ep': unknown dimension 'ep'; expected a ...
    """
    dims = [d.strip().lower() for d in text.split(",") if d.strip()]
    for d in dims:
        if d not in DIMENSIONS:
            raise UsageError(f"--parallel {text!r}: unknown dimension {d!r}; expected a "
                             f"comma-separated subset of {', '.join(DIMENSIONS)}")
    if not dims:
        raise UsageError(f"--parallel {text!r}: expected a comma-separated subset of {', '.join(DIMENSIONS)}")
    return frozenset(dims)


@dataclass(slots=True)
class ParallelPlan:
    """What :func:`plan_parallel` found: the model's sizes, its profile, the search's result,
    the launchable plan's exports, the what-if table per device count, and notes."""

    spec: str
    cluster: str
    facts: Any
    profile: Any
    result: Any
    exports: dict[str, Any]
    by_devices: dict[int, float] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    devices: Any = None  # the priced cluster (dnnpart.devices.Cluster), for pricing other plans

    def to_dict(self) -> dict[str, Any]:
        """The plan file's content (``format: dnnpart.parallel-plan``): data only."""
        from dnnpart.viz.parallel_report import FORMAT

        f = self.facts
        return {"format": FORMAT, "version": 1, "model": self.spec,
                "cluster": self.cluster,
                "model_sizes": {"layers": f.layers, "hidden": f.hidden, "heads": f.heads, "seq": f.seq},
                "block_spread": self.profile.block_spread, **self.result.to_dict(),
                "by_devices": {str(k): (v if math.isfinite(v) else None)
                               for k, v in sorted(self.by_devices.items())},
                "exports": self.exports, "notes": self.notes}

    def write(self, path: str | Path) -> Path:
        """Write :meth:`to_dict` as JSON through the one output writer (atomic for a file)."""
        from dnnpart.io.dnn_partitioning import write_text_atomic

        write_text_atomic(json.dumps(self.to_dict(), indent=1, allow_nan=False) + "\n", path)
        return Path(path)


def model_facts(spec: str, seq: int | None, config: str | Path | None) -> tuple[Any, Any, str]:
    """The model's sizes (:class:`~dnnpart.export.parallel_launch.ModelFacts`), its parsed spec
    and the config key of its layer count.

    Raises
    ------
    UsageError
        Not an ``hf:`` spec, or a config without a layer count and heads.
    """
    from dnnpart.export.parallel_launch import ModelFacts
    from dnnpart.frontends.hf import build_config, parse_hf_spec

    if not spec.startswith("hf:"):
        raise UsageError(f"--parallel: {spec!r} is not an hf: transformer spec; hybrid plans price "
                         "one block of a transformers model and reuse it (e.g. hf:llama:...)")
    parsed = parse_hf_spec(spec, config)
    cfg = build_config(parsed, spec)
    layers = getattr(cfg, "num_hidden_layers", None)
    heads = getattr(cfg, "num_attention_heads", None)
    hidden = getattr(cfg, "hidden_size", None)
    if not all(isinstance(x, int) and x > 0 for x in (layers, heads, hidden)):
        raise UsageError(f"--parallel: {spec}: its config has no single num_hidden_layers, "
                         "num_attention_heads and hidden_size (an encoder-decoder or a vision "
                         "stage model); hybrid plans take one stack of identical blocks")
    longest = getattr(cfg, "max_position_embeddings", None) or getattr(cfg, "n_positions", None)
    length = seq or min(DEFAULT_SEQ, int(longest) if longest else DEFAULT_SEQ)
    key = dict(getattr(cfg, "attribute_map", {}) or {}).get("num_hidden_layers", "num_hidden_layers")
    kv = getattr(cfg, "num_key_value_heads", None)
    facts = ModelFacts(layers=int(layers), hidden=int(hidden), heads=int(heads),  # type: ignore[arg-type]
                       seq=int(length), kv_heads=int(kv) if isinstance(kv, int) and kv > 0 else 0)
    return facts, parsed, key


def plan_parallel(
    spec: str,
    *,
    cluster: str = DEFAULT_CLUSTER,
    dims: frozenset[str] = frozenset(DIMENSIONS),
    global_batch: int | None = None,
    devices: int | None = None,
    specs: str | Path | None = None,
    precision: str = "fp32",
    optimizer: str | None = "adam",
    input_shapes: Sequence[Sequence[int]] = (),
    config: str | Path | None = None,
    tensor: int | None = None,
    pipeline: int | None = None,
    schedules: Sequence[str] | None = None,
    check_exports: bool = False,
    notify: Notify | None = None,
    progress: ProgressFactory | None = None,
) -> ParallelPlan:
    """The hybrid plans of ``spec`` on ``cluster`` (module docstring). ``tensor``, ``pipeline``:
    fix that degree; ``schedules``: the schedules the search may choose (default all);
    ``check_exports``: check the Megatron settings with megatron-core's own rules where it is
    installed (its import takes seconds).

    Examples
    --------
    >>> r = plan_parallel("hf:gpt2:n_layer=4,n_embd=64,n_head=4", cluster="4xA100",
    ...                   input_shapes=[(1, 32)], global_batch=8)
    >>> c = r.result.launchable.config
    >>> c.d * c.t * c.p, sum(c.blocks), "--tensor-model-parallel-size" in r.exports["megatron"]["args"]
    (4, 4, True)
    """
    from dnnpart.pricing.parallel_profile import unit_profiles
    from dnnpart.solvers.hybrid import SearchSpace, search_parallel

    for name, value in (("--tensor-degree", tensor), ("--pipeline-degree", pipeline)):
        if value is not None and value < 1:
            raise UsageError(f"{name} {value}: expected >= 1")
    shapes = [tuple(int(x) for x in s) for s in input_shapes]
    if len(shapes) > 1 or (shapes and len(shapes[0]) != 2):
        raise UsageError("--parallel: give one input shape BATCH,SEQ (token ids), e.g. --input-shape 1,2048")
    samples, seq = (shapes[0][0], shapes[0][1]) if shapes else (1, None)
    if samples < 1 or (seq is not None and seq < 1):
        raise UsageError(f"--input-shape {samples},{seq}: expected positive sizes")
    facts, parsed, layer_key = model_facts(spec, seq, config)
    if facts.layers < CAPTURED_LAYERS:
        raise UsageError(f"--parallel: {spec} has {facts.layers} layer; hybrid plans need two or more")
    notes: list[str] = []
    with tempfile.TemporaryDirectory(prefix="dnnpart-parallel-") as tmp:
        overrides = dict(parsed.overrides) | {layer_key: CAPTURED_LAYERS}
        config_file = Path(tmp) / "config.json"
        config_file.write_text(json.dumps(overrides))
        captured = import_model(f"hf:{parsed.model_type}", cluster=cluster, specs=specs,
                                training=True, optimizer=optimizer, precision=precision,
                                input_shapes=[(samples, facts.seq)], config=config_file,
                                notify=notify, progress=progress)
    priced = captured.priced.cluster
    n = devices if devices is not None else priced.n_accelerators
    if not 1 <= n <= priced.n_accelerators:
        raise UsageError(f"--devices {n}: the cluster has {priced.n_accelerators} accelerators")
    batch = global_batch if global_batch is not None else SEQUENCES_PER_DEVICE * n
    if batch < 1:
        raise UsageError(f"--global-batch {batch}: expected >= 1")
    profile = unit_profiles(captured.imported.graph, time_unit_s=priced.time_unit_s,
                            n_blocks=facts.layers, heads=facts.tensor_divisor, samples=samples)
    if precision in MIXED_PRECISIONS:  # an fp32 master copy beside fp32 optimizer state
        profile = replace(profile, optimizer_k=(1.0 + profile.optimizer_k) * 2.0)
    if profile.block_spread > 0.01:
        notes.append(f"the captured blocks differ by up to {profile.block_spread:.0%} in one figure "
                     "(values carried between blocks, such as rotary tables, or a block holding a "
                     "helper computation); each block is priced at the largest")
    space = SearchSpace(dims=dims, tensor=None if tensor is None else (tensor,),
                        pipeline=None if pipeline is None else (pipeline,))
    if schedules:
        space = replace(space, schedules=tuple(schedules))
    with phase(progress, f"searching {n} devices ({', '.join(sorted(dims))})"):
        result = search_parallel(profile, priced, global_batch=batch, devices=n, space=space)
        by_devices = {n: result.launchable.step_s if result.launchable else float("inf")}
        k = n // 2
        while k >= max(1, n // WHAT_IF_FRACTION) and batch % k == 0 and k not in by_devices:
            smaller = search_parallel(profile, priced, global_batch=batch, devices=k, space=space,
                                      launchable_only=True)
            by_devices[k] = smaller.launchable.step_s if smaller.launchable else float("inf")
            k //= 2
    exports = launch_exports(result, facts, optimizer, check=check_exports)
    return ParallelPlan(spec=spec, cluster=priced.name, facts=facts, profile=profile, result=result,
                        exports=exports, by_devices=by_devices, notes=notes, devices=priced)


def launch_exports(result: Any, facts: Any, optimizer: str | None, *,
                   check: bool = False) -> dict[str, Any]:
    """Megatron arguments (with ``check``, checked by megatron-core where it imports),
    torchtitan overrides and a DeepSpeed config of the launchable plan; ``{}`` without one."""
    from dnnpart.export.parallel_launch import (
        deepspeed_settings,
        megatron_arguments,
        torchtitan_arguments,
        validate_with_megatron_core,
    )

    if result.launchable is None:
        return {}
    config = result.launchable.config
    checked = validate_with_megatron_core(config, facts) if check else None
    titan, titan_why = torchtitan_arguments(config)
    ds, ds_note = deepspeed_settings(config, optimizer)
    return {
        "megatron": {"args": megatron_arguments(config, facts), "checked_by": checked},
        "torchtitan": {"args": titan, "not_launchable": titan_why},
        "deepspeed": {"config": ds, "note": ds_note},
    }
