"""Where ``run`` puts its ranks: ``--device cuda`` (rank ``r`` on ``cuda:r``), ranks started
fresh rather than forked, stage modules moved whole, and the prediction ``run`` makes
available without running (for a measurement taken on another machine, such as a GPU).

No GPU here: the CUDA path itself ran on an H100 (docs/results/prediction-accuracy-gpu.md);
these tests check what can be checked on a CPU -- the refusal where no GPU is seen, the
spawned ranks (the GPU path's start method) giving the forked ranks' results, the module
moves, and the prediction being the one ``run`` prints.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

torch = pytest.importorskip("torch", reason="dnnpart run needs torch (pip install 'dnnpart[torch]')")
if not torch.distributed.is_available() or not torch.distributed.is_gloo_available():
    pytest.skip("torch.distributed with the gloo backend is not available", allow_module_level=True)

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "fuzz"))
from clirun import assert_one_error_line, run_cli  # noqa: E402

from dnnpart.errors import UsageError  # noqa: E402
from dnnpart.export.on_device import move_module, retarget  # noqa: E402
from dnnpart.export.runtime import check_run_device, measure_distributed  # noqa: E402
from dnnpart.export.stages import split_module  # noqa: E402
from dnnpart.export.training_run import RTOL, run_training_step  # noqa: E402
from dnnpart.frontends.sources import example_inputs  # noqa: E402
from dnnpart.workflow import plan_model, run_plan  # noqa: E402
from dnnpart.workflow.loading import with_runnable  # noqa: E402
from dnnpart.workflow.running import pipeline_program, predict_plan_run  # noqa: E402

RESNET = "module:dnnpart.frontends.models:shared_relu_resnet"
TINY_GPT2 = "hf:gpt2:n_layer=2,n_embd=64,n_head=2,vocab_size=512"
NO_CUDA = not torch.cuda.is_available()


@pytest.mark.skipif(not NO_CUDA, reason="this machine has a GPU: nothing to refuse")
def test_cuda_ranks_are_refused_where_torch_sees_no_gpu(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match=r"--device cuda.*1 rank.*0 CUDA device"):
        check_run_device("cuda", 1)
    plan = tmp_path / "p.json"
    assert run_cli(["plan", RESNET, "--input-shape", "1,3,16,16", "--cluster", "1xA100", "-o",
                    str(plan), "--quiet"])[0] == 0
    code, _, err = run_cli(["run", str(plan), "--device", "cuda", "--steps", "1", "--trust-plan"])
    assert_one_error_line(code, err, must_name="--device cuda")


def test_an_unknown_run_device_is_a_usage_error() -> None:
    check_run_device("cpu", 64)  # a CPU has room for any number of ranks
    with pytest.raises(UsageError, match="--device 'tpu'"):
        check_run_device("tpu", 1)
    planned = plan_model(RESNET, cluster="1xA100", input_shapes=[(1, 3, 16, 16)])
    with pytest.raises(UsageError, match="--device 'tpu'"):
        run_plan(planned, device="tpu", steps=1)


def test_move_module_moves_tensor_attributes_and_positional_devices() -> None:
    class Rotary(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.inv = torch.ones(4)  # a plain attribute, as a traced constant is

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return x * self.inv.to(x.device)  # traces as aten.to.device(inv, cpu, ...)

    gm = torch.export.export(Rotary(), (torch.randn(2, 4),)).module()
    positional = [n for n in gm.graph.nodes if any(isinstance(a, torch.device) for a in n.args)]
    meta = torch.device("meta")
    move_module(gm, meta)
    assert all(t.device == meta for t in (*gm.parameters(), *gm.buffers()))
    for node in positional:  # every traced cpu device now names the target
        assert all(a == meta for a in node.args if isinstance(a, torch.device))
    assert gm(torch.randn(2, 4, device="meta")).device == meta
    retarget(gm, torch.device("cpu"))  # a CPU target changes nothing
    assert all(a == meta for n in positional for a in n.args if isinstance(a, torch.device))


def _tiny_gpt2(training: bool, microbatches: int = 4) -> tuple[object, list[tuple[object, ...]]]:
    planned = with_runnable(plan_model(TINY_GPT2, cluster="2xA100", input_shapes=[(1, 16)],
                                       training=training, microbatches=microbatches))
    assert planned.runnable is not None
    source = planned.runnable.source
    batches = [example_inputs(source.input_shapes, source.input_dtype, seed=i + 1, module=source.module)
               for i in range(microbatches)]
    return planned, batches


def test_spawned_training_ranks_match_the_reference() -> None:
    planned, batches = _tiny_gpt2(training=True)
    program, _ = pipeline_program(planned, "tiny")  # type: ignore[arg-type]
    gm = planned.runnable.module  # type: ignore[attr-defined]
    spawned = run_training_step(program, gm, batches, steps=1, spawn=True)
    assert spawned.passed and spawned.grad_relative_diff <= RTOL and len(spawned.step_s) == 1
    assert spawned.losses == pytest.approx(spawned.reference_losses, rel=RTOL)


@pytest.mark.slow  # 17 s; spawned training ranks (above) run in the default test run
def test_spawned_inference_ranks_give_the_forked_outputs() -> None:
    planned, batches = _tiny_gpt2(training=False)
    run = planned.runnable  # type: ignore[attr-defined]
    program = split_module(run.module, run.device_of)
    forked = measure_distributed(program, batches, steps=1)
    spawned = measure_distributed(program, batches, steps=1, spawn=True)
    assert len(spawned.outputs) == len(forked.outputs) == len(batches)
    leaves = torch.utils._pytree.tree_leaves
    for a, b in zip(forked.outputs, spawned.outputs, strict=True):
        assert all(torch.equal(x, y) for x, y in zip(leaves(a), leaves(b), strict=True))


@pytest.mark.parametrize("training", [False, True])
def test_the_prediction_without_a_run_is_the_one_run_prints(training: bool) -> None:
    planned, _ = _tiny_gpt2(training=training)
    ran = run_plan(planned, steps=1).to_dict()["measurement"]  # type: ignore[arg-type]
    prediction, order = predict_plan_run(planned)  # type: ignore[arg-type]
    assert len(order) == len(ran["stages"]) == len(prediction.stages)
    assert prediction.step_s == pytest.approx(ran["step"]["predicted_s"], rel=1e-12)
    for mine, theirs in zip(prediction.stages, ran["stages"], strict=True):
        assert mine.forward_s == pytest.approx(theirs["forward"]["predicted_s"], rel=1e-12)
        assert mine.peak_bytes == pytest.approx(theirs["memory"]["predicted_bytes"], rel=1e-12)


def test_one_rank_inference_holds_no_pending_sends() -> None:
    """One rank keeps its outputs and sends nothing: the prediction has no send buffers, and
    its peak agrees with the allocator's within the memory model's 10%."""
    planned = plan_model(RESNET, cluster="1xA100", microbatches=4, input_shapes=[(2, 3, 32, 32)])
    info = run_plan(planned, steps=1).to_dict()
    (stage,) = info["measurement"]["stages"]
    assert stage["memory"]["parts"]["buffers"] == 0.0
    assert abs(stage["memory"]["error"]) <= 0.10, stage["memory"]


def test_run_help_names_the_devices() -> None:
    code, out, _ = run_cli(["run", "--help"])
    assert code == 0 and "--device" in out and "cuda" in out
    json.dumps(out)  # plain text
