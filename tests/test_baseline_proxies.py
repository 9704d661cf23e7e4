import math

import pytest
import torch

from optuna_wpca import DecoderSpace, FlexiBERTSpace, WPCASpace, compute_proxy, get_proxy, list_proxies

BASELINES = ["synaptic_diversity", "synaptic_saliency", "activation_distance", "jacobian_cosine",
             "head_importance", "head_confidence", "softmax_confidence"]
SPACES = {
    "wpca": WPCASpace(num_layers=2, hidden_size=64, bert_heads=4, mobilebert_heads=2),
    "flexibert": FlexiBERTSpace(),
    "decoder": DecoderSpace(num_layers_choices=(2,), hidden_sizes=(64,), ffn_sizes=(128,)),
}


@pytest.mark.parametrize("space_name", list(SPACES))
@pytest.mark.parametrize("name", BASELINES)
def test_finite_and_model_untouched(name, space_name, small_batch):
    space = SPACES[space_name]
    model = space.build(space.sample(2), seed=0)
    model.train()
    before = {k: v.clone() for k, v in model.state_dict().items()}
    value = compute_proxy(name, model, small_batch).value
    assert math.isfinite(value)
    assert model.training
    assert all(p.grad is None for p in model.parameters())
    assert all(not m._forward_hooks for m in model.modules())
    assert all(torch.equal(before[k], v) for k, v in model.state_dict().items())


def test_registry_says_which_need_gradients():
    assert {"synaptic_diversity", "synaptic_saliency", "jacobian_cosine", "head_importance"} == {
        n for n in BASELINES if get_proxy(n).needs_grad}
    assert set(BASELINES) | {"lts_decoder_params"} <= set(list_proxies())


def uniform_attention_model():
    space = SPACES["wpca"]
    model = space.build(space.from_params({"layer_00_block": "bert", "layer_00_ffn_mult": 1,
                                           "layer_01_block": "bert", "layer_01_ffn_mult": 1}), seed=0)
    with torch.no_grad():
        for layer in model.layers:
            layer.attention.query.weight.zero_()
            layer.attention.query.bias.zero_()
            layer.attention.value.weight.zero_()
            layer.attention.value.bias.zero_()
    return model


def test_head_proxies_by_hand(small_batch):
    model = uniform_attention_model()
    n = small_batch.shape[1]
    # zero queries: every attention row is uniform over the n tokens
    assert compute_proxy("head_confidence", model, small_batch).value == pytest.approx(1 / n)
    # zero values: every head output is 0, its softmax uniform over head_dim = 64 / 4
    assert compute_proxy("softmax_confidence", model, small_batch).value == pytest.approx(1 / 16)


def test_activation_distance_by_hand(small_batch):
    model = uniform_attention_model()
    with torch.no_grad():  # every FFN unit on for every token: all codes equal, the kernel is singular
        for lin in model.ffn_input_linears():
            lin.weight.zero_()
            lin.bias.fill_(1.0)
    assert compute_proxy("activation_distance", model, small_batch).value == float("-inf")


def test_lt_only_model_has_no_heads(small_batch):
    space = FlexiBERTSpace(operations=("LT:DFT",))
    model = space.build(space.sample(0), seed=0)
    result = compute_proxy("head_confidence", model, small_batch)
    assert result.value == 0.0 and result.parts["heads"] == 0


def test_peak_memory_grows_with_the_sequence(small_batch):
    from optuna_wpca import text_batch

    space = SPACES["decoder"]
    model = space.build(space.sample(0), seed=0)
    batch = text_batch(batch_size=1, seq_len=128)
    long = compute_proxy("peak_memory", model, batch).parts
    short = compute_proxy("peak_memory", model, batch, latency_seq_len=16).parts
    weights = sum(p.numel() * 4 for p in model.parameters()) / 2**20
    assert long["weights_mb"] == pytest.approx(weights)
    assert long["activations_mb"] > short["activations_mb"] > 0


@pytest.mark.parametrize("operation", ["LT:DCT", "LT:DFT", "DSC:5", "SA:WMA"])
def test_gradient_proxies_after_a_wpca_pass_on_the_same_model(operation, small_batch):
    # W-PCA runs under inference_mode; nothing it caches may break a later gradient proxy.
    space = FlexiBERTSpace(operations=(operation,))
    model = space.build(space.sample(0), seed=0)
    compute_proxy("wpca", model, small_batch)
    for name in BASELINES:
        assert math.isfinite(compute_proxy(name, model, small_batch).value)
