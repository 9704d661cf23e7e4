"""ELM's elastic space (arXiv 2510.27037): the W-PCA space with a number of attention heads per layer."""

from __future__ import annotations

from typing import Any, Mapping, Sequence

from optuna.distributions import BaseDistribution

from optuna_wpca._errors import InputError
from optuna_wpca.models import WPCALayerConfig
from optuna_wpca.spaces._base import Architecture, layer_name, sizes
from optuna_wpca.spaces._wpca import WPCASpace


class ELMSpace(WPCASpace):
    """Each layer picks a BERT or MobileBERT block, an FFN width ``ffn_unit * k`` and a number of
    heads. The attention width stays fixed (``hidden_size`` in a BERT block, ``bottleneck_size`` in
    a MobileBERT one) and the head dim is width / heads, so every choice must divide the width; the
    parameter count does not depend on the heads.

    A layer has two head genes, ``layer_NN_bert_heads`` and ``layer_NN_mobilebert_heads``: the one
    of its block type is used, so that the genetic algorithm can keep them independent of the block
    gene (the other one is inert). Defaults: BERT blocks 2-12 heads of 528 (head dims 264-44),
    MobileBERT blocks 1-4 heads of 132, the author's code's 12 and 4 being the largest.

    Example:
        >>> space = ELMSpace.tiny()
        >>> arch = space.sample(0)
        >>> space.from_params(space.to_params(arch)) == arch
        True
        >>> space.num_params(arch) == space.build(arch).num_parameters()
        True
    """

    kind = "elm"

    def __init__(
        self,
        num_layers: int = 12,
        hidden_size: int = 528,
        *,
        bert_head_choices: Sequence[int] = (2, 3, 4, 6, 8, 12),
        mobilebert_head_choices: Sequence[int] = (1, 2, 3, 4),
        **kwargs: Any,
    ) -> None:
        bert_head_choices = sizes("bert_head_choices", bert_head_choices)
        mobilebert_head_choices = sizes("mobilebert_head_choices", mobilebert_head_choices)
        bottleneck = kwargs.get("bottleneck_size") or hidden_size // 4
        for name, choices, width in (("bert_head_choices", bert_head_choices, hidden_size),
                                     ("mobilebert_head_choices", mobilebert_head_choices, bottleneck)):
            bad = [h for h in choices if isinstance(width, int) and width > 0 and width % h]
            if bad:
                raise InputError(f"{name} {bad} do not divide the attention width {width}")
        kwargs.setdefault("bert_heads", max(bert_head_choices))
        kwargs.setdefault("mobilebert_heads", max(mobilebert_head_choices))
        super().__init__(num_layers, hidden_size, **kwargs)
        self.bert_head_choices = bert_head_choices
        self.mobilebert_head_choices = mobilebert_head_choices

    def config(self) -> dict[str, Any]:
        return {**super().config(), "bert_head_choices": list(self.bert_head_choices),
                "mobilebert_head_choices": list(self.mobilebert_head_choices)}

    def _head_choices(self, block: str) -> tuple[int, ...]:
        return self.bert_head_choices if block == "bert" else self.mobilebert_head_choices

    def distributions(self) -> dict[str, BaseDistribution]:
        out = super().distributions()
        for i in range(self.num_layers):
            out[layer_name(i, "bert_heads")] = self.gene(self.bert_head_choices)
            out[layer_name(i, "mobilebert_heads")] = self.gene(self.mobilebert_head_choices)
        return out

    def from_params(self, params: Mapping[str, Any]) -> Architecture:
        self._check_params(params, list(self._gene_distributions()))
        layers = []
        for i in range(self.num_layers):
            block = params[layer_name(i, "block")]
            layers.append(WPCALayerConfig(block, self.ffn_unit * int(params[layer_name(i, "ffn_mult")]),
                                          int(params[layer_name(i, f"{block}_heads")])))
        return Architecture(self.hidden_size, tuple(layers))

    def to_params(self, arch: Architecture) -> dict[str, Any]:
        params = super().to_params(arch)
        for i, layer in enumerate(arch.layers):
            params[layer_name(i, "bert_heads")] = layer.heads if layer.block == "bert" else self.bert_heads
            params[layer_name(i, "mobilebert_heads")] = (
                layer.heads if layer.block == "mobilebert" else self.mobilebert_heads)
        return params

    def _check_arch(self, arch: Architecture) -> None:
        super()._check_arch(arch)
        for i, layer in enumerate(arch.layers):
            if layer.heads not in self._head_choices(layer.block):
                raise InputError(f"layer {i} ({layer}) has a head count outside this space")

    def _uniform_extremes(self, pick) -> list[Architecture]:
        # The parameter count does not depend on the heads: any valid count will do (the most).
        return [Architecture(self.hidden_size, tuple(
            WPCALayerConfig(layer.block, layer.ffn_size, max(self._head_choices(layer.block))) for layer in a.layers))
            for a in super()._uniform_extremes(pick)]

    def describe(self, arch: Architecture) -> list[str]:
        return [f"{layer.block:<10} ffn {layer.ffn_size:<4} heads {layer.heads}" for layer in arch.layers]

    def summary(self, arch: Architecture) -> str:
        """One token per layer: B/M (block), the FFN width and the heads, e.g. ``B528h6``."""
        return " ".join(f"{'B' if layer.block == 'bert' else 'M'}{layer.ffn_size}h{layer.heads}" for layer in arch.layers)
