"""OptunaHub package of optuna-wpca: the W-PCA paper's genetic algorithm as an Optuna sampler over
transformer architectures, with the spaces it searches and the zero-cost objective that scores them."""

from optuna_wpca import (
    DecoderSpace,
    FlexiBERTSpace,
    WPCASampler,
    WPCASpace,
    ZeroCostObjective,
    preset,
    text_batch,
)

__all__ = [
    "DecoderSpace",
    "FlexiBERTSpace",
    "WPCASampler",
    "WPCASpace",
    "ZeroCostObjective",
    "preset",
    "text_batch",
]
