"""The model suite (:mod:`dnnpart.frontends.suite`) imports in training mode, heads and all.

For each member: the autograd training graph captures (whisper included), every operator has
a cost formula, the graph's parameters are the torch module's (so a head with weights of its
own is in it), a forward matrix product produces the logits (the LM head or classifier:
last dimension the vocabulary or the label count), and a mixture of experts' expert matmuls
carry the FLOPs of the ``k`` experts each token is routed to (``6 x tokens x k x hidden x
intermediate`` per layer: gate, up and down projections). Three small members run by default,
all sixteen under ``-m slow``.
"""

from __future__ import annotations

import pytest

pytest.importorskip("torch")
pytest.importorskip("transformers")

from dnnpart.frontends.suite import QUICK, SUITE
from dnnpart.graph import RESIDUAL
from dnnpart.workflow import import_model

CASES = [pytest.param(name, spec, id=name, marks=() if name in QUICK else pytest.mark.slow)
         for name, spec in SUITE]


@pytest.mark.parametrize(("name", "spec"), CASES)
def test_suite_member_imports_for_training_with_its_head(name: str, spec: str) -> None:
    notes: list[str] = []
    model = import_model(spec, training=True, notify=notes.append)
    source, imported = model.source, model.imported
    g = imported.graph
    assert imported.unknown_ops == {}, imported.unknown_ops
    assert notes and notes[0].endswith("head)") and source.model_class in notes[0]

    params = {id(p): p for p in source.module.parameters()}
    param_bytes = sum(p.numel() * p.element_size() for p in params.values())
    residual = g.memory_classes() == RESIDUAL
    assert int(residual.sum()) == len(params)
    assert g.node_param_bytes()[residual].sum() == param_bytes

    config = source.module.model.config
    width = config.num_labels if "ImageClassification" in source.model_class else config.vocab_size
    heads = [v for v in range(g.n_nodes) if not g.is_backward[v] and g.op_types[v] in ("matmul", "linear")
             and tuple(g.layer_attrs.output_shape[v])[-1:] == (width,)]
    assert heads, "no forward matrix product produces the logits"

    experts = [v for v in range(g.n_nodes) if g.op_types[v] == "grouped_mm" and not g.is_backward[v]]
    if getattr(config, "num_experts_per_tok", None):
        assert any("experts" in n for n in notes)
        tokens = source.input_shapes[0][0] * source.input_shapes[0][1]
        expected = (6.0 * tokens * config.num_experts_per_tok * config.hidden_size
                    * config.intermediate_size * config.num_hidden_layers)
        assert sum(float(imported.flops[v]) for v in experts) == expected
        backward = [v for v in range(g.n_nodes)
                    if g.op_types[v].startswith("grouped_mm") and g.is_backward[v]]
        assert sum(float(imported.flops[v]) for v in backward) == 2 * expected
    else:
        assert not experts
