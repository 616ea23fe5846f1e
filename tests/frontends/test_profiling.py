"""Profiling mode: measured CPU medians replace the estimates (no timed assertions)."""

from __future__ import annotations

import warnings
from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch", reason="profiling torch models needs torch")

from dnnpart.frontends.sources import import_source, resolve_model  # noqa: E402


def test_fx_profiling_replaces_the_cpu_column_of_resnet50() -> None:
    source = resolve_model("builtin:resnet50", input_shapes=[(1, 3, 64, 64)])
    estimated = import_source(source)
    measured = import_source(source, profile=True, profile_repeats=2, profile_warmup=1)
    assert measured.measured and not estimated.measured
    assert measured.graph.n_nodes == estimated.graph.n_nodes
    cpu = measured.graph.time_on("cpu")
    assert np.all(cpu > 0)
    assert not np.allclose(cpu, estimated.graph.time_on("cpu"))
    np.testing.assert_array_equal(
        measured.graph.time_on("accelerator"), estimated.graph.time_on("accelerator")
    )


def test_onnx_profiling_with_onnxruntime(tmp_path: Path) -> None:
    pytest.importorskip(
        "onnxruntime", reason="ONNX profiling needs onnxruntime (pip install 'dnnpart[onnx]')"
    )
    model = torch.nn.Sequential(
        torch.nn.Conv2d(3, 8, 3), torch.nn.ReLU(), torch.nn.Flatten(), torch.nn.Linear(8 * 14 * 14, 10)
    ).eval()
    path = tmp_path / "small.onnx"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        torch.onnx.export(model, (torch.randn(1, 3, 16, 16),), str(path), dynamo=False, opset_version=17)
    source = resolve_model(str(path))
    measured = import_source(source, profile=True, profile_repeats=3, profile_warmup=1)
    assert measured.measured
    assert np.all(measured.graph.time_on("cpu") > 0)
