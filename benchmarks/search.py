"""Search benchmark: WPCASampler against Random, TPE and stock NSGA-II at equal evaluations.

    python benchmarks/search.py            # W-PCA-Small, 15.7M budget, 1,000 evaluations x 3 seeds
    python benchmarks/search.py --quick    # a few-minute version of the same
    python benchmarks/search.py --seeds 1 --no-summary &   # one process per seed on a multi-core machine,
    python benchmarks/search.py --seeds 2 --no-summary &   # then a plain run writes the summary

Each finished (sampler, seed) run is saved at once to ``<json>.partial`` and skipped when the script is
started again, so a stopped benchmark resumes where it was; seeds run in the outer loop so that a
partial result compares every sampler on the same seeds.

An evaluation is a completed, feasible trial (a built and scored candidate). Samplers that propose
over-budget candidates get them pruned before any model is built; those proposals are counted
separately (``infeasible_proposals``) and cost no evaluation. Writes the JSON and a convergence plot
(best-so-far W-PCA against evaluations).
"""

from __future__ import annotations

import argparse
import fcntl
import json
import os
import platform
import time
from pathlib import Path

import numpy as np
import optuna
import torch
from optuna.trial import TrialState

from optuna_wpca import PRESETS, WPCASampler, WPCASpace, ZeroCostObjective, text_batch

optuna.logging.set_verbosity(optuna.logging.WARNING)


def make_sampler(name: str, space: WPCASpace, budget: float, seed: int, population: int):
    if name == "wpca_ga":
        return WPCASampler(space, max_params=budget, population_size=population, seed=seed)
    if name == "random":
        return optuna.samplers.RandomSampler(seed=seed)
    if name == "tpe":
        return optuna.samplers.TPESampler(seed=seed)
    if name == "nsgaii":
        return optuna.samplers.NSGAIISampler(population_size=population, seed=seed)
    raise ValueError(name)


def run(name, space, budget, seed, batch, evaluations, population, max_proposals):
    sampler = make_sampler(name, space, budget, seed, population)
    objective = ZeroCostObjective(space, batch=batch, max_params=budget, seed=0)
    study = optuna.create_study(direction="maximize", sampler=sampler)
    curve: list[float] = []
    best = -np.inf
    start = time.perf_counter()
    proposals = 0
    while len(curve) < evaluations and proposals < max_proposals:
        study.optimize(objective, n_trials=1)
        proposals += 1
        t = study.trials[-1]
        if t.state == TrialState.COMPLETE:
            best = max(best, t.value)
            curve.append(best)
    seconds = time.perf_counter() - start
    completed = [t for t in study.trials if t.state == TrialState.COMPLETE]
    return {
        "best": best,
        "seconds": seconds,
        "curve": curve,
        "infeasible_proposals": proposals - len(curve),
        "max_completed_params": max(t.user_attrs["num_params"] for t in completed),
        "cache_hits": sum(bool(t.user_attrs.get("cached")) for t in completed),
        "torch_threads": torch.get_num_threads(),
    }


