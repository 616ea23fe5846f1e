"""The compact link table: it reads like a tuple of ``Link`` objects, checks like ``Link``,
survives cluster files, and grid matrices by distance equal the routed ones."""

from __future__ import annotations

import itertools
import json
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dnnpart.cli.main import main
from dnnpart.devices.cluster import Cluster, Device, Link
from dnnpart.devices.links import LinkTable
from dnnpart.devices.routing import route, route_grid
from dnnpart.devices.topology import GENERATORS, cluster_from_links, generate
from dnnpart.errors import UsageError
from dnnpart.io.cluster_file import cluster_to_dict, parse_cluster

link_lists = st.lists(
    st.builds(lambda a, gap, bw, lat, kind: Link(a=a, b=a + gap, bandwidth=bw, latency=lat,
                                                 kind=kind),
              st.integers(0, 5), st.integers(1, 3), st.floats(1e-3, 1e12), st.floats(0, 1),
              st.sampled_from(["", "nv", "pcie"])),
    max_size=12)


@settings(max_examples=60, deadline=None)
@given(link_lists)
def test_a_table_reads_like_the_tuple_it_was_made_of(links):
    table = LinkTable.of(links)
    assert len(table) == len(links) and bool(table) == bool(links)
    assert list(table) == links and table == tuple(links) and table == list(links)
    for k in range(-len(links), len(links)):
        assert table[k] == links[k]
    assert list(table[1:4]) == links[1:4] and list(table[::-1]) == links[::-1]
    for x in links:
        assert table.index(x) == links.index(x) and x in table
    assert LinkTable.of(table) is table and table == LinkTable.of(list(table))
    with pytest.raises(IndexError):
        table[len(links)]


@pytest.mark.parametrize(("a", "b", "bw", "lat", "fragment"), [
    (1, 1, 1.0, 0.0, "link 1-1: must join two distinct devices"),
    (-1, 2, 1.0, 0.0, "link -1-2: must join two distinct devices"),
    (0, 2, 0.0, 0.0, "link 0-2: bandwidth must be a finite number > 0"),
    (0, 2, math.inf, 0.0, "link 0-2: bandwidth must be a finite number > 0"),
    (0, 2, math.nan, 0.0, "link 0-2: bandwidth must be a finite number > 0"),
    (0, 2, 1.0, -1.0, "link 0-2: latency must be a finite number >= 0"),
])
def test_a_table_refuses_what_link_refuses_naming_the_first_bad_link(a, b, bw, lat, fragment):
    with pytest.raises(UsageError, match=fragment):
        Link(a=a, b=b, bandwidth=bw, latency=lat)
    with pytest.raises(UsageError, match=fragment):
        LinkTable([0, a], [1, b], [1.0, bw], [0.0, lat])


def test_a_table_refuses_ragged_columns_and_kinds_outside_its_labels():
    with pytest.raises(UsageError, match="one entry per link"):
        LinkTable([0, 1], [1], [1.0, 1.0], [0.0, 0.0])
    with pytest.raises(UsageError, match="kind must index"):
        LinkTable([0], [1], [1.0], [0.0], kind=[2], labels=("x",))


def test_a_cluster_keeps_its_links_as_a_table_and_checks_their_ends():
    devs = (Device(name="a", kind="accelerator"), Device(name="b", kind="accelerator"))
    c = Cluster(devices=devs, links=(Link(a=0, b=1, bandwidth=2.0),))
    assert isinstance(c.links, LinkTable) and c.links == (Link(a=0, b=1, bandwidth=2.0),)
    with pytest.raises(UsageError, match="link 0-2: the cluster has 2 devices"):
        Cluster(devices=devs, links=(Link(a=0, b=2, bandwidth=2.0),))


@pytest.mark.parametrize("spec", ["random_blk_1:n=8,blocks=2", "two-level:nodes=2,gpus=3",
                                  "uniform_dist:n=6", "torus2d:x=3,y=2", "dgx1"])
def test_generated_links_round_trip_through_a_cluster_file(spec):
    name, _, rest = spec.partition(":")
    params = dict(p.split("=") for p in rest.split(",")) if rest else {}
    c = generate(name, params)
    back = parse_cluster(json.loads(json.dumps(cluster_to_dict(c))))
    assert back.links == c.links
    assert [x.kind for x in back.links] == [x.kind for x in c.links]
    np.testing.assert_array_equal(back.bandwidth, c.bandwidth)
    np.testing.assert_array_equal(back.latency, c.latency)
    # the objects a table creates are those the generators used to build
    assert all(isinstance(x, Link) for x in c.links)
    assert len({(min(x.a, x.b), max(x.a, x.b)) for x in c.links}) == len(c.links)


def test_generators_name_their_link_kinds():
    assert {x.kind for x in generate("two-level", {"nodes": 2, "gpus": 2}).links} == \
        {"intra", "inter"}
    assert {x.kind for x in generate("mesh3d", {"x": 2, "y": 1, "z": 2}).links} == \
        {"axis0", "axis2"}
    assert set(GENERATORS) >= {"mesh2d", "torus3d"}


@settings(max_examples=40, deadline=None)
@given(st.lists(st.integers(1, 5), min_size=1, max_size=3), st.booleans(),
       st.sampled_from(["widest", "store-and-forward"]), st.floats(1e-3, 1e3),
       st.sampled_from([0.0, 1e-6, 0.3]))
def test_grid_matrices_by_distance_equal_the_routed_ones(dims, wrap, rule, bw, lat):
    n = math.prod(dims)
    if n < 2:
        return
    index = np.arange(n).reshape(dims)
    links = []
    for axis, k in enumerate(dims):
        for cell in itertools.product(*(range(x) for x in dims)):
            nxt = list(cell)
            nxt[axis] += 1
            if nxt[axis] == k:
                if not wrap or k <= 2:
                    continue
                nxt[axis] = 0
            links.append((int(index[cell]), int(index[tuple(nxt)])))
    a, b = ([x[i] for x in links] for i in range(2))
    want_bw, want_lat, _ = route(n, a, b, [bw] * len(links), [lat] * len(links), rule=rule)
    got_bw, got_lat = route_grid(dims, wrap, bw, lat, rule=rule)
    np.testing.assert_array_equal(got_bw, want_bw)
    np.testing.assert_array_equal(got_lat, want_lat)


def test_cluster_from_links_takes_a_table_without_building_link_objects(monkeypatch):
    made = []
    monkeypatch.setattr(LinkTable, "_make", lambda self, k: made.append(k))
    devs = [Device(name=f"g{i}", kind="accelerator") for i in range(40)]
    ii, jj = np.triu_indices(40, 1)
    c = cluster_from_links(devs, LinkTable(ii, jj, np.full(ii.size, 2.0), np.zeros(ii.size)),
                           routing="store-and-forward")
    assert len(c.links) == 780 and c.bandwidth[0, 1] == 2.0 and not made


def test_cluster_show_json_of_a_large_complete_topology_lists_the_first_links(capsys):
    code = main(["cluster", "show", "random_blk_1:n=300,blocks=3", "--json"])
    doc = json.loads(capsys.readouterr().out)
    assert code == 0 and doc["n_links"] == 300 * 299 // 2 and len(doc["links"]) == 64
    assert sum(p["pairs"] for p in doc["bandwidth_pairs"]) == doc["n_links"]
    assert {x["kind"] for x in doc["links"]} <= {"", "intra", "inter"}
