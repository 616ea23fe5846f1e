"""``export --format pipelining`` split points build the planned number of stages.

Built with ``torch.distributed.pipelining.pipeline`` itself on a torchvision-style ResNet
whose ``relu`` module is called several times; a cut no split point can express is refused
with the module named.
"""

from __future__ import annotations

import warnings

import pytest

torch = pytest.importorskip("torch", reason="needs torch")
pipelining = pytest.importorskip("torch.distributed.pipelining", reason="needs torch.distributed.pipelining")

from dnnpart.errors import FormatError  # noqa: E402
from dnnpart.export import split_points  # noqa: E402
from dnnpart.frontends.export_import import export_graph_module, export_ir  # noqa: E402
from dnnpart.frontends.models import shared_relu_resnet  # noqa: E402


def _stages_built(x: torch.Tensor, spec: dict[str, str]) -> int:
    model = shared_relu_resnet()  # fresh: pipeline() patches the forward of split modules for good
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        pipe = pipelining.pipeline(
            model, mb_args=(x,), split_spec={k: pipelining.SplitPoint.BEGINNING for k in spec}
        )
    return int(pipe.num_stages)


def test_every_cut_builds_the_planned_stages_or_is_refused_naming_the_module() -> None:
    model, x = shared_relu_resnet(), torch.randn(1, 3, 16, 16)
    ir = export_ir(export_graph_module(model, (x,)), name="m")
    names = [op.name for op in ir.ops]
    built = refused = reused = 0
    seen: set[str] = set()
    for cut in range(1, len(names)):
        device_of = {n: int(i >= cut) for i, n in enumerate(names)}
        try:
            stages = split_points(ir, device_of)
        except FormatError as exc:
            msg = str(exc)
            assert "inside module '" in msg or "belongs to no submodule" in msg
            reused += "times" in msg
            refused += 1
            continue
        split = stages[1]["split_before"]
        assert split is not None and len(stages) == 2
        if split in seen:
            continue
        seen.add(split)
        if len(seen) <= 6:  # building takes ~0.5 s each
            assert _stages_built(x, {split: "BEGINNING"}) == 2, split
            built += 1
    assert built >= 3 and reused >= 4  # the second call of every block's relu at least


def test_naive_split_at_a_reused_module_would_build_an_extra_stage() -> None:
    """The bug this guards against: cutting before `layers.1.relu` cuts before both its calls."""
    x = torch.randn(1, 3, 16, 16)
    assert _stages_built(x, {"layers.1.relu": "BEGINNING"}) == 3
