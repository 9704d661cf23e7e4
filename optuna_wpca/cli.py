"""The ``optuna-wpca`` command line."""

from __future__ import annotations

import argparse
import json
import sys
from importlib import resources
from pathlib import Path
from typing import Sequence

from optuna_wpca.models._base import COUNT_CONVENTIONS


def bundled_benchmark_path() -> str:
    return str(resources.files("optuna_wpca") / "data" / "nas-bench-bert" / "BERT_benchmark.json")


class CLIError(Exception):
    """A user error: printed as one line, exit status 2."""


def _add_batch_options(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("minibatch")
    g.add_argument("--corpus", default=None, help="text file to cut the minibatch from (default: bundled WikiText-2)")
    g.add_argument("--tokenizer", default=None, help="local tokenizer directory (default: uncased BERT WordPiece)")
    g.add_argument("--batch-size", type=int, default=128, help="sequences in the minibatch (default 128)")
    g.add_argument("--seq-len", type=int, default=128, help="tokens per sequence (default 128)")
    g.add_argument("--batch-seed", type=int, default=0, help="seed of the window positions (default 0)")


def _rank(args: argparse.Namespace) -> int:
    from tqdm import tqdm

    from optuna_wpca._ranking import format_table, load_benchmark, rank_proxies
    from optuna_wpca._text import text_batch
    from optuna_wpca.proxies import list_proxies
    from optuna_wpca.spaces import FlexiBERTSpace

    proxies: list[str] = []
    for name in args.proxy or ["wpca", "vpca", "params"]:
        proxies.extend(list_proxies() if name == "all" else [name])
    known = set(list_proxies())
    unknown = [p for p in proxies if p not in known]
    if unknown:
        raise CLIError(f"unknown proxy {unknown[0]!r}; choose from: all, {', '.join(sorted(known))}")
    space = FlexiBERTSpace(as_trained=args.as_trained, count=args.count)
    bench = load_benchmark(args.benchmark, metric=args.metric, space=space)
    batch = text_batch(
        args.corpus, tokenizer=args.tokenizer, batch_size=args.batch_size, seq_len=args.seq_len, seed=args.batch_seed
    )
    n = len(bench.archs) if args.limit is None else min(args.limit, len(bench.archs))
    options = {"eta": args.eta, "eta_mobilebert": args.eta_mobilebert, "reduce": args.reduce}
    with tqdm(total=n, desc="ranking", unit="arch", disable=args.quiet) as bar:
        results = rank_proxies(
            bench, proxies, batch=batch, limit=args.limit, seed=args.seed, device=args.device,
            options=options, progress=bar.update,
        )
    print(format_table(results))
    if args.json:
        out = {
            "benchmark": str(args.benchmark),
            "metric": args.metric,
            "n": n,
            "batch": list(batch.shape),
            "seed": args.seed,
            "batch_seed": args.batch_seed,
            "eta": args.eta,
            "count": args.count,
            "as_trained": args.as_trained,
            "device": str(args.device),
            "proxies": {name: r.to_dict() for name, r in results.items()},
        }
        Path(args.json).write_text(json.dumps(out, indent=2) + "\n")
        print(f"wrote {args.json}")
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="optuna-wpca",
        description="Training-free search for compact language models with W-PCA, as an Optuna plugin.",
    )
    sub = parser.add_subparsers(dest="command", required=True)

    rank = sub.add_parser(
        "rank",
        help="correlate zero-cost proxies with a trained benchmark (NAS-Bench-BERT format)",
        description="Build every benchmark architecture, score it with each proxy, and print Kendall tau, "
        "Spearman rho and seconds per 1,000 evaluations. The trivial baselines num_layers and params are "
        "always printed too.",
    )
    rank.add_argument("--benchmark", default=bundled_benchmark_path(),
                      help="BERT_benchmark.json-style file (default: the bundled NAS-Bench-BERT, CC BY 4.0)")
    rank.add_argument("--proxy", action="append", help="proxy to rank (repeatable; 'all' for every registered one; "
                      "default: wpca, vpca, params)")
    rank.add_argument("--json", help="also write the results to this JSON file")
    rank.add_argument("--limit", type=int, default=None, help="use only the first N architectures")
    rank.add_argument("--metric", default="glue", help="score to rank against (default glue)")
    rank.add_argument("--seed", type=int, default=42, help="initialisation seed of every candidate (default 42)")
    rank.add_argument("--eta", type=float, default=0.99, help="PCA variance threshold in (0, 1] (default 0.99)")
    rank.add_argument("--eta-mobilebert", type=float, default=None,
                      help="separate eta for MobileBERT blocks (the reference code uses 0.9)")
    rank.add_argument("--reduce", choices=("sum", "mean"), default="sum",
                      help="V-PCA over layers: sum (paper) or mean (reference code)")
    rank.add_argument("--count", choices=COUNT_CONVENTIONS, default="all", help="parameter-count convention")
    rank.add_argument("--as-trained", action="store_true",
                      help="build what the benchmark's code trained (all SDP attention, first FFN 4 x hidden)")
    rank.add_argument("--device", default="cpu", help="torch device (cpu, cuda, cuda:1, ...)")
    rank.add_argument("--quiet", action="store_true", help="no progress bar")
    _add_batch_options(rank)
    rank.set_defaults(func=_rank)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return args.func(args)
    except (CLIError, ValueError, FileNotFoundError, RuntimeError) as err:
        print(f"optuna-wpca {args.command}: error: {err}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("optuna-wpca: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
