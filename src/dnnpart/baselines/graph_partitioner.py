"""Balanced min-cut graph partitioning: paper 1's Scotch baseline (sections 6 and 7).

The contracted graph (:mod:`dnnpart.baselines.partition_input`; vertex weight = compute,
edge weight = transfer cost) is cut into balanced parts by METIS (``pymetis``) or by Scotch's
``gpart`` program when it is on ``PATH`` (Debian installs it as ``scotch_gpart``). Part ``i``
goes to accelerator ``i``; with ``parts="all"`` the last parts go to the CPUs. Nodes that
cannot run on accelerators go to the first CPU.

The partitioner balances compute, not memory: plans that exceed a device's memory are
returned and reported (status UNKNOWN, ``stats["violations"]``), as paper 1 marks them
with daggers, never repaired.
"""

from __future__ import annotations

import shutil
import subprocess
import tempfile
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from dnnpart._optional import require
from dnnpart.baselines.partition_input import WeightedGraph, integer_weights, partition_input
from dnnpart.errors import MissingDependencyError, UsageError
from dnnpart.plan import Plan, SolveResult
from dnnpart.problem import Problem
from dnnpart.solvers.method import ANY, MethodInfo, Option, Progress, Stopwatch
from dnnpart.solvers.result import result_from_plan

IntArray = npt.NDArray[np.int64]

TOOLS = ("metis", "scotch")
PART_MODES = ("accelerators", "all")
#: Names of Scotch's partitioning program: upstream, then Debian's.
SCOTCH_PROGRAMS = ("gpart", "scotch_gpart")
#: Integer scale of the weights handed to the partitioners (sum of vertex weights).
_WEIGHT_TOTAL = 10_000_000.0


def scotch_program() -> str | None:
    """Path of Scotch's ``gpart`` on ``PATH``, or ``None``.

    Examples
    --------
    >>> scotch_program() is None or scotch_program().endswith("gpart")
    True
    """
    for name in SCOTCH_PROGRAMS:
        found = shutil.which(name)
        if found:
            return found
    return None


def metis_parts(wg: WeightedGraph, n_parts: int, *, seed: int = 0) -> IntArray:
    """Part of every vertex by METIS (k-way, minimum edge cut, balanced vertex weight).

    Examples
    --------
    >>> from dnnpart.testing import chain_problem
    >>> from dnnpart.baselines.partition_input import partition_input
    >>> wg = partition_input(chain_problem([1, 1, 1, 1], n_accelerators=2))
    >>> sorted(metis_parts(wg, 2).tolist())
    [0, 0, 1, 1]
    """
    pymetis = require("pymetis", extra="metis", caller="graph-partitioner (METIS)")
    if n_parts <= 1 or wg.n_vertices <= 1:
        return np.zeros(wg.n_vertices, np.int64)
    vw = integer_weights(wg.vertex_weight, total=_WEIGHT_TOTAL).tolist()
    ew = integer_weights(wg.edge_weight, total=_WEIGHT_TOTAL).tolist()
    options = pymetis.Options(seed=seed)
    csr = getattr(pymetis, "CSRAdjacency", None)
    if csr is not None:
        result = pymetis.part_graph(n_parts, csr(wg.xadj.tolist(), wg.adjncy.tolist()),
                                    vweights=vw, eweights=ew or None, options=options)
    else:  # pymetis before 2025
        result = pymetis.part_graph(n_parts, xadj=wg.xadj.tolist(), adjncy=wg.adjncy.tolist(),
                                    vweights=vw, eweights=ew or None, options=options)
    return np.asarray(result[1], dtype=np.int64)


def scotch_graph_text(wg: WeightedGraph) -> str:
    """The graph in Scotch's source-graph format (``.grf``): vertex and edge loads, base 0.

    Examples
    --------
    >>> from dnnpart.testing import chain_problem
    >>> from dnnpart.baselines.partition_input import partition_input
    >>> print(scotch_graph_text(partition_input(chain_problem([1, 1], n_accelerators=2))))
    0
    2 2
    0 011
    5000000 1 1 1
    5000000 1 1 0
    <BLANKLINE>
    """
    vw = integer_weights(wg.vertex_weight, total=_WEIGHT_TOTAL)
    ew = integer_weights(wg.edge_weight, total=_WEIGHT_TOTAL)
    lines = ["0", f"{wg.n_vertices} {wg.adjncy.size}", "0 011"]
    for v in range(wg.n_vertices):
        lo, hi = int(wg.xadj[v]), int(wg.xadj[v + 1])
        arcs = " ".join(f"{int(ew[i])} {int(wg.adjncy[i])}" for i in range(lo, hi))
        lines.append(f"{int(vw[v])} {hi - lo}" + (f" {arcs}" if arcs else ""))
    return "\n".join(lines) + "\n"


