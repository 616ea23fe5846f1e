"""A tensor x pipeline plan of GPT-2 runs on gloo ranks and matches the whole model.

One real 2-way tensor x 2-stage pipeline step (4 processes, ~10 s here) is shared by the tests
that take it apart: its gradients must match the reference within
:data:`dnnpart.export.tensor_parallel_run.RTOL` (float64), and the same gradients reassembled
under a wrong split (stages swapped, tensor shards swapped, q|k|v split as one block, the head's
use of the tied ``wte`` dropped, replicas disagreeing) must fail the check. One more real run
covers a single stage (both ``wte`` uses on one rank); the refusals and the launcher's failure
and timeout paths cost no model run.
"""

from __future__ import annotations

import dataclasses
import math
import multiprocessing
import os
import time
from typing import Any

import pytest

torch = pytest.importorskip("torch", reason="needs torch (pip install 'dnnpart[torch]')")
pytest.importorskip("transformers", reason="needs transformers (pip install 'dnnpart[hf]')")
if not torch.distributed.is_available() or not torch.distributed.is_gloo_available():
    pytest.skip("torch.distributed with the gloo backend is not available", allow_module_level=True)

from dnnpart.errors import UsageError  # noqa: E402
from dnnpart.export.tensor_parallel_run import (  # noqa: E402
    RTOL,
    RankPart,
    Shard,
    TensorPipelineRun,
    check_tensor_pipeline,
    compare_tensor_pipeline,
    launch_ranks,
    run_tensor_pipeline,
    tensor_shard,
)
from dnnpart.pricing.parallel import ParallelConfig  # noqa: E402

SIZES: dict[str, int] = {"n_layer": 4, "n_embd": 32, "n_head": 4, "vocab_size": 64, "seq": 16}
N_PARAMETERS = 2 + 12 * 4 + 2  # wte, wpe; 12 per block; ln_f (lm_head is wte)


def plan(t: int, p: int, blocks: tuple[int, ...], *, d: int = 1, schedule: str = "1f1b") -> ParallelConfig:
    return ParallelConfig(d=d, t=t, p=p, zero=0, micro_batch=2, microbatches=2, schedule=schedule,
                          blocks=blocks, recompute=("none",) * p)


@pytest.fixture(scope="module")
def run22() -> TensorPipelineRun:
    return run_tensor_pipeline(plan(2, 2, (2, 2)), **SIZES)


def with_parts(run: TensorPipelineRun, parts: list[RankPart]) -> TensorPipelineRun:
    return dataclasses.replace(run, parts=parts)


def edited(run: TensorPipelineRun, edit: Any) -> TensorPipelineRun:
    """The run with every part's grads replaced by ``edit(part)``."""
    return with_parts(run, [dataclasses.replace(p, grads=edit(p)) for p in run.parts])


def test_tensor_2_x_pipeline_2_matches_the_whole_model(run22: TensorPipelineRun) -> None:
    check = compare_tensor_pipeline(run22)
    assert check.passed, check.summary()
    assert check.max_rel_grad_diff <= RTOL and check.max_rel_replica_diff <= RTOL
    assert check.n_parameters == N_PARAMETERS and check.t == 2 and check.p == 2
    assert check.loss_diff <= RTOL * check.reference_loss
    # a random model's loss over 64 tokens is near ln 64; the step really trained on something
    assert 3.0 < check.reference_loss < 5.5
    assert check.losses == pytest.approx(run22.reference_losses, rel=RTOL)
    assert "passed" in check.summary() and "tensor 2 x pipeline 2" in check.summary()


