"""LiteTransformerSearch's 200 trained GPT-2 decoders as a ranking benchmark, and its search space."""

import copy
import json

import numpy as np
import optuna
import pytest
import torch

from optuna_wpca import DecoderSpace, WPCASampler, ZeroCostObjective, text_batch
from optuna_wpca.ranking import benchmark_path, load_benchmark, rank_proxies
from optuna_wpca.cli import main
from optuna_wpca.proxies import compute_proxy
from optuna_wpca.proxies._hidden_covariance import correlation_eigenvalues, covariance_score

RAW = json.loads(benchmark_path("lts-gpt2-wt103").read_text())


def test_every_entry_builds_and_its_decoder_count_is_the_authors():
    space = DecoderSpace.lts_gpt2()
    mismatches = []
    for entry in RAW["models"]:
        arch = space.from_lts_config(entry["config"])
        if space.num_params(arch) != entry["params"]["nonembedding"]:
            mismatches.append(entry["id"])
    assert len(RAW["models"]) == 200 and mismatches == []


def test_the_analytic_count_is_the_built_models_count():
    space = DecoderSpace.lts_gpt2()
    smallest = sorted(RAW["models"], key=lambda e: e["params"]["nonembedding"])[:3]
    for entry in smallest:
        arch = space.from_lts_config(entry["config"])
        model = space.build(arch, seed=0)
        assert model.num_parameters("non_embedding") == entry["params"]["nonembedding"]
        # The authors' FFN column is the per-layer linear layers alone.
        ffn = sum(p.numel() for layer in model.layers for p in (*layer.ffn_in.parameters(), *layer.ffn_out.parameters()))
        assert ffn == entry["params"]["FFN"]


def test_the_bundled_benchmark_is_read_by_name_and_lower_perplexity_is_better():
    bench = load_benchmark("lts-gpt2-wt103")
    assert len(bench.archs) == 200 and bench.metric == "valid_ppl" and bench.lower_is_better
    assert bench.truth == [-s for s in bench.scores]
    assert {a.num_layers for a in bench.archs} == set(range(2, 17))
    assert "lower valid_ppl is better" in bench.reading
    test = load_benchmark("lts-gpt2-wt103", metric="test_ppl")
    assert test.scores[0] == RAW["models"][0]["test_ppl"]


def _tiny_file(tmp_path, entries=None):
    """Four small decoders whose perplexity falls as the FFN grows."""
    models = entries or [
        {"id": f"m{i}", "config": {"n_layer": 2, "d_model": 64, "d_inner": [512 + 256 * i] * 2, "n_head": [2, 4]},
         "valid_ppl": 60.0 - 5 * i, "params": {}}
        for i in range(4)
    ]
    path = tmp_path / "models.json"
    path.write_text(json.dumps({"models": models}))
    return path


def test_correlations_are_read_against_negated_perplexity(tmp_path):
    bench = load_benchmark(_tiny_file(tmp_path))
    ranked = rank_proxies(bench, ["params"], batch=text_batch(batch_size=2, seq_len=16))
    assert ranked["params"].kendall_tau == pytest.approx(1.0)
    assert ranked["params"].spearman_rho == pytest.approx(1.0)


