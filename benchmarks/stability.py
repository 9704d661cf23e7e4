"""The W-PCA paper's Appendix C: how stable is each proxy's ranking under a new seed or a new minibatch?

    python benchmarks/stability.py            # 10 architectures x (10 seeds + 10 minibatches), batch 32 x 64
    python benchmarks/stability.py --quick    # 5 architectures x (3 + 3), batch 8 x 32

Ten NAS-Bench-BERT architectures are taken at the GLUE deciles (the entry nearest each of the 5th,
15th, ..., 95th percentiles), so they span the benchmark from worst to best. Two ablations, each
with everything else fixed: (a) 10 initialisation seeds on minibatch 0, (b) minibatches 0-9 (other
WikiText-2 windows) at seed 42. In every run each proxy ranks the ten architectures 1-10; a stable
proxy gives each architecture the same rank every run. Reported per proxy and ablation: the mean
over architectures of the standard deviation of its rank, and Kendall tau between that run's
ranking and GLUE's (mean and spread). Writes a JSON table and a PNG of the rank spreads.
"""

from __future__ import annotations

import argparse
import json
import platform
import time
from pathlib import Path

import numpy as np
from scipy.stats import kendalltau, rankdata
from tqdm import tqdm

from optuna_wpca import compute_proxy, load_benchmark, text_batch
from optuna_wpca.ranking import benchmark_path

PROXIES = ("wpca", "vpca", "params", "synaptic_diversity", "synaptic_saliency", "activation_distance",
           "jacobian_cosine", "head_importance", "head_confidence", "softmax_confidence")


def decile_picks(scores: list[float], k: int) -> list[int]:
    """Indices of the entries nearest the k evenly spaced quantiles (5%, 15%, ... for k = 10), no repeats."""
    order = np.argsort(scores)
    picks: list[int] = []
    for q in (np.arange(k) + 0.5) / k:
        pos = int(round(q * (len(order) - 1)))
        while int(order[pos]) in picks:
            pos += 1
        picks.append(int(order[pos]))
    return picks


def score_runs(bench, picks, proxies, runs, desc):
    """``values[proxy][run][arch]`` for runs given as (init seed, minibatch)."""
    values = {p: np.zeros((len(runs), len(picks))) for p in proxies}
    seconds = {p: 0.0 for p in proxies}
    for r, (seed, batch) in enumerate(tqdm(runs, desc=desc, unit="run")):
        for a, index in enumerate(picks):
            model = bench.build(index, seed=seed)
            for p in proxies:
                start = time.perf_counter()
                values[p][r, a] = compute_proxy(p, model, batch).value
                seconds[p] += time.perf_counter() - start
    return values, seconds


def summarise(values: np.ndarray, truth: np.ndarray) -> dict:
    ranks = np.array([rankdata(-row) for row in values])  # 1 = the proxy's best
    taus = [kendalltau(row, truth)[0] for row in values]
    return {
        "mean_rank_std": float(ranks.std(axis=0).mean()),
        "ranks": ranks.tolist(),
        "tau_mean": float(np.nanmean(taus)),
        "tau_std": float(np.nanstd(taus)),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--benchmark", default=str(benchmark_path("nas-bench-bert")))
    parser.add_argument("--architectures", type=int, default=10)
    parser.add_argument("--runs", type=int, default=10, help="seeds in (a), minibatches in (b)")
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--seq-len", type=int, default=64)
    parser.add_argument("--proxy", nargs="+", default=list(PROXIES))
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--json", default="benchmarks/results/stability.json")
    parser.add_argument("--plot", default="benchmarks/results/stability.png")
    args = parser.parse_args()
    if args.quick:
        args.architectures, args.runs, args.batch_size, args.seq_len = 5, 3, 8, 32
        args.json = args.json.replace(".json", "_quick.json")
        args.plot = args.plot.replace(".png", "_quick.png")

    bench = load_benchmark(args.benchmark)
    picks = decile_picks(bench.scores, args.architectures)
    truth = np.array([bench.scores[i] for i in picks])
    batches = [text_batch(batch_size=args.batch_size, seq_len=args.seq_len, seed=b) for b in range(args.runs)]
    start = time.perf_counter()
    ablations = {
        "seeds": [(seed, batches[0]) for seed in range(args.runs)],
        "minibatches": [(42, batch) for batch in batches],
    }
    table: dict = {p: {} for p in args.proxy}
    seconds = {p: 0.0 for p in args.proxy}
    for ablation, runs in ablations.items():
        values, secs = score_runs(bench, picks, args.proxy, runs, ablation)
        for p in args.proxy:
            table[p][ablation] = summarise(values[p], truth)
            seconds[p] += secs[p]

    print(f"{'proxy':<21}{'rank std (seeds)':>18}{'rank std (batches)':>20}{'tau seeds':>16}{'tau batches':>16}")
    for p, row in table.items():
        s, b = row["seeds"], row["minibatches"]
        print(f"{p:<21}{s['mean_rank_std']:>18.2f}{b['mean_rank_std']:>20.2f}"
              f"{s['tau_mean']:>9.3f} ± {s['tau_std']:.3f}{b['tau_mean']:>9.3f} ± {b['tau_std']:.3f}")
    out = {
        "benchmark": Path(args.benchmark).name,
        "architectures": [{"id": bench.ids[i], "glue": bench.scores[i]} for i in picks],
        "runs": args.runs,
        "batch": [args.batch_size, args.seq_len],
        "proxies": {p: {**row, "seconds": seconds[p]} for p, row in table.items()},
        "wall_seconds": time.perf_counter() - start,
        "machine": platform.machine(),
    }
    Path(args.json).parent.mkdir(parents=True, exist_ok=True)
    Path(args.json).write_text(json.dumps(out, indent=2) + "\n")

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(2, len(args.proxy), figsize=(2.1 * len(args.proxy), 5.2), sharey=True, squeeze=False)
    true_rank = rankdata(-truth)
    for col, p in enumerate(args.proxy):
        for row, ablation in enumerate(ablations):
            ax = axes[row][col]
            ranks = np.array(table[p][ablation]["ranks"])
            order = np.argsort(true_rank)
            ax.boxplot(ranks[:, order], widths=0.6, showfliers=False)
            ax.plot(np.arange(1, len(picks) + 1), true_rank[order], "r.", markersize=4)
            ax.set_title(f"{p}\n{ablation}", fontsize=7)
            ax.tick_params(labelsize=6)
            ax.set_xticks([])
        axes[1][col].set_xlabel("archs by GLUE", fontsize=7)
    axes[0][0].set_ylabel("proxy rank (1 = best)", fontsize=7)
    axes[1][0].set_ylabel("proxy rank (1 = best)", fontsize=7)
    fig.suptitle(f"Rank spread over {args.runs} seeds / minibatches ({args.batch_size}x{args.seq_len}); "
                 "red = GLUE rank", fontsize=8)
    fig.tight_layout()
    fig.savefig(args.plot, dpi=130)
    print(f"wrote {args.json} and {args.plot}")


if __name__ == "__main__":
    main()
