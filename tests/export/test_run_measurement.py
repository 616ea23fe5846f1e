"""``run`` measures what it runs, and the memory model predicts it (issue 29, items 2-3).

The memory oracle is the allocator itself: each rank's peak from ``torch.profiler`` memory
events over the checked step, plus its stage's parameters (:mod:`dnnpart.export.measuring`,
itself checked on known allocations below). The prediction
(:mod:`dnnpart.evaluate.run_prediction`) must agree within :data:`MEMORY_RTOL` per stage.
Why 10%: the known gaps the model leaves are the attention probabilities the captured graph
stashes and the fused kernel of the run does not (+4.5..+5.2% on tiny GPT-2's block stages)
and kernel temporaries the graph does not show (-3..-6% on the ResNet's); the residuals
measured on these plans are within 6% (docs/run.md). The plans run convolutions on oneDNN's
path (batch 2, 32x32): torch's im2col fallback for tiny batch-1 inputs is not modelled (said
in docs/run.md). A ``--recompute`` plan runs each stage under ``torch.utils.checkpoint``:
its gradients still match, its backward is predicted as forward plus backward, and its memory
keeps only what the schedule holds.

The stash oracle is autograd's: the bytes a stage's saved-tensor hooks see, against the
stages model's stash ``A``; the ablation (every forward output counted, the rule before) is
shown off by more than 2x.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

torch = pytest.importorskip("torch", reason="dnnpart run needs torch (pip install 'dnnpart[torch]')")
if not torch.distributed.is_available() or not torch.distributed.is_gloo_available():
    pytest.skip("torch.distributed with the gloo backend is not available", allow_module_level=True)

from dnnpart.export.measuring import RankMeasure, allocator_peak, held_bytes  # noqa: E402
from dnnpart.graph.core import NORMAL  # noqa: E402
from dnnpart.pricing.chain import node_activation_bytes  # noqa: E402
from dnnpart.workflow import plan_model, run_plan  # noqa: E402
from dnnpart.workflow.planned import PlannedModel  # noqa: E402

RESNET = "module:dnnpart.frontends.models:shared_relu_resnet"
TINY_GPT2 = "hf:gpt2:n_layer=2,n_embd=64,n_head=2,vocab_size=512"
MEMORY_RTOL = 0.10
STEPS = 2


def _assert_memory_agrees(info: dict[str, Any], stages: int) -> None:
    m = info["measurement"]
    assert len(m["stages"]) == stages and m["steps"] == STEPS
    for st in m["stages"]:
        mem = st["memory"]
        assert mem["measured_bytes"] > mem["held_bytes"] > 0  # the step allocates
        assert abs(mem["error"]) <= MEMORY_RTOL, (st["device"], mem)
        assert mem["predicted_bytes"] == pytest.approx(sum(mem["parts"].values()))


def _assert_timed(info: dict[str, Any]) -> None:
    m = info["measurement"]
    step = m["step"]
    assert len(step["measured_s"]) == STEPS and step["min_s"] <= step["median_s"] <= step["max_s"]
    for st in m["stages"]:
        for phase in ("forward", "backward") if m["training"] else ("forward",):
            t = st[phase]
            assert len(t["measured_s"]) == STEPS and min(t["measured_s"]) > 0
            assert t["predicted_s"] > 0
            # a stage computes within its step (it also waits and sends)
            assert t["max_s"] <= step["max_s"] * 1.01


def test_allocator_peak_is_the_running_sum_of_allocations() -> None:
    box = RankMeasure()
    with allocator_peak(torch.device("cpu"), box, held=100.0):
        a = torch.empty(1000)                 # 4000 bytes
        b = torch.empty(2000)                 # 8000: a and b together are the peak
        del a
        c = torch.empty(500)                  # 2000: b and c, 10000
    assert box.peak_bytes == 100.0 + 12000 and box.held_bytes == 100.0
    assert "profiler" in box.memory_source and b.numel() + c.numel() == 2500
    lin = torch.nn.Linear(4, 2)
    assert held_bytes(lin, lin) == 40.0     # each storage once


@pytest.fixture(scope="module")
def resnet_training() -> PlannedModel:
    return plan_model(RESNET, cluster="3xA100", training=True, schedule="gpipe", microbatches=4,
                      input_shapes=[(2, 3, 32, 32)])


@pytest.fixture(scope="module")
def gpt2_training() -> PlannedModel:
    return plan_model(TINY_GPT2, cluster="3xA100", training=True, schedule="1f1b", microbatches=4,
                      input_shapes=[(1, 128)])


def test_resnet_gpipe_memory_model_matches_the_run(resnet_training: PlannedModel) -> None:
    ran = run_plan(resnet_training, steps=STEPS)
    info = ran.to_dict()
    assert info["passed"] is True
    _assert_memory_agrees(info, stages=3)
    _assert_timed(info)
    # not calibrated: the output says the times are not a model check
    assert info["measurement"]["calibrated"] is False and "not a model check" in info["measurement"]["note"]


def test_gpt2_1f1b_memory_model_matches_the_run(gpt2_training: PlannedModel) -> None:
    ran = run_plan(gpt2_training, steps=STEPS)
    info = ran.to_dict()
    assert info["passed"] is True
    _assert_memory_agrees(info, stages=3)
    parts = [st["memory"]["parts"] for st in info["measurement"]["stages"]]
    assert parts[-1]["loss"] > 0 and parts[0]["loss"] == 0  # the loss's buffers: last stage only
    # 1F1B: stage i keeps min(m, S - i) micro-batches: 3, 2, 1 times the same-sized blocks
    assert parts[1]["activations"] > parts[2]["activations"]


def test_a_recompute_plan_recomputes_and_its_memory_model_matches_the_run() -> None:
    from dnnpart import Objective
    from dnnpart.evaluate.run_prediction import predict_run

    planned = plan_model(RESNET, cluster="2xA100", training=True, input_shapes=[(2, 3, 32, 32)],
                         objective=Objective(kind="stages", schedule="1f1b", microbatches=4,
                                             recompute=True))
    info = run_plan(planned, steps=STEPS).to_dict()
    assert info["passed"] is True  # checkpointed stages give the same gradients
    _assert_memory_agrees(info, stages=2)
    # predicted: a backward runs the forward again; a micro-batch in flight holds no stash
    names = [d.name for d in planned.problem.cluster.devices]
    order = [names.index(st["device"]) for st in info["measurement"]["stages"]]
    kw = {"training": True, "schedule": "1f1b", "microbatches": 4, "output_bytes": 0.0}
    again = predict_run(planned.problem, planned.require_plan(), order, recompute=True, **kw)
    plain = predict_run(planned.problem, planned.require_plan(), order, recompute=False, **kw)
    for r, p in zip(again.stages, plain.stages, strict=True):
        assert p.backward_s < r.backward_s <= p.backward_s + p.forward_s * (1 + 1e-12)
        assert r.peak_bytes <= p.peak_bytes
    # ... up to its last stashed value: the classifier's product, whose output only the loss
    # reads, runs once (torch's checkpoint stops there: the test below)
    last_again, last_plain = again.stages[-1], plain.stages[-1]
    assert last_again.backward_s - last_plain.backward_s < last_plain.forward_s * 0.999
    # the first stage keeps two micro-batches in flight (1F1B): their stashes are what it saves
    assert again.stages[0].peak_bytes < plain.stages[0].peak_bytes


def test_checkpoint_stops_recomputing_after_the_last_stashed_value() -> None:
    """What the recomputation model rests on (dnnpart.pricing.chain.recomputed_forward): a
    non-reentrant checkpoint re-runs the forward only until every value the backward reads is
    rebuilt, so a last layer whose output only the loss outside reads runs once."""
    import torch
    from torch.utils.checkpoint import checkpoint

    calls = {"body": 0, "head": 0}
    body, head = torch.nn.Linear(8, 8), torch.nn.Linear(8, 32)
    body.register_forward_hook(lambda *_: calls.__setitem__("body", calls["body"] + 1))
    head.register_forward_hook(lambda *_: calls.__setitem__("head", calls["head"] + 1))
    x = torch.randn(4, 8, requires_grad=True)
    out = checkpoint(lambda v: head(torch.nn.functional.gelu(body(v))), x, use_reentrant=False)
    torch.nn.functional.cross_entropy(out, torch.zeros(4, dtype=torch.long)).backward()
    assert calls == {"body": 2, "head": 1}


def test_resnet_inference_memory_model_matches_the_run() -> None:
    planned = plan_model(RESNET, cluster="3xA100", microbatches=4, input_shapes=[(2, 3, 32, 32)])
    ran = run_plan(planned, steps=STEPS)
    info = ran.to_dict()
    assert info["relative_diff"] < 1e-5
    _assert_memory_agrees(info, stages=len(info["devices_used"]))
    _assert_timed(info)


def _saved_bytes(planned: PlannedModel) -> list[tuple[float, float, float, float]]:
    """Per stage of the run: (bytes autograd saves for one micro-batch, the stages model's
    stash A, the old stash, bytes the stage sends up)."""
    from dnnpart.export.training_run import carries, carry_module, stage_examples
    from dnnpart.frontends.sources import example_inputs
    from dnnpart.workflow.loading import with_runnable
    from dnnpart.workflow.running import pipeline_program

    planned = with_runnable(planned)
    assert planned.runnable is not None
    source = planned.runnable.source
    program, _ = pipeline_program(planned, "p")
    carry = carries(program)
    mb = example_inputs(source.input_shapes, source.input_dtype, seed=1, module=source.module)
    examples = stage_examples(program, carry, mb)
    g, a = planned.problem.graph, planned.require_plan().assignment
    stash = node_activation_bytes(g)
    every = np.where(~g.is_backward & (g.memory_classes() == NORMAL), g.node_output_bytes(), 0.0)
    out = []
    for k, stage in enumerate(program.stages):
        module = carry_module(program, k, carry)
        args = tuple(x.clone().requires_grad_(x.is_floating_point()) for x in examples[k][0])
        saved: dict[int, int] = {}

        def pack(t: Any, saved: dict[int, int] = saved) -> Any:
            storage = t.untyped_storage()
            saved[storage.data_ptr()] = storage.nbytes()
            return t

        with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
            outs = module(*args)
        own = {x.untyped_storage().data_ptr() for x in (*args, *module.parameters(), *module.buffers())}
        sent = sum(o.numel() * o.element_size() for o in (outs if isinstance(outs, tuple) else (outs,)))
        mine = a == stage.device
        out.append((float(sum(v for p, v in saved.items() if p not in own)), float(stash[mine].sum()),
                    float(every[mine].sum()), float(sent)))
    return out


@pytest.mark.parametrize("which", ["resnet", "gpt2"])
def test_the_stash_is_what_autograd_saves(which: str, request: pytest.FixtureRequest) -> None:
    planned = request.getfixturevalue(f"{which}_training")
    for saved, stash, every, sent in _saved_bytes(planned):
        # the stages model keeps a value where it is made; the run keeps a boundary value in the
        # next stage's receive buffer (sent); GPT-2's stash also holds attention probabilities
        # the fused kernel does not keep (docs/run.md)
        assert abs(stash - saved) <= 0.15 * saved + sent, (which, saved, stash, sent)
        if saved > 0.1 * max(stash, 1.0):  # a stage of real blocks, not only an embedding
            # ablation, one thing changed (the stash rule): every forward output, as before
            assert every > 2 * saved, (which, saved, every)


@pytest.mark.slow
@pytest.mark.parametrize("schedule", ["1f1b", "gpipe"])
def test_gpt2_with_a_real_vocabulary_memory_model_matches_the_run(schedule: str) -> None:
    # GPT-2's 50,257-token head: the last stage's logits dominate (the loss's buffers, held
    # outputs, the tied embedding's gradient accumulated in place on both stages)
    planned = plan_model("hf:gpt2:n_layer=2,n_embd=128,n_head=2", cluster="2xA100", training=True,
                         schedule=schedule, microbatches=4, input_shapes=[(1, 128)])
    info = run_plan(planned, steps=STEPS).to_dict()
    assert info["passed"] is True
    _assert_memory_agrees(info, stages=2)
