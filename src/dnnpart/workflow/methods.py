"""Which method plans a model when none is named, and the fallback from ``dp`` to ``dpl``.

Each objective has its exact or paper method (:data:`DEFAULT_METHODS`). Throughput has two
exceptions: a named pipeline schedule asks for what the schedule runs (``pipeline``: one
range of operators per device), and the exact DP, which refuses graphs whose ideal lattice
is too large, is followed by DPL on those graphs -- unless method options were set for DP,
which would then be ignored.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

#: The method ``plan`` runs when none is named, by objective: the exact or paper method of
#: each (throughput: the DP, falling back to DPL where the DP refuses the graph as too large).
DEFAULT_METHODS = {
    "throughput": "dp",
    "latency": "ip",
    "makespan": "pardnn",
    "pipeline": "parmesan",
    "iteration": "optcnn",
    "stages": "block-pipeline",
}
#: What stands in for a default ``dp`` that refuses the graph as too large.
FALLBACK_METHOD = "dpl"
#: Objectives whose plans a pipeline runtime runs, planned at block granularity by default.
BLOCK_OBJECTIVES = ("stages", "throughput", "pipeline")


@dataclass(frozen=True, slots=True, kw_only=True)
class MethodChoice:
    """The method to run and why.

    Attributes
    ----------
    name : the method.
    may_fall_back : whether :data:`FALLBACK_METHOD` may stand in if it refuses the graph.
    note : why it was chosen, when the user did not name it and the reason is not obvious.
    """

    name: str
    may_fall_back: bool = False
    note: str | None = None


def choose_method(kind: str, *, method: str | None = None, schedule: str | None = None,
                  options: Mapping[str, Any] | None = None) -> MethodChoice:
    """The method for objective ``kind``: ``method`` if named, else the default.

    Examples
    --------
    >>> choose_method("throughput")
    MethodChoice(name='dp', may_fall_back=True, note=None)
    >>> choose_method("throughput", options={"max_ideals": 10}).may_fall_back
    False
    >>> choose_method("throughput", schedule="1f1b").name
    'pipeline'
    >>> choose_method("makespan", method="round-robin").name
    'round-robin'
    """
    if method is not None:
        return MethodChoice(name=method)
    if kind == "throughput" and schedule:
        return MethodChoice(name="pipeline", note=(
            "method: pipeline (--schedule given: one range of operators per device, "
            "backward with its forward, what the schedule runs)"))
    name = DEFAULT_METHODS[kind]
    # the exact DP where its lattice fits, else DPL (said so); not when options were set for dp
    return MethodChoice(name=name, may_fall_back=name == "dp" and not options)


def choose_granularity(kind: str, *, granularity: str | None, method: str | None) -> str:
    """The granularity ``plan`` cuts a model at: ``granularity`` if named, else ``block`` for
    the objectives a pipeline runtime runs (:data:`BLOCK_OBJECTIVES`) when no method is named
    (runtimes cut between whole blocks), else ``op`` (the papers' methods at their own
    granularity).

    Examples
    --------
    >>> choose_granularity("throughput", granularity=None, method=None)
    'block'
    >>> choose_granularity("throughput", granularity=None, method="dp")
    'op'
    >>> choose_granularity("makespan", granularity=None, method=None)
    'op'
    >>> choose_granularity("pipeline", granularity="module", method=None)
    'module'
    """
    if granularity is not None:
        return granularity
    return "block" if method is None and kind in BLOCK_OBJECTIVES else "op"


def block_note(kind: str, n_units: int) -> str:
    """What is said when ``plan`` chose block granularity for objective ``kind``.

    Examples
    --------
    >>> block_note("throughput", 14).split(";")[0]
    'granularity: block (14 units: whole blocks, the prologue and the epilogue)'
    """
    return (f"granularity: block ({n_units} units: whole blocks, the prologue and the "
            f"epilogue); cuts fall between blocks, where pipeline runtimes cut; "
            f"--granularity op for the {kind} method at operator level")


def fallback_note(reason: str) -> str:
    """What is said when DPL stands in for the default DP (``reason``: DP's refusal)."""
    return (f"method: {FALLBACK_METHOD} (the default dp refused this graph: {reason}; "
            f"{FALLBACK_METHOD} splits along a linearization, no optimality guarantee; "
            "-m NAME picks another method)")


def stages_note(schedule: str, microbatches: int) -> str:
    """What is said when a schedule (or ``--granularity block``) made the objective ``stages``.

    Examples
    --------
    >>> stages_note("1f1b", 4).split("(")[0]
    'objective: stages '
    """
    return (f"objective: stages (whole blocks in pipeline stages, {schedule}, {microbatches} "
            "micro-batches, activations in memory), method block-pipeline; --objective "
            "throughput for paper 1's op-level placement")
