"""The second stage on a real search, killed with SIGKILL mid-stage and run again: a transcript.

    python benchmarks/pick_demo.py --preset wpca-tiny --n-trials 100
    python benchmarks/pick_demo.py --preset lts-gpt2 --n-trials 100 --pick-args "--steps 40 --report-every 10"

Runs ``optuna-wpca search`` (the preset's default objective), then ``optuna-wpca pick`` with the
committed protocol; once the stage holds a finished architecture and a running one with at least one
measurement, the pick process is killed with SIGKILL; ``pick`` is run again and ``show`` prints the
result. Everything the commands print goes to ``benchmarks/results/pick_demo.PRESET.txt``.
"""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import optuna

RESULTS = Path(__file__).parent / "results"


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--preset", required=True)
    parser.add_argument("--n-trials", type=int, default=100)
    parser.add_argument("--work", default="/tmp/optuna-wpca-pick-demo")
    parser.add_argument("--pick-args", default="", help="extra options of `pick`, e.g. \"--steps 40 --batch-size 8\"")
    args = parser.parse_args()
    work = Path(args.work) / args.preset
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    url = f"sqlite:///{work / 'demo.db'}"
    cli = [sys.executable, "-m", "optuna_wpca.cli"]
    log = open(RESULTS / f"pick_demo.{args.preset}.txt", "w")

    def say(text: str) -> None:
        print(text, flush=True)
        log.write(text + "\n")
        log.flush()

    def run(argv: list[str]) -> str:
        say("$ optuna-wpca " + " ".join(argv))
        start = time.perf_counter()
        out = subprocess.run(cli + argv, capture_output=True, text=True)
        say(out.stdout.rstrip() + (("\n" + out.stderr.rstrip()) if out.returncode else ""))
        say(f"(exit {out.returncode}, {time.perf_counter() - start:.0f} s)\n")
        return out.stdout

    study = ["--storage", url, "--study-name", "demo"]
    run(["search", "--preset", args.preset, *study, "--n-trials", str(args.n_trials), "--quiet"])
    pick = ["pick", *study, "--work-dir", str(work / "pick"), *args.pick_args.split()]
    say("$ optuna-wpca " + " ".join(pick) + "   # killed with SIGKILL mid-stage")
    proc = subprocess.Popen(cli + pick, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    while True:
        time.sleep(1)
        if proc.poll() is not None:
            say("(the stage finished before it could be killed)")
            break
        names = [s.study_name for s in optuna.get_all_study_summaries(url)]
        if "demo-pick" not in names:
            continue
        stage = optuna.load_study(study_name="demo-pick", storage=url)
        done = [t for t in stage.trials if t.state.is_finished()]
        running = [t for t in stage.trials if t.state == optuna.trial.TrialState.RUNNING]
        if done and running and running[0].intermediate_values:
            proc.send_signal(signal.SIGKILL)
            proc.wait()
            say(f"(SIGKILL with {len(done)} architecture(s) finished and zero-cost trial "
                f"{running[0].user_attrs.get('zero_cost_trial')} at step {max(running[0].intermediate_values)})")
            break
    say((proc.stdout.read() if proc.stdout else "").rstrip() + "\n")
    run(pick)
    run(["show", *study, "--top", "5"])
    stage = optuna.load_study(study_name="demo-pick", storage=url)
    say("second-stage trials: " + ", ".join(f"{t.number}:{t.state.name}(zero-cost {t.user_attrs.get('zero_cost_trial')}"
                                            + (f", resumed at {t.user_attrs['resumed_from_step']}"
                                               if "resumed_from_step" in t.user_attrs else "") + ")"
                                            for t in stage.trials))


if __name__ == "__main__":
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    main()
