"""A search with a combined objective: the reference sample recorded, resumed runs scoring alike,
show/export/dashboard note, and bad input refused in one line with nothing written."""

import json
import subprocess
import sys

import optuna
import pytest

import optuna_wpca
from optuna_wpca.cli import main
from optuna_wpca.proxies import DEFAULT_OBJECTIVES, ReferenceSample, default_objective, get_proxy

TINY_SPACE = {"type": "wpca", "num_layers": 3, "hidden_size": 64, "bert_heads": 4, "mobilebert_heads": 2}
FAST = ["--batch-size", "8", "--seq-len", "16", "--quiet", "--reference-size", "6"]
COMBINED = "vpca_params_saliency"  # the default of 0.2, still registered
TINY_DECODER = {"type": "decoder", "num_layers_choices": [2], "hidden_sizes": [64], "heads": [2, 4],
                "ffn_sizes": [128, 256], "vocab_size": 30522, "max_position_embeddings": 512,
                "count": "non_embedding"}


@pytest.fixture()
def space_file(tmp_path):
    path = tmp_path / "space.json"
    path.write_text(json.dumps(TINY_SPACE))
    return path


def test_the_default_objective_follows_the_space_family():
    spaces = optuna_wpca.spaces
    for space in (spaces.WPCASpace.small(), spaces.ELMSpace.small(), spaces.FlexiBERTSpace()):
        assert space.family == "encoder" and default_objective(space) == "wpca"
    assert default_objective(spaces.DecoderSpace.lts_gpt2()) == DEFAULT_OBJECTIVES["decoder"] == "wpca_saliency"
    decoders = get_proxy("wpca_saliency")
    assert decoders.parts == ("wpca", "synaptic_saliency") and decoders.direction == "maximize"
    assert get_proxy(COMBINED).parts == ("vpca", "params", "synaptic_saliency")
    assert {"wpca_saliency", COMBINED} <= set(optuna_wpca.proxies.list_proxies())

    class Other(spaces.WPCASpace):
        kind = "other-family-test"
        family = "speech"

    with pytest.raises(ValueError, match="no default objective for the space family 'speech'"):
        default_objective(Other())
    with pytest.warns(FutureWarning, match="DEFAULT_OBJECTIVE is the default of 0.2") as caught:
        assert optuna_wpca.DEFAULT_OBJECTIVE == COMBINED
    with pytest.warns(FutureWarning, match="DEFAULT_OBJECTIVE is the default of 0.2") as caught_proxies:
        assert optuna_wpca.proxies.DEFAULT_OBJECTIVE == COMBINED
    assert caught[0].filename == caught_proxies[0].filename == __file__  # the user's line, by either path


@pytest.mark.parametrize("space, expected", [(TINY_SPACE, "wpca"), (TINY_DECODER, "wpca_saliency")])
def test_a_search_without_proxy_uses_its_family_default(tmp_path, space, expected):
    path = tmp_path / "space.json"
    path.write_text(json.dumps(space))
    url = f"sqlite:///{tmp_path / 'f.db'}"
    assert main(["search", "--space", str(path), "--storage", url, "--study-name", "f", "--n-trials", "3",
                 "--population-size", "3", *FAST]) == 0
    study = optuna.load_study(study_name="f", storage=url)
    record = optuna_wpca.read_search(study)
    assert record.proxies == (expected,) and study.metric_names == [expected]
    # only a combination draws a reference sample
    assert (record.reference is not None) == (expected == "wpca_saliency")
    assert sum(t.value is not None for t in study.trials) == 3


def test_a_search_records_its_reference_and_a_resumed_run_scores_alike(tmp_path, space_file, capsys):
    url = f"sqlite:///{tmp_path / 's.db'}"
    base = ["search", "--space", str(space_file), "--storage", url, "--study-name", "c", "--population-size", "4",
            "--sampler-seed", "3", "--proxy", COMBINED, *FAST]
    assert main([*base, "--n-trials", "6"]) == 0
    study = optuna.load_study(study_name="c", storage=url)
    record = optuna_wpca.read_search(study)
    assert record.proxies == (COMBINED,)
    assert record.reference["size"] == 6 and record.reference["seed"] == 0
    assert set(record.reference["values"]) == {"vpca", "params", "synaptic_saliency"}
    assert len(record.reference["architectures"]) == 6
    first = {json.dumps(t.params, sort_keys=True): t.value for t in study.trials if t.value is not None}
    trial = next(t for t in study.trials if t.value is not None)
    assert {f"{COMBINED}.vpca", f"{COMBINED}.synaptic_saliency.z"} <= set(trial.user_attrs)

    # a rerun in a new process state: the reference is read back, so an architecture scored again
    # (enqueued here) gets the value it had
    objective = optuna_wpca.ZeroCostObjective(
        optuna_wpca.spaces.space_from_dict(TINY_SPACE), proxies=[COMBINED], reference_size=6,
        batch=optuna_wpca.text_batch(batch_size=8, seq_len=16))
    study.enqueue_trial(trial.params)
    study.optimize(objective, n_trials=1)
    again = study.trials[-1]
    assert again.value == pytest.approx(first[json.dumps(trial.params, sort_keys=True)], rel=1e-6)
    assert optuna_wpca.read_search(study).reference == record.reference  # not drawn again

    assert main([*base, "--n-trials", "8"]) == 0
    assert main(["show", "--storage", url, "--study-name", "c", "--top", "2"]) == 0
    assert COMBINED in capsys.readouterr().out
    out = tmp_path / "export"
    assert main(["export", "--storage", url, "--study-name", "c", "--out", str(out)]) == 0
    assert (out / "config.json").is_file()


