"""Does a proxy choose BERT vs MobileBERT blocks and FFN widths better than the parameter count?

    python benchmarks/own_bench_pairs.py --metric kdpre \\
        --checkpoint benchmarks/results/own_bench_rank.checkpoint.jsonl \\
        --json benchmarks/results/own_bench_pairs_kdpre.json

It reads the ground truth of ``benchmarks/data/own_bench.json`` (mean over seeds, higher is better)
and the proxies' values on the same architectures from a ``rank --checkpoint`` file, and asks the
question on pairs, where the parameter count can be put aside:

- A pair is two architectures of the same depth whose ground truths differ by more than their seed
  noise (|mean_a - mean_b| > |seed0_a - seed1_a| + |seed0_b - seed1_b|): a pair the benchmark
  decides. Pairs of different depths are left out: depth is a choice the user makes first.
- A proxy's *contested* pairs are the decided pairs that it orders unlike the parameter count. On
  those only the block types and widths that the count does not see can make it right.
- The rule, fixed before the full benchmark was read: a proxy chooses better than the parameter
  count when it is right on more than half of its contested pairs and a two-sided sign test gives
  p < 0.05 (pairs share architectures, so p is optimistic: a proxy that only just passes is a hint).

Also reported, per depth: Kendall tau of the ground truth against the number of BERT blocks and the
total FFN width, raw and at fixed size bucket, so the reading can say which choice the benchmark
rewards.
"""

from __future__ import annotations

import argparse
import itertools
import json
import math
from pathlib import Path
from typing import Any

from scipy.stats import binomtest, kendalltau

BENCHMARK = Path(__file__).with_name("data") / "own_bench.json"


def read_truth(path: Path, metric: str) -> dict[str, dict[str, Any]]:
    """Per architecture id: depth, bucket, features, mean ground truth and its seed spread."""
    raw = json.loads(path.read_text())
    out = {}
    for e in raw["entries"]:
        runs = e.get("runs", {}).get(metric)
        if not runs or len(runs) < 2:
            continue
        values = [runs[k] for k in sorted(runs)]
        blocks = [e["params"][f"layer_{i:02d}_block"] for i in range(e["depth"])]
        mults = [e["params"][f"layer_{i:02d}_ffn_mult"] for i in range(e["depth"])]
        out[e["id"]] = {
            "depth": e["depth"], "bucket": e["bucket"], "num_params": e["num_params"],
            "bert_blocks": blocks.count("bert"), "ffn_total": sum(mults),
            "truth": sum(values) / len(values), "spread": abs(values[0] - values[1]),
        }
    if not out:
        raise SystemExit(f"no architecture of {path} has two seeds of metric {metric!r}")
    return out


def read_proxies(path: Path) -> dict[str, dict[str, float]]:
    """Per architecture id, proxy name -> value, from a ``rank --checkpoint`` file."""
    out: dict[str, dict[str, float]] = {}
    for line in Path(path).read_text().splitlines():
        row = json.loads(line)
        if "id" in row:
            out.setdefault(row["id"], {}).update({k: v[0] for k, v in row["scores"].items()})
    return out


def decided_pairs(truth: dict[str, dict[str, Any]]) -> list[tuple[str, str]]:
    """Same-depth pairs whose ground truths differ by more than their seed noise."""
    pairs = []
    for a, b in itertools.combinations(sorted(truth), 2):
        ta, tb = truth[a], truth[b]
        if ta["depth"] == tb["depth"] and abs(ta["truth"] - tb["truth"]) > ta["spread"] + tb["spread"]:
            pairs.append((a, b))
    return pairs


def _sign(x: float) -> int:
    return (x > 0) - (x < 0)


