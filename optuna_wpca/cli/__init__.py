"""The ``optuna-wpca`` command line: ``search``, ``show``, ``export``, ``refine``, ``distill``, ``rank``,
``calibrate-latency``.

Example:
    >>> from optuna_wpca.cli import main
    >>> main(["show", "--storage", "sqlite:///:memory:", "--study-name", "none"])  # doctest: +SKIP
"""

from __future__ import annotations

import os
import sys
from typing import Sequence

from optuna_wpca.cli._errors import CLIError
from optuna_wpca.cli._parser import build_parser

__all__ = ["CLIError", "build_parser", "main"]


def main(argv: Sequence[str] | None = None) -> int:
    """Run one command; user errors print one line and return 2, an interrupt returns 130."""
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
    except (CLIError, ValueError, TypeError, FileNotFoundError, RuntimeError) as err:
        print(f"optuna-wpca {args.command}: error: {err}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("optuna-wpca: interrupted", file=sys.stderr)
        return 130
