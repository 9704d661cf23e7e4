import optuna
import pytest
import torch

from optuna_wpca import CandidateModel, DecoderSpace, WPCASampler, ZeroCostObjective, compute_proxy, text_batch


@pytest.fixture(scope="module")
def space():
    return DecoderSpace(num_layers_choices=(2, 3), hidden_sizes=(64, 128), ffn_sizes=(128, 256, 512))


def test_counts_round_trip_and_build(space):
    for seed in range(8):
        arch = space.sample(seed)
        assert space.from_params(space.to_params(arch)) == arch
        model = space.build(arch, seed=None)
        assert space.num_params(arch) == model.num_parameters()
        assert space.num_params(arch, "all") == sum(p.numel() for p in model.parameters())
    default = DecoderSpace()
    assert len(default.distributions()) == 2 + 2 * 10
    assert default.distributions()["hidden_size"].high == 960


def test_attention_is_causal(space):
    model = space.build(space.sample(1), seed=0)
    x = torch.randint(1000, 2000, (1, 12))
    y = x.clone()
    y[0, 8:] = 7
    with torch.no_grad():
        a, b = model(x), model(y)
    assert torch.allclose(a[0, :8], b[0, :8], atol=1e-6)  # the past does not see the future
    assert not torch.allclose(a[0, 8:], b[0, 8:], atol=1e-4)
    assert model.logits(a).shape == (1, 12, 30522)


def test_proxies_and_save_load(space, tmp_path):
    batch = text_batch(batch_size=4, seq_len=16)
    model = space.build(space.sample(2), seed=0)
    w = compute_proxy("wpca", model, batch)
    assert len(w.parts["pca_dims"]) == model.config.layers.__len__()
    lts = compute_proxy("lts_decoder_params", model, batch).value
    assert lts == space.num_params(space.sample(2), "non_embedding")
    model.save_pretrained(tmp_path / "d")
    again = CandidateModel.from_pretrained(tmp_path / "d")
    with torch.no_grad():
        assert torch.equal(again(batch.input_ids), model(batch.input_ids))


def test_pareto_search_on_the_decoder_space(space):
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    sampler = WPCASampler(space, population_size=4, seed=0)
    objective = ZeroCostObjective(space, proxies=("wpca", "latency"), batch=text_batch(batch_size=2, seq_len=16),
                                  repeats=2)
    study = optuna.create_study(directions=["maximize", "minimize"], sampler=sampler)
    study.optimize(objective, n_trials=10)
    done = [t for t in study.trials if t.state.name == "COMPLETE"]
    assert len(done) == 10 and all(t.values[1] > 0 for t in done)

    def dominates(a, b):  # maximise W-PCA, minimise latency
        return a.values[0] >= b.values[0] and a.values[1] <= b.values[1] and a.values != b.values

    front = {t.number for t in done if not any(dominates(o, t) for o in done)}
    assert {t.number for t in study.best_trials} == front
    # The W-PCA value is the proxy's on the decoder the trial names.
    t = done[0]
    rebuilt = space.build(space.from_params(t.params), seed=0)
    assert t.values[0] == compute_proxy("wpca", rebuilt, text_batch(batch_size=2, seq_len=16)).value
