"""``calibrate`` and machine files meet the hardening promises of the other commands: unknown
options and bad values end in exit 2, Ctrl-C in 130 with no file written, a missing torch in
exit 3; a malformed machine file (bad ``op_classes`` fields, negative rates, numbers past
float64, a catalog without its cluster) ends in one ``error:`` line naming the field, exit 2."""

from __future__ import annotations

import json
import random
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "fuzz"))
from clirun import assert_one_error_line, run_cli
from corpus import reference_graph

GOOD_DEVICE = {"kind": "accelerator", "peak_flops": 1e11, "memory_bandwidth": 1e10,
               "launch_overhead_s": 5e-6, "default_link": "box-gloo", "host_link": "box-gloo",
               "op_classes": {"matmul": {"flops": 7e10, "bytes": 1e10, "overhead_s": 2e-6},
                              "view": {"overhead_s": 5e-6}}}
GOOD = {"cluster": "2xbox", "devices": {"box": GOOD_DEVICE},
        "links": {"box-gloo": {"bandwidth": 1e9, "latency": 2e-4}}}
BAD_VALUES: list[Any] = ["abc", -5, 0, None, [1], {"a": 1}, True, int("9" * 330), "1e999", 1e300, "nan"]


@pytest.fixture()
def graph_file(tmp_path: Path) -> Path:
    path = tmp_path / "g.json"
    path.write_text(json.dumps(reference_graph(5)))
    return path


def _write(tmp_path: Path, name: str, data: Any) -> Path:
    path = tmp_path / name
    path.write_text(yaml.safe_dump(data) if not isinstance(data, str) else data)
    return path


def test_a_good_machine_file_is_a_cluster(tmp_path: Path, graph_file: Path) -> None:
    code, _, err = run_cli(["info", str(graph_file), "--cluster", str(_write(tmp_path, "m.yaml", GOOD))])
    assert code == 0, err


def _bad_machine(rng: random.Random) -> tuple[dict[str, Any], str]:
    data = json.loads(json.dumps(GOOD))
    device = data["devices"]["box"]
    kind = rng.randrange(5)
    if kind == 0:  # a class's parameter
        cls = rng.choice(("matmul", "view"))
        key = rng.choice(("flops", "bytes", "overhead_s"))
        value = rng.choice([v for v in BAD_VALUES if v is not None])
        if key == "overhead_s" and value == 0:
            value = -1e-6
        device["op_classes"][cls][key] = value
        return data, f"devices.box.op_classes.{cls}.{key}"
    if kind == 1:  # an unknown class or field, or a class that is no mapping
        which = rng.randrange(3)
        if which == 0:
            bad = rng.choice(("matmull", "matmul:NT", "matmul:", "matmul:nt@x", "kind:tanh"))
            device["op_classes"][bad] = {"flops": 1e9}
            return data, f"devices.box.op_classes.{bad}"
        if which == 1:
            device["op_classes"]["matmul"]["flop"] = 1e9
            return data, "devices.box.op_classes.matmul"
        device["op_classes"]["matmul"] = rng.choice((5, [1], "fast", {}))
        return data, "devices.box.op_classes.matmul"
    if kind == 2:  # a device's roofline field
        key = rng.choice(("peak_flops", "memory_bandwidth", "launch_overhead_s", "fresh_bytes_rate"))
        device[key] = rng.choice(["abc", -5, int("9" * 330), "1e999", [1]])
        return data, "devices.box"
    if kind == 3:  # the measured link
        key = rng.choice(("bandwidth", "latency"))
        data["links"]["box-gloo"][key] = rng.choice(["abc", -5, int("9" * 330), "1e999"])
        return data, "links.box-gloo"
    # the cluster entry
    value = rng.choice((None, "box", "2x", 5, "two boxes", "2xnosuch"))
    if value is None:
        del data["cluster"]
        return data, "cluster: 2xbox"
    data["cluster"] = value
    return data, "nosuch" if value == "2xnosuch" else "cluster"


