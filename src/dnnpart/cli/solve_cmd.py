"""``dnnpart solve GRAPH --method NAME``: find a plan of a graph with one method."""

from __future__ import annotations

import argparse
import contextlib
from typing import Any

from dnnpart.cli.args import (
    add_method_args,
    add_problem_args,
    model_options,
    objective_from_args,
    solve_options,
)
from dnnpart.cli.output import EXIT_NO_PLAN, EXIT_OK, check_outputs, dumps
from dnnpart.cli.render import Renderer, fmt, print_plan, report_stop, safe


def add_parser(subparsers: Any) -> argparse.ArgumentParser:
    """Add ``solve``."""
    p: argparse.ArgumentParser = subparsers.add_parser(
        "solve", help="find a plan with a method (see `dnnpart methods`)")
    add_problem_args(p)
    add_method_args(p, default=None, method_help="method name (default: the objective's own: "
                    "throughput dp, latency ip, makespan pardnn, pipeline parmesan, iteration "
                    "optcnn, stages block-pipeline)")
    p.add_argument("--out", "-o", metavar="PLAN.json", help="write the plan here")
    p.set_defaults(handler=cmd_solve)
    return p


def cmd_solve(args: argparse.Namespace, out: Renderer) -> int:
    from dnnpart.evaluate import evaluate
    from dnnpart.evaluate.diagnose import why_infeasible
    from dnnpart.io import plan_to_dict
    from dnnpart.plan import Status
    from dnnpart.solvers import get_method, solve
    from dnnpart.workflow import load_problem, write_solved_plan
    from dnnpart.workflow.methods import DEFAULT_METHODS

    objective = objective_from_args(args)
    args.method = args.method or DEFAULT_METHODS[objective.kind]
    get_method(args.method)  # fail fast on an unknown name, before any work
    options, deterministic = solve_options(args, args.method)
    check_outputs(out, {"--out": args.out})
    problem = load_problem(args.graph, cluster=args.cluster or None,
                           objective=objective, model=model_options(args))
    progress = out.progress(args.method)
    with progress if progress is not None else contextlib.nullcontext():
        result = solve(problem, args.method, time_limit=args.time_limit, progress=progress,
                       deterministic=deterministic, **options)
    ev = evaluate(problem, result.plan) if result.plan is not None else None
    # a plan that breaks a constraint (a heuristic's best, e.g. over memory) is not written:
    # nothing downstream can use it; an interrupted solve's incumbent is, marked stopped
    why = None if ev is not None and ev.feasible else why_infeasible(problem, result.plan)
    written = ev is not None and bool(args.out) and (
        ev.feasible or result.stats.get("stopped") == "interrupted")
    if written:
        write_solved_plan(problem, result, args.out, args.graph)
    stopped = report_stop(out, result, args.out)
    if stopped is not None:
        return stopped
    if out.json_mode:
        payload = result.to_dict()
        if result.plan is not None and ev is not None:
            payload["evaluation"] = ev.to_dict(problem)
            payload["plan"] = plan_to_dict(problem, result.plan, result)
        if why is not None:
            payload["why"] = why
        out.json(dumps(payload))
        return EXIT_OK if result.plan is not None and result.status is not Status.UNKNOWN else EXIT_NO_PLAN
    out.print(out.result_line(result))
    st = result.stats
    if "eq5_max_stage_time" in st:  # paper 4: the pipeline and its mapping beside the sim
        gap = st.get("mapping_gap")
        out.print(f"S={st['stages']} stages x R={st['replicas']} replicas; mapping "
                  f"{st.get('mapping_pick')} ({st.get('picked_mapping_status')}, "
                  f"{st.get('picked_instantiation')}); Eq. 5 max stage time "
                  f"{fmt(st.get('picked_eq5_max_stage_time'))} s; mapper "
                  f"({st.get('instantiation')}) {st.get('mapping_status')}"
                  + ("" if gap is None else f", gap {gap:.2%}"))
    print_plan(problem, result, out)
    if "violations" in st:
        out.print(f"[red]violations:[/] {safe(str(st['violations']))}")
    if why is not None and result.plan is not None:  # without a plan print_plan says why
        out.note(f"why: {why}")
    if "heuristic1_success" in st:  # PARDNN's memory heuristic I (paper 2, §3.2.1)
        if st["heuristic1_success"]:
            out.print(f"memory heuristic I: every device fits, {st['heuristic1_moved']} "
                      f"nodes moved in {st['heuristic1_rounds']} rounds")
        else:
            out.print("[red]memory heuristic I failed:[/] "
                      f"{safe(str(st.get('heuristic1_failure', '')))}")
    if "final_nodes" in st:
        out.print(f"Algorithm 1: K = {st['final_nodes']} nodes after {st['node_eliminations']} node and "
                  f"{st['edge_eliminations']} edge eliminations ({st['completion']}); "
                  f"tables {st['table_time_s']:.2f} s, search {st['search_time_s']:.3f} s")
    if written:
        out.note(f"plan written to {args.out}")
    elif args.out and result.plan is not None:
        out.note(f"no plan written to {args.out}: the plan found breaks the cluster's constraints")
    return EXIT_OK if result.plan is not None and result.status is not Status.UNKNOWN else EXIT_NO_PLAN
