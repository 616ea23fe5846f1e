"""A plan applied in the user's own loop: each gloo process builds its stage and the plan's
schedule from a live module's plan, runs one step, and the loss equals the unpartitioned
model's (mean over micro-batches of the same loss)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

WORLD = 2
MICRO = 2


def _net() -> torch.nn.Module:
    torch.manual_seed(0)
    return torch.nn.Sequential(*[torch.nn.Sequential(torch.nn.Linear(256, 256), torch.nn.ReLU())
                                 for _ in range(4)])


def _data() -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(1)
    return torch.randn(MICRO * 32, 256, generator=g), torch.randn(MICRO * 32, 256, generator=g)


def _worker(rank: int, init: str, out: str) -> None:
    import torch.distributed as dist

    from dnnpart.workflow import pipeline_schedule, pipeline_stage, plan_model

    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=f"file://{init}", rank=rank, world_size=WORLD)
    try:
        x, y = _data()
        planned = plan_model(_net(), example_inputs=[x[:32]], cluster=f"{WORLD}xA100", training=True,
                             schedule="1f1b", microbatches=MICRO)
        assert len(planned.stages) == WORLD, planned.result.stats
        stage = pipeline_stage(planned, rank)
        schedule = pipeline_schedule(planned, stage, torch.nn.functional.mse_loss)
        if rank == 0:
            schedule.step(x)
        else:
            losses: list[torch.Tensor] = []
            schedule.step(target=y, losses=losses)
            Path(out).write_text(json.dumps([float(v) for v in losses]))
    finally:
        dist.destroy_process_group()


def test_stages_and_schedule_run_in_the_users_loop(tmp_path: Path) -> None:
    import torch.multiprocessing as mp

    out = tmp_path / "losses.json"
    mp.spawn(_worker, args=(str(tmp_path / "init"), str(out)), nprocs=WORLD, join=True)
    losses = json.loads(out.read_text())
    net = _net()
    x, y = _data()
    with torch.no_grad():
        want = [float(torch.nn.functional.mse_loss(net(xi), yi))
                for xi, yi in zip(x.chunk(MICRO), y.chunk(MICRO), strict=True)]
    assert losses == pytest.approx(want, rel=1e-5)
