"""The pipeline simulator equals a naive twin; closed forms of GPipe, 1F1B and ring all-reduce."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dnnpart.devices import Device, reference_cluster
from dnnpart.devices.cluster import Link
from dnnpart.devices.topology import cluster_from_links, uniform_dist
from dnnpart.pricing import inverse_bandwidth, ring_allreduce_time
from dnnpart.simulate import Stage, simulate_pipeline


def _free(d):
    """Devices joined by infinitely fast links: zero transfer time."""
    from dnnpart.devices import Cluster

    return Cluster(devices=tuple(Device(name=f"g{i}", kind="accelerator") for i in range(d)))


def _cluster(draw, d):
    devices = [Device(name=f"g{i}", kind="accelerator") for i in range(d)]
    links = [Link(a=i, b=i + 1, bandwidth=float(draw(st.sampled_from([1, 2, 4]))),
                  latency=float(draw(st.integers(0, 1)))) for i in range(d - 1)]
    links += [Link(a=a, b=b, bandwidth=float(draw(st.sampled_from([1, 2, 4]))))
              for a, b in itertools.combinations(range(d), 2) if draw(st.integers(0, 3)) == 0]
    return cluster_from_links(devices, links, time_unit_s=1.0)


@st.composite
def pipelines(draw):
    S = draw(st.integers(1, 4))
    reps = [draw(st.integers(1, 3)) for _ in range(S)]
    d = sum(reps)
    cluster = _cluster(draw, d)
    perm = draw(st.permutations(range(d)))
    stages, k = [], 0
    for s in range(S):
        stages.append(Stage(devices=tuple(perm[k:k + reps[s]]),
                            forward=float(draw(st.integers(0, 4))),
                            backward=float(draw(st.integers(0, 6))),
                            weight_bytes=float(draw(st.integers(0, 12))),
                            activation_bytes=float(draw(st.integers(0, 6))),
                            input_bytes=float(draw(st.integers(0, 3))), name=f"s{s}"))
        k += reps[s]
    return (stages, cluster, draw(st.integers(1, 6)), draw(st.sampled_from(["gpipe", "1f1b"])),
            draw(st.booleans()), draw(st.booleans()))


def naive_pipeline(stages, c, m, schedule, recompute, training):
    """Each device walks its own op list; sweep until every op has a time (fixed point)."""
    S = len(stages)

    def xfer(a, b, nbytes):
        return 0.0 if a == b else c.latency[a, b] + nbytes / c.bandwidth[a, b]

    def order(s, micro):
        if not training:
            return [("F", j) for j in micro]
        if schedule == "gpipe":
            return [("F", j) for j in micro] + [("B", j) for j in micro]
        w = (S - 1 - s) * max(len(x.devices) for x in stages)  # F(j) at j - w, B(j) at j + 1/2
        return sorted([("F", j) for j in micro] + [("B", j) for j in micro],
                      key=lambda x: x[1] - w if x[0] == "F" else x[1] + 0.5)

    dev = {}
    lists = {}
    for s, stg in enumerate(stages):
        r = len(stg.devices)
        for k, d in enumerate(stg.devices):
            micro = [j for j in range(m) if j % r == k]
            lists[d] = [(s, *x) for x in order(s, micro)]
            for x in lists[d]:
                dev[x] = d
    dur = {}
    for (s, ph, j) in dev:
        st_ = stages[s]
        dur[(s, ph, j)] = st_.forward if ph == "F" else st_.backward + (st_.forward if recompute else 0)

    def deps(op):
        s, ph, j = op
        out = []
        if ph == "F" and s > 0:
            out.append(((s - 1, "F", j), stages[s - 1].activation_bytes))
        if ph == "B":
            out.append(((s, "F", j), None))
            if s < S - 1:
                out.append(((s + 1, "B", j), stages[s].activation_bytes))
        return out

    fin, start = {}, {}
    free = dict.fromkeys(lists, 0.0)
    pos = dict.fromkeys(lists, 0)
    progress = True
    while progress:
        progress = False
        for d, ops in lists.items():
            while pos[d] < len(ops):
                op = ops[pos[d]]
                ds = deps(op)
                if any(x not in fin for x, _ in ds):
                    break
                t = free[d]
                for x, nbytes in ds:
                    t = max(t, fin[x] + (0.0 if nbytes is None else xfer(dev[x], d, nbytes)))
                start[op], fin[op] = t, t + dur[op]
                free[d] = fin[op]
                pos[d] += 1
                progress = True
    assert len(fin) == len(dev)
    step = max(fin.values())
    if training:
        for s, stg in enumerate(stages):
            end = max(fin[x] for x in fin if x[0] == s)
            r = len(stg.devices)
            if r > 1 and stg.weight_bytes:
                ring = stg.devices
                worst = max(c.latency[ring[k], ring[(k + 1) % r]]
                            + stg.weight_bytes / (r * c.bandwidth[ring[k], ring[(k + 1) % r]])
                            for k in range(r))
                step = max(step, end + 2 * (r - 1) * worst)
    inflight = {}
    for d, ops in lists.items():
        best = 0
        for j_t in sorted({start[x] for x in ops} | {fin[x] for x in ops}):
            held = sum(1 for x in ops if x[1] == "F"
                       and start[x] <= j_t < fin[(x[0], "B" if training else "F", x[2])])
            best = max(best, held)
        inflight[d] = best
    return start, fin, step, inflight


@settings(max_examples=520, deadline=None)
@given(pipelines())
def test_pipeline_equals_naive_twin(case):
    stages, c, m, schedule, recompute, training = case
    r = simulate_pipeline(stages, c, microbatches=m, schedule=schedule, recompute=recompute,
                          training=training)
    start, fin, step, inflight = naive_pipeline(stages, c, m, schedule, recompute, training)
    for k in range(r.start.shape[0]):
        op = (int(r.op_stage[k]), "FB"[r.op_phase[k]], int(r.op_micro[k]))
        assert (r.start[k], r.finish[k]) == (start[op], fin[op]), op
    assert r.step_time == step
    assert r.time_per_sample == step / m
    assert r.peak_inflight == inflight
    for stg in stages:
        for d in stg.devices:
            mem = r.memory[d]
            stash = stg.input_bytes if recompute else stg.activation_bytes
            extra = stg.activation_bytes if recompute and training and inflight[d] else 0.0
            assert mem["activations"] == inflight[d] * stash + extra
            assert mem["weights"] == stg.weight_bytes
            assert mem["total"] == (mem["weights"] + mem["gradients"] + mem["optimizer_state"]
                                    + mem["activations"])


@settings(max_examples=60, deadline=None)
@given(st.integers(1, 8), st.integers(1, 12), st.integers(1, 5), st.integers(0, 5))
def test_gpipe_closed_form(S, m, f, b):
    c = reference_cluster(n_accelerators=S, n_cpus=0, memory_bytes=1e9)  # no bytes: free transfers
    stages = [Stage(devices=(i,), forward=float(f), backward=float(b)) for i in range(S)]
    r = simulate_pipeline(stages, c, microbatches=m, schedule="gpipe")
    assert r.step_time == (m + S - 1) * (f + b)
    assert r.bubble_fraction == pytest.approx((S - 1) / (m + S - 1), abs=1e-12)


@settings(max_examples=60, deadline=None)
@given(st.integers(1, 8), st.integers(0, 8), st.integers(1, 5), st.integers(1, 5))
def test_1f1b_stage_i_holds_S_minus_i_microbatches(S, extra, f, b):
    m = S + extra
    c = _free(S)
    stages = [Stage(devices=(i,), forward=float(f), backward=float(b), activation_bytes=3.0)
              for i in range(S)]
    r = simulate_pipeline(stages, c, microbatches=m, schedule="1f1b")
    assert [r.peak_inflight[i] for i in range(S)] == [S - i for i in range(S)]
    assert [r.memory[i]["activations"] for i in range(S)] == [3.0 * (S - i) for i in range(S)]
    g = simulate_pipeline(stages, c, microbatches=m, schedule="gpipe")
    assert [g.peak_inflight[i] for i in range(S)] == [m] * S  # GPipe stashes every micro-batch
    assert r.step_time == g.step_time == (m + S - 1) * (f + b)  # same step, less memory
    # R replicas per stage: every pipeline copy runs its own 1F1B (S - i in flight per device)
    R = 3
    c = _free(S * R)
    stages = [Stage(devices=tuple(range(R * i, R * i + R)), forward=float(f), backward=float(b))
              for i in range(S)]
    rr = simulate_pipeline(stages, c, microbatches=m * R, schedule="1f1b")
    assert all(rr.peak_inflight[d] == S - d // R for d in range(S * R))
    assert rr.step_time == (m + S - 1) * (f + b)


@settings(max_examples=40, deadline=None)
@given(st.integers(2, 8), st.integers(0, 5), st.integers(1, 1000))
def test_ring_allreduce_closed_form_at_the_slowest_link(r, seed, w):
    c = uniform_dist(n=8, lo=1.0, hi=9.0, seed=seed)
    c = cluster_from_links(c.devices, c.links, time_unit_s=1.0)
    ring = list(range(r))
    slowest = min(c.bandwidth[ring[k], ring[(k + 1) % r]] for k in range(r))
    got = ring_allreduce_time(inverse_bandwidth(c.bandwidth), c.latency, ring, float(w))
    assert got == pytest.approx(2 * (r - 1) * w / (r * slowest), rel=1e-12)
    # in a pipeline step: the all-reduce follows the stage's last backward
    stage = Stage(devices=tuple(ring), forward=1.0, backward=1.0, weight_bytes=float(w))
    res = simulate_pipeline([stage], c, microbatches=r)
    assert res.step_time == pytest.approx(2.0 + 2 * (r - 1) * w / (r * slowest), rel=1e-12)


def test_bad_pipelines_are_refused():
    c = reference_cluster(n_accelerators=2, n_cpus=0, memory_bytes=1e9)
    with pytest.raises(ValueError, match="schedule"):
        simulate_pipeline([Stage(devices=(0,), forward=1.0)], c, schedule="zigzag")
    with pytest.raises(ValueError, match="in two stages"):
        simulate_pipeline([Stage(devices=(0,), forward=1.0), Stage(devices=(0,), forward=1.0)], c)
    with pytest.raises(ValueError, match="microbatches"):
        simulate_pipeline([Stage(devices=(0,), forward=1.0)], c, microbatches=0)
    with pytest.raises(ValueError, match="forward"):
        Stage(devices=(0,), forward=float("nan"))


@settings(max_examples=30, deadline=None)
@given(pipelines())
def test_timing_kernel_compiles_like_its_source(case):
    """A compilation check against the kernel's own source (``.py_func``); correctness:
    :func:`test_pipeline_equals_naive_twin` and ``tests/twins/test_pipeline_timing_twin.py``."""
    from dnnpart.simulate import pipeline_kernels as pk

    stages, c, m, schedule, _, training = case
    r = simulate_pipeline(stages, c, microbatches=m, schedule=schedule, training=training)
    n = r.start.shape[0]
    rng = np.random.default_rng(n)
    # a random DAG over the ops with random delays
    preds = [[u for u in range(v) if rng.random() < 0.3] for v in range(n)]
    ptr = np.zeros(n + 1, np.int64)
    ptr[1:] = np.cumsum([len(p) for p in preds])
    pred = np.array([u for p in preds for u in p], np.int64)
    delay = rng.integers(0, 3, pred.shape[0]).astype(np.float64)
    dur = rng.integers(0, 4, n).astype(np.float64)
    for x, y in zip(pk.timing_kernel(dur, ptr, pred, delay),
                    pk.timing_kernel.py_func(dur, ptr, pred, delay), strict=True):
        np.testing.assert_array_equal(x, y)


@settings(max_examples=60, deadline=None)
@given(pipelines())
def test_memory_curves_recount_the_micro_batches_in_flight(case):
    stages, c, m, schedule, recompute, training = case
    r = simulate_pipeline(stages, c, microbatches=m, schedule=schedule, recompute=recompute,
                          training=training)
    for stg in stages:
        for d in stg.devices:
            curve = r.timeline.memory[c.devices[d].name]
            mine = np.flatnonzero(r.op_device == d)
            fw = mine[r.op_phase[mine] == 0]
            end = r.finish[fw + 1] if training else r.finish[fw]
            static = r.memory[d]["total"] - r.memory[d]["activations"]
            stash = stg.input_bytes if recompute else stg.activation_bytes
            for t in curve.times.tolist():
                held = int(np.sum((r.start[fw] <= t) & (t < end)))
                running_b = int(np.sum((r.start[fw + 1] <= t) & (t < r.finish[fw + 1]))) \
                    if recompute and training else 0
                assert curve.value(t) == pytest.approx(
                    static + held * stash + running_b * stg.activation_bytes)
            assert curve.peak <= r.memory[d]["total"] + 1e-9
    spans = r.timeline
    assert len(spans) >= r.start.shape[0]
    assert np.all(spans.end >= spans.start)


def test_stages_from_plan_follow_the_recorded_pipeline_copies():
    """Paper 4's plans record each replica's pipeline copy (= its ring position): the stages
    list their devices in that order, so copy c of stage 0 feeds copy c of stage 1."""
    from dnnpart.plan import Plan
    from dnnpart.simulate import stages_from_plan
    from dnnpart.testing import chain_problem

    p = chain_problem([1.0, 1.0], n_accelerators=4)
    plain = Plan(assignment=[0, 1], replica_of=[0, 1, 0, 1])
    copies = Plan(assignment=[0, 1], replica_of=[0, 1, 0, 1], pipeline_copy=[0, 1, 1, 0])
    assert [s.devices for s in stages_from_plan(p, plain)[0]] == [(0, 2), (1, 3)]
    assert [s.devices for s in stages_from_plan(p, copies)[0]] == [(0, 2), (3, 1)]
