"""The hybrid plan's page (dnnpart.viz.parallel_report): the plan file read field by field, the
schedule's simulation against the cost model's formula, the page's sections."""

from __future__ import annotations

import copy
import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dnnpart.devices import reference_cluster
from dnnpart.errors import FormatError
from dnnpart.pricing.parallel import ParallelConfig
from dnnpart.pricing.parallel_profile import ModelProfile, UnitProfile
from dnnpart.solvers.hybrid import search_parallel
from dnnpart.viz.parallel_report import (
    FORMAT,
    PlanRow,
    StageRow,
    build_parallel_report,
    formula_step,
    read_parallel_plan,
    schedule_timeline,
)

UNIT = UnitProfile(forward_s=(1.0, 0.1), backward_s=(2.0, 0.1), weights=(8e6, 1e3),
                   stash=(4e6, 1e6), working=1e6, attention_s=0.2, attention_stash=1e6, boundary=1e5)
NONE = UnitProfile(forward_s=(0.0, 0.0), backward_s=(0.0, 0.0), weights=(0.0, 0.0),
                   stash=(0.0, 0.0), working=0.0, attention_s=0.0, attention_stash=0.0, boundary=0.0)


def plan_file(**space) -> dict:
    prof = ModelProfile(prologue=NONE, block=UNIT, epilogue=NONE, n_blocks=4, heads=4)
    cluster = reference_cluster(n_accelerators=4, n_cpus=0, memory_bytes=1e9)
    r = search_parallel(prof, cluster, global_batch=8, **space)
    return {"format": FORMAT, "version": 1, "model": "m", "cluster": "c", **r.to_dict(),
            "by_devices": {"4": r.launchable.step_s, "2": None},
            "exports": {"megatron": {"args": ["--tensor-model-parallel-size", "1"]}},
            "notes": ["a <b>note</b>"]}


def test_the_page_has_every_section_and_escapes_what_the_file_says() -> None:
    data = plan_file()
    page = build_parallel_report(read_parallel_plan(data, "p.json"))
    for what in ("Summary", "Plans", "Stages of the launchable plan", "memory per device",
                 "What if", "Megatron-LM arguments", "Notes"):
        assert what in page, what
    assert "a &lt;b&gt;note&lt;/b&gt;" in page and "<b>note" not in page


@pytest.mark.parametrize("path, value, needle", [
    (("launchable", "config", "pipeline"), 0, "launchable.config.pipeline"),
    (("launchable", "config", "schedule"), "zigzag", "launchable.config.schedule"),
    (("launchable", "config", "recompute", 0), "some", "launchable.config.recompute[0]"),
    (("launchable", "config", "zero"), 4, "launchable.config.zero"),
    (("launchable", "config", "virtual"), 3, "launchable.config.virtual"),
    (("launchable", "stages", 0, "tau_s"), -1.0, "launchable.stages[0].tau_s"),
    (("launchable", "stages", 0, "sync_s"), float("inf"), "launchable.stages[0].sync_s"),
    (("launchable", "stages", 0, "weights"), "x", "launchable.stages[0].weights"),
    (("launchable", "stages"), [], "pipeline stages but"),
    (("by_devices",), {"zero": 1.0}, "by_devices"),
    (("bound_s",), None, "bound_s"),
    (("notes",), [1], "notes[0]"),
    (("format",), "dnnpart.plan", "format"),
])
def test_bad_fields_are_named(path: tuple, value: object, needle: str) -> None:
    data = copy.deepcopy(plan_file())
    target = data
    for key in path[:-1]:
        target = target[key]
    target[path[-1]] = value
    with pytest.raises(FormatError, match=needle.replace("[", r"\[").replace("]", r"\]")):
        read_parallel_plan(data, "p.json")


def rows(times: list[tuple[float, float, float]], m: int, schedule: str) -> PlanRow:
    stages = tuple(StageRow(blocks=1, recompute="none", tau_s=tau, forward_s=fwd, sync_s=g,
                            memory_bytes=0.0, parts={}, in_flight=1) for tau, fwd, g in times)
    p = len(times)
    config = ParallelConfig(d=1, t=1, p=p, zero=0, micro_batch=1, microbatches=m, schedule=schedule,
                            blocks=(1,) * p, recompute=("none",) * p,
                            virtual=2 if schedule == "interleaved" else 1)
    return PlanRow(config=config, step_s=0.0, fits=True, capacity_bytes=math.inf, stages=stages)


@pytest.mark.parametrize("schedule", ["gpipe", "1f1b"])
def test_equal_stages_simulate_to_the_formula(schedule: str) -> None:
    plan = rows([(3.0, 1.0, 0.5)] * 4, 8, schedule)
    _, step = schedule_timeline(plan)
    assert step == pytest.approx(formula_step(plan)) == pytest.approx((8 + 3) * 3.0 + 0.5)


@settings(max_examples=40, deadline=None)
@given(st.lists(st.tuples(st.floats(0.1, 5.0), st.floats(0.05, 0.95), st.floats(0.0, 3.0)),
                min_size=1, max_size=5), st.integers(1, 9), st.sampled_from(["gpipe", "1f1b"]))
def test_the_simulated_step_lies_between_the_work_and_the_slowest_flush(stages, m, schedule) -> None:
    plan = rows([(tau, share * tau, g) for tau, share, g in stages], m, schedule)
    tl, step = schedule_timeline(plan)
    p = len(stages)
    work = max(m * tau + g for tau, _, g in stages)  # every stage runs m micro-batches, then reduces
    # as slow as a pipeline of stages each as slow as the slowest forward and backward
    slowest = (max(share * tau for tau, share, _ in stages)
               + max((1 - share) * tau for tau, share, _ in stages))
    flush = (m + p - 1) * slowest + max(g for _, _, g in stages)
    assert work * (1 - 1e-9) <= step <= flush * (1 + 1e-9)
    assert len(tl) == 2 * m * p + p  # F and B per micro-batch and stage, one reduction per stage


def test_an_interleaved_plan_has_no_gantt() -> None:
    plan = rows([(1.0, 0.3, 0.0)] * 2, 4, "interleaved")
    with pytest.raises(FormatError, match="GPipe and 1F1B"):
        schedule_timeline(plan)
