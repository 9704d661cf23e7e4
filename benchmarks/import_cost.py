"""What registering the Auto classes at import would cost: ``import optuna_wpca`` alone, and with
``optuna_wpca.models._transformers`` (which imports transformers' modelling code and registers the
candidates), each in a fresh interpreter, interleaved, median of ``--repeats``; and the CLI's
``--help`` start, which is what a user waits for before a command begins.

    python benchmarks/import_cost.py --repeats 7
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path

CASES = {
    "import optuna_wpca": "import optuna_wpca",
    "import optuna_wpca + transformers' model classes registered": "import optuna_wpca, optuna_wpca.models._transformers",
    "import optuna_wpca + AutoTokenizer (what every command that cuts text imports)":
        "import optuna_wpca; from transformers import AutoTokenizer",
    "optuna-wpca --help": "import sys; sys.argv=['optuna-wpca','--help']\nfrom optuna_wpca.cli import main\n"
                          "try:\n    main()\nexcept SystemExit:\n    pass",
}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeats", type=int, default=7)
    args = parser.parse_args()
    times: dict[str, list[float]] = {k: [] for k in CASES}
    for _ in range(args.repeats):
        for name, code in CASES.items():
            start = time.perf_counter()
            subprocess.run([sys.executable, "-c", code], check=True, capture_output=True)
            times[name].append(time.perf_counter() - start)
    out = {name: {"median_s": statistics.median(t), "runs": t} for name, t in times.items()}
    base = out["import optuna_wpca"]["median_s"]
    for name, r in out.items():
        print(f"{r['median_s']:6.2f} s  ({r['median_s'] / base:4.2f}x)  {name}")
    path = Path(__file__).parent / "results" / "import_cost.json"
    path.write_text(json.dumps(out, indent=1) + "\n")
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
