"""Layer-granular exports: DeepSpeed ``PipelineModule`` ``parts`` and Megatron's pipeline layout.

Both runtimes place whole *layers* of a layer-list model: an embedding, ``n`` repeated blocks
and a head. The blocks are the children of the model's repeated container (the first module
path component followed by an index and called once per index: ``transformer.h.3``,
``encoder.layer.0``, ``layers.11``); the embedding is every operator before the first block,
the head every operator after the last.

* DeepSpeed: ``PipelineModule`` gives stage ``s`` the layers ``layers[parts[s]:parts[s + 1]]``
  of its layer list (``parts`` has one entry more than stages, starts at 0, ends at the
  number of layers). Our layer list is ``[embedding, block 0, ..., block n-1, head]``.
* Megatron (``--pipeline-model-parallel-layout``): stages separated by ``|``; ``E`` the
  embedding, ``t`` a decoder layer, ``L`` the loss (with the output layer and final norm);
  empty stages allowed. The embedding must be in the first stage and ``L`` in the last.

A plan that splits a block between stages, or places layers out of stage order, is refused
naming the block.
"""

from __future__ import annotations

import re
from typing import Any

from dnnpart.errors import FormatError
from dnnpart.frontends.ir import ModelIR

_BLOCK = re.compile(r"^(.*?)\.(\d+)(?:\.|$)")


def layer_units(ir: ModelIR) -> tuple[str, list[tuple[str, list[str]]]]:
    """The repeated container and ``[(unit name, operators)]``: embedding, blocks, head.

    Examples
    --------
    >>> from dnnpart.cost.ops import OpSpec
    >>> from dnnpart.frontends.ir import OpRecord
    >>> paths = ["wte", "h.0.attn", "h.0.mlp", "h.1.attn", "lm_head"]
    >>> ops = [OpRecord(name=f"o{i}", source_type="x", spec=OpSpec(op_type="x"), module_path=p)
    ...        for i, p in enumerate(paths)]
    >>> container, units = layer_units(ModelIR(name="m", source="fx", ops=ops))
    >>> container, [(u, len(o)) for u, o in units]
    ('h', [('embedding', 1), ('h.0', 2), ('h.1', 1), ('head', 1)])
    """
    counts: dict[str, set[str]] = {}
    for op in ir.ops:
        m = _BLOCK.match(op.module_path.replace("/", "."))
        if m:
            counts.setdefault(m.group(1), set()).add(m.group(2))
    if not counts:
        raise FormatError(f"{ir.name}: no repeated layers (module paths like 'h.0', 'layers.3') to export")
    container = max(counts, key=lambda c: len(counts[c]))
    units: list[tuple[str, list[str]]] = [("embedding", [])]
    seen_block = False
    for op in ir.ops:
        path = op.module_path.replace("/", ".")
        m = _BLOCK.match(path)
        if m and m.group(1) == container:
            name = f"{container}.{m.group(2)}"
            if units[-1][0] != name:
                if any(u == name for u, _ in units):
                    raise FormatError(f"block {name!r} is called twice; a layer list cannot express it")
                units.append((name, []))
            seen_block = True
        elif seen_block and not units[-1][0] == "head":
            units.append(("head", []))
        units[-1][1].append(op.name)
    if units[-1][0] != "head":
        units.append(("head", []))
    return container, units


def unit_stages(ir: ModelIR, device_of: dict[str, int]) -> tuple[list[str], list[int], list[int]]:
    """Unit names, the stage of each unit, and the devices in stage order.

    Raises
    ------
    FormatError
        A unit's operators are on several devices (naming it), or units go back to an
        earlier stage.
    """
    _, units = layer_units(ir)
    order: list[int] = []
    names: list[str] = []
    stage_of: list[int] = []
    for name, ops in units:
        devs = {device_of[o] for o in ops}
        if len(devs) > 1:
            raise FormatError(
                f"layer {name!r} is split over devices {sorted(devs)}; DeepSpeed and Megatron place "
                "whole layers (plan with --granularity module, or export --format torch)"
            )
        if not devs:  # an empty head or embedding goes with its neighbour
            stage = len(order) - 1 if order else 0
        else:
            dev = devs.pop()
            if dev not in order:
                order.append(dev)
            stage = order.index(dev)
            if stage_of and stage < max(stage_of):
                raise FormatError(
                    f"layer {name!r} goes back to an earlier stage (device {dev}); not a pipeline"
                )
        names.append(name)
        stage_of.append(max(stage, 0))
    if stage_of and stage_of[0] != 0:
        stage_of[0] = 0
    return names, stage_of, order


def deepspeed_dict(ir: ModelIR, device_of: dict[str, int], device_names: list[str]) -> dict[str, Any]:
    """``parts`` for ``deepspeed.pipe.PipelineModule`` over ``[embedding, blocks..., head]``."""
    names, stage_of, order = unit_stages(ir, device_of)
    n_stages = max(len(order), 1)
    parts = [0] + [sum(1 for s in stage_of if s <= k) for k in range(n_stages)]
    return {
        "format": "dnnpart.deepspeed",
        "version": 1,
        "model": ir.name,
        "layers": names,
        "num_stages": n_stages,
        "parts": parts,
        "stage_devices": [device_names[d] for d in order],
        "usage": "PipelineModule(layers=[embedding, *blocks, head], num_stages=num_stages); stage s "
        "holds layers[parts[s]:parts[s+1]] (set module.parts or a partition method giving these)",
    }


def megatron_layout(ir: ModelIR, device_of: dict[str, int]) -> str:
    """``--pipeline-model-parallel-layout`` string of a layer-granular plan.

    Examples
    --------
    >>> from dnnpart.cost.ops import OpSpec
    >>> from dnnpart.frontends.ir import OpRecord
    >>> paths = ["wte", "h.0.attn", "h.1.attn", "h.2.attn", "lm_head"]
    >>> ops = [OpRecord(name=f"o{i}", source_type="x", spec=OpSpec(op_type="x"), module_path=p)
    ...        for i, p in enumerate(paths)]
    >>> placed = {"o0": 0, "o1": 0, "o2": 1, "o3": 1, "o4": 1}
    >>> megatron_layout(ModelIR(name="m", source="fx", ops=ops), placed)
    'Et|ttL'
    """
    names, stage_of, order = unit_stages(ir, device_of)
    stages = [""] * max(len(order), 1)
    for name, s in zip(names, stage_of, strict=True):
        stages[s] += "E" if name == "embedding" else "L" if name == "head" else "t"
    return "|".join(stages)


def megatron_dict(ir: ModelIR, device_of: dict[str, int], device_names: list[str]) -> dict[str, Any]:
    """File content: the layout string and the pipeline size it goes with."""
    _, _, order = unit_stages(ir, device_of)
    layout = megatron_layout(ir, device_of)
    return {
        "format": "dnnpart.megatron",
        "version": 1,
        "model": ir.name,
        "pipeline_model_parallel_size": layout.count("|") + 1,
        "pipeline_model_parallel_layout": layout,
        "stage_devices": [device_names[d] for d in order],
        "usage": f'--pipeline-model-parallel-size {layout.count("|") + 1} '
        f'--pipeline-model-parallel-layout "{layout}"',
    }
