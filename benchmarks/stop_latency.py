"""Seconds from a Ctrl-C (SIGINT) to the exit of ``optuna-wpca search``, at each stage, idle and under load.

Stages: start-up (the SIGINT sent as soon as the process runs: Python is importing the package), while
the reference sample of a combined objective is scored (a small decoder space), and in the
trial loop with ``--write-every 1000`` (nothing reaches the storage by count, so the backlog is what the
timed flush leaves), with the test suite's tiny W-PCA space (about 20 ms a trial: the most trials per
second to write) and with wpca-tiny. Each run waits for its stage (a progress line, or a first timed
write), not for a number of seconds, then sends SIGINT and times the exit. ``--load N`` runs N busy
processes beside it (the machine this was measured on has 2 cores).

    python benchmarks/stop_latency.py [--load 0 2] [--repeats 3]
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import re
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import optuna

SMALL_WPCA = {"type": "wpca", "num_layers": 3, "hidden_size": 64, "bert_heads": 4, "mobilebert_heads": 2}
SMALL_DECODER = {"type": "decoder", "num_layers_choices": [2], "hidden_sizes": [64], "heads": [2],
                 "ffn_sizes": [64, 128], "vocab_size": 30522, "max_position_embeddings": 64}


def _busy() -> None:
    while True:
        pass


def _space_file(folder: Path, raw: dict) -> str:
    from optuna_wpca import space_from_dict

    path = folder / f"{raw['type']}.json"
    path.write_text(json.dumps(space_from_dict(raw).to_dict()))
    return str(path)


def _run(args: list[str], ready, url: str, name: str) -> dict:
    proc = subprocess.Popen([sys.executable, "-m", "optuna_wpca.cli", *args], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    err: list[str] = []
    reader = threading.Thread(target=lambda: err.extend(iter(lambda: proc.stderr.read(1), "")), daemon=True)
    reader.start()
    deadline = time.time() + 600
    while not ready("".join(err), url, name):
        if proc.poll() is not None or time.time() > deadline:
            raise RuntimeError(f"the search ended or stalled before its stage: {''.join(err)[-500:]}")
        time.sleep(0.1)
    proc.send_signal(signal.SIGINT)
    sent = time.perf_counter()
    proc.wait(timeout=600)
    seconds = time.perf_counter() - sent
    reader.join(timeout=10)
    text = "".join(err)
    try:
        trials = optuna.load_study(study_name=name, storage=url).trials
    except KeyError:  # stopped before the study was created
        trials = []
    return {"seconds": seconds, "exit": proc.returncode, "traceback": "Traceback" in text,
            "trials_kept": len(trials), "all_finished": all(t.state.is_finished() for t in trials)}


def _reference_stage(text: str, _url: str, _name: str) -> bool:
    return re.search(r"reference sample:\s+\d+%.*\s([1-9]\d*)/", text) is not None


def _written_stage(_text: str, url: str, name: str) -> bool:
    try:
        return len(optuna.load_study(study_name=name, storage=url).trials) > 0
    except KeyError:
        return False


def _start_up_stage(_text: str, _url: str, _name: str) -> bool:
    # Any moment of the start-up will do: the first look after the process began.
    return True


def measure(stage: str, folder: Path, i: int, load: int) -> dict:
    url = f"sqlite:///{folder / f'{stage}-{load}-{i}.db'}"
    name = f"{stage}-{i}"
    common = ["--storage", url, "--study-name", name, "--batch-size", "4", "--seq-len", "16", "--sampler-seed",
              str(i)]
    if stage == "reference-sample":
        args = ["search", "--space", _space_file(folder, SMALL_DECODER), *common, "--n-trials", "4",
                "--reference-size", "400"]
        return _run(args, _reference_stage, url, name)
    space = (["--space", _space_file(folder, SMALL_WPCA)] if stage == "batched-loop-test-space"
             else ["--preset", "wpca-tiny"])
    args = ["search", *space, *common, "--n-trials", "100000", "--write-every", "1000", "--quiet",
            "--proxy", "wpca", "--population-size", "20"]
    return _run(args, _start_up_stage if stage == "start-up" else _written_stage, url, name)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--load", type=int, nargs="+", default=[0, 2], help="busy processes beside the search")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--json", default=str(Path(__file__).parent / "results" / "stop_latency.json"))
    args = parser.parse_args()
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    results: dict = {"command": "python benchmarks/stop_latency.py " + " ".join(sys.argv[1:])}
    with tempfile.TemporaryDirectory() as tmp:
        for load in args.load:
            busy = [multiprocessing.Process(target=_busy, daemon=True) for _ in range(load)]
            for p in busy:
                p.start()
            try:
                for stage in ("start-up", "reference-sample", "batched-loop-test-space", "batched-loop-wpca-tiny"):
                    runs = [measure(stage, Path(tmp), i, load) for i in range(args.repeats)]
                    key = f"load {load}: {stage}"
                    results[key] = {"runs": runs, "median_seconds": statistics.median(r["seconds"] for r in runs),
                                    "max_seconds": max(r["seconds"] for r in runs)}
                    print(f"{key}: median {results[key]['median_seconds']:.1f} s, max "
                          f"{results[key]['max_seconds']:.1f} s; exits {[r['exit'] for r in runs]}, "
                          f"trials kept {[r['trials_kept'] for r in runs]}", flush=True)
            finally:
                for p in busy:
                    p.terminate()
    Path(args.json).write_text(json.dumps(results, indent=2) + "\n")


if __name__ == "__main__":
    main()
