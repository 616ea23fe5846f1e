"""What a method is: its declaration (:class:`MethodInfo`), typed options and clock.

Every method, exact or heuristic, solver or baseline, has the signature::

    method(problem, /, *, time_limit=None, progress=None, **options) -> SolveResult

and is declared once, as data, beside its function::

    def solve_my_method(problem, /, *, time_limit=None, progress=None, restarts=10,
                        gap=0.01, tool="metis", threads=None): ...

    MY_METHOD = MethodInfo(
        name="my-method", func=solve_my_method, summary="what it does",
        guarantee="what the result is", objectives=("throughput",), space=ANY,
        options=(
            Option("restarts", int, 10, "random restarts", minimum=1),
            Option("gap", float, 0.01, "relative gap to stop at", minimum=0.0, maximum=1.0),
            Option("tool", str, "metis", "partitioner", choices=("metis", "scotch")),
            Option("threads", int, None, "worker threads (default: all)", minimum=1),
        ),
        anytime=True,  # can run for minutes: gets DEFAULT_TIME_LIMITS' default time limit
    )

The module lists its declarations in ``METHODS``; :mod:`dnnpart.solvers.registry` names every
module that declares methods, so adding one is two edits and nothing registers itself as a
side effect of an import.

The option schema is the single source of truth for ``dnnpart solve --set KEY=VALUE`` (values
are parsed by the option's type, so ``max_ideals=1e7`` arrives as the integer 10,000,000),
for :func:`~dnnpart.solvers.registry.solve` (unknown keys and wrong types are refused with one
``ValueError`` naming the option, for every method alike) and for ``dnnpart methods``. A
default of ``None`` means "not set" (the option then also accepts ``None``); ``nullable=True``
accepts ``None`` (CLI: ``none``) beside a non-``None`` default. ``Option(..., object, ...)``
takes API-only values such as a warm-start plan (the CLI passes the text). The hardening tests
check, for every method, that the schema's defaults equal the function's.

What a method supports is declared too: objective kinds, search space, training graphs, the
variants of the throughput objective it optimises (training forms, overlap modes) and
exactness (and the training forms it holds in); :meth:`MethodInfo.supports` and
:meth:`MethodInfo.proves` read them. The conformance tests generate their cases from these
declarations: a (method, problem) pair the declarations do not cover is not generated, and a
declared pair must be solved.

Time limits and stopping
------------------------
Solvers time themselves with :class:`Stopwatch`; its ``expired()`` is also true once the user
pressed Ctrl-C or the time limit passed (:mod:`dnnpart.interrupt`), so a loop that checks it
stops on both. Methods declared ``anytime=True`` get the default time limit of
:data:`DEFAULT_TIME_LIMITS` when the caller gives none (``time_limit=math.inf``: none).
"""

from __future__ import annotations

import inspect
import math
import time
from dataclasses import dataclass
from typing import Any, Protocol

from dnnpart import interrupt
from dnnpart.errors import UsageError
from dnnpart.plan import SolveResult
from dnnpart.problem import OBJECTIVE_KINDS, OVERLAP_MODES, THROUGHPUT, TRAINING_FORMS, Problem

#: Default time limits (seconds) of the anytime methods, by kind of method. One table: the
#: the "Time limits" table of docs/cli.md prints it. A method declared with ``anytime=True`` gets
#: the entry of its ``time_kind`` (default ``"anytime"``) when no limit is given.
DEFAULT_TIME_LIMITS: dict[str, float] = {
    "integer-program": 300.0,
    "local-search": 60.0,
    "anytime": 120.0,
}

#: Search spaces a method declares (:attr:`MethodInfo.space`): which plans it may return.
#: ``contiguous``: splits whose device parts (forward and backward separately) are contiguous;
#: ``pipeline-order``: contiguous splits whose parts also run in one pipeline order (no two
#: parts need an output of each other: the quotient graph of the parts, forward and backward
#: separately, is acyclic; paper 1's DP searches these); ``any``: any placement;
#: ``layerwise``: a parallel configuration per layer (paper 3); ``given``: the plan the user
#: gives, scored (no search); ``block-chain``: contiguous runs of the graph's block units
#: (:func:`dnnpart.graph.blocks.node_units`), run ``i`` on the ``i``-th accelerator.
CONTIGUOUS, PIPELINE_ORDER, ANY, LAYERWISE, GIVEN, BLOCK_CHAIN = (
    "contiguous", "pipeline-order", "any", "layerwise", "given", "block-chain")
SEARCH_SPACES = (CONTIGUOUS, PIPELINE_ORDER, ANY, LAYERWISE, GIVEN, BLOCK_CHAIN)