def test_ranks_hold_only_their_part(run22: TensorPipelineRun) -> None:
    assert [p.rank for p in run22.parts] == [0, 1, 2, 3]
    for part in run22.parts:
        # rank j + t s: tensor rank fastest
        assert (part.stage, part.tensor) == (part.rank // 2, part.rank % 2)
        blocks = {int(n.split(".")[2]) for n in part.grads if n.startswith("transformer.h.")}
        assert blocks == ({0, 1} if part.stage == 0 else {2, 3})
        assert ("transformer.wte.weight" in part.grads) == (part.stage == 0)
        assert ("transformer.wpe.weight" in part.grads) == (part.stage == 0)
        assert ("lm_head.weight" in part.grads) == (part.stage == 1)
        assert ("transformer.ln_f.weight" in part.grads) == (part.stage == 1)
        assert bool(part.losses) == (part.stage == 1)
        b = 2 * part.stage
        shard, grad = part.grads[f"transformer.h.{b}.attn.c_attn.weight"]
        assert tuple(grad.shape) == (32, 48) and shard.dim == 1
        assert tuple(part.grads[f"transformer.h.{b}.mlp.c_fc.weight"][1].shape) == (32, 64)
        assert tuple(part.grads[f"transformer.h.{b}.mlp.c_proj.weight"][1].shape) == (64, 32)
        assert tuple(part.grads[f"transformer.h.{b}.attn.c_proj.weight"][1].shape) == (16, 32)
        assert part.grads[f"transformer.h.{b}.attn.c_proj.bias"][0].replicated


def test_swapped_stages_are_detected(run22: TensorPipelineRun) -> None:
    # each stage's gradients claimed by the other stage's blocks
    swap = {"0": "2", "1": "3", "2": "0", "3": "1"}

    def rename(part: RankPart) -> dict[str, tuple[Shard, Any]]:
        out = {}
        for name, piece in part.grads.items():
            bits = name.split(".")
            if bits[:2] == ["transformer", "h"]:
                bits[2] = swap[bits[2]]
            out[".".join(bits)] = piece
        return out

    check = compare_tensor_pipeline(edited(run22, rename))
    assert not check.passed and check.max_rel_grad_diff > 1e-3


def test_swapped_tensor_shards_are_detected(run22: TensorPipelineRun) -> None:
    def swap(part: RankPart) -> dict[str, tuple[Shard, Any]]:
        out = dict(part.grads)
        for name, (_, grad) in part.grads.items():
            if name.endswith("c_attn.weight"):
                out[name] = (tensor_shard(name, (32, 96), 2, 1 - part.tensor), grad)
        return out

    check = compare_tensor_pipeline(edited(run22, swap))
    assert not check.passed and "c_attn.weight" in check.worst_parameter


def test_qkv_split_as_one_block_is_detected(run22: TensorPipelineRun) -> None:
    # the mistake the q|k|v layout invites: rank j's columns read as columns 48 j .. 48 j + 47
    def contiguous(part: RankPart) -> dict[str, tuple[Shard, Any]]:
        out = dict(part.grads)
        for name, (_, grad) in part.grads.items():
            if ".c_attn." in name:
                dim = grad.dim() - 1
                shape = (32, 96) if dim else (96,)
                out[name] = (Shard(shape, dim, ((48 * part.tensor, 48 * part.tensor + 48),)), grad)
        return out

    check = compare_tensor_pipeline(edited(run22, contiguous))
    assert not check.passed and ".c_attn." in check.worst_parameter


def test_the_heads_use_of_the_tied_embedding_counts(run22: TensorPipelineRun) -> None:
    def drop_head(part: RankPart) -> dict[str, tuple[Shard, Any]]:
        return {n: g for n, g in part.grads.items() if n != "lm_head.weight"}

    check = compare_tensor_pipeline(edited(run22, drop_head))
    assert not check.passed and check.worst_parameter == "transformer.wte.weight"


def test_disagreeing_replicas_are_detected(run22: TensorPipelineRun) -> None:
    scale = max(float(g.abs().max()) for g in run22.reference_grads.values())

    def nudge(part: RankPart) -> dict[str, tuple[Shard, Any]]:
        out = dict(part.grads)
        if part.tensor == 1 and "transformer.ln_f.weight" in out:
            shard, grad = out["transformer.ln_f.weight"]
            out["transformer.ln_f.weight"] = (shard, grad + 1e-6 * scale)
        return out

    check = compare_tensor_pipeline(edited(run22, nudge))
    # tensor rank 0's copy is the one compared; the disagreement alone fails the check
    assert check.max_rel_grad_diff <= RTOL
    assert check.max_rel_replica_diff == pytest.approx(1e-6, rel=1e-3) and not check.passed


def test_an_uncovered_shard_is_refused(run22: TensorPipelineRun) -> None:
    def drop(part: RankPart) -> dict[str, tuple[Shard, Any]]:
        return {n: g for n, g in part.grads.items() if not (part.tensor == 1 and n.endswith("c_fc.weight"))}

    with pytest.raises(RuntimeError, match=r"c_fc\.weight do not cover it exactly once"):
        compare_tensor_pipeline(edited(run22, drop))


def test_one_stage_holds_both_uses_of_the_tied_embedding() -> None:
    check = check_tensor_pipeline(plan(2, 1, (4,), schedule="gpipe"), **SIZES, seed=3)
    assert check.passed, check.summary()
    assert check.n_parameters == N_PARAMETERS and check.max_rel_grad_diff <= RTOL


@pytest.mark.parametrize("t", [1, 2, 4])
def test_tensor_shards_partition_every_split_parameter(t: int) -> None:
    shapes = {"attn.c_attn.weight": (32, 96), "attn.c_attn.bias": (96,), "attn.c_proj.weight": (32, 32),
              "mlp.c_fc.weight": (32, 128), "mlp.c_fc.bias": (128,), "mlp.c_proj.weight": (128, 32)}
    for suffix, shape in shapes.items():
        name = f"transformer.h.1.{suffix}"
        full = torch.arange(math.prod(shape), dtype=torch.float64).reshape(shape)
        total, count = torch.zeros(shape, dtype=torch.float64), torch.zeros(shape, dtype=torch.int64)
        for j in range(t):
            shard = tensor_shard(name, shape, t, j)
            piece = shard.take(full)
            assert tuple(piece.shape) == shard.piece_shape
            shard.place(piece, total, count)
        assert bool((count == 1).all()) and torch.equal(total, full), suffix
    # rank j holds heads j n_head / t ... of q, of k and of v (head width 8 of 4 heads)
    q, k, v = tensor_shard("transformer.h.0.attn.c_attn.weight", (32, 96), t, t - 1).ranges
    width = 32 // t
    assert q == (32 - width, 32) and k == (64 - width, 64) and v == (96 - width, 96)
    for name in ("transformer.h.0.attn.c_proj.bias", "transformer.h.0.ln_1.weight", "transformer.wte.weight",
                 "lm_head.weight", "transformer.ln_f.bias"):
        assert tensor_shard(name, (32,), t, 0).replicated, name


@pytest.mark.parametrize(
    ("config", "sizes", "message"),
    [
        (plan(2, 2, (2, 2), d=2), SIZES, "d=2 data-parallel"),
        (plan(4, 1, (4,)), {**SIZES, "n_embd": 48, "n_head": 6}, "do not divide n_head=6"),
        (plan(2, 2, (2, 3)), SIZES, "hold 5 blocks"),
        (plan(2, 2, (2, 2)), {**SIZES, "seq": 1}, "seq must be >= 2"),
        (ParallelConfig(d=1, t=2, p=2, zero=0, micro_batch=1, microbatches=2, schedule="interleaved",
                        blocks=(2, 2), recompute=("none", "none"), virtual=2), SIZES, "'interleaved'"),
    ],
)
def test_plans_the_check_cannot_run_are_refused(config: ParallelConfig, sizes: dict[str, int],
                                                message: str) -> None:
    with pytest.raises(UsageError, match=message) as info:
        check_tensor_pipeline(config, **sizes)
    assert "\n" not in str(info.value)


def _rank_children() -> list[str]:
    return [p.name for p in multiprocessing.active_children() if p.name.startswith("dnnpart-rank")]


def test_a_failing_rank_is_named_with_its_error() -> None:
    with pytest.raises(RuntimeError, match=r"rank 1 of the log run failed: ValueError: .*math domain error"):
        launch_ranks(math.log, [(1.0,), (0.0,)], timeout_s=120, what="the log run")
    assert _rank_children() == []


def test_a_rank_dying_silently_is_named() -> None:
    with pytest.raises(RuntimeError, match=r"rank 0 of .* died \(exit code 3\)"):
        launch_ranks(os._exit, [(3,)], timeout_s=120)


def test_a_run_past_its_time_ends_its_ranks() -> None:
    start = time.monotonic()
    # rank 0 returns at once (it may still be starting on a loaded machine); rank 1 must be named
    with pytest.raises(RuntimeError, match=r"timed out after 3 s; still running: (rank 0, )?rank 1$"):
        launch_ranks(time.sleep, [(0.0,), (120.0,)], timeout_s=3)
    assert time.monotonic() - start < 30
    assert _rank_children() == []


def test_the_check_does_not_hang_past_its_timeout() -> None:
    start = time.monotonic()
    every_rank = r"timed out after 0.2 s; still running: rank 0 .*\(tensor rank 1 of stage 1\)$"
    with pytest.raises(RuntimeError, match=every_rank):
        check_tensor_pipeline(plan(2, 2, (2, 2)), **SIZES, timeout_s=0.2)
    assert time.monotonic() - start < 30
    assert _rank_children() == []


def test_the_plan_plan_parallel_finds_runs_and_matches() -> None:
    """The loop closed: ``plan --parallel`` (tensor and pipeline fixed at 2) plans a GPT-2, and
    its launchable plan, as the search wrote it (split, micro-batches), runs on four gloo ranks
    and matches the whole model."""
    from dnnpart.workflow import plan_parallel

    sizes = {"n_layer": 4, "n_embd": 32, "n_head": 4, "vocab_size": 64}
    planned = plan_parallel(
        "hf:gpt2:" + ",".join(f"{k}={v}" for k, v in sizes.items()), cluster="4xA100",
        dims=frozenset({"tp", "pp"}), tensor=2, pipeline=2, schedules=("gpipe", "1f1b"),
        input_shapes=[(1, 16)], global_batch=4)
    config = planned.result.launchable.config
    assert (config.d, config.t, config.p, sum(config.blocks)) == (1, 2, 2, 4)
    check = check_tensor_pipeline(config, seq=16, **sizes)
    assert check.passed, check.summary()
