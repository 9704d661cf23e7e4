"""The rule that chooses the search's default objective by the pick under a budget.

Written and committed before any combination below was scored. It reads the scored checkpoints of
the two public trained benchmarks (no candidate is scored on anything else), computes every
candidate's and every registered zero-cost proxy's pick under a budget, applies RULE, and writes
``benchmarks/results/objective_rule.json``.

    python benchmarks/objective_rule.py
    python benchmarks/objective_rule.py --batch 16x128

``--batch 16x128`` applies the same rule to scores at the search's own minibatch (16 x 128 tokens;
the checkpoints ``rank_16x128.BENCHMARK.checkpoint.jsonl``, written by ``optuna-wpca rank --proxy
vpca_params_saliency --proxy wpca --batch-size 16 --seq-len 128``, which hold every candidate's parts),
and writes ``objective_rule_16x128.json``. Only proxies scored there can win rule 4's fallback.

The candidates (each a combination of registered proxies, see ``optuna_wpca.proxies._combined``:
the mean of the parts' standardised logarithms, scaled on a reference sample of 64 entries drawn
with seed 0, no labels read):
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from optuna_wpca import text_batch
from optuna_wpca.proxies import get_proxy, list_base_proxies
from optuna_wpca.ranking import bootstrap_picks, load_benchmark, rank_proxies

RESULTS = Path(__file__).parent / "results"

#: At most a handful, each a short definition fixed before scoring.
CANDIDATES = {
    # W-PCA is params x V-PCA, a product in which the factor with the wider spread dominates;
    # standardised, each factor weighs the same.
    "vpca+params": "V-PCA and the parameter count, equally weighted on their spread",
    # The best gradient-free proxy on encoders with the best proxy on decoders.
    "wpca+synaptic_saliency": "W-PCA and synaptic saliency",
    "vpca+synaptic_saliency": "V-PCA and synaptic saliency",
    "vpca+params+synaptic_saliency": "V-PCA, the parameter count and synaptic saliency",
}

#: Which benchmark stands for which family of spaces.
FAMILIES = {"encoders": "nas-bench-bert", "decoders": "lts-gpt2-wt103"}
CHECKPOINTS = {"nas-bench-bert": RESULTS / "table1.checkpoint.jsonl",
               "lts-gpt2-wt103": RESULTS / "lts_rank.checkpoint.jsonl"}
#: The same benchmarks scored at the search's default minibatch.
SEARCH_BATCH_CHECKPOINTS = {name: RESULTS / f"rank_16x128.{name}.checkpoint.jsonl" for name in CHECKPOINTS}

RULE = """\
1. Scores: on NAS-Bench-BERT (500 encoders) and the LTS GPT-2 decoders (200), the pick under a budget
   (budgets at the 20th..90th percentiles of the parameter count, 8 budgets; ties averaged): mean and
   worst over budgets; bootstrap (1,000 resamples of architectures, seed 0) of the paired difference of
   mean picks to W-PCA.
2. A candidate qualifies when, on both benchmarks, its mean pick is at least the higher of W-PCA's and
   the parameter count's, and its worst pick is at least W-PCA's worst.
3. Among qualifiers the winner has the highest lower-of-its-two mean picks; within 0.005, the cheaper
   one (seconds per 1,000 evaluations on the CPU, summed over both benchmarks) wins. A winner is
   registered under a short name and becomes the default objective of every space.
4. Without a winner, per family (encoders: NAS-Bench-BERT; decoders: the LTS set): a candidate or a
   registered zero-cost proxy becomes that family's default only when its mean pick exceeds W-PCA's
   with the bootstrap 95% interval of the difference above 0, and its worst pick is at least W-PCA's
   worst; the largest mean pick then wins. Otherwise W-PCA stays that family's default. A candidate
   chosen this way is registered under a short name.
