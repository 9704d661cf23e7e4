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
