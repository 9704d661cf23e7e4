"""Storages opened from URLs: SQLite files in write-ahead-log mode, journals, clear errors."""

import subprocess
import sys
from pathlib import Path

import optuna
import pytest

from optuna_wpca import open_storage


def pragma(storage, name):
    with storage.engine.connect() as connection:
        return connection.exec_driver_sql(f"PRAGMA {name}").scalar()


def test_a_sqlite_file_is_switched_to_a_write_ahead_log(tmp_path):
    storage = open_storage(f"sqlite:///{tmp_path / 'a.db'}")
    study = optuna.create_study(storage=storage, study_name="s")
    study.optimize(lambda t: t.suggest_float("x", 0, 1), n_trials=3)
    assert pragma(storage, "journal_mode") == "wal"
    assert pragma(storage, "synchronous") == 1  # NORMAL, on every new connection
    plain = open_storage(f"sqlite:///{tmp_path / 'b.db'}", sqlite_wal=False)
    assert pragma(plain, "journal_mode") == "delete"
    # Another process reads what was written (and the log is folded into the file by then).
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
    memory = open_storage("sqlite:///:memory:")  # no file, no log
    assert pragma(memory, "journal_mode") == "memory"