#: Integers beyond this are refused as option values (numba and C solvers take int64).
_INT_MAX = 2**63 - 1


class Progress(Protocol):
    """Receives progress of long solves (the CLI renders it on stderr)."""

    def update(self, message: str, fraction: float | None = None) -> None: ...


class SolverFunc(Protocol):
    def __call__(
        self, problem: Problem, /, *, time_limit: float | None = ..., progress: Progress | None = ...,
        **options: Any,
    ) -> SolveResult: ...


@dataclass(frozen=True, slots=True)
class Option:
    """One typed method option.

    Attributes
    ----------
    name : keyword name (``--set NAME=VALUE`` on the CLI; ``-`` may stand for ``_``).
    type : ``int``, ``float``, ``bool``, ``str`` or ``object`` (API-only values; the CLI
        passes text).
    default : the value when not given (``None``: unset; then ``None`` is accepted too).
    doc : one line for ``dnnpart methods``.
    minimum, maximum : inclusive range of numbers.
    choices : allowed texts of a ``str`` option.
    nullable : ``None`` (CLI: ``none``) is allowed besides the type (always so when the
        default is ``None``).
    method_plan : a text naming a method is replaced, before the call, by the plan that
        method finds for the same problem (``None`` when it finds none): warm starts.

    Examples
    --------
    >>> Option("max_ideals", int, 2_000_000, "ideal cap", minimum=1).parse("1e7")
    10000000
    >>> Option("gap", float, 0.01, "gap", minimum=0.0, maximum=1.0).check(2.0, "ip")
    Traceback (most recent call last):
    ...
    dnnpart.errors.UsageError: ip: option gap: expected a number <= 1, got 2.0
    """

    name: str
    type: type
    default: Any
    doc: str
    minimum: float | None = None
    maximum: float | None = None
    choices: tuple[str, ...] | None = None
    nullable: bool = False
    method_plan: bool = False

    def describe_type(self) -> str:
        if self.choices:
            return "|".join(self.choices)
        text = {int: "int", float: "float", bool: "bool", str: "text"}.get(self.type, "any")
        if self.minimum is not None or self.maximum is not None:
            lo = "" if self.minimum is None else f"{self.minimum:g}"
            hi = "" if self.maximum is None else f"{self.maximum:g}"
            text += f" in [{lo}, {hi}]" if lo and hi else (f" >= {lo}" if lo else f" <= {hi}")
        return text

    def parse(self, raw: str, method: str = "", *, where: str | None = None) -> Any:
        """Convert command-line text to this option's type (then :meth:`check`); ``where``
        replaces ``METHOD: option NAME`` in the messages."""
        where = where or f"{method + ': ' if method else ''}option {self.name}"
        value: Any = raw
        low = raw.strip().lower()
        if (self.default is None or self.nullable) and low in ("none", "null", "off"):
            return None
        if self.type is bool:
            if low not in ("true", "false", "1", "0", "yes", "no"):
                raise UsageError(f"{where}: expected true or false, got {raw!r}")
            value = low in ("true", "1", "yes")
        elif self.type is int:
            try:
                value = int(low.replace("_", ""))
            except ValueError:
                try:
                    as_float = float(low)
                except ValueError:
                    raise UsageError(f"{where}: expected an integer, got {raw[:40]!r}") from None
                if not (math.isfinite(as_float) and as_float.is_integer()):
                    raise UsageError(f"{where}: expected an integer, got {raw[:40]!r}") from None
                value = int(as_float)
        elif self.type is float:
            try:
                value = float(low)
            except ValueError:
                raise UsageError(f"{where}: expected a number, got {raw[:40]!r}") from None
        return self.check(value, method, where=where)

    def check(self, value: Any, method: str = "", *, where: str | None = None) -> Any:
        """Validate a typed value; returns it normalised (numpy scalars to Python)."""
        where = where or f"{method + ': ' if method else ''}option {self.name}"
        if value is None and (self.default is None or self.nullable):
            return None
        got = repr(value) if len(repr(value)) <= 40 else repr(value)[:37] + "..."
        if self.type is object:
            return value
        if self.type is bool:
            if type(value).__name__ not in ("bool", "bool_"):
                raise UsageError(f"{where}: expected true or false, got {got}")
            return bool(value)
        if self.type is str:
            if not isinstance(value, str):
                raise UsageError(f"{where}: expected text, got {got}")
            if self.choices and value not in self.choices:
                raise UsageError(f"{where}: expected one of {list(self.choices)}, got {got}")
            return value
        if isinstance(value, bool) or type(value).__name__ in ("bool_",):
            raise UsageError(f"{where}: expected {'an integer' if self.type is int else 'a number'}, "
                             f"got {got}")
        if self.type is int:
            if hasattr(value, "is_integer") and not isinstance(value, int):
                if not (math.isfinite(float(value)) and float(value).is_integer()):
                    raise UsageError(f"{where}: expected an integer, got {got}")
                value = int(value)
            try:
                value = int(value.__index__())
            except (AttributeError, TypeError):
                raise UsageError(f"{where}: expected an integer, got {got}") from None
            if abs(value) > _INT_MAX:
                raise UsageError(f"{where}: expected an integer below 2**63, got {len(str(value))} digits")
        else:
            if isinstance(value, (str, bytes)) or not hasattr(value, "__float__"):
                raise UsageError(f"{where}: expected a number, got {got}")
            try:
                value = float(value)
            except (TypeError, ValueError, OverflowError):
                raise UsageError(f"{where}: expected a number, got {got}") from None
            if not math.isfinite(value):
                raise UsageError(f"{where}: expected a finite number, got {got}")
        if self.minimum is not None and value < self.minimum:
            raise UsageError(f"{where}: expected a number >= {self.minimum:g}, got {got}")
        if self.maximum is not None and value > self.maximum:
            raise UsageError(f"{where}: expected a number <= {self.maximum:g}, got {got}")
        return value


