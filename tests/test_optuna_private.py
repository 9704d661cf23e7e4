"""optuna_wpca._optuna_private against the installed Optuna (``make test``: the newest; ``make floors``:
the oldest supported): each read gives what the public API says it should."""

import gc

import optuna
import pytest

from optuna_wpca._optuna_private import storage_of, storage_url, study_id_of, study_key, trial_id_of


@pytest.mark.parametrize("kind", ["sqlite", "journal", "memory"])
def test_the_private_reads_match_what_optuna_stores(tmp_path, kind):
    if kind == "sqlite":
        url = f"sqlite:///{tmp_path / 's.db'}"
        storage = optuna.storages.RDBStorage(url)
    elif kind == "journal":
        url = f"journal://{tmp_path / 'j.log'}"
        storage = optuna.storages.JournalStorage(optuna.storages.journal.JournalFileBackend(str(tmp_path / "j.log")))
    else:
        url, storage = None, optuna.storages.InMemoryStorage()
    study = optuna.create_study(study_name="s", storage=storage)
    study.optimize(lambda t: t.suggest_float("x", 0, 1), n_trials=2)
    store = storage_of(study)
    assert study_id_of(study) == store.get_study_id_from_name("s")
    frozen = study.trials[1]
    assert store.get_trial(trial_id_of(frozen)).number == 1
    assert storage_url(study) == url
    again = optuna.load_study(study_name="s", storage=store)
    assert study_key(again) == study_key(study)  # the same storage object and study: the same cache key
    other = optuna.create_study(study_name="t", storage=store)
    assert study_key(other)[0] == study_key(study)[0] and study_key(other) != study_key(study)


def test_a_study_key_is_never_reused_by_a_later_storage():
    keys = set()
    for _ in range(50):  # id() of a freed storage is handed out again; the key is not
        study = optuna.create_study(storage=optuna.storages.InMemoryStorage())
        key = study_key(study)
        assert key not in keys
        keys.add(key)
        del study
        gc.collect()
