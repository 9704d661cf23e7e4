"""BatchedWrites: trials run on an in-memory copy and reach the real storage whole, a batch at a time."""

import json
import signal
import subprocess
import sys
import time

import optuna
import pytest
from optuna.trial import TrialState

from optuna_wpca import BatchedWrites, WPCASampler, WPCASpace, ZeroCostObjective, record_search, text_batch
from optuna_wpca import Budget
from optuna_wpca.cli import main

SPACE = WPCASpace(num_layers=3, hidden_size=64, bert_heads=4, mobilebert_heads=2)


def _study(url: str, name: str, seed: int = 0) -> tuple[optuna.Study, ZeroCostObjective]:
    sampler = WPCASampler(SPACE, max_params=None, population_size=4, seed=seed)
    batch = text_batch(batch_size=4, seq_len=16)
    objective = ZeroCostObjective(SPACE, batch=batch)
    study = optuna.create_study(storage=url, study_name=name, sampler=sampler, directions=objective.directions,
                                load_if_exists=True)
    record_search(study, SPACE, Budget(), proxies=["wpca"], batch=batch.shape, ga=sampler.settings)
    return study, objective


def _summary(study: optuna.Study) -> list[tuple]:
    gen = WPCASampler._get_generation_key()
    return [(t.number, t.state, t.params, t.values, t.user_attrs, t.system_attrs.get(gen),
             t.system_attrs.get("constraints")) for t in study.trials]


def test_batched_writes_give_the_study_a_plain_run_gives(tmp_path):
    plain, objective = _study(f"sqlite:///{tmp_path / 'plain.db'}", "s")
    plain.optimize(objective, n_trials=14)
    study, objective = _study(f"sqlite:///{tmp_path / 'batched.db'}", "s")
    written_during_run = []
    batched = BatchedWrites(study, every=5)
    with batched as working:
        working.optimize(objective, n_trials=14,
                         callbacks=[batched.callback, lambda s, t: written_during_run.append(len(study.trials))])
    assert written_during_run[:4] == [0, 0, 0, 0] and written_during_run[4] == 5  # a batch at a time
    assert len(study.trials) == 14

    def without_timing(rows):
        return [(*row[:4], {k: v for k, v in row[4].items() if k not in ("seconds", "cached")}, *row[5:])
                for row in rows]

    assert without_timing(_summary(study)) == without_timing(_summary(plain))
    assert max(t.system_attrs[WPCASampler._get_generation_key()] for t in study.trials) >= 2


def test_a_resumed_batched_run_continues_the_generations_and_sees_other_workers(tmp_path):
    url = f"sqlite:///{tmp_path / 'r.db'}"
    study, objective = _study(url, "r")
    with BatchedWrites(study, every=3) as working:
        working.optimize(objective, n_trials=8)
    gen = WPCASampler._get_generation_key()
    before = max(t.system_attrs[gen] for t in study.trials)
    other, other_objective = _study(url, "r", seed=1)  # another worker writes trial by trial meanwhile
    batched = BatchedWrites(study, every=3)
    other.optimize(other_objective, n_trials=2)
    with batched as working:
        working.optimize(objective, n_trials=1, callbacks=[batched.callback])
        assert batched.write() == 1  # the one below the batch size, written on demand
        assert len(working.trials) == 8 + 1 + 2  # the other worker's trials were taken in at the write
        working.optimize(objective, n_trials=5, callbacks=[batched.callback])
    trials = optuna.load_study(study_name="r", storage=url).trials
    assert len(trials) == 16 and len({t.number for t in trials}) == 16
    assert all(t.state == TrialState.COMPLETE for t in trials)
    assert max(t.system_attrs[gen] for t in trials) > before


def test_trials_finished_before_an_error_are_written(tmp_path):
    study, objective = _study(f"sqlite:///{tmp_path / 'e.db'}", "e")
    calls = []

    def failing(trial):
        calls.append(1)
        if len(calls) == 6:
            raise RuntimeError("boom")
        return objective(trial)

    with pytest.raises(RuntimeError, match="boom"):
        with BatchedWrites(study, every=100) as working:
            working.optimize(failing, n_trials=10)
    states = [t.state for t in study.trials]
    assert states.count(TrialState.COMPLETE) == 5 and states.count(TrialState.FAIL) == 1


