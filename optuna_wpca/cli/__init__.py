"""The ``optuna-wpca`` command line: ``search``, ``show``, ``export``, ``refine``, ``distill``, ``rank``,
``calibrate-latency``.

Example:
    >>> from optuna_wpca.cli import main
    >>> main(["show", "--storage", "sqlite:///:memory:", "--study-name", "none"])  # doctest: +SKIP
"""

from __future__ import annotations

import os
import sys
import traceback
from typing import Sequence

from optuna_wpca._errors import InputError
from optuna_wpca.cli._errors import CLIError
from optuna_wpca.cli._parser import build_parser

__all__ = ["CLIError", "build_parser", "main"]


def main(argv: Sequence[str] | None = None) -> int:
    """Run one command; bad input prints one line and returns 2, an interrupt returns 130, and any
    other exception (a bug) prints its traceback and a line asking for a report, and returns 1."""
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return args.func(args)
    except BrokenPipeError:
        # `optuna-wpca show | head`: the reader left; say nothing more and exit quietly (no traceback
        # from the interpreter flushing stdout at exit either).
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return 0
    except (InputError, FileNotFoundError, NotADirectoryError, IsADirectoryError, PermissionError) as err:
        # Bad input (an InputError is raised where input is checked) or a file the user named.
        print(f"optuna-wpca {args.command}: error: {err}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("optuna-wpca: interrupted", file=sys.stderr)
        return 130
    except Exception:  # not the input's fault: a bug here, or in a library under us
        traceback.print_exc()
        print(f"optuna-wpca {args.command}: internal error (the traceback above is a bug, not bad input); please "
              "report it to the optuna-wpca developers with the command line and this traceback", file=sys.stderr)
        return 1
