"""The CLI's user errors."""


class CLIError(Exception):
    """A user error: printed as one line, exit status 2."""
