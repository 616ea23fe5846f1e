"""DeepSpeed, Megatron and torchtitan exports of block-aligned plans, checked by the runtimes.

The plans are made by hand, independently of :mod:`dnnpart.export.layers`: every forward node
of the planned (autograd) graph goes to a stage by ``layer_key`` of its module path (block
``k`` of the stack -> the stage given; non-block nodes after a block -> the last stage,
before -> the first), backward nodes with their forward partners, parameters with a consumer.

* DeepSpeed: the exported ``PipelineModule`` is built over gloo (one process per stage) and
  its ``parts``, each rank's stage and each rank's parameters are compared with the plan;
  each rank's layer, chained in one process, gives the unpartitioned model's output.
* Megatron: the layout is parsed and validated by megatron-core's own
  ``PipelineParallelLayerLayout`` (skipped where megatron-core is absent).
* torchtitan: exit 2 for a family it does not ship; for llama the overrides are parsed by
  torchtitan's own config rules where torchtitan imports.
"""

from __future__ import annotations

import importlib.util
import json
import os
from pathlib import Path
from typing import Any

import numpy as np
import pytest

torch = pytest.importorskip("torch", reason="needs torch")
pytest.importorskip("transformers", reason="needs transformers (hf: specs)")

from dnnpart.cli.main import main  # noqa: E402
from dnnpart.workflow import load_planned_model, plan_model  # noqa: E402
from dnnpart.workflow.exporting import export_plan  # noqa: E402

GPT2 = "hf:gpt2:n_layer=2,n_embd=32,n_head=2,vocab_size=64"
LLAMA = "hf:llama:num_hidden_layers=2,hidden_size=32,num_attention_heads=2,intermediate_size=64,vocab_size=64"


def _block_aligned(planned: Any, path: Path, block_stage: dict[int, int], devices: list[int]) -> Path:
    """Write ``planned`` with block ``k`` on stage ``block_stage[k]`` (device ``devices[s]``),
    the prologue on the first stage and the epilogue on the last (the units block-granular
    planning cuts between: :func:`dnnpart.graph.blocks.node_units`)."""
    from dnnpart.graph.blocks import node_units

    g = planned.problem.graph
    units = node_units(g)
    unit_stage = [0 if n == "prologue" else len(devices) - 1 if n == "epilogue"
                  else block_stage[int(n.split(".")[-1])] for n in units.names]
    stage = np.asarray(unit_stage)[units.unit]
    planned.write(path)
    data = json.loads(path.read_text())
    for entry in data["devices"]:
        entry["nodes"] = []
    for v in range(g.n_nodes):
        data["devices"][devices[int(stage[v])]]["nodes"].append(int(g.original_ids[v]))
    path.write_text(json.dumps(data))
    return path


@pytest.fixture(scope="module")
def gpt2_plan(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Any]:
    """GPT-2 on acc2 | acc0 | acc3: embedding + h.0, h.1, head (a mapping that is not rank order)."""
    tmp = tmp_path_factory.mktemp("gpt2")
    planned = plan_model(GPT2, cluster="4xA100", training=True, schedule="1f1b", microbatches=4,
                         input_shapes=[(2, 8)])
    path = _block_aligned(planned, tmp / "plan.json", {0: 0, 1: 1}, [2, 0, 3])
    return path, load_planned_model(path)


def test_megatron_layout_is_validated_by_megatron_core(gpt2_plan: tuple[Path, Any], tmp_path: Path) -> None:
    _, planned = gpt2_plan
    written = export_plan(planned, "megatron", tmp_path / "m.json")
    data = json.loads((tmp_path / "m.json").read_text())
    assert data["pipeline_model_parallel_layout"] == written.details["layout"] == "Et|t|L"
    assert data["pipeline_model_parallel_size"] == 3
    assert [r["device"] for r in data["ranks"]] == ["acc2", "acc0", "acc3"]
    assert data["CUDA_VISIBLE_DEVICES"] == "2,0,3"
    pytest.importorskip("megatron.core", reason="megatron-core not installed (extra 'megatron')")
    assert data["validated_with"].startswith("megatron-core")
    from megatron.core.transformer.pipeline_parallel_layer_layout import PipelineParallelLayerLayout

    layout = PipelineParallelLayerLayout(data["pipeline_model_parallel_layout"], 3)
    layout.validate_layer_layout(num_layers=2, mtp_num_layers=None)
    assert [layout.get_layer_id_list(pp_rank=r, vp_stage=0) for r in range(3)] == [[0], [1], []]


