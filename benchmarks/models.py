"""Capture the model suite of issue 14, check its FLOPs against published formulas, time captures.

Every measurement runs in a fresh interpreter (``subprocess``), so capture seconds include
building the model on the meta device and ``torch.export`` but not interpreter start-up, and
the peak RSS (``ru_maxrss``) is the whole process's.

Rows:

* the inference graph of gpt2, bert (base), llama (8 layers, hidden 1024), t5-small,
  swin-tiny, resnet-50 and vit-base at their default inputs: operators, edges, FLOPs, the
  formula's FLOPs and the ratio, parameter bytes, capture seconds; and the training graph
  (autograd, no optimizer): nodes, FLOPs relative to inference, capture seconds;
* scale: GPT-2 48 layers (``n_embd=1600, n_head=25``) training capture, with and without
  ``--optimizer adam`` (seconds and peak RSS); the 32-layer Word-RNN-2 capture; the synthetic
  generator at 200,000 nodes / 1,000,000 edges (seconds, peak RSS) and reloading its ``.npz``.

Usage::

    PYTHONPATH=src python benchmarks/models.py [--quick] [--out docs/models.md]

Writes the table to ``bench-results/models.md`` (or ``--out``; the published copy is
``docs/models.md``) and the raw figures to ``bench-results/models.json``.
"""

from __future__ import annotations

import argparse
import json
import platform
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
T = 128  # tokens of the text models' default input

#: name -> (spec, formula kind)
SUITE = {
    "gpt2": ("hf:gpt2", "decoder"),
    "bert": ("hf:bert", "masked-lm"),
    "llama-8x1024": (
        "hf:llama:num_hidden_layers=8,hidden_size=1024,num_attention_heads=16,num_key_value_heads=16,"
        "intermediate_size=2816",
        "decoder",
    ),
    "t5-small": ("hf:t5-small", "seq2seq"),
    "swin-tiny": ("hf:swin-tiny", "gmac:4.5"),
    "resnet-50": ("hf:resnet-50", "gmac:4.1"),
    "vit-base": ("hf:vit-base", "gmac:17.6"),
}

_CAPTURE = r"""
import json, resource, sys, time, warnings
warnings.simplefilter("ignore")
start = time.perf_counter()
from dnnpart.frontends.sources import resolve_model, import_source
from dnnpart.cost.model import CostModel
spec, training, optimizer = sys.argv[1], sys.argv[2] == "1", sys.argv[3] or None
t0 = time.perf_counter()
source = resolve_model(spec)
imported = import_source(source, cost_model=CostModel.from_presets(), training=training, optimizer=optimizer)
seconds = time.perf_counter() - t0
g = imported.graph
module = source.module
params = {id(p): p for p in module.parameters()}
out = {
    "spec": spec, "training": training, "optimizer": optimizer, "seconds": seconds,
    "nodes": g.n_nodes, "edges": g.n_edges, "operators": imported.n_operators,
    "flops": imported.total_flops, "unknown": imported.unknown_ops,
    "param_bytes": float(sum(p.numel() * p.element_size() for p in params.values())),
    "residual_bytes": float(g.node_param_bytes()[g.memory_classes() == 1].sum()),
    "orphans": len(imported.orphans),
    "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
}
if not training:
    cfg = module.model.config
    out["config"] = {k: v for k, v in cfg.to_dict().items() if isinstance(v, (int, float, list))}
    emb = 0
    for name, p in module.model.named_parameters():
        low = name.lower()
        if any(k in low for k in ("wte", "wpe", "embed_tokens", "word_embeddings", "position_embeddings",
                                  "token_type_embeddings", "shared", "lm_head")):
            emb += p.numel()
    out["non_embedding_params"] = float(sum(p.numel() for p in params.values()) - emb)
print(json.dumps(out))
"""

_WORKLOAD = r"""
import json, resource, sys, time, warnings
warnings.simplefilter("ignore")
from dnnpart.zoo.captured import workload_graph
t0 = time.perf_counter()
g = workload_graph(sys.argv[1])
rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
print(json.dumps({"spec": sys.argv[1], "seconds": time.perf_counter() - t0, "nodes": g.n_nodes,
                  "edges": g.n_edges, "peak_rss_mb": rss}))
"""

_GENERATOR = r"""
import json, resource, sys, time, tempfile, os
t0 = time.perf_counter()
from dnnpart.zoo.synthetic import synthetic_graph
from dnnpart.io.native import save_graph
g = synthetic_graph(sys.argv[1])
path = sys.argv[2]
save_graph(g, path)
rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
print(json.dumps({"spec": sys.argv[1], "seconds": time.perf_counter() - t0, "nodes": g.n_nodes,
                  "edges": g.n_edges, "peak_rss_mb": rss}))
"""

_RELOAD = r"""
import json, resource, sys, time
from dnnpart.io.native import load_graph
t0 = time.perf_counter()
g = load_graph(sys.argv[1])
print(json.dumps({"seconds": time.perf_counter() - t0, "nodes": g.n_nodes, "edges": g.n_edges,
                  "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}))
"""


def _run(code: str, *args: str) -> dict[str, Any]:
    env = {"PYTHONPATH": str(REPO / "src"), "PATH": "/usr/bin:/bin", "OMP_NUM_THREADS": "2"}
    proc = subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True, env=env,
                          check=False)
    if proc.returncode != 0:
        raise RuntimeError(f"{args}: {proc.stderr.strip().splitlines()[-1:]}")
    result: dict[str, Any] = json.loads(proc.stdout.strip().splitlines()[-1])
    return result


