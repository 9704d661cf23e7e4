"""Resident memory and time per trial of a CLI search, under glibc's default allocator settings and others.

    python benchmarks/search_memory.py [--preset lts-gpt2] [--n-trials 300] [--settings default mmap128k]
    git worktree add /tmp/before <commit>
    python benchmarks/search_memory.py --n-trials 120 --settings default --before /tmp/before

Each setting runs ``optuna-wpca search`` in a fresh process and a fresh SQLite study, with the same sampler
seed (so the same architectures, in the same order), and this script samples the process's resident memory
(``VmRSS``) twice a second. ``default`` is glibc as it comes: its mmap threshold rises to the size of the
largest block freed (up to 32 MB), so after the first large tensors are freed, activations of a few MB come
from the heap, which fragments; ``mmap128k`` fixes the threshold at 128 KiB (``MALLOC_MMAP_THRESHOLD_``,
``MALLOC_TRIM_THRESHOLD_``), so every block above it is mapped and returned whole. Run it on an idle
machine: the settings run one after the other and their times are compared. ``--before TREE`` first runs
the default setting with the package imported from another checkout (``PYTHONPATH``), as ``before``. Writes
``benchmarks/results/search_memory.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import optuna

SETTINGS = {
    "default": {},
    "mmap128k": {"MALLOC_MMAP_THRESHOLD_": "131072", "MALLOC_TRIM_THRESHOLD_": "131072"},
}


def _rss_mb(pid: int) -> float | None:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    except OSError:
        return None
    return None


def run_one(name: str, preset: str, n_trials: int, workdir: Path, tree: str | None = None) -> dict:
    db = workdir / f"{name}.db"
    command = [sys.executable, "-m", "optuna_wpca.cli", "search", "--preset", preset, "--n-trials", str(n_trials),
               "--storage", f"sqlite:///{db}", "--study-name", name, "--sampler-seed", "0", "--quiet"]
    env = {**os.environ, **SETTINGS.get(name, {})}
    if tree is not None:
        env["PYTHONPATH"] = tree
    start = time.perf_counter()
    # run from the work folder: "python -m" puts the current folder first on the path, ahead of PYTHONPATH
    process = subprocess.Popen(command, env=env, cwd=workdir, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                               text=True)
    samples: list[tuple[float, float]] = []
    while process.poll() is None:
        rss = _rss_mb(process.pid)
        if rss is not None:
            samples.append((time.perf_counter() - start, rss))
        time.sleep(0.5)
    wall = time.perf_counter() - start
    if process.returncode != 0:
        raise SystemExit(f"{name}: the search failed ({process.returncode}): {process.stderr.read()[-2000:]}")
    study = optuna.load_study(study_name=name, storage=f"sqlite:///{db}")
    trials = [t for t in study.trials if t.state == optuna.trial.TrialState.COMPLETE]
    seconds = [(t.datetime_complete - t.datetime_start).total_seconds() for t in trials]
    rss = [r for _, r in samples]
    return {
        "env": SETTINGS.get(name, {}), "tree": tree or ".", "wall_seconds": wall, "trials": len(trials),
        "trial_seconds": sum(seconds),
        "median_trial_seconds": statistics.median(seconds), "peak_rss_mb": max(rss),
        "rss_mb_at_quarters": [rss[min(len(rss) - 1, int(q * len(rss)))] for q in (0.25, 0.5, 0.75)] + [rss[-1]],
        "best_value": study.best_value, "best_trial": study.best_trial.number,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--preset", default="lts-gpt2")
    parser.add_argument("--n-trials", type=int, default=300)
    parser.add_argument("--settings", nargs="+", default=list(SETTINGS), choices=list(SETTINGS))
    parser.add_argument("--before", default=None, help="another checkout, run first as 'before'")
    parser.add_argument("--json", default=str(Path(__file__).parent / "results" / "search_memory.json"))
    args = parser.parse_args()
    out = {"command": f"python benchmarks/search_memory.py --preset {args.preset} --n-trials {args.n_trials} "
                      f"--settings {' '.join(args.settings)}" + (f" --before {args.before}" if args.before else ""),
           "preset": args.preset, "settings": {}}
    runs = ([("before", args.before)] if args.before else []) + [(name, None) for name in args.settings]
    with tempfile.TemporaryDirectory() as tmp:
        for name, tree in runs:
            out["settings"][name] = result = run_one(name, args.preset, args.n_trials, Path(tmp), tree)
            print(f"{name}: {result['trials']} trials, {result['trial_seconds']:.0f} s of trial time (median "
                  f"{result['median_trial_seconds']:.3f} s), peak RSS {result['peak_rss_mb']:.0f} MB, best "
                  f"{result['best_value']:.6g} (trial {result['best_trial']})", flush=True)
    Path(args.json).write_text(json.dumps(out, indent=2) + "\n")


if __name__ == "__main__":
    main()
