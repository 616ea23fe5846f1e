"""Launch settings of a hybrid data x tensor x pipeline plan (``plan --parallel``): Megatron-LM
arguments, torchtitan overrides and a DeepSpeed config, from the launchable plan
(:mod:`dnnpart.solvers.hybrid`).

* **Megatron-LM**: ``--tensor-model-parallel-size``, ``--pipeline-model-parallel-size``,
  ``--num-layers-per-virtual-pipeline-stage`` (interleaved), ``--pipeline-model-parallel-layout``
  when the stages hold unequal numbers of layers (``E`` the embedding, ``t`` a layer, ``L`` the
  head), ``--micro-batch-size``, ``--global-batch-size``, ``--recompute-granularity`` (``full``
  with ``--recompute-method uniform --recompute-num-layers 1``), ``--use-distributed-optimizer``
  for ZeRO-1 (Megatron's sharded optimizer state); the model's own sizes. Where megatron-core
  imports, the settings are checked by its ``TransformerConfig`` (heads against the tensor
  degree, the layout, recomputation).
* **torchtitan** (0.3.0's ``--section.field`` overrides): ``tensor_parallel_degree``,
  ``pipeline_parallel_degree`` and schedule (``GPipe``, ``1F1B``, ``Interleaved1F1B``),
  ``data_parallel_replicate_degree`` (ZeRO-0: DDP) or ``data_parallel_shard_degree`` (ZeRO-3:
  FSDP), ``activation_checkpoint.mode``; torchtitan has no ZeRO-1/2 (its data parallelism
  replicates or shards everything), so such a plan has no torchtitan settings (the reason is
  given instead).
* **DeepSpeed**: ``ds_config.json`` with ``zero_optimization.stage``, micro-batch, accumulation
  steps and pipeline stages; DeepSpeed itself has no tensor parallelism (Megatron-DeepSpeed
  adds it), so a plan with ``t > 1`` says so instead.
"""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass
from typing import Any

from dnnpart.errors import FormatError
from dnnpart.pricing.parallel import ParallelConfig

__all__ = ["ModelFacts", "deepspeed_settings", "megatron_arguments", "torchtitan_arguments",
           "validate_with_megatron_core"]

TITAN_SCHEDULES = {"gpipe": "GPipe", "1f1b": "1F1B", "interleaved": "Interleaved1F1B"}


@dataclass(frozen=True, slots=True)
class ModelFacts:
    """The sizes a launcher needs: layers, hidden size, heads, sequence length, key/value heads
    (grouped-query attention; ``0``: as many as the heads)."""

    layers: int
    hidden: int
    heads: int
    seq: int
    kv_heads: int = 0

    @property
    def tensor_divisor(self) -> int:
        """What every tensor-parallel degree divides: the heads and the key/value heads."""
        return math.gcd(self.heads, self.kv_heads or self.heads)


def megatron_layout(blocks: tuple[int, ...]) -> str:
    """``--pipeline-model-parallel-layout`` of stages holding ``blocks`` layers.

    Examples
    --------
    >>> megatron_layout((3, 2))
    'Ettt|ttL'
    """
    parts = ["t" * n for n in blocks]
    parts[0] = "E" + parts[0]
    parts[-1] += "L"
    return "|".join(parts)


