"""The earlier zero-cost proxies the W-PCA paper compares with (its section 2.3, Table 1).

Gradient proxies share one loss: a masked-language-model loss on the same minibatch. 15% of the
positions (seeded) are replaced by ``[MASK]`` (id 103 in the BERT vocabulary) and predicted through
a fresh, seeded linear head from the hidden size to the vocabulary; the loss is the cross-entropy
on those positions. Decoders use the next-token loss through their tied embedding instead. The
head is not part of the model, and every proxy leaves the model as it found it: no gradients, no
hooks, same train/eval mode.

Head proxies read softmax attention heads only. Following Serianni & Kalita (2023), layers without
softmax heads (FlexiBERT's LT token mixing) contribute nothing, DSC layers contribute their
attention half, and a model with no softmax head at all scores 0.
"""

from __future__ import annotations

import contextlib
from typing import Iterator

import torch
import torch.nn.functional as F
from torch import nn

from optuna_wpca._text import TextBatch
from optuna_wpca.models import CandidateModel
from optuna_wpca.proxies._registry import ProxyResult, register_proxy

MASK_ID = 103
MASK_RATE = 0.15


@contextlib.contextmanager
def _scoring(model: CandidateModel) -> Iterator[None]:
    """Eval mode, no stale gradients in or out, the mode restored afterwards."""
    was_training = model.training
    model.eval()
    model.zero_grad(set_to_none=True)
    try:
        yield
    finally:
        model.zero_grad(set_to_none=True)
        model.train(was_training)


def _device(model: nn.Module) -> torch.device:
    return next(model.parameters()).device


def mlm_loss(model: CandidateModel, batch: TextBatch, *, seed: int = 0, embeddings_grad: bool = False):
    """The gradient proxies' loss (see the module docstring); returns (loss, embedding output)."""
    device = _device(model)
    ids = batch.input_ids.to(device)
    captured: dict[str, torch.Tensor] = {}

    def keep(_m, _i, out):
        if embeddings_grad:
            out.retain_grad()
        captured["embeddings"] = out

    handle = model.embeddings.register_forward_hook(keep)
    try:
        g = torch.Generator().manual_seed(seed)
        if model.is_causal:
            hidden = model(ids)
            logits = model.logits(hidden[:, :-1])
            loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), ids[:, 1:].reshape(-1))
        else:
            masked = (torch.rand(ids.shape, generator=g) < MASK_RATE).to(device)
            masked[:, 0] |= ~masked.any(dim=1)  # at least one predicted position per sequence
            inputs = ids.masked_fill(masked, MASK_ID)
            hidden = model(inputs, attention_mask=batch.attention_mask.to(device))
            head = nn.Linear(hidden.shape[-1], model.config.vocab_size).to(device)
            with torch.no_grad():
                head.weight.copy_(torch.randn(head.weight.shape, generator=g).to(device) * 0.02)
                head.bias.zero_()
            loss = F.cross_entropy(head(hidden[masked]), ids[masked])
    finally:
        handle.remove()
    return loss, captured["embeddings"]


@register_proxy("synaptic_diversity", needs_grad=True,
                description="Zhou et al. 2022: sum of ||W||_* x ||dL/dW||_* over attention weight matrices")
def synaptic_diversity(model: CandidateModel, batch: TextBatch, *, seed: int = 0) -> ProxyResult:
    """Sum over attention projections of ||W||_* x ||dL/dW||_* (nuclear norms; masked-LM loss)."""
    with _scoring(model):
        loss, _ = mlm_loss(model, batch, seed=seed)
        loss.backward()
        total = 0.0
        for attn in model.attention_modules():
            for lin in (attn.query, attn.key, attn.value):
                w, g = lin.weight.detach(), lin.weight.grad
                if g is not None:
                    total += float(torch.linalg.matrix_norm(w, "nuc") * torch.linalg.matrix_norm(g, "nuc"))
    return ProxyResult(total, {"loss": loss.item()})


@register_proxy("synaptic_saliency", needs_grad=True,
                description="Abdelfattah et al. 2020: sum of |dL/dW * W| over the FFN weights")
def synaptic_saliency(model: CandidateModel, batch: TextBatch, *, seed: int = 0) -> ProxyResult:
    """Sum over FFN linears of abs(weight x gradient) (masked-LM loss)."""
    linears = model.ffn_linears()
    with _scoring(model), gradients_only_for(model, [lin.weight for lin in linears]):
        loss, _ = mlm_loss(model, batch, seed=seed)
        loss.backward()
        total = saliency_of(linears)
    return ProxyResult(total, {"loss": loss.item()})


def saliency_of(linears: list[nn.Linear]) -> float:
    """Sum of abs(weight x gradient) over ``linears`` (after a backward pass)."""
    # The L1 norm of the product: one pass over it, no second temporary for its absolute value.
    return sum(float(torch.linalg.vector_norm(lin.weight.grad * lin.weight.detach(), ord=1))
               for lin in linears if lin.weight.grad is not None)