def scotch_parts(wg: WeightedGraph, n_parts: int, *, program: str | None = None) -> IntArray:
    """Part of every vertex by Scotch's ``gpart`` (run as a subprocess).

    Raises :class:`MissingDependencyError` when ``gpart`` is not on ``PATH``.
    """
    program = program or scotch_program()
    if program is None:
        raise MissingDependencyError(
            "graph-partitioner tool=scotch needs Scotch's gpart program on PATH "
            "(Debian/Ubuntu: apt-get install scotch); tool=metis needs only pymetis")
    if n_parts <= 1 or wg.n_vertices <= 1:
        return np.zeros(wg.n_vertices, np.int64)
    with tempfile.TemporaryDirectory(prefix="dnnpart-scotch-") as tmp:
        graph_file, map_file = Path(tmp) / "graph.grf", Path(tmp) / "graph.map"
        graph_file.write_text(scotch_graph_text(wg))
        # -Cd: deterministic, so the same input gives the same split
        done = subprocess.run([program, str(n_parts), str(graph_file), str(map_file), "-Cd"],
                              capture_output=True, text=True, check=False, timeout=600)
        if done.returncode != 0:
            raise RuntimeError(f"{program} failed ({done.returncode}): {done.stderr.strip()[:500]}")
        numbers = np.array(map_file.read_text().split(), dtype=np.int64)
    count = int(numbers[0])
    pairs = numbers[1 : 1 + 2 * count].reshape(count, 2)
    parts = np.zeros(wg.n_vertices, np.int64)
    parts[pairs[:, 0]] = pairs[:, 1]
    return parts


def solve_graph_partitioner(
    problem: Problem, /, *, time_limit: float | None = None, progress: Progress | None = None,
    tool: str = "metis", parts: str = "accelerators", seed: int = 0, **options: Any,
) -> SolveResult:
    """Partition the contracted graph into balanced parts and place part ``i`` on device ``i``.

    Parameters
    ----------
    tool : ``"metis"`` (pymetis) or ``"scotch"`` (``gpart`` on ``PATH``).
    parts : ``"accelerators"``: k parts, one per accelerator (what paper 1 ran);
        ``"all"``: k + l parts, the last l on the CPUs.
    seed : METIS random seed.

    Examples
    --------
    >>> from dnnpart.testing import chain_problem
    >>> solve_graph_partitioner(chain_problem([2, 2, 2, 2], n_accelerators=2)).objective
    4.0
    """
    if options:
        raise UsageError(f"graph-partitioner: unknown option(s) {sorted(options)}")
    if tool not in TOOLS:
        raise UsageError(f"graph-partitioner: tool must be one of {list(TOOLS)}, got {tool!r}")
    if parts not in PART_MODES:
        raise UsageError(f"graph-partitioner: parts must be one of {list(PART_MODES)}, got {parts!r}")
    clock = Stopwatch(time_limit)
    cluster = problem.cluster
    devices = list(cluster.accelerators) + (list(cluster.cpus) if parts == "all" else [])
    wg = partition_input(problem)
    pinned = ~wg.accelerator_ok
    if not devices or (pinned.any() and not cluster.cpus):
        return result_from_plan(problem, None, method="graph-partitioner", clock=clock,
                                proven=False, search_space="balanced partitions", tool=tool)
    if progress is not None:
        progress.update(f"graph-partitioner: {tool} on {wg.n_vertices:,} vertices", 0.0)
    part = metis_parts(wg, len(devices), seed=seed) if tool == "metis" else scotch_parts(wg, len(devices))
    vertex_device = np.asarray(devices, dtype=np.int64)[part]
    if pinned.any():
        vertex_device[pinned] = cluster.cpus[0]
    plan = Plan(assignment=vertex_device[wg.node_vertex].astype(np.int32))
    return result_from_plan(problem, plan, method="graph-partitioner", clock=clock, proven=False,
                            search_space="balanced partitions (non-contiguous)", tool=tool,
                            parts=parts)


GRAPH_PARTITIONER = MethodInfo(
    name="graph-partitioner", func=solve_graph_partitioner,
    summary="balanced min-cut partition (METIS or Scotch): compute balanced, transfers cut",
    guarantee="baseline; usually non-contiguous; ignores memory (violations reported)",
    objectives=("throughput", "latency"),
    source="paper 1, sections 6 and 7 (Scotch baseline)",
    options=(
        Option("tool", str, "metis", "partitioner", choices=TOOLS),
        Option("parts", str, "accelerators", "one part per accelerator, or per device (all)",
               choices=PART_MODES),
        Option("seed", int, 0, "METIS seed", minimum=0, maximum=2**31 - 1),
    ),
    space=ANY,
)


METHODS = (GRAPH_PARTITIONER,)
