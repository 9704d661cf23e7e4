"""One pass for the decoders' default: the same values as the parts computed apart, to float rounding."""

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from optuna_wpca import DecoderSpace, WPCASpace, ZeroCostObjective, text_batch
from optuna_wpca.proxies import compute_parts, compute_proxy
from optuna_wpca.proxies import _shared_pass

DECODER = DecoderSpace(num_layers_choices=(2, 3), hidden_sizes=(64, 128), heads=(2, 4), ffn_sizes=(64, 192, 320),
                       max_position_embeddings=64)
BATCH = text_batch(batch_size=4, seq_len=32)


def test_the_chunked_head_gives_autograds_loss_and_gradient():
    g = torch.Generator().manual_seed(0)
    hidden = torch.randn(37, 16, generator=g)
    embedding = torch.randn(50, 16, generator=g)
    targets = torch.randint(0, 50, (37,), generator=g)
    leaf = hidden.clone().requires_grad_(True)
    loss = F.cross_entropy(leaf @ embedding.T, targets)
    loss.backward()
    mine, grad = _shared_pass.next_token_loss_and_grad(hidden, embedding, targets, chunk=8)  # 37 = 4 x 8 + 5
    assert float(mine) == pytest.approx(float(loss.detach()), rel=1e-6)
    assert torch.allclose(grad, leaf.grad, rtol=1e-4, atol=1e-7)
    whole, grad_whole = _shared_pass.next_token_loss_and_grad(hidden, embedding, targets)  # one chunk, under its size
    assert float(whole) == pytest.approx(float(loss.detach()), rel=1e-6)
    assert torch.allclose(grad_whole, leaf.grad, rtol=1e-4, atol=1e-7)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_a_decoder_shares_one_pass_and_gets_the_values_of_the_parts_apart(seed, monkeypatch):
    calls = []
    shared = _shared_pass._pca_and_saliency
    monkeypatch.setattr(_shared_pass, "_pca_and_saliency", lambda *a, **k: calls.append(1) or shared(*a, **k))
    model = DECODER.build(DECODER.sample(seed), seed=0)
    together = compute_parts(["wpca", "vpca", "synaptic_saliency"], model, BATCH, eta=0.95)
    assert calls == [1]  # one shared pass served all three
    for name in ("wpca", "vpca"):
        apart = compute_proxy(name, model, BATCH, eta=0.95)
        assert together[name].value == apart.value and together[name].parts["pca_dims"] == apart.parts["pca_dims"]
    saliency = compute_proxy("synaptic_saliency", model, BATCH)
    assert together["synaptic_saliency"].value == pytest.approx(saliency.value, rel=1e-5)
    assert together["synaptic_saliency"].parts["loss"] == pytest.approx(saliency.parts["loss"], rel=1e-6)
    assert all(p.grad is None for p in model.parameters()) and all(p.requires_grad for p in model.parameters())


def test_an_encoder_scores_its_parts_apart(monkeypatch):
    monkeypatch.setattr(_shared_pass, "_pca_and_saliency", lambda *a, **k: pytest.fail("an encoder shared a pass"))
    space = WPCASpace(num_layers=2, hidden_size=64, bert_heads=4, mobilebert_heads=2)
    model = space.build(space.sample(0), seed=0)
    together = compute_parts(["wpca", "synaptic_saliency"], model, BATCH)
    assert together["synaptic_saliency"].value == compute_proxy("synaptic_saliency", model, BATCH).value


def test_the_decoders_default_scores_as_its_parts_say():
    objective = ZeroCostObjective(DECODER, "wpca_saliency", batch=BATCH, reference_size=4)
    reference = objective.reference()
    arch = DECODER.sample(np.random.default_rng(7))
    values, parts = objective.score(arch, reference)
    model = DECODER.build(arch, seed=0)
    w = compute_proxy("wpca", model, BATCH).value
    s = compute_proxy("synaptic_saliency", model, BATCH).value
    expected = np.mean([(np.log(v) - np.mean(np.log(reference.values[p]))) / np.std(np.log(reference.values[p]), ddof=1)
                        for p, v in (("wpca", w), ("synaptic_saliency", s))])
    assert values[0] == pytest.approx(expected, rel=1e-5, abs=1e-6)
