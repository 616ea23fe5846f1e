"""Twin of :func:`dnnpart.cost.calibration.fit_additive` written from its definition: the
non-negative least-squares fit of relative errors, ``min sum ((o + a f + c b - t) / t)^2`` over
``o, a, c >= 0``, solved in plain Python by trying every set of free coefficients (the others
held at 0), solving its normal equations by Gaussian elimination, and keeping the feasible
solution of least objective -- exact for three unknowns, since the optimum of a convex problem
over the orthant is the unconstrained optimum of the face it lies on."""

from __future__ import annotations

import itertools
import math
import random

import pytest

from dnnpart.cost.calibration import fit_additive


def _solve(matrix: list[list[float]], rhs: list[float]) -> list[float] | None:
    """Gaussian elimination with partial pivoting; ``None`` for a singular system."""
    n = len(rhs)
    m = [[*row, r] for row, r in zip(matrix, rhs, strict=True)]
    for col in range(n):
        pivot = max(range(col, n), key=lambda r: abs(m[r][col]))
        if abs(m[pivot][col]) < 1e-300:
            return None
        m[col], m[pivot] = m[pivot], m[col]
        for r in range(n):
            if r != col:
                k = m[r][col] / m[col][col]
                m[r] = [x - k * y for x, y in zip(m[r], m[col], strict=True)]
    return [m[i][n] / m[i][i] for i in range(n)]


def twin_fit(f: list[float], b: list[float], t: list[float]) -> tuple[float, float, float]:
    """(o, a, c) minimising the relative squared error, all >= 0."""
    rows = [[1.0 / ti, fi / ti, bi / ti] for fi, bi, ti in zip(f, b, t, strict=True)]
    # scale columns so the normal equations are well conditioned (FLOPs ~1e9 beside ones)
    scale = [max(abs(r[j]) for r in rows) or 1.0 for j in range(3)]
    rows = [[r[j] / scale[j] for j in range(3)] for r in rows]

    def objective(x: list[float]) -> float:
        return sum((sum(r[j] * x[j] for j in range(3)) - 1.0) ** 2 for r in rows)

    best, best_x = math.inf, [0.0, 0.0, 0.0]
    for k in range(1, 4):
        for free in itertools.combinations(range(3), k):
            normal = [[sum(r[i] * r[j] for r in rows) for j in free] for i in free]
            rhs = [sum(r[i] for r in rows) for i in free]
            sol = _solve(normal, rhs)
            if sol is None or any(v < 0 for v in sol):
                continue
            x = [0.0, 0.0, 0.0]
            for i, v in zip(free, sol, strict=True):
                x[i] = v
            value = objective(x)
            if value < best:
                best, best_x = value, x
    o, a, c = (best_x[j] / scale[j] for j in range(3))
    return o, a, c


def _samples(rng: random.Random, o: float, rate_f: float, rate_b: float, noise: float,
             n: int = 24) -> tuple[list[float], list[float], list[float]]:
    f, b, t = [], [], []
    for _ in range(n):
        elements = 10 ** rng.uniform(0, 7)
        intensity = rng.choice((0.0, 0.25, 1.0, 8.0, 200.0))  # FLOPs per byte, as classes mix them
        fi, bi = elements * 4 * intensity, elements * 4 * rng.uniform(2, 3)
        f.append(fi)
        b.append(bi)
        t.append((o + fi / rate_f + bi / rate_b) * (1 + rng.uniform(-noise, noise)))
    return f, b, t


@pytest.mark.parametrize("seed", range(6))
def test_the_fit_recovers_known_parameters_from_exact_timings(seed: int) -> None:
    rng = random.Random(seed)
    o, rate_f, rate_b = 10 ** rng.uniform(-6, -4), 10 ** rng.uniform(9, 11), 10 ** rng.uniform(9, 11)
    f, b, t = _samples(rng, o, rate_f, rate_b, noise=0.0)
    fit = fit_additive(f, b, t)
    assert fit.overhead_s == pytest.approx(o, rel=1e-6)
    assert fit.flops_rate == pytest.approx(rate_f, rel=1e-6)
    assert fit.bytes_rate == pytest.approx(rate_b, rel=1e-6)
    assert fit.max_rel_error < 1e-6 and fit.samples == len(t)


@pytest.mark.parametrize("seed", range(10))
def test_the_fit_is_its_twins_on_noisy_timings(seed: int) -> None:
    rng = random.Random(100 + seed)
    o, rate_f, rate_b = 10 ** rng.uniform(-6, -4), 10 ** rng.uniform(9, 11), 10 ** rng.uniform(9, 11)
    f, b, t = _samples(rng, o, rate_f, rate_b, noise=0.3)
    fit = fit_additive(f, b, t)
    o2, a2, c2 = twin_fit(f, b, t)
    assert fit.overhead_s == pytest.approx(o2, rel=1e-5, abs=1e-12)
    assert (1 / fit.flops_rate) == pytest.approx(a2, rel=1e-5, abs=1e-20)
    assert (1 / fit.bytes_rate) == pytest.approx(c2, rel=1e-5, abs=1e-20)
    rel = [abs(o2 + a2 * fi + c2 * bi - ti) / ti for fi, bi, ti in zip(f, b, t, strict=True)]
    assert fit.max_rel_error == pytest.approx(max(rel), rel=1e-6)
    assert fit.rms_rel_error == pytest.approx(math.sqrt(sum(r * r for r in rel) / len(rel)), rel=1e-6)


def test_a_term_the_timings_do_not_need_is_absent() -> None:
    # times that do not grow with FLOPs: no FLOP term (rate inf), never a negative one
    f = [1e3, 1e6, 1e9, 1e3, 1e6, 1e9]
    b = [1e3, 1e3, 1e3, 1e7, 1e7, 1e7]
    t = [2e-6 + x / 1e9 for x in b]
    t[2] *= 0.9  # the largest FLOP counts a little faster: only a negative FLOP rate "explains" it
    t[5] *= 0.9
    fit = fit_additive(f, b, t)
    assert math.isinf(fit.flops_rate) and fit.overhead_s >= 0 and fit.bytes_rate > 0
    o2, a2, _ = twin_fit(f, b, t)
    assert a2 == 0 and fit.overhead_s == pytest.approx(o2, rel=1e-5)


def test_a_link_is_the_fit_without_flops() -> None:
    sizes = [1024 * 4**k for k in range(8)]
    times = [50e-6 + n / 2e9 for n in sizes]
    fit = fit_additive([0.0] * len(sizes), sizes, times)
    assert fit.overhead_s == pytest.approx(50e-6, rel=1e-6)
    assert fit.bytes_rate == pytest.approx(2e9, rel=1e-6)
    assert math.isinf(fit.flops_rate)
