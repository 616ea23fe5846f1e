"""torch.export frontend, hf: specs, aten cost coverage and autograd training graphs (tiny configs)."""

from __future__ import annotations

import json
import warnings
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("torch")
pytest.importorskip("transformers")

from dnnpart.cost.model import CostModel
from dnnpart.cost.ops import operator_work
from dnnpart.errors import FormatError
from dnnpart.frontends.hf import parse_hf_spec
from dnnpart.frontends.sources import capture, import_source, resolve_model
from dnnpart.graph import NO_FORWARD, REFERENCE, RESIDUAL

#: The model suite of issue 14 at tiny sizes, with inputs small enough for a quick capture.
SUITE = {
    "gpt2": ("hf:gpt2:n_layer=2,n_embd=32,n_head=2,vocab_size=97", [(1, 8)]),
    "bert": ("hf:bert:num_hidden_layers=2,hidden_size=32,num_attention_heads=2,intermediate_size=64,"
             "vocab_size=97", [(1, 8)]),
    "llama": ("hf:llama:num_hidden_layers=2,hidden_size=32,num_attention_heads=4,intermediate_size=64,"
              "num_key_value_heads=2,vocab_size=97", [(1, 8)]),
    "t5": ("hf:t5:num_layers=1,num_decoder_layers=1,d_model=32,num_heads=2,d_ff=64,d_kv=16,vocab_size=97",
           [(1, 8), (1, 8)]),
    "swin": ("hf:swin:embed_dim=12,depths=[1,1,1,1],num_heads=[1,1,1,1],image_size=32,window_size=2,"
             "patch_size=2", None),
    "resnet": ("hf:resnet:depths=[1,1,1,1],hidden_sizes=[8,8,8,8],embedding_size=8", [(1, 3, 32, 32)]),
    "vit": ("hf:vit:num_hidden_layers=1,hidden_size=32,num_attention_heads=2,intermediate_size=64,"
            "image_size=32,patch_size=8", None),
}


@pytest.fixture(scope="module")
def captured() -> dict[str, tuple[object, object, object]]:
    out = {}
    for key, (spec, shapes) in SUITE.items():
        source = resolve_model(spec, input_shapes=shapes)
        gm, ir = capture(source)
        out[key] = (source, gm, ir)
    return out


def test_every_aten_op_of_the_suite_has_a_formula(captured: dict[str, tuple[object, object, object]]) -> None:
    """Inference and training graphs: no op type is priced by bytes for want of a formula."""
    model = CostModel.from_presets()
    unknown: dict[str, set[str]] = {}
    for key, (source, _, ir) in captured.items():
        for op in ir.ops:  # type: ignore[attr-defined]
            if not operator_work(op.spec).known:
                unknown.setdefault(key, set()).add(op.source_type)
        trained = import_source(source, cost_model=model, training=True)  # type: ignore[arg-type]
        if trained.unknown_ops:
            unknown.setdefault(key + " training", set()).update(trained.unknown_ops)
    assert unknown == {}


def test_export_graph_carries_module_paths_and_parameter_bytes(
    captured: dict[str, tuple[object, object, object]],
) -> None:
    source, _gm, _ = captured["gpt2"]
    imported = import_source(source)  # type: ignore[arg-type]
    g = imported.graph
    params = {id(p): p for p in source.module.parameters()}  # type: ignore[attr-defined]
    assert g.node_param_bytes().sum() == sum(p.numel() * p.element_size() for p in params.values())
    addmm = [v for v in range(g.n_nodes) if g.layer_attrs.kind[v] == "addmm"]
    assert addmm and all(g.module_paths[v].startswith("transformer.h.") for v in addmm)
    assert g.layer_id.max() >= 2  # h.0, h.1 and the top level are distinct layers
    assert imported.unknown_ops == {}


def test_layer_attributes_of_convolutions(captured: dict[str, tuple[object, object, object]]) -> None:
    source, _, _ = captured["resnet"]
    g = import_source(source).graph  # type: ignore[arg-type]
    convs = [v for v in range(g.n_nodes) if g.op_types[v] == "conv"]
    assert convs
    first = convs[0]  # the 7x7 stride-2 stem of a ResNet
    assert g.layer_attrs.kernel[first] == (7, 7) and g.layer_attrs.stride[first] == (2, 2)
    assert len(g.layer_attrs.output_shape[first]) == 4


