"""The one-shot proxy: how well a candidate does with the weights it inherits from a trained supernet."""

from __future__ import annotations

from torch import nn

from optuna_wpca._errors import InputError
from optuna_wpca._text import TextBatch
from optuna_wpca.proxies._registry import ProxyResult, register_proxy


@register_proxy("supernet", needs_grad=False, zero_cost=False, requires=("supernet",),
                description="minus the KD loss of the weights inherited from a trained supernet (ELM's one-shot path)")
def supernet_proxy(model: nn.Module, batch: TextBatch, *, supernet: str | None = None) -> ProxyResult:
    """Minus the KD loss (teacher of the supernet, Appendix F feature losses) of ``model``'s path with
    the weights it inherits from the supernet saved in ``supernet`` (see :func:`optuna_wpca.train_supernet`),
    on ``batch``."""
    if supernet is None:
        raise InputError("the supernet proxy needs supernet=DIR, a directory written by Supernet.save "
                         "(see optuna_wpca.train_supernet)")
    from optuna_wpca.distill._supernet import inherited_kd_loss  # training code, loaded when the proxy is used

    loss = inherited_kd_loss(model, batch, supernet)
    return ProxyResult(-loss, {"kd_loss": loss})
