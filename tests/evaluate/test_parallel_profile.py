"""Unit profiles of captured transformers (dnnpart.pricing.parallel_profile) against the models'
own parameters and the captured graphs' totals."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("torch")
pytest.importorskip("transformers")

from dnnpart.pricing.chain import node_activation_bytes
from dnnpart.pricing.parallel_profile import unit_profiles
from dnnpart.workflow import import_model

LLAMA = ("hf:llama:num_hidden_layers=2,hidden_size=64,intermediate_size=128,num_attention_heads=4,"
         "num_key_value_heads=4,vocab_size=100")
GPT2 = "hf:gpt2:n_layer=2,n_embd=64,n_head=4,vocab_size=100"


@pytest.fixture(scope="module", params=[LLAMA, GPT2], ids=["llama", "gpt2"])
def captured(request):
    m = import_model(request.param, training=True, optimizer="adam", input_shapes=[(1, 16)],
                     cluster="2xA100")
    return request.param, m


def _module_params(m, prefix: str) -> tuple[float, float]:
    """Bytes (float32) of the block's matrices and of its vectors, from the model itself."""
    mats = vecs = 0.0
    for name, p in m.source.module.named_parameters():
        if f".{prefix}." in f".{name}":
            if p.dim() >= 2:
                mats += 4.0 * p.numel()
            else:
                vecs += 4.0 * p.numel()
    return mats, vecs


def test_a_block_splits_its_matrices_and_replicates_its_vectors(captured) -> None:
    spec, m = captured
    g = m.imported.graph
    p = unit_profiles(g, time_unit_s=1e-3, n_blocks=2, heads=4)
    prefix = "layers.1" if "llama" in spec else "h.1"
    mats, vecs = _module_params(m, prefix)
    assert sum(p.block.weights) == pytest.approx(mats + vecs)
    if "llama" in spec:  # no biases: exactly Megatron's split
        assert p.block.weights == pytest.approx((mats, vecs))
    else:  # column-parallel biases are split too
        assert p.block.weights[0] >= mats and p.block.weights[1] <= vecs
    assert p.block.forward_s[0] > 0 and p.block.backward_s[0] > 0
    assert 0 < p.block.attention_s < p.block.forward_s[0]


def test_units_add_up_to_the_graph(captured) -> None:
    _, m = captured
    g = m.imported.graph
    p = unit_profiles(g, time_unit_s=1e-3, n_blocks=2, heads=4)
    col = list(g.device_kinds).index("accelerator")
    total = float(np.nansum(np.where(np.isfinite(g.compute_time[:, col]), g.compute_time[:, col], 0)))
    units = (p.prologue, p.block, p.block, p.epilogue)
    got = sum(sum(u.forward_s) + sum(u.backward_s) for u in units) * 1e3
    # blocks are priced at the larger of the two captured: equal up to the spread
    assert got == pytest.approx(total, rel=max(p.block_spread, 0.02))
    assert sum(sum(u.stash) for u in units) >= float(node_activation_bytes(g).sum()) * 0.98


def test_a_tied_embedding_counts_in_the_prologue_and_the_head() -> None:
    m = import_model(GPT2, training=True, input_shapes=[(1, 16)], cluster="2xA100")
    p = unit_profiles(m.imported.graph, time_unit_s=1e-3, n_blocks=2, heads=4)
    wte = 100 * 64 * 4
    assert p.prologue.weights[0] >= wte and p.epilogue.weights[0] >= wte


def test_samples_divide_per_sample_figures() -> None:
    one = import_model(GPT2, training=True, input_shapes=[(1, 16)], cluster="2xA100")
    two = import_model(GPT2, training=True, input_shapes=[(2, 16)], cluster="2xA100")
    a = unit_profiles(one.imported.graph, time_unit_s=1e-3, n_blocks=2, heads=4)
    b = unit_profiles(two.imported.graph, time_unit_s=1e-3, n_blocks=2, heads=4, samples=2)
    assert b.block.weights == a.block.weights
    assert b.block.boundary == pytest.approx(a.block.boundary)
    assert sum(b.block.stash) == pytest.approx(sum(a.block.stash), rel=0.05)
