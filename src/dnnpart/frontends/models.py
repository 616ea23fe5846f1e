"""Reference models written in plain ``torch.nn``: ResNet-50, Inception-v3, a BERT-like encoder.

These follow the published architectures (He et al. 2016; Szegedy et al. 2016; Devlin et al.
2019) with random weights, so the frontends can be tested and demonstrated without
torchvision or downloads. They are written to trace with ``torch.fx``: no data-dependent
control flow, no in-place activations (an in-place op would alias tensors that the exporter
may send between devices).

Importing this module needs torch; :func:`build_model` is the torch-free entry point that
raises :class:`~dnnpart.errors.MissingDependencyError` without it.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import torch
from torch import Tensor, nn

from dnnpart.errors import UsageError

# -- torchvision-style ResNet with one ReLU module called several times ------------------


class SharedReluBlock(nn.Module):
    """torchvision's ``BasicBlock`` shape: one ``self.relu`` called twice per block."""

    def __init__(self, channels: int) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(channels, channels, 3, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(channels)
        self.relu = nn.ReLU()
        self.conv2 = nn.Conv2d(channels, channels, 3, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(channels)

    def forward(self, x: Tensor) -> Tensor:
        out = self.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        result: Tensor = self.relu(out + x)
        return result


class SharedReluResNet(nn.Module):
    """A small ResNet whose stem and blocks reuse their ``relu`` module (torchvision style).

    The module called twice is what breaks module-path split points: its second call has
    the same module path as its first.
    """

    def __init__(self, channels: int = 8, blocks: int = 4, num_classes: int = 10) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(3, channels, 3, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(channels)
        self.relu = nn.ReLU()
        self.layers = nn.Sequential(*(SharedReluBlock(channels) for _ in range(blocks)))
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.fc = nn.Linear(channels, num_classes)

    def forward(self, x: Tensor) -> Tensor:
        x = self.relu(self.bn1(self.conv1(x)))
        x = self.layers(x)
        result: Tensor = self.fc(torch.flatten(self.pool(x), 1))
        return result


def shared_relu_resnet() -> SharedReluResNet:
    """``module:dnnpart.frontends.models:shared_relu_resnet`` (seeded, for runs and tests)."""
    torch.manual_seed(0)
    return SharedReluResNet()


# -- ResNet-50 ----------------------------------------------------------------------------


class Bottleneck(nn.Module):
    """1x1 reduce, 3x3 (strided), 1x1 expand, with a projection shortcut when shapes change."""

    expansion = 4

    def __init__(self, in_channels: int, width: int, stride: int = 1) -> None:
        super().__init__()
        out_channels = width * self.expansion
        self.conv1 = nn.Conv2d(in_channels, width, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(width)
        self.relu1 = nn.ReLU()
        self.conv2 = nn.Conv2d(width, width, 3, stride=stride, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(width)
        self.relu2 = nn.ReLU()
        self.conv3 = nn.Conv2d(width, out_channels, 1, bias=False)
        self.bn3 = nn.BatchNorm2d(out_channels)
        self.relu3 = nn.ReLU()
        self.downsample: nn.Module | None = None
        if stride != 1 or in_channels != out_channels:
            self.downsample = nn.Sequential(
                nn.Conv2d(in_channels, out_channels, 1, stride=stride, bias=False),
                nn.BatchNorm2d(out_channels),
            )

    def forward(self, x: Tensor) -> Tensor:
        out = self.relu1(self.bn1(self.conv1(x)))
        out = self.relu2(self.bn2(self.conv2(out)))
        out = self.bn3(self.conv3(out))
        shortcut = x if self.downsample is None else self.downsample(x)
        result: Tensor = self.relu3(out + shortcut)
        return result


class ResNet(nn.Module):
    """Bottleneck ResNet; ``blocks=(3, 4, 6, 3)`` is ResNet-50."""

    def __init__(self, blocks: tuple[int, ...] = (3, 4, 6, 3), num_classes: int = 1000) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(3, 64, 7, stride=2, padding=3, bias=False)
        self.bn1 = nn.BatchNorm2d(64)
        self.relu = nn.ReLU()
        self.maxpool = nn.MaxPool2d(3, stride=2, padding=1)
        channels = 64
        stages = []
        for i, count in enumerate(blocks):
            width = 64 * 2**i
            layers = []
            for j in range(count):
                layers.append(Bottleneck(channels, width, stride=2 if (j == 0 and i > 0) else 1))
                channels = width * Bottleneck.expansion
            stages.append(nn.Sequential(*layers))
        self.layer1, self.layer2, self.layer3, self.layer4 = stages
        self.avgpool = nn.AdaptiveAvgPool2d(1)
        self.fc = nn.Linear(channels, num_classes)

    def forward(self, x: Tensor) -> Tensor:
        x = self.maxpool(self.relu(self.bn1(self.conv1(x))))
        x = self.layer4(self.layer3(self.layer2(self.layer1(x))))
        out: Tensor = self.fc(torch.flatten(self.avgpool(x), 1))
        return out


def resnet50(num_classes: int = 1000) -> ResNet:
    """ResNet-50 with random weights (~4.1 G multiply-adds at 224x224)."""
    return ResNet((3, 4, 6, 3), num_classes)


# -- Inception-v3 -------------------------------------------------------------------------


class ConvBN(nn.Module):
    """Convolution without bias, batch norm (eps 1e-3), ReLU: Inception's basic unit."""

    def __init__(
        self,
        cin: int,
        cout: int,
        kernel: int | tuple[int, int],
        stride: int = 1,
        padding: int | tuple[int, int] = 0,
    ) -> None:
        super().__init__()
        self.conv = nn.Conv2d(cin, cout, kernel, stride=stride, padding=padding, bias=False)
        self.bn = nn.BatchNorm2d(cout, eps=1e-3)
        self.relu = nn.ReLU()

    def forward(self, x: Tensor) -> Tensor:
        out: Tensor = self.relu(self.bn(self.conv(x)))
        return out


class MixedA(nn.Module):
    """35x35 block: 1x1, 5x5, double 3x3 and pooled branches."""

    def __init__(self, cin: int, pool_features: int) -> None:
        super().__init__()
        self.b1 = ConvBN(cin, 64, 1)
        self.b5_1, self.b5_2 = ConvBN(cin, 48, 1), ConvBN(48, 64, 5, padding=2)
        self.b3_1 = ConvBN(cin, 64, 1)
        self.b3_2, self.b3_3 = ConvBN(64, 96, 3, padding=1), ConvBN(96, 96, 3, padding=1)
        self.pool = nn.AvgPool2d(3, stride=1, padding=1)
        self.bp = ConvBN(cin, pool_features, 1)

    def forward(self, x: Tensor) -> Tensor:
        out: Tensor = torch.cat(
            [self.b1(x), self.b5_2(self.b5_1(x)), self.b3_3(self.b3_2(self.b3_1(x))), self.bp(self.pool(x))],
            1,
        )
        return out


class ReduceB(nn.Module):
    """35x35 -> 17x17 grid reduction."""

    def __init__(self, cin: int) -> None:
        super().__init__()
        self.b3 = ConvBN(cin, 384, 3, stride=2)
        self.d1, self.d2 = ConvBN(cin, 64, 1), ConvBN(64, 96, 3, padding=1)
        self.d3 = ConvBN(96, 96, 3, stride=2)
        self.pool = nn.MaxPool2d(3, stride=2)

    def forward(self, x: Tensor) -> Tensor:
        out: Tensor = torch.cat([self.b3(x), self.d3(self.d2(self.d1(x))), self.pool(x)], 1)
        return out


class MixedC(nn.Module):
    """17x17 block with factorised 7x7 convolutions (1x7 then 7x1)."""

    def __init__(self, cin: int, c7: int) -> None:
        super().__init__()
        self.b1 = ConvBN(cin, 192, 1)
        self.s1, self.s2 = ConvBN(cin, c7, 1), ConvBN(c7, c7, (1, 7), padding=(0, 3))
        self.s3 = ConvBN(c7, 192, (7, 1), padding=(3, 0))
        self.d1, self.d2 = ConvBN(cin, c7, 1), ConvBN(c7, c7, (7, 1), padding=(3, 0))
        self.d3, self.d4 = ConvBN(c7, c7, (1, 7), padding=(0, 3)), ConvBN(c7, c7, (7, 1), padding=(3, 0))
        self.d5 = ConvBN(c7, 192, (1, 7), padding=(0, 3))
        self.pool = nn.AvgPool2d(3, stride=1, padding=1)
        self.bp = ConvBN(cin, 192, 1)

    def forward(self, x: Tensor) -> Tensor:
        single = self.s3(self.s2(self.s1(x)))
        double = self.d5(self.d4(self.d3(self.d2(self.d1(x)))))
        out: Tensor = torch.cat([self.b1(x), single, double, self.bp(self.pool(x))], 1)
        return out


class ReduceD(nn.Module):
    """17x17 -> 8x8 grid reduction."""

    def __init__(self, cin: int) -> None:
        super().__init__()
        self.a1, self.a2 = ConvBN(cin, 192, 1), ConvBN(192, 320, 3, stride=2)
        self.b1, self.b2 = ConvBN(cin, 192, 1), ConvBN(192, 192, (1, 7), padding=(0, 3))
        self.b3, self.b4 = ConvBN(192, 192, (7, 1), padding=(3, 0)), ConvBN(192, 192, 3, stride=2)
        self.pool = nn.MaxPool2d(3, stride=2)

    def forward(self, x: Tensor) -> Tensor:
        out: Tensor = torch.cat([self.a2(self.a1(x)), self.b4(self.b3(self.b2(self.b1(x)))), self.pool(x)], 1)
        return out


class MixedE(nn.Module):
    """8x8 block with split 1x3 / 3x1 branches."""

    def __init__(self, cin: int) -> None:
        super().__init__()
        self.b1 = ConvBN(cin, 320, 1)
        self.s1 = ConvBN(cin, 384, 1)
        self.s2a, self.s2b = (
            ConvBN(384, 384, (1, 3), padding=(0, 1)),
            ConvBN(384, 384, (3, 1), padding=(1, 0)),
        )
        self.d1, self.d2 = ConvBN(cin, 448, 1), ConvBN(448, 384, 3, padding=1)
        self.d3a, self.d3b = (
            ConvBN(384, 384, (1, 3), padding=(0, 1)),
            ConvBN(384, 384, (3, 1), padding=(1, 0)),
        )
        self.pool = nn.AvgPool2d(3, stride=1, padding=1)
        self.bp = ConvBN(cin, 192, 1)

    def forward(self, x: Tensor) -> Tensor:
        s = self.s1(x)
        d = self.d2(self.d1(x))
        out: Tensor = torch.cat(
            [
                self.b1(x),
                torch.cat([self.s2a(s), self.s2b(s)], 1),
                torch.cat([self.d3a(d), self.d3b(d)], 1),
                self.bp(self.pool(x)),
            ],
            1,
        )
        return out


class InceptionV3(nn.Module):
    """Inception-v3 without the auxiliary classifier (~5.7 G multiply-adds at 299x299)."""

    def __init__(self, num_classes: int = 1000) -> None:
        super().__init__()
        self.stem = nn.Sequential(
            ConvBN(3, 32, 3, stride=2),
            ConvBN(32, 32, 3),
            ConvBN(32, 64, 3, padding=1),
            nn.MaxPool2d(3, stride=2),
            ConvBN(64, 80, 1),
            ConvBN(80, 192, 3),
            nn.MaxPool2d(3, stride=2),
        )
        self.mixed = nn.Sequential(
            MixedA(192, 32),
            MixedA(256, 64),
            MixedA(288, 64),
            ReduceB(288),
            MixedC(768, 128),
            MixedC(768, 160),
            MixedC(768, 160),
            MixedC(768, 192),
            ReduceD(768),
            MixedE(1280),
            MixedE(2048),
        )
        self.avgpool = nn.AdaptiveAvgPool2d(1)
        self.fc = nn.Linear(2048, num_classes)

    def forward(self, x: Tensor) -> Tensor:
        out: Tensor = self.fc(torch.flatten(self.avgpool(self.mixed(self.stem(x))), 1))
        return out


# -- BERT-like encoder ----------------------------------------------------------------------


class SelfAttention(nn.Module):
    """Multi-head self-attention spelled out in matmuls (so every part is an operator)."""

    def __init__(self, hidden: int, heads: int, seq_len: int) -> None:
        super().__init__()
        if hidden % heads:
            raise UsageError(f"hidden size {hidden} is not a multiple of {heads} heads")
        self.heads, self.head_dim, self.seq_len, self.hidden = heads, hidden // heads, seq_len, hidden
        self.scale = 1.0 / math.sqrt(self.head_dim)
        self.query, self.key, self.value = (nn.Linear(hidden, hidden) for _ in range(3))
        self.output = nn.Linear(hidden, hidden)

    def forward(self, x: Tensor) -> Tensor:
        # Constant target shapes (batch inferred) keep shape arithmetic out of traced graphs.
        split = (-1, self.seq_len, self.heads, self.head_dim)
        q = self.query(x).reshape(split).transpose(1, 2)
        k = self.key(x).reshape(split).transpose(1, 2)
        v = self.value(x).reshape(split).transpose(1, 2)
        scores = torch.softmax((q @ k.transpose(-2, -1)) * self.scale, dim=-1)
        context = (scores @ v).transpose(1, 2).reshape(-1, self.seq_len, self.hidden)
        out: Tensor = self.output(context)
        return out


class EncoderLayer(nn.Module):
    """Post-norm transformer layer: attention, add & norm, GELU feed-forward, add & norm."""

    def __init__(self, hidden: int, heads: int, ffn: int, seq_len: int) -> None:
        super().__init__()
        self.attention = SelfAttention(hidden, heads, seq_len)
        self.norm1 = nn.LayerNorm(hidden, eps=1e-12)
        self.ffn_in, self.act, self.ffn_out = nn.Linear(hidden, ffn), nn.GELU(), nn.Linear(ffn, hidden)
        self.norm2 = nn.LayerNorm(hidden, eps=1e-12)

    def forward(self, x: Tensor) -> Tensor:
        x = self.norm1(x + self.attention(x))
        out: Tensor = self.norm2(x + self.ffn_out(self.act(self.ffn_in(x))))
        return out


class BertEncoder(nn.Module):
    """BERT-like encoder over token ids ``(batch, seq_len)``: embeddings + ``layers`` layers.

    The sequence length is fixed at construction (position embeddings are added for exactly
    ``seq_len`` positions), which keeps the model free of shape arithmetic when traced.
    """

    def __init__(
        self,
        *,
        layers: int = 12,
        hidden: int = 768,
        heads: int = 12,
        ffn: int = 3072,
        vocab_size: int = 30522,
        seq_len: int = 128,
    ) -> None:
        super().__init__()
        self.tokens = nn.Embedding(vocab_size, hidden)
        self.positions = nn.Embedding(seq_len, hidden)
        self.register_buffer("position_ids", torch.arange(seq_len).unsqueeze(0), persistent=False)
        self.norm = nn.LayerNorm(hidden, eps=1e-12)
        self.layers = nn.Sequential(*(EncoderLayer(hidden, heads, ffn, seq_len) for _ in range(layers)))

    def forward(self, token_ids: Tensor) -> Tensor:
        x = self.norm(self.tokens(token_ids) + self.positions(self.position_ids))
        out: Tensor = self.layers(x)
        return out


def bert_encoder(**config: Any) -> BertEncoder:
    """A BERT-base-like encoder (12 layers, hidden 768) unless ``config`` says otherwise."""
    return BertEncoder(**config)


#: name -> (factory, default input shape, input dtype name)
BUILTIN_MODELS: dict[str, tuple[Callable[..., nn.Module], tuple[int, ...], str]] = {
    "resnet50": (resnet50, (1, 3, 224, 224), "float32"),
    "inception_v3": (lambda **kw: InceptionV3(**kw), (1, 3, 299, 299), "float32"),
    "bert": (bert_encoder, (1, 128), "int64"),
}
