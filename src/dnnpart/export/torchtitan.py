"""``dnnpart export --format torchtitan``: torchtitan's pipeline settings for a plan.

Pinned to torchtitan 0.3.0 (the ``torchtitan`` extra). That release has no TOML job files: a
run is ``torchrun ... -m torchtitan.train --module FAMILY --config CONFIG`` with a Python
config from the family's ``config_registry`` and ``--section.field`` overrides parsed by its
``ConfigManager`` (tyro). The export is a folder with ``run_torchtitan.sh`` (that command, with
the plan's ``--parallelism.*`` overrides and ``CUDA_VISIBLE_DEVICES`` in stage order) and
``launch.json`` (the same settings as data, the device of every rank, whether they were
validated).

Settings (``ParallelismConfig``): ``pipeline_parallel_degree`` = the plan's stages,
``module_fqns_per_model_part`` = each stage's modules under torchtitan's names for its decoder
models (``tok_embeddings``, ``layers.N``, ``norm``, ``lm_head``),
``pipeline_parallel_schedule`` (``GPipe``/``1F1B``) and
``pipeline_parallel_microbatch_size`` = the planned input's batch; ``training.local_batch_size``
= that times the plan's micro-batches, which is how torchtitan counts micro-batches.

Choices:

* Families: torchtitan trains its own model code, one per family it ships. A plan exports only
  when its model is a HuggingFace model type whose family torchtitan 0.3.0 ships as a decoder
  LM with a HF state-dict adapter (:data:`FAMILIES`); torchtitan's ``layers.N`` is HF's
  ``model.layers.N`` (its adapters map the checkpoints that way). Others exit 2 naming what
  torchtitan ships.
* Validation: where torchtitan imports, the overrides are parsed by torchtitan's own rules
  (``ConfigManager``'s tyro registry over ``ParallelismConfig`` and ``TrainingConfig``) and the
  parsed values compared with the plan. Its model code needs ``triton`` (CUDA), so a CPU
  machine cannot build the model to check the module names against it.
* torchtitan's split keeps only the listed layers of its model: the chosen ``CONFIG`` must
  have as many layers as the plan (the script says how many).
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from typing import Any

from dnnpart.errors import FormatError, UsageError
from dnnpart.export.layers import EMBEDDING, HEAD, UnitStages

TORCHTITAN_VERSION = "0.3.0"
#: HuggingFace model type -> (torchtitan module, its smallest registered config).
FAMILIES = {
    "llama": ("llama3", "llama3_debugmodel"),
    "qwen3": ("qwen3", "qwen3_debugmodel"),
    "qwen3_moe": ("qwen3", "qwen3_moe_debug"),
    "deepseek_v3": ("deepseek_v3", "deepseek_v3_debugmodel"),
    "gpt_oss": ("gpt_oss", "gpt_oss_debugmodel"),
}
SCHEDULES = {"gpipe": "GPipe", "1f1b": "1F1B"}


def family_of(spec: str) -> tuple[str, str]:
    """torchtitan's ``(module, config)`` for the model ``spec``.

    Raises
    ------
    UsageError
        torchtitan ships no such family (one line naming the families it ships).

    Examples
    --------
    >>> family_of("hf:llama:num_hidden_layers=2")
    ('llama3', 'llama3_debugmodel')
    """
    from dnnpart.frontends.hf import parse_hf_spec

    model_type = parse_hf_spec(spec).model_type if spec.startswith("hf:") else None
    if model_type in FAMILIES:
        return FAMILIES[model_type]
    shipped = ", ".join(f"{m} (hf:{t})" for t, (m, _) in FAMILIES.items())
    what = f"a {model_type} model" if model_type else "not a HuggingFace model"
    raise UsageError(
        f"--format torchtitan: {spec} is {what}; torchtitan {TORCHTITAN_VERSION} trains its own "
        f"decoder families only: {shipped}")


def module_fqns(stages: UnitStages) -> list[list[str]]:
    """``module_fqns_per_model_part``: torchtitan's module names of each stage.

    Examples
    --------
    >>> from dnnpart.export.layers import LayerUnits
    >>> u = LayerUnits(names=("embedding", "model.layers.0", "model.layers.1", "head"),
    ...                ops=((),) * 4, kinds=("embedding", "block", "block", "head"),
    ...                containers=("", "model.layers", "model.layers", ""), free=frozenset())
    >>> module_fqns(UnitStages(units=u, stage_of=(0, 0, 1, 1), devices=(3, 1)))
    [['tok_embeddings', 'layers.0'], ['layers.1', 'norm', 'lm_head']]
    """
    units = stages.units
    if len(units.block_containers) != 1:
        raise FormatError(f"blocks in {len(units.block_containers)} stacks; torchtitan's decoders have one")
    parts: list[list[str]] = [[] for _ in range(stages.n_stages)]
    expected = 0
    for name, kind, s in zip(units.names, units.kinds, stages.stage_of, strict=True):
        if kind == EMBEDDING:
            parts[s].append("tok_embeddings")
        elif kind == HEAD:
            parts[s] += ["norm", "lm_head"]
        elif kind == "block":
            index = name.rsplit(".", 1)[-1]
            if index != str(expected):
                raise FormatError(f"block {name!r} is not layer {expected} of the stack")
            parts[s].append(f"layers.{index}")
            expected += 1
        else:
            raise FormatError(f"operators {name!r} between blocks have no torchtitan module")
    return parts


def overrides(fqns: Sequence[Sequence[str]], *, schedule: str, micro_batch_size: int,
              microbatches: int) -> list[str]:
    """The ``--parallelism.*`` and ``--training.local_batch_size`` arguments.

    Examples
    --------
    >>> args = overrides([["tok_embeddings", "layers.0"], ["norm", "lm_head"]], schedule="1f1b",
    ...                  micro_batch_size=1, microbatches=4)
    >>> args[:2]
    ['--parallelism.pipeline_parallel_degree', '2']
    >>> args[3:5]
    ['tok_embeddings,layers.0', 'norm,lm_head']
    """
    if schedule not in SCHEDULES:
        raise UsageError(f"schedule {schedule!r}: torchtitan export knows {', '.join(SCHEDULES)}")
    return [
        "--parallelism.pipeline_parallel_degree", str(len(fqns)),
        "--parallelism.module_fqns_per_model_part", *(",".join(p) for p in fqns),
        "--parallelism.pipeline_parallel_schedule", SCHEDULES[schedule],
        "--parallelism.pipeline_parallel_microbatch_size", str(micro_batch_size),
        "--training.local_batch_size", str(micro_batch_size * microbatches),
    ]


def validate_with_torchtitan(args: Sequence[str], expected: dict[str, Any]) -> str | None:
    """Parse ``args`` with torchtitan's own config rules; its version, or ``None`` if absent.

    Raises
    ------
    FormatError
        torchtitan rejects an argument or parses another value than ``expected``
        (``section.field`` -> value).
    """
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            import tyro
            from torchtitan.config import ConfigManager, ParallelismConfig, TrainingConfig
            from torchtitan.config.manager import custom_registry
    except ImportError:
        return None
    ConfigManager()  # registers torchtitan's parsing rules (comma-separated lists)
    sections: dict[str, list[str]] = {}
    current = ""
    for a in args:
        if a.startswith("--"):
            current, field = a[2:].split(".", 1)
            sections.setdefault(current, []).append(f"--{field}")
        else:
            sections[current].append(a)
    parsed: dict[str, Any] = {}
    try:
        for section, cls in (("parallelism", ParallelismConfig), ("training", TrainingConfig)):
            parsed[section] = tyro.cli(cls, args=sections.get(section, []), registry=custom_registry)
    except SystemExit as exc:
        raise FormatError(f"torchtitan rejects the arguments {list(args)} (exit {exc.code})") from None
    for key, want in expected.items():
        section, field = key.split(".", 1)
        got = getattr(parsed[section], field)
        if got != want:
            raise FormatError(f"torchtitan parses {key} as {got!r}, the plan gives {want!r}")
    from importlib.metadata import version

    return f"torchtitan {version('torchtitan')}"


def script_text(*, model: str, family: tuple[str, str], args: Sequence[str], n_layers: int,
                launch: dict[str, Any]) -> str:
    """``run_torchtitan.sh``."""
    from dnnpart.export.launch import launch_lines, visible_devices

    lines = "\n".join(f"#   {line}" for line in launch_lines(launch))
    n = len(launch["ranks"])
    body = " \\\n    ".join(args)
    return f"""#!/bin/sh
# torchtitan {TORCHTITAN_VERSION} pipeline of {model} ({n} stages), written by
# `dnnpart export --format torchtitan`. Pipeline stage k runs on rank k:
{lines}
# CONFIG: a {family[0]} config of torchtitan's registry whose model has {n_layers} layers
# (torchtitan's split keeps only the layers listed below).
CONFIG=${{CONFIG:-{family[1]}}}
{visible_devices(launch)} torchrun --nproc-per-node {n} -m torchtitan.train \\
    --module {family[0]} --config "$CONFIG" \\
    {body}
"""
