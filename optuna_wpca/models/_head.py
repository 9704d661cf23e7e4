"""The sequence-classification head that sits on a candidate encoder, defined once.

BERT's: the first token's hidden state through a dense layer and tanh (the pooler), dropout, then a
linear classifier. Both the student trained by distillation (``optuna_wpca.distill.StudentClassifier``)
and the transformers class that loads a saved student (``AutoModelForSequenceClassification``) use
it, under the same parameter names (``pooler``, ``classifier``), so one checkpoint serves both.
"""

from __future__ import annotations

import torch
from torch import nn


class ClassificationHead:
    """Mixin for an ``nn.Module`` with an encoder: :meth:`add_head` creates the head's modules,
    :meth:`head_logits` runs it on the encoder's hidden states."""

    pooler: nn.Linear
    dropout: nn.Dropout
    classifier: nn.Linear

    def add_head(self, hidden_size: int, num_labels: int, dropout: float = 0.1, *,
                 init: bool = True, generator: torch.Generator | None = None) -> None:
        """The head's modules; ``init`` draws BERT's N(0, 0.02) weights and zero biases with ``generator``."""
        self.pooler = nn.Linear(hidden_size, hidden_size)
        self.dropout = nn.Dropout(dropout)
        self.classifier = nn.Linear(hidden_size, num_labels)
        if init:
            for module in (self.pooler, self.classifier):
                init_head_module(module, generator)

    def head_logits(self, hidden: torch.Tensor) -> torch.Tensor:
        """Logits (batch, num_labels) from hidden states (batch, tokens, hidden)."""
        return self.classifier(self.dropout(torch.tanh(self.pooler(hidden[:, 0]))))


def init_head_module(module: nn.Linear, generator: torch.Generator | None = None) -> None:
    """BERT's initialisation of a head layer: N(0, 0.02) weights, zero bias."""
    nn.init.normal_(module.weight, std=0.02, generator=generator)
    nn.init.zeros_(module.bias)
