"""The hybrid cost model (dnnpart.pricing.parallel): its terms against hand-computed values and
the scalar ring all-reduce of dnnpart.pricing.pairs, and the directions each choice must move
them."""

from __future__ import annotations

import math

import numpy as np
import pytest

from dnnpart.devices.topology import two_level
from dnnpart.pricing.pairs import inverse_bandwidth, ring_allreduce_time
from dnnpart.pricing.parallel import GroupLinks, ParallelConfig, evaluate_parallel, ideal_bound
from dnnpart.pricing.parallel_profile import ModelProfile, UnitProfile

ZERO = UnitProfile(forward_s=(0.0, 0.0), backward_s=(0.0, 0.0), weights=(0.0, 0.0),
                   stash=(0.0, 0.0), working=0.0, attention_s=0.0, attention_stash=0.0, boundary=0.0)
BLOCK = UnitProfile(forward_s=(2.0, 0.5), backward_s=(4.0, 1.0), weights=(8e6, 1e4),
                    stash=(6e6, 2e6), working=1e6, attention_s=0.4, attention_stash=2e6,
                    boundary=1e5)


def config(**kw) -> ParallelConfig:
    base = dict(d=1, t=1, p=1, zero=0, micro_batch=1, microbatches=1, schedule="1f1b",
                blocks=(4,), recompute=("none",))
    base.update(kw)
    return ParallelConfig(**base)


def profile(**kw) -> ModelProfile:
    base = dict(prologue=ZERO, block=BLOCK, epilogue=ZERO, n_blocks=4, heads=4, optimizer_k=2.0)
    base.update(kw)
    return ModelProfile(**base)


def test_one_device_is_the_compute_of_every_sample() -> None:
    cluster = two_level(nodes=1, gpus=1, memory=math.inf)
    cost = evaluate_parallel(profile(), cluster, config(micro_batch=2, microbatches=3))
    per_sample = 4 * (2.0 + 0.5 + 4.0 + 1.0)
    assert cost.step_s == pytest.approx(6 * per_sample)
    assert cost.step_s == pytest.approx(ideal_bound(profile(), 6, 1))
    s = cost.stages[0]  # weights W, gradients W, Adam 2W, 1F1B one micro-batch of 2 in flight
    w = 4 * (8e6 + 1e4)
    assert float(s.memory) == pytest.approx(4 * w + 2 * 4 * 8e6 + 1e6)


def test_rings_price_as_the_scalar_ring_all_reduce() -> None:
    cluster = two_level(nodes=2, gpus=4, intra=1e11, inter=1e9, latency=1e-6, inter_latency=1e-5)
    inv = inverse_bandwidth(cluster.bandwidth)
    for d, t, p in ((2, 4, 1), (8, 1, 1), (4, 2, 1), (2, 2, 2), (1, 4, 2)):
        links = GroupLinks.of(cluster, d=d, t=t, p=p)
        grid = np.arange(d * t * p).reshape(p, d, t)
        for s in range(p):
            for size in (1e3, 1e7):
                tensor = max(ring_allreduce_time(inv, cluster.latency, list(g), size) for g in grid[s])
                data = max(ring_allreduce_time(inv, cluster.latency, list(g), size) for g in grid[s].T)
                assert float(links.tensor[s].allreduce(size)) == pytest.approx(tensor)
                assert float(links.data[s].allreduce(size)) == pytest.approx(data)


def test_tensor_parallelism_divides_only_the_divided_part() -> None:
    fast = two_level(nodes=1, gpus=2, intra=1e30, latency=0.0)
    one = evaluate_parallel(profile(), fast, config()).stages[0]
    two = evaluate_parallel(profile(), fast, config(t=2)).stages[0]
    assert float(one.tau) == pytest.approx(4 * (2.0 + 0.5 + 4.0 + 1.0))
    assert float(two.tau) == pytest.approx(4 * ((2.0 + 4.0) / 2 + 0.5 + 1.0))
    assert float(two.weights) == pytest.approx(4 * (8e6 / 2 + 1e4))


