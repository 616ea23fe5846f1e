"""Cluster inputs refused with exit 2 and the field named: generator parameters out of range
(driven by the generator registry), cluster-file fields, alias bombs; `cluster show --json`
bounded."""

from __future__ import annotations

import json

import pytest

from dnnpart.cli.main import main
from dnnpart.devices.topology import (
    _INT_PARAMS,
    _LATENCY_PARAMS,
    _MEMORY_PARAMS,
    GENERATORS,
    generator_parameters,
)


def run(capsys, *argv):
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def bad_values(key):
    """Values out of ``key``'s documented range."""
    if key == "routing":
        return ["shortest", "1"]
    if key in _INT_PARAMS:
        return [str(_INT_PARAMS[key] - 1), "1.5", "nan"] + (["2"] if key == "routed" else [])
    if key in _LATENCY_PARAMS:
        return ["-1", "inf", "nan"]
    if key in _MEMORY_PARAMS:
        return ["-1", "nan"]
    return ["0", "-5", "inf", "nan"]  # bandwidths


CASES = [(name, key, value) for name in GENERATORS for key in generator_parameters(name)
         for value in bad_values(key)]


@pytest.mark.parametrize(("name", "key", "value"), CASES)
def test_every_generator_parameter_out_of_range_is_refused_naming_it(capsys, name, key, value):
    code, _, err = run(capsys, "cluster", "show", f"{name}:{key}={value}")
    assert code == 2, err
    assert err.startswith("error:") and len(err.strip().splitlines()) == 1
    assert key in err


@pytest.mark.parametrize("name", list(GENERATORS))
def test_every_generator_takes_routing(capsys, name):
    code, _, err = run(capsys, "cluster", "show", f"{name}:routing=store-and-forward")
    assert code == 0, err


def write(tmp_path, text):
    p = tmp_path / "c.yaml"
    p.write_text(text)
    return str(p)


DEVS = "devices:\n  - {name: g, count: 3, kind: accelerator}\n"


@pytest.mark.parametrize(("text", "field"), [
    (DEVS + "links: []\n", "links"),
    ("devices:\n  - {name: g, count: 2, kind: accelerator, spec_: 1}\n", "spec_"),
    ("devices:\n  - {name: g, count: 2, kind: accelerator, flops: 1}\n", "flops"),
    (DEVS + "links:\n  - {a: g0, b: g1, bandwidth: 1, colour: red}\n", "colour"),
    (DEVS + "routing: [1, 2]\nlinks:\n  - {a: g0, b: g1, bandwidth: 1}\n  - {a: g1, b: g2, bandwidth: 1}\n",
     "routing"),
    (DEVS + "routing: direct\n", "routing"),
    (DEVS + "name: " + "x" * 500 + "\n", "name"),
    (DEVS + "nmae: typo\n", "nmae"),
])
def test_bad_cluster_file_fields_are_refused_naming_them(capsys, tmp_path, text, field):
    code, _, err = run(capsys, "cluster", "show", write(tmp_path, text))
    assert code == 2, err
    assert err.startswith("error:") and field in err and len(err) < 400


@pytest.mark.parametrize("field", ["name", "routing"])
def test_yaml_alias_bomb_is_refused_small_and_fast(capsys, tmp_path, field):
    lines = ['a0: &a0 ["xxxxxxxxxx","xxxxxxxxxx","xxxxxxxxxx","xxxxxxxxxx","xxxxxxxxxx"]']
    for i in range(1, 10):
        prev = f"*a{i - 1}"
        lines.append(f"a{i}: &a{i} [{', '.join([prev] * 9)}]")
    text = "\n".join(lines).replace("a0:", "x0:").split("\n")
    body = "\n".join(f"  {line}" for line in text)
    doc = f"junk:\n{body}\n{DEVS}{field}: *a9\n"
    code, _, err = run(capsys, "cluster", "show", write(tmp_path, doc))
    assert code == 2, err
    assert err.startswith("error:") and "alias" in err and len(err) < 400


def test_cluster_show_json_of_a_large_cluster_is_summarised(capsys):
    code, out, err = run(capsys, "cluster", "show", "4096xA100", "--json")
    assert code == 0, err
    assert len(out) < 2_000_000
    payload = json.loads(out)
    assert payload["bandwidth"] is None and len(payload["devices"]) == 4096
    assert sum(x["pairs"] for x in payload["bandwidth_pairs"]) == 4096 * 4095 // 2
    code, out, _ = run(capsys, "cluster", "show", "4xA100", "--json")
    assert len(json.loads(out)["bandwidth"]) == 4


def test_two_level_of_1024_routes_by_its_hierarchy(capsys):
    code, _, err = run(capsys, "cluster", "show", "two-level:nodes=128,gpus=8")
    assert code == 0, err


def test_complete_topology_above_the_link_bound_is_refused_before_building(capsys):
    code, _, err = run(capsys, "cluster", "show", "uniform_dist:n=4096")
    assert code == 2 and "4,096 devices" in err and "1,048,576" in err
