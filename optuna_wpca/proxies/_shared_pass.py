"""Parts of a combination computed together where one pass serves them all.

A decoder's gradient proxies run its forward pass on the minibatch as it is (the next-token loss
masks nothing), so the FFN activations that W-PCA reads are those of that very pass: the decoders'
default ``wpca_saliency`` needs one forward and one backward pass, not a forward for W-PCA and
another for synaptic saliency. The values are those of the proxies computed apart (a test compares
them). Encoders mask 15% of the tokens for their gradient proxies, so their passes differ and
nothing is shared.
"""

from __future__ import annotations

from typing import Any, Sequence

import torch

from optuna_wpca._text import TextBatch
from optuna_wpca.models import CandidateModel
from optuna_wpca.proxies._baselines import _scoring, gradients_only_for, saliency_of
from optuna_wpca.proxies._pca import (
    DEFAULT_ETA, CovarianceRecorder, dim_from_spectrum, eigenvalues, layer_etas, vpca_result, wpca_result,
)
from optuna_wpca.proxies._registry import ProxyResult, compute_proxy, get_proxy

#: The PCA proxies that one pass with synaptic saliency can serve.
_PCA_PARTS = ("wpca", "vpca")


def _shares_a_pass(parts: Sequence[str], model: CandidateModel, batch: TextBatch) -> bool:
    return (model.is_causal and "synaptic_saliency" in parts
            and any(p in parts for p in _PCA_PARTS) and bool(batch.attention_mask.bool().all()))


def _pca_and_saliency(model: CandidateModel, batch: TextBatch, *, seed: int = 0, eta: float = DEFAULT_ETA,
                      eta_mobilebert: float | None = None, reduce: str = "sum",
                      count: str | None = None) -> dict[str, ProxyResult]:
    """W-PCA, V-PCA and synaptic saliency of a decoder from one forward and one backward pass (``seed``
    draws the encoders' masks: a decoder's loss has none)."""
    etas = layer_etas(model, eta, eta_mobilebert)
    linears = model.ffn_linears()
    ids = batch.input_ids.to(next(model.parameters()).device)
    with _scoring(model), gradients_only_for(model, [lin.weight for lin in linears]):
        with CovarianceRecorder(model, batch) as recorder:
            hidden = model(ids)
        h = hidden[:, :-1].reshape(-1, hidden.shape[-1])
        loss, grad = next_token_loss_and_grad(h.detach(), model.embeddings.word.weight.detach(),
                                              ids[:, 1:].reshape(-1))
        h.backward(grad)
        saliency = saliency_of(linears)
    dims = [dim_from_spectrum(eig, e) for eig, e in zip(eigenvalues(recorder.result()), etas)]
    return {
        "wpca": wpca_result(model, dims, eta=eta, reduce=reduce, count=count),
        "vpca": vpca_result(dims, eta=eta, reduce=reduce),
        "synaptic_saliency": ProxyResult(saliency, {"loss": loss.item()}),
    }


def next_token_loss_and_grad(hidden: torch.Tensor, embedding: torch.Tensor, targets: torch.Tensor,
                             chunk: int = 128) -> tuple[torch.Tensor, torch.Tensor]:
    """The mean next-token cross-entropy through the tied embedding (``mlm_loss``'s decoder loss) and
    its gradient with respect to ``hidden``, ``chunk`` rows at a time: the (tokens x vocabulary) logits
    never exist whole, and the embedding's own gradient, which no proxy reads, is not computed. Equal
    to autograd's through ``F.cross_entropy`` to float rounding.

    The two (rows x vocabulary) products are a third of a decoder's shared pass (30,522 tokens), so
    each chunk's logits go to one reused buffer (a fresh 128-row block per chunk costs
    allocator page faults), are exponentiated once, in place, and the softmax's normalisation is
    applied to the (rows x hidden) product instead of the (rows x vocabulary) weights: the gradient of
    a row is (sum_v e^(z_v - max) E_v) / (sum_v e^(z_v - max)) - E_target.
    """
    n = hidden.shape[0]
    grad = torch.empty_like(hidden)
    total = hidden.new_zeros((), dtype=torch.float64)
    buffer = hidden.new_empty((min(chunk, n), embedding.shape[0]))  # one allocation, reused by every chunk
    for start in range(0, n, chunk):
        h, t = hidden[start:start + chunk], targets[start:start + chunk]
        logits = torch.mm(h, embedding.T, out=buffer[: len(t)])
        picked = logits.gather(1, t[:, None])[:, 0]
        top = logits.amax(dim=-1)
        weights = logits.sub_(top[:, None]).exp_()
        mass = weights.sum(dim=-1)
        total += (mass.log() + top - picked).double().sum()
        rows = grad[start:start + chunk]
        torch.mm(weights, embedding, out=rows)
        rows.div_(mass[:, None]).sub_(embedding[t])
    return (total / n).to(hidden.dtype), grad / n


def compute_parts(parts: Sequence[str], model: CandidateModel, batch: TextBatch,
                  **options: Any) -> dict[str, ProxyResult]:
    """Each of ``parts`` scored on ``model`` (``{part: result}``), sharing one pass where it can;
    options go to the parts that take them, as in :func:`compute_proxy`."""
    out: dict[str, ProxyResult] = {}
    if _shares_a_pass(parts, model, batch):
        accepted = set(get_proxy("wpca").options) | set(get_proxy("synaptic_saliency").options)
        shared = _pca_and_saliency(model, batch, **{k: v for k, v in options.items() if k in accepted})
        out.update({p: shared[p] for p in parts if p in shared})
    for part in parts:
        if part not in out:
            out[part] = compute_proxy(part, model, batch, **options)
    return out

