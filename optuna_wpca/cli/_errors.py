"""The CLI's user errors."""

from optuna_wpca._errors import InputError


class CLIError(InputError):
    """A user error found by the CLI itself: printed as one line, exit status 2."""
