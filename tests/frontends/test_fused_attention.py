"""The training capture of a meta model calls the attention kernel a real CPU run calls.

Twin: the same module, differentiated on real CPU tensors under ``make_fx``, is what a run
executes; the capture on meta tensors must contain the same attention operators (fused flash
kernel and its backward where torch picks it, the decomposed products where it does not).
"""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from torch.fx.experimental.proxy_tensor import make_fx  # noqa: E402

from dnnpart.frontends.export_import import export_graph_module  # noqa: E402
from dnnpart.frontends.training import joint_graph  # noqa: E402

ATTENTION_OPS = ("attention", "bmm", "softmax")


class Attention(torch.nn.Module):
    def __init__(self, *, learned_bias: bool, causal: bool) -> None:
        super().__init__()
        self.qkv = torch.nn.Linear(32, 96)
        self.bias = torch.nn.Parameter(torch.zeros(1, 1, 16, 16)) if learned_bias else None
        self.causal = causal

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, t, _ = x.shape
        q, k, v = self.qkv(x).view(b, t, 3, 4, 8).permute(2, 0, 3, 1, 4)
        mask = self.bias if self.bias is not None else None
        return torch.nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=mask,
                                                                is_causal=self.causal)


def _attention_ops(gm: torch.fx.GraphModule) -> list[str]:
    return sorted(str(n.target) for n in gm.graph.nodes
                  if n.op == "call_function" and any(a in str(n.target) for a in ATTENTION_OPS))


def _real_run_ops(module: torch.nn.Module, x: torch.Tensor) -> list[str]:
    params = [p for p in module.parameters()]

    def step(x: torch.Tensor) -> tuple[torch.Tensor, ...]:
        return torch.autograd.grad(module(x).float().mean(), params)

    return _attention_ops(make_fx(step, tracing_mode="real")(x))


@pytest.mark.parametrize("learned_bias", [False, True])
@pytest.mark.parametrize("causal", [False, True])
def test_the_meta_capture_has_the_attention_ops_of_a_real_cpu_run(learned_bias: bool, causal: bool) -> None:
    if learned_bias and causal:
        pytest.skip("scaled_dot_product_attention takes a mask or is_causal, not both")
    torch.manual_seed(0)
    module = Attention(learned_bias=learned_bias, causal=causal)
    x = torch.randn(2, 16, 32)
    expected = _real_run_ops(module, x)
    gm = export_graph_module(module.to("meta"), (x.to("meta"),), name="attention")
    joint, _ = joint_graph(gm, (x.to("meta"),))
    assert _attention_ops(joint) == expected
    # the case split is real: a learned (differentiated) mask keeps the decomposed form
    assert any("flash" in op for op in expected) is (not learned_bias)
