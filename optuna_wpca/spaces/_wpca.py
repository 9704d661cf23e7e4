"""The W-PCA paper's search space (section 6.2.1)."""

from __future__ import annotations

from typing import Any, Mapping, Sequence

from optuna.distributions import BaseDistribution

from optuna_wpca._errors import InputError
from optuna_wpca.models import WPCAConfig, WPCALayerConfig, WPCAModel
from optuna_wpca.models._wpca_model import BLOCK_TYPES
from optuna_wpca.spaces._base import MAX_LAYERS, Architecture, SearchSpace, layer_name, size, sizes


class WPCASpace(SearchSpace):
    """``num_layers`` layers at ``hidden_size``; each picks a BERT or MobileBERT block and an FFN
    width ``ffn_unit * k`` for k in ``ffn_mults``.

    Parameter counts default to the ``"non_embedding"`` convention (encoder layers only): a
    30522 x 528 embedding table alone is 16.1M, so the paper's W-PCA-Small budget of 15.7M only
    admits its models when embeddings are left out (its searched model comes to 15.5M that way).
    Pass ``count="all"`` to count every parameter of the built model.

    Example:
        >>> space = WPCASpace.tiny()
        >>> arch = space.sample(0)
        >>> space.from_params(space.to_params(arch)) == arch
        True
    """

    kind = "wpca"
    model_class = WPCAModel
    block_kinds = {"bert": ("BERT block", "#4C72B0"), "mobilebert": ("MobileBERT block", "#DD8452")}

    def block_kind(self, layer: Any) -> str:
        return layer.block

    def __init__(
        self,
        num_layers: int = 12,
        hidden_size: int = 528,
        *,
        blocks: Sequence[str] = BLOCK_TYPES,
        ffn_unit: int | None = None,
        ffn_mults: Sequence[int] = (1, 2, 3, 4, 5, 6),
        bottleneck_size: int | None = None,
        bert_heads: int = 12,
        mobilebert_heads: int = 4,
        vocab_size: int = 30522,
        embedding_size: int = 128,
        max_position_embeddings: int = 512,
        count: str = "non_embedding",
        integer_genes: bool = True,
    ) -> None:
        super().__init__(count=count, integer_genes=integer_genes)
        self.num_layers = size("num_layers", num_layers, maximum=MAX_LAYERS)
        self.hidden_size = size("hidden_size", hidden_size, minimum=4)
        blocks = tuple(blocks)
        if not blocks or any(b not in BLOCK_TYPES for b in blocks):
            raise InputError(f"blocks must be a non-empty subset of {BLOCK_TYPES}, got {blocks}")
        self.blocks = blocks
        self.ffn_mults = sizes("ffn_mults", ffn_mults)
        self.ffn_unit = size("ffn_unit", ffn_unit if ffn_unit is not None else self.hidden_size // 4)
        self.bottleneck_size = size("bottleneck_size",
                                    bottleneck_size if bottleneck_size is not None else self.hidden_size // 4)
        self.bert_heads = size("bert_heads", bert_heads)
        self.mobilebert_heads = size("mobilebert_heads", mobilebert_heads)
        if "bert" in blocks and self.hidden_size % self.bert_heads:
            raise InputError(f"hidden_size {hidden_size} is not divisible by bert_heads={bert_heads}")
        if "mobilebert" in blocks and self.bottleneck_size % self.mobilebert_heads:
            raise InputError(
                f"bottleneck_size {self.bottleneck_size} is not divisible by mobilebert_heads={mobilebert_heads}"
            )
        self.vocab_size = size("vocab_size", vocab_size)
        self.embedding_size = size("embedding_size", embedding_size)
        self.max_position_embeddings = size("max_position_embeddings", max_position_embeddings)

    @classmethod
    def small(cls, **kwargs: Any) -> "WPCASpace":
        """W-PCA-Small: 12 layers at hidden 528 (the paper's budget is 15.7M parameters)."""
        return cls(num_layers=12, **kwargs)

    @classmethod
    def tiny(cls, **kwargs: Any) -> "WPCASpace":
        """W-PCA-Tiny: 6 layers at hidden 528 (the paper's budget is 10M parameters)."""
        return cls(num_layers=6, **kwargs)

    def config(self) -> dict[str, Any]:
        return {
            "num_layers": self.num_layers,
            "hidden_size": self.hidden_size,
            "blocks": list(self.blocks),
            "ffn_unit": self.ffn_unit,
            "ffn_mults": list(self.ffn_mults),
            "bottleneck_size": self.bottleneck_size,
            "bert_heads": self.bert_heads,
            "mobilebert_heads": self.mobilebert_heads,
            "vocab_size": self.vocab_size,
            "embedding_size": self.embedding_size,
            "max_position_embeddings": self.max_position_embeddings,
            "count": self.count,
            **self._genes_config(),
        }

    def distributions(self) -> dict[str, BaseDistribution]:
        out: dict[str, BaseDistribution] = {}
        for i in range(self.num_layers):
            out[layer_name(i, "block")] = self.gene(self.blocks)
            out[layer_name(i, "ffn_mult")] = self.gene(self.ffn_mults)
        return out

    def from_params(self, params: Mapping[str, Any]) -> Architecture:
        self._check_params(params, list(self._gene_distributions()))
        layers = tuple(
            WPCALayerConfig(
                block=params[layer_name(i, "block")],
                ffn_size=self.ffn_unit * int(params[layer_name(i, "ffn_mult")]),
            )
            for i in range(self.num_layers)
        )
        return Architecture(self.hidden_size, layers)

    def to_params(self, arch: Architecture) -> dict[str, Any]:
        self._check_arch(arch)
        params: dict[str, Any] = {}
        for i, layer in enumerate(arch.layers):
            params[layer_name(i, "block")] = layer.block
            params[layer_name(i, "ffn_mult")] = layer.ffn_size // self.ffn_unit
        return params

    def _check_arch(self, arch: Architecture) -> None:
        if arch.hidden_size != self.hidden_size or arch.num_layers != self.num_layers:
            raise InputError(
                f"architecture has {arch.num_layers} layers at hidden {arch.hidden_size}; this space has "
                f"{self.num_layers} at {self.hidden_size}"
            )
        for i, layer in enumerate(arch.layers):
            if not isinstance(layer, WPCALayerConfig):
                raise InputError(f"layer {i} is a {type(layer).__name__}, not a WPCALayerConfig")
            k, rest = divmod(layer.ffn_size, self.ffn_unit)
            if rest or k not in self.ffn_mults or layer.block not in self.blocks:
                raise InputError(f"layer {i} ({layer}) is outside this space")

    def model_config(self, arch: Architecture, seed: int | None = 0) -> WPCAConfig:
        """The ``WPCAConfig`` that builds ``arch``."""
        self._check_arch(arch)
        return WPCAConfig(
            layers=list(arch.layers),
            hidden_size=self.hidden_size,
            bottleneck_size=self.bottleneck_size,
            bert_heads=self.bert_heads,
            mobilebert_heads=self.mobilebert_heads,
            vocab_size=self.vocab_size,
            embedding_size=self.embedding_size,
            max_position_embeddings=self.max_position_embeddings,
            count=self.count,
            seed=seed,
        )

    # -- analytic parameter count ---------------------------------------------------------------

    def _layer_params(self, layer: WPCALayerConfig) -> int:
        h, f = self.hidden_size, layer.ffn_size
        if layer.block == "bert":
            attention = 4 * (h * h + h)
            ffn = (h * f + f) + (f * h + h)
            return attention + ffn + 2 * (2 * h)  # two LayerNorms
        b = self.bottleneck_size
        bottleneck = (h * b + b) + (b * h + h)
        attention = 4 * (b * b + b)
        ffn = (b * f + f) + (f * b + b)
        return bottleneck + attention + ffn + 3 * (2 * b) + 2 * h  # three NoNorms inside, one outside

    def _embedding_params(self) -> int:
        h, e = self.hidden_size, self.embedding_size
        return self.vocab_size * e + (3 * e * h + h) + self.max_position_embeddings * h + 2 * h + 2 * h

    def num_params(self, arch: Architecture, count: str | None = None) -> int:
        count = count or self.count
        self._check_arch(arch)
        total = sum(self._layer_params(layer) for layer in arch.layers)
        if count == "all":
            total += self._embedding_params()
        return total

    def widest_ffn(self) -> int:
        """The widest FFN any candidate has."""
        return self.ffn_unit * max(self.ffn_mults)

    def _smallest_candidates(self) -> list[Architecture]:
        return self._uniform_extremes(min)

    def _largest_candidates(self) -> list[Architecture]:
        return self._uniform_extremes(max)

    def _uniform_extremes(self, pick) -> list[Architecture]:
        """Every layer the block and width that ``pick`` (``min`` or ``max``) finds by parameter count."""
        per_layer = pick(
            (WPCALayerConfig(b, self.ffn_unit * k) for b in self.blocks for k in self.ffn_mults),
            key=self._layer_params,
        )
        return [Architecture(self.hidden_size, (per_layer,) * self.num_layers)]

    def describe(self, arch: Architecture) -> list[str]:
        return [f"{layer.block:<10} ffn {layer.ffn_size}" for layer in arch.layers]

    def summary(self, arch: Architecture) -> str:
        """One token per layer: B (BERT block) or M (MobileBERT block) and the FFN width.

        Example:
            >>> space = WPCASpace.tiny()
            >>> space.summary(space.from_params({**{f"layer_{i:02d}_block": "bert" for i in range(6)},
            ...                                  **{f"layer_{i:02d}_ffn_mult": 2 for i in range(6)}}))
            'B264 B264 B264 B264 B264 B264'
        """
        return " ".join(f"{'B' if layer.block == 'bert' else 'M'}{layer.ffn_size}" for layer in arch.layers)
