"""Plan files of graph problems (``dnnpart solve -o``): written with the graph they were made
for, read back into that graph's problem.

Such a file is our plan format (:mod:`dnnpart.io.plan_files`) plus ``graph`` -- a graph given
as a file is named by absolute path and SHA-256 (:mod:`dnnpart.io.file_refs`), anything else
by its spec -- and ``objective_spec``, the objective's settings, so that ``export
--format placement-text`` and ``report`` can rebuild the problem without being told.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

from dnnpart.errors import FormatError
from dnnpart.plan import Plan, SolveResult
from dnnpart.problem import Objective, Problem
from dnnpart.workflow.inputs import load_problem
from dnnpart.workflow.plan_clusters import stored_cluster


def solved_plan_dict(problem: Problem, result: SolveResult, graph: str) -> dict[str, Any]:
    """The content of a ``solve -o`` plan file: the plan, the graph it was made for (``graph``:
    the spec or file the problem was loaded from) and the objective's settings.

    Examples
    --------
    >>> from dnnpart.solvers import solve
    >>> problem = load_problem("zoo:bert-3")
    >>> data = solved_plan_dict(problem, solve(problem, "dp"), "zoo:bert-3")
    >>> data["graph"], data["objective_spec"]["kind"], data["method"]
    ({'spec': 'zoo:bert-3'}, 'throughput', 'dp')
    """
    from dnnpart.io import plan_to_dict
    from dnnpart.io.file_refs import file_ref, is_file_spec

    data = plan_to_dict(problem, result.require_plan(), result)
    # found (and checked) again by evaluate, export placement-text and report
    data["graph"] = file_ref(graph) if is_file_spec(graph) else {"spec": graph}
    # the objective's settings beside the plan's objective value (which keeps its key)
    data["objective_spec"] = dataclasses.asdict(problem.objective)
    return data


def write_solved_plan(problem: Problem, result: SolveResult, path: str | Path, graph: str) -> None:
    """Write :func:`solved_plan_dict` to ``path`` (atomically)."""
    from dnnpart.io.dnn_partitioning import write_json_atomic

    write_json_atomic(solved_plan_dict(problem, result, graph), path)


def solved_problem(path: str | Path, data: dict[str, Any], *, model: str | None = None,
                   trust: bool = False) -> tuple[Problem, Plan]:
    """The problem and plan of a ``solve -o`` plan file (``data``: its JSON), from the graph
    and objective it names and the cluster it stores.

    The graph's spec passes the gate of specs from files
    (:func:`~dnnpart.workflow.file_specs.gated_spec`: ``model``, ``trust`` as there)."""
    from dnnpart.io.file_refs import resolve_ref
    from dnnpart.io.plan_files import parse_plan
    from dnnpart.workflow.file_specs import gated_spec

    ref = data.get("graph")
    if isinstance(ref, dict) and "spec" in ref:
        graph = gated_spec(ref["spec"], path, "graph.spec", model=model, trust=trust)
    else:
        found = None if model is not None else str(resolve_ref(ref, "graph", path))
        graph = gated_spec(found, path, "graph.path", model=model, trust=trust)
    fields = data.get("objective_spec")
    try:
        objective = Objective(**{k: v for k, v in fields.items()
                                 if k in {f.name for f in dataclasses.fields(Objective)}}) \
            if isinstance(fields, dict) else None
    except (TypeError, ValueError) as exc:
        raise FormatError(f"{path}: objective_spec: {exc}") from None
    cluster = stored_cluster(path, objective, data)
    problem = load_problem(graph, cluster=cluster, objective=objective)
    return problem, parse_plan(data, problem, str(path))


def graph_mismatch(plan_path: str | Path, graph: str) -> str | None:
    """A warning when a plan names another graph file (by hash) than the one given."""
    from dnnpart.io import fields as f
    from dnnpart.io.file_refs import is_file_spec, sha256_of

    ref = f.require_mapping(f.read_json(plan_path), str(plan_path)).get("graph")
    if not isinstance(ref, dict) or not isinstance(ref.get("sha256"), str) or not is_file_spec(graph):
        return None
    have = sha256_of(graph)
    if have == ref["sha256"]:
        return None
    return (f"warning: {plan_path} was made for {ref.get('path')} (sha256 {ref['sha256'][:12]}...), "
            f"{graph} differs (sha256 {have[:12]}...)")
