"""The hybrid search against brute force: every (d, t, p, b, ZeRO, schedule, v) choice, every
split of the blocks into stages and every recomputation per stage, each priced by
``evaluate_parallel`` (the one formula), on random profiles and two-level clusters."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dnnpart.devices.topology import two_level
from dnnpart.pricing.parallel import RECOMPUTE, ParallelConfig, evaluate_parallel, ideal_bound
from dnnpart.pricing.parallel_profile import ModelProfile, UnitProfile
from dnnpart.solvers.hybrid import best_split, search_parallel


def _unit(draw: st.DrawFn, scale: float) -> UnitProfile:
    x = lambda lo, hi: draw(st.floats(lo, hi, allow_nan=False)) * scale  # noqa: E731
    fwd = (x(0.5, 2.0), x(0.0, 0.5))
    bwd = (x(1.0, 4.0), x(0.0, 1.0))
    stash = (x(1e6, 8e6), x(0.0, 2e6))
    return UnitProfile(forward_s=fwd, backward_s=bwd, weights=(x(1e6, 2e7), x(0.0, 1e5)),
                       stash=stash, working=x(0.0, 4e6), attention_s=fwd[0] * 0.2,
                       attention_stash=stash[0] * 0.3, boundary=x(1e4, 4e5))


@st.composite
def cases(draw: st.DrawFn) -> tuple[ModelProfile, object, int]:
    profile = ModelProfile(prologue=_unit(draw, 0.5), block=_unit(draw, 1.0),
                           epilogue=_unit(draw, 0.7), n_blocks=draw(st.integers(1, 5)),
                           heads=draw(st.sampled_from([1, 2, 4, 6])),
                           optimizer_k=draw(st.sampled_from([0.0, 2.0])))
    nodes, gpus = draw(st.sampled_from([(1, 1), (1, 2), (2, 1), (1, 4), (2, 2), (2, 3)]))
    memory = draw(st.sampled_from([math.inf, 2e8, 8e7, 4e7]))
    cluster = two_level(nodes=nodes, gpus=gpus, intra=draw(st.sampled_from([1e9, 1e11])),
                        inter=draw(st.sampled_from([1e8, 1e9])),
                        latency=draw(st.sampled_from([0.0, 1e-5])), memory=memory)
    return profile, cluster, draw(st.sampled_from([1, 2, 4, 6, 8]))


def compositions(total: int, parts: int):
    for cuts in itertools.combinations(range(1, total), parts - 1):
        bounds = (0, *cuts, total)
        yield tuple(bounds[i + 1] - bounds[i] for i in range(parts))


def brute_force(profile: ModelProfile, cluster, global_batch: int):
    """Every plan of the space, written out: ``(best, launchable, per t, per p)`` step times."""
    n = cluster.n_accelerators
    node = int(np.bincount(cluster.group).max())
    L = profile.n_blocks
    best = uniform = math.inf
    by_t: dict[int, float] = {}
    by_p: dict[int, float] = {}
    for t in range(1, n + 1):
        if profile.heads % t or t > node:
            continue
        for p in range(1, L + 1):
            if n % (t * p):
                continue
            d = n // (t * p)
            if global_batch % d:
                continue
            for b in range(1, global_batch // d + 1):
                if (global_batch // d) % b:
                    continue
                m = global_batch // (d * b)
                for zero in range(4):
                    scheds = [("1f1b", 1)] if p == 1 else [("gpipe", 1), ("1f1b", 1)] + [
                        ("interleaved", v) for v in (2, 4) if L % (p * v) == 0 and m % p == 0]
                    for schedule, v in scheds:
                        splits = [(L // p,) * p] if schedule == "interleaved" else compositions(L, p)
                        for split in splits:
                            for rec in itertools.product(RECOMPUTE, repeat=p):
                                cfg = ParallelConfig(d=d, t=t, p=p, zero=zero, micro_batch=b,
                                                     microbatches=m, schedule=schedule,
                                                     blocks=split, recompute=rec, virtual=v)
                                step = evaluate_parallel(profile, cluster, cfg).step_s
                                best = min(best, step)
                                by_t[t] = min(by_t.get(t, math.inf), step)
                                by_p[p] = min(by_p.get(p, math.inf), step)
                                if len(set(rec)) == 1 and (zero <= 1 or p == 1):
                                    uniform = min(uniform, step)
    return best, uniform, {k: v for k, v in by_t.items() if math.isfinite(v)}, \
        {k: v for k, v in by_p.items() if math.isfinite(v)}


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(cases())
def test_the_search_equals_brute_force(case) -> None:
    profile, cluster, batch = case
    r = search_parallel(profile, cluster, global_batch=batch)
    best, uniform, by_t, by_p = brute_force(profile, cluster, batch)
    got_best = r.best.step_s if r.best else math.inf
    got_uniform = r.launchable.step_s if r.launchable else math.inf
    assert got_best == pytest.approx(best, rel=1e-9)
    assert got_uniform == pytest.approx(uniform, rel=1e-9)
    assert r.by_tensor == pytest.approx(by_t, rel=1e-9)
    assert r.by_pipeline == pytest.approx(by_p, rel=1e-9)
    # the what-if question (the launchable plan alone, stopping at the first floor above it)
    alone = search_parallel(profile, cluster, global_batch=batch, launchable_only=True)
    assert alone.best is None and not alone.by_tensor and not alone.by_pipeline
    assert (alone.launchable.step_s if alone.launchable else math.inf) == pytest.approx(uniform, rel=1e-9)
    if r.launchable is not None:
        # the reported plan is what the formula says of it, fits, and lies above the bound
        again = evaluate_parallel(profile, cluster, r.launchable.config)
        assert again.step_s == pytest.approx(r.launchable.step_s, rel=1e-12)
        assert r.launchable.config.uniform and r.launchable.fits
        assert ideal_bound(profile, batch, cluster.n_accelerators) <= r.best.step_s * (1 + 1e-12)


def test_best_split_against_every_composition() -> None:
    rng = np.random.default_rng(3)
    for _ in range(200):
        p, L = int(rng.integers(1, 5)), int(rng.integers(1, 9))
        values = np.sort(rng.choice([1.0, 2.0, 3.0, 5.0, 8.0, np.inf], size=(p, max(L - p + 1, 1))), axis=1)
        got, split = best_split(values, L)
        want = min((max(values[s, n - 1] for s, n in enumerate(c)) for c in compositions(L, p)),
                   default=math.inf) if L >= p else math.inf
        assert got == want
        if math.isfinite(got):
            assert sum(split) == L and min(split) >= 1
            assert max(values[s, n - 1] for s, n in enumerate(split)) == got
