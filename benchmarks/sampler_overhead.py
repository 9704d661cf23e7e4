"""The GA's own time per trial, without scoring: what ``WPCASampler`` adds to each evaluation.

    git worktree add /tmp/before ac791a9      # the code to compare against
    python benchmarks/sampler_overhead.py --trees /tmp/before . --preset lts-gpt2 --n-trials 200

The objective only counts the candidate's parameters (microseconds), so the seconds per trial are the
sampler's (parents, crossover, mutation, the budget check, and with ``boundary`` the budget fill) plus
Optuna's in-memory bookkeeping. Each tree runs in its own process (``PYTHONPATH``), one after the other,
same seed; reported per operators set as seconds per trial over generation 0 and over the later
generations apart (generation 0 draws random feasible candidates, the later ones breed). Run it on an
idle machine. Writes ``benchmarks/results/sampler_overhead.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

RESULTS = Path(__file__).parent / "results"

# Runs inside each tree's process: prints one JSON line.
_PROBE = r"""
import json, sys, time
import optuna, optuna_wpca
optuna.logging.set_verbosity(optuna.logging.WARNING)
preset, operators, n_trials, population = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
space, budget = optuna_wpca.preset(preset)
sampler = optuna_wpca.WPCASampler(space, budget=budget, seed=0, operators=operators, population_size=population)
study = optuna.create_study(direction="maximize", sampler=sampler)
stamps = []
def objective(trial):
    value = float(space.num_params(space.suggest(trial)))
    stamps.append(time.perf_counter())
    return value
start = time.perf_counter()
study.optimize(objective, n_trials=n_trials)
first = stamps[population - 1] - start
later = stamps[-1] - stamps[population - 1]
print(json.dumps({"generation_0_s_per_trial": first / population,
                  "later_s_per_trial": later / (n_trials - population), "trials": n_trials,
                  "best": study.best_value}))
"""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--trees", nargs="+", required=True, help="code trees (a checkout's root), in run order")
    parser.add_argument("--preset", default="lts-gpt2")
    parser.add_argument("--operators", nargs="+", default=["paper", "boundary"])
    parser.add_argument("--n-trials", type=int, default=200)
    parser.add_argument("--population-size", type=int, default=50)
    parser.add_argument("--json", default=str(RESULTS / "sampler_overhead.json"))
    args = parser.parse_args()
    if args.n_trials <= args.population_size:
        raise SystemExit("--n-trials must exceed --population-size (the later generations are what is timed)")
    rows = []
    for operators in args.operators:
        for tree in args.trees:
            env = {**os.environ, "PYTHONPATH": str(Path(tree).resolve())}
            # Run from an empty folder: ``python -c`` puts the working directory ahead of PYTHONPATH.
            with tempfile.TemporaryDirectory() as cwd:
                done = subprocess.run([sys.executable, "-c", _PROBE, args.preset, operators, str(args.n_trials),
                                       str(args.population_size)], env=env, cwd=cwd, capture_output=True, text=True)
            if done.returncode != 0:
                raise SystemExit(f"{tree} ({operators}) failed:\n{done.stderr[-2000:]}")
            row = {"tree": tree, "operators": operators, **json.loads(done.stdout.strip().splitlines()[-1])}
            rows.append(row)
            print(json.dumps(row), flush=True)
    out = {"command": "python benchmarks/sampler_overhead.py " + " ".join(sys.argv[1:]), "preset": args.preset,
           "rows": rows}
    Path(args.json).write_text(json.dumps(out, indent=2) + "\n")


if __name__ == "__main__":
    main()
