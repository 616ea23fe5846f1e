"""A given split, scored: paper 1's human-expert baseline (section 6, "Baselines").

The split is a plan file (:func:`~dnnpart.io.read_plan`: the expert files' ``fpgas``/``cpus``
lists or our ``dnnpart.plan`` format). Nodes the file leaves out follow their colocation
class, which is how paper 1 scores a training graph with an inference split: each backward
node goes where its forward node is.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from dnnpart.errors import UsageError
from dnnpart.io.plan_files import read_plan
from dnnpart.plan import SolveResult
from dnnpart.problem import Problem
from dnnpart.solvers.method import GIVEN, MethodInfo, Option, Progress, Stopwatch
from dnnpart.solvers.result import result_from_plan


def solve_expert(
    problem: Problem, /, *, time_limit: float | None = None, progress: Progress | None = None,
    split: str | Path | None = None, fill_by_colocation: bool = True, **options: Any,
) -> SolveResult:
    """Score the split in file ``split`` on ``problem``.

    Parameters
    ----------
    split : path of the plan file (required).
    fill_by_colocation : place nodes the file leaves out with their colocation class.

    Raises
    ------
    ValueError : no ``split`` given, or an unknown option.
    FormatError : the file is malformed or does not place every node.

    Examples
    --------
    >>> import json, tempfile
    >>> from dnnpart.testing import chain_problem
    >>> p = chain_problem([4, 1, 1, 4], n_accelerators=2)
    >>> with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as fh:
    ...     json.dump({"fpgas": [{"nodes": [0, 1]}, {"nodes": [2, 3]}], "cpus": []}, fh)
    >>> solve_expert(p, split=fh.name).objective
    5.0
    """
    if options:
        raise UsageError(f"expert: unknown option(s) {sorted(options)}")
    if split is None:
        raise UsageError("expert scores a given split: pass the split file as option split=PATH")
    clock = Stopwatch(time_limit)
    plan = read_plan(split, problem, fill_by_colocation=fill_by_colocation)
    return result_from_plan(problem, plan, method="expert", clock=clock, proven=False,
                            search_space="the given split", split=str(split))


EXPERT = MethodInfo(
    name="expert", func=solve_expert,
    summary="score a given split file (human-expert placements); option split=PATH",
    guarantee="baseline; the given split, unchanged except for colocation filling",
    objectives=("throughput", "latency"),
    source="paper 1, section 6 (hand-crafted placements)",
    options=(
        Option("split", str, None, "split file (JSON) to score"),
        Option("fill_by_colocation", bool, True, "place left-out nodes with their colocation class"),
    ),
    space=GIVEN,
)


METHODS = (EXPERT,)
