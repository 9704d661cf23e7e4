"""Opening the storage a command names, with errors as one line."""

from __future__ import annotations

import warnings

from optuna_wpca.cli._errors import CLIError


#: Seconds between a running trial's heartbeats, and after which a silent one counts as dead.
HEARTBEAT_INTERVAL, GRACE_PERIOD = 5, 15


def check_storage(url: str) -> None:
    """``url`` checked without creating anything (see :func:`optuna_wpca._storage.check_storage_url`)."""
    from optuna_wpca._storage import check_storage_url

    try:
        check_storage_url(url)
    except ValueError as err:
        raise CLIError(str(err)) from None


def open_storage(url: str, *, heartbeat: bool = False, checked: bool = False):
    """An Optuna storage for ``url`` (see :func:`optuna_wpca.open_storage`); a malformed or
    unreachable one is a one-line ``CLIError``. With ``heartbeat`` (the search), an RDB storage
    records heartbeats and retries, once, a trial whose worker died (journal files have none).
    ``checked``: the URL went through :func:`check_storage` already (an SQLite file is read once)."""
    import optuna

    from optuna_wpca._storage import open_storage as open_any

    kwargs = {}
    if heartbeat and not url.startswith("journal://"):
        with warnings.catch_warnings():  # experimental in Optuna 5, and the documented way to retry
            warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
            retry = optuna.storages.RetryHeartbeatStaleTrialCallback(max_retry=1)
        kwargs = {"heartbeat_interval": HEARTBEAT_INTERVAL, "grace_period": GRACE_PERIOD,
                  "heartbeat_stale_trial_callback": retry}
    try:
        with warnings.catch_warnings():  # heartbeat_interval is "experimental" in Optuna 5
            warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
            return open_any(url, check=not checked, **kwargs)
    except ValueError as err:
        raise CLIError(str(err)) from None
    except Exception as err:  # SQLAlchemy raises many types; the user needs one line
        raise CLIError(f"cannot open storage {url!r}: {str(err).splitlines()[0]}") from None
