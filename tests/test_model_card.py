"""The exported model card lists scores only (values with units), both parameter counts, and how the
trial was found: budget, minibatch, corpus, seeds. (The distilled card: tests/test_cli.py.)"""

import json

import optuna
import pytest

from optuna_wpca.cli import main
from optuna_wpca.spaces import space_from_dict

TINY_SPACE = {"type": "wpca", "num_layers": 3, "hidden_size": 64, "bert_heads": 4, "mobilebert_heads": 2}


@pytest.fixture()
def searched(tmp_path):
    space_file = tmp_path / "space.json"
    space_file.write_text(json.dumps(TINY_SPACE))
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("the quick brown fox jumps over the lazy dog near the river bank . " * 300)
    url = f"sqlite:///{tmp_path / 'c.db'}"

    def search(name, *proxies):
        assert main(["search", "--space", str(space_file), "--storage", url, "--study-name", name, "--n-trials", "4",
                     "--population-size", "2", "--batch-size", "8", "--seq-len", "16", "--batch-seed", "3",
                     "--corpus", str(corpus), "--max-params", "60000", "--quiet",
                     *[a for p in proxies for a in ("--proxy", p)]]) == 0
        return optuna.load_study(study_name=name, storage=url)

    def export(name, *extra):
        out = tmp_path / f"export-{name}"
        assert main(["export", "--storage", url, "--study-name", name, "--out", str(out), *extra]) == 0
        return (out / "README.md").read_text()

    return search, export, corpus


def _score_rows(card):
    table = card.split("## Scores")[1].split("## How it was found")[0]
    return [line for line in table.splitlines() if line.startswith("| ") and "---" not in line][1:]


def test_a_zero_cost_card_lists_scores_counts_and_the_search(searched):
    search, export, corpus = searched
    study = search("z", "wpca")
    card = export("z")
    best = study.best_trial
    rows = _score_rows(card)
    assert len(rows) == 1 and rows[0].startswith(f"| wpca | {best.value:,.0f} |")  # no eta, no repeated count
    space = space_from_dict(TINY_SPACE)
    arch = space.from_params(best.params)
    assert f"{space.num_params(arch, 'all'):,} in all; {space.num_params(arch, 'non_embedding'):,} without" in card
    assert "<= 60,000 parameters (counted as 'non_embedding')" in card
    assert f"Minibatch: 8 x 16 tokens of {corpus.resolve()} (SHA-256 " in card and "batch seed 3," in card
    assert "- Initialisation seed 0; eta 0.99." in card


def test_a_multi_objective_card_gives_latency_its_unit_and_shape(searched):
    search, export, _ = searched
    study = search("m", "wpca", "latency")
    trial = study.best_trials[0]
    card = export("m", "--trial", str(trial.number))
    rows = _score_rows(card)
    assert len(rows) == 2
    assert rows[1].startswith(f"| latency | {trial.values[1]:.4g} ms |")
    assert "measured on 1 x 128 tokens on cpu" in rows[1]  # the documented shape, on a 8 x 16 minibatch
    assert trial.user_attrs["latency.input"] == [1, 128] and trial.user_attrs["latency.unit"] == "ms"
    assert trial.user_attrs["latency.latency_iqr_ms"] == float(f"{trial.user_attrs['latency.latency_iqr_ms']:.4g}")


def test_a_resumed_search_on_another_corpus_or_seed_is_refused(searched, tmp_path, capsys):
    search, _, corpus = searched
    search("r", "wpca")
    url = f"sqlite:///{tmp_path / 'c.db'}"
    other = tmp_path / "other.txt"
    other.write_text("a different corpus with other words in it . " * 300)
    for extra, message in ((["--corpus", str(other)], "was searched with other minibatch source or seeds (corpus"),
                           (["--corpus", str(corpus), "--batch-seed", "4"], "batch_seed 3 -> 4"),
                           (["--corpus", str(corpus), "--eta", "0.9"], "eta 0.99 -> 0.9")):
        code = main(["search", "--space", str(tmp_path / "space.json"), "--storage", url, "--study-name", "r",
                     "--n-trials", "6", "--population-size", "2", "--batch-size", "8", "--seq-len", "16",
                     "--batch-seed", "3", "--max-params", "60000", "--quiet", "--proxy", "wpca", *extra])
        err = capsys.readouterr().err.strip().splitlines()
        assert code == 2 and message in err[-1] and "Traceback" not in "\n".join(err), err
    assert len(optuna.load_study(study_name="r", storage=url).trials) == 4
