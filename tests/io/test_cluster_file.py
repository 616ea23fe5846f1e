"""Cluster files (JSON/YAML): presets, explicit devices, numbers as strings, bad fields."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest

from dnnpart.devices import PCIE3_X16_BANDWIDTH
from dnnpart.errors import FormatError
from dnnpart.io import parse_cluster, read_cluster


def _yaml(tmp_path: Path, text: str, name: str = "cluster.yaml") -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def test_reference_preset_from_yaml_with_string_numbers(tmp_path: Path) -> None:
    # YAML 1.1 reads 16e9 (no dot) as a string; it must still be a number here
    c = read_cluster(_yaml(tmp_path, "preset: reference\naccelerators: 6\ncpus: 1\nmemory_bytes: 16e9\n"))
    assert [d.name for d in c.devices] == [f"acc{i}" for i in range(6)] + ["cpu0"]
    assert c.n_accelerators == 6 and c.n_cpus == 1
    assert all(d.memory_bytes == 16e9 for d in c.devices if d.is_accelerator)
    assert all(d.memory_bytes == math.inf for d in c.devices if not d.is_accelerator)
    assert c.bandwidth[0, 1] == pytest.approx(PCIE3_X16_BANDWIDTH / 2)


def test_reference_preset_from_json(tmp_path: Path) -> None:
    path = tmp_path / "c.json"
    path.write_text(json.dumps({"preset": "reference", "accelerators": 2, "memory_bytes": 1e9}))
    c = read_cluster(path)
    assert (c.n_accelerators, c.n_cpus) == (2, 0)


def test_reference_preset_without_memory_is_unbounded() -> None:
    c = parse_cluster({"preset": "reference", "accelerators": 1, "cpus": 1})
    assert c.devices[0].memory_bytes == math.inf


def test_two_level_preset(tmp_path: Path) -> None:
    c = read_cluster(_yaml(tmp_path, """
preset: two-level
groups: 2
accelerators_per_group: 3
memory_bytes: 32e9
intra_bandwidth: 150e9
inter_bandwidth: "12.5e9"
cpus: 1
"""))
    assert c.n_accelerators == 6 and c.n_cpus == 1
    assert c.group[:6].tolist() == [0, 0, 0, 1, 1, 1]
    assert c.bandwidth[0, 1] == 150e9 and c.bandwidth[0, 3] == 12.5e9
    assert all(d.memory_bytes == 32e9 for d in c.devices if d.is_accelerator)


def test_explicit_devices_with_count(tmp_path: Path) -> None:
    c = read_cluster(_yaml(tmp_path, """
devices:
  - {name: gpu, count: 3, kind: accelerator, memory_bytes: 16e9, speed: 2.0, host_link_scale: 0.5}
  - {name: host, kind: cpu}
"""))
    assert [d.name for d in c.devices] == ["gpu0", "gpu1", "gpu2", "host"]
    assert [d.kind for d in c.devices] == ["accelerator"] * 3 + ["cpu"]
    assert [d.speed for d in c.devices] == [2.0, 2.0, 2.0, 1.0]
    assert c.host_link_scale.tolist() == [0.5, 0.5, 0.5, 1.0]
    assert c.devices[0].memory_bytes == 16e9 and c.devices[3].memory_bytes == math.inf


def test_explicit_bandwidth_matrix() -> None:
    c = parse_cluster({
        "devices": [{"name": "a", "kind": "accelerator"}, {"name": "b", "kind": "accelerator"}],
        "bandwidth": [[math.inf, "1e9"], [2e9, "inf"]],
    })
    np.testing.assert_array_equal(c.bandwidth, [[math.inf, 1e9], [2e9, math.inf]])


@pytest.mark.parametrize(
    ("data", "fragments"),
    [
        ({"preset": "mesh"}, ["preset", "mesh"]),
        ({"preset": "reference", "accelerators": -1}, ["accelerators"]),
        ({"preset": "reference", "accelerators": "two"}, ["accelerators"]),
        ({"preset": "reference", "accelerators": 2, "memory_bytes": "lots"}, ["memory_bytes", "lots"]),
        ({"preset": "reference", "accelerators": 2, "memory_bytes": -5}, ["memory_bytes"]),
        ({"preset": "reference", "accelerators": 0, "cpus": 0}, ["device"]),
        ({"preset": "two-level", "groups": 0, "accelerators_per_group": 2, "intra_bandwidth": 1,
          "inter_bandwidth": 1}, ["groups"]),
        ({"preset": "two-level", "groups": 2, "accelerators_per_group": 2, "inter_bandwidth": 1},
         ["intra_bandwidth"]),
        ({}, ["devices"]),
        ({"devices": []}, ["devices"]),
        ({"devices": "gpu"}, ["devices"]),
        ({"devices": [{"name": "g", "kind": "tpu"}]}, ["devices[0].kind", "tpu"]),
        ({"devices": [{"kind": "cpu"}]}, ["devices[0].name"]),
        ({"devices": [{"name": "g", "kind": "cpu", "count": 0}]}, ["devices[0].count"]),
        ({"devices": [{"name": "g", "kind": "cpu", "speed": 0}]}, ["devices[0].speed"]),
        ({"devices": [{"name": "g", "kind": "cpu", "speed": "fast"}]}, ["devices[0].speed"]),
        ({"devices": [{"name": "c", "kind": "cpu"}, {"name": "g", "kind": "accelerator",
                                                       "memory_bytes": "-1"}]},
         ["devices[1].memory_bytes"]),
        ({"devices": [{"name": "g", "kind": "cpu"}, {"name": "g", "kind": "cpu"}]}, ["duplicate", "g"]),
        ({"devices": [{"name": "g", "kind": "cpu"}], "bandwidth": [[1, 2]]}, ["bandwidth[0]"]),
        ({"devices": [{"name": "g", "kind": "cpu"}], "bandwidth": [[1], [2]]}, ["bandwidth"]),
        ({"devices": [{"name": "g", "kind": "cpu"}], "bandwidth": [["x"]]}, ["bandwidth[0][0]"]),
        ([1, 2], ["expected an object"]),
    ],
)
def test_bad_cluster_fields(data, fragments) -> None:
    with pytest.raises(FormatError) as info:
        parse_cluster(data)
    for fragment in fragments:
        assert fragment in str(info.value), str(info.value)


def test_bad_files(tmp_path: Path) -> None:
    with pytest.raises(FormatError, match="no such file"):
        read_cluster(tmp_path / "none.yaml")
    with pytest.raises(FormatError, match="no such file"):
        read_cluster(tmp_path / "none.json")
    with pytest.raises(FormatError, match="YAML"):
        read_cluster(_yaml(tmp_path, "devices: [unclosed\n"))
    with pytest.raises(FormatError, match="invalid JSON"):
        read_cluster(_yaml(tmp_path, "{devices", name="c.json"))
    with pytest.raises(FormatError):
        read_cluster(_yaml(tmp_path, ""))  # an empty YAML document is null, not a mapping


def test_time_unit_is_read_and_validated() -> None:
    from dnnpart.io.cluster_file import parse_cluster

    doc = {"preset": "reference", "accelerators": 2, "cpus": 1}
    assert parse_cluster(doc).time_unit_s == 1e-3
    assert parse_cluster({**doc, "time_unit_s": 1.0}).time_unit_s == 1.0
    for bad in (0, -1, "ms"):
        with pytest.raises(FormatError, match="time_unit_s"):
            parse_cluster({**doc, "time_unit_s": bad})
