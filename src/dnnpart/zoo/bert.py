"""BERT encoders at operator granularity, built from shapes (no weights, no data files).

The graph follows the operators an ONNX export of BERT shows (Devlin et al., 2019; the
operator graphs of paper 1 were exported this way), with the attention heads batched into
single tensors as the exporters do:

* embeddings (``layer_id`` 0): word / position / token-type ``Gather``, two ``Add``,
  ``LayerNormalization``;
* each transformer layer ``i`` (``layer_id`` ``i``, 1-based), 29 ops: Q, K, V ``MatMul`` +
  bias ``Add`` (three parallel branches), ``Reshape`` + ``Transpose`` of each into heads,
  ``MatMul`` Q K^T, scale (``Div`` by sqrt(head size)), ``Softmax``, ``MatMul`` with V,
  ``Transpose`` + ``Reshape`` back, output projection ``MatMul`` + bias ``Add``, residual
  ``Add`` (a skip from the layer input), ``LayerNormalization``, FFN ``MatMul`` + bias
  ``Add`` + ``Gelu`` + ``MatMul`` + bias ``Add``, residual ``Add`` (a skip from the first
  LayerNorm), ``LayerNormalization``;
* head (``layer_id`` ``n_layers + 1``): pooler (``Gather`` of the [CLS] token, ``MatMul``,
  bias ``Add``, ``Tanh``) and a classifier ``MatMul`` + bias ``Add``.

FLOPs count mul and add separately; element-wise ops are charged a few FLOPs per element
(the matmuls dominate by two orders of magnitude). A BERT-base layer at sequence length 128
is ~1.86 GFLOPs, 12 layers ~22.4 GFLOPs (the usual "11.2 G multiply-adds" figure).
"""

from __future__ import annotations

from dnnpart.errors import UsageError
from dnnpart.graph.core import Graph
from dnnpart.zoo.cost import BYTES_PER_ELEMENT
from dnnpart.zoo.ops import OpGraph

#: BERT's WordPiece vocabulary, maximum positions and token types (Devlin et al., 2019).
VOCAB_SIZE = 30522
MAX_POSITIONS = 512
TYPE_VOCAB_SIZE = 2
#: Ops per transformer layer in :func:`bert_ops`.
OPS_PER_LAYER = 29

# FLOPs per element of element-wise ops, rough counts of the arithmetic each does.
_LAYERNORM_FLOPS = 8  # mean, variance (sub, square, add), normalise (sub, div), scale, shift
_SOFTMAX_FLOPS = 5  # max, sub, exp, sum, div
_GELU_FLOPS = 8  # tanh approximation: cube, mul-adds, tanh, mul