@dataclass(frozen=True, slots=True, kw_only=True)
class MethodInfo:
    """A method: its function, what it guarantees and supports, and its options.

    Attributes
    ----------
    name : the name users type (``dnnpart solve --method NAME``).
    func : the solver function (signature in the module docstring).
    summary : one line: what the method does.
    guarantee : what the result is guaranteed to be (e.g. "optimal contiguous split").
    objectives : objective kinds the method optimises.
    exact : whether a finished run proves optimality over its search space.
    space : its search space, one of :data:`SEARCH_SPACES`.
    training : whether it takes training graphs (forward and backward operators).
    training_forms : the training forms of the throughput objective it optimises
        (``Objective.training``: PipeDream's or GPipe's, paper 1 section 5.3); others are
        refused. Default: both.
    overlap_modes : the overlap modes of the throughput objective it optimises
        (``Objective.overlap``, paper 1 appendix C.1); others are refused. Default: all.
    exact_forms : for an exact method, the training forms in which a finished run on a
        training graph proves optimality (in the others it returns a plan of its space and a
        bound, not a proof). Default: all of ``training_forms``.
    source : the paper/section it implements.
    options : the typed options it takes (see the module docstring).
    anytime : whether it can run for minutes (then it gets a default time limit).
    time_kind : its row of :data:`DEFAULT_TIME_LIMITS`.

    Examples
    --------
    >>> from dnnpart.solvers.registry import get_method
    >>> info = get_method("dp")
    >>> info.exact, info.space, info.objectives
    (True, 'pipeline-order', ('throughput',))
    >>> info.exact_forms
    ('pipedream',)
    """

    name: str
    func: SolverFunc
    summary: str
    guarantee: str
    objectives: tuple[str, ...] = ("throughput",)
    exact: bool = False
    space: str = ANY
    training: bool = True
    training_forms: tuple[str, ...] = TRAINING_FORMS
    overlap_modes: tuple[str, ...] = OVERLAP_MODES
    exact_forms: tuple[str, ...] | None = None
    source: str = ""
    options: tuple[Option, ...] = ()
    anytime: bool = False
    time_kind: str = "anytime"

    def __post_init__(self) -> None:
        unknown = set(self.objectives) - set(OBJECTIVE_KINDS)
        if unknown or not self.objectives:
            raise ValueError(f"method {self.name}: objective kinds must be some of "
                             f"{list(OBJECTIVE_KINDS)}, got {list(self.objectives)}")
        if self.space not in SEARCH_SPACES:
            raise ValueError(f"method {self.name}: space must be one of {list(SEARCH_SPACES)}, "
                             f"got {self.space!r}")
        for what, values, allowed in (("training_forms", self.training_forms, TRAINING_FORMS),
                                      ("overlap_modes", self.overlap_modes, OVERLAP_MODES)):
            if not values or set(values) - set(allowed):
                raise ValueError(f"method {self.name}: {what} must be some of {list(allowed)}, "
                                 f"got {list(values)}")
        if self.exact_forms is None:
            object.__setattr__(self, "exact_forms", self.training_forms if self.exact else ())
        elif set(self.exact_forms) - set(self.training_forms) or (self.exact_forms and not self.exact):
            raise ValueError(f"method {self.name}: exact_forms must be some of its training_forms "
                             f"{list(self.training_forms)} (none unless the method is exact), got "
                             f"{list(self.exact_forms)}")
        if self.time_kind not in DEFAULT_TIME_LIMITS:
            raise ValueError(f"method {self.name}: time_kind must be one of {sorted(DEFAULT_TIME_LIMITS)}")
        names = [o.name for o in self.options]
        if len(set(names)) != len(names) or {"time_limit", "progress"} & set(names):
            raise ValueError(f"method {self.name}: duplicate or reserved option names in {names}")

    def supports(self, problem: Problem) -> bool:
        """Whether the method declares ``problem``'s objective (kind and, for throughput, its
        training form and overlap mode) and graph (training graphs need ``training``).

        Examples
        --------
        >>> from dnnpart.problem import Objective
        >>> from dnnpart.solvers.registry import get_method
        >>> from dnnpart.testing import chain_problem
        >>> p = chain_problem([1.0, 2.0], n_accelerators=2)
        >>> get_method("local-search").supports(p)
        True
        >>> get_method("local-search").supports(p.with_objective(Objective(overlap="full-duplex")))
        False
        >>> get_method("optcnn").supports(p)
        False
        """
        objective = problem.objective
        if objective.kind not in self.objectives or (problem.graph.is_training and not self.training):
            return False
        if objective.kind == THROUGHPUT:
            return objective.training in self.training_forms and objective.overlap in self.overlap_modes
        return True

    def proves(self, problem: Problem) -> bool:
        """Whether a finished run on ``problem`` proves optimality over the method's space:
        the method is exact and, for a training graph under the throughput objective, the
        objective's training form is one of :attr:`exact_forms`.

        Examples
        --------
        >>> from dnnpart.problem import Objective
        >>> from dnnpart.solvers.registry import get_method
        >>> from dnnpart.testing import chain_problem
        >>> p = chain_problem([1.0, 2.0], n_accelerators=2)
        >>> get_method("dp").proves(p), get_method("dpl").proves(p)
        (True, False)
        """
        if not (self.exact and self.supports(problem)):
            return False
        if problem.objective.kind == THROUGHPUT and problem.graph.is_training:
            return problem.objective.training in (self.exact_forms or ())
        return True

    def option(self, name: str) -> Option:
        """The option called ``name`` (``-`` read as ``_``); ``ValueError`` lists the valid ones."""
        key = name.replace("-", "_")
        for opt in self.options:
            if opt.name == key:
                return opt
        valid = ", ".join(o.name for o in self.options) or "none"
        raise UsageError(f"{self.name}: unknown option {name!r}; valid options: {valid}")

    def check_options(self, options: dict[str, Any]) -> dict[str, Any]:
        """Refuse unknown keys and wrong types; returns the normalised values."""
        return {self.option(k).name: self.option(k).check(v, self.name) for k, v in options.items()}

    def parse_options(self, pairs: dict[str, str]) -> dict[str, Any]:
        """Command-line texts to typed values (``--set KEY=VALUE``)."""
        return {self.option(k).name: self.option(k).parse(v, self.name) for k, v in pairs.items()}

    @property
    def default_time_limit(self) -> float | None:
        return DEFAULT_TIME_LIMITS[self.time_kind] if self.anytime else None


