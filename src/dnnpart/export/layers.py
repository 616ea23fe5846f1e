"""Layer units of a model and the stage of each under a plan (DeepSpeed, Megatron, torchtitan).

Layer-list runtimes place whole *layers*: an embedding, the repeated blocks and a head. The
units come from the operators' module paths by the same rule as block-granular planning
(:func:`dnnpart.graph.blocks.node_units` for a planned graph; for a model's operators in
execution order, :func:`~dnnpart.graph.blocks.block_keys` in runs), so a block-aligned plan
never splits one:

* ``embedding``: the operators before the first block;
* one unit per block, named by its key (``transformer.h.3``, ``model.layers.0``);
* ``head``: the operators after the last block;
* a run of non-block operators between two different blocks is a unit of its own, named by
  its modules' common path (an encoder-decoder's decoder embedding, ``model.decoder``).

Non-block operators that run *inside* a block's span (helper calls, attention-mask
construction with no module of its own) are *free*: listed with the embedding when inside the
first block's span, else with that block, but never checked, since a block-aligned plan may
put them with either neighbour and every runtime builds them where its own code does.

* DeepSpeed: ``PipelineModule`` gives stage ``s`` the layers ``layers[parts[s]:parts[s + 1]]``;
  over the layer list ``[embedding, blocks..., head]`` this is :func:`deepspeed_parts`.
* Megatron (``--pipeline-model-parallel-layout``): stages separated by ``|``; ``E`` the
  embedding, ``t`` a decoder layer, ``L`` the loss (with the output layer and final norm).

A plan that splits a unit between devices, or goes back to an earlier stage, is refused
naming the unit (:func:`unit_stages`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from dnnpart.errors import FormatError
from dnnpart.frontends.ir import ModelIR
from dnnpart.graph.blocks import block_keys, node_units, unit_runs
from dnnpart.graph.core import Graph

EMBEDDING, HEAD = "embedding", "head"
SPLIT_ADVICE = "plan with the default block granularity (--granularity block)"


@dataclass(frozen=True, slots=True)
class LayerUnits:
    """The units of a model in execution order.

    Attributes
    ----------
    names : unit names (``embedding``, block keys, ``head``, between-block runs).
    ops : each unit's operator names, in model order.
    kinds : ``"embedding"``, ``"block"``, ``"head"`` or ``"between"`` for each unit.
    containers : for each block unit, its container path (``transformer.h``), else ``""``.
    free : operators listed in a unit but not checked (non-block operators inside a block's
        span).
    """

    names: tuple[str, ...]
    ops: tuple[tuple[str, ...], ...]
    kinds: tuple[str, ...]
    containers: tuple[str, ...]
    free: frozenset[str]

    @property
    def blocks(self) -> list[str]:
        """Block unit names, in order."""
        return [n for n, k in zip(self.names, self.kinds, strict=True) if k == "block"]

    @property
    def block_containers(self) -> list[str]:
        """Distinct block containers in order of first use (two for an encoder-decoder)."""
        return list(dict.fromkeys(c for c, k in zip(self.containers, self.kinds, strict=True)
                                  if k == "block"))


def layer_units(ir: ModelIR) -> LayerUnits:
    """The layer units of ``ir`` (see the module docstring).

    Raises
    ------
    FormatError
        The model has no repeated blocks, or calls a block twice (a layer list cannot
        express it).

    Examples
    --------
    >>> from dnnpart.cost.ops import OpSpec
    >>> from dnnpart.frontends.ir import OpRecord
    >>> paths = ["wte", "h.0.attn", "", "h.0.mlp", "h.1.attn", "h.1.mlp", "lm_head"]
    >>> ops = [OpRecord(name=f"o{i}", source_type="x", spec=OpSpec(op_type="x"), module_path=p)
    ...        for i, p in enumerate(paths)]
    >>> u = layer_units(ModelIR(name="m", source="fx", ops=ops))
    >>> [(n, len(o)) for n, o in zip(u.names, u.ops)], sorted(u.free)
    ([('embedding', 2), ('h.0', 2), ('h.1', 2), ('head', 1)], ['o2'])
    """
    return units_of([op.name for op in ir.ops], [op.module_path for op in ir.ops], ir.name)


def graph_units(graph: Graph, name: str = "model") -> LayerUnits:
    """The layer units of a planned graph: its block units
    (:func:`dnnpart.graph.blocks.node_units`, the units block-granular planning cuts between),
    the prologue as the ``embedding`` and the epilogue as the ``head``; each unit lists its
    forward nodes (backward nodes follow them and are not listed).

    Raises
    ------
    FormatError
        The graph has no numbered blocks.
    """
    units = node_units(graph)
    inner = [n for n in units.names if n not in ("prologue", "epilogue")]
    if not inner or graph.module_paths is None or not any(graph.module_paths):
        raise FormatError(
            f"{name}: no repeated blocks (module paths like 'h.0', 'layers.3'); a layer-list "
            "runtime (DeepSpeed, Megatron, torchtitan) needs a model built of numbered blocks")
    fwd = ~np.asarray(graph.is_backward, dtype=bool)
    members = [tuple(graph.names[v] for v in np.flatnonzero(fwd & (units.unit == u)).tolist())
               for u in range(units.n_units)]
    names = [EMBEDDING if n == "prologue" else HEAD if n == "epilogue" else n for n in units.names]
    kinds = [n if n in (EMBEDDING, HEAD) else "block" for n in names]
    if names[0] != EMBEDDING:
        names, kinds, members = [EMBEDDING, *names], [EMBEDDING, *kinds], [(), *members]
    if names[-1] != HEAD:
        names, kinds, members = [*names, HEAD], [*kinds, HEAD], [*members, ()]
    return LayerUnits(
        names=tuple(names), ops=tuple(members), kinds=tuple(kinds),
        containers=tuple(_container(k.split("..")[0]) if kind == "block" else ""
                         for k, kind in zip(names, kinds, strict=True)),
        free=frozenset())


def graph_devices(graph: Graph, assignment: Any) -> dict[str, int]:
    """Device of every forward node of ``graph`` by name."""
    return {graph.names[v]: int(assignment[v]) for v in range(graph.n_nodes) if not graph.is_backward[v]}


def units_of(op_names: Sequence[str], module_paths: Sequence[str], model: str) -> LayerUnits:
    """The layer units of operators ``op_names`` (execution order) with their module paths."""
    paths = [p.replace("/", ".") for p in module_paths]
    keys = block_keys(paths)
    if not any(keys):
        raise FormatError(
            f"{model}: no repeated blocks (module paths like 'h.0', 'layers.3'); a layer-list "
            "runtime (DeepSpeed, Megatron, torchtitan) needs a model built of numbered blocks")
    runs = unit_runs(keys).tolist()
    members: dict[int, list[int]] = {}
    for i, r in enumerate(runs):
        members.setdefault(r, []).append(i)
    names: list[str] = []
    kinds: list[str] = []
    ops: list[list[str]] = []
    free: set[str] = set()
    n_runs = len(members)
    for r, idx in sorted(members.items()):
        key = next((keys[i] for i in idx if keys[i]), "")
        if key:
            if key in names:
                raise FormatError(
                    f"{model}: block {key!r} is called twice; a layer list cannot express it")
            name, kind = key, "block"
            free.update(op_names[i] for i in idx if not keys[i])
        elif r == 0:
            name, kind = EMBEDDING, EMBEDDING
        elif r == n_runs - 1:
            name, kind = HEAD, HEAD
        else:
            name, kind = _common_path([paths[i] for i in idx]), "between"
        names.append(name)
        kinds.append(kind)
        ops.append([op_names[i] for i in idx])
    if kinds[0] == EMBEDDING and kinds[1] == "block":  # free operators of the first block's span
        ops[0] += [o for o in ops[1] if o in free]
        ops[1] = [o for o in ops[1] if o not in free]
    if kinds[-1] != HEAD:
        names.append(HEAD)
        kinds.append(HEAD)
        ops.append([])
    return LayerUnits(
        names=tuple(names), ops=tuple(tuple(o) for o in ops), kinds=tuple(kinds),
        containers=tuple(_container(n) if k == "block" else "" for n, k in zip(names, kinds, strict=True)),
        free=frozenset(free))


def _container(block: str) -> str:
    return block.rsplit(".", 1)[0] if "." in block else ""


def _common_path(paths: list[str]) -> str:
    split = [p.split(".") for p in paths if p]
    if not split:
        return "(top)"
    k = 0
    while all(len(s) > k and s[k] == split[0][k] for s in split):
        k += 1
    return ".".join(split[0][:k]) or split[0][0]


@dataclass(frozen=True, slots=True)
class UnitStages:
    """Where each unit runs under a plan.

    Attributes
    ----------
    units : the model's :class:`LayerUnits`.
    stage_of : the pipeline stage of each unit.
    devices : the plan's device of each stage, in stage order.
    """

    units: LayerUnits
    stage_of: tuple[int, ...]
    devices: tuple[int, ...]

    @property
    def n_stages(self) -> int:
        return len(self.devices)

    def stage_units(self, stage: int) -> list[str]:
        """Names of the units of ``stage``."""
        return [n for n, s in zip(self.units.names, self.stage_of, strict=True) if s == stage]


def unit_stages(units: LayerUnits, device_of: Mapping[str, int]) -> UnitStages:
    """The stage of every unit of ``units`` under the placement ``device_of`` (operator ->
    device; :func:`layer_units` of a model's operators or :func:`graph_units` of a planned
    graph).

    Stages are numbered in model order: the embedding's device runs stage 0.

    Raises
    ------
    FormatError
        A unit's operators are on several devices (naming it), units go back to an earlier
        stage, or a device runs only free operators.
    """
    order: list[int] = []
    stage_of: list[int] = []
    for name, ops in zip(units.names, units.ops, strict=True):
        devs = {device_of[o] for o in ops if o not in units.free}
        if len(devs) > 1:
            raise FormatError(
                f"layer {name!r} is split over devices {sorted(devs)}; layer-list runtimes place "
                f"whole layers: {SPLIT_ADVICE}")
        if not devs:  # an empty head (or a unit of free operators only) joins the stage before
            stage_of.append(max(len(order) - 1, 0))
            continue
        dev = devs.pop()
        if dev not in order:
            order.append(dev)
        stage = order.index(dev)
        if stage_of and stage < max(stage_of):
            raise FormatError(
                f"layer {name!r} goes back to an earlier stage (device {dev}); not a pipeline: "
                f"{SPLIT_ADVICE}")
        stage_of.append(stage)
    stray = sorted({device_of[o] for o in units.free if o in device_of} - set(order))
    if stray:
        op = next(o for o in sorted(units.free) if device_of.get(o) == stray[0])
        raise FormatError(
            f"device {stray[0]} runs only operators outside every layer (e.g. {op!r}); a "
            f"layer-list runtime has no stage for them: {SPLIT_ADVICE}")
    return UnitStages(units=units, stage_of=tuple(stage_of), devices=tuple(order or [0]))


def deepspeed_parts(stages: UnitStages) -> list[int]:
    """``PipelineModule.parts`` over the layer list ``[embedding, blocks..., head]``.

    Examples
    --------
    >>> u = LayerUnits(names=("embedding", "h.0", "h.1", "head"), ops=((),) * 4,
    ...                kinds=("embedding", "block", "block", "head"), containers=("", "h", "h", ""),
    ...                free=frozenset())
    >>> deepspeed_parts(UnitStages(units=u, stage_of=(0, 0, 1, 1), devices=(2, 0)))
    [0, 2, 4]
    """
    return [0] + [sum(1 for s in stages.stage_of if s <= k) for k in range(stages.n_stages)]


def megatron_layout(stages: UnitStages) -> str:
    """``--pipeline-model-parallel-layout`` of a decoder-only model's stages.

    Examples
    --------
    >>> u = LayerUnits(names=("embedding", "h.0", "h.1", "h.2", "head"), ops=((),) * 5,
    ...                kinds=("embedding", "block", "block", "block", "head"),
    ...                containers=("", "h", "h", "h", ""), free=frozenset())
    >>> megatron_layout(UnitStages(units=u, stage_of=(0, 0, 1, 1, 1), devices=(0, 1)))
    'Et|ttL'
    """
    letters = {EMBEDDING: "E", HEAD: "L", "block": "t", "between": ""}
    out = [""] * stages.n_stages
    for kind, s in zip(stages.units.kinds, stages.stage_of, strict=True):
        out[s] += letters[kind]
    return "|".join(out)