def test_a_split_block_is_refused_naming_it(gpt2_plan: tuple[Path, Any], tmp_path: Path,
                                            capsys: pytest.CaptureFixture[str]) -> None:
    path, planned = gpt2_plan
    data = json.loads(path.read_text())
    g = planned.problem.graph
    moved = next(v for v in range(g.n_nodes) if not g.is_backward[v]
                 and g.module_paths[v].endswith("h.1.mlp.c_fc") and g.pred_ptr[v + 1] > g.pred_ptr[v])
    oid = int(g.original_ids[moved])
    for entry in data["devices"]:
        entry["nodes"] = [n for n in entry["nodes"] if n != oid]
    data["devices"][3]["nodes"].append(oid)
    (tmp_path / "split.json").write_text(json.dumps(data))
    assert main(["export", str(tmp_path / "split.json"), "--format", "megatron", "-o",
                 str(tmp_path / "m.json")]) == 2
    err = [line for line in capsys.readouterr().err.strip().splitlines()
           if not line.startswith("progress:")]  # a slow load prints progress first
    assert len(err) == 1 and "'transformer.h.1' is split" in err[0] and "block granularity" in err[0]


def test_torchtitan_refuses_a_family_it_does_not_ship(gpt2_plan: tuple[Path, Any], tmp_path: Path,
                                                     capsys: pytest.CaptureFixture[str]) -> None:
    path, _ = gpt2_plan
    assert main(["export", str(path), "--format", "torchtitan", "-o", str(tmp_path / "tt")]) == 2
    err = [line for line in capsys.readouterr().err.strip().splitlines()
           if not line.startswith("progress:")]  # a slow load prints progress first
    assert len(err) == 1 and err[0].startswith("error:") and "llama3" in err[0]


class _Stacks(torch.nn.Module):
    """Token embedding, ``stacks`` stacks of two blocks each (``conv``: convolution blocks over
    an image instead), a head."""

    def __init__(self, stacks: int, conv: bool = False) -> None:
        super().__init__()
        self.conv = conv
        self.embed = torch.nn.Conv1d(4, 8, 1) if conv else torch.nn.Embedding(16, 8)
        block = (lambda: torch.nn.Sequential(torch.nn.Conv1d(8, 8, 1), torch.nn.ReLU())) if conv else \
            (lambda: torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.ReLU()))
        self.encoder = torch.nn.ModuleList([block(), block()])
        self.decoder = torch.nn.ModuleList([block(), block()]) if stacks == 2 else None
        self.head = torch.nn.Linear(8, 4)

    def forward(self, x: Any) -> Any:
        h = self.embed(x)
        for b in self.encoder:
            h = b(h)
        for b in self.decoder or ():
            h = b(h)
        return self.head(h.mean(-1) if self.conv else h)


@pytest.mark.parametrize(("stacks", "conv", "reason"), [(2, False, "encoder-decoder"),
                                                       (1, True, "no token embedding")])
def test_megatron_refuses_a_family_it_has_not(stacks: int, conv: bool, reason: str) -> None:
    from dnnpart.errors import UsageError
    from dnnpart.export.megatron import check_family
    from dnnpart.frontends.fx_import import module_ir, trace

    x = torch.randn(1, 4, 6) if conv else torch.randint(0, 16, (1, 6))
    ir = module_ir(trace(_Stacks(stacks, conv), (x,), name="m"), name="m")
    with pytest.raises(UsageError, match=reason):
        check_family(ir)
    check_family(module_ir(trace(_Stacks(1), (torch.randint(0, 16, (1, 6)),), name="lm"), name="lm"))


