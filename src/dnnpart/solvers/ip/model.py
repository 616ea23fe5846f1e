"""A small, backend-neutral mixed-integer model: variables, linear rows, a min objective.

The builders (:mod:`~dnnpart.solvers.ip.throughput`, :mod:`~dnnpart.solvers.ip.latency`)
write paper 1's integer programs into a :class:`MipModel`; a backend
(:mod:`~dnnpart.solvers.ip.cpsat`, :mod:`~dnnpart.solvers.ip.highs`) solves it. The builder
never knows which backend runs it, so the model carries what each backend needs to translate
it faithfully:

* every variable has a :class:`VarKind`: ``BINARY`` (integral everywhere), ``RELAXED``
  (a 0/1 quantity whose integrality follows from the binaries, so a linear backend may keep
  it continuous, e.g. the contiguity variables ``z`` of Lemma 4.1), or ``TIME`` (a time in
  seconds, continuous; CP-SAT scales it to integers);
* every row has a :class:`RowKind`: ``PLAIN`` rows have small integer coefficients,
  ``TIME`` rows are ``sum(+-1 * time) + sum(cost * 0/1) >= lb`` with at most one time
  variable of coefficient ``-1`` (what keeps integer rounding conservative, see
  :mod:`~dnnpart.solvers.ip.cpsat`), and ``CAPACITY`` rows are memory limits
  ``sum(bytes * x) <= capacity``;
* a row may be *enforced* by a binary: it must hold only when that binary is 1 (CP-SAT
  enforcement literal; HiGHS writes the big-M form of Lemma 4.1 with the row's ``big_m``).

Examples
--------
>>> m = MipModel()
>>> x = m.add_var(VarKind.BINARY)
>>> t = m.add_var(VarKind.TIME, ub=10.0)
>>> m.add_row([t, x], [1.0, -2.5], lb=0.0, kind=RowKind.TIME)
>>> m.objective = [t]
>>> m.n_vars, m.n_rows
(2, 1)
"""

from __future__ import annotations

import enum
import math
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt


class VarKind(enum.IntEnum):
    """How a variable is integral (see the module docstring)."""

    BINARY = 0
    RELAXED = 1
    TIME = 2


class RowKind(enum.IntEnum):
    """How a row's coefficients are to be read (see the module docstring)."""

    PLAIN = 0
    TIME = 1
    CAPACITY = 2


@dataclass(slots=True)
class Row:
    """``lb <= sum(coef * var) <= ub``, only when ``enforce`` (a binary) is 1 if ``>= 0``."""

    idx: npt.NDArray[np.int64]
    coef: npt.NDArray[np.float64]
    lb: float
    ub: float
    kind: RowKind
    enforce: int = -1
    big_m: float = 0.0


@dataclass
class MipModel:
    """Variables, rows and a minimised objective ``sum(objective)`` (time variables).

    ``hint`` maps a variable to its value in a known feasible solution (times in seconds).
    """

    kinds: list[VarKind] = field(default_factory=list)
    ub: list[float] = field(default_factory=list)
    rows: list[Row] = field(default_factory=list)
    objective: list[int] = field(default_factory=list)
    hint: dict[int, float] = field(default_factory=dict)

    @property
    def n_vars(self) -> int:
        return len(self.kinds)

    @property
    def n_rows(self) -> int:
        return len(self.rows)

    def add_var(self, kind: VarKind, ub: float = 1.0) -> int:
        """A new variable in ``[0, ub]``; returns its index."""
        self.kinds.append(kind)
        self.ub.append(float(ub))
        return len(self.kinds) - 1

    def add_row(
        self, idx: Sequence[int] | npt.NDArray[np.int64], coef: Sequence[float] | npt.NDArray[np.float64],
        *, lb: float = -math.inf, ub: float = math.inf, kind: RowKind = RowKind.PLAIN,
        enforce: int = -1, big_m: float = 0.0,
    ) -> None:
        """Append ``lb <= sum(coef * var) <= ub`` (terms on one variable are merged)."""
        i = np.asarray(idx, dtype=np.int64)
        c = np.asarray(coef, dtype=np.float64)
        if i.shape != c.shape:
            raise ValueError(f"row has {i.size} variables and {c.size} coefficients")
        if i.size and np.unique(i).size != i.size:
            uniq, inv = np.unique(i, return_inverse=True)
            merged = np.zeros(uniq.size)
            np.add.at(merged, inv, c)
            i, c = uniq, merged
        self.rows.append(Row(i, c, float(lb), float(ub), kind, enforce, float(big_m)))

    def kinds_array(self) -> npt.NDArray[np.int8]:
        return np.asarray(self.kinds, dtype=np.int8)