def signature_defaults(info: MethodInfo) -> dict[str, Any]:
    """The keyword defaults of a method's function (what its schema must repeat)."""
    params = inspect.signature(info.func).parameters.values()
    return {p.name: p.default for p in params if p.kind is inspect.Parameter.KEYWORD_ONLY
            and p.name not in ("time_limit", "progress") and p.default is not inspect.Parameter.empty}


class Stopwatch:
    """Wall-clock helper for solvers: elapsed time and deadline checks.

    ``expired()`` is also true once a stop was requested (Ctrl-C, or the time limit of the
    enclosing :func:`solve` passed): see :mod:`dnnpart.interrupt`.
    """

    def __init__(self, time_limit: float | None = None) -> None:
        self.started = time.perf_counter()
        self.time_limit = time_limit

    @property
    def elapsed(self) -> float:
        return time.perf_counter() - self.started

    def remaining(self) -> float | None:
        """Seconds left (``None`` without a limit; 0 once stopped)."""
        if interrupt.stop_requested():
            return 0.0
        return None if self.time_limit is None else max(0.0, self.time_limit - self.elapsed)

    def expired(self) -> bool:
        if interrupt.stop_requested():
            return True
        if self.time_limit is not None and self.elapsed >= self.time_limit:
            interrupt.note_time_limit()
            return True
        return False
