"""Named phases of a long workflow call, for whoever shows progress.

Each workflow function that can run for a while (:func:`~dnnpart.workflow.plan_model`,
:func:`~dnnpart.workflow.import_model`, :func:`~dnnpart.workflow.run_plan`,
:func:`~dnnpart.workflow.write_report`, :func:`~dnnpart.workflow.export_plan`) takes
``progress``: a :data:`ProgressFactory`, called with the name of each phase as it starts
(``"importing hf:gpt2 (torch.export)"``, ``"solving with dpl"``, ``"running 2 stage
processes"``). It may return ``None`` -- a plain callback, ``progress=print`` -- or a context
manager entered for the phase's duration whose value (usually itself) is the phase's reporter:
an object with ``update(message, fraction=None)`` (the solvers'
:class:`~dnnpart.solvers.method.Progress`); a solving phase passes it to the method, which
reports its own news on it.

Phases are named where the work is, not inferred from elapsed time: the name is what runs
(a fallback method gets a phase of its own), and a reporter that shows elapsed time per phase
makes a silent phase visible without the workflow polling a clock.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from dnnpart.workflow.planned import PlannedModel

__all__ = ["ProgressFactory", "frontend_name", "loading_phase", "phase"]

#: Called with the name of each phase as it starts; returns ``None`` or a context manager,
#: entered for the phase, whose value is the phase's reporter (``update(message, fraction)``).
ProgressFactory = Callable[[str], Any]

#: How a frontend choice reads in a phase name.
_FRONTEND_NAMES = {"export": "torch.export", "fx": "torch.fx"}


@contextlib.contextmanager
def phase(progress: ProgressFactory | None, name: str | None) -> Iterator[Any]:
    """The phase ``name``: tells ``progress`` it starts and yields its reporter (or ``None``).

    ``name`` ``None``: no phase (the step has nothing to do this time); ``progress`` is not told.

    Examples
    --------
    >>> seen = []
    >>> with phase(seen.append, "pricing") as reporter:
    ...     reporter is None
    True
    >>> seen
    ['pricing']
    """
    scope = progress(name) if progress is not None and name is not None else None
    with scope if scope is not None else contextlib.nullcontext() as reporter:
        yield reporter


def frontend_name(spec: str, frontend: str) -> str:
    """What captures the model ``spec`` with ``frontend``, as a phase name says it.

    Examples
    --------
    >>> frontend_name("hf:gpt2", "export"), frontend_name("net.onnx", "export")
    ('torch.export', 'ONNX')
    """
    if spec.strip().lower().endswith(".onnx"):
        return "ONNX"
    return _FRONTEND_NAMES.get(frontend, frontend)


def loading_phase(plan: PlannedModel | str | Path, *, model: str | None = None,
                  runnable: bool = True) -> str | None:
    """The phase of getting ``plan`` ready, ``None`` when it is ready.

    A plan file is read and its model (or graph) loaded; with ``runnable`` (``run``,
    ``export``), which needs a model, the model is captured to run. A fresh plan is ready
    unless ``runnable`` asks for its model captured again (with weights).

    Examples
    --------
    >>> loading_phase("p.json"), loading_phase("p.json", runnable=False)
    ('loading p.json (capturing its model)', 'loading p.json')
    >>> loading_phase("p.json", model="hf:gpt2")
    'loading p.json (capturing hf:gpt2)'
    """
    if isinstance(plan, PlannedModel):
        if not runnable or plan.runnable is not None:
            return None
        return f"capturing {plan.spec or plan.problem.name}"
    return f"loading {plan}" + (f" (capturing {model or 'its model'})" if runnable else "")
