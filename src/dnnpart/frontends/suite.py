"""The model suite: sixteen ``transformers`` architectures at tiny sizes, as users load them.

One place for the specs that tests, benchmarks and docs run: decoder LMs (``gpt2``, ``llama``,
``mistral``, ``mixtral`` (a mixture of experts), ``qwen2``, ``phi3``, ``gpt_neox``, ``mamba``
(a state-space model)), encoders (``bert``, ``deberta-v2``), encoder-decoders (``t5``,
``bart``, ``whisper`` (speech)) and vision models (``vit``, ``swin``, ``resnet``). Each is
two layers (blocks) with hidden size at most 256, built with its head
(:mod:`dnnpart.frontends.hf`) and its default inputs (text: 128 tokens; whisper: 80 mel bins x
128 frames and 64 decoder tokens; vision: one image of the config's size, ResNet's 224x224).

Choices: vocabularies of 1,000 tokens (the embedding and LM head would otherwise dwarf a
two-layer body); models whose default special-token ids exceed that vocabulary get them set
inside it; Swin has two stages of one block each, ResNet two stages of one basic block.
"""

from __future__ import annotations

_TEXT = "num_hidden_layers=2,hidden_size=256,num_attention_heads=4,intermediate_size=512,vocab_size=1000"
_DECODER = _TEXT + ",num_key_value_heads=2"
_SEQ2SEQ = ("encoder_layers=2,decoder_layers=2,d_model=256,encoder_ffn_dim=512,decoder_ffn_dim=512,"
            "encoder_attention_heads=4,decoder_attention_heads=4,vocab_size=1000")

#: ``(name, spec)`` of every model of the suite, in the order tables show them.
SUITE: tuple[tuple[str, str], ...] = (
    ("gpt2", "hf:gpt2:n_layer=2,n_embd=256,n_head=4,vocab_size=1000,bos_token_id=0,eos_token_id=0"),
    ("llama", "hf:llama:" + _DECODER),
    ("mistral", "hf:mistral:" + _DECODER),
    ("mixtral", "hf:mixtral:" + _DECODER + ",num_local_experts=4,num_experts_per_tok=2"),
    ("qwen2", "hf:qwen2:" + _DECODER),
    ("phi3", "hf:phi3:" + _DECODER + ",pad_token_id=0,bos_token_id=1,eos_token_id=2"),
    ("gpt_neox", "hf:gpt_neox:" + _TEXT),
    ("bert", "hf:bert:" + _TEXT),
    ("deberta-v2", "hf:deberta-v2:" + _TEXT),
    ("t5", "hf:t5:num_layers=2,num_decoder_layers=2,d_model=256,d_ff=512,num_heads=4,d_kv=64,"
           "vocab_size=1000"),
    ("bart", "hf:bart:" + _SEQ2SEQ),
    ("whisper", "hf:whisper:" + _SEQ2SEQ + ",num_mel_bins=80,max_source_positions=64,max_target_positions=64,"
                "pad_token_id=0,bos_token_id=1,eos_token_id=2,decoder_start_token_id=1,"
                "suppress_tokens=[],begin_suppress_tokens=[]"),
    ("vit", "hf:vit:num_hidden_layers=2,hidden_size=256,num_attention_heads=4,intermediate_size=512,"
            "image_size=64,patch_size=8,num_labels=10"),
    ("swin", "hf:swin:embed_dim=64,depths=[1,1],num_heads=[2,4],image_size=64,patch_size=4,window_size=4,"
             "num_labels=10"),
    ("resnet", "hf:resnet:embedding_size=32,hidden_sizes=[64,128],depths=[1,1],layer_type=basic,"
               "num_labels=10"),
    ("mamba", "hf:mamba:num_hidden_layers=2,hidden_size=256,state_size=16,vocab_size=1000"),
)
#: Three small, fast members that the default test run imports (the rest run under ``-m slow``).
QUICK = ("gpt2", "bert", "t5")


def suite_spec(name: str) -> str:
    """The spec of suite member ``name``.

    Examples
    --------
    >>> suite_spec("bert")
    'hf:bert:num_hidden_layers=2,hidden_size=256,num_attention_heads=4,intermediate_size=512,vocab_size=1000'
    """
    specs = dict(SUITE)
    if name not in specs:
        raise KeyError(f"{name!r} is not in the model suite ({', '.join(specs)})")
    return specs[name]
