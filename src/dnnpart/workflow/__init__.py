"""The library's verbs for a model: what the CLI and the reproductions call.

For a model (``builtin:``, ``hf:``, ``torchvision:``, ``module:``, ``.onnx``):

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

from dnnpart.workflow.applying import pipeline_schedule, pipeline_stage
from dnnpart.workflow.calibrating import Calibration, calibrate, write_machine_file
from dnnpart.workflow.exporting import EXPORT_FORMATS, ExportResult, export_plan
from dnnpart.workflow.importing import DEFAULT_CLUSTER, ModelImport, import_model
from dnnpart.workflow.inputs import load_problem
from dnnpart.workflow.loading import load_plan, load_planned_model
from dnnpart.workflow.methods import DEFAULT_METHODS
from dnnpart.workflow.planned import PlannedModel, RunnableModel
from dnnpart.workflow.planning import compare_methods, plan_model
from dnnpart.workflow.reporting import ReportResult, write_report
from dnnpart.workflow.running import RunResult, TrainingRunResult, run_plan
from dnnpart.workflow.simulating import Simulation, simulate_plan
from dnnpart.workflow.solved import write_solved_plan

__all__ = [
    "DEFAULT_CLUSTER",
    "DEFAULT_METHODS",
    "EXPORT_FORMATS",
    "Calibration",
    "ExportResult",
    "ModelImport",
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
    "run_plan",
    "simulate_plan",
    "write_machine_file",
    "write_report",
    "write_solved_plan",
]