def test_the_search_record_made_during_the_run_reaches_the_study(tmp_path):
    url = f"sqlite:///{tmp_path / 'a.db'}"
    sampler = WPCASampler(SPACE, population_size=4, seed=0)
    objective = ZeroCostObjective(SPACE, batch=text_batch(batch_size=4, seq_len=16))
    study = optuna.create_study(storage=url, study_name="a", sampler=sampler, directions=objective.directions)
    assert "optuna_wpca.space" not in study.user_attrs
    with BatchedWrites(study, every=2) as working:
        working.optimize(objective, n_trials=3)
    study = optuna.load_study(study_name="a", storage=url)
    assert study.user_attrs["optuna_wpca.space"] == working.user_attrs["optuna_wpca.space"]
    assert len(study.trials) == 3
    # ... so a different search into the same study is refused, as without batched writes
    other = ZeroCostObjective(WPCASpace(num_layers=2, hidden_size=64, bert_heads=4, mobilebert_heads=2),
                              batch=text_batch(batch_size=4, seq_len=16))
    with pytest.raises(ValueError, match="space"):
        with BatchedWrites(study, every=2, sampler=optuna.samplers.RandomSampler(seed=0)) as working:
            other._study_budget(working.ask())


def test_every_must_be_a_positive_count():
    with pytest.raises(ValueError, match="every must be a positive number of trials, got 0"):
        BatchedWrites(optuna.create_study(), every=0)


def test_dashboard_notes_follow_their_trial(tmp_path):
    from optuna_dashboard import save_note

    url = f"sqlite:///{tmp_path / 'n.db'}"
    study = optuna.create_study(storage=url, study_name="n", sampler=optuna.samplers.RandomSampler(seed=0))
    study.optimize(lambda t: t.suggest_float("x", 0, 1), n_trials=2)  # the ids of the two copies now differ

    def noted(trial):
        save_note(trial, f"note of {trial.number}")
        return trial.suggest_float("x", 0, 1)

    with BatchedWrites(study, every=2) as working:
        working.optimize(noted, n_trials=3)
    attrs = study._storage.get_study_system_attrs(study._study_id)
    for t in study.trials[2:]:
        body = "".join(v for k, v in sorted(attrs.items()) if k.startswith(f"dashboard:{t._trial_id}:note_str:"))
        assert body == f"note of {t.number}"


def _search(url: str, space_file, n: int, every: int) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-m", "optuna_wpca.cli", "search", "--space", str(space_file), "--storage", url,
         "--study-name", "w", "--n-trials", str(n), "--population-size", "4", "--write-every", str(every),
         "--batch-size", "4", "--seq-len", "16", "--quiet", "--sampler-seed", "0", "--proxy", "wpca"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def test_cli_write_every_and_ctrl_c(tmp_path, capsys):
    space_file = tmp_path / "space.json"
    space_file.write_text(json.dumps(SPACE.config() | {"type": "wpca"}))
    url = f"sqlite:///{tmp_path / 'w.db'}"
    assert main(["search", "--space", str(space_file), "--storage", url, "--study-name", "w", "--n-trials", "9",
                 "--population-size", "4", "--write-every", "4", "--batch-size", "4", "--seq-len", "16",
                 "--quiet", "--proxy", "wpca"]) == 0
    assert len(optuna.load_study(study_name="w", storage=url).trials) == 9
    proc = _search(url, space_file, 2000, 1000)
    # Far fewer than 1000 trials run before a write, but a batch is written every BATCH_SECONDS too: wait
    # for that write (however busy the machine), so that the Ctrl-C lands in the batched loop itself.
    deadline = time.time() + 300
    while len(optuna.load_study(study_name="w", storage=url).trials) <= 9:
        assert proc.poll() is None and time.time() < deadline, "no timed batch was written"
        time.sleep(0.2)
    written = len(optuna.load_study(study_name="w", storage=url).trials)
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=300)  # a guard against a hang; the latency is benchmarks/stop_latency.py's
    assert proc.returncode == 130, err
    assert "Traceback" not in err and "writing the last" in err
    trials = optuna.load_study(study_name="w", storage=url).trials
    assert len(trials) >= written  # what ran before Ctrl-C was written on the way out
    assert all(t.state.is_finished() for t in trials)
    result = subprocess.run([sys.executable, "-m", "optuna_wpca.cli", "search", "--space", str(space_file),
                             "--storage", url, "--study-name", "w", "--write-every", "0"],
                            capture_output=True, text=True)
    assert result.returncode != 0 and "--write-every must be >= 1" in result.stderr
    assert "Traceback" not in result.stderr