@pytest.mark.parametrize("optimizer", [None, "sgd", "adam"])
def test_training_graph_residuals_forward_of_and_updates(
    captured: dict[str, tuple[object, object, object]], optimizer: str | None
) -> None:
    source, _, _ = captured["bert"]
    imported = import_source(source, training=True, optimizer=optimizer)  # type: ignore[arg-type]
    g = imported.graph
    params = {id(p): p for p in source.module.parameters()}  # type: ignore[attr-defined]
    param_bytes = sum(p.numel() * p.element_size() for p in params.values())
    classes = g.memory_classes()
    residual = g.node_param_bytes()[classes == RESIDUAL].sum()
    assert residual == (3 if optimizer == "adam" else 1) * param_bytes
    assert int((classes == RESIDUAL).sum()) == len(params)
    updates = np.flatnonzero(classes == REFERENCE)
    assert len(updates) == (len(params) if optimizer else 0)
    for u in updates:  # each update op is colocated with the one residual tensor it updates
        preds = [p for p in g.predecessors(int(u)).tolist() if classes[p] == RESIDUAL]
        assert len(preds) == 1 and g.color_class[preds[0]] == g.color_class[u] >= 0
    forward = g.forward_ops()
    orphans = set(imported.orphans)
    for v in np.flatnonzero(g.is_backward & (classes != REFERENCE)):
        assert forward[v] != NO_FORWARD or g.names[v] in orphans
        if forward[v] != NO_FORWARD:
            assert not g.is_backward[forward[v]]
    assert np.all(forward[~g.is_backward] == NO_FORWARD)
    # real backward: more work than forward, and gradients of every parameter exist
    assert g.is_backward.sum() > (~g.is_backward).sum() / 2


def test_module_granularity_merges_operators_of_one_module(
    captured: dict[str, tuple[object, object, object]],
) -> None:
    source, _, _ = captured["gpt2"]
    ops = import_source(source)  # type: ignore[arg-type]
    modules = import_source(source, granularity="module")  # type: ignore[arg-type]
    assert modules.graph.n_nodes < ops.graph.n_nodes / 2
    assert modules.total_flops == ops.total_flops
    np.testing.assert_allclose(modules.graph.compute_time.sum(axis=0), ops.graph.compute_time.sum(axis=0))
    assert sorted(n for m in modules.members.values() for n in m) == sorted(ops.graph.names)  # type: ignore[union-attr]


def test_training_flops_are_about_three_times_inference(
    captured: dict[str, tuple[object, object, object]],
) -> None:
    source, _, _ = captured["gpt2"]
    inference = import_source(source).total_flops  # type: ignore[arg-type]
    training = import_source(source, training=True).total_flops  # type: ignore[arg-type]
    assert 2.5 <= training / inference <= 3.5


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("hf:nosuchmodel", "unknown model type 'nosuchmodel'"),
        ("hf:gpt2:n_layers=2", "n_layers: not a field of GPT2Config"),
        ("hf:gpt2:n_layer", "expected KEY=VALUE"),
        ("hf:", "hf:ARCH"),
    ],
)
def test_bad_hf_specs_are_named(spec: str, message: str) -> None:
    with pytest.raises(FormatError, match=message):
        resolve_model(spec)


def test_hf_config_file(tmp_path: Path) -> None:
    good = tmp_path / "cfg.json"
    good.write_text(json.dumps({"n_layer": 1, "n_embd": 16, "n_head": 2}))
    parsed = parse_hf_spec("hf:gpt2:n_head=4", good)
    assert parsed.overrides == {"n_layer": 1, "n_embd": 16, "n_head": 4}  # the spec wins
    (tmp_path / "bad.json").write_text("[1, 2]")
    with pytest.raises(FormatError, match="expected a JSON object"):
        parse_hf_spec("hf:gpt2", tmp_path / "bad.json")
    (tmp_path / "broken.json").write_text("{")
    with pytest.raises(FormatError, match="not a JSON file"):
        parse_hf_spec("hf:gpt2", tmp_path / "broken.json")
    with pytest.raises(FormatError, match="no such file"):
        parse_hf_spec("hf:gpt2", tmp_path / "missing.json")


