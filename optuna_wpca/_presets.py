"""The named searches of ``optuna-wpca search --preset``: a space with its published budget."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from optuna_wpca._errors import InputError
from optuna_wpca._budget import Budget
from optuna_wpca.spaces import DecoderSpace, ELMSpace, FlexiBERTSpace, SearchSpace, WPCASpace


@dataclass(frozen=True)
class Preset:
    """A named search space with its published parameter budget."""

    make_space: Callable[[], SearchSpace]
    budget: Budget
    source: str


#: The W-PCA paper's searches (6.2.1), LiteTransformerSearch's 5M-12M decoder band, and two unbudgeted ones.
PRESETS: dict[str, Preset] = {
    "wpca-small": Preset(WPCASpace.small, Budget(max_params=15.7e6), "W-PCA-Small: 12 layers, <= 15.7M"),
    "wpca-tiny": Preset(WPCASpace.tiny, Budget(max_params=10e6), "W-PCA-Tiny: 6 layers, <= 10M"),
    "elm-small": Preset(ELMSpace.small, Budget(max_params=15.7e6),
                        "ELM-Small: the W-PCA-Small space with elastic heads, <= 15.7M"),
    "elm-tiny": Preset(ELMSpace.tiny, Budget(max_params=10e6), "ELM-Tiny: 6 layers with elastic heads, <= 10M"),
    "lts-gpt2": Preset(DecoderSpace.lts_gpt2, Budget(max_params=12e6, min_params=5e6),
                       "LiteTransformerSearch GPT-2 decoders, 5M-12M non-embedding"),
    "flexibert": Preset(FlexiBERTSpace, Budget(), "NAS-Bench-BERT's FlexiBERT space, no budget"),
    "decoder-small": Preset(DecoderSpace.small, Budget(), "a small GPT-style decoder space, no budget"),
}


def preset(name: str) -> tuple[SearchSpace, Budget]:
    """The space and budget of a named preset (see :data:`PRESETS`).

    Example:
        >>> space, budget = preset("wpca-small")
        >>> space.num_layers, budget.max_params
        (12, 15700000.0)
    """
    if name not in PRESETS:
        raise InputError(f"unknown preset {name!r}; choose from {', '.join(PRESETS)}")
    p = PRESETS[name]
    return p.make_space(), p.budget
