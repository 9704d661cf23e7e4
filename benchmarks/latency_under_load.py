"""Measured against predicted latency, idle and under load: does the Pareto front survive another job?

1. ``calibrate-latency`` on an idle machine (the preset's space, 32 architectures fitted, 16 held out):
   Kendall tau and median relative error of the prediction against idle re-timings.
2. The same two-objective search (W-PCA against latency; population 20, 60 trials, sampler seed 0)
   four times: measured latency idle, measured latency with two busy processes beside it (this
   machine has two cores), predicted latency idle, predicted latency under the same load.
   Compared: the latencies of architectures timed in both measured runs (loaded / idle), the
   predicted values (identical or not), and each pair's Pareto fronts (architectures in common).

    python benchmarks/latency_under_load.py [--preset wpca-tiny]

Writes ``benchmarks/results/latency_under_load.json`` and the latency model beside it. Run it on an
otherwise idle machine: the "idle" runs are only as idle as the machine.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

import optuna
from scipy.stats import kendalltau

from optuna_wpca.cli import main as cli

RESULTS = Path(__file__).parent / "results"


@contextlib.contextmanager
def load(processes: int):
    """``processes`` busy loops beside the measurement."""
    hogs = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(processes)]
    try:
        yield
    finally:
        for hog in hogs:
            hog.kill()
            hog.wait()


def search(folder: Path, name: str, preset: str, proxy: str, model: Path) -> dict[str, tuple[float, float]]:
    url = f"sqlite:///{folder / 'fronts.db'}"
    extra = ["--latency-model", str(model)] if proxy == "predicted_latency" else []
    code = cli(["search", "--preset", preset, "--storage", url, "--study-name", name, "--proxy", "wpca",
                "--proxy", proxy, "--n-trials", "60", "--population-size", "20", "--sampler-seed", "0", "--quiet",
                "--top", "1", *extra])
    if code != 0:
        raise SystemExit(code)
    study = optuna.load_study(study_name=name, storage=url)
    front = {json.dumps(t.params, sort_keys=True) for t in study.best_trials}
    return {json.dumps(t.params, sort_keys=True): (t.values[1], json.dumps(t.params, sort_keys=True) in front)
            for t in study.trials if t.values}


def compare(idle: dict, loaded: dict) -> dict:
    common = sorted(set(idle) & set(loaded))
    a, b = [idle[k][0] for k in common], [loaded[k][0] for k in common]
    front_idle = {k for k, (_, on) in idle.items() if on}
    front_loaded = {k for k, (_, on) in loaded.items() if on}
    return {
        "architectures_in_both": len(common),
        "median_loaded_over_idle": statistics.median(y / x for x, y in zip(a, b)) if common else None,
        "max_loaded_over_idle": max(y / x for x, y in zip(a, b)) if common else None,
        "kendall_tau_loaded_vs_idle": float(kendalltau(a, b)[0]) if len(common) > 1 else None,
        "identical_values": all(x == y for x, y in zip(a, b)),
        "front_sizes": [len(front_idle), len(front_loaded)],
        "front_jaccard": len(front_idle & front_loaded) / max(1, len(front_idle | front_loaded)),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--preset", default="wpca-tiny")
    parser.add_argument("--load", type=int, default=2, help="busy processes in the loaded runs (default 2)")
    args = parser.parse_args()
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    model = RESULTS / f"latency_model_{args.preset}.json"
    assert cli(["calibrate-latency", "--preset", args.preset, "--out", str(model)]) == 0
    calibration = json.loads(model.read_text())["calibration"]
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        runs = {}
        for proxy in ("latency", "predicted_latency"):
            runs[f"{proxy}_idle"] = search(folder, f"{proxy}-idle", args.preset, proxy, model)
            with load(args.load):
                runs[f"{proxy}_loaded"] = search(folder, f"{proxy}-loaded", args.preset, proxy, model)
    out = {
        "preset": args.preset, "load_processes": args.load,
        "calibration": {k: calibration[k] for k in ("fitted_on", "holdout", "holdout_kendall_tau",
                                                   "holdout_median_relative_error")},
        "measured": compare(runs["latency_idle"], runs["latency_loaded"]),
        "predicted": compare(runs["predicted_latency_idle"], runs["predicted_latency_loaded"]),
        "measured_idle_vs_predicted_idle_tau": None,
    }
    common = sorted(set(runs["latency_idle"]) & set(runs["predicted_latency_idle"]))
    if len(common) > 1:
        out["measured_idle_vs_predicted_idle_tau"] = float(kendalltau(
            [runs["latency_idle"][k][0] for k in common], [runs["predicted_latency_idle"][k][0] for k in common])[0])
    (RESULTS / "latency_under_load.json").write_text(json.dumps(out, indent=2) + "\n")
    print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
