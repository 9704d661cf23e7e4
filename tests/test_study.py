"""The study contract: a search is recorded once in its study and read back by every consumer."""

import re
from pathlib import Path

import optuna
import pytest

from optuna_wpca import (
    PRESETS,
    Budget,
    CandidateModel,
    WPCASampler,
    WPCASpace,
    ZeroCostObjective,
    preset,
    read_search,
    record_search,
    text_batch,
    top_trials,
)
from optuna_wpca.cli import main as cli

README = Path(__file__).resolve().parents[1] / "README.md"
SPACE = WPCASpace(num_layers=3, hidden_size=64, bert_heads=4, mobilebert_heads=2)
BATCH = text_batch(batch_size=4, seq_len=16)


@pytest.fixture(autouse=True)
def quiet():
    optuna.logging.set_verbosity(optuna.logging.WARNING)


def readme_python_example() -> str:
    text = README.read_text()
    start = text.index("## In Python")
    return re.search(r"```python\n(.*?)```", text[start:], re.S).group(1)


def test_the_readme_example_then_show_and_export_from_the_cli(tmp_path, monkeypatch, capsys):
    code = readme_python_example()
    assert code.count("15.7e6") == 1  # the budget is stated once
    url = f"sqlite:///{tmp_path / 'readme.db'}"
    for old, new in (("sqlite:///optuna_wpca.db", url), ("n_trials=sampler.n_trials", "n_trials=3"),
                     ('"wpca-small-best"', repr(str(tmp_path / "best")))):
        assert old in code
        code = code.replace(old, new)
    monkeypatch.setattr("optuna_wpca._objective.text_batch", lambda: text_batch(batch_size=8, seq_len=32))
    namespace: dict = {}
    exec(compile(code, "README.md", "exec"), namespace)
    study = namespace["study"]
    assert len(study.trials) == 3
    record = read_search(study)
    assert record.budget.max_params == 15.7e6 and record.proxies == ("wpca",)  # the encoders' default
    assert record.batch == (8, 32) and record.reference is None
    assert record.space.to_dict() == WPCASpace.small().to_dict()
    assert study.metric_names == ["wpca"]  # optuna-dashboard's label instead of "Objective 0"
    assert sum(p.numel() for p in CandidateModel.from_pretrained(tmp_path / "best").parameters()) > 0

    capsys.readouterr()
    assert cli(["show", "--storage", url, "--study-name", "wpca-small", "--top", "2"]) == 0
    shown = capsys.readouterr().out
    assert f"trial {study.best_trial.number:>5}" in shown and "layer 11:" in shown
    out = tmp_path / "exported"
    assert cli(["export", "--storage", url, "--study-name", "wpca-small", "--out", str(out)]) == 0
    model = CandidateModel.from_pretrained(out)
    assert sum(p.numel() for p in model.parameters()) == WPCASpace.small().num_params(
        WPCASpace.small().from_params(study.best_trial.params), "all")


def test_a_budget_given_only_to_the_objective_reaches_the_sampler():
    budget = SPACE.min_params() * 1.3
    study = optuna.create_study(direction="maximize", sampler=WPCASampler(SPACE, population_size=4, seed=0))
    study.optimize(ZeroCostObjective(SPACE, batch=BATCH, max_params=budget), n_trials=12)
    assert read_search(study).budget == Budget(max_params=budget)
    # Trial 0 was proposed before the objective recorded the budget; every later one fits it.
    later = [t for t in study.trials if t.number > 0]
    assert all(t.state == optuna.trial.TrialState.COMPLETE and t.user_attrs["feasible"] for t in later)
    assert all(t.user_attrs["num_params"] <= budget for t in later)