def bert_ops(
    n_layers: int,
    *,
    hidden: int = 768,
    heads: int = 12,
    seq_len: int = 128,
    batch: int = 1,
    intermediate: int | None = None,
    n_labels: int = 2,
) -> OpGraph:
    """The operator list of a BERT encoder with a classification head.

    Parameters
    ----------
    n_layers : transformer layers (BERT-base has 12, BERT-large 24).
    hidden, heads : model width and attention heads (``hidden % heads == 0``).
    seq_len, batch : input shape.
    intermediate : FFN width; default ``4 * hidden``.
    n_labels : classifier outputs.

    Examples
    --------
    >>> ops = bert_ops(1)
    >>> len(ops), round(ops.total_flops() / 1e9, 2)
    (41, 1.87)
    """
    if n_layers < 1:
        raise UsageError(f"n_layers must be >= 1, got {n_layers}")
    for name, value in (("hidden", hidden), ("heads", heads), ("seq_len", seq_len),
                        ("batch", batch), ("n_labels", n_labels)):
        if value < 1:
            raise UsageError(f"{name} must be >= 1, got {value}")
    if hidden % heads:
        raise UsageError(f"hidden ({hidden}) must be a multiple of heads ({heads})")
    ffn = 4 * hidden if intermediate is None else intermediate
    tokens = batch * seq_len
    act = tokens * hidden  # elements of one (batch, seq, hidden) activation
    scores = batch * heads * seq_len * seq_len
    ops = OpGraph()

    def matmul(name: str, x: str, n_in: int, n_out: int, layer: int, rows: int = tokens) -> str:
        """``x @ W`` then ``+ b``: the two ops an ONNX export shows for a dense layer."""
        mm = ops.add(f"{name}.matmul", "MatMul", [x], flops=2 * rows * n_in * n_out,
                     weight_elements=n_in * n_out, output_elements=rows * n_out,
                     layer_id=layer)
        return ops.add(f"{name}.bias_add", "Add", [mm], flops=rows * n_out,
                       weight_elements=n_out, output_elements=rows * n_out, layer_id=layer)

    def layernorm(name: str, x: str, layer: int) -> str:
        return ops.add(name, "LayerNormalization", [x], flops=_LAYERNORM_FLOPS * act,
                       weight_elements=2 * hidden, output_elements=act, layer_id=layer)

    # Embeddings: a lookup reads only the rows it gathers, not the whole table.
    lookup_bytes = 2 * act * BYTES_PER_ELEMENT + tokens * 8  # rows read + output + int64 ids
    word = ops.add("embeddings.word", "Gather", [], weight_elements=VOCAB_SIZE * hidden,
                   output_elements=act, bytes_moved=lookup_bytes, layer_id=0)
    position = ops.add("embeddings.position", "Gather", [],
                       weight_elements=MAX_POSITIONS * hidden, output_elements=act,
                       bytes_moved=lookup_bytes, layer_id=0)
    token_type = ops.add("embeddings.token_type", "Gather", [],
                         weight_elements=TYPE_VOCAB_SIZE * hidden, output_elements=act,
                         bytes_moved=lookup_bytes, layer_id=0)
    x = ops.add("embeddings.add_position", "Add", [word, position], flops=act,
                output_elements=act, layer_id=0)
    x = ops.add("embeddings.add_token_type", "Add", [x, token_type], flops=act,
                output_elements=act, layer_id=0)
    x = layernorm("embeddings.layernorm", x, 0)

    for layer in range(1, n_layers + 1):
        p = f"layer{layer}"
        heads_of: dict[str, str] = {}
        for part in ("q", "k", "v"):
            y = matmul(f"{p}.attention.{part}", x, hidden, hidden, layer)
            # Reshape is a view (no traffic: launch overhead only); Transpose copies.
            y = ops.add(f"{p}.attention.{part}_reshape", "Reshape", [y], output_elements=act,
                        bytes_moved=0.0, layer_id=layer)
            heads_of[part] = ops.add(f"{p}.attention.{part}_transpose", "Transpose", [y],
                                     output_elements=act, layer_id=layer)
        s = ops.add(f"{p}.attention.scores", "MatMul", [heads_of["q"], heads_of["k"]],
                    flops=2 * batch * seq_len * seq_len * hidden, output_elements=scores,
                    layer_id=layer)
        s = ops.add(f"{p}.attention.scale", "Div", [s], flops=scores, output_elements=scores,
                    layer_id=layer)
        s = ops.add(f"{p}.attention.softmax", "Softmax", [s], flops=_SOFTMAX_FLOPS * scores,
                    output_elements=scores, layer_id=layer)
        c = ops.add(f"{p}.attention.context", "MatMul", [s, heads_of["v"]],
                    flops=2 * batch * seq_len * seq_len * hidden, output_elements=act,
                    layer_id=layer)
        c = ops.add(f"{p}.attention.context_transpose", "Transpose", [c], output_elements=act,
                    layer_id=layer)
        c = ops.add(f"{p}.attention.context_reshape", "Reshape", [c], output_elements=act,
                    bytes_moved=0.0, layer_id=layer)
        c = matmul(f"{p}.attention.output", c, hidden, hidden, layer)
        c = ops.add(f"{p}.attention.residual_add", "Add", [c, x], flops=act,
                    output_elements=act, layer_id=layer)
        h = layernorm(f"{p}.attention.layernorm", c, layer)
        f = matmul(f"{p}.ffn.intermediate", h, hidden, ffn, layer)
        f = ops.add(f"{p}.ffn.gelu", "Gelu", [f], flops=_GELU_FLOPS * tokens * ffn,
                    output_elements=tokens * ffn, layer_id=layer)
        f = matmul(f"{p}.ffn.output", f, ffn, hidden, layer)
        f = ops.add(f"{p}.ffn.residual_add", "Add", [f, h], flops=act, output_elements=act,
                    layer_id=layer)
        x = layernorm(f"{p}.ffn.layernorm", f, layer)

    head = n_layers + 1
    cls = ops.add("pooler.first_token", "Gather", [x], output_elements=batch * hidden,
                  layer_id=head)
    pooled = matmul("pooler.dense", cls, hidden, hidden, head, rows=batch)
    pooled = ops.add("pooler.tanh", "Tanh", [pooled], flops=batch * hidden,
                     output_elements=batch * hidden, layer_id=head)
    matmul("classifier", pooled, hidden, n_labels, head, rows=batch)
    return ops


def bert(
    n_layers: int,
    *,
    hidden: int = 768,
    heads: int = 12,
    seq_len: int = 128,
    batch: int = 1,
    training: bool = False,
) -> Graph:
    """A BERT encoder graph at operator granularity, priced by :mod:`dnnpart.zoo.cost`.

    Compute times and edge costs are in milliseconds (see :mod:`dnnpart.zoo.cost`).
    ``layer_id`` is 0 for the embeddings, ``i`` for the ``i``-th transformer layer (1-based)
    and ``n_layers + 1`` for the pooler/classifier head. ``training`` appends the mirrored
    backward pass (:func:`dnnpart.graph.training.add_backward_pass`).

    Parameters
    ----------
    n_layers : transformer layers.
    hidden, heads : model width and attention heads (defaults: BERT-base).
    seq_len, batch : input shape.
    training : add the backward pass.

    Examples
    --------
    >>> g = bert(3)
    >>> g.n_nodes, g.n_edges, int(g.layer_id.max())
    (99, 110, 4)
    >>> bert(3, training=True).n_nodes
    198
    """
    return bert_ops(n_layers, hidden=hidden, heads=heads, seq_len=seq_len,
                    batch=batch).to_graph(training=training)
