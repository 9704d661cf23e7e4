"""The four gradient proxies against the same quantities computed here another way, on a tiny decoder in
float64: the next-token loss written out by hand, gradients by ``torch.autograd.grad`` (not ``.grad`` left by
a backward pass), one of them checked again by a central finite difference."""

import math

import pytest
import torch
import torch.nn.functional as F

from optuna_wpca import DecoderSpace, TextBatch, compute_proxy

SPACE = DecoderSpace(num_layers_choices=(2,), hidden_sizes=(16,), heads=(2,), ffn_sizes=(24,), vocab_size=50)


@pytest.fixture()
def setup():
    model = SPACE.build(SPACE.sample(0), seed=3).double()
    ids = torch.randint(0, 50, (3, 7), generator=torch.Generator().manual_seed(1))
    batch = TextBatch(input_ids=ids, attention_mask=torch.ones_like(ids), token_type_ids=torch.zeros_like(ids))
    return model, ids, batch


def _loss(model, ids, embedded=None):
    """The decoders' proxy loss, written out: mean cross-entropy of every next token through the tied embedding."""
    hidden = model.encode(embedded if embedded is not None else model.embeddings(ids, None), None)
    logits = hidden[:, :-1] @ model.embeddings.word.weight.T
    return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), ids[:, 1:].reshape(-1))


def test_synaptic_saliency_by_hand(setup):
    model, ids, batch = setup
    weights = [lin.weight for layer in model.layers for lin in (layer.ffn_in, layer.ffn_out)]
    grads = torch.autograd.grad(_loss(model, ids), weights)
    expected = sum(float((g * w.detach()).abs().sum()) for g, w in zip(grads, weights))
    assert compute_proxy("synaptic_saliency", model, batch).value == pytest.approx(expected, rel=1e-9)
    # the gradient itself, one entry, by a central difference
    w, eps = weights[0], 1e-6
    with torch.no_grad():
        w[0, 0] += eps
        up = float(_loss(model, ids))
        w[0, 0] -= 2 * eps
        down = float(_loss(model, ids))
        w[0, 0] += eps
    assert float(grads[0][0, 0]) == pytest.approx((up - down) / (2 * eps), rel=1e-5, abs=1e-9)


def test_synaptic_diversity_by_hand(setup):
    model, ids, batch = setup
    attention = [layer.attention for layer in model.layers]
    weights = [lin.weight for a in attention for lin in (a.query, a.key, a.value)]
    grads = torch.autograd.grad(_loss(model, ids), weights)
    nuc = lambda m: float(torch.linalg.svdvals(m).sum())  # noqa: E731 - the nuclear norm, as its definition
    expected = sum(nuc(w.detach()) * nuc(g) for w, g in zip(weights, grads))
    assert compute_proxy("synaptic_diversity", model, batch).value == pytest.approx(expected, rel=1e-9)


def test_jacobian_cosine_by_hand(setup):
    model, ids, batch = setup
    embedded = model.embeddings(ids, None).detach().requires_grad_(True)
    (grad,) = torch.autograd.grad(_loss(model, ids, embedded), [embedded])
    rows = [grad[i].flatten() for i in range(grad.shape[0])]
    total = 0.0
    for a in rows:  # every ordered pair, the diagonal included
        for b in rows:
            total += abs(float(a @ b) / (float(a.norm()) * float(b.norm()))) ** (1 / 20)
    expected = 1 - total / len(rows) ** 2
    assert compute_proxy("jacobian_cosine", model, batch).value == pytest.approx(expected, rel=1e-9)


def test_head_importance_by_hand(setup):
    model, ids, batch = setup
    outputs = []
    handles = [layer.attention.head_outputs.register_forward_hook(lambda _m, _i, out: outputs.append(out))
               for layer in model.layers]
    try:
        loss = _loss(model, ids)
    finally:
        for h in handles:
            h.remove()
    grads = torch.autograd.grad(loss, outputs)
    per_head = []
    for out, g in zip(outputs, grads):  # (batch, heads, tokens, head_dim): |sum over tokens and dims|, mean over the batch
        for h in range(out.shape[1]):
            per_head.append(sum(abs(float((out[b, h].detach() * g[b, h]).sum())) for b in range(out.shape[0]))
                            / out.shape[0])
    expected = sum(per_head) / len(per_head)
    assert len(per_head) == 4 and math.isfinite(expected)
    assert compute_proxy("head_importance", model, batch).value == pytest.approx(expected, rel=1e-9)
