"""A training run's backward adds each micro-batch's gradients into the ones before:
``m - 1`` in-place adds per parameter tensor per step, priced per stage
(:func:`dnnpart.evaluate.run_prediction.accumulation_seconds`), in the stage's backward and,
once per micro-batch on average, in the simulated step."""

from __future__ import annotations

import numpy as np
import pytest

from dnnpart.cost.specs import load_catalog
from dnnpart.evaluate.run_prediction import accumulation_seconds, predict_run, stage_parameter_bytes

pytest.importorskip("torch", reason="the training graphs are captured with torch")
from dnnpart.workflow import plan_model

TINY_GPT2 = "hf:gpt2:n_layer=2,n_embd=64,n_head=2,vocab_size=512"


def _twin(spec: object, tensor_bytes: list[float]) -> float:
    """Written apart: an fp32 in-place add of n elements reads two and writes one tensor,
    n FLOPs, on the roofline: max(FLOPs / peak, bytes / bandwidth) + launch, per tensor."""
    peak = spec.peak_flops * spec.compute_efficiency  # type: ignore[attr-defined]
    bandwidth = spec.memory_bandwidth * spec.bandwidth_efficiency  # type: ignore[attr-defined]
    total = 0.0
    for b in tensor_bytes:
        n = max(int(b // 4), 1)
        total += max(n / peak, 12 * n / bandwidth) + spec.launch_overhead_s  # type: ignore[attr-defined]
    return total


@pytest.mark.parametrize("sizes", [[4e6], [4.0, 4e3, 4e9], []])
def test_accumulation_is_an_add_per_tensor_on_the_roofline(sizes: list[float]) -> None:
    a100 = load_catalog().device("A100")
    assert accumulation_seconds(a100, sizes) == pytest.approx(_twin(a100, sizes), rel=1e-12)
    assert accumulation_seconds(None, sizes) == 0.0


@pytest.fixture(scope="module")
def planned() -> object:
    return plan_model(TINY_GPT2, cluster="2xA100", training=True, microbatches=4, input_shapes=[(1, 16)])


def test_each_stage_accumulates_its_own_parameters_a_tied_one_in_both(planned: object) -> None:
    problem, plan = planned.problem, planned.require_plan()  # type: ignore[attr-defined]
    g, a = problem.graph, plan.assignment
    order = sorted(set(a.tolist()))
    index = {d: i for i, d in enumerate(order)}
    pos = np.array([index[d] for d in a.tolist()])
    per_stage = stage_parameter_bytes(g, pos, len(order))
    assert len(order) == 2 and all(per_stage)
    from dnnpart.workflow.loading import with_runnable

    total = sum(sum(s) for s in per_stage)
    module = with_runnable(planned).runnable.module  # type: ignore[arg-type, union-attr]
    model = float(sum(p.numel() * 4 for p in module.parameters()))  # each tensor once
    wte = 512 * 64 * 4  # GPT-2's token embedding, read again by the tied head
    assert all(wte in s for s in per_stage)  # the embedding on one stage, the head on the other
    assert total == pytest.approx(model + wte)


def test_backward_grows_by_m_minus_one_accumulations(planned: object) -> None:
    problem, plan = planned.problem, planned.require_plan()  # type: ignore[attr-defined]
    a = plan.assignment
    order = sorted(set(a.tolist()), key=lambda d: int(np.flatnonzero(a == d)[0]))
    kw = {"training": True, "schedule": "1f1b", "output_bytes": 0.0}
    one = predict_run(problem, plan, order, microbatches=1, **kw)
    four = predict_run(problem, plan, order, microbatches=4, **kw)
    index = {d: i for i, d in enumerate(order)}
    pos = np.array([index[d] for d in a.tolist()])
    sizes = stage_parameter_bytes(problem.graph, pos, len(order))
    for i, (s1, s4) in enumerate(zip(one.stages, four.stages, strict=True)):
        acc = accumulation_seconds(problem.cluster.devices[order[i]].spec, sizes[i])
        assert acc > 0
        assert s4.backward_s == pytest.approx(4 * s1.backward_s + 3 * acc, rel=1e-9)
        assert s4.forward_s == pytest.approx(4 * s1.forward_s, rel=1e-9)


def test_a_tied_weights_gradient_is_no_message_between_stages(planned: object) -> None:
    """The head's stage computes the embedding matrix's gradient, which the embedding's stage
    accumulates: runtimes sum the holders' gradients once per step, so no boundary carries it
    per micro-batch (it did: a message of the whole matrix); the hidden state and its gradient
    still cross."""
    from dnnpart.pricing.chain import boundary_bytes

    problem, plan = planned.problem, planned.require_plan()  # type: ignore[attr-defined]
    a = plan.assignment
    order = sorted(set(a.tolist()))
    pos = np.array([order.index(d) for d in a.tolist()])
    crossing = boundary_bytes(problem.graph, pos, len(order))
    wte = 512 * 64 * 4
    assert crossing.max() < wte  # nothing the size of the embedding matrix
    assert crossing.sum() > 0
