"""Reliability: a search survives its workers being killed or interrupted, and loses nothing.

    python benchmarks/reliability.py workers [--storage postgresql://...] [--workers 4 --trials 24]
    python benchmarks/reliability.py cli [--storages sqlite,journal,postgresql] [--trials 20]

``workers``: several Python workers on one PostgreSQL study, one killed with SIGKILL mid-evaluation.
Each worker runs the plugin's zero-cost search (WPCASampler, tiny space, tiny batch) on an
``RDBStorage`` with heartbeats; Optuna marks the killed worker's trial FAIL when its heartbeat
stops and ``RetryHeartbeatStaleTrialCallback`` re-queues it for the others. A trial only runs while the
study needs more completed trials (``QuotaObjective``), so the study ends with exactly the
requested number. Writes ``benchmarks/results/reliability.json``; the test suite calls :func:`run`.

``cli``: ``optuna-wpca search --n-trials N`` on SQLite, a journal file and PostgreSQL, stopped once
mid-trial by SIGKILL (as a lost machine) or SIGINT (Ctrl-C), then the same command run again (after
a SIGKILL, once the dead worker's heartbeat is older than the CLI's grace period, as a restart
would be). Counted after the rerun: RUNNING trials, lost evaluations (a failed trial never
retried), duplicated evaluations (a retry run twice) and finished trials against N. Writes
``benchmarks/results/reliability_cli.json``; the test suite calls :func:`run_cli`.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import signal
import subprocess
import sys
import tempfile
import textwrap
import time
import warnings
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


def _cli_command(url: str, name: str, trials: int) -> list[str]:
    return [sys.executable, "-m", "optuna_wpca.cli", "search", "--preset", "wpca-small", "--storage", url,
            "--study-name", name, "--n-trials", str(trials), "--population-size", "8", "--batch-size", "8",
            "--seq-len", "32", "--sampler-seed", "0", "--quiet"]


def _open(url: str):
    from optuna_wpca import open_storage

    return open_storage(url)


def _stop_mid_trial(proc, url: str, name: str, sig: signal.Signals, phase: str, after: int):
    """Send ``sig`` to ``proc`` while one of its trials is RUNNING in ``phase``; (study, trial number)."""
    from optuna_wpca._storage import _HEARTBEAT

    study, victim, deadline = None, None, time.time() + 300
    while victim is None and time.time() < deadline and proc.poll() is None:
        try:
            study = study or optuna.load_study(study_name=name, storage=_open(url))
        except KeyError:  # not created yet
            time.sleep(0.05)
            continue
        try:
            seen = study.get_trials(deepcopy=False)
        except Exception:  # a locked SQLite file while the worker writes: look again
            continue
        running = [t for t in seen if t.state == TrialState.RUNNING and (_HEARTBEAT in t.system_attrs) == (
            phase == "objective")]
        if sum(t.state == TrialState.COMPLETE for t in seen) >= after and running:
            # Freeze the worker, then check that the trial is still in the wanted phase before the signal
            # (a worker frozen inside a SQLite write keeps the file locked: then let it go and try again).
            proc.send_signal(signal.SIGSTOP)
            try:
                again = study.get_trials(deepcopy=False)[running[0].number]
            except Exception:
                again = None
            if again is not None and again.state == TrialState.RUNNING and (
                    _HEARTBEAT in again.system_attrs) == (phase == "objective"):
                proc.send_signal(sig)
                victim = again.number
            proc.send_signal(signal.SIGCONT)
        else:
            time.sleep(0.005)
    return study, victim


def run_cli(url: str, sig: signal.Signals, *, phase: str = "objective", trials: int = 20, after: int = 4,
            name: str | None = None) -> dict:
    """One CLI search into ``url`` stopped by ``sig`` once ``after`` trials have finished and another
    is running, then run again with the same command; returns the counts (see the module doc).

    ``phase``: "objective" stops a trial whose objective has begun (it carries the plugin's
    heartbeat mark), "proposal" one that the sampler is still proposing (no mark yet)."""
    from optuna_wpca._storage import _HEARTBEAT
    from optuna_wpca.cli._storage import GRACE_PERIOD

    name = name or f"cli-{sig.name.lower()}-{int(time.time() * 1000)}"
    command = _cli_command(url, name, trials)
    start = time.perf_counter()
    first = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        study, victim = _stop_mid_trial(first, url, name, sig, phase, after)
    except BaseException:
        first.kill()  # never leave a frozen worker behind
        raise
    if victim is None:
        first.kill()
        raise RuntimeError(f"the first search ended before it could be stopped: {first.communicate()[1][-2000:]}")
    first_code = first.wait(timeout=300)
    first_err = first.stderr.read()
    lock_left = url.startswith("journal://") and Path(url[len("journal://"):] + ".lock").exists()
    at_stop = study.get_trials(deepcopy=False)
    waited = 0.0
    if sig == signal.SIGKILL:  # a restart comes after the dead worker's heartbeat went stale
        waited = GRACE_PERIOD + 1.0
        time.sleep(waited)
    second = subprocess.run(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, timeout=600)
    seconds = time.perf_counter() - start - waited
    study = optuna.load_study(study_name=name, storage=_open(url))
    return {**_count(study.get_trials(deepcopy=False), trials),
            "signal": sig.name, "phase": phase, "stopped_trial": victim,
            "stopped_trial_state_after_signal": at_stop[victim].state.name,
            "stopped_trial_objective_had_begun": _HEARTBEAT in at_stop[victim].system_attrs,
            "finished_before_rerun": sum(t.state.is_finished() and t.state != TrialState.FAIL for t in at_stop),
            "exit_codes": [first_code, second.returncode], "traceback": "Traceback" in first_err + second.stderr,
            "journal_lock_left": lock_left, "seconds_waited_before_rerun": waited, "seconds": round(seconds, 1)}


def _count(trials: list, target: int) -> dict:
    finished = [t for t in trials if t.state in (TrialState.COMPLETE, TrialState.PRUNED)]
    failed = [t for t in trials if t.state == TrialState.FAIL]
    sources = []
    for t in trials:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
            source = RetryHeartbeatStaleTrialCallback.retried_trial_number(t)
        source = t.user_attrs.get("retried_from") if source is None else source
        if source is not None and t.state != TrialState.WAITING:
            sources.append(source)
    return {
        "requested": target,
        "finished": len(finished),
        "running": sum(t.state == TrialState.RUNNING for t in trials),
        "waiting": sum(t.state == TrialState.WAITING for t in trials),
        "failed": len(failed),
        "retried": len(sources),
        "lost": sum(t.number not in sources for t in failed),
        "duplicated": len(sources) - len(set(sources)),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="mode", required=True)
    workers = sub.add_parser("workers", help="Python workers on one PostgreSQL study, one killed")
    workers.add_argument("--storage", default=None, help="a postgresql:// URL (default: a throw-away local server)")
    workers.add_argument("--workers", type=int, default=4)
    workers.add_argument("--trials", type=int, default=24)
    workers.add_argument("--json", default="benchmarks/results/reliability.json")
    cli = sub.add_parser("cli", help="optuna-wpca search stopped by SIGKILL and SIGINT, then rerun")
    cli.add_argument("--storages", default="sqlite,journal,postgresql",
                     help="comma-separated: sqlite, journal, postgresql (default: all three)")
    cli.add_argument("--trials", type=int, default=20, help="--n-trials of each search (default 20)")
    cli.add_argument("--json", default="benchmarks/results/reliability_cli.json")
    args = parser.parse_args()
    kinds = args.storages.split(",") if args.mode == "cli" else ["postgresql"]
    server, pg_url = None, getattr(args, "storage", None)
    if "postgresql" in kinds and pg_url is None:
        sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
        from _postgres import TemporaryPostgres

        server = TemporaryPostgres()
        pg_url = server.start()
    try:
        if args.mode == "workers":
            result = run(pg_url, workers=args.workers, trials=args.trials, workdir=Path(args.json).parent)
            (Path(args.json).parent / "reliability_worker.py").unlink(missing_ok=True)
        else:
            result = {"command": " ".join(_cli_command("URL", "NAME", args.trials)[1:]), "runs": []}
            with tempfile.TemporaryDirectory() as tmp:
                urls = {"sqlite": f"sqlite:///{tmp}/cli.db", "journal": f"journal://{tmp}/cli.journal",
                        "postgresql": pg_url}
                cases = [(signal.SIGKILL, "proposal"), (signal.SIGKILL, "objective"), (signal.SIGINT, "objective")]
                for kind in kinds:
                    for sig, phase in cases:
                        row = {"storage": kind, **run_cli(urls[kind], sig, phase=phase, trials=args.trials)}
                        print(json.dumps(row))
                        result["runs"].append(row)
    finally:
        if server is not None:
            server.stop()
    print(json.dumps(result, indent=2))
    Path(args.json).write_text(json.dumps(result, indent=2) + "\n")


if __name__ == "__main__":
    main()
