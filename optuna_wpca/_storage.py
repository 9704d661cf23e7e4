"""Opening an Optuna storage from a URL, checked first, and heartbeats where the storage has none.

Example:
    >>> import optuna, tempfile, os
    >>> storage = open_storage(f"sqlite:///{os.path.join(tempfile.mkdtemp(), 'nas.db')}")
    >>> optuna.create_study(storage=storage, study_name="s").study_name
    's'
"""

from __future__ import annotations

import contextlib
import threading
import time
from pathlib import Path
from typing import Any, Iterator

import optuna

from optuna_wpca._errors import InputError
from optuna_wpca._optuna_private import storage_of, trial_id_of

_logger = optuna.logging.get_logger("optuna.optuna_wpca.storage")


def _sqlite_file(url: str) -> bool:
    return url.startswith("sqlite:///") and url not in ("sqlite:///:memory:", "sqlite:///")


def _check_sqlite_file(path: str) -> None:
    """An existing SQLite file must be a sound database: an empty or damaged one is refused as it is,
    never re-initialised over."""
    import sqlite3

    file = Path(path)
    if not file.exists():
        return
    if file.is_dir():
        raise InputError(f"storage file {path!r} is a directory")
    if file.stat().st_size == 0:
        raise InputError(f"storage file {path!r} is empty (0 bytes), not an Optuna database; "
                         "remove it or name another file")
    with open(file, "rb") as f:
        if f.read(16) != b"SQLite format 3\x00":
            raise InputError(f"storage file {path!r} is not a SQLite database; it was left as it is")
    for attempt in range(3):  # a writer in another process can make one check fail: look again
        try:
            # Not read-only: a read-only connection cannot use another writer's write-ahead log.
            # quick_check itself writes nothing.
            connection = sqlite3.connect(str(file), timeout=30)
            try:
                verdict = connection.execute("PRAGMA quick_check").fetchone()[0]
            finally:
                connection.close()
        except sqlite3.DatabaseError as err:
            verdict = str(err)
        if verdict == "ok":
            return
        time.sleep(0.5 * (attempt + 1))
    if verdict != "ok":
        raise InputError(f"storage file {path!r} is damaged (SQLite quick_check: {verdict.splitlines()[0]}); "
                         "it was left as it is")


def _with_installed_driver(url: str) -> str:
    """``postgresql://`` (and Heroku-style ``postgres://``) with a driver that is installed.

    SQLAlchemy 2.1 maps a bare ``postgresql://`` to psycopg 3; this project's ``postgres`` extra
    installs psycopg2, so a bare URL is pointed at whichever of the two is present.
    """
    scheme, sep, rest = url.partition("://")
    if scheme not in ("postgresql", "postgres"):
        return url
    import importlib.util

    for module, dialect in (("psycopg", "postgresql+psycopg"), ("psycopg2", "postgresql+psycopg2")):
        if importlib.util.find_spec(module) is not None:
            return f"{dialect}{sep}{rest}"
    raise InputError(f"storage URL {url!r} needs a PostgreSQL driver: pip install 'optuna-wpca[postgres]' "
                     "(psycopg2) or psycopg")


def check_storage_url(url: str) -> None:
    """Refuse, without creating or writing anything, a storage URL that cannot be opened: a malformed
    one, a file in a folder that does not exist, an existing SQLite file that is not a sound database,
    a database whose driver is not installed. (A server that does not answer shows only on opening.)

    Example:
        >>> check_storage_url("sqlite:/nope")
        Traceback (most recent call last):
        ...
        optuna_wpca._errors.InputError: storage URL 'sqlite:/nope' is malformed; expected e.g. sqlite:///optuna_wpca.db
    """
    malformed = InputError(f"storage URL {url!r} is malformed; expected e.g. sqlite:///optuna_wpca.db")
    if "://" not in url:
        raise malformed
    if url.startswith("journal://"):
        path = Path(url[len("journal://"):])
        if not str(path) or path.is_dir():
            raise InputError(f"journal storage {url!r} must name a file, e.g. journal://optuna_wpca.log")
        if not path.resolve().parent.is_dir():
            raise InputError(f"the folder of journal file {str(path)!r} does not exist")
        return
    if url.startswith("sqlite:"):
        if not url.startswith("sqlite:///"):
            raise malformed
        if _sqlite_file(url):
            path = Path(url[len("sqlite:///"):])
            if not path.resolve().parent.is_dir():
                raise InputError(f"the folder of storage file {str(path)!r} does not exist")
            _check_sqlite_file(str(path))
        return
    from sqlalchemy.engine import make_url
    from sqlalchemy.exc import ArgumentError, NoSuchModuleError

    try:
        make_url(_with_installed_driver(url)).get_dialect()
    except ArgumentError:
        raise malformed from None
    except (NoSuchModuleError, ImportError) as err:
        raise InputError(f"storage URL {url!r} names a database or driver that is not installed: "
                         f"{str(err).splitlines()[0]}") from None