def megatron_arguments(config: ParallelConfig, facts: ModelFacts) -> list[str]:
    """Megatron-LM's arguments for ``config`` (module docstring).

    Examples
    --------
    >>> c = ParallelConfig(d=2, t=2, p=2, zero=1, micro_batch=1, microbatches=8,
    ...                    schedule="1f1b", blocks=(3, 1), recompute=("full", "full"))
    >>> args = megatron_arguments(c, ModelFacts(layers=4, hidden=64, heads=4, seq=128))
    >>> " ".join(args[:4]), "--use-distributed-optimizer" in args
    ('--tensor-model-parallel-size 2 --pipeline-model-parallel-size 2', True)
    >>> args[args.index("--pipeline-model-parallel-layout") + 1]
    'Ettt|tL'
    """
    args = ["--tensor-model-parallel-size", str(config.t),
            "--pipeline-model-parallel-size", str(config.p)]
    if config.schedule == "interleaved":
        args += ["--num-layers-per-virtual-pipeline-stage", str(facts.layers // (config.p * config.virtual))]
    elif config.p > 1 and len(set(config.blocks)) > 1:
        args += ["--pipeline-model-parallel-layout", megatron_layout(config.blocks)]
    args += ["--num-layers", str(facts.layers), "--hidden-size", str(facts.hidden),
             "--num-attention-heads", str(facts.heads), "--seq-length", str(facts.seq),
             *(["--group-query-attention", "--num-query-groups", str(facts.kv_heads)]
               if facts.kv_heads and facts.kv_heads != facts.heads else []),
             "--micro-batch-size", str(config.micro_batch),
             "--global-batch-size", str(config.global_batch)]
    recompute = config.recompute[0]
    if recompute == "selective":
        args += ["--recompute-granularity", "selective"]
    elif recompute == "full":
        args += ["--recompute-granularity", "full", "--recompute-method", "uniform",
                 "--recompute-num-layers", "1"]
    if config.zero == 1:
        args.append("--use-distributed-optimizer")
    return args


def validate_with_megatron_core(config: ParallelConfig, facts: ModelFacts) -> str | None:
    """Check ``config`` with megatron-core's ``TransformerConfig``; its version, or ``None``
    when megatron-core is not installed.

    Raises
    ------
    FormatError
        megatron-core refuses the settings (its message, one line).
    """
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            import torch
            from megatron.core import __version__ as version
            from megatron.core.transformer import TransformerConfig
    except ImportError:
        return None
    recompute = config.recompute[0]
    kwargs: dict[str, Any] = {
        "num_layers": facts.layers, "hidden_size": facts.hidden,
        "num_attention_heads": facts.heads, "tensor_model_parallel_size": config.t,
        "num_query_groups": facts.kv_heads or None,
        "pipeline_model_parallel_size": config.p,
        "pipeline_dtype": torch.float32 if config.p > 1 else None,
    }
    if config.schedule == "interleaved":
        kwargs["virtual_pipeline_model_parallel_size"] = config.virtual
    elif config.p > 1 and len(set(config.blocks)) > 1:
        kwargs["pipeline_model_parallel_layout"] = megatron_layout(config.blocks)
    if recompute != "none":
        kwargs["recompute_granularity"] = recompute
    if recompute == "full":
        kwargs |= {"recompute_method": "uniform", "recompute_num_layers": 1}
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            TransformerConfig(**kwargs)
    except (ValueError, AssertionError, TypeError) as exc:
        text = " ".join(str(exc).split())[:300]
        raise FormatError(f"megatron-core {version} refuses the plan's settings: {text}") from None
    return f"megatron-core {version}"


def torchtitan_arguments(config: ParallelConfig) -> tuple[list[str], str | None]:
    """torchtitan's overrides for ``config``, or ``([], reason)`` when torchtitan cannot run it.

    Examples
    --------
    >>> c = ParallelConfig(d=4, t=2, p=1, zero=3, micro_batch=2, microbatches=1,
    ...                    schedule="1f1b", blocks=(4,), recompute=("selective",))
    >>> args, why = torchtitan_arguments(c)
    >>> args[args.index("--parallelism.data_parallel_shard_degree") + 1], why
    ('4', None)
    >>> torchtitan_arguments(ParallelConfig(d=2, t=1, p=1, zero=1, micro_batch=1, microbatches=1,
    ...                      schedule="1f1b", blocks=(4,), recompute=("none",)))[1]
    'torchtitan has no ZeRO-1/2: its data parallelism replicates (DDP) or shards everything (FSDP)'
    """
    if config.zero in (1, 2) and config.d > 1:
        return [], ("torchtitan has no ZeRO-1/2: its data parallelism replicates (DDP) or shards "
                    "everything (FSDP)")
    shard, replicate = (config.d, 1) if config.zero == 3 else (1, config.d)
    args = ["--parallelism.tensor_parallel_degree", str(config.t),
            "--parallelism.data_parallel_shard_degree", str(shard),
            "--parallelism.data_parallel_replicate_degree", str(replicate),
            "--parallelism.pipeline_parallel_degree", str(config.p)]
    if config.p > 1:
        args += ["--parallelism.pipeline_parallel_schedule", TITAN_SCHEDULES[config.schedule],
                 "--parallelism.pipeline_parallel_microbatch_size", str(config.micro_batch)]
    args += ["--training.local_batch_size", str(config.micro_batch * config.microbatches),
             "--training.global_batch_size", str(config.global_batch),
             "--activation_checkpoint.mode", config.recompute[0]]
    return args, None


def deepspeed_settings(config: ParallelConfig,
                       optimizer: str | None = "adam") -> tuple[dict[str, Any] | None, str | None]:
    """``ds_config.json`` for ``config`` and a note on what it cannot say, or ``(None, reason)``
    (module docstring).

    Examples
    --------
    >>> c = ParallelConfig(d=2, t=1, p=2, zero=1, micro_batch=1, microbatches=4,
    ...                    schedule="1f1b", blocks=(2, 2), recompute=("none", "none"))
    >>> ds, _ = deepspeed_settings(c)
    >>> ds["zero_optimization"]["stage"], ds["train_batch_size"], ds["pipeline"]["stages"]
    (1, 8, 2)
    """
    if config.t > 1:
        return None, ("DeepSpeed has no tensor parallelism of its own (Megatron-DeepSpeed adds "
                      "it: use the Megatron arguments)")
    ds: dict[str, Any] = {
        "train_micro_batch_size_per_gpu": config.micro_batch,
        "gradient_accumulation_steps": config.microbatches,
        "train_batch_size": config.global_batch,
        "zero_optimization": {"stage": config.zero},
    }
    note = None
    if config.p > 1:
        ds["pipeline"] = {"stages": config.p, "partition": "uniform",
                          "activation_checkpoint_interval": 1 if config.recompute[0] == "full" else 0}
        if len(set(config.blocks)) > 1:
            note = (f"the plan's stages hold {'/'.join(map(str, config.blocks))} layers; "
                    "DeepSpeed's PipelineModule takes that as partition_method='type:...' or "
                    "explicit parts, not from this file ('uniform' here)")
    if optimizer:
        ds["optimizer"] = {"type": "Adam" if optimizer.lower() == "adam" else "SGD", "params": {"lr": 1e-4}}
    return ds, note
