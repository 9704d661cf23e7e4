"""W-PCA's rank correlation against minibatch size and initialisation seed, on both trained benchmarks.

    python benchmarks/batch_size.py run [--device cuda] [--benchmark NAME ...] [--limit N]
    python benchmarks/batch_size.py table

W-PCA's cost is linear in tokens, so the default minibatch should be the cheapest one that ranks as
well as 128 x 128. ``run`` scores every architecture of NAS-Bench-BERT and of the LTS decoders with
W-PCA at each minibatch of GRID (initialisation seed 42) and at 128 x 128 with the seeds of SEEDS,
appending one JSON line per (benchmark, batch, seed, architecture) to
``benchmarks/results/batch_size.jsonl`` (resumable). ``table`` writes ``batch_size.json`` and prints
Kendall tau / Spearman rho per setting (on the architectures scored in every setting of that
benchmark, so a ``--limit`` run compares like with like), with the seconds per evaluation.

Rule (stated before the run): for each benchmark, the seed spread is the range of W-PCA's Kendall tau at
128 x 128 over the initialisation seeds in SEEDS. A minibatch qualifies when its tau at seed 42 is not
below the low end of that spread on both benchmarks. The default becomes the qualifying minibatch with
the fewest tokens (ties: the shorter sequence).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from optuna_wpca.ranking import correlations, load_benchmark  # noqa: E402
from optuna_wpca._text import text_batch  # noqa: E402
from optuna_wpca.proxies import compute_proxy  # noqa: E402

RESULTS = Path(__file__).resolve().parent / "results"
GRID = ((16, 64), (32, 64), (16, 128), (32, 128), (64, 64), (64, 128), (128, 64), (128, 128))
SEEDS = (42, 0, 1)
BENCHMARKS = ("nas-bench-bert", "lts-gpt2-wt103")


def settings() -> list[tuple[int, int, int]]:
    out = [(b, n, 42) for b, n in GRID]
    out += [(128, 128, s) for s in SEEDS if s != 42]
    return out


def run(args: argparse.Namespace) -> None:
    path = Path(args.out)
    done = set()
    if path.exists():
        for line in path.read_text().splitlines():
            try:
                r = json.loads(line)
            except json.JSONDecodeError:
                continue
            done.add((r["benchmark"], tuple(r["batch"]), r["seed"], r["id"]))
    sync = torch.cuda.synchronize if torch.device(args.device).type == "cuda" else (lambda: None)
    with open(path, "a") as log:
        for name in args.benchmark:
            bench = load_benchmark(name)
            n = len(bench.archs) if args.limit is None else min(args.limit, len(bench.archs))
            for b, t, seed in settings():
                batch = text_batch(tokenizer=args.tokenizer, batch_size=b, seq_len=t).to(args.device)
                start = time.perf_counter()
                for i in range(n):
                    key = (name, (b, t), seed, str(bench.ids[i]))
                    if key in done:
                        continue
                    model = bench.build(i, seed=seed, device=args.device)
                    sync()
                    t0 = time.perf_counter()
                    r = compute_proxy("wpca", model, batch)
                    sync()
                    log.write(json.dumps({"benchmark": name, "batch": [b, t], "seed": seed, "id": str(bench.ids[i]),
                                          "wpca": r.value, "vpca": r.parts["vpca"], "truth": bench.truth[i],
                                          "seconds": time.perf_counter() - t0, "device": str(args.device)}) + "\n")
                log.flush()
                print(f"{name} {b}x{t} seed {seed}: {time.perf_counter() - start:.1f} s", flush=True)


def table(args: argparse.Namespace) -> None:
    rows: dict[tuple, list[dict]] = {}
    for line in Path(args.out).read_text().splitlines():
        r = json.loads(line)
        rows.setdefault((r["benchmark"], tuple(r["batch"]), r["seed"]), []).append(r)
    # Every setting of a benchmark is compared on the same architectures: those scored in all of them.
    common: dict[str, set[str]] = {}
    for (name, _, _), rs in rows.items():
        ids = {r["id"] for r in rs}
        common[name] = ids if name not in common else common[name] & ids
    rows = {key: sorted((r for r in rs if r["id"] in common[key[0]]), key=lambda r: r["id"])
            for key, rs in rows.items()}
    result = {"rule": __doc__.split("Rule (stated before the run): ")[1].strip(), "settings": []}
    spread = {}
    for (name, batch, seed), rs in sorted(rows.items()):
        tau, rho = correlations([r["wpca"] for r in rs], [r["truth"] for r in rs])
        seconds = sum(r["seconds"] for r in rs) / len(rs)
        result["settings"].append({"benchmark": name, "batch": list(batch), "tokens": batch[0] * batch[1],
                                   "seed": seed, "n": len(rs), "kendall_tau": tau, "spearman_rho": rho,
                                   "seconds_per_evaluation": seconds, "device": rs[0]["device"]})
        if batch == (128, 128):
            spread.setdefault(name, []).append(tau)
    result["seed_spread_128x128"] = {k: [min(v), max(v)] for k, v in spread.items()}
    qualifying = []
    for b, t in GRID:
        taus = {s["benchmark"]: s["kendall_tau"] for s in result["settings"] if tuple(s["batch"]) == (b, t)
                and s["seed"] == 42}
        low = {k: min(v) for k, v in spread.items()}
        if set(taus) == set(low) and all(taus[k] >= low[k] for k in low):
            qualifying.append((b * t, t, [b, t]))
    result["qualifying"] = [q[2] for q in sorted(qualifying)]
    result["default"] = sorted(qualifying)[0][2] if qualifying else None
    Path(args.json).write_text(json.dumps(result, indent=2) + "\n")
    print(f"{'benchmark':<16}{'batch':>10}{'seed':>6}{'tau':>8}{'rho':>8}{'s/eval':>9}")
    for s in result["settings"]:
        print(f"{s['benchmark']:<16}{'x'.join(map(str, s['batch'])):>10}{s['seed']:>6}{s['kendall_tau']:>8.3f}"
              f"{s['spearman_rho']:>8.3f}{s['seconds_per_evaluation']:>9.3f}")
    print(f"seed spread at 128x128: {result['seed_spread_128x128']}; default by the rule: {result['default']}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    r = sub.add_parser("run")
    r.add_argument("--device", default="cpu")
    r.add_argument("--benchmark", nargs="+", default=list(BENCHMARKS), choices=BENCHMARKS)
    r.add_argument("--limit", type=int, default=None)
    r.add_argument("--tokenizer", default=None)
    r.add_argument("--out", default=str(RESULTS / "batch_size.jsonl"))
    t = sub.add_parser("table")
    t.add_argument("--out", default=str(RESULTS / "batch_size.jsonl"))
    t.add_argument("--json", default=str(RESULTS / "batch_size.json"))
    args = parser.parse_args()
    run(args) if args.command == "run" else table(args)


if __name__ == "__main__":
    main()