def open_storage(url: str, *, check: bool = True, **rdb_kwargs: Any) -> optuna.storages.BaseStorage:
    """An Optuna storage for ``url``: ``journal://FILE`` for a journal file, else an RDB URL
    (``sqlite:///FILE``, ``postgresql+psycopg2://...``, ``mysql+pymysql://...``).

    The URL is checked first by :func:`check_storage_url` (an existing SQLite file that is empty,
    foreign or damaged is refused and left as it is), unless ``check`` is False because the caller
    ran it already; a bare ``postgresql://`` URL gets the installed driver; ``rdb_kwargs`` go to
    :class:`optuna.storages.RDBStorage` (heartbeats, say).
    """
    if check:
        check_storage_url(url)
    if url.startswith("journal://"):
        from optuna.storages.journal import JournalFileBackend

        return optuna.storages.JournalStorage(JournalFileBackend(url[len("journal://"):]))
    return optuna.storages.RDBStorage(_with_installed_driver(url), **rdb_kwargs)


_HEARTBEAT = "optuna_wpca:heartbeat"


def _storage_heartbeats(storage: Any) -> bool:
    """Whether the storage keeps its own heartbeats (an RDB storage opened with ``heartbeat_interval``)."""
    interval = getattr(storage, "get_heartbeat_interval", None)
    return interval is not None and interval() is not None


@contextlib.contextmanager
def trial_heartbeat(trial: optuna.Trial, interval: float) -> Iterator[None]:
    """Signs of life for :func:`fail_stale_trials`: while the block runs, a thread writes the time
    into the trial's system attribute ``optuna_wpca:heartbeat`` every ``interval`` seconds. On a
    storage with its own heartbeats (RDB) the time is written once, at the start, only to mark
    that the objective began: Optuna's heartbeats tell live trials from dead ones after that."""
    storage = trial.storage
    if _storage_heartbeats(storage):
        storage.set_trial_system_attr(trial_id_of(trial), _HEARTBEAT, time.time())
        yield
        return
    done = threading.Event()

    def beat() -> None:
        while True:
            storage.set_trial_system_attr(trial_id_of(trial), _HEARTBEAT, time.time())
            if done.wait(interval):
                return

    thread = threading.Thread(target=beat, name=f"heartbeat-{trial.number}", daemon=True)
    thread.start()
    try:
        yield
    finally:
        done.set()
        thread.join()


def fail_stale_trials(study: optuna.Study, grace_period: float) -> list[int]:
    """Fail the RUNNING trials of dead workers and run each one again, so the search loses nothing.

    A trial is dead when its last sign of life is older than ``grace_period`` seconds: its latest
    :func:`trial_heartbeat`, or its start when its objective never began (a worker killed while
    the sampler proposed it). On a storage with its own heartbeats (RDB), a trial whose objective
    began is left to Optuna's heartbeats, and a dead one is handed to the storage's stale-trial
    callback (``RetryHeartbeatStaleTrialCallback``), as Optuna does; elsewhere its parameters are
    queued again with the user attribute ``retried_from``. Returns the failed trials' numbers.

    Optuna's own heartbeats miss the first case: a trial has none until its objective starts,
    and ``RDBStorage`` never counts a trial without one as stale.
    """
    storage = storage_of(study)
    own = _storage_heartbeats(storage)
    now, failed = time.time(), []
    for t in study.get_trials(deepcopy=False, states=(optuna.trial.TrialState.RUNNING,)):
        last = t.system_attrs.get(_HEARTBEAT)
        if last is not None and own:
            continue
        if last is None and t.datetime_start is not None:
            last = t.datetime_start.timestamp()
        if last is None or now - last <= grace_period:
            continue
        try:
            if storage.set_trial_state_values(trial_id_of(t), optuna.trial.TrialState.FAIL):
                failed.append(t)
        except optuna.exceptions.UpdateFinishedTrialError:  # another worker failed it first
            pass
    retry = storage.get_heartbeat_stale_trial_callback() if own else None
    retried = {t.user_attrs.get("retried_from") for t in study.get_trials(deepcopy=False)} if failed else set()
    for t in failed:
        if retry is not None:
            retry(study, storage.get_trial(trial_id_of(t)))
        elif t.number not in retried:
            study.enqueue_trial(t.params, user_attrs={"retried_from": t.number}, skip_if_exists=False)
    if failed:
        _logger.warning("failed trials %s of a dead worker (no sign of life for %gs) and queued them again",
                        [t.number for t in failed], grace_period)
    return [t.number for t in failed]
