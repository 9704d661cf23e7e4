"""Hidden covariance (Serianni & Kalita, ACL 2023, arXiv 2306.00288), for transformer layers.

What we follow is their public code (aaronserianni/training-free-nas, ``RNN_metrics.ipynb``: the
``hidden_scores`` cell, which calls the ``jacobian_score`` helper on stacked hidden states): the
hidden states are arranged as (features x samples), ``np.corrcoef`` gives the feature-by-feature
correlation matrix, and the score is ``-sum(log(v + k) + 1 / (v + k))`` over its eigenvalues ``v``
with ``k = 1e-5`` (Mellor et al.'s Jacobian-covariance score, applied to hidden states). Higher is
better: the maximum, ``-width``, is reached when the features are uncorrelated.

Their RNN code scores the first recurrent layer's states over time. For a transformer we take the
output of every layer over all (sequence x token) positions of the minibatch, score each layer,
and average over layers (the mean keeps a per-layer scale, as their one-layer score had). Features
with zero variance, which ``corrcoef`` turns into NaN, are left out. One forward pass, no gradients.
"""

from __future__ import annotations

import torch

from optuna_wpca._errors import InputError
from optuna_wpca._text import TextBatch
from optuna_wpca.models import CandidateModel
from optuna_wpca.proxies._registry import ProxyResult, register_proxy

#: The constant of Mellor et al.'s score, as in Serianni & Kalita's code.
K = 1e-5


def correlation_eigenvalues(h: torch.Tensor) -> torch.Tensor:
    """Eigenvalues of the feature correlation matrix of ``h`` (samples, features), float64."""
    if h.dim() != 2 or h.shape[0] < 2:
        raise InputError(f"hidden covariance needs a (samples >= 2, features) matrix, got shape {tuple(h.shape)}")
    h = h.double()
    if not torch.isfinite(h).all():
        raise InputError("hidden states contain NaN or inf; the candidate's forward pass is numerically broken")
    centred = h - h.mean(dim=0, keepdim=True)
    std = centred.pow(2).sum(dim=0).sqrt()
    keep = std > 0
    if not bool(keep.any()):
        return torch.zeros(0, dtype=torch.float64, device=h.device)
    z = centred[:, keep] / std[keep]
    return torch.linalg.eigvalsh(z.T @ z).clamp_min(0.0)


def covariance_score(eigenvalues: torch.Tensor) -> float:
    """Mellor et al.'s score of a correlation spectrum: ``-sum(log(v + k) + 1 / (v + k))``."""
    v = eigenvalues + K
    return float(-(torch.log(v) + 1.0 / v).sum())


def layer_hidden_states(model: CandidateModel, batch: TextBatch) -> list[torch.Tensor]:
    """Every layer's output as (tokens, width), from one forward pass without gradients; padding
    positions (if the mask has any) are left out."""
    device = next(model.parameters()).device
    keep = batch.attention_mask.reshape(-1).bool().to(device)
    states: list[torch.Tensor | None] = [None] * len(model.layers)

    def hook_for(i: int):
        def hook(_module: torch.nn.Module, _inputs: object, output: object) -> None:
            out = output[0] if isinstance(output, tuple) else output
            states[i] = out.reshape(-1, out.shape[-1])[keep]

        return hook

    handles = [layer.register_forward_hook(hook_for(i)) for i, layer in enumerate(model.layers)]
    was_training = model.training
    try:
        model.eval()
        with torch.inference_mode():
            model(**batch.to(device).as_kwargs())
    finally:
        for handle in handles:
            handle.remove()
        model.train(was_training)
    return states  # type: ignore[return-value]


@register_proxy(
    "hidden_covariance",
    needs_grad=False,
    description="Serianni & Kalita's hidden covariance: correlation spectrum score of each layer's output",
)
def hidden_covariance(model: CandidateModel, batch: TextBatch) -> ProxyResult:
    """Mean over layers of the correlation-spectrum score of the layer's output (module docstring).

    Example:
        >>> from optuna_wpca.spaces import DecoderSpace
        >>> from optuna_wpca._text import text_batch
        >>> model = DecoderSpace.small().build(DecoderSpace.small().sample(0))
        >>> result = hidden_covariance(model, text_batch(batch_size=4, seq_len=32))
        >>> len(result.parts["layer_scores"]) == len(model.layers), result.value < 0
        (True, True)
    """
    scores = [covariance_score(correlation_eigenvalues(h)) for h in layer_hidden_states(model, batch)]
    return ProxyResult(sum(scores) / len(scores), {"layer_scores": scores})
