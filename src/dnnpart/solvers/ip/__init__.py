"""Integer programs of paper 1 on open-source solvers, with certified bounds.

Two registered methods:

* ``ip`` (throughput and latency): contiguous splits (Fig. 6 for throughput, Fig. 3 for
  latency); for latency, ``subgraphs_per_device=q`` allows up to ``q`` contiguous subgraphs
  per accelerator run in a chosen order (Fig. 4, section 4.1).
* ``ip-noncontig`` (throughput): all splits, non-contiguous included (section 5.2).

The latency program with ``q > 1`` is reached through ``ip`` rather than ``ip-noncontig``:
its plans carry explicit subgraph orders, which can beat any plan scored with the
evaluator's derived subgraphs, so it is not comparable with brute force over all splits.

One model builder (:mod:`.throughput`, :mod:`.latency`) writes a backend-neutral
:class:`~dnnpart.solvers.ip.model.MipModel`; the backend is OR-Tools CP-SAT (default,
integer-scaled times, see :mod:`.cpsat`) or HiGHS (:mod:`.highs`). The plan's objective is
always re-evaluated by :func:`dnnpart.evaluate`; the bound is the backend's, converted
conservatively. A warm start (DPL for throughput; the best of greedy and the max-load DP for
latency) is passed as a solution hint and kept when the solver does not beat it, so a plan
exists at once and the IP is never worse than its warm start.

Options
-------
backend : ``"cpsat"`` (default), ``"highs"``, or ``"portfolio"``: CP-SAT for half the time
    limit, then, when its gap is not closed, HiGHS warm-started from the best plan for the
    rest; the plan is the better of the two, the bound the higher of the two certified ones
    (without a time limit it is CP-SAT alone). CP-SAT's searches close small models fast but
    can stall on big communication-bound ones (op BERT-12 inference: 135.63 after 15 s and
    still after 20 min) where HiGHS, from the same plan, reaches 130.04.
gap : relative gap at which the backend may stop (default 0.01). The status is OPTIMAL when
    the bound meets the objective; a run stopped within the gap is FEASIBLE with its bound
    and ``stats["within_gap"]`` True.
threads : solver threads (default: the backend's choice); seed : random seed (default 0).
warm_start : ``"auto"`` (default), ``"none"``, a method name, or a :class:`~dnnpart.Plan`.
contiguous_cpus : contiguous CPU parts too (default True for ``ip``: brute force over
    contiguous splits requires it; the paper's latency program leaves CPUs free).
symmetry : break the symmetry of identical devices (default True, throughput).
subgraphs_per_device : ``q`` of Fig. 4 (latency only).
root : non-contiguous throughput with ``backend`` cpsat or portfolio (default True): HiGHS
    first solves the root node only (presolve, LP, cuts and primal heuristics; stopped by a
    node limit, so the same plan whatever the machine's load) for up to ``ROOT_SHARE`` (15%)
    of the time limit; CP-SAT then starts from the better of its plan and the warm start, and
    the root's dual bound counts. Measured reason: on op BERT-12 inference CP-SAT from DPL
    stays at 135.63, from the root's 131.66 it reaches 130.04 (``docs/results/ip.md``). A root
    stopped by its time share instead says so (``stats["root_complete"]`` False): its plan
    then depends on the machine's speed, even in a deterministic run.
descent : throughput with CP-SAT and a time limit (default False): the max-load solve gets
    half the limit and, when it stops short of the gap, threshold descent
    (:mod:`.threshold`) the other half; the plan is the better of the two, the bound the
    max-load solve's (or a threshold descent refuted, if higher).
"""

from __future__ import annotations

from dnnpart.solvers.ip.driver import solve_ip, solve_ip_noncontig

__all__ = ["solve_ip", "solve_ip_noncontig"]
