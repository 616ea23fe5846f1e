"""``dnnpart export --format deepspeed``: a DeepSpeed ``PipelineModule`` of a plan's stages.

The export is a folder:

* ``pipeline_module.py``: ``build(loss_fn=None, **kwargs)`` returns a
  ``deepspeed.pipe.PipelineModule`` whose layer list has one ``LayerSpec`` per plan stage and
  ``partition_method='uniform'``, so DeepSpeed's ``parts`` are ``[0, 1, ..., S]``: pipeline
  stage ``k`` holds exactly the plan's stage ``k``;
* ``stage{k}.pt``: the stage's module (our own ``torch.fx`` split of the captured model,
  :func:`~dnnpart.export.stages.split_module`, with the seeded weights) and what it receives
  from stage ``k - 1`` and passes to ``k + 1``; only rank ``k`` loads it;
* ``ds_config.json``: ``train_micro_batch_size_per_gpu`` (the planned input's batch),
  ``gradient_accumulation_steps`` (the plan's micro-batches), ``train_batch_size`` (their
  product: one data-parallel replica), the plan's optimizer when it names one;
* ``launch.json``: the device of each rank and the ``CUDA_VISIBLE_DEVICES`` to launch with
  (:mod:`dnnpart.export.launch`).

Choices:

* A layer list of the blocks themselves cannot run a HuggingFace model (its forward passes
  masks and position ids between blocks), so each stage is our split module wrapped to carry
  every value a later stage needs (as ``dnnpart run`` does), one ``LayerSpec`` per stage. The
  units of :mod:`dnnpart.export.layers` still check that the plan cuts between whole blocks.
* Parameters used by several stages (GPT-2's ``wte``, read by the embedding and the head) are
  tied the way DeepSpeed ties ``TiedLayerSpec`` weights: one process group per shared
  parameter over the stages that hold it, weights broadcast from the first at build time and
  gradients all-reduced by the engine (``PlanPipelineModule`` overrides DeepSpeed's tie
  bookkeeping, which otherwise needs the tied module to be a layer of its own).
* DeepSpeed runs its own 1F1B-style ``TrainSchedule``; a plan made for GPipe still runs, with
  1F1B's smaller activation memory.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from dnnpart._optional import require
from dnnpart.errors import FormatError
from dnnpart.export.stages import StagedProgram

DS_VERSION = "0.19.8"
"""The DeepSpeed release the export is checked against (the ``deepspeed`` extra pins it)."""

_OPTIMIZERS = {"adam": "Adam", "adamw": "AdamW", "sgd": "SGD"}


def stage_parameter_names(program: StagedProgram, canonical: Mapping[str, str]) -> list[dict[str, str]]:
    """For each stage: parameter attribute name in its module -> the model's parameter name
    (tied weights under one name)."""
    return [{n: canonical.get(n, n) for n, _ in s.module.named_parameters()} for s in program.stages]


def tied_parameters(names: Sequence[Mapping[str, str]]) -> dict[str, dict[int, str]]:
    """Model parameters held by several stages: name -> {stage: attribute name there}.

    Examples
    --------
    >>> tied_parameters([{"wte.weight": "wte.weight", "h.0.w": "h.0.w"},
    ...                  {"h.1.w": "h.1.w", "wte.weight": "wte.weight"}])
    {'wte.weight': {0: 'wte.weight', 1: 'wte.weight'}}
    """
    held: dict[str, dict[int, str]] = {}
    for k, stage in enumerate(names):
        for attr, name in stage.items():
            held.setdefault(name, {})[k] = attr
    return {n: s for n, s in sorted(held.items()) if len(s) > 1}


def ds_config(*, micro_batch_size: int, microbatches: int, optimizer: str | None,
              n_stages: int) -> dict[str, Any]:
    """``ds_config.json`` of a pipeline of ``n_stages`` with one data-parallel replica.

    Examples
    --------
    >>> c = ds_config(micro_batch_size=2, microbatches=4, optimizer="adam", n_stages=3)
    >>> c["train_batch_size"], c["gradient_accumulation_steps"], c["optimizer"]["type"]
    (8, 4, 'Adam')
    """
    config: dict[str, Any] = {
        "train_micro_batch_size_per_gpu": micro_batch_size,
        "gradient_accumulation_steps": microbatches,
        "train_batch_size": micro_batch_size * microbatches,
        "pipeline": {"stages": n_stages, "partition": "uniform", "activation_checkpoint_interval": 0},
        "steps_per_print": 10,
        "wall_clock_breakdown": False,
    }
    if optimizer and optimizer.lower() in _OPTIMIZERS:
        config["optimizer"] = {"type": _OPTIMIZERS[optimizer.lower()], "params": {"lr": 1e-4}}
    return config


def write_deepspeed(folder: Path, program: StagedProgram, carry: Sequence[tuple[str, ...]],
                    canonical: Mapping[str, str], *, config: dict[str, Any],
                    launch: dict[str, Any], model: str) -> dict[str, Any]:
    """Write the export (see the module docstring) into ``folder``; returns ``launch.json``'s
    content plus ``stages`` and ``tied``."""
    from dnnpart.io.dnn_partitioning import write_json_atomic
    from dnnpart.io.output_files import open_output, write_output

    torch = require("torch", extra="torch", caller="dnnpart export --format deepspeed")
    folder.mkdir(parents=True, exist_ok=True)
    n = len(program.stages)
    names = stage_parameter_names(program, canonical)
    tied = tied_parameters(names)
    for k in range(n):
        own = dataclasses.replace(program, stages=tuple(
            s if s.index == k else dataclasses.replace(s, module=None) for s in program.stages))
        with open_output(folder / f"stage{k}.pt", binary=True) as fh:
            torch.save({"program": own, "carry": list(carry), "stage": k, "n_stages": n,
                        "tied": {t: {str(s): a for s, a in held.items()} for t, held in tied.items()}},
                       fh)
    write_json_atomic(config, folder / "ds_config.json")
    info = {**launch, "model": model, "deepspeed": DS_VERSION, "num_stages": n,
            "partition_method": "uniform", "parts": list(range(n + 1)),
            "tied_parameters": {t: sorted(held) for t, held in tied.items()}}
    write_json_atomic(info, folder / "launch.json")
    write_output(_module_text(model, n, launch), folder / "pipeline_module.py")
    return info


def _module_text(model: str, n: int, launch: dict[str, Any]) -> str:
    from dnnpart.export.launch import launch_lines, visible_devices

    ranks = "\n".join(f"    {line}" for line in launch_lines(launch))
    return f'''"""DeepSpeed pipeline of {model} ({n} stages), written by `dnnpart export --format deepspeed`.

