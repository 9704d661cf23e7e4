"""Candidates of NAS-Bench-BERT's FlexiBERT-style space (Serianni & Kalita, ACL 2023).

ELECTRA-small embeddings projected to the hidden size, then post-LayerNorm layers, each a
token-mixing operation followed by a stack of feed-forward layers:

- ``SA``: multi-head self-attention, ``SDP`` (scaled dot-product) or ``WMA`` (an extra
  bias-free map after the query projection); output dense, residual, LayerNorm.
- ``LT``: one linear projection split into heads, then a fixed transform per head over
  (sequence, head dim): ``DFT`` keeps the real part of a 2-D FFT, ``DCT`` applies DCT-II along the
  head dim, then along the sequence. As in the benchmark's model, nothing follows it: no output
  dense, residual or LayerNorm.
- ``DSC``: ConvBERT-style mixed attention: half the width is self-attention with
  ``max(1, heads // 2)`` heads, the other half a span-based dynamic convolution whose per-token
  kernels (size 5 or 9) come from a depthwise-separable convolution of the input; output dense,
  residual, LayerNorm.
- FFN: dense in -> GELU -> (num_ffn - 1) x [linear -> GELU] -> dense out -> LayerNorm(residual).
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass, field
from typing import Any, ClassVar

import torch
import torch.nn.functional as F
from torch import nn

from optuna_wpca._errors import InputError
from optuna_wpca.models._attention import SelfAttention
from optuna_wpca.models._base import CandidateModel, LayeredConfig, allocate

OPERATIONS = {"SA": ("SDP", "WMA"), "LT": ("DFT", "DCT"), "DSC": (5, 9)}


@dataclass(frozen=True)
class FlexiBERTLayerConfig:
    operation: str
    parameter: str | int
    heads: int
    ffn_size: int
    num_ffn: int

    def __post_init__(self) -> None:
        if self.operation not in OPERATIONS:
            raise InputError(f"unknown operation {self.operation!r}; use one of {tuple(OPERATIONS)}")
        allowed = OPERATIONS[self.operation]
        value = int(self.parameter) if self.operation == "DSC" else self.parameter
        if value not in allowed:
            raise InputError(f"operation {self.operation} takes parameter in {allowed}, got {self.parameter!r}")
        object.__setattr__(self, "parameter", value)
        for name in ("heads", "ffn_size", "num_ffn"):
            if int(getattr(self, name)) < 1:
                raise InputError(f"{name} must be >= 1, got {getattr(self, name)}")


@dataclass
class FlexiBERTConfig(LayeredConfig):
    layers: list[FlexiBERTLayerConfig] = field(default_factory=list)
    hidden_size: int = 256
    #: Width of each layer's first FFN dense; ``None`` uses the layer's ``ffn_size``. The
    #: benchmark's training code used 4 x hidden here (see the docs on NAS-Bench-BERT).
    first_ffn_size: int | None = None
    vocab_size: int = 30522
    embedding_size: int = 128
    max_position_embeddings: int = 512
    type_vocab_size: int = 2
    layer_norm_eps: float = 1e-12
    dropout: float = 0.1
    count: str = "all"
    seed: int | None = None

    layer_config: ClassVar[type] = FlexiBERTLayerConfig
    family: ClassVar[str] = "FlexiBERT"


class ElectraEmbeddings(nn.Module):
    def __init__(self, config: FlexiBERTConfig) -> None:
        super().__init__()
        e = config.embedding_size
        self.word = nn.Embedding(config.vocab_size, e)
        self.position = nn.Embedding(config.max_position_embeddings, e)
        self.token_type = nn.Embedding(config.type_vocab_size, e)
        self.norm = nn.LayerNorm(e, eps=config.layer_norm_eps)
        self.dropout = nn.Dropout(config.dropout)
        self.project = nn.Linear(e, config.hidden_size)

    def forward(self, input_ids: torch.Tensor, token_type_ids: torch.Tensor | None) -> torch.Tensor:
        positions = torch.arange(input_ids.shape[1], device=input_ids.device)
        if token_type_ids is None:
            token_type_ids = torch.zeros_like(input_ids)
        x = self.word(input_ids) + self.position(positions)[None] + self.token_type(token_type_ids)
        return self.project(self.dropout(self.norm(x)))


@functools.lru_cache(maxsize=64)
def _dct_basis(n: int, device: str, dtype: torch.dtype) -> torch.Tensor:
    """Orthonormal DCT-II matrix D with D @ x transforming a length-n vector."""
    # Cached across calls, so never an inference tensor: a gradient proxy may reuse the basis that a
    # W-PCA pass (under inference_mode) first created.
    with torch.inference_mode(False):
        k = torch.arange(n, dtype=torch.float64)[:, None]
        i = torch.arange(n, dtype=torch.float64)[None, :]
        basis = torch.cos(math.pi * (2 * i + 1) * k / (2 * n)) * math.sqrt(2.0 / n)
        basis[0] /= math.sqrt(2.0)
        return basis.to(device=device, dtype=dtype)


class LinearTransformMixing(nn.Module):
    def __init__(self, config: FlexiBERTConfig, layer: FlexiBERTLayerConfig) -> None:
        super().__init__()
        h = config.hidden_size
        if h % layer.heads:
            raise InputError(f"hidden size {h} is not divisible by {layer.heads} heads")
        self.heads = layer.heads
        self.kind = layer.parameter
        self.project = nn.Linear(h, h)

    def forward(self, x: torch.Tensor, mask: torch.Tensor | None) -> torch.Tensor:
        b, n, h = x.shape
        z = self.project(x).view(b, n, self.heads, h // self.heads).transpose(1, 2)  # (b, heads, n, d)
        if self.kind == "DFT":
            z = torch.fft.fft2(z.float(), dim=(-2, -1)).real.to(x.dtype)
        else:
            d_basis = _dct_basis(z.shape[-1], str(z.device), z.dtype)
            n_basis = _dct_basis(n, str(z.device), z.dtype)
            z = n_basis @ (z @ d_basis.T)
        return z.transpose(1, 2).reshape(b, n, h)


class AttentionMixing(nn.Module):
    def __init__(self, config: FlexiBERTConfig, layer: FlexiBERTLayerConfig) -> None:
        super().__init__()
        h = config.hidden_size
        self.attention = SelfAttention(h, h, layer.heads, weighted_query=layer.parameter == "WMA")
        self.output = nn.Linear(h, h)
        self.norm = nn.LayerNorm(h, eps=config.layer_norm_eps)
        self.dropout = nn.Dropout(config.dropout)

    def forward(self, x: torch.Tensor, mask: torch.Tensor | None) -> torch.Tensor:
        return self.norm(x + self.dropout(self.output(self.attention(x, mask))))


class ConvolutionMixing(nn.Module):
    """Half self-attention, half span-based dynamic convolution (ConvBERT)."""

    def __init__(self, config: FlexiBERTConfig, layer: FlexiBERTLayerConfig) -> None:
        super().__init__()
        h = config.hidden_size
        half = h // 2
        self.kernel_size = int(layer.parameter)
        self.conv_heads = max(1, layer.heads // 2)
        if half % self.conv_heads:
            raise InputError(f"half width {half} is not divisible by {self.conv_heads} heads")
        self.attention = SelfAttention(h, half, self.conv_heads)
        self.key_depthwise = nn.Conv1d(h, h, self.kernel_size, padding=self.kernel_size // 2, groups=h, bias=False)
        self.key_pointwise = nn.Linear(h, half)
        self.kernel = nn.Linear(half, self.conv_heads * self.kernel_size)
        self.conv_value = nn.Linear(h, half)
        self.output = nn.Linear(h, h)
        self.norm = nn.LayerNorm(h, eps=config.layer_norm_eps)
        self.dropout = nn.Dropout(config.dropout)

    def forward(self, x: torch.Tensor, mask: torch.Tensor | None) -> torch.Tensor:
        b, n, _ = x.shape
        attended = self.attention(x, mask)
        span_key = self.key_pointwise(self.key_depthwise(x.transpose(1, 2)).transpose(1, 2))
        query = self.attention.project_query(x)
        kernels = self.kernel(span_key * query).view(b, n, self.conv_heads, 1, self.kernel_size)
        kernels = F.softmax(kernels, dim=-1)
        value = self.conv_value(x)  # (b, n, half)
        pad = self.kernel_size // 2
        windows = F.pad(value, (0, 0, pad, pad)).unfold(1, self.kernel_size, 1)  # (b, n, half, k)
        windows = windows.reshape(b, n, self.conv_heads, -1, self.kernel_size)
        convolved = (windows * kernels).sum(-1).reshape(b, n, -1)
        mixed = torch.cat([attended, convolved], dim=-1)
        return self.norm(x + self.dropout(self.output(mixed)))


class StackedFFN(nn.Module):
    def __init__(self, config: FlexiBERTConfig, layer: FlexiBERTLayerConfig) -> None:
        super().__init__()
        h = config.hidden_size
        first = config.first_ffn_size or layer.ffn_size
        self.dense_in = nn.Linear(h, first)
        widths = [first] + [layer.ffn_size] * (layer.num_ffn - 1)
        self.stack = nn.ModuleList(nn.Linear(a, b) for a, b in zip(widths[:-1], widths[1:]))
        self.dense_out = nn.Linear(widths[-1], h)
        self.norm = nn.LayerNorm(h, eps=config.layer_norm_eps)
        self.dropout = nn.Dropout(config.dropout)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        z = F.gelu(self.dense_in(x))
        for linear in self.stack:
            z = F.gelu(linear(z))
        return self.norm(x + self.dropout(self.dense_out(z)))


_MIXING = {"SA": AttentionMixing, "LT": LinearTransformMixing, "DSC": ConvolutionMixing}


class FlexiBERTLayer(nn.Module):
    def __init__(self, config: FlexiBERTConfig, layer: FlexiBERTLayerConfig) -> None:
        super().__init__()
        self.mixing = _MIXING[layer.operation](config, layer)
        self.ffn = StackedFFN(config, layer)

    def forward(self, x: torch.Tensor, mask: torch.Tensor | None) -> torch.Tensor:
        return self.ffn(self.mixing(x, mask))


class FlexiBERTModel(CandidateModel):
    """An encoder of NAS-Bench-BERT's space.

    Example:
        >>> layer = {"operation": "SA", "parameter": "SDP", "heads": 2, "ffn_size": 512, "num_ffn": 1}
        >>> model = FlexiBERTModel(FlexiBERTConfig(layers=[layer], hidden_size=128, seed=0))
        >>> model(torch.randint(0, 30522, (2, 16))).shape
        torch.Size([2, 16, 128])
    """

    config_class = FlexiBERTConfig
    model_type = "optuna_wpca_flexibert"

    def __init__(self, config: FlexiBERTConfig, *, device: str | torch.device | None = None) -> None:
        super().__init__()
        self.config = config

        def build() -> None:
            self.embeddings = ElectraEmbeddings(config)
            self.layers = nn.ModuleList(FlexiBERTLayer(config, layer) for layer in config.layers)

        allocate(self, build, config.seed, device)

    def ffn_input_linears(self) -> list[nn.Linear]:
        return [layer.ffn.dense_in for layer in self.layers]

    def ffn_linears(self) -> list[nn.Linear]:
        """Every linear of each layer's FFN stack (``dense_in``, the stack, ``dense_out``)."""
        return [m for layer in self.layers for m in layer.ffn.modules() if isinstance(m, nn.Linear)]
