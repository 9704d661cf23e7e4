"""Whether averaging a decoder's ``wpca_saliency`` over initialisation seeds picks better trained decoders.

    for S in 0 1 2 3 4; do
        optuna-wpca rank --benchmark lts-gpt2-wt103 --proxy wpca_saliency --batch-size 16 --seq-len 128 \
            --seed $S --checkpoint benchmarks/results/lts_seeds_$S.checkpoint.jsonl \
            --json benchmarks/results/lts_seeds_$S.json
    done
    python benchmarks/seed_average.py

Reads the five rankings' checkpoints (nothing is scored again), takes each decoder's mean value over the
seeds, and puts the mean through the same correlations and pick under a budget as a single seed. The
decision rule was committed before the rankings ran (``docs/benchmarks.md``, "How much of a decoder's value
is its initialisation"): averaging helps only if the mean's Kendall tau is at least 0.02 above the median
single seed's and its mean budget-pick percentile is not below the median single seed's. Writes
``benchmarks/results/lts_seed_average.json``.
"""

from __future__ import annotations

import argparse
import json
import statistics
from pathlib import Path

import numpy as np

from optuna_wpca import text_batch
from optuna_wpca.ranking import load_benchmark
from optuna_wpca.ranking._budget_pick import DEFAULT_PERCENTILES
from optuna_wpca.ranking._rank import ProxyRanking, _compare_with_truth, rank_proxies

RESULTS = Path(__file__).parent / "results"
PROXY = "wpca_saliency"


def _figures(r: ProxyRanking) -> dict:
    picks = [b["pick"] for b in r.budget["budgets"]]
    return {"kendall_tau": r.kendall_tau, "spearman_rho": r.spearman_rho,
            "within_depth_tau": r.by_depth["mean"]["kendall_tau"] if r.by_depth else None,
            "mean_budget_pick": float(np.mean(picks)), "budget_picks": picks}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2, 3, 4])
    parser.add_argument("--json", default=str(RESULTS / "lts_seed_average.json"))
    args = parser.parse_args()
    benchmark = load_benchmark("lts-gpt2-wt103")
    batch = text_batch(batch_size=16, seq_len=128)
    values, single = {}, {}
    for seed in args.seeds:
        checkpoint = RESULTS / f"lts_seeds_{seed}.checkpoint.jsonl"
        if not checkpoint.exists():
            raise SystemExit(f"{checkpoint} is missing: run the ranking of seed {seed} first (see --help)")
        with open(checkpoint) as f:  # the proxy options the ranking ran with (its first line, the settings)
            options = json.loads(f.readline())["settings"]["options"]
        ranked = rank_proxies(benchmark, [PROXY], batch=batch, seed=seed, checkpoint=checkpoint, resamples=0,
                              options=options)
        values[seed] = ranked[PROXY].values
        single[seed] = _figures(ranked[PROXY])
        print(f"seed {seed}: tau {single[seed]['kendall_tau']:.4f}, mean budget pick "
              f"{single[seed]['mean_budget_pick']:.4f}", flush=True)
    table = np.array([values[s] for s in args.seeds])  # seeds x decoders
    mean = ProxyRanking(PROXY, True)
    mean.values = [float(v) for v in table.mean(axis=0)]
    n = table.shape[1]
    _compare_with_truth({PROXY: mean}, benchmark, n, DEFAULT_PERCENTILES, 0)
    averaged = _figures(mean)
    median_tau = statistics.median(f["kendall_tau"] for f in single.values())
    median_pick = statistics.median(f["mean_budget_pick"] for f in single.values())
    helps = averaged["kendall_tau"] >= median_tau + 0.02 and averaged["mean_budget_pick"] >= median_pick
    out = {
        "command": "python benchmarks/seed_average.py",
        "benchmark": "lts-gpt2-wt103", "proxy": PROXY, "batch": [16, 128], "seeds": args.seeds, "n": n,
        "single_seeds": {str(s): f for s, f in single.items()},
        "mean_of_seeds": averaged,
        # how far one decoder's value moves with its initialisation, against how far the decoders lie apart
        "within_decoder_sd": float(np.sqrt(np.mean(table.var(axis=0, ddof=1)))),
        "between_decoders_sd": float(np.mean(table.std(axis=1, ddof=1))),
        "rule": {"median_single_tau": median_tau, "median_single_mean_budget_pick": median_pick,
                 "tau_gain": averaged["kendall_tau"] - median_tau, "averaging_helps": bool(helps)},
    }
    print(f"mean of {len(args.seeds)} seeds: tau {averaged['kendall_tau']:.4f} (median single {median_tau:.4f}), "
          f"mean budget pick {averaged['mean_budget_pick']:.4f} (median single {median_pick:.4f}); "
          f"averaging helps by the rule: {helps}")
    print(f"within-decoder sd {out['within_decoder_sd']:.4f}, between-decoder sd {out['between_decoders_sd']:.4f}")
    Path(args.json).write_text(json.dumps(out, indent=2) + "\n")


if __name__ == "__main__":
    main()
