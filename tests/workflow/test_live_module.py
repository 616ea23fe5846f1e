"""plan_model on a live nn.Module: blocks found in its ModuleList, a stages plan, run in gloo
processes against the module itself, and a plan file that says it cannot rebuild the module."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")


class Tiny(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.embed = torch.nn.Linear(8, 16)
        self.layers = torch.nn.ModuleList(
            torch.nn.Sequential(torch.nn.Linear(16, 16), torch.nn.GELU(), torch.nn.Linear(16, 16))
            for _ in range(3))
        self.head = torch.nn.Linear(16, 4)

    def forward(self, x):
        h = self.embed(x)
        for layer in self.layers:
            h = h + layer(h)
        return self.head(h)


def test_a_live_module_is_planned_by_blocks_and_runs(tmp_path) -> None:
    from dnnpart.errors import FormatError
    from dnnpart.graph.blocks import node_units
    from dnnpart.workflow import load_planned_model, plan_model, run_plan

    torch.manual_seed(0)
    model = Tiny()
    planned = plan_model(model, example_inputs=[torch.randn(2, 8)], cluster="4xA100",
                         training=True, schedule="1f1b", microbatches=4)
    assert planned.spec == "live:Tiny"
    assert planned.result.method == "block-pipeline" and planned.result.status.value == "optimal"
    names = node_units(planned.problem.graph).names
    assert [n for n in names if n.startswith("layers.")] == ["layers.0", "layers.1", "layers.2"]
    ran = run_plan(planned)
    assert ran.run.grad_max_abs_diff <= 1e-4 * max(ran.run.grad_max_abs_reference, 1e-12)
    planned.write(tmp_path / "p.json")
    with pytest.raises(FormatError, match="live module"):
        load_planned_model(tmp_path / "p.json")