def test_hf_models_are_built_on_the_meta_device_and_default_inputs() -> None:
    source = resolve_model("hf:gpt2:n_layer=1,n_embd=16,n_head=2")
    assert next(source.module.parameters()).is_meta
    assert source.input_shapes == [(1, 128)] and source.input_dtype == "int64"
    vit = resolve_model(
        "hf:vit:num_hidden_layers=1,hidden_size=16,num_attention_heads=2,intermediate_size=32"
    )
    assert vit.input_shapes == [(1, 3, 224, 224)]
    t5 = resolve_model("hf:t5-small:num_layers=1,num_decoder_layers=1,d_model=16,d_ff=32,d_kv=8,num_heads=2")
    assert t5.input_shapes == [(1, 128), (1, 128)]


@pytest.mark.parametrize("granularity", ["op", "module"])
def test_plan_then_run_matches_the_unpartitioned_model(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], granularity: str
) -> None:
    from dnnpart.cli.main import main

    plan = tmp_path / "plan.json"
    spec = "hf:gpt2:n_layer=2,n_embd=32,n_head=2,vocab_size=97"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert main(["plan", spec, "--input-shape", "1,8", "-m", "dpl", "-o", str(plan), "--json",
                     "--granularity", granularity]) == 0
        capsys.readouterr()
        assert main(["run", str(plan), "--microbatches", "2", "--json"]) == 0
    result = json.loads(capsys.readouterr().out)
    assert len(result["devices_used"]) >= 2
    assert result["max_abs_diff"] <= 1e-5 * result["max_abs_reference"]


def test_onnx_nodes_carry_module_paths_from_name_scopes(tmp_path: Path) -> None:
    """torch's dynamo ONNX exporter (needs onnxscript, in the [onnx] extra) writes scopes."""
    torch = pytest.importorskip("torch")
    pytest.importorskip("onnxscript")
    from dnnpart.frontends.onnx_import import import_onnx

    nn = torch.nn
    model = nn.Sequential(nn.Linear(4, 4), nn.Sequential(nn.ReLU(), nn.Linear(4, 2)))
    path = tmp_path / "nested.onnx"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(model, (torch.randn(1, 4),), str(path), dynamo=True)
    imported = import_onnx(path)
    paths = {op.op_type: op.module_path for op in imported.ir.ops}
    assert sorted(op.module_path for op in imported.ir.ops if op.op_type in ("matmul", "relu")) == [
        "0", "1.0", "1.1"
    ]
    assert paths["relu"] == "1.0"


@pytest.mark.parametrize("key", ["gpt2", "llama", "t5"])
def test_gradients_flow_to_earlier_blocks(captured: dict[str, tuple[object, object, object]],
                                          key: str) -> None:
    """No backward edge runs from an earlier block's unit to a later one: autograd's sums of a
    residual stream's gradients (tagged with the loss's sequence number) are orphans that go
    with what feeds them, not the loss's backward in the last unit."""
    from dnnpart.graph.blocks import node_units

    source, _, _ = captured[key]
    imported = import_source(source, training=True)  # type: ignore[arg-type]
    g = imported.graph
    unit = node_units(g).unit
    src = np.repeat(np.arange(g.n_nodes), np.diff(g.succ_ptr))
    dst = g.succ_idx.astype(np.int64)
    backward = g.is_backward[src] & g.is_backward[dst]
    later = backward & (unit[dst] > unit[src])
    pairs = [(g.names[u], g.names[v]) for u, v in zip(src[later], dst[later], strict=True)]
    assert not pairs, pairs[:5]
    forward = g.forward_ops()
    assert all(g.names[int(forward[v])] != "ones_like" for v in np.flatnonzero(forward != NO_FORWARD))