5. Reported whatever the outcome: the moonshot (mean >= 0.95 and worst >= 0.85 on both benchmarks).
"""


def _scores(benchmark: str, path: Path) -> tuple[dict, dict]:
    bench = load_benchmark(benchmark)
    settings = json.loads(path.read_text().splitlines()[0])["settings"]
    sequences, tokens = settings["batch"]
    results = rank_proxies(bench, [*settings["proxies"], *CANDIDATES],
                           batch=text_batch(batch_size=sequences, seq_len=tokens),
                           checkpoint=path, options=settings["options"], seed=settings["seed"])
    truth = bench.truth
    counts = [bench.space_of(i).num_params(a) for i, a in enumerate(bench.archs)]
    boot = bootstrap_picks({n: (r.values, get_proxy(n).direction == "maximize") for n, r in results.items()},
                           truth, counts, baseline="wpca")
    table = {}
    for name, r in results.items():
        b = r.budget
        table[name] = {"mean": b["mean"], "worst": b["worst"], "mean_regret": b["mean_regret"],
                       "mean_best_of_top": b["mean_best_of_top"], "seconds_per_1000": r.seconds_per_1000,
                       "kendall_tau": r.kendall_tau, "vs_params": b["bootstrap"],
                       "vs_wpca": {k: boot[name][k] for k in ("difference", "difference_interval")}}
    return table, {"n": len(bench.archs), "metric": bench.metric, "batch": settings["batch"]}


def decide(tables: dict[str, dict]) -> dict:
    """Apply RULE to ``{benchmark: {objective: scores}}``."""
    nas, lts = tables["nas-bench-bert"], tables["lts-gpt2-wt103"]
    qualifies = {}
    for c in CANDIDATES:
        qualifies[c] = all(
            t[c]["mean"] >= max(t["wpca"]["mean"], t["params"]["mean"]) and t[c]["worst"] >= t["wpca"]["worst"]
            for t in (nas, lts)
        )
    winners = [c for c, ok in qualifies.items() if ok]
    decision: dict = {"qualifies": qualifies}
    if winners:
        key = {c: min(nas[c]["mean"], lts[c]["mean"]) for c in winners}
        top = max(key.values())
        close = [c for c in winners if key[c] >= top - 0.005]
        cost = {c: nas[c]["seconds_per_1000"] + lts[c]["seconds_per_1000"] for c in close}
        winner = min(close, key=cost.get)
        decision.update(winner=winner, defaults={family: winner for family in FAMILIES})
    else:
        defaults = {}
        for family, benchmark in FAMILIES.items():
            t = tables[benchmark]
            zero_cost = [p for p in list_base_proxies() if get_proxy(p).zero_cost]
            eligible = [n for n in [*CANDIDATES, *zero_cost] if n in t and n != "wpca"
                        and t[n]["mean"] > t["wpca"]["mean"] and t[n]["vs_wpca"]["difference_interval"][0] > 0
                        and t[n]["worst"] >= t["wpca"]["worst"]]
            defaults[family] = max(eligible, key=lambda n: t[n]["mean"]) if eligible else "wpca"
        decision.update(winner=None, defaults=defaults)
    decision["moonshot"] = {c: all(t[c]["mean"] >= 0.95 and t[c]["worst"] >= 0.85 for t in (nas, lts))
                            for c in [*CANDIDATES, "wpca", "params", "synaptic_saliency"]}
    return decision


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--batch", choices=("128x128", "16x128"), default="128x128",
                        help="the minibatch whose scores the rule reads (default: the checkpoints it was written for)")
    parser.add_argument("--json", default=None, help="default: results/objective_rule.json, or "
                        "objective_rule_16x128.json with --batch 16x128")
    args = parser.parse_args()
    search_batch = args.batch == "16x128"
    checkpoints = SEARCH_BATCH_CHECKPOINTS if search_batch else CHECKPOINTS
    if args.json is None:
        args.json = str(RESULTS / ("objective_rule_16x128.json" if search_batch else "objective_rule.json"))
    tables, meta = {}, {}
    for benchmark in FAMILIES.values():
        tables[benchmark], meta[benchmark] = _scores(benchmark, checkpoints[benchmark])
    decision = decide(tables)
    shown = [*CANDIDATES, "wpca", "vpca", "params", "synaptic_saliency", "num_layers"]
    print(f"{'objective':<32}{'NBB mean':>9}{'worst':>7}{'LTS mean':>9}{'worst':>7}{'s/1000 NBB':>11}{'LTS':>8}")
    for name in shown:
        a, b = tables["nas-bench-bert"][name], tables["lts-gpt2-wt103"][name]
        print(f"{name:<32}{a['mean']:>9.3f}{a['worst']:>7.3f}{b['mean']:>9.3f}{b['worst']:>7.3f}"
              f"{a['seconds_per_1000']:>11.1f}{b['seconds_per_1000']:>8.1f}")
    print(json.dumps(decision, indent=2))
    Path(args.json).write_text(json.dumps({"rule": RULE, "candidates": CANDIDATES, "benchmarks": meta,
                                           "scores": tables, "decision": decision}, indent=2) + "\n")
    print(f"wrote {args.json}")


if __name__ == "__main__":
    main()
