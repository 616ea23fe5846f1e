"""Split points for ``torch.distributed.pipelining`` from a contiguous split of a sequential model.

``torch.distributed.pipelining.pipeline(module, ..., split_spec={"layer3.0":
SplitPoint.BEGINNING})`` cuts a model before the named submodules. A plan whose devices each
hold one contiguous run of operators in the model's order is such a cut: each run after the
first starts at a split point, named by the module path of its first operator.
"""

from __future__ import annotations

from typing import Any

from dnnpart.errors import FormatError
from dnnpart.frontends.ir import ModelIR


def split_points(ir: ModelIR, device_of: dict[str, int]) -> list[dict[str, Any]]:
    """One entry per pipeline stage: its device, first operator and split module path.

    Raises
    ------
    FormatError
        A device's operators are not one contiguous run in model order (not a pipeline cut),
        or a stage starts at an operator with no module path to split before.

    Examples
    --------
    >>> from dnnpart.cost.ops import OpSpec
    >>> from dnnpart.frontends.ir import OpRecord
    >>> ops = [OpRecord(name=n, source_type="Linear", spec=OpSpec(op_type="linear"), module_path=n)
    ...        for n in ("fc1", "fc2", "fc3")]
    >>> [s["split_before"] for s in split_points(ModelIR(name="m", source="fx", ops=ops),
    ...                                          {"fc1": 0, "fc2": 0, "fc3": 1})]
    [None, 'fc3']
    """
    stages: list[dict[str, Any]] = []
    seen: set[int] = set()
    for i, op in enumerate(ir.ops):
        dev = device_of[op.name]
        if stages and stages[-1]["device"] == dev:
            stages[-1]["n_operators"] += 1
            continue
        if dev in seen:
            raise FormatError(
                f"device {dev} runs two separate pieces of the model (again from operator {op.name!r}); "
                "a torch.distributed.pipelining split needs one contiguous piece per device -- "
                "export --format torch runs any plan"
            )
        seen.add(dev)
        split = None
        if stages:
            split = _split_module(ir, i)
            if split is None:
                path = op.module_path.replace("/", ".")
                if not path:
                    raise FormatError(
                        f"stage on device {dev} starts at {op.name!r}, which belongs to no "
                        "submodule; torch.distributed.pipelining cannot split there"
                    )
                calls = _calls(ir, path)
                why = (
                    f"which the model calls {calls} times (a split point cuts before every call)"
                    if calls > 1
                    else "mid-way through that module (a split point cuts before a whole module call)"
                )
                raise FormatError(
                    f"stage on device {dev} starts at {op.name!r} inside module {path!r}, {why}; "
                    "torch.distributed.pipelining cannot cut there -- export --format torch or "
                    "`dnnpart run` run this plan"
                )
        stages.append({"device": dev, "first_operator": op.name, "split_before": split, "n_operators": 1})
    return stages


def pipelining_dict(ir: ModelIR, device_of: dict[str, int], device_names: list[str]) -> dict[str, Any]:
    """File content: stages and the ``split_spec`` keys for ``torch.distributed.pipelining``."""
    stages = split_points(ir, device_of)
    for s in stages:
        s["device"] = device_names[s["device"]]
    return {
        "format": "dnnpart.pipelining",
        "version": 1,
        "model": ir.name,
        "split_spec": {s["split_before"]: "BEGINNING" for s in stages if s["split_before"]},
        "stages": stages,
        "usage": "torch.distributed.pipelining.pipeline(model, mb_args=(x,), split_spec="
        "{path: SplitPoint.BEGINNING for path in split_spec})",
    }


def _inside(op_path: str, module: str) -> bool:
    path = op_path.replace("/", ".")
    return path == module or path.startswith(module + ".")


def _runs(ir: ModelIR, module: str) -> list[int]:
    """Index of the first operator of each call of ``module`` (maximal runs of its operators)."""
    starts = []
    prev = False
    for i, op in enumerate(ir.ops):
        now = _inside(op.module_path, module)
        if now and not prev:
            starts.append(i)
        prev = now
    return starts


def _calls(ir: ModelIR, module: str) -> int:
    return len(_runs(ir, module))


def _split_module(ir: ModelIR, i: int) -> str | None:
    """The deepest module whose only call starts at operator ``i`` (``None``: there is none).

    A ``SplitPoint.BEGINNING`` on a module called twice (torchvision's shared ``self.relu``)
    cuts before *each* call, so such a module is no split point; an enclosing module that
    starts at the same operator and is called once is.
    """
    parts = ir.ops[i].module_path.replace("/", ".").split(".") if ir.ops[i].module_path else []
    for depth in range(len(parts), 0, -1):
        module = ".".join(parts[:depth])
        if _runs(ir, module) == [i]:
            return module
    return None
