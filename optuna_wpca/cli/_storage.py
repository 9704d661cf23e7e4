"""Opening the storage a command names: an RDB URL or ``journal://FILE``."""

from __future__ import annotations

from optuna_wpca.cli._errors import CLIError


def open_storage(url: str):
    """An Optuna storage for ``url``; a malformed or unreachable one is a one-line ``CLIError``."""
    import optuna

    if "://" not in url:
        raise CLIError(f"storage URL {url!r} is malformed; expected e.g. sqlite:///optuna_wpca.db")
    try:
        return optuna.storages.RDBStorage(url) if not url.startswith("journal://") else _journal(url)
    except Exception as err:  # SQLAlchemy raises many types; the user needs one line
        raise CLIError(f"cannot open storage {url!r}: {str(err).splitlines()[0]}") from None


def _journal(url: str):
    import optuna
    from optuna.storages.journal import JournalFileBackend

    return optuna.storages.JournalStorage(JournalFileBackend(url[len("journal://"):]))