def test_a_budget_given_to_both_must_agree():
    budget = SPACE.min_params() * 2
    study = optuna.create_study(direction="maximize",
                                sampler=WPCASampler(SPACE, max_params=budget, population_size=4, seed=0))
    study.optimize(ZeroCostObjective(SPACE, batch=BATCH, max_params=budget), n_trials=2)  # same value: fine
    other = ZeroCostObjective(SPACE, batch=BATCH, max_params=budget * 2)
    with pytest.raises(ValueError, match=r"was searched with the budget <= [\d,]+ parameters, not <= [\d,]+"):
        study.optimize(other, n_trials=1)


def test_another_proxy_or_minibatch_on_a_recorded_study_is_refused():
    study = optuna.create_study(direction="maximize")
    study.optimize(ZeroCostObjective(SPACE, batch=BATCH), n_trials=1)
    with pytest.raises(ValueError, match="searched with the proxies wpca, not vpca"):
        study.optimize(ZeroCostObjective(SPACE, "vpca", batch=BATCH), n_trials=1)
    with pytest.raises(ValueError, match="searched with the minibatch 4x16, not 8x16"):
        study.optimize(ZeroCostObjective(SPACE, batch=text_batch(batch_size=8, seq_len=16)), n_trials=1)
    with pytest.raises(ValueError, match="different space"):
        record_search(study, WPCASpace(num_layers=2, hidden_size=64, bert_heads=4, mobilebert_heads=2))


def test_a_study_of_someone_else_is_refused_by_the_cli_and_by_read_search(tmp_path, capsys):
    url = f"sqlite:///{tmp_path / 'other.db'}"
    study = optuna.create_study(storage=url, study_name="plain")
    study.optimize(lambda t: t.suggest_float("x", 0, 1), n_trials=2)
    with pytest.raises(ValueError, match="was not created by optuna-wpca"):
        read_search(study)
    with pytest.raises(ValueError, match="2 trials not made by optuna-wpca"):
        record_search(study, SPACE)
    assert cli(["show", "--storage", url, "--study-name", "plain"]) == 2
    assert "was not created by optuna-wpca (no space recorded)" in capsys.readouterr().err


def test_a_study_searched_before_the_record_existed_is_adopted():
    study = optuna.create_study(direction="maximize")
    study.optimize(lambda t: float(SPACE.num_params(SPACE.suggest(t))), n_trials=3)
    record = record_search(study, SPACE, Budget(max_params=SPACE.min_params() * 3))
    assert read_search(study).budget == record.budget


def test_every_preset_has_a_budget_its_space_can_meet():
    for name, p in PRESETS.items():
        space, budget = preset(name)
        assert budget is p.budget
        budget.check(space)
        if budget.max_params is not None:
            assert space.min_params() <= budget.max_params
    assert preset("wpca-small")[1] == Budget(max_params=15.7e6)
    assert preset("lts-gpt2")[1] == Budget(max_params=12e6, min_params=5e6)
    with pytest.raises(ValueError, match="unknown preset 'wpca-huge'; choose from wpca-small"):
        preset("wpca-huge")


@pytest.mark.parametrize("bad", [float("nan"), float("inf"), -1.0, "10M", True])
def test_a_malformed_budget_is_a_clear_error(bad):
    with pytest.raises(ValueError, match="max_params must be"):
        WPCASampler(SPACE, max_params=bad)


def test_top_trials_are_feasible_distinct_and_ordered():
    budget = SPACE.min_params() * 1.5
    study = optuna.create_study(direction="maximize",
                                sampler=WPCASampler(SPACE, max_params=budget, population_size=4, seed=1))
    study.optimize(ZeroCostObjective(SPACE, batch=BATCH), n_trials=10)
    best = top_trials(study, 5)
    values = [t.value for t in best]
    assert values == sorted(values, reverse=True) and values[0] == study.best_value
    assert len({tuple(sorted(t.params.items())) for t in best}) == len(best)
    assert all(t.user_attrs["num_params"] <= budget for t in best)


