"""The study record: one typed object that says what a study was searched with, so every command
that scores for the study does it on the study's own minibatch, seed and eta, and a resumed search
with other settings is refused in one line."""

import json

import optuna
import pytest

from optuna_wpca import (
    ELMSpace, MinibatchSpec, WPCASampler, ZeroCostObjective, bundled_text_path, read_search, record_search, text_batch,
)
from optuna_wpca._refine import REFINED_FROM_ATTR, refine
from optuna_wpca.cli import main

SPACE = ELMSpace(num_layers=3, hidden_size=96, bert_head_choices=(1, 2, 4, 8), mobilebert_head_choices=(1, 2, 3))


@pytest.fixture()
def corpus(tmp_path):
    path = tmp_path / "corpus.txt"
    lines = bundled_text_path().read_text(encoding="utf-8").splitlines()
    path.write_text("\n".join(lines[400:900]) + "\n", encoding="utf-8")
    return path


def test_a_batch_cut_from_a_file_is_recorded_with_its_fingerprint_and_cut_again_the_same(corpus):
    batch = text_batch(corpus, batch_size=4, seq_len=32, seed=7)
    assert batch.source.corpus == str(corpus.resolve()) and len(batch.source.corpus_sha256) == 64
    study = optuna.create_study()
    record = record_search(study, SPACE, batch=batch, init_seed=3, eta=0.95)
    again = read_search(study)
    assert again == record and again.minibatch == batch.source
    assert again.init_seed == 3 and again.eta == 0.95
    assert bool((again.scoring_batch().input_ids == batch.input_ids).all())
    # Another seed cuts other windows; the record says which.
    assert not bool((MinibatchSpec(4, 32, 8, str(corpus.resolve()), batch.source.corpus_sha256).build().input_ids
                     == batch.input_ids).all())


def test_refine_scores_on_the_studys_corpus_seed_and_eta_and_refuses_a_changed_or_missing_corpus(
        tmp_path, corpus, capsys):
    space_file = tmp_path / "space.json"
    space_file.write_text(json.dumps(SPACE.to_dict()))
    url = f"sqlite:///{tmp_path / 'r.db'}"
    budget = SPACE.num_params(SPACE.sample(0)) * 1.5
    assert main(["search", "--space", str(space_file), "--storage", url, "--study-name", "r", "--n-trials", "6",
                 "--population-size", "3", "--batch-size", "8", "--seq-len", "64", "--batch-seed", "5",
                 "--seed", "2", "--eta", "0.9", "--corpus", str(corpus), "--max-params", str(int(budget)),
                 "--proxy", "wpca", "--quiet"]) == 0
    study = optuna.load_study(study_name="r", storage=url)
    parent = study.best_trial
    assert main(["refine", "--storage", url, "--study-name", "r", "--trial", str(parent.number)]) == 0
    study = optuna.load_study(study_name="r", storage=url)
    refined = [t for t in study.trials if t.user_attrs.get(REFINED_FROM_ATTR) == parent.number]
    assert len(refined) == 1 and refined[0].state.name == "COMPLETE"  # this seed's best trial has a change
    arch = SPACE.from_params(refined[0].params)
    own = ZeroCostObjective(SPACE, batch=text_batch(corpus, batch_size=8, seq_len=64, seed=5), seed=2, eta=0.9)
    bundled = ZeroCostObjective(SPACE, batch=text_batch(batch_size=8, seq_len=64))
    assert refined[0].value == own.score(arch)[0][0]
    assert refined[0].value != bundled.score(arch)[0][0]
    # The parent re-scored the same way gives its recorded value: the two compare on one minibatch.
    assert parent.value == own.score(SPACE.from_params(parent.params))[0][0]
    capsys.readouterr()
    before = len(study.trials)
    corpus.write_text(corpus.read_text() + "one more line of text.\n")
    assert main(["refine", "--storage", url, "--study-name", "r", "--trial", str(parent.number)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "has changed since" in err[0] and str(corpus.resolve()) in err[0], err
    corpus.unlink()
    assert main(["refine", "--storage", url, "--study-name", "r", "--trial", str(parent.number)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "is gone" in err[0], err
    assert len(optuna.load_study(study_name="r", storage=url).trials) == before  # nothing enqueued


def test_a_python_study_resumed_with_another_seed_or_eta_is_refused_and_in_memory_text_is_not_cut_again():
    text = bundled_text_path().read_text(encoding="utf-8").splitlines()[100:600]
    batch = text_batch(text, batch_size=8, seq_len=64)
    study = optuna.create_study(direction="maximize",
                                sampler=WPCASampler(SPACE, population_size=3, seed=0))
    study.optimize(ZeroCostObjective(SPACE, batch=batch), n_trials=3)
    assert read_search(study).minibatch.corpus == "in-memory text"
    for options, change in (({"eta": 0.9}, "eta 0.99 -> 0.9"), ({"seed": 1}, "init_seed 0 -> 1")):
        with pytest.raises(ValueError, match=change):
            study.optimize(ZeroCostObjective(SPACE, batch=batch, **options), n_trials=1)
    other = text_batch(text[:300], batch_size=8, seq_len=64)
    with pytest.raises(ValueError, match="corpus_sha256"):
        study.optimize(ZeroCostObjective(SPACE, batch=other), n_trials=1)
    assert len([t for t in study.trials if t.state.name == "COMPLETE"]) == 3
    with pytest.raises(ValueError, match="text given in Python"):
        refine(study, study.best_trial.number)
    refine(study, study.best_trial.number, batch=batch)  # the same batch, given back: works


def test_export_defaults_to_the_initialisation_seed_the_study_scored_with(tmp_path):
    import torch
    from transformers import AutoModel

    from optuna_wpca import WPCASpace

    space = WPCASpace(num_layers=2, hidden_size=32, bert_heads=2, mobilebert_heads=2)
    space_file = tmp_path / "space.json"
    space_file.write_text(json.dumps(space.to_dict()))
    url = f"sqlite:///{tmp_path / 'e.db'}"
    assert main(["search", "--space", str(space_file), "--storage", url, "--study-name", "e", "--n-trials", "3",
                 "--population-size", "3", "--batch-size", "4", "--seq-len", "16", "--seed", "3", "--proxy", "wpca",
                 "--quiet"]) == 0
    assert main(["export", "--storage", url, "--study-name", "e", "--out", str(tmp_path / "out")]) == 0
    meta = json.loads((tmp_path / "out" / "architecture.json").read_text())
    assert meta["seed"] == 3 and "seed 3" in (tmp_path / "out" / "README.md").read_text()
    scored = space.build(space.from_params(meta["params"]), seed=3)
    exported = AutoModel.from_pretrained(tmp_path / "out")
    ids = torch.tensor([[101, 2023, 2003, 102]])
    with torch.no_grad():
        assert torch.equal(exported(ids).last_hidden_state, scored(ids))
