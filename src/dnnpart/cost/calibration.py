"""Fitting calibrated parameters to measured times (``dnnpart calibrate``).

One operator class's samples -- FLOPs ``f``, bytes moved ``b`` and measured seconds ``t`` of
each timed operator -- are fitted by the additive model of :mod:`dnnpart.cost.model`,

    t ~ o + a f + c b,     o, a, c >= 0,   (flops_rate = 1/a, bytes_rate = 1/c)

by **non-negative least squares of relative errors**: the sum of ``((o + a f + c b - t) / t)^2``
is minimised. Relative, because the sizes span four orders of magnitude of time and an
absolute fit would be the largest operators' alone (the per-op overhead, which decides the
small ones, would be lost in their noise); non-negative, because a negative overhead or rate
has no meaning and would price some sizes below zero. A coefficient the data does not need
comes out 0: that term is absent (rate ``inf``). A link is the same fit with ``f = 0``: ``o``
is its latency, ``1/c`` its bandwidth.

The fit's quality is its relative errors over the samples it was fitted on (root mean square
and largest), which ``calibrate`` reports per class.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from dnnpart.devices.specs import RATE_RANGE, OpClassCost


@dataclass(frozen=True, slots=True, kw_only=True)
class AdditiveFit:
    """``t = overhead_s + flops / flops_rate + bytes / bytes_rate`` fitted to samples.

    Attributes
    ----------
    overhead_s, flops_rate, bytes_rate : the parameters (a rate ``inf``: no such term).
    samples : how many samples were fitted.
    rms_rel_error, max_rel_error : root mean square and largest ``|predicted - t| / t``.
    """

    overhead_s: float
    flops_rate: float
    bytes_rate: float
    samples: int
    rms_rel_error: float
    max_rel_error: float

    def op_class(self, name: str) -> OpClassCost:
        """These parameters as the device's class ``name``."""
        return OpClassCost(name=name, flops_rate=self.flops_rate, bytes_rate=self.bytes_rate,
                           overhead_s=self.overhead_s)


def fit_additive(flops: npt.ArrayLike, bytes_moved: npt.ArrayLike, times_s: npt.ArrayLike) -> AdditiveFit:
    """Fit ``t ~ o + f / flops_rate + b / bytes_rate`` (module docstring).

    Samples with a time <= 0 (below the timer's resolution) are left out.

    Examples
    --------
    >>> f = [0.0, 1e6, 1e8, 1e9]
    >>> b = [4.0, 4e5, 4e6, 4e7]
    >>> t = [5e-6 + x / 1e10 + y / 1e9 for x, y in zip(f, b)]
    >>> fit = fit_additive(f, b, t)
    >>> round(fit.overhead_s * 1e6, 3), round(fit.flops_rate / 1e10, 3), round(fit.bytes_rate / 1e9, 3)
    (5.0, 1.0, 1.0)
    >>> fit.max_rel_error < 1e-9
    True

    Raises
    ------
    ValueError
        No sample has a positive time, or the arrays differ in length (a caller's bug).
    """
    from scipy.optimize import nnls

    f = np.asarray(flops, dtype=np.float64).reshape(-1)
    b = np.asarray(bytes_moved, dtype=np.float64).reshape(-1)
    t = np.asarray(times_s, dtype=np.float64).reshape(-1)
    if not (f.shape == b.shape == t.shape):
        raise ValueError(f"fit_additive: {f.size} flops, {b.size} bytes and {t.size} times")
    keep = t > 0
    f, b, t = f[keep], b[keep], t[keep]
    if t.size == 0:
        raise ValueError("fit_additive: no sample with a positive time")
    columns = np.column_stack((np.ones_like(t), f, b)) / t[:, None]
    # scale each column to a largest entry of 1 (FLOPs ~1e9 beside ones: nnls's tolerance is
    # absolute); an all-zero column keeps scale 1 and gets coefficient 0
    scale = np.abs(columns).max(axis=0)
    scale[scale == 0] = 1.0
    solution, _ = nnls(columns / scale, np.ones_like(t))
    o, a, c = (float(x) for x in solution / scale)
    # a rate past what a spec file may hold is no term (its share of any time is < 1e-20 s/FLOP)
    a, c = (x if x * RATE_RANGE[1] > 1 else 0.0 for x in (a, c))
    predicted = o + a * f + c * b
    rel = np.abs(predicted - t) / t
    return AdditiveFit(
        overhead_s=o,
        flops_rate=1.0 / a if a > 0 else math.inf,
        bytes_rate=1.0 / c if c > 0 else math.inf,
        samples=int(t.size),
        rms_rel_error=float(np.sqrt(np.mean(rel**2))),
        max_rel_error=float(rel.max()),
    )
