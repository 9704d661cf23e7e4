"""``python -m optuna_wpca.cli``: the same as the ``optuna-wpca`` command."""

import sys

from optuna_wpca.cli import main

sys.exit(main())
