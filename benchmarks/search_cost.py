"""What a search costs as a user runs it: ``optuna-wpca search`` on a preset, from one or more code trees, in turns.

    git worktree add /tmp/before 54d377f      # the code to compare against
    python benchmarks/search_cost.py --trees /tmp/before . --preset lts-gpt2 --n-trials 200 --rounds 1

Each round runs the search once per tree, one after the other (so drift on a shared machine hits both),
into a fresh SQLite study, with the same sampler seed, and reads back from the study: the wall time of
the command, the seconds before its first trial (start-up and, for a combined objective, the reference
sample), the trial time (the sum of every trial's start-to-finish), the median trial, and the file's
size. The other options are the CLI's defaults unless given after ``--``. Run it on an idle machine.
Writes ``benchmarks/results/search_cost.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import optuna

RESULTS = Path(__file__).parent / "results"


def run_once(tree: Path, preset: str, n_trials: int, extra: list[str], workdir: Path) -> dict:
    db = workdir / f"{tree.name or 'tree'}-{time.time_ns()}.db"
    url = f"sqlite:///{db}"
    cmd = [sys.executable, "-c", "import sys; from optuna_wpca.cli import main; sys.exit(main(sys.argv[1:]))",
           "search", "--preset", preset, "--storage", url, "--study-name", "cost", "--n-trials", str(n_trials),
           "--sampler-seed", "0", "--quiet", "--top", "1", *extra]
    env = {**os.environ, "PYTHONPATH": str(tree.resolve())}
    started = time.time()
    done = subprocess.run(cmd, env=env, cwd=workdir, capture_output=True, text=True)
    wall = time.time() - started
    if done.returncode != 0:
        raise SystemExit(f"{tree}: search failed ({done.returncode}):\n{done.stderr[-2000:]}")
    study = optuna.load_study(study_name="cost", storage=url)
    trials = [t for t in study.trials if t.datetime_start and t.datetime_complete]
    durations = [(t.datetime_complete - t.datetime_start).total_seconds() for t in trials]
    first = min(t.datetime_start.timestamp() for t in trials) - started
    return {"wall_s": round(wall, 1), "before_first_trial_s": round(first, 1), "trials": len(trials),
            "trial_time_s": round(sum(durations), 1), "median_trial_s": round(statistics.median(durations), 3),
            "best": study.best_value if len(study.directions) == 1 else None,
            "storage_bytes": db.stat().st_size}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--trees", nargs="+", required=True, help="code trees (a checkout's root), in run order")
    parser.add_argument("--preset", default="lts-gpt2")
    parser.add_argument("--n-trials", type=int, default=200)
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--json", default=str(RESULTS / "search_cost.json"))
    parser.add_argument("extra", nargs="*", help="after --: more options for every search")
    args = parser.parse_args()
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    trees = [Path(t) for t in args.trees]
    runs: dict[str, list[dict]] = {str(t): [] for t in trees}
    with tempfile.TemporaryDirectory() as workdir:
        for round_ in range(args.rounds):
            for tree in trees:
                result = run_once(tree, args.preset, args.n_trials, args.extra, Path(workdir))
                runs[str(tree)].append(result)
                print(f"round {round_} {tree}: {json.dumps(result)}", flush=True)
    out = {"command": "python benchmarks/search_cost.py " + " ".join(sys.argv[1:]),
           "machine": f"{platform.machine()}, {platform.system()}, {os.cpu_count()} CPUs",
           "preset": args.preset, "n_trials": args.n_trials, "runs": runs}
    Path(args.json).write_text(json.dumps(out, indent=2) + "\n")


if __name__ == "__main__":
    main()
