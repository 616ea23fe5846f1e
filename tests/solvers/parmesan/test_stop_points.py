"""The mapper's tables stop when asked (Ctrl-C or the time limit): on thousands of devices they
take minutes, and ``map --time-limit`` must end in bounded time."""

from __future__ import annotations

import pytest

from dnnpart import interrupt
from dnnpart.pricing.pairs import Topology
from dnnpart.solvers.parmesan.cost import allreduce_device_table, build_terms, p2p_device_table
from dnnpart.solvers.parmesan.search import search_order
from dnnpart.stages import PipelineStages
from dnnpart.workflow.mapping import map_stage_graph


def _stages() -> PipelineStages:
    return PipelineStages(compute=[1.0, 1.0], param_bytes=[1e6, 1e6],
                          comm_bytes=[[0, 1e6], [0, 0]], replicas=2)


@pytest.mark.parametrize("table", [allreduce_device_table, p2p_device_table])
def test_a_table_raises_stopped_once_a_stop_is_requested(table) -> None:
    from dnnpart.cost import resolve_cluster

    topo = Topology.from_cluster(resolve_cluster("mesh2d:x=2,y=2").cluster)
    assert table(_stages(), topo).shape == (2, 4)  # runs when nothing is asked
    with interrupt.guard(None), pytest.raises(interrupt.Stopped):
        interrupt.request_stop(interrupt.TIME_LIMIT)
        table(_stages(), topo)


def test_the_search_order_stops_too() -> None:
    with interrupt.guard(None), pytest.raises(interrupt.Stopped):
        interrupt.request_stop(interrupt.INTERRUPTED)
        search_order(build_terms(_stages(), "p2p"), 4)


def test_map_at_a_passed_limit_names_what_did_not_end(monkeypatch: pytest.MonkeyPatch) -> None:
    from dnnpart.errors import ProblemTooLargeError
    from dnnpart.solvers.parmesan import cost

    def slow(*args: object) -> None:  # tables that outlive the limit, stopping at a stop point
        while True:
            cost._stop_point()

    monkeypatch.setattr(cost, "allreduce_device_table", slow)
    monkeypatch.setattr(cost, "p2p_device_table", slow)
    with pytest.raises(ProblemTooLargeError, match="mapper's tables did not end"):
        map_stage_graph(_stages(), "mesh2d:x=2,y=2", time_limit=0.2)