def test_the_dashboard_note_shows_the_parts(tmp_path, space_file):
    from optuna_dashboard._note import get_note_from_system_attrs  # the dashboard's own reader

    url = f"sqlite:///{tmp_path / 'd.db'}"
    assert main(["search", "--space", str(space_file), "--storage", url, "--study-name", "d", "--n-trials", "2",
                 "--population-size", "2", "--artifact-dir", str(tmp_path / "art"), "--proxy", COMBINED,
                 *FAST]) == 0
    study = optuna.load_study(study_name="d", storage=url)
    trial = next(t for t in study.trials if t.value is not None)
    note = get_note_from_system_attrs(study._storage.get_study_system_attrs(study._study_id), trial._trial_id)
    assert f"{COMBINED}: synaptic_saliency.z" in note["body"] and f"| {COMBINED} |" in note["body"]


def run_cli(*args):
    return subprocess.run([sys.executable, "-m", "optuna_wpca.cli", *args], capture_output=True, text=True)


@pytest.mark.parametrize("extra, message", [
    (["--proxy", "wpca+nosuch"], "unknown proxy 'nosuch' in the combination 'wpca+nosuch'"),
    (["--proxy", "wpca+wpca"], "a combination names at least two different proxies"),
    (["--proxy", COMBINED, "--reference-size", "0"], "reference_size must be a whole number >= 2"),
])
def test_bad_combination_input_is_one_line_and_writes_nothing(tmp_path, space_file, extra, message):
    db = tmp_path / "never.db"
    result = run_cli("search", "--space", str(space_file), "--storage", f"sqlite:///{db}", "--population-size", "4",
                     *FAST, *extra)
    assert result.returncode == 2, result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and message in lines[0], result.stderr
    assert not db.exists()


@pytest.mark.parametrize("extra, message", [
    (["--proxy", "vpca+params"], "was searched with the proxies"),
    (["--reference-seed", "5"], "records a reference sample of 6 architectures drawn with seed 0"),
])
def test_a_study_resumed_with_another_combination_is_refused(tmp_path, space_file, extra, message):
    url = f"sqlite:///{tmp_path / 'r.db'}"
    base = ["search", "--space", str(space_file), "--storage", url, "--study-name", "r", "--population-size", "4",
            "--proxy", COMBINED, *FAST]
    assert main([*base, "--n-trials", "4"]) == 0
    before = optuna.load_study(study_name="r", storage=url)
    n, attrs = len(before.trials), before.user_attrs
    result = run_cli(*base, "--n-trials", "8", *extra)
    assert result.returncode == 2, result.stderr
    lines = [line for line in result.stderr.strip().splitlines() if "Using an existing study" not in line]
    assert len(lines) == 1 and message in lines[0], result.stderr
    after = optuna.load_study(study_name="r", storage=url)
    assert len(after.trials) == n and after.user_attrs == attrs


def test_an_empty_or_constant_reference_is_refused():
    with pytest.raises(ValueError, match="the reference sample is empty"):
        ReferenceSample({"wpca": []}, seed=0)
    with pytest.raises(ValueError, match="constant over the reference sample"):
        ReferenceSample({"params": [3.0, 3.0]}, seed=0).scale("params")


def test_any_optuna_sampler_can_drive_a_combination_and_the_reference_fits_the_budget():
    space = optuna_wpca.spaces.space_from_dict(TINY_SPACE)
    budget = 45_000
    objective = optuna_wpca.ZeroCostObjective(space, "vpca+params", max_params=budget, reference_size=5,
                                              batch=optuna_wpca.text_batch(batch_size=8, seq_len=16))
    study = optuna.create_study(direction="maximize", sampler=optuna.samplers.TPESampler(seed=0))
    study.optimize(objective, n_trials=6)
    reference = optuna_wpca.read_search(study).reference
    assert reference["size"] == 5
    assert all(space.num_params(space.from_params(p)) <= budget for p in reference["architectures"])
    done = [t for t in study.trials if t.state.name == "COMPLETE"]
    assert done and all(t.user_attrs["vpca+params.params"] <= budget for t in done)
    # the value is the mean of the parts' standardised logs, computed from the recorded reference
    ref = ReferenceSample.from_dict(reference)
    t = done[0]
    parts = {"vpca": t.user_attrs["vpca+params.vpca"], "params": t.user_attrs["vpca+params.params"]}
    assert t.value == pytest.approx(optuna_wpca.proxies.combine(("vpca", "params"), parts, ref)[0], rel=1e-3)
