"""Argument groups shared by ``solve`` and ``plan`` (the objective, the method's options) and
the choices of ``--progress``.

One definition for both commands, so that ``plan`` (import + solve in one step) takes every
objective and flag ``solve`` takes (``--set``, ``--gap``, ``--backend``, ``--schedule``...).
Importing this module imports nothing heavy (the CLI's start-up time).
"""

from __future__ import annotations

import argparse
from typing import Any

OBJECTIVES = ("throughput", "latency", "makespan", "pipeline", "iteration")
#: ``--progress`` (see :mod:`dnnpart.cli.progress`, which renders them).
PROGRESS_CHOICES = ("auto", "bar", "lines", "none")
PROGRESS_HELP = ("progress on stderr: bar (a live line), lines (a line every few seconds, for logs), "
                 "auto (bar on a terminal, else lines; default), none")

#: The method ``plan`` runs when none is named, by objective: the exact or paper method of
#: each (throughput: the DP, falling back to DPL where the DP refuses the graph as too large).
DEFAULT_METHODS = {
    "throughput": "dp",
    "latency": "ip",
    "makespan": "pardnn",
    "pipeline": "parmesan",
    "iteration": "optcnn",
}


def add_objective_args(p: argparse.ArgumentParser, *, stored_in_plan: bool = False) -> None:
    """``--objective`` and what it depends on (``--schedule``, ``--microbatches``, ``--batch``...).

    ``stored_in_plan`` (``plan``): ``--schedule``/``--microbatches`` default to unset, so that
    a plan records only what was asked (``run`` then uses its own defaults).
    """
    p.add_argument("--objective", choices=OBJECTIVES, default="throughput",
                   help="makespan: op-level emulation (paper 2); pipeline: simulated time per "
                        "sample of a synchronous pipeline (paper 4); iteration: time of one "
                        "training iteration of a layer-wise parallel strategy (paper 3, Eq. 1)")
    p.add_argument("--batch", type=int, default=32, metavar="N",
                   help="samples per device (iteration objective; default 32, paper 3)")
    stored = " (stored in the plan for `run`)" if stored_in_plan else ""
    p.add_argument("--schedule", choices=("gpipe", "1f1b"), default=None if stored_in_plan else "gpipe",
                   help="pipeline schedule (pipeline objective, simulate, report; default gpipe)" + stored)
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
    from dnnpart.errors import FormatError
    from dnnpart.problem import Objective

    batch = getattr(args, "batch", 32)
    if isinstance(batch, int) and batch < 1:
        raise FormatError(f"--batch {batch}: expected an integer >= 1")
    micro = getattr(args, "microbatches", None)
    if micro is not None and micro < 1:
        raise FormatError(f"--microbatches {micro}: expected an integer >= 1")
    return Objective(kind=args.objective, training=args.training_form, overlap=args.overlap,
                     schedule=getattr(args, "schedule", None) or "gpipe",
                     microbatches=micro if micro is not None else 4,
                     recompute=getattr(args, "recompute", False), batch=batch)
