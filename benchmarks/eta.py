"""The W-PCA paper's Appendix D: V-PCA and W-PCA ranking correlation for several eta.

    python benchmarks/eta.py [--limit N] [--json benchmarks/results/eta.json]

One forward pass per architecture gives every layer's covariance spectrum; each eta then reads its
PCA dimensions off the same spectra, so the etas are compared on identical activations.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from scipy.stats import kendalltau, spearmanr
from tqdm import tqdm

from optuna_wpca import dim_from_spectrum, layer_spectra, load_benchmark, text_batch
from optuna_wpca.ranking import benchmark_path

ETAS = (0.9, 0.95, 0.99, 0.999)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--benchmark", default=str(benchmark_path("nas-bench-bert")))
    parser.add_argument("--limit", type=int, default=None)
    parser.add_argument("--batch-size", type=int, default=128)
    parser.add_argument("--seq-len", type=int, default=128)
    parser.add_argument("--seed", type=int, default=42)
    parser.add_argument("--json", default="benchmarks/results/eta.json")
    args = parser.parse_args()
    bench = load_benchmark(args.benchmark)
    batch = text_batch(batch_size=args.batch_size, seq_len=args.seq_len)
    n = len(bench.archs) if args.limit is None else min(args.limit, len(bench.archs))
    vpca = {eta: [] for eta in ETAS}
    wpca = {eta: [] for eta in ETAS}
    for i in tqdm(range(n), desc="spectra", unit="arch"):
        model = bench.build(i, seed=args.seed)
        spectra = layer_spectra(model, batch)
        params = model.num_parameters()
        for eta in ETAS:
            v = sum(dim_from_spectrum(eig, eta) for eig in spectra)
            vpca[eta].append(v)
            wpca[eta].append(params * v)
    truth = bench.scores[:n]
    rows = {}
    print(f"{'eta':>6}{'V-PCA tau':>11}{'V-PCA rho':>11}{'W-PCA tau':>11}{'W-PCA rho':>11}")
    for eta in ETAS:
        rows[str(eta)] = {
            "vpca": {"kendall_tau": kendalltau(vpca[eta], truth)[0], "spearman_rho": spearmanr(vpca[eta], truth)[0]},
            "wpca": {"kendall_tau": kendalltau(wpca[eta], truth)[0], "spearman_rho": spearmanr(wpca[eta], truth)[0]},
        }
        r = rows[str(eta)]
        print(f"{eta:>6}{r['vpca']['kendall_tau']:>11.3f}{r['vpca']['spearman_rho']:>11.3f}"
              f"{r['wpca']['kendall_tau']:>11.3f}{r['wpca']['spearman_rho']:>11.3f}")
    out = {"n": n, "batch": [args.batch_size, args.seq_len], "seed": args.seed, "etas": rows}
    Path(args.json).parent.mkdir(parents=True, exist_ok=True)
    Path(args.json).write_text(json.dumps(out, indent=2) + "\n")
    print(f"wrote {args.json}")


if __name__ == "__main__":
    main()