Pipeline stage k runs the plan's stage k (one LayerSpec per stage, partition_method="uniform"):
{ranks}

Launch with torchrun, which keeps this rank order (the `deepspeed` launcher sorts GPU ids):

    {visible_devices(launch)} torchrun --nproc-per-node {n} train.py

where train.py does

    import deepspeed, pipeline_module
    deepspeed.init_distributed()
    module = pipeline_module.build(loss_fn=my_loss)      # my_loss(outputs, labels)
    engine, *_ = deepspeed.initialize(model=module, config="ds_config.json",
                                      model_parameters=[p for p in module.parameters()])
    loss = engine.train_batch(data_iter)                 # data_iter yields (inputs, labels)

Needs dnnpart (which wrote the stage files) and deepspeed=={DS_VERSION}.
"""

from pathlib import Path

from dnnpart.export.deepspeed import pipeline_module

HERE = Path(__file__).resolve().parent
NUM_STAGES = {n}


def build(loss_fn=None, **kwargs):
    """The PipelineModule; ``kwargs`` go to ``deepspeed.pipe.PipelineModule``."""
    return pipeline_module(HERE, NUM_STAGES, loss_fn=loss_fn, **kwargs)
'''


_CLASSES: dict[str, type] = {}


def stage_layer_type() -> type:
    """``StageLayer(folder, k)``: the plan's stage ``k`` loaded from ``folder/stage{k}.pt``, as
    a module taking and returning what DeepSpeed passes between stages (a tuple of tensors;
    the last stage returns the model's main output)."""
    if "StageLayer" not in _CLASSES:
        import torch

        from dnnpart.export.training_run import carry_module

        class StageLayer(torch.nn.Module):
            def __init__(self, folder: str, k: int) -> None:
                super().__init__()
                saved = torch.load(Path(folder) / f"stage{k}.pt", weights_only=False)
                self.index = k
                self.tied: dict[str, str] = {t: f"stage.inner.{held[str(k)]}"
                                             for t, held in saved["tied"].items() if str(k) in held}
                self.stage = carry_module(saved["program"], k, saved["carry"])

            def forward(self, inputs: Any) -> Any:
                args = inputs if isinstance(inputs, tuple) else (inputs,)
                return self.stage(*args)

        _CLASSES["StageLayer"] = StageLayer
    return _CLASSES["StageLayer"]


def pipeline_module(folder: str | Path, num_stages: int, *, loss_fn: Callable[..., Any] | None = None,
                    **kwargs: Any) -> Any:
    """The ``deepspeed.pipe.PipelineModule`` of an export folder (one ``LayerSpec`` per stage,
    ``partition_method='uniform'``); DeepSpeed's distributed state must be initialised.

    Raises
    ------
    FormatError
        ``kwargs`` sets ``partition_method`` (the export's parts rely on ``uniform``), or the
        folder holds another number of stages.
    """
    require("deepspeed", extra="deepspeed", caller="the DeepSpeed export")
    from deepspeed.pipe import LayerSpec

    if "partition_method" in kwargs:
        raise FormatError("partition_method: the export gives one layer per stage and needs 'uniform'")
    found = len(list(Path(folder).glob("stage*.pt")))
    if found != num_stages:
        raise FormatError(f"{folder}: {found} stage files for {num_stages} stages")
    layers = [LayerSpec(stage_layer_type(), str(folder), k) for k in range(num_stages)]
    return _plan_module_type()(layers=layers, num_stages=num_stages, loss_fn=loss_fn,
                               partition_method="uniform", **kwargs)


def _plan_module_type() -> type:
    if "PlanPipelineModule" not in _CLASSES:
        import torch.distributed as dist
        from deepspeed.pipe import PipelineModule

        class PlanPipelineModule(PipelineModule):  # type: ignore[misc]
            """Ties parameters that several stages hold (see the module docstring)."""

            def _index_tied_modules(self) -> dict[str, Any]:
                comms: dict[str, Any] = {}
                if self._topo.get_dim("pipe") == 1:
                    return comms
                local = [f for f in self.forward_funcs if hasattr(f, "tied")]
                ties = _read_ties(self._layer_specs)
                for name, stages in sorted(ties.items()):  # the same order on every rank
                    for dp in range(self._grid.data_parallel_size):
                        ranks = [self._grid.stage_to_global(stage_id=s, data=dp) for s in stages]
                        group = dist.new_group(ranks=ranks)
                        if self.global_rank not in ranks:
                            continue
                        layer = next(f for f in local if name in f.tied)
                        comms[name] = {"ranks": ranks, "group": group, "module": layer,
                                       "weight_attr": [layer.tied[name]]}
                        if self.global_rank != ranks[0]:  # counted once by the optimizer
                            self._recursive_getattr(layer, layer.tied[name]).ds_pipe_replicated = True
                return comms

            def get_tied_weights_and_groups(self) -> list[tuple[Any, Any]]:
                return [(self._recursive_getattr(c["module"], a), c["group"])
                        for c in self.tied_comms.values() for a in c["weight_attr"]]

            def allreduce_tied_weight_gradients(self) -> None:
                for weight, group in self.get_tied_weights_and_groups():
                    dist.all_reduce(weight.grad, group=group)

        _CLASSES["PlanPipelineModule"] = PlanPipelineModule
    return _CLASSES["PlanPipelineModule"]


def _read_ties(specs: Sequence[Any]) -> dict[str, list[int]]:
    """Shared parameter -> the stages holding it, from the launch.json beside the stage files."""
    folder = Path(specs[0].module_args[0])
    data = json.loads((folder / "launch.json").read_text())
    return {name: [int(s) for s in stages] for name, stages in data.get("tied_parameters", {}).items()}
