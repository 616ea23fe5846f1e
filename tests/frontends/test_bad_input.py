"""Bad input gives a clear message and exit code 2; a missing extra gives exit code 3."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from dnnpart.cli.main import main
from dnnpart.errors import FormatError, MissingDependencyError

onnx = pytest.importorskip("onnx", reason="the ONNX frontend needs onnx (pip install 'dnnpart[onnx]')")
from onnx import TensorProto, helper  # noqa: E402

from dnnpart.frontends.onnx_import import import_onnx  # noqa: E402


def _tiny(path: Path, op: str = "Relu", domain: str = "") -> Path:
    node = helper.make_node(op, ["x"], ["y"], name="only", domain=domain)
    graph = helper.make_graph(
        [node],
        "tiny",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["n", 4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["n", 4])],
    )
    opsets = [helper.make_opsetid("", 17)] + ([helper.make_opsetid(domain, 1)] if domain else [])
    onnx.save(helper.make_model(graph, opset_imports=opsets), str(path))
    return path


def test_corrupt_onnx_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bad = tmp_path / "bad.onnx"
    bad.write_bytes(b"\x00\x01 this is not a protobuf \xff" * 10)
    with pytest.raises(FormatError, match="not a readable ONNX model"):
        import_onnx(bad)
    assert main(["import", str(bad), "-o", str(tmp_path / "g.json")]) == 2
    assert "not a readable ONNX model" in capsys.readouterr().err


def test_symbolic_or_wrong_input_shape(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = _tiny(tmp_path / "tiny.onnx")
    with pytest.raises(FormatError, match=r"symbolic shape.*--input-shape"):
        import_onnx(path)
    with pytest.raises(FormatError, match="rank 2"):
        import_onnx(path, input_shapes=[(1, 2, 3)])
    with pytest.raises(FormatError, match="has shape"):
        import_onnx(path, input_shapes=[(2, 5)])
    assert main(["import", str(path), "--input-shape", "2,4", "-o", str(tmp_path / "g.json")]) == 0
    assert main(["import", str(path), "--input-shape", "2,x", "-o", str(tmp_path / "g.json")]) == 2
    assert main(["import", str(path), "--input-shape", "1,2,3", "-o", str(tmp_path / "g.json")]) == 2
    assert "rank 2" in capsys.readouterr().err


def test_unknown_operator_is_listed_in_a_warning(tmp_path: Path) -> None:
    path = _tiny(tmp_path / "custom.onnx", op="MyFancyOp", domain="com.example")
    model = onnx.load(str(path))
    # shape inference knows nothing of a custom op: give its output shape in the file
    del model.graph.output[:]
    model.graph.output.append(helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 4]))
    model.graph.value_info.append(helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 4]))
    with pytest.warns(UserWarning, match="MyFancyOp"):
        imported = import_onnx(model, input_shapes=[(2, 4)])
    assert imported.unknown_ops == {"MyFancyOp": 1}
    assert imported.graph.time_on("accelerator")[0] > 0


def test_missing_extra_exits_3(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    path = _tiny(tmp_path / "tiny.onnx")
    monkeypatch.setitem(sys.modules, "onnx", None)  # import onnx now raises ImportError
    with pytest.raises(MissingDependencyError, match=r"dnnpart\[onnx\]"):
        import_onnx(path)
    assert main(["import", str(path), "--input-shape", "2,4", "-o", str(tmp_path / "g.json")]) == 3
    monkeypatch.setitem(sys.modules, "torch", None)
    assert main(["import", "builtin:resnet50", "-o", str(tmp_path / "g.json")]) == 3
    assert "dnnpart[torch]" in capsys.readouterr().err


def test_module_that_fails_to_trace(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    torch = pytest.importorskip("torch")
    from dnnpart.frontends.fx_import import import_module

    class DataDependent(torch.nn.Module):
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            if x.sum() > 0:  # control flow on a traced value
                return x * 2
            return x

    with pytest.raises(FormatError, match="ONNX"):
        import_module(DataDependent(), (torch.randn(2),))
    mod = tmp_path / "untraceable_mod.py"
    mod.write_text(
        "import torch\n\nclass M(torch.nn.Module):\n    def forward(self, x):\n"
        "        return x * 2 if x.sum() > 0 else x\n\ndef make():\n    return M()\n"
    )
    monkeypatch = pytest.MonkeyPatch()
    monkeypatch.syspath_prepend(str(tmp_path))
    try:
        code = main(
            ["import", "module:untraceable_mod:make", "--input-shape", "2,3", "-o", str(tmp_path / "g.json")]
        )
    finally:
        monkeypatch.undo()
    assert code == 2
    err = capsys.readouterr().err
    assert "could not capture" in err and "ONNX" in err
    assert main(["import", "builtin:nosuchnet", "-o", str(tmp_path / "g.json")]) == 2
    assert main(["import", "module:untraceable_mod", "-o", str(tmp_path / "g.json")]) == 2