def formula_flops(kind: str, rec: dict[str, Any]) -> tuple[float, str]:
    """The issue's formula for one model, and how it reads."""
    if kind.startswith("gmac:"):
        gmac = float(kind.split(":")[1])
        return 2e9 * gmac, f"{gmac} GMAC (published)"
    cfg = rec["config"]
    n = rec["non_embedding_params"]
    d = cfg.get("n_embd") or cfg.get("hidden_size") or cfg.get("d_model")
    vocab = cfg["vocab_size"]
    if kind == "seq2seq":
        le, ld = cfg["num_layers"], cfg.get("num_decoder_layers") or cfg["num_layers"]
        return (2 * n * T + 2 * vocab * d * T + 4 * (le + 2 * ld) * T * T * d,
                "2·N·T + 2·V·d·T + 4·(L_enc + 2·L_dec)·T²·d")
    layers = cfg.get("n_layer") or cfg.get("num_hidden_layers")
    attention = 4 * layers * T * T * d
    if kind in ("decoder", "masked-lm"):  # the LM head's projection onto the (tied) vocabulary
        return 2 * n * T + 2 * vocab * d * T + attention, "2·N·T + 2·V·d·T + 4·L·T²·d"
    return 2 * n * T + attention, "2·N·T + 4·L·T²·d"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="skip the scale rows")
    parser.add_argument("--out", type=Path, default=REPO / "bench-results" / "models.md",
                        help="table file (default bench-results/models.md)")
    args = parser.parse_args()
    rows = []
    for name, (spec, kind) in SUITE.items():
        inf = _run(_CAPTURE, spec, "0", "")
        train = _run(_CAPTURE, spec, "1", "")
        expected, formula = formula_flops(kind, inf)
        rows.append({"name": name, "inference": inf, "training": train, "formula": formula,
                     "formula_flops": expected, "ratio": inf["flops"] / expected,
                     "training_ratio": train["flops"] / inf["flops"]})
        print(f"{name}: {inf['flops'] / 1e9:.2f} GFLOPs vs {expected / 1e9:.2f} "
              f"({inf['flops'] / expected:.3f}); training x{train['flops'] / inf['flops']:.2f}",
              file=sys.stderr)
    scale: dict[str, Any] = {}
    if not args.quick:
        big = "hf:gpt2:n_layer=48,n_embd=1600,n_head=25"
        scale["gpt2_48_training"] = _run(_CAPTURE, big, "1", "")
        scale["gpt2_48_training_adam"] = _run(_CAPTURE, big, "1", "adam")
        scale["word_rnn_2"] = _run(_WORKLOAD, "zoo:word-rnn-2")
        path = str(REPO / "bench-results" / "synthetic-200k.npz")
        (REPO / "bench-results").mkdir(exist_ok=True)
        scale["generator"] = _run(_GENERATOR, "zoo:synthetic:nodes=200000,edges=1000000,seed=1,like=word-rnn",
                                  path)
        scale["reload"] = _run(_RELOAD, path)
        Path(path).unlink()
        for key, rec in scale.items():
            print(f"{key}: {rec['seconds']:.2f} s, {rec['peak_rss_mb']:.0f} MB", file=sys.stderr)
    (REPO / "bench-results").mkdir(exist_ok=True)
    (REPO / "bench-results" / "models.json").write_text(json.dumps({"rows": rows, "scale": scale}, indent=1))
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(render(rows, scale))
    return 0


def render(rows: list[dict[str, Any]], scale: dict[str, Any]) -> str:
    lines = [
        "# Models captured by dnnpart",
        "",
        "Written by `benchmarks/models.py` on "
        f"{platform.machine()} / Python {platform.python_version()}, "
        f"{time.strftime('%Y-%m-%d')}. Every figure is one fresh process; capture seconds include "
        "building the model on the meta device and `torch.export` (and autograd for training).",
        "",
        "Each model at its default input (text: 1x128 tokens; T5: 1x128 encoder and decoder "
        "tokens; vision: 1x3x224x224), inference graph (`torch.export`, one node per aten op) and "
        "training graph (autograd, no optimizer; nodes include one per parameter). FLOPs count "
        "a multiply-add as 2; the formula column is the issue's stated formula "
        "(N = non-embedding parameters, T = 128 tokens, V vocabulary, d width, L layers).",
        "",
        "| model | ops | edges | GFLOPs | formula | formula GFLOPs | ratio | params (MB) | "
        "capture (s) | training nodes | training / inference FLOPs | training capture (s) |",
        "|---|---:|---:|---:|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in rows:
        inf, tr = r["inference"], r["training"]
        lines.append(
            f"| {r['name']} | {inf['operators']:,} | {inf['edges']:,} | {inf['flops'] / 1e9:.2f} | "
            f"{r['formula']} | {r['formula_flops'] / 1e9:.2f} | {r['ratio']:.3f} | "
            f"{inf['param_bytes'] / 1e6:.1f} | {inf['seconds']:.1f} | {tr['nodes']:,} | "
            f"{r['training_ratio']:.2f} | {tr['seconds']:.1f} |"
        )
    if scale:
        lines += ["", "## Scale (2 cores, whole process)", "",
                  "| what | nodes | edges | seconds | peak RSS (MB) |", "|---|---:|---:|---:|---:|"]
        labels = {
            "gpt2_48_training": "GPT-2 48 layers (n_embd 1600) training capture",
            "gpt2_48_training_adam": "same, --optimizer adam",
            "word_rnn_2": "zoo:word-rnn-2 (32-layer LSTM, seq 25) training capture",
            "generator": "zoo:synthetic 200,000 nodes / 1,000,000 edges, generate + save .npz",
            "reload": "reload that .npz",
        }
        for key, label in labels.items():
            rec = scale[key]
            lines.append(f"| {label} | {rec['nodes']:,} | {rec['edges']:,} | {rec['seconds']:.2f} | "
                         f"{rec['peak_rss_mb']:.0f} |")
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    raise SystemExit(main())
