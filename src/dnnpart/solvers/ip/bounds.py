"""A lower bound on the max load from packing the largest units, transfers left out.

Why
---
On workloads whose transfers are cheap the max-load program is a scheduling problem: put
units (colour classes, lone nodes) on devices so that the most loaded one is light. The LP
relaxation sees only the work bound (total work over the devices' speeds); when a few large
units cannot be spread evenly (layer GNMT inference: 17 units of 7 to 25 ms on 6
accelerators) the optimum sits well above it and the solver's bound stays there (30.1 against
a plan of 31.69). Packing just those large units, every transfer dropped, is a small program
that a solver closes in seconds, and its optimum is a valid bound of the real one.

Validity
--------
Let ``P`` be the problem and ``R`` the *packing relaxation* written by
:func:`build_packing_relaxation`: the ``N`` units of largest least compute time, the same
devices, memory capacities and objective groups, every transfer cost 0 and no contiguity.
For any plan ``p`` of ``P`` take its restriction ``r`` to the kept units; ``r`` is a solution
of ``R`` (every kept unit on one device it may use, memory only lower). On every device and
in every overlap mode (appendix C.1) a load of ``P`` is a maximum of sums of non-negative
terms (compute, transfers in, transfers out); the load of ``R`` under ``r`` is the same
maximum with the transfer terms and the dropped units' compute removed, so it is no larger.
Each group's max load, and hence the objective (their sum), is therefore no larger in ``R``
under ``r`` than in ``P`` under ``p``: ``OPT(R) <= OPT(P)``, and any proven bound of ``R``
(``<= OPT(R)``) bounds ``P``. ``tests/solvers/test_ip_bounds.py`` checks
``bound <= brute-force optimum`` on random small problems (hypothesis).
"""

from __future__ import annotations

import numpy as np

from dnnpart.graph.algorithms import colocation_units
from dnnpart.problem import Problem
from dnnpart.solvers.ip.throughput import ThroughputModel, build_throughput, device_times

#: Most units kept in the packing relaxation.
PACKED_UNITS = 32

#: Units whose least compute time is below ``objective / SMALL_UNIT_RATIO`` are left out: they
#: give the packing so much freedom that CP-SAT no longer closes it (layer GNMT inference: the
#: 17 units of 6.9 ms and more close in seconds; with the next 15 units of 0.2 ms its bound
#: stays at the work bound, measured), and they change the optimum little.
SMALL_UNIT_RATIO = 8.0


def packed_units(problem: Problem, objective: float, limit: int = PACKED_UNITS) -> int:
    """How many units to pack: those above ``objective / SMALL_UNIT_RATIO``, at most ``limit``.

    Examples
    --------
    >>> from dnnpart.testing import chain_problem
    >>> packed_units(chain_problem([4, 1, 1, 4], n_accelerators=2), objective=10.0)
    2
    """
    t = device_times(problem)
    unit_ptr, unit_nodes = colocation_units(problem.graph)
    unit_of = np.repeat(np.arange(unit_ptr.shape[0] - 1), np.diff(unit_ptr))
    unit_time = np.zeros((unit_ptr.shape[0] - 1, t.shape[1]))
    np.add.at(unit_time, unit_of, t[unit_nodes])
    least = unit_time.min(axis=1, initial=np.inf)
    return min(limit, int((least > objective / SMALL_UNIT_RATIO).sum()))


def build_packing_relaxation(problem: Problem, n_units: int = PACKED_UNITS) -> ThroughputModel:
    """The packing relaxation of ``problem``'s max-load program (module docstring).

    Its solutions are no plans (the small units are left out); only its bound is used.

    Examples
    --------
    >>> from dnnpart.testing import chain_problem
    >>> tm = build_packing_relaxation(chain_problem([4, 1, 1, 4], n_accelerators=2), n_units=2)
    >>> int((tm.x >= 0).any(axis=1).sum())
    2
    """
    return build_throughput(problem, contiguous=False, communication=False, largest_units=n_units)
