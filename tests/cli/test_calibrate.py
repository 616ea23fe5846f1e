"""``dnnpart calibrate``: the real command once (``--quick``), the file it writes, and the
acceptance check of issue 29: planning with ``--cluster machine.yaml`` prices every operator
with the file's calibrated parameters."""

from __future__ import annotations

import contextlib
import io
import json
import math
import os
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import yaml

pytest.importorskip("torch", reason="calibrate measures with torch")

from dnnpart.cli.main import main
from dnnpart.cost import load_catalog, resolve_cluster
from dnnpart.workflow.importing import priced_cluster

MODEL = ["module:dnnpart.frontends.models:shared_relu_resnet", "--input-shape", "1,3,16,16", "--training"]


@pytest.fixture(scope="module")
def calibrated(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str, str]:
    """The real command, once: (machine file, stdout, stderr)."""
    path = tmp_path_factory.mktemp("calibrate") / "box.yaml"
    out, err = io.StringIO(), io.StringIO()
    before = os.environ.get("DNNPART_PROGRESS_SECONDS")
    os.environ["DNNPART_PROGRESS_SECONDS"] = "0.001"  # a progress line for every phase
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            assert main(["calibrate", "--progress", "lines", "--quick", "-o", str(path)]) == 0
    finally:
        if before is None:
            del os.environ["DNNPART_PROGRESS_SECONDS"]
        else:
            os.environ["DNNPART_PROGRESS_SECONDS"] = before
    return path, out.getvalue(), err.getvalue()


@pytest.fixture()
def machine_file(calibrated: tuple[Path, str, str]) -> Path:
    return calibrated[0]


def test_the_machine_file_is_a_catalog_and_a_cluster(machine_file: Path) -> None:
    data = yaml.safe_load(machine_file.read_text())
    info = data["calibration"]
    assert info["date"] and info["threads"] == 1 and info["device"] == "cpu"
    assert {"platform", "cpu", "torch", "threads"} <= set(info["machine"])
    spec = load_catalog(machine_file).device("box")
    assert spec.kind == "accelerator" and spec.op_classes
    assert {c.name for c in spec.op_classes} == set(info["fits"])
    for fit in info["fits"].values():  # each class's fit error is recorded
        assert fit["samples"] >= 1 and 0 <= fit["rms_rel_error"] <= fit["max_rel_error"]
    for kind in ("p2p", "allreduce"):
        assert info["link"][kind]["samples"] and info["link"][kind]["bandwidth"] > 0

    pc = resolve_cluster(str(machine_file))
    assert pc.cluster.name == data["cluster"] == "2xbox"
    assert [d.kind for d in pc.cluster.devices] == ["accelerator", "accelerator"]
    assert pc.cost_model.accelerator == spec and pc.cluster.devices[0].spec == spec
    link = data["links"]["box-gloo"]
    assert pc.cluster.bandwidth[0, 1] == pytest.approx(link["bandwidth"])
    assert pc.cluster.latency[0, 1] == pytest.approx(link["latency"])
    # the same file as --specs, with a cluster of another size
    assert priced_cluster("3xbox", specs=machine_file).cluster.n_devices == 3


def _expected_ms(data: dict[str, Any], name: str, work: Any) -> float:
    """An operator's time on the file's device, from the file's numbers (docs/calibrate.md):
    its kind's parameters, else its class's, else the roofline; plus its fresh bytes."""
    dev = data["devices"][name]
    flops, moved = work.flops, work.bytes_moved
    fresh = work.fresh_bytes / float(dev["fresh_bytes_rate"]) if "fresh_bytes_rate" in dev else 0.0
    key = f"{work.op_class}:{work.op_kind}" if work.op_kind else work.op_class
    params = dev["op_classes"].get(key, dev["op_classes"].get(work.op_class))
    if params is None:  # no calibrated class: the device's roofline
        return (max(flops / float(dev["peak_flops"]), moved / float(dev["memory_bandwidth"]))
                + float(dev["launch_overhead_s"]) + fresh) * 1e3
    seconds = float(params.get("overhead_s", 0.0)) + fresh
    seconds += flops / float(params["flops"]) if "flops" in params else 0.0
    seconds += moved / float(params["bytes"]) if "bytes" in params else 0.0
    return seconds * 1e3


def test_plan_with_the_machine_file_prices_by_the_calibrated_classes(
    machine_file: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    import dnnpart.solvers as solvers
    from dnnpart.cost import CostModel

    priced: list[tuple[list[Any], np.ndarray]] = []
    problems: list[Any] = []
    real_price, real_solve = CostModel.compute_times_ms, solvers.solve

    def price(self: CostModel, works: Any) -> np.ndarray:
        out = real_price(self, works)
        priced.append((list(works), out))
        return out

    def solve(problem: Any, method: str, **kwargs: Any) -> Any:
        problems.append(problem)
        return real_solve(problem, method, **kwargs)

    monkeypatch.setattr(CostModel, "compute_times_ms", price)
    monkeypatch.setattr(solvers, "solve", solve)
    code = main(["-q", "plan", *MODEL, "--cluster", str(machine_file), "--json"])
    payload = json.loads(capsys.readouterr().out)
    assert code == 0, payload
    data = yaml.safe_load(machine_file.read_text())
    works, _ = priced[-1]
    expected = np.array([_expected_ms(data, "box", w) for w in works])
    graph = problems[-1].graph
    assert graph.n_nodes == len(works)
    # node v is operator original_ids[v] of the capture (the graph is stored in its own order)
    np.testing.assert_allclose(graph.compute_time[:, 1], expected[graph.original_ids], rtol=1e-9)
    calibrated = {w.op_class for w in works} & set(data["devices"]["box"]["op_classes"])
    assert {"conv", "elementwise", "view"} <= calibrated  # the classes, not the fallback, priced it
    # the plan's predicted compute is the calibrated times': every operator on one of its devices
    devices = payload["evaluation"]["devices"]
    assert sum(d["compute"] for d in devices) == pytest.approx(expected.sum(), rel=1e-9)
    # and not the preset's: the same operators on an A100 take other times
    preset = CostModel.from_presets("A100").compute_times_ms(works)[:, 1]
    assert not np.allclose(preset, expected, rtol=0.1)
    assert math.isfinite(payload["objective"])


def test_calibrate_reports_each_class_and_the_link(calibrated: tuple[Path, str, str]) -> None:
    path, out, err = calibrated
    data = yaml.safe_load(path.read_text())
    for cls in data["devices"]["box"]["op_classes"]:
        assert cls in out
    assert "point-to-point" in out and "all-reduce" in out
    assert f"--cluster {path}" in err and "--specs" in err
    # progress: the phases that take seconds are named while they run (a line is printed
    # on a heartbeat, so a phase of a millisecond -- the fit, the write -- may pass unseen)
    for phase in ("timing linear (matmul", "timing attention", "measuring the gloo link"):
        assert "progress: calibrate" in err and phase in err, phase
