"""Argument groups shared by commands, and what parsed arguments mean to the library.

One definition per group: ``solve`` and ``plan`` (import + solve in one step) take the same
objective and method flags (``--set``, ``--gap``, ``--backend``, ``--schedule``...); every
command that takes a graph takes the model-spec flags; ``export``, ``run`` and ``report`` the
same trust flags. Importing this module imports nothing heavy (the CLI's start-up time).
"""

from __future__ import annotations

import argparse
from typing import Any

from dnnpart.workflow.importing import DEFAULT_CLUSTER
from dnnpart.workflow.methods import DEFAULT_METHODS

__all__ = [
    "DEFAULT_CLUSTER",
    "DEFAULT_METHODS",
    "MODEL_HELP",
    "OBJECTIVES",
    "PROGRESS_CHOICES",
    "PROGRESS_HELP",
    "add_method_args",
    "add_model_args",
    "add_model_spec_args",
    "add_objective_args",
    "add_problem_args",
    "add_trust_args",
    "check_non_empty",
    "input_shapes",
    "model_inputs",
    "model_options",
    "objective_from_args",
    "parse_options",
    "parse_typed",
    "solve_options",
    "split_pairs",
]

OBJECTIVES = ("throughput", "latency", "makespan", "pipeline", "iteration", "stages")
#: ``--progress`` (see :mod:`dnnpart.cli.progress`, which renders them).
PROGRESS_CHOICES = ("auto", "bar", "lines", "none")
PROGRESS_HELP = ("progress on stderr: bar (a live line), lines (a line every few seconds, for logs), "
                 "auto (bar on a terminal, else lines; default), none")

MODEL_HELP = (
    "FILE.onnx, builtin:NAME (resnet50, inception_v3, bert), torchvision:NAME, "
    "hf:ARCH[:KEY=VALUE,...] (transformers config, e.g. hf:gpt2:n_layer=2) or module:PKG.MOD:CALLABLE"
)


def add_problem_args(p: argparse.ArgumentParser) -> None:
    """The graph, its cluster, objective and model options (``info``, ``evaluate``, ``solve``,
    ``simulate``) and ``--json``."""
    p.add_argument(
        "graph",
        help="graph file (dnn-partitioning .json, native .npz), zoo:NAME, or a model spec "
        "(hf:ARCH[:K=V,...], builtin:NAME, module:PKG.MOD:CALLABLE, torchvision:NAME, FILE.onnx); "
        "with --objective iteration builtin:NAME is one of paper 3's layer graphs (lenet5, alexnet, "
        "vgg16, inception_v3, resnet50, resnet152)",
    )
    p.add_argument("--cluster", metavar="SPEC",
                   help="cluster file (JSON/YAML), NxPRESET[+Mcpu] (4xA100, 4xA100+1cpu) or "
                        "GENERATOR:key=value,... (see `dnnpart cluster show`); default: the graph file's")
    add_objective_args(p)
    p.add_argument("--json", action="store_true", help="print one JSON object instead of tables")
    add_model_spec_args(p)


#: Options naming an input (a spec or a file), by dest: given empty, they are refused rather
#: than read as "not given" (``--cluster ''`` used to fall back to the graph file's cluster).
NON_EMPTY = {"cluster": "--cluster", "model": "MODEL/--model", "config": "--config", "specs": "--specs",
             "run": "--run", "stages": "STAGES", "graph": "GRAPH", "plan": "PLAN"}


def check_non_empty(args: argparse.Namespace) -> None:
    """Refuse an input option or argument given as empty text (see :data:`NON_EMPTY`).

    Examples
    --------
    >>> check_non_empty(argparse.Namespace(cluster=""))
    Traceback (most recent call last):
    ...
    dnnpart.errors.UsageError: --cluster '': empty; expected a cluster file, a spec or a name
    >>> check_non_empty(argparse.Namespace(cluster=None, graph="zoo:bert-3"))
    """
    from dnnpart.errors import UsageError

    for dest, flag in NON_EMPTY.items():
        value = getattr(args, dest, None)
        if isinstance(value, str) and not value.strip():
            raise UsageError(f"{flag} {value!r}: empty; expected a cluster file, a spec or a name"
                             if dest == "cluster" else f"{flag} {value!r}: empty; expected a path or a spec")


