"""Plain-language diagnostics of a problem and its plan: what binds, what was offloaded.

* :func:`binding_constraint`: why no plan fits memory -- the largest single operator against
  the largest accelerator, else the whole model against all accelerators together;
* :func:`host_offload`: a plan that runs operators on a host CPU (slow; usually a sign the
  accelerators are too small), with the share of compute it takes there.
"""

from __future__ import annotations

import numpy as np

from dnnpart.plan import Plan
from dnnpart.problem import Problem


def _gb(x: float) -> str:
    return f"{x / 1e9:.3g} GB" if x >= 1e8 else f"{x / 1e6:.3g} MB"


def binding_constraint(problem: Problem) -> str | None:
    """The memory constraint that cannot hold, in one line (``None``: none is evident).

    Examples
    --------
    >>> import dataclasses, numpy as np
    >>> from dnnpart.testing import chain_problem
    >>> p = chain_problem([1.0, 1.0], n_accelerators=2, memory_bytes=2e9)
    >>> g = dataclasses.replace(p.graph, memory_bytes=np.array([3e9, 1e9]))
    >>> binding_constraint(dataclasses.replace(p, graph=g))
    "'0' needs 3 GB, the largest accelerator has 2 GB"
    """
    g, c = problem.graph, problem.cluster
    need = np.asarray(g.memory_bytes, dtype=float)
    if g.param_bytes is not None:
        need = np.maximum(need, np.asarray(g.param_bytes, dtype=float))
    accs = list(c.accelerators)
    if not accs or need.size == 0:
        return None
    cap = c.memory_capacity()[accs]
    largest = float(cap.max())
    v = int(need.argmax())
    if need[v] > largest:
        return f"{g.names[v]!r} needs {_gb(float(need[v]))}, the largest accelerator has {_gb(largest)}"
    total = float(need.sum())
    if total > float(cap.sum()):
        return (f"the model needs {_gb(total)} in all, the {len(accs)} accelerators hold "
                f"{_gb(float(cap.sum()))} together")
    return None


def host_offload(problem: Problem, plan: Plan) -> str | None:
    """A warning line when the plan runs operators on a host CPU (``None`` otherwise).

    Examples
    --------
    >>> from dnnpart.testing import chain_problem
    >>> p = chain_problem([1.0, 3.0], n_accelerators=1, n_cpus=1)
    >>> host_offload(p, Plan(assignment=[0, 1]))
    'warning: 1 operator(s), 75% of the compute, run on the host CPU cpu0; the accelerators may be too small'
    """
    g, c = problem.graph, problem.cluster
    cpus = list(c.cpus)
    if not cpus:
        return None
    work = np.asarray(g.compute_time[:, 0], dtype=float)
    work = np.where(np.isfinite(work), work, 0.0)
    on_cpu = np.isin(plan.assignment, cpus) & (work > 0)
    if not on_cpu.any():
        return None
    share = 100.0 * float(work[on_cpu].sum()) / max(float(work.sum()), 1e-300)
    names = ", ".join(sorted({c.devices[int(d)].name for d in plan.assignment[on_cpu]}))
    return (f"warning: {int(on_cpu.sum())} operator(s), {share:.0f}% of the compute, run on the host "
            f"CPU {names}; the accelerators may be too small")
