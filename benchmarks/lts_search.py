"""LiteTransformerSearch's search, reproduced as an Optuna multi-objective study on this machine.

    python benchmarks/lts_search.py [--stop-after SECONDS] [--trials 1000]

The ``lts-gpt2`` space (``DecoderSpace.lts_gpt2()``: the space of LTS's 200 trained decoders), the
decoder-parameter band of LTS (5M-12M non-embedding parameters, an Optuna constraint checked before
any model is built), three objectives: W-PCA (maximise; the registered gradient-free proxy that beats
the decoder parameter count on both trained benchmarks, see README), latency of one forward pass at
batch 1 x 192 tokens on one CPU thread (minimise, LTS's setting) and peak memory of that pass
(minimise). WPCASampler with population 100 and 10 generations (LTS: 100 per iteration, 10
iterations), NSGA-II rank and crowding as the parent pool. W-PCA is taken on a 32 x 64-token
minibatch to keep 1,000 evaluations inside a session (the rank tables use 128 x 128).

The study lives in ``benchmarks/results/lts_search.journal`` (resumable: a rerun adds only the
missing trials). Writes ``benchmarks/results/lts_search.json`` (settings, wall clock, the Pareto
front) and ``benchmarks/results/lts_search.png`` (the front: W-PCA against latency, colour =
peak memory). Run it with one torch thread on an otherwise idle machine: latency is measured.
"""

from __future__ import annotations

import argparse
import json
import platform
import sys
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import optuna  # noqa: E402
import torch  # noqa: E402
from optuna.trial import TrialState  # noqa: E402

import optuna_wpca  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent))
from resumable_study import open_storage, run_segment  # noqa: E402

optuna.logging.set_verbosity(optuna.logging.WARNING)
BUDGET = optuna_wpca.PRESETS["lts-gpt2"].budget  # LiteTransformerSearch's 5M-12M band
BAND = (BUDGET.min_params, BUDGET.max_params)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--storage", default="benchmarks/results/lts_search.journal")
    parser.add_argument("--study-name", default="lts-gpt2-pareto")
    parser.add_argument("--trials", type=int, default=1000)
    parser.add_argument("--population-size", type=int, default=100)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--seq-len", type=int, default=64)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--stop-after", type=float, default=None, help="stop this segment after N seconds")
    parser.add_argument("--json", default="benchmarks/results/lts_search.json")
    parser.add_argument("--plot", default="benchmarks/results/lts_search.png")
    parser.add_argument("--retime", action="store_true",
                        help="time the Pareto front's latency again (run on an idle machine) and report both")
    args = parser.parse_args()
    torch.set_num_threads(1)

    space = optuna_wpca.DecoderSpace.lts_gpt2()
    sampler = optuna_wpca.WPCASampler(space, min_params=BAND[0], max_params=BAND[1],
                                      population_size=args.population_size,
                                      n_generations=-(-args.trials // args.population_size), seed=args.seed)
    storage = open_storage(args.storage)
    study = optuna.create_study(directions=["maximize", "minimize", "minimize"], sampler=sampler, storage=storage,
                                study_name=args.study_name, load_if_exists=True)
    study.set_metric_names(["wpca", "latency_ms", "peak_memory_mb"])
    batch = optuna_wpca.text_batch(batch_size=args.batch_size, seq_len=args.seq_len)
    objective = optuna_wpca.ZeroCostObjective(space, proxies=("wpca", "latency", "peak_memory"), batch=batch,
                                              latency_seq_len=192)
    segments = run_segment(study, objective, args.trials, args.stop_after)

    completed = study.get_trials(deepcopy=False, states=(TrialState.COMPLETE,))
    wall = sum((t.datetime_complete - t.datetime_start).total_seconds() for t in completed)
    front = sorted(study.best_trials, key=lambda t: t.values[1])
    out = {
        "space": "DecoderSpace.lts_gpt2()",
        "band_non_embedding_params": list(BAND),
        "objectives": ["wpca (maximize)", "latency ms at 1 x 192, 1 thread (minimize)", "peak memory MB (minimize)"],
        "batch": [args.batch_size, args.seq_len],
        "population": args.population_size,
        "evaluations": len(completed),
        "target": args.trials,
        "outside_band_completed": sum(not BAND[0] <= t.user_attrs["num_params"] <= BAND[1] for t in completed),
        "wall_seconds": wall,
        "segments": segments,
        "machine": f"{platform.machine()}, {platform.system()}, torch threads {torch.get_num_threads()}",
        "pareto_front": [
            {"trial": t.number, "wpca": t.values[0], "latency_ms": t.values[1], "peak_memory_mb": t.values[2],
             "non_embedding_params": t.user_attrs["num_params"], "architecture": t.user_attrs["architecture"]}
            for t in front
        ],
    }
    if args.retime:
        # The search's latencies were measured while the study ran; timing the front again on an idle
        # machine shows how much of its order is noise.
        by_number = {t.number: t for t in completed}
        for row in out["pareto_front"]:
            model = space.build(space.from_params(by_number[row["trial"]].params), seed=0)
            again = optuna_wpca.compute_proxy("latency", model, batch, latency_seq_len=192, repeats=20)
            row["latency_ms_retimed"] = again.value
        ranks = [r["latency_ms"] for r in out["pareto_front"]], [r["latency_ms_retimed"] for r in out["pareto_front"]]
        from scipy.stats import kendalltau

        out["retimed_latency_kendall_tau"] = float(kendalltau(*ranks)[0])
    Path(args.json).write_text(json.dumps(out, indent=2) + "\n")
    if completed:
        fig, ax = plt.subplots(figsize=(7, 4.5))
        ax.scatter([t.values[1] for t in completed], [t.values[0] for t in completed], s=8, c="lightgrey",
                   label=f"all {len(completed)} evaluations")
        points = ax.scatter([t.values[1] for t in front], [t.values[0] for t in front], s=22,
                            c=[t.values[2] for t in front], cmap="viridis", label=f"Pareto front ({len(front)})")
        fig.colorbar(points, ax=ax, label="peak memory (MB)")
        ax.set_xlabel("latency (ms, batch 1 x 192 tokens, 1 CPU thread)")
        ax.set_ylabel("W-PCA")
        ax.set_title("LTS GPT-2 space, 5M-12M decoder parameters")
        ax.legend(loc="lower right")
        fig.savefig(args.plot, dpi=110, bbox_inches="tight")
    print(json.dumps({k: v for k, v in out.items() if k not in ("segments", "pareto_front")}, indent=2))
    print(f"{len(front)} Pareto-optimal decoders; wrote {args.json} and {args.plot}")


if __name__ == "__main__":
    main()
