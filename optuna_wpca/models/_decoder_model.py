"""GPT-2/OPT-style causal decoders (the W-PCA paper's Appendix I, LiteTransformerSearch's space).

Token and learned position embeddings, then pre-LayerNorm blocks (causal self-attention, GELU
FFN), a final LayerNorm. Each layer has its own head count and FFN width; the model width is
shared. The LM head is tied to the token embedding, so it adds no parameters.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, ClassVar

import torch
import torch.nn.functional as F
from torch import nn

from optuna_wpca._errors import InputError
from optuna_wpca.models._attention import SelfAttention
from optuna_wpca.models._base import CandidateModel, LayeredConfig, additive_mask, allocate, check_count_convention


@dataclass(frozen=True)
class DecoderLayerConfig:
    heads: int
    ffn_size: int

    def __post_init__(self) -> None:
        if int(self.heads) < 1 or int(self.ffn_size) < 1:
            raise InputError(f"heads and ffn_size must be >= 1, got {self.heads}, {self.ffn_size}")


@dataclass
class DecoderConfig(LayeredConfig):
    layers: list[DecoderLayerConfig] = field(default_factory=list)
    hidden_size: int = 512
    vocab_size: int = 30522
    max_position_embeddings: int = 512
    layer_norm_eps: float = 1e-5
    dropout: float = 0.1
    count: str = "non_embedding"
    seed: int | None = None

    layer_config: ClassVar[type] = DecoderLayerConfig
    family: ClassVar[str] = "decoder"


class DecoderEmbeddings(nn.Module):
    def __init__(self, config: DecoderConfig) -> None:
        super().__init__()
        self.word = nn.Embedding(config.vocab_size, config.hidden_size)
        self.position = nn.Embedding(config.max_position_embeddings, config.hidden_size)
        self.dropout = nn.Dropout(config.dropout)

    def forward(self, input_ids: torch.Tensor, token_type_ids: torch.Tensor | None = None) -> torch.Tensor:
        positions = torch.arange(input_ids.shape[1], device=input_ids.device)
        return self.dropout(self.word(input_ids) + self.position(positions)[None])


class DecoderBlock(nn.Module):
    def __init__(self, config: DecoderConfig, layer: DecoderLayerConfig) -> None:
        super().__init__()
        h = config.hidden_size
        self.attention_norm = nn.LayerNorm(h, eps=config.layer_norm_eps)
        self.attention = SelfAttention(h, h, layer.heads)
        self.attention_out = nn.Linear(h, h)
        self.ffn_norm = nn.LayerNorm(h, eps=config.layer_norm_eps)
        self.ffn_in = nn.Linear(h, layer.ffn_size)
        self.ffn_out = nn.Linear(layer.ffn_size, h)
        self.dropout = nn.Dropout(config.dropout)

    def forward(self, x: torch.Tensor, mask: torch.Tensor | None) -> torch.Tensor:
        x = x + self.dropout(self.attention_out(self.attention(self.attention_norm(x), mask)))
        return x + self.dropout(self.ffn_out(F.gelu(self.ffn_in(self.ffn_norm(x)))))


class DecoderModel(CandidateModel):
    """A causal decoder candidate.

    Example:
        >>> model = DecoderModel(DecoderConfig(layers=[{"heads": 2, "ffn_size": 256}], hidden_size=128, seed=0))
        >>> model(torch.randint(0, 30522, (2, 16))).shape
        torch.Size([2, 16, 128])
    """

    config_class = DecoderConfig
    model_type = "optuna_wpca_decoder"
    classifiable = False
    is_causal = True

    def __init__(self, config: DecoderConfig, *, device: str | torch.device | None = None) -> None:
        super().__init__()
        self.config = config

        def build() -> None:
            self.embeddings = DecoderEmbeddings(config)
            self.layers = nn.ModuleList(DecoderBlock(config, layer) for layer in config.layers)
            self.final_norm = nn.LayerNorm(config.hidden_size, eps=config.layer_norm_eps)

        allocate(self, build, config.seed, device)

    def ffn_input_linears(self) -> list[nn.Linear]:
        return [layer.ffn_in for layer in self.layers]

    def encode(self, x: torch.Tensor, attention_mask: torch.Tensor | None) -> torch.Tensor:
        n = x.shape[1]
        causal = torch.full((n, n), torch.finfo(x.dtype).min, device=x.device, dtype=x.dtype).triu(1)[None, None]
        padding = additive_mask(attention_mask, x.dtype)
        mask = causal if padding is None else causal + padding
        for layer in self.layers:
            x = layer(x, mask)
        return self.final_norm(x)

    def logits(self, hidden: torch.Tensor) -> torch.Tensor:
        """Next-token logits through the tied embedding."""
        return hidden @ self.embeddings.word.weight.T

    def num_parameters(self, count: str | None = None) -> int:  # type: ignore[override]
        """Parameters under ``count``; ``non_embedding`` leaves out the token and position tables
        (LiteTransformerSearch's convention)."""
        count = check_count_convention(count or self.config.count)
        if count == "all":
            return sum(p.numel() for p in self.parameters())
        # Non-embedding: everything but the token and position tables (LiteTransformerSearch's proxy).
        return sum(p.numel() for p in self.parameters()) - sum(p.numel() for p in self.embeddings.parameters())
