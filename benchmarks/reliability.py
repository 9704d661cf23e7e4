"""Reliability: workers on one PostgreSQL study, one of them killed with SIGKILL mid-evaluation.

    python benchmarks/reliability.py [--storage postgresql://...] [--workers 4 --trials 24]

Each worker runs the plugin's zero-cost search (WPCASampler, tiny space, tiny batch) on an
``RDBStorage`` with heartbeats; Optuna marks the killed worker's trial FAIL when its heartbeat
stops and ``RetryHeartbeatStaleTrialCallback`` re-queues it for the others. A trial only runs while the
study needs more completed trials (``QuotaObjective``), so the study ends with exactly the
requested number. The test suite calls :func:`run`; this script writes
``benchmarks/results/reliability.json``.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import optuna
from optuna.storages import RetryHeartbeatStaleTrialCallback
from optuna.trial import TrialState

WORKER = textwrap.dedent(
    """
    import os, sys, time, optuna
    from optuna.storages import RDBStorage, RetryHeartbeatStaleTrialCallback
    from optuna.trial import TrialState
    from optuna_wpca import WPCASampler, WPCASpace, ZeroCostObjective, text_batch
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    url, name, quota, seed, delay = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), float(sys.argv[5])
    storage = RDBStorage(url, heartbeat_interval=1, grace_period=3,
                         heartbeat_stale_trial_callback=RetryHeartbeatStaleTrialCallback(max_retry=3))
    space = WPCASpace(num_layers=3, hidden_size=64, bert_heads=4, mobilebert_heads=2)
    study = optuna.load_study(study_name=name, storage=storage,
                              sampler=WPCASampler(space, population_size=8, seed=seed))
    score = ZeroCostObjective(space, batch=text_batch(batch_size=4, seq_len=16))

    def objective(trial):
        # Run only while the study still needs completed trials: count finished ones and the
        # running ones that started before this trial (trial numbers order the workers).
        trials = study.get_trials(deepcopy=False, states=(TrialState.COMPLETE, TrialState.RUNNING))
        ahead = sum(t.state == TrialState.COMPLETE or t.number < trial.number for t in trials if t.number != trial.number)
        if ahead >= quota:
            raise optuna.TrialPruned("quota reached")
        trial.set_user_attr("worker", os.getpid())
        value = score(trial)
        time.sleep(delay)  # stands for a slower evaluation, so that a kill lands mid-trial
        return value

    while len(study.get_trials(deepcopy=False, states=(TrialState.COMPLETE,))) < quota:
        study.optimize(objective, n_trials=1)
        if study.trials[-1].state == TrialState.PRUNED:
            time.sleep(0.5)  # wait for a running or stale trial to finish or fail
    """
)


def run(url: str, *, workers: int = 4, trials: int = 24, kill: bool = True, delay: float = 1.0,
        name: str | None = None, workdir: str | os.PathLike = ".") -> dict:
    name = name or f"reliability-{int(time.time() * 1000)}"
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    study = optuna.create_study(study_name=name, storage=url, direction="maximize")
    script = Path(workdir) / "reliability_worker.py"
    script.write_text(WORKER)
    start = time.perf_counter()
    procs = [subprocess.Popen([sys.executable, str(script), url, name, str(trials), str(seed), str(delay)])
             for seed in range(workers)]
    killed_trial = None
    if kill:
        victim = procs[0]
        deadline = time.time() + 300
        while killed_trial is None and time.time() < deadline:
            # Only a trial that started less than half an evaluation ago: the kill must land mid-trial.
            now = datetime.datetime.now()
            running = [t for t in study.get_trials(deepcopy=False, states=(TrialState.RUNNING,))
                       if t.user_attrs.get("worker") == victim.pid
                       and (now - t.datetime_start).total_seconds() < delay / 2]
            done = len(study.get_trials(deepcopy=False, states=(TrialState.COMPLETE,)))
            if running and done >= workers:
                victim.send_signal(signal.SIGKILL)
                killed_trial = running[0].number
            else:
                time.sleep(0.05)
    codes = [p.wait(timeout=900) for p in procs]
    seconds = time.perf_counter() - start
    all_trials = study.get_trials(deepcopy=False)
    completed = [t for t in all_trials if t.state == TrialState.COMPLETE]
    failed = [t for t in all_trials if t.state == TrialState.FAIL]
    retries = [t for t in completed if RetryHeartbeatStaleTrialCallback.retried_trial_number(t) is not None]
    retried_sources = [RetryHeartbeatStaleTrialCallback.retried_trial_number(t) for t in retries]
    numbers = [t.number for t in all_trials]
    lost = [t.number for t in failed if t.number not in retried_sources]
    lost += [t.number for t in all_trials if not t.state.is_finished()]
    return {
        "workers": workers,
        "requested": trials,
        "completed": len(completed),
        "duplicated": (len(numbers) - len(set(numbers))) + (len(retried_sources) - len(set(retried_sources))),
        "lost": len(lost),
        "retried_after_kill": len(retries),
        "killed_trial": killed_trial,
        "failed": len(failed),
        "pruned_over_quota": sum(t.state == TrialState.PRUNED for t in all_trials),
        "exit_codes": codes,
        "seconds": seconds,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--storage", default=None, help="a postgresql:// URL (default: a throw-away local server)")
    parser.add_argument("--workers", type=int, default=4)
    parser.add_argument("--trials", type=int, default=24)
    parser.add_argument("--json", default="benchmarks/results/reliability.json")
    args = parser.parse_args()
    server, url = None, args.storage
    if url is None:
        sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
        from _postgres import TemporaryPostgres

        server = TemporaryPostgres()
        url = server.start()
    try:
        result = run(url, workers=args.workers, trials=args.trials, workdir=Path(args.json).parent)
        (Path(args.json).parent / "reliability_worker.py").unlink(missing_ok=True)
    finally:
        if server is not None:
            server.stop()
    print(json.dumps(result, indent=2))
    Path(args.json).write_text(json.dumps(result, indent=2) + "\n")


if __name__ == "__main__":
    main()
