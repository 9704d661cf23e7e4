import sys

import optuna
import pytest

from optuna_wpca import WPCASpace, ZeroCostObjective, text_batch
from optuna_wpca.spaces._genes import values_of

optuna.logging.set_verbosity(optuna.logging.WARNING)


@pytest.fixture(scope="module")
def space():
    return WPCASpace(num_layers=3, hidden_size=64, bert_heads=4, mobilebert_heads=2)


@pytest.fixture(scope="module")
def batch():
    return text_batch(batch_size=4, seq_len=16)


def test_user_attrs_for_the_dashboard(space, batch):
    study = optuna.create_study(direction="maximize", sampler=optuna.samplers.RandomSampler(seed=0))
    study.optimize(ZeroCostObjective(space, batch=batch), n_trials=3)
    attrs = study.best_trial.user_attrs
    assert attrs["num_params"] == space.num_params(space.from_params(study.best_trial.params))
    assert len(attrs["pca_dims"]) == 3 and len(attrs["architecture"].split()) == 3
    assert attrs["wpca.vpca"] == sum(attrs["pca_dims"])
    assert study.best_value == attrs["num_params"] * attrs["wpca.vpca"]
    assert attrs["seconds"] > 0


def test_same_architecture_is_scored_once(space, batch):
    objective = ZeroCostObjective(space, batch=batch)
    study = optuna.create_study(direction="maximize")
    params = space.to_params(space.sample(1))
    study.enqueue_trial(params)
    study.enqueue_trial(params)
    calls = []
    original = objective.space.build
    objective.space = type(space)(**space.config())
    objective.space.build = lambda *a, **k: calls.append(1) or original(*a, **k)
    study.optimize(objective, n_trials=2)
    assert len(calls) == 1
    assert [t.user_attrs["cached"] for t in study.trials] == [False, True]
    assert study.trials[0].value == study.trials[1].value


def test_multi_objective_with_measured_latency(space, batch):
    objective = ZeroCostObjective(space, proxies=("wpca", "latency"), batch=batch, repeats=3)
    study = optuna.create_study(directions=["maximize", "minimize"])
    study.optimize(objective, n_trials=3)
    for t in study.trials:
        assert t.values[1] > 0 and t.user_attrs["latency.latency_ms"] == float(f"{t.values[1]:.4g}")  # stored short

    def dominates(a, b):  # W-PCA maximised, latency minimised
        return a.values[0] >= b.values[0] and a.values[1] <= b.values[1] and a.values != b.values

    front = study.best_trials
    assert front and not any(dominates(o, t) for t in front for o in study.trials)
    assert all(any(dominates(f, t) for f in front) for t in study.trials if t not in front)


def test_over_budget_candidate_is_pruned_without_building(space, batch):
    budget = space.min_params()
    objective = ZeroCostObjective(space, batch=batch, max_params=budget)
    objective.space = type(space)(**space.config())
    objective.space.build = lambda *a, **k: pytest.fail("built an infeasible candidate")
    study = optuna.create_study(direction="maximize")
    big = {n: values_of(d)[-1] for n, d in space.distributions().items()}
    study.enqueue_trial(dict(big, **{k: "bert" for k in big if k.endswith("block")}))
    study.optimize(objective, n_trials=1)
    t = study.trials[0]
    assert t.state == optuna.trial.TrialState.PRUNED and t.user_attrs["feasible"] is False
    assert t.constraints["max_params"] > 0


def test_bad_objective_arguments(space):
    with pytest.raises(ValueError, match="unknown proxy 'pca'"):
        ZeroCostObjective(space, "pca")
    with pytest.raises(ValueError, match="below the smallest candidate"):
        ZeroCostObjective(space, max_params=10)


def test_a_misspelt_proxy_option_is_an_error_naming_the_accepted_ones():
    import pytest

    from optuna_wpca import WPCASpace, ZeroCostObjective

    with pytest.raises(ValueError, match="unknown proxy option 'etta' for wpca; accepted: count, eta, eta_mobilebert"):
        ZeroCostObjective(WPCASpace.tiny(), etta=0.5)
    # An option taken by any of the study's proxies is fine.
    ZeroCostObjective(WPCASpace.tiny(), proxies=("wpca", "latency"), latency_seq_len=192, eta=0.9)


def test_freed_memory_handed_back_after_each_scored_candidate(space, batch, monkeypatch):
    # Without this, glibc keeps a search's freed activations resident (6.9 GB after 300 lts-gpt2 trials,
    # benchmarks/search_memory.py); a cached candidate frees nothing and is not trimmed.
    import optuna_wpca._objective as module
    from optuna_wpca._memory import release_freed_memory

    calls = []
    monkeypatch.setattr(module, "release_freed_memory", lambda: calls.append(1) or True)
    objective = ZeroCostObjective(space, batch=batch)
    a, b = space.sample(3), space.sample(4)
    assert a != b
    objective.score(a), objective.score(b), objective.score(a)
    assert len(calls) == 2

    assert release_freed_memory(slack=0) is sys.platform.startswith("linux")  # glibc here; nothing elsewhere


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's malloc_trim and /proc are Linux's")
def test_release_freed_memory_returns_freed_heap_pages_and_waits_for_growth():
    from optuna_wpca._memory import release_freed_memory, resident_bytes

    release_freed_memory(slack=0)
    blocks = [bytearray(b"x" * 65536) for _ in range(6000)]  # ~390 MB of heap blocks (below the mmap threshold)
    keep = bytearray(b"y" * 65536)  # allocated last: the heap's top stays in use, so only a trim frees the rest
    grown = resident_bytes()
    del blocks
    assert release_freed_memory(slack=1 << 50) is False  # not grown by a petabyte: left alone
    assert resident_bytes() > grown - 100e6
    assert release_freed_memory(slack=100 << 20) is True  # grown by more than 100 MB since the last trim
    assert resident_bytes() < grown - 250e6
    del keep


def test_a_combinations_reference_sample_hands_memory_back_per_architecture(monkeypatch):
    import optuna_wpca._objective as module
    from optuna_wpca import DecoderSpace

    calls = []
    monkeypatch.setattr(module, "release_freed_memory", lambda: calls.append(1) or True)
    space = DecoderSpace(num_layers_choices=(2,), hidden_sizes=(64,), heads=(2,), ffn_sizes=(64, 128, 192),
                         vocab_size=30522)
    objective = ZeroCostObjective(space, "wpca_saliency", batch=text_batch(batch_size=2, seq_len=8), reference_size=3)
    objective.reference()
    assert len(calls) == 3
