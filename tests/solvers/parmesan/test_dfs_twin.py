"""The mapping search's feasibility kernel against every bijection, at every target.

:func:`~dnnpart.solvers.parmesan.kernels.dfs_feasible` (through
:func:`~dnnpart.solvers.parmesan.search.feasible`) answers "is there a bijection of vertices
onto devices with every stage time ``<= t``?". The twin enumerates all ``D!`` bijections and
prices them straight from the stage graph (:mod:`.brute`, which the loop evaluator
:func:`~dnnpart.solvers.parmesan.max_stage_time` is checked against in ``test_mapping``).
Targets lie between each two consecutive distinct objective values (never within rounding of
one), so every answer is exact; a mapping found must be a bijection within the target (an
optimal one is priced again with the shared evaluator).
The search runs in slices of a few nodes, so resuming from its state arrays is exercised too.
"""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from dnnpart.solvers.parmesan import max_stage_time
from dnnpart.solvers.parmesan import search as search_mod
from dnnpart.solvers.parmesan.kernels import STATUS_FOUND, STATUS_INFEASIBLE
from dnnpart.solvers.parmesan.search import build_search_space, feasible

from .brute import all_objectives
from .instances import random_instance


def _targets(values: np.ndarray) -> list[float]:
    """Midpoints between consecutive distinct finite objective values, one target below them
    all and one above."""
    finite = np.unique(values[np.isfinite(values)])
    if finite.size == 0:
        return [1.0, 1e6]
    keep = [float(finite[0])]
    for x in finite[1:].tolist():
        if x - keep[-1] > 1e-6 * max(1.0, x):  # apart by far more than rounding
            keep.append(x)
    mids = [(a + b) / 2 for a, b in itertools.pairwise(keep)]
    return [keep[0] * (1 - 1e-6) - 1e-6, *mids, keep[-1] * (1 + 1e-6) + 1e-6]


@pytest.mark.parametrize("seed", range(40))
def test_feasibility_equals_enumeration_of_all_bijections(seed: int,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    stages, topo = random_instance(seed)
    monkeypatch.setattr(search_mod, "_CHUNK", 1 + 7 * (seed % 4))  # resume every few nodes
    for kind in ("p2p", "allreduce"):
        values, perms = all_objectives(stages, topo, kind)  # type: ignore[arg-type]
        weights = stages.n_devices ** np.arange(stages.n_devices)
        keys = perms @ weights
        order = np.argsort(keys)
        targets = _targets(values)
        for symmetry in (True, False):
            space = build_search_space(stages, topo, kind, symmetry=symmetry)  # type: ignore[arg-type]
            for t in targets:
                status, vertex_dev, _ = feasible(space, t)
                exists = bool(np.any(values <= t))
                assert status == (STATUS_FOUND if exists else STATUS_INFEASIBLE), (kind, symmetry, t)
                if status == STATUS_FOUND:
                    assert vertex_dev is not None
                    at = int(np.searchsorted(keys, vertex_dev @ weights, sorter=order))
                    assert at < keys.size and np.array_equal(perms[order[at]], vertex_dev)
                    assert values[order[at]] <= t
            if not np.isfinite(values).any():
                continue
            # at the least target it meets, the mapping found is optimal: price it with the
            # evaluator the solver reports with
            t = next(x for x in targets if np.any(values <= x))
            found = feasible(space, t)[1]
            assert found is not None
            mapping = found.reshape(stages.replicas, stages.n_stages)
            assert max_stage_time(stages, topo, mapping, kind) <= t  # type: ignore[arg-type]
