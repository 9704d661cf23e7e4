"""Seconds per evaluation of an objective (by default the search's default for the preset's family)
against W-PCA's, in one run.

For each preset, N architectures within the budget (seeded) are scored by two ZeroCostObjectives on
the search's default minibatch (16 x 128): one with ``wpca``, one with the other objective (a
combination's reference sample drawn first, not timed). Each architecture is scored by both, in alternating order,
building the model included (as in a search), so load on the machine falls on both alike. Writes
``benchmarks/results/objective_cost.json`` under ``PRESET:OBJECTIVE`` (other entries kept).

    python benchmarks/objective_cost.py [--n 20] [--presets wpca-small lts-gpt2] [--objective NAME]
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import time
from pathlib import Path

import numpy as np
import torch

import optuna_wpca
from optuna_wpca.proxies import default_objective


def measure(preset: str, n: int, reference_size: int, objective: str | None) -> tuple[str, dict]:
    space, budget = optuna_wpca.preset(preset)
    name = objective or default_objective(space)
    if name == "wpca":
        raise SystemExit(f"{preset}: the objective to compare is W-PCA itself; pass --objective NAME")
    batch = optuna_wpca.text_batch(batch_size=16, seq_len=128)
    plain = optuna_wpca.ZeroCostObjective(space, "wpca", batch=batch)
    combined = optuna_wpca.ZeroCostObjective(space, name, batch=batch, reference_size=reference_size,
                                             max_params=budget.max_params, min_params=budget.min_params)
    start = time.perf_counter()
    combined.reference()
    reference_seconds = time.perf_counter() - start
    rng = np.random.default_rng(1)
    archs = []
    while len(archs) < n:
        arch = space.sample(rng)
        if budget.contains(space.num_params(arch)):
            archs.append(arch)
    plain.score(space.sample(rng))  # warm-up, untimed
    combined.score(space.sample(rng))
    times: dict[str, list[float]] = {"wpca": [], name: []}
    for i, arch in enumerate(archs):
        order = [("wpca", plain), (name, combined)]
        for label, objective in order if i % 2 == 0 else order[::-1]:
            t = time.perf_counter()
            objective.score(arch)
            times[label].append(time.perf_counter() - t)
    out = {name: {"median_s": statistics.median(v), "mean_s": statistics.fmean(v)} for name, v in times.items()}
    out["ratio_of_medians"] = out[name]["median_s"] / out["wpca"]["median_s"]
    out["reference"] = {"size": reference_size, "seconds": reference_seconds}
    out["n"] = n
    return name, out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--n", type=int, default=20)
    parser.add_argument("--reference-size", type=int, default=64)
    parser.add_argument("--presets", nargs="+", default=["wpca-small", "lts-gpt2"])
    parser.add_argument("--objective", default=None, help="default: the preset's family default")
    parser.add_argument("--json", default=str(Path(__file__).parent / "results" / "objective_cost.json"))
    parser.add_argument("--label", default="", help="appended to each entry's key (e.g. 'before', with the code "
                        "to compare on PYTHONPATH: PYTHONPATH=/tmp/before python benchmarks/objective_cost.py ...)")
    args = parser.parse_args()
    path = Path(args.json)
    results = json.loads(path.read_text()) if path.exists() else {}
    results.update({"batch": [16, 128], "torch_threads": torch.get_num_threads(),
                    "machine": f"{platform.machine()}, {platform.system()}, torch {torch.__version__}"})
    for preset in args.presets:
        name, r = measure(preset, args.n, args.reference_size, args.objective)
        r["code"] = optuna_wpca.__file__
        results[f"{preset}:{name}" + (f" {args.label}" if args.label else "")] = r
        print(f"{preset}: wpca {r['wpca']['median_s']:.3f} s, {name} "
              f"{r[name]['median_s']:.3f} s per evaluation (median of {args.n}); ratio "
              f"{r['ratio_of_medians']:.2f}; reference sample of {args.reference_size}: "
              f"{r['reference']['seconds']:.0f} s once per study")
    path.write_text(json.dumps(results, indent=2) + "\n")
    print(f"wrote {args.json}")


if __name__ == "__main__":
    main()