def test_torchtitan_settings_of_a_llama_plan(tmp_path: Path) -> None:
    planned = plan_model(LLAMA, cluster="4xA100", training=True, schedule="gpipe", microbatches=2,
                         input_shapes=[(2, 8)])
    path = _block_aligned(planned, tmp_path / "plan.json", {0: 1, 1: 1}, [1, 3])
    written = export_plan(path, "torchtitan", tmp_path / "tt")
    assert written.details["module_fqns_per_model_part"] == [["tok_embeddings"],
                                                             ["layers.0", "layers.1", "norm", "lm_head"]]
    info = json.loads((tmp_path / "tt" / "launch.json").read_text())
    assert info["settings"]["parallelism.pipeline_parallel_degree"] == 2
    assert info["settings"]["parallelism.pipeline_parallel_schedule"] == "GPipe"
    assert info["settings"]["training.local_batch_size"] == 2 * 2
    assert info["CUDA_VISIBLE_DEVICES"] == "1,3"
    script = (tmp_path / "tt" / "run_torchtitan.sh").read_text()
    assert "CUDA_VISIBLE_DEVICES=1,3 torchrun --nproc-per-node 2" in script
    if importlib.util.find_spec("torchtitan") is None:
        pytest.skip("torchtitan not installed (extra 'torchtitan'); settings not validated")
    assert info["validated_with"].startswith("torchtitan")


def _ds_worker(rank: int, world: int, port: int, folder: str, out: str) -> None:
    os.environ.update(RANK=str(rank), WORLD_SIZE=str(world), LOCAL_RANK=str(rank),
                      MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    import deepspeed
    import deepspeed.ops
    from deepspeed.runtime.config import DeepSpeedConfig

    torch.set_num_threads(1)
    # no op is "compatible": DeepSpeed then skips probing every kernel with the compiler and
    # building its CPU shared-memory all-reduce (minutes on a fresh machine; gloo needs neither)
    deepspeed.ops.__compatible_ops__ = {}
    deepspeed.init_distributed(dist_backend="gloo", auto_mpi_discovery=False)
    spec = importlib.util.spec_from_file_location("pipeline_module", Path(folder) / "pipeline_module.py")
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    module = mod.build()
    config = DeepSpeedConfig(str(Path(folder) / "ds_config.json"), mpu=module.mpu())
    (layer,) = module.forward_funcs
    tied = {name: comm["ranks"] for name, comm in module.tied_comms.items()}
    Path(out, f"rank{rank}.json").write_text(json.dumps({
        "parts": list(module.parts), "stage": module.stage_id, "layer": layer.index,
        "params": sorted(layer.stage.inner.state_dict()), "tied": tied,
        "gas": config.gradient_accumulation_steps, "micro": config.train_micro_batch_size_per_gpu}))
    torch.distributed.barrier()


def test_deepspeed_pipeline_module_holds_the_plans_stages(gpt2_plan: tuple[Path, Any],
                                                          tmp_path: Path) -> None:
    pytest.importorskip("deepspeed", reason="deepspeed not installed (extra 'deepspeed')")
    from dnnpart.export.deepspeed import stage_layer_type
    from dnnpart.export.runtime import _free_port, run_workers
    from dnnpart.frontends.sources import example_inputs

    _, planned = gpt2_plan
    folder = tmp_path / "ds"
    written = export_plan(planned, "deepspeed", folder)
    assert written.details["parts"] == [0, 1, 2, 3]
    assert written.details["blocks"] == [["embedding", "transformer.h.0"], ["transformer.h.1"], ["head"]]
    run_workers(_ds_worker, (3, _free_port(), str(folder), str(tmp_path)), 3, "deepspeed build")
    ranks = [json.loads((tmp_path / f"rank{r}.json").read_text()) for r in range(3)]
    assert all(r["parts"] == [0, 1, 2, 3] for r in ranks)
    assert [(r["stage"], r["layer"]) for r in ranks] == [(0, 0), (1, 1), (2, 2)]
    assert all(r["gas"] == 4 and r["micro"] == 2 for r in ranks)
    # each block's parameters on its planned stage only; GPT-2's wte (also lm_head.weight) tied over 0 and 2
    h1 = [[p for p in r["params"] if ".h.1." in p] for r in ranks]
    assert h1[0] == [] and h1[1] and h1[2] == []
    assert ranks[0]["tied"] == ranks[2]["tied"] == {"model.transformer.wte.weight": [0, 2]}
    assert ranks[1]["tied"] == {}
    # the three layers chained in one process compute the unpartitioned model
    layers = [stage_layer_type()(str(folder), k) for k in range(3)]
    source = planned.runnable.source
    x = example_inputs(source.input_shapes, source.input_dtype, seed=3, module=source.module)
    with torch.no_grad():
        out: Any = tuple(x)
        for layer in layers:
            out = layer(out)
        ref = planned.runnable.module(*x)
    ref = ref[0] if isinstance(ref, (tuple, list)) else ref
    assert torch.allclose(out, ref, rtol=1e-5, atol=1e-6)
