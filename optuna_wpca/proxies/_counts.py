"""Proxies that need no data: size and depth (the trivial baselines every proxy must beat)."""

from __future__ import annotations

from optuna_wpca._text import TextBatch
from optuna_wpca.models import CandidateModel
from optuna_wpca.proxies._registry import ProxyResult, register_proxy


@register_proxy("params", needs_grad=False, description="number of parameters (convention of the model)")
def params(model: CandidateModel, batch: TextBatch, *, count: str | None = None) -> ProxyResult:
    """The model's parameter count under its convention (or ``count``)."""
    n = model.num_parameters(count)
    return ProxyResult(float(n), {"num_params": n})


@register_proxy("num_layers", needs_grad=False, description="number of encoder layers")
def num_layers(model: CandidateModel, batch: TextBatch) -> ProxyResult:
    """The number of layers: the depth baseline every proxy must beat."""
    return ProxyResult(float(len(model.layers)), {"num_layers": len(model.layers)})


@register_proxy(
    "lts_decoder_params",
    needs_grad=False,
    description="LiteTransformerSearch: non-embedding parameter count",
)
def lts_decoder_params(model: CandidateModel, batch: TextBatch) -> ProxyResult:
    """LiteTransformerSearch's proxy: the decoder's non-embedding parameter count."""
    n = model.num_parameters("non_embedding")
    return ProxyResult(float(n), {"num_params": n})
