"""Hardening: any --cluster SPEC or cluster-file link list is a cluster or one clean error."""

from __future__ import annotations

import math

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from dnnpart.cli.main import main
from dnnpart.cost import resolve_cluster
from dnnpart.devices.topology import GENERATORS
from dnnpart.errors import FormatError
from dnnpart.io import parse_cluster

KEYS = ["x", "y", "z", "n", "blocks", "nodes", "gpus", "bw", "latency", "seed", "lo", "hi",
        "intra", "inter", "memory", "routed", "intra_lo", "inter_hi", "bogus", ""]
VALUES = ["0", "1", "2", "3", "-1", "1.5", "1e9", "inf", "nan", "abc", "", "999999", "1e400", "4"]


@st.composite
def specs(draw):
    name = draw(st.sampled_from([*GENERATORS, "nosuch", "", "4xA100", "0xA100", "2xA100+x"]))
    params = draw(st.lists(st.tuples(st.sampled_from(KEYS), st.sampled_from(VALUES)), max_size=4))
    sep = draw(st.sampled_from([":", ":", "::", ""]))
    return name + sep + ",".join(f"{k}={v}" if draw(st.booleans()) else k for k, v in params)


@settings(max_examples=150, deadline=None)
@given(specs())
def test_cluster_specs_resolve_or_fail_cleanly(spec):
    try:
        c = resolve_cluster(spec).cluster
    except FormatError as exc:
        assert str(exc) and "\n" not in str(exc)
        return
    assert c.n_devices >= 1
    off = c.bandwidth[~np.eye(c.n_devices, dtype=bool)]
    assert not (off <= 0).any()  # every pair can talk


@settings(max_examples=40, deadline=None)
@given(specs())
def test_cluster_show_gives_exit_0_or_2_and_one_error_line(spec):
    import contextlib
    import io

    err = io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
        code = main(["cluster", "show", spec, "--json"])
    assert code in (0, 2)
    if code == 2:
        assert err.getvalue().startswith("error:") or "usage" in err.getvalue()
        assert "Traceback" not in err.getvalue()


NAMES = ["g0", "g1", "g2", "gX", "", 3, None]
NUMS = [1, 0, -1, "2e9", "abc", math.inf, None, True, [1]]


@settings(max_examples=150, deadline=None)
@given(st.lists(st.fixed_dictionaries({
    "a": st.sampled_from(NAMES), "b": st.sampled_from(NAMES),
    "bandwidth": st.sampled_from(NUMS), "latency": st.sampled_from(NUMS)}), max_size=4))
def test_cluster_file_link_lists_parse_or_fail_cleanly(links):
    doc = {"devices": [{"name": "g", "count": 3, "kind": "accelerator"}], "links": links}
    try:
        c = parse_cluster(doc)
    except FormatError as exc:
        assert str(exc) and "\n" not in str(exc)
        return
    assert c.n_devices == 3 and len(c.links) == len(links)
