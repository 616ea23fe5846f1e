"""DeepSpeed ``parts`` and Megatron layout exports of layer-granular plans, checked against
the documented formats (DeepSpeed: stage ``s`` holds ``layers[parts[s]:parts[s+1]]``;
Megatron: stages split by ``|``, ``E`` embedding, ``t`` decoder layer, ``L`` loss, empty
stages allowed, ``E`` on the first stage and ``L`` on the last)."""

from __future__ import annotations

import itertools
import re

import pytest

torch = pytest.importorskip("torch", reason="needs torch")

from dnnpart.errors import FormatError  # noqa: E402
from dnnpart.export.layers import (  # noqa: E402
    deepspeed_parts,
    layer_units,
    megatron_layout,
    unit_stages,
)
from dnnpart.frontends.fx_import import module_ir, trace  # noqa: E402
from dnnpart.frontends.ir import ModelIR  # noqa: E402
from dnnpart.frontends.models import bert_encoder  # noqa: E402

N_LAYERS = 4


@pytest.fixture(scope="module")
def ir() -> ModelIR:
    model = bert_encoder(hidden=32, heads=2, ffn=64, vocab_size=50, seq_len=8, layers=N_LAYERS)
    return module_ir(trace(model, (torch.randint(0, 50, (1, 8)),), name="bert"), name="bert")


def _valid_megatron(layout: str, n_layers: int) -> list[str]:
    """The documented grammar (no repetition syntax needed for our output)."""
    assert re.fullmatch(r"[EtL|]*", layout), layout
    stages = layout.split("|")
    assert layout.count("t") == n_layers and layout.count("E") == 1 and layout.count("L") == 1
    assert "E" in stages[0] and stages[0].startswith("E") and stages[-1].endswith("L")
    return stages


def _placements(ir: ModelIR) -> list[tuple[list[int], dict[str, int]]]:
    """Every 3-stage cut between non-empty layers; the stage of every unit (empty ones: -1)."""
    units = layer_units(ir)
    full = [i for i, ops in enumerate(units.ops) if ops]
    out = []
    for cuts in itertools.combinations(range(1, len(full)), 2):
        stage = [-1] * len(units.names)
        for k, i in enumerate(full):
            stage[i] = sum(k >= c for c in cuts)
        out.append((stage, {op: stage[i] for i, ops in enumerate(units.ops) for op in ops}))
    return out


def test_units_are_embedding_blocks_head(ir: ModelIR) -> None:
    units = layer_units(ir)
    assert units.block_containers == ["layers"]
    assert list(units.names) == ["embedding", *[f"layers.{i}" for i in range(N_LAYERS)], "head"]
    assert sum(len(ops) for ops in units.ops) == len(ir.ops)


def test_deepspeed_parts_give_each_stage_its_layers(ir: ModelIR) -> None:
    for stage, device_of in _placements(ir):
        stages = unit_stages(layer_units(ir), device_of)
        parts, layers = deepspeed_parts(stages), stages.units.names
        assert len(parts) == stages.n_stages + 1 == 3 + 1
        assert parts[0] == 0 and parts[-1] == len(layers) == N_LAYERS + 2
        assert parts == sorted(parts)
        for s in range(3):
            held = [stage[i] for i in range(parts[s], parts[s + 1]) if stage[i] >= 0]
            assert held and set(held) == {s}


def test_megatron_layout_follows_the_documented_grammar(ir: ModelIR) -> None:
    for stage, device_of in _placements(ir):
        placed = unit_stages(layer_units(ir), device_of)
        stages = _valid_megatron(megatron_layout(placed), N_LAYERS)
        assert placed.n_stages == len(stages) == 3
        blocks = [s for s in stage[1:-1]]
        assert [st.count("t") for st in stages] == [blocks.count(k) for k in range(3)]


def test_a_block_split_over_devices_is_refused_naming_it(ir: ModelIR) -> None:
    units = layer_units(ir)
    device_of = {op: 0 for ops in units.ops for op in ops}
    device_of[units.ops[2][-1]] = 1  # last operator of layers.1 elsewhere
    with pytest.raises(FormatError, match=r"'layers\.1' is split.*default block granularity"):
        unit_stages(units, device_of)