@pytest.mark.parametrize(
    "mutate, message",
    [
        (lambda m: m.__setitem__("models", []), "at least 2 trained models"),
        (lambda m: m.__setitem__("models", {"a": 1}), "at least 2 trained models"),
        (lambda m: m["models"][1]["config"].__setitem__("n_layer", 3), "'m1' does not build: n_layer is 3"),
        (lambda m: m["models"][2]["config"].__setitem__("d_model", 100), "'m2' does not build"),
        (lambda m: m["models"][0]["config"].__setitem__("d_inner", [4096, 512]), "'m0' does not build"),
        (lambda m: m["models"][3].pop("config"), "'m3' has no 'config'"),
        (lambda m: m["models"][0].__setitem__("valid_ppl", "low"), "'m0' has no positive finite 'valid_ppl'"),
        (lambda m: m["models"][0]["config"].pop("n_head"), "needs integer n_layer"),
    ],
)
def test_bad_benchmark_files_give_one_line(tmp_path, capsys, mutate, message):
    raw = json.loads(_tiny_file(tmp_path).read_text())
    mutate(raw)
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(raw))
    with pytest.raises(ValueError, match=message):
        load_benchmark(path)
    assert main(["rank", "--benchmark", str(path), "--quiet"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "Traceback" not in err


def test_a_missing_benchmark_names_the_bundled_ones(capsys):
    assert main(["rank", "--benchmark", "lts-gpt2", "--quiet"]) == 2
    assert "bundled benchmarks: nas-bench-bert, lts-gpt2-wt103" in capsys.readouterr().err
    assert main(["rank", "--benchmark", "lts-gpt2-wt103", "--metric", "glue", "--quiet"]) == 2
    assert "scored by valid_ppl or test_ppl" in capsys.readouterr().err


def test_rank_cli_on_decoders_says_which_way_scores_are_read(tmp_path, capsys):
    out = tmp_path / "rank.json"
    code = main(["rank", "--benchmark", str(_tiny_file(tmp_path)), "--proxy", "wpca", "--proxy", "hidden_covariance",
                 "--batch-size", "2", "--seq-len", "16", "--json", str(out), "--quiet"])
    assert code == 0
    printed = capsys.readouterr().out
    assert "against -valid_ppl (lower valid_ppl is better)" in printed and "paper tau" not in printed
    written = json.loads(out.read_text())
    assert written["lower_is_better"] is True
    assert set(written["proxies"]) == {"wpca", "hidden_covariance", "num_layers", "params"}


def test_hidden_covariance_follows_serianni_and_kalitas_definition():
    rng = np.random.default_rng(0)
    h = rng.standard_normal((500, 6))
    h[:, 1] = h[:, 0] + 0.1 * h[:, 1]  # two strongly correlated features
    ours = covariance_score(correlation_eigenvalues(torch.tensor(h)))
    # Their code: corrcoef over features (rows = features), eigenvalues, -sum(log(v + k) + 1 / (v + k)).
    v = np.linalg.eigvalsh(np.corrcoef(h.T))
    theirs = -np.sum(np.log(v + 1e-5) + 1.0 / (v + 1e-5))
    assert ours == pytest.approx(theirs, rel=1e-9)
    independent = covariance_score(correlation_eigenvalues(torch.tensor(rng.standard_normal((500, 6)))))
    assert independent > ours and independent <= -6 + 1e-3  # the maximum is -width
    constant = torch.tensor(h).clone()
    constant[:, 5] = 3.0
    assert np.isfinite(covariance_score(correlation_eigenvalues(constant)))  # a constant feature is left out


def test_hidden_covariance_leaves_the_model_as_it_found_it():
    space = DecoderSpace.small()
    model = space.build(space.sample(1), seed=0).train()
    before = copy.deepcopy(model.state_dict())
    result = compute_proxy("hidden_covariance", model, text_batch(batch_size=2, seq_len=16))
    assert len(result.parts["layer_scores"]) == len(model.layers)
    assert model.training and all(not layer._forward_hooks for layer in model.layers)
    assert all(torch.equal(before[k], v) for k, v in model.state_dict().items())


def test_a_parameter_band_is_respected_by_the_sampler_and_the_objective():
    space = DecoderSpace.lts_gpt2()
    band = (5e6, 12e6)
    sampler = WPCASampler(space, min_params=band[0], max_params=band[1], population_size=4, seed=0)
    study = optuna.create_study(directions=["maximize"], sampler=sampler)
    objective = ZeroCostObjective(space, proxy="params", batch=text_batch(batch_size=2, seq_len=16),
                                  min_params=band[0], max_params=band[1])
    study.optimize(objective, n_trials=8)
    counts = [t.user_attrs["num_params"] for t in study.trials]
    assert all(band[0] <= n <= band[1] for n in counts)
    # A sampler that ignores the band: the objective prunes below it before building anything.
    low = optuna.create_study(sampler=optuna.samplers.RandomSampler(seed=0), direction="maximize")
    low.enqueue_trial(space.to_params(space.from_lts_config(RAW["models"][0]["config"])))  # 1.8M parameters
    low.optimize(objective, n_trials=1)
    assert low.trials[0].state == optuna.trial.TrialState.PRUNED
    assert low.trials[0].user_attrs["feasible"] is False
    with pytest.raises(ValueError, match="parameter band is empty"):
        WPCASampler(space, min_params=12e6, max_params=5e6)


def test_search_preset_lts_gpt2_keeps_the_band(tmp_path, capsys):
    db = f"sqlite:///{tmp_path / 'lts.db'}"
    assert main(["search", "--preset", "lts-gpt2", "--storage", db, "--n-trials", "2", "--population-size", "2",
                 "--proxy", "params", "--batch-size", "2", "--seq-len", "16", "--quiet"]) == 0
    study = optuna.load_study(study_name="optuna-wpca", storage=db)
    assert all(5e6 <= t.user_attrs["num_params"] <= 12e6 for t in study.trials)
    capsys.readouterr()
    assert main(["search", "--preset", "lts-gpt2", "--min-params", "2e7", "--storage", db, "--quiet"]) == 2
    assert "parameter band is empty" in capsys.readouterr().err
