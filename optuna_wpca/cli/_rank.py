"""``optuna-wpca rank``: proxies against a trained benchmark."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from optuna_wpca.cli._errors import CLIError


def run_rank(args: argparse.Namespace) -> int:
    """``optuna-wpca rank``: every proxy asked for against a trained benchmark, as a table (and JSON)."""
    from tqdm import tqdm

    from optuna_wpca.ranking import (
        format_budget_table, format_seed_noise, format_table, load_benchmark, rank_proxies, seed_noise,
    )
    from optuna_wpca._text import text_batch
    from optuna_wpca.proxies import check_proxy_options, get_proxy, list_proxies
    from optuna_wpca.spaces import FlexiBERTSpace

    proxies: list[str] = []
    for name in args.proxy or ["wpca", "vpca", "params"]:
        # "all": the zero-cost ones (a one-shot proxy needs its trained supernet, named with --supernet)
        proxies.extend([p for p in list_proxies() if get_proxy(p).zero_cost] if name == "all" else [name])
    known = set(list_proxies())
    for p in proxies:
        if p not in known and "+" not in p:
            raise CLIError(f"unknown proxy {p!r}; choose from: all, {', '.join(sorted(known))}, "
                           "or a combination joined by '+'")
        get_proxy(p)  # a combination naming an unknown part: one line
    if args.reference_size < 2:
        raise CLIError(f"--reference-size must be >= 2 (architectures that set a combination's scale), "
                       f"got {args.reference_size}")
    if args.resamples < 0:
        raise CLIError(f"--resamples must be >= 0, got {args.resamples}")
    shard = None
    if args.shard:
        try:
            k, m = (int(x) for x in args.shard.split("/"))
        except ValueError:
            raise CLIError(f"--shard must look like K/M (e.g. 0/2), got {args.shard!r}") from None
        if not (m >= 1 and 0 <= k < m):
            raise CLIError(f"--shard K/M needs 0 <= K < M, got {args.shard!r}")
        if not args.checkpoint:
            raise CLIError("--shard needs --checkpoint: the shards share one checkpoint file")
        shard = (k, m)
    if args.limit is not None and args.limit < 2:
        raise CLIError(f"--limit must be >= 2 (a ranking needs two architectures), got {args.limit}")
    options = {"eta": args.eta, "eta_mobilebert": args.eta_mobilebert, "reduce": args.reduce}
    if args.supernet:
        options["supernet"] = args.supernet
    if "supernet" in proxies and not args.supernet:
        raise CLIError("--proxy supernet needs --supernet DIR (a supernet saved by optuna_wpca.Supernet.save)")
    check_proxy_options(options)
    space = FlexiBERTSpace(as_trained=True, **({"count": args.count} if args.count else {})) if args.as_trained else None
    bench = load_benchmark(args.benchmark, metric=args.metric, space=space, count=args.count)
    batch = text_batch(
        args.corpus, tokenizer=args.tokenizer, batch_size=args.batch_size, seq_len=args.seq_len, seed=args.batch_seed
    )
    n = len(bench.archs) if args.limit is None else min(args.limit, len(bench.archs))
    with tqdm(total=n, desc="ranking", unit="arch", disable=args.quiet) as bar:
        results = rank_proxies(
            bench, proxies, batch=batch, limit=args.limit, seed=args.seed, device=args.device,
            options=options, progress=bar.update, share=not args.no_share, checkpoint=args.checkpoint,
            shard=shard, reference_size=args.reference_size, reference_seed=args.reference_seed,
            resamples=args.resamples,
        )
    if results is None:
        print(f"shard {args.shard} done; other shards still have entries to score in {args.checkpoint}. "
              "When every shard has finished, the last one (or a run without --shard) prints the table.")
        return 0
    print(format_table(results, bench))
    print()
    print(format_budget_table(results, bench))
    noise = seed_noise(bench) if args.limit is None else None
    if noise:
        print(format_seed_noise(noise, bench.metric))
    if args.json:
        out = {
            "benchmark": str(args.benchmark),
            "metric": bench.metric,
            "lower_is_better": bench.lower_is_better,
            "reading": bench.reading,
            "n": n,
            "batch": list(batch.shape),
            "seed": args.seed,
            "batch_seed": args.batch_seed,
            "eta": args.eta,
            "count": args.count,
            "as_trained": args.as_trained,
            "device": str(args.device),
            "reference": {"size": args.reference_size, "seed": args.reference_seed},
            "proxies": {name: r.to_dict() for name, r in results.items()},
        }
        if noise:
            out["seed_noise"] = noise
        if bench.published:
            out["published"] = {k: {"abs_kendall_tau": t, "abs_spearman_rho": r} for k, (t, r) in bench.published.items()}
        Path(args.json).write_text(json.dumps(out, indent=2) + "\n")
        print(f"wrote {args.json}")
    return 0
