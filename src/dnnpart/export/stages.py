"""Split a traced module into per-device stage modules according to a placement.

Each operator (fx node) has a device. Stages are the groups of operators with the same device
and the same *level*, where an operator's level is the largest level of its producers, plus one
for a producer on another device. So every cross-device edge goes to a strictly higher level,
the stages ordered by level form a topological order of the stage graph, and a device whose
operators form several non-adjacent pieces gets several stages, run in level order. A
contiguous split of a chain gives exactly one stage per device.

Each stage is an ``fx.GraphModule`` whose placeholders are the values it receives (model
inputs or other stages' outputs) and whose output is the tuple of values other stages (or the
model's output) need. Parameters and buffers (``get_attr``) are copied into the stages that
use them.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from dnnpart.errors import FormatError, UsageError

if TYPE_CHECKING:
    from torch import fx


@dataclass(frozen=True, slots=True, kw_only=True, eq=False)
class Stage:
    """One stage: a subgraph of one device, run as a module.

    Attributes
    ----------
    index : position in the global stage order (a topological order of stages).
    device : the device (index in the plan's cluster) it runs on.
    level : its level (see the module docstring).
    module : the stage's program; ``module(*inputs)`` returns the tuple ``outputs``.
    inputs : names of the values it takes, in placeholder order.
    outputs : names of the values it returns, in order.
    nodes : names of the operators in it.
    """

    index: int
    device: int
    level: int
    module: Any  # fx.GraphModule
    inputs: tuple[str, ...]
    outputs: tuple[str, ...]
    nodes: tuple[str, ...]


@dataclass(frozen=True, slots=True, kw_only=True, eq=False)
class StagedProgram:
    """All stages of a model plus how the model's inputs and output map onto values."""

    stages: tuple[Stage, ...]
    input_names: tuple[str, ...]  # placeholder names of the original module, in order
    output_template: Any  # the original output node's args, with value names as str leaves
    output_values: tuple[str, ...]

    @property
    def devices(self) -> tuple[int, ...]:
        """Devices with at least one stage, in order of first stage."""
        return tuple(dict.fromkeys(s.device for s in self.stages))

    def stages_of(self, device: int) -> tuple[Stage, ...]:
        return tuple(s for s in self.stages if s.device == device)


class _ValueRef(str):
    """A value name inside the output template (distinguishes names from user strings)."""


def split_module(gm: fx.GraphModule, device_of: Mapping[str, int],
                 order: Sequence[int] | None = None) -> StagedProgram:
    """Split ``gm`` into stages; ``device_of`` maps every operator's fx node name to a device.

    Stages follow the data flow: a new stage starts where an operator's input comes from
    another device. With ``order`` (a linear pipeline's devices, every operator's inputs on
    its own device or an earlier one), stage ``i`` is all of device ``order[i]``'s operators,
    also those that read only the model's inputs (a position table a later block builds).

    Raises
    ------
    FormatError
        An operator of ``gm`` has no device in ``device_of``.
    """
    from torch import fx

    ops = [n for n in gm.graph.nodes if n.op in ("call_module", "call_function", "call_method")]
    missing = [n.name for n in ops if n.name not in device_of]
    if missing:
        raise FormatError(
            f"the placement does not cover {len(missing)} operator(s) of the traced model, e.g. "
            f"{missing[0]!r}; was the plan made for this model and input shape?"
        )
    level: dict[str, int] = {}
    if order is not None:
        rank = {d: i for i, d in enumerate(order)}
        level = {n.name: rank[device_of[n.name]] for n in ops}
    else:
        for n in ops:
            lv = 0
            for a in n.all_input_nodes:
                if a.name in level:
                    lv = max(lv, level[a.name] + (device_of[a.name] != device_of[n.name]))
            level[n.name] = lv
    keys = sorted({(level[n.name], device_of[n.name]) for n in ops})
    stage_of = {n.name: keys.index((level[n.name], device_of[n.name])) for n in ops}

    output_node = next(n for n in gm.graph.nodes if n.op == "output")
    final_values = [a.name for a in output_node.all_input_nodes]
    consumers: dict[str, set[int]] = {}
    for n in ops:
        for a in n.all_input_nodes:
            if a.op != "get_attr":
                consumers.setdefault(a.name, set()).add(stage_of[n.name])

    stages = []
    for s, (lv, dev) in enumerate(keys):
        members = [n for n in ops if stage_of[n.name] == s]
        graph = fx.Graph()
        env: dict[str, Any] = {}
        inputs: list[str] = []

        def lookup(
            a: fx.Node, graph: fx.Graph = graph, env: dict[str, Any] = env, inputs: list[str] = inputs
        ) -> Any:
            if a.name not in env:
                if a.op == "get_attr":
                    env[a.name] = graph.get_attr(str(a.target))
                else:
                    env[a.name] = graph.placeholder(a.name)
                    inputs.append(a.name)
            return env[a.name]

        for n in members:
            for a in n.all_input_nodes:
                if stage_of.get(a.name) != s:
                    lookup(a)
            env[n.name] = graph.node_copy(n, lambda a, env=env: env[a.name])  # type: ignore[misc]
        outputs = [n.name for n in members if (consumers.get(n.name, set()) - {s}) or n.name in final_values]
        graph.output(tuple(env[v] for v in outputs))
        module = fx.GraphModule(gm, graph, f"stage{s}_device{dev}")
        stages.append(
            Stage(
                index=s,
                device=dev,
                level=lv,
                module=module,
                inputs=tuple(inputs),
                outputs=tuple(outputs),
                nodes=tuple(n.name for n in members),
            )
        )

    template = _module_structure(gm, fx.node.map_arg(output_node.args[0], lambda a: _ValueRef(a.name)))
    return StagedProgram(
        stages=tuple(stages),
        input_names=tuple(n.name for n in gm.graph.nodes if n.op == "placeholder"),
        output_template=template,
        output_values=tuple(final_values),
    )


def _module_structure(gm: fx.GraphModule, flat: Any) -> Any:
    """The output template in the structure the module itself returns.

    ``torch.export`` flattens a module's outputs (``(y, (h, 2 * h))`` and ``{"y": y, "h": h}``
    become flat tuples, ``None`` leaves are dropped) and keeps the structure as the graph's
    ``out_spec``; the unpartitioned module still returns the nested one, so the distributed
    run's outputs are rebuilt the same way before they are compared (``dnnpart run`` compared
    a flat tuple with the nested reference: ``zip() argument 2 is longer``). Structures other
    than tuples, lists, dicts and ``None`` stay flat.
    """
    info = getattr(gm.graph._codegen, "pytree_info", None)
    spec = getattr(info, "out_spec", None)
    leaves = list(flat) if isinstance(flat, (tuple, list)) else [flat]
    if spec is None or spec.num_leaves != len(leaves):
        return flat
    from torch.utils import _pytree as pytree

    nested = pytree.tree_unflatten(leaves, spec)
    return nested if _plain(nested) else flat


def _plain(x: Any) -> bool:
    if isinstance(x, _ValueRef) or x is None:
        return True
    if type(x) in (tuple, list):
        return all(_plain(v) for v in x)
    if type(x) is dict:
        return all(_plain(v) for v in x.values())
    return False


def assemble_output(program: StagedProgram, values: Mapping[str, Any]) -> Any:
    """Rebuild the model's output structure from the computed values."""
    return _fill(program.output_template, values)


def _fill(x: Any, values: Mapping[str, Any]) -> Any:
    """``x`` with every value name replaced by its value. A module-level function, not a
    closure calling itself: that would be a reference cycle holding ``values`` (a stage's
    activations) until the garbage collector runs."""
    if isinstance(x, _ValueRef):
        return values[str(x)]
    if isinstance(x, tuple):
        return tuple(_fill(v, values) for v in x)
    if isinstance(x, list):
        return [_fill(v, values) for v in x]
    if isinstance(x, dict):
        return {k: _fill(v, values) for k, v in x.items()}
    return x


def run_locally(program: StagedProgram, inputs: Sequence[Any]) -> Any:
    """Run all stages in one process, in stage order (a reference for the distributed run)."""
    if len(inputs) != len(program.input_names):
        raise UsageError(f"expected {len(program.input_names)} inputs, got {len(inputs)}")
    values: dict[str, Any] = dict(zip(program.input_names, inputs, strict=True))
    for stage in program.stages:
        results = stage.module(*(values[v] for v in stage.inputs))
        values.update(zip(stage.outputs, results, strict=True))
    return assemble_output(program, values)
