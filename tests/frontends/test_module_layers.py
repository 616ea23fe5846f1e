"""Real models as OptCNN layer graphs (module granularity): shapes and parameters equal torch's."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

torch = pytest.importorskip("torch")
from torch import nn  # noqa: E402

from dnnpart.cli.main import main  # noqa: E402
from dnnpart.cost import resolve_cluster  # noqa: E402
from dnnpart.errors import FormatError, MissingDependencyError  # noqa: E402
from dnnpart.frontends.export_import import export_graph_module, export_ir  # noqa: E402
from dnnpart.frontends.module_layers import layers_from_ir, model_layer_graph  # noqa: E402
from dnnpart.frontends.sources import ModelOptions  # noqa: E402
from dnnpart.layerwise.graphs import graph_from_layers, layers_from_attrs  # noqa: E402
from dnnpart.layerwise.layers import LayerGraph  # noqa: E402
from dnnpart.problem import Objective  # noqa: E402
from dnnpart.solvers import solve  # noqa: E402
from dnnpart.workflow import load_problem  # noqa: E402

LEAVES = (nn.Conv2d, nn.MaxPool2d, nn.AvgPool2d, nn.AdaptiveAvgPool2d, nn.Linear)


def convert(module: nn.Module, shape: tuple[int, ...]) -> LayerGraph:
    module.eval()
    x = torch.randn(*shape)
    gm = export_graph_module(module, (x,))
    ir = export_ir(gm, name=type(module).__name__)
    types = {p: type(m).__name__ for p, m in module.named_modules()}
    return layers_from_ir(ir, module_types=types, input_shapes={ir.graph_inputs[0]: shape})


def torch_shapes(module: nn.Module, shape: tuple[int, ...]) -> dict[str, tuple[int, ...]]:
    """Output shape of every conv/pool/linear module, by module path, from a real forward pass."""
    seen: dict[str, tuple[int, ...]] = {}

    def hook(path: str) -> Any:
        def record(_m: Any, _i: Any, out: Any) -> None:  # returns None: the output is kept
            seen.setdefault(path, tuple(out.shape))
        return record

    hooks = [m.register_forward_hook(hook(p)) for p, m in module.named_modules() if isinstance(m, LEAVES)]
    module.eval()
    with torch.no_grad():
        module(torch.randn(*shape))
    for h in hooks:
        h.remove()
    return seen


def as4(shape: tuple[int, ...]) -> tuple[int, ...]:
    return shape if len(shape) == 4 else (shape[0], shape[1], 1, 1)


def check_against_torch(module: nn.Module, shape: tuple[int, ...]) -> LayerGraph:
    g = convert(module, shape)
    by_name = {x.name: x for x in g.layers}
    for path, out in torch_shapes(module, shape).items():
        assert by_name[path].out_shape == as4(out), path
    assert sum(x.params for x in g.layers) == sum(p.numel() for p in module.parameters())
    for path, m in module.named_modules():
        if isinstance(m, nn.Linear):
            assert by_name[path].params == sum(p.numel() for p in m.parameters())
    # every layer is consistent: kinds, edges and windows survive the shared graph
    again = layers_from_attrs(graph_from_layers(g))
    assert sorted((x.op, x.out_shape, x.params) for x in again.layers) == \
        sorted((x.op, x.out_shape, x.params) for x in g.layers)
    return g


class Block(nn.Module):
    """Residual block or two-branch concatenation (Inception style)."""

    def __init__(self, c: int, concat: bool) -> None:
        super().__init__()
        self.concat = concat
        self.a = nn.Sequential(nn.Conv2d(c, c, 3, padding=1, bias=False), nn.BatchNorm2d(c), nn.ReLU())
        self.b = nn.Conv2d(c, 2, 1) if concat else nn.Identity()

    def forward(self, x: Any) -> Any:
        if self.concat:
            return torch.cat([self.a(x), self.b(x)], dim=1)
        return torch.relu(self.a(x) + x)


@st.composite
def small_cnns(draw: st.DrawFn) -> tuple[nn.Module, tuple[int, ...]]:
    c = draw(st.integers(1, 4))
    size = draw(st.integers(6, 18))
    shape = (2, c, size, size)
    parts: list[nn.Module] = []
    for _ in range(draw(st.integers(1, 4))):
        kind = draw(st.sampled_from(("conv", "pool", "block", "concat")))
        if kind == "conv":
            k = draw(st.sampled_from((1, 2, 3, 5)))
            s, p = draw(st.integers(1, 2)), draw(st.integers(0, k // 2))
            if (size + 2 * p - k) // s + 1 < 1:
                continue
            cout = draw(st.integers(1, 6))
            parts.append(nn.Conv2d(c, cout, k, stride=s, padding=p, bias=draw(st.booleans())))
            if draw(st.booleans()):
                parts += [nn.BatchNorm2d(cout), nn.ReLU()]
            c, size = cout, (size + 2 * p - k) // s + 1
        elif kind == "pool":
            k = draw(st.sampled_from((2, 3)))
            s, p = draw(st.integers(1, 2)), draw(st.integers(0, k // 2))
            if (size + 2 * p - k) // s + 1 < 1:
                continue
            pool = nn.MaxPool2d if draw(st.booleans()) else nn.AvgPool2d
            parts.append(pool(k, stride=s, padding=p))
            size = (size + 2 * p - k) // s + 1
        else:
            parts.append(Block(c, kind == "concat"))
            c += 2 if kind == "concat" else 0
    if draw(st.booleans()):
        parts.append(nn.AdaptiveAvgPool2d(1))
        size = 1
    parts += [nn.Flatten(), nn.Dropout(), nn.Linear(c * size * size, draw(st.integers(2, 7)))]
    return nn.Sequential(*parts), shape


@settings(max_examples=20, deadline=None)
@given(small_cnns())
def test_random_cnns_have_torchs_shapes_and_parameters(case: tuple[nn.Module, tuple[int, ...]]) -> None:
    module, shape = case
    g = check_against_torch(module, shape)
    assert g.layers[0].op == "input" and g.layers[-1].op == "softmax"


def test_small_resnet_folds_bn_and_relu_into_convs_and_adds() -> None:
    from dnnpart.frontends.models import shared_relu_resnet

    module = shared_relu_resnet()
    g = check_against_torch(module, (2, 3, 16, 16))
    ops = [x.op for x in g.layers]
    assert ops == ["input"] + ["conv"] + ["conv", "conv", "add"] * 4 + ["pool_avg", "fc", "softmax"]
    conv1 = g.layers[g.index("conv1")]
    assert conv1.params == 3 * 8 * 9 + 2 * 8  # conv weight + batch norm's scale and shift
    pool = g.layers[g.index("pool")]
    assert (pool.kernel, pool.stride) == ((16, 16), (16, 16))  # adaptive pool: equal tiles
    add = g.layers[g.index("layers.0/add")]
    assert [g.layers[i].name for i in add.inputs] == ["layers.0.conv2", "conv1"]


@pytest.mark.parametrize(("module", "shape", "fragment"), [
    (lambda: nn.Sequential(nn.Conv2d(4, 8, 3, groups=2)), (1, 4, 8, 8), "0 (Conv2d)"),
    (lambda: nn.Sequential(nn.Conv2d(3, 8, 3, dilation=2)), (1, 3, 8, 8), "dilation"),
    (lambda: nn.Sequential(nn.MaxPool2d(3, 2, ceil_mode=True)), (1, 3, 8, 8), "ceil_mode"),
    (lambda: nn.Sequential(nn.AdaptiveAvgPool2d(3)), (1, 3, 8, 8), "equal tiles"),
    (lambda: nn.Sequential(nn.Conv1d(3, 4, 3)), (1, 3, 8), "(N, C, H, W)"),
    (lambda: nn.Sequential(nn.Linear(8, 4)), (2, 3, 8, 8), "(N, classes)"),
], ids=["grouped", "dilated", "ceil-mode", "uneven-adaptive", "1d", "linear-on-4d"])
def test_unsupported_kinds_are_refused_naming_the_module(module: Any, shape: tuple[int, ...],
                                                         fragment: str) -> None:
    with pytest.raises(FormatError) as info:
        convert(module(), shape)
    assert fragment in str(info.value)


def test_gating_product_is_refused_naming_the_module() -> None:
    class Gate(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.conv = nn.Conv2d(3, 4, 1)

        def forward(self, x: Any) -> Any:
            y = self.conv(x)
            return y * torch.sigmoid(y)

    class Net(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.stem = Gate()

        def forward(self, x: Any) -> Any:
            return self.stem(x)

    with pytest.raises(FormatError, match=r"stem \(Gate\): operator 'mul' \(mul\) combines 2 activations"):
        convert(Net(), (1, 3, 4, 4))


def test_cli_solves_a_module_spec_and_refuses_bad_ones(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                      capsys: pytest.CaptureFixture[str]) -> None:
    spec = "module:dnnpart.frontends.models:shared_relu_resnet"
    base = ["solve", spec, "--input-shape", "1,3,16,16", "--objective", "iteration", "--cluster", "2xP100"]
    assert main([*base, "--method", "optcnn"]) == 0
    assert "layers.3/add" in capsys.readouterr().out
    (tmp_path / "issue17_models.py").write_text(
        "from torch import nn\n"
        "def lstm():\n    return nn.Sequential(nn.Conv2d(3, 4, 3, dilation=2))\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    assert main(["solve", "module:issue17_models:lstm", "--input-shape", "1,3,9,9", "--objective",
                 "iteration", "--method", "optcnn", "--cluster", "2xP100"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error:") and "0 (Conv2d)" in err[0]
    assert main([*base, "--method", "optcnn", "--training"]) == 2
    assert "--training" in capsys.readouterr().err
    monkeypatch.setitem(sys.modules, "torch", None)
    assert main([*base, "--method", "optcnn"]) == 3
    assert "dnnpart[torch]" in capsys.readouterr().err
    with pytest.raises(MissingDependencyError):
        model_layer_graph(spec, ModelOptions(input_shapes=((1, 3, 16, 16),)))


def rows(g: LayerGraph) -> list[tuple[Any, ...]]:
    return [(x.op, x.out_shape, x.kernel, x.stride, x.padding, x.params, x.inputs) for x in g.layers]


@settings(max_examples=8, deadline=None)
@given(small_cnns())
def test_fx_gives_the_same_layer_graph_as_export(case: tuple[nn.Module, tuple[int, ...]]) -> None:
    from dnnpart.frontends.fx_import import module_ir, trace

    module, shape = case
    module.eval()
    gm = trace(module, (torch.randn(*shape),))
    ir = module_ir(gm, name="m")
    from_fx = layers_from_ir(ir, input_shapes={ir.graph_inputs[0]: shape})
    assert rows(from_fx) == rows(convert(module, shape))
    assert [x.name for x in from_fx.layers[1:]] == [x.name for x in convert(module, shape).layers[1:]]


def test_onnx_file_gives_the_same_layer_graph_as_export(tmp_path: Path) -> None:
    pytest.importorskip("onnx")
    module = nn.Sequential(nn.Conv2d(3, 6, 5, stride=2, padding=2), nn.ReLU(), nn.MaxPool2d(3, 2, 1),
                           nn.Conv2d(6, 4, 3, padding=1), nn.AvgPool2d(2), nn.Flatten(),
                           nn.Linear(4 * 4 * 4, 10)).eval()
    x = torch.randn(2, 3, 32, 32)
    path = tmp_path / "net.onnx"
    torch.onnx.export(module, (x,), str(path), dynamo=False)
    from_onnx = model_layer_graph(str(path))
    from_export = convert(module, (2, 3, 32, 32))
    assert rows(from_onnx) == rows(from_export)


def test_hf_vision_model_through_the_loader() -> None:
    pytest.importorskip("transformers")
    cluster = resolve_cluster("2xP100").cluster
    spec = "hf:resnet:embedding_size=8,hidden_sizes=[8,16],depths=[1,1],num_labels=5"
    p = load_problem(spec, cluster=cluster, objective=Objective(kind="iteration", batch=4),
                     model=ModelOptions(input_shapes=((1, 3, 32, 32),)))
    r = solve(p, "optcnn")
    assert r.plan is not None and r.stats["final_nodes"] == 2
    assert r.objective <= solve(p, "data-parallel").objective * (1 + 1e-9)
    kinds = set(p.graph.op_types)
    assert {"input", "conv", "pool_max", "add", "pool_avg", "fc", "softmax"} == kinds


def test_traced_resnet50_matches_builtin_resnet50() -> None:
    """Our torch ResNet-50 traced at module granularity is ``builtin:resnet50`` up to parameter counts.

    The only differences: every convolution carries batch norm's scale and shift (2 C_out)
    where the builtin counts a bias (C_out), and the final average pool's stride (7 vs 1,
    the same single window on a 7x7 map). With the builtin's parameters swapped for the
    traced ones, t_O is the same.
    """
    from dataclasses import replace

    from dnnpart.frontends.models import resnet50
    from dnnpart.layerwise.models import resnet50 as builtin

    traced = check_against_torch(resnet50(), (1, 3, 224, 224)).with_batch(32)
    ref = builtin(32)

    def key(name: str) -> str:  # traced module path -> builtin layer name
        if "/" in name:  # layer1.0/add_3 -> layer1.0/add
            return name.split("/")[0] + "/add"
        if name.startswith("layer"):  # layer1.0.conv1 -> layer1.0/conv1
            head, _, tail = name.replace(".downsample.0", ".downsample").rpartition(".")
            return f"{head}/{tail}"
        return {"x": "input", "maxpool": "pool1"}.get(name, name)

    by_key = {key(x.name): x for x in traced.layers}
    assert sorted(by_key) == sorted(x.name for x in ref.layers)
    extra = 0
    swapped = []
    for x in ref.layers:
        t = by_key[x.name]
        assert (t.op, t.out_shape, t.kernel, t.padding) == (x.op, x.out_shape, x.kernel, x.padding)
        if x.op == "conv":
            assert t.params - x.params == x.out_shape[1]
        extra += t.params - x.params
        swapped.append(replace(x, params=t.params, stride=t.stride))
    assert extra == sum(x.out_shape[1] for x in ref.layers if x.op == "conv")
    cluster = resolve_cluster("4xP100").cluster
    objective = Objective(kind="iteration", batch=32)

    def t_o(g: LayerGraph) -> float:
        from dnnpart.problem import Problem

        return solve(Problem(graph=graph_from_layers(g), cluster=cluster, objective=objective),
                     "optcnn").objective

    swapped_graph = LayerGraph("resnet50", tuple(swapped))
    assert t_o(traced) == pytest.approx(t_o(swapped_graph), rel=1e-9)
    assert t_o(traced) == pytest.approx(t_o(ref), rel=1e-3)


def test_strategy_of_an_imported_model_exports_and_reimports(tmp_path: Path) -> None:
    from dnnpart.evaluate import evaluate
    from dnnpart.io.plan_files import read_plan, write_plan

    def load() -> Any:
        return load_problem("module:dnnpart.frontends.models:shared_relu_resnet",
                            cluster=resolve_cluster("4xP100").cluster,
                            objective=Objective(kind="iteration", batch=8),
                            model=ModelOptions(input_shapes=((1, 3, 16, 16),)))

    p = load()
    r = solve(p, "optcnn")
    assert r.plan is not None
    path = tmp_path / "plan.json"
    write_plan(p, r.plan, path, r)
    again = load()  # captured afresh, as `dnnpart evaluate GRAPH plan.json` does
    assert evaluate(again, read_plan(path, again)).objective == pytest.approx(r.objective, rel=1e-12)
