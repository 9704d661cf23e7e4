"""Opening an Optuna storage from a URL, with SQLite set up for a study's many small writes.

Example:
    >>> import optuna, tempfile, os
    >>> storage = open_storage(f"sqlite:///{os.path.join(tempfile.mkdtemp(), 'nas.db')}")
    >>> study = optuna.create_study(storage=storage)
    >>> with storage.engine.connect() as connection:
    ...     connection.exec_driver_sql("PRAGMA journal_mode").scalar()
    'wal'
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import optuna

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
        raise ValueError(f"storage file {path!r} is a directory")
    if file.stat().st_size == 0:
        raise ValueError(f"storage file {path!r} is empty (0 bytes), not an Optuna database; "
                         "remove it or name another file")
    with open(file, "rb") as f:
        if f.read(16) != b"SQLite format 3\x00":
            raise ValueError(f"storage file {path!r} is not a SQLite database; it was left as it is")
    try:
        connection = sqlite3.connect(f"file:{file}?mode=ro", uri=True)
        try:
            verdict = connection.execute("PRAGMA quick_check").fetchone()[0]
        finally:
            connection.close()
    except sqlite3.DatabaseError as err:
        verdict = str(err)
    if verdict != "ok":
        raise ValueError(f"storage file {path!r} is damaged (SQLite quick_check: {verdict.splitlines()[0]}); "
                         "it was left as it is")


def _write_ahead_log(storage: optuna.storages.RDBStorage) -> None:
    """Switch a SQLite file to write-ahead logging with ``synchronous=NORMAL``.

    Each trial writes every parameter and attribute in its own committed transaction; in SQLite's
    default rollback-journal mode each commit syncs the file twice. With a write-ahead log, a commit
    appends to the log and syncs only at checkpoints: readers (optuna-dashboard, other workers on the
    same host) no longer block the writer, and a crash can lose at most the last commits, never
    corrupt the file. The journal mode stays with the file; ``synchronous`` is set per connection.
    """
    from sqlalchemy import event

    def pragmas(dbapi_connection: Any, _record: Any) -> None:
        cursor = dbapi_connection.cursor()
        cursor.execute("PRAGMA journal_mode=WAL")
        cursor.execute("PRAGMA synchronous=NORMAL")
        cursor.close()

    event.listen(storage.engine, "connect", pragmas)
    storage.engine.dispose()  # connections opened before the listener are reopened with it


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
    raise ValueError(f"storage URL {url!r} needs a PostgreSQL driver: pip install 'optuna-wpca[postgres]' "
                     "(psycopg2) or psycopg")


def open_storage(url: str, *, sqlite_wal: bool = True, **rdb_kwargs: Any) -> optuna.storages.BaseStorage:
    """An Optuna storage for ``url``: ``journal://FILE`` for a journal file, else an RDB URL
    (``sqlite:///FILE``, ``postgresql+psycopg2://...``, ``mysql+pymysql://...``).

    A SQLite file is switched to write-ahead logging (see ``_write_ahead_log``) unless
    ``sqlite_wal=False``; a bare ``postgresql://`` URL gets the installed driver; ``rdb_kwargs`` go
    to :class:`optuna.storages.RDBStorage` (heartbeats, say).
    """
    if "://" not in url:
        raise ValueError(f"storage URL {url!r} is malformed; expected e.g. sqlite:///optuna_wpca.db")
    if url.startswith("journal://"):
        from optuna.storages.journal import JournalFileBackend

        return optuna.storages.JournalStorage(JournalFileBackend(url[len("journal://"):]))
    if _sqlite_file(url):
        _check_sqlite_file(url[len("sqlite:///"):])
    storage = optuna.storages.RDBStorage(_with_installed_driver(url), **rdb_kwargs)
    if sqlite_wal and _sqlite_file(url):
        _write_ahead_log(storage)
    return storage
