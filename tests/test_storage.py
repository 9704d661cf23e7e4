"""Storages opened from URLs: SQLite files checked before use, journals, clear errors."""

import subprocess
import sys
from pathlib import Path

import optuna
import pytest

from optuna_wpca import open_storage


def test_a_study_written_by_one_process_is_read_by_another(tmp_path):
    storage = open_storage(f"sqlite:///{tmp_path / 'a.db'}")
    study = optuna.create_study(storage=storage, study_name="s")
    study.optimize(lambda t: t.suggest_float("x", 0, 1), n_trials=3)
    code = (f"import optuna; s = optuna.load_study(study_name='s', storage='sqlite:///{tmp_path / 'a.db'}'); "
            "print(len(s.trials))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.stdout.strip() == "3", out.stderr


def test_journal_and_bad_urls(tmp_path):
    storage = open_storage(f"journal://{tmp_path / 'j.log'}")
    assert isinstance(storage, optuna.storages.JournalStorage)
    optuna.create_study(storage=storage).optimize(lambda t: t.suggest_float("x", 0, 1), n_trials=1)
    assert Path(tmp_path / "j.log").stat().st_size > 0
    with pytest.raises(ValueError, match="storage URL 'optuna.db' is malformed"):
        open_storage("optuna.db")
    assert isinstance(open_storage("sqlite:///:memory:"), optuna.storages.RDBStorage)  # no file to check


def test_empty_foreign_and_damaged_sqlite_files_are_refused_and_left_alone(tmp_path):
    empty = tmp_path / "empty.db"
    empty.write_bytes(b"")
    with pytest.raises(ValueError, match="is empty \\(0 bytes\\), not an Optuna database"):
        open_storage(f"sqlite:///{empty}")
    assert empty.stat().st_size == 0
    text = tmp_path / "notes.db"
    text.write_text("my notes")
    with pytest.raises(ValueError, match="is not a SQLite database; it was left as it is"):
        open_storage(f"sqlite:///{text}")
    assert text.read_text() == "my notes"
    good = tmp_path / "good.db"
    study = optuna.create_study(storage=open_storage(f"sqlite:///{good}"), study_name="s")
    study.optimize(lambda t: t.suggest_float("x", 0, 1), n_trials=50)
    del study
    data = bytearray(good.read_bytes())
    middle = len(data) // 2
    data[middle:middle + 4096] = bytes(range(256)) * 16
    good.write_bytes(bytes(data))
    with pytest.raises(ValueError, match="is damaged \\(SQLite quick_check"):
        open_storage(f"sqlite:///{good}")
    assert good.read_bytes() == bytes(data)


def test_the_cli_says_it_in_one_line(tmp_path):
    empty = tmp_path / "empty.db"
    empty.write_bytes(b"")
    out = subprocess.run([sys.executable, "-m", "optuna_wpca.cli", "show", "--storage", f"sqlite:///{empty}"],
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 2 and len(out.stderr.strip().splitlines()) == 1 and "is empty" in out.stderr


def _heartbeat_storage(url):
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
        retry = optuna.storages.RetryHeartbeatStaleTrialCallback(max_retry=1)
        return open_storage(url, heartbeat_interval=60, grace_period=120, heartbeat_stale_trial_callback=retry)


def test_a_trial_killed_before_its_objective_began_is_failed_and_retried_on_rdb(tmp_path):
    """Optuna's RDB heartbeats never count a trial without a heartbeat as stale (a worker killed
    while its sampler proposed); the plugin's sweep does, through the storage's own retry callback."""
    import time
    import warnings

    from optuna_wpca._storage import fail_stale_trials, trial_heartbeat

    study = optuna.create_study(storage=_heartbeat_storage(f"sqlite:///{tmp_path / 'h.db'}"), study_name="h")
    dead = study.ask({"x": optuna.distributions.FloatDistribution(0, 1)})  # RUNNING, no heartbeat
    alive = study.ask({"x": optuna.distributions.FloatDistribution(0, 1)})
    with trial_heartbeat(alive, 60):  # its objective began: Optuna's heartbeats judge it from now on
        pass
    time.sleep(0.2)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
        optuna.storages.fail_stale_trials(study)
    assert study.trials[dead.number].state.name == "RUNNING"  # what Optuna alone leaves behind
    assert fail_stale_trials(study, grace_period=0.1) == [dead.number]
    assert fail_stale_trials(study, grace_period=0.1) == []
    states = [t.state.name for t in study.trials]
    assert states == ["FAIL", "RUNNING", "WAITING"]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
        assert optuna.storages.RetryHeartbeatStaleTrialCallback.retried_trial_number(study.trials[2]) == dead.number
    assert study.trials[2].params == dead.params


def test_journal_trials_are_failed_once_their_heartbeat_is_stale_and_queued_once(tmp_path):
    import time

    from optuna_wpca._storage import fail_stale_trials, trial_heartbeat

    study = optuna.create_study(storage=open_storage(f"journal://{tmp_path / 'h.log'}"), study_name="h")
    never = study.ask({"x": optuna.distributions.FloatDistribution(0, 1)})
    beating = study.ask({"x": optuna.distributions.FloatDistribution(0, 1)})
    time.sleep(0.3)
    with trial_heartbeat(beating, 60):  # a fresh heartbeat: alive although it started long ago
        assert fail_stale_trials(study, grace_period=0.2) == [never.number]
    assert fail_stale_trials(study, grace_period=5) == []
    states = [t.state.name for t in study.trials]
    assert states == ["FAIL", "RUNNING", "WAITING"]
    assert study.trials[2].user_attrs["retried_from"] == never.number
