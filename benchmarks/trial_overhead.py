"""What a trial costs besides its proxy: the storage and the sampler, per trial.

    python benchmarks/trial_overhead.py [--trials 300] [--write-every 50] [--json benchmarks/results/trial_overhead.json]

A W-PCA-Small study (``WPCASpace.small()``, 24 categorical genes, the 15.7M budget) whose objective
only suggests the architecture and records what ``ZeroCostObjective`` records (user attributes of a
typical trial), so what is timed is Optuna's bookkeeping: the sampler's proposal and the storage's
reads and writes. Each (storage, sampler) pair is one study of ``--trials`` trials in the same run,
written trial by trial and (``optuna-wpca search --write-every N``, :class:`optuna_wpca.BatchedWrites`)
N at a time.
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path

import optuna

import optuna_wpca

optuna.logging.set_verbosity(optuna.logging.WARNING)


BUDGET = optuna_wpca.PRESETS["wpca-small"].budget


def objective_for(space):
    def objective(trial: optuna.Trial) -> float:
        arch = space.suggest(trial)
        n = space.num_params(arch)
        trial.set_user_attr("num_params", n)
        trial.set_user_attr("architecture", space.describe(arch))
        trial.set_user_attr("pca_dims", [100] * arch.num_layers)
        trial.set_user_attr("feasible", BUDGET.contains(n))
        for name, value in BUDGET.constraints(n).items():
            trial.set_constraint(name, value)
        return float(n)

    return objective


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--trials", type=int, default=300)
    parser.add_argument("--write-every", type=int, default=50, help="the batched rows' batch (default 50)")
    parser.add_argument("--json", default=None)
    args = parser.parse_args()
    space = optuna_wpca.WPCASpace.small()
    tmp = Path(tempfile.mkdtemp())
    storages = {
        "in-memory": lambda: None,
        "sqlite": lambda: f"sqlite:///{tmp / 'o.db'}",
        "journal": lambda: optuna.storages.JournalStorage(
            optuna.storages.journal.JournalFileBackend(str(tmp / "o.journal"))),
    }
    samplers = {
        "RandomSampler": lambda: optuna.samplers.RandomSampler(seed=0),
        "WPCASampler": lambda: optuna_wpca.WPCASampler(space, max_params=BUDGET.max_params, seed=0),
    }
    rows = []
    for sname, storage in storages.items():
        for pname, sampler in samplers.items():
            for every in (1, args.write_every) if sname != "in-memory" else (1,):
                study = optuna.create_study(direction="maximize", sampler=sampler(), storage=storage(),
                                            study_name=f"{sname}-{pname}-{every}")
                start = time.perf_counter()
                if every == 1:
                    study.optimize(objective_for(space), n_trials=args.trials)
                else:  # the search's --write-every: an in-memory copy, written a batch at a time
                    batched = optuna_wpca.BatchedWrites(study, every)
                    with batched as working:
                        working.optimize(objective_for(space), n_trials=args.trials, callbacks=[batched.callback])
                seconds = (time.perf_counter() - start) / args.trials
                assert len(study.trials) == args.trials
                rows.append({"storage": sname, "sampler": pname, "write_every": every, "seconds_per_trial": seconds})
                print(f"{sname:<12}{pname:<15}every {every:<4}{1000 * seconds:8.2f} ms per trial", flush=True)
    result = {"trials": args.trials, "space": "WPCASpace.small()", "write_every": args.write_every, "rows": rows}
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=2) + "\n")


if __name__ == "__main__":
    main()