def contest(values: dict[str, float], truth: dict[str, dict[str, Any]], pairs) -> dict[str, Any]:
    """The proxy against the parameter count on the pairs they order differently."""
    right = wrong = ties = agree = 0
    for a, b in pairs:
        t = _sign(truth[a]["truth"] - truth[b]["truth"])
        p = _sign(values[a] - values[b])
        n = _sign(truth[a]["num_params"] - truth[b]["num_params"])
        if p == n:
            agree += 1
        elif p == 0:
            ties += 1
        elif p == t:
            right += 1
        else:
            wrong += 1
    contested = right + wrong
    p_value = binomtest(right, contested).pvalue if contested else math.nan
    return {"pairs": len(pairs), "ordered_like_params": agree, "proxy_ties": ties, "contested": contested,
            "proxy_right": right, "params_right": wrong,
            "proxy_share": right / contested if contested else math.nan, "sign_test_p": p_value,
            "better_than_params": bool(contested and right > wrong and p_value < 0.05)}


def feature_taus(truth: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """Kendall tau of the ground truth against each feature, within depth and within (depth, bucket)."""
    out: dict[str, Any] = {}
    for feature in ("num_params", "bert_blocks", "ffn_total"):
        per: dict[str, Any] = {}
        for depth in sorted({t["depth"] for t in truth.values()}):
            ids = [i for i in truth if truth[i]["depth"] == depth]
            tau = kendalltau([truth[i][feature] for i in ids], [truth[i]["truth"] for i in ids])[0]
            cells = []
            for bucket in sorted({truth[i]["bucket"] for i in ids}):
                cell = [i for i in ids if truth[i]["bucket"] == bucket]
                if len(cell) >= 3 and len({truth[i][feature] for i in cell}) > 1:
                    cells.append((len(cell), kendalltau([truth[i][feature] for i in cell],
                                                        [truth[i]["truth"] for i in cell])[0]))
            per[str(depth)] = {"n": len(ids), "kendall_tau": float(tau),
                               "within_bucket_mean_tau": sum(n * t for n, t in cells) / sum(n for n, _ in cells)
                               if cells else math.nan}
        out[feature] = per
    return out


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--benchmark", type=Path, default=BENCHMARK)
    parser.add_argument("--metric", required=True, help="a run metric of the benchmark file (kdpre, kd, ...)")
    parser.add_argument("--checkpoint", type=Path, required=True, help="a rank --checkpoint file on the same file")
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args(argv)

    truth = read_truth(args.benchmark, args.metric)
    proxies = read_proxies(args.checkpoint)
    missing = sorted(set(truth) - set(proxies))
    if missing:
        raise SystemExit(f"the checkpoint has no proxy values for {len(missing)} architectures, e.g. {missing[0]}")
    pairs = decided_pairs(truth)
    names = sorted(set.intersection(*(set(proxies[i]) for i in truth)))
    results = {name: contest({i: proxies[i][name] for i in truth}, truth, pairs) for name in names}
    out = {"benchmark": str(args.benchmark), "metric": args.metric, "architectures": len(truth),
           "decided_pairs": len(pairs), "same_depth_pairs": sum(
               1 for a, b in itertools.combinations(truth, 2) if truth[a]["depth"] == truth[b]["depth"]),
           "rule": "better than params: right on > half of the pairs it orders unlike params, sign test p < 0.05",
           "proxies": results, "features": feature_taus(truth)}
    print(f"{args.metric}: {len(truth)} architectures, {len(pairs)} of {out['same_depth_pairs']} same-depth pairs "
          "decided beyond seed noise")
    print(f"{'proxy':<22}{'like params':>12}{'contested':>10}{'proxy right':>12}{'share':>7}{'p':>8}  better")
    for name, r in sorted(results.items(), key=lambda kv: -(kv[1]["proxy_share"] if kv[1]["contested"] else -1)):
        print(f"{name:<22}{r['ordered_like_params']:>12}{r['contested']:>10}{r['proxy_right']:>12}"
              f"{r['proxy_share']:>7.2f}{r['sign_test_p']:>8.3f}  {'yes' if r['better_than_params'] else 'no'}")
    for feature, per in out["features"].items():
        print(f"tau(truth, {feature}) by depth: " + ", ".join(
            f"{d}: {v['kendall_tau']:+.3f} (in bucket {v['within_bucket_mean_tau']:+.3f})" for d, v in per.items()))
    if args.json:
        args.json.write_text(json.dumps(out, indent=2) + "\n")


if __name__ == "__main__":
    main()