def add_model_args(p: argparse.ArgumentParser) -> None:
    """The model and how it is imported and priced (``import``, ``plan``)."""
    p.add_argument("model", help=MODEL_HELP)
    add_model_spec_args(p)
    p.add_argument(
        "--cluster",
        default=DEFAULT_CLUSTER,
        metavar="SPEC",
        help=f"NxPRESET (e.g. 4xA100, 2xV100, 8xH100) or a cluster file (default {DEFAULT_CLUSTER})",
    )
    p.add_argument(
        "--specs", metavar="FILE", help="your own device/link presets (YAML/JSON), merged over ours"
    )
    p.add_argument(
        "--profile",
        action="store_true",
        help="measure operator times on this machine's CPU (medians) instead of estimating them",
    )
    p.add_argument("--repeats", type=int, default=10, help="timed runs when profiling (default 10)")
    p.add_argument("--json", action="store_true", help="print one JSON object instead of tables")


def add_model_spec_args(p: argparse.ArgumentParser) -> None:
    """Options of every command that accepts a model spec (``hf:``, ``builtin:``, ``.onnx``...)."""
    p.add_argument(
        "--input-shape",
        action="append",
        default=[],
        metavar="D0,D1,...",
        help="model specs: shape of a model input (repeat once per input; default: the model's own)",
    )
    p.add_argument(
        "--input-dtype",
        choices=("float32", "float64", "int64", "int32"),
        help="model specs: dtype of the example inputs (default float32; int64 for text models)",
    )
    p.add_argument(
        "--input",
        action="append",
        default=[],
        dest="inputs",
        metavar="NAME=SHAPE[:DTYPE]",
        help="model specs: one input by name with its shape and dtype, e.g. --input input_ids=1x16:int64 "
        "--input decoder_input_ids=1x8:int64 (repeatable; hf: models: keyword arguments of the "
        "model, replacing its default input of that name; dtype default: int64 for *_ids and masks, "
        "else float32); not with --input-shape/--input-dtype",
    )
    p.add_argument(
        "--training",
        action="store_true",
        help="model specs: the training graph (torch: real autograd forward+backward; ONNX: "
        "a synthesised backward, 2x forward time, colocated with its forward operator)",
    )
    p.add_argument(
        "--optimizer",
        choices=("sgd", "adam"),
        help="with --training: add one update op per parameter (adam: 3x residual bytes)",
    )
    p.add_argument(
        "--precision",
        choices=("fp32", "tf32", "bf16", "fp16"),
        default="fp32",
        help="compute precision of the cost model: tensor-core peaks of the device presets, "
        "and 2-byte tensors for bf16/fp16 (default fp32)",
    )
    p.add_argument(
        "--frontend",
        choices=("export", "fx"),
        default="export",
        help="torch capture: export (torch.export, one node per aten op; default) or fx (symbolic "
        "tracing, one node per module call)",
    )
    p.add_argument(
        "--config", metavar="FILE", help="hf: models: JSON object of config overrides (like KEY=VALUE)"
    )
    p.add_argument(
        "--granularity",
        choices=("op", "module", "block"),
        default=None,
        help="one node per operator, per run of operators called from one module, or (plan) "
             "cuts only between whole blocks; plan's default: block for the throughput, "
             "pipeline and stages objectives when no --method is given, else op",
    )


def add_trust_args(p: argparse.ArgumentParser) -> None:
    """``--model`` and ``--trust-plan``: which model a plan file's spec may lead to."""
    p.add_argument("--model", metavar="SPEC",
                   help="the model the plan was made for (default: the plan's own if it is "
                        "builtin:, torchvision:, hf: or an .onnx file; module: specs import code)")
    p.add_argument("--trust-plan", action="store_true",
                   help="follow the plan's model spec even if it imports code (module:...)")


def add_objective_args(p: argparse.ArgumentParser, *, stored_in_plan: bool = False) -> None:
    """``--objective`` and what it depends on (``--schedule``, ``--microbatches``, ``--batch``...).

    ``stored_in_plan`` (``plan``): ``--schedule``/``--microbatches`` default to unset, so that
    a plan records only what was asked (``run`` then uses its own defaults).
    """
    p.add_argument("--objective", choices=OBJECTIVES, default=None if stored_in_plan else "throughput",
                   help="throughput: max device load (paper 1); makespan: op-level emulation "
                        "(paper 2); pipeline: simulated time per sample of a synchronous pipeline "
                        "(paper 4); iteration: time of one training iteration of a layer-wise "
                        "parallel strategy (paper 3, Eq. 1); stages: max stage time of a "
                        "trainer's pipeline of whole blocks, memory with activations in flight"
                        + (" (default: stages with --schedule, else throughput)" if stored_in_plan
                           else " (default throughput)"))
    p.add_argument("--batch", type=int, default=32, metavar="N",
                   help="samples per device (iteration objective; default 32, paper 3)")
    stored = " (stored in the plan for `run`)" if stored_in_plan else ""
    p.add_argument("--schedule", choices=("gpipe", "1f1b"), default=None,
                   help="pipeline schedule (pipeline and stages objectives, simulate, report; "
                        "default 1f1b for stages, else gpipe)" + stored)
    p.add_argument("--microbatches", type=int, default=None if stored_in_plan else 4, metavar="M",
                   help="micro-batches per step (pipeline objective, simulate, report; default 4)" + stored)
    p.add_argument("--recompute", action="store_true",
                   help="recompute activations in the backward pass (pipeline)")
    p.add_argument("--training-form", choices=("pipedream", "gpipe"), default="pipedream",
                   help="training objective: max(FW+BW) per device (pipedream) or max FW + max BW (gpipe)")
    p.add_argument("--overlap", choices=("none", "compute-comm", "full-duplex"), default="none",
                   help="how transfers overlap compute (paper 1, appendix C.1)")


