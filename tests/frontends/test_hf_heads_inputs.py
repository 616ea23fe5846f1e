"""``hf:`` models are built with the head users load, and take named inputs of their own dtypes.

Heads: chosen from ``transformers``' own ``MODEL_FOR_..._MAPPING_NAMES`` tables (no list of
ours), checked on the whole suite on the meta device (cheap: nothing is captured). Inputs:
``--input name=shape:dtype`` through the library, the CLI and a plan file.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

pytest.importorskip("torch")
pytest.importorskip("transformers")

from dnnpart.errors import FormatError, UsageError
from dnnpart.frontends.hf import choose_head
from dnnpart.frontends.sources import ModelInput, capture, parse_input, resolve_model
from dnnpart.frontends.suite import SUITE

#: The head each family of the suite is loaded with (issue 28, item 7).
HEAD_OF = {"gpt2": "causal LM", "llama": "causal LM", "mistral": "causal LM", "mixtral": "causal LM",
           "qwen2": "causal LM", "phi3": "causal LM", "gpt_neox": "causal LM", "mamba": "causal LM",
           "bert": "masked LM", "deberta-v2": "masked LM", "t5": "seq2seq LM", "bart": "seq2seq LM",
           "whisper": "speech seq2seq", "vit": "image classification",
           "swin": "image classification", "resnet": "image classification"}
T5 = "hf:t5:num_layers=1,num_decoder_layers=1,d_model=16,d_ff=32,num_heads=2,d_kv=8,vocab_size=97"
GPT2 = "hf:gpt2:n_layer=1,n_embd=16,n_head=2,vocab_size=97"
WHISPER = ("hf:whisper:encoder_layers=1,decoder_layers=1,d_model=16,encoder_ffn_dim=32,decoder_ffn_dim=32,"
           "encoder_attention_heads=2,decoder_attention_heads=2,vocab_size=97,num_mel_bins=8,"
           "max_source_positions=8,max_target_positions=8,pad_token_id=0,bos_token_id=1,eos_token_id=2,"
           "decoder_start_token_id=1,suppress_tokens=[],begin_suppress_tokens=[]")


def test_every_suite_model_is_built_with_the_class_its_table_names() -> None:
    from transformers.models.auto import modeling_auto

    from dnnpart.frontends.hf import HEADS

    assert sorted(HEAD_OF) == sorted(name for name, _ in SUITE)
    tables = {head: getattr(modeling_auto, table) for table, head, _ in HEADS}
    for name, spec in SUITE:
        source = resolve_model(spec)
        model_type = spec.split(":")[1]
        head = HEAD_OF[name]
        assert choose_head(model_type) is not None and choose_head(model_type)[0] == head, name
        assert source.model_class == tables[head][model_type], name
        assert source.notes[0] == f"hf:{model_type} -> {source.model_class} ({head} head)"


def test_a_type_without_a_head_gets_the_bare_model_and_says_so() -> None:
    source = resolve_model("hf:canine:num_hidden_layers=1,hidden_size=16,num_attention_heads=2,"
                           "intermediate_size=32")
    assert source.model_class == "CanineModel"
    assert "no head" in source.notes[0] and "CanineModel" in source.notes[0]


def test_mixture_of_experts_note_states_the_routed_fraction() -> None:
    spec = dict(SUITE)["mixtral"]
    notes = resolve_model(spec).notes
    assert notes[0].startswith("hf:mixtral -> MixtralForCausalLM")
    assert any("2 of 4 experts" in n for n in notes), notes
    assert all("experts" not in n for n in resolve_model(dict(SUITE)["mistral"]).notes)


def test_whisper_captures_with_its_speech_and_decoder_inputs() -> None:
    source = resolve_model(WHISPER)
    assert source.input_names == ("input_features", "decoder_input_ids")
    assert source.input_shapes == [(1, 8, 16), (1, 8)]  # 2 x max_source_positions frames
    assert source.input_dtypes == ("float32", "int64")
    _, ir = capture(source)
    assert any(op.module_path.startswith("model.encoder") for op in ir.ops)
    assert any(op.module_path.startswith("proj_out") for op in ir.ops)  # the LM head


def test_named_inputs_replace_or_extend_the_defaults() -> None:
    t5 = resolve_model(T5, inputs=[parse_input("input_ids=1x16:int64"),
                                   parse_input("decoder_input_ids=1x8:int64")])
    assert t5.input_names == ("input_ids", "decoder_input_ids")
    assert t5.input_shapes == [(1, 16), (1, 8)]
    kept = resolve_model(T5, inputs=[ModelInput("input_ids", (1, 4))])
    assert kept.input_shapes == [(1, 4), (1, 128)]  # the decoder keeps its default
    gpt2 = resolve_model(GPT2, inputs=[ModelInput("input_ids", (2, 8)), ModelInput("attention_mask", (2, 8))])
    assert gpt2.input_names == ("input_ids", "attention_mask") and gpt2.input_dtype == "int64"
    ids, mask = (x for x in resolve_model(GPT2, inputs=gpt2.inputs, materialize=True).example_inputs)
    assert int(mask.min()) == 1 and int(ids.max()) < 97  # masks are ones, ids below the vocabulary
    _, ir = capture(gpt2)
    assert ir.ops


@pytest.mark.parametrize(("kwargs", "message"), [
    ({"inputs": [ModelInput("nosuch", (1, 8))]}, "--input nosuch: not an input of GPT2LMHeadModel"),
    ({"inputs": [ModelInput("labels", (1, 8))]}, "--input labels"),
    ({"inputs": [ModelInput("input_ids", (1, 8))], "input_shapes": [(1, 8)]}, "not both"),
    ({"inputs": [ModelInput("input_ids", (1, 8)), ModelInput("input_ids", (1, 4))]}, "given twice"),
    ({"input_shapes": [(1, 8), (1, 8)]}, "takes 1 input"),
])
def test_bad_inputs_are_usage_errors(kwargs: dict[str, object], message: str) -> None:
    with pytest.raises(UsageError, match=message):
        resolve_model(GPT2, **kwargs)  # type: ignore[arg-type]


def test_module_inputs_follow_the_forward_signature(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "two_inputs.py").write_text(
        "import torch\n"
        "class Two(torch.nn.Module):\n"
        "    def __init__(self):\n"
        "        super().__init__(); self.emb = torch.nn.Embedding(10, 4); self.lin = torch.nn.Linear(4, 4)\n"
        "    def forward(self, x, ids):\n"
        "        return self.lin(x) + self.emb(ids)\n"
        "def make():\n"
        "    return Two()\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    source = resolve_model("module:two_inputs:make", inputs=[ModelInput("ids", (2, 3), "int64"),
                                                             ModelInput("x", (2, 3, 4))])
    assert source.input_names == ("x", "ids") and source.input_dtype == "float32,int64"
    assert [tuple(t.shape) for t in source.example_inputs] == [(2, 3, 4), (2, 3)]
    _, ir = capture(source)
    assert ir.ops
    with pytest.raises(UsageError, match="give x too"):
        resolve_model("module:two_inputs:make", inputs=[ModelInput("ids", (2, 3), "int64")])
    with pytest.raises(UsageError, match="--input y"):
        resolve_model("module:two_inputs:make", inputs=[ModelInput("y", (2, 3))])


def test_plan_file_keeps_the_named_inputs(tmp_path: Path) -> None:
    from dnnpart.workflow import load_planned_model, plan_model

    inputs = (parse_input("input_ids=1x6:int64"), parse_input("decoder_input_ids=1x4"))
    planned = plan_model(T5, cluster="2xA100", method="greedy", inputs=inputs)
    assert planned.notes[0] == "hf:t5 -> T5ForConditionalGeneration (seq2seq LM head)"
    path = planned.write(tmp_path / "plan.json")
    block = json.loads(path.read_text())["model"]
    assert block["inputs"] == [{"name": "input_ids", "shape": [1, 6], "dtype": "int64"},
                               {"name": "decoder_input_ids", "shape": [1, 4], "dtype": "int64"}]
    loaded = load_planned_model(path, runnable=False)
    assert loaded.imported is not None and planned.imported is not None
    assert loaded.imported.graph.n_nodes == planned.imported.graph.n_nodes
    data = json.loads(path.read_text())
    data["model"]["inputs"][1]["shape"] = [1, 0]
    path.write_text(json.dumps(data))
    with pytest.raises(FormatError, match=r"model.inputs\[1\].shape"):
        load_planned_model(path, runnable=False)


def test_iteration_objective_says_which_batch_it_prices() -> None:
    from dnnpart.workflow import plan_model

    planned = plan_model("builtin:lenet5", cluster="4xP100", objective="iteration")
    assert any("32 samples per device (--batch) x 4 devices = 128 samples" in n for n in planned.notes)
