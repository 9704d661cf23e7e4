"""One paper-scale search, timed: W-PCA-Small, 15.7M budget, population 50 x 40 generations = 2,000
evaluations on the default 128 x 128 minibatch, as the README's Optuna snippet writes it.

    python benchmarks/paper_search.py [--stop-after SECONDS] [--storage FILE.journal | RDB URL]

The study lives in a journal file committed with the repository
(``benchmarks/results/paper_search.journal``), so a stopped run resumes on any machine, in a later
session too: start the script again and it runs only the trials still missing (the GA's generations
are in the storage). Commit the journal after each segment. Wall-clock is the sum of the
completed trials' own durations (start to complete, as Optuna records them), so the pauses between
sessions do not count; the segments are listed. Writes ``benchmarks/results/paper_search.json``.
"""

from __future__ import annotations

import argparse
import json
import platform
import sys
from pathlib import Path

import optuna
import torch
from optuna.trial import TrialState

import optuna_wpca

sys.path.insert(0, str(Path(__file__).resolve().parent))
from resumable_study import open_storage, run_segment  # noqa: E402

optuna.logging.set_verbosity(optuna.logging.WARNING)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--storage", default="benchmarks/results/paper_search.journal",
                        help="a journal file path, or an RDB URL")
    parser.add_argument("--study-name", default="wpca-small-paper-scale")
    parser.add_argument("--trials", type=int, default=2000)
    parser.add_argument("--batch-size", type=int, default=128)
    parser.add_argument("--seq-len", type=int, default=128)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--stop-after", type=float, default=None, help="stop this segment after N seconds")
    parser.add_argument("--json", default="benchmarks/results/paper_search.json")
    args = parser.parse_args()

    space, budget = optuna_wpca.preset("wpca-small")
    sampler = optuna_wpca.WPCASampler(space, max_params=budget.max_params, seed=args.seed, operators="paper")
    storage = open_storage(args.storage)
    study = optuna.create_study(direction="maximize", sampler=sampler, storage=storage,
                                study_name=args.study_name, load_if_exists=True)
    batch = optuna_wpca.text_batch(batch_size=args.batch_size, seq_len=args.seq_len)
    objective = optuna_wpca.ZeroCostObjective(space, proxy="wpca", batch=batch)
    segments = run_segment(study, objective, args.trials, args.stop_after)

    completed = study.get_trials(deepcopy=False, states=(TrialState.COMPLETE,))
    durations = [(t.datetime_complete - t.datetime_start).total_seconds() for t in completed]
    wall = sum(durations)
    over_budget = [t.number for t in completed if not budget.contains(t.user_attrs["num_params"])]
    out = {
        "evaluations": len(completed),
        "target": args.trials,
        "batch": [args.batch_size, args.seq_len],
        "population": sampler.population_size,
        "generations": 1 + max((t.system_attrs.get(sampler._get_generation_key(), 0) for t in completed), default=-1),
        "wall_seconds": wall,
        "evaluations_per_second": len(completed) / wall if wall else None,
        "cache_hits": sum(bool(t.user_attrs.get("cached")) for t in completed),
        "over_budget_completed": len(over_budget),
        "best_wpca": study.best_value if completed else None,
        "best_architecture": space.describe(space.from_params(study.best_trial.params)) if completed else None,
        "best_params": study.best_trial.user_attrs["num_params"] if completed else None,
        "segments": segments,
        "machine": f"{platform.machine()}, {platform.system()}, torch threads {torch.get_num_threads()}",
    }
    Path(args.json).parent.mkdir(parents=True, exist_ok=True)
    Path(args.json).write_text(json.dumps(out, indent=2) + "\n")
    print(json.dumps({k: v for k, v in out.items() if k != "segments"}, indent=2))


if __name__ == "__main__":
    main()