def test_seeded_bad_machine_files_name_the_field(tmp_path: Path, graph_file: Path) -> None:
    rng = random.Random(2901)
    for i in range(60):
        data, field = _bad_machine(rng)
        path = _write(tmp_path, f"m{i}.yaml", data)
        argv = rng.choice((["info", str(graph_file), "--cluster", str(path)],
                           ["cluster", "show", str(path)]))
        code, _, err = run_cli(argv)
        assert code == 2, f"{data} {argv}: exit {code}\n{err}"
        assert_one_error_line(code, err, must_name=field)


@pytest.mark.parametrize(("argv", "field"), [
    (["--threads", "0"], "--threads"),
    (["--threads", "-3"], "--threads"),
    (["--threads", "100000"], "--threads"),
])
def test_bad_option_values_are_one_error_line(tmp_path: Path, argv: list[str], field: str) -> None:
    out = tmp_path / "m.yaml"
    code, _, err = run_cli(["calibrate", *argv, "-o", str(out)])
    assert code == 2
    assert_one_error_line(code, err, must_name=field)
    assert not out.exists()


@pytest.mark.parametrize("argv", [
    ["--bogus"], ["--threads", "abc"], ["--device", "tpu"], ["--quick=yes"],
])
def test_unknown_options_and_untyped_values_are_usage_errors(tmp_path: Path, argv: list[str]) -> None:
    code, _, err = run_cli(["calibrate", *argv, "-o", str(tmp_path / "m.yaml")])
    assert code == 2 and "Traceback" not in err and "error:" in err


def test_an_out_path_that_cannot_be_written_is_refused_before_measuring(tmp_path: Path) -> None:
    target = tmp_path / "missing" / "m.yaml"
    code, _, err = run_cli(["calibrate", "--quick", "-o", str(target)])
    assert code == 2
    assert_one_error_line(code, err, must_name=str(target))
    code, _, err = run_cli(["calibrate", "--quick"])  # -o is required
    assert code == 2 and "--out" in err


def test_cuda_on_a_machine_without_it_names_the_option(tmp_path: Path) -> None:
    torch = pytest.importorskip("torch")
    if torch.cuda.is_available():
        pytest.skip("this machine has CUDA")
    code, _, err = run_cli(["calibrate", "--device", "cuda", "-o", str(tmp_path / "m.yaml")])
    assert code == 2
    assert_one_error_line(code, err, must_name="--device cuda")


def test_without_torch_calibrate_is_exit_3(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "torch", None)  # `import torch` now fails
    code, _, err = run_cli(["calibrate", "--quick", "-o", str(tmp_path / "m.yaml")])
    assert code == 3
    assert_one_error_line(code, err, must_name="dnnpart[torch]")


@pytest.mark.parametrize("where", ["_measure_ops", "measure_link"])
def test_ctrl_c_is_exit_130_and_writes_nothing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                               where: str) -> None:
    pytest.importorskip("torch")
    from dnnpart.workflow import calibrating, calibrating_link

    def interrupted(*args: object, **kwargs: object) -> Any:
        raise KeyboardInterrupt

    if where == "measure_link":  # the operators measured (none, here), then Ctrl-C
        monkeypatch.setattr(calibrating, "_measure_ops", lambda *a, **k: (_tiny_samples(), []))
        monkeypatch.setattr(calibrating_link, "measure_link", interrupted)
    else:
        monkeypatch.setattr(calibrating, "_measure_ops", interrupted)
    out = tmp_path / "m.yaml"
    code, _, err = run_cli(["calibrate", "--quick", "-o", str(out)])
    assert code == 130 and "interrupted" in err
    assert not out.exists() and not list(tmp_path.iterdir())


def _tiny_samples() -> list[Any]:
    from dnnpart.workflow.calibrating import Sample

    return [Sample("elementwise", "tiny add:add", 1.0, 12.0, 5e-6),
            Sample("elementwise", "add:add", 1e6, 1.2e7, 1e-3)]


def test_a_deeply_nested_spec_file_is_a_format_error(tmp_path: Path) -> None:
    from dnnpart.cost import load_catalog
    from dnnpart.errors import FormatError

    path = _write(tmp_path, "deep.yaml", "[" * 50_000)  # the YAML parser would recurse past the stack
    with pytest.raises(FormatError, match="nested"):
        load_catalog(path)
