"""Paper 2's workloads captured from our torch definitions (tiny parameters)."""

from __future__ import annotations

import pytest

from dnnpart.errors import FormatError
from dnnpart.graph import RESIDUAL
from dnnpart.zoo.captured import parse_workload


@pytest.mark.parametrize(
    "spec",
    [
        "zoo:word-rnn:layers=2,hidden=16,seq=3,vocab=50,batch=2",
        "zoo:char-crn:layers=1,hidden=16,seq=3,vocab=20,batch=2,convs=2,channels=8",
        "zoo:wide-resnet:depth=10,widen=1,batch=2,classes=5",
    ],
)
def test_workloads_capture_as_autograd_training_graphs(spec: str) -> None:
    pytest.importorskip("torch")
    from dnnpart.zoo import load_example

    problem = load_example(spec)
    g = problem.graph
    assert g.is_training and g.n_nodes > 20
    assert (g.memory_classes() == RESIDUAL).sum() > 0
    assert problem.cluster.n_accelerators == 4


def test_unrolled_lstm_grows_with_layers_and_steps() -> None:
    pytest.importorskip("torch")
    from dnnpart.zoo.captured import workload_graph

    small = workload_graph("zoo:word-rnn:layers=1,hidden=8,seq=2,vocab=10,batch=1,training=0")
    big = workload_graph("zoo:word-rnn:layers=2,hidden=8,seq=4,vocab=10,batch=1,training=0")
    assert big.n_nodes > 3 * small.n_nodes / 2


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("zoo:word-rnn:depth=3", "depth: unknown parameter"),
        ("zoo:word-rnn:layers=0", "layers: expected a positive integer"),
        ("zoo:word-rnn:layers=two", "layers: expected an integer"),
        ("zoo:wide-resnet:depth=12", "depth 6n \\+ 4"),
        ("zoo:word-rnn:optimizer=rmsprop", "optimizer: expected sgd or adam"),
        ("zoo:lstm", "unknown workload"),
    ],
)
def test_bad_workload_parameters_are_named(spec: str, message: str) -> None:
    with pytest.raises(FormatError, match=message):
        parse_workload(spec)


def test_the_transformers_inner_width_is_its_feed_forward() -> None:
    pytest.importorskip("transformers")
    from dnnpart.zoo.captured import workload_source

    def params_of(spec: str) -> int:
        name, params = parse_workload(spec)
        return sum(p.numel() for p in workload_source(name, params).module.parameters())

    base = "zoo:deep-transformer:layers=2,width=64,heads=4,seq=8"
    four = params_of(base)  # inner 0: four times the width, GPT-2's default
    assert params_of(base + ",inner=256") == four
    # each layer's two feed-forward matrices and the first one's bias shrink with it
    assert four - params_of(base + ",inner=128") == 2 * (2 * 64 * 128 + 128)
    with pytest.raises(FormatError, match="inner"):
        parse_workload("zoo:deep-transformer:inner=-1")
