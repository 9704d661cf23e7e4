"""NAS-Bench-BERT's FlexiBERT-style space (Serianni & Kalita, ACL 2023)."""

from __future__ import annotations

import itertools
from typing import Any, Mapping, Sequence

from optuna.distributions import BaseDistribution

from optuna_wpca._errors import InputError
from optuna_wpca.models import FlexiBERTConfig, FlexiBERTLayerConfig, FlexiBERTModel
from optuna_wpca.spaces._base import MAX_LAYERS, Architecture, SearchSpace, layer_name, size, sizes

#: The space of ``search_space.json`` in NAS-Bench-BERT.
OPERATION_CHOICES = ("SA:SDP", "SA:WMA", "LT:DFT", "LT:DCT", "DSC:5", "DSC:9")


def _split_operation(choice: str) -> tuple[str, str | int]:
    op, param = choice.split(":")
    return op, int(param) if op == "DSC" else param


class FlexiBERTSpace(SearchSpace):
    """Hidden size, depth, and per layer an operation, heads, FFN width and FFN stack depth.

    The genome always holds ``max(num_layers_choices)`` layers; layers past ``num_layers`` are
    inactive, so every trial carries the same parameters (as NSGA-II requires).

    ``as_trained=True`` builds what NAS-Bench-BERT's training code actually trained: its
    operation switch never matched, so every layer is scaled dot-product attention, and its first
    FFN dense is 4 x hidden wide whatever the entry says. The default builds the stated
    architecture.

    Example:
        >>> space = FlexiBERTSpace()
        >>> arch = space.sample(1)
        >>> space.num_params(arch) == sum(p.numel() for p in space.build(arch).parameters())
        True
    """

    kind = "flexibert"
    model_class = FlexiBERTModel
    block_kinds = {"SA": ("self-attention", "#4C72B0"), "LT": ("linear transform", "#55A868"),
                   "DSC": ("convolution", "#C44E52")}

    def block_kind(self, layer: Any) -> str:
        return layer.operation

    def __init__(
        self,
        *,
        hidden_sizes: Sequence[int] = (128, 256),
        num_layers_choices: Sequence[int] = (2, 4),
        operations: Sequence[str] = OPERATION_CHOICES,
        heads: Sequence[int] = (2, 4),
        ffn_sizes: Sequence[int] = (512, 1024),
        num_ffn_choices: Sequence[int] = (1, 3),
        as_trained: bool = False,
        vocab_size: int = 30522,
        embedding_size: int = 128,
        max_position_embeddings: int = 512,
        count: str = "all",
        integer_genes: bool = True,
    ) -> None:
        super().__init__(count=count, integer_genes=integer_genes)
        self.hidden_sizes = sizes("hidden_sizes", hidden_sizes)
        self.num_layers_choices = sizes("num_layers_choices", num_layers_choices, maximum=MAX_LAYERS)
        self.operations = tuple(operations)
        self.heads = sizes("heads", heads)
        self.ffn_sizes = sizes("ffn_sizes", ffn_sizes)
        self.num_ffn_choices = sizes("num_ffn_choices", num_ffn_choices)
        for name in ("hidden_sizes", "num_layers_choices", "operations", "heads", "ffn_sizes", "num_ffn_choices"):
            if not getattr(self, name):
                raise InputError(f"{name} must not be empty")
        bad = [op for op in self.operations if op not in OPERATION_CHOICES]
        if bad:
            raise InputError(f"unknown operations {bad}; use values of {OPERATION_CHOICES}")
        for h, n in itertools.product(self.hidden_sizes, self.heads):
            if h % n or (h // 2) % max(1, n // 2):
                raise InputError(f"hidden size {h} is not divisible by {n} heads")
        self.as_trained = bool(as_trained)
        self.vocab_size = size("vocab_size", vocab_size)
        self.embedding_size = size("embedding_size", embedding_size)
        self.max_position_embeddings = size("max_position_embeddings", max_position_embeddings)

    @property
    def max_layers(self) -> int:
        """The deepest candidate's number of layers (genes exist for all of them)."""
        return max(self.num_layers_choices)

    def config(self) -> dict[str, Any]:
        return {
            "hidden_sizes": list(self.hidden_sizes),
            "num_layers_choices": list(self.num_layers_choices),
            "operations": list(self.operations),
            "heads": list(self.heads),
            "ffn_sizes": list(self.ffn_sizes),
            "num_ffn_choices": list(self.num_ffn_choices),
            "as_trained": self.as_trained,
            "vocab_size": self.vocab_size,
            "embedding_size": self.embedding_size,
            "max_position_embeddings": self.max_position_embeddings,
            "count": self.count,
            **self._genes_config(),
        }

    def distributions(self) -> dict[str, BaseDistribution]:
        out = {
            "hidden_size": self.gene(self.hidden_sizes),
            "num_layers": self.gene(self.num_layers_choices),
        }
        for i in range(self.max_layers):
            out[layer_name(i, "operation")] = self.gene(self.operations)
            out[layer_name(i, "heads")] = self.gene(self.heads)
            out[layer_name(i, "ffn_size")] = self.gene(self.ffn_sizes)
            out[layer_name(i, "num_ffn")] = self.gene(self.num_ffn_choices)
        return out

    def _layer_genes(self, i: int) -> list[str]:
        return [layer_name(i, g) for g in ("operation", "heads", "ffn_size", "num_ffn")]

    def from_params(self, params: Mapping[str, Any]) -> Architecture:
        self._check_params(params, ["hidden_size", "num_layers"])
        n = int(params["num_layers"])
        self._check_params(params, [g for i in range(n) for g in self._layer_genes(i)])
        layers = []
        for i in range(n):
            op, param = _split_operation(params[layer_name(i, "operation")])
            layers.append(
                FlexiBERTLayerConfig(
                    operation=op,
                    parameter=param,
                    heads=int(params[layer_name(i, "heads")]),
                    ffn_size=int(params[layer_name(i, "ffn_size")]),
                    num_ffn=int(params[layer_name(i, "num_ffn")]),
                )
            )
        return Architecture(int(params["hidden_size"]), tuple(layers))

    def to_params(self, arch: Architecture) -> dict[str, Any]:
        self._check_arch(arch)
        params: dict[str, Any] = {"hidden_size": arch.hidden_size, "num_layers": arch.num_layers}
        for i in range(self.max_layers):
            # Inactive layers take the first choice so the genome keeps a fixed length.
            layer = arch.layers[i] if i < arch.num_layers else None
            params[layer_name(i, "operation")] = (
                f"{layer.operation}:{layer.parameter}" if layer else self.operations[0]
            )
            params[layer_name(i, "heads")] = layer.heads if layer else self.heads[0]
            params[layer_name(i, "ffn_size")] = layer.ffn_size if layer else self.ffn_sizes[0]
            params[layer_name(i, "num_ffn")] = layer.num_ffn if layer else self.num_ffn_choices[0]
        return params

    def _check_arch(self, arch: Architecture) -> None:
        if arch.hidden_size not in self.hidden_sizes or arch.num_layers not in self.num_layers_choices:
            raise InputError(
                f"architecture with {arch.num_layers} layers at hidden {arch.hidden_size} is outside this space"
            )
        for i, layer in enumerate(arch.layers):
            if not isinstance(layer, FlexiBERTLayerConfig):
                raise InputError(f"layer {i} is a {type(layer).__name__}, not a FlexiBERTLayerConfig")
            if (
                f"{layer.operation}:{layer.parameter}" not in self.operations
                or layer.heads not in self.heads
                or layer.ffn_size not in self.ffn_sizes
                or layer.num_ffn not in self.num_ffn_choices
            ):
                raise InputError(f"layer {i} ({layer}) is outside this space")

    def from_benchmark_entry(self, entry: Mapping[str, Any]) -> Architecture:
        """The architecture of one NAS-Bench-BERT ``BERT_benchmark.json`` entry."""
        try:
            overrides = entry["hparams"]["model_hparam_overrides"]
            hidden = int(overrides["hidden_size"])
            raw_layers = overrides["nas_config"]["encoder_layers"]
            layers = tuple(
                FlexiBERTLayerConfig(
                    operation=raw["operation_type"],
                    parameter=raw["operation_parameter"],
                    heads=int(raw["num_operation_heads"]),
                    ffn_size=int(raw["feed_forward_dimension"]),
                    num_ffn=int(raw["num_feed_forward"]),
                )
                for raw in raw_layers
            )
        except (KeyError, TypeError) as err:
            raise InputError(f"benchmark entry {entry.get('id', '?')} is malformed: missing {err}") from None
        arch = Architecture(hidden, layers)
        self._check_arch(arch)
        return arch

    def _effective_layers(self, arch: Architecture) -> list[FlexiBERTLayerConfig]:
        if not self.as_trained:
            return list(arch.layers)
        return [
            FlexiBERTLayerConfig("SA", "SDP", layer.heads, layer.ffn_size, layer.num_ffn) for layer in arch.layers
        ]

    def model_config(self, arch: Architecture, seed: int | None = 0) -> FlexiBERTConfig:
        """The ``FlexiBERTConfig`` that builds ``arch``."""
        self._check_arch(arch)
        return FlexiBERTConfig(
            layers=self._effective_layers(arch),
            hidden_size=arch.hidden_size,
            first_ffn_size=4 * arch.hidden_size if self.as_trained else None,
            vocab_size=self.vocab_size,
            embedding_size=self.embedding_size,
            max_position_embeddings=self.max_position_embeddings,
            count=self.count,
            seed=seed,
        )

    # -- analytic parameter count ---------------------------------------------------------------

    @staticmethod
    def _mixing_params(h: int, layer: FlexiBERTLayerConfig) -> int:
        if layer.operation == "LT":
            return h * h + h
        if layer.operation == "SA":
            return 4 * (h * h + h) + (h * h if layer.parameter == "WMA" else 0) + 2 * h
        half, k = h // 2, int(layer.parameter)
        heads = max(1, layer.heads // 2)
        attention = 3 * (h * half + half)
        span_key = h * k + (h * half + half)
        kernel = half * heads * k + heads * k
        value = h * half + half
        return attention + span_key + kernel + value + (h * h + h) + 2 * h

    def _ffn_params(self, h: int, layer: FlexiBERTLayerConfig) -> int:
        first = 4 * h if self.as_trained else layer.ffn_size
        widths = [first] + [layer.ffn_size] * (layer.num_ffn - 1)
        dense = h * first + first + sum(a * b + b for a, b in zip(widths[:-1], widths[1:])) + widths[-1] * h + h
        return dense + 2 * h

    def num_params(self, arch: Architecture, count: str | None = None) -> int:
        count = count or self.count
        self._check_arch(arch)
        h = arch.hidden_size
        total = sum(self._mixing_params(h, layer) + self._ffn_params(h, layer) for layer in self._effective_layers(arch))
        if count == "all":
            e = self.embedding_size
            total += (self.vocab_size + self.max_position_embeddings + 2) * e + 2 * e + (e * h + h)
        return total

    def widest_ffn(self) -> int:
        """The widest FFN any candidate has."""
        return max(self.ffn_sizes)

    def _smallest_candidates(self) -> list[Architecture]:
        return self._uniform_extremes(min)

    def _largest_candidates(self) -> list[Architecture]:
        return self._uniform_extremes(max)

    def _uniform_extremes(self, pick) -> list[Architecture]:
        """Per hidden size, the architecture of ``pick(num_layers_choices)`` layers that all take the
        layer ``pick`` finds by parameter count (``min``: the smallest candidates, ``max``: the largest)."""
        out = []
        for h in self.hidden_sizes:
            options = [
                FlexiBERTLayerConfig(*_split_operation(op), n, f, s)
                for op in self.operations
                for n in self.heads
                for f in self.ffn_sizes
                for s in self.num_ffn_choices
            ]
            layer = pick(options, key=lambda layer: self._mixing_params(h, layer) + self._ffn_params(h, layer))
            out.append(Architecture(h, (layer,) * pick(self.num_layers_choices)))
        return out

    def describe(self, arch: Architecture) -> list[str]:
        return [
            f"{layer.operation}:{layer.parameter:<4} heads {layer.heads} ffn {layer.ffn_size} x{layer.num_ffn}"
            for layer in arch.layers
        ]