def test_each_choice_moves_its_terms_the_right_way() -> None:
    cluster = two_level(nodes=2, gpus=2, intra=1e10, inter=1e9, latency=1e-6)
    prof = profile()
    base = dict(d=4, microbatches=4)
    z = [evaluate_parallel(prof, cluster, config(zero=k, **base)).stages[0] for k in range(4)]
    assert float(z[0].memory) > float(z[1].memory) > float(z[2].memory) > float(z[3].memory)
    assert float(z[3].tau) > float(z[2].tau) == float(z[0].tau)  # ZeRO-3 gathers per micro-batch
    assert float(z[3].sync) == pytest.approx(float(z[0].sync) / 2)  # a reduce-scatter, not an all-reduce
    r = {k: evaluate_parallel(prof, cluster, config(recompute=(k,), **base)).stages[0]
         for k in ("none", "selective", "full")}
    assert float(r["none"].tau) < float(r["selective"].tau) < float(r["full"].tau)
    assert float(r["none"].activations) > float(r["selective"].activations)
    assert float(r["none"].activations) > float(r["full"].activations)
    one_f = evaluate_parallel(prof, cluster, config(p=2, d=2, blocks=(2, 2), recompute=("none",) * 2,
                                                    microbatches=8))
    gpipe = evaluate_parallel(prof, cluster, config(p=2, d=2, blocks=(2, 2), recompute=("none",) * 2,
                                                    microbatches=8, schedule="gpipe"))
    assert [s.in_flight for s in one_f.stages] == [2, 1]
    assert [s.in_flight for s in gpipe.stages] == [8, 8]
    inter = evaluate_parallel(prof, cluster, config(p=2, d=2, blocks=(2, 2), recompute=("none",) * 2,
                                                    microbatches=8, schedule="interleaved", virtual=2))
    # Megatron's warm-up: 2 (p - s - 1) + (v - 1) p, plus the one in its forward
    assert [s.in_flight for s in inter.stages] == [5, 3]
    assert inter.step_s < one_f.step_s  # a smaller bubble, the same compute


def test_a_plan_over_capacity_does_not_fit() -> None:
    small = two_level(nodes=1, gpus=1, memory=1e6)
    cost = evaluate_parallel(profile(), small, config())
    assert not cost.fits and cost.step_s == math.inf


def test_the_forward_share_is_the_forward_pass() -> None:
    fast = two_level(nodes=1, gpus=2, intra=1e30, latency=0.0)
    s = evaluate_parallel(profile(), fast, config(micro_batch=2, microbatches=2)).stages[0]
    assert float(s.forward) == pytest.approx(2 * 4 * (2.0 + 0.5))  # b x the blocks' forward
    cluster = two_level(nodes=2, gpus=2, intra=1e10, inter=1e9, latency=1e-6)
    base = dict(d=1, t=2, p=2, blocks=(2, 2), microbatches=4)
    by = {k: evaluate_parallel(profile(), cluster, config(recompute=(k, k), **base)).stages
          for k in ("none", "selective", "full")}
    for k, stages in by.items():
        for s in stages:
            assert 0.0 < float(s.forward) < float(s.tau) / 2, k  # the backward is the larger part
    # recomputation runs in the backward: the forward share does not move
    for s in range(2):
        assert float(by["full"][s].forward) == pytest.approx(float(by["none"][s].forward))
        assert float(by["full"][s].tau) > float(by["none"][s].tau)
    z3 = evaluate_parallel(profile(), cluster, config(zero=3, d=2, t=1, p=2, blocks=(2, 2),
                                                      microbatches=4, recompute=("none",) * 2)).stages
    z0 = evaluate_parallel(profile(), cluster, config(zero=0, d=2, t=1, p=2, blocks=(2, 2),
                                                      microbatches=4, recompute=("none",) * 2)).stages
    for a, b in zip(z3, z0, strict=True):  # one of ZeRO-3's two gathers is the forward's
        assert float(a.forward) - float(b.forward) == pytest.approx((float(a.tau) - float(b.tau)) / 2)


def test_full_recomputation_redoes_the_blocks_not_the_embedding_or_the_head() -> None:
    fast = two_level(nodes=1, gpus=1, intra=1e30, latency=0.0, memory=math.inf)
    head = UnitProfile(forward_s=(5.0, 0.0), backward_s=(10.0, 0.0), weights=(1e6, 0.0),
                       stash=(3e6, 0.0), working=0.0, attention_s=0.0, attention_stash=0.0,
                       boundary=1e5)
    prof = profile(prologue=head, epilogue=head)
    none = evaluate_parallel(prof, fast, config(micro_batch=2)).stages[0]
    full = evaluate_parallel(prof, fast, config(micro_batch=2, recompute=("full",))).stages[0]
    # Megatron checkpoints the transformer layers: 4 blocks' forward again, per sample
    assert float(full.tau) - float(none.tau) == pytest.approx(2 * 4 * (2.0 + 0.5))
    # stash: each block's input and the embedding's and the head's own, one block rebuilt
    assert float(full.activations) == pytest.approx(2 * (4 * 1e5 + 2 * 3e6) + 2 * (6e6 + 2e6))
