"""Multi-head self-attention, shared by the BERT, MobileBERT and FlexiBERT blocks."""

from __future__ import annotations

import math

import torch
from torch import nn

from optuna_wpca._errors import InputError


class SelfAttention(nn.Module):
    """Multi-head scaled dot-product self-attention from ``in_size`` to ``width``.

    With ``weighted_query=True`` an extra bias-free ``width x width`` map follows the query
    projection (FlexiBERT's weighted multiplicative attention, WMA). The output projection is
    left to the caller, since the blocks differ in what follows the heads.
    """

    def __init__(self, in_size: int, width: int, num_heads: int, weighted_query: bool = False) -> None:
        super().__init__()
        if width % num_heads:
            raise InputError(f"attention width {width} is not divisible by {num_heads} heads")
        self.num_heads = num_heads
        self.head_dim = width // num_heads
        self.query = nn.Linear(in_size, width)
        self.key = nn.Linear(in_size, width)
        self.value = nn.Linear(in_size, width)
        self.query_weight = nn.Linear(width, width, bias=False) if weighted_query else None
        # Modules, not functions, so that proxies can hook the attention probabilities and the
        # per-head outputs (B, heads, N, head_dim).
        self.probs = nn.Softmax(dim=-1)
        self.head_outputs = nn.Identity()

    def split(self, x: torch.Tensor) -> torch.Tensor:
        """``(batch, tokens, width)`` to ``(batch, heads, tokens, head_dim)``."""
        b, n, _ = x.shape
        return x.view(b, n, self.num_heads, self.head_dim).transpose(1, 2)

    def project_query(self, x: torch.Tensor) -> torch.Tensor:
        """The query projection split into heads."""
        q = self.query(x)
        return self.query_weight(q) if self.query_weight is not None else q

    def forward(self, x: torch.Tensor, mask: torch.Tensor | None) -> torch.Tensor:
        q = self.split(self.project_query(x))
        k, v = self.split(self.key(x)), self.split(self.value(x))
        scores = q @ k.transpose(-1, -2) / math.sqrt(self.head_dim)
        if mask is not None:
            scores = scores + mask
        out = self.head_outputs(self.probs(scores) @ v)
        b, _, n, _ = out.shape
        return out.transpose(1, 2).reshape(b, n, -1)
