"""ONNX and torch.fx import of ResNet-50, Inception-v3 and a BERT-like encoder.

The two routes must agree: node counts differ only by what torch's ONNX exporter folds
(batch norms into convolutions, nested concatenations, consecutive transposes, the position
ids constant) or splits (``Linear`` on 3-D input -> ``MatMul`` + ``Add``), and total FLOPs are
within 5% of the published multiply-add counts.
"""

from __future__ import annotations

import warnings
from collections import Counter
from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip(
    "torch", reason="the torch.fx frontend needs torch (pip install 'dnnpart[torch]')"
)
onnx = pytest.importorskip("onnx", reason="the ONNX frontend needs onnx (pip install 'dnnpart[onnx]')")

from dnnpart.frontends.fx_import import import_module  # noqa: E402
from dnnpart.frontends.models import InceptionV3, bert_encoder, resnet50  # noqa: E402
from dnnpart.frontends.onnx_import import import_onnx  # noqa: E402
from dnnpart.graph.training import backward_partner  # noqa: E402

#: Published multiply-add counts (x2 = FLOPs) of the convolutions and matrix products:
#: ResNet-50 at 224x224 4.09 G (He et al. 2016 report 3.8 G counting some layers differently;
#: 4.09 G is the figure of torchvision and fvcore), Inception-v3 at 299x299 5.71 G (torchvision).
RESNET50_MACS = 4.09e9
INCEPTION_V3_MACS = 5.71e9


def bert_macs(layers: int, hidden: int, ffn: int, seq: int) -> float:
    """Multiply-adds of a BERT encoder: Q, K, V, O projections, FFN, attention scores and context."""
    return layers * (4 * seq * hidden * hidden + 2 * seq * hidden * ffn + 2 * seq * seq * hidden)


def _export(model: torch.nn.Module, x: torch.Tensor, path: Path) -> Path:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)  # the legacy exporter is deprecated
        torch.onnx.export(model, (x,), str(path), dynamo=False, opset_version=17)
    return path


def _macs(imported) -> float:
    return (
        sum(
            f
            for f, op in zip(imported.flops, imported.ir.ops, strict=True)
            if op.op_type in ("conv", "linear", "matmul")
        )
        / 2
    )


def _counts(imported) -> Counter[str]:
    return Counter(op.op_type for op in imported.ir.ops)


@pytest.fixture(scope="module")
def resnet() -> tuple[torch.nn.Module, torch.Tensor]:
    torch.manual_seed(0)
    return resnet50().eval(), torch.randn(1, 3, 224, 224)


def test_resnet50_fx_and_onnx_agree(resnet, tmp_path: Path) -> None:
    model, x = resnet
    fx = import_module(model, (x,))
    on = import_onnx(_export(model, x, tmp_path / "r50.onnx"))
    assert abs(_macs(fx) / RESNET50_MACS - 1) < 0.05
    assert abs(fx.total_flops / (2 * RESNET50_MACS) - 1) < 0.05
    assert abs(on.total_flops / (2 * RESNET50_MACS) - 1) < 0.05
    # the exporter folds every BatchNorm into its convolution
    assert fx.graph.n_nodes == 175
    assert on.graph.n_nodes == fx.graph.n_nodes - _counts(fx)["batchnorm"] == 122
    assert not fx.unknown_ops and not on.unknown_ops
    # weights memory from parameters: 25.56 M fp32 parameters (+ BN running stats on fx)
    assert on.graph.memory_bytes.sum() > 25.5e6 * 4


def test_fx_nodes_keep_names_and_module_paths(resnet) -> None:
    model, _ = resnet
    fx = import_module(model, (torch.randn(1, 3, 64, 64),))
    assert fx.ir.ops[0].name == "conv1" and fx.ir.ops[0].module_path == "conv1"
    paths = set(fx.module_paths())
    assert "layer1.0.conv1" in paths and "layer4.2.bn3" in paths
    # the residual add is called inside its block, not as a module
    adds = [op for op in fx.ir.ops if op.op_type == "add"]
    assert adds[0].module_path == "layer1.0"
    # every edge carries the bytes of its tensor
    assert np.all(fx.graph.edge_bytes > 0)


def test_inception_v3_flops_and_onnx_node_count(tmp_path: Path) -> None:
    torch.manual_seed(0)
    model = InceptionV3().eval()
    fx = import_module(model, (torch.randn(1, 3, 299, 299),))
    assert abs(_macs(fx) / INCEPTION_V3_MACS - 1) < 0.05
    assert abs(fx.total_flops / (2 * INCEPTION_V3_MACS) - 1) < 0.05
    small = torch.randn(1, 3, 96, 96)
    on = import_onnx(_export(model, small, tmp_path / "inc.onnx"))
    fx_small = import_module(model, (small,))
    # BNs folded, and the two nested concatenations of each of the 2 MixedE blocks flattened
    assert on.graph.n_nodes == fx_small.graph.n_nodes - _counts(fx_small)["batchnorm"] - 4
    assert abs(on.total_flops / fx_small.total_flops - 1) < 0.05


def test_bert_encoder_flops_and_onnx_node_count(tmp_path: Path) -> None:
    torch.manual_seed(0)
    full = bert_encoder(vocab_size=1000).eval()
    fx = import_module(full, (torch.randint(0, 1000, (1, 128)),))
    assert abs(_macs(fx) / bert_macs(12, 768, 3072, 128) - 1) < 0.01
    small = bert_encoder(hidden=64, heads=4, ffn=128, vocab_size=100, seq_len=16).eval()
    ids = torch.randint(0, 100, (1, 16))
    fx_small = import_module(small, (ids,))
    on = import_onnx(_export(small, ids, tmp_path / "bert.onnx"))
    c = _counts(fx_small)
    # Linear on 3-D input -> MatMul + Add (+72); the position-ids embedding folds to a constant
    # (-1); k.transpose(1, 2).transpose(-2, -1) merges into one Transpose (-12); GELU at
    # opset 17 is Div, Erf, Add, Mul, Mul (+4 each).
    expected = fx_small.graph.n_nodes + c["linear"] - 1 - 12 + 4 * c["gelu"]
    assert fx_small.graph.n_nodes == 292
    assert on.graph.n_nodes == expected
    assert abs(on.total_flops / fx_small.total_flops - 1) < 0.05


def test_training_graph_mirrors_the_forward_pass() -> None:
    model = torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.ReLU(), torch.nn.Linear(8, 2))
    fwd = import_module(model, (torch.randn(4, 8),))
    train = import_module(model, (torch.randn(4, 8),), training=True)
    g = train.graph
    assert g.n_nodes == 2 * fwd.graph.n_nodes
    assert g.n_edges == 2 * fwd.graph.n_edges + 1  # + the loss turn-around at the sink
    partner = backward_partner(g)
    assert np.all(partner >= 0)
    assert np.all(g.color_class == g.color_class[partner])  # colocation classes
    fw = np.flatnonzero(~g.is_backward)
    np.testing.assert_allclose(g.compute_time[partner[fw]], 2 * g.compute_time[fw])
    # gradient buffers: parameters + output of the forward partner
    assert g.memory_bytes[partner[fw]].sum() == pytest.approx(g.memory_bytes[fw].sum())
