"""Predicted against measured: the table ``dnnpart run`` prints, ``--json`` carries and
``dnnpart report PLAN --run RUN.json`` shows.

Every measured figure has its repeats (one per timed step), their median and range; the
relative error is ``(predicted - median) / median``. Memory is measured once (the checked
step) and is in bytes, so its error checks the memory model on any cluster; times are
predicted for the plan's devices, so their error checks the cost model only where those
devices were calibrated on the machine that ran (:func:`note`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from dnnpart.errors import FormatError, UsageError
from dnnpart.evaluate.run_prediction import RunPrediction
from dnnpart.export.measuring import RankMeasure, Spread

#: Timed steps of a run when none are asked for, and the most one may ask for.
DEFAULT_STEPS, MAX_STEPS = 5, 1000

#: What the predicted memory holds, training and inference (printed with it; docs/run.md).
PREDICTED_MEMORY = {
    True: ("weights, gradients, the stash of the micro-batches in flight, outputs the schedule "
           "holds, one micro-batch's working set, the pipelining receive buffers and the loss's "
           "buffers; no optimizer state (run applies no optimizer)"),
    False: ("weights, one micro-batch's working set and received values, sends pending until "
            "the pass ends, and the collected outputs on the first rank"),
}


def check_steps(steps: Any) -> int:
    """``steps`` as an int in ``1..MAX_STEPS``.

    Raises
    ------
    UsageError
        Not an integer in that range.

    Examples
    --------
    >>> check_steps(5)
    5
    >>> check_steps(0)
    Traceback (most recent call last):
    ...
    dnnpart.errors.UsageError: --steps 0: expected an integer from 1 to 1000
    """
    if isinstance(steps, bool) or not isinstance(steps, int) or not 1 <= steps <= MAX_STEPS:
        raise UsageError(f"--steps {steps}: expected an integer from 1 to {MAX_STEPS}")
    return steps


def relative_error(predicted: float | None, measured: float) -> float | None:
    """``(predicted - measured) / measured``; ``None`` without a prediction or a measurement.

    Examples
    --------
    >>> relative_error(1.1, 1.0), relative_error(None, 1.0), relative_error(1.0, 0.0)
    (0.10000000000000009, None, None)
    """
    if predicted is None or measured <= 0:
        return None
    return (predicted - measured) / measured


def _timed(predicted: float | None, measured: Sequence[float]) -> dict[str, Any]:
    s = Spread.of(measured) if measured else Spread(0.0, 0.0, 0.0)
    return {"predicted_s": predicted, "measured_s": [float(x) for x in measured],
            "median_s": s.median, "min_s": s.low, "max_s": s.high,
            "error": relative_error(predicted, s.median)}


def note(prediction: RunPrediction, priced_by: Sequence[str]) -> str:
    """How to read the time errors: a model check or not."""
    names = ", ".join(dict.fromkeys(priced_by))
    if prediction.calibrated:
        return (f"times predicted for the calibrated device {names} (dnnpart calibrate): the error "
                "checks the cost model where it was calibrated on this machine")
    return (f"times predicted for {names} (a roofline preset), not this machine: their error is "
            "not a model check (calibrate this machine: dnnpart calibrate, plan with --cluster "
            "machine.yaml); memory, in bytes, is checked on any cluster")


@dataclass(frozen=True, slots=True)
class RunComparison:
    """A run's measurements beside its prediction (see the module docstring)."""

    prediction: RunPrediction
    measured: Sequence[RankMeasure]
    step_s: Sequence[float]
    training: bool
    priced_by: Sequence[str]

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready: predicted, measured (every repeat), spread and errors."""
        p = self.prediction
        stages = []
        for i, (sp, me) in enumerate(zip(p.stages, self.measured, strict=True)):
            row: dict[str, Any] = {"stage": i, "device": sp.name,
                                   "forward": _timed(sp.forward_s, me.forward_s)}
            if self.training:
                row["backward"] = _timed(sp.backward_s, me.backward_s)
            row["memory"] = {"predicted_bytes": sp.peak_bytes, "parts": dict(sp.memory),
                             "measured_bytes": me.peak_bytes, "held_bytes": me.held_bytes,
                             "error": relative_error(sp.peak_bytes, me.peak_bytes)}
            stages.append(row)
        sources = sorted({m.memory_source for m in self.measured if m.memory_source})
        return {
            "steps": len(self.step_s),
            "training": self.training,
            "calibrated": p.calibrated,
            "priced_by": list(dict.fromkeys(self.priced_by)),
            "note": note(p, self.priced_by),
            "memory_measured": "; ".join(sources),
            "memory_predicted": PREDICTED_MEMORY[self.training],
            "step": _timed(p.step_s, self.step_s),
            "stages": stages,
        }


def comparison_rows(data: Any, where: str = "the run") -> list[tuple[str, str, str, str, str]]:
    """``(what, predicted, measured median, min-max, error)`` rows of a comparison's dict
    (:meth:`RunComparison.to_dict`, or a ``run --json`` file's ``"measurement"``).

    Raises
    ------
    FormatError
        ``data`` is not such a dict (naming ``where``).
    """
    try:
        rows = [("step", *_time_cells(data["step"]))]
        for st in data["stages"]:
            label = f"stage {int(st['stage'])} {st['device']}"
            rows.append((f"{label} forward", *_time_cells(st["forward"])))
            if "backward" in st:
                rows.append((f"{label} backward", *_time_cells(st["backward"])))
            mem = st["memory"]
            rows.append((f"{label} peak memory", _mb(mem["predicted_bytes"]), _mb(mem["measured_bytes"]),
                         "", _pct(mem["error"])))
    except (KeyError, TypeError, ValueError) as exc:
        raise FormatError(f"{where}: not the measurement of `dnnpart run --json` ({exc!r} missing "
                          "or malformed)") from None
    return rows


def _time_cells(t: Any) -> tuple[str, str, str, str]:
    pred = t["predicted_s"]
    return ("-" if pred is None else _ms(float(pred)), _ms(float(t["median_s"])),
            f"{_ms(float(t['min_s']), unit='')}-{_ms(float(t['max_s']))}", _pct(t["error"]))


def _ms(x: float, unit: str = " ms") -> str:
    return f"{x * 1e3:.4g}{unit}"


def _mb(x: Any) -> str:
    return f"{float(x) / 1e6:.4g} MB"


def _pct(x: Any) -> str:
    return "-" if x is None else f"{100 * float(x):+.1f}%"