@contextlib.contextmanager
def gradients_only_for(model: nn.Module, wanted: list[torch.Tensor]) -> Iterator[None]:
    """Within the block, only the ``wanted`` parameters of ``model`` require gradients (restored
    after): a backward pass then computes the gradients a proxy reads and the activations' ones that
    lead to them, not the weight gradients of the rest (the tied vocabulary projection's among them,
    the largest product of a decoder's pass). The gradients of ``wanted`` are the same."""
    wanted_ids = {id(p) for p in wanted}
    switched = [p for p in model.parameters() if id(p) not in wanted_ids and p.requires_grad]
    for p in switched:
        p.requires_grad_(False)
    try:
        yield
    finally:
        for p in switched:
            p.requires_grad_(True)


@register_proxy("activation_distance", needs_grad=False,
                description="Mellor et al. 2021 (NASWOT): log-determinant of the Hamming kernel of FFN activation codes")
def activation_distance(model: CandidateModel, batch: TextBatch) -> ProxyResult:
    """Binary codes: the sign of each layer's FFN first-linear output (ReLU/GELU active or not) per
    sequence; K[i, j] = number of positions where sequences i and j agree; score = log det K."""
    device = _device(model)
    kernel: dict[str, torch.Tensor] = {}

    def hook(_m, _i, out):
        codes = (out > 0).flatten(1).float()  # (B, N * width)
        k = codes @ codes.T + (1 - codes) @ (1 - codes).T
        kernel["K"] = kernel.get("K", 0) + k.double()

    handles = [lin.register_forward_hook(hook) for lin in model.ffn_input_linears()]
    try:
        with _scoring(model), torch.inference_mode():
            model(**batch.to(device).as_kwargs())
    finally:
        for h in handles:
            h.remove()
    sign, logdet = torch.linalg.slogdet(kernel["K"])
    return ProxyResult(float(logdet) if sign > 0 else float("-inf"), {"sign": float(sign)})


@register_proxy("jacobian_cosine", needs_grad=True,
                description="Celotti et al. 2020: 1 - mean |cos|^(1/20) between per-input loss Jacobians")
def jacobian_cosine(model: CandidateModel, batch: TextBatch, *, seed: int = 0) -> ProxyResult:
    """Per-input Jacobians of the loss with respect to the input embeddings (one backward pass:
    inputs do not interact through the loss's gradient with respect to their own embeddings)."""
    with _scoring(model):
        loss, emb = mlm_loss(model, batch, seed=seed, embeddings_grad=True)
        loss.backward()
        jac = F.normalize(emb.grad.flatten(1).double(), dim=1)
    cos = (jac @ jac.T).abs()
    score = 1.0 - float(cos.pow(1.0 / 20).mean())
    return ProxyResult(score, {"loss": loss.item()})


def _head_tensors(model: CandidateModel, batch: TextBatch, seed: int, with_grad: bool):
    """Attention probabilities and per-head outputs of every softmax head, optionally with gradients."""
    probs: list[torch.Tensor] = []
    outputs: list[torch.Tensor] = []

    def keep(store):
        def hook(_m, _i, out):
            if with_grad:
                out.retain_grad()
            store.append(out)

        return hook

    handles = []
    for attn in model.attention_modules():
        handles.append(attn.probs.register_forward_hook(keep(probs)))
        handles.append(attn.head_outputs.register_forward_hook(keep(outputs)))
    try:
        if with_grad:
            loss, _ = mlm_loss(model, batch, seed=seed)
            loss.backward()
        else:
            with torch.inference_mode():
                model(**batch.to(_device(model)).as_kwargs())
    finally:
        for h in handles:
            h.remove()
    return probs, outputs


def _average_over_heads(per_layer: list[torch.Tensor]) -> ProxyResult:
    """Mean of per-head scores (one tensor of heads per attention module); 0 when there is no head."""
    if not per_layer:
        return ProxyResult(0.0, {"heads": 0})
    heads = torch.cat(per_layer)
    return ProxyResult(float(heads.mean()), {"heads": int(heads.numel())})


@register_proxy("head_importance", needs_grad=True,
                description="Michel et al. 2019: |A_h . dL/dA_h| per head, averaged over heads")
def head_importance(model: CandidateModel, batch: TextBatch, *, seed: int = 0) -> ProxyResult:
    """Mean over heads of abs(head output x its gradient), summed over its dims (masked-LM loss)."""
    with _scoring(model):
        _, outputs = _head_tensors(model, batch, seed, with_grad=True)
        scores = [(out.detach() * out.grad).sum(dim=(2, 3)).abs().mean(0) for out in outputs if out.grad is not None]
    return _average_over_heads(scores)


@register_proxy("head_confidence", needs_grad=False,
                description="Voita et al. 2019: mean over tokens of each head's largest attention weight, averaged")
def head_confidence(model: CandidateModel, batch: TextBatch) -> ProxyResult:
    """Mean over heads of the largest attention probability per query."""
    with _scoring(model):
        probs, _ = _head_tensors(model, batch, 0, with_grad=False)
    return _average_over_heads([p.max(dim=-1).values.mean(dim=(0, 2)) for p in probs])


@register_proxy("softmax_confidence", needs_grad=False,
                description="Behnke & Heafield 2020: mean largest softmax of each head's output, averaged")
def softmax_confidence(model: CandidateModel, batch: TextBatch) -> ProxyResult:
    """Mean over heads of the largest softmax value of each query's head output."""
    with _scoring(model):
        _, outputs = _head_tensors(model, batch, 0, with_grad=False)
    return _average_over_heads([F.softmax(o, dim=-1).max(dim=-1).values.mean(dim=(0, 2)) for o in outputs])
