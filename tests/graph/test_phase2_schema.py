"""The optional phase-2 per-node arrays: defaults, permutation into topological order, checks."""

from __future__ import annotations

import numpy as np
import pytest

from dnnpart.errors import InvalidGraphError
from dnnpart.graph import MEMORY_CLASSES, NO_FORWARD, NO_PIN, RESIDUAL, build_graph


def _reversed_chain(**extra: object):
    # ids given in reverse topological order, so build_graph must permute every array
    return build_graph(
        [3, 2, 1], [1, 2], [2, 3], compute_time=[[1, 1], [2, 2], [3, 3]], edge_cost=[0, 0],
        memory_bytes=[30, 20, 10], **extra,
    )


def test_absent_arrays_give_documented_defaults() -> None:
    g = _reversed_chain()
    assert g.memory_class is None and g.forward_of is None
    assert g.memory_classes().tolist() == [0, 0, 0]
    assert g.node_param_bytes().tolist() == [0, 0, 0]
    assert g.node_output_bytes().tolist() == g.memory_bytes.tolist()
    assert g.pins().tolist() == [NO_PIN] * 3
    assert g.forward_ops().tolist() == [NO_FORWARD] * 3


def test_arrays_follow_the_topological_renumbering() -> None:
    g = _reversed_chain(
        memory_class=[RESIDUAL, 0, 0], param_bytes=[7, 0, 0], output_bytes=[3, 2, 1],
        pin=[0, NO_PIN, NO_PIN], forward_of=[1, -1, -1], module_paths=["c", "b", "a"],
    )
    # node order is ids 1, 2, 3
    assert g.original_ids.tolist() == [1, 2, 3]
    assert g.memory_classes().tolist() == [0, 0, RESIDUAL]
    assert g.node_param_bytes().tolist() == [0, 0, 7]
    assert g.node_output_bytes().tolist() == [1, 2, 3]
    assert g.pins().tolist() == [NO_PIN, NO_PIN, 0]
    assert g.forward_ops().tolist() == [NO_FORWARD, NO_FORWARD, 0]  # id 3 differentiates id 1
    assert g.module_paths == ("a", "b", "c")
    assert len(MEMORY_CLASSES) == 4


@pytest.mark.parametrize(
    ("field", "value", "match"),
    [
        ("memory_class", [9, 0, 0], "memory_class"),
        ("param_bytes", [-1, 0, 0], "param_bytes"),
        ("output_bytes", [np.inf, 0, 0], "output_bytes"),
        ("pin", [5, 0, 0], "pin"),
        ("forward_of", [42, -1, -1], "forward_of"),
    ],
)
def test_bad_values_are_refused(field: str, value: list[float], match: str) -> None:
    with pytest.raises(InvalidGraphError, match=match):
        _reversed_chain(**{field: value})


def test_synthesised_backward_keeps_phase2_arrays() -> None:
    from dnnpart.graph import LayerAttrs, add_backward_pass

    g = _reversed_chain(
        memory_class=[RESIDUAL, 0, 0], param_bytes=[7, 0, 0], module_paths=["c", "b", "a"],
        layer_attrs=LayerAttrs(kind=("z", "y", "x"), output_shape=((3,), (2,), (1,)),
                               kernel=((),) * 3, stride=((),) * 3, padding=((),) * 3),
    )
    t = add_backward_pass(g)
    fwd = t.forward_ops()
    for v in range(t.n_nodes):
        if t.is_backward[v]:
            f = int(fwd[v])
            assert t.names[v] == t.names[f] + "_grad"
            assert t.module_paths[v] == t.module_paths[f]
            assert t.layer_attrs.kind[v] == t.layer_attrs.kind[f]
            assert t.node_param_bytes()[v] == 0
        else:
            assert fwd[v] == NO_FORWARD
    assert t.node_param_bytes().sum() == 7
