"""Split points for ``torch.distributed.pipelining`` and the launch of a pipelined plan.

``torch.distributed.pipelining.pipeline(module, ..., split_spec={"layer3.0":
SplitPoint.BEGINNING})`` cuts a model before the named submodules. A plan whose devices each
hold one contiguous run of operators in the model's order is such a cut: each run after the
first starts at a split point, named by a module whose only call starts at the run's first
operator. Of those modules the shallowest numbered one is chosen (a block: ``transformer.h.1``,
``layer2.0``), else the shallowest: a block path is what a reader of the model expects, and
every such module cuts at the same operator.

:func:`launch_dict` says which physical device runs which stage: torchrun numbers ranks
``0..S-1`` and rank ``r`` runs stage ``r``, so ``CUDA_VISIBLE_DEVICES`` lists the plan's
device of every stage in stage order (a topology-aware mapping, Parmesan's, survives the
launch). A device's CUDA index is its position among the cluster's accelerators (one host,
devices numbered as the cluster lists them).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from dnnpart.devices import Cluster
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
    """A module whose only call starts at operator ``i``: the shallowest numbered one (a
    block), else the shallowest (``None``: there is none).

    A ``SplitPoint.BEGINNING`` on a module called twice (torchvision's shared ``self.relu``)
    cuts before *each* call, so such a module is no split point; an enclosing module that
    starts at the same operator and is called once is.
    """
    parts = ir.ops[i].module_path.replace("/", ".").split(".") if ir.ops[i].module_path else []
    valid = [m for m in (".".join(parts[:d]) for d in range(1, len(parts) + 1))
             if _runs(ir, m) == [i]]
    blocks = [m for m in valid if m.rsplit(".", 1)[-1].isdigit()]
    return (blocks or valid)[0] if valid else None


def launch_dict(stages: Sequence[Mapping[str, Any]], cluster: Cluster, *,
                split_prefix: str = "") -> dict[str, Any]:
    """Which device runs which stage, and the ``CUDA_VISIBLE_DEVICES`` that realises it.

    Parameters
    ----------
    stages : per stage in pipeline order: ``device`` (index in ``cluster``) and optionally
        ``split_before`` (a module path of the planned model), ``first_operator``,
        ``n_operators``.
    cluster : the plan's cluster.
    split_prefix : the attribute the planned module paths lie under in the module run
        (``model`` for ``hf:`` models, whose paths are planned without their wrapper).

    Returns
    -------
    dict
        ``stages`` (rank, stage, device name and index, kind, CUDA index, split point),
        ``split_spec`` (module path -> ``"BEGINNING"``, for ``pipeline()``),
        ``cuda_visible_devices`` (``None`` when a stage runs on a CPU device) and
        ``nproc_per_node``.

    Examples
    --------
    >>> from dnnpart.devices import Cluster, Device
    >>> c = Cluster(devices=[Device(name=f"acc{i}", kind="accelerator") for i in range(4)])
    >>> out = launch_dict([{"device": 2}, {"device": 0, "split_before": "h.1"}], c)
    >>> out["cuda_visible_devices"], out["split_spec"], [s["device"] for s in out["stages"]]
    ('2,0', {'h.1': 'BEGINNING'}, ['acc2', 'acc0'])
    """
    accelerators = [i for i, d in enumerate(cluster.devices) if d.is_accelerator]
    rows = []
    for rank, s in enumerate(stages):
        dev = int(s["device"])
        device = cluster.devices[dev]
        split = s.get("split_before")
        rows.append({
            "rank": rank, "stage": rank, "device": device.name, "device_index": dev,
            "kind": device.kind,
            "cuda_index": accelerators.index(dev) if device.is_accelerator else None,
            "split_before": f"{split_prefix}.{split}" if split and split_prefix else split,
            "first_operator": s.get("first_operator"), "n_operators": s.get("n_operators"),
        })
    on_gpus = all(r["cuda_index"] is not None for r in rows)
    return {
        "stages": rows,
        "split_spec": {r["split_before"]: "BEGINNING" for r in rows if r["split_before"]},
        "cuda_visible_devices": ",".join(str(r["cuda_index"]) for r in rows) if on_gpus else None,
        "nproc_per_node": len(rows),
    }


def launch_command(launch: Mapping[str, Any], *, steps: int | None = None, check: bool = False) -> str:
    """The ``torchrun`` line of a launch (with ``CUDA_VISIBLE_DEVICES`` where every stage runs
    on an accelerator).

    Examples
    --------
    >>> launch_command({"nproc_per_node": 2, "cuda_visible_devices": "2,0"}, steps=1, check=True)
    'CUDA_VISIBLE_DEVICES=2,0 torchrun --nproc-per-node 2 run_pipeline.py --steps 1 --check'
    """
    env = f"CUDA_VISIBLE_DEVICES={launch['cuda_visible_devices']} " if launch.get(
        "cuda_visible_devices") else ""
    extra = (f" --steps {steps}" if steps is not None else "") + (" --check" if check else "")
    return f"{env}torchrun --nproc-per-node {launch['nproc_per_node']} run_pipeline.py{extra}"


def readme_text(launch: Mapping[str, Any]) -> str:
    """``README.md`` of a pipelining export: how to launch it and which device runs what."""
    rows = launch["stages"]
    s = len(rows)
    split = (
        "`torch.distributed.pipelining.pipeline()` with `SplitPoint.BEGINNING` at "
        + ", ".join(f"`{k}`" for k in launch["split_spec"])
        + "; where `pipeline()` cannot trace the model (or builds other stages) dnnpart's own "
        "stage modules run instead (`--split manual` forces them)"
        if launch["split_spec"] else
        f"dnnpart's own stage modules (no `pipeline()` split point: {launch.get('split_note', '')})"
    )
    gpus = launch.get("cuda_visible_devices")
    kind = "training" if launch["training"] else "inference (forward only)"
    lines = [
        f"# Pipelined run of `{launch.get('spec')}` (dnnpart export --format pipelining)",
        "",
        "Launch from this folder, one process per stage:",
        "",
        f"    {launch_command(launch)} [--steps N] [--check]",
        "",
        "On CPU (gloo) leave out `CUDA_VISIBLE_DEVICES`. `run_pipeline.py` imports dnnpart "
        "(installed, the version that exported it) to rebuild the model from `plan.json`'s model "
        "block -- the same spec, seeded weights and input shapes, as `dnnpart run` does "
        "(`dnnpart.workflow.loading.rebuild_model`); the plan file is read as JSON data only. "
        "`--check` compares every step's loss and parameter gradients (outputs, for inference) "
        "with the unpartitioned model and exits 1 on a mismatch.",
        "",
        f"* Model: `{launch.get('spec')}`, {kind}; "
        f"schedule {launch['schedule'] if launch['training'] else 'gpipe (forward only)'}, "
        f"{launch['microbatches']} micro-batches per step (the plan's).",
        f"* Split: {split}.",
        "* Ranks: torchrun's rank `r` runs stage `r`. "
        + (f"`CUDA_VISIBLE_DEVICES={gpus}` lists the plan's device of every stage in stage "
           "order, so rank `r`'s `cuda:LOCAL_RANK` is its planned device (one host; a device's "
           "CUDA index is its position among the cluster's accelerators)."
           if gpus else "a stage runs on a CPU device of the plan, so no `CUDA_VISIBLE_DEVICES` "
           "expresses the mapping; the ranks run on CPU (gloo)."),
        "",
        "| rank | stage | device | device index | CUDA index | starts at | operators |",
        "|---:|---:|---|---:|---:|---|---:|",
    ]
    for r in rows:
        cuda = "-" if r["cuda_index"] is None else str(r["cuda_index"])
        start = f"`{r['split_before']}`" if r.get("split_before") else (
            "(model inputs)" if r["stage"] == 0 else f"operator `{r.get('first_operator')}`")
        lines.append(f"| {r['rank']} | {r['stage']} | {r['device']} | {r['device_index']} | {cuda} | "
                     f"{start} | {r.get('n_operators') or '-'} |")
    lines += ["", f"Files: `plan.json` (the plan), `launch.json` (this table as data), "
              f"`run_pipeline.py` (the script; {s} processes)."]
    return "\n".join(lines) + "\n"
