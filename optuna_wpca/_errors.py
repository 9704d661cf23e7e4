"""The error a user's input gets: one type, raised where the input is checked.

``InputError`` is a ``ValueError``, so Python callers that catch ``ValueError`` keep working. The CLI
prints it as one line (exit status 2); anything else that escapes a command is a bug and is shown
with its traceback and a line asking for a report.
"""


class InputError(ValueError):
    """Bad input: an argument, a file, a study's record or a setting that cannot work, named in one line.

    Example:
        >>> from optuna_wpca import InputError, WPCASpace
        >>> try:
        ...     WPCASpace(num_layers=0)
        ... except InputError as err:
        ...     print(err)
        num_layers must be between 1 and 64, got 0
    """
