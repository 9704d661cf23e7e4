"""Opening the storage a command names, with errors as one line."""

from __future__ import annotations

from optuna_wpca.cli._errors import CLIError


def open_storage(url: str):
    """An Optuna storage for ``url`` (see :func:`optuna_wpca.open_storage`); a malformed or
    unreachable one is a one-line ``CLIError``."""
    from optuna_wpca._storage import open_storage as open_any

    try:
        return open_any(url)
    except ValueError as err:
        raise CLIError(str(err)) from None
    except Exception as err:  # SQLAlchemy raises many types; the user needs one line
        raise CLIError(f"cannot open storage {url!r}: {str(err).splitlines()[0]}") from None