def save_run(partial_path: Path, settings: dict, key: str, result: dict) -> dict:
    """Add one finished run to the partial file and return every run it now holds.

    Several processes may run different seeds into the same file (``--seeds 1`` in one, ``--seeds 2``
    in another): the file is re-read under an exclusive lock and replaced atomically, so no process
    overwrites a run that another has saved meanwhile.
    """
    partial_path.parent.mkdir(parents=True, exist_ok=True)
    with open(partial_path.with_name(partial_path.name + ".lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        runs: dict = {}
        if partial_path.exists():
            saved = json.loads(partial_path.read_text())
            if saved["settings"] == settings:
                runs = saved["runs"]
        runs[key] = result
        tmp = partial_path.with_name(partial_path.name + f".tmp{os.getpid()}")
        tmp.write_text(json.dumps({"settings": settings, "runs": runs}))
        os.replace(tmp, partial_path)
    return runs


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--evaluations", type=int, default=1000)
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--population", type=int, default=50)
    parser.add_argument("--batch-size", type=int, default=16)
    parser.add_argument("--seq-len", type=int, default=64)
    parser.add_argument("--budget", type=float, default=PRESETS["wpca-small"].budget.max_params)
    parser.add_argument("--samplers", nargs="+", default=["wpca_ga", "random", "tpe", "nsgaii"])
    parser.add_argument("--quick", action="store_true", help="100 evaluations, population 20, batch 16 x 32")
    parser.add_argument("--no-summary", action="store_true",
                        help="only add runs to the partial file (for one of several processes, each on its own seeds)")
    parser.add_argument("--json", default="benchmarks/results/search.json")
    parser.add_argument("--plot", default=None, help="convergence plot (default: the JSON path with .png)")
    args = parser.parse_args()
    if args.plot is None:
        args.plot = str(Path(args.json).with_suffix(".png"))
    if args.quick:
        args.evaluations, args.population, args.batch_size, args.seq_len = 100, 20, 16, 32
        args.json = args.json.replace(".json", "_quick.json")
        args.plot = args.plot.replace(".png", "_quick.png")

    space = WPCASpace.small()
    batch = text_batch(batch_size=args.batch_size, seq_len=args.seq_len, seed=0)
    partial_path = Path(args.json + ".partial")
    settings = {"batch": [args.batch_size, args.seq_len], "evaluations": args.evaluations,
                "population": args.population, "budget_params": args.budget}
    done: dict = {}
    if partial_path.exists():
        saved = json.loads(partial_path.read_text())
        if saved["settings"] == settings:
            done = saved["runs"]
            print(f"resuming: {len(done)} finished runs in {partial_path}", flush=True)
    for seed in args.seeds:
        for name in args.samplers:
            key = f"{name}/{seed}"
            if key in done:
                continue
            done[key] = run(name, space, args.budget, seed, batch, args.evaluations, args.population,
                            20 * args.evaluations)
            print(f"{key:<10} best {done[key]['best']:.4g}  {done[key]['seconds']:.0f} s  infeasible proposals "
                  f"{done[key]['infeasible_proposals']}", flush=True)
            done = save_run(partial_path, settings, key, done[key])
    missing = [f"{n}/{s}" for s in args.seeds for n in args.samplers if f"{n}/{s}" not in done]
    if missing or args.no_summary:
        print(f"not summarised; runs still missing: {missing}")
        return
    results: dict = {}
    for name in args.samplers:
        runs = [done[f"{name}/{s}"] for s in args.seeds]
        results[name] = {key: [r.get(key) for r in runs] for key in runs[0]}
        best = results[name]["best"]
        print(f"{name:<8} best W-PCA mean {np.mean(best):.4g} min {np.min(best):.4g} max {np.max(best):.4g}  "
              f"seconds {np.mean(results[name]['seconds']):.0f}  infeasible proposals "
              f"{results[name]['infeasible_proposals']}", flush=True)

    out = {
        "batch": [args.batch_size, args.seq_len],
        "evaluations": args.evaluations,
        "population": args.population,
        "budget_params": args.budget,
        "seeds": args.seeds,
        "samplers": {k: {kk: vv for kk, vv in v.items() if kk != "curve"} for k, v in results.items()},
        "summary": {k: {"mean": float(np.mean(v["best"])), "min": float(np.min(v["best"])),
                        "max": float(np.max(v["best"]))} for k, v in results.items()},
        "machine": f"{platform.machine()}, {platform.system()}, torch threads per run "
                   f"{sorted({r.get('torch_threads', '?') for r in done.values()}, key=str)}",
    }
    Path(args.json).parent.mkdir(parents=True, exist_ok=True)
    Path(args.json).write_text(json.dumps(out, indent=2) + "\n")
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4))
    for name, r in results.items():
        n = min(len(c) for c in r["curve"])
        curves = np.array([c[:n] for c in r["curve"]])
        x = np.arange(1, n + 1)
        ax.plot(x, curves.mean(0), label=name)
        ax.fill_between(x, curves.min(0), curves.max(0), alpha=0.15)
    ax.set_xlabel("evaluations")
    ax.set_ylabel("best feasible W-PCA so far")
    ax.set_title(f"W-PCA-Small, budget {args.budget / 1e6:.1f}M, batch {args.batch_size}x{args.seq_len}")
    ax.legend()
    fig.tight_layout()
    fig.savefig(args.plot, dpi=120)
    print(f"wrote {args.json} and {args.plot}")


if __name__ == "__main__":
    main()
