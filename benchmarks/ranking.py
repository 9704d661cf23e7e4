"""Ranking benchmark: proxies against NAS-Bench-BERT's GLUE scores (the W-PCA paper's Table 1 setting).

    python benchmarks/ranking.py                       # all 500 entries, wpca / vpca / params
    python benchmarks/ranking.py --limit 50 --json out.json

Every option of ``optuna-wpca rank`` is accepted; this script only fixes the defaults to the ones
the results table in the README was measured with.
"""

from __future__ import annotations

import sys

from optuna_wpca.cli import main

DEFAULTS = ["--proxy", "wpca", "--proxy", "vpca", "--proxy", "params", "--json", "benchmarks/results/ranking.json"]

if __name__ == "__main__":
    args = sys.argv[1:]
    extra = [] if any(a in args for a in ("--proxy", "--json")) else DEFAULTS
    sys.exit(main(["rank", *extra, *args]))
