"""Launch settings of hybrid plans: Megatron arguments checked by megatron-core's own rules on
every launchable kind of plan, and the runtimes' refusals."""

from __future__ import annotations

import pytest

from dnnpart.errors import FormatError
from dnnpart.export.parallel_launch import (
    ModelFacts,
    deepspeed_settings,
    megatron_arguments,
    torchtitan_arguments,
    validate_with_megatron_core,
)
from dnnpart.pricing.parallel import ParallelConfig

FACTS = ModelFacts(layers=8, hidden=256, heads=8, seq=512)
PLANS = [
    ParallelConfig(d=4, t=2, p=1, zero=1, micro_batch=2, microbatches=4, schedule="1f1b",
                   blocks=(8,), recompute=("selective",)),
    ParallelConfig(d=1, t=4, p=2, zero=0, micro_batch=1, microbatches=8, schedule="1f1b",
                   blocks=(5, 3), recompute=("full", "full")),
    ParallelConfig(d=2, t=1, p=2, zero=1, micro_batch=1, microbatches=4, schedule="interleaved",
                   virtual=2, blocks=(4, 4), recompute=("none", "none")),
    ParallelConfig(d=1, t=8, p=4, zero=0, micro_batch=1, microbatches=4, schedule="gpipe",
                   blocks=(2, 2, 2, 2), recompute=("none",) * 4),
]


@pytest.mark.parametrize("plan", PLANS, ids=lambda c: f"d{c.d}t{c.t}p{c.p}-{c.schedule}")
def test_megatron_core_takes_every_launchable_kind(plan: ParallelConfig) -> None:
    pytest.importorskip("megatron.core")
    assert validate_with_megatron_core(plan, FACTS).startswith("megatron-core")
    args = megatron_arguments(plan, FACTS)
    value = {a: args[i + 1] for i, a in enumerate(args[:-1]) if a.startswith("--")}
    assert value["--tensor-model-parallel-size"] == str(plan.t)
    assert value["--global-batch-size"] == str(plan.global_batch)
    assert ("--pipeline-model-parallel-layout" in args) == (plan.schedule != "interleaved"
                                                             and len(set(plan.blocks)) > 1)


def test_megatron_core_refuses_heads_the_tensor_degree_does_not_divide() -> None:
    pytest.importorskip("megatron.core")
    with pytest.raises(FormatError, match="num_attention_heads"):
        validate_with_megatron_core(PLANS[0], ModelFacts(layers=8, hidden=256, heads=7, seq=512))


def test_grouped_query_attention_is_passed_on() -> None:
    args = megatron_arguments(PLANS[0], ModelFacts(layers=8, hidden=256, heads=8, seq=512, kv_heads=2))
    assert args[args.index("--num-query-groups") + 1] == "2" and "--group-query-attention" in args


def test_runtimes_say_what_they_cannot_run() -> None:
    args, why = torchtitan_arguments(PLANS[0])  # ZeRO-1 over 4 replicas
    assert args == [] and "ZeRO-1/2" in why
    ds, why = deepspeed_settings(PLANS[1])  # t = 4
    assert ds is None and "tensor parallelism" in why
    ds, note = deepspeed_settings(PLANS[2])
    assert ds["zero_optimization"]["stage"] == 1 and ds["train_batch_size"] == 8 and note is None
    titan, why = torchtitan_arguments(PLANS[3])
    assert why is None and titan[titan.index("--parallelism.pipeline_parallel_schedule") + 1] == "GPipe"
