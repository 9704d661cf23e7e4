"""A space whose candidates need a model of their own: each layer chooses its FFN width and its activation.

    python examples/activation_space.py [--n-trials 12] [--out activation-model]

Nothing in the plugin knows GELU from ReLU, so the space comes with its model: ``ActivationModel``, a
``CandidateModel`` whose config is a ``LayeredConfig`` of ``ActivationLayer``s. Defining the class registers
its ``model_type`` and makes its transformers classes, so a saved candidate loads with ``AutoModel``; the
space sets ``model_class`` and ``model_config`` and the base class builds it. The script searches the
space with W-PCA, scores the best candidate with a gradient proxy (synaptic saliency), saves it and loads it
back through transformers' Auto classes.
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass, field
from typing import Any, ClassVar, Mapping

import optuna
import torch
import torch.nn.functional as F
from optuna.distributions import CategoricalDistribution
from torch import nn

import optuna_wpca
from optuna_wpca import Architecture, InputError, SearchSpace
from optuna_wpca.models import CandidateModel, LayeredConfig
from optuna_wpca.models._attention import SelfAttention
from optuna_wpca.models._base import additive_mask, allocate

ACTIVATIONS = {"gelu": F.gelu, "relu": F.relu, "silu": F.silu}


@dataclass(frozen=True)
class ActivationLayer:
    ffn_size: int
    activation: str

    def __post_init__(self) -> None:
        if self.activation not in ACTIVATIONS:
            raise InputError(f"unknown activation {self.activation!r}; use one of {tuple(ACTIVATIONS)}")


@dataclass
class ActivationConfig(LayeredConfig):
    layers: list[ActivationLayer] = field(default_factory=list)
    hidden_size: int = 64
    heads: int = 2
    vocab_size: int = 30522
    max_position_embeddings: int = 512
    count: str = "non_embedding"
    seed: int | None = None

    layer_config: ClassVar[type] = ActivationLayer
    family: ClassVar[str] = "activation-choice"


class Embeddings(nn.Module):
    def __init__(self, config: ActivationConfig) -> None:
        super().__init__()
        self.word = nn.Embedding(config.vocab_size, config.hidden_size)  # "word": masked-LM heads tie to it
        self.position = nn.Embedding(config.max_position_embeddings, config.hidden_size)
        self.norm = nn.LayerNorm(config.hidden_size)

    def forward(self, input_ids: torch.Tensor, token_type_ids: torch.Tensor | None = None) -> torch.Tensor:
        positions = torch.arange(input_ids.shape[1], device=input_ids.device)
        return self.norm(self.word(input_ids) + self.position(positions)[None])


class Block(nn.Module):
    def __init__(self, config: ActivationConfig, layer: ActivationLayer) -> None:
        super().__init__()
        h = config.hidden_size
        self.attention = SelfAttention(h, h, config.heads)
        self.attention_out = nn.Linear(h, h)
        self.attention_norm = nn.LayerNorm(h)  # the attention block's output: a KD point
        self.ffn_in = nn.Linear(h, layer.ffn_size)
        self.ffn_out = nn.Linear(layer.ffn_size, h)
        self.ffn_norm = nn.LayerNorm(h)
        self.act = ACTIVATIONS[layer.activation]

    def forward(self, x: torch.Tensor, mask: torch.Tensor | None) -> torch.Tensor:
        x = self.attention_norm(x + self.attention_out(self.attention(x, mask)))
        return self.ffn_norm(x + self.ffn_out(self.act(self.ffn_in(x))))


class ActivationModel(CandidateModel):
    config_class = ActivationConfig
    model_type = "example_activation"

    def __init__(self, config: ActivationConfig, *, device: str | torch.device | None = None) -> None:
        super().__init__()
        self.config = config

        def build() -> None:
            self.embeddings = Embeddings(config)
            self.layers = nn.ModuleList(Block(config, layer) for layer in config.layers)

        allocate(self, build, config.seed, device)

    def ffn_input_linears(self) -> list[nn.Linear]:
        return [layer.ffn_in for layer in self.layers]

    def encode(self, x: torch.Tensor, attention_mask: torch.Tensor | None) -> torch.Tensor:
        mask = additive_mask(attention_mask, x.dtype)
        for layer in self.layers:
            x = layer(x, mask)
        return x


class ActivationSpace(SearchSpace):
    """``num_layers`` post-LN blocks at ``hidden_size``; each layer picks an FFN width and an activation."""

    kind = "example-activation"
    model_class = ActivationModel
    block_kinds = {"gelu": ("GELU", "#4C72B0"), "relu": ("ReLU", "#DD8452"), "silu": ("SiLU", "#55A868")}

    def __init__(self, num_layers: int = 4, hidden_size: int = 64, *, ffn_sizes=(64, 128, 256), heads: int = 2,
                 count: str = "non_embedding") -> None:
        super().__init__(count=count)
        self.num_layers, self.hidden_size, self.heads = num_layers, hidden_size, heads
        self.ffn_sizes = tuple(ffn_sizes)

    def config(self) -> dict[str, Any]:
        return {"num_layers": self.num_layers, "hidden_size": self.hidden_size, "ffn_sizes": list(self.ffn_sizes),
                "heads": self.heads, "count": self.count}

    def block_kind(self, layer: Any) -> str:
        return layer.activation

    def distributions(self) -> dict[str, CategoricalDistribution]:
        out = {}
        for i in range(self.num_layers):
            out[f"layer_{i:02d}_ffn"] = CategoricalDistribution(self.ffn_sizes)
            out[f"layer_{i:02d}_act"] = CategoricalDistribution(tuple(ACTIVATIONS))
        return out

    def from_params(self, params: Mapping[str, Any]) -> Architecture:
        names = list(self.distributions())
        self._check_params(params, names)
        layers = tuple(ActivationLayer(params[f"layer_{i:02d}_ffn"], params[f"layer_{i:02d}_act"])
                       for i in range(self.num_layers))
        return Architecture(self.hidden_size, layers)

    def to_params(self, arch: Architecture) -> dict[str, Any]:
        out = {}
        for i, layer in enumerate(arch.layers):
            out[f"layer_{i:02d}_ffn"], out[f"layer_{i:02d}_act"] = layer.ffn_size, layer.activation
        return out

    def model_config(self, arch: Architecture, seed: int | None = 0) -> ActivationConfig:
        self.to_params(arch)
        return ActivationConfig(layers=list(arch.layers), hidden_size=arch.hidden_size, heads=self.heads,
                                count=self.count, seed=seed)

    def num_params(self, arch: Architecture, count: str | None = None) -> int:
        h = arch.hidden_size
        layers = sum(4 * (h * h + h) + 2 * 2 * h + (h * f.ffn_size + f.ffn_size) + (f.ffn_size * h + h)
                     for f in arch.layers)
        if (count or self.count) == "all":
            layers += (30522 + 512) * h + 2 * h
        return layers

    def widest_ffn(self) -> int:
        return max(self.ffn_sizes)

    def _smallest_candidates(self) -> list[Architecture]:
        return [Architecture(self.hidden_size, (ActivationLayer(min(self.ffn_sizes), "gelu"),) * self.num_layers)]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--n-trials", type=int, default=12, help="W-PCA evaluations (default 12)")
    parser.add_argument("--out", default="activation-model", help="where the best candidate is saved")
    args = parser.parse_args()

    space = ActivationSpace()
    study = optuna.create_study(direction="maximize", sampler=optuna_wpca.WPCASampler(space, population_size=4, seed=0))
    batch = optuna_wpca.text_batch(batch_size=4, seq_len=64)
    study.optimize(optuna_wpca.ZeroCostObjective(space, batch=batch), n_trials=args.n_trials)
    arch = space.from_params(study.best_trial.params)
    print(f"best W-PCA {study.best_value:.6g}: {space.summary(arch)}")
    model = space.build(arch, seed=0)
    saliency = optuna_wpca.compute_proxy("synaptic_saliency", model, batch).value
    print(f"synaptic saliency {saliency:.6g}")
    model.save_pretrained(args.out)
    from transformers import AutoModel

    loaded = AutoModel.from_pretrained(args.out).eval()
    with torch.no_grad():
        same = torch.allclose(loaded(batch.input_ids).last_hidden_state, model(batch.input_ids), atol=1e-6)
    print(f"AutoModel.from_pretrained({args.out!r}): {type(loaded).__name__}, same outputs: {same}")


if __name__ == "__main__":
    main()
