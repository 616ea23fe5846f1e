"""``dnnpart export --format torch``: one saved module per stage and a manifest.

The folder holds ``stage{i}_{device}.pt`` (the stage's ``torch.fx`` module, ``torch.save``),
``stage{i}_{device}.py`` (its generated code, to read) and ``stages.json``::

    {"format": "dnnpart.stages", "version": 1, "model": SPEC, "inputs": [...], "outputs": [...],
     "stages": [{"index": 0, "device": "acc0", "level": 0, "inputs": [...], "outputs": [...],
                 "module": "stage0_acc0.pt", "code": "stage0_acc0.py", "n_operators": 12}, ...]}

Values are named as in :class:`~dnnpart.export.stages.StagedProgram`: a stage's inputs are
model inputs or earlier stages' outputs.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from dnnpart.export.stages import StagedProgram

STAGES_FORMAT = "dnnpart.stages"


def write_stage_files(program: StagedProgram, device_names: Sequence[str], folder: str | Path,
                      *, model: str) -> list[dict[str, Any]]:
    """Write every stage of ``program`` and ``stages.json`` into ``folder`` (created if
    missing); returns the manifest's stage entries. ``model``: the spec named in the manifest.
    """
    from dnnpart._optional import require
    from dnnpart.io.dnn_partitioning import write_json_atomic
    from dnnpart.io.output_files import open_output, write_output

    torch = require("torch", extra="torch", caller="dnnpart export --format torch")
    target = Path(folder)
    target.mkdir(parents=True, exist_ok=True)
    manifest = []
    for stage in program.stages:
        stem = f"stage{stage.index}_{device_names[stage.device]}"
        write_output(stage.module.code, target / f"{stem}.py")
        with open_output(target / f"{stem}.pt", binary=True) as fh:
            torch.save(stage.module, fh)
        manifest.append(
            {
                "index": stage.index,
                "device": device_names[stage.device],
                "level": stage.level,
                "inputs": list(stage.inputs),
                "outputs": list(stage.outputs),
                "module": f"{stem}.pt",
                "code": f"{stem}.py",
                "n_operators": len(stage.nodes),
            }
        )
    write_json_atomic(
        {
            "format": STAGES_FORMAT,
            "version": 1,
            "model": model,
            "inputs": list(program.input_names),
            "outputs": list(program.output_values),
            "stages": manifest,
        },
        target / "stages.json",
    )
    return manifest
