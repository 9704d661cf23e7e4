"""A GPT-2-style decoder space (LiteTransformerSearch; the W-PCA paper's Appendix I)."""

from __future__ import annotations

from typing import Any, Mapping, Sequence

from optuna.distributions import BaseDistribution

from optuna_wpca._errors import InputError
from optuna_wpca.models import DecoderConfig, DecoderLayerConfig, DecoderModel
from optuna_wpca.spaces._base import MAX_LAYERS, Architecture, SearchSpace, layer_name, size, sizes


class DecoderSpace(SearchSpace):
    """Depth, a shared model width, and per layer a head count and an FFN width.

    Defaults follow LiteTransformerSearch's GPT-2 space: 3-10 layers, width 128-960 in steps of
    64, 2/4/8 heads and FFN 128-4032 in steps of 64 per layer. Layers beyond ``num_layers`` are
    inactive genes (a fixed-length genome). Parameters count ``"non_embedding"`` by default:
    LiteTransformerSearch's proxy is exactly that number.

    Example:
        >>> space = DecoderSpace(num_layers_choices=(2, 3), hidden_sizes=(128, 256), ffn_sizes=(256, 512))
        >>> arch = space.sample(0)
        >>> space.num_params(arch) == space.build(arch).num_parameters()
        True
    """

    kind = "decoder"
    model_class = DecoderModel
    family = "decoder"
    block_kinds = {"decoder": ("decoder block", "#8172B3")}

    def __init__(
        self,
        *,
        num_layers_choices: Sequence[int] = tuple(range(3, 11)),
        hidden_sizes: Sequence[int] = tuple(range(128, 961, 64)),
        heads: Sequence[int] = (2, 4, 8),
        ffn_sizes: Sequence[int] = tuple(range(128, 4033, 64)),
        vocab_size: int = 30522,
        max_position_embeddings: int = 512,
        count: str = "non_embedding",
        integer_genes: bool = True,
    ) -> None:
        super().__init__(count=count, integer_genes=integer_genes)
        self.num_layers_choices = sizes("num_layers_choices", num_layers_choices, maximum=MAX_LAYERS)
        self.hidden_sizes = sizes("hidden_sizes", hidden_sizes)
        self.heads = sizes("heads", heads)
        self.ffn_sizes = sizes("ffn_sizes", ffn_sizes)
        for h in self.hidden_sizes:
            for n in self.heads:
                if h % n:
                    raise InputError(f"hidden size {h} is not divisible by {n} heads")
        self.vocab_size = size("vocab_size", vocab_size)
        self.max_position_embeddings = size("max_position_embeddings", max_position_embeddings)

    @classmethod
    def small(cls, **kwargs: Any) -> "DecoderSpace":
        """A CPU-sized preset: 2-6 layers, width 128-512, FFN 256-2048."""
        defaults = dict(num_layers_choices=range(2, 7), hidden_sizes=range(128, 513, 64),
                        ffn_sizes=range(256, 2049, 128))
        return cls(**{**defaults, **kwargs})

    @classmethod
    def lts_gpt2(cls, **kwargs: Any) -> "DecoderSpace":
        """The space of LiteTransformerSearch's 200 trained GPT-2 decoders (``lts-gpt2-wt103``).

        2-16 layers, width 64/128/256/512, per layer 2/4/8 heads and any FFN width 512-2048: the
        configurations the LTS authors saved with their trained models, which span more than the
        paper's text (3-10 layers, width 128-960). Non-embedding parameters equal the authors'
        ``params.nonembedding`` (tested on all 200).
        """
        defaults = dict(num_layers_choices=range(2, 17), hidden_sizes=(64, 128, 256, 512),
                        heads=(2, 4, 8), ffn_sizes=range(512, 2049))
        return cls(**{**defaults, **kwargs})

    def from_lts_config(self, config: Mapping[str, Any]) -> Architecture:
        """The architecture of a LiteTransformerSearch ``model_config`` (``n_layer``, ``d_model``,
        per-layer ``d_inner`` and ``n_head``; a single number applies to every layer).

        The adaptive input embedding (``d_embed``, ``div_val``) is not part of the decoder layers and
        is left out: candidates here embed with a plain table of width ``d_model``.
        """
        try:
            n = int(config["n_layer"])
            width = int(config["d_model"])
            inner, heads = config["d_inner"], config["n_head"]
        except (KeyError, TypeError, ValueError) as err:
            raise InputError(f"LiteTransformerSearch config needs integer n_layer, d_model, d_inner, n_head: {err}") from None
        inner = list(inner) if isinstance(inner, (list, tuple)) else [inner] * n
        heads = list(heads) if isinstance(heads, (list, tuple)) else [heads] * n
        if len(inner) != n or len(heads) != n:
            raise InputError(f"n_layer is {n} but d_inner has {len(inner)} and n_head {len(heads)} entries")
        if config.get("d_head", -1) not in (-1, None) and any(width != int(config["d_head"]) * int(h) for h in heads):
            raise InputError(f"d_head {config['d_head']} x n_head must equal d_model {width}")
        arch = Architecture(width, tuple(DecoderLayerConfig(int(h), int(f)) for h, f in zip(heads, inner)))
        self._check_arch(arch)
        return arch

    @property
    def max_layers(self) -> int:
        """The deepest candidate's number of layers (genes exist for all of them)."""
        return max(self.num_layers_choices)

    def config(self) -> dict[str, Any]:
        return {
            "num_layers_choices": list(self.num_layers_choices),
            "hidden_sizes": list(self.hidden_sizes),
            "heads": list(self.heads),
            "ffn_sizes": list(self.ffn_sizes),
            "vocab_size": self.vocab_size,
            "max_position_embeddings": self.max_position_embeddings,
            "count": self.count,
            **self._genes_config(),
        }

    def distributions(self) -> dict[str, BaseDistribution]:
        out = {
            "num_layers": self.gene(self.num_layers_choices),
            "hidden_size": self.gene(self.hidden_sizes),
        }
        for i in range(self.max_layers):
            out[layer_name(i, "heads")] = self.gene(self.heads)
            out[layer_name(i, "ffn_size")] = self.gene(self.ffn_sizes)
        return out

    def from_params(self, params: Mapping[str, Any]) -> Architecture:
        self._check_params(params, ["num_layers", "hidden_size"])
        n = int(params["num_layers"])
        genes = [layer_name(i, g) for i in range(n) for g in ("heads", "ffn_size")]
        self._check_params(params, genes)
        layers = tuple(
            DecoderLayerConfig(int(params[layer_name(i, "heads")]), int(params[layer_name(i, "ffn_size")]))
            for i in range(n)
        )
        return Architecture(int(params["hidden_size"]), layers)

    def to_params(self, arch: Architecture) -> dict[str, Any]:
        self._check_arch(arch)
        params: dict[str, Any] = {"num_layers": arch.num_layers, "hidden_size": arch.hidden_size}
        for i in range(self.max_layers):
            layer = arch.layers[i] if i < arch.num_layers else None
            params[layer_name(i, "heads")] = layer.heads if layer else self.heads[0]
            params[layer_name(i, "ffn_size")] = layer.ffn_size if layer else self.ffn_sizes[0]
        return params

    def _check_arch(self, arch: Architecture) -> None:
        if arch.num_layers not in self.num_layers_choices or arch.hidden_size not in self.hidden_sizes:
            raise InputError(f"decoder with {arch.num_layers} layers at width {arch.hidden_size} is outside this space")
        for i, layer in enumerate(arch.layers):
            if not isinstance(layer, DecoderLayerConfig) or layer.heads not in self.heads or (
                layer.ffn_size not in self.ffn_sizes
            ):
                raise InputError(f"layer {i} ({layer}) is outside this space")

    def model_config(self, arch: Architecture, seed: int | None = 0) -> DecoderConfig:
        """The ``DecoderConfig`` that builds ``arch``."""
        self._check_arch(arch)
        return DecoderConfig(
            layers=list(arch.layers),
            hidden_size=arch.hidden_size,
            vocab_size=self.vocab_size,
            max_position_embeddings=self.max_position_embeddings,
            count=self.count,
            seed=seed,
        )

    def num_params(self, arch: Architecture, count: str | None = None) -> int:
        count = count or self.count
        self._check_arch(arch)
        h = arch.hidden_size
        total = sum(4 * h + 4 * (h * h + h) + (h * f.ffn_size + f.ffn_size) + (f.ffn_size * h + h) for f in arch.layers)
        total += 2 * h  # final LayerNorm
        if count == "all":
            total += (self.vocab_size + self.max_position_embeddings) * h
        return total

    def widest_ffn(self) -> int:
        """The widest FFN any candidate has."""
        return max(self.ffn_sizes)

    def _smallest_candidates(self) -> list[Architecture]:
        n, h = min(self.num_layers_choices), min(self.hidden_sizes)
        return [Architecture(h, (DecoderLayerConfig(self.heads[0], min(self.ffn_sizes)),) * n)]

    def _largest_candidates(self) -> list[Architecture]:
        n, h = max(self.num_layers_choices), max(self.hidden_sizes)
        return [Architecture(h, (DecoderLayerConfig(self.heads[0], max(self.ffn_sizes)),) * n)]

    def describe(self, arch: Architecture) -> list[str]:
        return [f"width {arch.hidden_size} heads {layer.heads} ffn {layer.ffn_size}" for layer in arch.layers]
