"""Throughput DP over ideals (paper 1, section 5.1.1) and its linearized variant DPL (5.1.2).

Both methods split the graph into contiguous parts, one per device, and minimise the largest
device load (time per sample of a pipelined schedule). Training graphs are preprocessed as in
appendix B (:mod:`dnnpart.graph.stage_graph`); the DP then runs on the forward part, each
forward slice carrying its colocated backward nodes.

Search space
------------
The DP builds a split as a chain of ideals, so its parts are contiguous (Definition 3.1) *and*
can be ordered as a pipeline (every edge goes from an earlier part to a later one or stays
inside a part). Paper 1's DP has the same space. A split whose contiguous parts each need an
output of the other (possible when some nodes cannot run on accelerators) is outside it; the
integer program searches those too.

Objectives
----------
* ``training="pipedream"`` (``max_i FW_i + BW_i``) and every overlap mode of appendix C.1
  (``"none"``, ``"compute-comm"``, ``"full-duplex"``) are optimised exactly.
* ``training="gpipe"`` (``max_i FW_i + max_i BW_i``) is not decomposable over the DP's
  prefixes. The DP optimises the PipeDream form instead and reports the plan as FEASIBLE,
  scored by the evaluator in the GPipe form; its bound is the PipeDream optimum, a valid lower
  bound because ``max_i (FW_i + BW_i) <= max_i FW_i + max_i BW_i`` for every plan.
* Replication (appendix C.2, option ``replication=True``): a slice may run on ``k'' > 1``
  accelerators (or CPUs, the paper's footnote 8) at once, each taking every ``k''``-th
  sample. The transition becomes ``min over k'' of max(dp[J][a - k''][c], acc(I \\ J, k''))``
  with ``acc(S, k'') = acc(S) / k''`` plus (overlap ``"none"``) or max-ed with (other modes)
  the all-reduce ``(k'' - 1) * W_S / (k'' * B)``: ``W_S`` the slice's ``memory_bytes`` (the
  paper's ``m_v``), ``B`` the cluster's bandwidth between two accelerators (between two CPUs
  for CPU replicas), which must be the same for every pair. Inference graphs pay no
  all-reduce (read-only weights). The plan says which devices replicate which
  (:attr:`~dnnpart.plan.Plan.replica_of`) and the evaluator scores it the same way
  (:mod:`dnnpart.evaluate.replication`). Time grows by a factor up to ``max(k, l)``; memory
  by one ``int16`` back-pointer per DP entry. Replication has a kernel of its own
  (:func:`~dnnpart.solvers.dp.kernels.fill_replicated`): without the option none of it runs.
* Accelerator hierarchies (appendix C.3): on a hierarchical cluster (accelerators in several
  groups) ``dp`` runs :mod:`dnnpart.solvers.dp.hierarchy` instead, exact over contiguous
  pipeline splits with one consecutive run of stages per group (option
  ``max_hierarchy_ideals``). The DP refuses clusters whose accelerators differ otherwise (the
  integer program takes them).

Speed
-----
``dp`` first solves DPL (a few milliseconds) and uses its value as an upper bound ``UB``: a
slice whose compute time alone reaches ``UB`` on every device kind that can hold it cannot be
part of a better split, and since compute time only grows with the slice, the enumeration of
slices below each ideal stops there. This keeps the DP exact while visiting a small fraction
of the ``O(I^2)`` ideal pairs. With replication the cut uses the least load a slice could
have on any number of replicas (compute / k'' with its all-reduce), which also only grows
with the slice. It cuts far less (a slice may hold up to ``k`` times the bound's compute),
so large lattices take several times longer: layer InceptionV3 inference (6 accelerators,
1 CPU) prices 579 M slices in ~150 s CPU instead of 227 M in ~20 s.

Without replication a work bound (not in the paper; exact) skips the cells ``(I, a, c)``
whose ideal's work cannot fit on ``a`` accelerators and ``c`` CPUs below ``UB``, or whose
remaining work cannot fit on the devices left (a CPU counted as the fraction of an
accelerator its fastest node allows); a row's walk stops where the slice's compute reaches
the worst best value so far of the row's live cells. Layer InceptionV3 inference: 36.8 M
slices. Lattices from ``THREADED_IDEALS`` ideals fill the rows of each level (ideals of one
size, which read only smaller ones) in threads; the tables are the same. Small lattices
before numba is loaded fill their rows in numpy (:mod:`dnnpart.solvers.dp.small`).

Lattices from ``PEEL_IDEALS`` ideals first solve a relaxation (option ``peel``, exact
either way; :mod:`dnnpart.solvers.dp.relax`): the graph without its light side components
and one-neighbour leaves has a far smaller lattice and an optimum no larger. Its plan,
extended to the whole graph, is optimal when it scores no more than that bound (BERT-base
with 4 layers: 148,200 ideals, proven from 988 in 1.2 s whole process, 69 s before);
otherwise its prefix and suffix tables skip the cells of the full DP that cannot be on a
better split (BERT-base with 2 layers: 23.7 M slices priced instead of 563 M). Figures and
what was tried: ``docs/results/dp.md``.

Modules
-------
One job each; this package only re-exports their public names, on first use (importing
:mod:`dnnpart.solvers.dp.ideals`, as other methods do, loads no DP driver):

* :mod:`~dnnpart.solvers.dp.solve`: the ``dp`` and ``dpl`` methods (``solve_dp``,
  ``solve_dpl``), declared as data in :mod:`~dnnpart.solvers.dp.methods`;
  :mod:`~dnnpart.solvers.dp.options` checks their options.
* :mod:`~dnnpart.solvers.dp.driver`: one DP over one lattice (``run_dp``, ``DpOutcome``):
  tables, the kernel for the features in use, the split read back;
  :mod:`~dnnpart.solvers.dp.rows`: the order the rows are filled in (chunks, threads).
* :mod:`~dnnpart.solvers.dp.kernels`: the numba row kernels, one per feature (plain,
  replication, work bound, cell mask); :mod:`~dnnpart.testing.dp_row_twins`: their
  plain-Python twins; :mod:`~dnnpart.solvers.dp.small`: the numpy rows.
* :mod:`~dnnpart.solvers.dp.ideals` and :mod:`~dnnpart.solvers.dp.lattice_kernels`: the
  ideal lattices.
* :mod:`~dnnpart.solvers.dp.devices`: the identical devices the DP assumes;
  :mod:`~dnnpart.solvers.dp.bounds`: the work bound and a lower bound on the optimum.
* :mod:`~dnnpart.solvers.dp.peeled` and :mod:`~dnnpart.solvers.dp.relax`: the peeled
  relaxation; :mod:`~dnnpart.solvers.dp.hierarchy_solve`,
  :mod:`~dnnpart.solvers.dp.hierarchy` and :mod:`~dnnpart.solvers.dp.hierarchy_kernels`:
  hierarchical clusters.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from dnnpart.solvers.dp.bounds import load_lower_bound
    from dnnpart.solvers.dp.driver import DpOutcome, run_dp
    from dnnpart.solvers.dp.ideals import (
        DEFAULT_MAX_IDEALS,
        IdealLattice,
        enumerate_stage_ideals,
        linear_ideals,
    )
    from dnnpart.solvers.dp.solve import solve_dp, solve_dpl

__all__ = [
    "DEFAULT_MAX_IDEALS",
    "DpOutcome",
    "IdealLattice",
    "enumerate_stage_ideals",
    "linear_ideals",
    "load_lower_bound",
    "run_dp",
    "solve_dp",
    "solve_dpl",
]


def __getattr__(name: str) -> Any:
    # imported on first use, so that importing one submodule (Parmesan imports ``ideals``)
    # does not import the driver, the solve functions and their kernels
    if name in ("DEFAULT_MAX_IDEALS", "IdealLattice", "enumerate_stage_ideals", "linear_ideals"):
        from dnnpart.solvers.dp import ideals

        value = getattr(ideals, name)
    elif name in ("DpOutcome", "run_dp"):
        from dnnpart.solvers.dp import driver

        value = getattr(driver, name)
    elif name == "load_lower_bound":
        from dnnpart.solvers.dp import bounds

        value = bounds.load_lower_bound
    elif name in ("solve_dp", "solve_dpl"):
        from dnnpart.solvers.dp import solve

        value = getattr(solve, name)
    else:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