def test_export_refuses_unfinished_trials_and_full_directories_and_show_creates_nothing(tmp_path, capsys):
    url = f"sqlite:///{tmp_path / 's.db'}"
    study = optuna.create_study(storage=url, study_name="s", direction="maximize",
                                sampler=WPCASampler(SPACE, population_size=4, seed=0))
    objective = ZeroCostObjective(SPACE, batch=BATCH)
    study.optimize(objective, n_trials=2)
    failed = study.ask()
    study.tell(failed, state=optuna.trial.TrialState.FAIL)
    running = study.ask()
    base = ["export", "--storage", url, "--study-name", "s"]

    def error(args):
        assert cli(args) == 2
        return capsys.readouterr().err

    assert f"trial {failed.number} is FAIL; only a completed trial" in error(
        base + ["--trial", str(failed.number), "--out", str(tmp_path / "a")])
    assert f"trial {running.number} is RUNNING" in error(base + ["--trial", str(running.number), "--out",
                                                                  str(tmp_path / "a")])
    full = tmp_path / "full"
    full.mkdir()
    (full / "notes.txt").write_text("mine")
    assert "is not an empty directory; pass --overwrite" in error(base + ["--out", str(full)])
    assert (full / "notes.txt").read_text() == "mine" and len(list(full.iterdir())) == 1
    (tmp_path / "file").write_text("x")
    assert "is a file, not a directory" in error(base + ["--out", str(tmp_path / "file")])
    assert cli(base + ["--out", str(full), "--overwrite"]) == 0
    assert (full / "config.json").is_file()
    missing = tmp_path / "missing.db"
    assert "does not exist" in error(["show", "--storage", f"sqlite:///{missing}", "--study-name", "s"])
    assert not missing.exists()


def test_a_study_with_the_wrong_direction_for_its_proxy_is_refused():
    study = optuna.create_study(direction="maximize")
    with pytest.raises(ValueError, match=r"has directions \['maximize'\], but the proxies want latency \(minimize\)"):
        study.optimize(ZeroCostObjective(SPACE, "latency", batch=BATCH), n_trials=1)
    pareto = optuna.create_study(directions=["maximize", "minimize"])
    pareto.optimize(ZeroCostObjective(SPACE, proxies=("wpca", "latency"), batch=BATCH, repeats=2), n_trials=2)
    assert pareto.metric_names == ["wpca", "latency (ms)"]


def test_a_rerun_with_other_ga_settings_is_refused_in_one_line(tmp_path, capsys):
    url = f"sqlite:///{tmp_path / 'ga.db'}"
    base = ["search", "--preset", "wpca-tiny", "--storage", url, "--study-name", "g", "--batch-size", "4",
            "--seq-len", "16", "--quiet", "--n-trials", "2"]
    assert cli(base + ["--population-size", "4", "--proxy", "wpca"]) == 0
    assert read_search(optuna.load_study(study_name="g", storage=url)).ga["population_size"] == 4
    capsys.readouterr()
    assert cli(base + ["--population-size", "6", "--n-trials", "3", "--proxy", "wpca"]) == 2
    err = capsys.readouterr().err
    assert "was searched with other GA settings (population_size 4 -> 6)" in err and len(err.splitlines()) == 1
    assert cli(base + ["--population-size", "4", "--proxy", "latency", "--n-trials", "3"]) == 2
    assert "searched with the proxies wpca, not latency" in capsys.readouterr().err
    assert len(optuna.load_study(study_name="g", storage=url).trials) == 2  # nothing written


def test_a_sampler_with_other_settings_leaves_no_running_trial():
    study = optuna.create_study(direction="maximize", sampler=WPCASampler(SPACE, population_size=4, seed=0))
    study.optimize(ZeroCostObjective(SPACE, batch=BATCH), n_trials=2)
    study.sampler = WPCASampler(SPACE, population_size=6, seed=0)
    with pytest.raises(ValueError, match="other GA settings"):
        study.optimize(ZeroCostObjective(SPACE, batch=BATCH), n_trials=1)
    assert [t.state.name for t in study.trials] == ["COMPLETE", "COMPLETE", "FAIL"]
