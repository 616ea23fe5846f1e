"""Class 8 of issue 13: one ``error:`` line naming the field, what was expected, what was got.

200 seeded bad values in graph, cluster, plan and hybrid plan files (wrong types, negative sizes, huge
numbers, nulls, lists) must each produce one line of the form ``PATH: expected ..., got ...``
where PATH is the offending field, and exit 2.
"""

from __future__ import annotations

import json
import random
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "fuzz"))
from clirun import assert_one_error_line, run_cli
from corpus import hybrid_plan, reference_graph

BAD_VALUES: list[Any] = ["abc", -5, None, [1], {"a": 1}, True, int("9" * 330), "1e999"]
NODE_FIELDS = ("cpuLatency", "fpgaLatency", "size", "colorClass", "layerId", "supportedOnFpga")
CLUSTER_FIELDS = ("memory_bytes", "speed", "count", "host_link_scale")


#: fields of a hybrid plan file (``plan --parallel -o``) that ``report`` reads, as paths
HYBRID_FIELDS = (("bound_s",), ("devices",), ("global_batch",), ("launchable", "step_s"),
                 ("launchable", "config", "data"), ("best", "config", "microbatches"),
                 ("launchable", "stages", 0, "tau_s"), ("launchable", "stages", 0, "memory_bytes"),
                 ("launchable", "stages", 0, "in_flight"), ("model",))


def _hybrid_case(rng: random.Random, folder: Path, i: int) -> tuple[list[str], str]:
    data = hybrid_plan()
    path = rng.choice(HYBRID_FIELDS)
    target = data
    for key in path[:-1]:
        target = target[key]
    value = rng.choice([v for v in BAD_VALUES if not (path == ("model",) and isinstance(v, str))])
    target[path[-1]] = value
    q = folder / f"hybrid{i}.json"
    q.write_text(json.dumps(data))
    name = ".".join(str(k) for k in path).replace(".0.", "[0].")
    return ["report", str(q), "-o", str(folder / f"page{i}.html")], name


def _case(rng: random.Random, folder: Path, i: int) -> tuple[list[str], str]:
    kind = rng.randrange(4)
    if kind == 3:
        return _hybrid_case(rng, folder, i)
    g = reference_graph(rng.randint(3, 6), rng)
    if kind == 0:
        node = rng.randrange(len(g["nodes"]))
        key = rng.choice(NODE_FIELDS)
        value = rng.choice(BAD_VALUES)
        if key in ("colorClass", "layerId") and value is None:
            value = "x"  # null is "no class" there
        if key == "supportedOnFpga" and value in (True,):
            value = 7
        if key in ("colorClass", "layerId") and value == -5:
            value = 1.5
        g["nodes"][node][key] = value
        p = folder / f"g{i}.json"
        p.write_text(json.dumps(g))
        return ["info", str(p)], f"nodes[{node}].{key}"
    if kind == 1:
        key = rng.choice(CLUSTER_FIELDS)
        value = rng.choice([v for v in BAD_VALUES if v is not None and v != "1e999"])
        device = {"name": "a", "kind": "accelerator", key: value}
        c = folder / f"c{i}.json"
        c.write_text(json.dumps({"devices": [device]}))
        p = folder / f"g{i}.json"
        p.write_text(json.dumps(g))
        return ["info", str(p), "--cluster", str(c)], f"devices[0].{key}"
    p = folder / f"g{i}.json"
    p.write_text(json.dumps(g))
    plan = {"fpgas": [{"nodes": [rng.choice(["x", 1.5, None, [0], int("9" * 40)])]}], "cpus": []}
    q = folder / f"plan{i}.json"
    q.write_text(json.dumps(plan))
    return ["evaluate", str(p), str(q)], "fpgas[0].nodes[0]"


def test_seeded_field_errors_name_the_field(tmp_path: Path) -> None:
    rng = random.Random(1309)
    for i in range(200):
        argv, field = _case(rng, tmp_path, i)
        code, _, err = run_cli(argv)
        assert code == 2, (argv, err)
        line = assert_one_error_line(code, err, must_name=field)
        assert "expected" in line, line
        assert "got" in line or "digits" in line, line
    assert not list(tmp_path.glob("page*.html")), "a refused hybrid plan left a page behind"
    assert list(tmp_path.glob("hybrid*.json")), "no hybrid plan file was drawn"