def add_method_args(p: argparse.ArgumentParser, *, default: str | None, method_help: str) -> None:
    """``--method``, ``--time-limit``, ``--deterministic``, ``--set`` and the IP flags."""
    p.add_argument("--method", "-m", default=default, help=method_help)
    p.add_argument("--time-limit", type=float, metavar="S",
                   help="stop after S seconds with the best plan so far (anytime methods have a "
                        "default: see `dnnpart methods`; 'inf' for none)")
    p.add_argument("--deterministic", action="store_true",
                   help="the same plan run to run (one search order, deterministic time, fixed seeds)")
    p.add_argument("--set", dest="options", action="append", default=[], metavar="KEY=VALUE",
                   help="method option, e.g. --set max_ideals=5e6 (repeatable)")
    ip = p.add_argument_group("integer programs (--method ip | ip-noncontig)")
    # the choices of dnnpart.solvers.ip.backend.BACKEND_CHOICES, written out so that the CLI
    # starts without importing the solvers (tests/cli checks that the two agree)
    ip.add_argument("--backend", choices=("cpsat", "highs", "portfolio"),
                    help="MIP backend (default cpsat); portfolio: CP-SAT for part of --time-limit, "
                         "then HiGHS from its best plan")
    ip.add_argument("--gap", type=float, metavar="G", help="relative gap to stop at (default 0.01)")
    ip.add_argument("--threads", type=int, metavar="N", help="solver threads")
    ip.add_argument("--seed", type=int, metavar="N", help="solver random seed")
    ip.add_argument("--subgraphs-per-device", type=int, metavar="Q",
                    help="latency: up to Q contiguous subgraphs per accelerator")
    ip.add_argument("--descent", action="store_true", default=None,
                    help="throughput, cpsat: keep half of --time-limit for threshold descent "
                         "(better plans on large graphs; the bound comes from the first half)")


def objective_from_args(args: argparse.Namespace) -> Any:
    """The :class:`~dnnpart.problem.Objective` of parsed arguments.

    Examples
    --------
    >>> p = argparse.ArgumentParser()
    >>> add_objective_args(p, stored_in_plan=True)
    >>> o = objective_from_args(p.parse_args(["--objective", "pipeline"]))
    >>> o.kind, o.schedule, o.microbatches
    ('pipeline', 'gpipe', 4)
    """
    from dnnpart.limits import check_batch, check_microbatches
    from dnnpart.problem import Objective

    given = getattr(args, "batch", None)
    batch = check_batch(32 if given is None else given)
    micro = getattr(args, "microbatches", None)
    if micro is not None:
        micro = check_microbatches(micro)
    schedule = getattr(args, "schedule", None)
    blocks = getattr(args, "granularity", None) == "block"
    kind = args.objective or ("stages" if schedule or blocks else "throughput")
    return Objective(kind=kind, training=args.training_form, overlap=args.overlap,
                     schedule=schedule or default_schedule(kind),
                     microbatches=micro if micro is not None else 4,
                     recompute=getattr(args, "recompute", False), batch=batch)


def default_schedule(kind: str) -> str:
    """The schedule an objective gets when none is given: 1F1B for a trainer's pipeline
    (``stages``: what runtimes default to), GPipe for paper 4's ``pipeline``.

    Examples
    --------
    >>> default_schedule("stages"), default_schedule("pipeline")
    ('1f1b', 'gpipe')
    """
    return "1f1b" if kind == "stages" else "gpipe"


def model_options(args: argparse.Namespace) -> Any:
    """The :class:`~dnnpart.frontends.sources.ModelOptions` of parsed arguments."""
    from dnnpart.frontends.sources import ModelOptions

    return ModelOptions(
        input_shapes=input_shapes(args),
        input_dtype=getattr(args, "input_dtype", None),
        inputs=model_inputs(args),
        training=bool(getattr(args, "training", False)),
        optimizer=getattr(args, "optimizer", None),
        precision=getattr(args, "precision", "fp32"),
        frontend=getattr(args, "frontend", "export"),
        config_file=getattr(args, "config", None),
        granularity=getattr(args, "granularity", None) or "op",
    )


