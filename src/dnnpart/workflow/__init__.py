"""The library's verbs for a model: what the CLI and the reproductions call.

For a model (``builtin:``, ``hf:``, ``torchvision:``, ``module:``, ``.onnx``):

* :func:`plan_parallel` (transformers): the best hybrid data x tensor x pipeline plan, the best
  one runtimes launch, a bound and their launch settings (:class:`ParallelPlan`);
* :func:`plan_model` imports it, plans it on a cluster for an objective and scores the plan:
  a :class:`PlannedModel` (problem, result, evaluation, stages, the plan file via
  ``to_dict``/``write``); :func:`load_planned_model` reads such a plan file back;
* :func:`run_plan` runs a plan in local gloo processes and checks it against the model;
* :func:`export_plan` writes it for other tools (placement, torch stages,
  ``torch.distributed.pipelining``, DeepSpeed, Megatron);
* :func:`write_report` writes one HTML page about it; :func:`simulate_plan` simulates it;
* :func:`import_model` captures and prices a model without planning it.

For this machine: :func:`calibrate` measures its operator classes and process link, and
:func:`write_machine_file` writes them as a machine file ``--cluster`` and ``--specs`` take.

For a graph (a graph file, ``zoo:NAME``, any of the above): :func:`load_problem` gives a
:class:`~dnnpart.problem.Problem` for :func:`dnnpart.solvers.solve` and
:func:`dnnpart.evaluate`; :func:`write_solved_plan` and :func:`load_plan` keep such plans in
files that name their graph. Nothing here prints: messages come back as data (``notes``) or
through a ``notify`` callback.
"""

from types import ModuleType
from typing import TYPE_CHECKING, Any

# The verbs load their modules on first use, so that a light importer of one module of
# this package (the CLI's text helpers, dnnpart.workflow.text) does not pay for capture,
# calibration and the runtimes (~90 ms of a small solve's start-up).
if TYPE_CHECKING:
    from dnnpart.workflow.applying import pipeline_schedule, pipeline_stage
    from dnnpart.workflow.calibrating import Calibration, calibrate, write_machine_file
    from dnnpart.workflow.exporting import EXPORT_FORMATS, ExportResult, export_plan
    from dnnpart.workflow.importing import DEFAULT_CLUSTER, ModelImport, import_model
    from dnnpart.workflow.inputs import load_problem
    from dnnpart.workflow.loading import load_plan, load_planned_model
    from dnnpart.workflow.methods import DEFAULT_METHODS
    from dnnpart.workflow.parallel_planning import ParallelPlan, plan_parallel
    from dnnpart.workflow.planned import PlannedModel, RunnableModel
    from dnnpart.workflow.planning import compare_methods, plan_model
    from dnnpart.workflow.reporting import ReportResult, write_parallel_report, write_report
    from dnnpart.workflow.running import RunResult, TrainingRunResult, run_plan
    from dnnpart.workflow.simulating import Simulation, simulate_plan
    from dnnpart.workflow.solved import write_solved_plan

_MODULE_OF = {
    "pipeline_schedule": "applying",
    "pipeline_stage": "applying",
    "Calibration": "calibrating",
    "calibrate": "calibrating",
    "write_machine_file": "calibrating",
    "EXPORT_FORMATS": "exporting",
    "ExportResult": "exporting",
    "export_plan": "exporting",
    "DEFAULT_CLUSTER": "importing",
    "ModelImport": "importing",
    "import_model": "importing",
    "load_problem": "inputs",
    "load_plan": "loading",
    "load_planned_model": "loading",
    "DEFAULT_METHODS": "methods",
    "ParallelPlan": "parallel_planning",
    "plan_parallel": "parallel_planning",
    "PlannedModel": "planned",
    "RunnableModel": "planned",
    "compare_methods": "planning",
    "plan_model": "planning",
    "ReportResult": "reporting",
    "write_parallel_report": "reporting",
    "write_report": "reporting",
    "RunResult": "running",
    "TrainingRunResult": "running",
    "run_plan": "running",
    "Simulation": "simulating",
    "simulate_plan": "simulating",
    "write_solved_plan": "solved",
}


def _keep(name: str, module: ModuleType) -> Any:
    value = getattr(module, name)
    globals()[name] = value  # the next access does not come back here
    return value


def __getattr__(name: str) -> Any:
    """A verb of :data:`__all__`, imported from its module on first use."""
    module = _MODULE_OF.get(name)
    if module == "applying":
        from dnnpart.workflow import applying

        return _keep(name, applying)
    if module == "calibrating":
        from dnnpart.workflow import calibrating

        return _keep(name, calibrating)
    if module == "exporting":
        from dnnpart.workflow import exporting

        return _keep(name, exporting)
    if module == "importing":
        from dnnpart.workflow import importing

        return _keep(name, importing)
    if module == "inputs":
        from dnnpart.workflow import inputs

        return _keep(name, inputs)
    if module == "loading":
        from dnnpart.workflow import loading

        return _keep(name, loading)
    if module == "methods":
        from dnnpart.workflow import methods

        return _keep(name, methods)
    if module == "parallel_planning":
        from dnnpart.workflow import parallel_planning

        return _keep(name, parallel_planning)
    if module == "planned":
        from dnnpart.workflow import planned

        return _keep(name, planned)
    if module == "planning":
        from dnnpart.workflow import planning

        return _keep(name, planning)
    if module == "reporting":
        from dnnpart.workflow import reporting

        return _keep(name, reporting)
    if module == "running":
        from dnnpart.workflow import running

        return _keep(name, running)
    if module == "simulating":
        from dnnpart.workflow import simulating

        return _keep(name, simulating)
    if module == "solved":
        from dnnpart.workflow import solved

        return _keep(name, solved)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")

__all__ = [
    "DEFAULT_CLUSTER",
    "DEFAULT_METHODS",
    "EXPORT_FORMATS",
    "Calibration",
    "ExportResult",
    "ModelImport",
    "ParallelPlan",
    "PlannedModel",
    "ReportResult",
    "RunResult",
    "RunnableModel",
    "Simulation",
    "TrainingRunResult",
    "calibrate",
    "compare_methods",
    "export_plan",
    "import_model",
    "load_plan",
    "load_planned_model",
    "load_problem",
    "pipeline_schedule",
    "pipeline_stage",
    "plan_model",
    "plan_parallel",
    "run_plan",
    "simulate_plan",
    "write_machine_file",
    "write_parallel_report",
    "write_report",
    "write_solved_plan",
]
