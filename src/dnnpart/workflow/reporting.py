"""One self-contained HTML page about a plan (``dnnpart report``, ``dnnpart plan --report``).

The page and its choices: :mod:`dnnpart.viz.report`. Its pipeline figures use the schedule and
micro-batches asked for here, else the plan's (what ``plan`` stored), else 1F1B and 4.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from dnnpart.errors import FormatError, UsageError
from dnnpart.workflow.loading import load_plan
from dnnpart.workflow.phases import ProgressFactory, loading_phase, phase
from dnnpart.workflow.planned import PlannedModel


@dataclass(frozen=True, slots=True, kw_only=True)
class ReportResult:
    """The page written: its path (as given) and size in characters."""

    path: str | Path
    chars: int

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready (``dnnpart report --json``)."""
        return {"report": str(self.path), "bytes": self.chars}


def write_report(
    plan: PlannedModel | str | Path,
    out: str | Path = "report.html",
    *,
    schedule: str | None = None,
    microbatches: int | None = None,
    model: str | None = None,
    trust: bool = False,
    run: str | Path | None = None,
    progress: ProgressFactory | None = None,
) -> ReportResult:
    """Write the HTML report of ``plan`` to ``out``.

    Parameters
    ----------
    plan : a :class:`PlannedModel` or a plan file (``dnnpart plan -o`` or ``dnnpart solve -o``);
        a hybrid plan file (``plan --parallel -o``) gets its own page
        (:func:`write_parallel_report`; the options below do not apply to it).
    out : the HTML file.
    schedule, microbatches : of the pipeline figures (default: the plan's, else ``1f1b``, 4).
    model, trust : for a plan file, as for :func:`~dnnpart.workflow.load_planned_model`.
    run : a ``dnnpart run PLAN --json`` output: its measurements are shown beside their
        prediction (:mod:`dnnpart.workflow.measured`).
    progress : told each phase as it starts (``"loading PLAN"``, ``"writing report"``; see
        :mod:`dnnpart.workflow.phases`).

    Examples
    --------
    >>> import os, tempfile
    >>> from dnnpart.solvers import solve
    >>> from dnnpart.workflow import load_problem, write_solved_plan
    >>> problem = load_problem("zoo:bert-3")
    >>> folder = tempfile.mkdtemp()
    >>> write_solved_plan(problem, solve(problem, "dp"), os.path.join(folder, "p.json"), "zoo:bert-3")
    >>> written = write_report(os.path.join(folder, "p.json"), os.path.join(folder, "r.html"))
    >>> written.chars > 1000
    True
    """
    from dnnpart.viz.report import ReportInput, build_report

    if isinstance(plan, PlannedModel):
        planned = plan
        stored: Any = {"schedule": plan.schedule, "microbatches": plan.microbatches}
    else:
        from dnnpart.io import fields as f
        from dnnpart.viz.parallel_report import FORMAT as PARALLEL_FORMAT

        data = f.require_mapping(f.read_json(plan), str(plan))
        if data.get("format") == PARALLEL_FORMAT:  # a hybrid plan: its own page
            for name, value in (("--schedule", schedule), ("--microbatches", microbatches),
                                ("--model", model), ("--trust-plan", trust or None), ("--run", run)):
                if value is not None:
                    raise UsageError(f"{name} does not apply to a hybrid plan file ({plan}): it "
                                     "names its schedule and runs no model")
            with phase(progress, "writing report"):
                return write_parallel_report(data, out, where=str(plan))
        raw = data.get("model")
        stored = raw if isinstance(raw, dict) else {}
        from dnnpart.workflow.loading import check_model_fields

        check_model_fields(stored, plan)  # read below before load_plan checks it
    from dnnpart.limits import check_microbatches

    if microbatches is not None:
        micro = check_microbatches(microbatches)
    elif stored.get("microbatches") is not None:
        micro = check_microbatches(stored["microbatches"], "the plan's model.microbatches")
    else:
        micro = 4
    measured = _run_measurement(run) if run is not None else None
    if not isinstance(plan, PlannedModel):
        with phase(progress, loading_phase(plan, runnable=False)):
            planned = load_plan(plan, model=model, trust=trust)
    meta = {**planned.record, "model": planned.spec, **_batch_size(planned.model_block or {})}
    with phase(progress, "writing report"):
        text = build_report(ReportInput(
            problem=planned.problem, plan=planned.require_plan(), imported=planned.imported,
            meta=meta, schedule=schedule or str(stored.get("schedule") or "1f1b"),
            microbatches=micro, comparison=list(planned.comparison), measured=measured))
        from dnnpart.io.output_files import write_output

        write_output(text, out)
    return ReportResult(path=out, chars=len(text))


def write_parallel_report(data: Any, out: str | Path, *, where: str = "the plan") -> ReportResult:
    """Write the HTML page of a hybrid plan (:mod:`dnnpart.viz.parallel_report`): ``data`` is
    a hybrid plan file's content (:meth:`~dnnpart.workflow.ParallelPlan.to_dict`), checked
    field by field; ``where`` names it in messages.

    Examples
    --------
    >>> import os, tempfile
    >>> from dnnpart.workflow import plan_parallel
    >>> r = plan_parallel("hf:gpt2:n_layer=4,n_embd=64,n_head=4", cluster="4xA100",
    ...                   input_shapes=[(1, 32)], global_batch=8)
    >>> written = write_parallel_report(r.to_dict(), os.path.join(tempfile.mkdtemp(), "r.html"))
    >>> written.chars > 1000
    True
    """
    from dnnpart.io.output_files import write_output
    from dnnpart.viz.parallel_report import build_parallel_report, read_parallel_plan

    text = build_parallel_report(read_parallel_plan(data, where))
    write_output(text, out)
    return ReportResult(path=out, chars=len(text))


def _run_measurement(path: str | Path) -> dict[str, Any]:
    """The predicted-against-measured rows and notes of a ``run --json`` file.

    Raises
    ------
    FormatError
        The file is not JSON, or has no measurement (one line naming the file).
    """
    from dnnpart.io import fields as f
    from dnnpart.workflow.measured import comparison_rows

    data = f.require_mapping(f.read_json(path), str(path))
    m = data.get("measurement")
    if not isinstance(m, dict):
        raise FormatError(f"{path}: no \"measurement\": not the output of `dnnpart run PLAN --json`")
    notes = [str(m.get(k, "")) for k in ("note", "memory_measured", "memory_predicted")]
    return {"rows": comparison_rows(m, str(path)), "steps": m.get("steps"),
            "notes": [n for n in notes if n]}


def _batch_size(block: Any) -> dict[str, int]:
    """Samples (and tokens, for integer ``(batch, sequence)`` inputs) per micro-batch, from a
    plan's model block: the first input's leading dimension (and its product with the second)."""
    shapes = block.get("input_shapes") or []
    if not shapes or not shapes[0]:
        return {}
    first = [int(d) for d in shapes[0]]
    out = {"samples_per_microbatch": first[0]}
    if len(first) == 2 and str(block.get("input_dtype") or "").startswith(("int", "long")):
        out["tokens_per_microbatch"] = first[0] * first[1]
    return out