def input_shapes(args: argparse.Namespace) -> tuple[tuple[int, ...], ...]:
    """The shapes of ``--input-shape D0,D1,...`` (repeated once per input)."""
    from dnnpart.frontends.sources import parse_shape

    return tuple(parse_shape(s) for s in getattr(args, "input_shape", []) or [])


def model_inputs(args: argparse.Namespace) -> tuple[Any, ...]:
    """The :class:`~dnnpart.frontends.sources.ModelInput` of each ``--input NAME=SHAPE[:DTYPE]``.

    Examples
    --------
    >>> model_inputs(argparse.Namespace(inputs=["input_ids=1x16:int64"]))[0].shape
    (1, 16)
    """
    from dnnpart.errors import UsageError
    from dnnpart.frontends.sources import parse_input

    given = tuple(parse_input(s) for s in getattr(args, "inputs", []) or [])
    if given and (getattr(args, "input_shape", None) or getattr(args, "input_dtype", None)):
        raise UsageError("--input: give the inputs either by name (--input NAME=SHAPE[:DTYPE]) or "
                         "with --input-shape/--input-dtype, not both")
    return given


def parse_options(pairs: list[str], method: str | None = None) -> dict[str, Any]:
    """``KEY=VALUE`` strings to keyword arguments, typed by ``method``'s option schema.

    Without a method (or for keys the schema lacks, which :func:`~dnnpart.solvers.solve` then
    refuses) the text is kept as given.

    Examples
    --------
    >>> parse_options(["max_ideals=5e6"], "dp")
    {'max_ideals': 5000000}
    >>> parse_options(["mapping=cs"])
    {'mapping': 'cs'}
    """
    from dnnpart.solvers import get_method

    if method is None:
        return {key.replace("-", "_"): raw for key, raw in split_pairs(pairs)}
    info = get_method(method)
    return parse_typed(pairs, info.options, info.name, name_set=False)


def split_pairs(pairs: list[str]) -> list[tuple[str, str]]:
    """``["K=V", ...]`` to ``[("K", "V"), ...]``; anything else is refused naming ``--set``.

    Examples
    --------
    >>> split_pairs(["eps=0.01", "mapping=cs"])
    [('eps', '0.01'), ('mapping', 'cs')]
    """
    from dnnpart.errors import FormatError

    out = []
    for pair in pairs:
        key, sep, raw = pair.partition("=")
        if not sep or not key:
            raise FormatError(f"--set {pair[:60]!r}: expected KEY=VALUE")
        out.append((key, raw))
    return out


def parse_typed(pairs: list[str], schema: Any, owner: str, *, name_set: bool = True) -> dict[str, Any]:
    """``--set KEY=VALUE`` pairs typed by an option schema (a sequence of
    :class:`~dnnpart.solvers.method.Option`): the one parser of ``solve --set`` and
    ``map --set``. Unknown keys are refused with the valid ones. Messages name
    ``OWNER --set KEY`` (``name_set``) or, as ``solve`` words them, ``OWNER: option KEY``.

    Examples
    --------
    >>> from dnnpart.solvers.method import Option
    >>> parse_typed(["eps=0.01"], [Option("eps", float, None, "", minimum=0.0)], "map")
    {'eps': 0.01}
    """
    from dnnpart.errors import UsageError

    by_name = {opt.name: opt for opt in schema}
    options: dict[str, Any] = {}
    for key, raw in split_pairs(pairs):
        opt = by_name.get(key.replace("-", "_"))
        if opt is None:
            valid = ", ".join(by_name) or "none"
            raise UsageError(f"{owner}: unknown option {key[:60]!r}; valid options: {valid}")
        options[opt.name] = opt.parse(raw, owner, where=f"{owner} --set {opt.name}" if name_set else None)
    return options


def solve_options(args: argparse.Namespace, method: str) -> tuple[dict[str, Any], bool]:
    """The options of ``method`` (``--set`` pairs plus the dedicated flags: ``--gap``...) and
    whether to solve deterministically (``--deterministic``, or ``--set deterministic=true``,
    which :func:`~dnnpart.solvers.solve` takes as its own argument, not as an option)."""
    options = parse_options(args.options, method)
    for flag in ("backend", "gap", "threads", "seed", "subgraphs_per_device", "descent"):
        value = getattr(args, flag, None)
        if value is not None:  # dedicated flags are method options like --set KEY=VALUE
            options[flag] = value
    deterministic = bool(options.pop("deterministic", False)) or bool(args.deterministic)
    return options, deterministic
