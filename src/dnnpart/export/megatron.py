"""``dnnpart export --format megatron``: Megatron-LM's pipeline arguments for a plan.

Megatron's GPT-style models are one stack of transformer layers between an embedding and the
loss; the export gives the pipeline size and ``--pipeline-model-parallel-layout`` (stages
split by ``|``, ``E`` the embedding, ``t`` a transformer layer, ``L`` the output layer and
loss), and, where the plan's middle stages hold equal numbers of layers, the older
``--decoder-first-pipeline-num-layers`` / ``--decoder-last-pipeline-num-layers`` pair too.

Choices:

* The family test reads the units alone (no list of architectures): one block container
  (a single stack) and a token embedding (an ``embedding`` operator before the first block)
  make a Megatron-style language model; an encoder-decoder (two stacks), a CNN or a vision
  transformer (no token embedding) and a model with convolutions inside its blocks (Mamba)
  are refused with exit 2, since Megatron's layout has no such family.
* Where megatron-core imports, the layout is checked with its own
  ``PipelineParallelLayerLayout`` (parsing, ``validate_layer_layout`` and the layer ids of
  every pipeline rank against the plan's blocks); the file says whether it was.
"""

from __future__ import annotations

import warnings
from typing import Any

from dnnpart.errors import FormatError, UsageError
from dnnpart.export.layers import EMBEDDING, UnitStages, layer_units, megatron_layout
from dnnpart.frontends.ir import ModelIR

MEGATRON_FORMAT = "dnnpart.megatron"


def check_family(ir: ModelIR) -> None:
    """Refuse a model Megatron's layout cannot describe (one line naming what it is), from
    the units of its operators (:func:`~dnnpart.export.layers.layer_units`).

    Raises
    ------
    UsageError
        Two block stacks (an encoder-decoder), no token embedding, or convolutions in blocks.
    """
    units = layer_units(ir)
    kinds = {op.name: op.spec.op_type for op in ir.ops}
    # no token embedding first: a CNN's head (a numbered Sequential) would read as a second stack
    embedding_ops = units.ops[units.names.index(EMBEDDING)] if EMBEDDING in units.names else ()
    if not any(kinds[o] == "embedding" for o in embedding_ops):
        raise UsageError(
            f"--format megatron: {ir.name} has no token embedding before its blocks (a CNN or a "
            "vision model); Megatron's pipeline layout has no such model family (language models)")
    containers = units.block_containers
    if len(containers) > 1:
        raise UsageError(
            f"--format megatron: {ir.name} is an encoder-decoder (block stacks "
            f"{', '.join(repr(c) for c in containers)}); Megatron's pipeline layout has no "
            "encoder-decoder family (one decoder stack only)")
    block_ops = [o for name, kind, ops in zip(units.names, units.kinds, units.ops, strict=True)
                 if kind == "block" for o in ops]
    conv = next((o for o in block_ops if "conv" in kinds[o]), None)
    if conv is not None:
        raise UsageError(
            f"--format megatron: {ir.name}'s blocks run convolutions (e.g. {conv!r}); Megatron's "
            "pipeline layout has no such model family (transformer layers only)")


def first_last_layers(stages: UnitStages) -> tuple[int, int] | None:
    """``(first, last)`` for ``--decoder-first/last-pipeline-num-layers``, or ``None`` when
    the middle stages differ in size (only the layout describes the plan then).

    Examples
    --------
    >>> from dnnpart.export.layers import LayerUnits
    >>> u = LayerUnits(names=("embedding", "a", "b", "c", "d", "head"), ops=((),) * 6,
    ...                kinds=("embedding",) + ("block",) * 4 + ("head",), containers=("",) * 6,
    ...                free=frozenset())
    >>> first_last_layers(UnitStages(units=u, stage_of=(0, 0, 1, 1, 2, 2), devices=(0, 1, 2)))
    (1, 1)
    >>> first_last_layers(UnitStages(units=u, stage_of=(0, 0, 0, 1, 2, 2), devices=(0, 1, 2)))
    (2, 1)
    """
    counts = [0] * stages.n_stages
    for kind, s in zip(stages.units.kinds, stages.stage_of, strict=True):
        counts[s] += kind == "block"
    if len(counts) < 2 or min(counts) == 0 or len(set(counts[1:-1])) > 1:
        return None
    return counts[0], counts[-1]


def validate_with_megatron(layout: str, n_stages: int, stages: UnitStages) -> str | None:
    """Check ``layout`` with megatron-core's own parser; its version, or ``None`` if absent.

    Raises
    ------
    FormatError
        megatron-core rejects the layout, or gives a rank other layers than the plan.
    """
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            import megatron.core as mcore
            from megatron.core.transformer.pipeline_parallel_layer_layout import (
                PipelineParallelLayerLayout,
            )
    except ImportError:
        return None
    n_blocks = stages.units.kinds.count("block")
    try:
        parsed = PipelineParallelLayerLayout(layout, n_stages)
        parsed.validate_layer_layout(num_layers=n_blocks, mtp_num_layers=None)
        got = [parsed.get_layer_id_list(pp_rank=r, vp_stage=0) for r in range(n_stages)]
    except (AssertionError, ValueError, NotImplementedError) as exc:
        raise FormatError(f"megatron-core rejects layout {layout!r}: {exc}") from None
    want: list[list[int]] = [[] for _ in range(n_stages)]
    b = 0
    for kind, s in zip(stages.units.kinds, stages.stage_of, strict=True):
        if kind == "block":
            want[s].append(b)
            b += 1
    if got != want:
        raise FormatError(f"megatron-core gives layout {layout!r} the layers {got}, the plan {want}")
    return f"megatron-core {getattr(mcore, '__version__', '?')}"


def megatron_dict(ir: ModelIR, stages: UnitStages, launch: dict[str, Any]) -> dict[str, Any]:
    """The export file: pipeline size, layout, first/last pair, launch map, validation."""
    check_family(ir)
    layout = megatron_layout(stages)
    n = stages.n_stages
    if any(not part for part in layout.split("|")):
        empty = layout.split("|").index("")
        raise FormatError(
            f"stage {empty} of the plan holds no layer (only operators between layers); Megatron "
            "would run nothing there: plan with the default block granularity (--granularity block)")
    validated = validate_with_megatron(layout, n, stages)
    pair = first_last_layers(stages)
    args = ["--pipeline-model-parallel-size", str(n), "--pipeline-model-parallel-layout", layout]
    return {
        "format": MEGATRON_FORMAT,
        "version": 2,
        "model": ir.name,
        "pipeline_model_parallel_size": n,
        "pipeline_model_parallel_layout": layout,
        "decoder_first_pipeline_num_layers": None if pair is None else pair[0],
        "decoder_last_pipeline_num_layers": None if pair is None else pair[1],
        "stage_layers": [stages.stage_units(s) for s in range(n)],
        "args": args,
        "usage": f'--pipeline-model-parallel-size {n} --pipeline-model-parallel-layout "{layout}"',
        "validated_with": validated,
        **{k: launch[k] for k in ("ranks", "CUDA_VISIBLE_DEVICES", "CUDA_VISIBLE_DEVICES_per_node", "notes")},
    }
