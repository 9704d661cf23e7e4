"""Load: many workers, many zero-cost trials on one PostgreSQL study, against one worker in the same run.

    python benchmarks/load.py --storage postgresql://... [--workers 8 --trials 2000]
    python benchmarks/load.py                            # starts a throw-away local server (tests/_postgres.py)

Trials use the tiny model and a 4 x 16 batch, so the storage dominates. Reports trials per second
and the storage overhead per trial: wall time per trial and worker minus the time the objective
itself took (the ``seconds`` user attribute), for 1 worker and for ``--workers`` workers.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import optuna

WORKER = textwrap.dedent(
    """
    import sys, optuna
    from optuna_wpca import WPCASampler, WPCASpace, ZeroCostObjective, text_batch
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    url, name, n, seed = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
    space = WPCASpace(num_layers=3, hidden_size=64, bert_heads=4, mobilebert_heads=2)
    study = optuna.load_study(study_name=name, storage=url, sampler=WPCASampler(space, population_size=50, seed=seed))
    study.optimize(ZeroCostObjective(space, batch=text_batch(batch_size=4, seq_len=16)), n_trials=n)
    """
)


def measure(url: str, workers: int, trials: int, workdir: Path) -> dict:
    name = f"load-{workers}-{int(time.time() * 1000)}"
    optuna.create_study(study_name=name, storage=url, direction="maximize")
    script = workdir / "load_worker.py"
    script.write_text(WORKER)
    per_worker = [trials // workers + (i < trials % workers) for i in range(workers)]
    env = dict(os.environ, OMP_NUM_THREADS="1")
    start = time.perf_counter()
    procs = [subprocess.Popen([sys.executable, str(script), url, name, str(n), str(i)], env=env)
             for i, n in enumerate(per_worker)]
    codes = [p.wait() for p in procs]
    wall = time.perf_counter() - start
    study = optuna.load_study(study_name=name, storage=url)
    done = [t for t in study.trials if t.state == optuna.trial.TrialState.COMPLETE]
    objective = [t.user_attrs.get("seconds", 0.0) for t in done]
    per_trial = [(t.datetime_complete - t.datetime_start).total_seconds() for t in done]
    return {
        "workers": workers, "trials": len(done), "exit_codes": codes, "seconds": wall,
        "trials_per_second": len(done) / wall,
        "median_trial_seconds": statistics.median(per_trial),
        "median_objective_seconds": statistics.median(objective),
        "storage_overhead_per_trial_seconds": wall * workers / len(done) - statistics.mean(objective),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--storage", default=None)
    parser.add_argument("--workers", type=int, default=8)
    parser.add_argument("--trials", type=int, default=2000)
    parser.add_argument("--json", default="benchmarks/results/load.json")
    args = parser.parse_args()
    server = None
    url = args.storage
    if url is None:
        sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
        from _postgres import TemporaryPostgres

        server = TemporaryPostgres()
        url = server.start()
    try:
        workdir = Path(args.json).parent
        workdir.mkdir(parents=True, exist_ok=True)
        one = measure(url, 1, args.trials, workdir)
        many = measure(url, args.workers, args.trials, workdir)
        (workdir / "load_worker.py").unlink(missing_ok=True)
    finally:
        if server is not None:
            server.stop()
    out = {"one_worker": one, "many_workers": many,
           "speedup_trials_per_second": many["trials_per_second"] / one["trials_per_second"],
           "cores": os.cpu_count()}
    print(json.dumps(out, indent=2))
    Path(args.json).write_text(json.dumps(out, indent=2) + "\n")


if __name__ == "__main__":
    main()
