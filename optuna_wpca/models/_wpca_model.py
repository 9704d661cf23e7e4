"""Candidates of the W-PCA paper's search space: a stack of BERT and MobileBERT blocks.

Each layer is either a BERT block (attention at full width, post-LayerNorm, GELU FFN) or a
MobileBERT block (a linear bottleneck to ``bottleneck_size``, attention and one ReLU FFN inside
the bottleneck, NoNorm, then back up to the hidden size), each with its own FFN width.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, ClassVar

import torch
import torch.nn.functional as F
from torch import nn

from optuna_wpca._errors import InputError
from optuna_wpca.models._attention import SelfAttention
from optuna_wpca.models._base import CandidateModel, LayeredConfig, NoNorm, allocate

BLOCK_TYPES = ("bert", "mobilebert")


@dataclass(frozen=True)
class WPCALayerConfig:
    """One layer: its block type, FFN width and (ELM's elastic heads) its number of attention heads;
    ``heads=None`` takes the model's ``bert_heads`` / ``mobilebert_heads``."""

    block: str
    ffn_size: int
    heads: int | None = None

    def __post_init__(self) -> None:
        if self.block not in BLOCK_TYPES:
            raise InputError(f"unknown block type {self.block!r}; use one of {BLOCK_TYPES}")
        if int(self.ffn_size) <= 0:
            raise InputError(f"ffn_size must be positive, got {self.ffn_size}")
        if self.heads is not None and int(self.heads) <= 0:
            raise InputError(f"heads must be positive, got {self.heads}")


@dataclass
class WPCAConfig(LayeredConfig):
    layers: list[WPCALayerConfig] = field(default_factory=list)
    hidden_size: int = 528
    bottleneck_size: int = 132
    bert_heads: int = 12
    mobilebert_heads: int = 4
    vocab_size: int = 30522
    embedding_size: int = 128
    max_position_embeddings: int = 512
    type_vocab_size: int = 2
    layer_norm_eps: float = 1e-12
    dropout: float = 0.1
    count: str = "non_embedding"
    seed: int | None = None

    layer_config: ClassVar[type] = WPCALayerConfig
    family: ClassVar[str] = "W-PCA"


class MobileBertEmbeddings(nn.Module):
    """128-d token table, trigram concatenation projected to the hidden size, positions, segments."""

    def __init__(self, config: WPCAConfig) -> None:
        super().__init__()
        self.word = nn.Embedding(config.vocab_size, config.embedding_size)
        self.trigram = nn.Linear(3 * config.embedding_size, config.hidden_size)
        self.position = nn.Embedding(config.max_position_embeddings, config.hidden_size)
        self.token_type = nn.Embedding(config.type_vocab_size, config.hidden_size)
        self.norm = nn.LayerNorm(config.hidden_size, eps=config.layer_norm_eps)
        self.dropout = nn.Dropout(config.dropout)

    def forward(self, input_ids: torch.Tensor, token_type_ids: torch.Tensor | None) -> torch.Tensor:
        e = self.word(input_ids)
        # MobileBERT's trigram input: each token sees its right and left neighbour.
        nxt = F.pad(e[:, 1:], (0, 0, 0, 1))
        prv = F.pad(e[:, :-1], (0, 0, 1, 0))
        x = self.trigram(torch.cat([nxt, e, prv], dim=-1))
        positions = torch.arange(input_ids.shape[1], device=input_ids.device)
        x = x + self.position(positions)[None]
        if token_type_ids is None:
            token_type_ids = torch.zeros_like(input_ids)
        x = x + self.token_type(token_type_ids)
        return self.dropout(self.norm(x))


class BertBlock(nn.Module):
    def __init__(self, config: WPCAConfig, ffn_size: int, heads: int | None = None) -> None:
        super().__init__()
        h = config.hidden_size
        self.attention = SelfAttention(h, h, heads or config.bert_heads)
        self.attention_out = nn.Linear(h, h)
        self.attention_norm = nn.LayerNorm(h, eps=config.layer_norm_eps)
        self.ffn_in = nn.Linear(h, ffn_size)
        self.ffn_out = nn.Linear(ffn_size, h)
        self.ffn_norm = nn.LayerNorm(h, eps=config.layer_norm_eps)
        self.dropout = nn.Dropout(config.dropout)

    def forward(self, x: torch.Tensor, mask: torch.Tensor | None) -> torch.Tensor:
        x = self.attention_norm(x + self.dropout(self.attention_out(self.attention(x, mask))))
        return self.ffn_norm(x + self.dropout(self.ffn_out(F.gelu(self.ffn_in(x)))))


class MobileBertBlock(nn.Module):
    def __init__(self, config: WPCAConfig, ffn_size: int, heads: int | None = None) -> None:
        super().__init__()
        h, b = config.hidden_size, config.bottleneck_size
        self.bottleneck_in = nn.Linear(h, b)
        self.bottleneck_norm = NoNorm(b)
        self.attention = SelfAttention(b, b, heads or config.mobilebert_heads)
        self.attention_out = nn.Linear(b, b)
        self.attention_norm = NoNorm(b)
        self.ffn_in = nn.Linear(b, ffn_size)
        self.ffn_out = nn.Linear(ffn_size, b)
        self.ffn_norm = NoNorm(b)
        self.bottleneck_out = nn.Linear(b, h)
        self.output_norm = NoNorm(h)
        self.dropout = nn.Dropout(config.dropout)

    def forward(self, x: torch.Tensor, mask: torch.Tensor | None) -> torch.Tensor:
        z = self.bottleneck_norm(self.bottleneck_in(x))
        z = self.attention_norm(z + self.attention_out(self.attention(z, mask)))
        z = self.ffn_norm(z + self.ffn_out(F.relu(self.ffn_in(z))))
        return self.output_norm(x + self.dropout(self.bottleneck_out(z)))


class WPCAModel(CandidateModel):
    """An encoder of the W-PCA search space.

    Example:
        >>> cfg = WPCAConfig(layers=[{"block": "bert", "ffn_size": 264}], seed=0)
        >>> model = WPCAModel(cfg)
        >>> model(torch.randint(0, 30522, (2, 16))).shape
        torch.Size([2, 16, 528])
    """

    config_class = WPCAConfig
    model_type = "optuna_wpca_wpca"

    def __init__(self, config: WPCAConfig, *, device: str | torch.device | None = None) -> None:
        super().__init__()
        self.config = config

        def build() -> None:
            self.embeddings = MobileBertEmbeddings(config)
            self.layers = nn.ModuleList(
                (BertBlock if layer.block == "bert" else MobileBertBlock)(config, layer.ffn_size, layer.heads)
                for layer in config.layers
            )

        allocate(self, build, config.seed, device)

    def ffn_input_linears(self) -> list[nn.Linear]:
        return [layer.ffn_in for layer in self.layers]
